//! Remounts: the kernel changes a mount's flags (`mount -o remount,ro DIR`) without
//! a word to the FUSE daemon. A thread watches `/proc/self/mountinfo` (the kernel
//! wakes `poll` on it whenever the mount table changes), finds this mount's line and
//! tells the engine when its read-only flag or its atime mode changed
//! ([`FileSystem::remount`]). It also reads the flags once at start, so a mount
//! made `ro` puts the engine in read-only mode from the first request on.

use mnemofs::{AtimeMode, FileSystem};
use std::io::{Read, Seek};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::{self, JoinHandle};

/// The flags of one mount that the engine acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MountFlags {
    /// `ro` on the mount or on its super block.
    pub read_only: bool,
    /// `noatime`, `relatime`, or neither (`strictatime`).
    pub atime: AtimeMode,
}

/// The options of the topmost mount on `mountpoint` of type `fuse.mnemofs` (or
/// `fuse`) in `mountinfo` (the text of /proc/self/mountinfo): the mount's own
/// (`ro`, `nosuid`, `noatime`, …) and its super block's (`ro`, `sync`, `dirsync`,
/// …); `None` when there is none (unmounted).
pub fn options_in(mountinfo: &str, mountpoint: &Path) -> Option<(Vec<String>, Vec<String>)> {
    crate::mountpoint::parse_mountinfo(mountinfo.as_bytes())
        .into_iter()
        .rev()
        .find(|m| m.mount_point == mountpoint && (m.fstype == "fuse.mnemofs" || m.fstype == "fuse"))
        .map(|m| (m.options, m.super_options))
}

/// The flags of the topmost mount on `mountpoint` ([`options_in`]); `None` when
/// there is none.
pub fn flags_in(mountinfo: &str, mountpoint: &Path) -> Option<MountFlags> {
    let (mnt, sb) = options_in(mountinfo, mountpoint)?;
    let has = |v: &[String], o: &str| v.iter().any(|x| x == o);
    let atime = if has(&mnt, "noatime") {
        AtimeMode::Noatime
    } else if has(&mnt, "relatime") {
        AtimeMode::Relatime
    } else {
        AtimeMode::Strictatime
    };
    Some(MountFlags {
        read_only: has(&mnt, "ro") || has(&sb, "ro"),
        atime,
    })
}

/// Reads the whole of `file` from its start.
fn read_all(file: &mut std::fs::File, buf: &mut String) -> std::io::Result<()> {
    buf.clear();
    file.rewind()?;
    file.read_to_string(buf).map(|_| ())
}

/// Starts the watcher of `mountpoint`'s flags; it stops when `stop` is set, when
/// the mount is gone, or when the engine is. `None` (with a note) when
/// /proc/self/mountinfo cannot be read: remounts then change the kernel's flags
/// only.
///
/// `atime` is the mode the mount was made with: the kernel's table cannot show
/// every mode a mount takes (FUSE mounts start `relatime`), so the engine keeps it
/// until a remount changes the table's atime flag.
pub fn spawn<E: FileSystem + 'static>(
    fs: Weak<E>,
    mountpoint: &Path,
    atime: AtimeMode,
    stop: Arc<AtomicBool>,
) -> Option<JoinHandle<()>> {
    let mut file = std::fs::File::open("/proc/self/mountinfo").ok()?;
    let mountpoint = mountpoint.to_path_buf();
    let mut text = String::new();
    read_all(&mut file, &mut text).ok()?;
    let mut seen = flags_in(&text, &mountpoint)?;
    let mut wanted = MountFlags {
        read_only: seen.read_only,
        atime,
    };
    // The engine was mounted with `atime` and read-write: only a `ro` mount needs
    // telling.
    if wanted.read_only {
        apply(&fs, wanted);
    }
    thread::Builder::new()
        .name("mnemofs-remount".to_string())
        .spawn(move || {
            let mut pfd = libc::pollfd {
                fd: file.as_raw_fd(),
                events: libc::POLLPRI,
                revents: 0,
            };
            while !stop.load(Ordering::Relaxed) {
                pfd.revents = 0;
                // SAFETY: `pfd` is one valid pollfd for the call; the descriptor
                // stays open (owned by `file`) for the whole loop.
                let n = unsafe { libc::poll(&mut pfd, 1, 200) };
                if n <= 0 {
                    continue;
                }
                if read_all(&mut file, &mut text).is_err() {
                    return;
                }
                let Some(now) = flags_in(&text, &mountpoint) else {
                    // Unmounted (or moved away): nothing more to watch.
                    return;
                };
                if now != seen {
                    wanted.read_only = now.read_only;
                    if now.atime != seen.atime {
                        wanted.atime = now.atime;
                    }
                    seen = now;
                    if !apply(&fs, wanted) {
                        return;
                    }
                }
            }
        })
        .ok()
}

/// Tells the engine; false once it is gone.
fn apply<E: FileSystem>(fs: &Weak<E>, f: MountFlags) -> bool {
    let Some(fs) = fs.upgrade() else {
        return false;
    };
    if let Err(e) = fs.remount(f.read_only, f.atime) {
        let _ = std::io::Write::write_fmt(
            &mut std::io::stderr(),
            format_args!(
                "mnemofs: remount ({}): the engine keeps its mode: {e}\n",
                if f.read_only { "ro" } else { "rw" }
            ),
        );
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:52 / /mnt/my\\040pm rw,nosuid,relatime shared:20 - fuse.mnemofs /dev/shm/a.img rw,user_id=0,group_id=0,default_permissions
41 22 0:53 / /mnt/other ro,noatime shared:21 - fuse.mnemofs /dev/shm/b.img ro,user_id=0,group_id=0
42 40 0:54 / /mnt/my\\040pm ro,nosuid shared:22 - fuse.mnemofs /dev/shm/c.img rw,user_id=0
";

    #[test]
    fn finds_the_topmost_mount_and_its_flags() {
        let f = flags_in(INFO, Path::new("/mnt/my pm")).expect("mounted");
        assert_eq!(
            f,
            MountFlags {
                read_only: true,
                atime: AtimeMode::Strictatime
            }
        );
        let g = flags_in(INFO, Path::new("/mnt/other")).expect("mounted");
        assert_eq!(
            g,
            MountFlags {
                read_only: true,
                atime: AtimeMode::Noatime
            }
        );
        assert_eq!(flags_in(INFO, Path::new("/")), None, "not a mnemofs mount");
        assert_eq!(flags_in(INFO, Path::new("/mnt/none")), None);
    }

    #[test]
    fn the_super_blocks_ro_counts() {
        let info = "40 22 0:52 / /m rw,relatime - fuse.mnemofs img ro,user_id=0\n";
        let f = flags_in(info, Path::new("/m")).expect("mounted");
        assert!(f.read_only);
        assert_eq!(f.atime, AtimeMode::Relatime);
    }
}
