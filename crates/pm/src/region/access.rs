//! Bounds, cached byte copies, aligned 8-byte words, write-back, fences, counters
//! and the tracer calls.

use super::{MapMode, Pm, PmError};
use crate::counters::CounterSnapshot;
use crate::flush::{flush_line, sfence, FlushKind};
use crate::numa::{self, MAX_NODES};
use crate::profile::{self, PmProfile, SpinClock, WriteChannels};
use crate::trace::{Marker, StoreKind, Tracer};
use crate::CACHE_LINE;
use std::sync::Arc;

/// Checks that `[off, off+len)` lies in `[0, size)`.
#[inline]
pub(crate) fn check_range(off: u64, len: u64, size: u64) -> Result<(), PmError> {
    match off.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(PmError::OutOfBounds { off, len, size }),
    }
}

impl Pm {
    /// Installs (or removes) the tracer that sees every later event.
    pub fn set_tracer(&mut self, tracer: Option<Arc<dyn Tracer>>) {
        self.tracer = tracer;
    }

    /// Sets the latency profile charged from now on (`PmProfile::DRAM`: none). See
    /// the `profile` module for where each cost is charged.
    pub fn set_profile(&mut self, p: PmProfile) {
        self.set_profile_on(p, Arc::default());
    }

    /// [`Pm::set_profile`] with the write channels this region's fences queue on
    /// (a volume gives all its devices the same ones).
    pub(crate) fn set_profile_on(&mut self, p: PmProfile, channels: Arc<WriteChannels>) {
        self.profile = if p.is_free() {
            None
        } else {
            Some((p, SpinClock::get(), channels))
        };
        // Write-backs made before the profile was set are not charged to it.
        let _ = profile::take_pending_writes();
    }

    /// The latency profile in force.
    pub fn profile(&self) -> PmProfile {
        self.profile
            .as_ref()
            .map_or(PmProfile::DRAM, |(p, _, _)| *p)
    }

    /// Places the device on NUMA `node` (0 until set): accesses from threads on
    /// other nodes are charged the profile's remote cost ([`PmProfile::remote`]),
    /// and the bytes stored from now on count in this node's column of
    /// [`CounterSnapshot::node_bytes`].
    ///
    /// # Panics
    /// If `node` is not below [`MAX_NODES`].
    pub fn set_node(&mut self, node: u32) {
        assert!(
            (node as usize) < MAX_NODES,
            "NUMA node {node} is not below the {MAX_NODES} nodes modeled"
        );
        self.node = node;
        self.counters.set_node(node);
    }

    /// The NUMA node of the device.
    pub fn node(&self) -> u32 {
        self.node
    }

    /// Charges the modeled cost of a read of `len` bytes: local (the calling
    /// thread on the device's node) or at the distance between the two nodes.
    #[inline]
    pub(super) fn charge_read(&self, len: u64) {
        if let Some((p, clock, _)) = &self.profile {
            let t = numa::thread_node();
            let ns = if t == self.node {
                p.read_cost_ns(len)
            } else {
                p.read_cost_at_ns(len, numa::node_distance(t, self.node))
            };
            clock.spin(ns);
            self.counters.add_delay(ns);
        }
    }

    /// Records `bytes` written back to PM, charged at the next fence (at the
    /// distance between the fencing thread's node and this device's).
    #[inline]
    pub(super) fn note_writeback(&self, bytes: u64) {
        if self.profile.is_some() {
            profile::add_pending_write(self.node, bytes);
        }
    }

    /// Size of the region in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the region has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The cache-line write-back instruction in use.
    pub fn flush_kind(&self) -> FlushKind {
        self.flush
    }

    /// How the region is mapped.
    pub fn map_mode(&self) -> MapMode {
        self.mode
    }

    /// Counters of all threads, summed.
    pub fn counters(&self) -> CounterSnapshot {
        self.counters.snapshot()
    }

    /// Counters of the calling thread (exact even while other threads work).
    pub fn thread_counters(&self) -> CounterSnapshot {
        self.counters.this_thread()
    }

    /// Checks that `[off, off+len)` lies in the region.
    #[inline]
    pub fn check(&self, off: u64, len: u64) -> Result<(), PmError> {
        check_range(off, len, self.len)
    }

    #[inline]
    pub(super) fn ptr(&self, off: u64, len: u64) -> *mut u8 {
        // Out-of-bounds access is an engine bug (the engine validates every offset it
        // reads from PM with `check` first); stop rather than corrupt memory.
        assert!(
            off.checked_add(len).is_some_and(|e| e <= self.len),
            "pm access out of bounds: off {off} len {len} size {}",
            self.len
        );
        // SAFETY: bounds checked just above; `base` is a live mapping of `len` bytes.
        unsafe { self.base.add(off as usize) }
    }

    /// Copies `buf.len()` bytes at `off` into `buf`. Panics if the range is not in
    /// the region.
    ///
    /// # Safety
    /// No other thread may write any byte of `[off, off + buf.len())` (through this
    /// `Pm` or another mapping of the image in this process) while this call runs.
    #[inline]
    pub unsafe fn read(&self, off: u64, buf: &mut [u8]) {
        let p = self.ptr(off, buf.len() as u64);
        // SAFETY: `p` is valid for `buf.len()` bytes; PM and `buf` never overlap; no
        // other thread writes these bytes meanwhile (the caller's contract), so the
        // non-atomic copy does not race.
        unsafe { std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), buf.len()) };
        self.charge_read(buf.len() as u64);
    }

    /// Atomic 8-byte load of the aligned word at `off`. Panics if `off` is not
    /// 8-aligned or the word is not in the region.
    #[inline]
    pub fn read_u64(&self, off: u64) -> u64 {
        assert_eq!(off % 8, 0, "unaligned 8-byte atomic load at {off}");
        let p = self.ptr(off, 8) as *const std::sync::atomic::AtomicU64;
        // SAFETY: aligned (`off` is 8-aligned, base is page-aligned) and in bounds; an
        // atomic load races with nothing safe code can do (see "Access model").
        let v = unsafe { (*p).load(std::sync::atomic::Ordering::Acquire) };
        self.charge_read(8);
        v
    }

    /// The little-endian `u32` at `off` (any alignment; a byte copy).
    ///
    /// # Safety
    /// As for [`Pm::read`] over `[off, off + 4)`.
    #[inline]
    pub unsafe fn read_u32(&self, off: u64) -> u32 {
        let mut b = [0u8; 4];
        // SAFETY: the caller's contract is `read`'s over these 4 bytes.
        unsafe { self.read(off, &mut b) };
        u32::from_le_bytes(b)
    }

    /// Cached store of `data` at `off`. Durable only after `flush` + `fence`. Panics
    /// if the range is not in the region.
    ///
    /// # Safety
    /// No other thread may read or write any byte of `[off, off + data.len())`
    /// (through this `Pm` or another mapping of the image in this process) while
    /// this call runs.
    #[inline]
    pub unsafe fn write(&self, off: u64, data: &[u8]) {
        let p = self.ptr(off, data.len() as u64);
        // SAFETY: `p` is valid for `data.len()` bytes and does not overlap `data`; no
        // other thread accesses these bytes meanwhile (the caller's contract).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        self.counters.add_bytes(data.len() as u64);
        if let Some(t) = &self.tracer {
            t.store(off, data, StoreKind::Cached);
        }
    }

    /// Stores `len` zero bytes at `off` (cached). Panics if the range is not in the
    /// region.
    ///
    /// # Safety
    /// As for [`Pm::write`] over `[off, off + len)`.
    pub unsafe fn zero(&self, off: u64, len: u64) {
        let p = self.ptr(off, len);
        // SAFETY: `p` is valid for `len` bytes; no other thread accesses them meanwhile
        // (the caller's contract).
        unsafe { std::ptr::write_bytes(p, 0, len as usize) };
        self.counters.add_bytes(len);
        if let Some(t) = &self.tracer {
            t.store(off, &vec![0u8; len as usize], StoreKind::Cached);
        }
    }

    /// Hints the CPU to bring the cache line holding `off` in now, so that a later
    /// access (an atomic store, a read) to it overlaps its miss with the work in
    /// between. No effect on contents, persistence, counters or the PM cost model.
    #[inline]
    pub fn prefetch(&self, off: u64) {
        let p = self.ptr(off, 1);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `p` is inside the mapping; a prefetch never faults or writes.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = p;
    }

    /// Aligned 8-byte atomic store (never torn by a crash).
    #[inline]
    pub fn store_u64(&self, off: u64, v: u64) {
        assert_eq!(off % 8, 0, "unaligned 8-byte atomic store at {off}");
        let p = self.ptr(off, 8) as *const std::sync::atomic::AtomicU64;
        // SAFETY: aligned, in bounds, and the mapping outlives the reference.
        unsafe { (*p).store(v, std::sync::atomic::Ordering::Release) };
        self.counters.add_bytes(8);
        if let Some(t) = &self.tracer {
            t.store(off, &v.to_le_bytes(), StoreKind::Atomic8);
        }
    }

    /// Writes back every cache line overlapping `[off, off+len)`.
    #[inline]
    pub fn flush(&self, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        let first = off & !(CACHE_LINE - 1);
        let end = off + len;
        let mut line = first;
        let mut n = 0;
        while line < end {
            let p = self.ptr(line, 1);
            // SAFETY: `p` is inside the mapping (bounds-checked by `ptr`).
            unsafe { flush_line(self.flush, p) };
            if let Some(t) = &self.tracer {
                t.flush(line);
            }
            line += CACHE_LINE;
            n += 1;
        }
        self.counters.add_flushes(n);
        self.note_writeback(n * CACHE_LINE);
    }

    /// Store fence: everything flushed or stored non-temporally before it is durable
    /// before anything stored after it.
    #[inline]
    pub fn fence(&self) {
        sfence();
        // Every fence (profiled or not) is where the thread's cached node is kept
        // current; the counters' hot path only reads it.
        let node = numa::thread_node();
        if let Some((p, clock, channels)) = &self.profile {
            // The fence waits for this thread's write-backs to reach PM, on every
            // device: local ones exactly as `persist_cost_ns`, remote ones at their
            // distance, and behind what other threads queued on the same nodes'
            // channels first (see the `profile` module).
            let c = profile::take_pending_charge(p, node, channels, clock, None);
            clock.spin(c.own_ns.saturating_add(c.queue_ns));
            self.counters.add_delay(c.own_ns);
            if c.queue_ns != 0 {
                self.counters.add_queue(c.queue_ns);
            }
        }
        self.counters.add_fence();
        if let Some(t) = &self.tracer {
            t.fence();
        }
    }

    /// `flush` then `fence`.
    #[inline]
    pub fn persist(&self, off: u64, len: u64) {
        self.flush(off, len);
        self.fence();
    }

    /// Operation marker for tracers (no effect on PM).
    pub fn marker(&self, m: Marker) {
        if let Some(t) = &self.tracer {
            t.marker(&m);
        }
    }

    /// A copy of the whole region (for crash-state images and tests). Takes `&mut`:
    /// no other thread can use the region meanwhile.
    pub fn to_vec(&mut self) -> Vec<u8> {
        let mut v = vec![0u8; self.len as usize];
        // SAFETY: `&mut self` is exclusive, so no other thread writes the region.
        unsafe { self.read(0, &mut v) };
        v
    }

    /// Overwrites the region's bytes from `off` on with `bytes` (uncounted,
    /// untraced: test setup only; bytes past the region are ignored).
    pub fn load_image_at(&mut self, off: u64, bytes: &[u8]) {
        let off = off.min(self.len);
        let n = (bytes.len() as u64).min(self.len - off);
        let p = self.ptr(off, n);
        // SAFETY: `p` valid for `n` bytes; source is a distinct allocation; `&mut
        // self` is exclusive, so no other thread accesses the region.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, n as usize) };
    }

    /// Overwrites the region with `bytes` (uncounted, untraced: test setup only).
    /// Takes `&mut`: no other thread can use the region meanwhile.
    pub fn load_image(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.len as usize);
        let p = self.ptr(0, n as u64);
        // SAFETY: `p` valid for `n` bytes; source is a distinct allocation; `&mut
        // self` is exclusive, so no other thread accesses the region.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, n) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Event, RecordingTracer};

    #[test]
    fn counters_count_exactly() {
        let pm = Pm::anonymous(1 << 20).unwrap();
        let before = pm.thread_counters();
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.write(100, &[1u8; 100]) }; // lines 64..128..192..256 → 3 lines
        pm.flush(100, 100);
        pm.fence();
        pm.store_u64(4096, 7);
        pm.persist(4096, 8);
        let d = pm.thread_counters().since(&before);
        assert_eq!(d.bytes_written, 108);
        assert_eq!(d.flushes, 3 + 1);
        assert_eq!(d.fences, 2);
        let mut b = [0u8; 4];
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.read(100, &mut b) };
        assert_eq!(b, [1; 4]);
        assert_eq!(pm.read_u64(4096), 7);
    }

    #[test]
    fn profile_charges_reads_and_persists_exactly() {
        // The single-node model: thread and device on node 0 (the override keeps a
        // CPU map another test may install meanwhile out of it).
        numa::set_thread_node(Some(0));
        let mut pm = Pm::anonymous(1 << 20).unwrap();
        assert_eq!(pm.profile(), PmProfile::DRAM);
        let mut buf = [0u8; 4096];
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.read(0, &mut buf) };
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.write(0, &[1u8; 100]) };
        pm.persist(0, 100);
        assert_eq!(pm.thread_counters().modeled_delay_ns, 0);

        pm.set_profile(PmProfile::OPTANE);
        assert_eq!(pm.profile().name, "optane");
        let t = pm.thread_counters();
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.read(0, &mut buf) };
        assert_eq!(pm.thread_counters().since(&t).modeled_delay_ns, 305 + 620);
        let t = pm.thread_counters();
        let _ = pm.read_u64(8);
        assert_eq!(pm.thread_counters().since(&t).modeled_delay_ns, 305 + 1);
        // Cached stores cost nothing until written back; the fence pays for the
        // flushed lines (two lines: 128 B → 90 + 55 ns).
        let t = pm.thread_counters();
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.write(0, &[2u8; 100]) };
        assert_eq!(pm.thread_counters().since(&t).modeled_delay_ns, 0);
        pm.flush(0, 100);
        assert_eq!(pm.thread_counters().since(&t).modeled_delay_ns, 0);
        pm.fence();
        assert_eq!(pm.thread_counters().since(&t).modeled_delay_ns, 90 + 55);
        // A fence with nothing written back costs nothing.
        let t = pm.thread_counters();
        pm.fence();
        assert_eq!(pm.thread_counters().since(&t).modeled_delay_ns, 0);
        // Non-temporal page: 4096 B → 90 + 1780 ns.
        let t = pm.thread_counters();
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.write_nt(4096, &buf) };
        pm.fence();
        assert_eq!(pm.thread_counters().since(&t).modeled_delay_ns, 90 + 1780);

        pm.set_profile(PmProfile::DRAM);
        let t = pm.thread_counters();
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.read(0, &mut buf) };
        pm.persist(0, 64);
        assert_eq!(pm.thread_counters().since(&t).modeled_delay_ns, 0);
        numa::set_thread_node(None);
    }

    #[test]
    fn remote_devices_are_charged_by_distance() {
        let _g = numa::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        std::thread::spawn(|| {
            numa::set_thread_node(Some(1));
            let mut local = Pm::anonymous(1 << 20).unwrap();
            local.set_node(1);
            local.set_profile(PmProfile::OPTANE);
            let mut far = Pm::anonymous(1 << 20).unwrap();
            assert_eq!(far.node(), 0);
            far.set_profile(PmProfile::OPTANE);
            let o = PmProfile::OPTANE;
            let mut buf = [0u8; 4096];

            // The thread's own node: the local formula.
            let t = local.thread_counters();
            // SAFETY: only this thread uses this test's regions.
            unsafe { local.read(0, &mut buf) };
            assert_eq!(
                local.thread_counters().since(&t).modeled_delay_ns,
                305 + 620
            );

            // Node 0 at the default distance 21: latency ×1.195, bandwidth ÷1.089.
            let t = far.thread_counters();
            // SAFETY: as above.
            unsafe { far.read(0, &mut buf) };
            let _ = far.read_u64(8);
            assert_eq!(
                far.thread_counters().since(&t).modeled_delay_ns,
                o.read_cost_at_ns(4096, 21) + o.read_cost_at_ns(8, 21)
            );
            assert_eq!(o.read_cost_at_ns(4096, 21), 364 + 675);

            // One fence drains the write-backs to both devices: the remote latency
            // (the larger) once, each device's bytes at its own bandwidth.
            let (tl, tf) = (local.thread_counters(), far.thread_counters());
            // SAFETY: as above.
            unsafe { local.write_nt(0, &buf) };
            // SAFETY: as above.
            unsafe { far.write(0, &[7u8; 64]) };
            far.flush(0, 64);
            // Fence: the write-backs to both devices above are durable (and charged)
            // here, whichever device the fence is called on.
            local.fence();
            assert_eq!(
                local.thread_counters().since(&tl).modeled_delay_ns,
                o.persist_cost_at_ns(&[(10, 4096), (21, 64)])
            );
            assert_eq!(
                o.persist_cost_at_ns(&[(10, 4096), (21, 64)]),
                149 + 1780 + 68
            );
            // Fence: nothing of this thread is pending any more, so it orders (and
            // charges) nothing: the fence above drained both devices.
            far.fence();
            assert_eq!(far.thread_counters().since(&tf).modeled_delay_ns, 0);

            // A two-hop distance costs more, per the table.
            numa::set_node_distances(vec![vec![10, 32], vec![32, 10]]).unwrap();
            let t = far.thread_counters();
            // SAFETY: as above.
            unsafe { far.write_nt(0, &buf) };
            // Fence: the non-temporal page above is durable (and charged) here.
            far.fence();
            let got = far.thread_counters().since(&t).modeled_delay_ns;
            numa::set_node_distances(Vec::new()).unwrap();
            assert_eq!(got, o.persist_cost_at_ns(&[(32, 4096)]));
            // 90 × 2.324 = 209.2 → 209; 4096 B at 2.3 GB/s ÷ 3.894 = 6934.8 → 6934.
            assert_eq!(got, 209 + 6934);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn stored_bytes_count_by_thread_node_and_device_node() {
        let mut pm = Pm::anonymous(1 << 16).unwrap();
        pm.set_node(3);
        std::thread::scope(|s| {
            for (node, n) in [(3u32, 100usize), (6, 40)] {
                let pm = &pm;
                s.spawn(move || {
                    numa::set_thread_node(Some(node));
                    let before = pm.thread_counters();
                    // SAFETY: each thread stores to its own bytes of this test's
                    // region.
                    unsafe { pm.write(node as u64 * 1024, &vec![1u8; n]) };
                    // 64 B: 64 non-temporal, plus the 8-byte atomic.
                    // SAFETY: as above.
                    unsafe { pm.write_nt(node as u64 * 1024 + 512, &[2u8; 64]) };
                    pm.store_u64(node as u64 * 1024 + 768, 9);
                    // Fence: the non-temporal and flushed bytes above are durable before what follows.
                    pm.fence();
                    let d = pm.thread_counters().since(&before);
                    assert_eq!(d.bytes_written, n as u64 + 64 + 8);
                    assert_eq!(d.node_bytes_written(node, 3), n as u64 + 64 + 8);
                });
            }
        });
        let c = pm.counters();
        assert_eq!(c.node_bytes_written(3, 3), 100 + 72);
        assert_eq!(c.node_bytes_written(6, 3), 40 + 72);
        assert_eq!(c.local_bytes_written(), 172);
        assert_eq!(c.remote_bytes_written(), 112);
        assert_eq!(c.bytes_written, 284);
    }

    #[test]
    #[should_panic(expected = "not below")]
    fn a_device_node_beyond_max_nodes_is_rejected() {
        let mut pm = Pm::anonymous(1 << 16).unwrap();
        pm.set_node(MAX_NODES as u32);
    }

    #[test]
    fn recording_tracer_sees_every_event_in_order() {
        let mut pm = Pm::anonymous(1 << 16).unwrap();
        let rec = Arc::new(RecordingTracer::new());
        pm.set_tracer(Some(rec.clone()));
        pm.marker(Marker::OpBegin("w".into()));
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.write(0, b"abc") };
        pm.flush(0, 3);
        pm.fence();
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.store_u128(64, 0x1122_3344_5566_7788_99aa_bbcc_ddee_ff00) };
        pm.marker(Marker::OpEnd("w".into()));
        let ev = rec.take();
        assert_eq!(
            ev,
            vec![
                Event::Marker(Marker::Thread(crate::trace::thread_id())),
                Event::Marker(Marker::OpBegin("w".into())),
                Event::Store {
                    off: 0,
                    data: b"abc".to_vec(),
                    kind: StoreKind::Cached
                },
                Event::Flush { line: 0 },
                Event::Fence,
                Event::Store {
                    off: 64,
                    data: 0x1122_3344_5566_7788_99aa_bbcc_ddee_ff00u128
                        .to_le_bytes()
                        .to_vec(),
                    kind: StoreKind::Atomic16
                },
                Event::Marker(Marker::OpEnd("w".into())),
            ]
        );
        let mut b = [0u8; 16];
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.read(64, &mut b) };
        assert_eq!(
            u128::from_le_bytes(b),
            0x1122_3344_5566_7788_99aa_bbcc_ddee_ff00
        );
    }
}
