//! Scenario: set-user-ID and set-group-ID are cleared by the kernel's VFS rules
//! (xfstests generic/683-685), as on ext4 or tmpfs: a write, truncate or fallocate by
//! a process without CAP_FSETID clears set-user-ID, and set-group-ID when group-exec
//! is set or the writer is not in the file's group; a process with CAP_FSETID keeps
//! both; a chown clears set-user-ID (even root's) and set-group-ID by the same group
//! rule. The mount negotiates FUSE_HANDLE_KILLPRIV_V2, so the kernel leaves this to
//! mnemofs; without it the kernel kept set-group-ID for a writer outside the group.

mod common;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

const NOBODY: u32 = 65534;

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().mode() & 0o7777
}

/// Runs `script` in sh with `f` as $1, as `uid`/`gid` (no supplementary groups), or
/// as root when `uid` is 0.
fn as_user(uid: u32, gid: u32, script: &str, f: &Path) {
    let mut c = Command::new("sh");
    c.arg("-c").arg(script).arg("sh").arg(f);
    if uid != 0 {
        c.uid(uid).gid(gid);
    }
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{script} as {uid}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

const OPS: &[(&str, &str)] = &[
    ("write", "printf x >> \"$1\""),
    ("truncate", "truncate -s 100 \"$1\""),
    ("fallocate", "fallocate -o 0 -l 8192 \"$1\""),
];

/// A fresh file `name` with `perm`, owned by root:`group`.
fn file(dir: &Path, name: &str, perm: u32, group: u32) -> std::path::PathBuf {
    let f = dir.join(name);
    std::fs::write(&f, b"data").unwrap();
    std::os::unix::fs::chown(&f, Some(0), Some(group)).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(perm)).unwrap();
    assert_eq!(mode(&f), perm);
    f
}

#[test]
fn setid_bits_follow_the_vfs_rules() {
    let e = common::env("64M");
    // The other user reaches the mount through the test's directory.
    std::fs::set_permissions(e.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    common::mount(&e);
    std::fs::set_permissions(&e.mnt, std::fs::Permissions::from_mode(0o777)).unwrap();
    for (op, script) in OPS {
        // Set-group-ID without group-exec, writer outside the group: cleared (the
        // kernel's FUSE rule kept it).
        let f = file(&e.mnt, &format!("{op}-sgid-outside"), 0o2646, 0);
        as_user(NOBODY, NOBODY, script, &f);
        assert_eq!(
            mode(&f),
            0o646,
            "{op}: set-group-ID, writer outside the group"
        );
        // The same, writer in the group: kept (mandatory-locking style bits).
        let f = file(&e.mnt, &format!("{op}-sgid-inside"), 0o2666, NOBODY);
        as_user(NOBODY, NOBODY, script, &f);
        assert_eq!(mode(&f), 0o2666, "{op}: set-group-ID, writer in the group");
        // Group-exec set: cleared even for a writer in the group.
        let f = file(&e.mnt, &format!("{op}-sgid-gx"), 0o2676, NOBODY);
        as_user(NOBODY, NOBODY, script, &f);
        assert_eq!(mode(&f), 0o676, "{op}: set-group-ID with group-exec");
        // Set-user-ID: cleared.
        let f = file(&e.mnt, &format!("{op}-suid"), 0o4646, 0);
        as_user(NOBODY, NOBODY, script, &f);
        assert_eq!(mode(&f), 0o646, "{op}: set-user-ID");
        // Root (CAP_FSETID) keeps both.
        let f = file(&e.mnt, &format!("{op}-root"), 0o6656, 0);
        as_user(0, 0, script, &f);
        assert_eq!(mode(&f), 0o6656, "{op}: by root");
    }
    // chown by root: set-user-ID goes; set-group-ID goes with group-exec and stays
    // without it (root has CAP_FSETID).
    let f = file(&e.mnt, "chown-suid", 0o4755, 0);
    std::os::unix::fs::chown(&f, Some(NOBODY), None).unwrap();
    assert_eq!(mode(&f), 0o755);
    let f = file(&e.mnt, "chown-sgid-gx", 0o2755, 0);
    std::os::unix::fs::chown(&f, None, Some(NOBODY)).unwrap();
    assert_eq!(mode(&f), 0o755);
    let f = file(&e.mnt, "chown-sgid", 0o2745, 0);
    std::os::unix::fs::chown(&f, None, Some(NOBODY)).unwrap();
    assert_eq!(mode(&f), 0o2745);
    // A directory keeps its bits.
    let d = e.mnt.join("dir");
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o2755)).unwrap();
    std::os::unix::fs::chown(&d, Some(NOBODY), None).unwrap();
    assert_eq!(mode(&d), 0o2755);
    common::unmount(&e);
    common::fsck_clean(&e);
}
