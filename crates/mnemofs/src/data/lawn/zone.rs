//! The DRAM side of one LAWN sub-zone (paper §4.1): which slots are free (a bitmap
//! with a next-fit free pointer), a hash from (inode, page) to the runs of slots
//! holding that page's newest slices, a map from data block to page (so that freeing
//! a block finds the descriptors that shadow it), and an LRU list of pages for the
//! write-back thread. All of it is rebuilt from the descriptor table at mount.
//!
//! Built for the write path's cache misses: a page's entry in the hash carries a
//! bit mask of the slice positions its runs cover and one of the positions where
//! they start, so "does any run overlap these slices" is a mask test in the entry
//! itself, and the run covering a position is found by counting bits, not by
//! scanning; the entry holds the slots of up to [`INLINE_RUNS`] runs itself, so a
//! write touches the entry's two cache lines and no other DRAM of the sub-zone.
//!
//! The LRU list orders pages, not runs (write-back writes a page's runs back
//! together anyway, under one lock of the page): a queue with lazy deletion, and an
//! approximate LRU as kernels keep for pages. A page enters at the back when it gets
//! its first run, and again when a run of it is created or it is read while its
//! newest queue entry is older than half as many uses as there are runs, with a
//! fresh stamp kept in its entry (a page used again soon costs no queue entry: a
//! queue push per write, and its fresh memory, cost ~5 % of a random-write run);
//! removing a run or page costs nothing there, and the write-back side skips queue
//! entries whose page is gone or whose stamp is old.

use super::descriptor::Desc;
use super::pagetable::PageTable;
use crate::types::Ino;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// Recently freed runs remembered for reuse.
const RECENT_MAX: usize = 64;

/// A run of slots described by the descriptor of its first slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RunInfo {
    pub desc: Desc,
    /// Global slot index of the first slot (= the descriptor's index).
    pub slot: u64,
}

/// Runs whose slots a page entry keeps inline, ordered by first slice: with the key,
/// masks and stamp that makes the entry two cache lines. (128-byte writes over
/// 64-byte slots leave up to 32 runs on a page, about half of them in the zone at a
/// time; more than 21 is rare.)
const INLINE_RUNS: usize = 21;

/// The runs of one page. A run's first slice and length are in the masks: it starts
/// at a bit of `starts` and covers the `covered` bits up to the next start or gap.
/// Its first slot (relative to the sub-zone) is in `inline`, by rank of its first
/// slice among the starts, while the page has at most [`INLINE_RUNS`] runs; beyond,
/// every run's slot is in `spill`, at the index of its first slice.
/// (`repr(C)`: the masks come right after the hash key, in the entry's first line.)
#[derive(Debug, Default)]
#[repr(C)]
struct PageRuns {
    /// The data block every run of the page shadows (the page's current mapping).
    block: u64,
    /// Slice positions covered by a run.
    covered: u64,
    /// Slice positions where a run starts.
    starts: u64,
    /// LRU stamp of the page's newest queue entry: the sub-zone's use count when it
    /// was pushed.
    stamp: u32,
    inline: [u32; INLINE_RUNS],
    spill: Option<Box<[u32; 64]>>,
}

// SAFETY: all zero is a valid `PageRuns` and its default: integers and integer
// arrays, and an `Option<Box<_>>`, whose `None` is the null pointer (guaranteed).
unsafe impl super::pagetable::ZeroDefault for PageRuns {}

// The entry (8-byte key + value) must stay within two cache lines.
const _: () = assert!(std::mem::size_of::<PageRuns>() <= 120);

/// Bits `s0..=s1`.
fn span(s0: u32, s1: u32) -> u64 {
    let hi = if s1 >= 63 {
        u64::MAX
    } else {
        (1u64 << (s1 + 1)) - 1
    };
    hi & !((1u64 << s0) - 1)
}

impl PageRuns {
    /// Rank of slice position `first` among the starts below it.
    fn rank(&self, first: u32) -> usize {
        (self.starts & ((1u64 << first) - 1)).count_ones() as usize
    }

    /// First slot of the run starting at `first` (a bit of `starts`).
    fn slot_of(&self, first: u32) -> u32 {
        match &self.spill {
            Some(s) => s[first as usize & 63],
            None => self.inline[self.rank(first).min(INLINE_RUNS - 1)],
        }
    }

    /// Records the first slot of a new run starting at `first` (not yet in
    /// `starts`; the caller sets the bit after).
    fn add_slot(&mut self, first: u32, rel: u32) {
        let n = self.starts.count_ones() as usize;
        if self.spill.is_none() && n >= INLINE_RUNS {
            let mut all = Box::new([0u32; 64]);
            for (i, f) in self.firsts().enumerate() {
                all[f as usize] = self.inline[i];
            }
            self.spill = Some(all);
        }
        match &mut self.spill {
            Some(all) => all[first as usize & 63] = rel,
            None => {
                let r = self.rank(first);
                self.inline.copy_within(r..n, r + 1);
                self.inline[r] = rel;
            }
        }
    }

    /// Forgets the slot of the run starting at `first` (still in `starts`; the
    /// caller clears the bit after). A page back to half the inline capacity keeps
    /// its slots inline again.
    fn remove_slot(&mut self, first: u32) {
        let n = self.starts.count_ones() as usize;
        match &self.spill {
            Some(all) if n - 1 <= INLINE_RUNS / 2 => {
                let mut i = 0;
                let mut m = self.starts & !(1u64 << first);
                while m != 0 {
                    self.inline[i] = all[m.trailing_zeros() as usize];
                    m &= m - 1;
                    i += 1;
                }
                self.spill = None;
            }
            Some(_) => {}
            None => {
                let r = self.rank(first);
                self.inline.copy_within(r + 1..n, r);
            }
        }
    }

    /// Length of the run starting at `first` (a bit of `starts`).
    fn count_at(&self, first: u32) -> u32 {
        // Ends at the first uncovered position or the next start after `first`.
        let stop = !(self.covered >> first) | ((self.starts >> first) & !1);
        stop.trailing_zeros().min(64 - first)
    }

    /// First slice of the run covering slice position `p`, if any.
    fn covering(&self, p: u32) -> Option<u32> {
        if self.covered & (1 << p) == 0 {
            return None;
        }
        // The nearest start at or below `p` begins the covering run.
        let below = self.starts & span(0, p);
        if below == 0 {
            return None;
        }
        let f = 63 - below.leading_zeros();
        (f + self.count_at(f) > p).then_some(f)
    }

    /// The run starting at `first` (a bit of `starts`); `ids` are the sub-zone's.
    fn info(&self, ino: Ino, pgoff: u64, first: u32, ids: &Ids) -> Option<RunInfo> {
        if first >= 64 || self.starts & (1 << first) == 0 {
            return None;
        }
        let rel = self.slot_of(first);
        Some(RunInfo {
            desc: Desc {
                ino,
                pgoff,
                block: self.block,
                first,
                count: self.count_at(first),
            },
            slot: ids.id_of(rel as u64),
        })
    }

    /// First slices of the runs, in order.
    fn firsts(&self) -> impl Iterator<Item = u32> {
        let mut m = self.starts;
        std::iter::from_fn(move || {
            (m != 0).then(|| {
                let f = m.trailing_zeros();
                m &= m - 1;
                f
            })
        })
    }
}

/// One entry of the LRU queue: a page (its packed page-table key), live while the
/// page's entry has this stamp. 16 bytes.
#[derive(Clone, Copy, Debug)]
struct LruEntry {
    key: u64,
    stamp: u32,
}

/// What the slices `s0..=s1` of a page overlap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Overlap {
    /// No run: the newest copy of every slice is in the file.
    None,
    /// One run covers them all: the newest copy is in the zone.
    Covered(RunInfo),
    /// Runs cover some of them, or run past them partly.
    Partial,
}

/// How a sub-zone numbers its slots: relative indices (the bitmap's, and what a page
/// entry keeps) against global slot numbers (what descriptors' offsets come from,
/// docs/FORMAT.md §2.9). Relative `0..fixed` are the sub-zone's slots in the fixed
/// zone, global `base..`; growth chunk `k` of the sub-zone (chunk table entry
/// `first_entry + k`) holds relative `fixed_r + k * spc ..` (`fixed_r`: `fixed`
/// rounded up to 64, so each chunk starts on a bitmap word), global
/// `zone_slots + (first_entry + k) * spc ..`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ids {
    base: u64,
    fixed: u64,
    fixed_r: u64,
    spc: u64,
    zone_slots: u64,
    first_entry: u64,
}

impl Ids {
    /// Global slot number of relative slot `rel`.
    #[inline]
    fn id_of(&self, rel: u64) -> u64 {
        if rel < self.fixed {
            self.base + rel
        } else {
            let r = rel - self.fixed_r;
            let (k, j) = (r / self.spc, r % self.spc);
            self.zone_slots + (self.first_entry + k) * self.spc + j
        }
    }

    /// Relative slot of global slot number `id` (one of this sub-zone's).
    #[inline]
    fn rel_of(&self, id: u64) -> u64 {
        if id < self.zone_slots {
            id - self.base
        } else {
            let g = id - self.zone_slots;
            let (e, j) = (g / self.spc, g % self.spc);
            self.fixed_r + (e - self.first_entry) * self.spc + j
        }
    }

    /// End (relative) of the region holding relative slot `rel`: the fixed part,
    /// the gap after it, or one chunk. A run never crosses it.
    #[inline]
    fn region_end(&self, rel: u64) -> u64 {
        if rel < self.fixed {
            self.fixed
        } else if rel < self.fixed_r || self.spc == 0 {
            self.fixed_r
        } else {
            self.fixed_r + ((rel - self.fixed_r) / self.spc + 1) * self.spc
        }
    }
}

/// Where a sub-zone's growth chunks go (see [`Ids`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChunkLayout {
    /// Slots of the fixed zone (all sub-zones).
    pub zone_slots: u64,
    /// Slots of one chunk.
    pub spc: u64,
    /// The sub-zone's first chunk table entry.
    pub first_entry: u64,
    /// Chunk table entries the sub-zone owns.
    pub max_chunks: u64,
}

/// One CPU's sub-zone.
pub(crate) struct SubZone {
    /// Slots the sub-zone has now: its fixed ones and those of its chunks.
    pub nslots: u64,
    ids: Ids,
    /// Which of the sub-zone's chunk table entries hold a chunk.
    chunks: Vec<bool>,
    /// NUMA node of the device each chunk (by `k`) lies on, and of the fixed part's
    /// (device 0): what [`SubZone::alloc_on`] prefers.
    chunk_node: Vec<u32>,
    fixed_node: u32,
    /// A chunk being emptied to give its blocks back: no run is allocated in it, and
    /// its slots freed meanwhile do not count as free.
    draining: Option<usize>,
    /// Relative slots the bitmap covers and allocation scans: `fixed`, or up to the
    /// end of the last chunk.
    span: u64,
    /// One bit per relative slot: used (or not a slot: the gap after the fixed part
    /// and chunks the sub-zone does not have).
    used: Vec<u64>,
    free: u64,
    /// Next-fit free pointer (relative slot index).
    fpt: u64,
    /// Recently freed runs (relative first slot, length), reused first: alternate
    /// writing frees a run for nearly every run it takes, and reusing it keeps the
    /// zone's working set small and in the CPU cache.
    recent: VecDeque<(u64, u64)>,
    nruns: usize,
    /// (inode, page) → the page's runs (the paper's hash from (inode, offset)).
    pages: PageTable<PageRuns>,
    /// Data block → (inode, page) it holds, for pages with runs.
    by_block: FxHashMap<u64, (Ino, u64)>,
    /// LRU queue of pages, least recently used at the front; entries of removed or
    /// promoted pages stay until they reach the front or the queue is compacted.
    lru: VecDeque<LruEntry>,
    /// Uses so far (run inserts and reads that found runs), wrapping: the stamps.
    clock: u32,
    /// Small writes whose slices went to this sub-zone's slots, and those that went
    /// back to the file in place (counted by the writer under the lock).
    pub zone_writes: u64,
    pub file_writes: u64,
}

impl SubZone {
    /// A sub-zone of `nslots` fixed slots from global slot `base`, without growth.
    #[cfg(test)]
    pub fn new(base: u64, nslots: u64) -> SubZone {
        Self::with_chunks(
            base,
            nslots,
            ChunkLayout {
                zone_slots: 0,
                spc: 0,
                first_entry: 0,
                max_chunks: 0,
            },
        )
    }

    /// A sub-zone of `nslots` fixed slots from global slot `base` that may grow by
    /// the chunks `layout` says (none present yet: [`Self::add_chunk`]).
    pub fn with_chunks(base: u64, nslots: u64, layout: ChunkLayout) -> SubZone {
        let fixed_r = nslots.div_ceil(64) * 64;
        let mut used = vec![0; nslots.div_ceil(64) as usize];
        if !nslots.is_multiple_of(64) {
            // The gap up to the first chunk is never a slot.
            if let Some(w) = used.last_mut() {
                *w = u64::MAX << (nslots % 64);
            }
        }
        SubZone {
            nslots,
            ids: Ids {
                base,
                fixed: nslots,
                fixed_r,
                spc: layout.spc,
                // Without chunks every slot number is a fixed one.
                zone_slots: if layout.spc == 0 {
                    u64::MAX
                } else {
                    layout.zone_slots
                },
                first_entry: layout.first_entry,
            },
            chunks: vec![
                false;
                if layout.spc == 0 {
                    0
                } else {
                    layout.max_chunks as usize
                }
            ],
            chunk_node: vec![
                0;
                if layout.spc == 0 {
                    0
                } else {
                    layout.max_chunks as usize
                }
            ],
            fixed_node: 0,
            draining: None,
            span: nslots,
            used,
            free: nslots,
            fpt: 0,
            recent: VecDeque::new(),
            nruns: 0,
            pages: PageTable::new(),
            by_block: FxHashMap::default(),
            lru: VecDeque::new(),
            clock: 0,
            zone_writes: 0,
            file_writes: 0,
        }
    }

    /// Where the page table lies (see `LawnCore::prefetch`).
    pub fn table_hint(&self) -> (usize, usize) {
        self.pages.hint()
    }

    /// Address of the page-table entry of (ino, pgoff) for a table hint.
    pub fn table_entry_addr(base: usize, mask: usize, ino: Ino, pgoff: u64) -> Option<usize> {
        PageTable::<PageRuns>::entry_addr(base, mask, ino, pgoff)
    }

    /// Global indices of the free slots, lowest first (their descriptors are clear
    /// once mount has cleared stale ones).
    pub fn free_slots_iter(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.span)
            .filter(|&i| !self.is_used(i))
            .map(|i| self.ids.id_of(i))
    }

    pub fn free_slots(&self) -> u64 {
        self.free
    }

    pub fn runs(&self) -> usize {
        self.nruns
    }

    fn is_used(&self, i: u64) -> bool {
        self.used[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    /// The bitmap words and masks of slots `[i, i + n)` (`1 <= n <= 64`): at most
    /// two words.
    fn masks(i: u64, n: u64) -> [(usize, u64); 2] {
        let (w, b) = ((i / 64) as usize, i % 64);
        let lo = if b + n >= 64 {
            u64::MAX << b
        } else {
            ((1u64 << n) - 1) << b
        };
        let rest = (b + n).saturating_sub(64);
        let hi = if rest == 0 { 0 } else { (1u64 << rest) - 1 };
        [(w, lo), (w + 1, hi)]
    }

    /// Whether any of slots `[i, i + n)` (`1 <= n <= 64`, in range) is used.
    fn any_used(&self, i: u64, n: u64) -> bool {
        Self::masks(i, n)
            .iter()
            .any(|&(w, m)| m != 0 && self.used[w] & m != 0)
    }

    /// Marks slots `[i, i + n)` (`1 <= n <= 64`, in range) used or free.
    fn set_used(&mut self, i: u64, n: u64, on: bool) {
        for (w, m) in Self::masks(i, n) {
            if m != 0 {
                if on {
                    self.used[w] |= m;
                } else {
                    self.used[w] &= !m;
                }
            }
        }
    }

    /// Reserves `n` consecutive free slots (`n <= 64`): the most recently freed run
    /// if it has that length and is still free, else next fit from the free
    /// pointer; returns the global index of the first, or `None` when no such run
    /// exists.
    pub fn alloc(&mut self, n: u64) -> Option<u64> {
        self.alloc_where(n, None)
    }

    /// [`SubZone::alloc`] in the regions (fixed part, chunks) on NUMA `node` only.
    pub fn alloc_on(&mut self, n: u64, node: u32) -> Option<u64> {
        self.alloc_where(n, Some(node))
    }

    /// Sets the NUMA node of the fixed part and of each chunk `k` (`chunk(k)`).
    pub fn set_nodes(&mut self, fixed: u32, chunk: impl Fn(usize) -> u32) {
        self.fixed_node = fixed;
        for (k, n) in self.chunk_node.iter_mut().enumerate() {
            *n = chunk(k);
        }
    }

    /// Whether chunk `k` is on another NUMA node than the fixed part.
    pub fn chunk_is_remote(&self, k: usize) -> bool {
        self.chunk_node
            .get(k)
            .is_some_and(|&n| n != self.fixed_node)
    }

    /// Sets the NUMA node of chunk `k`.
    pub fn set_chunk_node(&mut self, k: usize, node: u32) {
        if let Some(n) = self.chunk_node.get_mut(k) {
            *n = node;
        }
    }

    /// The NUMA node of the region holding relative slot `rel` (the gap after the
    /// fixed part counts as the fixed part's: it holds no slot).
    fn region_node(&self, rel: u64) -> u32 {
        if rel < self.ids.fixed_r || self.ids.spc == 0 {
            return self.fixed_node;
        }
        let k = ((rel - self.ids.fixed_r) / self.ids.spc) as usize;
        self.chunk_node.get(k).copied().unwrap_or(self.fixed_node)
    }

    #[inline]
    fn alloc_where(&mut self, n: u64, node: Option<u32>) -> Option<u64> {
        if n == 0 || n > 64 || n > self.free || n > self.nslots {
            return None;
        }
        if let Some(&(r, len)) = self.recent.back() {
            if len == n && node.is_none_or(|w| self.region_node(r) == w) {
                self.recent.pop_back();
                if !self.any_used(r, n) && !self.in_draining(r) {
                    self.set_used(r, n, true);
                    self.free -= n;
                    return Some(self.ids.id_of(r));
                }
            }
        }
        let span = self.span;
        let mut start = self.fpt;
        let mut scanned = 0;
        while scanned < span {
            if start >= span {
                start = 0;
            }
            // A run stays inside one region (the fixed part, or one chunk), and out
            // of a chunk being emptied.
            let end = self.ids.region_end(start).min(span);
            if start + n > end
                || self.in_draining(start)
                || node.is_some_and(|w| self.region_node(start) != w)
            {
                scanned += end - start;
                start = end;
                continue;
            }
            if start.is_multiple_of(64) && self.used[(start / 64) as usize] == u64::MAX {
                // A whole used word (or a chunk the sub-zone does not have).
                scanned += 64;
                start += 64;
                continue;
            }
            if !self.any_used(start, n) {
                self.set_used(start, n, true);
                self.free -= n;
                self.fpt = if start + n >= span { 0 } else { start + n };
                return Some(self.ids.id_of(start));
            }
            // Past the last used slot of the window.
            let u = (start..start + n)
                .rev()
                .find(|&i| self.is_used(i))
                .unwrap_or(start);
            scanned += u + 1 - start;
            start = u + 1;
        }
        None
    }

    /// Starts loading the bitmap word of global slot `slot` (one of this
    /// sub-zone's) into the CPU cache: a writer that frees a run only after its
    /// fences calls this before them, so that the release finds the word there (a
    /// read prefetch: a line no other core holds arrives exclusive, ready for the
    /// release's store).
    #[inline]
    pub fn prefetch_used(&self, slot: u64) {
        if let Some(w) = self.used.get((self.ids.rel_of(slot) / 64) as usize) {
            crate::index::prefetch(w);
        }
    }

    /// Returns reserved or described slots (`n <= 64`) to the free pool.
    pub fn release(&mut self, slot: u64, n: u64) {
        let rel = self.ids.rel_of(slot);
        let draining = self.in_draining(rel);
        for i in rel..rel + n {
            if self.is_used(i) && !draining {
                self.free += 1;
            }
        }
        self.set_used(rel, n, false);
        if draining {
            return;
        }
        if self.recent.len() >= RECENT_MAX {
            self.recent.pop_front();
        }
        self.recent.push_back((rel, n));
    }

    /// Drops dead entries from the LRU queue once they outnumber the live ones
    /// (lazy deletion leaves them behind; amortized O(1) per push). Before a push:
    /// the entry pushed next is not live until its stamp is in the page's entry.
    fn compact_lru(&mut self) {
        if self.lru.len() > 4 * self.nruns + 1024 {
            let pages = &self.pages;
            self.lru.retain(|e| live(pages, e).is_some());
        }
    }

    /// Counts a use of a page whose entry is `p` (`fresh`: just created) and pushes
    /// the page to the back of the LRU queue with a fresh stamp, unless its newest
    /// queue entry is younger than half as many uses as there are runs: an
    /// approximate LRU, as kernels keep for pages, in which a page used again soon
    /// costs no queue entry. Write-back therefore takes a page used within the last
    /// `runs/2` uses only after every page not used for `runs` uses.
    fn use_page(
        clock: &mut u32,
        lru: &mut VecDeque<LruEntry>,
        nruns: usize,
        key: u64,
        p: &mut PageRuns,
        fresh: bool,
    ) {
        *clock = clock.wrapping_add(1);
        if fresh || clock.wrapping_sub(p.stamp) > (nruns / 2) as u32 {
            p.stamp = *clock;
            lru.push_back(LruEntry { key, stamp: *clock });
        }
    }

    /// Records a valid run whose slots are already reserved (`alloc`) or, at mount,
    /// marks them used. Returns false (and records nothing) if a slot of the run is
    /// taken by another run, the run overlaps slices of another run of its page, or
    /// the page's runs shadow another block.
    pub fn insert(&mut self, slot: u64, desc: Desc, reserved: bool) -> bool {
        let rel = self.ids.rel_of(slot);
        let count = desc.count as u64;
        if desc.count == 0
            || desc.first + desc.count > 64
            || rel + count > self.ids.region_end(rel).min(self.span)
        {
            return false;
        }
        if !reserved && self.any_used(rel, count) {
            return false;
        }
        let mask = span(desc.first, desc.first + desc.count - 1);
        self.compact_lru();
        // One probe: the page's entry, created if new.
        let Some((p, fresh)) = self.pages.entry(desc.ino, desc.pgoff) else {
            return false;
        };
        if !fresh && (p.block != desc.block || p.covered & mask != 0) {
            return false;
        }
        if fresh {
            p.block = desc.block;
        }
        p.add_slot(desc.first, rel as u32);
        p.covered |= mask;
        p.starts |= 1 << desc.first;
        // A run ends at the next start: one that starts right after this one must
        // not read as its continuation, and this one must not extend past `count`.
        debug_assert_eq!(p.count_at(desc.first), desc.count);
        let key = (desc.ino << 32) | desc.pgoff;
        Self::use_page(&mut self.clock, &mut self.lru, self.nruns, key, p, fresh);
        if fresh {
            self.by_block.insert(desc.block, (desc.ino, desc.pgoff));
        }
        if !reserved {
            self.set_used(rel, count, true);
            self.free -= count;
        }
        self.nruns += 1;
        true
    }

    /// Forgets the run of page `pgoff` of `ino` starting at slice `first` and frees
    /// its slots.
    pub fn remove(&mut self, ino: Ino, pgoff: u64, first: u32) -> Option<RunInfo> {
        let info = self.detach(ino, pgoff, first)?;
        self.release(info.slot, info.desc.count as u64);
        Some(info)
    }

    /// Forgets the run of page `pgoff` of `ino` starting at slice `first` but keeps
    /// its slots reserved: the caller frees them ([`Self::release`]) once the run's
    /// descriptor is clear on PM, so no other run can take them before.
    pub fn detach(&mut self, ino: Ino, pgoff: u64, first: u32) -> Option<RunInfo> {
        if first >= 64 {
            return None;
        }
        let p = self.pages.get_mut(ino, pgoff)?;
        if p.starts & (1 << first) == 0 {
            return None;
        }
        let info = p.info(ino, pgoff, first, &self.ids)?;
        p.remove_slot(first);
        p.starts &= !(1 << first);
        p.covered &= !span(first, first + info.desc.count - 1);
        if p.starts == 0 {
            let block = p.block;
            self.pages.remove(ino, pgoff);
            self.by_block.remove(&block);
        }
        self.nruns -= 1;
        Some(info)
    }

    /// What the slices `s0..=s1` (`s0 <= s1 < 64`) of a page overlap.
    pub fn overlap(&self, ino: Ino, pgoff: u64, s0: u32, s1: u32) -> Overlap {
        let Some(p) = self.pages.get(ino, pgoff) else {
            return Overlap::None;
        };
        if p.covered & span(s0, s1) == 0 {
            return Overlap::None;
        }
        match p.covering(s0) {
            Some(f) if f + p.count_at(f) > s1 => match p.info(ino, pgoff, f, &self.ids) {
                Some(r) => Overlap::Covered(r),
                None => Overlap::Partial,
            },
            _ => Overlap::Partial,
        }
    }

    /// The runs of a page that overlap slices `s0..=s1`, in slice order.
    pub fn runs_overlapping(&self, ino: Ino, pgoff: u64, s0: u32, s1: u32) -> Vec<RunInfo> {
        let Some(p) = self.pages.get(ino, pgoff) else {
            return Vec::new();
        };
        if p.covered & span(s0, s1) == 0 {
            return Vec::new();
        }
        p.firsts()
            .filter(|&f| f <= s1 && f + p.count_at(f) > s0)
            .filter_map(|f| p.info(ino, pgoff, f, &self.ids))
            .collect()
    }

    /// The runs of a page, in slice order.
    pub fn page_runs(&self, ino: Ino, pgoff: u64) -> Vec<RunInfo> {
        self.runs_overlapping(ino, pgoff, 0, 63)
    }

    #[cfg(test)]
    /// Whether any run shadows a page.
    pub fn has_page(&self, ino: Ino, pgoff: u64) -> bool {
        self.pages.contains_key(ino, pgoff)
    }

    /// The page whose runs shadow data block `block`, if any.
    pub fn page_of_block(&self, block: u64) -> Option<(Ino, u64)> {
        self.by_block.get(&block).copied()
    }

    /// The inodes with runs in this sub-zone.
    pub fn inodes(&self) -> impl Iterator<Item = Ino> + '_ {
        self.pages.keys().map(|(ino, _)| ino)
    }

    /// The runs of a page overlapping slices `s0..=s1` (as [`Self::runs_overlapping`]),
    /// with the page marked recently used — one lookup for a read. A page already
    /// in the newer half of the queue stays where it is (an approximate LRU, as
    /// kernels do for pages: reads of a hot page then cost no queue entry).
    pub fn touch(&mut self, ino: Ino, pgoff: u64, s0: u32, s1: u32) -> Vec<RunInfo> {
        let runs = self.runs_overlapping(ino, pgoff, s0, s1);
        if runs.is_empty() {
            return runs;
        }
        self.compact_lru();
        if let Some(p) = self.pages.get_mut(ino, pgoff) {
            let key = (ino << 32) | pgoff;
            Self::use_page(&mut self.clock, &mut self.lru, self.nruns, key, p, false);
        }
        runs
    }

    /// The runs of the least recently used pages, oldest page first, each page's in
    /// slice order: whole pages until at least `n` runs (or all). Drops dead queue
    /// entries it passes at the front.
    pub fn lru_oldest(&mut self, n: usize) -> Vec<RunInfo> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.lru.len() && out.len() < n {
            let e = self.lru[i];
            if live(&self.pages, &e).is_some() {
                out.extend(self.page_runs(e.key >> 32, e.key & 0xffff_ffff));
                i += 1;
            } else if i == 0 {
                self.lru.pop_front();
            } else {
                i += 1;
            }
        }
        out
    }

    /// The run of page `pgoff` of `ino` starting at slice `first`, if any.
    pub fn get(&self, ino: Ino, pgoff: u64, first: u32) -> Option<RunInfo> {
        if first >= 64 {
            return None;
        }
        let p = self.pages.get(ino, pgoff)?;
        if p.starts & (1 << first) == 0 {
            return None;
        }
        p.info(ino, pgoff, first, &self.ids)
    }

    /// Chunk table entries the sub-zone owns (0: it does not grow).
    pub fn max_chunks(&self) -> usize {
        self.chunks.len()
    }

    /// Chunk table entry of the sub-zone's chunk `k`.
    pub fn chunk_entry(&self, k: usize) -> u64 {
        self.ids.first_entry + k as u64
    }

    /// The sub-zone's chunks (by `k`) it has now.
    pub fn chunks(&self) -> impl DoubleEndedIterator<Item = usize> + '_ {
        (0..self.chunks.len()).filter(|&k| self.chunks[k])
    }

    /// A chunk the sub-zone could take next (the lowest absent one), if any.
    pub fn absent_chunk(&self) -> Option<usize> {
        self.chunks.iter().position(|&c| !c)
    }

    /// Whether relative slot `rel` lies in the chunk being emptied.
    fn in_draining(&self, rel: u64) -> bool {
        self.draining.is_some_and(|k| {
            let (lo, hi) = self.chunk_rel(k);
            rel >= lo && rel < hi
        })
    }

    /// Starts emptying chunk `k`: no new run goes there, and its free slots stop
    /// counting as free. False if the sub-zone lacks it or already empties one.
    pub fn begin_drain(&mut self, k: usize) -> bool {
        if self.chunks.get(k) != Some(&true) || self.draining.is_some() {
            return false;
        }
        self.free -= self.ids.spc - self.chunk_used(k);
        self.draining = Some(k);
        true
    }

    /// Stops emptying the chunk being emptied (its free slots count again).
    pub fn end_drain(&mut self) {
        if let Some(k) = self.draining.take() {
            self.free += self.ids.spc - self.chunk_used(k);
        }
    }

    /// The chunk being emptied, if any.
    pub fn draining(&self) -> Option<usize> {
        self.draining
    }

    /// The relative slots of chunk `k`.
    fn chunk_rel(&self, k: usize) -> (u64, u64) {
        let lo = self.ids.fixed_r + k as u64 * self.ids.spc;
        (lo, lo + self.ids.spc)
    }

    /// Adds chunk `k` (its descriptors clear on PM) with every slot free. False if
    /// the sub-zone has it already or owns no such entry.
    pub fn add_chunk(&mut self, k: usize) -> bool {
        if self.chunks.get(k) != Some(&false) {
            return false;
        }
        let (lo, hi) = self.chunk_rel(k);
        let words = (hi / 64) as usize;
        if self.used.len() < words {
            // Chunks not there between the old end and this one stay "used".
            self.used.resize(words, u64::MAX);
        }
        for w in &mut self.used[(lo / 64) as usize..words] {
            *w = 0;
        }
        self.chunks[k] = true;
        self.span = self.span.max(hi);
        self.nslots += self.ids.spc;
        self.free += self.ids.spc;
        true
    }

    /// Used slots of chunk `k`.
    pub fn chunk_used(&self, k: usize) -> u64 {
        if self.chunks.get(k) != Some(&true) {
            return 0;
        }
        let (lo, hi) = self.chunk_rel(k);
        self.used[(lo / 64) as usize..(hi / 64) as usize]
            .iter()
            .map(|w| w.count_ones() as u64)
            .sum()
    }

    /// Removes chunk `k`, whose slots must all be free (their descriptors clear on
    /// PM): afterwards no run can take them. False if it is not there or not empty.
    pub fn remove_chunk(&mut self, k: usize) -> bool {
        if self.chunks.get(k) != Some(&true) || self.chunk_used(k) != 0 {
            return false;
        }
        let (lo, hi) = self.chunk_rel(k);
        for w in &mut self.used[(lo / 64) as usize..(hi / 64) as usize] {
            *w = u64::MAX;
        }
        self.chunks[k] = false;
        self.nslots -= self.ids.spc;
        if self.draining == Some(k) {
            // Its slots stopped counting as free when it began to drain.
            self.draining = None;
        } else {
            self.free -= self.ids.spc;
        }
        self.recent.retain(|&(r, _)| r < lo || r >= hi);
        // The span ends with the last chunk still there.
        let end = match self.chunks.iter().rposition(|&c| c) {
            Some(last) => self.chunk_rel(last).1,
            None => self.ids.fixed,
        };
        self.span = end;
        self.used.truncate(end.div_ceil(64) as usize);
        if self.fpt >= end {
            self.fpt = 0;
        }
        true
    }

    /// The runs whose slots lie in chunk `k`.
    pub fn chunk_runs(&self, k: usize) -> Vec<RunInfo> {
        if self.chunks.get(k) != Some(&true) {
            return Vec::new();
        }
        let (lo, hi) = self.chunk_rel(k);
        let (glo, ghi) = (self.ids.id_of(lo), self.ids.id_of(hi - 1) + 1);
        self.pages
            .keys()
            .flat_map(|(ino, pg)| self.page_runs(ino, pg))
            .filter(|r| r.slot >= glo && r.slot < ghi)
            .collect()
    }
}

/// The page a queue entry stands for, if the entry is the page's newest.
fn live<'a>(pages: &'a PageTable<PageRuns>, e: &LruEntry) -> Option<&'a PageRuns> {
    pages
        .get(e.key >> 32, e.key & 0xffff_ffff)
        .filter(|p| p.starts != 0 && p.stamp == e.stamp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn all_zero_page_runs_are_the_default() {
        // `ZeroDefault`'s promise: the page table hands out zero pages as entries.
        // SAFETY: the claim under test; every field is an integer, an integer array
        // or an `Option<Box<_>>` (null: `None`).
        let z: PageRuns = unsafe { std::mem::zeroed() };
        assert_eq!(format!("{z:?}"), format!("{:?}", PageRuns::default()));
    }

    fn desc(ino: u64, pgoff: u64, block: u64, first: u32, count: u32) -> Desc {
        Desc {
            ino,
            pgoff,
            block,
            first,
            count,
        }
    }

    #[test]
    fn chunks_add_slots_that_runs_never_cross_and_go_only_when_empty() {
        // 100 fixed slots from global 100; chunks of 128 slots; global chunk slots
        // from 1000; this sub-zone owns entries 4..7.
        let layout = ChunkLayout {
            zone_slots: 1000,
            spc: 128,
            first_entry: 4,
            max_chunks: 3,
        };
        let mut z = SubZone::with_chunks(100, 100, layout);
        assert_eq!((z.nslots, z.free_slots()), (100, 100));
        assert_eq!(z.absent_chunk(), Some(0));
        // Fill the fixed part with runs of 64 and 36 slots.
        assert_eq!(z.alloc(64), Some(100));
        assert_eq!(z.alloc(36), Some(164));
        assert_eq!(z.alloc(1), None);
        // Chunk 1 (entry 5): global 1000 + 5 * 128 = 1640.
        assert!(z.add_chunk(1));
        assert!(!z.add_chunk(1) && !z.add_chunk(3));
        assert_eq!((z.nslots, z.free_slots()), (228, 128));
        assert_eq!(z.chunk_entry(1), 5);
        assert_eq!(z.alloc(64), Some(1640));
        assert_eq!(z.alloc(60), Some(1704));
        // 4 slots left at the chunk's end: a run of 8 does not fit, and never
        // crosses into chunk 2 once it is there.
        assert_eq!(z.alloc(8), None);
        assert!(z.add_chunk(2));
        assert_eq!(z.alloc(8), Some(1768));
        // Next fit: on from there.
        assert_eq!(z.alloc(4), Some(1776));
        assert_eq!(z.chunk_used(1), 124);
        // Runs are recorded and found by chunk.
        assert!(z.insert(1768, desc(9, 1, 500, 0, 8), true));
        assert_eq!(z.chunk_runs(2).len(), 1);
        assert!(z.chunk_runs(1).is_empty());
        // Only an empty chunk goes.
        assert!(!z.remove_chunk(2));
        assert!(z.remove(9, 1, 0).is_some());
        assert!(!z.remove_chunk(2));
        z.release(1776, 4);
        assert!(z.remove_chunk(2));
        assert_eq!(z.absent_chunk(), Some(0));
        assert_eq!((z.nslots, z.free_slots()), (228, 4));
        // Chunk 0 fills the hole below chunk 1.
        assert!(z.add_chunk(0));
        assert_eq!(z.alloc(64), Some(1512));
        // Draining chunk 0: its free slots stop counting, nothing new goes there,
        // freed slots stay out, and it goes once empty.
        assert!(z.begin_drain(0));
        assert_eq!(z.free_slots(), 4);
        assert_eq!(z.alloc(8), None);
        z.release(1512, 64);
        assert_eq!(z.free_slots(), 4);
        assert!(z.remove_chunk(0));
        assert_eq!(z.draining(), None);
        z.release(1640, 64);
        assert_eq!((z.nslots, z.free_slots()), (228, 68));
        assert_eq!(z.alloc(64), Some(1640));
    }

    #[test]
    fn next_fit_allocation_wraps_and_skips_used_slots() {
        let mut z = SubZone::new(100, 8);
        assert_eq!(z.alloc(3), Some(100));
        assert_eq!(z.alloc(3), Some(103));
        assert_eq!(z.free_slots(), 2);
        // Only 2 left at the end: 3 does not fit.
        assert_eq!(z.alloc(3), None);
        z.release(100, 3);
        // Wraps to the start.
        assert_eq!(z.alloc(3), Some(100));
        assert_eq!(z.alloc(2), Some(106));
        assert_eq!(z.free_slots(), 0);
        assert_eq!(z.alloc(1), None);
    }

    #[test]
    fn maps_follow_inserts_and_removes() {
        let mut z = SubZone::new(0, 64);
        let a = z.alloc(2).unwrap();
        assert!(z.insert(a, desc(5, 7, 900, 0, 2), true));
        let b = z.alloc(1).unwrap();
        assert!(z.insert(b, desc(5, 7, 900, 10, 1), true));
        assert_eq!(z.page_runs(5, 7).len(), 2);
        assert_eq!(z.page_of_block(900), Some((5, 7)));
        assert_eq!(
            z.overlap(5, 7, 0, 1),
            Overlap::Covered(z.get(5, 7, 0).unwrap())
        );
        assert_eq!(
            z.overlap(5, 7, 1, 1),
            Overlap::Covered(z.get(5, 7, 0).unwrap())
        );
        assert_eq!(z.overlap(5, 7, 1, 2), Overlap::Partial);
        assert_eq!(z.overlap(5, 7, 2, 9), Overlap::None);
        assert_eq!(z.overlap(5, 8, 0, 1), Overlap::None);
        // LRU of pages: page 7 is older than page 8; its runs come whole, in slice
        // order. Touching page 7 makes page 8 the oldest.
        let c = z.alloc(1).unwrap();
        assert!(z.insert(c, desc(5, 8, 901, 3, 1), true));
        let slots = |v: Vec<RunInfo>| v.iter().map(|r| r.slot).collect::<Vec<_>>();
        assert_eq!(slots(z.lru_oldest(1)), vec![a, b]);
        // (Only pages in the older half move: page 7 is 2 stamps old of 3 runs.)
        z.clock = z.clock.wrapping_add(10);
        z.touch(5, 7, 0, 0);
        assert_eq!(slots(z.lru_oldest(1)), vec![c]);
        assert_eq!(slots(z.lru_oldest(2)), vec![c, a, b]);
        assert!(z.remove(5, 7, 0).is_some());
        assert_eq!(z.page_of_block(900), Some((5, 7)));
        assert_eq!(slots(z.lru_oldest(5)), vec![c, b]);
        assert!(z.remove(5, 7, 10).is_some());
        assert!(!z.has_page(5, 7));
        assert_eq!(z.page_of_block(900), None);
        assert!(z.remove(5, 8, 3).is_some());
        assert_eq!(z.free_slots(), 64);
        assert!(z.remove(5, 7, 10).is_none());
        assert!(z.lru_oldest(5).is_empty());
    }

    #[test]
    fn lru_compaction_keeps_every_live_run() {
        // Churn past the compaction threshold (4 × runs + 1024 queue entries): runs
        // created and touched while the queue is compacted must stay reachable.
        let mut z = SubZone::new(0, 4096);
        let mut live = Vec::new();
        for i in 0..6000u64 {
            let (pg, first) = (i % 64, (i / 64 % 32) as u32 * 2);
            if z.get(1, pg, first).is_some() {
                assert!(z.remove(1, pg, first).is_some());
                live.retain(|&k| k != (pg, first));
            } else {
                let slot = z.alloc(2).unwrap();
                assert!(z.insert(slot, desc(1, pg, 100 + pg, first, 2), true));
                live.push((pg, first));
            }
            z.clock = z.clock.wrapping_add(1000);
            z.touch(1, pg, 0, 63);
        }
        let oldest = z.lru_oldest(usize::MAX);
        assert_eq!(oldest.len(), live.len());
        for (pg, first) in live {
            assert!(oldest
                .iter()
                .any(|r| r.desc.pgoff == pg && r.desc.first == first));
        }
    }

    #[test]
    fn a_page_with_more_runs_than_fit_inline_keeps_them_all() {
        // 64 one-slice runs on one page, inserted out of order (spilling past the
        // inline capacity), then removed in another order (back inline).
        let mut z = SubZone::new(0, 256);
        let order: Vec<u32> = (0..64).map(|i| (i * 37) % 64).collect();
        let mut slot_of = [0u64; 64];
        for (n, &f) in order.iter().enumerate() {
            let slot = z.alloc(1).unwrap();
            assert!(z.insert(slot, desc(2, 9, 77, f, 1), true));
            slot_of[f as usize] = slot;
            for &g in &order[..=n] {
                assert_eq!(z.get(2, 9, g).map(|r| r.slot), Some(slot_of[g as usize]));
            }
        }
        assert_eq!(z.page_runs(2, 9).len(), 64);
        for f in (0..64)
            .rev()
            .step_by(3)
            .chain((0..64).filter(|f| (63 - f) % 3 != 0))
        {
            let r = z.remove(2, 9, f).unwrap();
            assert_eq!(r.slot, slot_of[f as usize]);
            for g in z.page_runs(2, 9) {
                assert_eq!(g.slot, slot_of[g.desc.first as usize]);
            }
        }
        assert!(!z.has_page(2, 9));
        assert_eq!(z.free_slots(), 256);
    }

    #[test]
    fn insert_rejects_overlapping_runs() {
        let mut z = SubZone::new(0, 16);
        assert!(z.insert(2, desc(1, 0, 50, 0, 4), false));
        // Slots taken.
        assert!(!z.insert(4, desc(2, 0, 51, 0, 2), false));
        // Past the sub-zone.
        assert!(!z.insert(15, desc(2, 0, 51, 0, 2), false));
        // Slices of the same page already covered.
        assert!(!z.insert(8, desc(1, 0, 50, 3, 2), false));
        // Another block for the same page.
        assert!(!z.insert(8, desc(1, 0, 49, 8, 2), false));
        assert_eq!(z.free_slots(), 12);
        assert!(z.insert(8, desc(1, 0, 50, 4, 2), false));
        assert_eq!(z.free_slots(), 10);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert { page: u64, first: u32, count: u32 },
        Remove { page: u64, first: u32 },
        Touch { page: u64, s0: u32, s1: u32 },
        Oldest,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..3u64, 0..64u32, 1..5u32).prop_map(|(page, first, count)| Op::Insert {
                page,
                first,
                count: count.min(64 - first)
            }),
            (0..3u64, 0..64u32).prop_map(|(page, first)| Op::Remove { page, first }),
            (0..3u64, 0..64u32, 0..64u32).prop_map(|(page, a, b)| Op::Touch {
                page,
                s0: a.min(b),
                s1: a.max(b)
            }),
            Just(Op::Oldest),
        ]
    }

    proptest! {
        /// Against a model: a list of runs per page (first, count, slot) and the
        /// approximate LRU policy written out plainly (a use count; a page's push
        /// stamp renewed when it gets its first run, or when it is used and its
        /// stamp is more than runs/2 uses old). Overlap answers, runs and free slots
        /// agree, and the LRU head is the first run of the page with the oldest stamp.
        #[test]
        fn sub_zone_matches_a_model(ops in proptest::collection::vec(op(), 1..200)) {
            let mut z = SubZone::new(1000, 96);
            let mut model: Vec<(u64, u32, u32, u64)> = Vec::new(); // page, first, count, slot
            let mut stamp: std::collections::HashMap<u64, u32> = Default::default();
            let mut clock = 0u32;
            for o in ops {
                match o {
                    Op::Insert { page, first, count } => {
                        let clash = model.iter().any(|&(p, f, c, _)| {
                            p == page && f < first + count && first < f + c
                        });
                        let Some(slot) = z.alloc(count as u64) else { continue };
                        let ok = z.insert(slot, desc(3, page, 100 + page, first, count), true);
                        prop_assert_eq!(ok, !clash);
                        if ok {
                            clock += 1;
                            let fresh = !model.iter().any(|m| m.0 == page);
                            if fresh || clock - stamp[&page] > model.len() as u32 / 2 {
                                stamp.insert(page, clock);
                            }
                            model.push((page, first, count, slot));
                        } else {
                            z.release(slot, count as u64);
                        }
                    }
                    Op::Remove { page, first } => {
                        let i = model.iter().position(|&(p, f, _, _)| p == page && f == first);
                        let got = z.remove(3, page, first);
                        prop_assert_eq!(got.is_some(), i.is_some());
                        if let Some(i) = i {
                            prop_assert_eq!(got.map(|r| r.slot), Some(model[i].3));
                            model.remove(i);
                            if !model.iter().any(|m| m.0 == page) {
                                stamp.remove(&page);
                            }
                        }
                    }
                    Op::Touch { page, s0, s1 } => {
                        let hit = model
                            .iter()
                            .any(|&(p, f, c, _)| p == page && f <= s1 && f + c > s0);
                        z.touch(3, page, s0, s1);
                        if hit {
                            clock += 1;
                            if clock - stamp[&page] > model.len() as u32 / 2 {
                                stamp.insert(page, clock);
                            }
                        }
                    }
                    Op::Oldest => {
                        let o = z.lru_oldest(1);
                        prop_assert_eq!(o.is_empty(), model.is_empty());
                        if let Some(r) = o.first() {
                            let oldest = stamp.iter().min_by_key(|e| *e.1).map(|e| *e.0);
                            let first = model
                                .iter()
                                .filter(|m| Some(m.0) == oldest)
                                .min_by_key(|m| m.1)
                                .map(|m| m.3);
                            prop_assert_eq!(Some(r.slot), first);
                        }
                    }
                }
                prop_assert_eq!(z.runs(), model.len());
                let used: u64 = model.iter().map(|m| m.2 as u64).sum();
                prop_assert_eq!(z.free_slots(), 96 - used);
                for page in 0..3u64 {
                    for s0 in (0..64u32).step_by(7) {
                        let s1 = (s0 + 2).min(63);
                        let over: Vec<_> = model
                            .iter()
                            .filter(|&&(p, f, c, _)| p == page && f <= s1 && f + c > s0)
                            .collect();
                        let want = match over.as_slice() {
                            [] => Overlap::None,
                            [&(_, f, c, slot)] if f <= s0 && f + c > s1 => {
                                Overlap::Covered(RunInfo { desc: desc(3, page, 100 + page, f, c), slot })
                            }
                            _ => Overlap::Partial,
                        };
                        prop_assert_eq!(z.overlap(3, page, s0, s1), want);
                        prop_assert_eq!(z.runs_overlapping(3, page, s0, s1).len(), over.len());
                    }
                }
            }
        }
    }
}
