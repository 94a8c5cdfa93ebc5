//! Scenario: an overlayfs mount whose upper and work directories are on mnemofs
//! (overlayfs asks a FUSE upper for d_type, xattrs and RENAME_WHITEOUT): create,
//! copy-up of a lower file, whiteout of a deleted lower file, rename; the merged view
//! and the upper directory are what overlayfs on ext4 leaves; fsck stays clean.

mod common;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::process::Command;

#[test]
fn overlayfs_with_a_mnemofs_upper() {
    let e = common::env("64M");
    common::mount(&e);
    let d = e.dir.path();
    let (lower, merged) = (d.join("lower"), d.join("merged"));
    std::fs::create_dir_all(lower.join("sub")).unwrap();
    std::fs::create_dir(&merged).unwrap();
    std::fs::write(lower.join("a"), b"lower a\n").unwrap();
    std::fs::write(lower.join("b"), b"lower b\n").unwrap();
    std::fs::write(lower.join("sub/s"), b"lower s\n").unwrap();
    let (upper, work) = (e.mnt.join("upper"), e.mnt.join("work"));
    std::fs::create_dir(&upper).unwrap();
    std::fs::create_dir(&work).unwrap();
    let opts = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        upper.display(),
        work.display()
    );
    let o = Command::new("mount")
        .args(["-t", "overlay", "overlay", "-o", &opts])
        .arg(&merged)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "mount overlay: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    std::fs::write(merged.join("c"), b"new c\n").unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(merged.join("a"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"more\n"))
        .unwrap();
    std::fs::remove_file(merged.join("b")).unwrap();
    std::fs::rename(merged.join("c"), merged.join("c2")).unwrap();
    // A lower directory cannot move without redirect_dir (EXDEV, as with an ext4
    // upper: mv copies instead); a directory made in the overlay can.
    let x = std::fs::rename(merged.join("sub"), merged.join("sub2")).unwrap_err();
    assert_eq!(x.raw_os_error(), Some(libc::EXDEV));
    std::fs::create_dir(merged.join("n")).unwrap();
    std::fs::write(merged.join("n/f"), b"in n\n").unwrap();
    std::fs::rename(merged.join("n"), merged.join("n2")).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&merged)
        .unwrap()
        .map(|x| x.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a", "c2", "n2", "sub"]);
    assert_eq!(std::fs::read(merged.join("a")).unwrap(), b"lower a\nmore\n");
    assert_eq!(std::fs::read(merged.join("sub/s")).unwrap(), b"lower s\n");
    assert_eq!(std::fs::read(merged.join("n2/f")).unwrap(), b"in n\n");
    let o = Command::new("umount").arg(&merged).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // The upper directory: the copied-up file, the whiteout of b, the new file.
    assert_eq!(std::fs::read(upper.join("a")).unwrap(), b"lower a\nmore\n");
    let w = std::fs::symlink_metadata(upper.join("b")).unwrap();
    assert!(w.file_type().is_char_device(), "{w:?}");
    assert_eq!(w.rdev(), 0);
    assert_eq!(std::fs::read(upper.join("c2")).unwrap(), b"new c\n");
    assert_eq!(std::fs::read(upper.join("n2/f")).unwrap(), b"in n\n");
    assert_eq!(std::fs::read(lower.join("b")).unwrap(), b"lower b\n");
    common::unmount(&e);
    common::fsck_clean(&e);
}
