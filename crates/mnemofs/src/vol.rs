//! The engine's handle on its volume: every PM access of the engine goes through
//! [`Vol`].
//!
//! `Vol` wraps the `pm` layer's region and re-exports its safe operations (8- and
//! 16-byte atomic stores, flushes, fences, counters) through `Deref`. The byte-copy
//! accessors (`read`, `write`, `write_nt`, `zero`) copy shared memory that other
//! threads of the engine may use; they are safe methods here only because `Vol` is
//! private to the engine crate, whose locking discipline (docs/ARCHITECTURE.md,
//! "Access model") keeps a byte from being written while another thread reads or
//! writes it: a data page or zone slot is written only by the holder of its range
//! lock (or before it is published), a log page only in slots reserved under the
//! inode's state lock, an inode slot only under its inode's lock or the journal.
//! No safe code outside this crate can reach them.

use pm::Pm;
use std::ops::Deref;

/// The engine's volume (one device today).
#[repr(transparent)]
pub(crate) struct Vol(Pm);

impl Vol {
    /// Takes over a mapped region.
    pub fn new(pm: Pm) -> Vol {
        Vol(pm)
    }

    /// Views a borrowed region as a volume (formatting and checking a region the
    /// caller keeps).
    pub fn of(pm: &Pm) -> &Vol {
        // SAFETY: `Vol` is `repr(transparent)` over `Pm`, so the two references have
        // the same layout and validity; the lifetime is carried over.
        unsafe { &*(pm as *const Pm as *const Vol) }
    }

    /// Copies `buf.len()` bytes at `off` into `buf`.
    #[inline]
    pub fn read(&self, off: u64, buf: &mut [u8]) {
        self.0.read(off, buf)
    }

    /// Cached store of `data` at `off`; durable after `flush` and `fence`.
    #[inline]
    pub fn write(&self, off: u64, data: &[u8]) {
        self.0.write(off, data)
    }

    /// Non-temporal store of `data` at `off`; durable at the next `fence`.
    #[inline]
    pub fn write_nt(&self, off: u64, data: &[u8]) {
        self.0.write_nt(off, data)
    }

    /// Cached store of `len` zero bytes at `off`.
    #[inline]
    pub fn zero(&self, off: u64, len: u64) {
        self.0.zero(off, len)
    }
}

impl Deref for Vol {
    type Target = Pm;
    fn deref(&self) -> &Pm {
        &self.0
    }
}
