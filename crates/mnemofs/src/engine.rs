//! The engine: [`Fs`], a mounted mnemofs, and its public API — the only `impl Fs`.
//!
//! `Fs` owns the layers (docs/ARCHITECTURE.md) and each method hands the call to the
//! one that does the work: the [`Namespace`] (names, attributes), the
//! [`DataPlane`] (file contents), the [`InodeTable`] (open/forget references), the
//! [`Store`] (volume, space, journals, log commit). `mkfs` is in `mkfs.rs`, the
//! recovery pipeline mount runs in `recovery`.

use crate::addr::{BlockNo, PmOff};
use crate::api::FileSystem;
use crate::data::rcache::{ReadCache, ReadCacheParams};
use crate::data::{finelog::Finelog, lawn::Lawn, DataPlane, SmallWrite};
use crate::devices::{DeviceInfo, DeviceSpec};
use crate::error::FsError;
use crate::error::Result;
use crate::format::{
    decode_label, encode_label, Geometry, BLOCK, LABEL_MAX, LABEL_SIZE, SB_LABEL_OFF,
    SB_REPLICA_BLOCK, SB_STATE_OFF, STATE_CLEAN, STATE_DIRTY,
};
use crate::inode::Inode;
use crate::itable::InodeTable;
use crate::namespace::Namespace;
use crate::recovery::{self, Mode};
use crate::space::{Placement, Space};
use crate::store::Store;
use crate::types::*;
use crate::vol::Vol;
use parking_lot::Mutex;
use pm::Pm;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// An open file (see [`Fs::open_handle`]): holds the inode, so reads and writes
/// through it skip the inode-table lookup (a kernel's `struct file`).
pub struct FileHandle {
    inode: Arc<Inode>,
}

impl FileHandle {
    /// The file's inode number.
    pub fn ino(&self) -> Ino {
        self.inode.ino
    }
}

/// A mounted mnemofs. Safe for concurrent callers (`&self` everywhere); every
/// operation that returned is durable.
pub struct Fs {
    store: Arc<Store>,
    table: InodeTable,
    data: DataPlane,
    /// The options, with the `auto` modes resolved.
    opts: MountOptions,
    /// The medium the mount found ([`crate::medium`]).
    medium: crate::medium::MediumChoice,
    clean_mount: bool,
    /// Serializes renames (like the VFS rename mutex).
    rename_lock: Mutex<()>,
    /// The volume's devices, in index order.
    devices: Vec<DeviceInfo>,
    /// Mounted read-only ([`Fs::remount`]): every change is refused and nothing
    /// reaches PM. Guarded by `remounting` for the transitions.
    read_only: std::sync::atomic::AtomicBool,
    /// Serializes remounts.
    remounting: Mutex<()>,
    /// Serializes label changes.
    label_lock: Mutex<()>,
}

/// EPERM for a write to an immutable file, or to an append-only one other than an
/// append (Linux refuses such opens; the engine refuses the writes).
#[inline]
fn may_write(inode: &Inode, append: bool) -> Result<()> {
    let f = inode.index.inode_flags();
    if f & inode_flags::IMMUTABLE != 0 || (f & inode_flags::APPEND != 0 && !append) {
        return Err(FsError::NotPermitted);
    }
    Ok(())
}

/// Mounts the image at `path`, running recovery if it was not cleanly unmounted.
pub fn mount(path: &Path, opts: &MountOptions) -> Result<Fs> {
    mount_devices(
        &[DeviceSpec {
            path: path.to_path_buf(),
            node: None,
        }],
        opts,
    )
}

/// The NUMA topology a mount uses (`MountOptions::topology`, else this machine's),
/// installed in the `pm` layer: which CPU is on which node, and their distances.
fn numa_topology(opts: &MountOptions) -> Result<pm::Topology> {
    let topo = match &opts.topology {
        Some(t) => t.clone(),
        // A machine whose sysfs the parser refuses (more nodes than modeled) is
        // treated as one node rather than refused.
        None => pm::Topology::from_sysfs(Path::new("/sys"))
            .or_else(|_| pm::Topology::parse("1"))
            .map_err(|e| FsError::Volume(format!("topology: {e}")))?,
    };
    let max_cpu = topo
        .nodes()
        .iter()
        .flat_map(|&n| topo.cpus_of(n).iter().copied())
        .max()
        .unwrap_or(0);
    let cpu_nodes: Vec<u32> = (0..=max_cpu)
        .map(|c| topo.node_of_cpu(c).unwrap_or(0))
        .collect();
    let n = pm::MAX_NODES as u32;
    let matrix: Vec<Vec<u32>> = (0..n)
        .map(|a| {
            (0..n)
                .map(|b| {
                    topo.distance(a, b).unwrap_or(if a == b {
                        10
                    } else {
                        pm::DEFAULT_REMOTE_DISTANCE
                    })
                })
                .collect()
        })
        .collect();
    pm::set_cpu_nodes(cpu_nodes).map_err(|e| FsError::Volume(format!("topology: {e}")))?;
    pm::set_node_distances(matrix).map_err(|e| FsError::Volume(format!("topology: {e}")))?;
    Ok(topo)
}

/// Mounts the volume of the devices `specs` names (in any order), running recovery
/// if it was not cleanly unmounted.
pub fn mount_devices(specs: &[DeviceSpec], opts: &MountOptions) -> Result<Fs> {
    let a = crate::devices::open(specs, opts.exclusive)?;
    Fs::mount_volume(a.volume, a.devices, opts)
}

impl Fs {
    /// Mounts an already mapped region (tests and the crash explorer use anonymous
    /// copies).
    pub fn from_pm(pm: Pm, opts: &MountOptions) -> Result<Fs> {
        let devices = vec![DeviceInfo {
            path: "<memory>".into(),
            index: 0,
            node: None,
            blocks: pm.len() / BLOCK,
            start: 0,
        }];
        Fs::mount_volume(pm::Volume::single(pm), devices, opts)
    }

    /// Mounts an already assembled volume (tests and the crash explorer: anonymous
    /// devices, e.g. from `devices::volume_of_image`), each device on the node its
    /// `Pm` says.
    pub fn from_volume(volume: pm::Volume, opts: &MountOptions) -> Result<Fs> {
        let devices = (0..volume.device_count())
            .filter_map(|i| volume.device(i).map(|(pm, start, len)| (i, pm, start, len)))
            .map(|(i, pm, start, len)| DeviceInfo {
                path: format!("<memory {i}>").into(),
                index: i as u32,
                node: Some(pm.node()),
                blocks: len / BLOCK,
                start: start / BLOCK,
            })
            .collect();
        Fs::mount_volume(volume, devices, opts)
    }

    /// Mounts an assembled volume of `devices`.
    fn mount_volume(
        mut volume: pm::Volume,
        mut devices: Vec<DeviceInfo>,
        opts: &MountOptions,
    ) -> Result<Fs> {
        // The latency profile applies from recovery on, with each device's node.
        volume.set_profile(opts.pm_profile);
        // The `auto` modes become what pays on this medium.
        let medium = crate::medium::choose(&volume, opts);
        let resolved = crate::medium::resolve(opts, medium.medium);
        let opts = &resolved;
        let topo = numa_topology(opts)?;
        let dev_nodes: Vec<u32> = devices.iter().map(|d| d.node.unwrap_or(0)).collect();
        for (i, &n) in dev_nodes.iter().enumerate() {
            if let Some(d) = volume.device_mut(i) {
                d.set_node(n);
            }
        }
        let vol = Vol::from_volume(volume);
        let lawn = opts.small_write == SmallWriteMode::Lawn;
        let rec = recovery::recover(&vol, Mode::Mount, lawn)?;
        let loaded = rec.loaded;
        let geo = loaded.geo;
        // A device's blocks as the volume uses them (the one device of an image may
        // be larger than its file system).
        for (i, d) in devices.iter_mut().enumerate() {
            d.blocks = geo.dev_blocks.get(i).copied().unwrap_or(0);
            d.start = geo.dev_start(i);
        }
        let placement = Placement::new(&geo, opts.placement, &dev_nodes, topo.nodes(), |a, b| {
            topo.distance(a, b)
        });
        let space = Space::new(geo, placement);
        for &(s, l) in &loaded.free {
            space.free_run(s, l);
        }
        let table = InodeTable::new(geo, loaded.states, loaded.free_inos, opts);
        let vol = Arc::new(vol);
        // The read cache starts empty at every mount (nothing of it is on PM).
        let rcache = match opts.read_cache {
            ReadCacheMode::Off | ReadCacheMode::Auto => None,
            ReadCacheMode::Rcache => Some(ReadCache::start(
                &ReadCacheParams {
                    bytes: match opts.read_cache_bytes {
                        0 => DEFAULT_READ_CACHE_BYTES,
                        b => b,
                    },
                    threshold: match opts.read_cache_threshold {
                        0 => DEFAULT_READ_CACHE_THRESHOLD,
                        t => t,
                    },
                    window: Duration::from_millis(match opts.read_cache_window_ms {
                        0 => DEFAULT_READ_CACHE_WINDOW_MS,
                        w => w,
                    }),
                },
                vol.clone(),
            )?),
        };
        let small = match opts.small_write {
            SmallWriteMode::Cow | SmallWriteMode::Auto => SmallWrite::Cow,
            SmallWriteMode::Finelog => SmallWrite::Finelog(Finelog::new(&geo)),
            SmallWriteMode::Lawn => {
                // The zone and its descriptor table are written at random all the
                // time: map their pages in now rather than take a page fault (and, on
                // /dev/shm, a zero-fill) on the first write to each. On /dev/shm this
                // allocates the zone's memory at mount rather than as it is first
                // written.
                vol.populate(geo.desc_off(0), geo.zone_slots * crate::format::DESC_SIZE);
                vol.populate(geo.slot_off(0), geo.zone_slots * geo.slot_size as u64);
                SmallWrite::Lawn(Lawn::new(
                    &vol,
                    geo,
                    (rec.map, rec.subs),
                    !opts.lawn_fixed_zone,
                    opts.lawn_desc_store,
                    rcache.as_ref().map(|c| c.shared.clone()),
                    crate::data::lawn::LawnPlace::new(
                        opts.placement == crate::types::PlacementMode::Local,
                        &dev_nodes,
                    ),
                ))
            }
        };
        let inval = DataPlane::invalidation(&small, rcache.as_ref());
        let store = Arc::new(Store::new(vol.clone(), geo, space, inval.clone()));
        let data = DataPlane::new(store.clone(), small, rcache, inval, opts);
        if let SmallWrite::Lawn(l) = data.small() {
            l.register_recovered(|ino| table.get(ino).ok());
            if opts.lawn_writeback_thread {
                l.start_writeback(store.clone());
            }
        }
        let fs = Fs {
            store,
            table,
            data,
            opts: opts.clone(),
            medium,
            clean_mount: loaded.clean,
            rename_lock: Mutex::new(()),
            devices,
            read_only: std::sync::atomic::AtomicBool::new(false),
            remounting: Mutex::new(()),
            label_lock: Mutex::new(()),
        };
        fs.repair_label();
        Ok(fs)
    }

    /// The label copies in blocks 0 and 1, decoded (`None`: torn or damaged).
    fn label_copies(&self) -> [Option<Vec<u8>>; 2] {
        let vol = &self.store.vol;
        [0, SB_REPLICA_BLOCK].map(|b| {
            let mut buf = [0u8; LABEL_SIZE];
            vol.read(BlockNo(b).at(SB_LABEL_OFF), &mut buf);
            decode_label(&buf)
        })
    }

    /// Writes a label copy into block `b`, durably.
    fn write_label_copy(&self, b: u64, bytes: &[u8; LABEL_SIZE]) {
        let vol = &self.store.vol;
        let at = BlockNo(b).at(SB_LABEL_OFF);
        vol.write(at, bytes);
        vol.flush(at, LABEL_SIZE as u64);
        // Fence: this copy is whole on PM before the other copy is written, so a
        // crash leaves at least one whole copy (the old label or the new one).
        vol.fence();
    }

    /// After a crash in the middle of a label change one copy may be torn: it is
    /// rewritten from the whole one (block 0's when both are whole and differ: the
    /// change wrote block 1 first, so block 0 whole means the change had finished
    /// or not begun).
    fn repair_label(&self) {
        if !self.store.geo.flags_and_label {
            return;
        }
        let [primary, replica] = self.label_copies();
        match (primary, replica) {
            (Some(p), r) if r.as_ref() != Some(&p) => {
                self.write_label_copy(SB_REPLICA_BLOCK, &encode_label(&p))
            }
            (None, Some(r)) => self.write_label_copy(0, &encode_label(&r)),
            _ => {}
        }
    }

    /// The file-system label (empty: none; FS_IOC_GETFSLABEL).
    pub fn label(&self) -> Vec<u8> {
        let [primary, replica] = self.label_copies();
        primary.or(replica).unwrap_or_default()
    }

    /// Sets the file-system label (FS_IOC_SETFSLABEL; at most 255 bytes, no NUL):
    /// block 1's copy, then block 0's, each durable before the next. A crash
    /// between them leaves block 0 with the old label and block 1 with the new
    /// one, or block 0 torn; mount makes both copies whole again
    /// (`repair_label`). Images older than format version 8 have no label.
    pub fn set_label(&self, label: &[u8]) -> Result<()> {
        self.writable()?;
        if label.len() > LABEL_MAX || label.contains(&0) {
            return Err(FsError::Invalid(
                "a label is at most 255 bytes, without NUL",
            ));
        }
        if !self.store.geo.flags_and_label {
            return Err(FsError::Unsupported(
                "a label on an image older than format version 8",
            ));
        }
        let _one = self.label_lock.lock();
        let bytes = encode_label(label);
        self.write_label_copy(SB_REPLICA_BLOCK, &bytes);
        self.write_label_copy(0, &bytes);
        Ok(())
    }

    fn ns(&self) -> Namespace<'_> {
        Namespace {
            store: &self.store,
            table: &self.table,
            data: &self.data,
            rename_lock: &self.rename_lock,
        }
    }

    /// Saves the free lists, marks the image clean and unmaps it. A read-only
    /// mount ([`Fs::remount`]) was made clean when it went read-only: nothing is
    /// written.
    pub fn unmount(mut self) -> Result<()> {
        // LAWN: no write-back after the state word says clean; times of in-place
        // small writes go to the log.
        self.data.stop();
        if !self.is_read_only() {
            self.make_clean();
        }
        self.store.vol.sync_to_file();
        Ok(())
    }

    /// What unmount leaves on PM, with the background write-back stopped: lazy
    /// times logged, spares back in the free space, the free list saved and the
    /// state word clean.
    fn make_clean(&self) {
        self.data.persist_lazy_times(&self.table);
        // The files' spare blocks are free space: into the saved free list.
        self.data.return_spares(true);
        let s = &*self.store;
        let runs = s.space.extents();
        if crate::freelist::save_freelist(&s.vol, &s.geo, &runs) {
            // Fence: the saved free list is durable before the state word that says
            // it may be trusted.
            s.vol.fence();
            s.vol.store_u64(PmOff::ZERO + SB_STATE_OFF, STATE_CLEAN);
            s.vol.flush(PmOff::ZERO + SB_STATE_OFF, 8);
            // Fence: the clean state is durable before unmount (or the switch to
            // read-only) returns.
            s.vol.fence();
        }
    }

    /// FITRIM: gives back the memory behind the free space within bytes `[start,
    /// start + len)` of the volume, in free runs of at least `min_len` bytes (an
    /// image file: holes punched, so a DRAM-backed image shrinks to what files
    /// use). Returns the bytes given back. `Unsupported` where the medium cannot (a
    /// device-DAX mapping, which has no backing store to give back); `ReadOnly` on
    /// a read-only mount. Blocks in the threads' allocation caches and files'
    /// spares stay (a few per thread and file).
    pub fn trim(&self, start: u64, len: u64, min_len: u64) -> Result<u64> {
        self.writable()?;
        let s = &*self.store;
        let lo = start.div_ceil(BLOCK);
        let hi = (start.saturating_add(len) / BLOCK).min(s.geo.total_blocks);
        let min = min_len.div_ceil(BLOCK).max(1);
        let blocks = s
            .space
            .trim(lo, hi, min, |b, n| {
                s.vol
                    .discard(BlockNo(b).off(), n.saturating_mul(BLOCK))
                    .map(|bytes| bytes / BLOCK)
            })
            .map_err(|e| match e.raw_os_error() {
                Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) => {
                    FsError::Unsupported("discard: the medium has no backing store to give back")
                }
                _ => FsError::Io(e),
            })?;
        Ok(blocks.saturating_mul(BLOCK))
    }

    /// The flags of `ino` ([`inode_flags`]: immutable, append-only, …).
    pub fn inode_flags(&self, ino: Ino) -> Result<u32> {
        Ok(self.table.get(ino)?.index.inode_flags())
    }

    /// Sets the flags of `ino` (`chattr`; see `Namespace::set_inode_flags`).
    pub fn set_inode_flags(&self, ino: Ino, flags: u32) -> Result<()> {
        self.writable()?;
        self.data
            .with_reclaim(1, || self.ns().set_inode_flags(ino, flags))
    }

    /// Whether the mount is read-only now ([`Fs::remount`]).
    pub fn is_read_only(&self) -> bool {
        self.read_only.load(std::sync::atomic::Ordering::Acquire)
    }

    /// `FsError::ReadOnly` on a read-only mount.
    #[inline]
    fn writable(&self) -> Result<()> {
        if self.is_read_only() {
            return Err(FsError::ReadOnly);
        }
        Ok(())
    }

    /// Remount: read-only or read-write, and when reads update atime (read-only
    /// implies noatime).
    ///
    /// Going read-only stops LAWN's background write-back, then leaves the image as
    /// unmount does (times logged, free list saved, state clean): from then on
    /// every change is refused with `FsError::ReadOnly` and nothing reaches PM, and
    /// a crash needs no recovery. Going back marks the image dirty (durably, before
    /// any change) and restarts the write-back. The caller keeps changes from being
    /// in flight across the switch to read-only: the kernel refuses `remount,ro`
    /// while a file is open for writing or an unlinked file is still open.
    pub fn remount(&self, read_only: bool, atime: AtimeMode) -> Result<()> {
        use std::sync::atomic::Ordering;
        let _one = self.remounting.lock();
        let was = self.is_read_only();
        if read_only && !was {
            self.data.set_atime_mode(AtimeMode::Noatime);
            self.read_only.store(true, Ordering::Release);
            if let crate::data::SmallWrite::Lawn(l) = self.data.small() {
                l.stop_writeback();
            }
            self.make_clean();
            self.store.vol.sync_to_file();
        } else if !read_only && was {
            let s = &*self.store;
            s.vol.store_u64(PmOff::ZERO + SB_STATE_OFF, STATE_DIRTY);
            s.vol.flush(PmOff::ZERO + SB_STATE_OFF, 8);
            // Fence: the dirty mark is durable before any change, so a crash from
            // here on never trusts the saved free list.
            s.vol.fence();
            if let crate::data::SmallWrite::Lawn(l) = self.data.small() {
                if self.opts.lawn_writeback_thread {
                    l.restart_writeback(self.store.clone());
                }
            }
            self.read_only.store(false, Ordering::Release);
        }
        if !read_only {
            self.data.set_atime_mode(atime);
        }
        Ok(())
    }

    // ------------------------------------------------------------- namespace --

    /// Looks `name` up in directory `parent`.
    pub fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.ns().lookup(parent, name)
    }

    /// Creates a node of any kind (`mode` carries the file type bits; `rdev` for
    /// device nodes) named `name` in `parent`.
    pub fn mknod(
        &self,
        parent: Ino,
        name: &[u8],
        mode: u32,
        rdev: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        self.writable()?;
        self.ns().mknod(parent, name, mode, rdev, uid, gid)
    }

    /// Creates an empty regular file `name` in `parent` (permission bits of `mode`).
    pub fn create(&self, parent: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> {
        self.writable()?;
        self.ns().create(parent, name, mode, uid, gid)
    }

    /// Creates an empty directory `name` in `parent`.
    pub fn mkdir(&self, parent: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> {
        self.writable()?;
        self.ns().mkdir(parent, name, mode, uid, gid)
    }

    /// Creates a node as `node` describes (umask, or the parent's default ACL).
    pub fn create_node(&self, parent: Ino, name: &[u8], node: &NewNode) -> Result<Attr> {
        self.writable()?;
        self.ns().create_node(parent, name, node)
    }

    /// Creates an unnamed regular file in `parent` (`O_TMPFILE`), open once: see
    /// [`FileSystem::tmpfile`].
    pub fn tmpfile(&self, parent: Ino, node: &NewNode) -> Result<Attr> {
        self.writable()?;
        self.ns().tmpfile(parent, node)
    }

    /// Creates a symbolic link `name` in `parent` pointing at `target`.
    pub fn symlink(
        &self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        self.writable()?;
        // The target's block is a data block: when none is free, files' spares and
        // LAWN's chunks (free to statfs) are given back and the link tried again
        // (a failed symlink changed nothing).
        self.data
            .with_reclaim(1, || self.ns().symlink(parent, name, target, uid, gid))
    }

    /// Removes the non-directory `name` from `parent` (the inode is freed when its
    /// last link, open handle and frontend reference are gone).
    pub fn unlink(&self, parent: Ino, name: &[u8]) -> Result<()> {
        self.writable()?;
        self.ns().unlink(parent, name)
    }

    /// Removes the empty directory `name` from `parent`.
    pub fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<()> {
        self.writable()?;
        self.ns().rmdir(parent, name)
    }

    /// Adds the hard link `newname` in `newparent` to the non-directory `ino`.
    pub fn link(&self, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> {
        self.writable()?;
        self.ns().link(ino, newparent, newname)
    }

    /// Renames `on` in `op` to `nn` in `np`, atomically (one journal transaction),
    /// with `RENAME_NOREPLACE` / `RENAME_EXCHANGE` semantics from `flags`.
    pub fn rename(&self, op: Ino, on: &[u8], np: Ino, nn: &[u8], flags: RenameFlags) -> Result<()> {
        self.writable()?;
        self.ns().rename(op, on, np, nn, flags)
    }

    /// The target of symbolic link `ino`.
    pub fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.ns().readlink(ino)
    }

    /// The value of extended attribute `name` (`NoData` when there is none).
    pub fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.ns().getxattr(ino, name)
    }

    /// The extended attribute names of `ino`, each followed by a NUL.
    pub fn listxattr(&self, ino: Ino) -> Result<Vec<u8>> {
        self.ns().listxattr(ino)
    }

    /// Sets extended attribute `name` (`flags`: `XATTR_CREATE`, `XATTR_REPLACE`).
    pub fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        self.writable()?;
        self.ns().setxattr(ino, name, value, flags)
    }

    /// Removes extended attribute `name` (`NoData` when there is none).
    pub fn removexattr(&self, ino: Ino, name: &[u8]) -> Result<()> {
        self.writable()?;
        self.ns().removexattr(ino, name)
    }

    /// Up to `max` entries of directory `ino` after position `offset` (0: from the
    /// start; each entry carries the offset to continue after it).
    pub fn readdir(&self, ino: Ino, offset: u64, max: usize) -> Result<Vec<DirEntry>> {
        self.ns().readdir(ino, offset, max)
    }

    /// The attributes of `ino`.
    pub fn getattr(&self, ino: Ino) -> Result<Attr> {
        self.ns().getattr(ino)
    }

    /// Changes the attributes `req` names; a size change truncates or extends.
    pub fn setattr(&self, ino: Ino, req: &SetAttr) -> Result<Attr> {
        self.writable()?;
        // Its commit's log page may find even the metadata reserve used up (a
        // shrink's copy of its last page borrows from it): then the spares and
        // LAWN's chunks are given back and the change tried again (a failed setattr
        // changed nothing).
        self.data.with_reclaim(1, || self.ns().setattr(ino, req))
    }

    /// File-system-wide space and inode figures (`statfs(2)`).
    pub fn statfs(&self) -> StatFs {
        self.ns().statfs()
    }

    // ------------------------------------------------------------------ data --

    /// Reads up to `buf.len()` bytes at `offset` of `ino`; returns the bytes read
    /// (fewer at the end of the file, 0 past it).
    pub fn read(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let inode = self.table.get(ino)?;
        let n = self.data.read(&inode, offset, buf)?;
        self.data.touch_atime(&inode, None);
        Ok(n)
    }

    /// Writes `data` at `offset` of `ino`; returns the bytes written. Durable and
    /// atomic on return.
    pub fn write(&self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize> {
        self.writable()?;
        let inode = self.table.get(ino)?;
        may_write(&inode, false)?;
        self.data.write(&inode, Some(offset), data).map(|(_, n)| n)
    }

    /// O_APPEND: writes at the end of file atomically; returns the offset written at.
    pub fn append(&self, ino: Ino, data: &[u8]) -> Result<u64> {
        self.writable()?;
        let inode = self.table.get(ino)?;
        may_write(&inode, true)?;
        self.data.write(&inode, None, data).map(|(off, _)| off)
    }

    /// `read` through an open handle (no inode-table lookup).
    pub fn handle_read(&self, h: &FileHandle, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let n = self.data.read(&h.inode, offset, buf)?;
        self.data.touch_atime(&h.inode, None);
        Ok(n)
    }

    /// `write` through an open handle (no inode-table lookup).
    pub fn handle_write(&self, h: &FileHandle, offset: u64, data: &[u8]) -> Result<usize> {
        self.writable()?;
        may_write(&h.inode, false)?;
        self.data
            .write(&h.inode, Some(offset), data)
            .map(|(_, n)| n)
    }

    /// `mode`: 0 or `FALLOC_FL_KEEP_SIZE` (allocate zeroed pages for holes),
    /// `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE` (deallocate).
    pub fn fallocate(&self, ino: Ino, offset: u64, len: u64, mode: i32) -> Result<()> {
        self.writable()?;
        // Linux's vfs_fallocate: nothing on an immutable file; on an append-only
        // one, only allocation within the size.
        let f = self.table.get(ino)?.index.inode_flags();
        if f & inode_flags::IMMUTABLE != 0
            || (f & inode_flags::APPEND != 0 && mode & !libc::FALLOC_FL_KEEP_SIZE != 0)
        {
            return Err(FsError::NotPermitted);
        }
        self.data.fallocate(&self.table, ino, offset, len, mode)
    }

    /// Every returned operation is already durable; kept for API symmetry.
    pub fn fsync(&self, ino: Ino) -> Result<()> {
        self.table.get(ino).map(|_| ())
    }

    /// Writes every LAWN zone slice back to its file page and clears its descriptor
    /// (contents do not change). Returns the runs written back (0 outside LAWN).
    pub fn lawn_writeback(&self) -> u64 {
        self.data.lawn_writeback()
    }

    /// One pass of LAWN zone growth and shrinking, as the write-back thread makes
    /// them (mounts without the thread, the crash explorer): grows sub-zones below
    /// a quarter free while space allows, gives empty chunks back, empties chunks
    /// while files are short of space. Returns the chunks the zone holds after.
    pub fn lawn_resize(&self) -> u64 {
        self.data.lawn_resize()
    }

    // ------------------------------------------------------------ references --

    /// Pins the inode: an unlinked file stays readable and writable until `release`.
    pub fn open(&self, ino: Ino) -> Result<()> {
        self.table.open(ino).map(|_| ())
    }

    /// Opens `ino` like [`open`](Self::open) and returns a handle that holds the
    /// inode, so that [`handle_read`](Self::handle_read) and
    /// [`handle_write`](Self::handle_write) skip the inode-table lookup (a kernel's
    /// `struct file`). Give it back with [`close_handle`](Self::close_handle).
    pub fn open_handle(&self, ino: Ino) -> Result<FileHandle> {
        Ok(FileHandle {
            inode: self.table.open(ino)?,
        })
    }

    /// Closes a handle from [`open_handle`](Self::open_handle) (like `release`).
    pub fn close_handle(&self, h: FileHandle) -> Result<()> {
        self.release(h.inode.ino)
    }

    /// Drops an [`open`](Self::open) pin; an unlinked file is freed with its last.
    pub fn release(&self, ino: Ino) -> Result<()> {
        self.table.release(&self.store, ino)
    }

    /// Records that a frontend handed out a reference to `ino` (a FUSE entry reply:
    /// lookup, create, mkdir, mknod, symlink, link). Until the matching `forget`, an
    /// unlinked inode keeps its number (and its data, so the kernel can still read it).
    pub fn remember(&self, ino: Ino) {
        self.table.remember(ino)
    }

    /// Drops `n` references taken with `remember`.
    pub fn forget(&self, ino: Ino, n: u64) {
        self.table.forget(&self.store, ino, n)
    }

    // ------------------------------------------- cluster (metadata server) --

    /// Takes `blocks` data blocks out of the free space for a cluster client to
    /// write into (DESIGN.md §7: space delegation). Nothing on PM records them: a
    /// crash or a remount gives back whatever no commit mapped. Runs in allocation
    /// order; `NoSpace` when the volume cannot hold them.
    pub fn delegate(&self, blocks: u64) -> Result<Vec<(u64, u64)>> {
        self.writable()?;
        if blocks == 0 {
            return Ok(Vec::new());
        }
        self.data
            .with_reclaim(blocks, || self.store.space.alloc(blocks, false))
            .map(|r| r.to_vec())
    }

    /// Gives back delegated blocks no commit used (a client's lease expired, or it
    /// returned them). The caller vouches that they came from [`delegate`](Self::delegate)
    /// and are mapped by no file.
    pub fn reclaim_delegated(&self, runs: &[(u64, u64)]) {
        self.store.space.free_runs(runs);
    }

    /// The layout of pages `[first, first + n)` of regular file `ino`: its size and
    /// the block of each page (0: hole), for a cluster client that reads the blocks
    /// itself. Only on a mount without a small-write mode.
    pub fn layout(&self, ino: Ino, first: u64, n: u64) -> Result<crate::data::extent::Layout> {
        let inode = self.table.get(ino)?;
        self.data.layout(&inode, first, n)
    }

    /// Commits delegated blocks `runs`, whose contents a cluster client made durable,
    /// as pages `first..` of regular file `ino`, whose bytes then reach at least `end`:
    /// one log commit (entries, tail), then the replaced blocks are freed. The blocks
    /// are consumed either way: mapped on success, freed on failure.
    pub fn commit_extent(&self, ino: Ino, first: u64, end: u64, runs: &[(u64, u64)]) -> Result<()> {
        self.writable()?;
        let inode = match self.table.get(ino) {
            Ok(i) => i,
            Err(e) => {
                self.store.space.free_runs(runs);
                return Err(e);
            }
        };
        self.data.commit_extent(&inode, first, end, runs)
    }

    /// The UUID of the volume (its device table), which a cluster client checks
    /// against the devices it maps; `None` for an image of a format before devices.
    pub fn volume_uuid(&self) -> Option<[u8; 16]> {
        crate::devices::read_table(&self.store.vol, crate::format::TABLE_OFF)
            .ok()
            .flatten()
            .map(|t| t.uuid)
    }

    // ----------------------------------------------------------- inspection --

    /// The image's geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.store.geo
    }

    /// The volume's devices, in index order.
    pub fn devices(&self) -> &[DeviceInfo] {
        &self.devices
    }

    /// Each device with its data and free blocks.
    fn device_stats(&self) -> Vec<DeviceStats> {
        let geo = &self.store.geo;
        let free = self.store.space.extents();
        self.devices
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let (lo, hi) = geo.device_data(i);
                let free_blocks = free
                    .iter()
                    .map(|&(s, l)| {
                        let (a, b) = (s.max(lo), s.saturating_add(l).min(hi));
                        b.saturating_sub(a)
                    })
                    .sum();
                DeviceStats {
                    index: d.index,
                    path: d.path.display().to_string(),
                    node: d.node,
                    start: d.start,
                    blocks: d.blocks,
                    data_blocks: hi.saturating_sub(lo),
                    free_blocks,
                    inodes: if i == 0 {
                        geo.inode_count
                    } else {
                        geo.dev_inodes.get(i).copied().unwrap_or(0)
                    },
                    inodes_free: self.table.free_count_on(i),
                }
            })
            .collect()
    }

    /// Space, inode, log and PM-counter figures of the mount.
    pub fn stats(&self) -> FsStats {
        let s = &*self.store;
        let c = s.vol.counters();
        let mut log_pages = 0;
        let mut data_pages = 0;
        for inode in self.table.all() {
            let st = inode.state.lock();
            log_pages += st.log.pages.len() as u64;
            data_pages += st.pages.len() as u64;
        }
        let sw = self.data.stats();
        let rc = self.data.read_cache_stats().unwrap_or_default();
        let lawn_mode = matches!(self.data.small(), SmallWrite::Lawn(_));
        let map = s.vol.map_report();
        FsStats {
            size_bytes: BlockNo(s.geo.total_blocks).off().get(),
            block_size: BLOCK as u32,
            total_blocks: s.geo.total_blocks,
            data_blocks: s.geo.data_blocks(),
            free_blocks: s.space.free_blocks(),
            spare_blocks: s.space.spares(),
            free_blocks_per_cpu: s.space.per_cpu_free(),
            devices: self.device_stats(),
            placement: s.space.placement().mode().name().to_string(),
            cpus: s.geo.cpus,
            inodes_total: s.geo.inodes(),
            inodes_used: self.table.used(),
            log_pages,
            data_pages,
            pm_bytes_written: c.bytes_written,
            pm_flushes: c.flushes,
            pm_fences: c.fences,
            flush_instruction: s.vol.flush_kind().name().to_string(),
            host: pm::HostChoices::get().map_or_else(|e| e.to_string(), |h| h.summary()),
            map_mode: format!("{:?}", s.vol.map_mode()),
            map_pages: map.pages.name().to_string(),
            map_pmd_bytes: map.pmd_bytes,
            map_resident_bytes: map.resident_bytes,
            map_summary: map.to_string(),
            lock_mode: self.opts.lock.name().to_string(),
            small_write_mode: self.opts.small_write.name().to_string(),
            clean_mount: self.clean_mount,
            max_concurrent_writers: self.data.writers_max(),
            contention: crate::contention::snapshot(),
            lawn_slot_size: s.geo.slot_size,
            // (Outside LAWN no descriptor is ever stored; the field says what a
            // LAWN mount with these options would start from.)
            lawn_desc_store: sw
                .desc_store
                .or(self.opts.lawn_desc_store)
                .unwrap_or(pm::Store16::NonTemporal)
                .name()
                .to_string(),
            lawn_slots_used: sw.slots_used,
            lawn_slots_free: if lawn_mode {
                sw.slots_free
            } else {
                s.geo.zone_slots
            },
            lawn_chunk_blocks: sw.chunk_blocks,
            lawn_chunks_grown: sw.chunks_grown,
            lawn_chunks_shrunk: sw.chunks_shrunk,
            lawn_zone_writes: sw.zone_writes,
            lawn_file_writes: sw.file_writes,
            lawn_writebacks: sw.writebacks,
            finelog_writes: sw.finelog_writes,
            small_write_fallbacks: sw.fallbacks,
            medium: self.medium.why.clone(),
            read_only: self.is_read_only(),
            label: String::from_utf8_lossy(&self.label()).into_owned(),
            atime: AtimeMode::ALL
                .iter()
                .find(|(_, m)| *m == self.data.atime_mode())
                .map_or("relatime", |(n, _)| n)
                .to_string(),
            read_cache_mode: self.opts.read_cache.name().to_string(),
            read_cache_bytes: rc.bytes,
            read_cache_pages: rc.ready,
            read_cache_hits: rc.hits,
            read_cache_misses: rc.misses,
            read_cache_inserts: rc.inserts,
            read_cache_copies: rc.copies,
            read_cache_evictions: rc.evictions,
            read_cache_invalidations: rc.invalidations,
            read_cache_dropped: rc.dropped,
        }
    }

    /// PM counters of the whole mount.
    pub fn pm_counters(&self) -> pm::CounterSnapshot {
        self.store.vol.counters()
    }

    /// PM counters of the calling thread (exact even while other threads work).
    pub fn thread_counters(&self) -> pm::CounterSnapshot {
        self.store.vol.thread_counters()
    }

    /// Passes an operation marker to the region's tracer (the crash explorer's
    /// operation boundaries); no effect on PM.
    pub fn marker(&self, m: pm::Marker) {
        self.store.vol.marker(m)
    }

    /// The PM latency profile charged on this mount.
    pub fn pm_profile(&self) -> pm::PmProfile {
        self.store.vol.profile()
    }

    /// How the image is mapped.
    pub fn map_mode(&self) -> pm::MapMode {
        self.store.vol.map_mode()
    }

    /// Which pages map the image (2 MiB or 4 KiB), measured from `/proc/self/smaps`.
    pub fn map_report(&self) -> pm::MapReport {
        self.store.vol.map_report()
    }

    /// Maps every page of the image in now, writable (`MADV_POPULATE_WRITE`), so
    /// that no later access takes a first-touch fault (on a DRAM-backed image:
    /// allocation and zero-fill, which real PM does not have). Contents do not change.
    pub fn prefault(&self) {
        let len = self.store.vol.len();
        self.store.vol.populate(crate::addr::PmOff::ZERO, len);
    }

    /// The cache-line write-back instruction in use.
    pub fn flush_kind(&self) -> pm::FlushKind {
        self.store.vol.flush_kind()
    }

    /// DRAM bytes of range-lock words allocated for `ino` (segment lock mode; 0 in the
    /// other modes).
    pub fn lock_memory(&self, ino: Ino) -> Result<u64> {
        Ok(self.table.get(ino)?.data.lock_bytes() as u64)
    }

    /// How many more of `ino`'s page-CoW writes keep to the concurrent append
    /// (`interval`/`segment` modes) since another writer of the file was last seen;
    /// 0: a writer alone with the file takes the locked append.
    pub fn write_contention(&self, ino: Ino) -> Result<u32> {
        Ok(self
            .table
            .get(ino)?
            .contended
            .load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Bytes of log pages held by `ino`'s log.
    pub fn log_bytes(&self, ino: Ino) -> Result<u64> {
        let (_i, st) = self.table.lock(ino)?;
        Ok(st.log.bytes())
    }

    /// The blocks holding `ino`'s data pages (in page order) and its log pages —
    /// where placement put them (`Geometry::device_of` names the device).
    pub fn file_blocks(&self, ino: Ino) -> Result<(Vec<u64>, Vec<u64>)> {
        let (_i, st) = self.table.lock(ino)?;
        let data = st.data_blocks().collect();
        Ok((data, st.log.pages.to_vec()))
    }

    /// Free blocks of each device.
    pub fn device_free_blocks(&self) -> Vec<u64> {
        self.store.space.per_device_free()
    }

    /// The devices with no free block (MBS-LVM's FatNode list).
    pub fn fat_devices(&self) -> Vec<usize> {
        self.store.space.fat_devices()
    }
}

/// The engine interface over the local engine: each call is the inherent method.
impl FileSystem for Fs {
    type Handle = FileHandle;
    type Stats = FsStats;

    #[inline]
    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        Fs::lookup(self, parent, name)
    }

    #[inline]
    fn getattr(&self, ino: Ino) -> Result<Attr> {
        Fs::getattr(self, ino)
    }

    #[inline]
    fn setattr(&self, ino: Ino, req: &SetAttr) -> Result<Attr> {
        Fs::setattr(self, ino, req)
    }

    #[inline]
    fn mknod(
        &self,
        parent: Ino,
        name: &[u8],
        mode: u32,
        rdev: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        Fs::mknod(self, parent, name, mode, rdev, uid, gid)
    }

    #[inline]
    fn create(&self, parent: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> {
        Fs::create(self, parent, name, mode, uid, gid)
    }

    #[inline]
    fn mkdir(&self, parent: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> {
        Fs::mkdir(self, parent, name, mode, uid, gid)
    }

    #[inline]
    fn create_node(&self, parent: Ino, name: &[u8], node: &NewNode) -> Result<Attr> {
        Fs::create_node(self, parent, name, node)
    }

    #[inline]
    fn tmpfile(&self, parent: Ino, node: &NewNode) -> Result<Attr> {
        Fs::tmpfile(self, parent, node)
    }

    #[inline]
    fn symlink(&self, parent: Ino, name: &[u8], target: &[u8], uid: u32, gid: u32) -> Result<Attr> {
        Fs::symlink(self, parent, name, target, uid, gid)
    }

    #[inline]
    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        Fs::readlink(self, ino)
    }

    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        Fs::getxattr(self, ino, name)
    }

    fn listxattr(&self, ino: Ino) -> Result<Vec<u8>> {
        Fs::listxattr(self, ino)
    }

    fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        Fs::setxattr(self, ino, name, value, flags)
    }

    fn removexattr(&self, ino: Ino, name: &[u8]) -> Result<()> {
        Fs::removexattr(self, ino, name)
    }

    #[inline]
    fn unlink(&self, parent: Ino, name: &[u8]) -> Result<()> {
        Fs::unlink(self, parent, name)
    }

    #[inline]
    fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<()> {
        Fs::rmdir(self, parent, name)
    }

    #[inline]
    fn link(&self, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> {
        Fs::link(self, ino, newparent, newname)
    }

    #[inline]
    fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        Fs::rename(self, parent, name, newparent, newname, flags)
    }

    #[inline]
    fn readdir(&self, ino: Ino, offset: u64, max: usize) -> Result<Vec<DirEntry>> {
        Fs::readdir(self, ino, offset, max)
    }

    #[inline]
    fn read(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        Fs::read(self, ino, offset, buf)
    }

    #[inline]
    fn write(&self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize> {
        Fs::write(self, ino, offset, data)
    }

    #[inline]
    fn append(&self, ino: Ino, data: &[u8]) -> Result<u64> {
        Fs::append(self, ino, data)
    }

    #[inline]
    fn fallocate(&self, ino: Ino, offset: u64, len: u64, mode: i32) -> Result<()> {
        Fs::fallocate(self, ino, offset, len, mode)
    }

    #[inline]
    fn open(&self, ino: Ino) -> Result<()> {
        Fs::open(self, ino)
    }

    #[inline]
    fn release(&self, ino: Ino) -> Result<()> {
        Fs::release(self, ino)
    }

    #[inline]
    fn open_handle(&self, ino: Ino) -> Result<FileHandle> {
        Fs::open_handle(self, ino)
    }

    #[inline]
    fn close_handle(&self, h: FileHandle) -> Result<()> {
        Fs::close_handle(self, h)
    }

    #[inline]
    fn handle_read(&self, h: &FileHandle, offset: u64, buf: &mut [u8]) -> Result<usize> {
        Fs::handle_read(self, h, offset, buf)
    }

    #[inline]
    fn handle_write(&self, h: &FileHandle, offset: u64, data: &[u8]) -> Result<usize> {
        Fs::handle_write(self, h, offset, data)
    }

    #[inline]
    fn remember(&self, ino: Ino) {
        Fs::remember(self, ino)
    }

    #[inline]
    fn forget(&self, ino: Ino, n: u64) {
        Fs::forget(self, ino, n)
    }

    #[inline]
    fn fsync(&self, ino: Ino) -> Result<()> {
        Fs::fsync(self, ino)
    }

    #[inline]
    fn statfs(&self) -> StatFs {
        Fs::statfs(self)
    }

    fn remount(&self, read_only: bool, atime: AtimeMode) -> Result<()> {
        Fs::remount(self, read_only, atime)
    }

    fn atime_mode(&self) -> AtimeMode {
        self.data.atime_mode()
    }

    fn inode_flags(&self, ino: Ino) -> Result<u32> {
        Fs::inode_flags(self, ino)
    }

    fn trim(&self, start: u64, len: u64, min_len: u64) -> Result<u64> {
        Fs::trim(self, start, len, min_len)
    }

    fn label(&self) -> Result<Vec<u8>> {
        Ok(Fs::label(self))
    }

    fn set_label(&self, label: &[u8]) -> Result<()> {
        Fs::set_label(self, label)
    }

    fn set_inode_flags(&self, ino: Ino, flags: u32) -> Result<()> {
        Fs::set_inode_flags(self, ino, flags)
    }

    fn atime_due(&self, ino: Ino) -> bool {
        self.table
            .get(ino)
            .is_ok_and(|inode| self.data.atime_due(&inode))
    }

    #[inline]
    fn stats(&self) -> FsStats {
        Fs::stats(self)
    }

    #[inline]
    fn pm_counters(&self) -> pm::CounterSnapshot {
        Fs::pm_counters(self)
    }

    #[inline]
    fn unmount(self) -> Result<()> {
        Fs::unmount(self)
    }
}
