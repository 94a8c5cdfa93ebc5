//! Scenario: a file overwritten one page at a time keeps the block each overwrite
//! supersedes as its spare (DRAM only), for its next one-page overwrite, so such
//! a write takes no allocator lock. A spare is free space: `statfs` counts it, a
//! write that finds no space takes it back, freeing the file gives it back, and
//! unmount puts it in the saved free list (fsck clean, the same free space after
//! the next mount). Every data allocation short of space takes them back: a file
//! write, and also a symlink's target block. (A shrink's copy of its last page
//! borrows from the metadata reserve instead: it works on a full device.)

mod common;
use mnemofs::{FsError, LockMode, MountOptions, ROOT_INO};

fn opts(lock: LockMode) -> MountOptions {
    MountOptions {
        lock,
        ..common::opts()
    }
}

/// Free blocks `statfs` reports, and how many of them are spares.
fn free(fs: &mnemofs::Fs) -> (u64, u64) {
    (fs.statfs().blocks_free, fs.stats().spare_blocks)
}

#[test]
fn overwrites_keep_one_spare_per_file_counted_free() {
    for lock in [LockMode::Inode, LockMode::Segment] {
        let img = common::fresh(64 << 20);
        let fs = mnemofs::mount(&img.path, &opts(lock)).unwrap();
        let files: Vec<u64> = (0..8)
            .map(|i| {
                let f = fs
                    .create(ROOT_INO, format!("f{i}").as_bytes(), 0o644, 0, 0)
                    .unwrap()
                    .ino;
                fs.write(f, 0, &vec![i as u8; 16 << 12]).unwrap();
                f
            })
            .collect();
        assert_eq!(fs.stats().spare_blocks, 0, "{lock:?}");
        // One overwrite each: every file supersedes one block and keeps it.
        for (i, &f) in files.iter().enumerate() {
            fs.write(f, 3 << 12, &[0x40 + i as u8; 4096]).unwrap();
        }
        let (free1, spares1) = free(&fs);
        assert_eq!(spares1, 8, "{lock:?}: one spare per overwritten file");
        // Many more overwrites: each takes its file's spare and keeps the block it
        // supersedes, so no block leaves the free space and the count stays.
        for round in 0..50u64 {
            for &f in &files {
                fs.write(f, (round % 16) << 12, &[round as u8; 4096])
                    .unwrap();
            }
        }
        let (free2, spares2) = free(&fs);
        assert_eq!(spares2, 8, "{lock:?}");
        // (Log pages come and go with the entries: within a few pages per file.)
        assert!(
            free2 + 8 * 4 >= free1,
            "{lock:?}: overwrites used up free space: {free1} -> {free2}"
        );
        // Contents: page p of every file holds the last round r with r % 16 == p.
        for &f in &files {
            let mut b = vec![0u8; 16 << 12];
            assert_eq!(fs.read(f, 0, &mut b).unwrap(), b.len());
            for p in 0..16u64 {
                let last = (0..50u64).rev().find(|r| r % 16 == p).unwrap();
                assert!(
                    b[(p as usize) << 12..((p as usize) + 1) << 12]
                        .iter()
                        .all(|&x| x == last as u8),
                    "{lock:?}: page {p}"
                );
            }
        }
        // Freeing a file gives its spare back with its pages.
        fs.unlink(ROOT_INO, b"f0").unwrap();
        assert_eq!(fs.stats().spare_blocks, 7, "{lock:?}");
        // Unmount puts the spares in the saved free list: the same free space
        // after the next mount, and fsck finds every block accounted for.
        let before = fs.statfs().blocks_free;
        fs.unmount().unwrap();
        let r = mnemofs::fsck(&img.path).unwrap();
        assert!(r.is_clean(), "{lock:?}: {:?}", r.problems);
        let fs = mnemofs::mount(&img.path, &opts(lock)).unwrap();
        assert_eq!(fs.stats().spare_blocks, 0);
        assert_eq!(fs.statfs().blocks_free, before, "{lock:?}");
        fs.unmount().unwrap();
    }
}

/// `n` one-page files `s0`.., each written twice (1s, then 2s): `n` spares.
fn overwritten_once(fs: &mnemofs::Fs, n: u64) -> Vec<u64> {
    (0..n)
        .map(|i| {
            let f = fs
                .create(ROOT_INO, format!("s{i}").as_bytes(), 0o644, 0, 0)
                .unwrap()
                .ino;
            fs.write(f, 0, &[1u8; 4096]).unwrap();
            fs.write(f, 0, &[2u8; 4096]).unwrap();
            f
        })
        .collect()
}

#[test]
fn a_write_short_of_space_takes_the_spares_back() {
    let img = common::fresh(32 << 20);
    let fs = mnemofs::mount(&img.path, &opts(LockMode::Inode)).unwrap();
    let files = overwritten_once(&fs, 200);
    assert_eq!(fs.stats().spare_blocks, 200);
    // Fill the device one page at a time: the last pages come from the spares.
    let big = fs.create(ROOT_INO, b"big", 0o644, 0, 0).unwrap().ino;
    let mut pages = 0u64;
    loop {
        match fs.write(big, pages << 12, &[3u8; 4096]) {
            Ok(_) => pages += 1,
            Err(FsError::NoSpace) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(fs.stats().spare_blocks, 0, "spares left at ENOSPC");
    assert_eq!(fs.statfs().blocks_avail, 0);
    // The overwritten files still read their second write.
    for &f in &files {
        let mut b = [0u8; 4096];
        fs.read(f, 0, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 2));
    }
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

/// A file system whose data space is used up exactly, no write having found it
/// short, so 50 files' spares are still held: only they are available.
fn full_but_the_spares() -> (common::Img, mnemofs::Fs, Vec<u64>) {
    let img = common::fresh(32 << 20);
    let fs = mnemofs::mount(&img.path, &opts(LockMode::Inode)).unwrap();
    let files = overwritten_once(&fs, 50);
    assert_eq!(fs.stats().spare_blocks, 50);
    // Take every data block there is, spares aside, in one fallocate (its file
    // created first: a new file's log page comes out of the same free space).
    let big = fs.create(ROOT_INO, b"big", 0o644, 0, 0).unwrap().ino;
    let avail = fs.statfs().blocks_avail - fs.stats().spare_blocks;
    fs.fallocate(big, 0, avail << 12, 0).unwrap();
    assert_eq!(
        fs.stats().spare_blocks,
        50,
        "the fallocate took spares: the setup did not use up the space exactly"
    );
    assert_eq!(
        fs.statfs().blocks_avail,
        50,
        "only the spares are available"
    );
    (img, fs, files)
}

fn unmount_clean(img: &common::Img, fs: mnemofs::Fs) {
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

/// A symlink's target block is a data allocation: short of space it takes the
/// spares back instead of failing with ENOSPC while `statfs` counts them free.
#[test]
fn a_symlink_short_of_space_takes_the_spares_back() {
    let (img, fs, _) = full_but_the_spares();
    fs.symlink(ROOT_INO, b"link", b"s0", 0, 0).unwrap();
    let l = fs.lookup(ROOT_INO, b"link").unwrap().ino;
    assert_eq!(fs.readlink(l).unwrap(), b"s0");
    assert!(fs.stats().spare_blocks < 50);
    unmount_clean(&img, fs);
}

/// A device full to the last block, spares and all: a shrink to within a page still
/// succeeds (the copy of that page is borrowed from the metadata reserve and paid
/// back by the page it replaces), as a truncate frees space on a full Linux file
/// system.
#[test]
fn a_shrink_on_a_full_device_succeeds() {
    let img = common::fresh(32 << 20);
    let fs = mnemofs::mount(&img.path, &opts(LockMode::Inode)).unwrap();
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    let mut pages = 0u64;
    loop {
        match fs.write(f, pages << 12, &[5u8; 4096]) {
            Ok(_) => pages += 1,
            Err(FsError::NoSpace) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(fs.statfs().blocks_avail, 0);
    assert_eq!(fs.stats().spare_blocks, 0);
    let cut = ((pages - 1) << 12) + 100;
    fs.setattr(
        f,
        &mnemofs::SetAttr {
            size: Some(cut),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(fs.getattr(f).unwrap().size, cut);
    let mut b = [0u8; 4096];
    assert_eq!(fs.read(f, (pages - 1) << 12, &mut b).unwrap(), 100);
    assert!(b[..100].iter().all(|&x| x == 5));
    // The reserve was paid back: the same space is available as before the cut.
    assert_eq!(fs.statfs().blocks_avail, 0);
    // Extended again, the page reads zeros past the cut.
    fs.setattr(
        f,
        &mnemofs::SetAttr {
            size: Some(pages << 12),
            ..Default::default()
        },
    )
    .unwrap();
    fs.read(f, (pages - 1) << 12, &mut b).unwrap();
    assert!(b[..100].iter().all(|&x| x == 5));
    assert!(b[100..].iter().all(|&x| x == 0));
    unmount_clean(&img, fs);
}
