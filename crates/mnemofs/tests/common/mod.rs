//! Helpers shared by the engine's integration tests.
#![allow(dead_code)]

use mnemofs::{Fs, MkfsOptions, MountOptions};
use std::path::{Path, PathBuf};

pub struct Img {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

/// A temporary directory and an image path in it, not formatted yet.
pub fn fresh_empty() -> Img {
    let dir = if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let path = dir.path().join("img");
    Img { dir, path }
}

/// A fresh image of `size` bytes in a temporary directory (on /dev/shm when present).
pub fn fresh(size: u64) -> Img {
    let dir = if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
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

pub fn mount(img: &Img) -> Fs {
    mnemofs::mount(&img.path, &opts()).unwrap()
}
