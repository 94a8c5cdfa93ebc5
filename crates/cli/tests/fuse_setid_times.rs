//! Scenario (through a FUSE mount): a write by a user without CAP_FSETID clears
//! set-user-ID, and set-group-ID when group-exec is set, as on ext4; truncate(1)
//! (truncate(2), which sends no mtime) updates mtime.

mod common;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;

/// Appends a byte to `path` as uid/gid 65534 (nobody), without capabilities.
fn append_as_nobody(path: &std::path::Path) {
    as_nobody("printf x >> \"$0\"", path);
}

/// Runs the shell `script` (with `$0` = `path`) as uid/gid 65534 (nobody), without
/// capabilities.
fn as_nobody(script: &str, path: &std::path::Path) {
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--",
            "sh",
            "-c",
            script,
        ])
        .arg(path)
        .output()
        .expect("run setpriv");
    assert!(
        o.status.success(),
        "{script} as nobody: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `stat -c %a` of `path` (a process of its own, as a user would look).
fn stat_mode(path: &std::path::Path) -> String {
    let o = Command::new("stat")
        .args(["-c", "%a"])
        .arg(path)
        .output()
        .unwrap();
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn stat_right_after_a_non_owners_write_shows_the_set_id_bits_gone() {
    // The kernel caches the mode it was told at chmod for up to the attribute TTL
    // (a second); the daemon clears the bits behind its back during the write, so it
    // must have the kernel drop those attributes before the write returns.
    let e = common::env("64M");
    common::mount(&e);
    for i in 0..20 {
        let p = e.mnt.join(format!("s{i}"));
        std::fs::write(&p, b"data").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o6777)).unwrap();
        assert_eq!(stat_mode(&p), "6777");
        // An overwrite in place (not an append) by nobody.
        as_nobody(
            "printf y | dd of=\"$0\" bs=1 seek=1 conv=notrunc status=none",
            &p,
        );
        assert_eq!(stat_mode(&p), "777", "round {i}");
    }
    common::unmount(&e);
    common::fsck_clean(&e);
}

#[test]
fn set_id_bits_and_truncate_times() {
    let e = common::env("64M");
    common::mount(&e);
    let cases = [
        // (mode before, mode after a write by another user)
        (0o6777, 0o0777),
        (0o4777, 0o0777),
        (0o2777, 0o0777),
        // Set-group-ID without group-exec: dropped too, the writer is not in the
        // file's group (Linux's setattr_should_drop_sgid; tmpfs and ext4 agree).
        (0o6747, 0o0747),
        (0o0777, 0o0777),
    ];
    for (i, (before, after)) in cases.into_iter().enumerate() {
        let p = e.mnt.join(format!("f{i}"));
        std::fs::write(&p, b"data").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(before)).unwrap();
        append_as_nobody(&p);
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(m.len(), 5, "the write landed");
        assert_eq!(
            m.mode() & 0o7777,
            after,
            "mode {before:o} after a write by nobody"
        );
    }
    // A writer in the file's group keeps set-group-ID without group-exec.
    let g = e.mnt.join("g");
    std::fs::write(&g, b"data").unwrap();
    std::os::unix::fs::chown(&g, None, Some(65534)).unwrap();
    std::fs::set_permissions(&g, std::fs::Permissions::from_mode(0o2767)).unwrap();
    append_as_nobody(&g);
    assert_eq!(std::fs::metadata(&g).unwrap().mode() & 0o7777, 0o2767);
    // The owner (root, with CAP_FSETID) keeps its bits.
    let p = e.mnt.join("own");
    std::fs::write(&p, b"data").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o6755)).unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&p)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"x"))
        .unwrap();
    assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o7777, 0o6755);

    // truncate(1): a size change with no time from the kernel.
    let t = e.mnt.join("t");
    std::fs::write(&t, vec![1u8; 10_000]).unwrap();
    let o = Command::new("touch")
        .args(["-m", "-d", "@1000"])
        .arg(&t)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(std::fs::metadata(&t).unwrap().mtime(), 1000);
    let o = Command::new("truncate")
        .args(["-s", "100"])
        .arg(&t)
        .output()
        .unwrap();
    assert!(o.status.success());
    let m = std::fs::metadata(&t).unwrap();
    assert_eq!(m.len(), 100);
    assert!(m.mtime() > 1000, "truncate left mtime at {}", m.mtime());
    common::unmount(&e);
    common::fsck_clean(&e);
}
