//! Scenario: mnemofs mounts like a Linux file system — `mount -t fuse.mnemofs IMAGE
//! DIR -o OPTS` and an fstab line (through the `mount.fuse.mnemofs` helper), the
//! image as the mount's source (findmnt), `umount IMAGE`, kernel flags from -o, a
//! read-only mount, and a second mount of the same image refused in one line.

mod common;
use common::{ok, sh};
use std::path::Path;

fn findmnt(mnt: &Path, col: &str) -> String {
    let o = sh("findmnt", &["-n", "-o", col, mnt.to_str().unwrap()]);
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn mount_t_fuse_mnemofs_fstab_and_umount_image() {
    common::install_mount_helper();
    let e = common::env("64M");
    let img = std::fs::canonicalize(&e.img).unwrap();
    let (imgs, mnt) = (img.to_str().unwrap(), e.mnt.to_str().unwrap());

    // mount -t with kernel flags and mnemofs's own options.
    ok(
        &sh(
            "mount",
            &[
                "-t",
                "fuse.mnemofs",
                imgs,
                mnt,
                "-o",
                "noatime,noexec,nodev,preset=pnova",
            ],
        ),
        "mount -t fuse.mnemofs",
    );
    assert!(common::is_mounted(&e.mnt));
    assert_eq!(findmnt(&e.mnt, "SOURCE"), imgs);
    assert_eq!(findmnt(&e.mnt, "FSTYPE"), "fuse.mnemofs");
    let flags = findmnt(&e.mnt, "VFS-OPTIONS");
    assert!(flags.contains("noexec"), "{flags}");
    assert!(flags.contains("nodev"), "{flags}");
    assert!(!flags.contains("nosuid"), "{flags}");
    std::fs::write(e.mnt.join("f"), b"hello").unwrap();

    // A second mount of the same image: the same file system there too.
    let other = e.dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    ok(
        &sh(
            "mount",
            &["-t", "fuse.mnemofs", imgs, other.to_str().unwrap()],
        ),
        "second mount",
    );
    assert_eq!(std::fs::read(other.join("f")).unwrap(), b"hello");
    ok(
        &sh("umount", &[other.to_str().unwrap()]),
        "umount the second",
    );
    assert!(!common::is_mounted(&other));

    // umount by the image's path.
    ok(&sh("umount", &[imgs]), "umount IMAGE");
    common::unmount_wait(&e);
    assert!(!common::is_mounted(&e.mnt));

    // An fstab line, read-only.
    let fstab = e.dir.path().join("fstab");
    std::fs::write(&fstab, format!("{imgs} {mnt} fuse.mnemofs ro,noauto 0 0\n")).unwrap();
    ok(
        &sh("mount", &["-T", fstab.to_str().unwrap(), mnt]),
        "mount from an fstab line",
    );
    assert_eq!(findmnt(&e.mnt, "SOURCE"), imgs);
    assert!(findmnt(&e.mnt, "VFS-OPTIONS").starts_with("ro"));
    assert_eq!(std::fs::read(e.mnt.join("f")).unwrap(), b"hello");
    let w = std::fs::write(e.mnt.join("g"), b"x").unwrap_err();
    assert_eq!(w.raw_os_error(), Some(libc::EROFS), "{w}");
    ok(&sh("umount", &[mnt]), "umount DIR");
    common::unmount_wait(&e);
    common::fsck_clean(&e);
}
