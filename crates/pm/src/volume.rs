//! The volume: one global PM offset space over one or more devices.
//!
//! Today a volume is exactly one device (a [`Pm`]), and a global offset is that
//! device's offset. `Volume` is the type the engine holds, so that a multi-device
//! volume (one device per NUMA node) can replace it without the engine changing.
//! Rules such a volume must keep:
//!
//! - **One place maps offsets.** Every method takes a global byte offset and maps
//!   it to (device, local offset) with [`Volume::locate`] (identity for one device);
//!   an access must not cross a device boundary.
//! - **Trace at the volume level, in global offsets.** The crash explorer's tracer
//!   sees global offsets. With one device, device offsets are global, so the
//!   device's tracer serves ([`Volume::set_tracer`] installs it there); a
//!   multi-device volume must report each store and flush itself, with its global
//!   offset, never a device's local one.
//! - **Fences are per thread, not per device**: `sfence` orders this thread's
//!   write-backs to every device, so one fence serves the whole volume.
//! - **Counters are summed over devices.**
//!
//! Access follows the crate's access model ("Access model" in the crate
//! documentation): the same methods are safe or `unsafe` as on [`Pm`], with the same
//! contracts, stated over global offsets.

use crate::counters::CounterSnapshot;
use crate::flush::FlushKind;
use crate::profile::PmProfile;
use crate::region::{MapMode, MapReport, Pm, PmError, Store16};
use crate::trace::{Marker, Tracer};
use std::sync::Arc;

/// One global PM offset space over its devices (one device today).
///
/// `repr(transparent)` over its single [`Pm`] only so that [`Volume::of`] can view a
/// borrowed region as a volume; both go away with multi-device volumes.
#[repr(transparent)]
pub struct Volume {
    dev: Pm,
}

impl Volume {
    /// A volume of one device: global offsets are the device's offsets.
    pub fn single(pm: Pm) -> Volume {
        Volume { dev: pm }
    }

    /// Views a borrowed region as a one-device volume (formatting or checking a
    /// region the caller keeps). Exists only while a volume is one device.
    pub fn of(pm: &Pm) -> &Volume {
        // SAFETY: `Volume` is `repr(transparent)` over `Pm`, so the two references
        // have the same layout and validity; the lifetime is carried over.
        unsafe { &*(pm as *const Pm as *const Volume) }
    }

    /// The device holding global offset `off`, and `off` within it. The only
    /// place global offsets are mapped (identity for one device).
    #[inline]
    pub fn locate(&self, off: u64) -> (&Pm, u64) {
        (&self.dev, off)
    }

    /// Installs (or removes) the tracer that sees every later event, in global
    /// offsets (one device: the device's offsets are global).
    pub fn set_tracer(&mut self, tracer: Option<Arc<dyn Tracer>>) {
        self.dev.set_tracer(tracer);
    }

    /// Sets the latency profile charged from now on, on every device.
    pub fn set_profile(&mut self, p: PmProfile) {
        self.dev.set_profile(p);
    }

    /// The latency profile in force.
    pub fn profile(&self) -> PmProfile {
        self.dev.profile()
    }

    /// Size of the global offset space in bytes.
    #[inline]
    pub fn len(&self) -> u64 {
        self.dev.len()
    }

    /// Whether the volume has no bytes.
    pub fn is_empty(&self) -> bool {
        self.dev.is_empty()
    }

    /// The cache-line write-back instruction in use.
    pub fn flush_kind(&self) -> FlushKind {
        self.dev.flush_kind()
    }

    /// How the devices are mapped.
    pub fn map_mode(&self) -> MapMode {
        self.dev.map_mode()
    }

    /// Which pages map the devices, measured ([`Pm::map_report`]; one device today).
    pub fn map_report(&self) -> MapReport {
        self.dev.map_report()
    }

    /// Counters of all threads, summed over the devices.
    pub fn counters(&self) -> CounterSnapshot {
        self.dev.counters()
    }

    /// Counters of the calling thread, summed over the devices.
    pub fn thread_counters(&self) -> CounterSnapshot {
        self.dev.thread_counters()
    }

    /// Checks that `[off, off+len)` lies in the volume.
    #[inline]
    pub fn check(&self, off: u64, len: u64) -> Result<(), PmError> {
        self.dev.check(off, len)
    }

    /// Copies `buf.len()` bytes at `off` into `buf` ([`Pm::read`]).
    ///
    /// # Safety
    /// No other thread may write any byte of `[off, off + buf.len())` while this
    /// call runs.
    #[inline]
    pub unsafe fn read(&self, off: u64, buf: &mut [u8]) {
        let (d, o) = self.locate(off);
        // SAFETY: the same bytes and contract.
        unsafe { d.read(o, buf) }
    }

    /// The little-endian `u32` at `off` ([`Pm::read_u32`]).
    ///
    /// # Safety
    /// As for [`Volume::read`] over `[off, off + 4)`.
    #[inline]
    pub unsafe fn read_u32(&self, off: u64) -> u32 {
        let (d, o) = self.locate(off);
        // SAFETY: the same bytes and contract.
        unsafe { d.read_u32(o) }
    }

    /// Atomic 8-byte load of the aligned word at `off` ([`Pm::read_u64`]).
    #[inline]
    pub fn read_u64(&self, off: u64) -> u64 {
        let (d, o) = self.locate(off);
        d.read_u64(o)
    }

    /// Cached store of `data` at `off` ([`Pm::write`]).
    ///
    /// # Safety
    /// No other thread may read or write any byte of `[off, off + data.len())`
    /// while this call runs.
    #[inline]
    pub unsafe fn write(&self, off: u64, data: &[u8]) {
        let (d, o) = self.locate(off);
        // SAFETY: the same bytes and contract.
        unsafe { d.write(o, data) }
    }

    /// Non-temporal store of `data` at `off` ([`Pm::write_nt`]).
    ///
    /// # Safety
    /// As for [`Volume::write`].
    #[inline]
    pub unsafe fn write_nt(&self, off: u64, data: &[u8]) {
        let (d, o) = self.locate(off);
        // SAFETY: the same bytes and contract.
        unsafe { d.write_nt(o, data) }
    }

    /// Cached store of `len` zero bytes at `off` ([`Pm::zero`]).
    ///
    /// # Safety
    /// As for [`Volume::write`] over `[off, off + len)`.
    #[inline]
    pub unsafe fn zero(&self, off: u64, len: u64) {
        let (d, o) = self.locate(off);
        // SAFETY: the same bytes and contract.
        unsafe { d.zero(o, len) }
    }

    /// Aligned 8-byte atomic store ([`Pm::store_u64`]).
    #[inline]
    pub fn store_u64(&self, off: u64, v: u64) {
        let (d, o) = self.locate(off);
        d.store_u64(o, v)
    }

    /// Aligned 16-byte atomic store ([`Pm::store_u128`]).
    ///
    /// # Safety
    /// No other thread may access any of the 16 bytes at `off` while this call runs.
    #[inline]
    pub unsafe fn store_u128(&self, off: u64, v: u128) {
        let (d, o) = self.locate(off);
        // SAFETY: the same word and contract.
        unsafe { d.store_u128(o, v) }
    }

    /// Aligned 16-byte non-temporal store ([`Pm::store_u128_nt`]).
    ///
    /// # Safety
    /// As for [`Volume::store_u128`].
    #[inline]
    pub unsafe fn store_u128_nt(&self, off: u64, v: u128) {
        let (d, o) = self.locate(off);
        // SAFETY: the same word and contract.
        unsafe { d.store_u128_nt(o, v) }
    }

    /// Stores the aligned 16-byte `v` at `off` the way `kind` says, durable at the
    /// next fence ([`Pm::store_u128_durable`]).
    ///
    /// # Safety
    /// As for [`Volume::store_u128`].
    #[inline]
    pub unsafe fn store_u128_durable(&self, kind: Store16, off: u64, v: u128) {
        let (d, o) = self.locate(off);
        // SAFETY: the same word and contract.
        unsafe { d.store_u128_durable(kind, o, v) }
    }

    /// Which [`Store16`] way costs less over the zero 16-byte words at `offs`
    /// ([`Pm::calibrate_store16`]; one device: the offsets are the device's).
    ///
    /// # Safety
    /// No other thread may access any byte of the words at `offs` while this call
    /// runs.
    pub unsafe fn calibrate_store16(&self, offs: &[u64]) -> Store16 {
        // SAFETY: the same words and contract (one device: offsets are identical).
        unsafe { self.dev.calibrate_store16(offs) }
    }

    /// Hints the CPU to bring the line holding `off` into the cache ([`Pm::prefetch`]).
    #[inline]
    pub fn prefetch(&self, off: u64) {
        let (d, o) = self.locate(off);
        d.prefetch(o)
    }

    /// Maps in the pages of `[off, off + len)` now ([`Pm::populate`]).
    pub fn populate(&self, off: u64, len: u64) {
        let (d, o) = self.locate(off);
        d.populate(o, len)
    }

    /// Writes back every cache line overlapping `[off, off+len)`.
    #[inline]
    pub fn flush(&self, off: u64, len: u64) {
        let (d, o) = self.locate(off);
        d.flush(o, len)
    }

    /// Store fence: everything this thread flushed or stored non-temporally before
    /// it, on any device, is durable before anything it stores after it.
    #[inline]
    pub fn fence(&self) {
        self.dev.fence()
    }

    /// `flush` then `fence`.
    #[inline]
    pub fn persist(&self, off: u64, len: u64) {
        let (d, o) = self.locate(off);
        d.persist(o, len)
    }

    /// Operation marker for the tracer (no effect on PM).
    pub fn marker(&self, m: Marker) {
        self.dev.marker(m)
    }

    /// A copy of the whole volume ([`Pm::to_vec`]).
    pub fn to_vec(&mut self) -> Vec<u8> {
        self.dev.to_vec()
    }

    /// Overwrites the volume with `bytes` ([`Pm::load_image`]).
    pub fn load_image(&mut self, bytes: &[u8]) {
        self.dev.load_image(bytes)
    }

    /// A private anonymous copy of the whole volume ([`Pm::clone_anonymous`]).
    pub fn clone_anonymous(&self) -> Result<Volume, PmError> {
        Ok(Volume::single(self.dev.clone_anonymous()?))
    }

    /// msync every device ([`Pm::sync_to_file`]).
    pub fn sync_to_file(&self) {
        self.dev.sync_to_file()
    }
}
