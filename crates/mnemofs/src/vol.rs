//! The engine's handle on its volume: every PM access of the engine goes through
//! [`Vol`].
//!
//! `Vol` wraps the `pm` layer's [`Volume`] (one global offset space over its
//! devices; one device today) and forwards its operations, each addressed by a
//! [`PmOff`] (`addr`): 8-byte atomic loads and stores, flushes, fences,
//! counters. The byte-copy
//! accessors (`read`, `write`, `write_nt`, `zero`) and the 16-byte stores are
//! `unsafe` in `pm`: they copy shared memory that other threads of the engine may
//! use. They are safe methods here only because `Vol` is private to the engine
//! crate, whose locking discipline (docs/ARCHITECTURE.md, "Access model") keeps a
//! byte from being written while another thread reads or writes it: a data page or
//! zone slot is written only by the holder of its range lock (or before it is
//! published), a log page only in slots reserved under the inode's state lock, an
//! inode slot only under its inode's lock or the journal, a LAWN descriptor only
//! under its page's exclusive range lock (read only at mount). No safe code outside this
//! crate can reach them.
//!
//! `Vol::with_borrowed` lends a region the caller keeps (`mkfs_pm`, `fsck_private`)
//! as a volume for one call, so no other thread can use it while they write it.

use crate::addr::PmOff;
use pm::{CounterSnapshot, FlushKind, MapMode, Marker, Pm, PmProfile, Store16, Volume};

/// The engine's volume (one device today; `pm::Volume` maps global offsets).
#[repr(transparent)]
pub(crate) struct Vol(Volume);

impl Vol {
    /// Takes over a mapped region as a one-device volume.
    #[cfg(test)]
    pub fn new(pm: Pm) -> Vol {
        Vol(Volume::single(pm))
    }

    /// Takes over a volume of one or more devices.
    pub fn from_volume(v: Volume) -> Vol {
        Vol(v)
    }

    /// The `pm` volume (devices, their parts of the offset space).
    pub fn volume(&self) -> &Volume {
        &self.0
    }

    /// Gives the `pm` volume back.
    pub fn into_volume(self) -> Volume {
        self.0
    }

    /// Lends a region the caller keeps to `f` as a one-device volume (formatting and
    /// checking a region the caller keeps): the region is moved into the volume for
    /// the call and back afterwards, so no other thread can reach it meanwhile.
    pub fn with_borrowed<R>(pm: &mut Pm, f: impl FnOnce(&Vol) -> R) -> Result<R, pm::PmError> {
        Volume::with_borrowed(pm, |v| f(Vol::from_ref(v)))
    }

    fn from_ref(v: &Volume) -> &Vol {
        // SAFETY: `Vol` is `repr(transparent)` over `Volume`, so the two references
        // have the same layout and validity; the lifetime is carried over.
        unsafe { &*(v as *const Volume as *const Vol) }
    }

    /// Copies `buf.len()` bytes at `off` into `buf`.
    #[inline]
    pub fn read(&self, off: PmOff, buf: &mut [u8]) {
        // SAFETY: the engine's locking discipline (module doc): no other thread
        // writes bytes the engine reads without holding the lock that covers them.
        unsafe { self.0.read(off.get(), buf) }
    }

    /// Cached store of `data` at `off`; durable after `flush` and `fence`.
    #[inline]
    pub fn write(&self, off: PmOff, data: &[u8]) {
        // SAFETY: the engine's locking discipline (module doc): the engine writes a
        // byte only while holding the lock (or reservation) that keeps every other
        // thread off it.
        unsafe { self.0.write(off.get(), data) }
    }

    /// Non-temporal store of `data` at `off`; durable at the next `fence`.
    #[inline]
    pub fn write_nt(&self, off: PmOff, data: &[u8]) {
        // SAFETY: as for `write`.
        unsafe { self.0.write_nt(off.get(), data) }
    }

    /// Cached store of `len` zero bytes at `off`.
    #[inline]
    pub fn zero(&self, off: PmOff, len: u64) {
        // SAFETY: as for `write`.
        unsafe { self.0.zero(off.get(), len) }
    }

    /// Stores the aligned 16-byte `v` at `off` the way `kind` says, durable at the
    /// next fence (LAWN descriptors).
    #[inline]
    pub fn store_u128_durable(&self, kind: Store16, off: PmOff, v: u128) {
        // SAFETY: one thread at a time stores a given descriptor: a run's descriptor
        // is set or cleared only by a holder of the exclusive range lock of the run's
        // page (the writer, a write-back, a block free after its commit), or by
        // recovery before mount returns; a run's slots return to the free pool only
        // after the store that clears its descriptor is fenced, and a later owner
        // takes them under the same sub-zone lock, so its store comes after. Only
        // mount reads descriptors (module doc).
        unsafe { self.0.store_u128_durable(kind, off.get(), v) }
    }

    /// Which [`Store16`] way costs less, measured over the clear descriptors at
    /// `offs`.
    pub fn calibrate_store16(&self, offs: &[PmOff]) -> Store16 {
        let offs: Vec<u64> = offs.iter().map(|o| o.get()).collect();
        // SAFETY: called at mount, before `Fs` exists, so no other thread can use the
        // volume yet.
        unsafe { self.0.calibrate_store16(&offs) }
    }
}

impl Vol {
    /// Atomic 8-byte load of the aligned word at `off`.
    #[inline]
    pub fn read_u64(&self, off: PmOff) -> u64 {
        self.0.read_u64(off.get())
    }

    /// Atomic 8-byte store of the aligned word at `off` (cached; durable after
    /// `flush` and `fence`).
    #[inline]
    pub fn store_u64(&self, off: PmOff, v: u64) {
        self.0.store_u64(off.get(), v)
    }

    /// Writes back the cache lines of `[off, off + len)`.
    #[inline]
    pub fn flush(&self, off: PmOff, len: u64) {
        self.0.flush(off.get(), len)
    }

    /// Store fence: every earlier store and write-back of this thread is durable
    /// before any later store.
    #[inline]
    pub fn fence(&self) {
        self.0.fence()
    }

    /// Starts loading the line at `off` into the CPU cache.
    #[inline]
    pub fn prefetch(&self, off: PmOff) {
        self.0.prefetch(off.get())
    }

    /// Gives back the memory behind `[off, off + len)` of free space (FITRIM;
    /// `pm::Volume::discard`); the bytes given back.
    pub fn discard(&self, off: PmOff, len: u64) -> std::io::Result<u64> {
        self.0.discard(off.get(), len)
    }

    /// Maps the pages of `[off, off + len)` in now.
    pub fn populate(&self, off: PmOff, len: u64) {
        self.0.populate(off.get(), len)
    }

    /// Bytes of the volume.
    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// PM counters of the whole volume.
    pub fn counters(&self) -> CounterSnapshot {
        self.0.counters()
    }

    /// PM counters of the calling thread.
    pub fn thread_counters(&self) -> CounterSnapshot {
        self.0.thread_counters()
    }

    /// Passes an operation marker to the tracer.
    pub fn marker(&self, m: Marker) {
        self.0.marker(m)
    }

    /// The latency profile charged.
    pub fn profile(&self) -> PmProfile {
        self.0.profile()
    }

    /// How the volume is mapped.
    pub fn map_mode(&self) -> MapMode {
        self.0.map_mode()
    }

    /// Which pages map the volume, measured from smaps.
    pub fn map_report(&self) -> pm::MapReport {
        self.0.map_report()
    }

    /// The write-back instruction in use.
    pub fn flush_kind(&self) -> FlushKind {
        self.0.flush_kind()
    }

    /// Pushes the mapping to its files (unmount).
    pub fn sync_to_file(&self) {
        self.0.sync_to_file()
    }
}
