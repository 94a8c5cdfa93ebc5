//! Scenario: fsck is clean on fresh and heavily used images, and names the problem
//! (while mount returns an error, never panics) when one byte of a log entry, an
//! inode or the superblocks is flipped, or the image is random garbage.

mod common;
use mnemofs::format::{Geometry, BLOCK, INO_HEAD_OFF, INO_TAIL_OFF};
use mnemofs::{FsError, ROOT_INO};
use std::io::{Read, Seek, SeekFrom, Write};

fn flip(path: &std::path::Path, off: u64) {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.seek(SeekFrom::Start(off)).unwrap();
    f.read_exact(&mut b).unwrap();
    b[0] ^= 0x20;
    f.seek(SeekFrom::Start(off)).unwrap();
    f.write_all(&b).unwrap();
}

fn geometry(path: &std::path::Path) -> Geometry {
    let bytes = std::fs::read(path).unwrap();
    Geometry::decode(&bytes[..128], bytes.len() as u64).unwrap()
}

fn used_image() -> (common::Img, u64) {
    let img = common::fresh(32 << 20);
    let fs = common::mount(&img);
    let mut last = 0;
    for i in 0..200u32 {
        let d = fs
            .mkdir(ROOT_INO, format!("d{i}").as_bytes(), 0o755, 0, 0)
            .unwrap();
        let f = fs.create(d.ino, b"f", 0o644, 0, 0).unwrap();
        fs.write(f.ino, (i as u64) * 100, &vec![i as u8; 5000])
            .unwrap();
        if i % 3 == 0 {
            fs.unlink(d.ino, b"f").unwrap();
        }
        last = f.ino;
    }
    fs.unmount().unwrap();
    (img, last)
}

#[test]
fn fresh_and_used_images_are_clean() {
    let img = common::fresh(32 << 20);
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    assert!(r.clean_unmount);
    let (img, _) = used_image();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    assert_eq!(r.directories, 201);
}

#[test]
fn flipped_byte_in_a_log_entry_is_named() {
    let (img, ino) = used_image();
    let g = geometry(&img.path);
    let bytes = std::fs::read(&img.path).unwrap();
    let slot = g.inode_off(ino).get() as usize;
    let head = u64::from_le_bytes(
        bytes[slot + INO_HEAD_OFF as usize..][..8]
            .try_into()
            .unwrap(),
    );
    // Byte 20 of the first entry (inside its payload).
    flip(&img.path, head * BLOCK + 20);
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(!r.is_clean());
    assert!(
        r.problems
            .iter()
            .any(|p| p.contains(&format!("inode {ino}")) && p.contains("checksum")),
        "{:?}",
        r.problems
    );
    match mnemofs::mount(&img.path, &common::opts()) {
        Err(FsError::Corrupt(m)) => assert!(m.contains("checksum"), "{m}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("mount of a corrupted image succeeded"),
    }
}

#[test]
fn flipped_byte_in_an_inode_is_named() {
    let (img, ino) = used_image();
    let g = geometry(&img.path);
    // Static part of the slot (inode number field).
    flip(&img.path, (g.inode_off(ino) + 25).get());
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(
        r.problems
            .iter()
            .any(|p| p.contains(&format!("inode {ino}"))),
        "{:?}",
        r.problems
    );
    assert!(matches!(
        mnemofs::mount(&img.path, &common::opts()),
        Err(FsError::Corrupt(_))
    ));
    // Tail word of another inode.
    let (img, ino) = used_image();
    flip(&img.path, (g.inode_off(ino) + INO_TAIL_OFF + 2).get());
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(
        r.problems
            .iter()
            .any(|p| p.contains(&format!("inode {ino}"))),
        "{:?}",
        r.problems
    );
}

#[test]
fn superblocks_and_garbage() {
    // One bad superblock: the replica takes over (fsck names it, mount works).
    let (img, _) = used_image();
    flip(&img.path, 20);
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(
        r.problems.iter().any(|p| p.contains("primary superblock")),
        "{:?}",
        r.problems
    );
    let fs = common::mount(&img);
    fs.unmount().unwrap();
    assert!(mnemofs::fsck(&img.path).unwrap().is_clean());
    // Both bad: unusable.
    flip(&img.path, 20);
    flip(&img.path, BLOCK + 20);
    assert!(matches!(mnemofs::fsck(&img.path), Err(FsError::Corrupt(_))));
    assert!(matches!(
        mnemofs::mount(&img.path, &common::opts()),
        Err(FsError::Corrupt(_))
    ));
    // Random bytes: not a mnemofs.
    let p = img.dir.path().join("random");
    let mut state = 0x1234_5678_9abc_def0u64;
    let junk: Vec<u8> = (0..(4 << 20))
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    std::fs::write(&p, junk).unwrap();
    assert!(matches!(mnemofs::fsck(&p), Err(FsError::NotMnemofs(_))));
    assert!(matches!(
        mnemofs::mount(&p, &common::opts()),
        Err(FsError::NotMnemofs(_))
    ));
}
