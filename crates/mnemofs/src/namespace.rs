//! Namespace operations: lookup, create/mknod/mkdir/symlink, unlink, rmdir, link,
//! rename, readdir, readlink.
//!
//! Every operation that touches several inodes appends its entries to each log and
//! commits them together through the lite journal (`Store::commit`). Inodes are locked in
//! ascending inode order; an operation that must look a name up first looks, unlocks,
//! locks everything in order and checks that the name still means the same inode.

use crate::acl::{is_acl_name, Acl, ACL_ACCESS, ACL_DEFAULT, XATTR_ACL_KILL_SGID};
use crate::addr::{BlockNo, PmOff};
use crate::bugs::{self, Bug};
use crate::data::{DataPlane, MAX_FILE_SIZE};
use crate::error::{FsError, Result};
use crate::format::{
    xattr_namespace, xattr_set_entries, Entry, BLOCK, DENTRY_ADD, DENTRY_REMOVE, INO_VALID_OFF,
    XATTR_FLAGS, XATTR_REMOVE, XATTR_SIZE_MAX, XATTR_VALUE_MAX,
};
use crate::inode::{DirSlot, Inode, InodeState, FIRST_COOKIE};
use crate::itable::{Guard, InodeTable};
use crate::store::Store;
use crate::types::*;
use parking_lot::Mutex;
use std::sync::Arc;

type Locked = Vec<(Arc<Inode>, Guard)>;

fn check_name(name: &[u8]) -> Result<()> {
    if name.len() > NAME_MAX {
        return Err(FsError::NameTooLong);
    }
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
        return Err(FsError::Invalid("file name"));
    }
    if name == b"." || name == b".." {
        return Err(FsError::Exists);
    }
    Ok(())
}

fn st(locked: &Locked, ino: Ino) -> &InodeState {
    let i = locked.iter().position(|(n, _)| n.ino == ino).unwrap_or(0);
    &locked[i].1
}

fn st_mut(locked: &mut Locked, ino: Ino) -> &mut InodeState {
    let i = locked.iter().position(|(n, _)| n.ino == ino).unwrap_or(0);
    &mut locked[i].1
}

/// Bytes of names and values one inode's extended attributes may hold in all (they
/// are kept in DRAM while the file system is mounted): four values of Linux's
/// largest size.
pub(crate) const XATTR_TOTAL_MAX: usize = 256 << 10;

/// An extended attribute name the file system takes: 1..=255 bytes (ERANGE
/// otherwise, as Linux), no NUL, in a namespace mnemofs stores (EOPNOTSUPP).
fn check_xattr_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name.len() > 255 {
        return Err(FsError::Range);
    }
    if name.contains(&0) || xattr_namespace(name).is_none() || name == XATTR_FLAGS {
        return Err(FsError::Unsupported("extended attribute namespace"));
    }
    Ok(())
}

/// EPERM when `st`'s flags forbid changing the inode itself (immutable or
/// append-only): its attributes, names, links and attributes, as Linux's VFS
/// refuses them.
fn unlocked(st: &InodeState) -> Result<()> {
    if st.index.inode_flags() & inode_flags::LOCKED != 0 {
        return Err(FsError::NotPermitted);
    }
    Ok(())
}

/// EPERM when directory `st` is immutable (no name may be added or removed).
fn dir_writable(st: &InodeState) -> Result<()> {
    if st.index.inode_flags() & inode_flags::IMMUTABLE != 0 {
        return Err(FsError::NotPermitted);
    }
    Ok(())
}

/// ENOSPC unless `name` set to a value of `len` bytes keeps all of the inode's
/// attributes within 64 KiB of names and values.
fn xattr_room(s: &InodeState, name: &[u8], len: usize) -> Result<()> {
    let total: usize = s
        .xattrs
        .iter()
        .filter(|(n, _)| n.as_slice() != name)
        .map(|(n, (v, _))| n.len() + v.len())
        .sum();
    if total + name.len() + len > XATTR_TOTAL_MAX {
        return Err(FsError::NoSpace);
    }
    Ok(())
}

/// The Xattr entries that set `name` to `value` (a SET, and continuations for a
/// value longer than one entry holds: `xattr_set_entries`).
fn xattr_set(name: &[u8], value: Vec<u8>, ctime: Timespec) -> Vec<Entry> {
    xattr_set_entries(name, &value, ctime)
}

fn dir_slot(s: &InodeState, name: &[u8]) -> Result<Option<DirSlot>> {
    let dir = s.dir.as_ref().ok_or(FsError::NotDir)?;
    Ok(dir.names.get(name).cloned())
}

/// Appends each inode's planned entries and commits them together.
fn commit_locked(
    data: &DataPlane,
    locked: &mut Locked,
    plan: Vec<(Ino, Vec<Entry>)>,
    extra: &[(PmOff, u64)],
) -> Result<()> {
    commit_locked_with(data, locked, plan, None, extra)
}

/// [`commit_locked`], plus the entries of an inode being created (not in the table
/// yet) in the same commit.
fn commit_locked_with(
    data: &DataPlane,
    locked: &mut Locked,
    mut plan: Vec<(Ino, Vec<Entry>)>,
    new: Option<(&mut InodeState, Vec<Entry>)>,
    extra: &[(PmOff, u64)],
) -> Result<()> {
    let mut parts: Vec<(&mut InodeState, Vec<Entry>)> = Vec::new();
    for (inode, g) in locked.iter_mut() {
        let mut mine = Vec::new();
        plan.retain_mut(|(i, e)| {
            if *i == inode.ino {
                mine.append(e);
                false
            } else {
                true
            }
        });
        if !mine.is_empty() {
            parts.push((&mut **g, mine));
        }
    }
    parts.extend(new);
    data.commit(&mut parts, extra)
}

/// Largest link count.
pub(crate) const LINK_MAX: u32 = 65000;

/// The namespace operations of a mount, over the pieces they use.
pub(crate) struct Namespace<'a> {
    /// Volume, geometry, space, journals, log commit.
    pub store: &'a Store,
    /// Live inodes.
    pub table: &'a InodeTable,
    /// File data (truncation, frees through the invalidation point).
    pub data: &'a DataPlane,
    /// Serializes renames (like the VFS rename mutex) so that directory-loop checks
    /// see a stable tree.
    pub rename_lock: &'a Mutex<()>,
}

impl Namespace<'_> {
    /// The attributes of `ino`.
    pub fn getattr(&self, ino: Ino) -> Result<Attr> {
        let (_i, st) = self.table.lock(ino)?;
        Ok(st.attr())
    }

    /// Changes the attributes `req` names (a size change truncates or extends).
    pub fn setattr(&self, ino: Ino, req: &SetAttr) -> Result<Attr> {
        // A time the format cannot hold (recovery refuses nanoseconds ≥ 10^9).
        if [req.atime, req.mtime, req.ctime]
            .iter()
            .flatten()
            .any(|t| t.nsec >= 1_000_000_000)
        {
            return Err(FsError::Invalid("nanoseconds of a time must be below 10^9"));
        }
        let inode = self.table.get(ino)?;
        // The whole file: a setattr entry is a full snapshot (size included), so no
        // concurrent data write may sit between its snapshot and its commit — replay
        // (log order) and run time (completion order) would disagree on the size.
        let _d = inode.data.write(0, u64::MAX);
        let mut st = inode.state.lock_arc();
        if st.dead {
            return Err(FsError::NotFound);
        }
        // Linux's may_setattr and vfs_truncate: an immutable or append-only inode
        // keeps its mode, owner, chosen times and size; times set to now pass on
        // an append-only one (a change of ctime alone is the kernel's own
        // bookkeeping and passes).
        let times = req.atime.is_some() || req.mtime.is_some();
        let f = st.index.inode_flags();
        if (req.mode.is_some()
            || req.uid.is_some()
            || req.gid.is_some()
            || req.size.is_some()
            || (times && !req.times_now))
            && f & inode_flags::LOCKED != 0
        {
            return Err(FsError::NotPermitted);
        }
        if times && f & inode_flags::IMMUTABLE != 0 {
            return Err(FsError::NotPermitted);
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
                if let Some((e, block)) = self.data.cow_zero_tail(&st, size)? {
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
            match (req.mtime, req.size) {
                (Some(m), _) => *mtime = m,
                // A truncate (the size set, changed or not, as truncate(2),
                // ftruncate(2) and O_TRUNC do) updates mtime too; the kernel does
                // not always send one (POSIX: both times on a size change).
                (None, Some(_)) => *mtime = now,
                (None, None) => {}
            }
            *ctime = req.ctime.unwrap_or(now);
        }
        // A chmod rewrites the access ACL's owner, mask (or group) and other
        // entries in the same commit (Linux's posix_acl_chmod).
        if let (Some(m), Some((v, _))) = (req.mode, st.xattrs.get(ACL_ACCESS)) {
            // One that does not decode (a damaged image; fsck names it) is left.
            if let Ok(Some(mut acl)) = Acl::decode(v) {
                acl.chmod(m);
                entries.extend(xattr_set(ACL_ACCESS, acl.encode(), now));
            }
        }
        entries.push(snap);
        if let Err(e) = self.data.commit(&mut [(&mut *st, entries)], &[]) {
            if let Some(b) = cow_block {
                self.store.space.free_run(b, 1);
            }
            return Err(e);
        }
        Ok(st.attr())
    }

    pub fn statfs(&self) -> StatFs {
        // The LAWN zone's chunks are given back when files need them: free.
        let zone = self.data.reclaimable_blocks();
        let free = self.store.space.free_blocks().saturating_add(zone);
        let ifree = self.table.free_count();
        StatFs {
            block_size: BLOCK as u32,
            blocks: self.store.geo.data_blocks(),
            blocks_free: free,
            blocks_avail: self.store.space.available().saturating_add(zone),
            files: self.store.geo.inodes(),
            files_free: ifree,
            name_max: NAME_MAX as u32,
        }
    }

    pub fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        if name.len() > NAME_MAX {
            return Err(FsError::NameTooLong);
        }
        let (_p, ps) = self.table.lock(parent)?;
        let dir = ps.dir.as_ref().ok_or(FsError::NotDir)?;
        if name == b"." {
            return Ok(ps.attr());
        }
        let target = if name == b".." {
            ps.parent
        } else {
            dir.names.get(name).ok_or(FsError::NotFound)?.ino
        };
        drop(ps);
        self.getattr(target)
    }

    /// `mode` includes the `S_IFMT` bits (regular, fifo, socket, char/block device).
    pub fn mknod(
        &self,
        parent: Ino,
        name: &[u8],
        mode: u32,
        rdev: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        let kind = FileKind::from_mode(mode).ok_or(FsError::Invalid("file type"))?;
        match kind {
            FileKind::Directory | FileKind::Symlink => {
                return Err(FsError::Invalid("mknod of a directory or symlink"))
            }
            _ => {}
        }
        self.make_node(parent, Some(name), kind, mode, 0, rdev, uid, gid, None)
    }

    /// Creates a regular file, directory or special node as `n` describes: the
    /// umask applies unless `parent` has a default ACL, which then gives the node
    /// its access ACL (and a directory its default ACL) in the same commit.
    pub fn create_node(&self, parent: Ino, name: &[u8], n: &NewNode) -> Result<Attr> {
        let kind = FileKind::from_mode(n.mode).ok_or(FsError::Invalid("file type"))?;
        if kind == FileKind::Symlink {
            return Err(FsError::Invalid("create_node of a symlink"));
        }
        self.make_node(
            parent,
            Some(name),
            kind,
            n.mode,
            n.umask & 0o777,
            n.rdev,
            n.uid,
            n.gid,
            None,
        )
    }

    /// Creates an unnamed regular file in directory `parent` (Linux's `O_TMPFILE`),
    /// as `n` describes (owner, umask or the parent's default ACL, the group of a
    /// set-group-ID parent): link count 0, one commit of its own log, nothing in the
    /// parent. It is returned open (one `open` pin, dropped with `release`) and
    /// `linkable`: `link` may give it a first name; otherwise it is freed with its
    /// last pin, and recovery frees it after a crash.
    pub fn tmpfile(&self, parent: Ino, n: &NewNode) -> Result<Attr> {
        if FileKind::from_mode(n.mode) != Some(FileKind::Regular) {
            return Err(FsError::Invalid("tmpfile of a non-regular file"));
        }
        self.make_node(
            parent,
            None,
            FileKind::Regular,
            n.mode,
            n.umask & 0o777,
            0,
            n.uid,
            n.gid,
            None,
        )
    }

    /// Creates a regular file; `mode` holds the permission bits.
    pub fn create(&self, parent: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> {
        self.make_node(
            parent,
            Some(name),
            FileKind::Regular,
            mode,
            0,
            0,
            uid,
            gid,
            None,
        )
    }

    pub fn mkdir(&self, parent: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> {
        self.make_node(
            parent,
            Some(name),
            FileKind::Directory,
            mode,
            0,
            0,
            uid,
            gid,
            None,
        )
    }

    pub fn symlink(
        &self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        if target.is_empty() {
            return Err(FsError::NotFound);
        }
        if target.len() > SYMLINK_MAX {
            return Err(FsError::NameTooLong);
        }
        self.make_node(
            parent,
            Some(name),
            FileKind::Symlink,
            0o777,
            0,
            0,
            uid,
            gid,
            Some(target),
        )
    }

    /// Creates a node named `name` in `parent`; an unnamed, linkable, open regular
    /// file with `None` (`tmpfile`).
    #[allow(clippy::too_many_arguments)]
    fn make_node(
        &self,
        parent: Ino,
        name: Option<&[u8]>,
        kind: FileKind,
        mode: u32,
        umask: u32,
        rdev: u32,
        uid: u32,
        mut gid: u32,
        target: Option<&[u8]>,
    ) -> Result<Attr> {
        if let Some(name) = name {
            check_name(name)?;
        }
        let (_pi, mut ps) = self.table.lock(parent)?;
        match name {
            Some(name) if dir_slot(&ps, name)?.is_some() => return Err(FsError::Exists),
            // Linux's vfs_tmpfile: only in a directory (the kernel checks write and
            // search permission).
            None if ps.kind != FileKind::Directory => return Err(FsError::NotDir),
            _ => {}
        }
        dir_writable(&ps)?;
        if ps.nlink == 0 {
            return Err(FsError::NotFound);
        }
        let is_dir = kind == FileKind::Directory;
        if is_dir && ps.nlink >= LINK_MAX {
            return Err(FsError::TooManyLinks);
        }
        let mut perm = mode & 0o7777;
        // BSD group semantics of a set-group-ID directory, as Linux has them.
        if ps.mode & libc::S_ISGID != 0 {
            gid = ps.gid;
            if is_dir {
                perm |= libc::S_ISGID;
            }
        }
        let now = Timespec::now();
        // POSIX ACL inheritance (Linux's posix_acl_create): a parent's default ACL
        // replaces the umask; symlinks take neither.
        let mut acl_entries = Vec::new();
        if kind != FileKind::Symlink {
            // One that does not decode (a damaged image; fsck names it) is as none.
            let default = ps
                .xattrs
                .get(ACL_DEFAULT)
                .and_then(|(v, _)| Acl::decode(v).ok().flatten());
            match default {
                Some(d) => {
                    let (access, m) = d.create_masq(perm);
                    perm = m;
                    if let Some(a) = access {
                        acl_entries.extend(xattr_set(ACL_ACCESS, a.encode(), now));
                    }
                    if is_dir {
                        acl_entries.extend(xattr_set(ACL_DEFAULT, d.encode(), now));
                    }
                }
                None => perm &= !umask,
            }
        }
        let ino = self.table.alloc_ino(&self.store.space.inode_order())?;
        let size = target.map(|t| t.len() as u64).unwrap_or(0);
        let mut centries = Vec::new();
        let mut data_block = None;
        if let Some(t) = target {
            let b = match self.store.space.alloc_one(false) {
                Ok(b) => b,
                Err(e) => {
                    self.table.release_ino(ino);
                    return Err(e);
                }
            };
            let mut page = vec![0u8; BLOCK as usize];
            page[..t.len()].copy_from_slice(t);
            self.store.vol.write_nt(BlockNo(b).off(), &page);
            data_block = Some(b);
            centries.push(Entry::Write {
                pgoff: 0,
                block: b,
                npages: 1,
                size_after: size,
                mtime: now,
            });
        }
        centries.push(Entry::SetAttr {
            mode: kind.mode_bits() | perm,
            uid,
            gid,
            rdev,
            size,
            atime: now,
            mtime: now,
            ctime: now,
            flags: 0,
        });
        centries.push(Entry::Link {
            nlink: match (name, is_dir) {
                (None, _) => 0,
                (Some(_), true) => 2,
                (Some(_), false) => 1,
            },
            ctime: now,
        });
        centries.extend(acl_entries);
        let cookie = ps
            .dir
            .as_ref()
            .map(|d| d.next_cookie)
            .unwrap_or(FIRST_COOKIE);
        let mut pentries = Vec::new();
        if let Some(name) = name {
            pentries.push(Entry::Dentry {
                op: DENTRY_ADD,
                ino,
                cookie,
                kind,
                time: now,
                name: name.to_vec(),
            });
        }
        if is_dir {
            pentries.push(Entry::Link {
                nlink: ps.nlink + 1,
                ctime: now,
            });
        }
        let generation = self.table.write_slot(&self.store.vol, ino, kind, Some(now));
        let mut cs = InodeState::new(ino, kind);
        cs.generation = generation;
        cs.btime = self.store.geo.btime.then_some(now);
        let valid = (self.store.geo.inode_off(ino) + INO_VALID_OFF, 1);
        if bugs::on(Bug::InodeValidInPlace) {
            self.store_persist(valid.0, 1);
        }
        let committed = if name.is_some() {
            self.data
                .commit(&mut [(&mut *ps, pentries), (&mut cs, centries)], &[valid])
        } else {
            // An unnamed file: its own log only; the parent does not change.
            self.data.commit(&mut [(&mut cs, centries)], &[valid])
        };
        if let Err(e) = committed {
            self.table.release_ino(ino);
            if let Some(b) = data_block {
                self.store.space.free_run(b, 1);
            }
            return Err(e);
        }
        if is_dir {
            cs.parent = parent;
        }
        self.table.store_btime_late(&self.store.vol, ino, now);
        cs.linkable = name.is_none();
        let attr = cs.attr();
        // Visible in the table before the parent's lock is released, so a lookup of
        // the new name always finds the inode.
        self.table.insert_inode(cs);
        if name.is_none() {
            // Open before anyone can reach it (nothing names it yet).
            self.table.open(ino)?;
        }
        drop(ps);
        Ok(attr)
    }

    pub fn unlink(&self, parent: Ino, name: &[u8]) -> Result<()> {
        self.remove(parent, name, false)
    }

    pub fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<()> {
        if name == b"." {
            return Err(FsError::Invalid("rmdir of '.'"));
        }
        if name == b".." {
            return Err(FsError::NotEmpty);
        }
        self.remove(parent, name, true)
    }

    fn remove(&self, parent: Ino, name: &[u8], want_dir: bool) -> Result<()> {
        if name.len() > NAME_MAX {
            return Err(FsError::NameTooLong);
        }
        loop {
            let slot = {
                let (_p, ps) = self.table.lock(parent)?;
                dir_slot(&ps, name)?.ok_or(FsError::NotFound)?
            };
            let is_dir = slot.kind == FileKind::Directory;
            if want_dir && !is_dir {
                return Err(FsError::NotDir);
            }
            if !want_dir && is_dir {
                return Err(FsError::IsDir);
            }
            let mut locked = self.table.lock_many(&[parent, slot.ino])?;
            if dir_slot(st(&locked, parent), name)?.map(|s| s.ino) != Some(slot.ino) {
                continue;
            }
            let ps = st(&locked, parent);
            let cs = st(&locked, slot.ino);
            // Nothing leaves an immutable or append-only directory, and an
            // immutable or append-only inode keeps its names.
            unlocked(ps)?;
            unlocked(cs)?;
            if is_dir && cs.dir.as_ref().is_some_and(|d| !d.names.is_empty()) {
                return Err(FsError::NotEmpty);
            }
            let now = Timespec::now();
            let mut pentries = vec![Entry::Dentry {
                op: DENTRY_REMOVE,
                ino: slot.ino,
                cookie: slot.cookie,
                kind: slot.kind,
                time: now,
                name: name.to_vec(),
            }];
            if is_dir {
                pentries.push(Entry::Link {
                    nlink: ps.nlink.saturating_sub(1),
                    ctime: now,
                });
            }
            let new_nlink = if is_dir {
                0
            } else {
                cs.nlink.saturating_sub(1)
            };
            let link = vec![Entry::Link {
                nlink: new_nlink,
                ctime: now,
            }];
            if new_nlink == 0 && bugs::on(Bug::FreeBeforeCommit) {
                self.store_persist(self.store.geo.inode_off(slot.ino) + INO_VALID_OFF, 0);
            }
            if bugs::on(Bug::LinkCountInPlace) {
                commit_locked(self.data, &mut locked, vec![(slot.ino, link)], &[])?;
                commit_locked(self.data, &mut locked, vec![(parent, pentries)], &[])?;
            } else {
                let plan = vec![(parent, pentries), (slot.ino, link)];
                commit_locked(self.data, &mut locked, plan, &[])?;
            }
            drop(locked);
            if new_nlink == 0 {
                self.table.maybe_free(self.store, slot.ino);
            }
            return Ok(());
        }
    }

    pub fn link(&self, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> {
        check_name(newname)?;
        let mut locked = self.table.lock_many(&[ino, newparent])?;
        let ps = st(&locked, newparent);
        if dir_slot(ps, newname)?.is_some() {
            return Err(FsError::Exists);
        }
        if ps.nlink == 0 {
            return Err(FsError::NotFound);
        }
        dir_writable(ps)?;
        // Linux's vfs_link: no new link to an immutable or append-only inode.
        unlocked(st(&locked, ino))?;
        let cookie = ps
            .dir
            .as_ref()
            .map(|d| d.next_cookie)
            .unwrap_or(FIRST_COOKIE);
        let cs = st(&locked, ino);
        if cs.kind == FileKind::Directory {
            return Err(FsError::NotPermitted);
        }
        // An unlinked file gets no new name, unless it is a linkable `tmpfile`
        // (Linux's vfs_link and I_LINKABLE).
        if cs.nlink == 0 && !cs.linkable {
            return Err(FsError::NotFound);
        }
        if cs.nlink >= LINK_MAX {
            return Err(FsError::TooManyLinks);
        }
        let now = Timespec::now();
        let plan = vec![
            (
                newparent,
                vec![Entry::Dentry {
                    op: DENTRY_ADD,
                    ino,
                    cookie,
                    kind: cs.kind,
                    time: now,
                    name: newname.to_vec(),
                }],
            ),
            (
                ino,
                vec![Entry::Link {
                    nlink: cs.nlink + 1,
                    ctime: now,
                }],
            ),
        ];
        if bugs::on(Bug::TmpfileLinkApart) && st(&locked, ino).linkable {
            for part in plan {
                commit_locked(self.data, &mut locked, vec![part], &[])?;
            }
        } else {
            commit_locked(self.data, &mut locked, plan, &[])?;
        }
        let cs = st_mut(&mut locked, ino);
        cs.linkable = false;
        Ok(cs.attr())
    }

    /// One 8-byte store made durable on its own (injected bugs only).
    fn store_persist(&self, off: PmOff, v: u64) {
        self.store.vol.store_u64(off, v);
        self.store.vol.flush(off, 8);
        // Fence: the in-place word is durable at once (that is the bug).
        self.store.vol.fence();
    }

    /// Whether directory `a` is `d` or one of its ancestors (rename lock held).
    fn is_ancestor(&self, a: Ino, d: Ino) -> Result<bool> {
        let mut cur = d;
        for _ in 0..=self.store.geo.inodes() {
            if cur == a {
                return Ok(true);
            }
            if cur == ROOT_INO {
                return Ok(false);
            }
            cur = self.table.lock(cur)?.1.parent;
        }
        Err(FsError::Corrupt(
            "directory parent chain has a cycle".into(),
        ))
    }

    pub fn rename(&self, op: Ino, on: &[u8], np: Ino, nn: &[u8], flags: RenameFlags) -> Result<()> {
        if on.len() > NAME_MAX || nn.len() > NAME_MAX {
            return Err(FsError::NameTooLong);
        }
        if on == b"." || on == b".." || nn == b"." || nn == b".." {
            return Err(FsError::Busy);
        }
        check_name(on)?;
        check_name(nn)?;
        if flags.exchange && (flags.noreplace || flags.whiteout.is_some()) {
            return Err(FsError::Invalid(
                "RENAME_EXCHANGE with RENAME_NOREPLACE or RENAME_WHITEOUT",
            ));
        }
        let _rl = self.rename_lock.lock();
        loop {
            let (src, dst) = {
                let locked = self.table.lock_many(&[op, np])?;
                let s = dir_slot(st(&locked, op), on)?.ok_or(FsError::NotFound)?;
                let pd = st(&locked, np);
                let d = dir_slot(pd, nn)?;
                if pd.nlink == 0 {
                    return Err(FsError::NotFound);
                }
                (s, d)
            };
            if dst.as_ref().is_some_and(|d| d.ino == src.ino) {
                // Both names are links to one inode: POSIX says do nothing.
                return Ok(());
            }
            if flags.noreplace && dst.is_some() {
                return Err(FsError::Exists);
            }
            if flags.exchange && dst.is_none() {
                return Err(FsError::NotFound);
            }
            let s_dir = src.kind == FileKind::Directory;
            let d_dir = dst.as_ref().is_some_and(|d| d.kind == FileKind::Directory);
            if let (Some(_), false) = (&dst, flags.exchange) {
                if s_dir && !d_dir {
                    return Err(FsError::NotDir);
                }
                if !s_dir && d_dir {
                    return Err(FsError::IsDir);
                }
            }
            if s_dir && op != np && self.is_ancestor(src.ino, np)? {
                return Err(FsError::Invalid("rename of a directory into itself"));
            }
            if flags.exchange && d_dir && op != np {
                if let Some(d) = &dst {
                    if self.is_ancestor(d.ino, op)? {
                        return Err(FsError::Invalid("rename of a directory into itself"));
                    }
                }
            }
            let mut inos = vec![op, np, src.ino];
            if let Some(d) = &dst {
                inos.push(d.ino);
            }
            let mut locked = self.table.lock_many(&inos)?;
            let now_src = dir_slot(st(&locked, op), on)?;
            let now_dst = dir_slot(st(&locked, np), nn)?;
            if now_src.as_ref() != Some(&src) || now_dst != dst {
                continue;
            }
            // As Linux's may_delete and may_create: the source leaves its directory
            // (neither may be immutable or append-only), a replaced target leaves
            // its one likewise, and a new name needs a directory that is not
            // immutable.
            unlocked(st(&locked, op))?;
            unlocked(st(&locked, src.ino))?;
            if let Some(d) = &dst {
                unlocked(st(&locked, np))?;
                unlocked(st(&locked, d.ino))?;
            } else {
                dir_writable(st(&locked, np))?;
            }
            if let (Some(d), false) = (&dst, flags.exchange) {
                if d_dir
                    && st(&locked, d.ino)
                        .dir
                        .as_ref()
                        .is_some_and(|x| !x.names.is_empty())
                {
                    return Err(FsError::NotEmpty);
                }
            }
            let now = Timespec::now();
            let mut plan: Vec<(Ino, Vec<Entry>)> = Vec::new();
            let mut push = |ino: Ino, e: Entry| match plan.iter_mut().find(|(i, _)| *i == ino) {
                Some((_, v)) => v.push(e),
                None => plan.push((ino, vec![e])),
            };
            let next_cookie = |ino: Ino| {
                st(&locked, ino)
                    .dir
                    .as_ref()
                    .map(|d| d.next_cookie)
                    .unwrap_or(FIRST_COOKIE)
            };
            // Subdirectory count changes of the two parents.
            let (mut d_op, mut d_np): (i64, i64) = (0, 0);
            let mut freed_dst = None;
            if flags.exchange {
                let Some(d) = dst.clone() else {
                    return Err(FsError::NotFound);
                };
                push(
                    op,
                    Entry::Dentry {
                        op: DENTRY_ADD,
                        ino: d.ino,
                        cookie: src.cookie,
                        kind: d.kind,
                        time: now,
                        name: on.to_vec(),
                    },
                );
                push(
                    np,
                    Entry::Dentry {
                        op: DENTRY_ADD,
                        ino: src.ino,
                        cookie: d.cookie,
                        kind: src.kind,
                        time: now,
                        name: nn.to_vec(),
                    },
                );
                if op != np {
                    d_op = d_dir as i64 - s_dir as i64;
                    d_np = s_dir as i64 - d_dir as i64;
                }
                push(
                    d.ino,
                    Entry::Link {
                        nlink: st(&locked, d.ino).nlink,
                        ctime: now,
                    },
                );
            } else {
                push(
                    op,
                    Entry::Dentry {
                        op: DENTRY_REMOVE,
                        ino: src.ino,
                        cookie: src.cookie,
                        kind: src.kind,
                        time: now,
                        name: on.to_vec(),
                    },
                );
                // Adding over an existing name replaces it (and kills its entry).
                // Within one directory the entry keeps its readdir offset (the
                // source's cookie, free again once its name is removed in this same
                // commit): a listing that renames the entries it sees, away and back,
                // then never meets them again further on and ends. Into another
                // directory it takes that directory's next cookie.
                push(
                    np,
                    Entry::Dentry {
                        op: DENTRY_ADD,
                        ino: src.ino,
                        cookie: if op == np {
                            src.cookie
                        } else {
                            next_cookie(np)
                        },
                        kind: src.kind,
                        time: now,
                        name: nn.to_vec(),
                    },
                );
                d_op -= s_dir as i64;
                d_np += s_dir as i64 - d_dir as i64;
                if let Some(d) = &dst {
                    let n = if d_dir {
                        0
                    } else {
                        st(&locked, d.ino).nlink.saturating_sub(1)
                    };
                    push(
                        d.ino,
                        Entry::Link {
                            nlink: n,
                            ctime: now,
                        },
                    );
                    if n == 0 {
                        freed_dst = Some(d.ino);
                    }
                }
            }
            if op == np {
                let delta = d_op + d_np;
                if delta != 0 {
                    let n = (st(&locked, op).nlink as i64 + delta) as u32;
                    push(
                        op,
                        Entry::Link {
                            nlink: n,
                            ctime: now,
                        },
                    );
                }
            } else {
                for (p, delta) in [(op, d_op), (np, d_np)] {
                    if delta != 0 {
                        let n = (st(&locked, p).nlink as i64 + delta) as u32;
                        if delta > 0 && n > LINK_MAX {
                            return Err(FsError::TooManyLinks);
                        }
                        push(
                            p,
                            Entry::Link {
                                nlink: n,
                                ctime: now,
                            },
                        );
                    }
                }
            }
            // The moved inode's ctime changes, as on Linux file systems.
            push(
                src.ino,
                Entry::Link {
                    nlink: st(&locked, src.ino).nlink,
                    ctime: now,
                },
            );
            // RENAME_WHITEOUT: a new character device 0/0 takes the source name, in
            // the same commit (its slot's valid word through the journal, as a
            // create's).
            let mut whiteout = None;
            if let Some((uid, gid)) = flags.whiteout {
                let ino = self.table.alloc_ino(&self.store.space.inode_order())?;
                let generation =
                    self.table
                        .write_slot(&self.store.vol, ino, FileKind::CharDevice, Some(now));
                let cookie = next_cookie(op);
                push(
                    op,
                    Entry::Dentry {
                        op: DENTRY_ADD,
                        ino,
                        cookie,
                        kind: FileKind::CharDevice,
                        time: now,
                        name: on.to_vec(),
                    },
                );
                let entries = vec![
                    Entry::SetAttr {
                        mode: FileKind::CharDevice.mode_bits(),
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
                        nlink: 1,
                        ctime: now,
                    },
                ];
                let mut w = InodeState::new(ino, FileKind::CharDevice);
                w.generation = generation;
                w.btime = self.store.geo.btime.then_some(now);
                whiteout = Some((w, entries));
            }
            if bugs::on(Bug::RenameDentryInPlace) && !flags.exchange {
                // The old name goes in a commit of its own, outside the journal.
                let first = plan
                    .iter_mut()
                    .find(|(i, _)| *i == op)
                    .map(|(_, v)| v.remove(0));
                if let Some(e) = first {
                    commit_locked(self.data, &mut locked, vec![(op, vec![e])], &[])?;
                }
                plan.retain(|(_, v)| !v.is_empty());
            }
            let valid = whiteout
                .as_ref()
                .map(|(w, _)| (self.store.geo.inode_off(w.ino) + INO_VALID_OFF, 1));
            let r = commit_locked_with(
                self.data,
                &mut locked,
                plan,
                whiteout.as_mut().map(|(s, e)| (s, std::mem::take(e))),
                valid.as_slice(),
            );
            if let Err(e) = r {
                if let Some((w, _)) = &whiteout {
                    self.table.release_ino(w.ino);
                }
                return Err(e);
            }
            if let Some((w, _)) = whiteout {
                // In the table before the directory's lock is released.
                self.table.insert_inode(w);
            }
            for (inode, g) in locked.iter_mut() {
                if s_dir && inode.ino == src.ino {
                    g.parent = np;
                }
                if flags.exchange && d_dir && dst.as_ref().is_some_and(|d| d.ino == inode.ino) {
                    g.parent = op;
                }
            }
            drop(locked);
            if let Some(d) = freed_dst {
                self.table.maybe_free(self.store, d);
            }
            return Ok(());
        }
    }

    /// Sets the flags of `ino` (`FS_IOC_SETFLAGS`): one Xattr entry (removed when
    /// the flags become 0), ctime changes. A flag mnemofs does not keep is refused
    /// (EOPNOTSUPP); `DIRSYNC` is dropped on anything but a directory, as ext4
    /// does. Who may change immutable and append-only (CAP_LINUX_IMMUTABLE) is the
    /// frontend's check (the kernel's, through FUSE). Images older than format
    /// version 8 keep every inode's flags 0 (EOPNOTSUPP for any other value).
    pub fn set_inode_flags(&self, ino: Ino, flags: u32) -> Result<()> {
        if flags & !inode_flags::SUPPORTED != 0 {
            return Err(FsError::Unsupported("inode flag"));
        }
        let (_i, mut s) = self.table.lock(ino)?;
        let flags = if s.kind == FileKind::Directory {
            flags
        } else {
            flags & !inode_flags::DIRSYNC
        };
        if !self.store.geo.flags_and_label {
            return if flags == 0 {
                Ok(())
            } else {
                Err(FsError::Unsupported(
                    "inode flags on an image older than format version 8",
                ))
            };
        }
        let now = Timespec::now();
        if bugs::on(Bug::InodeFlagsOneAtATime) {
            // Each flag that changes in a commit of its own, lowest bit first.
            let mut cur = s.index.inode_flags();
            let mut changed = cur ^ flags;
            while changed != 0 {
                let bit = changed & changed.wrapping_neg();
                changed &= !bit;
                cur ^= bit;
                let es = if cur != 0 {
                    xattr_set(XATTR_FLAGS, cur.to_le_bytes().to_vec(), now)
                } else {
                    vec![Entry::Xattr {
                        op: XATTR_REMOVE,
                        name: XATTR_FLAGS.to_vec(),
                        value: Vec::new(),
                        ctime: now,
                    }]
                };
                self.data.commit(&mut [(&mut *s, es)], &[])?;
            }
            return Ok(());
        }
        let es = if flags != 0 {
            xattr_set(XATTR_FLAGS, flags.to_le_bytes().to_vec(), now)
        } else if s.xattrs.contains_key(XATTR_FLAGS) {
            vec![Entry::Xattr {
                op: XATTR_REMOVE,
                name: XATTR_FLAGS.to_vec(),
                value: Vec::new(),
                ctime: now,
            }]
        } else {
            return Ok(());
        };
        self.data.commit(&mut [(&mut *s, es)], &[])
    }

    /// The value of extended attribute `name` of `ino` (ENODATA when it has none).
    pub fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        check_xattr_name(name)?;
        let (_i, s) = self.table.lock(ino)?;
        s.xattrs
            .get(name)
            .map(|(v, _)| v.clone())
            .ok_or(FsError::NoData)
    }

    /// The names of `ino`'s extended attributes, each followed by a NUL (listxattr).
    pub fn listxattr(&self, ino: Ino) -> Result<Vec<u8>> {
        let (_i, s) = self.table.lock(ino)?;
        let mut out = Vec::new();
        for name in s.xattrs.keys().filter(|n| n.as_slice() != XATTR_FLAGS) {
            out.extend_from_slice(name);
            out.push(0);
        }
        Ok(out)
    }

    /// Sets extended attribute `name` of `ino` to `value` (`flags`: `XATTR_CREATE`
    /// fails with EEXIST on an existing one, `XATTR_REPLACE` with ENODATA on a
    /// missing one). One log entry; ctime changes.
    pub fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        check_xattr_name(name)?;
        if is_acl_name(name) {
            return self.set_acl(ino, name, value, flags);
        }
        if flags & !(libc::XATTR_CREATE | libc::XATTR_REPLACE) != 0 {
            return Err(FsError::Invalid("unknown setxattr flags"));
        }
        if value.len() > XATTR_SIZE_MAX {
            // Linux's limit: the kernel refuses a longer value before a file system sees it.
            return Err(FsError::ArgTooBig);
        }
        if value.len() > XATTR_VALUE_MAX && !self.store.geo.large_xattrs {
            // An image before version 9 (its builds read one entry per value): as ext4
            // without large attribute inodes, no room for it.
            return Err(FsError::NoSpace);
        }
        let (_i, mut s) = self.table.lock(ino)?;
        unlocked(&s)?;
        // Linux keeps user attributes to regular files and directories.
        if name.starts_with(b"user.") && !matches!(s.kind, FileKind::Regular | FileKind::Directory)
        {
            return Err(FsError::NotPermitted);
        }
        let exists = s.xattrs.contains_key(name);
        if flags & libc::XATTR_CREATE != 0 && exists {
            return Err(FsError::Exists);
        }
        if flags & libc::XATTR_REPLACE != 0 && !exists {
            return Err(FsError::NoData);
        }
        xattr_room(&s, name, value.len())?;
        // One entry, or (a value longer than one log page holds) a SET and its
        // continuations, in one commit: all of them or none reach the log's tail.
        let es = xattr_set_entries(name, value, Timespec::now());
        if bugs::on(Bug::XattrPartsApart) {
            for e in es {
                self.data.commit(&mut [(&mut *s, vec![e])], &[])?;
            }
            return Ok(());
        }
        self.data.commit(&mut [(&mut *s, es)], &[])
    }

    /// Sets (or, with an ACL of no entries, removes) a POSIX ACL, as Linux does for
    /// `system.posix_acl_access` and `_default`: the value must be a valid ACL; an
    /// access ACL sets the mode's permission bits (and is not stored when the mode
    /// says all it says); `XATTR_ACL_KILL_SGID` clears set-group-ID as well; a
    /// default ACL only on directories (EACCES elsewhere). One commit.
    fn set_acl(&self, ino: Ino, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        if flags & !(libc::XATTR_CREATE | libc::XATTR_REPLACE | XATTR_ACL_KILL_SGID) != 0 {
            return Err(FsError::Invalid("unknown setxattr flags"));
        }
        let acl = Acl::decode(value)?;
        if value.len() > XATTR_VALUE_MAX && !self.store.geo.large_xattrs {
            // An image before version 9: one entry per value (setxattr).
            return Err(FsError::NoSpace);
        }
        let inode = self.table.get(ino)?;
        // A mode change is a SetAttr snapshot (size included): no data write may
        // sit between the snapshot and its commit, as in `setattr`.
        let _d = inode.data.write(0, u64::MAX);
        let mut st = inode.state.lock_arc();
        if st.dead {
            return Err(FsError::NotFound);
        }
        if st.kind == FileKind::Symlink {
            return Err(FsError::Unsupported("ACLs on a symlink"));
        }
        unlocked(&st)?;
        let stored = st.xattrs.contains_key(name);
        let now = Timespec::now();
        let remove = Entry::Xattr {
            op: XATTR_REMOVE,
            name: name.to_vec(),
            value: Vec::new(),
            ctime: now,
        };
        let mut entries = Vec::new();
        let mut mode = st.mode;
        if name == ACL_DEFAULT {
            if st.kind != FileKind::Directory {
                return if acl.is_some() {
                    Err(FsError::AccessDenied)
                } else {
                    Ok(())
                };
            }
            match acl {
                Some(a) => entries.extend(xattr_set(name, a.encode(), now)),
                None if stored => entries.push(remove),
                None => return Ok(()),
            }
        } else {
            match acl {
                Some(a) => {
                    let (bits, extended) = a.mode();
                    mode = (mode & !0o777) | bits;
                    if extended {
                        entries.extend(xattr_set(name, a.encode(), now));
                    } else if stored {
                        entries.push(remove);
                    }
                }
                None if stored => entries.push(remove),
                None => return Ok(()),
            }
            if flags & XATTR_ACL_KILL_SGID != 0 {
                mode &= !libc::S_ISGID;
            }
        }
        xattr_room(&st, name, value.len())?;
        if mode != st.mode || entries.is_empty() {
            let mut snap = st.setattr_entry(0);
            if let Entry::SetAttr {
                mode: m, ctime: c, ..
            } = &mut snap
            {
                *m = mode;
                *c = now;
            }
            entries.push(snap);
        }
        self.data.commit(&mut [(&mut *st, entries)], &[])
    }

    /// Removes extended attribute `name` of `ino` (ENODATA when it has none, but
    /// success for an absent POSIX ACL).
    pub fn removexattr(&self, ino: Ino, name: &[u8]) -> Result<()> {
        check_xattr_name(name)?;
        let (_i, mut s) = self.table.lock(ino)?;
        unlocked(&s)?;
        if !s.xattrs.contains_key(name) {
            // Removing an ACL that is not there succeeds, as on Linux file systems
            // (a minimal access ACL is the mode, never stored).
            if is_acl_name(name) {
                return Ok(());
            }
            return Err(FsError::NoData);
        }
        let e = Entry::Xattr {
            op: XATTR_REMOVE,
            name: name.to_vec(),
            value: Vec::new(),
            ctime: Timespec::now(),
        };
        self.data.commit(&mut [(&mut *s, vec![e])], &[])
    }

    pub fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let (_i, s) = self.table.lock(ino)?;
        if s.kind != FileKind::Symlink {
            return Err(FsError::Invalid("not a symlink"));
        }
        let len = s.size.min(BLOCK) as usize;
        let mut out = vec![0u8; len];
        if let Some(p) = s.pages.get(0) {
            self.store.vol.read(BlockNo(p.block).off(), &mut out);
        }
        Ok(out)
    }

    /// Entries after `offset` (0 = from the start; "." and ".." come first), at most
    /// `max`. An entry keeps its offset for as long as it exists, so a listing that
    /// continues after concurrent changes neither repeats nor skips surviving names.
    pub fn readdir(&self, ino: Ino, offset: u64, max: usize) -> Result<Vec<DirEntry>> {
        let (i, mut s) = self.table.lock(ino)?;
        if s.dir.is_none() {
            return Err(FsError::NotDir);
        }
        // A listing reads the directory (Linux updates its atime as a read's).
        self.data.touch_atime(&i, Some(&mut s));
        let dir = s.dir.as_ref().ok_or(FsError::NotDir)?;
        let mut out = Vec::new();
        if offset < 1 && out.len() < max {
            out.push(DirEntry {
                ino,
                offset: 1,
                kind: FileKind::Directory,
                name: b".".to_vec(),
            });
        }
        if offset < 2 && out.len() < max {
            out.push(DirEntry {
                ino: if s.parent == 0 { ino } else { s.parent },
                offset: 2,
                kind: FileKind::Directory,
                name: b"..".to_vec(),
            });
        }
        for (&cookie, name) in dir.order.range(offset.max(FIRST_COOKIE - 1) + 1..) {
            if out.len() >= max {
                break;
            }
            if let Some(slot) = dir.names.get(name) {
                out.push(DirEntry {
                    ino: slot.ino,
                    offset: cookie,
                    kind: slot.kind,
                    name: name.clone(),
                });
            }
        }
        Ok(out)
    }
}
