//! Scenario: checksum-valid log entries with hostile values (the three cases of the
//! hostile-images issue, found by hand on a 64 MiB image holding one 20,000-byte
//! file). Each image is either refused by mount with a clear error and named by
//! fsck, or mounted quickly with every file readable; fsck and mount never disagree.

mod common;
use mnemofs::format::{
    commit_word, get_u64, parse_commit, put_u64, CommitState, Entry, Geometry, BLOCK,
    ENTRY_TYPE_OFF, ET_WRITE, INO_HEAD_OFF, UNIT,
};
use mnemofs::{FsError, ROOT_INO};
use std::sync::mpsc;
use std::time::Duration;

/// A 64 MiB image holding one 20,000-byte file `f`; returns it and the file's inode.
fn one_file() -> (common::Img, u64) {
    let img = common::fresh(64 << 20);
    let fs = common::mount(&img);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
    let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    fs.write(f.ino, 0, &data).unwrap();
    fs.unmount().unwrap();
    (img, f.ino)
}

/// Rewrites the first Write entry of `ino`'s log with `edit`, recomputing the
/// entry's commit word (so the CRC does not catch the edit).
fn edit_first_write(img: &common::Img, ino: u64, edit: impl FnOnce(&mut Entry)) {
    let mut bytes = std::fs::read(&img.path).unwrap();
    let geo = Geometry::decode(&bytes[..128], bytes.len() as u64).unwrap();
    let slot = geo.inode_off(ino).get() as usize;
    let head = get_u64(&bytes, slot + INO_HEAD_OFF as usize);
    let mut pos = (head * BLOCK) as usize;
    loop {
        let units = match parse_commit(get_u64(&bytes, pos)) {
            CommitState::Committed { units, .. } => units,
            s => panic!("no committed Write entry before {s:?} at {pos:#x}"),
        };
        let len = (units * UNIT) as usize;
        if bytes[pos + ENTRY_TYPE_OFF] == ET_WRITE {
            let mut e = Entry::decode(&bytes[pos..pos + len]).unwrap();
            edit(&mut e);
            let mut body = e.encode();
            let w = commit_word(&body);
            put_u64(&mut body, 0, w);
            bytes[pos..pos + len].copy_from_slice(&body);
            std::fs::write(&img.path, &bytes).unwrap();
            return;
        }
        pos += len;
    }
}

/// Runs `f` on another thread and fails the test if it has not returned within a
/// generous bound: a hang detector (the old code spent 17 s replaying one entry),
/// not a timing measurement.
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("{what} did not finish within 10 s"))
}

/// fsck names a problem and mount refuses the image with a `Corrupt` error that
/// says what is wrong.
fn refused(img: &common::Img, says: &str) {
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(!r.is_clean(), "fsck called a hostile image clean");
    assert!(
        r.problems.iter().any(|p| p.contains(says)),
        "fsck problems {:?} do not mention {says:?}",
        r.problems
    );
    match mnemofs::mount(&img.path, &common::opts()) {
        Err(FsError::Corrupt(m)) => assert!(m.contains(says), "{m}"),
        Err(e) => panic!("mount failed with a non-corruption error: {e}"),
        Ok(_) => panic!("mount accepted a hostile image"),
    }
}

#[test]
fn a_write_past_the_largest_file_is_refused() {
    let (img, ino) = one_file();
    edit_first_write(&img, ino, |e| {
        if let Entry::Write { pgoff, .. } = e {
            *pgoff = (1 << 63) - 1;
        }
    });
    refused(&img, "past the largest file");
}

#[test]
fn a_size_past_the_largest_file_is_refused() {
    let (img, ino) = one_file();
    edit_first_write(&img, ino, |e| {
        if let Entry::Write { size_after, .. } = e {
            *size_after = u64::MAX;
        }
    });
    refused(&img, "past the largest file");
}

#[test]
fn a_hole_punch_of_four_billion_pages_mounts_at_once() {
    let (img, ino) = one_file();
    edit_first_write(&img, ino, |e| {
        if let Entry::Write { block, npages, .. } = e {
            *block = 0;
            *npages = u32::MAX;
        }
    });
    // A punch of every page of a 16 TiB file is a value a file system can write: it
    // replays in time proportional to the pages it unmaps.
    let path = img.path.clone();
    let r = bounded("fsck", move || mnemofs::fsck(&path).unwrap());
    // The punched pages' blocks are still in the saved free list's "used" part.
    if !r.is_clean() {
        assert!(
            r.problems.iter().all(|p| p.contains("leaked")),
            "{:?}",
            r.problems
        );
    }
    let path = img.path.clone();
    let fs = bounded("mount", move || {
        mnemofs::mount(&path, &common::opts()).unwrap()
    });
    let a = fs.lookup(ROOT_INO, b"f").unwrap();
    assert_eq!(a.ino, ino);
    assert_eq!(a.size, 20_000);
    let mut buf = vec![0xffu8; 20_000];
    assert_eq!(fs.read(ino, 0, &mut buf).unwrap(), 20_000);
    assert!(buf.iter().all(|&b| b == 0), "a punched file reads as zeros");
    fs.unmount().unwrap();
    // After a mount and a clean unmount the free list is rebuilt from the logs.
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}
