//! The sub-zone's hash from (inode, page) to the page's runs (paper §4.1: "a hash
//! table ... (inode, offset) → slot"): open addressing with linear probing and the
//! key stored inline with its value, so a lookup is one cache miss (a general map
//! keeps its probe bytes apart from its entries: two). Deletion shifts later entries
//! back (no tombstones). A doubling does not rehash at once: the old table drains
//! into the new one a few clusters per insert or removal ([`Draining`]).
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
/// leaves 4 KiB pages. Below 4 MiB, or under `MNEMOFS_HUGE_PAGES=off`
/// ([`pm::HostChoices`]), nothing is asked.
pub(crate) fn advise_huge(addr: usize, len: usize) {
    const HUGE: usize = 2 << 20;
    if len < 2 * HUGE || pm::HostChoices::get().is_ok_and(|h| !h.huge_pages) {
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

/// Types whose all-zero bytes are a valid value, equal to `V::default()`: the
/// table's entries are mapped as zero pages and faulted in as they are first
/// written, not filled up front.
///
/// # Safety
/// The all-zero bit pattern must be a valid value of the type, and its default.
pub(crate) unsafe trait ZeroDefault: Default {}

// SAFETY: 0 is a valid u32 and its default.
unsafe impl ZeroDefault for u32 {}

/// Entries moved from a table being drained per call of [`PageTable::entry`] or
/// [`PageTable::remove`] (at least; a probe cluster is moved whole).
const MOVE_STEP: usize = 32;

/// One entry, cache-line aligned with the key first: the probe's first line holds
/// the key and the start of the value.
#[repr(C, align(64))]
struct Slot<V> {
    key: u64,
    val: V,
}

/// Tables of at least this many bytes (2,048 entries) get a mapping of their own;
/// smaller ones the allocator's zeroed memory. A mapping costs a system call each
/// way and, at unmap, a TLB shootdown: for the two 8 KiB tables of every mount,
/// 8–14 % of the crash explorer's time on LAWN images.
const MAP_MIN: usize = 256 << 10;

/// `n` (a power of two, at least [`MIN_CAP`]) empty entries. A large table is an
/// anonymous mapping of its own: zero pages the kernel faults in as entries are
/// first written, so a doubling costs its page faults a few at a time, on the
/// inserts that follow, instead of all at once in one write (76–101 ms for a
/// 32 MiB table on memory this VM had not used lately). Mapped rather than taken
/// from the allocator, which may zero (and so touch) the memory itself, before the
/// huge-page advice.
struct Slots<V> {
    ptr: std::ptr::NonNull<Slot<V>>,
    n: usize,
}

// SAFETY: `Slots` owns its entries as a `Vec` would; it is shared or sent exactly
// when the entries may be.
unsafe impl<V: Send> Send for Slots<V> {}
// SAFETY: as above.
unsafe impl<V: Sync> Sync for Slots<V> {}

impl<V: ZeroDefault> Slots<V> {
    fn new(n: usize) -> Slots<V> {
        let layout = match std::alloc::Layout::array::<Slot<V>>(n) {
            Ok(l) if l.size() > 0 => l,
            _ => panic!("LAWN page table of {n} entries: capacity overflow"),
        };
        let bytes = layout.size();
        if bytes < MAP_MIN {
            // SAFETY: the layout has a non-zero size.
            let p = unsafe { std::alloc::alloc_zeroed(layout) } as *mut Slot<V>;
            return match std::ptr::NonNull::new(p) {
                Some(ptr) => Slots { ptr, n },
                None => std::alloc::handle_alloc_error(layout),
            };
        }
        // SAFETY: a fresh private anonymous mapping; it aliases nothing.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        let ptr = match std::ptr::NonNull::new(p as *mut Slot<V>) {
            Some(ptr) if p != libc::MAP_FAILED => ptr,
            _ => std::alloc::handle_alloc_error(layout),
        };
        // Every lookup lands at random in the table: 2 MiB pages save a TLB miss per
        // write once it is large. Advised before the first touch.
        advise_huge(p as usize, bytes);
        Slots { ptr, n }
    }
}

impl<V> Slots<V> {
    /// Gives the memory back (allocator or mapping, as `new` took it), without
    /// dropping any entry.
    ///
    /// # Safety
    /// Called once, last; no reference into the entries outlives it.
    unsafe fn release(&mut self) {
        let Ok(layout) = std::alloc::Layout::array::<Slot<V>>(self.n) else {
            return;
        };
        if layout.size() < MAP_MIN {
            // SAFETY: allocated in `new` with this layout (the caller's promise
            // covers the rest).
            unsafe { std::alloc::dealloc(self.ptr.as_ptr() as *mut u8, layout) };
        } else {
            // SAFETY: the mapping `new` made, of this size.
            unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, layout.size()) };
        }
    }

    /// Frees an empty table without visiting its entries: every empty entry holds
    /// `V::default()`, which owns nothing (a drained table's `Drop` would otherwise
    /// read a line of every entry, under the sub-zone lock).
    fn free_empty(self) {
        let mut me = std::mem::ManuallyDrop::new(self);
        // SAFETY: no entry owns anything; `me` is never used again.
        unsafe { me.release() };
    }
}

impl<V> std::ops::Deref for Slots<V> {
    type Target = [Slot<V>];
    fn deref(&self) -> &[Slot<V>] {
        // SAFETY: `n` entries, held while `self` lives, all initialized: only
        // `Slots::new` makes one, for `V: ZeroDefault` (a zero entry is valid).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.n) }
    }
}

impl<V> std::ops::DerefMut for Slots<V> {
    fn deref_mut(&mut self) -> &mut [Slot<V>] {
        // SAFETY: as in `deref`; `&mut self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.n) }
    }
}

impl<V> Drop for Slots<V> {
    fn drop(&mut self) {
        if std::mem::needs_drop::<V>() {
            for s in self.iter_mut().filter(|s| s.key != 0) {
                // SAFETY: a live entry's value, dropped once: the mapping goes next.
                unsafe { std::ptr::drop_in_place(&mut s.val) };
            }
        }
        // SAFETY: once, last; no reference into the entries outlives `self`.
        unsafe { self.release() };
    }
}

/// `Ok(index)` of key `k` in `slots`, or `Err(index)` of the empty entry where its
/// probe sequence ends (where it would be inserted). The table is never full (its
/// load stays at most a half).
fn find_or_vacant<V>(slots: &[Slot<V>], k: u64) -> Result<usize, usize> {
    let mask = slots.len() - 1;
    let mut i = home(k, mask);
    loop {
        let s = slots[i].key;
        if s == k {
            return Ok(i);
        }
        if s == 0 {
            return Err(i);
        }
        i = (i + 1) & mask;
    }
}

/// Removes the entry at `hole` from `slots` (linear probing): backward shift, each
/// later entry of the cluster moves into the hole if its home does not lie
/// cyclically in (hole, j]. Entries move only within their cluster.
fn remove_at<V: Default>(slots: &mut [Slot<V>], mut hole: usize) -> V {
    let out = std::mem::take(&mut slots[hole].val);
    slots[hole].key = 0;
    let mask = slots.len() - 1;
    let mut j = hole;
    loop {
        j = (j + 1) & mask;
        let k = slots[j].key;
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
            slots.swap(hole, j);
            hole = j;
        }
    }
    out
}

/// The table a doubling replaced, drained into the new one cluster by cluster.
/// Slots are visited once each, in index order from just after an empty slot round
/// to that slot (or, in a table without one, all at once from 0: never the case
/// at a load of at most a half); a visit moves the slot's entry to the new table. The
/// drain stops only at an empty slot, so every cluster is moved whole: the
/// entries still here sit in clusters no visit has touched, and a probe from any
/// key's home never crosses into the visited (all empty) part before reaching the
/// key. No entry is ever inserted here; a removal's backward shift stays inside
/// its (unvisited) cluster.
struct Draining<V> {
    slots: Slots<V>,
    /// Entries still here.
    len: usize,
    /// Next slot to visit.
    cursor: usize,
    /// Slots not visited yet.
    left: usize,
}

/// The sub-zone's page table: open addressing with linear probing, load at most a
/// half. A doubling maps the new table as zero pages and moves the old one's entries
/// over in steps (at least [`MOVE_STEP`] per call of `entry` or `remove`, whole
/// clusters) rather than all at once; meanwhile a lookup probes the new table, then
/// the old.
pub(crate) struct PageTable<V> {
    slots: Slots<V>,
    /// Entries in `slots`.
    len: usize,
    old: Option<Draining<V>>,
}

impl<V: ZeroDefault> PageTable<V> {
    pub fn new() -> Self {
        PageTable {
            slots: Slots::new(MIN_CAP),
            len: 0,
            old: None,
        }
    }

    /// Where the entries lie and the index mask, for [`PageTable::entry_addr`] (the
    /// new table while an old one drains: most entries are there soon).
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

    /// Entries in the table (both parts while one drains).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len + self.old.as_ref().map_or(0, |o| o.len)
    }

    pub fn get(&self, ino: Ino, pgoff: u64) -> Option<&V> {
        let k = pack(ino, pgoff)?;
        if let Ok(i) = find_or_vacant(&self.slots, k) {
            return Some(&self.slots[i].val);
        }
        let old = self.old.as_ref()?;
        let i = find_or_vacant(&old.slots, k).ok()?;
        Some(&old.slots[i].val)
    }

    pub fn get_mut(&mut self, ino: Ino, pgoff: u64) -> Option<&mut V> {
        let k = pack(ino, pgoff)?;
        if let Ok(i) = find_or_vacant(&self.slots, k) {
            return Some(&mut self.slots[i].val);
        }
        let old = self.old.as_mut()?;
        let i = find_or_vacant(&old.slots, k).ok()?;
        Some(&mut old.slots[i].val)
    }

    /// The value of a key, inserted as `V::default()` if absent; `None` if the key
    /// cannot be packed.
    #[cfg(test)]
    pub fn get_or_default(&mut self, ino: Ino, pgoff: u64) -> Option<&mut V> {
        self.entry(ino, pgoff).map(|(v, _)| v)
    }

    /// The value of a key and whether it was just inserted (as `V::default()`), with
    /// one probe sequence when the key is in the new table and no doubling is
    /// needed; `None` if the key cannot be packed.
    pub fn entry(&mut self, ino: Ino, pgoff: u64) -> Option<(&mut V, bool)> {
        let k = pack(ino, pgoff)?;
        self.drain(MOVE_STEP);
        let mut i = match find_or_vacant(&self.slots, k) {
            Ok(i) => return Some((&mut self.slots[i].val, false)),
            Err(i) => i,
        };
        let in_old = (self.old.as_ref()).and_then(|o| find_or_vacant(&o.slots, k).ok());
        if let Some(j) = in_old {
            return self.old.as_mut().map(|o| (&mut o.slots[j].val, false));
        }
        let old_len = self.old.as_ref().map_or(0, |o| o.len);
        if (self.len + old_len + 1) * 2 > self.slots.len() {
            // (A drain is long over by now: it moves at least MOVE_STEP entries per
            // insert, and the new table had room for as many inserts as the old
            // held entries. Finished here all the same, so only one drains.)
            self.drain(usize::MAX);
            self.grow();
            i = match find_or_vacant(&self.slots, k) {
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

    /// Doubles the table: a fresh one of zero pages takes the inserts; the current one
    /// drains into it from the next call of `entry` or `remove` on.
    fn grow(&mut self) {
        debug_assert!(self.old.is_none());
        let n = self.slots.len() * 2;
        let old = std::mem::replace(&mut self.slots, Slots::new(n));
        // Start right after an empty slot (the load is at most a half: one exists;
        // were there none, the whole table is moved at once, which needs no start).
        let end = old.iter().position(|s| s.key == 0);
        debug_assert!(end.is_some(), "a table at most half full has an empty slot");
        let cap = old.len();
        self.old = Some(Draining {
            len: self.len,
            cursor: end.map_or(0, |e| (e + 1) & (cap - 1)),
            left: cap,
            slots: old,
        });
        self.len = 0;
        if end.is_none() {
            self.drain(usize::MAX);
        }
    }

    /// Moves at least `budget` entries (whole clusters) of the draining table to the
    /// new one, or all that are left; unmaps it once empty ([`Slots::free_empty`]).
    fn drain(&mut self, budget: usize) {
        let Some(old) = &mut self.old else {
            return;
        };
        let mask = old.slots.len() - 1;
        let mut moved = 0;
        while old.left > 0 && old.len > 0 {
            debug_assert!(old.len <= old.left);
            let i = old.cursor;
            let k = old.slots[i].key;
            if k == 0 {
                if moved >= budget {
                    break;
                }
            } else {
                let val = std::mem::take(&mut old.slots[i].val);
                old.slots[i].key = 0;
                old.len -= 1;
                let j = match find_or_vacant(&self.slots, k) {
                    Ok(j) | Err(j) => j,
                };
                debug_assert_eq!(self.slots[j].key, 0, "a key in both tables");
                self.slots[j] = Slot { key: k, val };
                self.len += 1;
                moved += 1;
            }
            old.cursor = (i + 1) & mask;
            old.left -= 1;
        }
        if old.len == 0 {
            if let Some(o) = self.old.take() {
                o.slots.free_empty();
            }
        }
    }

    /// Removes a key; returns its value.
    pub fn remove(&mut self, ino: Ino, pgoff: u64) -> Option<V> {
        let out = self.remove_key(pack(ino, pgoff)?);
        self.drain(MOVE_STEP);
        out
    }

    /// Removes key `k` from whichever table holds it (no drain step).
    fn remove_key(&mut self, k: u64) -> Option<V> {
        match find_or_vacant(&self.slots, k) {
            Ok(i) => {
                self.len -= 1;
                Some(remove_at(&mut self.slots, i))
            }
            Err(_) => self.old.as_mut().and_then(|old| {
                let i = find_or_vacant(&old.slots, k).ok()?;
                old.len -= 1;
                Some(remove_at(&mut old.slots, i))
            }),
        }
    }

    #[cfg(test)]
    pub fn contains_key(&self, ino: Ino, pgoff: u64) -> bool {
        self.get(ino, pgoff).is_some()
    }

    pub fn keys(&self) -> impl Iterator<Item = (Ino, u64)> + '_ {
        let old = self.old.as_ref().map_or(&[][..], |o| &o.slots[..]);
        self.slots
            .iter()
            .chain(old)
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
            pg = pg
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407)
                % (1 << 18);
            *t.get_or_default(7, pg).unwrap() = 1;
        }
        t.drain(usize::MAX);
        assert!(t.old.is_none());
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

    #[test]
    fn a_doubling_drains_in_steps_and_every_key_stays_reachable() {
        let mut t: PageTable<u32> = PageTable::new();
        let mut m: HashMap<(u64, u64), u32> = HashMap::new();
        let mut saw_drain = 0;
        let mut x = 12345u64;
        for n in 0..20_000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let (ino, pg) = (1 + (x >> 60), (x >> 20) % 3000);
            if x.is_multiple_of(3) {
                assert_eq!(t.remove(ino, pg), m.remove(&(ino, pg)));
            } else {
                *t.get_or_default(ino, pg).unwrap() = n;
                m.insert((ino, pg), n);
            }
            if let Some(old) = &t.old {
                saw_drain += 1;
                // Entries still in the old table are found there, and nowhere else.
                for (i, s) in old.slots.iter().enumerate() {
                    if s.key != 0 {
                        let (ino, pg) = unpack(s.key);
                        assert_eq!(t.get(ino, pg), Some(&old.slots[i].val));
                        assert!(find_or_vacant(&t.slots, s.key).is_err());
                    }
                }
            }
            assert_eq!(t.len(), m.len());
        }
        // Doublings happened, and each drained over several calls.
        assert!(saw_drain > 20, "{saw_drain}");
        for (&(ino, pg), v) in &m {
            assert_eq!(t.get(ino, pg), Some(v));
        }
        assert_eq!(t.keys().count(), m.len());
    }

    #[test]
    fn a_cluster_that_wraps_drains_whole_while_its_keys_are_removed() {
        // 12 keys homed in the last 3 entries of a 64-entry table (their cluster
        // wraps past the end) and 8 others, each alone at homes 24, 28, ... 52
        // (clusters of their own: the drain stops between them).
        let mask = MIN_CAP - 1;
        let (mut wrap, mut other) = (Vec::new(), Vec::new());
        let mut homes = std::collections::HashSet::new();
        for pg in 0..1_000_000u64 {
            let Some(k) = pack(1, pg) else { continue };
            let h = home(k, mask);
            if h >= MIN_CAP - 3 {
                if wrap.len() < 12 {
                    wrap.push(pg);
                }
            } else if (24..=52).contains(&h) && h.is_multiple_of(4) && homes.insert(h) {
                other.push(pg);
            }
            if wrap.len() == 12 && other.len() == 8 {
                break;
            }
        }
        assert_eq!((wrap.len(), other.len()), (12, 8));
        let mut t: PageTable<u32> = PageTable::new();
        let mut m: HashMap<u64, u32> = HashMap::new();
        for (n, &pg) in wrap.iter().chain(&other).enumerate() {
            *t.get_or_default(1, pg).unwrap() = n as u32;
            m.insert(pg, n as u32);
        }
        assert!(t.old.is_none());
        // The cluster does wrap: entry 0 holds a key homed near the end.
        assert!(home(t.slots[0].key, mask) >= MIN_CAP - 3);
        t.grow();
        let mut steps = 0;
        let mut removed_in_old = 0;
        while t.old.is_some() {
            t.drain(1);
            steps += 1;
            // Remove a wrapping key while it is still in the old table.
            if let Some(old) = &t.old {
                if let Some(&pg) = wrap
                    .iter()
                    .find(|&&pg| find_or_vacant(&old.slots, pack(1, pg).unwrap()).is_ok())
                {
                    // (Without the drain step a `remove` also takes; every third
                    // step, so that most of the cluster is still there to drain.)
                    if steps % 3 == 0 {
                        assert_eq!(t.remove_key(pack(1, pg).unwrap()), m.remove(&pg));
                        removed_in_old += 1;
                    }
                }
            }
            for (&pg, v) in &m {
                assert_eq!(t.get(1, pg), Some(v), "page {pg} after {steps} steps");
            }
            assert_eq!(t.len(), m.len());
            assert_eq!(t.keys().count(), m.len());
        }
        assert!(
            steps >= 5 && removed_in_old >= 1,
            "{steps} {removed_in_old}"
        );
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
