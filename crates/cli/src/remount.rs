//! `mnemofs mount -o remount,… [IMAGE] DIR` (what `mount -o remount,ro DIR` runs
//! through the mount helper): changes the kernel flags of a live mnemofs mount with
//! mount(2)'s `MS_REMOUNT`, then waits until the serving daemon's engine has
//! followed (it watches the mount table: `mnemofs_fuse::remount`), so that the
//! command returns with the engine in the new mode.

use crate::error::{CliError, CliResult};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// Whether a `-o` list asks for a remount.
pub fn wanted(options: Option<&str>) -> bool {
    options.is_some_and(|l| l.split(',').any(|o| o.trim() == "remount"))
}

/// The mount(2) flags a remount passes: the mount's current ones (from its
/// mount-table line: `mnt` its own options, `sb` its super block's) changed by
/// `list` in order. mnemofs's own options (`preset=`, …) and FUSE's cannot change
/// on a live mount and are passed over (mount(8) merges fstab's and the super
/// block's into a remount's list); an unknown option is an error.
pub fn flags_for(mnt: &[String], sb: &[String], list: &str) -> CliResult<libc::c_ulong> {
    let has = |o: &str| mnt.iter().chain(sb).any(|x| x == o);
    let mut f: libc::c_ulong = libc::MS_REMOUNT;
    for (on, flag) in [
        (has("ro"), libc::MS_RDONLY),
        (has("nosuid"), libc::MS_NOSUID),
        (has("nodev"), libc::MS_NODEV),
        (has("noexec"), libc::MS_NOEXEC),
        (has("sync"), libc::MS_SYNCHRONOUS),
        (has("dirsync"), libc::MS_DIRSYNC),
        (has("nodiratime"), libc::MS_NODIRATIME),
        (has("lazytime"), libc::MS_LAZYTIME),
    ] {
        if on {
            f |= flag;
        }
    }
    let atime_mask = libc::MS_NOATIME | libc::MS_RELATIME | libc::MS_STRICTATIME;
    f |= if has("noatime") {
        libc::MS_NOATIME
    } else if has("relatime") {
        libc::MS_RELATIME
    } else {
        libc::MS_STRICTATIME
    };
    for o in list.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        let (set, clear) = match o {
            "remount" | "defaults" => (0, 0),
            "ro" => (libc::MS_RDONLY, 0),
            "rw" => (0, libc::MS_RDONLY),
            "nosuid" => (libc::MS_NOSUID, 0),
            "suid" => (0, libc::MS_NOSUID),
            "nodev" => (libc::MS_NODEV, 0),
            "dev" => (0, libc::MS_NODEV),
            "noexec" => (libc::MS_NOEXEC, 0),
            "exec" => (0, libc::MS_NOEXEC),
            "sync" => (libc::MS_SYNCHRONOUS, 0),
            "async" => (0, libc::MS_SYNCHRONOUS),
            "dirsync" => (libc::MS_DIRSYNC, 0),
            "nodiratime" => (libc::MS_NODIRATIME, 0),
            "diratime" => (0, libc::MS_NODIRATIME),
            "lazytime" => (libc::MS_LAZYTIME, 0),
            "nolazytime" => (0, libc::MS_LAZYTIME),
            "noatime" => (libc::MS_NOATIME, atime_mask),
            "relatime" => (libc::MS_RELATIME, atime_mask),
            "strictatime" | "atime" => (libc::MS_STRICTATIME, atime_mask),
            o if o.contains('=')
                || crate::mount::FSTAB_ONLY.contains(&o)
                || o.starts_with("x-")
                || matches!(o, "default_permissions" | "allow_other") =>
            {
                // mnemofs's own options, fstab's, and FUSE's (mount(8) passes the
                // super block's, `user_id=0,…`, back on a remount) keep the values
                // the mount was made with.
                (0, 0)
            }
            o => {
                return Err(CliError::new(format!(
                    "unknown remount option {o:?} (a remount changes: ro, rw, suid, nosuid, dev, \
                     nodev, exec, noexec, sync, async, dirsync, relatime, noatime, strictatime, \
                     diratime, nodiratime, lazytime)"
                ))
                .with_code(2))
            }
        };
        f = (f & !clear) | set;
    }
    Ok(f)
}

/// Remounts the mnemofs mount at `dir` with `list` (which holds `remount`).
pub fn run(dir: &Path, list: &str) -> CliResult<()> {
    let dir = dir
        .canonicalize()
        .map_err(|e| crate::error::io_error(dir, &e))?;
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| CliError::new(format!("cannot read the mount table: {e}")))?;
    let Some((mnt, sb)) = mnemofs_fuse::remount::options_in(&info, &dir) else {
        return Err(CliError::new(format!(
            "cannot remount {}: it is not a mnemofs mount point",
            dir.display()
        ))
        .with_code(2));
    };
    let flags = flags_for(&mnt, &sb, list)?;
    let read_only = flags & libc::MS_RDONLY != 0;
    let c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| CliError::new("the mount point's path holds a NUL byte"))?;
    let src = CString::new("mnemofs").map_err(|_| CliError::new("NUL"))?;
    // SAFETY: both strings are NUL-terminated and live across the call; a remount
    // takes no file-system type and no data.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            c.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        let why = match e.raw_os_error() {
            Some(libc::EBUSY) if read_only => {
                "a file on it is open for writing, or an unlinked file is still open".to_string()
            }
            Some(libc::EPERM) => "only root may remount".to_string(),
            _ => crate::error::without_os_error_codes(&e.to_string()),
        };
        return Err(CliError::new(format!(
            "cannot remount {} {}: {why}",
            dir.display(),
            if read_only { "read-only" } else { "read-write" }
        )));
    }
    wait_for_engine(&dir, read_only)
}

/// Waits (up to 10 s) until the engine behind `dir` reports `read_only` as the
/// kernel now has it. An engine that does not report it (a cluster client) is not
/// waited for.
fn wait_for_engine(dir: &Path, read_only: bool) -> CliResult<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = crate::stat::stats_of_mountpoint(dir)?;
        match stats.get("read_only").and_then(|v| v.as_bool()) {
            None => return Ok(()),
            Some(now) if now == read_only => return Ok(()),
            Some(_) if Instant::now() >= deadline => {
                return Err(CliError::new(format!(
                    "{}: the kernel remounted it {}, but its daemon has not followed in 10 s",
                    dir.display(),
                    if read_only { "read-only" } else { "read-write" }
                )))
            }
            Some(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split(',').map(str::to_string).collect()
    }

    #[test]
    fn a_remount_starts_from_the_current_flags() {
        let f = flags_for(&v("rw,nosuid,relatime"), &v("rw,user_id=0"), "remount,ro").unwrap();
        assert_eq!(
            f,
            libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_RELATIME
        );
        let f = flags_for(
            &v("ro,nosuid,noatime"),
            &v("ro"),
            "remount,rw,suid,strictatime",
        )
        .unwrap();
        assert_eq!(f, libc::MS_REMOUNT | libc::MS_STRICTATIME);
        // mnemofs's own options and fstab's pass; unknown ones do not.
        let f = flags_for(
            &v("rw,relatime"),
            &v("rw"),
            "remount,preset=pnova,noauto,x-y,user_id=0,allow_other",
        )
        .unwrap();
        assert_eq!(f, libc::MS_REMOUNT | libc::MS_RELATIME);
        assert!(flags_for(&v("rw"), &v("rw"), "remount,bogus").is_err());
    }

    #[test]
    fn remount_is_found_in_a_list() {
        assert!(wanted(Some("remount,ro")));
        assert!(wanted(Some("ro, remount")));
        assert!(!wanted(Some("ro,noatime")));
        assert!(!wanted(None));
    }
}
