//! The background write-back thread (papers/lawn §4.1): when a sub-zone's free slots
//! fall below [`LOW_WATER_PCT`](super::LOW_WATER_PCT) percent, the least recently
//! used runs are written back to their file pages and their descriptors cleared,
//! until [`HIGH_WATER_PCT`](super::HIGH_WATER_PCT) percent are free. It takes each
//! page's data lock like a writer, so readers and writers never see a half-moved
//! slice; writers never wait for it (a full sub-zone makes them take page CoW).

use super::*;
use crate::addr::BlockNo;
use crate::vol::Vol;
use std::sync::atomic::Ordering;
use std::time::Duration;
use zone::{RunInfo, SubZone};

/// Runs taken from the LRU list per round.
const BATCH: usize = 32;
/// How often an idle thread looks at the sub-zones anyway.
const IDLE: Duration = Duration::from_millis(100);

pub(crate) fn run(core: &LawnCore, store: &crate::store::Store) {
    let pm = &*store.vol;
    loop {
        {
            let mut w = core.wake.lock();
            if !*w && !core.stop.load(Ordering::Acquire) {
                core.wake_cv.wait_for(&mut w, IDLE);
            }
            *w = false;
        }
        // From here on, a writer that finds its sub-zone low wakes the thread again
        // (the pass below may already be too late for it).
        core.kicked.store(false, Ordering::Release);
        if core.stop.load(Ordering::Acquire) {
            return;
        }
        // Growth first: a sub-zone that can grow needs no write-back.
        core.resize(store);
        for i in 0..core.subs.len() {
            let (low, target) = {
                let z = core.subs[i].lock();
                (
                    z.free_slots() * 100 < z.nslots * LOW_WATER_PCT,
                    z.nslots * HIGH_WATER_PCT / 100,
                )
            };
            if low {
                core.writeback_sub(pm, i, target, BATCH);
            }
            if core.stop.load(Ordering::Acquire) {
                return;
            }
        }
    }
}

impl LawnCore {
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
    pub(super) fn copy_back(&self, pm: &Vol, runs: &[RunInfo]) {
        if runs.is_empty() {
            return;
        }
        let s = self.slot_size();
        let mut buf = [0u8; SMALL_BUF];
        let mut big = Vec::new();
        for r in runs {
            let b = scratch(&mut buf, &mut big, (r.desc.count as u64 * s) as usize);
            pm.read(self.map.slot_off(r.slot), b);
            pm.write_nt(BlockNo(r.desc.block).at(r.desc.first as u64 * s), b);
        }
        // Fence: the file holds the zone copies before their descriptors go.
        pm.fence();
        // The blocks' bytes changed (not the file's contents): the read cache's
        // copies of them go, under the pages' exclusive range locks.
        if let Some(c) = &self.cache {
            for r in runs {
                c.invalidate(r.desc.block);
            }
        }
        for r in runs {
            let off = self.map.desc_off(r.slot);
            descriptor::store(pm, self.desc_store, off, 0);
        }
        // Fence: the descriptors are clear on PM before their slots are reused.
        pm.fence();
    }

    /// The DRAM half: forgets written-back runs and frees their slots.
    pub(super) fn forget(&self, z: &mut SubZone, runs: &[RunInfo]) {
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
            let n = self.write_back_runs(pm, sub, &victims);
            done += n;
            let progress = n > 0;
            if !progress {
                return done;
            }
        }
    }
}
