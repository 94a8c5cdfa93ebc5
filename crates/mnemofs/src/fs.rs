//! The engine's public handle: [`Fs`], `mkfs` and `mount`.

use crate::error::Result;
use crate::types::*;
use std::path::Path;

/// A mounted mnemofs. Safe for concurrent callers (`&self` everywhere).
pub struct Fs {}

/// Formats `path` (created when missing) as an empty mnemofs.
pub fn mkfs(path: &Path, opts: &MkfsOptions) -> Result<()> {
    let _ = (path, opts);
    todo!()
}

/// Mounts the image at `path`, running recovery if it was not cleanly unmounted.
pub fn mount(path: &Path, opts: &MountOptions) -> Result<Fs> {
    let _ = (path, opts);
    todo!()
}

#[allow(unused_variables)]
impl Fs {
    /// Saves the free lists, marks the image clean and unmaps it.
    pub fn unmount(self) -> Result<()> { todo!() }
    pub fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> { todo!() }
    pub fn getattr(&self, ino: Ino) -> Result<Attr> { todo!() }
    pub fn setattr(&self, ino: Ino, req: &SetAttr) -> Result<Attr> { todo!() }
    /// `mode` includes the `S_IFMT` bits (regular, fifo, socket, char/block device).
    pub fn mknod(&self, parent: Ino, name: &[u8], mode: u32, rdev: u32, uid: u32, gid: u32) -> Result<Attr> { todo!() }
    /// Creates a regular file; `mode` holds the permission bits.
    pub fn create(&self, parent: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> { todo!() }
    pub fn mkdir(&self, parent: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> { todo!() }
    pub fn unlink(&self, parent: Ino, name: &[u8]) -> Result<()> { todo!() }
    pub fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<()> { todo!() }
    pub fn rename(&self, parent: Ino, name: &[u8], newparent: Ino, newname: &[u8], flags: RenameFlags) -> Result<()> { todo!() }
    pub fn link(&self, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> { todo!() }
    pub fn symlink(&self, parent: Ino, name: &[u8], target: &[u8], uid: u32, gid: u32) -> Result<Attr> { todo!() }
    pub fn readlink(&self, ino: Ino) -> Result<Vec<u8>> { todo!() }
    /// Entries after `offset` (0 = from the start; "." and ".." come first), at most `max`.
    pub fn readdir(&self, ino: Ino, offset: u64, max: usize) -> Result<Vec<DirEntry>> { todo!() }
    /// Pins the inode: an unlinked file stays readable and writable until `release`.
    pub fn open(&self, ino: Ino) -> Result<()> { todo!() }
    pub fn release(&self, ino: Ino) -> Result<()> { todo!() }
    pub fn read(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> { todo!() }
    pub fn write(&self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize> { todo!() }
    /// O_APPEND: writes at the end of file atomically; returns the offset written at.
    pub fn append(&self, ino: Ino, data: &[u8]) -> Result<u64> { todo!() }
    /// `mode`: 0 or `FALLOC_FL_KEEP_SIZE` (allocate), `FALLOC_FL_PUNCH_HOLE|KEEP_SIZE`.
    pub fn fallocate(&self, ino: Ino, offset: u64, len: u64, mode: i32) -> Result<()> { todo!() }
    /// Every returned operation is already durable; kept for API symmetry.
    pub fn fsync(&self, ino: Ino) -> Result<()> { todo!() }
    pub fn statfs(&self) -> StatFs { todo!() }
    pub fn stats(&self) -> FsStats { todo!() }
    pub fn pm_counters(&self) -> pm::CounterSnapshot { todo!() }
}
