//! File data by page copy-on-write (NOVA): every write goes to fresh pages, partial
//! head/tail pages are merged with the old contents, and one log entry per run of
//! fresh pages maps them; the old pages are freed after the entry commits.
//!
//! Persistence order per write (DESIGN.md §3): new data pages (non-temporal stores)
//! → log entries → fence → tail → fence → DRAM index → old pages freed. In the
//! `interval` and `segment` lock modes the writes of a shared file follow the
//! concurrent append protocol of the `log` module (served in a batch under the state
//! lock: slots, DRAM state, tail; then data, entries, fence, mark, fence, finished).

use super::{DataPlane, MAX_FILE_SIZE};
use crate::addr::{page_of, page_start};
use crate::addr::{BlockNo, PmOff};
use crate::bugs::{self, Bug};
use crate::contention;
use crate::error::{FsError, Result};
use crate::format::{Entry, BLOCK, INO_TAIL_OFF};
use crate::index::PageIndex;
use crate::inode::{Inode, InodeState};
use crate::interleave::{self, Point};
use crate::itable::InodeTable;
use crate::log;
use crate::space::Run;
use crate::types::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Writes of a file after its last sign of a second writer that take the concurrent
/// append before a writer alone takes the locked append again.
const CONTENDED_WRITES: u32 = 1024;

/// A superseded block is kept as a file's spare only while this many blocks are
/// available to data writes (4 MiB, or an eighth of a smaller data area): near a
/// full device they go back at once.
const SPARE_MIN_FREE: u64 = 1024;

/// fallocate flags (linux/falloc.h).
const FALLOC_FL_KEEP_SIZE: i32 = 0x01;
const FALLOC_FL_PUNCH_HOLE: i32 = 0x02;
const FALLOC_FL_ZERO_RANGE: i32 = 0x10;

/// Data operations need a live regular file: ENOENT for a freed inode, EISDIR for a
/// directory, `special` for anything else.
fn regular(st: &InodeState, special: FsError) -> Result<()> {
    if st.dead {
        return Err(FsError::NotFound);
    }
    match st.kind {
        FileKind::Regular => Ok(()),
        FileKind::Directory => Err(FsError::IsDir),
        _ => Err(special),
    }
}

/// One Write entry per run of consecutive pages (and, with `blocks`, consecutive
/// blocks); `blocks == None` unmaps the pages (hole punch: block 0).
fn push_runs(st: &InodeState, pages: &[u64], blocks: Option<&[u64]>, entries: &mut Vec<Entry>) {
    let block = |i: usize| blocks.map_or(0, |b| b[i]);
    let mut i = 0;
    while i < pages.len() {
        let mut n = 1;
        while i + n < pages.len()
            && pages[i + n] == pages[i] + n as u64
            && (blocks.is_none() || block(i + n) == block(i) + n as u64)
        {
            n += 1;
        }
        entries.push(Entry::Write {
            pgoff: pages[i],
            block: block(i),
            npages: n as u32,
            size_after: st.size,
            mtime: st.mtime,
        });
        i += n;
    }
}

impl DataPlane {
    /// The page CoW write (every write the small-write mode did not take).
    pub(super) fn cow_write(
        &self,
        inode: &Arc<Inode>,
        offset: Option<u64>,
        data: &[u8],
    ) -> Result<(u64, usize)> {
        if let (Some(off), false) = (offset, self.lock == LockMode::Inode) {
            return self.write_concurrent(inode, off, data).map(|n| (off, n));
        }
        let now = Timespec::now();
        // One state-lock section for the whole write (one writer per file: the
        // `inode` mode, as NOVA's inode lock, or an append in the range-lock modes,
        // which locks the whole file, so no concurrent append is in flight): taken
        // before the data's non-temporal stores,
        // since taking a lock (a locked instruction) after them would wait for them
        // to drain; the commit then does its DRAM bookkeeping while they drain
        // (`Store::commit`).
        let mut st = contention::take(&inode.state);
        regular(&st, FsError::Invalid("write to a special file"))?;
        let off = offset.unwrap_or(st.size);
        if data.is_empty() {
            return Ok((off, 0));
        }
        let end = off.checked_add(data.len() as u64).ok_or(FsError::TooBig)?;
        if end > MAX_FILE_SIZE {
            return Err(FsError::TooBig);
        }
        let old = Self::partial_pages(&st.index, off, end);
        let first = page_of(off);
        let last = page_of(end - 1);
        let (runs, took) = self.blocks_for(&mut st, last - first + 1)?;
        self.copy_in(inode.ino, &runs, off, data, old);
        self.commit_write_spare(inode, &mut st, first, end, &runs, took, now)?;
        Ok((off, data.len()))
    }

    /// Old blocks of the partial head and tail pages of `[off, end)`, to merge.
    /// Only a page the write covers in part is looked up (a whole-page overwrite
    /// needs neither), in the file's lock-free page index (stable under the state
    /// lock or the writer's exclusive range lock).
    fn partial_pages(index: &PageIndex, off: u64, end: u64) -> (Option<u64>, Option<u64>) {
        let (first, last) = (page_of(off), page_of(end - 1));
        let head_partial = !off.is_multiple_of(BLOCK) || end < page_start(first) + BLOCK;
        let tail_partial = last != first && !end.is_multiple_of(BLOCK);
        let get = |pg: u64| Some(index.get(pg)).filter(|&b| b != 0);
        (
            if head_partial { get(first) } else { None },
            if tail_partial { get(last) } else { None },
        )
    }

    /// Stores `data` (at file offset `off`) into the fresh blocks `runs`, merging the
    /// partial head and tail pages with their old blocks `old`.
    fn copy_in(
        &self,
        ino: Ino,
        runs: &[Run],
        off: u64,
        data: &[u8],
        old: (Option<u64>, Option<u64>),
    ) {
        let end = off + data.len() as u64;
        let first = page_of(off);
        // The merge buffer, allocated only for a partial page.
        let mut page: Vec<u8> = Vec::new();
        let mut pg = first;
        for &(start, len) in runs {
            for b in start..start + len {
                let pstart = page_start(pg);
                let lo = off.max(pstart) - pstart;
                let hi = end.min(pstart + BLOCK) - pstart;
                let src = &data[(pstart + lo - off) as usize..(pstart + hi - off) as usize];
                if lo == 0 && hi == BLOCK {
                    self.store_data(BlockNo(b).off(), src);
                } else {
                    let old_block = if pg == first { old.0 } else { old.1 };
                    page.resize(BLOCK as usize, 0);
                    match old_block {
                        Some(ob) => self.read_page(ino, pg, ob, &mut page),
                        None => page.fill(0),
                    }
                    page[lo as usize..hi as usize].copy_from_slice(src);
                    self.store_data(BlockNo(b).off(), &page);
                }
                pg += 1;
            }
        }
    }

    /// A bounded write in the `interval` and `segment` lock modes. A writer alone
    /// with the file takes the locked append; writers of a shared file take the
    /// concurrent append (`log` module): blocks allocated first, then one combined
    /// state-lock section serves the write (slots reserved, DRAM state applied, tail
    /// moved), then data, entries and commit mark are written and fenced outside it.
    fn write_concurrent(&self, inode: &Arc<Inode>, off: u64, data: &[u8]) -> Result<usize> {
        if data.is_empty() {
            let st = contention::take(&inode.state);
            regular(&st, FsError::Invalid("write to a special file"))?;
            return Ok(0);
        }
        let end = off.checked_add(data.len() as u64).ok_or(FsError::TooBig)?;
        if end > MAX_FILE_SIZE {
            return Err(FsError::TooBig);
        }
        let first = page_of(off);
        let last = page_of(end - 1);
        let now = Timespec::now();
        // A writer alone with the file (the state lock free, no append out, no other
        // writer seen lately) takes the locked append, as the `inode` mode: one
        // state-lock section across the copy, taken before the non-temporal stores,
        // and the DRAM bookkeeping done while they drain (`Store::commit`). Both
        // protocols share the log format (`log` module): the locked append is what
        // namespace calls use beside concurrent writers already. A writer that finds
        // the lock taken marks the file contended, so that writers of a shared file
        // keep appending concurrently. (Not while interleaving hooks are installed:
        // they explore the concurrent protocol.)
        if inode.contended.load(Ordering::Relaxed) == 0 && !interleave::hooked() {
            let mut st = inode.state.try_lock();
            if let Some(st) = st.as_mut() {
                contention::lock(false);
                // (Appends finished since the last one was served count as gone.)
                let InodeState { log, index, .. } = &mut **st;
                log.settle(index.appends_if_any());
            }
            match st {
                Some(mut st) if st.log.inflight == 0 && st.log.out() == 0 => {
                    regular(&st, FsError::Invalid("write to a special file"))?;
                    // (Allocated under the state lock, as in the `inode` mode: a
                    // one-page write takes the file's spare block, if it has one.)
                    let (runs, took) = self.blocks_for(&mut st, last - first + 1)?;
                    let old = Self::partial_pages(&inode.index, off, end);
                    self.copy_in(inode.ino, &runs, off, data, old);
                    self.commit_write_spare(inode, &mut st, first, end, &runs, took, now)?;
                    return Ok(data.len());
                }
                // Another writer holds the lock or has an append out.
                Some(_) => inode.contended.store(CONTENDED_WRITES, Ordering::Relaxed),
                None => inode.contended.store(CONTENDED_WRITES, Ordering::Relaxed),
            }
        }
        let runs = self.store.space.alloc(last - first + 1, false)?;
        // Built outside the lock: a Write's size and mtime count by maximum
        // (`InodeState::apply`), so its own end and the time now are enough.
        let entries = Self::write_entries(first, &runs, end, now);
        // The old partial pages, from the lock-free index before the append maps the
        // new blocks: our exclusive range lock keeps them stable, and they are freed
        // only after our commit is durable.
        let old = Self::partial_pages(&inode.index, off, end);
        let served = self.serve_or_free(inode, &entries, &runs)?;
        interleave::point(Point::Reserved);
        self.copy_in(inode.ino, &runs, off, data, old);
        interleave::point(Point::DataWritten);
        self.finish_concurrent(inode, &served, &entries);
        Ok(data.len())
    }

    /// Has a concurrent append of `entries` served by the file's combiner (one
    /// state-lock section for a batch of writers: [`crate::combine`]); on failure
    /// gives the data blocks `runs` back.
    fn serve_or_free(&self, inode: &Inode, entries: &[Entry], runs: &[Run]) -> Result<log::Served> {
        let ap = inode.index.appends();
        let ioff = self.store.geo.inode_off(inode.ino);
        loop {
            let served = ap.queue.run(
                log::AppendJob::new(entries),
                // (A waiter looks before it tries: a failed attempt is a locked
                // instruction on the line the combiner holds.)
                || {
                    if inode.state.is_locked() {
                        None
                    } else {
                        inode.state.try_lock()
                    }
                },
                || inode.state.lock(),
                |st: &mut InodeState, job: &log::AppendJob| {
                    self.serve_append(inode, st, ap, ioff, job.entries())
                },
            );
            match served {
                Ok(Some(s)) => return Ok(s),
                Ok(None) => std::thread::yield_now(),
                Err(e) => {
                    self.store.space.free_runs(runs);
                    return Err(e);
                }
            }
        }
    }

    /// Serves one concurrent append (state lock held, by whichever writer combines):
    /// reserves its slots after the DRAM tail, applies its entries to the DRAM state
    /// (the pages they supersede stay live until it is finished), and stores the
    /// tail word over them (not flushed: each writer flushes it before its last
    /// fence). The slots hold zeros until the writer marks them, so a tail that
    /// reaches PM first exposes nothing (recovery skips unmarked slots).
    fn serve_append(
        &self,
        inode: &Inode,
        st: &mut InodeState,
        ap: &log::Appends,
        ioff: PmOff,
        entries: &[Entry],
    ) -> Result<Option<log::Served>> {
        regular(st, FsError::Invalid("write to a special file"))?;
        st.log.settle(Some(ap));
        if st.log.out() >= log::RING {
            // RING appends out: the writer waits outside the lock for the oldest to
            // finish (a waiter under the lock could wait for a writer that needs it).
            return Ok(None);
        }
        // Another writer of the file out: keep to the concurrent append a while
        // longer; none: one write closer to the locked append. (Plain stores, and
        // only when the count changes.)
        let c = inode.contended.load(Ordering::Relaxed);
        if st.log.out() > 0 {
            if c != CONTENDED_WRITES {
                inode.contended.store(CONTENDED_WRITES, Ordering::Relaxed);
            }
        } else if c > 0 {
            inode.contended.store(c - 1, Ordering::Relaxed);
        }
        let owner = st.ino;
        let r = st
            .log
            .reserve(&self.store.vol, &self.store.space, owner, entries)?;
        self.note_writers(st.log.out() + 1);
        let mut freed = crate::space::Runs::new();
        st.defer = Some(log::Offsets::new());
        for (e, &off) in entries.iter().zip(&r.offsets) {
            freed.extend(st.apply(off, e));
        }
        let superseded = st.defer.take().unwrap_or_default();
        st.log.complete(&self.store.vol, ioff, &r);
        let ticket = st.log.served;
        st.log.served += 1;
        if !superseded.is_empty() {
            st.log.deferred.push_back((ticket, superseded));
        }
        // One writer at a time runs GC after its append (the others would all take
        // the lock again for nothing while the hint stays set).
        let gc_due = !st.log.gc_claimed && (st.log.gc_hint || st.log.wants_compaction());
        st.log.gc_claimed |= gc_due;
        Ok(Some(log::Served {
            r,
            ticket,
            freed,
            gc_due,
        }))
    }

    /// The Write entries mapping `runs` from page `first` on.
    fn write_entries(first: u64, runs: &[Run], size_after: u64, now: Timespec) -> Vec<Entry> {
        let mut entries = Vec::with_capacity(runs.len());
        let mut pg = first;
        for &run in runs {
            entries.push(Self::write_entry(pg, run, size_after, now));
            pg += run.1;
        }
        entries
    }

    /// The Write entry mapping run `(block, npages)` from page `pgoff` on.
    fn write_entry(pgoff: u64, (block, npages): Run, size_after: u64, now: Timespec) -> Entry {
        Entry::Write {
            pgoff,
            block,
            npages: npages as u32,
            size_after,
            mtime: now,
        }
    }

    /// Commits a data write under the state lock (the `inode` lock mode: one writer
    /// per file, NOVA's protocol).
    pub(super) fn commit_write_locked(
        &self,
        inode: &Inode,
        first: u64,
        end: u64,
        runs: &[Run],
    ) -> Result<()> {
        let now = Timespec::now();
        let mut st = inode.state.lock();
        self.commit_write_held(&mut st, first, end, runs, now, false)
            .map(|_| ())
    }

    /// [`commit_write_locked`](Self::commit_write_locked) with the state lock held
    /// by the caller; `runs` go back to the allocator if it fails. With `keep`, a
    /// single block the write superseded is returned instead of freed
    /// (`Store::commit_keeping`).
    fn commit_write_held(
        &self,
        st: &mut InodeState,
        first: u64,
        end: u64,
        runs: &[Run],
        now: Timespec,
        keep: bool,
    ) -> Result<Option<u64>> {
        if st.dead {
            self.store.space.free_runs(runs);
            return Err(FsError::NotFound);
        }
        let size_after = st.size.max(end);
        self.note_writers(1);
        let r = if let [run] = *runs {
            // One run (a page overwrite): its entry on the stack. A vector of one
            // entry allocated and freed by every write of a file had the allocator
            // retire its page each time.
            let e = [Self::write_entry(first, run, size_after, now)];
            self.store.commit_keeping(&mut [(st, &e[..])], &[], keep)
        } else {
            let entries = Self::write_entries(first, runs, size_after, now);
            self.store.commit_keeping(&mut [(st, entries)], &[], keep)
        };
        if r.is_err() {
            self.store.space.free_runs(runs);
        }
        r
    }

    /// Blocks for `n` pages of a write that holds the file's state lock: the file's
    /// spare block for one page (and whether it was taken), else the allocator's.
    fn blocks_for(&self, st: &mut InodeState, n: u64) -> Result<(crate::space::Runs, bool)> {
        if n == 1 {
            if let Some(b) = st.spare.take() {
                return Ok((smallvec::smallvec![(b, 1)], true));
            }
        }
        Ok((self.store.space.alloc(n, false)?, false))
    }

    /// [`commit_write_held`](Self::commit_write_held) for blocks from
    /// [`blocks_for`](Self::blocks_for) (`took`: the spare): a single block the
    /// write supersedes becomes the file's spare instead of going back to the
    /// allocator, so a file overwritten page by page takes no allocator lock. That
    /// lock is a locked instruction, which here, after the commit's fences, waited
    /// for the non-temporal stores to drain before anything else could go on; a
    /// spare is kept with plain stores under the state lock. Persistence is the
    /// same: the block was superseded by a durable commit (the tail fenced) and
    /// passed the invalidation point before it is written again.
    #[allow(clippy::too_many_arguments)]
    fn commit_write_spare(
        &self,
        inode: &Arc<Inode>,
        st: &mut InodeState,
        first: u64,
        end: u64,
        runs: &[Run],
        took: bool,
        now: Timespec,
    ) -> Result<()> {
        match self.commit_write_held(st, first, end, runs, now, self.spares_on) {
            Err(e) => {
                // The spare went back to the allocator with `runs`.
                if took {
                    self.store.space.spare_gone();
                }
                Err(e)
            }
            Ok(kept) => {
                self.settle_spare(inode, st, took, kept);
                Ok(())
            }
        }
    }

    /// After a commit: `kept` (the single block it superseded, if kept) becomes the
    /// file's spare, or goes back to the allocator when the file has one or free
    /// space is short; `took`: the write used the spare (the count follows).
    fn settle_spare(&self, inode: &Arc<Inode>, st: &mut InodeState, took: bool, kept: Option<u64>) {
        let space = &self.store.space;
        match kept {
            Some(b)
                if st.spare.is_none()
                    && (took
                        || space.available()
                            >= SPARE_MIN_FREE.min(self.store.geo.data_blocks() / 8)) =>
            {
                st.spare = Some(b);
                if !took {
                    space.spare_kept();
                    if !inode.spare_registered.load(Ordering::Relaxed)
                        && !inode.spare_registered.swap(true, Ordering::AcqRel)
                    {
                        let mut v = self.spares.lock();
                        // Files freed since leave their entries: dropped when the
                        // list has doubled.
                        if v.len() >= 64 && v.len().is_power_of_two() {
                            v.retain(|w| w.strong_count() > 0);
                        }
                        v.push(Arc::downgrade(inode));
                    }
                }
            }
            Some(b) => {
                space.free_run(b, 1);
                if took {
                    space.spare_gone();
                }
            }
            None if took => space.spare_gone(),
            None => {}
        }
    }

    /// Gives the files' spare blocks back to the allocator; how many. `wait`: also
    /// of files whose state lock is taken (no caller may hold one); else those are
    /// passed over.
    pub(crate) fn return_spares(&self, wait: bool) -> u64 {
        if self.store.space.spares() == 0 {
            return 0;
        }
        let files: Vec<Arc<Inode>> = self
            .spares
            .lock()
            .iter()
            .filter_map(|w| w.upgrade())
            .collect();
        let mut n = 0;
        for inode in files {
            let st = if wait {
                Some(inode.state.lock())
            } else {
                inode.state.try_lock()
            };
            let Some(mut st) = st else { continue };
            if let Some(b) = st.spare.take() {
                self.store.space.spare_gone();
                self.store.space.free_run(b, 1);
                n += 1;
            }
        }
        n
    }

    /// Commits a data write (whose data is already stored) with the concurrent append
    /// protocol: served, then [`finish_concurrent`](Self::finish_concurrent).
    pub(super) fn commit_write_concurrent(
        &self,
        inode: &Inode,
        first: u64,
        end: u64,
        runs: &[Run],
    ) -> Result<()> {
        interleave::point(Point::DataWritten);
        let entries = Self::write_entries(first, runs, end, Timespec::now());
        let served = self.serve_or_free(inode, &entries, runs)?;
        interleave::point(Point::Reserved);
        self.finish_concurrent(inode, &served, &entries);
        Ok(())
    }

    /// Concurrent append after it was served (data pages stored): entries, fence,
    /// mark, fence; the append is finished, then the superseded blocks are freed.
    /// Cannot fail; takes no lock unless the log wants GC.
    fn finish_concurrent(&self, inode: &Inode, s: &log::Served, entries: &[Entry]) {
        let ioff = self.store.geo.inode_off(inode.ino);
        let word = log::write_reserved(&self.store.vol, &s.r, entries);
        // Fence: the data pages (non-temporal stores) and the entry bodies are durable
        // before the commit mark that makes them part of the file.
        if !bugs::on(Bug::NoFenceBeforeTail) {
            self.store.vol.fence();
        }
        log::mark_reserved(&self.store.vol, &s.r, word);
        interleave::point(Point::Marked);
        if bugs::on(Bug::TailNotMax) {
            // The bug: the writer stores its own end, which a later append's tail
            // may already have passed (pNOVA Fig. 3).
            self.store.vol.store_u64(ioff + INO_TAIL_OFF, s.r.end);
        }
        // The mark, and the tail word, which holds our end or a later append's (whose
        // writer may not have fenced yet); either way both are written back before
        // our fence. A tail that reaches PM without the mark leaves our leader
        // unmarked under the tail, which replay skips (the write had not returned).
        log::flush_mark(&self.store.vol, &s.r);
        self.store.vol.flush(ioff + INO_TAIL_OFF, 8);
        // Fence: the commit mark and a tail covering it are durable before the write
        // returns, before the entries it superseded may leave the chain (the finished
        // flag), and before the blocks it superseded can be reused.
        if !bugs::on(Bug::NoFenceAfterTail) {
            self.store.vol.fence();
        }
        inode.index.appends().finish(s.ticket);
        // Through the invalidation point: what shadows the unmapped blocks is
        // cleared before they can be reused.
        self.store.free_data(&s.freed);
        if s.gc_due {
            let mut st = contention::take(&inode.state);
            self.store.gc(&mut st);
        }
    }

    /// Stores a fresh data page with non-temporal stores: durable at the commit's
    /// first fence, before the log entry that maps it can be.
    fn store_data(&self, off: PmOff, bytes: &[u8]) {
        if crate::bugs::on(crate::bugs::Bug::DataNotPersisted) {
            self.store.vol.write(off, bytes);
        } else {
            self.store.vol.write_nt(off, bytes);
        }
    }

    /// Copies page `pg` into a fresh block with `patch` applied; returns the block.
    /// Every caller copies a mapped page, whose block the commit then frees: the copy
    /// may borrow from the metadata reserve (paid back by that block), so that a
    /// shrink, a punch or a zeroed range, which free space, work on a full device.
    fn cow_page(&self, st: &InodeState, pg: u64, patch: impl FnOnce(&mut [u8])) -> Result<u64> {
        debug_assert!(st.pages.contains_key(pg), "cow_page of a hole");
        let b = self.store.space.alloc_one(true)?;
        let mut page = vec![0u8; BLOCK as usize];
        if let Some(p) = st.pages.get(pg) {
            self.read_page(st.ino, pg, p.block, &mut page);
        }
        patch(&mut page);
        self.store.vol.write_nt(BlockNo(b).off(), &page);
        Ok(b)
    }

    /// Truncation to `size` inside a mapped page: a Write entry for a copy of that page
    /// with the bytes at and past `size` zeroed.
    pub(crate) fn cow_zero_tail(&self, st: &InodeState, size: u64) -> Result<Option<(Entry, u64)>> {
        let pg = page_of(size);
        let within = (size % BLOCK) as usize;
        if within == 0
            || !st.pages.contains_key(pg)
            || crate::bugs::on(crate::bugs::Bug::TruncateKeepsTail)
        {
            return Ok(None);
        }
        let b = self.cow_page(st, pg, |p| p[within..].fill(0))?;
        Ok(Some((
            Entry::Write {
                pgoff: pg,
                block: b,
                npages: 1,
                size_after: st.size,
                mtime: st.mtime,
            },
            b,
        )))
    }

    /// `mode`: 0 or `FALLOC_FL_KEEP_SIZE` (allocate zeroed pages for holes),
    /// `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE` (deallocate),
    /// `FALLOC_FL_ZERO_RANGE` [`| FALLOC_FL_KEEP_SIZE`] (the range reads zeros and is
    /// allocated: fresh zeroed pages for whole pages and holes, the partial pages at
    /// its ends copied with their part zeroed; one commit).
    pub fn fallocate(
        &self,
        table: &InodeTable,
        ino: Ino,
        offset: u64,
        len: u64,
        mode: i32,
    ) -> Result<()> {
        let pages = len.div_ceil(BLOCK).saturating_add(2);
        self.with_reclaim(pages, || self.fallocate_once(table, ino, offset, len, mode))
    }

    fn fallocate_once(
        &self,
        table: &InodeTable,
        ino: Ino,
        offset: u64,
        len: u64,
        mode: i32,
    ) -> Result<()> {
        if len == 0 {
            return Err(FsError::Invalid("fallocate of zero bytes"));
        }
        if mode & !(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE) != 0 {
            return Err(FsError::Unsupported("fallocate mode"));
        }
        let punch = mode & FALLOC_FL_PUNCH_HOLE != 0;
        let zero = mode & FALLOC_FL_ZERO_RANGE != 0;
        if punch && zero {
            return Err(FsError::Unsupported("PUNCH_HOLE with ZERO_RANGE"));
        }
        if punch && mode & FALLOC_FL_KEEP_SIZE == 0 {
            return Err(FsError::Invalid("PUNCH_HOLE needs KEEP_SIZE"));
        }
        let end = offset.checked_add(len).ok_or(FsError::TooBig)?;
        if end > MAX_FILE_SIZE {
            return Err(FsError::TooBig);
        }
        // (The arguments first, then the file: as fallocate(2) reports EINVAL for bad
        // arguments whatever the file.)
        let inode = table.get(ino)?;
        let _w = inode.data.write(0, u64::MAX);
        let mut st = inode.state.lock();
        regular(&st, FsError::Unsupported("fallocate of a special file"))?;
        let now = Timespec::now();
        let mut entries = Vec::new();
        let mut fresh: Vec<u64> = Vec::new();
        let result = if punch {
            self.plan_punch(&st, offset, end, &mut entries, &mut fresh)
        } else if zero {
            self.plan_zero(&st, offset, end, now, &mut entries, &mut fresh)
        } else {
            self.plan_alloc(&st, offset, end, &mut entries, &mut fresh)
        };
        if let Err(e) = result {
            for b in fresh {
                self.store.space.free_run(b, 1);
            }
            return Err(e);
        }
        let keep = mode & FALLOC_FL_KEEP_SIZE != 0;
        if !keep && end > st.size {
            let mut s = st.setattr_entry(0);
            if let Entry::SetAttr {
                size, mtime, ctime, ..
            } = &mut s
            {
                *size = end;
                *mtime = now;
                *ctime = now;
            }
            entries.push(s);
        }
        if entries.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.commit(&mut [(&mut *st, entries)], &[]) {
            for b in fresh {
                self.store.space.free_run(b, 1);
            }
            return Err(e);
        }
        Ok(())
    }

    /// Zeroed pages for every hole in `[offset, end)`.
    fn plan_alloc(
        &self,
        st: &InodeState,
        offset: u64,
        end: u64,
        entries: &mut Vec<Entry>,
        fresh: &mut Vec<u64>,
    ) -> Result<()> {
        let first = page_of(offset);
        let last = page_of(end - 1);
        let holes: Vec<u64> = (first..=last)
            .filter(|pg| !st.pages.contains_key(*pg))
            .collect();
        if holes.is_empty() {
            return Ok(());
        }
        let blocks = self.alloc_zeroed(holes.len() as u64, fresh)?;
        push_runs(st, &holes, Some(&blocks), entries);
        Ok(())
    }

    /// `n` fresh blocks, zeroed with non-temporal stores (the log commit's fence
    /// makes them durable before the tail that makes their entries count),
    /// recorded in `fresh`.
    fn alloc_zeroed(&self, n: u64, fresh: &mut Vec<u64>) -> Result<Vec<u64>> {
        let runs = self.store.space.alloc(n, false)?;
        let blocks: Vec<u64> = runs.iter().flat_map(|&(s, l)| s..s + l).collect();
        fresh.extend_from_slice(&blocks);
        let zero = vec![0u8; BLOCK as usize];
        for &b in &blocks {
            self.store.vol.write_nt(BlockNo(b).off(), &zero);
        }
        Ok(blocks)
    }

    /// FALLOC_FL_ZERO_RANGE over `[offset, end)`: fresh zeroed blocks for whole pages
    /// and holes, copies with the covered part zeroed for partially covered pages;
    /// every entry carries `now` as mtime.
    fn plan_zero(
        &self,
        st: &InodeState,
        offset: u64,
        end: u64,
        now: Timespec,
        entries: &mut Vec<Entry>,
        fresh: &mut Vec<u64>,
    ) -> Result<()> {
        let first = page_of(offset);
        let last = page_of(end - 1);
        // Whole pages and holes: fresh zeroed blocks; a mapped page the range covers
        // in part: a copy with that part zeroed.
        let mut new_pages = Vec::new();
        for pg in first..=last {
            let pstart = page_start(pg);
            let lo = offset.max(pstart) - pstart;
            let hi = end.min(pstart + BLOCK) - pstart;
            if (lo > 0 || hi < BLOCK) && st.pages.contains_key(pg) {
                let b = self.cow_page(st, pg, |p| p[lo as usize..hi as usize].fill(0))?;
                fresh.push(b);
                entries.push(Entry::Write {
                    pgoff: pg,
                    block: b,
                    npages: 1,
                    size_after: st.size,
                    mtime: now,
                });
            } else {
                new_pages.push(pg);
            }
        }
        if !new_pages.is_empty() {
            let blocks = self.alloc_zeroed(new_pages.len() as u64, fresh)?;
            let before = entries.len();
            push_runs(st, &new_pages, Some(&blocks), entries);
            for e in &mut entries[before..] {
                if let Entry::Write { mtime, .. } = e {
                    *mtime = now;
                }
            }
        }
        Ok(())
    }

    /// Zeroes partial pages and unmaps whole pages of `[offset, end)`.
    fn plan_punch(
        &self,
        st: &InodeState,
        offset: u64,
        end: u64,
        entries: &mut Vec<Entry>,
        fresh: &mut Vec<u64>,
    ) -> Result<()> {
        let end = end.min(st.size);
        if offset >= end {
            return Ok(());
        }
        let first = page_of(offset);
        let last = page_of(end - 1);
        let mut whole = Vec::new();
        for pg in first..=last {
            if !st.pages.contains_key(pg) {
                continue;
            }
            let pstart = page_start(pg);
            let lo = offset.max(pstart) - pstart;
            let hi = end.min(pstart + BLOCK) - pstart;
            if lo == 0 && hi == BLOCK {
                whole.push(pg);
            } else {
                let b = self.cow_page(st, pg, |p| p[lo as usize..hi as usize].fill(0))?;
                fresh.push(b);
                entries.push(Entry::Write {
                    pgoff: pg,
                    block: b,
                    npages: 1,
                    size_after: st.size,
                    mtime: st.mtime,
                });
            }
        }
        push_runs(st, &whole, None, entries);
        Ok(())
    }
}
