//! Helpers shared by the engine's integration tests.
#![allow(dead_code)]

use mnemofs::{Fs, MkfsOptions, MountOptions};
use std::path::PathBuf;

pub struct Img {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

/// A temporary directory (in `pm::scratch_dir()`) and an image path in it, not
/// formatted yet.
pub fn fresh_empty() -> Img {
    let dir = tempfile::tempdir_in(pm::scratch_dir()).unwrap();
    let path = dir.path().join("img");
    Img { dir, path }
}

/// A fresh image of `size` bytes in a temporary directory (in `pm::scratch_dir()`).
pub fn fresh(size: u64) -> Img {
    let dir = tempfile::tempdir_in(pm::scratch_dir()).unwrap();
    let path = dir.path().join("img");
    mnemofs::mkfs(
        &path,
        &MkfsOptions {
            size,
            cpus: 2,
            inodes: 0,
            force: false,
            ..Default::default()
        },
    )
    .unwrap();
    Img { dir, path }
}

pub fn opts() -> MountOptions {
    MountOptions {
        exclusive: false,
        ..Default::default()
    }
}

/// Rewrites the format version of `img`'s superblock and its replica (with their
/// checksums), as an image made by an older build would carry.
pub fn set_version(img: &Img, version: u32) {
    use mnemofs::format::{crc, put_u32, BLOCK, SB_CSUM_LEN, SB_CSUM_OFF, SB_VERSION_OFF};
    let mut b = std::fs::read(&img.path).unwrap();
    for blk in [0u64, 1] {
        let at = (blk * BLOCK) as usize;
        put_u32(&mut b, at + SB_VERSION_OFF, version);
        let c = crc(&b[at..at + SB_CSUM_LEN]);
        put_u32(&mut b, at + SB_CSUM_OFF, c);
    }
    std::fs::write(&img.path, b).unwrap();
}

pub fn mount(img: &Img) -> Fs {
    mnemofs::mount(&img.path, &opts()).unwrap()
}

/// Rounds of four threads overwriting pages of their own of file `ino` (the first 64
/// pages; page p belongs to thread p % 4), `writes` writes each, thread t writing the
/// byte `round + t`, until the file is seen shared (`Fs::write_contention`) or
/// `rounds` have run. Returns the round it was seen shared in.
pub fn write_until_shared(
    fs: &std::sync::Arc<Fs>,
    ino: mnemofs::Ino,
    rounds: u8,
    writes: u64,
) -> Option<u8> {
    for round in 0..rounds {
        let ths: Vec<_> = (0..4u64)
            .map(|t| {
                let fs = fs.clone();
                std::thread::spawn(move || {
                    for i in 0..writes {
                        let pg = (i * 4 + t) % 64;
                        fs.write(ino, pg * 4096, &[round.wrapping_add(t as u8); 4096])
                            .unwrap();
                    }
                })
            })
            .collect();
        for th in ths {
            th.join().unwrap();
        }
        if fs.write_contention(ino).unwrap() > 0 {
            return Some(round);
        }
    }
    None
}
