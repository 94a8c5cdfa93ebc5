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

pub fn mount(img: &Img) -> Fs {
    mnemofs::mount(&img.path, &opts()).unwrap()
}
