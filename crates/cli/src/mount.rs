//! `mnemofs mount`.
//!
//! Without `--foreground` the command returns once the file system is mounted and
//! keeps serving in the background. It does not fork (forking after threads exist is
//! unsafe); it starts itself again as a daemon, `mount --foreground --ready-fd N`,
//! in a new session with its output in a log file, and waits on a pipe: the daemon
//! writes `R` once the mount is live, or `E` and the error message, or dies (end of
//! file).

use crate::error::{fs_error, retry_if_busy, CliError, CliResult};
use crate::modes;
use crate::output::note;
use clap::Args;
use mnemofs_fuse::{check_mountpoint, BlockedSignals, MountConfig, STOP_SIGNALS};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Args, Debug)]
pub struct MountArgs {
    /// Image file or PM device holding a mnemofs; the devices of a volume
    /// comma-separated, in any order (`a.img,b.img@1`: `@NODE` overrides a device's
    /// NUMA node). With --mds: the mount point, alone
    #[arg(value_name = "IMAGE")]
    pub image: PathBuf,
    /// Empty directory to mount on
    pub mountpoint: Option<PathBuf>,
    /// Mount a cluster client of the metadata server at ADDR (HOST:PORT) instead of
    /// a local volume: `mount --mds ADDR --data DEVS MOUNTPOINT` (docs/CLUSTER.md)
    #[arg(long, value_name = "ADDR", requires = "data")]
    pub mds: Option<String>,
    /// With --mds: the volume's devices as this host maps them, comma-separated
    #[arg(long, value_name = "DEVS", requires = "mds")]
    pub data: Option<PathBuf>,
    /// With --mds: when a write's commit is sent: sync (persist the data, commit,
    /// wait for the reply, return) or delayed (persist the data, queue the commit,
    /// return; background threads send compound commits; fsync waits for them)
    #[arg(long, value_name = "MODE", default_value = "sync")]
    pub commit: String,
    /// With --commit delayed: the longest a commit thread holds queued files back
    /// to fill a compound commit (e.g. 500us, 2ms; default 2ms). What another
    /// client sees lags a write by this plus the commit's round trip and queueing
    #[arg(long = "commit-delay", value_name = "TIME", value_parser = commit_delay_arg)]
    pub commit_delay: Option<std::time::Duration>,
    /// Serve in the foreground until unmounted (Ctrl-C unmounts); default: return
    /// once mounted and serve in the background
    #[arg(long, short)]
    pub foreground: bool,
    #[arg(long, value_name = "P", default_value = mnemofs::DEFAULT_PRESET, help = modes::preset_help())]
    pub preset: String,
    #[arg(long = "read-cache", value_name = "MODE", help = modes::read_cache_help())]
    pub read_cache: Option<String>,
    /// The medium the `auto` modes go by: dram or pm [default: told at mount: pm
    /// on a DAX device measured slower than DRAM, else dram]
    #[arg(long, value_name = "M")]
    pub medium: Option<String>,
    /// DRAM budget of the read cache (e.g. 256M) [default: 256M]
    #[arg(long = "read-cache-size", value_name = "SIZE", value_parser = crate::size::size_arg)]
    pub read_cache_size: Option<u64>,
    /// FUSE event-loop threads (0 = one per CPU)
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub threads: usize,
    #[arg(long, value_name = "L", help = modes::lock_help())]
    pub lock: Option<String>,
    #[arg(long = "small-write", value_name = "W", help = modes::small_write_help())]
    pub small_write: Option<String>,
    #[arg(long = "desc-store", value_name = "HOW", value_enum, default_value_t = modes::DescStore::Auto, hide_possible_values = true, help = modes::DESC_STORE_HELP)]
    pub desc_store: modes::DescStore,
    /// Placement over the devices of a volume: local, interleave, single
    /// [default: the preset's; `full`: local]
    #[arg(long, value_name = "P")]
    pub placement: Option<String>,
    /// NUMA topology: `N` emulated nodes, `nodes=N;cpus=L/L/..;dist=R/R/..`, or
    /// `sysfs:PATH` [default: this machine's, from /sys/devices/system/node]
    #[arg(long, value_name = "SPEC")]
    pub topology: Option<String>,
    /// Go through the kernel page cache instead of direct I/O
    #[arg(long)]
    pub no_direct_io: bool,
    /// Read-only opens read through the engine too, not the kernel page cache
    /// (by default they use the page cache, kept coherent with every write)
    #[arg(long)]
    pub no_page_cache_reads: bool,
    /// Mount options, comma-separated, as mount(8) and fstab give them: ro, rw, dev
    /// (default), nodev, suid (default), nosuid, exec (default), noexec, sync,
    /// dirsync, relatime (default), noatime, strictatime; and mnemofs's own
    /// preset=P, lock=L, small-write=W, read-cache=MODE, read-cache-size=SIZE,
    /// threads=N
    #[arg(short = 'o', long = "options", value_name = "OPTS")]
    pub options: Option<String>,
    /// Mount read-only (as -o ro): the kernel refuses changes, reads update no atime
    #[arg(long)]
    pub read_only: bool,
    /// (internal) pipe to report readiness on, from the parent of a background mount
    #[arg(long, hide = true, value_name = "FD")]
    pub ready_fd: Option<i32>,
}

/// The mount point while mounted (for the panic hook).
pub static MOUNTED_AT: OnceLock<PathBuf> = OnceLock::new();

/// The readiness pipe of a background mount until it is used.
static READY_PIPE: Mutex<Option<File>> = Mutex::new(None);

/// Tells the waiting parent, if any, that the mount failed. Used by the panic hook.
pub fn report_failure_to_parent(msg: &str) {
    if let Ok(mut guard) = READY_PIPE.try_lock() {
        if let Some(mut pipe) = guard.take() {
            let _ = pipe.write_all(format!("E{msg}").as_bytes());
        }
    }
}

fn report_ready_to_parent() -> bool {
    let pipe = match READY_PIPE.lock() {
        Ok(mut g) => g.take(),
        Err(poisoned) => poisoned.into_inner().take(),
    };
    match pipe {
        Some(mut p) => {
            let _ = p.write_all(b"R");
            true
        }
        None => false,
    }
}

/// What `-o` says, as `mount -t fuse.mnemofs` and /etc/fstab pass it.
#[derive(Default, Debug)]
pub struct MountOpts {
    /// Kernel flags (`ro`, `dev`, `suid`, `noexec`, `sync`, `dirsync`).
    pub flags: mnemofs_fuse::KernelFlags,
    /// `relatime` / `noatime` / `strictatime`.
    pub atime: Option<mnemofs::AtimeMode>,
    /// mnemofs's own: `preset=`, `lock=`, `small-write=`, `read-cache=`,
    /// `read-cache-size=`, `threads=`.
    pub preset: Option<String>,
    pub lock: Option<String>,
    pub small_write: Option<String>,
    pub read_cache: Option<String>,
    pub medium: Option<String>,
    pub read_cache_size: Option<u64>,
    pub threads: Option<usize>,
    /// `noacl`: the kernel neither enforces nor shows POSIX ACLs.
    pub noacl: bool,
}

/// Options only mount(8) and fstab act on, accepted and ignored here.
pub(crate) const FSTAB_ONLY: &[&str] = &[
    "defaults",
    "auto",
    "noauto",
    "user",
    "nouser",
    "users",
    "owner",
    "group",
    "nofail",
    "_netdev",
    "async",
    "atime",
    "nodiratime",
    "diratime",
    "lazytime",
    "nolazytime",
    "loud",
    "silent",
    "norecovery",
];

/// Parses a comma-separated `-o` list; an unknown option is a usage error.
pub fn parse_options(list: &str) -> CliResult<MountOpts> {
    let mut m = MountOpts::default();
    let bad = |o: &str| {
        CliError::new(format!(
            "unknown mount option {o:?} (known: ro, rw, dev, nodev, suid, nosuid, exec, \
             noexec, sync, dirsync, relatime, noatime, strictatime, acl, noacl, preset=, lock=, \
             small-write=, read-cache=, read-cache-size=, threads=)"
        ))
        .with_code(2)
    };
    for o in list.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        if let Some((k, v)) = o.split_once('=') {
            match k {
                "preset" => m.preset = Some(v.to_string()),
                "lock" => m.lock = Some(v.to_string()),
                "small-write" | "small_write" => m.small_write = Some(v.to_string()),
                "read-cache" | "read_cache" => m.read_cache = Some(v.to_string()),
                "medium" => m.medium = Some(v.to_string()),
                "read-cache-size" | "read_cache_size" => {
                    m.read_cache_size = Some(crate::size::parse_size(v).map_err(|_| bad(o))?)
                }
                "threads" => m.threads = Some(v.parse().map_err(|_| bad(o))?),
                k if k.starts_with("x-") || k == "comment" => {}
                _ => return Err(bad(o)),
            }
            continue;
        }
        match o {
            "ro" => m.flags.read_only = true,
            "rw" => m.flags.read_only = false,
            "dev" => m.flags.dev = true,
            "nodev" => m.flags.dev = false,
            "suid" => m.flags.suid = true,
            "nosuid" => m.flags.suid = false,
            "exec" => m.flags.exec = true,
            "noexec" => m.flags.exec = false,
            "sync" => m.flags.sync = true,
            "dirsync" => m.flags.dirsync = true,
            "acl" => m.noacl = false,
            "noacl" => m.noacl = true,
            o if o.starts_with("x-") || FSTAB_ONLY.contains(&o) => {}
            o => match mnemofs::AtimeMode::by_name(o) {
                Some(a) => m.atime = Some(a),
                None => return Err(bad(o)),
            },
        }
    }
    Ok(m)
}

impl MountArgs {
    /// The volume's devices (a local mount) and the mount point: `IMAGE
    /// MOUNTPOINT`, or with --mds the one positional, the mount point.
    fn target(&self) -> CliResult<(Option<&Path>, &Path)> {
        match (&self.mds, &self.mountpoint) {
            (None, Some(m)) => Ok((Some(&self.image), m)),
            (None, None) => Err(CliError::new(
                "give the image and the mount point: mnemofs mount IMAGE MOUNTPOINT",
            )
            .with_code(2)),
            (Some(_), None) => Ok((None, &self.image)),
            (Some(_), Some(_)) => Err(CliError::new(
                "with --mds the devices are given by --data: mnemofs mount --mds ADDR --data DEVS MOUNTPOINT",
            )
            .with_code(2)),
        }
    }
}

/// `--commit-delay`: 0 to 1 s, in us, ms or s.
pub(crate) fn commit_delay_arg(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let bad = || format!("invalid --commit-delay '{s}' (examples: 500us, 2ms; at most 1s)");
    let (num, scale) = if let Some(n) = t.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else {
        return Err(bad());
    };
    let v: f64 = num.trim().parse().map_err(|_| bad())?;
    if !v.is_finite() || v < 0.0 || v * scale > 1.0 {
        return Err(bad());
    }
    Ok(std::time::Duration::from_secs_f64(v * scale))
}

/// The delayed-commit settings `--commit-delay` gives.
pub(crate) fn delayed_config(d: Option<std::time::Duration>) -> mnemofs_cluster::DelayedConfig {
    let mut c = mnemofs_cluster::DelayedConfig::default();
    if let Some(d) = d {
        c.gather = d;
    }
    c
}

/// The commit mode `--commit` names.
fn commit_mode(s: &str) -> CliResult<mnemofs_cluster::CommitMode> {
    match s {
        "sync" => Ok(mnemofs_cluster::CommitMode::Sync),
        "delayed" => Ok(mnemofs_cluster::CommitMode::Delayed),
        other => Err(CliError::new(format!(
            "--commit {other}: unknown commit mode (sync, delayed)"
        ))
        .with_code(2)),
    }
}

pub fn run(args: &MountArgs) -> CliResult<()> {
    if crate::remount::wanted(args.options.as_deref()) {
        // `mnemofs mount -o remount,ro [IMAGE] DIR`: the mount point is the last
        // positional.
        let dir = args.mountpoint.as_deref().unwrap_or(&args.image);
        return crate::remount::run(dir, args.options.as_deref().unwrap_or(""));
    }
    let (image, mountpoint) = args.target()?;
    commit_mode(&args.commit)?;
    let o = parse_options(args.options.as_deref().unwrap_or(""))?;
    let mut opts = modes::resolve_with(
        o.preset.as_deref().unwrap_or(&args.preset),
        o.lock.as_deref().or(args.lock.as_deref()),
        o.small_write.as_deref().or(args.small_write.as_deref()),
        o.read_cache.as_deref().or(args.read_cache.as_deref()),
    )?;
    if let Some(b) = o.read_cache_size.or(args.read_cache_size) {
        opts.read_cache_bytes = b;
    }
    if let Some(m) = o.medium.as_deref().or(args.medium.as_deref()) {
        opts.medium = Some(modes::medium(m)?);
    }
    opts.lawn_desc_store = args.desc_store.option();
    if let Some(p) = &args.placement {
        opts.placement = modes::placement(p)?;
    }
    if let Some(t) = &args.topology {
        opts.topology = Some(
            t.parse::<pm::Topology>()
                .map_err(|e| CliError::new(format!("--topology: {e}")).with_code(2))?,
        );
    }
    if let Some(a) = o.atime {
        opts.atime = a;
    }
    if args.foreground || args.ready_fd.is_some() {
        let res = run_foreground(args, opts);
        if let Err(e) = &res {
            report_failure_to_parent(&e.msg);
        }
        return res;
    }
    let image = match image {
        Some(i) => Some(crate::devs::canonical(i)?),
        None => None,
    };
    let mountpoint = check_mountpoint(mountpoint).map_err(|e| CliError::new(e.0))?;
    // A second mount of a mounted image is another mount of the same file system,
    // as Linux gives for a block device mounted twice.
    if let Some(existing) = image.as_deref().and_then(mounted_image) {
        return bind_second_mount(&existing, &mountpoint, &o);
    }
    spawn_daemon(args, image.as_deref(), &mountpoint)
}

/// Where `image` (canonical) is mounted now by a mnemofs daemon of this host: the
/// mount table's source of a `fuse.mnemofs` mount names it.
fn mounted_image(image: &Path) -> Option<PathBuf> {
    let want = image.to_str()?;
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    table.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mut r = right.split(' ');
        let (fstype, source) = (r.next()?, r.next()?);
        (fstype == "fuse.mnemofs" && unescape(source) == want)
            .then(|| PathBuf::from(unescape(left.split(' ').nth(4).unwrap_or(""))))
            .filter(|p| !p.as_os_str().is_empty())
    })
}

/// A mount table field with its `\ooo` escapes (space, tab, newline, backslash)
/// undone.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                let v = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Mounts the file system mounted at `existing` on `dir` too (a bind mount of it)
/// with the kernel flags `o` asks for; mnemofs's own options are the first mount's.
fn bind_second_mount(existing: &Path, dir: &Path, o: &MountOpts) -> CliResult<()> {
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
            .map_err(|_| CliError::new(format!("{}: a path with a NUL byte", p.display())))
    };
    let (src, dst) = (c(existing)?, c(dir)?);
    let fail = |what: &str| {
        CliError::new(format!(
            "cannot mount {} a second time on {}: {what}: {}",
            existing.display(),
            dir.display(),
            std::io::Error::last_os_error()
        ))
    };
    // SAFETY: valid NUL-terminated paths; no file-system type or data.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            dst.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(fail("bind mount"));
    }
    let f = o.flags;
    let mut flags = libc::MS_REMOUNT | libc::MS_BIND;
    for (on, bit) in [
        (f.read_only, libc::MS_RDONLY),
        (!f.suid, libc::MS_NOSUID),
        (!f.dev, libc::MS_NODEV),
        (!f.exec, libc::MS_NOEXEC),
        (
            o.atime == Some(mnemofs::AtimeMode::Noatime),
            libc::MS_NOATIME,
        ),
        (
            o.atime == Some(mnemofs::AtimeMode::Strictatime),
            libc::MS_STRICTATIME,
        ),
    ] {
        if on {
            flags |= bit;
        }
    }
    // SAFETY: a valid NUL-terminated path; no source, type or data.
    let r = unsafe {
        libc::mount(
            std::ptr::null(),
            dst.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    if r != 0 {
        let e = fail("its flags");
        // SAFETY: a valid NUL-terminated path.
        unsafe { libc::umount2(dst.as_ptr(), libc::MNT_DETACH) };
        return Err(e);
    }
    Ok(())
}

fn run_foreground(args: &MountArgs, opts: mnemofs::MountOptions) -> CliResult<()> {
    if let Some(fd) = args.ready_fd {
        let pipe = take_ready_fd(fd)?;
        *READY_PIPE.lock().unwrap_or_else(|p| p.into_inner()) = Some(pipe);
        // Leave the parent's session and terminal. Fails only for a process group
        // leader, which a spawned child is not.
        // SAFETY: setsid has no memory-safety preconditions.
        unsafe { libc::setsid() };
    }
    // Before the engine starts any thread, so that every thread inherits the mask.
    let _blocked = BlockedSignals::block(&STOP_SIGNALS)
        .map_err(|e| CliError::new(format!("cannot block signals: {e}")))?;
    // Checked before the engine mount so that a bad mount point costs no recovery.
    let (image, mountpoint) = args.target()?;
    let mountpoint = check_mountpoint(mountpoint).map_err(|e| CliError::new(e.0))?;
    let o = parse_options(args.options.as_deref().unwrap_or(""))?;
    let mut flags = o.flags;
    flags.read_only |= args.read_only;
    let mut cfg = MountConfig {
        threads: o.threads.unwrap_or(args.threads),
        direct_io: !args.no_direct_io,
        page_cache_reads: !args.no_page_cache_reads,
        flags,
        // A read-only mount updates no atime (the engine goes read-only as the
        // mount is made: mnemofs_fuse::remount); a remount to read-write brings
        // this mode back.
        atime: opts.atime,
        posix_acl: !o.noacl,
        ..MountConfig::default()
    };
    match (image, &args.mds, &args.data) {
        (Some(image), _, _) => {
            let specs = crate::devs::parse(image)?;
            let fs = retry_if_busy(|| mnemofs::mount_devices(&specs, &opts))
                .map_err(|e| fs_error(image, &e))?;
            // The mount table names the image, so findmnt, df and `umount IMAGE`
            // find it.
            cfg.fsname = crate::devs::canonical(image)
                .unwrap_or_else(|_| image.to_path_buf())
                .display()
                .to_string();
            serve(fs, args, &mountpoint, &cfg, &image.display().to_string())
        }
        (None, Some(mds), Some(data)) => {
            let client = mnemofs_cluster::Client::connect(&mnemofs_cluster::ClientConfig {
                mds: mds.clone(),
                data: crate::devs::parse(data)?,
                commit: commit_mode(&args.commit)?,
                delayed: delayed_config(args.commit_delay),
                subdir: None,
            })
            .map_err(|e| fs_error(data, &e))?;
            cfg.fsname = format!("mnemofs-client:{mds}");
            // Another client's writes do not reach this kernel's page cache: every
            // read goes to the client (docs/CLUSTER.md, "Semantics").
            cfg.page_cache_reads = false;
            serve(client, args, &mountpoint, &cfg, &format!("client of {mds}"))
        }
        _ => Err(CliError::new("--mds needs --data").with_code(2)),
    }
}

/// Serves `fs` on `mountpoint` until it is unmounted.
fn serve<E: mnemofs::FileSystem + 'static>(
    fs: E,
    args: &MountArgs,
    mountpoint: &Path,
    cfg: &MountConfig,
    what: &str,
) -> CliResult<()> {
    let daemon = args.ready_fd.is_some();
    let served = mnemofs_fuse::mount_and_serve_with(Arc::new(fs), mountpoint, cfg, |mp| {
        let _ = MOUNTED_AT.set(mp.to_path_buf());
        start_guard(mp);
        report_ready_to_parent();
        if daemon {
            note(&format!(
                "mnemofs: {what} mounted on {} (pid {}, {} threads)",
                mp.display(),
                std::process::id(),
                cfg.effective_threads()
            ));
        } else {
            note(&format!(
                "mnemofs: {what} mounted on {}; Ctrl-C or `umount {}` unmounts it",
                mp.display(),
                mp.display()
            ));
        }
    });
    stop_guard();
    served.map_err(|e| CliError::new(e.to_string()))?;
    note(&format!(
        "mnemofs: {} unmounted cleanly",
        mountpoint.display()
    ));
    Ok(())
}

/// Starts `mnemofs guard` for this daemon and mount point (crate::guard): if the
/// daemon dies mounted, it aborts the connection and detaches the mount. Best
/// effort: without it a dead daemon's mount needs `umount`, as before.
fn start_guard(mp: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(me) = std::env::current_exe() else {
        return;
    };
    // The connection: the minor number of the mount's device (glibc's gnu_dev_minor).
    let Ok(dev) = std::fs::metadata(mp).map(|m| m.dev()) else {
        return;
    };
    let conn = (dev & 0xff) | ((dev >> 12) & !0xff);
    let started = std::process::Command::new(me)
        .arg("guard")
        .arg("--pid")
        .arg(std::process::id().to_string())
        .arg("--conn")
        .arg(conn.to_string())
        .arg("--")
        .arg(mp)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn();
    match started {
        Ok(child) => *GUARD.lock().unwrap_or_else(|e| e.into_inner()) = Some(child),
        Err(e) => note(&format!("mnemofs: cannot start the mount's guard: {e}")),
    }
}

/// The mount's guard, while it runs.
static GUARD: std::sync::Mutex<Option<std::process::Child>> = std::sync::Mutex::new(None);

/// Stops the guard: the daemon ends its mount itself, and the guard must not act on
/// a later mount of the same mount point (connection numbers are reused).
fn stop_guard() {
    if let Some(mut g) = GUARD.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let _ = g.kill();
        let _ = g.wait();
    }
}

/// Takes ownership of the readiness pipe the parent passed.
fn take_ready_fd(fd: i32) -> CliResult<File> {
    if fd < 3 {
        return Err(CliError::new(format!("--ready-fd {fd}: not a pipe")));
    }
    // SAFETY: F_GETFD only reads the descriptor's flags; a closed fd yields EBADF.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(CliError::new(format!(
            "--ready-fd {fd}: not an open file descriptor"
        )));
    }
    // Not inherited by anything this process starts (e.g. fusermount3).
    // SAFETY: F_SETFD on an open descriptor only changes its flags.
    unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
    // SAFETY: the parent passed this open descriptor (checked above) for this
    // process alone; nothing else here owns or closes it.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Starts the background daemon and waits until it has mounted (or failed).
fn spawn_daemon(args: &MountArgs, image: Option<&Path>, mountpoint: &Path) -> CliResult<()> {
    let (mut reader, writer) =
        std::io::pipe().map_err(|e| CliError::new(format!("cannot create a pipe: {e}")))?;
    // The pipe is close-on-exec; the daemon gets a duplicate without that flag,
    // numbered above the standard descriptors.
    // SAFETY: F_DUPFD duplicates an open descriptor; the result is checked.
    let dup = unsafe { libc::fcntl(writer.as_raw_fd(), libc::F_DUPFD, 3) };
    if dup < 0 {
        return Err(CliError::new(format!(
            "cannot duplicate a pipe: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: `dup` is a fresh descriptor that nothing else owns.
    let child_end = unsafe { OwnedFd::from_raw_fd(dup) };

    let exe = std::env::current_exe()
        .map_err(|e| CliError::new(format!("cannot find the mnemofs executable: {e}")))?;
    let mut cmd = Command::new(exe);
    cmd.arg("mount")
        .arg("--foreground")
        .arg("--ready-fd")
        .arg(child_end.as_raw_fd().to_string())
        .arg("--preset")
        .arg(&args.preset)
        .arg("--threads")
        .arg(args.threads.to_string());
    if let Some(l) = &args.lock {
        cmd.arg("--lock").arg(l);
    }
    if let Some(w) = &args.small_write {
        cmd.arg("--small-write").arg(w);
    }
    if let Some(r) = &args.read_cache {
        cmd.arg("--read-cache").arg(r);
    }
    if let Some(m) = &args.medium {
        cmd.arg("--medium").arg(m);
    }
    if let Some(b) = args.read_cache_size {
        cmd.arg("--read-cache-size").arg(b.to_string());
    }
    cmd.arg("--desc-store").arg(args.desc_store.name());
    if let Some(p) = &args.placement {
        cmd.arg("--placement").arg(p);
    }
    if let Some(t) = &args.topology {
        cmd.arg("--topology").arg(t);
    }
    if args.no_direct_io {
        cmd.arg("--no-direct-io");
    }
    if args.no_page_cache_reads {
        cmd.arg("--no-page-cache-reads");
    }
    if let Some(o) = &args.options {
        cmd.arg("-o").arg(o);
    }
    if args.read_only {
        cmd.arg("--read-only");
    }
    match image {
        Some(image) => {
            cmd.arg("--").arg(image).arg(mountpoint);
        }
        None => {
            if let (Some(m), Some(d)) = (&args.mds, &args.data) {
                cmd.arg("--mds")
                    .arg(m)
                    .arg("--data")
                    .arg(crate::devs::canonical(d)?);
            }
            cmd.arg("--commit").arg(&args.commit);
            if let Some(d) = args.commit_delay {
                cmd.arg("--commit-delay")
                    .arg(format!("{}us", d.as_nanos() as f64 / 1e3));
            }
            cmd.arg("--").arg(mountpoint);
        }
    }
    cmd.stdin(Stdio::null()).current_dir("/");
    let log = open_log(mountpoint);
    match &log {
        Some((_, f)) => match (f.try_clone(), f.try_clone()) {
            (Ok(a), Ok(b)) => {
                cmd.stdout(a).stderr(b);
            }
            _ => {
                cmd.stdout(Stdio::null()).stderr(Stdio::null());
            }
        },
        None => {
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| CliError::new(format!("cannot start the mount daemon: {e}")))?;
    drop(child_end);
    drop(writer);

    let mut first = [0u8; 1];
    let got = loop {
        match reader.read(&mut first) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => break r,
        }
    };
    match got {
        Ok(1) if first[0] == b'R' => Ok(()),
        Ok(1) if first[0] == b'E' => {
            let mut rest = Vec::new();
            let _ = reader.read_to_end(&mut rest);
            // The daemon exits with its error's status (2: the image is unusable).
            let code = match child.wait() {
                Ok(s) => s.code().filter(|&c| c > 0).unwrap_or(1),
                Err(_) => 1,
            };
            let msg = String::from_utf8_lossy(&rest).into_owned();
            Err(CliError::new(if msg.trim().is_empty() {
                "the mount daemon failed".to_string()
            } else {
                msg
            })
            .with_code(code))
        }
        _ => {
            let status = match child.wait() {
                Ok(s) => s.to_string(),
                Err(e) => e.to_string(),
            };
            let hint = log
                .as_ref()
                .map(|(p, _)| format!("; see {}", p.display()))
                .unwrap_or_default();
            Err(CliError::new(format!(
                "the mount daemon ended ({status}) before {} was mounted{hint}",
                mountpoint.display()
            )))
        }
    }
}

/// Log file of a background mount: /run/mnemofs/<mount point>.log when writable,
/// else in the temporary directory.
fn open_log(mountpoint: &Path) -> Option<(PathBuf, File)> {
    let name = log_name(mountpoint);
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let dirs = [
        PathBuf::from("/run/mnemofs"),
        std::env::temp_dir().join(format!("mnemofs-{uid}")),
    ];
    for dir in dirs {
        if std::fs::create_dir_all(&dir).is_err() {
            continue;
        }
        let path = dir.join(&name);
        if let Ok(f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
        {
            return Some((path, f));
        }
    }
    None
}

/// `/tmp/my mnt` -> `tmp_my_mnt.log`.
fn log_name(mountpoint: &Path) -> String {
    let s: String = mountpoint
        .to_string_lossy()
        .trim_matches('/')
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "root.log".to_string()
    } else {
        format!("{s}.log")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_delays_parse_with_units_and_bounds() {
        use std::time::Duration;
        assert_eq!(commit_delay_arg("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(commit_delay_arg("2ms"), Ok(Duration::from_millis(2)));
        assert_eq!(commit_delay_arg("0.5s"), Ok(Duration::from_millis(500)));
        assert_eq!(commit_delay_arg("0ms"), Ok(Duration::ZERO));
        for bad in ["", "5", "2s", "-1ms", "nanms", "1e9us", "2 min"] {
            assert!(commit_delay_arg(bad).is_err(), "{bad} accepted");
        }
        assert_eq!(delayed_config(None).gather, Duration::from_millis(2));
        assert_eq!(
            delayed_config(Some(Duration::from_micros(300))).gather,
            Duration::from_micros(300)
        );
    }

    #[test]
    fn log_names() {
        assert_eq!(log_name(Path::new("/tmp/m")), "tmp_m.log");
        assert_eq!(log_name(Path::new("/mnt/my dir/x")), "mnt_my_dir_x.log");
        assert_eq!(log_name(Path::new("/")), "root.log");
    }

    #[test]
    fn ready_fd_must_be_open() {
        assert!(take_ready_fd(1).is_err());
        assert!(take_ready_fd(999_999)
            .unwrap_err()
            .msg
            .contains("not an open"));
    }
}
