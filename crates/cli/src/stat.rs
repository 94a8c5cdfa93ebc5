//! `mnemofs stat`: statistics of a mounted file system (through its stats xattr) or
//! of an image (mounted in-process for the moment).

use crate::error::{fs_error, io_error, is_busy, retry_if_busy, CliError, CliResult};
use crate::report::render_stats;
use clap::Args;
use mnemofs::MountOptions;
use mnemofs_fuse::mountpoint::{mount_entry, strip_os_error};
use mnemofs_fuse::{MNEMOFS_FSTYPE, STATS_XATTR};
use serde_json::Value;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct StatArgs {
    /// A mnemofs mount point, or an image file / PM device that is not mounted
    pub target: PathBuf,
    /// Print the statistics as JSON
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &StatArgs) -> CliResult<()> {
    let path = &args.target;
    if crate::devs::parse(path)?.len() > 1 {
        let stats = stats_of_image(path)?;
        return show(args, &format!("volume {}", path.display()), &stats);
    }
    let meta = std::fs::metadata(path).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOTCONN) => CliError::new(format!(
            "{} is a dead mount (its mnemofs daemon is gone); run `umount {}`",
            path.display(),
            path.display()
        )),
        _ => io_error(path, &e),
    })?;
    let (what, stats) = if meta.is_dir() {
        (
            format!("mounted on {}", path.display()),
            stats_of_mountpoint(path)?,
        )
    } else {
        (format!("image {}", path.display()), stats_of_image(path)?)
    };
    show(args, &what, &stats)
}

fn show(args: &StatArgs, what: &str, stats: &Value) -> CliResult<()> {
    if args.json {
        let text = serde_json::to_string_pretty(stats)
            .map_err(|e| CliError::new(format!("cannot encode the statistics: {e}")))?;
        crate::output::emit(&text);
    } else {
        crate::output::emit(&render_stats(what, stats));
    }
    Ok(())
}

fn not_a_mountpoint(path: &Path) -> CliError {
    let canon = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let hint = match mount_entry(&canon) {
        Some(m) if m.fstype == MNEMOFS_FSTYPE => String::new(),
        Some(m) => format!(" (it is a {} mount)", m.fstype),
        None => String::new(),
    };
    CliError::new(format!(
        "{} is a directory but not a mnemofs mount point{hint}; give a mount point or an image",
        path.display()
    ))
}

/// Reads the stats xattr of a mount point's root directory.
pub(crate) fn stats_of_mountpoint(path: &Path) -> CliResult<Value> {
    let cpath = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| CliError::new("path contains a NUL byte"))?;
    let cname = CString::new(STATS_XATTR).map_err(|_| CliError::new("bad xattr name"))?;
    // The value changes as counters move: size it, read it, retry if it grew.
    for _ in 0..8 {
        // SAFETY: both strings are NUL-terminated; a null buffer with size 0 asks
        // only for the value's size.
        let len =
            unsafe { libc::getxattr(cpath.as_ptr(), cname.as_ptr(), std::ptr::null_mut(), 0) };
        if len < 0 {
            return Err(xattr_error(path, std::io::Error::last_os_error()));
        }
        let mut buf = vec![0u8; len as usize + 4096];
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
        let got = unsafe {
            libc::getxattr(
                cpath.as_ptr(),
                cname.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if got < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ERANGE) {
                continue;
            }
            return Err(xattr_error(path, e));
        }
        buf.truncate(got as usize);
        return serde_json::from_slice(&buf).map_err(|e| {
            CliError::new(format!(
                "{}: the statistics are not valid JSON: {e}",
                path.display()
            ))
        });
    }
    Err(CliError::new(format!(
        "{}: the statistics kept changing size; try again",
        path.display()
    )))
}

fn xattr_error(path: &Path, e: std::io::Error) -> CliError {
    match e.raw_os_error() {
        Some(libc::ENODATA) | Some(libc::EOPNOTSUPP) => not_a_mountpoint(path),
        Some(libc::ENOTCONN) => CliError::new(format!(
            "{} is a dead mount (its mnemofs daemon is gone); run `umount {}`",
            path.display(),
            path.display()
        )),
        _ => CliError::new(format!("{}: {}", path.display(), strip_os_error(&e))),
    }
}

/// Mounts an image in-process (exclusively), takes its statistics, unmounts it.
fn stats_of_image(path: &Path) -> CliResult<Value> {
    let opts = MountOptions {
        exclusive: true,
        ..MountOptions::default()
    };
    let specs = crate::devs::parse(path)?;
    let fs = retry_if_busy(|| mnemofs::mount_devices(&specs, &opts)).map_err(|e| match e {
        e if is_busy(&e) => CliError::new(format!(
            "{} is mounted (in use by another mnemofs process); pass its mount point instead",
            path.display()
        )),
        e => fs_error(path, &e),
    })?;
    let stats = fs.stats();
    fs.unmount().map_err(|e| fs_error(path, &e))?;
    serde_json::to_value(&stats)
        .map_err(|e| CliError::new(format!("cannot encode the statistics: {e}")))
}
