//! LAWN's shared state: the DRAM sub-zones, the lock-free page-table hints that
//! writers prefetch through, the flags and counters the write-back thread shares.

use crate::addr::page_of;
use crate::format::Geometry;
use crate::inode::Inode;
use crate::types::Ino;
use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};
use pm::Store16;
use spin::SpinMutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Weak;
use zone::SubZone;

use super::*;

/// LAWN's counters (exact; reported in `FsStats`; zone and in-place writes are
/// counted in their sub-zone, under its lock). On its own cache line: the write-back
/// thread bumps `writebacks` (writers too, when they write back a partly overlapped
/// run) while writers bump the data plane's counters.
#[derive(Default)]
pub(crate) struct Counters {
    pub writebacks: CachePadded<AtomicU64>,
    /// Chunks the zone grew by, and gave back.
    pub grown: AtomicU64,
    pub shrunk: AtomicU64,
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
    /// Where slots and descriptors lie (fixed zone and growth chunks).
    pub map: chunks::ZoneMap,
    /// Whether the zone grows (`MountOptions::lawn_grow` on an image with a chunk
    /// table); chunks it has are given back when files need the space either way.
    pub grow: bool,
    /// Held while the zone grows or shrinks (the thread's pass, `Fs::lawn_resize`, a
    /// writer's reclaim): two of them must not pick the same chunk table entry.
    pub resizing: Mutex<()>,
    /// Per sub-zone: whether it can grow now (set by the write-back thread).
    pub growable: Vec<AtomicBool>,
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
    /// The read cache, whose copies of blocks a write-back changes are dropped.
    pub cache: Option<std::sync::Arc<crate::data::rcache::Shared>>,
    /// Where the zone's slots lie on a volume of several devices.
    pub place: LawnPlace,
}

/// Slot placement on a volume of several devices (MBS-LVM): each writer takes
/// slots on its own node's devices first, and a sub-zone with none free there
/// asks the write-back thread for a growth chunk on that node.
#[derive(Debug, Default)]
pub(crate) struct LawnPlace {
    /// Writers take slots on their own node first (placement `local` over devices
    /// on at least two nodes); otherwise wherever free (the one-device behaviour).
    pub local_first: bool,
    /// NUMA node of each device.
    pub dev_node: Vec<u32>,
    /// Nodes whose writers may ask for a chunk of their own: those holding a
    /// device, but device 0's (the fixed zone's, grown by the usual low-water rule).
    pub growable_nodes: u64,
    /// Per sub-zone: bit `n` — a writer of node `n` found no slot on its node.
    pub want: Vec<AtomicU64>,
}

impl LawnPlace {
    /// The placement of a zone on devices on `dev_node` (`local`: the mount's
    /// placement is `local`).
    pub fn new(local: bool, dev_node: &[u32]) -> LawnPlace {
        let fixed = dev_node.first().copied().unwrap_or(0);
        let growable_nodes = dev_node
            .iter()
            .filter(|&&n| n != fixed)
            .fold(0u64, |m, &n| m | 1u64 << (n % 64));
        LawnPlace {
            local_first: local && growable_nodes != 0,
            dev_node: dev_node.to_vec(),
            growable_nodes,
            want: Vec::new(),
        }
    }

    /// The NUMA node of the device holding global block `b`.
    pub fn node_of_block(&self, geo: &Geometry, b: u64) -> u32 {
        self.dev_node.get(geo.device_of(b)).copied().unwrap_or(0)
    }
}

impl LawnCore {
    /// Records that a writer of `node` found no free slot on its node in sub-zone
    /// `sub`; true when that is news and the sub-zone can grow (the write-back
    /// thread should be woken to add a chunk there).
    pub fn want_local(&self, sub: usize, node: u32) -> bool {
        let Some(w) = self.place.want.get(sub) else {
            return false;
        };
        let bit = 1u64 << (node % 64);
        self.place.growable_nodes & bit != 0
            && w.load(Ordering::Relaxed) & bit == 0
            && w.fetch_or(bit, Ordering::Relaxed) & bit == 0
            && self
                .growable
                .get(sub)
                .is_some_and(|g| g.load(Ordering::Relaxed))
    }
}

impl TableHint {
    /// Publishes where `z`'s page table lies now (a store only when it moved).
    pub(super) fn publish(&self, z: &SubZone) {
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
        let pgoff = page_of(off);
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
    pub(super) fn clear_if_empty(&self) {
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

    pub(super) fn slot_size(&self) -> u64 {
        self.geo.slot_size as u64
    }

    /// Wakes the write-back thread.
    pub fn kick(&self) {
        *self.wake.lock() = true;
        self.wake_cv.notify_one();
    }
}
