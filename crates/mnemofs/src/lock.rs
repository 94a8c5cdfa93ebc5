//! The per-file data lock abstraction (DESIGN.md §4).
//!
//! Callers ask for a byte range, shared or exclusive; the mode decides how much is
//! actually locked. Mode `inode` (NOVA's baseline) locks the whole file with one
//! reader-writer lock. The range-lock issue adds `interval` and `segment` behind the
//! same calls.

use crate::types::LockMode;
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

pub(crate) struct FileLock {
    inode: RwLock<()>,
}

/// Held range lock; released on drop.
pub(crate) enum RangeGuard<'a> {
    Shared(#[allow(dead_code)] RwLockReadGuard<'a, ()>),
    Exclusive(#[allow(dead_code)] RwLockWriteGuard<'a, ()>),
}

impl FileLock {
    pub fn new(mode: LockMode) -> FileLock {
        match mode {
            LockMode::Inode => FileLock {
                inode: RwLock::new(()),
            },
        }
    }

    /// Locks `[start, end)` for reading.
    pub fn read(&self, _start: u64, _end: u64) -> RangeGuard<'_> {
        RangeGuard::Shared(self.inode.read())
    }

    /// Locks `[start, end)` for writing (`end == u64::MAX`: to the end of the file,
    /// as appends, extending writes and truncates need).
    pub fn write(&self, _start: u64, _end: u64) -> RangeGuard<'_> {
        RangeGuard::Exclusive(self.inode.write())
    }
}
