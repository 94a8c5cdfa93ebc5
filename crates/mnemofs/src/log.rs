//! Per-inode logs: linked 4 KiB pages of commit-marked entries.
//!
//! Two append protocols share one on-PM format (DESIGN.md §3, pNOVA §3.3).
//!
//! **Locked append** ([`LogState::stage`] + `Store::commit`), used by everything that
//! holds the inode's state lock from start to end (namespace operations, setattr,
//! fallocate, data writes in the `inode` lock mode, and in the `interval`/`segment`
//! modes appends and the writes of a file that has one writer):
//! 1. positions are taken from the DRAM tail; new pages are zeroed and linked;
//! 2. each entry is stored with its **commit mark** — the first 8-byte word: tag, size
//!    and the CRC of the rest of the entry — and flushed;
//! 3. fence — entries durable before the tail;
//! 4. the inode's tail word (one 8-byte store, or through the lite journal for
//!    multi-inode operations), then a fence.
//!
//! **Concurrent append** ([`LogState::reserve`] and [`LogState::complete`] in one
//! state-lock section, [`write_reserved`], [`mark_reserved`], [`Appends::finish`]),
//! used by bounded data writes in the `interval` and `segment` lock modes while the
//! file has other writers, so that writers of disjoint ranges of one file log in
//! parallel:
//! 1. *serve* (state lock held by whichever writer combines a batch of queued requests,
//!    `combine.rs`): slots after the DRAM tail — a new log page is zeroed, linked and
//!    fenced right there (rare), so that any writer's tail may point into it — the
//!    entries applied to DRAM, the tail word stored over the slots (tails grow in serve
//!    order, which is log order), and a *ticket*; the entries the append supersedes
//!    stay live until its ticket is finished ([`LogState::deferred`]);
//! 2. *write* (no lock): data pages, the bodies with a **zero** mark, flushed;
//! 3. fence — data pages and bodies durable before the mark;
//! 4. *mark* (no lock): one 8-byte store of the commit word into the first entry of the
//!    reservation. A multi-entry write is one *group*: the first entry (leader) carries
//!    the group size; the others are *followers*, stored with a follower mark with the
//!    body, and count only through a committed leader;
//! 5. the mark's and the tail's lines flushed, fence (no lock) — mark and tail durable
//!    before the write returns; then the ticket is finished ([`Appends::finish`]) and
//!    the superseded data blocks are freed.
//!
//! The tail covers slots still being written: they hold a zero mark (pages are zeroed
//! when they join a log), so recovery skips them one unit at a time (concurrent entries
//! are one unit each); follower marks without a committed leader are skipped too. This
//! is pNOVA's fix for its Fig. 3, where a tail alone would expose an entry still in
//! flight.
//!
//! Recovery replays exactly the committed entries (tag and CRC valid) that lie before
//! the persisted tail; a mark with a bad CRC below the tail is corruption (a mark is
//! stored only after its body was fenced).
//!
//! GC: *fast GC* unlinks pages all of whose entries are dead (one 8-byte pointer store
//! per gap); *thorough GC* (in `store.rs`) rewrites the live state into a fresh chain and
//! switches head and tail through the journal.

use crate::addr::{BlockNo, PmOff};
use crate::error::Result;
use crate::format::{
    commit_word, follower_word, Entry, BLOCK, INO_HEAD_OFF, INO_TAIL_OFF, LOG_DATA, LOG_MAGIC,
    LOG_MAGIC_OFF, LOG_NEXT_OFF, LOG_OWNER_OFF, UNIT,
};
use crate::space::Space;
use crate::vol::Vol;
use rustc_hash::FxHashMap;

/// DRAM state of one log.
#[derive(Default, Debug)]
pub(crate) struct LogState {
    /// The chain, head first. The last page holds the DRAM tail.
    pub pages: Vec<u64>,
    /// PM byte offset where the next append goes: past the last committed entry, or
    /// past the last reserved slot while concurrent appends are in flight (0 while
    /// empty).
    pub tail: u64,
    /// Per log page: live (or pinned) entries, and what keeps each live entry
    /// alive. Slots reserved by in-flight appends count too, so fast GC keeps their
    /// pages.
    pub page_live: FxHashMap<u64, PageLive>,
    /// Units (64 B) held by live or pinned entries.
    pub live_units: u64,
    /// Of those, units of pinned entries (they never die, but a compaction drops
    /// them: its snapshot needs none).
    pub pinned_units: u64,
    /// The value last stored to the inode's PM tail word.
    pub durable: u64,
    /// Appends so far (locked and concurrent), in log order.
    pub seq: u64,
    /// Sequence number of the append whose end is `durable`.
    pub durable_seq: u64,
    /// Concurrent appends between reserve and complete.
    pub inflight: u32,
    /// A page lost its last live entry: fast GC has work.
    pub gc_hint: bool,
    /// A concurrent append was told to run GC after its last fence (one at a time:
    /// cleared when GC runs), so that the others do not all take the lock again.
    pub gc_claimed: bool,
    /// Concurrent appends served so far ([`Appends`]): the next one's ticket.
    pub served: u64,
    /// Tickets below this are finished (their writers fenced mark and tail).
    pub finished: u64,
    /// Entries superseded by a concurrent append, by its ticket: they stay live (their
    /// pages out of fast GC's reach) until it is finished, so that a crash before its
    /// commit mark is durable finds the mapping it replaced still in the chain.
    pub deferred: std::collections::VecDeque<(u64, Offsets)>,
}

/// Units (entry slots) of a log page.
const PAGE_UNITS: usize = (BLOCK / UNIT) as usize;

/// The liveness of one log page's entries: how many are live or pinned (the page is
/// dead at 0), and for each entry that can die, by its first unit, how many things
/// (pages it maps, a later entry that supersedes it) keep it alive and its size.
/// One map lookup per entry event instead of one in a map by entry and another in a
/// map by page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PageLive {
    pub count: u32,
    refs: [u32; PAGE_UNITS],
    units: [u8; PAGE_UNITS],
}

impl Default for PageLive {
    fn default() -> Self {
        PageLive {
            count: 0,
            refs: [0; PAGE_UNITS],
            units: [0; PAGE_UNITS],
        }
    }
}

/// The unit slot of PM offset `off` in its log page.
fn slot(off: u64) -> usize {
    ((off % BLOCK) / UNIT) as usize
}

/// The log offsets of a commit's entries (most commits have one or two: no heap
/// allocation for them).
pub(crate) type Offsets = smallvec::SmallVec<[u64; 4]>;

/// Concurrent appends of one file that may be out at once (served, not finished):
/// the size of the ring of finished flags.
pub(crate) const RING: u64 = 256;

/// A concurrent append's request to the file's combiner: its entries (in the
/// writer's frame, which waits in [`crate::combine::Queue::run`] until served).
pub(crate) struct AppendJob {
    entries: *const Entry,
    len: usize,
}

// SAFETY: the entries are only read, by the combiner, while their owner waits for
// its request to be served (`combine::Queue::run` returns only after that).
unsafe impl Send for AppendJob {}

impl AppendJob {
    pub fn new(entries: &[Entry]) -> AppendJob {
        AppendJob {
            entries: entries.as_ptr(),
            len: entries.len(),
        }
    }

    /// The entries.
    pub fn entries(&self) -> &[Entry] {
        // SAFETY: built from a slice that outlives the request (see `Send` above).
        unsafe { std::slice::from_raw_parts(self.entries, self.len) }
    }
}

/// A served concurrent append: its slots (tail already moved over them, DRAM state
/// applied), its ticket, the data blocks it superseded, and whether the log wants GC.
#[derive(Debug)]
pub(crate) struct Served {
    pub r: Reservation,
    pub ticket: u64,
    pub freed: crate::space::Runs,
    pub gc_due: bool,
}

/// What concurrent writers of one file share outside its state lock: the combining
/// queue of their requests, and one finished flag per ticket (modulo [`RING`]),
/// set by the writer after its last fence, cleared under the state lock
/// ([`LogState::settle`]). Allocated at a file's first concurrent append.
pub(crate) struct Appends {
    pub queue: crossbeam_utils::CachePadded<
        crate::combine::Queue<AppendJob, crate::error::Result<Option<Served>>>,
    >,
    finished: [std::sync::atomic::AtomicBool; RING as usize],
}

impl Default for Appends {
    fn default() -> Self {
        Appends {
            queue: Default::default(),
            finished: [const { std::sync::atomic::AtomicBool::new(false) }; RING as usize],
        }
    }
}

impl Appends {
    /// The append of `ticket` is finished: its mark and a tail over it are durable.
    pub fn finish(&self, ticket: u64) {
        // Release: pairs with `settle`'s Acquire load; nothing of the append is
        // touched after it.
        self.finished[(ticket % RING) as usize].store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether `ticket` is finished; clears its flag for ticket + RING if so (state
    /// lock held: tickets are issued under it, at most RING out at once).
    fn take(&self, ticket: u64) -> bool {
        let f = &self.finished[(ticket % RING) as usize];
        if f.load(std::sync::atomic::Ordering::Acquire) {
            f.store(false, std::sync::atomic::Ordering::Relaxed);
            true
        } else {
            false
        }
    }
}

/// Slots reserved for a concurrent append.
#[derive(Debug)]
pub(crate) struct Reservation {
    pub offsets: Offsets,
    pub end: u64,
    pub seq: u64,
}

/// Entries written but not yet committed by a tail update.
pub(crate) struct Staged {
    pub offsets: Offsets,
    /// Bytes written past the old tail inside the old tail page (zeroed again if the
    /// append is abandoned, so no stale entry is left for a later gap to expose).
    pub dirty: (u64, u64),
    pub new_pages: Vec<u64>,
    pub new_head: Option<u64>,
    pub new_tail: u64,
}

impl Staged {
    /// Undoes an append that will not be committed: zeroes what it wrote in the old
    /// tail page (flushed; the next commit's fence orders it) and gives back its pages.
    pub fn abandon(self, pm: &Vol, space: &Space) {
        let (from, to) = self.dirty;
        if to > from {
            pm.zero(PmOff(from), to - from);
            pm.flush(PmOff(from), to - from);
        }
        for p in self.new_pages {
            space.free_run(p, 1);
        }
    }
}

/// Concurrent append, step 2 (no lock): stores the bodies of a reservation — the
/// leader with a zero mark and its group size, followers with their follower mark —
/// and flushes them. Returns the leader's commit word, for [`mark_reserved`] after the
/// caller's fence.
pub(crate) fn write_reserved(pm: &Vol, r: &Reservation, entries: &[Entry]) -> u64 {
    let mut leader_word = 0;
    for (i, (e, &pos)) in entries.iter().zip(&r.offsets).enumerate() {
        let mut body = e.encode();
        if i == 0 {
            body[10..12].copy_from_slice(&(entries.len() as u16).to_le_bytes());
            leader_word = commit_word(&body);
            if crate::bugs::on(crate::bugs::Bug::MarkWithBody) {
                body[0..8].copy_from_slice(&leader_word.to_le_bytes());
            }
        } else {
            let w = follower_word(&body);
            body[0..8].copy_from_slice(&w.to_le_bytes());
        }
        pm.write(PmOff(pos), &body);
        pm.flush(PmOff(pos), body.len() as u64);
    }
    leader_word
}

/// Concurrent append, step 4 (no lock, after the caller's fence): the commit mark,
/// stored but not written back: the caller flushes its line ([`flush_mark`]) with the
/// tail word's, after its state-lock section (docs/FORMAT.md §3).
pub(crate) fn mark_reserved(pm: &Vol, r: &Reservation, word: u64) {
    if let Some(&pos) = r.offsets.first() {
        pm.store_u64(PmOff(pos), word);
    }
}

/// Writes back the line of a reservation's commit mark.
pub(crate) fn flush_mark(pm: &Vol, r: &Reservation) {
    if let Some(&pos) = r.offsets.first() {
        pm.flush(PmOff(pos), 8);
    }
}

/// Writes a fresh log page: zeros with its tail (owner, magic), in non-temporal
/// stores (durable at the caller's next fence, not fenced here). Whole lines stored
/// non-temporally need no flush: 64 cache-line flushes per page fewer than zeroing
/// it through the cache (docs/FORMAT.md §3).
pub(crate) fn init_page(pm: &Vol, block: u64, owner: u64) {
    let mut page = [0u8; BLOCK as usize];
    let (o, m) = (LOG_OWNER_OFF as usize, LOG_MAGIC_OFF as usize);
    page[o..o + 8].copy_from_slice(&owner.to_le_bytes());
    page[m..m + 8].copy_from_slice(&LOG_MAGIC.to_le_bytes());
    pm.write_nt(BlockNo(block).off(), &page);
}

impl LogState {
    /// Reserves space for `entries` after the tail, writes and flushes their bodies.
    /// Nothing becomes visible until the caller fences, marks and moves the tail.
    pub fn stage(&self, pm: &Vol, space: &Space, owner: u64, entries: &[Entry]) -> Result<Staged> {
        let mut st = Staged {
            offsets: Offsets::with_capacity(entries.len()),
            dirty: (self.tail, self.tail),
            new_pages: Vec::new(),
            new_head: None,
            new_tail: self.tail,
        };
        let mut last_page = self.pages.last().copied();
        let mut pos = self.tail;
        for e in entries {
            let len = e.units() * UNIT;
            let fits = last_page.is_some_and(|p| pos + len <= BlockNo(p).at(LOG_DATA).get());
            if !fits {
                let p = match space.alloc_log(self.pages.first().copied()) {
                    Ok(p) => p,
                    Err(err) => {
                        st.abandon(pm, space);
                        return Err(err);
                    }
                };
                init_page(pm, p, owner);
                match last_page {
                    // Linking past the tail page is harmless until the tail moves:
                    // recovery never follows a chain beyond the page holding the tail.
                    Some(prev) => {
                        pm.store_u64(BlockNo(prev).at(LOG_NEXT_OFF), p);
                        pm.flush(BlockNo(prev).at(LOG_NEXT_OFF), 8);
                    }
                    None => st.new_head = Some(p),
                }
                st.new_pages.push(p);
                last_page = Some(p);
                pos = BlockNo(p).off().get();
            }
            let mut body = e.encode();
            let cw = commit_word(&body);
            body[0..8].copy_from_slice(&cw.to_le_bytes());
            // Whole 64-byte units, stored non-temporally: durable at the caller's
            // fence without a flush per line (docs/FORMAT.md §3).
            pm.write_nt(PmOff(pos), &body);
            if st.new_pages.is_empty() {
                st.dirty.1 = pos + len;
            }
            st.offsets.push(pos);
            pos += len;
        }
        st.new_tail = pos;
        Ok(st)
    }

    /// Makes a committed locked append part of the DRAM chain (its tail is the
    /// newest: it was staged after every reservation).
    pub fn commit(&mut self, st: &Staged) {
        self.pages.extend_from_slice(&st.new_pages);
        self.tail = st.new_tail;
        self.seq += 1;
        self.durable = st.new_tail;
        self.durable_seq = self.seq;
    }

    /// Concurrent append, step 1 (state lock held): reserves one-unit slots for
    /// `entries` after the DRAM tail and pins their pages. A page the slots need is
    /// zeroed, linked and fenced here, so that a tail stored by any writer may point
    /// into it. Needs an existing log (every inode has one from its creation).
    pub fn reserve(
        &mut self,
        pm: &Vol,
        space: &Space,
        owner: u64,
        entries: &[Entry],
    ) -> Result<Reservation> {
        let Some(&first_page) = self.pages.last() else {
            return Err(crate::error::FsError::Invalid("reserve in an empty log"));
        };
        let mut last_page = first_page;
        let mut pos = self.tail;
        let mut offsets = Offsets::with_capacity(entries.len());
        let mut linked = Vec::new();
        for e in entries {
            debug_assert_eq!(e.units(), 1, "concurrent entries are one unit");
            if pos + UNIT > BlockNo(last_page).at(LOG_DATA).get() {
                let p = match space.alloc_log(self.pages.first().copied()) {
                    Ok(p) => p,
                    Err(err) => {
                        // Nothing was exposed: unlink (DRAM) and give back what we took.
                        for p in linked {
                            space.free_run(p, 1);
                        }
                        return Err(err);
                    }
                };
                init_page(pm, p, owner);
                // Linking past the tail page is harmless until a tail moves into it.
                pm.store_u64(BlockNo(last_page).at(LOG_NEXT_OFF), p);
                pm.flush(BlockNo(last_page).at(LOG_NEXT_OFF), 8);
                linked.push(p);
                last_page = p;
                pos = BlockNo(p).off().get();
            }
            offsets.push(pos);
            pos += UNIT;
        }
        if !linked.is_empty() {
            // Fence: the new pages are zeroed and linked before any writer's tail can
            // point into them (the tail may be stored by another thread, whose fence
            // would not order our flushes).
            pm.fence();
            self.pages.extend_from_slice(&linked);
        }
        for &off in &offsets {
            self.page_live
                .entry(PmOff(off).block().0)
                .or_default()
                .count += 1;
        }
        self.tail = pos;
        self.seq += 1;
        self.inflight += 1;
        Ok(Reservation {
            offsets,
            end: pos,
            seq: self.seq,
        })
    }

    /// Concurrent append, step 5 (state lock held, after [`write_reserved`] and
    /// [`mark_reserved`]): unpins the slots and stores the tail word if this append is
    /// the newest to finish (tail = max in log order). Neither flushed nor fenced:
    /// the caller flushes the tail word and fences after dropping the lock (the word
    /// then holds this end or a later one). Returns whether the tail word was stored.
    pub fn complete(&mut self, pm: &Vol, inode_off: PmOff, r: &Reservation) -> bool {
        for &off in &r.offsets {
            if let Some(p) = self.page_live.get_mut(&PmOff(off).block().0) {
                p.count = p.count.saturating_sub(1);
                if p.count == 0 {
                    self.gc_hint = true;
                }
            }
        }
        self.inflight = self.inflight.saturating_sub(1);
        let newest = r.seq > self.durable_seq || crate::bugs::on(crate::bugs::Bug::TailNotMax);
        if newest {
            pm.store_u64(inode_off + INO_TAIL_OFF, r.end);
            self.durable = r.end;
            self.durable_seq = r.seq;
        }
        newest
    }

    /// Moves the finished prefix over the appends whose writers have finished
    /// (`ap`: the file's shared part, if it has one) and drops the entries they
    /// superseded. State lock held.
    pub fn settle(&mut self, ap: Option<&Appends>) {
        if let Some(ap) = ap {
            while self.finished < self.served && ap.take(self.finished) {
                self.finished += 1;
            }
        }
        while let Some((t, _)) = self.deferred.front() {
            if *t >= self.finished {
                break;
            }
            if let Some((_, offs)) = self.deferred.pop_front() {
                for o in offs {
                    self.unref(o);
                }
            }
        }
    }

    /// Concurrent appends served and not known finished.
    pub fn out(&self) -> u64 {
        self.served - self.finished
    }

    /// Accounts a new entry at `off` of `units` units, kept alive by `refs` things
    /// (0: pinned, it never dies).
    pub fn add_live(&mut self, off: u64, units: u64, refs: u32) {
        let p = self.page_live.entry(PmOff(off).block().0).or_default();
        p.count += 1;
        if refs > 0 {
            p.refs[slot(off)] = refs;
            // An entry fits its page, so its units fit a byte (at most 63).
            p.units[slot(off)] = units.min(PAGE_UNITS as u64) as u8;
        } else {
            self.pinned_units = self.pinned_units.saturating_add(units);
        }
        self.live_units += units;
    }

    /// Drops one of the things that keep the entry at `off` alive; the entry dies
    /// when none is left (pinned and already dead entries are left alone).
    pub fn unref(&mut self, off: u64) {
        let Some(p) = self.page_live.get_mut(&PmOff(off).block().0) else {
            return;
        };
        let i = slot(off);
        if p.refs[i] == 0 {
            return;
        }
        p.refs[i] -= 1;
        if p.refs[i] == 0 {
            p.count = p.count.saturating_sub(1);
            if p.count == 0 {
                self.gc_hint = true;
            }
            self.live_units = self.live_units.saturating_sub(p.units[i] as u64);
        }
    }

    /// After a scan: a dead page that had to stay (at or after the page holding the PM
    /// tail, other than the last page) keeps the hint, so a later scan takes it once
    /// the tail moved on.
    fn rehint(&mut self) {
        let n = self.pages.len();
        self.gc_hint = n >= 2
            && self.pages[..n - 1]
                .iter()
                .any(|p| self.page_live.get(p).map_or(0, |l| l.count) == 0);
    }

    /// Fast GC: unlinks every page before the one holding the PM tail whose entries
    /// are all dead (pages with slots of in-flight appends are pinned). Each gap is
    /// closed with one 8-byte store (the predecessor's next pointer or the inode's
    /// head word), so any subset of the stores that reaches PM leaves a valid chain.
    /// Returns the pages to free (after the fence here).
    pub fn fast_gc(&mut self, pm: &Vol, inode_off: PmOff) -> Vec<u64> {
        // Pages from the one holding the PM tail on stay: recovery walks to it.
        let n = match self
            .pages
            .iter()
            .position(|&p| p == PmOff(self.durable).block().0)
        {
            Some(i) => i + 1,
            None => 0,
        };
        let dead = |p: &u64| self.page_live.get(p).map_or(0, |l| l.count) == 0;
        if n < 2 || !self.pages[..n - 1].iter().any(dead) {
            self.rehint();
            return Vec::new();
        }
        if self.inflight > 0 || self.out() > 0 {
            // The tail word may hold a value stored by another writer that has not
            // fenced yet. Fence: the newest tail (whose page we keep) is durable before
            // any page before it leaves the chain, so an older tail that pointed into
            // an unlinked page can no longer be what recovery reads.
            pm.flush(inode_off + crate::format::INO_TAIL_OFF, 8);
            pm.fence();
        }
        // Positions in the chain of the pages kept (every page from the one before the
        // PM tail's on, and the live ones before it).
        let mut kept_ix: Vec<usize> = Vec::with_capacity(self.pages.len());
        let mut freed = Vec::new();
        for (i, &p) in self.pages.iter().enumerate() {
            if i + 1 < n && dead(&p) {
                freed.push(p);
            } else {
                kept_ix.push(i);
            }
        }
        let kept: Vec<u64> = kept_ix.iter().map(|&i| self.pages[i]).collect();
        if kept[0] != self.pages[0] {
            pm.store_u64(inode_off + INO_HEAD_OFF, kept[0]);
            pm.flush(inode_off + INO_HEAD_OFF, 8);
        }
        // Close each gap: a kept page whose successor in the chain was freed now
        // points at the next kept page (found by position: no map of the old links
        // built over the whole chain on every scan).
        for w in kept_ix.windows(2) {
            if w[1] != w[0] + 1 {
                let (from, to) = (self.pages[w[0]], self.pages[w[1]]);
                pm.store_u64(BlockNo(from).at(LOG_NEXT_OFF), to);
                pm.flush(BlockNo(from).at(LOG_NEXT_OFF), 8);
            }
        }
        // Fence: the chain no longer reaches the freed pages before they are reused.
        pm.fence();
        for p in &freed {
            self.page_live.remove(p);
        }
        self.pages = kept;
        self.rehint();
        freed
    }

    /// Whether thorough GC is worth it: the log has several pages and the entries a
    /// compaction keeps (live ones; pinned ones it drops) fill less than a quarter of
    /// them. (A compaction rewrites every live entry and rebuilds the DRAM state from
    /// them: at "less than half", random overwrites of a file paid about one rewritten
    /// entry per write; at a quarter, a third, for a log up to 4× its live entries.)
    pub fn wants_compaction(&self) -> bool {
        let n = self.pages.len() as u64;
        let kept = self.live_units.saturating_sub(self.pinned_units);
        self.inflight == 0 && self.out() == 0 && n >= 4 && kept * UNIT * 4 < n * LOG_DATA
    }

    pub fn bytes(&self) -> u64 {
        self.pages.len() as u64 * BLOCK
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Geometry, BLOCK};
    use crate::types::Timespec;

    fn link(n: u32) -> Entry {
        Entry::Link {
            nlink: n,
            ctime: Timespec::default(),
        }
    }

    /// Regression (found in review): an append that failed after writing into the
    /// tail page left committed-looking entries past the tail, which a later append
    /// that skipped to a new page would have exposed to recovery.
    #[test]
    fn an_abandoned_append_leaves_nothing_past_the_tail() {
        let pm = Vol::new(pm::Pm::anonymous(8 << 20).unwrap());
        let geo = Geometry::compute(8 << 20, 1, 64).unwrap();
        let space = Space::empty(geo);
        space.free_run(geo.data_start, 1);
        let mut log = LogState::default();
        // Fill the first page to one free unit.
        let fill: Vec<Entry> = (0..62).map(link).collect();
        let st = log.stage(&pm, &space, 9, &fill).unwrap();
        log.commit(&st);
        let tail = log.tail;
        assert_eq!(tail % BLOCK, 62 * UNIT);
        // One entry fits, the next needs a page, and there is none.
        let r = log.stage(&pm, &space, 9, &[link(100), link(101)]);
        assert!(matches!(r, Err(crate::error::FsError::NoSpace)));
        let mut rest = vec![0u8; (LOG_DATA - tail % BLOCK) as usize];
        pm.read(PmOff(tail), &mut rest);
        assert!(rest.iter().all(|&b| b == 0), "stale bytes past the tail");
        assert_eq!(log.tail, tail);
    }

    #[test]
    fn fast_gc_unlinks_dead_pages_but_keeps_the_tail_page() {
        let pm = Vol::new(pm::Pm::anonymous(8 << 20).unwrap());
        let geo = Geometry::compute(8 << 20, 1, 64).unwrap();
        let space = Space::empty(geo);
        space.free_run(geo.data_start, 10);
        let mut log = LogState::default();
        let entries: Vec<Entry> = (0..63 * 3).map(link).collect();
        let st = log.stage(&pm, &space, 9, &entries).unwrap();
        log.commit(&st);
        assert_eq!(log.pages.len(), 3);
        // Only the middle page holds live entries.
        log.page_live.entry(log.pages[1]).or_default().count = 1;
        let inode_off = geo.inode_off(9);
        let freed = log.fast_gc(&pm, inode_off);
        assert_eq!(freed, vec![st.new_pages[0]]);
        assert_eq!(log.pages, vec![st.new_pages[1], st.new_pages[2]]);
        assert_eq!(pm.read_u64(inode_off + INO_HEAD_OFF), st.new_pages[1]);
    }

    /// Model check (shuttle) of the concurrent append protocol: three threads append
    /// one- and three-entry groups to one log (the first page nearly full, so
    /// reservations link a new page), while an observer replays the log up to the
    /// tail word at arbitrary points, as recovery would. Every returned append must
    /// be there, every group all or nothing, and replay never sees corruption. (The
    /// persistence model — what a crash keeps — is the crash explorer's job; this
    /// checks the interleavings of reserve, write, mark and complete.) Storing the
    /// tail unconditionally in `complete` (no max) makes it fail.
    #[test]
    fn shuttle_concurrent_appends_replay_exactly_the_committed() {
        shuttle::check_random(concurrent_appends_model, 300);
        shuttle::check_pct(concurrent_appends_model, 300, 3);
    }

    fn concurrent_appends_model() {
        use crate::inode::InodeState;
        use crate::recovery::replay::replay_page;
        use crate::types::FileKind;
        use shuttle::sync::Mutex;
        use std::sync::Arc;

        const INO: u64 = 9;
        let pm = Arc::new(Vol::new(pm::Pm::anonymous(8 << 20).unwrap()));
        let geo = Geometry::compute(8 << 20, 1, 64).unwrap();
        let space = Arc::new(Space::empty(geo));
        space.free_run(geo.data_start, 8);
        let ioff = geo.inode_off(INO);
        let mut log = LogState::default();
        // Fill the first page to 58 of 63 slots.
        let fill: Vec<Entry> = (0..58).map(link).collect();
        let st = log.stage(&pm, &space, INO, &fill).unwrap();
        pm.store_u64(ioff + INO_HEAD_OFF, st.new_head.unwrap());
        pm.store_u64(ioff + INO_TAIL_OFF, st.new_tail);
        log.commit(&st);
        let log = Arc::new(Mutex::new(log));
        // (pgoff, block) of every append that returned, and of every one reserved.
        type Appends = Arc<Mutex<Vec<Vec<(u64, u64)>>>>;
        let returned: Appends = Arc::new(Mutex::new(Vec::new()));
        let all: Appends = Arc::new(Mutex::new(Vec::new()));

        // What recovery would replay now: page -> block.
        let replay = {
            let pm = pm.clone();
            move || -> std::result::Result<std::collections::HashMap<u64, u64>, String> {
                let mut st = InodeState::new(INO, FileKind::Regular);
                let tail = pm.read_u64(ioff + INO_TAIL_OFF);
                let mut p = pm.read_u64(ioff + INO_HEAD_OFF);
                let mut group = None;
                for _ in 0..8 {
                    let base = BlockNo(p).off().get();
                    let in_page = tail >= base && tail <= base + LOG_DATA;
                    let end = if in_page { tail } else { base + LOG_DATA };
                    replay_page(&pm, &geo, &mut st, base, end, &mut group)?;
                    if in_page {
                        if group.is_some() {
                            return Err("a group runs past the tail".into());
                        }
                        return Ok(st.pages.iter().map(|(k, v)| (k, v.block)).collect());
                    }
                    p = pm.read_u64(PmOff(base) + LOG_NEXT_OFF);
                }
                Err("tail page not found".into())
            }
        };
        let check = {
            let returned = returned.clone();
            let all = all.clone();
            move || {
                let done = returned.lock().unwrap().clone();
                let started = all.lock().unwrap().clone();
                let got = replay().unwrap_or_else(|e| panic!("replay failed: {e}"));
                for w in &done {
                    for (pg, b) in w {
                        assert_eq!(got.get(pg), Some(b), "a returned append is missing");
                    }
                }
                for w in &started {
                    let n = w.iter().filter(|(pg, b)| got.get(pg) == Some(b)).count();
                    assert!(
                        n == 0 || n == w.len(),
                        "a group is torn: {n} of {}",
                        w.len()
                    );
                }
            }
        };

        let mut hs = Vec::new();
        for t in 0..3u64 {
            let (pm, space, log, returned, all) = (
                pm.clone(),
                space.clone(),
                log.clone(),
                returned.clone(),
                all.clone(),
            );
            hs.push(shuttle::thread::spawn(move || {
                for k in 0..2u64 {
                    let n = if (t + k) % 2 == 0 { 1 } else { 3 };
                    let w: Vec<(u64, u64)> = (0..n)
                        .map(|i| {
                            (
                                t * 100 + k * 10 + i,
                                geo.data_start + 1000 + t * 100 + k * 10 + i,
                            )
                        })
                        .collect();
                    let entries: Vec<Entry> = w
                        .iter()
                        .map(|&(pg, b)| Entry::Write {
                            pgoff: pg,
                            block: b,
                            npages: 1,
                            size_after: (pg + 1) * BLOCK,
                            mtime: Timespec::default(),
                        })
                        .collect();
                    let r = log
                        .lock()
                        .unwrap()
                        .reserve(&pm, &space, INO, &entries)
                        .unwrap();
                    all.lock().unwrap().push(w.clone());
                    shuttle::thread::yield_now();
                    let word = write_reserved(&pm, &r, &entries);
                    shuttle::thread::yield_now();
                    mark_reserved(&pm, &r, word);
                    flush_mark(&pm, &r);
                    shuttle::thread::yield_now();
                    log.lock().unwrap().complete(&pm, ioff, &r);
                    pm.flush(ioff + INO_TAIL_OFF, 8);
                    returned.lock().unwrap().push(w);
                }
            }));
        }
        let observer = shuttle::thread::spawn(move || {
            for _ in 0..4 {
                check();
                shuttle::thread::yield_now();
            }
            check
        });
        for h in hs {
            h.join().unwrap();
        }
        let check = observer.join().unwrap();
        check();
    }
}
