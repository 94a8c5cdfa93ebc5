//! Scenario: a live mnemofs remounted as every Linux file system is — `mount -o
//! remount,ro DIR` (through the `mount.fuse.mnemofs` helper) and back to `rw`, and
//! changes of the kernel flags; while read-only every change is refused with EROFS
//! and nothing reaches the image (its bytes do not change across reads, listings
//! and stats), a remount to read-only is refused while a file is open for writing,
//! and the image is clean (no recovery needed) from the moment it is read-only.

mod common;
use common::{install_mount_helper as install_helper, ok, sh};
use std::io::Write;
use std::path::Path;

fn vfs_options(mnt: &Path) -> String {
    let o = sh(
        "findmnt",
        &["-n", "-o", "VFS-OPTIONS", mnt.to_str().unwrap()],
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// The engine's mode as `mnemofs stat --json` reports it.
fn engine_mode(mnt: &Path) -> (bool, String) {
    let o = common::run(&["stat", "--json", mnt.to_str().unwrap()]);
    ok(&o, "mnemofs stat");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stat json");
    (
        v["read_only"].as_bool().expect("read_only"),
        v["atime"].as_str().expect("atime").to_string(),
    )
}

fn errno_of(r: std::io::Result<impl Sized>) -> Option<i32> {
    r.err().and_then(|e| e.raw_os_error())
}

#[test]
fn remount_read_only_and_back() {
    install_helper();
    let e = common::env("64M");
    let img = std::fs::canonicalize(&e.img).unwrap();
    let (imgs, mnt) = (img.to_str().unwrap(), e.mnt.to_str().unwrap());
    ok(
        &sh(
            "mount",
            &["-t", "fuse.mnemofs", imgs, mnt, "-o", "strictatime"],
        ),
        "mount",
    );
    std::fs::write(e.mnt.join("f"), b"hello").unwrap();
    std::fs::create_dir(e.mnt.join("d")).unwrap();
    assert_eq!(engine_mode(&e.mnt), (false, "strictatime".to_string()));

    // Refused while a file is open for writing: one line, non-zero, nothing changed.
    {
        let mut w = std::fs::OpenOptions::new()
            .append(true)
            .open(e.mnt.join("f"))
            .unwrap();
        let o = sh("mount", &["-o", "remount,ro", mnt]);
        assert!(!o.status.success(), "remount,ro with a writer succeeded");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("open for writing"), "{err}");
        w.write_all(b" world").unwrap();
    }
    assert!(!engine_mode(&e.mnt).0);

    ok(&sh("mount", &["-o", "remount,ro", mnt]), "remount,ro");
    assert!(
        vfs_options(&e.mnt).starts_with("ro"),
        "{}",
        vfs_options(&e.mnt)
    );
    assert_eq!(engine_mode(&e.mnt), (true, "noatime".to_string()));
    // Every change refused with EROFS; reads work.
    assert_eq!(
        errno_of(std::fs::write(e.mnt.join("g"), b"x")),
        Some(libc::EROFS)
    );
    assert_eq!(
        errno_of(
            std::fs::OpenOptions::new()
                .write(true)
                .open(e.mnt.join("f"))
        ),
        Some(libc::EROFS)
    );
    assert_eq!(
        errno_of(std::fs::remove_file(e.mnt.join("f"))),
        Some(libc::EROFS)
    );
    assert_eq!(
        errno_of(std::fs::create_dir(e.mnt.join("d2"))),
        Some(libc::EROFS)
    );
    // Nothing reaches the image: its bytes stay the same across reads (with
    // strictatime asked for at mount), listings and stats.
    let before = std::fs::read(&img).unwrap();
    for _ in 0..3 {
        assert_eq!(std::fs::read(e.mnt.join("f")).unwrap(), b"hello world");
        assert_eq!(std::fs::read_dir(e.mnt.join("d")).unwrap().count(), 0);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        std::fs::read(&img).unwrap() == before,
        "the image changed while read-only"
    );
    // Clean from the moment it went read-only: a copy of the image needs no
    // recovery.
    let copy = e.dir.path().join("copy");
    std::fs::write(&copy, &before).unwrap();
    let o = common::run(&["fsck", copy.to_str().unwrap()]);
    ok(&o, "fsck of the read-only image's copy");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("last unmount clean"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );

    // Back to read-write, and the kernel flags follow -o (the atime mode the mount
    // was made with is kept).
    ok(
        &sh("mount", &["-o", "remount,rw,nosuid,noexec", mnt]),
        "remount,rw",
    );
    let v = vfs_options(&e.mnt);
    assert!(v.starts_with("rw"), "{v}");
    assert!(v.contains("nosuid") && v.contains("noexec"), "{v}");
    assert_eq!(engine_mode(&e.mnt), (false, "strictatime".to_string()));
    std::fs::write(e.mnt.join("g"), b"again").unwrap();
    ok(
        &sh("mount", &["-o", "remount,noatime", mnt]),
        "remount,noatime",
    );
    assert_eq!(engine_mode(&e.mnt), (false, "noatime".to_string()));

    // `mnemofs mount -o remount` directly, and its errors.
    let o = common::run(&["mount", "-o", "remount,ro", mnt]);
    ok(&o, "mnemofs mount -o remount,ro DIR");
    assert!(engine_mode(&e.mnt).0);
    let o = common::run(&["mount", "-o", "remount,bogus", mnt]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1);
    let o = common::run(&["mount", "-o", "remount,rw", e.dir.path().to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a mnemofs mount point"));

    // Unmounted while read-only: clean, and the data is all there.
    ok(&sh("umount", &[mnt]), "umount");
    common::unmount_wait(&e);
    common::fsck_clean(&e);
    common::mount(&e);
    assert_eq!(std::fs::read(e.mnt.join("f")).unwrap(), b"hello world");
    assert_eq!(std::fs::read(e.mnt.join("g")).unwrap(), b"again");
    common::unmount(&e);
    common::fsck_clean(&e);
}

#[test]
fn a_read_only_mount_writes_nothing_and_remounts_read_write() {
    let e = common::env("64M");
    common::mount_with(&e, &["-o", "ro"]);
    let mnt = e.mnt.to_str().unwrap();
    assert!(engine_mode(&e.mnt).0);
    let before = std::fs::read(&e.img).unwrap();
    assert_eq!(std::fs::read_dir(&e.mnt).unwrap().count(), 0);
    assert_eq!(
        errno_of(std::fs::write(e.mnt.join("g"), b"x")),
        Some(libc::EROFS)
    );
    assert!(
        std::fs::read(&e.img).unwrap() == before,
        "the image changed while read-only"
    );
    let o = common::run(&["mount", "-o", "remount,rw", mnt]);
    ok(&o, "remount,rw");
    assert!(!engine_mode(&e.mnt).0);
    std::fs::write(e.mnt.join("g"), b"x").unwrap();
    common::unmount(&e);
    common::fsck_clean(&e);
}
