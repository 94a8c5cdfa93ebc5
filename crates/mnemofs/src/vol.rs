//! The engine's handle on its volume: every PM access of the engine goes through
//! [`Vol`].
//!
//! `Vol` wraps the `pm` layer's [`Volume`] (one global offset space over its
//! devices; one device today) and re-exports its safe operations (8-byte
//! atomic loads and stores, flushes, fences, counters) through `Deref`. The byte-copy
//! accessors (`read`, `write`, `write_nt`, `zero`) and the 16-byte stores are
//! `unsafe` in `pm`: they copy shared memory that other threads of the engine may
//! use. They are safe methods here only because `Vol` is private to the engine
//! crate, whose locking discipline (docs/ARCHITECTURE.md, "Access model") keeps a
//! byte from being written while another thread reads or writes it: a data page or
//! zone slot is written only by the holder of its range lock (or before it is
//! published), a log page only in slots reserved under the inode's state lock, an
//! inode slot only under its inode's lock or the journal, a LAWN descriptor only by
//! the owner of its slot run (read only by recovery). No safe code outside this
//! crate can reach them.
//!
//! `Vol::of` views a region the caller lends (`mkfs_pm`, `fsck_private`): those
//! functions write it through a shared borrow, so they rely on the caller not using
//! the region from another thread meanwhile, which the borrow alone does not prove.

use pm::{Pm, Store16, Volume};
use std::ops::Deref;

/// The engine's volume (one device today; `pm::Volume` maps global offsets).
#[repr(transparent)]
pub(crate) struct Vol(Volume);

impl Vol {
    /// Takes over a mapped region as a one-device volume.
    pub fn new(pm: Pm) -> Vol {
        Vol(Volume::single(pm))
    }

    /// Views a borrowed region as a volume (formatting and checking a region the
    /// caller keeps).
    pub fn of(pm: &Pm) -> &Vol {
        let v = Volume::of(pm);
        // SAFETY: `Vol` is `repr(transparent)` over `Volume`, so the two references
        // have the same layout and validity; the lifetime is carried over.
        unsafe { &*(v as *const Volume as *const Vol) }
    }

    /// Copies `buf.len()` bytes at `off` into `buf`.
    #[inline]
    pub fn read(&self, off: u64, buf: &mut [u8]) {
        // SAFETY: the engine's locking discipline (module doc): no other thread
        // writes bytes the engine reads without holding the lock that covers them.
        unsafe { self.0.read(off, buf) }
    }

    /// Cached store of `data` at `off`; durable after `flush` and `fence`.
    #[inline]
    pub fn write(&self, off: u64, data: &[u8]) {
        // SAFETY: the engine's locking discipline (module doc): the engine writes a
        // byte only while holding the lock (or reservation) that keeps every other
        // thread off it.
        unsafe { self.0.write(off, data) }
    }

    /// Non-temporal store of `data` at `off`; durable at the next `fence`.
    #[inline]
    pub fn write_nt(&self, off: u64, data: &[u8]) {
        // SAFETY: as for `write`.
        unsafe { self.0.write_nt(off, data) }
    }

    /// Cached store of `len` zero bytes at `off`.
    #[inline]
    pub fn zero(&self, off: u64, len: u64) {
        // SAFETY: as for `write`.
        unsafe { self.0.zero(off, len) }
    }

    /// Stores the aligned 16-byte `v` at `off` the way `kind` says, durable at the
    /// next fence (LAWN descriptors).
    #[inline]
    pub fn store_u128_durable(&self, kind: Store16, off: u64, v: u128) {
        // SAFETY: one thread at a time stores a given descriptor: the writer that
        // reserved its slot run, later the thread that retires the run (taken out of
        // the sub-zone under its lock first), or recovery before mount returns; and
        // descriptors are read only by recovery, before mount returns (module doc).
        unsafe { self.0.store_u128_durable(kind, off, v) }
    }

    /// Which [`Store16`] way costs less, measured over the clear descriptors at
    /// `offs`.
    pub fn calibrate_store16(&self, offs: &[u64]) -> Store16 {
        // SAFETY: called at mount, before `Fs` exists, so no other thread can use the
        // volume yet.
        unsafe { self.0.calibrate_store16(offs) }
    }
}

impl Deref for Vol {
    type Target = Volume;
    fn deref(&self) -> &Volume {
        &self.0
    }
}
