//! The background write-back thread (papers/lawn §4.1): when a sub-zone's free slots
//! fall below [`LOW_WATER_PCT`](super::LOW_WATER_PCT) percent, the least recently
//! used runs are written back to their file pages and their descriptors cleared,
//! until [`HIGH_WATER_PCT`](super::HIGH_WATER_PCT) percent are free. It takes each
//! page's data lock like a writer, so readers and writers never see a half-moved
//! slice; writers never wait for it (a full sub-zone makes them take page CoW).

use super::{LawnCore, HIGH_WATER_PCT, LOW_WATER_PCT};
use crate::vol::Vol;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Runs taken from the LRU list per round.
const BATCH: usize = 32;
/// How often an idle thread looks at the sub-zones anyway.
const IDLE: Duration = Duration::from_millis(100);

pub(crate) fn run(core: &LawnCore, pm: &Vol) {
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
