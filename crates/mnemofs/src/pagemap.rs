//! A file's page map in DRAM: page → [`PageRef`] (the block that holds the page and
//! the log entry that mapped it), under the inode's state lock.
//!
//! Pages are grouped in leaves of 64 consecutive pages (1 KiB) kept in a B-tree by
//! leaf number. Every data write looks up and replaces the mappings of its pages: a
//! B-tree of single pages costs a walk of about log₁₁(pages) nodes spread over the
//! heap (5 for a 64 MiB file, most of them cache misses on a random overwrite),
//! while the leaves of a 64 MiB file make a tree of 256 keys, small enough to stay in
//! the CPU cache, and the page itself is one array slot. Walks in page order (a
//! truncate, a hole punch, thorough GC's snapshot) visit the leaves in order.
//!
//! The lock-free read side (`index` module) mirrors the blocks; this map is the
//! authoritative one and also knows each page's entry, for the log's liveness count.

use std::collections::BTreeMap;

/// A page of file data: where it is, and which entry mapped it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageRef {
    pub block: u64,
    pub entry: u64,
}

const LEAF_BITS: u32 = 6;
const LEAF: usize = 1 << LEAF_BITS;
const MASK: u64 = LEAF as u64 - 1;

/// An empty slot (no data block is block 0: the superblock is).
const EMPTY: PageRef = PageRef { block: 0, entry: 0 };

#[derive(Clone, PartialEq, Eq)]
struct Leaf {
    refs: [PageRef; LEAF],
    count: u32,
}

/// Page → [`PageRef`] of one file.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct PageMap {
    leaves: BTreeMap<u64, Box<Leaf>>,
    len: usize,
}

impl std::fmt::Debug for PageMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl PageMap {
    /// Mapped pages.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn clear(&mut self) {
        self.leaves.clear();
        self.len = 0;
    }

    /// The mapping of page `pg`.
    pub fn get(&self, pg: u64) -> Option<PageRef> {
        let leaf = self.leaves.get(&(pg >> LEAF_BITS))?;
        let r = leaf.refs[(pg & MASK) as usize];
        (r.block != 0).then_some(r)
    }

    /// Whether page `pg` is mapped.
    pub fn contains_key(&self, pg: u64) -> bool {
        self.get(pg).is_some()
    }

    /// Maps page `pg` (`r.block` is not 0); returns the mapping it replaced.
    pub fn insert(&mut self, pg: u64, r: PageRef) -> Option<PageRef> {
        debug_assert_ne!(r.block, 0, "block 0 marks an empty slot");
        let leaf = self.leaves.entry(pg >> LEAF_BITS).or_insert_with(|| {
            Box::new(Leaf {
                refs: [EMPTY; LEAF],
                count: 0,
            })
        });
        let slot = &mut leaf.refs[(pg & MASK) as usize];
        let old = std::mem::replace(slot, r);
        if old.block == 0 {
            leaf.count += 1;
            self.len += 1;
            None
        } else {
            Some(old)
        }
    }

    /// Unmaps page `pg`; returns its mapping.
    pub fn remove(&mut self, pg: u64) -> Option<PageRef> {
        let key = pg >> LEAF_BITS;
        let leaf = self.leaves.get_mut(&key)?;
        let old = std::mem::replace(&mut leaf.refs[(pg & MASK) as usize], EMPTY);
        if old.block == 0 {
            return None;
        }
        leaf.count -= 1;
        self.len -= 1;
        if leaf.count == 0 {
            self.leaves.remove(&key);
        }
        Some(old)
    }

    /// Every mapping, in page order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, PageRef)> + '_ {
        self.range(0, u64::MAX)
    }

    /// The mappings of pages `from..to`, in page order.
    pub fn range(&self, from: u64, to: u64) -> impl Iterator<Item = (u64, PageRef)> + '_ {
        let keys = if from >= to {
            // Nothing passes the filter below (a B-tree range may not be empty).
            0..=0
        } else {
            (from >> LEAF_BITS)..=((to - 1) >> LEAF_BITS)
        };
        self.leaves
            .range(keys)
            .flat_map(|(&k, leaf)| {
                leaf.refs
                    .iter()
                    .enumerate()
                    .map(move |(i, r)| ((k << LEAF_BITS) | i as u64, *r))
            })
            .filter(move |(pg, r)| r.block != 0 && *pg >= from && *pg < to)
    }

    /// Every mapping, mutable, in page order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut PageRef> + '_ {
        self.leaves
            .values_mut()
            .flat_map(|leaf| leaf.refs.iter_mut())
            .filter(|r| r.block != 0)
    }

    /// The blocks of every mapping, in page order.
    pub fn blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.iter().map(|(_, r)| r.block)
    }

    /// Calls `f` with the block of every mapping, in page order: plain loops, for
    /// freeing a whole file (the iterator adapters of [`blocks`](Self::blocks) moved
    /// their state around with `memmove`: ~2 % of a small file's create, write and
    /// unlink).
    pub fn for_each_block(&self, mut f: impl FnMut(u64)) {
        for leaf in self.leaves.values() {
            for r in &leaf.refs {
                if r.block != 0 {
                    f(r.block);
                }
            }
        }
    }

    /// The mapped pages `from..to` (collected: the caller changes the map next).
    pub fn pages_in(&self, from: u64, to: u64) -> Vec<u64> {
        self.range(from, to).map(|(pg, _)| pg).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r(block: u64, entry: u64) -> PageRef {
        PageRef { block, entry }
    }

    #[test]
    fn for_each_block_walks_as_blocks_does() {
        let mut m = PageMap::default();
        for (pg, b) in [(700u64, 9u64), (3, 4), (64, 5), (65, 6), (1 << 20, 7)] {
            m.insert(pg, r(b, 1));
        }
        m.remove(64);
        let mut seen = Vec::new();
        m.for_each_block(|b| seen.push(b));
        assert_eq!(seen, m.blocks().collect::<Vec<_>>());
        assert_eq!(seen, vec![4, 6, 9, 7]);
    }

    #[test]
    fn insert_replace_remove_and_ordered_walks() {
        let mut m = PageMap::default();
        assert_eq!(m.insert(70, r(5, 1)), None);
        assert_eq!(m.insert(3, r(6, 1)), None);
        assert_eq!(m.insert(64, r(7, 2)), None);
        assert_eq!(m.insert(70, r(8, 3)), Some(r(5, 1)));
        assert_eq!(m.len(), 3);
        assert_eq!(m.get(70), Some(r(8, 3)));
        assert_eq!(m.get(71), None);
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            vec![(3, r(6, 1)), (64, r(7, 2)), (70, r(8, 3))]
        );
        assert_eq!(m.pages_in(4, 71), vec![64, 70]);
        assert_eq!(m.pages_in(71, u64::MAX), Vec::<u64>::new());
        assert_eq!(m.pages_in(9, 9), Vec::<u64>::new());
        for v in m.values_mut() {
            v.entry = 9;
        }
        assert_eq!(m.blocks().collect::<Vec<_>>(), vec![6, 7, 8]);
        assert_eq!(m.remove(64), Some(r(7, 9)));
        assert_eq!(m.remove(64), None);
        assert_eq!(m.remove(70), Some(r(8, 9)));
        // The leaf of pages 64..128 is gone with its last page.
        assert_eq!(m.leaves.len(), 1);
        assert_eq!(m.len(), 1);
        m.clear();
        assert!(m.len() == 0 && m.iter().next().is_none());
    }

    proptest! {
        /// The map behaves as a B-tree of single pages (the structure it replaced).
        #[test]
        fn same_as_a_btree(ops in proptest::collection::vec((0u8..3, 0u64..400, 1u64..50), 0..300),
                           from in 0u64..450, len in 0u64..450) {
            let mut m = PageMap::default();
            let mut model: BTreeMap<u64, PageRef> = BTreeMap::new();
            for (i, (op, pg, b)) in ops.into_iter().enumerate() {
                match op {
                    0 | 1 => prop_assert_eq!(m.insert(pg, r(b, i as u64)), model.insert(pg, r(b, i as u64))),
                    _ => prop_assert_eq!(m.remove(pg), model.remove(&pg)),
                }
                prop_assert_eq!(m.len(), model.len());
            }
            let to = from.saturating_add(len);
            let want: Vec<u64> = model.range(from..to).map(|(&k, _)| k).collect();
            prop_assert_eq!(m.pages_in(from, to), want);
            let all: Vec<(u64, PageRef)> = model.iter().map(|(&k, &v)| (k, v)).collect();
            prop_assert_eq!(m.iter().collect::<Vec<_>>(), all);
            for pg in 0..450 {
                prop_assert_eq!(m.get(pg), model.get(&pg).copied());
            }
        }
    }
}
