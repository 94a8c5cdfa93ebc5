//! The engine's public handle: [`Fs`], `mkfs` and `mount`, and the commit machinery
//! every operation shares.

use crate::bugs::{self, Bug};
use crate::error::{FsError, Result};
use crate::format::{
    encode_inode_static, Entry, Geometry, ZoneParams, BLOCK, INO_HEAD_OFF, INO_TAIL_OFF,
    INO_VALID_OFF, SB_REPLICA_BLOCK, SB_STATE_OFF, STATE_CLEAN,
};
use crate::inode::{Inode, InodeState};
use crate::journal::Journals;
use crate::log::{init_page, LogState};
use crate::recovery::{self, Mode};
use crate::space::{Run, Space};
use crate::types::*;
use crate::vol::Vol;
use parking_lot::{ArcMutexGuard, Mutex, RawMutex, RwLock};
use pm::Pm;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Largest file size (bytes).
pub(crate) const MAX_FILE_SIZE: u64 = 1 << 44;
/// Smallest region `mkfs_pm` formats (in-memory images of the crash explorer).
pub const MKFS_PM_MIN: u64 = 256 << 10;

/// Largest link count.
pub(crate) const LINK_MAX: u32 = 65000;

const SHARDS: usize = 64;

pub(crate) type Guard = ArcMutexGuard<RawMutex, InodeState>;

/// DRAM inode table: sharded map plus per-CPU free inode lists.
pub(crate) struct InodeTable {
    shards: Vec<RwLock<HashMap<Ino, Arc<Inode>>>>,
    free: Vec<Mutex<Vec<Ino>>>,
    used: AtomicU64,
}

/// A mounted mnemofs. Safe for concurrent callers (`&self` everywhere).
/// An open file (see [`Fs::open_handle`]).
pub struct FileHandle {
    pub(crate) inode: Arc<Inode>,
}

impl FileHandle {
    pub fn ino(&self) -> Ino {
        self.inode.ino
    }
}

pub struct Fs {
    pub(crate) pm: Arc<Vol>,
    pub(crate) geo: Geometry,
    pub(crate) space: Space,
    pub(crate) journals: Journals,
    pub(crate) table: InodeTable,
    pub(crate) opts: MountOptions,
    pub(crate) clean_mount: bool,
    /// Serializes renames (like the VFS rename mutex) so that directory-loop checks
    /// see a stable tree.
    pub(crate) rename_lock: Mutex<()>,
    /// The most data writes of one file seen between reserving their log slots and
    /// completing, at once (shows whether a frontend delivers writes to one file in
    /// parallel).
    pub(crate) writers_max: AtomicU64,
    /// LAWN zone (DRAM side) and the fine-log redo areas.
    pub(crate) lawn: crate::lawn::Lawn,
    pub(crate) finelog: crate::finelog::Finelog,
}

fn zone_params(opts: &MkfsOptions) -> ZoneParams {
    ZoneParams {
        percent: opts.zone_percent,
        slot_size: opts.slot_size,
    }
}

/// Formats `path` (created when missing) as an empty mnemofs.
pub fn mkfs(path: &Path, opts: &MkfsOptions) -> Result<()> {
    let cpus = if opts.cpus == 0 {
        std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1)
    } else {
        opts.cpus
    };
    let geo = Geometry::compute_zoned(
        opts.size,
        cpus,
        opts.inodes,
        crate::format::MIN_SIZE,
        zone_params(opts),
    )?;
    if !opts.force {
        if let Ok(existing) = Pm::open(path, false) {
            let mut scratch = Vec::new();
            if recovery::read_superblock(Vol::of(&existing), &mut scratch).is_ok() {
                return Err(FsError::AlreadyFormatted {
                    path: path.to_path_buf(),
                });
            }
        }
    }
    let pm = Vol::new(Pm::create(path, opts.size)?);
    format(&pm, &geo);
    pm.sync_to_file();
    Ok(())
}

/// Formats an already mapped region (anonymous memory in tests and the crash
/// explorer).
pub fn mkfs_pm(pm: &Pm, opts: &MkfsOptions) -> Result<()> {
    let size = pm.len().min(opts.size);
    let geo = Geometry::compute_zoned(
        size,
        opts.cpus.max(1),
        opts.inodes,
        MKFS_PM_MIN,
        zone_params(opts),
    )?;
    format(Vol::of(pm), &geo);
    Ok(())
}

/// Writes an empty file system onto `pm`.
pub(crate) fn format(pm: &Vol, geo: &Geometry) {
    // Metadata area: superblocks, journals, free list, inode table, fine-log redo
    // areas, LAWN descriptor table (all clear). Zone slots hold nothing until a
    // descriptor names them, so they are left as they are.
    pm.zero(0, geo.slot_start * BLOCK);
    pm.flush(0, geo.slot_start * BLOCK);
    // Root directory: slot, one log page with its initial attributes.
    let root_page = geo.data_start;
    init_page(pm, root_page, ROOT_INO);
    let now = Timespec::now();
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let entries = [
        Entry::SetAttr {
            mode: libc::S_IFDIR | 0o755,
            uid,
            gid,
            rdev: 0,
            size: 0,
            atime: now,
            mtime: now,
            ctime: now,
            flags: 0,
        },
        Entry::Link {
            nlink: 2,
            ctime: now,
        },
    ];
    let mut pos = root_page * BLOCK;
    for e in &entries {
        let mut body = e.encode();
        let cw = crate::format::commit_word(&body);
        body[0..8].copy_from_slice(&cw.to_le_bytes());
        pm.write(pos, &body);
        pm.flush(pos, body.len() as u64);
        pos += body.len() as u64;
    }
    let ioff = geo.inode_off(ROOT_INO);
    let slot = encode_inode_static(ROOT_INO, FileKind::Directory);
    pm.write(ioff + 24, &slot[24..]);
    pm.store_u64(ioff + INO_HEAD_OFF, root_page);
    pm.store_u64(ioff + INO_TAIL_OFF, pos);
    pm.store_u64(ioff + INO_VALID_OFF, 1);
    pm.flush(ioff, 128);
    recovery::save_freelist(pm, geo, &[(geo.data_start + 1, geo.data_blocks() - 1)]);
    // Fence: root inode, its log and the free list are durable before the superblock
    // that makes the image a mnemofs.
    pm.fence();
    let sb = geo.encode();
    pm.write(SB_REPLICA_BLOCK * BLOCK, &sb);
    pm.flush(SB_REPLICA_BLOCK * BLOCK, sb.len() as u64);
    pm.write(0, &sb);
    pm.flush(0, sb.len() as u64);
    pm.store_u64(SB_STATE_OFF, STATE_CLEAN);
    pm.flush(SB_STATE_OFF, 8);
    // Fence: the superblocks and the clean state are durable before mkfs returns.
    pm.fence();
}

/// Mounts the image at `path`, running recovery if it was not cleanly unmounted.
pub fn mount(path: &Path, opts: &MountOptions) -> Result<Fs> {
    let pm = Pm::open(path, opts.exclusive)?;
    Fs::from_pm(pm, opts)
}

impl Fs {
    /// Mounts an already mapped region (tests and the crash explorer use anonymous
    /// copies).
    pub fn from_pm(mut pm: Pm, opts: &MountOptions) -> Result<Fs> {
        // The latency profile applies from recovery on.
        pm.set_profile(opts.pm_profile);
        let pm = Vol::new(pm);
        let mut loaded = recovery::load(&pm, Mode::Mount)?;
        let geo = loaded.geo;
        // Fine-log records and LAWN descriptors, against the replayed mappings.
        crate::finelog::recover(&pm, &geo, &loaded.states, Mode::Mount, &mut loaded.problems);
        let subs = crate::lawn::recover::scan(
            &pm,
            &geo,
            &loaded.states,
            Mode::Mount,
            &mut loaded.problems,
        );
        let space = Space::empty(geo);
        for &(s, l) in &loaded.free {
            space.free_run(s, l);
        }
        let table = InodeTable {
            shards: (0..SHARDS).map(|_| RwLock::new(HashMap::new())).collect(),
            free: (0..geo.cpus).map(|_| Mutex::new(Vec::new())).collect(),
            used: AtomicU64::new(loaded.states.len() as u64),
        };
        let mut free_inos = loaded.free_inos;
        // Lowest numbers are handed out first.
        free_inos.sort_unstable_by(|a, b| b.cmp(a));
        for ino in free_inos {
            table.free[geo.ino_cpu(ino) as usize].lock().push(ino);
        }
        for (ino, st) in loaded.states {
            let inode = Arc::new(Inode::new(st, opts));
            table.shards[ino as usize % SHARDS]
                .write()
                .insert(ino, inode);
        }
        if opts.small_write == SmallWriteMode::Lawn {
            // The zone and its descriptor table are written at random all the time:
            // map their pages in now rather than take a page fault (and, on /dev/shm,
            // a zero-fill) on the first write to each. On /dev/shm this allocates the
            // zone's memory at mount rather than as it is first written.
            pm.populate(geo.desc_off(0), geo.zone_slots * crate::format::DESC_SIZE);
            pm.populate(geo.slot_off(0), geo.zone_slots * geo.slot_size as u64);
        }
        let pm = Arc::new(pm);
        let fs = Fs {
            journals: Journals::new(&geo),
            lawn: crate::lawn::Lawn::new(
                &pm,
                geo,
                subs,
                // (Other modes store descriptors only to clear those an earlier LAWN
                // mount left: no need to measure.)
                opts.lawn_desc_store
                    .or((opts.small_write != SmallWriteMode::Lawn)
                        .then_some(pm::Store16::NonTemporal)),
            ),
            finelog: crate::finelog::Finelog::new(&geo),
            pm,
            geo,
            space,
            table,
            opts: opts.clone(),
            clean_mount: loaded.clean,
            rename_lock: Mutex::new(()),
            writers_max: AtomicU64::new(0),
        };
        fs.lawn_register_recovered();
        if opts.small_write == SmallWriteMode::Lawn && opts.lawn_writeback_thread {
            fs.lawn.start_writeback(fs.pm.clone());
        }
        Ok(fs)
    }

    /// Saves the free lists, marks the image clean and unmaps it.
    pub fn unmount(self) -> Result<()> {
        // LAWN: no write-back after the state word says clean; times of in-place
        // small writes go to the log.
        self.lawn.stop_writeback();
        self.persist_lazy_times();
        let runs = self.space.extents();
        if recovery::save_freelist(&self.pm, &self.geo, &runs) {
            // Fence: the saved free list is durable before the state word that says
            // it may be trusted.
            self.pm.fence();
            self.pm.store_u64(SB_STATE_OFF, STATE_CLEAN);
            self.pm.flush(SB_STATE_OFF, 8);
            // Fence: the clean state is durable before unmount returns.
            self.pm.fence();
        }
        self.pm.sync_to_file();
        Ok(())
    }

    /// PM counters of the calling thread (exact even while other threads work).
    pub fn thread_counters(&self) -> pm::CounterSnapshot {
        self.pm.thread_counters()
    }

    /// Passes an operation marker to the region's tracer (the crash explorer's
    /// operation boundaries); no effect on PM.
    pub fn marker(&self, m: pm::Marker) {
        self.pm.marker(m)
    }

    /// The PM latency profile charged on this mount.
    pub fn pm_profile(&self) -> pm::PmProfile {
        self.pm.profile()
    }

    /// How the image is mapped.
    pub fn map_mode(&self) -> pm::MapMode {
        self.pm.map_mode()
    }

    /// The cache-line write-back instruction in use.
    pub fn flush_kind(&self) -> pm::FlushKind {
        self.pm.flush_kind()
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    // ------------------------------------------------------------ inode table --

    pub(crate) fn get(&self, ino: Ino) -> Result<Arc<Inode>> {
        if !self.geo.valid_ino(ino) {
            return Err(FsError::NotFound);
        }
        self.table.shards[ino as usize % SHARDS]
            .read()
            .get(&ino)
            .cloned()
            .ok_or(FsError::NotFound)
    }

    pub(crate) fn lock(&self, ino: Ino) -> Result<(Arc<Inode>, Guard)> {
        let inode = self.get(ino)?;
        let g = inode.state.lock_arc();
        if g.dead {
            return Err(FsError::NotFound);
        }
        Ok((inode, g))
    }

    /// Locks several inodes in ascending inode order (the global lock order).
    pub(crate) fn lock_many(&self, inos: &[Ino]) -> Result<Vec<(Arc<Inode>, Guard)>> {
        let mut v: Vec<Ino> = inos.to_vec();
        v.sort_unstable();
        v.dedup();
        let mut out = Vec::with_capacity(v.len());
        for ino in v {
            out.push(self.lock(ino)?);
        }
        Ok(out)
    }

    pub(crate) fn alloc_ino(&self) -> Result<Ino> {
        // SAFETY: sched_getcpu has no preconditions.
        let c = unsafe { libc::sched_getcpu() };
        let n = self.table.free.len();
        let first = if c < 0 { 0 } else { c as usize % n };
        for k in 0..n {
            if let Some(ino) = self.table.free[(first + k) % n].lock().pop() {
                self.table.used.fetch_add(1, Ordering::Relaxed);
                return Ok(ino);
            }
        }
        Err(FsError::NoSpace)
    }

    pub(crate) fn release_ino(&self, ino: Ino) {
        self.table.free[self.geo.ino_cpu(ino) as usize]
            .lock()
            .push(ino);
        self.table.used.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn insert_inode(&self, st: InodeState) -> Arc<Inode> {
        let ino = st.ino;
        let inode = Arc::new(Inode::new(st, &self.opts));
        self.table.shards[ino as usize % SHARDS]
            .write()
            .insert(ino, inode.clone());
        inode
    }

    /// Writes the static part of a free inode slot (harmless while `valid` is 0).
    pub(crate) fn write_slot(&self, ino: Ino, kind: FileKind) {
        let ioff = self.geo.inode_off(ino);
        let slot = encode_inode_static(ino, kind);
        self.pm.write(ioff + 24, &slot[24..]);
        self.pm.flush(ioff + 24, 104);
    }

    // ----------------------------------------------------------------- commit --

    /// Appends `entries` to each inode's log and makes them visible atomically:
    /// one tail store for a single inode, the lite journal for several (plus the
    /// `extra` in-place words). Then applies them to DRAM, frees what they made
    /// unreachable and runs GC. Data pages and inode slots the entries refer to must
    /// already be flushed: the first fence here orders them too.
    pub(crate) fn commit(
        &self,
        parts: &mut [(&mut InodeState, Vec<Entry>)],
        extra: &[(u64, u64)],
    ) -> Result<()> {
        let mut staged = Vec::with_capacity(parts.len());
        for (st, entries) in parts.iter() {
            match st.log.stage(&self.pm, &self.space, st.ino, entries) {
                Ok(s) => staged.push(s),
                Err(e) => {
                    for s in staged {
                        s.abandon(&self.pm, &self.space);
                    }
                    return Err(e);
                }
            }
        }
        let mut words = Vec::with_capacity(parts.len() * 2 + extra.len());
        for ((st, _), s) in parts.iter().zip(&staged) {
            let ioff = self.geo.inode_off(st.ino);
            if let Some(h) = s.new_head {
                words.push((ioff + INO_HEAD_OFF, h));
            }
            words.push((ioff + INO_TAIL_OFF, s.new_tail));
        }
        words.extend_from_slice(extra);
        if words.len() == 1 {
            // Fence: data pages and entries (bodies and commit marks) are durable
            // before the tail that exposes them.
            if !bugs::on(Bug::NoFenceBeforeTail) {
                self.pm.fence();
            }
            self.pm.store_u64(words[0].0, words[0].1);
            self.pm.flush(words[0].0, 8);
            // Fence: the new tail is durable before the operation returns.
            if !bugs::on(Bug::NoFenceAfterTail) {
                self.pm.fence();
            }
        } else if let Err(e) = self.journals.run(&self.pm, &words) {
            for s in staged {
                s.abandon(&self.pm, &self.space);
            }
            return Err(e);
        }
        let mut freed: Vec<Run> = Vec::new();
        for ((st, entries), s) in parts.iter_mut().zip(&staged) {
            st.log.commit(s);
            for (e, &off) in entries.iter().zip(&s.offsets) {
                freed.extend(st.apply(off, e));
            }
        }
        // LAWN: descriptors of the unmapped blocks are cleared before the blocks can
        // be reused.
        self.lawn.core.before_free(&self.pm, &freed);
        self.space.free_runs(&freed);
        for (st, _) in parts.iter_mut() {
            self.gc(st);
        }
        Ok(())
    }

    /// Log GC after a commit: fast GC always, thorough GC when the log is mostly dead.
    pub(crate) fn gc(&self, st: &mut InodeState) {
        if st.dead {
            return;
        }
        // Fast GC scans the chain: only when a page may have died since the last scan
        // (a scan per commit made every write O(log pages)).
        if st.log.gc_hint {
            let freed = st.log.fast_gc(&self.pm, self.geo.inode_off(st.ino));
            for p in freed {
                self.space.free_run(p, 1);
            }
        }
        if st.log.wants_compaction() {
            // A failed compaction (no space for the new chain) leaves the old log
            // intact and correct; it is retried after the next commit.
            let _ = self.compact(st);
        }
    }

    /// Thorough GC: writes the live state as a fresh chain, switches head and tail
    /// through the journal, frees the old chain.
    pub(crate) fn compact(&self, st: &mut InodeState) -> Result<()> {
        let entries = st.snapshot_entries();
        let fresh = LogState::default();
        let staged = fresh.stage(&self.pm, &self.space, st.ino, &entries)?;
        let ioff = self.geo.inode_off(st.ino);
        let Some(head) = staged.new_head else {
            staged.abandon(&self.pm, &self.space);
            return Err(FsError::Invalid("empty compaction"));
        };
        let words = [
            (ioff + INO_HEAD_OFF, head),
            (ioff + INO_TAIL_OFF, staged.new_tail),
        ];
        if let Err(e) = self.journals.run(&self.pm, &words) {
            staged.abandon(&self.pm, &self.space);
            return Err(e);
        }
        let mut ns = InodeState::new(st.ino, st.kind);
        // Same mapping, same lock-free index (readers may be using it right now).
        ns.index = st.index.clone();
        ns.parent = st.parent;
        ns.log.commit(&staged);
        for (e, &off) in entries.iter().zip(&staged.offsets) {
            ns.apply(off, e);
        }
        if let (Some(nd), Some(od)) = (ns.dir.as_mut(), st.dir.as_ref()) {
            nd.next_cookie = nd.next_cookie.max(od.next_cookie);
        }
        let old_pages = std::mem::take(&mut st.log.pages);
        *st = ns;
        for p in old_pages {
            self.space.free_run(p, 1);
        }
        Ok(())
    }

    /// Frees an inode whose link count is 0, which nobody has open and whose number
    /// no frontend still references.
    pub(crate) fn maybe_free(&self, ino: Ino) {
        let Ok(inode) = self.get(ino) else { return };
        let _d = inode.data.write(0, u64::MAX);
        let mut st = inode.state.lock();
        if st.dead
            || st.nlink > 0
            || inode.opens.load(Ordering::Acquire) > 0
            || inode.lookups.load(Ordering::Acquire) > 0
            || ino == ROOT_INO
        {
            return;
        }
        let ioff = self.geo.inode_off(ino);
        self.pm.store_u64(ioff + INO_VALID_OFF, 0);
        self.pm.flush(ioff + INO_VALID_OFF, 8);
        // Fence: the inode is free on PM before its blocks can be reused.
        self.pm.fence();
        st.dead = true;
        st.index.set_dead();
        let mut runs: Vec<Run> = Vec::new();
        for b in st.data_blocks() {
            crate::inode::push_run(&mut runs, b);
        }
        for &p in &st.log.pages {
            runs.push((p, 1));
        }
        st.pages.clear();
        st.log.pages.clear();
        drop(st);
        // LAWN: descriptors of the freed blocks are cleared before they can be reused.
        self.lawn.core.before_free(&self.pm, &runs);
        self.space.free_runs(&runs);
        self.table.shards[ino as usize % SHARDS]
            .write()
            .remove(&ino);
        self.release_ino(ino);
    }

    // ------------------------------------------------------------- attributes --

    pub fn getattr(&self, ino: Ino) -> Result<Attr> {
        let (_i, st) = self.lock(ino)?;
        Ok(st.attr())
    }

    pub fn setattr(&self, ino: Ino, req: &SetAttr) -> Result<Attr> {
        let inode = self.get(ino)?;
        // The whole file: a setattr entry is a full snapshot (size included), so no
        // concurrent data write may sit between its snapshot and its commit — replay
        // (log order) and run time (completion order) would disagree on the size.
        let _d = inode.data.write(0, u64::MAX);
        let mut st = inode.state.lock_arc();
        if st.dead {
            return Err(FsError::NotFound);
        }
        let now = Timespec::now();
        let mut entries = Vec::new();
        let mut flags = 0;
        let mut cow_block = None;
        let old_size = st.size;
        if let Some(size) = req.size {
            match st.kind {
                FileKind::Regular => {}
                FileKind::Directory => return Err(FsError::IsDir),
                _ => return Err(FsError::Invalid("size change of a special file")),
            }
            if size > MAX_FILE_SIZE {
                return Err(FsError::TooBig);
            }
            if size < old_size {
                flags = crate::format::SETATTR_SHRINK;
                // The partial last page keeps only the bytes below the new size, so
                // that a later extension reads zeros there.
                if let Some((e, block)) = self.cow_zero_tail(&st, size)? {
                    entries.push(e);
                    cow_block = Some(block);
                }
            }
        }
        let mut snap = st.setattr_entry(flags);
        if let Entry::SetAttr {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
            ctime,
            ..
        } = &mut snap
        {
            if let Some(m) = req.mode {
                *mode = (*mode & libc::S_IFMT) | (m & 0o7777);
            }
            if let Some(u) = req.uid {
                *uid = u;
            }
            if let Some(g) = req.gid {
                *gid = g;
            }
            if let Some(s) = req.size {
                *size = s;
            }
            if let Some(a) = req.atime {
                *atime = a;
            }
            if let Some(m) = req.mtime {
                *mtime = m;
            }
            *ctime = req.ctime.unwrap_or(now);
        }
        entries.push(snap);
        if let Err(e) = self.commit(&mut [(&mut *st, entries)], &[]) {
            if let Some(b) = cow_block {
                self.space.free_run(b, 1);
            }
            return Err(e);
        }
        Ok(st.attr())
    }

    pub fn statfs(&self) -> StatFs {
        let free = self.space.free_blocks();
        let ifree: u64 = self.table.free.iter().map(|f| f.lock().len() as u64).sum();
        StatFs {
            block_size: BLOCK as u32,
            blocks: self.geo.data_blocks(),
            blocks_free: free,
            blocks_avail: self.space.available(),
            files: self.geo.inode_count,
            files_free: ifree,
            name_max: NAME_MAX as u32,
        }
    }

    pub fn stats(&self) -> FsStats {
        let c = self.pm.counters();
        let mut log_pages = 0;
        let mut data_pages = 0;
        // Collect handles first: a shard lock is never held while waiting for an
        // inode lock (creators hold an inode lock while inserting into a shard).
        let inodes: Vec<Arc<Inode>> = self
            .table
            .shards
            .iter()
            .flat_map(|sh| sh.read().values().cloned().collect::<Vec<_>>())
            .collect();
        for inode in inodes {
            let st = inode.state.lock();
            log_pages += st.log.pages.len() as u64;
            data_pages += st.pages.len() as u64;
        }
        let (lawn_used, lawn_free, lawn_zone_writes, lawn_file_writes) = self.lawn_usage();
        let lc = &self.lawn.core.counters;
        FsStats {
            size_bytes: self.geo.total_blocks * BLOCK,
            block_size: BLOCK as u32,
            total_blocks: self.geo.total_blocks,
            data_blocks: self.geo.data_blocks(),
            free_blocks: self.space.free_blocks(),
            free_blocks_per_cpu: self.space.per_cpu_free(),
            cpus: self.geo.cpus,
            inodes_total: self.geo.inode_count,
            inodes_used: self.table.used.load(Ordering::Relaxed),
            log_pages,
            data_pages,
            pm_bytes_written: c.bytes_written,
            pm_flushes: c.flushes,
            pm_fences: c.fences,
            flush_instruction: self.pm.flush_kind().name().to_string(),
            map_mode: format!("{:?}", self.pm.map_mode()),
            lock_mode: self.opts.lock.name().to_string(),
            small_write_mode: self.opts.small_write.name().to_string(),
            clean_mount: self.clean_mount,
            max_concurrent_writers: self.writers_max.load(Ordering::Relaxed),
            lawn_slot_size: self.geo.slot_size,
            lawn_desc_store: self.lawn.core.desc_store.name().to_string(),
            lawn_slots_used: lawn_used,
            lawn_slots_free: lawn_free,
            lawn_zone_writes,
            lawn_file_writes,
            lawn_writebacks: lc.writebacks.load(Ordering::Relaxed),
            finelog_writes: lc.finelog_writes.load(Ordering::Relaxed),
            small_write_fallbacks: lc.fallbacks.load(Ordering::Relaxed),
        }
    }

    pub fn pm_counters(&self) -> pm::CounterSnapshot {
        self.pm.counters()
    }

    /// DRAM bytes of range-lock words allocated for `ino` (segment lock mode; 0 in the
    /// other modes).
    pub fn lock_memory(&self, ino: Ino) -> Result<u64> {
        Ok(self.get(ino)?.data.lock_bytes() as u64)
    }

    /// Bytes of log pages held by `ino`'s log.
    pub fn log_bytes(&self, ino: Ino) -> Result<u64> {
        let (_i, st) = self.lock(ino)?;
        Ok(st.log.bytes())
    }

    /// Pins the inode: an unlinked file stays readable and writable until `release`.
    pub fn open(&self, ino: Ino) -> Result<()> {
        let inode = self.get(ino)?;
        let st = inode.state.lock();
        if st.dead {
            return Err(FsError::NotFound);
        }
        inode.opens.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Opens `ino` like [`open`](Self::open) and returns a handle that holds the
    /// inode, so that [`handle_read`](Self::handle_read) and
    /// [`handle_write`](Self::handle_write) skip the inode-table lookup (a kernel's
    /// `struct file`). Give it back with [`close_handle`](Self::close_handle).
    pub fn open_handle(&self, ino: Ino) -> Result<FileHandle> {
        self.open(ino)?;
        Ok(FileHandle {
            inode: self.get(ino)?,
        })
    }

    /// Closes a handle from [`open_handle`](Self::open_handle) (like `release`).
    pub fn close_handle(&self, h: FileHandle) -> Result<()> {
        self.release(h.inode.ino)
    }

    pub fn release(&self, ino: Ino) -> Result<()> {
        let inode = self.get(ino)?;
        let prev = inode
            .opens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        if prev == Ok(1) {
            self.maybe_free(ino);
        }
        Ok(())
    }

    /// Records that a frontend handed out a reference to `ino` (a FUSE entry reply:
    /// lookup, create, mkdir, mknod, symlink, link). Until the matching `forget`, an
    /// unlinked inode keeps its number (and its data, so the kernel can still read it).
    pub fn remember(&self, ino: Ino) {
        if let Ok(inode) = self.get(ino) {
            inode.lookups.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Drops `n` references taken with `remember`.
    pub fn forget(&self, ino: Ino, n: u64) {
        let Ok(inode) = self.get(ino) else { return };
        let prev = inode
            .lookups
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                Some(c.saturating_sub(n))
            });
        if prev.is_ok_and(|p| p <= n) {
            self.maybe_free(ino);
        }
    }

    /// Every returned operation is already durable; kept for API symmetry.
    pub fn fsync(&self, ino: Ino) -> Result<()> {
        self.get(ino).map(|_| ())
    }
}
