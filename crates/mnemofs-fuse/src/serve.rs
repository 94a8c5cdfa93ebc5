//! Mounting, serving with several event-loop threads, and a clean stop.

use crate::adapter::{AdapterOptions, MnemoFuse, DEFAULT_ATTR_TTL, DEFAULT_ENTRY_TTL};
use crate::mountpoint::{check_mountpoint, path_cstring, strip_os_error, MountpointError};
use crate::session::Handshake;
use crate::signals::{signal_name, BlockedSignals, SigSet, STOP_SIGNALS};
use fuser::{MountOption, SessionACL, SessionUnmounter};
use mnemofs::{FileSystem, FsError};
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// How to mount and serve.
#[derive(Clone, Debug)]
pub struct MountConfig {
    /// FUSE event-loop threads (each with its own cloned `/dev/fuse` descriptor);
    /// 0 = one per CPU.
    pub threads: usize,
    /// Direct I/O: no page cache, every read and write reaches the engine.
    pub direct_io: bool,
    /// With `direct_io`: read-only opens read through the kernel page cache, kept
    /// coherent with every write (`pagecache`).
    pub page_cache_reads: bool,
    /// Let users other than the mounting one in (`allow_other`; for non-root users
    /// this needs `user_allow_other` in /etc/fuse.conf).
    pub allow_other: bool,
    /// Source name in the mount table.
    pub fsname: String,
    /// How long the kernel may cache a name lookup.
    pub entry_ttl: Duration,
    /// How long the kernel may cache attributes.
    pub attr_ttl: Duration,
    /// Block SIGINT, SIGTERM and SIGHUP in the serving threads and unmount when one
    /// arrives. Off: the caller stops the file system by unmounting it.
    pub handle_signals: bool,
    /// Kernel mount flags (`ro`, `dev`, `suid`, `noexec`, `sync`, `dirsync`).
    pub flags: KernelFlags,
    /// When reads update atime (the engine's mode; `noatime` also goes to the
    /// kernel's mount table). A remount that changes the table's atime flag
    /// changes the engine's mode.
    pub atime: mnemofs::AtimeMode,
    /// POSIX ACLs: the kernel enforces them and shows them as xattrs
    /// (`FUSE_POSIX_ACL`); off (`noacl`), permissions are the mode bits alone and
    /// the ACL names are refused (EOPNOTSUPP), as on ext4 mounted `noacl`.
    pub posix_acl: bool,
}

/// Kernel flags of a mount. The default is Linux's for a file system, `rw,dev,suid,exec`
/// (mount(8) passes a helper only the flags that differ from it, so fstab's defaults
/// must mean the same here); an image from elsewhere is mounted `-o nosuid,nodev` as
/// any removable medium is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelFlags {
    /// `ro`: the kernel refuses every change.
    pub read_only: bool,
    /// `dev`: device files on it can be opened as devices.
    pub dev: bool,
    /// `suid`: set-user-ID and set-group-ID bits take effect on exec.
    pub suid: bool,
    /// `exec`: programs on it may run.
    pub exec: bool,
    /// `sync`: writes are synchronous (every write is anyway).
    pub sync: bool,
    /// `dirsync`: directory changes are synchronous (every change is anyway).
    pub dirsync: bool,
}

impl Default for KernelFlags {
    fn default() -> Self {
        KernelFlags {
            read_only: false,
            dev: true,
            suid: true,
            exec: true,
            sync: false,
            dirsync: false,
        }
    }
}

impl Default for MountConfig {
    fn default() -> Self {
        MountConfig {
            threads: 0,
            direct_io: true,
            page_cache_reads: true,
            // SAFETY: geteuid has no preconditions and cannot fail.
            allow_other: unsafe { libc::geteuid() } == 0,
            fsname: "mnemofs".to_string(),
            entry_ttl: DEFAULT_ENTRY_TTL,
            attr_ttl: DEFAULT_ATTR_TTL,
            handle_signals: true,
            flags: KernelFlags::default(),
            atime: mnemofs::AtimeMode::Relatime,
            posix_acl: true,
        }
    }
}

impl MountConfig {
    /// Event-loop threads to run: `threads`, or one per CPU when 0
    /// ([`mnemofs::HostChoices::cpu_count`]).
    pub fn effective_threads(&self) -> usize {
        if self.threads > 0 {
            self.threads
        } else {
            mnemofs::HostChoices::cpu_count()
        }
    }
}

/// Why mounting or serving failed (one line each).
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// The mount point is unusable.
    #[error(transparent)]
    Mountpoint(#[from] MountpointError),
    /// The kernel refused the mount.
    #[error("cannot mount on {path}: {reason}")]
    Mount {
        /// The mount point.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// An event loop failed.
    #[error("serving {path} failed: {reason}")]
    Serve {
        /// The mount point.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The engine's unmount failed.
    #[error("could not unmount the engine cleanly: {0}")]
    Engine(#[from] FsError),
    /// Another `Arc` of the engine is alive, so it was not unmounted.
    #[error("the engine is still referenced elsewhere in this process; it was not unmounted")]
    StillReferenced,
    /// Another I/O error.
    #[error("{0}")]
    Io(String),
}

impl From<io::Error> for MountError {
    fn from(e: io::Error) -> Self {
        MountError::Io(strip_os_error(&e))
    }
}

/// Mounts `fs` on `mountpoint`, serves until it is unmounted (by `umount`,
/// `fusermount3 -u`, or a stop signal when [`MountConfig::handle_signals`]), then
/// unmounts the engine ([`FileSystem::unmount`]; the local engine saves its free
/// lists and marks the image clean).
///
/// `fs` must be the only reference: the engine is unmounted through
/// `Arc::try_unwrap` once the FUSE session has ended.
pub fn mount_and_serve<E: FileSystem + 'static>(
    fs: Arc<E>,
    mountpoint: &Path,
    cfg: &MountConfig,
) -> Result<(), MountError> {
    mount_and_serve_with(fs, mountpoint, cfg, |_| {})
}

/// [`mount_and_serve`], calling `on_ready` with the canonical mount point once the
/// file system is mounted and the kernel handshake is done (requests are served).
pub fn mount_and_serve_with<E: FileSystem + 'static, F: FnOnce(&Path)>(
    fs: Arc<E>,
    mountpoint: &Path,
    cfg: &MountConfig,
    on_ready: F,
) -> Result<(), MountError> {
    // Blocked before any serving thread exists, so that all of them inherit the mask
    // and a stop signal can only be taken by the watcher.
    let blocked = if cfg.handle_signals {
        Some(BlockedSignals::block(&STOP_SIGNALS)?)
    } else {
        None
    };
    let served = serve(
        Arc::clone(&fs),
        mountpoint,
        cfg,
        blocked.as_ref().map(BlockedSignals::set),
        on_ready,
    );
    let unmounted = match take_engine(fs) {
        Some(fs) => fs.unmount().map_err(MountError::Engine),
        None => Err(MountError::StillReferenced),
    };
    drop(blocked);
    served.and(unmounted)
}

/// The engine back from the `Arc` once the session has let go of it. Normally that
/// is at once; after a failed session (a thread that panicked or could not start),
/// event-loop threads may still be winding down, so wait a little for them.
fn take_engine<E>(mut fs: Arc<E>) -> Option<E> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match Arc::try_unwrap(fs) {
            Ok(fs) => return Some(fs),
            Err(still) if std::time::Instant::now() < deadline => {
                fs = still;
                thread::sleep(Duration::from_millis(10));
            }
            Err(_) => return None,
        }
    }
}

enum Event {
    Signal(libc::c_int),
    SessionEnded,
}

/// Sends [`Event::SessionEnded`] when dropped, also if the session thread panics.
struct EndNotice(Sender<Event>);

impl Drop for EndNotice {
    fn drop(&mut self) {
        let _ = self.0.send(Event::SessionEnded);
    }
}

fn serve<E: FileSystem + 'static, F: FnOnce(&Path)>(
    fs: Arc<E>,
    mountpoint: &Path,
    cfg: &MountConfig,
    signals: Option<SigSet>,
    on_ready: F,
) -> Result<(), MountError> {
    let mountpoint = check_mountpoint(mountpoint)?;
    let threads = cfg.effective_threads();
    // The remount watcher holds the engine weakly: it must not keep it from
    // being unmounted.
    let weak_fs = Arc::downgrade(&fs);
    let adapter = Arc::new(MnemoFuse::new(
        fs,
        AdapterOptions {
            direct_io: cfg.direct_io,
            entry_ttl: cfg.entry_ttl,
            attr_ttl: cfg.attr_ttl,
            page_cache_reads: cfg.page_cache_reads,
            posix_acl: cfg.posix_acl,
        },
    ));
    let page_cache = adapter.page_cache();
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        MountOption::FSName(cfg.fsname.clone()),
        // As a kernel option (not MountOption::Subtype, which only fusermount
        // understands) so that a direct mount by root shows `fuse.mnemofs` too.
        MountOption::CUSTOM("subtype=mnemofs".to_string()),
        MountOption::DefaultPermissions,
    ];
    let f = cfg.flags;
    for (on, o) in [
        (f.read_only, MountOption::RO),
        (f.dev, MountOption::Dev),
        (f.suid, MountOption::Suid),
        (!f.exec, MountOption::NoExec),
        (f.sync, MountOption::Sync),
        (f.dirsync, MountOption::DirSync),
        (
            cfg.atime == mnemofs::AtimeMode::Noatime,
            MountOption::NoAtime,
        ),
    ] {
        if on {
            config.mount_options.push(o);
        }
    }
    config.acl = if cfg.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };

    // fuser mounts and completes the INIT handshake; the requests after it are
    // read and served by our own event loops (`crate::session`).
    let handshake = Handshake {
        negotiated: adapter.negotiated(),
        posix_acl: cfg.posix_acl,
    };
    let mut session =
        fuser::Session::new(handshake, &mountpoint, &config).map_err(|e| MountError::Mount {
            path: mountpoint.clone(),
            reason: strip_os_error(&e),
        })?;
    // Page-cache handles only once their writes can invalidate the page cache.
    page_cache.set_notifier(session.notifier());
    // A request older than STUCK_AFTER leaves a report in the log.
    let pc = Arc::downgrade(&page_cache);
    crate::inflight::spawn_watchdog(crate::inflight::STUCK_AFTER, move || {
        pc.upgrade().map(|pc| pc.describe())
    });
    let mut unmounter = session.unmount_callable();
    let device = session
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| MountError::Serve {
            path: mountpoint.clone(),
            reason: strip_os_error(&e),
        })?;

    let (tx, rx) = mpsc::channel();
    let notice = EndNotice(tx.clone());
    let session_thread = thread::Builder::new()
        .name("mnemofs-session".to_string())
        .spawn(move || {
            let _notice = notice;
            crate::session::serve_requests(adapter, device.as_fd(), threads)
        })
        .map_err(|e| MountError::Serve {
            path: mountpoint.clone(),
            reason: strip_os_error(&e),
        })?;

    let stop_watcher = Arc::new(AtomicBool::new(false));
    let watcher = match signals {
        Some(set) => {
            let w = spawn_watcher(set, tx, Arc::clone(&stop_watcher));
            if w.is_none() {
                note(&format!(
                    "mnemofs: cannot watch for stop signals; unmount {} with umount",
                    mountpoint.display()
                ));
            }
            w
        }
        None => {
            drop(tx);
            None
        }
    };

    // Remounts (`mount -o remount,ro`) reach the engine through the mount table.
    let stop_remounts = Arc::new(AtomicBool::new(false));
    let remounts =
        crate::remount::spawn(weak_fs, &mountpoint, cfg.atime, Arc::clone(&stop_remounts));
    if remounts.is_none() {
        note(&format!(
            "mnemofs: cannot watch the mount table; a remount of {} changes the kernel's flags only",
            mountpoint.display()
        ));
    }

    on_ready(&mountpoint);

    let mut unmount_requested = false;
    while let Ok(event) = rx.recv() {
        match event {
            Event::SessionEnded => break,
            Event::Signal(sig) if !unmount_requested => {
                unmount_requested = true;
                note(&format!(
                    "mnemofs: {} received, unmounting {}",
                    signal_name(sig),
                    mountpoint.display()
                ));
                request_unmount(&mut unmounter, &mountpoint);
            }
            Event::Signal(sig) => note(&format!(
                "mnemofs: {} received again; still waiting for {} to be released",
                signal_name(sig),
                mountpoint.display()
            )),
        }
    }

    let result = session_thread.join();
    stop_watcher.store(true, Ordering::Relaxed);
    stop_remounts.store(true, Ordering::Relaxed);
    if let Some(r) = remounts {
        let _ = r.join();
    }
    if let Some(w) = watcher {
        let _ = w.join();
    }
    // If the session ended on an error while still mounted, the mount goes with it.
    let _ = unmounter.unmount();
    drop(session);
    match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(MountError::Serve {
            path: mountpoint,
            reason: strip_os_error(&e),
        }),
        Err(_) => Err(MountError::Serve {
            path: mountpoint,
            reason: "a FUSE session thread panicked".to_string(),
        }),
    }
}

fn spawn_watcher(set: SigSet, tx: Sender<Event>, stop: Arc<AtomicBool>) -> Option<JoinHandle<()>> {
    thread::Builder::new()
        .name("mnemofs-signals".to_string())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(sig) = set.wait(Duration::from_millis(200)) {
                    if tx.send(Event::Signal(sig)).is_err() {
                        return;
                    }
                }
            }
        })
        .ok()
}

/// Unmounts; when the mount is busy (open files, a working directory inside),
/// detaches it instead: it disappears from the namespace at once and the session
/// ends when the last user lets go.
fn request_unmount(unmounter: &mut SessionUnmounter, mountpoint: &Path) {
    let err = match unmounter.unmount() {
        Ok(()) => return,
        Err(e) => e,
    };
    if err.raw_os_error() == Some(libc::EBUSY) {
        if let Ok(c) = path_cstring(mountpoint) {
            // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
            if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
                note(&format!(
                    "mnemofs: {} is busy; detached it, serving open files until they are closed",
                    mountpoint.display()
                ));
                return;
            }
        }
    }
    note(&format!(
        "mnemofs: cannot unmount {}: {}",
        mountpoint.display(),
        strip_os_error(&err)
    ));
}

/// A line on standard error; write errors are ignored (a daemon's log may be gone).
fn note(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{text}");
}
