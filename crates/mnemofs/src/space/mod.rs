//! Per-CPU page allocators (DRAM only; rebuilt from PM at mount).
//!
//! The data area is split into one contiguous range per CPU ([`placement`]); each
//! range keeps its free extents under its own lock, so threads on different CPUs
//! allocate without contention. An allocation that its CPU cannot satisfy takes from
//! the other CPUs: ENOSPC only when the ranges together, the threads' magazines
//! and (through the caller's reclaim) files' spares and LAWN's chunks cannot hold
//! it. A small reserve is kept for log pages so that metadata operations that free
//! space (unlink, truncate) still work on a full device; and a data allocation
//! leaves the log pages that the entries mapping its runs need (one entry per run:
//! free space scattered in single blocks costs a page of entries per 63 blocks),
//! which [`Space::available`] counts out too, so that one allocation of all that
//! `statfs` reports available succeeds.
//!
//! Nothing scans: each range indexes its extents twice, by start (to coalesce a
//! freed run with its neighbours) and by length (an allocation of `n` takes the
//! shortest extent that holds `n`, the best fit, in one B-tree lookup; when none
//! does, the longest ones). Single blocks — the log page or data block of every
//! small write, freed as often as taken — go through a short per-range stack first
//! and touch neither tree.

use crate::error::{FsError, Result};
use crate::format::{Geometry, LOG_DATA, UNIT};
pub(crate) use placement::Placement;

#[doc(hidden)]
pub mod bench;
mod placement;
use crate::contention;
#[cfg(test)]
use crate::types::PlacementMode;
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};

/// Blocks only log (metadata) allocations may use.
const META_RESERVE_MAX: u64 = 256;

/// One-unit log entries a log page holds: the Write entries mapping as many runs.
const ENTRIES_PER_PAGE: u64 = LOG_DATA / UNIT;

/// Log pages the entries mapping `runs` runs of one allocation may need: a page per
/// [`ENTRIES_PER_PAGE`] of them, one for the part of the log's tail page they do
/// not fill and the commit's other entries (a size change), and one for the runs
/// that LAWN chunks given back on demand add (`statfs` counts those free).
fn map_pages(runs: u64) -> u64 {
    runs.div_ceil(ENTRIES_PER_PAGE).saturating_add(2)
}

/// Freed single blocks a range keeps outside its trees (taken first by one-block
/// allocations; a full stack sends frees to the trees, where they coalesce).
const SINGLES_MAX: usize = 32;

/// Blocks a thread's magazine holds at most (one-device volumes): one-block
/// allocations and frees go through it, and only a refill or a spill of half of it
/// touches the shared counters and a range's lock.
const MAG_MAX: usize = 32;

/// A thread's free single blocks for one allocator, taken out of the shared
/// counters (free space all the same: `statfs` counts them, the free list saved at
/// unmount holds them). Locked by its thread on every use (never contended: its
/// own line), by others only to empty it when space is short.
#[derive(Default)]
struct Mag {
    blocks: Mutex<Vec<u64>>,
    /// `blocks.len()`, stored by whoever holds `blocks` after each change (read
    /// without the lock by `statfs`).
    len: AtomicU64,
    /// One freed block not in `blocks` yet (0: none), stored by the owner without
    /// the lock: a write frees the block it superseded right after its last fence,
    /// where a locked instruction would wait for that fence's write-backs to
    /// finish. The owner's next locked use moves it into `blocks`; another thread
    /// that empties the magazine takes it with a swap (only the owner stores a
    /// block here, everyone else only takes).
    pending: AtomicU64,
}

/// Allocators made so far in this process: each gets a number of its own, which
/// names its magazines in a thread's list.
static SPACES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The calling thread's magazines, by allocator number.
    static MAGS: std::cell::RefCell<Vec<(u64, std::sync::Arc<CachePadded<Mag>>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// The CPU index the calling thread's per-CPU choices use in place of its CPU's
    /// ([`set_thread_cpu`]; `usize::MAX`: none).
    static FORCED_CPU: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

/// Makes the calling thread choose its per-CPU structures (the allocator's range,
/// the inode table's free list) as if it ran on CPU `cpu` (`Some`), or by the CPU it
/// runs on (`None`), so that one small machine spreads threads over every per-CPU
/// range as a large one does. Tests and benchmarks only; not a stable API.
#[doc(hidden)]
pub fn set_thread_cpu(cpu: Option<usize>) {
    // (`usize::MAX` itself means none: it names no CPU.)
    let _ = FORCED_CPU.try_with(|c| c.set(cpu.unwrap_or(usize::MAX)));
}

/// The CPU whose per-CPU structures the calling thread uses first: its
/// [`set_thread_cpu`] override, else the CPU it runs on (`None` when unknown).
/// Callers reduce it modulo their number of structures.
#[inline]
pub(crate) fn thread_cpu() -> Option<usize> {
    let forced = FORCED_CPU.try_with(|c| c.get()).unwrap_or(usize::MAX);
    if forced != usize::MAX {
        return Some(forced);
    }
    // SAFETY: sched_getcpu takes no arguments and touches no memory of ours.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

pub(crate) struct Space {
    geo: Geometry,
    placement: Placement,
    /// One allocator per range ([`Placement`]: per device, per CPU), each on lines
    /// of its own.
    cpus: Vec<CachePadded<Range>>,
    /// Free blocks in the ranges (claimed before they are taken).
    free: CachePadded<AtomicU64>,
    /// Free blocks of each device. A device at 0 is "fat" (MBS-LVM): allocations
    /// pass over it until a block on it is freed.
    dev_free: Vec<AtomicU64>,
    reserve: u64,
    /// Blocks kept as files' spares (`InodeState::spare`): free space outside the
    /// allocator, counted here for `statfs`, given back on demand.
    spares: AtomicU64,
    /// This allocator's number ([`SPACES`]).
    id: u64,
    /// Every thread's magazine of this allocator (one-device volumes only: blocks
    /// of several devices are placed by NUMA node, which a magazine would not do).
    mags: Mutex<Vec<std::sync::Arc<CachePadded<Mag>>>>,
}

/// A run of contiguous blocks.
pub(crate) type Run = (u64, u64);

/// Runs of an allocation or of what a commit frees: inline up to two (a small
/// write's), no heap allocation.
pub(crate) type Runs = smallvec::SmallVec<[Run; 2]>;

/// One range's allocator: its extents, and how many there are for readers that do
/// not take the lock.
#[derive(Default)]
struct Range {
    ext: Mutex<Extents>,
    /// `ext.runs()`, stored by whoever holds `ext` after each change it makes (on
    /// the line it already owns), read without the lock by [`Space::available`] and
    /// by an allocation of nearly all the free space.
    runs: AtomicU64,
}

impl Range {
    /// Locks the extents; their count is stored when the guard goes.
    #[inline]
    fn lock(&self) -> RangeGuard<'_> {
        RangeGuard {
            ext: self.ext.lock(),
            runs: &self.runs,
        }
    }
}

/// A locked range that publishes its extent count on unlock.
struct RangeGuard<'a> {
    ext: parking_lot::MutexGuard<'a, Extents>,
    runs: &'a AtomicU64,
}

impl std::ops::Deref for RangeGuard<'_> {
    type Target = Extents;
    fn deref(&self) -> &Extents {
        &self.ext
    }
}

impl std::ops::DerefMut for RangeGuard<'_> {
    fn deref_mut(&mut self) -> &mut Extents {
        &mut self.ext
    }
}

impl Drop for RangeGuard<'_> {
    fn drop(&mut self) {
        // (Relaxed: a hint for sizing the log pages to keep; the lock orders the
        // extents themselves.)
        self.runs.store(self.ext.runs(), Ordering::Relaxed);
    }
}

/// The free blocks of one range.
#[derive(Default)]
struct Extents {
    /// start → length.
    by_start: BTreeMap<u64, u64>,
    /// (length, start) of the same extents.
    by_len: BTreeSet<(u64, u64)>,
    /// Single free blocks not in the trees.
    singles: Vec<u64>,
}

impl Extents {
    fn blocks(&self) -> u64 {
        self.by_start.values().sum::<u64>() + self.singles.len() as u64
    }

    /// Free runs: extents in the trees and single blocks (each a run an allocation
    /// may take, and an entry to map it).
    fn runs(&self) -> u64 {
        (self.by_start.len() as u64).saturating_add(self.singles.len() as u64)
    }

    fn remove(&mut self, s: u64, l: u64) {
        self.by_start.remove(&s);
        self.by_len.remove(&(l, s));
    }

    fn add(&mut self, s: u64, l: u64) {
        self.by_start.insert(s, l);
        self.by_len.insert((l, s));
    }

    /// Takes up to `need` blocks from the front of the best extent: the shortest
    /// holding all of them, else the longest. `None` when the trees are empty.
    fn take(&mut self, need: u64) -> Option<Run> {
        let (l, s) = self
            .by_len
            .range((need, 0)..)
            .next()
            .or_else(|| self.by_len.iter().next_back())
            .copied()?;
        self.remove(s, l);
        let take = l.min(need);
        if take < l {
            self.add(s + take, l - take);
        }
        Some((s, take))
    }

    /// Takes up to `need` blocks into `runs`, as an allocation does in one range: a
    /// freed single block first for a one-block allocation, then runs from the trees
    /// ([`Extents::take`]), then single blocks. Returns how many are still needed.
    #[inline]
    fn take_into(&mut self, mut need: u64, runs: &mut Runs) -> u64 {
        if need == 1 {
            if let Some(b) = self.singles.pop() {
                runs.push((b, 1));
                return 0;
            }
        }
        while need > 0 {
            let Some(t) = self.take(need) else { break };
            runs.push(t);
            need -= t.1;
        }
        while need > 0 {
            let Some(b) = self.singles.pop() else { break };
            runs.push((b, 1));
            need -= 1;
        }
        need
    }

    /// Returns a run, coalescing it with the extents on either side.
    fn put(&mut self, start: u64, len: u64) {
        if len == 1 && self.singles.len() < SINGLES_MAX {
            self.singles.push(start);
            return;
        }
        let (mut s, mut l) = (start, len);
        if let Some((&ps, &pl)) = self.by_start.range(..s).next_back() {
            debug_assert!(ps + pl <= s, "double free of block {s}");
            if ps + pl == s {
                self.remove(ps, pl);
                s = ps;
                l += pl;
            }
        }
        if let Some(&nl) = self.by_start.get(&(start + len)) {
            self.remove(start + len, nl);
            l += nl;
        }
        self.add(s, l);
    }
}

impl Space {
    /// An allocator with nothing free, of one volume whose devices all sit on
    /// node 0 (tests).
    #[cfg(test)]
    pub fn empty(geo: Geometry) -> Space {
        Space::new(
            geo,
            Placement::new(&geo, PlacementMode::Local, &[], &[0], |_, _| Some(10)),
        )
    }

    /// An allocator with nothing free that places blocks as `placement` says.
    pub fn new(geo: Geometry, placement: Placement) -> Space {
        Space {
            geo,
            cpus: (0..placement.ranges())
                .map(|_| CachePadded::new(Range::default()))
                .collect(),
            free: CachePadded::new(AtomicU64::new(0)),
            dev_free: (0..placement.devices())
                .map(|_| AtomicU64::new(0))
                .collect(),
            placement,
            reserve: (geo.data_blocks() / 100).clamp(8, META_RESERVE_MAX),
            spares: AtomicU64::new(0),
            id: SPACES.fetch_add(1, Ordering::Relaxed),
            mags: Mutex::new(Vec::new()),
        }
    }

    /// Calls `f` with the calling thread's magazine of this allocator, locked, its
    /// pending block moved in (made on first use), or returns `None` where magazines
    /// are not used (several devices).
    #[inline]
    fn with_mag<R>(&self, f: impl FnOnce(&mut Vec<u64>) -> R) -> Option<R> {
        self.my_mag(|mag| {
            let mut blocks = mag.blocks.lock();
            if mag.pending.load(Ordering::Relaxed) != 0 {
                let p = mag.pending.swap(0, Ordering::AcqRel);
                if p != 0 {
                    blocks.push(p);
                }
            }
            let r = f(&mut blocks);
            mag.len.store(blocks.len() as u64, Ordering::Relaxed);
            r
        })
    }

    /// Calls `f` with the calling thread's magazine of this allocator (made on first
    /// use), or returns `None` where magazines are not used (several devices).
    #[inline]
    fn my_mag<R>(&self, f: impl FnOnce(&Mag) -> R) -> Option<R> {
        if self.dev_free.len() != 1 {
            return None;
        }
        MAGS.try_with(|m| {
            let mut list = m.borrow_mut();
            let pos = match list.iter().position(|(id, _)| *id == self.id) {
                Some(p) => p,
                None => {
                    // Magazines of allocators since dropped (only this thread holds
                    // them) are forgotten when the list grows.
                    if list.len() >= 8 {
                        list.retain(|(_, g)| std::sync::Arc::strong_count(g) > 1);
                    }
                    // A magazine whose thread has ended (the list holds the only
                    // other reference) is taken over with its blocks; else a new one.
                    let mut all = self.mags.lock();
                    let g = match all.iter().find(|g| std::sync::Arc::strong_count(g) == 1) {
                        Some(g) => g.clone(),
                        None => {
                            let g = std::sync::Arc::new(CachePadded::new(Mag::default()));
                            all.push(g.clone());
                            g
                        }
                    };
                    drop(all);
                    list.push((self.id, g));
                    list.len() - 1
                }
            };
            f(&list[pos].1)
        })
        .ok()
    }

    /// One block for data from the calling thread's magazine, refilled with half a
    /// magazine when empty; `None` when magazines are off or no refill was possible.
    #[inline]
    fn alloc_from_mag(&self) -> Option<u64> {
        self.with_mag(|mag| {
            if let Some(b) = mag.pop() {
                return Some(b);
            }
            let runs = self.alloc_shared((MAG_MAX / 2) as u64, false).ok()?;
            for (s, l) in runs {
                mag.extend((s..s + l).rev());
            }
            mag.pop()
        })
        .flatten()
    }

    /// Puts a freed block in the calling thread's magazine — as its pending block,
    /// with no locked instruction, when that is free — spilling half of it back to
    /// the ranges when full; false when magazines are off.
    #[inline]
    fn free_to_mag(&self, block: u64) -> bool {
        let parked = self.my_mag(|mag| {
            if mag.pending.load(Ordering::Relaxed) == 0 {
                // Release: pairs with the swap of whoever takes it.
                mag.pending.store(block, Ordering::Release);
                true
            } else {
                false
            }
        });
        match parked {
            None => return false,
            Some(true) => return true,
            Some(false) => {}
        }
        self.with_mag(|mag| {
            mag.push(block);
            if mag.len() > MAG_MAX {
                let spill: Vec<u64> = mag.drain(..MAG_MAX / 2).collect();
                for b in spill {
                    self.free_shared(b, 1);
                }
            }
        })
        .is_some()
    }

    /// Empties every thread's magazine into the ranges (space is short: an
    /// allocation that needs more than the ranges hold). How many blocks.
    fn drain_mags(&self) -> u64 {
        let mags: Vec<_> = self.mags.lock().clone();
        let mut n = 0;
        for g in mags {
            let blocks: Vec<u64> = {
                let mut b = g.blocks.lock();
                g.len.store(0, Ordering::Relaxed);
                let mut v = std::mem::take(&mut *b);
                v.extend(Some(g.pending.swap(0, Ordering::AcqRel)).filter(|&p| p != 0));
                v
            };
            n += blocks.len() as u64;
            for b in blocks {
                self.free_shared(b, 1);
            }
        }
        n
    }

    /// Blocks in every thread's magazine.
    fn mag_blocks(&self) -> Vec<u64> {
        let mags: Vec<_> = self.mags.lock().clone();
        mags.iter()
            .flat_map(|g| {
                // (The pending block read under the lock: the owner moves it into
                // `blocks` only under it.)
                let b = g.blocks.lock();
                let mut v = b.clone();
                v.extend(Some(g.pending.load(Ordering::Acquire)).filter(|&p| p != 0));
                v
            })
            .collect()
    }

    /// Blocks kept as files' spares now.
    pub fn spares(&self) -> u64 {
        self.spares.load(Ordering::Relaxed)
    }

    /// A block left the allocator's accounting to be kept as a file's spare.
    pub fn spare_kept(&self) {
        self.spares.fetch_add(1, Ordering::Relaxed);
    }

    /// A spare was written as a page, or given back ([`free_run`](Self::free_run)
    /// counts it free again).
    pub fn spare_gone(&self) {
        let _ = self
            .spares
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// Free blocks of each device.
    pub fn per_device_free(&self) -> Vec<u64> {
        self.dev_free
            .iter()
            .map(|f| f.load(Ordering::Relaxed))
            .collect()
    }

    /// The devices with no free block (MBS-LVM's FatNode list).
    pub fn fat_devices(&self) -> Vec<usize> {
        (0..self.dev_free.len())
            .filter(|&d| self.dev_free[d].load(Ordering::Relaxed) == 0)
            .collect()
    }

    /// The placement in force.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The devices a new file of the calling thread goes to, in order (its inode
    /// slot, as its first log page: [`Space::alloc_log`]).
    pub fn inode_order(&self) -> smallvec::SmallVec<[usize; 8]> {
        let mut v = smallvec::SmallVec::new();
        if self.dev_free.len() == 1 {
            v.push(0);
        } else {
            self.placement.inode_order(pm::thread_node(), &mut v);
        }
        v
    }

    /// Free blocks: in the ranges and in the threads' magazines.
    pub fn free_blocks(&self) -> u64 {
        self.free
            .load(Ordering::Relaxed)
            .saturating_add(self.mag_count())
    }

    /// Blocks that data writes may still take, in one allocation or several: free
    /// minus the metadata reserve, or minus the log pages that entries mapping
    /// every free run would need where that is more ([`Space::data_floor`]). The
    /// files' spares are counted as runs (a write that finds no space takes them
    /// back, each a run of its own), not as blocks (`statfs` adds those).
    pub fn available(&self) -> u64 {
        let mags = self.mag_count();
        let free = self.free.load(Ordering::Relaxed).saturating_add(mags);
        let spares = self.spares();
        // No more runs than blocks: no need to count them while even one run per
        // block fits the reserve.
        let floor = if map_pages(free.saturating_add(spares)) <= self.reserve {
            self.reserve
        } else {
            let runs = self.range_runs().saturating_add(mags);
            self.reserve.max(map_pages(runs.saturating_add(spares)))
        };
        free.saturating_sub(floor)
    }

    /// Free runs in the ranges, read without their locks.
    fn range_runs(&self) -> u64 {
        self.cpus.iter().fold(0u64, |n, r| {
            n.saturating_add(r.runs.load(Ordering::Relaxed))
        })
    }

    /// Blocks in the threads' magazines (their pending blocks included).
    fn mag_count(&self) -> u64 {
        if self.dev_free.len() != 1 {
            return 0;
        }
        self.mags.lock().iter().fold(0u64, |n, g| {
            n.saturating_add(g.len.load(Ordering::Relaxed))
                .saturating_add(u64::from(g.pending.load(Ordering::Relaxed) != 0))
        })
    }

    /// The free blocks a data allocation of `n` blocks must leave: the metadata
    /// reserve, or the log pages that the entries mapping its runs need where that
    /// is more (its runs are at most `n`, and at most the free runs there are).
    /// Counts runs only for an allocation of more than a reserve's worth of
    /// entries (a fallocate of most of the free space), not on the write path.
    #[inline]
    fn data_floor(&self, n: u64) -> u64 {
        if map_pages(n) <= self.reserve {
            return self.reserve;
        }
        // (The blocks in magazines go back to the ranges before a retry, each a
        // run of its own.)
        let runs = self.range_runs().saturating_add(self.mag_count());
        self.reserve.max(map_pages(n.min(runs)))
    }

    /// Free blocks of each CPU's ranges (summed over the devices).
    pub fn per_cpu_free(&self) -> Vec<u64> {
        let per = self.placement.per_dev();
        let mut v = vec![0u64; per];
        for (r, m) in self.cpus.iter().enumerate() {
            v[r % per] += m.ext.lock().blocks();
        }
        v
    }

    /// Calls `discard(first, len)` for each free run of at least `min` blocks within
    /// blocks `[lo, hi)` of the ranges (clipped to it), with that run's range locked,
    /// so that no allocation takes the run meanwhile; blocks in the threads'
    /// magazines and files' spares are left alone. Returns the blocks `discard`
    /// reported, or its first error.
    pub fn trim<E>(
        &self,
        lo: u64,
        hi: u64,
        min: u64,
        mut discard: impl FnMut(u64, u64) -> std::result::Result<u64, E>,
    ) -> std::result::Result<u64, E> {
        let min = min.max(1);
        let mut done = 0u64;
        for r in &self.cpus {
            let m = r.lock();
            let singles = m.singles.iter().map(|&b| (b, 1u64));
            let runs: Vec<Run> = m
                .by_start
                .iter()
                .map(|(&s, &l)| (s, l))
                .chain(singles)
                .collect();
            for (s, l) in runs {
                let a = s.max(lo);
                let b = s.saturating_add(l).min(hi);
                if b > a && b - a >= min {
                    done = done.saturating_add(discard(a, b - a)?);
                }
            }
            drop(m);
        }
        Ok(done)
    }

    /// All free extents (the threads' magazines included), in block order,
    /// adjacent ones merged.
    pub fn extents(&self) -> Vec<Run> {
        let mut v: Vec<Run> = Vec::new();
        for m in &self.cpus {
            let m = m.ext.lock();
            v.extend(m.by_start.iter().map(|(&s, &l)| (s, l)));
            v.extend(m.singles.iter().map(|&b| (b, 1)));
        }
        v.extend(self.mag_blocks().into_iter().map(|b| (b, 1)));
        v.sort_unstable();
        let mut out: Vec<Run> = Vec::with_capacity(v.len());
        for (s, l) in v {
            match out.last_mut() {
                Some(last) if last.0 + last.1 == s => last.1 += l,
                _ => out.push((s, l)),
            }
        }
        out
    }

    fn current_cpu(&self) -> usize {
        thread_cpu().map_or(0, |c| c % self.placement.per_dev())
    }

    /// Calls `f` with the ranges an allocation for a thread of `node` tries, in
    /// order, until it returns true: the devices in the placement's order for the
    /// node — those with room first, then fat ones (they may have gained a block
    /// meanwhile) — and within each, the calling CPU's range first. One device: its
    /// ranges from the CPU's on, with no device order at all.
    #[inline]
    fn try_ranges(&self, node: u32, mut f: impl FnMut(usize) -> bool) {
        let per = self.placement.per_dev();
        let cpu = self.current_cpu();
        if self.dev_free.len() == 1 {
            for k in 0..per {
                if f((cpu + k) % per) {
                    return;
                }
            }
            return;
        }
        let mut devs = smallvec::SmallVec::<[usize; 8]>::new();
        self.placement.device_order(node, &mut devs);
        // Devices with room first; then every device not tried yet (one that was
        // fat a moment ago may have room now: each is tried once).
        let mut tried = 0u64;
        for room_pass in [true, false] {
            for &d in &devs {
                if tried & (1 << d) != 0
                    || (room_pass && self.dev_free[d].load(Ordering::Relaxed) == 0)
                {
                    continue;
                }
                tried |= 1 << d;
                for k in 0..per {
                    if f(d * per + (cpu + k) % per) {
                        return;
                    }
                }
            }
        }
    }

    /// Counts `n` blocks taken from range `r` off its device.
    fn taken(&self, r: usize, n: u64) {
        let d = r / self.placement.per_dev();
        self.dev_free[d].fetch_sub(n, Ordering::AcqRel);
        contention::rmw(1);
    }

    /// Claims `n` blocks of the free count, keeping `floor` of it; false when there
    /// are not that many.
    fn claim(&self, n: u64, floor: u64) -> bool {
        let mut cur = self.free.load(Ordering::Relaxed);
        loop {
            if cur < n.saturating_add(floor) {
                return false;
            }
            contention::rmw(1);
            match self
                .free
                .compare_exchange_weak(cur, cur - n, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(x) => cur = x,
            }
        }
    }

    /// Allocates `n` blocks as one or more runs. `meta` allocations may dip into the
    /// reserve; data allocations fail with ENOSPC before touching it.
    pub fn alloc(&self, n: u64, meta: bool) -> Result<Runs> {
        if n == 1 && !meta {
            if let Some(b) = self.alloc_from_mag() {
                return Ok(smallvec::smallvec![(b, 1)]);
            }
        }
        let node = if self.dev_free.len() > 1 {
            pm::thread_node()
        } else {
            0
        };
        self.alloc_for(n, meta, node)
    }

    /// Allocates `n` blocks as [`Space::alloc`] does, placed for a thread of `node`;
    /// when the ranges are short, the threads' magazines go back to them first.
    fn alloc_for(&self, n: u64, meta: bool, node: u32) -> Result<Runs> {
        match self.alloc_shared_on(n, meta, node) {
            Err(FsError::NoSpace) if self.drain_mags() > 0 => self.alloc_shared_on(n, meta, node),
            r => r,
        }
    }

    /// Allocates `n` blocks from the ranges (no magazine), placed for this thread.
    fn alloc_shared(&self, n: u64, meta: bool) -> Result<Runs> {
        self.alloc_shared_on(n, meta, 0)
    }

    /// Allocates `n` blocks from the ranges, placed for a thread of `node`.
    fn alloc_shared_on(&self, n: u64, meta: bool, node: u32) -> Result<Runs> {
        if n == 0 {
            return Ok(Runs::new());
        }
        let floor = if meta { 0 } else { self.data_floor(n) };
        // Claim the count first so concurrent allocators cannot overdraw.
        if !self.claim(n, floor) {
            return Err(FsError::NoSpace);
        }
        let mut runs = Runs::new();
        let mut need = n;
        self.try_ranges(node, |r| {
            contention::rmw(1);
            let mut m = self.cpus[r].lock();
            let before = need;
            need = m.take_into(need, &mut runs);
            drop(m);
            if need < before {
                self.taken(r, before - need);
            }
            #[cfg(test)]
            tests::after_range(r);
            need == 0
        });
        if need > 0 {
            // The claimed blocks are in the ranges, but the pass, one range at a
            // time, missed some: freed into a range it had passed while others took
            // from ranges ahead of it. Every range held at once sees them.
            need = self.take_all_locked(need, &mut runs);
        }
        if need > 0 {
            // The counter said there was room, so the lists must have it; give back
            // what we took rather than corrupt the accounting (to the ranges: a
            // magazine refill holds the thread's magazine).
            for (s, l) in runs {
                self.free_shared(s, l);
            }
            self.free.fetch_add(need, Ordering::AcqRel);
            contention::rmw(1);
            return Err(FsError::NoSpace);
        }
        Ok(runs)
    }

    /// Takes up to `need` blocks into `runs` with every range locked at once, in
    /// index order (no deadlock: everyone else holds at most one range's lock at a
    /// time, and takes none while holding it). Blocks claimed from the free count
    /// are all in the ranges then: nobody can take them or move them meanwhile.
    /// Returns how many are still needed (0 unless the accounting is broken).
    #[cold]
    fn take_all_locked(&self, mut need: u64, runs: &mut Runs) -> u64 {
        contention::rmw(self.cpus.len() as u64);
        let mut all: Vec<RangeGuard<'_>> = self.cpus.iter().map(|r| r.lock()).collect();
        for (r, m) in all.iter_mut().enumerate() {
            let before = need;
            need = m.take_into(need, runs);
            if need < before {
                self.taken(r, before - need);
            }
            if need == 0 {
                break;
            }
        }
        need
    }

    /// Allocates `n` contiguous blocks that data writes may take (not the metadata
    /// reserve), from the end of the shortest extent long enough (the current CPU's
    /// range first), or `None` when no extent is. Files allocate from the front of
    /// extents, so what this takes (LAWN chunks) stays out of their way.
    pub fn alloc_contiguous(&self, n: u64) -> Option<u64> {
        self.alloc_contiguous_on(n, pm::thread_node())
    }

    /// [`Space::alloc_contiguous`] for a thread of NUMA `node` (its devices in the
    /// placement's order for that node).
    pub fn alloc_contiguous_on(&self, n: u64, node: u32) -> Option<u64> {
        if n == 0 || !self.claim(n, self.reserve) {
            return None;
        }
        let mut got = None;
        self.try_ranges(node, |r| {
            let mut m = self.cpus[r].lock();
            let pick = m.by_len.range((n, 0)..).next().copied();
            if let Some((l, s)) = pick {
                m.remove(s, l);
                if l > n {
                    m.add(s, l - n);
                }
                drop(m);
                self.taken(r, n);
                got = Some(s + l - n);
            }
            got.is_some()
        });
        if got.is_none() {
            self.free.fetch_add(n, Ordering::AcqRel);
        }
        got
    }

    /// Allocates one block (log page).
    pub fn alloc_one(&self, meta: bool) -> Result<u64> {
        let runs = self.alloc(1, meta)?;
        runs.first().map(|r| r.0).ok_or(FsError::NoSpace)
    }

    /// Allocates a log page of a log whose first page is `first` (none: a new log,
    /// placed for the calling thread): next to `first`, so that a file's log stays
    /// on its creator's node whoever appends to it.
    pub fn alloc_log(&self, first: Option<u64>) -> Result<u64> {
        let node = match first {
            _ if self.dev_free.len() == 1 => 0,
            Some(b) => self.placement.device_node(self.placement.device_of(b)),
            None => pm::thread_node(),
        };
        let runs = self.alloc_for(1, true, node)?;
        runs.first().map(|r| r.0).ok_or(FsError::NoSpace)
    }

    /// Returns a run to the allocator: one block to the calling thread's magazine,
    /// more to the range(s) owning them.
    pub fn free_run(&self, start: u64, len: u64) {
        if len == 1 && self.free_to_mag(start) {
            return;
        }
        self.free_shared(start, len);
    }

    /// Returns a run to the range(s) owning its blocks.
    fn free_shared(&self, mut start: u64, mut len: u64) {
        debug_assert!(len == 0 || self.geo.is_data_block(start + len - 1));
        while len > 0 {
            let r = self.placement.range_of(start);
            let (_, end) = self.placement.range(r);
            let take = len.min(end - start);
            self.cpus[r].lock().put(start, take);
            // The device has room again: allocations try it in its place (it leaves
            // the fat list).
            self.dev_free[r / self.placement.per_dev()].fetch_add(take, Ordering::AcqRel);
            self.free.fetch_add(take, Ordering::AcqRel);
            contention::rmw(3);
            start += take;
            len -= take;
        }
    }

    /// Returns every block of `runs`.
    pub fn free_runs(&self, runs: &[Run]) {
        for &(s, l) in runs {
            self.free_run(s, l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    type Hook = Box<dyn FnMut(usize)>;

    thread_local! {
        /// What runs after an allocation's pass has visited a range, on the
        /// allocating thread (once: it is taken out to run): another thread's frees
        /// and allocations, at a chosen point of the pass.
        static AFTER_RANGE: std::cell::RefCell<Option<Hook>> =
            const { std::cell::RefCell::new(None) };
    }

    pub(super) fn after_range(r: usize) {
        if let Some(mut f) = AFTER_RANGE.with(|h| h.borrow_mut().take()) {
            f(r);
        }
    }

    /// An allocation's pass visits one range at a time. Blocks freed into a range
    /// it has passed, while another allocation takes those ahead of it, are still
    /// there to take: the claim said so, and ENOSPC would be a lie.
    #[test]
    fn blocks_freed_behind_the_pass_are_found() {
        let g = Geometry::compute(64 << 20, 16, 0).unwrap();
        let s = Arc::new(Space::empty(g));
        let (r0, _) = s.placement.range(0);
        let (r1, _) = s.placement.range(1);
        // Two free blocks in range 1; two of range 0 held by "another thread".
        s.free_shared(r0, 2);
        s.free_shared(r1, 2);
        set_thread_cpu(Some(0));
        let held = s.alloc(2, true).unwrap();
        assert_eq!(held.to_vec(), vec![(r0, 2)]);
        // The other thread, while our pass is past range 0: frees its two blocks
        // there, then allocates two as a thread of CPU 1 (range 1's).
        let other = s.clone();
        AFTER_RANGE.with(|h| {
            *h.borrow_mut() = Some(Box::new(move |r| {
                assert_eq!(r, 0);
                other.free_runs(&held);
                set_thread_cpu(Some(1));
                let took = other.alloc(2, true).unwrap();
                set_thread_cpu(Some(0));
                assert_eq!(took.to_vec(), vec![(r1, 2)]);
            }))
        });
        let got = s.alloc(2, true);
        set_thread_cpu(None);
        assert_eq!(got.unwrap().to_vec(), vec![(r0, 2)]);
        assert_eq!(s.free_blocks(), 0);
    }

    /// Free space scattered in single blocks: each run an allocation takes costs a
    /// log entry to map, 63 to a log page. A data allocation leaves those pages,
    /// and `available` counts them out, so that one allocation of all of it
    /// succeeds and the pages to map it are still there.
    #[test]
    fn a_data_allocation_leaves_the_log_pages_that_map_its_runs() {
        let g = Geometry::compute(256 << 20, 16, 0).unwrap();
        let s = Space::empty(g);
        let n = g.data_blocks() / 2;
        for i in 0..n {
            s.free_shared(g.data_start + 2 * i, 1);
        }
        assert_eq!(s.free_blocks(), n);
        let pages = n.div_ceil(ENTRIES_PER_PAGE) + 2;
        assert!(pages > s.reserve, "{n} runs need more than the reserve");
        let avail = s.available();
        assert_eq!(avail, n - pages);
        // Not all but the reserve: the claim leaves the pages its runs need.
        assert!(matches!(
            s.alloc(n - s.reserve, false),
            Err(FsError::NoSpace)
        ));
        assert_eq!(s.free_blocks(), n);
        let runs = s.alloc(avail, false).unwrap();
        assert_eq!(runs.len() as u64, avail);
        assert_eq!(s.free_blocks(), pages);
        for _ in 0..(avail.div_ceil(ENTRIES_PER_PAGE) + 1) {
            s.alloc_one(true).unwrap();
        }
        // A small allocation still needs no more than the reserve.
        s.free_runs(&runs[..runs.len() - 300]);
        assert!(s.alloc(20, false).is_ok());
    }

    fn geo() -> Geometry {
        Geometry::compute(64 << 20, 2, 0).unwrap()
    }

    fn from_used(g: Geometry, used: &[bool]) -> Space {
        let s = Space::empty(g);
        for (i, &u) in used.iter().enumerate() {
            if !u {
                // Into the ranges, as recovery builds them (not a magazine).
                s.free_shared(g.data_start + i as u64, 1);
            }
        }
        s
    }

    #[test]
    fn alloc_free_coalesce() {
        let g = geo();
        let used = vec![false; g.data_blocks() as usize];
        let s = from_used(g, &used);
        let total = s.free_blocks();
        assert_eq!(total, g.data_blocks());
        let r = s.alloc(10, false).unwrap();
        assert_eq!(r.iter().map(|x| x.1).sum::<u64>(), 10);
        assert_eq!(s.free_blocks(), total - 10);
        s.free_runs(&r);
        assert_eq!(s.free_blocks(), total);
        // Fully coalesced again: one extent per CPU, which `extents` reports as the
        // one run they make together.
        assert_eq!(s.extents(), vec![(g.data_start, g.data_blocks())]);
    }

    #[test]
    fn contiguous_runs_come_from_the_end_of_an_extent() {
        let g = geo();
        let mut used = vec![false; g.data_blocks() as usize];
        // Holes of 5 and 600 blocks at the front, the rest used.
        for (i, u) in used.iter_mut().enumerate() {
            *u = !((10..15).contains(&i) || (100..700).contains(&i));
        }
        let s = from_used(g, &used);
        let before = s.free_blocks();
        // Only the 600-block hole holds 16 (the 5-block one is shorter); its last 16
        // blocks are taken.
        assert_eq!(s.alloc_contiguous(16), Some(g.data_start + 684));
        assert_eq!(s.free_blocks(), before - 16);
        // Not past the metadata reserve.
        assert_eq!(s.alloc_contiguous(before - 16 - s.reserve + 1), None);
        assert_eq!(s.free_blocks(), before - 16);
        s.free_run(g.data_start + 684, 16);
        assert_eq!(s.extents().len(), 2);
    }

    /// An allocation takes the shortest extent that holds it (found by length, not
    /// by a scan), else the longest extents first; a freed single block is the next
    /// one-block allocation.
    #[test]
    fn best_fit_by_length_and_single_blocks_first() {
        let g = geo();
        let mut used = vec![true; g.data_blocks() as usize];
        // Free extents at 10 (1 block), 20 (3), 30 (8), 50 (2), 60 (400).
        for (at, len) in [(10usize, 1usize), (20, 3), (30, 8), (50, 2), (60, 400)] {
            for u in &mut used[at..at + len] {
                *u = false;
            }
        }
        let s = Space::empty(g);
        for (i, &u) in used.iter().enumerate() {
            if !u {
                // Whole extents, as recovery frees them (not block by block).
                if i == 0 || used[i - 1] {
                    let len = used[i..].iter().take_while(|&&x| !x).count() as u64;
                    s.free_shared(g.data_start + i as u64, len);
                }
            }
        }
        let d = g.data_start;
        assert_eq!(s.alloc(2, true).unwrap().to_vec(), vec![(d + 50, 2)]);
        assert_eq!(s.alloc(5, true).unwrap().to_vec(), vec![(d + 30, 5)]);
        // Two extents of 3 now (at 20, and the rest of 30's): the lower one.
        assert_eq!(s.alloc(3, true).unwrap().to_vec(), vec![(d + 20, 3)]);
        // A single block is a best fit of one: the 1-block extent, not a long one.
        assert_eq!(s.alloc(1, true).unwrap().to_vec(), vec![(d + 10, 1)]);
        // More than any extent holds: the longest first, then the next longest.
        let r = s.alloc(402, true).unwrap();
        assert_eq!(r.to_vec(), vec![(d + 60, 400), (d + 35, 2)]);
        // A freed single block goes to the thread's magazine and is its next
        // one-block data allocation; it counts free meanwhile.
        assert_eq!(s.free_blocks(), 1);
        s.free_run(d + 10, 1);
        assert_eq!(s.free_blocks(), 2);
        assert_eq!(s.alloc(1, false).unwrap().to_vec(), vec![(d + 10, 1)]);
        assert_eq!(s.free_blocks(), 1);
        // Free everything again: the extents merge, singles included.
        s.free_runs(&r);
        for b in [10, 20, 21, 22, 30, 31, 32, 33, 34, 50, 51] {
            s.free_run(d + b, 1);
        }
        assert_eq!(
            s.extents(),
            vec![
                (d + 10, 1),
                (d + 20, 3),
                (d + 30, 8),
                (d + 50, 2),
                (d + 60, 400)
            ]
        );
        // The ranges hold them but for the single blocks in this thread's magazine.
        let in_ranges = s.per_cpu_free().iter().sum::<u64>();
        assert_eq!(in_ranges + s.mag_blocks().len() as u64, 414);
        assert_eq!(s.free_blocks(), 414);
    }

    #[test]
    fn enospc_and_reserve() {
        let g = geo();
        let probe = Space::empty(g);
        let free = probe.reserve + 20;
        let mut used = vec![true; g.data_blocks() as usize];
        for u in used.iter_mut().take(free as usize) {
            *u = false;
        }
        let s = from_used(g, &used);
        assert_eq!(s.free_blocks(), free);
        // Data may not take the reserve.
        assert!(matches!(s.alloc(21, false), Err(FsError::NoSpace)));
        let r = s.alloc(20, false).unwrap();
        assert!(s.alloc(1, false).is_err());
        // Log pages may.
        let m = s.alloc_one(true).unwrap();
        s.free_runs(&r);
        s.free_run(m, 1);
        assert_eq!(s.free_blocks(), free);
    }
}
