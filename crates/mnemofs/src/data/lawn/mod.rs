//! LAWN: logless alternate writing for sub-page writes (papers/lawn §4; DESIGN.md §2,
//! §3). The zone and its descriptor table are on PM (docs/FORMAT.md §2.9); the DRAM
//! side of each sub-zone (one per CPU; a page's runs live in the one its (inode,
//! page) hashes to) is in [`zone`], the shared state in `core`, the 16-byte
//! descriptors in [`descriptor`]. The data plane calls in through: `write` (the
//! algorithm below), `read` (the zone slices over a page being read), `free` (the
//! invalidation point's part: descriptors of freed blocks cleared), [`writeback`]
//! (the background thread and write-back of runs), [`recover`] (the mount-time
//! scan). This file holds the mount's [`Lawn`] and its lifecycle.
//!
//! A sub-page overwrite inside one mapped page and inside the file's size is cut into
//! slot-aligned slices `s0..=s1` (patched with the newest bytes to slot boundaries):
//! - no run of the page overlaps them: the patched slices go to a fresh run of free
//!   slots, persisted, then the run's descriptor is set (one 16-byte store),
//!   persisted (Algorithm 1, lines 2–6). On images of format version 7 the descriptor
//!   carries the CRC-32 of the page number and the slices
//!   ([`descriptor::Format::Sum`]), and one fence makes both durable: a run whose
//!   page and slots do not give its sum reads as never written at recovery;
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

pub(crate) mod chunks;
pub(crate) mod descriptor;
pub(crate) mod pagetable;
pub(crate) mod recover;
pub(crate) mod spin;
pub(crate) mod writeback;
pub(crate) mod zone;

mod core;
mod free;
mod read;
mod write;

pub(crate) use core::{Counters, LawnCore, LawnPlace, TableHint};

use crate::format::Geometry;
use crate::inode::Inode;
use crate::types::Ino;
use crate::vol::Vol;
use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};
use pm::Store16;
use spin::SpinMutex;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use zone::SubZone;

/// Below this share of free slots a sub-zone wakes the write-back thread (percent).
pub(crate) const LOW_WATER_PCT: u64 = 10;
/// The write-back thread stops once this share is free again (percent).
pub(crate) const HIGH_WATER_PCT: u64 = 20;

/// The LAWN zone of a mounted file system.
pub(crate) struct Lawn {
    pub core: Arc<LawnCore>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Lawn {
    /// The zone with the runs recovered from the descriptor table; descriptors are
    /// stored the way `desc_store` says, or, if `None`, the way
    /// `Vol::calibrate_store16` measures cheaper over the (clear) descriptors of up
    /// to 256 free slots, one per descriptor line: the region is quiescent until mount
    /// returns, and only those 16-byte words are stored (zeros over zeros).
    /// `zone`: the chunk map and sub-zones as recovery rebuilt them.
    pub fn new(
        pm: &Vol,
        geo: Geometry,
        zone: (chunks::ZoneMap, Vec<SubZone>),
        grow: bool,
        desc_store: Option<Store16>,
        cache: Option<Arc<crate::data::rcache::Shared>>,
        place: LawnPlace,
    ) -> Lawn {
        let (map, mut subs) = zone;
        let mut place = place;
        place.want = (0..subs.len()).map(|_| AtomicU64::new(0)).collect();
        if place.dev_node.len() > 1 {
            // The fixed zone is on device 0; each chunk where its blocks are.
            let fixed = place.dev_node.first().copied().unwrap_or(0);
            for z in &mut subs {
                let nodes: Vec<u32> = (0..z.max_chunks())
                    .map(|k| {
                        map.block(z.chunk_entry(k))
                            .map_or(fixed, |b| place.node_of_block(&geo, b))
                    })
                    .collect();
                z.set_nodes(fixed, |k| nodes.get(k).copied().unwrap_or(fixed));
            }
        }
        let desc_store = desc_store.unwrap_or_else(|| {
            let offs: Vec<crate::addr::PmOff> = subs
                .first()
                .map(|z| {
                    z.free_slots_iter()
                        .map(|i| map.desc_off(i))
                        .filter(|o| o.get() % 64 == 0)
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
                map,
                grow: grow && geo.zone_chunks > 0,
                resizing: Mutex::new(()),
                growable: (0..subs.len())
                    .map(|_| AtomicBool::new(grow && geo.zone_chunks > 0))
                    .collect(),
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
                cache,
                place,
            }),
            thread: Mutex::new(None),
        }
    }

    /// Starts the background write-back thread (which also grows and shrinks the
    /// zone, taking chunks from `store`'s free space).
    pub fn start_writeback(&self, store: Arc<crate::store::Store>) {
        if self.core.subs.is_empty() {
            return;
        }
        let core = self.core.clone();
        let h = std::thread::Builder::new()
            .name("mnemofs-lawn-wb".into())
            .spawn(move || writeback::run(&core, &store));
        if let Ok(h) = h {
            *self.thread.lock() = Some(h);
        }
    }

    /// Starts the write-back thread again after [`stop_writeback`](Self::stop_writeback)
    /// (a remount back to read-write).
    pub fn restart_writeback(&self, store: Arc<crate::store::Store>) {
        self.core.stop.store(false, Ordering::Release);
        self.start_writeback(store);
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

impl Lawn {
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
        let (mut free, mut all, mut zone, mut file) = (0, 0, 0, 0);
        for z in &core.subs {
            let z = z.lock();
            free += z.free_slots();
            all += z.nslots;
            zone += z.zone_writes;
            file += z.file_writes;
        }
        out.slots_used = all - free;
        out.chunk_blocks = core.map.chunk_blocks();
        out.chunks_grown = core.counters.grown.load(Ordering::Relaxed);
        out.chunks_shrunk = core.counters.shrunk.load(Ordering::Relaxed);
        out.slots_free = free;
        out.zone_writes = zone;
        out.file_writes = file;
        out.writebacks = core.counters.writebacks.load(Ordering::Relaxed);
        out.desc_store = Some(core.desc_store);
    }
}
