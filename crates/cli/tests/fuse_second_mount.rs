//! Scenario: mounting a mounted image again gives a second mount of the same file
//! system, as Linux gives for a block device mounted twice (xfstests generic/732):
//! a change through one is seen through the other at once, the second mount takes
//! its own kernel flags (`ro`), it keeps serving when the first is unmounted, and
//! the daemon ends, leaving the image clean, when the last one goes.

mod common;
use std::path::Path;

fn in_table(dir: &Path) -> Option<String> {
    let t = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let d = dir.to_str().unwrap();
    t.lines()
        .find(|l| l.split(' ').nth(4) == Some(d))
        .map(str::to_string)
}

#[test]
fn a_second_mount_shares_the_file_system() {
    let e = common::env("64M");
    common::mount(&e);
    let two = e.dir.path().join("two");
    std::fs::create_dir(&two).unwrap();
    let o = common::run(&[
        "mount",
        e.img.to_str().unwrap(),
        two.to_str().unwrap(),
        "-o",
        "ro",
    ]);
    assert!(
        o.status.success(),
        "second mount: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let line = in_table(&two).expect("the second mount is in the table");
    assert!(
        line.contains(" ro,") && line.contains("fuse.mnemofs"),
        "{line}"
    );

    // generic/732: renames through either mount, seen through the other.
    let one = &e.mnt;
    std::fs::create_dir(one.join("A")).unwrap();
    std::fs::create_dir(one.join("B")).unwrap();
    std::fs::write(one.join("A/f"), b"data").unwrap();
    std::fs::rename(one.join("A/f"), one.join("B/f")).unwrap();
    assert_eq!(std::fs::read(two.join("B/f")).unwrap(), b"data");
    // The second mount is read-only; the first is not.
    let err = std::fs::write(two.join("x"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS));

    // The first goes; the second still serves.
    let o = std::process::Command::new("fusermount3")
        .arg("-u")
        .arg(one)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(std::fs::read(two.join("B/f")).unwrap(), b"data");
    // The last goes: the daemon ends and the image is clean.
    let cp = common::xattr::c(&two);
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::umount2(cp.as_ptr(), 0) }, 0);
    common::unmount_wait(&e);
    common::fsck_clean(&e);
}
