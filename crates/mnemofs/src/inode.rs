//! DRAM inode state, rebuilt from the inode's log.
//!
//! [`InodeState::apply`] is the single place where a log entry changes DRAM state: the
//! running file system calls it after committing an entry, and recovery calls it while
//! replaying the log, so both always agree. It also does the liveness accounting that
//! fast GC relies on:
//! - a `Write` entry dies when every page it mapped was overwritten or truncated away;
//! - a `SetAttr` dies when a later `SetAttr` comes, unless it shrank the file (then it
//!   is *pinned*: dropping it could resurrect truncated pages);
//! - a `Link` dies when a later `Link` comes;
//! - a dentry `add` dies when its name is removed; dentry `remove` entries and hole
//!   punches are pinned.
//!
//! Pinned entries only go away in thorough GC, which rewrites the state from scratch.

use crate::format::{Entry, BLOCK, DENTRY_ADD, SETATTR_SHRINK, XATTR_MORE, XATTR_SET};

/// The log offsets of the entries that set one xattr's value (a SET and its
/// continuations).
pub type XattrEntries = smallvec::SmallVec<[u64; 1]>;
use crate::index::PageIndex;
use crate::lock::FileLock;
use crate::log::LogState;
use crate::space::Runs;
use crate::types::{Attr, FileKind, Ino, Timespec};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU32, AtomicU64};

use crate::pagemap::PageMap;
pub(crate) use crate::pagemap::PageRef;

/// One name in a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DirSlot {
    pub ino: Ino,
    pub cookie: u64,
    pub kind: FileKind,
    pub entry: u64,
}

/// First cookie given to a name; 1 and 2 are "." and "..".
pub(crate) const FIRST_COOKIE: u64 = crate::format::DENTRY_FIRST_COOKIE;

#[derive(Debug)]
pub(crate) struct DirState {
    pub names: HashMap<Vec<u8>, DirSlot>,
    pub order: BTreeMap<u64, Vec<u8>>,
    pub next_cookie: u64,
    pub subdirs: u32,
}

impl Default for DirState {
    fn default() -> Self {
        DirState {
            names: HashMap::new(),
            order: BTreeMap::new(),
            next_cookie: FIRST_COOKIE,
            subdirs: 0,
        }
    }
}

#[derive(Debug)]
pub(crate) struct InodeState {
    pub ino: Ino,
    pub kind: FileKind,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub size: u64,
    pub nlink: u32,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
    pub log: LogState,
    pub pages: PageMap,
    pub dir: Option<DirState>,
    /// Extended attributes: name → (value, offsets of the entries that set it: the
    /// SET and its continuations, docs/FORMAT.md §2.5).
    pub xattrs: BTreeMap<Vec<u8>, (Vec<u8>, XattrEntries)>,
    /// The slot's generation (docs/FORMAT.md §2.2): export handles carry it.
    pub generation: u32,
    /// The slot's birth time (§2.2; none on images before version 10).
    pub btime: Option<Timespec>,
    /// Parent directory (directories only).
    pub parent: Ino,
    /// Freed: the slot may be reused; every handle to this state is stale.
    pub dead: bool,
    /// An unnamed file from `tmpfile` that may get its first name with `link`
    /// (Linux's `I_LINKABLE`; DRAM only: after a crash the file is gone).
    pub linkable: bool,
    last_setattr: Option<u64>,
    last_link: Option<u64>,
    /// Newest mtime of a data write since the last setattr (see `apply`).
    write_mtime: Timespec,
    /// Lock-free mirror of `pages` and `size` for the read path (`index` module);
    /// kept in step by every change below.
    pub index: std::sync::Arc<PageIndex>,
    /// A block this file's last one-page overwrite superseded, kept (DRAM only) for
    /// its next one instead of going back to the allocator: free space, no page of
    /// any file (the data plane's `spares`; docs/FORMAT.md §3).
    pub spare: Option<u64>,
    /// While a concurrent append is applied: the entries it supersedes, collected
    /// instead of dropped (`LogState::deferred`).
    pub defer: Option<crate::log::Offsets>,
}

impl InodeState {
    pub fn new(ino: Ino, kind: FileKind) -> InodeState {
        InodeState {
            ino,
            kind,
            spare: None,
            mode: kind.mode_bits(),
            uid: 0,
            gid: 0,
            rdev: 0,
            size: 0,
            nlink: 0,
            atime: Timespec::default(),
            mtime: Timespec::default(),
            ctime: Timespec::default(),
            log: LogState::default(),
            pages: PageMap::default(),
            dir: (kind == FileKind::Directory).then(DirState::default),
            xattrs: BTreeMap::new(),
            generation: 0,
            btime: None,
            parent: 0,
            dead: false,
            linkable: false,
            last_setattr: None,
            last_link: None,
            write_mtime: Timespec::default(),
            index: Default::default(),
            defer: None,
        }
    }

    pub fn attr(&self) -> Attr {
        Attr {
            ino: self.ino,
            kind: self.kind,
            mode: self.mode,
            nlink: self.nlink,
            uid: self.uid,
            gid: self.gid,
            size: self.size,
            blocks: self.pages.len() as u64,
            rdev: self.rdev,
            atime: self.atime,
            mtime: self.mtime,
            ctime: self.ctime,
            generation: self.generation,
            btime: self.btime,
        }
    }

    /// Accounts a new entry (refs 0: pinned, never dies; see the module doc).
    fn add_live(&mut self, off: u64, units: u64, refs: u32) {
        self.log.add_live(off, units, refs);
    }

    /// Drops one reference of the entry at `off`; the entry dies at zero. While a
    /// concurrent append is applied, the reference is collected instead, and dropped
    /// when that append is finished.
    fn unref(&mut self, off: u64) {
        match self.defer.as_mut() {
            Some(d) => d.push(off),
            None => self.log.unref(off),
        }
    }

    /// Unmaps pages `from..` (truncation); returns their blocks.
    fn drop_pages_from(&mut self, from: u64, freed: &mut Runs) {
        for k in self.pages.pages_in(from, u64::MAX) {
            if let Some(pr) = self.pages.remove(k) {
                self.index.set(k, 0);
                push_run(freed, pr.block);
                self.unref(pr.entry);
            }
        }
    }

    /// Applies a committed entry found at PM offset `off`. Returns the data blocks it
    /// made unreachable (to be freed by the running file system; ignored in replay).
    #[deny(clippy::arithmetic_side_effects)] // Replay applies values read from PM.
    pub fn apply(&mut self, off: u64, e: &Entry) -> Runs {
        // Every entry may change mtime, ctime or atime: the next read looks again.
        self.index.set_atime_hint(crate::index::ATIME_STALE);
        let mut freed = Runs::new();
        let units = e.units();
        match e {
            Entry::Write {
                pgoff,
                block,
                npages,
                size_after,
                mtime,
            } => {
                if *block == 0 {
                    // Hole punch: pinned (it hides older mappings).
                    self.add_live(off, units, 0);
                } else {
                    self.add_live(off, units, *npages);
                }
                // Recovery checked `pgoff + npages` against the largest file and a
                // data write's blocks against the data area, so neither sum wraps.
                let end = pgoff.saturating_add(*npages as u64);
                if *block == 0 {
                    // A hole punch visits only the pages it unmaps (it may name the
                    // whole 16 TiB range).
                    for p in self.pages.pages_in(*pgoff, end) {
                        self.index.set(p, 0);
                        if let Some(o) = self.pages.remove(p) {
                            push_run(&mut freed, o.block);
                            self.unref(o.entry);
                        }
                    }
                } else {
                    for (pg, b) in (*pgoff..end).zip(*block..) {
                        self.index.set(pg, b);
                        let new = PageRef {
                            block: b,
                            entry: off,
                        };
                        if let Some(o) = self.pages.insert(pg, new) {
                            push_run(&mut freed, o.block);
                            self.unref(o.entry);
                        }
                    }
                }
                // Concurrent writers of disjoint ranges apply in completion order at
                // run time but replay in log order: both fields take the maximum, which
                // does not depend on the order (a truncate, which can lower the size,
                // and a setattr, which can set any time, hold the whole file).
                self.size = self.size.max(*size_after);
                if *mtime >= self.write_mtime {
                    self.mtime = *mtime;
                    self.ctime = self.ctime.max(*mtime);
                    self.write_mtime = *mtime;
                }
            }
            Entry::SetAttr {
                mode,
                uid,
                gid,
                rdev,
                size,
                atime,
                mtime,
                ctime,
                flags,
            } => {
                if let Some(prev) = self.last_setattr.take() {
                    self.unref(prev);
                }
                if flags & SETATTR_SHRINK != 0 {
                    self.add_live(off, units, 0);
                } else {
                    self.add_live(off, units, 1);
                    self.last_setattr = Some(off);
                }
                if *size < self.size {
                    self.drop_pages_from(size.div_ceil(BLOCK), &mut freed);
                }
                self.mode = (self.kind.mode_bits()) | (mode & 0o7777);
                self.uid = *uid;
                self.gid = *gid;
                self.rdev = *rdev;
                self.size = *size;
                self.atime = *atime;
                self.mtime = *mtime;
                self.ctime = *ctime;
                self.write_mtime = Timespec::default();
            }
            Entry::Xattr {
                op,
                name,
                value,
                ctime,
            } if *op == XATTR_MORE => {
                self.ctime = *ctime;
                self.add_live(off, units, 1);
                // More of the value the SET just before it began (same commit). A
                // continuation whose SET fast GC dropped is dead: a later SET or
                // removal of the name (later in the log) replaces what it makes.
                match self.xattrs.get_mut(name) {
                    Some((v, offs)) => {
                        v.extend_from_slice(value);
                        offs.push(off);
                    }
                    None => {
                        self.xattrs.insert(
                            name.clone(),
                            (value.clone(), XattrEntries::from_elem(off, 1)),
                        );
                    }
                }
            }
            Entry::Xattr {
                op,
                name,
                value,
                ctime,
            } => {
                self.ctime = *ctime;
                let old = self.xattrs.remove(name);
                if *op == XATTR_SET {
                    self.add_live(off, units, 1);
                    self.xattrs.insert(
                        name.clone(),
                        (value.clone(), XattrEntries::from_elem(off, 1)),
                    );
                } else {
                    // Pinned, as a dentry removal: losing it to fast GC while the
                    // set it undoes survives would bring the attribute back.
                    self.add_live(off, units, 0);
                }
                for o in old.map(|(_, offs)| offs).unwrap_or_default() {
                    self.unref(o);
                }
                if name.as_slice() == crate::format::XATTR_FLAGS {
                    let v = match value.get(..4) {
                        Some(b) if *op == XATTR_SET => {
                            u32::from_le_bytes([b[0], b[1], b[2], b[3]])
                                & crate::types::inode_flags::SUPPORTED
                        }
                        _ => 0,
                    };
                    self.index.set_inode_flags(v);
                }
            }
            Entry::Link { nlink, ctime } => {
                if let Some(prev) = self.last_link.take() {
                    self.unref(prev);
                }
                self.add_live(off, units, 1);
                self.last_link = Some(off);
                self.nlink = *nlink;
                self.ctime = *ctime;
            }
            Entry::Dentry {
                op,
                ino,
                cookie,
                kind,
                time,
                name,
            } => {
                self.mtime = *time;
                self.ctime = *time;
                let mut dead_entry = None;
                let mut pinned = true;
                if let Some(dir) = self.dir.as_mut() {
                    // Cookies are never handed out twice while their entries are in
                    // the log (removes included).
                    dir.next_cookie = dir.next_cookie.max(cookie.saturating_add(1));
                    if let Some(old) = dir.names.remove(name) {
                        dir.order.remove(&old.cookie);
                        if old.kind == FileKind::Directory {
                            dir.subdirs = dir.subdirs.saturating_sub(1);
                        }
                        dead_entry = Some(old.entry);
                    }
                    if *op == DENTRY_ADD {
                        dir.names.insert(
                            name.clone(),
                            DirSlot {
                                ino: *ino,
                                cookie: *cookie,
                                kind: *kind,
                                entry: off,
                            },
                        );
                        dir.order.insert(*cookie, name.clone());
                        dir.next_cookie = dir.next_cookie.max(cookie.saturating_add(1));
                        if *kind == FileKind::Directory {
                            dir.subdirs = dir.subdirs.saturating_add(1);
                        }
                        pinned = false;
                    }
                }
                self.add_live(off, units, if pinned { 0 } else { 1 });
                if let Some(d) = dead_entry {
                    self.unref(d);
                }
            }
        }
        self.index.set_size(self.size);
        freed
    }

    /// Makes this fresh state `old`'s successor after thorough GC wrote `entries`
    /// (`old.snapshot_entries()`) at `offsets`. The page map moves over, each page
    /// now owned by the snapshot entry that maps it (the snapshot's writes come first,
    /// in page order, so a walk of the map in order meets them in step); every other
    /// entry is applied. The same state as applying all of them, without re-inserting
    /// every page (the lock-free index already holds these blocks).
    pub fn adopt_compacted(&mut self, old: &mut InodeState, entries: &[Entry], offsets: &[u64]) {
        let mut pages = std::mem::take(&mut old.pages);
        let mut refs = pages.values_mut();
        for (e, &off) in entries.iter().zip(offsets) {
            match e {
                Entry::Write { block, npages, .. } if *block != 0 => {
                    self.add_live(off, e.units(), *npages);
                    for pr in refs.by_ref().take(*npages as usize) {
                        pr.entry = off;
                    }
                }
                // The snapshot's attributes come after its writes and set the size
                // and times the writes would have.
                _ => {
                    self.apply(off, e);
                }
            }
        }
        drop(refs);
        self.pages = pages;
    }

    /// The entries that recreate this inode's current state from nothing (thorough
    /// GC). Order: data, names, link count, then the attribute snapshot.
    pub fn snapshot_entries(&self) -> Vec<Entry> {
        let mut v = Vec::new();
        let mut it = self.pages.iter().peekable();
        while let Some((pg, pr)) = it.next() {
            let mut n = 1u32;
            while let Some((npg, npr)) = it.peek() {
                if *npg == pg + n as u64 && npr.block == pr.block + n as u64 {
                    n += 1;
                    it.next();
                } else {
                    break;
                }
            }
            v.push(Entry::Write {
                pgoff: pg,
                block: pr.block,
                npages: n,
                size_after: self.size,
                mtime: self.mtime,
            });
        }
        if let Some(dir) = &self.dir {
            for name in dir.order.values() {
                if let Some(s) = dir.names.get(name) {
                    v.push(Entry::Dentry {
                        op: DENTRY_ADD,
                        ino: s.ino,
                        cookie: s.cookie,
                        kind: s.kind,
                        time: self.mtime,
                        name: name.clone(),
                    });
                }
            }
        }
        for (name, (value, _)) in &self.xattrs {
            v.extend(crate::format::xattr_set_entries(name, value, self.ctime));
        }
        v.push(Entry::Link {
            nlink: self.nlink,
            ctime: self.ctime,
        });
        v.push(self.setattr_entry(0));
        v
    }

    /// A SetAttr entry carrying the current attributes.
    pub fn setattr_entry(&self, flags: u32) -> Entry {
        Entry::SetAttr {
            mode: self.mode,
            uid: self.uid,
            gid: self.gid,
            rdev: self.rdev,
            size: self.size,
            atime: self.atime,
            mtime: self.mtime,
            ctime: self.ctime,
            flags,
        }
    }

    /// Every data block mapped by this inode.
    pub fn data_blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.pages.blocks()
    }
}

/// Appends `block` to `runs`, extending the last run when contiguous.
pub(crate) fn push_run(runs: &mut Runs, block: u64) {
    if let Some(last) = runs.last_mut() {
        if last.0 + last.1 == block {
            last.1 += 1;
            return;
        }
    }
    runs.push((block, 1));
}

/// An inode in the DRAM table.
pub(crate) struct Inode {
    pub ino: Ino,
    /// Never changes for a given `Inode` (a reused number gets a new one).
    pub kind: FileKind,
    /// The state's lock-free page index (same `Arc`), for reads.
    pub index: std::sync::Arc<PageIndex>,
    pub state: std::sync::Arc<Mutex<InodeState>>,
    pub data: FileLock,
    pub opens: AtomicU32,
    /// References a frontend holds on the inode number (FUSE lookup counts): a freed
    /// inode's number is not reused until they are all forgotten, so the kernel never
    /// mistakes a new inode for an old one it still caches.
    pub lookups: AtomicU64,
    /// The small-write mode has registered this inode (LAWN: with its write-back
    /// thread, once per `Inode`); set by the data plane, never reset.
    pub smallwrite_registered: std::sync::atomic::AtomicBool,
    /// The data plane's list of files that may hold a spare block has this one (set
    /// once, with the first spare; never reset).
    pub spare_registered: std::sync::atomic::AtomicBool,
    /// Writes of this file in the `interval`/`segment` modes that must still take
    /// the concurrent append (another writer of the file was seen recently): set
    /// when a writer finds the state lock taken, counted down by uncontended
    /// writes. While 0, a writer alone with the file takes the locked append
    /// (`DataPlane::write_concurrent`).
    pub contended: AtomicU32,
}

impl Inode {
    pub fn new(st: InodeState, lock: crate::types::LockMode, segment_size: u64) -> Inode {
        Inode {
            ino: st.ino,
            kind: st.kind,
            index: st.index.clone(),
            state: std::sync::Arc::new(Mutex::new(st)),
            data: FileLock::new(lock, segment_size),
            opens: AtomicU32::new(0),
            lookups: AtomicU64::new(0),
            smallwrite_registered: std::sync::atomic::AtomicBool::new(false),
            spare_registered: std::sync::atomic::AtomicBool::new(false),
            contended: AtomicU32::new(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{DENTRY_REMOVE, UNIT};

    fn w(pgoff: u64, block: u64, npages: u32) -> Entry {
        Entry::Write {
            pgoff,
            block,
            npages,
            size_after: (pgoff + npages as u64) * BLOCK,
            mtime: Timespec::default(),
        }
    }

    /// Entry offsets in two different log pages (blocks 100 and 101).
    const P0: u64 = 100 * BLOCK;
    const P1: u64 = 101 * BLOCK;

    #[test]
    fn overwritten_writes_die_and_free_their_blocks() {
        let mut s = InodeState::new(5, FileKind::Regular);
        assert!(s.apply(P0, &w(0, 1000, 2)).is_empty());
        assert_eq!(s.log.page_live[&100].count, 1);
        // Overwrite page 0 only: the first entry still maps page 1.
        assert_eq!(s.apply(P0 + UNIT, &w(0, 2000, 1)).to_vec(), vec![(1000, 1)]);
        assert_eq!(s.log.page_live[&100].count, 2);
        // Overwrite page 1: the first entry dies.
        assert_eq!(s.apply(P1, &w(1, 3000, 1)).to_vec(), vec![(1001, 1)]);
        assert_eq!(s.log.page_live[&100].count, 1);
        assert_eq!(s.pages.get(0).map(|p| p.block), Some(2000));
        assert_eq!(s.pages.get(1).map(|p| p.block), Some(3000));
    }

    #[test]
    fn shrinking_setattr_is_pinned_and_frees_pages() {
        let mut s = InodeState::new(5, FileKind::Regular);
        s.apply(P0, &w(0, 1000, 4));
        let mut shrink = s.setattr_entry(SETATTR_SHRINK);
        if let Entry::SetAttr { size, .. } = &mut shrink {
            *size = 5000;
        }
        let freed = s.apply(P1, &shrink);
        assert_eq!(freed.to_vec(), vec![(1002, 2)]);
        assert_eq!(s.pages.len(), 2);
        // A later setattr does not kill the pinned shrink.
        let later = s.setattr_entry(0);
        s.apply(P1 + 2 * UNIT, &later);
        assert_eq!(s.log.page_live[&101].count, 2);
    }

    #[test]
    fn dentry_add_dies_on_remove_and_remove_is_pinned() {
        let mut d = InodeState::new(1, FileKind::Directory);
        let add = Entry::Dentry {
            op: DENTRY_ADD,
            ino: 7,
            cookie: 3,
            kind: FileKind::Directory,
            time: Timespec::default(),
            name: b"x".to_vec(),
        };
        d.apply(P0, &add);
        assert_eq!(d.dir.as_ref().unwrap().subdirs, 1);
        let rm = Entry::Dentry {
            op: DENTRY_REMOVE,
            ino: 7,
            cookie: 3,
            kind: FileKind::Directory,
            time: Timespec::default(),
            name: b"x".to_vec(),
        };
        d.apply(P1, &rm);
        assert_eq!(d.log.page_live.get(&100).map_or(0, |p| p.count), 0);
        assert_eq!(d.log.page_live[&101].count, 1);
        let dir = d.dir.as_ref().unwrap();
        assert!(dir.names.is_empty() && dir.order.is_empty());
        assert_eq!(dir.subdirs, 0);
        assert_eq!(dir.next_cookie, 4);
    }

    #[test]
    fn snapshot_recreates_state() {
        let mut s = InodeState::new(5, FileKind::Regular);
        s.apply(P0, &w(0, 1000, 3));
        s.apply(P0 + UNIT, &w(1, 2000, 1));
        s.apply(
            P0 + 2 * UNIT,
            &Entry::Link {
                nlink: 3,
                ctime: Timespec { sec: 9, nsec: 1 },
            },
        );
        let mut t = InodeState::new(5, FileKind::Regular);
        let mut off = P1;
        for e in s.snapshot_entries() {
            t.apply(off, &e);
            off += e.units() * UNIT;
        }
        assert_eq!(t.attr(), s.attr());
        let blocks = |x: &InodeState| {
            x.pages
                .iter()
                .map(|(k, v)| (k, v.block))
                .collect::<Vec<_>>()
        };
        assert_eq!(blocks(&t), blocks(&s));
    }

    /// Thorough GC's shortcut gives the state that applying the snapshot gives: the
    /// same pages with the same owning entries, live accounting and attributes.
    #[test]
    fn adopting_a_compaction_equals_applying_it() {
        let mut s = InodeState::new(5, FileKind::Regular);
        s.apply(P0, &w(0, 1000, 3));
        s.apply(P0 + UNIT, &w(1, 2000, 1));
        s.apply(P0 + 2 * UNIT, &w(7, 3000, 2));
        s.apply(P0 + 3 * UNIT, &w(9, 4000, 1));
        let mut shrink = s.setattr_entry(SETATTR_SHRINK);
        if let Entry::SetAttr { size, .. } = &mut shrink {
            *size = 8 * BLOCK + 5;
        }
        s.apply(P0 + 4 * UNIT, &shrink);
        let entries = s.snapshot_entries();
        let mut offsets = Vec::new();
        let mut off = 200 * BLOCK;
        for e in &entries {
            offsets.push(off);
            off += e.units() * UNIT;
        }
        let mut applied = InodeState::new(5, FileKind::Regular);
        for (e, &o) in entries.iter().zip(&offsets) {
            applied.apply(o, e);
        }
        let mut adopted = InodeState::new(5, FileKind::Regular);
        adopted.adopt_compacted(&mut s, &entries, &offsets);
        assert_eq!(s.pages.len(), 0, "the page map moved over");
        assert_eq!(adopted.pages, applied.pages);
        assert_eq!(adopted.attr(), applied.attr());
        assert_eq!(adopted.log.page_live, applied.log.page_live);
        assert_eq!(adopted.log.live_units, applied.log.live_units);
        assert_eq!(adopted.log.pinned_units, applied.log.pinned_units);
        assert_eq!(adopted.write_mtime, applied.write_mtime);
    }
}
