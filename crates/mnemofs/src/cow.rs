//! File data by page copy-on-write (NOVA): every write goes to fresh pages, partial
//! head/tail pages are merged with the old contents, and one log entry per run of
//! fresh pages maps them; the old pages are freed after the entry commits.
//!
//! Persistence order per write (DESIGN.md §3): new data pages (non-temporal stores)
//! → log entries → fence → tail → fence → DRAM index → old pages freed.

use crate::error::{FsError, Result};
use crate::format::{Entry, BLOCK};
use crate::fs::{Fs, MAX_FILE_SIZE};
use crate::inode::InodeState;
use crate::types::*;
use std::sync::atomic::Ordering;

/// fallocate flags (linux/falloc.h).
const FALLOC_FL_KEEP_SIZE: i32 = 0x01;
const FALLOC_FL_PUNCH_HOLE: i32 = 0x02;

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

impl Fs {
    pub fn read(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let inode = self.get(ino)?;
        let end_req = offset.saturating_add(buf.len() as u64);
        let _r = inode.data.read(offset, end_req);
        let (n, blocks) = {
            let st = inode.state.lock();
            regular(&st, FsError::Invalid("read of a special file"))?;
            if offset >= st.size || buf.is_empty() {
                return Ok(0);
            }
            let n = (buf.len() as u64).min(st.size - offset);
            let first = offset / BLOCK;
            let last = (offset + n - 1) / BLOCK;
            let blocks: Vec<(u64, u64)> = st
                .pages
                .range(first..=last)
                .map(|(&pg, p)| (pg, p.block))
                .collect();
            (n, blocks)
        };
        // Copy outside the inode's state lock; the shared data lock keeps the pages
        // from being freed meanwhile.
        let out = &mut buf[..n as usize];
        out.fill(0);
        for (pg, block) in blocks {
            let pstart = pg * BLOCK;
            let lo = offset.max(pstart);
            let hi = (offset + n).min(pstart + BLOCK);
            let part = &mut out[(lo - offset) as usize..(hi - offset) as usize];
            self.pm.read(block * BLOCK + (lo - pstart), part);
            // LAWN: newer slices in the zone.
            self.lawn.core.overlay(&self.pm, ino, pg, block, lo, part);
        }
        Ok(n as usize)
    }

    pub fn write(&self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize> {
        self.write_at(ino, Some(offset), data).map(|(_, n)| n)
    }

    /// O_APPEND: writes at the end of file atomically; returns the offset written at.
    pub fn append(&self, ino: Ino, data: &[u8]) -> Result<u64> {
        self.write_at(ino, None, data).map(|(off, _)| off)
    }

    fn write_at(&self, ino: Ino, offset: Option<u64>, data: &[u8]) -> Result<(u64, usize)> {
        let now = self.writers_now.fetch_add(1, Ordering::AcqRel) + 1;
        self.writers_max.fetch_max(now, Ordering::AcqRel);
        let r = self.write_locked(ino, offset, data);
        self.writers_now.fetch_sub(1, Ordering::AcqRel);
        r
    }

    fn write_locked(&self, ino: Ino, offset: Option<u64>, data: &[u8]) -> Result<(u64, usize)> {
        let inode = self.get(ino)?;
        // Appends lock to the end of the file (their offset is the size, read under
        // the lock). A bounded write locks its own pages even when it extends the
        // file: its size_after is computed under the state lock at commit, so
        // concurrent extending writes still leave the larger size.
        // Whole pages: a sub-page write may move other bytes of its page (LAWN
        // write-back, page CoW), so no reader of the same page may run meanwhile.
        let _w = match offset {
            Some(off) => inode.data.write(
                off / BLOCK * BLOCK,
                off.saturating_add(data.len() as u64)
                    .saturating_add(BLOCK - 1)
                    / BLOCK
                    * BLOCK,
            ),
            None => inode.data.write(0, u64::MAX),
        };
        // Sub-page overwrites by LAWN or fine-log (lawn/, finelog.rs); None: CoW.
        if let Some(off) = offset {
            if let Some(n) = self.small_write(&inode, off, data)? {
                return Ok((off, n));
            }
        }
        let (off, old) = {
            let st = inode.state.lock();
            regular(&st, FsError::Invalid("write to a special file"))?;
            let off = offset.unwrap_or(st.size);
            if data.is_empty() {
                return Ok((off, 0));
            }
            let end = off.checked_add(data.len() as u64).ok_or(FsError::TooBig)?;
            if end > MAX_FILE_SIZE {
                return Err(FsError::TooBig);
            }
            // Old blocks of the partial head and tail pages, to merge.
            let first = off / BLOCK;
            let last = (end - 1) / BLOCK;
            let head = st.pages.get(&first).map(|p| p.block);
            let tail = st.pages.get(&last).map(|p| p.block);
            (off, (head, tail))
        };
        let end = off + data.len() as u64;
        let first = off / BLOCK;
        let last = (end - 1) / BLOCK;
        let npages = last - first + 1;
        let runs = self.space.alloc(npages, false)?;
        let mut page = vec![0u8; BLOCK as usize];
        let mut pg = first;
        for &(start, len) in &runs {
            for b in start..start + len {
                let pstart = pg * BLOCK;
                let lo = off.max(pstart) - pstart;
                let hi = end.min(pstart + BLOCK) - pstart;
                let src = &data[(pstart + lo - off) as usize..(pstart + hi - off) as usize];
                if lo == 0 && hi == BLOCK {
                    self.store_data(b * BLOCK, src);
                } else {
                    let old_block = if pg == first { old.0 } else { old.1 };
                    match old_block {
                        Some(ob) => self.read_page_merged(ino, pg, ob, &mut page),
                        None => page.fill(0),
                    }
                    page[lo as usize..hi as usize].copy_from_slice(src);
                    self.store_data(b * BLOCK, &page);
                }
                pg += 1;
            }
        }
        let now = Timespec::now();
        let mut st = inode.state.lock();
        if st.dead {
            self.space.free_runs(&runs);
            return Err(FsError::NotFound);
        }
        let size_after = st.size.max(end);
        let mut entries = Vec::with_capacity(runs.len());
        let mut pg = first;
        for &(start, len) in &runs {
            entries.push(Entry::Write {
                pgoff: pg,
                block: start,
                npages: len as u32,
                size_after,
                mtime: now,
            });
            pg += len;
        }
        if let Err(e) = self.commit(&mut [(&mut *st, entries)], &[]) {
            self.space.free_runs(&runs);
            return Err(e);
        }
        Ok((off, data.len()))
    }

    /// Stores a fresh data page with non-temporal stores: durable at the commit's
    /// first fence, before the log entry that maps it can be.
    fn store_data(&self, off: u64, bytes: &[u8]) {
        if crate::bugs::on(crate::bugs::Bug::DataNotPersisted) {
            self.pm.write(off, bytes);
        } else {
            self.pm.write_nt(off, bytes);
        }
    }

    /// Copies page `pg` into a fresh block with `patch` applied; returns the block.
    fn cow_page(&self, st: &InodeState, pg: u64, patch: impl FnOnce(&mut [u8])) -> Result<u64> {
        let b = self.space.alloc_one(false)?;
        let mut page = vec![0u8; BLOCK as usize];
        if let Some(p) = st.pages.get(&pg) {
            self.read_page_merged(st.ino, pg, p.block, &mut page);
        }
        patch(&mut page);
        self.pm.write_nt(b * BLOCK, &page);
        Ok(b)
    }

    /// Truncation to `size` inside a mapped page: a Write entry for a copy of that page
    /// with the bytes at and past `size` zeroed.
    pub(crate) fn cow_zero_tail(&self, st: &InodeState, size: u64) -> Result<Option<(Entry, u64)>> {
        let pg = size / BLOCK;
        let within = (size % BLOCK) as usize;
        if within == 0
            || !st.pages.contains_key(&pg)
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
    /// `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE` (deallocate).
    pub fn fallocate(&self, ino: Ino, offset: u64, len: u64, mode: i32) -> Result<()> {
        if len == 0 {
            return Err(FsError::Invalid("fallocate of zero bytes"));
        }
        if mode & !(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE) != 0 {
            return Err(FsError::Unsupported("fallocate mode"));
        }
        let punch = mode & FALLOC_FL_PUNCH_HOLE != 0;
        if punch && mode & FALLOC_FL_KEEP_SIZE == 0 {
            return Err(FsError::Invalid("PUNCH_HOLE needs KEEP_SIZE"));
        }
        let end = offset.checked_add(len).ok_or(FsError::TooBig)?;
        if end > MAX_FILE_SIZE {
            return Err(FsError::TooBig);
        }
        let inode = self.get(ino)?;
        let _w = inode.data.write(0, u64::MAX);
        let mut st = inode.state.lock();
        regular(&st, FsError::Unsupported("fallocate of a special file"))?;
        let now = Timespec::now();
        let mut entries = Vec::new();
        let mut fresh: Vec<u64> = Vec::new();
        let result = if punch {
            self.plan_punch(&st, offset, end, &mut entries, &mut fresh)
        } else {
            self.plan_alloc(&st, offset, end, &mut entries, &mut fresh)
        };
        if let Err(e) = result {
            for b in fresh {
                self.space.free_run(b, 1);
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
                self.space.free_run(b, 1);
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
        let first = offset / BLOCK;
        let last = (end - 1) / BLOCK;
        let holes: Vec<u64> = (first..=last)
            .filter(|pg| !st.pages.contains_key(pg))
            .collect();
        if holes.is_empty() {
            return Ok(());
        }
        let runs = self.space.alloc(holes.len() as u64, false)?;
        let blocks: Vec<u64> = runs.iter().flat_map(|&(s, l)| s..s + l).collect();
        fresh.extend_from_slice(&blocks);
        let zero = vec![0u8; BLOCK as usize];
        for &b in &blocks {
            self.pm.write_nt(b * BLOCK, &zero);
        }
        push_runs(st, &holes, Some(&blocks), entries);
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
        let first = offset / BLOCK;
        let last = (end - 1) / BLOCK;
        let mut whole = Vec::new();
        for pg in first..=last {
            if !st.pages.contains_key(&pg) {
                continue;
            }
            let pstart = pg * BLOCK;
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
