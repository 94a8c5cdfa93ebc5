//! `mnemofs guard` (internal): watches a mount's daemon from a process of its own
//! and, if the daemon dies while its mount is still there, aborts the mount's FUSE
//! connection and detaches the mount point.
//!
//! Why: a daemon killed with SIGKILL while one of its threads waits inside the
//! kernel on its own mount (a page-cache invalidation waiting for a write-back only
//! the daemon could answer) stays a zombie whose stuck thread keeps `/dev/fuse` open:
//! the connection lives, nothing answers it, and every process touching the mount
//! hangs. Aborting the connection (`/sys/fs/fuse/connections/N/abort`) fails every
//! request with ENOTCONN and wakes them all; the stuck thread then ends too.
//!
//! The daemon starts the guard once mounted (`mount.rs`) and stops it when it ends
//! its mount itself (a connection number is reused by the next mount, which must
//! not look like this one). The guard notes the mount's connection, checks once a
//! second, exits when that connection is no longer mounted there, and needs root (the abort file and umount2); as
//! another user it exits at once.

use crate::error::CliResult;
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct GuardArgs {
    /// The daemon's pid
    #[arg(long)]
    pub pid: u32,
    /// The daemon's FUSE connection (the mount's device minor, as the daemon saw it)
    #[arg(long)]
    pub conn: u32,
    /// The mount point
    pub mountpoint: PathBuf,
}

/// The FUSE connection of the mount at `mountpoint` (its device's minor number):
/// the last such line of mountinfo (the mount on top), read from mountinfo because
/// a stat of a wedged mount would hang.
pub fn connection_of(mountinfo: &str, mountpoint: &Path) -> Option<u32> {
    let want = mountpoint.to_str()?;
    mountinfo.lines().rev().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let fstype = f.iter().skip_while(|x| **x != "-").nth(1)?;
        if f.get(4) != Some(&want) || !fstype.starts_with("fuse") {
            return None;
        }
        f.get(2)?.split_once(':')?.1.parse().ok()
    })
}

/// Whether process `pid` is gone or dead (a zombie: exited, perhaps with a thread
/// still stuck in the kernel).
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name's closing parenthesis.
        Ok(s) => s
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_none_or(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

pub fn run(a: &GuardArgs) -> CliResult<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    let mounts = || std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    // The daemon's own connection, as it saw it once mounted; a mount on the same
    // mount point with another connection is another daemon's.
    let conn = a.conn;
    let ours = || connection_of(&mounts(), &a.mountpoint) == Some(conn);
    loop {
        if !ours() {
            return Ok(());
        }
        // (Checked again right before acting: the mount must still be ours.)
        if dead(a.pid) && ours() {
            let abort = format!("/sys/fs/fuse/connections/{conn}/abort");
            if !Path::new(&abort).exists() {
                let _ = std::process::Command::new("mount")
                    .args(["-t", "fusectl", "none", "/sys/fs/fuse/connections"])
                    .status();
            }
            let aborted = std::fs::write(&abort, b"1").is_ok();
            let detached = std::ffi::CString::new(a.mountpoint.as_os_str().as_encoded_bytes())
                .is_ok_and(|c| {
                    // SAFETY: `c` is a NUL-terminated path; MNT_DETACH only detaches.
                    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) == 0 }
                });
            eprintln!(
                "mnemofs: the daemon (pid {}) of {} died while mounted: connection {conn} {}, mount point {}",
                a.pid,
                a.mountpoint.display(),
                if aborted { "aborted" } else { "could not be aborted" },
                if detached { "detached" } else { "left mounted" },
            );
            return Ok(());
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_connection_of_a_fuse_mount() {
        let info = "\
22 1 0:21 / /proc rw,nosuid - proc proc rw
605 28 0:61 / /dev/shm/x/mnt rw,relatime - fuse.mnemofs /dev/shm/x/img rw,user_id=0
606 28 0:62 / /tmp/other rw,relatime - tmpfs tmpfs rw
";
        assert_eq!(connection_of(info, Path::new("/dev/shm/x/mnt")), Some(61));
        // Mounted over another FUSE mount: the one on top.
        let over = format!("{info}607 605 0:63 / /dev/shm/x/mnt rw - fuse.mnemofs img rw\n");
        assert_eq!(connection_of(&over, Path::new("/dev/shm/x/mnt")), Some(63));
        assert_eq!(connection_of(info, Path::new("/tmp/other")), None);
        assert_eq!(connection_of(info, Path::new("/nowhere")), None);
    }

    #[test]
    fn a_live_process_is_not_dead_and_a_missing_one_is() {
        assert!(!dead(std::process::id()));
        assert!(dead(u32::MAX));
    }
}
