//! LAWN: logless alternate writing for sub-page writes (papers/lawn §4; DESIGN.md §2,
//! §3). The zone and its descriptor table are on PM (docs/FORMAT.md); the DRAM side
//! of each sub-zone (one per CPU; a page's runs live in the one its (inode, page)
//! hashes to) is in [`zone`], the 16-byte descriptors in
//! [`descriptor`], the background write-back in [`writeback`], the mount-time scan
//! in [`recover`].
//!
//! A sub-page overwrite inside one mapped page and inside the file's size is cut into
//! slot-aligned slices `s0..=s1` (patched with the newest bytes to slot boundaries):
//! - no run of the page overlaps them: the patched slices go to a fresh run of free
//!   slots, persisted, then the run's descriptor is set (one 16-byte store),
//!   persisted (Algorithm 1, lines 2–6);
//! - exactly one run covers them: the newest copy is in the zone, so the run's whole
//!   range (zone copy patched with the new bytes) goes to the file page in place,
//!   persisted, then the descriptor is cleared, persisted (lines 8–11);
//! - otherwise the overlapping runs are first written back (a copy that changes no
//!   file contents, each crash-safe on its own), then the first case applies.
//!
//! Each write has exactly one commit point (one descriptor store), so a write is
//! all-or-nothing even when it spans many slices — stronger than the paper, which
//! commits slice by slice. A descriptor names the data block it shadows: a page CoW,
//! truncate, hole punch or unlink maps other blocks (or none), so recovery ignores
//! the old descriptors, and every descriptor of a block is cleared (persisted) before
//! that block is freed ([`LawnCore::before_free`]), so a reused block can never
//! match a stale descriptor.
//!
//! Writes that are whole pages, span pages, extend the file or hit a hole take page
//! CoW, as does any write when the sub-zone has no free run of the size needed (a
//! full zone is never an error).

pub(crate) mod descriptor;
pub(crate) mod pagetable;
pub(crate) mod recover;
pub(crate) mod spin;
pub(crate) mod writeback;
pub(crate) mod zone;

use crate::bugs::{self, Bug};
use crate::format::{Geometry, BLOCK};
use crate::inode::Inode;
use crate::space::Run;
use crate::types::Ino;
use crate::vol::Vol;
use crossbeam_utils::CachePadded;
use descriptor::Desc;
use parking_lot::{Condvar, Mutex};
use pm::Store16;
use spin::SpinMutex;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use zone::{Overlap, RunInfo, SubZone};

/// Below this share of free slots a sub-zone wakes the write-back thread (percent).
pub(crate) const LOW_WATER_PCT: u64 = 10;
/// The write-back thread stops once this share is free again (percent).
pub(crate) const HIGH_WATER_PCT: u64 = 20;

/// LAWN's counters (exact; reported in `FsStats`; zone and in-place writes are
/// counted in their sub-zone, under its lock). On its own cache line: the write-back
/// thread bumps `writebacks` (writers too, when they write back a partly overlapped
/// run) while writers bump the data plane's counters.
#[derive(Default)]
pub(crate) struct Counters {
    pub writebacks: CachePadded<AtomicU64>,
}

/// Where a sub-zone's page table lies, published for lock-free prefetching: a
/// writer prefetches its page's entry before it takes any lock, so that the miss
/// overlaps the range lock's and the page index's. A stale value (the table grew
/// meanwhile) only makes the prefetch useless: a prefetch never faults.
#[derive(Default)]
pub(crate) struct TableHint {
    base: AtomicUsize,
    mask: AtomicUsize,
}

/// Everything the write-back thread shares with the file system.
pub(crate) struct LawnCore {
    pub geo: Geometry,
    pub subs: Vec<SpinMutex<SubZone>>,
    /// Inodes that may have runs (the write-back thread locks their pages).
    pub handles: Mutex<HashMap<Ino, Weak<Inode>>>,
    /// False only when no sub-zone holds a run (lets reads and block frees skip the
    /// zone). Set by a writer under its sub-zone lock before its run exists; cleared
    /// under every sub-zone lock once all are empty. A flag rather than a count: a
    /// count is written by the writer and the write-back thread on every run, and
    /// its cache line would bounce between them.
    pub may_hold: CachePadded<AtomicBool>,
    pub counters: Counters,
    /// Per sub-zone: where its page table lies (see [`TableHint`]).
    pub hints: Vec<CachePadded<TableHint>>,
    pub wake: Mutex<bool>,
    pub wake_cv: Condvar,
    /// A writer has woken the write-back thread and it has not started its pass
    /// yet: later writers that find their sub-zone low need not wake it again
    /// (a wake-up is a mutex and, when the thread sleeps, a futex call).
    pub kicked: CachePadded<AtomicBool>,
    pub stop: AtomicBool,
    /// How descriptors are stored (chosen at mount, see [`Lawn::new`]).
    pub desc_store: Store16,
}

/// The LAWN zone of a mounted file system.
pub(crate) struct Lawn {
    pub core: Arc<LawnCore>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Lawn {
    /// The zone with the runs recovered from the descriptor table; descriptors are
    /// stored the way `desc_store` says, or, if `None`, the way
    /// [`Pm::calibrate_store16`] measures cheaper over the (clear) descriptors of up
    /// to 256 free slots, one per descriptor line: the region is quiescent until mount
    /// returns, and only those 16-byte words are stored (zeros over zeros).
    pub fn new(pm: &Vol, geo: Geometry, subs: Vec<SubZone>, desc_store: Option<Store16>) -> Lawn {
        let desc_store = desc_store.unwrap_or_else(|| {
            let offs: Vec<u64> = subs
                .first()
                .map(|z| {
                    z.free_slots_iter()
                        .map(|i| geo.desc_off(i))
                        .filter(|o| o % 64 == 0)
                        .take(256)
                        .collect()
                })
                .unwrap_or_default();
            pm.calibrate_store16(&offs)
        });
        let valid: usize = subs.iter().map(|s| s.runs()).sum();
        let hints = subs
            .iter()
            .map(|z| {
                let h = CachePadded::new(TableHint::default());
                h.publish(z);
                h
            })
            .collect();

        Lawn {
            core: Arc::new(LawnCore {
                geo,
                subs: subs.into_iter().map(SpinMutex::new).collect(),
                handles: Mutex::new(HashMap::new()),
                may_hold: CachePadded::new(AtomicBool::new(valid > 0)),
                counters: Counters::default(),
                hints,
                wake: Mutex::new(false),
                wake_cv: Condvar::new(),
                kicked: CachePadded::new(AtomicBool::new(false)),
                stop: AtomicBool::new(false),
                desc_store,
            }),
            thread: Mutex::new(None),
        }
    }

    /// Starts the background write-back thread.
    pub fn start_writeback(&self, pm: Arc<Vol>) {
        if self.core.subs.is_empty() {
            return;
        }
        let core = self.core.clone();
        let h = std::thread::Builder::new()
            .name("mnemofs-lawn-wb".into())
            .spawn(move || writeback::run(&core, &pm));
        if let Ok(h) = h {
            *self.thread.lock() = Some(h);
        }
    }

    /// Stops the write-back thread and waits for it.
    pub fn stop_writeback(&self) {
        self.core.stop.store(true, Ordering::Release);
        self.core.kick();
        if let Some(h) = self.thread.lock().take() {
            let _ = h.join();
        }
    }
}

impl Drop for Lawn {
    fn drop(&mut self) {
        self.stop_writeback();
    }
}

/// Slices up to this many bytes are patched in a stack buffer.
const SMALL_BUF: usize = 512;

/// `n` zero bytes of scratch: in `small` when they fit, else in `big`.
fn scratch<'a>(small: &'a mut [u8; SMALL_BUF], big: &'a mut Vec<u8>, n: usize) -> &'a mut [u8] {
    if n <= SMALL_BUF {
        &mut small[..n]
    } else {
        big.resize(n, 0);
        &mut big[..]
    }
}

impl TableHint {
    /// Publishes where `z`'s page table lies now (a store only when it moved).
    fn publish(&self, z: &SubZone) {
        let (base, mask) = z.table_hint();
        // (Both: a grown table may be allocated where an older one was freed.)
        if self.base.load(Ordering::Relaxed) != base || self.mask.load(Ordering::Relaxed) != mask {
            self.base.store(base, Ordering::Relaxed);
            self.mask.store(mask, Ordering::Relaxed);
        }
    }
}

impl LawnCore {
    /// Starts loading, without a lock (see [`TableHint`]), the sub-zone page-table
    /// entry of the page holding file offset `off` of `ino` into the CPU cache: both
    /// of its cache lines (key, masks, inline run slots) and the next entry's first
    /// line (where a probe goes next).
    #[inline]
    pub fn prefetch(&self, ino: Ino, off: u64) {
        let pgoff = off / BLOCK;
        if let Some(h) = self.hints.get(self.sub_of(ino, pgoff)) {
            let (base, mask) = (
                h.base.load(Ordering::Relaxed),
                h.mask.load(Ordering::Relaxed),
            );
            if let Some(a) = SubZone::table_entry_addr(base, mask, ino, pgoff) {
                crate::index::prefetch_addr(a);
                crate::index::prefetch_addr(a + 64);
                crate::index::prefetch_addr(a + 128);
            }
        }
    }

    /// Clears `may_hold` if no sub-zone holds a run (under every sub-zone lock, so
    /// no writer can be recording a run meanwhile).
    fn clear_if_empty(&self) {
        let guards: Vec<_> = self.subs.iter().map(|z| z.lock()).collect();
        if guards.iter().all(|z| z.runs() == 0) {
            self.may_hold.store(false, Ordering::Release);
        }
    }

    /// The sub-zone of page `pgoff` of `ino` (docs/FORMAT.md §2.9).
    #[inline]
    pub fn sub_of(&self, ino: Ino, pgoff: u64) -> usize {
        self.geo.lawn_sub(ino, pgoff) as usize
    }

    fn slot_size(&self) -> u64 {
        self.geo.slot_size as u64
    }

    /// Wakes the write-back thread.
    pub fn kick(&self) {
        *self.wake.lock() = true;
        self.wake_cv.notify_one();
    }

    /// Copies the zone slices of page `pgoff` (stored in `block`) that fall into
    /// `[lo, lo + out.len())` of the file over `out`.
    pub fn overlay(&self, pm: &Vol, ino: Ino, pgoff: u64, block: u64, lo: u64, out: &mut [u8]) {
        if !self.may_hold.load(Ordering::Acquire) || self.subs.is_empty() {
            return;
        }
        let s = self.slot_size();
        let hi = lo + out.len() as u64;
        if out.is_empty() || hi <= pgoff * BLOCK || lo >= (pgoff + 1) * BLOCK {
            return;
        }
        let s0 = ((lo.max(pgoff * BLOCK) - pgoff * BLOCK) / s) as u32;
        let s1 = ((hi.min((pgoff + 1) * BLOCK) - 1 - pgoff * BLOCK) / s) as u32;
        // LRU: a read counts as a use (the sub-zone lock is held for this line only).
        let runs = self.subs[self.sub_of(ino, pgoff)]
            .lock()
            .touch(ino, pgoff, s0, s1);
        for r in runs {
            if r.desc.block != block {
                continue;
            }
            let a = pgoff * BLOCK + r.desc.first as u64 * s;
            let b = a + r.desc.count as u64 * s;
            let (x, y) = (a.max(lo), b.min(hi));
            if x >= y {
                continue;
            }
            pm.read(
                self.geo.slot_off(r.slot) + (x - a),
                &mut out[(x - lo) as usize..(y - lo) as usize],
            );
        }
    }

    /// Before data blocks are freed: clears (persisted) every descriptor that shadows
    /// one of them, so that a block reused later can never match a stale descriptor.
    /// The caller has committed the entries that unmapped the blocks.
    pub fn before_free(&self, pm: &Vol, freed: &[Run]) {
        if !self.may_hold.load(Ordering::Acquire) || freed.is_empty() {
            return;
        }
        for sub in &self.subs {
            let mut z = sub.lock();
            if z.runs() == 0 {
                continue;
            }
            let mut gone: Vec<RunInfo> = Vec::new();
            for &(s, l) in freed {
                for b in s..s + l {
                    if let Some((ino, pg)) = z.page_of_block(b) {
                        gone.extend(
                            z.page_runs(ino, pg)
                                .into_iter()
                                .filter(|r| r.desc.block == b),
                        );
                    }
                }
            }
            if gone.is_empty() {
                continue;
            }
            if !bugs::on(Bug::LawnDescriptorKeptOnReuse) {
                for r in &gone {
                    let off = self.geo.desc_off(r.slot);
                    descriptor::store(pm, self.desc_store, off, 0);
                }
            }
            // Fence: the descriptors of the freed blocks are clear on PM before the
            // blocks (and these slots) can be reused.
            pm.fence();
            for r in gone {
                z.remove(r.desc.ino, r.desc.pgoff, r.desc.first);
            }
        }
    }

    /// Writes runs of one page back to its block in the file and clears their
    /// descriptors. Changes no file contents; the caller holds the page's data lock
    /// (write) and `z`, the page's sub-zone.
    pub fn writeback_locked(&self, pm: &Vol, z: &mut SubZone, runs: &[RunInfo]) {
        self.copy_back(pm, runs);
        self.forget(z, runs);
    }

    /// The PM half of a write-back: the runs' slots into the file page in place,
    /// fence, their descriptors cleared, fence. Needs the page's data lock (write),
    /// which keeps every other user of these runs out, but not the sub-zone lock.
    fn copy_back(&self, pm: &Vol, runs: &[RunInfo]) {
        if runs.is_empty() {
            return;
        }
        let s = self.slot_size();
        let mut buf = [0u8; SMALL_BUF];
        let mut big = Vec::new();
        for r in runs {
            let b = scratch(&mut buf, &mut big, (r.desc.count as u64 * s) as usize);
            pm.read(self.geo.slot_off(r.slot), b);
            pm.write_nt(r.desc.block * BLOCK + r.desc.first as u64 * s, b);
        }
        // Fence: the file holds the zone copies before their descriptors go.
        pm.fence();
        for r in runs {
            let off = self.geo.desc_off(r.slot);
            descriptor::store(pm, self.desc_store, off, 0);
        }
        // Fence: the descriptors are clear on PM before their slots are reused.
        pm.fence();
    }

    /// The DRAM half: forgets written-back runs and frees their slots.
    fn forget(&self, z: &mut SubZone, runs: &[RunInfo]) {
        for r in runs {
            if z.remove(r.desc.ino, r.desc.pgoff, r.desc.first).is_some() {
                self.counters.writebacks.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Writes back every run of sub-zone `sub` whose page can be locked (used by
    /// the thread and by [`Lawn::writeback_all`]); `until_free` stops once that many
    /// slots are free in the sub-zone. Returns the runs written back.
    pub fn writeback_sub(&self, pm: &Vol, sub: usize, until_free: u64, batch: usize) -> u64 {
        let mut done = 0;
        loop {
            let victims = {
                let mut z = self.subs[sub].lock();
                if z.free_slots() >= until_free {
                    return done;
                }
                z.lru_oldest(batch)
            };
            if victims.is_empty() {
                return done;
            }
            let mut progress = false;
            for v in victims {
                let inode = self.handles.lock().get(&v.desc.ino).and_then(Weak::upgrade);
                // (A dead inode's number may already name a newer inode.)
                let Some(inode) = inode.filter(|i| !i.index.dead()) else {
                    continue;
                };
                let pg = v.desc.pgoff;
                let _w = inode.data.write(pg * BLOCK, (pg + 1) * BLOCK);
                let runs = {
                    let z = self.subs[sub].lock();
                    // Still the same run? (The page may have been rewritten meanwhile.)
                    if z.get(v.desc.ino, pg, v.desc.first) != Some(v) {
                        continue;
                    }
                    z.page_runs(v.desc.ino, pg)
                };
                // The PM work runs without the sub-zone lock, so writers of other
                // pages of this sub-zone do not wait for it; the page's lock keeps
                // this page's runs as they are until they are forgotten.
                self.copy_back(pm, &runs);
                self.forget(&mut self.subs[sub].lock(), &runs);
                done += runs.len() as u64;
                progress = true;
            }
            if !progress {
                return done;
            }
        }
    }
}

/// A LAWN write whose PM stores are all issued, the last (its descriptor's set or
/// clear, non-temporal) not yet fenced: [`Lawn::finish`] fences it, after the
/// caller's last bookkeeping of the write.
pub(crate) enum Staged {
    /// The slices went to a run of zone slots.
    Zone,
    /// The slices went to the file in place; the run that held their zone copy is
    /// forgotten, its slots still reserved until its cleared descriptor is durable.
    File { sub: usize, slot: u64, count: u64 },
}

impl Lawn {
    /// Completes a staged LAWN write: the fence that makes its descriptor store
    /// durable, then (file path) the slots of the forgotten run are freed.
    pub fn finish(&self, pm: &Vol, staged: Staged) {
        let core = &*self.core;
        // Fence: the descriptor set (zone path) or clear (file path) is durable
        // before the write returns, and a cleared run's slots are free only after
        // it (Algorithm 1, lines 6 and 11).
        pm.fence();
        if let Staged::File { sub, slot, count } = staged {
            core.subs[sub].lock().release(slot, count);
        }
    }

    /// Alternate writing of the slices of `[off, off + data.len())` (one page,
    /// mapped to `block`), up to the descriptor store, not yet fenced
    /// ([`Staged`]). Returns `None` when the sub-zone has no room (no descriptor and no
    /// file byte changed; at most free slots were written).
    pub fn write(
        &self,
        pm: &Vol,
        inode: &Arc<Inode>,
        pg: u64,
        block: u64,
        off: u64,
        data: &[u8],
    ) -> Option<Staged> {
        let core = &*self.core;
        if core.subs.is_empty() || block > descriptor::MAX_BLOCK {
            return None;
        }
        let ino = inode.ino;
        let s = core.slot_size();
        let in_pg = off % BLOCK;
        let s0 = (in_pg / s) as u32;
        let s1 = ((in_pg + data.len() as u64 - 1) / s) as u32;
        let sub = core.sub_of(ino, pg);
        let k = (s1 - s0 + 1) as u64;
        let desc = Desc {
            ino,
            pgoff: pg,
            block,
            first: s0,
            count: k as u32,
        };
        // The write-back thread finds the inode of a run through this map: register
        // it once per `Inode` (a freed inode's number may be reused by a new one),
        // before a run of it can exist, so the thread never locks the page of an
        // older inode that had this number while this write is under way.
        if !inode.lawn_registered.load(Ordering::Acquire) {
            core.handles.lock().insert(ino, Arc::downgrade(inode));
            inode.lawn_registered.store(true, Ordering::Release);
        }
        // Under the sub-zone lock: decide, issue the slices' non-temporal stores (to
        // fresh slots, or to the file when the zone holds the newest copy), then
        // record the new run (zone path) or forget the old one (file path; its slots
        // stay reserved until its cleared descriptor is durable) while those stores
        // drain; the lock's release is a plain store that does not wait for them
        // (`spin`), and the fences come after it. The caller's lock on the whole page
        // keeps readers, the write-back thread and block frees off this page until
        // the write returns, so a run recorded before its descriptor is set, or
        // forgotten before its descriptor is clear, is never observed.
        let mut z = core.subs[sub].lock();
        match z.overlap(ino, pg, s0, s1) {
            Overlap::Covered(r) => {
                // The newest copy is in the zone: write the file in place.
                let d = core.geo.desc_off(r.slot);
                if core.desc_store == Store16::Cached {
                    // The cached store below needs the line: start its miss now.
                    pm.prefetch(d);
                }
                let lo = r.desc.first as u64 * s;
                let len = (r.desc.count as u64 * s) as usize;
                let at = (in_pg - lo) as usize;
                // The stores first, so that they drain while the run is forgotten.
                if at == 0 && data.len() == len {
                    pm.write_nt(block * BLOCK + lo, data);
                } else {
                    // Slices only partly overwritten keep their zone bytes.
                    let (mut small, mut big) = ([0u8; SMALL_BUF], Vec::new());
                    let buf = scratch(&mut small, &mut big, len);
                    pm.read(core.geo.slot_off(r.slot), buf);
                    buf[at..at + data.len()].copy_from_slice(data);
                    pm.write_nt(block * BLOCK + lo, buf);
                }
                let gone = z.detach(ino, pg, r.desc.first);
                z.file_writes += 1;
                drop(z);
                debug_assert_eq!(gone, Some(r));
                // Fence: the file copy is durable before the descriptor that names the
                // zone copy as newest is cleared (Algorithm 1, line 9).
                pm.fence();
                descriptor::store(pm, core.desc_store, d, 0);
                Some(Staged::File {
                    sub,
                    slot: r.slot,
                    count: r.desc.count as u64,
                })
            }
            o => {
                if o == Overlap::Partial {
                    // Runs that only partly overlap: write them back first (no
                    // change of contents), so the new slices have no zone copy.
                    let v = z.runs_overlapping(ino, pg, s0, s1);
                    core.writeback_locked(pm, &mut z, &v);
                }
                let slot = z.alloc(k);
                if z.free_slots() * 100 < z.nslots * LOW_WATER_PCT
                    && !core.kicked.load(Ordering::Relaxed)
                    && !core.kicked.swap(true, Ordering::AcqRel)
                {
                    // Woken outside the sub-zone lock (a mutex and maybe a futex
                    // call). Meanwhile the reserved slots stay ours, and the page's lock
                    // keeps its runs as `overlap` saw them.
                    drop(z);
                    core.kick();
                    z = core.subs[sub].lock();
                }
                let slot = slot?;
                if core.desc_store == Store16::Cached {
                    // The cached descriptor store needs the line: its miss overlaps
                    // the slice's stores and fence.
                    pm.prefetch(core.geo.desc_off(slot));
                }
                if !desc.encodable() {
                    z.release(slot, k);
                    return None;
                }
                // The newest bytes of the slices: the file page (no zone copy
                // overlaps), with the new data in place.
                let lo = s0 as u64 * s;
                let len = (k * s) as usize;
                let at = (in_pg - lo) as usize;
                // (Scratch only for a patch: zeroing it costs on every write.)
                let (mut small, mut big): ([u8; SMALL_BUF], Vec<u8>);
                let slice: &[u8] = if at == 0 && data.len() == len {
                    data
                } else {
                    // Patch the partly written slices to slot boundaries.
                    (small, big) = ([0u8; SMALL_BUF], Vec::new());
                    let buf = scratch(&mut small, &mut big, len);
                    pm.read(block * BLOCK + lo, buf);
                    buf[at..at + data.len()].copy_from_slice(data);
                    buf
                };
                let soff = core.geo.slot_off(slot);
                // The slots are reserved: store the slices now, so that they drain
                // while the run is recorded.
                if bugs::on(Bug::LawnDescriptorBeforeData) {
                    pm.write(soff, slice);
                } else {
                    pm.write_nt(soff, slice);
                }
                if !core.may_hold.load(Ordering::Relaxed) {
                    core.may_hold.store(true, Ordering::Release);
                }
                if !z.insert(slot, desc, true) {
                    // (Unreachable while `overlap` said None and the page is locked.)
                    // Fence: the slice stores drain before the slots can go to another
                    // writer, whose committed run they could otherwise overwrite.
                    pm.fence();
                    z.release(slot, k);
                    return None;
                }
                z.zone_writes += 1;
                core.hints[sub].publish(&z);
                drop(z);
                if !bugs::on(Bug::LawnDescriptorBeforeData) {
                    // Fence: the slice is durable in its slots before the descriptor
                    // that makes it the newest copy (Algorithm 1, line 4).
                    pm.fence();
                }
                let d = core.geo.desc_off(slot);
                descriptor::store(pm, core.desc_store, d, desc.encode());
                Some(Staged::Zone)
            }
        }
    }

    /// Writes every LAWN zone slice back to its file page and clears its descriptor
    /// (contents do not change). Returns the runs written back.
    pub fn writeback_all(&self, pm: &Vol) -> u64 {
        let core = &*self.core;
        let n = (0..core.subs.len())
            .map(|i| core.writeback_sub(pm, i, u64::MAX, 64))
            .sum();
        core.clear_if_empty();
        n
    }

    /// Registers the inodes that own recovered runs with the write-back thread.
    pub fn register_recovered(&self, get: impl Fn(Ino) -> Option<Arc<Inode>>) {
        let core = &*self.core;
        let inos: HashSet<Ino> = core
            .subs
            .iter()
            .flat_map(|z| z.lock().inodes().collect::<Vec<_>>())
            .collect();
        let mut h = core.handles.lock();
        for ino in inos {
            if let Some(inode) = get(ino) {
                h.insert(ino, Arc::downgrade(&inode));
            }
        }
    }

    /// Slots in use and free, the writes that went to the zone and to the file in
    /// place (over all sub-zones), write-backs, and how descriptors are stored.
    pub fn stats(&self, out: &mut crate::data::SmallWriteStats) {
        let core = &*self.core;
        let (mut free, mut zone, mut file) = (0, 0, 0);
        for z in &core.subs {
            let z = z.lock();
            free += z.free_slots();
            zone += z.zone_writes;
            file += z.file_writes;
        }
        out.slots_used = core.geo.zone_slots - free;
        out.slots_free = free;
        out.zone_writes = zone;
        out.file_writes = file;
        out.writebacks = core.counters.writebacks.load(Ordering::Relaxed);
        out.desc_store = Some(core.desc_store);
    }
}
