//! LAWN zone growth (papers/lawn §4.1: "we will allocate more NVMM space to expand
//! that sub-zone"; docs/FORMAT.md §2.9, "Growth"): a sub-zone that runs low on free
//! slots takes a chunk of blocks from free space; the chunk holds its own
//! descriptors (first) and slots, and the chunk table entry that names it is what
//! makes it part of the zone, on PM and at recovery. A chunk goes back to free space
//! once it is empty, and is emptied (its runs written back) when file data needs
//! the space: the zone never takes space a file write needs.
//!
//! Persistence order, growing: chunk blocks allocated (DRAM) → its descriptor blocks
//! zeroed (non-temporal; lines already zero are skipped) → fence → table entry stored, flushed → fence → the chunk's
//! slots join the sub-zone (DRAM). A crash before the entry is durable leaves blocks
//! no one owns (free again at recovery); after, an empty chunk. Shrinking: every run
//! of the chunk written back and its descriptor cleared (each write-back fences) →
//! entry cleared, flushed → fence → blocks freed (DRAM). A crash before the entry
//! is clear leaves an empty chunk; after, free blocks.

use super::zone::{ChunkLayout, RunInfo};
use super::*;
use crate::addr::{page_start, BlockNo, PmOff};
use crate::format::{encode_chunk_entry, BLOCK};
use crate::store::Store;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Weak;

/// Below this share of free slots a sub-zone that may grow wakes the write-back
/// thread to grow it (percent).
pub(crate) const GROW_PCT: u64 = 25;
/// A sub-zone grows until this share of its slots is free (percent).
pub(crate) const GROW_TARGET_PCT: u64 = 40;

/// Where every zone slot and descriptor lies: the fixed zone's by the geometry, a
/// growth chunk's by its block, kept here for lock-free lookups (a chunk's block is
/// set before any run can be in it and cleared only once none is).
pub(crate) struct ZoneMap {
    geo: Geometry,
    /// Slots of one chunk.
    spc: u64,
    /// Descriptor blocks at the start of a chunk.
    dblocks: u64,
    /// Per chunk table entry: the chunk's first block, or 0.
    blocks: Box<[AtomicU64]>,
}

impl ZoneMap {
    /// The map of `geo`'s zone with the chunks `(entry, block)` present.
    pub fn new(geo: &Geometry, chunks: &[(u64, u64)]) -> ZoneMap {
        let blocks: Box<[AtomicU64]> = (0..geo.zone_chunks).map(|_| AtomicU64::new(0)).collect();
        for &(e, b) in chunks {
            if let Some(a) = blocks.get(e as usize) {
                a.store(b, Ordering::Relaxed);
            }
        }
        ZoneMap {
            geo: *geo,
            spc: geo.chunk_slots(),
            dblocks: geo.chunk_desc_blocks(),
            blocks,
        }
    }

    /// Sub-zone `sub`'s chunk layout.
    pub fn layout(&self, sub: u64) -> ChunkLayout {
        let per = self.geo.chunks_per_sub();
        ChunkLayout {
            zone_slots: self.geo.zone_slots,
            spc: self.spc,
            first_entry: sub.saturating_mul(per),
            max_chunks: if self.spc == 0 { 0 } else { per },
        }
    }

    /// The chunk's block and the slot's index in it, for a slot of a chunk.
    #[inline]
    fn chunk_of(&self, slot: u64) -> Option<(u64, u64)> {
        let g = slot.checked_sub(self.geo.zone_slots)?;
        let e = g.checked_div(self.spc)?;
        let b = self.blocks.get(e as usize)?.load(Ordering::Acquire);
        (b != 0).then(|| (b, g % self.spc))
    }

    /// PM offset of zone slot `slot` (a slot the caller holds a run or reservation
    /// of; past the image if no such slot, which the pm layer refuses).
    #[inline]
    pub fn slot_off(&self, slot: u64) -> PmOff {
        if slot < self.geo.zone_slots {
            return self.geo.slot_off(slot);
        }
        match self.chunk_of(slot) {
            Some((b, j)) => BlockNo(b.saturating_add(self.dblocks))
                .at(j.saturating_mul(self.geo.slot_size as u64)),
            None => BlockNo(self.geo.total_blocks).off(),
        }
    }

    /// PM offset of the descriptor of zone slot `slot` (as [`Self::slot_off`]).
    #[inline]
    pub fn desc_off(&self, slot: u64) -> PmOff {
        if slot < self.geo.zone_slots {
            return self.geo.desc_off(slot);
        }
        match self.chunk_of(slot) {
            Some((b, j)) => BlockNo(b).at(j.saturating_mul(crate::format::DESC_SIZE)),
            None => BlockNo(self.geo.total_blocks).off(),
        }
    }

    /// The first block of the chunk of table entry `e`, if present.
    pub fn block(&self, e: u64) -> Option<u64> {
        let b = self.blocks.get(e as usize)?.load(Ordering::Acquire);
        (b != 0).then_some(b)
    }

    fn set(&self, e: u64, b: u64) {
        if let Some(a) = self.blocks.get(e as usize) {
            a.store(b, Ordering::Release);
        }
    }

    /// Blocks the present chunks hold.
    pub fn chunk_blocks(&self) -> u64 {
        let n = self
            .blocks
            .iter()
            .filter(|a| a.load(Ordering::Relaxed) != 0)
            .count() as u64;
        n.saturating_mul(self.geo.zone_chunk_blocks as u64)
    }
}

impl LawnCore {
    /// Free blocks a file write must still find after the zone grows: 1/8 of the data
    /// area.
    fn keep_free(&self) -> u64 {
        self.geo.data_blocks() / 8
    }

    /// Whether the zone may take another chunk now (space to spare for files).
    pub(super) fn may_grow(&self, store: &Store) -> bool {
        let cb = self.geo.zone_chunk_blocks as u64;
        self.grow && cb > 0 && store.space.available() >= cb + self.keep_free()
    }

    /// Whether the zone should give space back (files are short of it).
    pub(super) fn should_shrink(&self, store: &Store) -> bool {
        self.map.chunk_blocks() > 0 && store.space.available() < self.keep_free() / 2
    }

    /// Grows sub-zone `sub` by chunks until [`GROW_TARGET_PCT`] of its slots are free,
    /// while [`Self::may_grow`] and the sub-zone has table entries left (the caller
    /// holds `resizing`). Returns the chunks added.
    pub(super) fn grow(&self, store: &Store, sub: usize) -> u64 {
        let mut added = 0;
        loop {
            {
                let z = self.subs[sub].lock();
                if z.free_slots() * 100 >= z.nslots * GROW_TARGET_PCT {
                    return added;
                }
            }
            if self.grow_one(store, sub, None).is_none() {
                return added;
            }
            added += 1;
        }
    }

    /// Adds one chunk to sub-zone `sub`, its blocks on the devices of NUMA `node`
    /// first (`None`: the calling thread's). Returns the chunk (`k`), or `None` when
    /// the sub-zone has no entry left, the zone may not grow or no space is free.
    pub(super) fn grow_one(&self, store: &Store, sub: usize, node: Option<u32>) -> Option<usize> {
        let cb = self.geo.zone_chunk_blocks as u64;
        let (k, e) = {
            let z = self.subs[sub].lock();
            let k = z.absent_chunk()?;
            (k, z.chunk_entry(k))
        };
        if !self.may_grow(store) {
            return None;
        }
        let b = match node {
            Some(n) => store.space.alloc_contiguous_on(cb, n),
            None => store.space.alloc_contiguous(cb),
        }?;
        if let Some(n) = node {
            if self.place.node_of_block(&self.geo, b) != n {
                // The node's devices had no room: a chunk elsewhere would not be
                // local to its writers (and would be kept), so none.
                store.space.free_run(b, cb);
                return None;
            }
        }
        let vol = &*store.vol;
        // Fault the chunk's pages in here, not in the writers' first stores to
        // them (on /dev/shm a first touch also zero-fills the page).
        vol.populate(BlockNo(b).off(), cb * BLOCK);
        // The chunk's descriptors start clear: its blocks may hold anything.
        // Lines already zero (blocks never written, or freed by a file that
        // zeroed them) are left alone: a read instead of a PM write.
        let mut buf = [0u8; BLOCK as usize];
        let zero = [0u8; 64];
        for i in 0..self.geo.chunk_desc_blocks() {
            let at = BlockNo(b + i).off();
            vol.read(at, &mut buf);
            for (j, line) in buf.chunks_exact(64).enumerate() {
                if line != zero {
                    vol.write_nt(at + (j as u64 * 64), &zero);
                }
            }
        }
        // Fence: the chunk's descriptors are clear on PM before the entry that
        // makes recovery read them.
        vol.fence();
        let at = self.geo.chunk_entry_off(e);
        vol.store_u64(at, encode_chunk_entry(e, b));
        vol.flush(at, 8);
        // Fence: the entry is durable before any run is written to the chunk.
        vol.fence();
        self.map.set(e, b);
        let mut z = self.subs[sub].lock();
        z.add_chunk(k);
        z.set_chunk_node(k, self.place.node_of_block(&self.geo, b));
        self.hints[sub].publish(&z);
        self.counters.grown.fetch_add(1, Ordering::Relaxed);
        Some(k)
    }

    /// Gives chunk `k` of sub-zone `sub` back if it is empty: its table entry
    /// cleared (durable), then its blocks freed. The caller has drained it or seen
    /// it empty under the sub-zone lock.
    fn release_chunk(&self, store: &Store, sub: usize, k: usize) -> bool {
        let e = {
            let mut z = self.subs[sub].lock();
            let e = z.chunk_entry(k);
            if !z.remove_chunk(k) {
                return false;
            }
            e
        };
        let Some(b) = self.map.block(e) else {
            return false;
        };
        let vol = &*store.vol;
        let at = self.geo.chunk_entry_off(e);
        vol.store_u64(at, 0);
        vol.flush(at, 8);
        // Fence: the entry is clear on PM before the chunk's blocks can be reused
        // (every descriptor in it was clear already).
        vol.fence();
        self.map.set(e, 0);
        store.space.free_run(b, self.geo.zone_chunk_blocks as u64);
        self.counters.shrunk.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Empties one chunk (the one with the fewest used slots over all sub-zones) by
    /// writing its runs back, and gives its blocks back. Takes page locks: the caller
    /// holds none, and holds `resizing`. Returns whether a chunk was given back.
    pub(super) fn shrink_one(&self, store: &Store) -> bool {
        let mut best: Option<(u64, usize, usize)> = None;
        for (i, z) in self.subs.iter().enumerate() {
            let z = z.lock();
            if z.draining().is_some() {
                continue;
            }
            for k in z.chunks() {
                let u = z.chunk_used(k);
                if best.is_none_or(|(bu, _, _)| u < bu) {
                    best = Some((u, i, k));
                }
            }
        }
        let Some((_, sub, k)) = best else {
            return false;
        };
        if !self.subs[sub].lock().begin_drain(k) {
            return false;
        }
        let pm = &*store.vol;
        // No new run goes to a draining chunk. A run whose inode is dying is not
        // written back (its blocks are being freed, which clears its descriptor):
        // a few rounds let those go; a chunk still not empty stays.
        for _ in 0..4 {
            let runs = self.subs[sub].lock().chunk_runs(k);
            if runs.is_empty() {
                break;
            }
            self.write_back_runs(pm, sub, &runs);
        }
        let ok = self.release_chunk(store, sub, k);
        if !ok {
            self.subs[sub].lock().end_drain();
        }
        ok
    }

    /// Writes back the given runs of sub-zone `sub`, each page under its data lock
    /// (write), skipping runs that changed meanwhile. Returns the runs written back.
    pub(super) fn write_back_runs(&self, pm: &Vol, sub: usize, victims: &[RunInfo]) -> u64 {
        let mut done = 0;
        for v in victims {
            let inode = self.handles.lock().get(&v.desc.ino).and_then(Weak::upgrade);
            // (A dead inode's number may already name a newer inode.)
            let Some(inode) = inode.filter(|i| !i.index.dead()) else {
                continue;
            };
            let pg = v.desc.pgoff;
            let _w = inode.data.write(page_start(pg), page_start(pg + 1));
            let runs = {
                let z = self.subs[sub].lock();
                // Still the same run? (The page may have been rewritten meanwhile.)
                if z.get(v.desc.ino, pg, v.desc.first) != Some(*v) {
                    continue;
                }
                z.page_runs(v.desc.ino, pg)
            };
            // The PM work runs without the sub-zone lock, so writers of other pages
            // of this sub-zone do not wait for it; the page's lock keeps this page's
            // runs as they are until they are forgotten.
            self.copy_back(pm, &runs);
            self.forget(&mut self.subs[sub].lock(), &runs);
            done += runs.len() as u64;
        }
        done
    }

    /// The thread's growth and shrink work for one pass: grows low sub-zones while
    /// space allows; gives empty chunks back while the zone has more free slots than
    /// it grows to; empties chunks while files are short of space.
    pub(crate) fn resize(&self, store: &Store) {
        if self.geo.zone_chunks == 0 {
            return;
        }
        let _one = self.resizing.lock();
        for i in 0..self.subs.len() {
            let low = {
                let z = self.subs[i].lock();
                z.max_chunks() > 0 && z.free_slots() * 100 < z.nslots * GROW_PCT
            };
            if low {
                self.grow(store, i);
            }
            // A chunk on each node whose writers found no slot there (MBS-LVM's
            // local first; `LawnPlace`).
            let mut want = self
                .place
                .want
                .get(i)
                .map_or(0, |w| w.swap(0, Ordering::Relaxed));
            while want != 0 {
                let node = want.trailing_zeros();
                want &= want - 1;
                self.grow_one(store, i, Some(node));
            }
            // Empty chunks go back when the rest still leaves the target free (under
            // local-first placement, not those on other nodes than the fixed zone:
            // they are their writers' only local slots; space pressure still takes
            // them, `shrink_one`).
            let local_first = self.place.local_first;
            loop {
                let k = {
                    let z = self.subs[i].lock();
                    let spc = self.geo.chunk_slots();
                    let rest_free = z.free_slots().saturating_sub(spc);
                    let rest = z.nslots.saturating_sub(spc);
                    if rest_free * 100 < rest * (GROW_TARGET_PCT + 20) {
                        None
                    } else {
                        z.chunks().rev().find(|&k| {
                            z.chunk_used(k) == 0 && !(local_first && z.chunk_is_remote(k))
                        })
                    }
                };
                match k {
                    Some(k) if self.release_chunk(store, i, k) => {}
                    _ => break,
                }
            }
            self.update_growable(store, i);
        }
        let mut n = 0;
        while self.should_shrink(store) && n < 8 && self.shrink_one(store) {
            n += 1;
        }
    }

    /// Records whether sub-zone `sub` can grow now (writers wake the thread earlier
    /// for a sub-zone that can: [`GROW_PCT`]).
    pub(super) fn update_growable(&self, store: &Store, sub: usize) {
        let can = {
            let z = self.subs[sub].lock();
            z.absent_chunk().is_some()
        } && self.may_grow(store);
        if let Some(g) = self.growable.get(sub) {
            if g.load(Ordering::Relaxed) != can {
                g.store(can, Ordering::Relaxed);
            }
        }
    }

    /// Blocks the zone's chunks hold now (all reclaimable).
    pub fn chunk_blocks(&self) -> u64 {
        self.map.chunk_blocks()
    }
}

impl Lawn {
    /// Gives zone chunks back until `blocks` more blocks are available to files or
    /// no chunk is left (a file write that found no space; the caller holds no page
    /// lock). Returns whether any space came back.
    pub fn reclaim(&self, store: &Store, blocks: u64) -> bool {
        let core = &*self.core;
        // (The caller holds no page lock, and the thread's pass waits for no writer.)
        let _one = core.resizing.lock();
        let want = store.space.available().saturating_add(blocks);
        let mut any = false;
        while store.space.available() < want {
            if !core.shrink_one(store) {
                break;
            }
            any = true;
        }
        any
    }
}
