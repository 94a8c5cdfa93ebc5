//! Scenario: the file-system label (mkfs, FS_IOC_GETFSLABEL/SETFSLABEL) is kept in
//! two copies, each whole or not by its checksum; a change writes block 1's copy,
//! then block 0's. Every state a crash can leave — either copy torn, or the two
//! whole and different — mounts with the old or the new label, never another, and
//! mount makes both copies whole and equal again. Older images have no label.

mod common;
use mnemofs::format::{decode_label, encode_label, BLOCK, LABEL_SIZE, SB_LABEL_OFF};
use mnemofs::{FsError, MkfsOptions};
use std::path::Path;

/// Block 0's copy, block 1's copy, and the labels a mount may show.
type State = ([u8; LABEL_SIZE], [u8; LABEL_SIZE], &'static [&'static [u8]]);

fn copy_at(b: u64) -> usize {
    (b * BLOCK + SB_LABEL_OFF) as usize
}

fn labelled(label: &[u8]) -> common::Img {
    let img = common::fresh_empty();
    mnemofs::mkfs(
        &img.path,
        &MkfsOptions {
            size: 32 << 20,
            cpus: 2,
            label: label.to_vec(),
            ..Default::default()
        },
    )
    .unwrap();
    img
}

fn edit(p: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let mut b = std::fs::read(p).unwrap();
    f(&mut b);
    std::fs::write(p, b).unwrap();
}

fn copies(p: &Path) -> [Option<Vec<u8>>; 2] {
    let b = std::fs::read(p).unwrap();
    [0, 1].map(|blk| decode_label(&b[copy_at(blk)..copy_at(blk) + LABEL_SIZE]))
}

#[test]
fn label_survives_remounts_and_every_crash_state() {
    let img = labelled(b"pm-data");
    let fs = common::mount(&img);
    assert_eq!(fs.label(), b"pm-data");
    fs.set_label(b"scratch").unwrap();
    assert_eq!(fs.label(), b"scratch");
    assert!(matches!(
        fs.set_label(&[b'x'; 256]),
        Err(FsError::Invalid(_))
    ));
    assert!(matches!(fs.set_label(b"a\0b"), Err(FsError::Invalid(_))));
    fs.unmount().unwrap();
    let fs = common::mount(&img);
    assert_eq!(fs.label(), b"scratch");
    fs.unmount().unwrap();

    let old = encode_label(b"scratch");
    let new = encode_label(b"renamed");
    let torn = |c: &[u8; LABEL_SIZE]| {
        let mut t = *c;
        // Half of the new copy landed: the first 8-byte words only.
        t[..64].copy_from_slice(&new[..64]);
        t
    };
    // (block 0, block 1) after a crash during a change from "scratch" to
    // "renamed", and the labels the mount may show.
    let states: [State; 4] = [
        (old, torn(&old), &[b"scratch"]),
        (old, new, &[b"scratch", b"renamed"]),
        (torn(&old), new, &[b"renamed"]),
        (new, new, &[b"renamed"]),
    ];
    for (i, (b0, b1, allowed)) in states.iter().enumerate() {
        edit(&img.path, |b| {
            b[copy_at(0)..copy_at(0) + LABEL_SIZE].copy_from_slice(b0);
            b[copy_at(1)..copy_at(1) + LABEL_SIZE].copy_from_slice(b1);
        });
        let fs = common::mount(&img);
        let got = fs.label();
        assert!(
            allowed.contains(&got.as_slice()),
            "state {i}: label {:?}",
            String::from_utf8_lossy(&got)
        );
        fs.unmount().unwrap();
        let [p, r] = copies(&img.path);
        assert_eq!(
            p.as_deref(),
            Some(got.as_slice()),
            "state {i}: block 0 after mount"
        );
        assert_eq!(
            r.as_deref(),
            Some(got.as_slice()),
            "state {i}: block 1 after mount"
        );
    }
    // Both copies damaged (no crash leaves that): fsck names it.
    edit(&img.path, |b| {
        b[copy_at(0) + 3] ^= 0xff;
        b[copy_at(1) + 3] ^= 0xff;
    });
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(
        r.problems.iter().any(|p| p.contains("label")),
        "{:?}",
        r.problems
    );
}

#[test]
fn an_image_older_than_version_8_has_no_label() {
    let img = labelled(b"");
    common::set_version(&img, 7);
    let fs = common::mount(&img);
    assert_eq!(fs.label(), b"");
    assert!(matches!(fs.set_label(b"x"), Err(FsError::Unsupported(_))));
    fs.unmount().unwrap();
    assert!(mnemofs::fsck(&img.path).unwrap().problems.is_empty());
}
