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
use crate::profile::{PmProfile, WriteChannels};
use crate::region::{MapMode, MapReport, Pm, PmError, Store16};
use crate::trace::{Marker, StoreKind, Tracer};
use std::sync::Arc;

/// Most devices one volume may join.
pub const MAX_DEVICES: usize = 8;

/// One device of a volume and where it lies in the global offset space.
struct Device {
    pm: Pm,
    /// Global offset of the first byte of the device's part of the space.
    base: u64,
    /// Device offset that `base` maps to (0 for the first device; the header block
    /// of every later device lies before it, outside the global space).
    skip: u64,
    /// Bytes of the device in the global space.
    len: u64,
}

/// Reports a device's events to the volume's tracer in global offsets.
struct Shifted {
    inner: Arc<dyn Tracer>,
    /// `global = local - skip + base`.
    base: u64,
    skip: u64,
}

impl Shifted {
    fn global(&self, local: u64) -> u64 {
        local.wrapping_sub(self.skip).wrapping_add(self.base)
    }
}

impl Tracer for Shifted {
    fn store(&self, off: u64, data: &[u8], kind: StoreKind) {
        self.inner.store(self.global(off), data, kind)
    }
    fn flush(&self, line: u64) {
        self.inner.flush(self.global(line))
    }
    fn fence(&self) {
        self.inner.fence()
    }
    fn marker(&self, m: &Marker) {
        self.inner.marker(m)
    }
}

/// One global PM offset space over one or more devices.
///
/// The first device maps global offsets `[0, len0)` to itself; each later device
/// `i` appends its bytes after its first `skip` (its header block, outside the
/// global space), so a volume of one device is exactly that device. Device parts
/// are multiples of the caller's alignment (the file system's block), so an aligned
/// 8- or 16-byte word never spans two devices; a byte copy, flush or zero that
/// does is split at the boundary.
pub struct Volume {
    devs: Vec<Device>,
    len: u64,
}

impl Volume {
    /// A volume of one device: global offsets are the device's offsets.
    pub fn single(pm: Pm) -> Volume {
        let len = pm.len();
        Volume {
            devs: vec![Device {
                pm,
                base: 0,
                skip: 0,
                len,
            }],
            len,
        }
    }

    /// A volume over `parts` in order, each `(device, skip, len)`: the device's
    /// bytes `[skip, skip + len)` follow the previous part in the global space. The
    /// first part must start at its device's byte 0 (a one-part volume is
    /// [`Volume::single`] of a prefix); lengths should be multiples of the file
    /// system's block, so that no aligned word spans two devices.
    pub fn from_parts(parts: Vec<(Pm, u64, u64)>) -> Result<Volume, PmError> {
        if parts.is_empty() || parts.len() > MAX_DEVICES {
            return Err(PmError::Volume(format!(
                "a volume joins 1 to {MAX_DEVICES} devices, not {}",
                parts.len()
            )));
        }
        let mut devs = Vec::with_capacity(parts.len());
        let mut base = 0u64;
        for (i, (pm, skip, len)) in parts.into_iter().enumerate() {
            if (i == 0 && skip != 0)
                || len == 0
                || skip.checked_add(len).is_none_or(|end| end > pm.len())
            {
                return Err(PmError::Volume(format!(
                    "device {i} ({} bytes) has no part [{skip}, {skip} + {len})",
                    pm.len()
                )));
            }
            devs.push(Device {
                pm,
                base,
                skip,
                len,
            });
            base = base
                .checked_add(len)
                .ok_or_else(|| PmError::Volume("volume larger than 2^64 bytes".into()))?;
        }
        Ok(Volume { devs, len: base })
    }

    /// Puts a borrowed region in a one-device volume for the length of `f`
    /// (formatting or checking a region the caller keeps); the region is handed
    /// back afterwards, whatever `f` did with the volume's bytes.
    pub fn with_borrowed<R>(pm: &mut Pm, f: impl FnOnce(&mut Volume) -> R) -> Result<R, PmError> {
        let stand_in = Pm::anonymous(4096)?;
        let taken = std::mem::replace(pm, stand_in);
        let mut v = Volume::single(taken);
        let r = f(&mut v);
        if let Some(d) = v.devs.pop() {
            *pm = d.pm;
        }
        Ok(r)
    }

    /// Number of devices.
    pub fn device_count(&self) -> usize {
        self.devs.len()
    }

    /// Device `i`, the global offset its part starts at, and its length there.
    pub fn device(&self, i: usize) -> Option<(&Pm, u64, u64)> {
        self.devs.get(i).map(|d| (&d.pm, d.base, d.len))
    }

    /// Mutable access to device `i` (its header lies outside the global space).
    pub fn device_mut(&mut self, i: usize) -> Option<&mut Pm> {
        self.devs.get_mut(i).map(|d| &mut d.pm)
    }

    /// Which device holds global offset `off` (the last one for an offset past the
    /// end, whose access then fails the device's bounds check).
    #[inline]
    fn dev_index(&self, off: u64) -> usize {
        let n = self.devs.len();
        if n == 1 {
            return 0;
        }
        let mut i = 0;
        while i + 1 < n && off >= self.devs[i + 1].base {
            i += 1;
        }
        i
    }

    /// The device holding global offset `off`, and `off` within it. The only
    /// place global offsets are mapped (identity for one device).
    #[inline]
    pub fn locate(&self, off: u64) -> (&Pm, u64) {
        if let [d] = &self.devs[..] {
            return (&d.pm, off);
        }
        self.locate_multi(off)
    }

    /// [`Volume::locate`] over several devices (kept out of line: the one-device
    /// path stays a load and a compare).
    #[cold]
    #[inline(never)]
    fn locate_multi(&self, off: u64) -> (&Pm, u64) {
        let d = &self.devs[self.dev_index(off)];
        (&d.pm, off.wrapping_sub(d.base).wrapping_add(d.skip))
    }

    /// The pieces of `[off, off + len)` per device: (device, device offset, offset
    /// into the range, length). One piece unless the range spans a boundary.
    #[inline]
    fn pieces(&self, off: u64, len: u64) -> impl Iterator<Item = (&Pm, u64, u64, u64)> + '_ {
        let mut at = 0u64;
        let mut i = self.dev_index(off);
        std::iter::from_fn(move || {
            if at >= len && !(at == 0 && len == 0) {
                return None;
            }
            let d = self.devs.get(i)?;
            let g = off.wrapping_add(at);
            let room = d.base.wrapping_add(d.len).wrapping_sub(g);
            // The last device takes whatever is left (its bounds check refuses it).
            let n = if i + 1 == self.devs.len() {
                len - at
            } else {
                room.min(len - at)
            };
            let piece = (&d.pm, g.wrapping_sub(d.base).wrapping_add(d.skip), at, n);
            at += n.max(1);
            i += 1;
            Some(piece)
        })
    }

    /// Installs (or removes) the tracer that sees every later event, in global
    /// offsets.
    pub fn set_tracer(&mut self, tracer: Option<Arc<dyn Tracer>>) {
        if self.devs.len() == 1 {
            self.devs[0].pm.set_tracer(tracer);
            return;
        }
        for d in &mut self.devs {
            let t = tracer.clone().map(|inner| {
                Arc::new(Shifted {
                    inner,
                    base: d.base,
                    skip: d.skip,
                }) as Arc<dyn Tracer>
            });
            d.pm.set_tracer(t);
        }
    }

    /// Sets the latency profile charged from now on, on every device.
    pub fn set_profile(&mut self, p: PmProfile) {
        // One set of write channels: every device's fences queue on the same nodes.
        let channels = Arc::<WriteChannels>::default();
        for d in &mut self.devs {
            d.pm.set_profile_on(p, channels.clone());
        }
    }

    /// The latency profile in force.
    pub fn profile(&self) -> PmProfile {
        self.devs[0].pm.profile()
    }

    /// Size of the global offset space in bytes.
    #[inline]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the volume has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The cache-line write-back instruction in use.
    pub fn flush_kind(&self) -> FlushKind {
        self.devs[0].pm.flush_kind()
    }

    /// How the first device is mapped (every device is mapped the same way when they
    /// are of the same kind).
    pub fn map_mode(&self) -> MapMode {
        self.devs[0].pm.map_mode()
    }

    /// Which pages map the first device, measured ([`Pm::map_report`]).
    pub fn map_report(&self) -> MapReport {
        self.devs[0].pm.map_report()
    }

    /// Counters of all threads, summed over the devices.
    pub fn counters(&self) -> CounterSnapshot {
        self.devs.iter().map(|d| d.pm.counters()).sum()
    }

    /// Counters of the calling thread, summed over the devices.
    pub fn thread_counters(&self) -> CounterSnapshot {
        self.devs.iter().map(|d| d.pm.thread_counters()).sum()
    }

    /// Checks that `[off, off+len)` lies in the volume.
    #[inline]
    pub fn check(&self, off: u64, len: u64) -> Result<(), PmError> {
        if self.devs.len() == 1 {
            return self.devs[0].pm.check(off, len);
        }
        crate::region::check_range(off, len, self.len)
    }

    /// Copies `buf.len()` bytes at `off` into `buf` ([`Pm::read`]).
    ///
    /// # Safety
    /// No other thread may write any byte of `[off, off + buf.len())` while this
    /// call runs.
    #[inline]
    pub unsafe fn read(&self, off: u64, buf: &mut [u8]) {
        if self.devs.len() == 1 {
            // SAFETY: the same bytes and contract.
            return unsafe { self.devs[0].pm.read(off, buf) };
        }
        for (d, o, at, n) in self.pieces(off, buf.len() as u64) {
            // SAFETY: the piece is part of the caller's range, under its contract.
            unsafe { d.read(o, &mut buf[at as usize..(at + n) as usize]) }
        }
    }

    /// The little-endian `u32` at `off` ([`Pm::read_u32`]).
    ///
    /// # Safety
    /// As for [`Volume::read`] over `[off, off + 4)`.
    #[inline]
    pub unsafe fn read_u32(&self, off: u64) -> u32 {
        let mut b = [0u8; 4];
        // SAFETY: the same bytes and contract.
        unsafe { self.read(off, &mut b) };
        u32::from_le_bytes(b)
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
        if self.devs.len() == 1 {
            // SAFETY: the same bytes and contract.
            return unsafe { self.devs[0].pm.write(off, data) };
        }
        for (d, o, at, n) in self.pieces(off, data.len() as u64) {
            // SAFETY: the piece is part of the caller's range, under its contract.
            unsafe { d.write(o, &data[at as usize..(at + n) as usize]) }
        }
    }

    /// Non-temporal store of `data` at `off` ([`Pm::write_nt`]).
    ///
    /// # Safety
    /// As for [`Volume::write`].
    #[inline]
    pub unsafe fn write_nt(&self, off: u64, data: &[u8]) {
        if self.devs.len() == 1 {
            // SAFETY: the same bytes and contract.
            return unsafe { self.devs[0].pm.write_nt(off, data) };
        }
        for (d, o, at, n) in self.pieces(off, data.len() as u64) {
            // SAFETY: the piece is part of the caller's range, under its contract.
            unsafe { d.write_nt(o, &data[at as usize..(at + n) as usize]) }
        }
    }

    /// Cached store of `len` zero bytes at `off` ([`Pm::zero`]).
    ///
    /// # Safety
    /// As for [`Volume::write`] over `[off, off + len)`.
    #[inline]
    pub unsafe fn zero(&self, off: u64, len: u64) {
        for (d, o, _, n) in self.pieces(off, len) {
            // SAFETY: the piece is part of the caller's range, under its contract.
            unsafe { d.zero(o, n) }
        }
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
    /// ([`Pm::calibrate_store16`]), measured on the device of the first word with
    /// the words that lie on it.
    ///
    /// # Safety
    /// No other thread may access any byte of the words at `offs` while this call
    /// runs.
    pub unsafe fn calibrate_store16(&self, offs: &[u64]) -> Store16 {
        let Some(&first) = offs.first() else {
            // SAFETY: no word is touched.
            return unsafe { self.devs[0].pm.calibrate_store16(&[]) };
        };
        let i = self.dev_index(first);
        let local: Vec<u64> = offs
            .iter()
            .filter(|&&o| self.dev_index(o) == i)
            .map(|&o| self.locate(o).1)
            .collect();
        // SAFETY: the same words (mapped to their device) and contract.
        unsafe { self.devs[i].pm.calibrate_store16(&local) }
    }

    /// Hints the CPU to bring the line holding `off` into the cache ([`Pm::prefetch`]).
    #[inline]
    pub fn prefetch(&self, off: u64) {
        let (d, o) = self.locate(off);
        d.prefetch(o)
    }

    /// Maps in the pages of `[off, off + len)` now ([`Pm::populate`]).
    pub fn populate(&self, off: u64, len: u64) {
        for (d, o, _, n) in self.pieces(off, len) {
            d.populate(o, n)
        }
    }

    /// Gives back the memory behind `[off, off + len)` of free space
    /// ([`Pm::discard`]); the bytes given back.
    pub fn discard(&self, off: u64, len: u64) -> std::io::Result<u64> {
        let mut n = 0u64;
        for (d, o, _, l) in self.pieces(off, len) {
            n = n.saturating_add(d.discard(o, l)?);
        }
        Ok(n)
    }

    /// Writes back every cache line overlapping `[off, off+len)`.
    #[inline]
    pub fn flush(&self, off: u64, len: u64) {
        if self.devs.len() == 1 {
            return self.devs[0].pm.flush(off, len);
        }
        for (d, o, _, n) in self.pieces(off, len) {
            d.flush(o, n)
        }
    }

    /// Store fence: everything this thread flushed or stored non-temporally before
    /// it, on any device, is durable before anything it stores after it.
    #[inline]
    pub fn fence(&self) {
        // One `sfence` orders this thread's write-backs to every device (the first
        // device's fence also charges the profile and tells the tracer).
        self.devs[0].pm.fence()
    }

    /// `flush` then `fence`.
    #[inline]
    pub fn persist(&self, off: u64, len: u64) {
        self.flush(off, len);
        self.fence();
    }

    /// Operation marker for the tracer (no effect on PM).
    pub fn marker(&self, m: Marker) {
        self.devs[0].pm.marker(m)
    }

    /// A copy of the whole global space ([`Pm::to_vec`] of each device's part).
    pub fn to_vec(&mut self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len as usize);
        for d in &mut self.devs {
            let v = d.pm.to_vec();
            let (s, e) = (d.skip as usize, (d.skip + d.len) as usize);
            out.extend_from_slice(&v[s.min(v.len())..e.min(v.len())]);
        }
        out
    }

    /// Overwrites the global space with `bytes` ([`Pm::load_image`] of each part;
    /// headers outside the space stay as they are).
    pub fn load_image(&mut self, bytes: &[u8]) {
        if self.devs.len() == 1 {
            return self.devs[0].pm.load_image(bytes);
        }
        for d in &mut self.devs {
            let (s, e) = (d.base as usize, (d.base + d.len) as usize);
            if s >= bytes.len() {
                break;
            }
            d.pm.load_image_at(d.skip, &bytes[s..e.min(bytes.len())]);
        }
    }

    /// A private anonymous copy of the whole volume ([`Pm::clone_anonymous`] of
    /// every device, headers included).
    pub fn clone_anonymous(&self) -> Result<Volume, PmError> {
        let mut devs = Vec::with_capacity(self.devs.len());
        for d in &self.devs {
            devs.push(Device {
                pm: d.pm.clone_anonymous()?,
                base: d.base,
                skip: d.skip,
                len: d.len,
            });
        }
        Ok(Volume {
            devs,
            len: self.len,
        })
    }

    /// msync every device ([`Pm::sync_to_file`]).
    pub fn sync_to_file(&self) {
        for d in &self.devs {
            d.pm.sync_to_file()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Event, RecordingTracer};

    fn two() -> Volume {
        let a = Pm::anonymous(16384).unwrap();
        let b = Pm::anonymous(16384 + 4096).unwrap();
        Volume::from_parts(vec![(a, 0, 16384), (b, 4096, 16384)]).unwrap()
    }

    #[test]
    fn global_space_concatenates_devices_after_their_headers() {
        let v = two();
        assert_eq!(v.len(), 16384 + 16384);
        assert_eq!(v.locate(100).1, 100);
        assert_eq!(v.locate(16384).1, 4096);
        assert_eq!(v.locate(16384 + 8).1, 4096 + 8);
        assert!(std::ptr::eq(v.locate(16384).0, v.device(1).unwrap().0));
        assert!(v.check(32768 - 8, 8).is_ok());
        assert!(v.check(32768 - 8, 9).is_err());
        let short = Pm::anonymous(8192).unwrap();
        assert!(Volume::from_parts(vec![(short, 0, 8192 + 4096)]).is_err());
        assert!(Volume::from_parts(Vec::new()).is_err());
    }

    #[test]
    fn copies_across_a_boundary_are_split_and_read_back() {
        let v = two();
        let data: Vec<u8> = (0..200u32).map(|i| i as u8).collect();
        // SAFETY: one thread owns the volume in this test.
        unsafe { v.write(16384 - 100, &data) };
        let mut back = vec![0u8; 200];
        // SAFETY: as above.
        unsafe { v.read(16384 - 100, &mut back) };
        assert_eq!(back, data);
        // The second half landed after device 1's header, not in it.
        let mut hdr = vec![0u8; 4096];
        // SAFETY: as above.
        unsafe { v.device(1).unwrap().0.read(0, &mut hdr) };
        assert!(hdr.iter().all(|&b| b == 0));
        let mut dev1 = [0u8; 100];
        // SAFETY: as above.
        unsafe { v.device(1).unwrap().0.read(4096, &mut dev1) };
        assert_eq!(&dev1[..], &data[100..]);
        v.store_u64(16384 + 64, 7);
        assert_eq!(v.read_u64(16384 + 64), 7);
    }

    #[test]
    fn tracer_sees_global_offsets_and_one_fence() {
        let mut v = two();
        let t = Arc::new(RecordingTracer::new());
        v.set_tracer(Some(t.clone()));
        v.store_u64(16384 + 128, 1);
        v.flush(16384 + 128, 8);
        v.fence();
        let ev = t.take();
        let offs: Vec<String> = ev.iter().map(|e| format!("{e:?}")).collect();
        assert!(
            ev.iter()
                .any(|e| matches!(e, Event::Flush { line } if *line == 16384 + 128)),
            "{offs:?}"
        );
        assert_eq!(ev.iter().filter(|e| matches!(e, Event::Fence)).count(), 1);
    }

    #[test]
    fn to_vec_and_load_image_cover_the_global_space() {
        let mut v = two();
        let mut img = vec![0u8; v.len() as usize];
        img[16384 + 5] = 9;
        img[3] = 4;
        v.load_image(&img);
        assert_eq!(v.read_u64(16384) >> 40 & 0xff, 9);
        assert_eq!(v.to_vec(), img);
        let c = v.clone_anonymous().unwrap();
        assert_eq!(c.read_u64(0) >> 24 & 0xff, 4);
    }

    #[test]
    fn borrowed_region_comes_back() {
        let mut pm = Pm::anonymous(8192).unwrap();
        pm.store_u64(8, 3);
        let got = Volume::with_borrowed(&mut pm, |v| {
            v.store_u64(16, 5);
            v.read_u64(8)
        })
        .unwrap();
        assert_eq!(got, 3);
        assert_eq!(pm.len(), 8192);
        assert_eq!(pm.read_u64(16), 5);
    }
}
