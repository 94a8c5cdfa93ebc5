//! The sub-zone's hash from (inode, page) to the page's runs (paper §4.1: "a hash
//! table ... (inode, offset) → slot"): open addressing with linear probing and the
//! key stored inline with its value, so a lookup is one cache miss (a general map
//! keeps its probe bytes apart from its entries: two). Deletion shifts later entries
//! back (no tombstones).
//!
//! Keys are `ino << 32 | pgoff` with `1 <= ino <= u32::MAX` and `pgoff <= u32::MAX`
//! (what a descriptor can name); 0 marks an empty slot.

use crate::types::Ino;

/// Smallest table (entries).
const MIN_CAP: usize = 64;

/// The packed key of (inode, page), if a descriptor can name them.
pub(crate) fn pack(ino: Ino, pgoff: u64) -> Option<u64> {
    (ino >= 1 && ino <= u32::MAX as u64 && pgoff <= u32::MAX as u64).then_some(ino << 32 | pgoff)
}

fn unpack(k: u64) -> (Ino, u64) {
    (k >> 32, k & 0xffff_ffff)
}

/// Home slot of key `k` in a table of `mask + 1` entries (a power of two):
/// Fibonacci hashing, the top bits of the product. (Bits 32 and up, cut to the
/// mask, spread the pages of one file so poorly that a lookup probed 2.9 entries
/// on average at a load of a quarter: each entry is two cache lines, and only the
/// home entry is prefetched.)
fn home(k: u64, mask: usize) -> usize {
    let bits = (mask as u64).count_ones();
    if bits == 0 {
        return 0;
    }
    let h = k.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> (64 - bits)) as usize & mask
}

/// Asks the kernel to back the whole 2 MiB pages inside `[addr, addr + len)` with
/// huge pages (transparent huge pages in `madvise` mode): a hint, refused advice
/// leaves 4 KiB pages. Below 4 MiB nothing is asked.
pub(crate) fn advise_huge(addr: usize, len: usize) {
    const HUGE: usize = 2 << 20;
    if len < 2 * HUGE {
        return;
    }
    let start = addr.next_multiple_of(HUGE);
    let end = (addr + len) / HUGE * HUGE;
    if end > start {
        // SAFETY: the range lies inside an allocation the caller owns; the advice
        // changes how it is backed, never its contents or its mapping.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

/// One entry, cache-line aligned with the key first: the probe's first line holds
/// the key and the start of the value.
#[repr(C, align(64))]
struct Slot<V> {
    key: u64,
    val: V,
}

pub(crate) struct PageTable<V> {
    slots: Vec<Slot<V>>,
    len: usize,
}

impl<V: Default> PageTable<V> {
    pub fn new() -> Self {
        PageTable {
            slots: (0..MIN_CAP)
                .map(|_| Slot {
                    key: 0,
                    val: V::default(),
                })
                .collect(),
            len: 0,
        }
    }

    /// Where the entries lie and the index mask, for [`PageTable::entry_addr`].
    pub fn hint(&self) -> (usize, usize) {
        (self.slots.as_ptr() as usize, self.mask())
    }

    /// Address of the home entry of (ino, pgoff) in a table that lay at `hint`
    /// (for a prefetch: it may be stale).
    pub fn entry_addr(base: usize, mask: usize, ino: Ino, pgoff: u64) -> Option<usize> {
        let k = pack(ino, pgoff)?;
        (base != 0).then(|| base + home(k, mask) * std::mem::size_of::<Slot<V>>())
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    fn find(&self, k: u64) -> Option<usize> {
        self.find_or_vacant(k).ok()
    }

    pub fn get(&self, ino: Ino, pgoff: u64) -> Option<&V> {
        let i = self.find(pack(ino, pgoff)?)?;
        Some(&self.slots[i].val)
    }

    pub fn get_mut(&mut self, ino: Ino, pgoff: u64) -> Option<&mut V> {
        let i = self.find(pack(ino, pgoff)?)?;
        Some(&mut self.slots[i].val)
    }

    /// The value of a key, inserted as `V::default()` if absent; `None` if the key
    /// cannot be packed.
    #[cfg(test)]
    pub fn get_or_default(&mut self, ino: Ino, pgoff: u64) -> Option<&mut V> {
        self.entry(ino, pgoff).map(|(v, _)| v)
    }

    /// The value of a key and whether it was just inserted (as `V::default()`), with
    /// one probe sequence when the table need not grow; `None` if the key cannot be
    /// packed.
    pub fn entry(&mut self, ino: Ino, pgoff: u64) -> Option<(&mut V, bool)> {
        let k = pack(ino, pgoff)?;
        let mut i = match self.find_or_vacant(k) {
            Ok(i) => return Some((&mut self.slots[i].val, false)),
            Err(i) => i,
        };
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
            i = match self.find_or_vacant(k) {
                Ok(i) | Err(i) => i,
            };
        }
        self.slots[i] = Slot {
            key: k,
            val: V::default(),
        };
        self.len += 1;
        Some((&mut self.slots[i].val, true))
    }

    /// `Ok(index)` of key `k`, or `Err(index)` of the empty entry where its probe
    /// sequence ends (where it would be inserted).
    fn find_or_vacant(&self, k: u64) -> Result<usize, usize> {
        let mask = self.mask();
        let mut i = home(k, mask);
        loop {
            let s = self.slots[i].key;
            if s == k {
                return Ok(i);
            }
            if s == 0 {
                return Err(i);
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let n = self.slots.len() * 2;
        let mut slots: Vec<Slot<V>> = Vec::with_capacity(n);
        // Every lookup lands at random in the table: 2 MiB pages save a TLB miss
        // per write once it is large. Advised before the first touch (the fill
        // below), so the pages are huge from their first fault.
        advise_huge(slots.as_ptr() as usize, n * std::mem::size_of::<Slot<V>>());
        slots.extend((0..n).map(|_| Slot {
            key: 0,
            val: V::default(),
        }));
        let old = std::mem::replace(&mut self.slots, slots);
        let mask = n - 1;
        for s in old.into_iter().filter(|s| s.key != 0) {
            let mut i = home(s.key, mask);
            while self.slots[i].key != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = s;
        }
    }

    /// Removes a key; returns its value.
    pub fn remove(&mut self, ino: Ino, pgoff: u64) -> Option<V> {
        let mut hole = self.find(pack(ino, pgoff)?)?;
        let out = std::mem::take(&mut self.slots[hole].val);
        self.slots[hole].key = 0;
        self.len -= 1;
        // Backward shift: move each later entry of the cluster into the hole if its
        // home does not lie cyclically in (hole, j].
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let k = self.slots[j].key;
            if k == 0 {
                break;
            }
            let h = home(k, mask);
            let stays = if hole <= j {
                hole < h && h <= j
            } else {
                hole < h || h <= j
            };
            if !stays {
                self.slots.swap(hole, j);
                hole = j;
            }
        }
        Some(out)
    }

    #[cfg(test)]
    pub fn contains_key(&self, ino: Ino, pgoff: u64) -> bool {
        self.get(ino, pgoff).is_some()
    }

    pub fn keys(&self) -> impl Iterator<Item = (Ino, u64)> + '_ {
        self.slots
            .iter()
            .filter(|s| s.key != 0)
            .map(|s| unpack(s.key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn keys_that_cannot_be_packed_are_absent() {
        let mut t: PageTable<u32> = PageTable::new();
        assert!(t.get_or_default(0, 1).is_none());
        assert!(t.get_or_default(1 << 32, 1).is_none());
        assert!(t.get_or_default(1, 1 << 32).is_none());
        assert!(t.get(0, 0).is_none());
        *t.get_or_default(u32::MAX as u64, u32::MAX as u64).unwrap() = 7;
        assert_eq!(t.get(u32::MAX as u64, u32::MAX as u64), Some(&7));
        assert_eq!(
            t.keys().collect::<Vec<_>>(),
            vec![(u32::MAX as u64, u32::MAX as u64)]
        );
    }

    #[test]
    fn one_files_pages_land_near_their_home_entry() {
        // A writer prefetches only a page's home entry: the pages of one file (the
        // same inode, any page numbers) must mostly sit there. (The hash cut from
        // bits 32 and up of the product put them 1.5 entries away on average here,
        // 2.9 in a run of 128 B random writes to a 1 GiB file.)
        let mut t: PageTable<u32> = PageTable::new();
        let mut pg = 1u64;
        for _ in 0..100_000 {
            // Page numbers scattered over a 1 GiB file, as random writes touch them.
            pg = (pg * 6364136223846793005 + 1442695040888963407) % (1 << 18);
            *t.get_or_default(7, pg).unwrap() = 1;
        }
        let mask = t.mask();
        let (mut far, mut n) = (0usize, 0usize);
        for (i, s) in t.slots.iter().enumerate() {
            if s.key != 0 {
                far += (i.wrapping_sub(home(s.key, mask))) & mask;
                n += 1;
            }
        }
        let mean = far as f64 / n as f64;
        assert!(mean < 0.75, "mean distance from home {mean:.2} entries");
    }

    proptest! {
        /// Against std's HashMap: inserts, updates and removes over few inodes and
        /// pages (long probe clusters, wrap-around, growth).
        #[test]
        fn matches_a_hash_map(ops in proptest::collection::vec((0..3u8, 1..4u64, 0..300u64, any::<u32>()), 1..600)) {
            let mut t: PageTable<u32> = PageTable::new();
            let mut m: HashMap<(u64, u64), u32> = HashMap::new();
            for (op, ino, pg, v) in ops {
                match op {
                    0 => {
                        *t.get_or_default(ino, pg).unwrap() = v;
                        m.insert((ino, pg), v);
                    }
                    1 => prop_assert_eq!(t.remove(ino, pg), m.remove(&(ino, pg))),
                    _ => prop_assert_eq!(t.get(ino, pg), m.get(&(ino, pg))),
                }
                prop_assert_eq!(t.len(), m.len());
            }
            for (&(ino, pg), v) in &m {
                prop_assert_eq!(t.get(ino, pg), Some(v));
            }
            let mut keys: Vec<_> = t.keys().collect();
            keys.sort();
            let mut want: Vec<_> = m.keys().copied().collect();
            want.sort();
            prop_assert_eq!(keys, want);
        }
    }
}
