//! The read side of a file's DRAM page index: a radix table of atomic block numbers,
//! read without any lock.
//!
//! The authoritative index is `InodeState::pages` (a `PageMap`, under the inode's state
//! lock); every change to it also goes here, under the same lock, so this table is a
//! mirror of it. A reader holds the file's range lock shared for the pages it reads,
//! which keeps out every writer of those pages (and truncate, hole punch and freeing,
//! which lock them exclusively), so the entries it reads are stable and their blocks
//! are not freed while it copies. That lets reads of one shared file touch no shared
//! cache line in the `segment` lock mode (pNOVA's readers; FxMark DRBM), where the
//! state lock would be the one line every reader bounces.
//!
//! Layout: leaves of 512 `AtomicU64` (a block number, 0 = hole) allocated on first
//! store, under 512-way nodes, as many levels as the highest page written needs (up
//! to 3, for the 2^36 pages the table addresses): a file under 2 MiB is one leaf, a
//! lookup in it one load, and freeing it one free. The root pointer carries the
//! height in its low bits, so a reader loads both at once; the tree grows by a new
//! root whose first slot is the old root, so a reader still walking the old root
//! reads valid (and current) slots. Memory: 4 KiB per 2 MiB of file that was ever
//! written, plus the nodes above.
//!
//! A file whose first store is below page [`SMALL`] starts with a small leaf of
//! [`SMALL`] words (128 B instead of 4 KiB: most files are small, and a metadata
//! server holds the index of every file it serves). A store past it copies the
//! small leaf into a full one and publishes that as the root (under the state lock,
//! as every store). A reader that loaded the small leaf before reads the values it
//! had then, which are current for the pages it reads: it holds their range lock,
//! so none of them changes meanwhile. The small leaf stays allocated until the
//! table is dropped, for such readers.

use crate::tagged::{height, tag, untag};
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

/// Pages a small first leaf covers.
const SMALL: usize = 16;
/// The root's tag for a small leaf (a tree's height is 0..=[`LEVELS`]).
const SMALL_TAG: u32 = 7;

struct SmallLeaf {
    blocks: [AtomicU64; SMALL],
}

struct Node {
    slots: [AtomicPtr<()>; FAN],
}

/// Pages a tree of height `h` (nodes above the leaves) covers.
fn capacity(h: u32) -> u64 {
    1 << (BITS * (h + 1))
}

/// The lock-free page table of one file, with its size and liveness.
pub(crate) struct PageIndex {
    /// The top node (a leaf at height 0), tagged with the height, or a small leaf
    /// tagged [`SMALL_TAG`]; null: empty.
    root: AtomicPtr<()>,
    /// The small leaf the table started with, once a full leaf replaced it (freed
    /// on drop: a reader may still be reading it).
    retired: AtomicPtr<SmallLeaf>,
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
    /// The inode's flags ([`crate::types::inode_flags`]), as its log says (set
    /// under the state lock; read without it by writers, rarely written).
    flags: std::sync::atomic::AtomicU32,
    /// What the file's concurrent writers share (their combining queue, finished
    /// flags), on lines of its own: allocated at the file's first concurrent append,
    /// reached from the state (its `index`) and from the inode alike.
    appends: std::sync::OnceLock<Box<crate::log::Appends>>,
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
            retired: AtomicPtr::new(std::ptr::null_mut()),
            size: AtomicU64::new(0),
            dead: AtomicBool::new(false),
            bytes: AtomicUsize::new(0),
            atime_hint: AtomicI64::new(ATIME_STALE),
            times_dirty: AtomicBool::new(false),
            flags: std::sync::atomic::AtomicU32::new(0),
            appends: std::sync::OnceLock::new(),
        }
    }
}

fn new_node() -> Box<Node> {
    Box::new(Node {
        slots: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
    })
}

fn new_small() -> Box<SmallLeaf> {
    Box::new(SmallLeaf {
        blocks: std::array::from_fn(|_| AtomicU64::new(0)),
    })
}

fn new_leaf() -> Box<Leaf> {
    Box::new(Leaf {
        blocks: std::array::from_fn(|_| AtomicU64::new(0)),
    })
}

impl PageIndex {
    /// The child at `slot`, installing a fresh one (of `size` bytes) from `make` if
    /// given and the slot is empty. Stores happen under the inode's state lock, so
    /// no two installers race; the Release store publishes the zeroed child to
    /// lock-free readers.
    fn child_raw(
        slot: &AtomicPtr<()>,
        make: Option<fn() -> *mut ()>,
        bytes: &AtomicUsize,
        size: usize,
    ) -> *mut () {
        let cur = slot.load(Ordering::Acquire);
        if !cur.is_null() {
            return cur;
        }
        let Some(make) = make else {
            return cur;
        };
        let fresh = make();
        slot.store(fresh, Ordering::Release);
        bytes.fetch_add(size, Ordering::Relaxed);
        fresh
    }

    /// Raises the tree to cover page `pg` (which is below [`MAX_PAGES`]): each new
    /// root holds the old one in its first slot. Under the inode's state lock (the
    /// only place stores come from), so no two growers race; returns the new tagged
    /// root.
    fn grow(&self, pg: u64) -> *mut () {
        let cur = self.root.load(Ordering::Acquire);
        let (mut p, mut h) = (untag(cur), height(cur));
        while pg >= capacity(h) && h < LEVELS {
            h += 1;
            if !p.is_null() {
                let node = new_node();
                node.slots[0].store(p, Ordering::Relaxed);
                self.bytes
                    .fetch_add(std::mem::size_of::<Node>(), Ordering::Relaxed);
                p = Box::into_raw(node) as *mut ();
            }
        }
        let t = tag(p, h);
        // Release: a reader that sees the new root sees the node's first slot.
        self.root.store(t, Ordering::Release);
        t
    }

    /// Replaces the small leaf `small` (the root) by a full leaf holding its
    /// entries; returns the new tagged root. Under the inode's state lock (every
    /// store is), so no entry changes while it is copied.
    fn widen(&self, small: *const SmallLeaf) -> *mut () {
        let leaf = new_leaf();
        // SAFETY: `small` is the live root (see `word`).
        let from = unsafe { &(*small).blocks };
        for (to, w) in leaf.blocks.iter().zip(from) {
            to.store(w.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.bytes
            .fetch_add(std::mem::size_of::<Leaf>(), Ordering::Relaxed);
        let t = tag(Box::into_raw(leaf) as *mut (), 0);
        // Release: a reader that sees the new root sees the copied entries.
        self.root.store(t, Ordering::Release);
        self.retired
            .store(small as *mut SmallLeaf, Ordering::Relaxed);
        t
    }

    /// The leaf word of page `pg`, or `None` if its leaf was never allocated (and
    /// `alloc` is false).
    fn word(&self, pg: u64, alloc: bool) -> Option<&AtomicU64> {
        if pg >= MAX_PAGES {
            return None;
        }
        let mut tagged = self.root.load(Ordering::Acquire);
        if height(tagged) == SMALL_TAG {
            let small = untag(tagged) as *const SmallLeaf;
            if pg < SMALL as u64 {
                // SAFETY: a small leaf installed below from `Box::into_raw`; freed
                // only in Drop, which needs `&mut self` (also once retired).
                return Some(unsafe { &(*small).blocks[pg as usize] });
            }
            if !alloc {
                // Past every page written so far: a hole.
                return None;
            }
            tagged = self.widen(small);
        } else if tagged.is_null() && alloc && pg < SMALL as u64 {
            // The first store, to a page a small leaf covers.
            let fresh = Box::into_raw(new_small());
            self.bytes
                .fetch_add(std::mem::size_of::<SmallLeaf>(), Ordering::Relaxed);
            // Under the state lock, as `grow`; Release publishes the zeroed leaf.
            self.root
                .store(tag(fresh as *mut (), SMALL_TAG), Ordering::Release);
            // SAFETY: just allocated; freed only in Drop.
            return Some(unsafe { &(*fresh).blocks[pg as usize] });
        }
        if pg >= capacity(height(tagged)) {
            if !alloc {
                // Past every page written so far: a hole.
                return None;
            }
            tagged = self.grow(pg);
        }
        let h = height(tagged);
        if untag(tagged).is_null() {
            if !alloc {
                return None;
            }
            let fresh = if h == 0 {
                self.bytes
                    .fetch_add(std::mem::size_of::<Leaf>(), Ordering::Relaxed);
                Box::into_raw(new_leaf()) as *mut ()
            } else {
                self.bytes
                    .fetch_add(std::mem::size_of::<Node>(), Ordering::Relaxed);
                Box::into_raw(new_node()) as *mut ()
            };
            // Under the state lock, as `grow`; Release publishes the zeroed root.
            self.root.store(tag(fresh, h), Ordering::Release);
            tagged = tag(fresh, h);
        }
        let mut ptr = untag(tagged);
        for level in (1..=h).rev() {
            let node = ptr as *const Node;
            let i = ((pg >> (level * BITS)) as usize) & (FAN - 1);
            // SAFETY: `node` is a live Node of this table (the root, or a child
            // installed by `child`); nodes are freed only in Drop, which needs
            // `&mut self`. A root replaced by `grow` stays alive as its successor's
            // first child.
            let slot = unsafe { &(*node).slots[i] };
            let make = if level == 1 {
                alloc.then_some((|| Box::into_raw(new_leaf()) as *mut ()) as fn() -> *mut ())
            } else {
                alloc.then_some((|| Box::into_raw(new_node()) as *mut ()) as fn() -> *mut ())
            };
            ptr = Self::child_raw(
                slot,
                make,
                &self.bytes,
                if level == 1 {
                    std::mem::size_of::<Leaf>()
                } else {
                    std::mem::size_of::<Node>()
                },
            );
            if ptr.is_null() {
                return None;
            }
        }
        let leaf = ptr as *const Leaf;
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

    /// Sets the size; a store only when it changes (every write applies its size,
    /// and an overwrite must not dirty the line every reader reads).
    pub fn set_size(&self, size: u64) {
        if self.size.load(Ordering::Relaxed) != size {
            self.size.store(size, Ordering::Release);
        }
    }

    /// The concurrent writers' shared part, allocated on first use.
    pub fn appends(&self) -> &crate::log::Appends {
        self.appends.get_or_init(Box::default)
    }

    /// The concurrent writers' shared part, if the file ever had a concurrent append.
    pub fn appends_if_any(&self) -> Option<&crate::log::Appends> {
        self.appends.get().map(|b| &**b)
    }

    /// The inode's flags ([`crate::types::inode_flags`]).
    pub fn inode_flags(&self) -> u32 {
        self.flags.load(Ordering::Acquire)
    }

    /// Sets the inode's flags (under the state lock, as its log entry applies).
    pub fn set_inode_flags(&self, v: u32) {
        self.flags.store(v, Ordering::Release);
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
        let t = *self.root.get_mut();
        if height(t) == SMALL_TAG {
            // SAFETY: the root small leaf, from `Box::into_raw` in `word`; freed once.
            drop(unsafe { Box::from_raw(untag(t) as *mut SmallLeaf) });
        } else {
            free(untag(t), height(t));
        }
        let r = *self.retired.get_mut();
        if !r.is_null() {
            // SAFETY: the retired small leaf (no longer the root), freed once.
            drop(unsafe { Box::from_raw(r) });
        }
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

    /// A small file is one small leaf; a page past it widens that into a full
    /// leaf with the same entries; the tree then grows a level at a time as pages
    /// past it are written, and what was mapped stays where it was, also for a
    /// reader that walked the old root.
    #[test]
    fn grows_from_one_leaf() {
        let ix = PageIndex::default();
        ix.set(3, 30);
        ix.set(SMALL as u64 - 1, 31);
        assert_eq!(ix.bytes(), std::mem::size_of::<SmallLeaf>());
        assert_eq!(height(ix.root.load(Ordering::Relaxed)), SMALL_TAG);
        assert_eq!(ix.get(SMALL as u64), 0);
        assert_eq!(ix.bytes(), std::mem::size_of::<SmallLeaf>());
        let small = ix.word(3, false).map(|w| w as *const AtomicU64);
        assert!(small.is_some());
        ix.set(SMALL as u64, 32);
        assert_eq!(height(ix.root.load(Ordering::Relaxed)), 0);
        assert_eq!(
            ix.bytes(),
            std::mem::size_of::<SmallLeaf>() + std::mem::size_of::<Leaf>()
        );
        assert_eq!(ix.get(3), 30);
        assert_eq!(ix.get(SMALL as u64 - 1), 31);
        assert_eq!(ix.get(SMALL as u64), 32);
        assert_eq!(ix.get(4), 0);
        // The small leaf is kept (a reader that loaded it reads the values it had),
        // and no longer where page 3 is looked up.
        let old_word = ix.word(3, false).map(|w| w as *const AtomicU64);
        assert_ne!(old_word, small);
        if let Some(w) = small {
            // SAFETY: the retired small leaf lives until `ix` is dropped.
            assert_eq!(unsafe { (*w).load(Ordering::Relaxed) }, 30);
        }
        assert_eq!(ix.get(512), 0);
        ix.set(512, 40);
        assert_eq!(height(ix.root.load(Ordering::Relaxed)), 1);
        assert_eq!(ix.get(3), 30);
        assert_eq!(ix.get(512), 40);
        // The old leaf is the same memory: a reader holding it reads current values.
        assert_eq!(ix.word(3, false).map(|w| w as *const AtomicU64), old_word);
        ix.set(512 * 512 * 512, 50);
        assert_eq!(height(ix.root.load(Ordering::Relaxed)), 3);
        assert_eq!(ix.get(3), 30);
        assert_eq!(ix.get(512), 40);
        assert_eq!(ix.get(512 * 512 * 512), 50);
        // An empty table that first sees a page past the small leaf starts with a
        // full leaf, one that first sees a high page at that height.
        let mid = PageIndex::default();
        mid.set(SMALL as u64, 5);
        assert_eq!(height(mid.root.load(Ordering::Relaxed)), 0);
        assert_eq!(mid.bytes(), std::mem::size_of::<Leaf>());
        assert_eq!(mid.get(0), 0);
        assert_eq!(mid.get(SMALL as u64), 5);
        let hi = PageIndex::default();
        hi.set(1 << 20, 7);
        assert_eq!(height(hi.root.load(Ordering::Relaxed)), 2);
        assert_eq!(hi.get(1 << 20), 7);
        assert_eq!(hi.get(0), 0);
    }
}
