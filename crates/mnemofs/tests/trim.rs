//! Scenario: FITRIM gives the memory behind free space back. On an image file in
//! /dev/shm the freed blocks become holes (the image's allocated size drops by what
//! a deleted file held), while every live file reads back byte for byte, later
//! writes land, and the file system stays consistent; a read-only mount refuses.

mod common;
use mnemofs::{AtimeMode, FsError, ROOT_INO};
use std::os::unix::fs::MetadataExt;

/// Bytes of the image the file system holding it has allocated.
fn allocated(p: &std::path::Path) -> u64 {
    std::fs::metadata(p).unwrap().blocks() * 512
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn trim_gives_free_space_back_and_keeps_every_file() {
    let img = common::fresh(128 << 20);
    let fs = common::mount(&img);
    let keep = fs.create(ROOT_INO, b"keep", 0o644, 0, 0).unwrap().ino;
    let kept = pattern(7, 3 << 20);
    fs.write(keep, 0, &kept).unwrap();
    let big = fs.create(ROOT_INO, b"big", 0o644, 0, 0).unwrap().ino;
    let chunk = pattern(1, 1 << 20);
    for i in 0..48u64 {
        fs.write(big, i << 20, &chunk).unwrap();
    }
    fs.unlink(ROOT_INO, b"big").unwrap();
    let before = allocated(&img.path);

    let st = fs.statfs();
    let size = st.blocks * u64::from(st.block_size);
    let trimmed = fs.trim(0, size, 0).unwrap();
    let after = allocated(&img.path);
    assert!(trimmed >= 48 << 20, "trimmed {trimmed} bytes");
    assert!(
        before - after >= 44 << 20,
        "the image's allocation went from {before} to {after} bytes"
    );
    // A second trim finds the same free runs (already holes) and still succeeds;
    // a minimum run longer than any free run trims nothing.
    assert!(fs.trim(0, size, 0).unwrap() >= 48 << 20);
    assert_eq!(fs.trim(0, size, size).unwrap(), 0);

    // Live data is intact; new writes land in the trimmed space.
    let mut buf = vec![0u8; kept.len()];
    assert_eq!(fs.read(keep, 0, &mut buf).unwrap(), kept.len());
    assert!(buf == kept, "a live file changed");
    let again = fs.create(ROOT_INO, b"again", 0o644, 0, 0).unwrap().ino;
    let data = pattern(9, 40 << 20);
    fs.write(again, 0, &data).unwrap();
    let mut back = vec![0u8; data.len()];
    fs.read(again, 0, &mut back).unwrap();
    assert!(
        back == data,
        "data written after the trim did not read back"
    );

    // Read-only: refused, nothing given back.
    fs.remount(true, AtimeMode::Relatime).unwrap();
    assert!(matches!(fs.trim(0, size, 0), Err(FsError::ReadOnly)));
    fs.remount(false, AtimeMode::Relatime).unwrap();
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let fs = common::mount(&img);
    let mut buf = vec![0u8; kept.len()];
    fs.read(keep, 0, &mut buf).unwrap();
    assert!(buf == kept);
    fs.unmount().unwrap();
}
