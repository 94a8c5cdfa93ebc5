//! The read side of a file's DRAM page index: a radix table of atomic block numbers,
//! read without any lock.
//!
//! The authoritative index is `InodeState::pages` (a B-tree, under the inode's state
//! lock); every change to it also goes here, under the same lock, so this table is a
//! mirror of it. A reader holds the file's range lock shared for the pages it reads,
//! which keeps out every writer of those pages (and truncate, hole punch and freeing,
//! which lock them exclusively), so the entries it reads are stable and their blocks
//! are not freed while it copies. That lets reads of one shared file touch no shared
//! cache line in the `segment` lock mode (pNOVA's readers; FxMark DRBM), where the
//! state lock would be the one line every reader bounces.
//!
//! Layout: leaves of 512 `AtomicU64` (a block number, 0 = hole) allocated on first
//! store, under 512-way nodes, 3 levels for the 2^32 pages of a 16 TiB file. Memory:
//! 4 KiB per 2 MiB of file that was ever written, plus the nodes above.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

const BITS: u32 = 9;
const FAN: usize = 1 << BITS;
/// Levels of inner nodes above the leaves: 512^3 leaves × 512 pages = 2^36 pages.
const LEVELS: u32 = 3;
/// Pages the table can address.
pub(crate) const MAX_PAGES: u64 = 1 << (BITS * (LEVELS + 1));

struct Leaf {
    blocks: [AtomicU64; FAN],
}

struct Node {
    slots: [AtomicPtr<()>; FAN],
}

/// The lock-free page table of one file, with its size and liveness.
pub(crate) struct PageIndex {
    root: AtomicPtr<()>,
    size: AtomicU64,
    dead: AtomicBool,
    bytes: AtomicUsize,
    /// Seconds of the access time while it is newer than mtime and ctime, else
    /// [`ATIME_STALE`]: a `relatime` read that finds it under a day old updates
    /// nothing and takes no lock.
    atime_hint: AtomicI64,
    /// Whether the inode is in the data plane's set of inodes with times changed in
    /// DRAM only (so repeated changes skip the shared set).
    times_dirty: AtomicBool,
}

/// [`PageIndex::atime_hint`] when a read must look at the inode's times.
pub(crate) const ATIME_STALE: i64 = i64::MIN;

impl std::fmt::Debug for PageIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageIndex")
            .field("size", &self.size())
            .field("dead", &self.dead())
            .field("bytes", &self.bytes())
            .finish()
    }
}

impl Default for PageIndex {
    fn default() -> Self {
        PageIndex {
            root: AtomicPtr::new(std::ptr::null_mut()),
            size: AtomicU64::new(0),
            dead: AtomicBool::new(false),
            bytes: AtomicUsize::new(0),
            atime_hint: AtomicI64::new(ATIME_STALE),
            times_dirty: AtomicBool::new(false),
        }
    }
}

fn new_node() -> Box<Node> {
    Box::new(Node {
        slots: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
    })
}

fn new_leaf() -> Box<Leaf> {
    Box::new(Leaf {
        blocks: std::array::from_fn(|_| AtomicU64::new(0)),
    })
}

impl PageIndex {
    /// The child at `slot`, installing a fresh one if `make` is given and the slot is
    /// empty. Stores happen under the inode's state lock, so no two installers race;
    /// the Release store publishes the zeroed child to lock-free readers.
    fn child<T>(
        slot: &AtomicPtr<()>,
        make: Option<fn() -> Box<T>>,
        bytes: &AtomicUsize,
    ) -> *mut () {
        let cur = slot.load(Ordering::Acquire);
        if !cur.is_null() {
            return cur;
        }
        let Some(make) = make else {
            return cur;
        };
        let fresh = Box::into_raw(make()) as *mut ();
        slot.store(fresh, Ordering::Release);
        bytes.fetch_add(std::mem::size_of::<T>(), Ordering::Relaxed);
        fresh
    }

    /// The leaf word of page `pg`, or `None` if its leaf was never allocated (and
    /// `alloc` is false).
    fn word(&self, pg: u64, alloc: bool) -> Option<&AtomicU64> {
        if pg >= MAX_PAGES {
            return None;
        }
        let mut slot = &self.root;
        for level in (1..=LEVELS).rev() {
            let ptr = Self::child(
                slot,
                alloc.then_some(new_node as fn() -> Box<Node>),
                &self.bytes,
            ) as *const Node;
            if ptr.is_null() {
                return None;
            }
            let i = ((pg >> (level * BITS)) as usize) & (FAN - 1);
            // SAFETY: `ptr` is a live Node installed in this table; nodes are freed
            // only in Drop, which needs `&mut self`.
            slot = unsafe { &(*ptr).slots[i] };
        }
        let leaf = Self::child(
            slot,
            alloc.then_some(new_leaf as fn() -> Box<Leaf>),
            &self.bytes,
        ) as *const Leaf;
        if leaf.is_null() {
            return None;
        }
        // SAFETY: as above, for a leaf.
        Some(unsafe { &(*leaf).blocks[(pg as usize) & (FAN - 1)] })
    }

    /// The block of page `pg` (0: a hole). Lock-free.
    pub fn get(&self, pg: u64) -> u64 {
        self.word(pg, false)
            .map(|w| w.load(Ordering::Acquire))
            .unwrap_or(0)
    }

    /// Starts loading page `pg`'s entry into the CPU cache (a hint; no effect on
    /// the table): a writer issues it before taking its range lock, so the two
    /// cache misses overlap instead of following each other.
    pub fn prefetch(&self, pg: u64) {
        if let Some(w) = self.word(pg, false) {
            prefetch(w);
        }
    }

    /// Maps page `pg` to `block` (0 unmaps). Under the inode's state lock.
    pub fn set(&self, pg: u64, block: u64) {
        if block == 0 {
            if let Some(w) = self.word(pg, false) {
                w.store(0, Ordering::Release);
            }
        } else if let Some(w) = self.word(pg, true) {
            w.store(block, Ordering::Release);
        }
    }

    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    pub fn set_size(&self, size: u64) {
        self.size.store(size, Ordering::Release);
    }

    /// The access time's seconds while it is newer than mtime and ctime, else
    /// [`ATIME_STALE`].
    pub fn atime_hint(&self) -> i64 {
        self.atime_hint.load(Ordering::Relaxed)
    }

    /// Sets the hint (under the inode's state lock); a store only when it changes.
    pub fn set_atime_hint(&self, v: i64) {
        if self.atime_hint.load(Ordering::Relaxed) != v {
            self.atime_hint.store(v, Ordering::Relaxed);
        }
    }

    /// Marks the inode's times DRAM-only; true when they were not already.
    pub fn mark_times_dirty(&self) -> bool {
        !self.times_dirty.load(Ordering::Relaxed) && !self.times_dirty.swap(true, Ordering::AcqRel)
    }

    /// The inode's times are logged again.
    pub fn clear_times_dirty(&self) {
        self.times_dirty.store(false, Ordering::Release);
    }

    pub fn dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    pub fn set_dead(&self) {
        self.dead.store(true, Ordering::Release);
    }

    /// DRAM held by the table.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// Frees the subtree under `p` (a node at `level` ≥ 1, or a leaf at 0).
fn free(p: *mut (), level: u32) {
    if p.is_null() {
        return;
    }
    if level == 0 {
        // SAFETY: a leaf installed by `child` from `Box::into_raw`, freed once.
        drop(unsafe { Box::from_raw(p as *mut Leaf) });
        return;
    }
    // SAFETY: a node installed by `child` from `Box::into_raw`, freed once.
    let node = unsafe { Box::from_raw(p as *mut Node) };
    for s in &node.slots {
        free(s.load(Ordering::Relaxed), level - 1);
    }
}

impl Drop for PageIndex {
    fn drop(&mut self) {
        free(*self.root.get_mut(), LEVELS);
    }
}

/// Hints the CPU to load the cache line holding `*p` (no architectural effect).
#[inline]
pub(crate) fn prefetch<T>(p: &T) {
    prefetch_addr(p as *const T as usize);
}

/// Prefetches the cache line at address `a`, which may be stale (memory since freed
/// or unmapped): PREFETCHT0 never faults and never writes.
#[inline]
pub(crate) fn prefetch_addr(a: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint only: it neither faults on an invalid address nor
    // changes memory, so any address is fine.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(a as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = a;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_pages_map_and_unmap() {
        let ix = PageIndex::default();
        assert_eq!(ix.get(7), 0);
        assert_eq!(ix.bytes(), 0);
        for (pg, b) in [(0u64, 100u64), (511, 101), (512, 102), (MAX_PAGES - 1, 103)] {
            ix.set(pg, b);
        }
        assert_eq!(ix.get(0), 100);
        assert_eq!(ix.get(511), 101);
        assert_eq!(ix.get(512), 102);
        assert_eq!(ix.get(MAX_PAGES - 1), 103);
        assert_eq!(ix.get(1), 0);
        assert_eq!(ix.get(MAX_PAGES), 0);
        ix.set(511, 0);
        assert_eq!(ix.get(511), 0);
        // Unmapping where nothing was mapped allocates nothing.
        let before = ix.bytes();
        ix.set(1 << 30, 0);
        assert_eq!(ix.bytes(), before);
    }
}
