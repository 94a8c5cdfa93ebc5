//! The data plane: file contents.
//!
//! - The **read path** is [`DataPlane::read`]: range lock (shared) → lock-free page
//!   index → for each page [`DataPlane::read_page_part`], the one place a page's
//!   bytes are read: the PM page, then the small-write mode's newer bytes over it.
//!   The DRAM read cache ([`rcache`], RCache, DESIGN.md §5) serves hot pages in
//!   [`DataPlane::read`] before it reads PM.
//! - The **write path** is [`DataPlane::write`]: range lock (exclusive, whole pages)
//!   → the small-write mode ([`SmallWrite`]: `finelog` or `lawn`, for sub-page
//!   overwrites inside one mapped page) → else page copy-on-write ([`cow`]).
//! - The **invalidation point** is [`Invalidation`]: every sub-page write (which
//!   changes a mapped page's bytes, in place or in the zone) and every free of a
//!   block that was mapped (through [`Store::free_data`], its [`FreeHook`]) goes
//!   through it, so that nothing shadowing or caching a page outlives a change to it.
//!   (Fresh blocks a failed write never published go straight back to `Space`.)
//!
//! Only the mount's small-write mode has state: LAWN's zone exists only in `lawn`
//! mounts (a mount in another mode writes an earlier LAWN mount's runs back at
//! recovery), the fine-log redo areas only in `finelog` mounts.

pub(crate) mod cow;
pub(crate) mod extent;
pub(crate) mod finelog;
pub(crate) mod lawn;
pub(crate) mod rcache;

use crate::addr::{page_of, page_start};
use crate::addr::{BlockNo, PmOff};
use crate::error::{FsError, Result};
use crate::format::BLOCK;
use crate::index::ATIME_STALE;
use crate::inode::{Inode, InodeState};
use crate::itable::InodeTable;
use crate::space::Run;
use crate::store::{FreeHook, Store};
use crate::types::*;
use crate::vol::Vol;
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Largest file size (bytes): the format's limit.
pub(crate) use crate::format::MAX_FILE_SIZE;

/// The mount's way of doing sub-page overwrites, with its state.
pub(crate) enum SmallWrite {
    /// Page copy-on-write for every write (NOVA).
    Cow,
    /// Redo-logged in-place writes (LAWN's baseline).
    Finelog(finelog::Finelog),
    /// LAWN alternate writing.
    Lawn(lawn::Lawn),
}

/// The invalidation point (see the module doc).
pub(crate) struct Invalidation {
    lawn: Option<Arc<lawn::LawnCore>>,
    cache: Option<Arc<rcache::Shared>>,
}

impl Invalidation {
    /// A sub-page write changed the bytes of page `pg` of `ino` (mapped to `block`)
    /// as readers see them, in place in its block or in the LAWN zone; the caller
    /// still holds the page's exclusive range lock. The read cache drops its copy
    /// of the block (it caches the block's bytes, with zone slices laid over them on
    /// every read, so a zone write would not need it; an in-place write does).
    #[inline]
    pub fn page_written(&self, ino: Ino, pg: u64, block: u64) {
        let _ = (ino, pg);
        if let Some(c) = &self.cache {
            c.invalidate(block);
        }
    }
}

impl FreeHook for Invalidation {
    fn before_free(&self, vol: &Vol, runs: &[Run]) {
        // LAWN: descriptors that shadow the blocks are cleared (persisted) before the
        // blocks can be reused.
        if let Some(l) = &self.lawn {
            l.before_free(vol, runs);
        }
        // The read cache: no copy of a block outlives its free (the block may next
        // hold another page).
        if let Some(c) = &self.cache {
            for &(start, len) in runs {
                for b in start..start.saturating_add(len) {
                    c.invalidate(b);
                }
            }
        }
    }
}

/// Per-mount counters of the small-write paths (on its own cache line: LAWN's
/// write-back thread bumps its own counters, `lawn::Counters`).
#[derive(Default)]
struct Counters {
    fallbacks: CachePadded<AtomicU64>,
}

/// Inodes whose times changed in DRAM only (sub-page writes log no entry; reads
/// update atime): persisted by their next attribute entry, or at unmount
/// (docs/FORMAT.md §2.9). An inode's index says whether it is in the set, so that
/// repeated changes of one file skip the shared set.
#[derive(Default)]
struct LazyTimes {
    dirty: Mutex<HashSet<Ino>>,
}

/// What the small-write mode reports for `FsStats`.
#[derive(Default)]
pub(crate) struct SmallWriteStats {
    pub slots_used: u64,
    pub slots_free: u64,
    pub chunk_blocks: u64,
    pub chunks_grown: u64,
    pub chunks_shrunk: u64,
    pub zone_writes: u64,
    pub file_writes: u64,
    pub writebacks: u64,
    pub finelog_writes: u64,
    pub fallbacks: u64,
    pub desc_store: Option<pm::Store16>,
}

/// File data of a mount (see the module doc).
pub(crate) struct DataPlane {
    pub store: Arc<Store>,
    small: SmallWrite,
    /// The DRAM read cache (RCache), when the mount has one.
    rcache: Option<rcache::ReadCache>,
    lock: LockMode,
    inval: Arc<Invalidation>,
    counters: Counters,
    times: LazyTimes,
    /// When reads update atime ([`AtimeMode::to_u8`]); a remount changes it
    /// (read-only: noatime).
    atime: std::sync::atomic::AtomicU8,
    /// The most data writes of one file seen between reserving their log slots and
    /// completing, at once (shows whether a frontend delivers writes to one file in
    /// parallel).
    writers_max: AtomicU64,
    /// Files that may hold a spare block (`InodeState::spare`; registered once,
    /// with their first), for giving the spares back: when a write finds no space,
    /// and at unmount.
    spares: parking_lot::Mutex<Vec<std::sync::Weak<Inode>>>,
    /// Files keep spares: a volume of one device (on several, every allocation
    /// goes where the placement says).
    spares_on: bool,
}

impl DataPlane {
    /// The invalidation point for a mount whose small-write mode is `small` (built
    /// before the [`Store`], which frees blocks through it).
    pub fn invalidation(
        small: &SmallWrite,
        cache: Option<&rcache::ReadCache>,
    ) -> Arc<Invalidation> {
        Arc::new(Invalidation {
            lawn: match small {
                SmallWrite::Lawn(l) => Some(l.core.clone()),
                _ => None,
            },
            cache: cache.map(|c| c.shared.clone()),
        })
    }

    /// The data plane over `store` (whose free hook is `inval`).
    pub fn new(
        store: Arc<Store>,
        small: SmallWrite,
        rcache: Option<rcache::ReadCache>,
        inval: Arc<Invalidation>,
        opts: &MountOptions,
    ) -> DataPlane {
        DataPlane {
            small,
            rcache,
            lock: opts.lock,
            inval,
            counters: Counters::default(),
            times: LazyTimes::default(),
            atime: std::sync::atomic::AtomicU8::new(opts.atime.to_u8()),
            writers_max: AtomicU64::new(0),
            spares: parking_lot::Mutex::new(Vec::new()),
            spares_on: store.space.placement().devices() == 1,
            store,
        }
    }

    /// The small-write mode.
    pub fn small(&self) -> &SmallWrite {
        &self.small
    }

    /// Reads through the lock-free page index (`index` module): the shared range lock
    /// keeps writers, truncation and freeing off these pages, so no state lock is
    /// taken and readers of one file share no cache line in the `segment` mode.
    pub fn read(&self, inode: &Arc<Inode>, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let end_req = offset.saturating_add(buf.len() as u64);
        // As in writes: start the lock word's and the index entry's misses together.
        inode.index.prefetch(page_of(offset));
        inode.data.prefetch(offset);
        if let SmallWrite::Lawn(l) = &self.small {
            if l.core.may_hold.load(Ordering::Relaxed) {
                l.core.prefetch(inode.ino, offset);
            }
        }
        // Only the pages that can be read are locked: up to the size now, in whole
        // pages (a whole-file read with a 1 MiB buffer of a 16 KiB file locked 256
        // segments). If the file grew past them before the lock was taken, lock again
        // with the new size, and after two tries the whole request (a file that keeps
        // growing past the locked pages while this runs is read up to them).
        let upto = |size: u64| -> u64 {
            let end = size.max(offset.saturating_add(1));
            end_req.min(end.div_ceil(BLOCK).saturating_mul(BLOCK))
        };
        let mut lock_end = upto(inode.index.size());
        let mut tries = 0;
        let _r = loop {
            let r = inode.data.read(offset, lock_end);
            if lock_end >= end_req || inode.index.size() <= lock_end {
                break r;
            }
            drop(r);
            tries += 1;
            lock_end = if tries < 2 {
                upto(inode.index.size())
            } else {
                end_req
            };
        };
        if inode.index.dead() {
            return Err(FsError::NotFound);
        }
        match inode.kind {
            FileKind::Regular => {}
            FileKind::Directory => return Err(FsError::IsDir),
            _ => return Err(FsError::Invalid("read of a special file")),
        }
        let size = inode.index.size();
        if offset >= size || buf.is_empty() {
            return Ok(0);
        }
        // Not past the pages locked (the size is at most their end, checked above,
        // unless the file grew since: then those pages are read as they were).
        let n = (buf.len() as u64)
            .min(size - offset)
            .min(lock_end.saturating_sub(offset));
        let out = &mut buf[..n as usize];
        let first = page_of(offset);
        let last = page_of(offset + n - 1);
        for pg in first..=last {
            let pstart = page_start(pg);
            let lo = offset.max(pstart);
            let hi = (offset + n).min(pstart + BLOCK);
            let dst = &mut out[(lo - offset) as usize..(hi - offset) as usize];
            match inode.index.get(pg) {
                0 => dst.fill(0),
                block => match &self.rcache {
                    Some(c) => {
                        if c.read(block, (lo - pstart) as usize, dst) {
                            self.overlay(inode.ino, pg, block, lo, dst);
                        } else {
                            // The block's bytes, then (a hot page) into the cache
                            // — straight from `dst` when it holds the whole page —
                            // then the small-write mode's newer bytes over them.
                            self.store
                                .vol
                                .read(BlockNo(block).off() + (lo - pstart), dst);
                            c.missed(inode, pg, block, Some(&*dst));
                            self.overlay(inode.ino, pg, block, lo, dst);
                        }
                    }
                    None => self.read_page_part(inode.ino, pg, block, lo, dst),
                },
            }
        }
        Ok(n as usize)
    }

    /// The bytes `[lo, lo + dst.len())` of the file (inside page `pg`, mapped to
    /// `block`) as the file holds them: the PM page, with the small-write mode's
    /// newer bytes (LAWN zone slices) over it. Every read of file data comes here
    /// (reads, and the old contents of partial pages that page CoW merges); a DRAM
    /// read cache serves hits here. The caller holds the page's range lock.
    #[inline]
    pub fn read_page_part(&self, ino: Ino, pg: u64, block: u64, lo: u64, dst: &mut [u8]) {
        let pstart = page_start(pg);
        self.store
            .vol
            .read(BlockNo(block).off() + (lo - pstart), dst);
        self.overlay(ino, pg, block, lo, dst);
    }

    /// Lays the small-write mode's newer bytes (LAWN zone slices) of page `pg` over
    /// `dst`, which holds the block's bytes `[lo, lo + dst.len())`.
    #[inline]
    fn overlay(&self, ino: Ino, pg: u64, block: u64, lo: u64, dst: &mut [u8]) {
        if let SmallWrite::Lawn(l) = &self.small {
            // LAWN: newer slices in the zone.
            l.core.overlay(&self.store.vol, ino, pg, block, lo, dst);
        }
    }

    /// Reads page `pg` (in `block`) whole, as the file holds it (for page CoW).
    pub fn read_page(&self, ino: Ino, pg: u64, block: u64, page: &mut [u8]) {
        self.read_page_part(ino, pg, block, page_start(pg), page);
    }

    /// Writes `data` at `offset` (or, with `None`, at the end of file, atomically);
    /// returns the offset written at and the bytes written.
    pub fn write(
        &self,
        inode: &Arc<Inode>,
        offset: Option<u64>,
        data: &[u8],
    ) -> Result<(u64, usize)> {
        let pages = (data.len() as u64).div_ceil(BLOCK).saturating_add(1);
        self.with_reclaim(pages, || self.write_once(inode, offset, data))
    }

    /// Runs `op` again if it found no space and the LAWN zone gave space back
    /// (`blocks` more): the zone's chunks are reclaimable, so a file write fails
    /// with ENOSPC only when they are gone too. `op` holds its locks only inside:
    /// giving chunks back takes page locks.
    pub fn with_reclaim<T>(&self, blocks: u64, op: impl Fn() -> Result<T>) -> Result<T> {
        match op() {
            Err(FsError::NoSpace) if self.reclaim(blocks) => op(),
            r => r,
        }
    }

    /// Gives LAWN zone chunks back until `blocks` more blocks are available (or none
    /// is left); whether any came back. The caller holds no page lock.
    pub fn reclaim(&self, blocks: u64) -> bool {
        let spares = self.return_spares(false) > 0;
        let zone = match &self.small {
            SmallWrite::Lawn(l) => l.reclaim(&self.store, blocks),
            _ => false,
        };
        spares || zone
    }

    /// Blocks given back on demand (free to `statfs`): the LAWN zone's chunks and
    /// the files' spare blocks.
    pub fn reclaimable_blocks(&self) -> u64 {
        let zone = match &self.small {
            SmallWrite::Lawn(l) => l.core.chunk_blocks(),
            _ => 0,
        };
        zone.saturating_add(self.store.space.spares())
    }

    fn write_once(
        &self,
        inode: &Arc<Inode>,
        offset: Option<u64>,
        data: &[u8],
    ) -> Result<(u64, usize)> {
        // Appends lock to the end of the file (their offset is the size, read under
        // the lock). A bounded write locks its own pages even when it extends the
        // file: its size_after is computed under the state lock at commit, so
        // concurrent extending writes still leave the larger size.
        // Whole pages: a sub-page write may move other bytes of its page (LAWN
        // write-back, page CoW), so no reader of the same page may run meanwhile.
        if let Some(off) = offset {
            // The lock word and the page's index entry are usually cache misses:
            // start both loads now so that they overlap.
            inode.index.prefetch(page_of(off));
            inode.data.prefetch(off);
            // And the LAWN zone's entry for the page (a sub-page write looks it up).
            if let SmallWrite::Lawn(l) = &self.small {
                if (data.len() as u64) < BLOCK {
                    l.core.prefetch(inode.ino, off);
                }
            }
        }
        let _w = match offset {
            Some(off) => {
                let (start, end) = (
                    page_start(page_of(off)),
                    off.saturating_add(data.len() as u64)
                        .saturating_add(BLOCK - 1)
                        / BLOCK
                        * BLOCK,
                );
                // A writer alone with the file (no other writer seen lately, as for
                // the locked append in `cow`) may take the whole file for a write
                // covering it (`FileLock::write_within`); writers of a shared file
                // keep to their segments. (Not while interleaving hooks are
                // installed: their scheduler runs one writer at a time and expects
                // writers of other ranges never to wait for it.)
                if inode.contended.load(Ordering::Relaxed) == 0 && !crate::interleave::hooked() {
                    inode.data.write_within(start, end, inode.index.size())
                } else {
                    inode.data.write(start, end)
                }
            }
            None => inode.data.write(0, u64::MAX),
        };
        // Sub-page overwrites by the small-write mode; None: page CoW.
        if let Some(off) = offset {
            if let Some(n) = self.small_write(inode, off, data)? {
                return Ok((off, n));
            }
        }
        self.cow_write(inode, offset, data)
    }

    /// A sub-page overwrite by the mount's small-write mode (LAWN or fine-log).
    /// Called with the page's data lock held (write); `Ok(None)`: take page CoW.
    fn small_write(&self, inode: &Arc<Inode>, off: u64, data: &[u8]) -> Result<Option<usize>> {
        if matches!(self.small, SmallWrite::Cow) || data.is_empty() || data.len() as u64 >= BLOCK {
            return Ok(None);
        }
        let Some(end) = off.checked_add(data.len() as u64) else {
            return Ok(None);
        };
        let pg = page_of(off);
        if page_of(end - 1) != pg {
            return Ok(None);
        }
        let now = Timespec::now();
        // From the lock-free page index: the caller's exclusive range lock keeps this
        // page's mapping stable (and truncation out); a size another writer is growing
        // right now may read small, which only means page CoW.
        let block = {
            if inode.index.dead() || inode.kind != FileKind::Regular || end > inode.index.size() {
                return Ok(None);
            }
            match inode.index.get(pg) {
                0 => return Ok(None),
                b => b,
            }
        };
        {
            // The mapping and size stay as they are; mtime/ctime change in DRAM and
            // reach the log lazily (next entry of the inode, or unmount) —
            // docs/FORMAT.md §2.9. (A write that falls back to page CoW logs its own.)
            let mut st = inode.state.lock();
            st.mtime = now;
            st.ctime = now;
            inode.index.set_atime_hint(ATIME_STALE);
        }
        let vol = &*self.store.vol;
        let staged = match &self.small {
            SmallWrite::Lawn(l) => l.write(vol, inode, pg, block, off, data).map(Some),
            SmallWrite::Finelog(f) => {
                f.write(vol, &self.store.geo, inode.ino, pg, block, off, data);
                Some(None)
            }
            SmallWrite::Cow => None,
        };
        let Some(staged) = staged else {
            self.counters.fallbacks.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        };
        self.times_changed(inode);
        if let (Some(staged), SmallWrite::Lawn(l)) = (staged, &self.small) {
            l.finish(vol, staged);
        }
        self.inval.page_written(inode.ino, pg, block);
        Ok(Some(data.len()))
    }

    /// Records that `inode`'s times changed in DRAM only.
    fn times_changed(&self, inode: &Inode) {
        if inode.index.mark_times_dirty() {
            self.times.dirty.lock().insert(inode.ino);
        }
    }

    /// Updates the access time of `inode` after a read (or of a directory after a
    /// readdir, `st` its locked state) as the mount's [`AtimeMode`] says, in DRAM;
    /// it reaches the log with the inode's next attribute entry or at unmount.
    /// `relatime` takes no lock while the access time is newer than mtime and ctime
    /// and under a day old (the index's hint).
    pub fn touch_atime(&self, inode: &Inode, st: Option<&mut InodeState>) {
        const DAY: i64 = 24 * 3600;
        let mode = self.atime_mode();
        if mode == AtimeMode::Noatime || inode.index.inode_flags() & inode_flags::NOATIME != 0 {
            return;
        }
        let now = Timespec::now();
        if mode == AtimeMode::Relatime {
            let h = inode.index.atime_hint();
            if h != ATIME_STALE && now.sec.saturating_sub(h) < DAY {
                return;
            }
        }
        let mut guard;
        let st = match st {
            Some(s) => s,
            None => {
                guard = inode.state.lock();
                &mut *guard
            }
        };
        if st.dead {
            return;
        }
        if Self::due(mode, st, now) {
            st.atime = now;
            self.times_changed(inode);
        }
        let fresh = st.atime > st.mtime && st.atime > st.ctime;
        inode
            .index
            .set_atime_hint(if fresh { st.atime.sec } else { ATIME_STALE });
    }

    /// Whether a read at `now` updates the atime of a file in state `st` under
    /// `mode`.
    fn due(mode: AtimeMode, st: &InodeState, now: Timespec) -> bool {
        const DAY: i64 = 24 * 3600;
        match mode {
            AtimeMode::Noatime => false,
            AtimeMode::Strictatime => st.atime != now,
            AtimeMode::Relatime => {
                st.atime <= st.mtime
                    || st.atime <= st.ctime
                    || now.sec.saturating_sub(st.atime.sec) >= DAY
            }
        }
    }

    /// Whether a read of `inode` now would update its atime.
    pub fn atime_due(&self, inode: &Inode) -> bool {
        if inode.index.inode_flags() & inode_flags::NOATIME != 0 {
            return false;
        }
        let mode = self.atime_mode();
        match mode {
            AtimeMode::Noatime => false,
            AtimeMode::Strictatime => true,
            AtimeMode::Relatime => {
                let now = Timespec::now();
                // The same lock-free test as touch_atime's.
                let h = inode.index.atime_hint();
                if h != ATIME_STALE && now.sec.saturating_sub(h) < 24 * 3600 {
                    return false;
                }
                let st = inode.state.lock();
                !st.dead && Self::due(mode, &st, now)
            }
        }
    }

    /// When reads update atime now.
    pub fn atime_mode(&self) -> AtimeMode {
        AtimeMode::from_u8(self.atime.load(Ordering::Relaxed))
    }

    /// Changes when reads update atime (a remount).
    pub fn set_atime_mode(&self, mode: AtimeMode) {
        self.atime.store(mode.to_u8(), Ordering::Relaxed);
    }

    /// Logs the attributes of inodes whose times changed only in DRAM (unmount).
    pub fn persist_lazy_times(&self, table: &InodeTable) {
        let inos: Vec<Ino> = {
            let mut d = self.times.dirty.lock();
            d.drain().collect()
        };
        for ino in inos {
            let Ok(inode) = table.get(ino) else { continue };
            let mut st = inode.state.lock();
            inode.index.clear_times_dirty();
            if st.dead {
                continue;
            }
            let e = st.setattr_entry(0);
            // A failure (no log space) leaves the older mtime: times are coarse.
            let _ = self.commit(&mut [(&mut *st, vec![e])], &[]);
        }
    }

    /// Appends and commits entries (the store's log commit), freeing what they
    /// unmapped through the invalidation point.
    pub fn commit(
        &self,
        parts: &mut [(&mut crate::inode::InodeState, Vec<crate::format::Entry>)],
        extra: &[(PmOff, u64)],
    ) -> Result<()> {
        self.store.commit(parts, extra)
    }

    /// Records how many data writes of one file are between reserving their log slots
    /// and completing (the stats' `max_concurrent_writers`). Reads first, so the
    /// shared line is written only when the maximum grows.
    fn note_writers(&self, n: u64) {
        if n > self.writers_max.load(Ordering::Relaxed) {
            self.writers_max.fetch_max(n, Ordering::Relaxed);
        }
    }

    /// The most concurrent writers of one file seen.
    pub fn writers_max(&self) -> u64 {
        self.writers_max.load(Ordering::Relaxed)
    }

    /// Writes every LAWN zone slice back to its file page (contents do not change);
    /// returns the runs written back (0 in other modes).
    pub fn lawn_writeback(&self) -> u64 {
        match &self.small {
            SmallWrite::Lawn(l) => l.writeback_all(&self.store.vol),
            _ => 0,
        }
    }

    /// One pass of LAWN zone growth and shrinking (see `Fs::lawn_resize`); the
    /// chunks the zone holds after (0 in other modes).
    pub fn lawn_resize(&self) -> u64 {
        match &self.small {
            SmallWrite::Lawn(l) => {
                l.core.resize(&self.store);
                l.core.chunk_blocks() / (self.store.geo.zone_chunk_blocks.max(1) as u64)
            }
            _ => 0,
        }
    }

    /// Stops the background work: LAWN's write-back, the read cache's copier
    /// (unmount).
    pub fn stop(&mut self) {
        if let SmallWrite::Lawn(l) = &self.small {
            l.stop_writeback();
        }
        if let Some(c) = &mut self.rcache {
            c.stop();
        }
    }

    /// Figures of the read cache (`None` without one).
    pub fn read_cache_stats(&self) -> Option<rcache::ReadCacheStats> {
        self.rcache.as_ref().map(|c| c.stats())
    }

    /// Figures of the small-write paths.
    pub fn stats(&self) -> SmallWriteStats {
        let mut s = SmallWriteStats {
            fallbacks: self.counters.fallbacks.load(Ordering::Relaxed),
            ..Default::default()
        };
        match &self.small {
            SmallWrite::Lawn(l) => l.stats(&mut s),
            SmallWrite::Finelog(f) => s.finelog_writes = f.writes(),
            SmallWrite::Cow => {}
        }
        s
    }
}
