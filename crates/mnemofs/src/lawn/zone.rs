//! The DRAM side of one LAWN sub-zone (paper §4.1): which slots are free (a bitmap
//! with a next-fit free pointer), a hash from (inode, page) to the runs of slots
//! holding that page's newest slices, a map from data block to page (so that freeing
//! a block finds the descriptors that shadow it), and an LRU list of runs for the
//! write-back thread. All of it is rebuilt from the descriptor table at mount.

use super::descriptor::Desc;
use crate::types::Ino;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash: the keys are small integers, SipHash would dominate the write path.
#[derive(Default)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

type Fx = BuildHasherDefault<FxHasher>;

/// Recently freed runs remembered for reuse.
const RECENT_MAX: usize = 64;

/// No slot (end of the LRU list).
const NIL: u32 = u32::MAX;

/// A run of slots described by the descriptor of its first slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RunInfo {
    pub desc: Desc,
    /// Global slot index of the first slot (= the descriptor's index).
    pub slot: u64,
}

/// One CPU's sub-zone.
pub(crate) struct SubZone {
    /// Global index of the first slot.
    pub base: u64,
    pub nslots: u64,
    used: Vec<u64>,
    free: u64,
    /// Next-fit free pointer (relative slot index).
    fpt: u64,
    /// Recently freed runs (relative first slot, length), reused first: alternate
    /// writing frees a run for nearly every run it takes, and reusing it keeps the
    /// zone's working set small and in the CPU cache.
    recent: Vec<(u64, u64)>,
    /// First slot of each valid run → its page.
    /// For the first slot of each valid run, its page as `ino << 32 | pgoff`
    /// (0: not the first slot of a run). Indexed by relative slot: no hashing.
    owner: Vec<u64>,
    nruns: usize,
    /// (inode, page) → the page's runs (the paper's hash from (inode, offset)).
    by_page: HashMap<(Ino, u64), Vec<RunInfo>, Fx>,
    /// Data block → (inode, page) it holds, for pages with runs.
    by_block: HashMap<u64, (Ino, u64), Fx>,
    /// LRU list of runs, doubly linked through their first slots (relative);
    /// `head` is the least recently used.
    prev: Vec<u32>,
    next: Vec<u32>,
    head: u32,
    tail: u32,
}

impl SubZone {
    pub fn new(base: u64, nslots: u64) -> SubZone {
        SubZone {
            base,
            nslots,
            used: vec![0; nslots.div_ceil(64) as usize],
            free: nslots,
            fpt: 0,
            recent: Vec::new(),
            owner: vec![0; nslots as usize],
            nruns: 0,
            by_page: HashMap::default(),
            by_block: HashMap::default(),
            prev: vec![NIL; nslots as usize],
            next: vec![NIL; nslots as usize],
            head: NIL,
            tail: NIL,
        }
    }

    pub fn free_slots(&self) -> u64 {
        self.free
    }

    pub fn runs(&self) -> usize {
        self.nruns
    }

    fn key_of(&self, slot: u64) -> Option<(Ino, u64)> {
        let k = *self.owner.get(slot.checked_sub(self.base)? as usize)?;
        (k != 0).then_some((k >> 32, k & 0xffff_ffff))
    }

    fn is_used(&self, i: u64) -> bool {
        self.used[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    fn set_used(&mut self, i: u64, on: bool) {
        let w = &mut self.used[(i / 64) as usize];
        if on {
            *w |= 1 << (i % 64);
        } else {
            *w &= !(1 << (i % 64));
        }
    }

    /// Reserves `n` consecutive free slots (next fit from the free pointer); returns
    /// the global index of the first, or `None` when no such run exists.
    pub fn alloc(&mut self, n: u64) -> Option<u64> {
        if n == 0 || n > self.free || n > self.nslots {
            return None;
        }
        while let Some((r, len)) = self.recent.pop() {
            if len == n && (r..r + n).all(|i| !self.is_used(i)) {
                for i in r..r + n {
                    self.set_used(i, true);
                }
                self.free -= n;
                return Some(self.base + r);
            }
            if self.recent.len() < RECENT_MAX / 2 {
                // A run of another size: keep it for later, stop looking.
                self.recent.insert(0, (r, len));
                break;
            }
        }
        let mut start = self.fpt;
        let mut scanned = 0;
        while scanned < self.nslots {
            if start + n > self.nslots {
                scanned += self.nslots - start;
                start = 0;
                continue;
            }
            match (start..start + n).rev().find(|&i| self.is_used(i)) {
                None => {
                    for i in start..start + n {
                        self.set_used(i, true);
                    }
                    self.free -= n;
                    self.fpt = (start + n) % self.nslots;
                    return Some(self.base + start);
                }
                Some(u) => {
                    scanned += u + 1 - start;
                    start = u + 1;
                }
            }
        }
        None
    }

    /// Returns reserved or described slots to the free pool.
    pub fn release(&mut self, slot: u64, n: u64) {
        for i in slot - self.base..slot - self.base + n {
            if self.is_used(i) {
                self.set_used(i, false);
                self.free += 1;
            }
        }
        if self.recent.len() >= RECENT_MAX {
            self.recent.drain(..RECENT_MAX / 2);
        }
        self.recent.push((slot - self.base, n));
    }

    fn lru_unlink(&mut self, rel: u32) {
        let (p, n) = (self.prev[rel as usize], self.next[rel as usize]);
        if p == NIL {
            self.head = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.prev[n as usize] = p;
        }
        self.prev[rel as usize] = NIL;
        self.next[rel as usize] = NIL;
    }

    fn lru_push(&mut self, rel: u32) {
        self.prev[rel as usize] = self.tail;
        self.next[rel as usize] = NIL;
        if self.tail == NIL {
            self.head = rel;
        } else {
            self.next[self.tail as usize] = rel;
        }
        self.tail = rel;
    }

    /// Records a valid run whose slots are already reserved (`alloc`) or, at mount,
    /// marks them used. Returns false if a slot of the run is taken by another run.
    pub fn insert(&mut self, slot: u64, desc: Desc, reserved: bool) -> bool {
        let rel = slot - self.base;
        if !reserved {
            if rel + desc.count as u64 > self.nslots
                || (rel..rel + desc.count as u64).any(|i| self.is_used(i))
            {
                return false;
            }
            for i in rel..rel + desc.count as u64 {
                self.set_used(i, true);
            }
            self.free -= desc.count as u64;
        }
        let key = (desc.ino, desc.pgoff);
        self.owner[rel as usize] = (desc.ino << 32) | (desc.pgoff & 0xffff_ffff);
        self.nruns += 1;
        let v = self.by_page.entry(key).or_default();
        if v.is_empty() {
            self.by_block.insert(desc.block, key);
        }
        v.push(RunInfo { desc, slot });
        self.lru_push(rel as u32);
        true
    }

    /// Forgets the run at `slot` and frees its slots.
    pub fn remove(&mut self, slot: u64) -> Option<RunInfo> {
        let key = self.key_of(slot)?;
        self.owner[(slot - self.base) as usize] = 0;
        self.nruns -= 1;
        self.lru_unlink((slot - self.base) as u32);
        let v = self.by_page.get_mut(&key)?;
        let i = v.iter().position(|r| r.slot == slot)?;
        let r = v.swap_remove(i);
        if v.is_empty() {
            self.by_page.remove(&key);
            self.by_block.remove(&r.desc.block);
        }
        self.release(slot, r.desc.count as u64);
        Some(r)
    }

    /// The runs of a page.
    pub fn page_runs(&self, ino: Ino, pgoff: u64) -> &[RunInfo] {
        self.by_page
            .get(&(ino, pgoff))
            .map(|v| v.as_slice())
            .unwrap_or(&[])
    }

    /// Whether any run shadows a page.
    pub fn has_page(&self, ino: Ino, pgoff: u64) -> bool {
        self.by_page.contains_key(&(ino, pgoff))
    }

    /// The page whose runs shadow data block `block`, if any.
    pub fn page_of_block(&self, block: u64) -> Option<(Ino, u64)> {
        self.by_block.get(&block).copied()
    }

    /// Marks a run recently used.
    pub fn touch(&mut self, slot: u64) {
        if self.key_of(slot).is_some() {
            let rel = (slot - self.base) as u32;
            if self.tail != rel {
                self.lru_unlink(rel);
                self.lru_push(rel);
            }
        }
    }

    /// The least recently used runs, oldest first.
    pub fn lru_oldest(&self, n: usize) -> Vec<RunInfo> {
        let mut out = Vec::new();
        let mut cur = self.head;
        while cur != NIL && out.len() < n {
            if let Some(r) = self.get(self.base + cur as u64) {
                out.push(r);
            }
            cur = self.next[cur as usize];
        }
        out
    }

    /// The run at `slot`, if it is still the same run.
    pub fn get(&self, slot: u64) -> Option<RunInfo> {
        let key = self.key_of(slot)?;
        self.by_page
            .get(&key)?
            .iter()
            .find(|r| r.slot == slot)
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // LRU: a is older; touching it makes b the oldest.
        assert_eq!(z.lru_oldest(1)[0].slot, a);
        z.touch(a);
        assert_eq!(z.lru_oldest(1)[0].slot, b);
        assert!(z.remove(a).is_some());
        assert_eq!(z.page_of_block(900), Some((5, 7)));
        assert!(z.remove(b).is_some());
        assert!(!z.has_page(5, 7));
        assert_eq!(z.page_of_block(900), None);
        assert_eq!(z.free_slots(), 64);
        assert!(z.remove(b).is_none());
    }

    #[test]
    fn mount_insert_rejects_overlapping_runs() {
        let mut z = SubZone::new(0, 16);
        assert!(z.insert(2, desc(1, 0, 50, 0, 4), false));
        assert!(!z.insert(4, desc(2, 0, 51, 0, 2), false));
        assert!(!z.insert(15, desc(2, 0, 51, 0, 2), false));
        assert_eq!(z.free_slots(), 12);
    }
}
