//! [`MnemoFuse`]: turns each kernel request (decoded by `crate::session`) into one
//! engine call and its result into the reply.

use crate::convert::{errno, rename_flags, time_or_now, to_timespec};
use crate::pagecache::PageCacheTracker;
use crate::session::Negotiated;
use crate::wire::{
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyIoctl,
    ReplyOpen, ReplyStatfs, ReplyStatx, ReplyWrite, ReplyXattr, Request,
};
use fuser::{
    AccessFlags, Errno, FileHandle, FopenFlags, INodeNo, IoctlFlags, LockOwner, OpenFlags,
    TimeOrNow, WriteFlags,
};
use mnemofs::acl::{ACL_ACCESS, ACL_DEFAULT, XATTR_ACL_KILL_SGID};
use mnemofs::{inode_flags, Attr, FileSystem, Fs, NewNode, SetAttr, ROOT_INO};
use std::cell::RefCell;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Name of the root-directory xattr that holds the engine's statistics
/// ([`FileSystem::stats`]; [`mnemofs::FsStats`] for the local engine) as JSON.
pub const STATS_XATTR: &str = "user.mnemofs.stats";

/// Largest write the kernel sends in one request.
pub const MAX_WRITE: u32 = 1 << 20;

/// How long the kernel may cache a name -> inode lookup.
///
/// Every namespace change of this file system reaches the engine through this mount's
/// kernel inode and dentry caches (the image is locked against a second mount), and
/// the kernel drops the dentries it changes itself (unlink, rmdir, rename). The TTL
/// only bounds how long a lookup result is trusted without asking; one second keeps
/// path walks cheap.
pub const DEFAULT_ENTRY_TTL: Duration = Duration::from_secs(1);

/// How long the kernel may cache attributes.
///
/// Why not 0: with `default_permissions` the kernel checks permissions itself and,
/// with a zero attribute TTL, sends a GETATTR for every path component of every path
/// walk. Why a short TTL is still correct with many threads and direct I/O: every
/// change goes through this mount, and the kernel invalidates the cached attributes
/// of each inode a request changes: after a write (size, mtime, ctime, blocks; the
/// kernel also raises its cached size itself), after setattr (it takes the attributes
/// from our reply), after fallocate, link, unlink, rename and create in a directory.
/// So `stat` after `write` refetches from the engine. The one value the kernel cannot
/// predict is the offset of an `O_APPEND` write (the engine chooses end of file
/// atomically); its size is invalidated just the same, and such writes are serialized
/// by the kernel's inode lock. What a short TTL can leave stale for up to a second is
/// only `atime`, which the kernel does not invalidate on reads.
pub const DEFAULT_ATTR_TTL: Duration = Duration::from_secs(1);

/// Directory entries fetched from the engine per readdir call.
const READDIR_BATCH: usize = 128;

/// Bit 0 of a file handle: the file was opened with `O_APPEND`.
const FH_APPEND: u64 = 1;
/// Bit 1 of a file handle: its reads go through the kernel page cache.
const FH_CACHED: u64 = 2;

thread_local! {
    /// Per event-loop-thread read buffer, so that reads do not allocate.
    static READ_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Adapter options.
#[derive(Clone, Debug)]
pub struct AdapterOptions {
    /// Open files with `FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES` (no page cache:
    /// every read and write reaches the engine, as on a DAX file system).
    pub direct_io: bool,
    /// How long the kernel may cache a name lookup.
    pub entry_ttl: Duration,
    /// How long the kernel may cache attributes.
    pub attr_ttl: Duration,
    /// With `direct_io`: files opened read-only are read through the kernel page
    /// cache, kept coherent with every write ([`crate::pagecache`]).
    pub page_cache_reads: bool,
    /// POSIX ACLs are on (off: the `noacl` mount option, and the ACL names are
    /// refused with EOPNOTSUPP, which the kernel would otherwise pass through
    /// unenforced).
    pub posix_acl: bool,
}

impl Default for AdapterOptions {
    fn default() -> Self {
        AdapterOptions {
            direct_io: true,
            entry_ttl: DEFAULT_ENTRY_TTL,
            attr_ttl: DEFAULT_ATTR_TTL,
            page_cache_reads: true,
            posix_acl: true,
        }
    }
}

/// The FUSE file system over a mounted engine: any [`FileSystem`], the local
/// engine [`Fs`] by default. Generic (not `dyn`), so each request compiles to a
/// direct call of the engine's method.
pub struct MnemoFuse<E: FileSystem = Fs> {
    fs: Arc<E>,
    opts: AdapterOptions,
    /// Next file handle (bits 2..; bit 0 is [`FH_APPEND`], bit 1 [`FH_CACHED`]).
    next_fh: AtomicU64,
    /// Page-cache reads and their invalidation.
    cache: Arc<PageCacheTracker>,
    /// What the INIT handshake settled ([`Negotiated`]).
    negotiated: Arc<Negotiated>,
}

impl<E: FileSystem> std::fmt::Debug for MnemoFuse<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MnemoFuse")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

impl<E: FileSystem> MnemoFuse<E> {
    /// An adapter that serves `fs` with `opts`.
    pub fn new(fs: Arc<E>, opts: AdapterOptions) -> MnemoFuse<E> {
        MnemoFuse {
            fs,
            opts,
            next_fh: AtomicU64::new(1),
            cache: Arc::new(PageCacheTracker::default()),
            negotiated: Arc::default(),
        }
    }

    /// What INIT settles, for the handshake to fill in.
    pub fn negotiated(&self) -> Arc<Negotiated> {
        Arc::clone(&self.negotiated)
    }

    /// Whether `name` is a POSIX ACL this mount does not serve (`noacl`).
    fn acl_off(&self, name: &OsStr) -> bool {
        !self.opts.posix_acl && [ACL_ACCESS, ACL_DEFAULT].contains(&name.as_bytes())
    }

    fn killpriv_v2(&self) -> bool {
        self.negotiated.killpriv_v2.load(Ordering::Relaxed)
    }

    /// The page-cache tracker (the session gives it its notifier).
    pub fn page_cache(&self) -> Arc<PageCacheTracker> {
        self.cache.clone()
    }

    /// The engine this adapter serves.
    pub fn fs(&self) -> &Arc<E> {
        &self.fs
    }

    fn new_fh(&self, flags: i32) -> FileHandle {
        let n = self.next_fh.fetch_add(1, Ordering::Relaxed);
        let append = if flags & libc::O_APPEND != 0 {
            FH_APPEND
        } else {
            0
        };
        FileHandle((n << 2) | append)
    }

    /// Whether a file opened with `flags` reads through the page cache: read-only
    /// opens, in the direct-I/O mode, once invalidation works.
    fn cached_open(&self, flags: i32) -> bool {
        self.opts.direct_io
            && self.opts.page_cache_reads
            && flags & libc::O_ACCMODE == libc::O_RDONLY
            && self.cache.ready()
    }

    fn open_flags(&self) -> FopenFlags {
        if self.opts.direct_io {
            FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
        } else {
            FopenFlags::empty()
        }
    }

    fn reply_entry(&self, reply: ReplyEntry, res: mnemofs::Result<Attr>) {
        match res {
            // Every entry reply raises the kernel's lookup count of the inode; the
            // engine keeps the number from being reused until the matching forget.
            Ok(attr) => {
                self.fs.remember(attr.ino);
                reply.entry(&self.opts.attr_ttl, &self.opts.entry_ttl, &attr)
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn reply_attr(&self, reply: ReplyAttr, res: mnemofs::Result<Attr>) {
        match res {
            Ok(attr) => reply.attr(&self.opts.attr_ttl, &attr),
            Err(e) => reply.error(errno(&e)),
        }
    }
}

fn reply_empty(reply: ReplyEmpty, res: mnemofs::Result<()>) {
    match res {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(&e)),
    }
}

/// Replies to an xattr request with `value` (size query when `size == 0`).
fn reply_xattr_value(reply: ReplyXattr, size: u32, value: &[u8]) {
    let Ok(len) = u32::try_from(value.len()) else {
        return reply.error(Errno::E2BIG);
    };
    if size == 0 {
        reply.size(len);
    } else if len > size {
        reply.error(Errno::ERANGE);
    } else {
        reply.data(value);
    }
}

/// A node the process of `req` creates. The kernel sends the mode unmasked and
/// the umask beside it (`FUSE_DONT_MASK`): the engine applies the umask unless the
/// parent has a default ACL, which replaces it (POSIX). A kernel without
/// `FUSE_DONT_MASK` has applied the umask already; applying it again changes nothing.
fn new_node(req: &Request, mode: u32, umask: u32, rdev: u32) -> NewNode {
    NewNode {
        mode,
        umask,
        rdev,
        uid: req.uid(),
        gid: req.gid(),
    }
}

/// Whether the process of `req` has CAP_FSETID in its effective set (from /proc;
/// not when that is gone).
fn has_fsetid(req: &Request) -> bool {
    const CAP_FSETID: u32 = 4;
    has_cap(req, CAP_FSETID)
}

/// Whether the process of `req` has capability `cap` in effect (from /proc; false
/// when it is gone).
fn has_cap(req: &Request, cap: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", req.pid())) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1u64 << cap) != 0)
}

/// The permission bits `mode` keeps after a write by a process without CAP_FSETID
/// (Linux's `setattr_should_drop_sgid`): no set-user-ID; no set-group-ID when
/// group-exec is set, or when the writer is not in the file's group (`in_group`).
pub fn setid_killed(mode: u32, in_group: bool) -> u32 {
    let mut m = mode & 0o7777;
    m &= !libc::S_ISUID;
    if m & libc::S_IXGRP != 0 || !in_group {
        m &= !libc::S_ISGID;
    }
    m
}

/// The permission bits a chown leaves of `mode` (Linux's `chown_common` and
/// `setattr_should_drop_sgid`): a non-directory loses set-user-ID always, and
/// set-group-ID when group-exec is set or the caller is neither in the file's group
/// (`in_group`) nor has CAP_FSETID (`fsetid`); a directory keeps both.
pub fn chown_kept(mode: u32, in_group: bool, fsetid: bool) -> u32 {
    let mut m = mode & 0o7777;
    if mode & libc::S_IFMT == libc::S_IFDIR {
        return m;
    }
    m &= !libc::S_ISUID;
    if m & libc::S_IXGRP != 0 || !(in_group || fsetid) {
        m &= !libc::S_ISGID;
    }
    m
}

/// The kernel's "no such ID" in a request's header.
const INVALID_ID: u32 = u32::MAX;

/// The file-system user and group IDs of the process behind `req`. The kernel
/// names them in the request where it creates a node; once idmapped mounts are
/// allowed (`FUSE_ALLOW_IDMAP`) every other request carries `INVALID_ID`, and they
/// come from /proc (`None` when the process is gone).
fn caller_ids(req: &Request) -> Option<(u32, u32)> {
    if req.uid() != INVALID_ID && req.gid() != INVALID_ID {
        return Some((req.uid(), req.gid()));
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", req.pid())).ok()?;
    Some((fs_id(&status, "Uid:")?, fs_id(&status, "Gid:")?))
}

/// The file-system ID on the `key` line of a /proc status (real, effective, saved,
/// file-system: the fourth).
fn fs_id(status: &str, key: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}

/// Whether the process of `req` is in group `gid`: its file-system group ID or
/// one of its supplementary groups (from /proc; false when that is gone).
///
/// On an idmapped mount the VFS compares the caller's groups with the file's group
/// as the mount maps it; the adapter does not know the mount's mapping and compares
/// them with the group stored in the file.
fn in_group(req: &Request, gid: u32) -> bool {
    if req.gid() == gid {
        return true;
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", req.pid())) else {
        return false;
    };
    if req.gid() == INVALID_ID && fs_id(&status, "Gid:") == Some(gid) {
        return true;
    }
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .is_some_and(|g| g.split_whitespace().any(|x| x.parse() == Ok(gid)))
}

impl<E: FileSystem + 'static> MnemoFuse<E> {
    /// Clears the set-id bits a write by an unprivileged process removes, when the
    /// file has them (one setattr commit; nothing otherwise); says whether it did.
    fn kill_setid(&self, req: &Request, ino: u64) -> mnemofs::Result<bool> {
        let a = self.fs.getattr(ino)?;
        if a.mode & (libc::S_ISUID | libc::S_ISGID) == 0 {
            return Ok(false);
        }
        let keep = setid_killed(a.mode, in_group(req, a.gid));
        if keep != a.mode & 0o7777 {
            self.fs.setattr(
                ino,
                &SetAttr {
                    mode: Some(keep),
                    ..Default::default()
                },
            )?;
            return Ok(true);
        }
        Ok(false)
    }
}

/// The requests, as `crate::session` decodes them: one argument per field of the
/// kernel's request.
#[allow(clippy::too_many_arguments)]
impl<E: FileSystem + 'static> MnemoFuse<E> {
    pub(crate) fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _busy = crate::inflight::enter("lookup", parent.0);
        if name.as_bytes() == b"." {
            // The kernel's export path (open_by_handle_at after it dropped the
            // inode) looks up "." in an inode of any kind: the inode itself, or
            // ESTALE once its number no longer names a live inode.
            let r = self.fs.getattr(parent.0).map_err(|e| match e {
                mnemofs::FsError::NotFound => mnemofs::FsError::Stale(parent.0),
                e => e,
            });
            return self.reply_entry(reply, r);
        }
        self.reply_entry(reply, self.fs.lookup(parent.0, name.as_bytes()));
    }

    pub(crate) fn forget(&self, ino: INodeNo, nlookup: u64) {
        let _busy = crate::inflight::enter("forget", ino.0);
        self.fs.forget(ino.0, nlookup);
    }

    pub(crate) fn getattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: Option<FileHandle>,
        reply: ReplyAttr,
    ) {
        let _busy = crate::inflight::enter("getattr", ino.0);
        self.reply_attr(reply, self.fs.getattr(ino.0));
    }

    pub(crate) fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        reply: ReplyAttr,
    ) {
        let _busy = crate::inflight::enter("setattr", ino.0);
        let mut mode = mode.map(|m| m & 0o7777);
        if self.killpriv_v2() && mode.is_none() {
            // The set-id bits this change clears (the kernel leaves it to us): a
            // truncate by a caller without CAP_FSETID as a write does; a chown
            // (a change of owner or group; or a request that changes nothing the
            // kernel names, which is chown(-1, -1) or the kernel's own "remove
            // privileges" — the same rules for a caller without CAP_FSETID) by
            // chown's rules.
            let chown = uid.is_some()
                || gid.is_some()
                || (size.is_none() && atime.is_none() && mtime.is_none());
            if size.is_some() || chown {
                match self.fs.getattr(ino.0) {
                    Ok(a) if a.mode & (libc::S_ISUID | libc::S_ISGID) != 0 => {
                        let keep = if chown {
                            chown_kept(a.mode, in_group(req, a.gid), has_fsetid(req))
                        } else if has_fsetid(req) {
                            a.mode & 0o7777
                        } else {
                            setid_killed(a.mode, in_group(req, a.gid))
                        };
                        if keep != a.mode & 0o7777 {
                            mode = Some(keep);
                        }
                    }
                    Ok(_) => {}
                    Err(e) => return reply.error(errno(&e)),
                }
            }
        }
        // A truncate through a file handle (ftruncate) is the same as by inode: an
        // open file stays pinned in the engine even after its last unlink.
        // utimes(NULL) or UTIME_NOW for each time given: allowed on an
        // append-only file (Linux's ATTR_TOUCH).
        let now = |t: &Option<TimeOrNow>| matches!(t, None | Some(TimeOrNow::Now));
        let times_now = (atime.is_some() || mtime.is_some()) && now(&atime) && now(&mtime);
        let req = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(time_or_now),
            mtime: mtime.map(time_or_now),
            ctime: ctime.map(to_timespec),
            times_now,
        };
        let r = self.fs.setattr(ino.0, &req);
        if r.is_ok() && size.is_some() {
            // A size change: the page cache past the new end (the kernel also
            // truncates it; a page-cache read racing with the change is dropped).
            self.cache.changed(ino.0);
        }
        self.reply_attr(reply, r);
    }

    pub(crate) fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let _busy = crate::inflight::enter("readlink", ino.0);
        match self.fs.readlink(ino.0) {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(crate) fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let _busy = crate::inflight::enter("mknod", parent.0);
        let node = new_node(req, mode, umask, rdev);
        let res = self.fs.create_node(parent.0, name.as_bytes(), &node);
        self.reply_entry(reply, res);
    }

    pub(crate) fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let _busy = crate::inflight::enter("mkdir", parent.0);
        let node = new_node(req, libc::S_IFDIR | (mode & 0o7777), umask, 0);
        let res = self.fs.create_node(parent.0, name.as_bytes(), &node);
        self.reply_entry(reply, res);
    }

    pub(crate) fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _busy = crate::inflight::enter("unlink", parent.0);
        reply_empty(reply, self.fs.unlink(parent.0, name.as_bytes()));
    }

    pub(crate) fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _busy = crate::inflight::enter("rmdir", parent.0);
        reply_empty(reply, self.fs.rmdir(parent.0, name.as_bytes()));
    }

    pub(crate) fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let _busy = crate::inflight::enter("symlink", parent.0);
        let res = self.fs.symlink(
            parent.0,
            link_name.as_bytes(),
            target.as_os_str().as_bytes(),
            req.uid(),
            req.gid(),
        );
        self.reply_entry(reply, res);
    }

    pub(crate) fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        let _busy = crate::inflight::enter("rename", parent.0);
        // A whiteout belongs to the caller, whom the kernel does not name in a
        // rename.
        let caller = if flags.contains(fuser::RenameFlags::RENAME_WHITEOUT) {
            match caller_ids(req) {
                Some(ids) => ids,
                None => return reply.error(Errno::EIO),
            }
        } else {
            (req.uid(), req.gid())
        };
        let flags = match rename_flags(flags, caller.0, caller.1) {
            Ok(f) => f,
            Err(e) => return reply.error(e),
        };
        let res = self.fs.rename(
            parent.0,
            name.as_bytes(),
            newparent.0,
            newname.as_bytes(),
            flags,
        );
        reply_empty(reply, res);
    }

    pub(crate) fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let _busy = crate::inflight::enter("link", ino.0);
        self.reply_entry(reply, self.fs.link(ino.0, newparent.0, newname.as_bytes()));
    }

    pub(crate) fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _busy = crate::inflight::enter("open", ino.0);
        let read_only = flags.0 & libc::O_ACCMODE == libc::O_RDONLY;
        if !read_only {
            // Linux's may_open: no writer of an immutable file, and only appenders
            // of an append-only one (the kernel leaves a FUSE file's flags to us).
            match self.fs.inode_flags(ino.0) {
                Ok(f) if f & inode_flags::IMMUTABLE != 0 => return reply.error(Errno::EPERM),
                Ok(f) if f & inode_flags::APPEND != 0 && flags.0 & libc::O_APPEND == 0 => {
                    return reply.error(Errno::EPERM)
                }
                Ok(_) => {}
                Err(e) => return reply.error(errno(&e)),
            }
        }
        match self.fs.open(ino.0) {
            // strictatime: every read updates atime, so every read of a read-only
            // open reaches the engine (the kernel never updates a FUSE file's
            // atime itself).
            Ok(()) if read_only && self.fs.atime_mode() == mnemofs::AtimeMode::Strictatime => reply
                .opened(
                    self.new_fh(flags.0),
                    FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES,
                ),
            Ok(()) if self.cached_open(flags.0) => {
                // The page cache, kept across opens: every cached page came through
                // a READ of such a handle, and every write since invalidates it.
                // Unless a read would update atime now (relatime: atime not newer
                // than mtime or ctime, or a day old): then the kernel drops the
                // file's cached pages at this open, so its first read reaches the
                // engine and updates atime; later opens keep the cache again.
                let fh = FileHandle(self.new_fh(flags.0).0 | FH_CACHED);
                let keep = if self.fs.atime_due(ino.0) {
                    FopenFlags::empty()
                } else {
                    FopenFlags::FOPEN_KEEP_CACHE
                };
                reply.opened(fh, keep)
            }
            Ok(()) => reply.opened(self.new_fh(flags.0), self.open_flags()),
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(crate) fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let _busy = crate::inflight::enter("read", ino.0);
        if fh.0 & FH_CACHED != 0 {
            // Before the engine read: a write that changes these bytes after it
            // then invalidates what this read puts in the page cache.
            self.cache.filled(ino.0);
        }
        let size = size as usize;
        READ_BUF.with_borrow_mut(|buf| {
            if buf.len() < size {
                buf.resize(size, 0);
            }
            let buf = &mut buf[..size];
            match self.fs.read(ino.0, offset, buf) {
                Ok(n) => reply.data(&buf[..n.min(size)]),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    pub(crate) fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
        reply: ReplyWrite,
    ) {
        let _busy = crate::inflight::enter("write", ino.0);
        // A writer without CAP_FSETID (the kernel says so with this flag: always
        // under killpriv v2, and in the direct-I/O mode) clears set-user-ID, and
        // set-group-ID when group-exec is set or it is not in the file's group, as
        // Linux file systems do, before its data lands.
        if write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID) {
            match self.kill_setid(req, ino.0) {
                // The kernel keeps the mode it cached; `stat` right after this
                // write must show the bits gone (whether or not the write then
                // succeeds).
                Ok(true) => self.cache.attributes_changed(ino.0),
                Ok(false) => {}
                Err(e) => return reply.error(errno(&e)),
            }
        }
        let append = if self.negotiated.write_flags_known.load(Ordering::Relaxed) {
            flags.0 & libc::O_APPEND != 0
        } else {
            fh.0 & FH_APPEND != 0
        };
        let res = if append {
            // The engine picks the end of file atomically; the kernel's offset
            // (its cached size) is ignored.
            self.fs.append(ino.0, data).map(|_| data.len())
        } else {
            self.fs.write(ino.0, offset, data)
        };
        match res {
            Ok(n) => {
                // Pages page-cache readers hold: dropped before the reply; not for
                // a write-back of the kernel's own cached page (it holds these
                // bytes already, and an invalidation may be waiting for this
                // very write: crate::pagecache).
                if !write_flags.contains(WriteFlags::FUSE_WRITE_CACHE) {
                    self.cache.changed(ino.0);
                }
                reply.written(u32::try_from(n).unwrap_or(u32::MAX))
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(crate) fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let _busy = crate::inflight::enter("flush", ino.0);
        if !self.fs.durable_on_return() {
            // Background work (delayed commits): close(2) reports its errors.
            return match self.fs.close_check(ino.0) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            };
        }
        // Nothing is buffered: every completed write is durable. ENOSYS tells the
        // kernel so once: it then stops sending FLUSH on close (one round trip less
        // per close; close still succeeds).
        reply.error(Errno::ENOSYS);
    }

    pub(crate) fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let _busy = crate::inflight::enter("release", ino.0);
        reply_empty(reply, self.fs.release(ino.0));
    }

    pub(crate) fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _busy = crate::inflight::enter("fsync", ino.0);
        if !self.fs.durable_on_return() {
            // Writes may still be on their way (delayed commits): fsync waits.
            return match self.fs.fsync(ino.0) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            };
        }
        // Every write this daemon answered is durable (the engine persists before
        // it returns; with the page cache the kernel sends dirty pages as WRITEs
        // before FSYNC). ENOSYS tells the kernel: it records that this file system
        // needs no fsync and from then on answers fsync(2) itself with success,
        // without a round trip (~17 µs here).
        reply.error(Errno::ENOSYS);
    }

    pub(crate) fn opendir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _flags: OpenFlags,
        reply: ReplyOpen,
    ) {
        let _busy = crate::inflight::enter("opendir", 0);
        // Directory streams are stateless: readdir offsets are the engine's stable
        // entry offsets.
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    pub(crate) fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let _busy = crate::inflight::enter("readdir", ino.0);
        let mut offset = offset;
        let mut added = false;
        loop {
            let entries = match self.fs.readdir(ino.0, offset, READDIR_BATCH) {
                Ok(entries) => entries,
                // Entries already added are sent; the error comes back on the next call.
                Err(_) if added => return reply.ok(),
                Err(e) => return reply.error(errno(&e)),
            };
            let got = entries.len();
            for e in entries {
                let full = reply.add(INodeNo(e.ino), e.offset, e.kind, &e.name);
                if full {
                    return reply.ok();
                }
                added = true;
                offset = e.offset;
            }
            if got < READDIR_BATCH {
                return reply.ok();
            }
        }
    }

    pub(crate) fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        let _busy = crate::inflight::enter("releasedir", 0);
        reply.ok();
    }

    pub(crate) fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _busy = crate::inflight::enter("fsyncdir", ino.0);
        if !self.fs.durable_on_return() {
            return match self.fs.fsync(ino.0) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            };
        }
        // As fsync: every namespace change is durable when answered.
        reply.error(Errno::ENOSYS);
    }

    pub(crate) fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let _busy = crate::inflight::enter("statfs", 0);
        let s = self.fs.statfs();
        reply.statfs(
            s.blocks,
            s.blocks_free,
            s.blocks_avail,
            s.files,
            s.files_free,
            s.block_size,
            s.name_max,
            s.block_size,
        );
    }

    pub(crate) fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        reply: ReplyEmpty,
    ) {
        let _busy = crate::inflight::enter("setxattr", ino.0);
        if self.acl_off(name) {
            return reply.error(Errno::EOPNOTSUPP);
        }
        if ino.0 == ROOT_INO && name.as_bytes() == STATS_XATTR.as_bytes() {
            return reply.error(Errno::EPERM);
        }
        let mut flags = flags;
        if name.as_bytes() == ACL_ACCESS {
            // Setting an access ACL clears set-group-ID when the caller is neither
            // in the file's group nor has CAP_FSETID (Linux's posix_acl_update_mode;
            // the kernel leaves it to a FUSE_POSIX_ACL server).
            match self.fs.getattr(ino.0) {
                Ok(a) if a.mode & libc::S_ISGID != 0 => {
                    if !in_group(req, a.gid) && !has_fsetid(req) {
                        flags |= XATTR_ACL_KILL_SGID;
                    }
                }
                Ok(_) => {}
                Err(e) => return reply.error(errno(&e)),
            }
        }
        reply_empty(
            reply,
            self.fs.setxattr(ino.0, name.as_bytes(), value, flags),
        );
    }

    pub(crate) fn getxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        size: u32,
        reply: ReplyXattr,
    ) {
        let _busy = crate::inflight::enter("getxattr", ino.0);
        if self.acl_off(name) {
            return reply.error(Errno::EOPNOTSUPP);
        }
        if ino.0 == ROOT_INO && name.as_bytes() == STATS_XATTR.as_bytes() {
            let mut v = match serde_json::to_value(self.fs.stats()) {
                Ok(v) => v,
                Err(_) => return reply.error(Errno::EIO),
            };
            if let Some(o) = v.as_object_mut() {
                // The daemon's own side: requests in flight (not this one) and the
                // page-cache invalidations.
                let me = std::thread::current().name().map(str::to_string);
                let reqs: Vec<_> = crate::inflight::snapshot()
                    .into_iter()
                    .filter(|r| Some(&r.thread) != me.as_ref())
                    .collect();
                o.insert("requests_in_flight".into(), reqs.len().into());
                let oldest = reqs.first().map_or(String::new(), |r| {
                    format!("{} inode {} for {} ms", r.op, r.ino, r.age.as_millis())
                });
                o.insert("oldest_request".into(), oldest.into());
                o.insert(
                    "page_invalidations".into(),
                    self.cache.invalidations().into(),
                );
                o.insert(
                    "page_invalidation_waits_cut".into(),
                    self.cache.timeouts().into(),
                );
            }
            return match serde_json::to_vec(&v) {
                Ok(json) => reply_xattr_value(reply, size, &json),
                Err(_) => reply.error(Errno::EIO),
            };
        }
        match self.fs.getxattr(ino.0, name.as_bytes()) {
            Ok(v) => reply_xattr_value(reply, size, &v),
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(crate) fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let _busy = crate::inflight::enter("listxattr", ino.0);
        // The stats attribute is not listed (it is not a stored attribute, and
        // copying tools must not try to replicate it).
        match self.fs.listxattr(ino.0) {
            Ok(v) if !self.opts.posix_acl => {
                // `noacl`: ACLs stored earlier are not shown.
                let shown: Vec<u8> = v
                    .split_inclusive(|&b| b == 0)
                    .filter(|n| !self.acl_off(OsStr::from_bytes(n.strip_suffix(&[0]).unwrap_or(n))))
                    .flatten()
                    .copied()
                    .collect();
                reply_xattr_value(reply, size, &shown)
            }
            Ok(v) => reply_xattr_value(reply, size, &v),
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(crate) fn removexattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        reply: ReplyEmpty,
    ) {
        let _busy = crate::inflight::enter("removexattr", ino.0);
        if self.acl_off(name) {
            return reply.error(Errno::EOPNOTSUPP);
        }
        reply_empty(reply, self.fs.removexattr(ino.0, name.as_bytes()));
    }

    pub(crate) fn access(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _mask: AccessFlags,
        reply: ReplyEmpty,
    ) {
        let _busy = crate::inflight::enter("access", 0);
        // Mounted with default_permissions: the kernel checks access itself.
        reply.ok();
    }

    pub(crate) fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let _busy = crate::inflight::enter("create", parent.0);
        let node = new_node(req, libc::S_IFREG | (mode & 0o7777), umask, 0);
        let attr = match self.fs.create_node(parent.0, name.as_bytes(), &node) {
            Ok(attr) => attr,
            Err(e) => return reply.error(errno(&e)),
        };
        if let Err(e) = self.fs.open(attr.ino) {
            return reply.error(errno(&e));
        }
        self.reply_created(reply, &attr, flags);
    }

    /// The entry and open handle of a file just made and opened (create, tmpfile):
    /// the kernel's reference to its number is remembered.
    fn reply_created(&self, reply: ReplyCreate, attr: &Attr, flags: i32) {
        self.fs.remember(attr.ino);
        // One TTL for the entry and its attributes here: the shorter one.
        let ttl = self.opts.attr_ttl.min(self.opts.entry_ttl);
        reply.created(&ttl, attr, self.new_fh(flags), self.open_flags());
    }

    pub(crate) fn tmpfile(
        &self,
        req: &Request,
        parent: INodeNo,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let _busy = crate::inflight::enter("tmpfile", parent.0);
        let node = new_node(req, libc::S_IFREG | (mode & 0o7777), umask, 0);
        // Returned open (the engine pins it at once: nothing names it yet).
        let attr = match self.fs.tmpfile(parent.0, &node) {
            Ok(attr) => attr,
            Err(e) => return reply.error(errno(&e)),
        };
        self.reply_created(reply, &attr, flags);
    }

    pub(crate) fn statx(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: Option<FileHandle>,
        reply: ReplyStatx,
    ) {
        let _busy = crate::inflight::enter("statx", ino.0);
        match self.fs.getattr(ino.0) {
            Ok(a) => reply.statx(&self.opts.attr_ttl, &a),
            Err(e) => reply.error(errno(&e)),
        }
    }

    pub(crate) fn ioctl(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
        reply: ReplyIoctl,
    ) {
        let _busy = crate::inflight::enter("ioctl", ino.0);
        if cmd == crate::ioctl::FITRIM || cmd == crate::ioctl::FS_IOC_SETFSLABEL {
            // As every Linux file system's FITRIM and SETFSLABEL: CAP_SYS_ADMIN only.
            const CAP_SYS_ADMIN: u32 = 21;
            if !has_cap(req, CAP_SYS_ADMIN) {
                return reply.error(Errno::EPERM);
            }
        }
        match crate::ioctl::serve(&*self.fs, ino.0, cmd, in_data, out_size) {
            Ok(out) => {
                if cmd == crate::ioctl::FS_IOC_SETFLAGS || cmd == crate::ioctl::FS_IOC_FSSETXATTR {
                    // The flags' change set ctime: the kernel's cached attributes
                    // are stale (it does not expect an ioctl to change them).
                    self.cache.attributes_changed(ino.0);
                }
                reply.ioctl(0, &out)
            }
            Err(e) => reply.error(e),
        }
    }

    pub(crate) fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let _busy = crate::inflight::enter("fallocate", ino.0);
        // fallocate changes the file as a write does: a caller without CAP_FSETID
        // clears its set-id bits (the kernel leaves it to us under killpriv v2).
        if self.killpriv_v2() && !has_fsetid(req) {
            match self.kill_setid(req, ino.0) {
                Ok(true) => self.cache.attributes_changed(ino.0),
                Ok(false) => {}
                Err(e) => return reply.error(errno(&e)),
            }
        }
        let r = self.fs.fallocate(ino.0, offset, length, mode);
        if r.is_ok() {
            self.cache.changed(ino.0);
        }
        reply_empty(reply, r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caller_ids_are_the_file_system_ids_of_a_proc_status() {
        let status = "Name:\tx\nUid:\t1\t2\t3\t4\nGid:\t5\t6\t7\t8\nGroups:\t9\n";
        assert_eq!(fs_id(status, "Uid:"), Some(4));
        assert_eq!(fs_id(status, "Gid:"), Some(8));
        assert_eq!(fs_id("Uid:\t1\t2\n", "Uid:"), None);
        assert_eq!(fs_id("Uid:\t1\t2\t3\tx\n", "Uid:"), None);
    }

    #[test]
    fn setid_bits_a_write_clears() {
        assert_eq!(setid_killed(0o106755, true), 0o755);
        assert_eq!(setid_killed(0o6755, true), 0o755);
        // Set-group-ID without group-exec stays for a writer in the group.
        assert_eq!(setid_killed(0o6745, true), 0o2745);
        assert_eq!(setid_killed(0o6745, false), 0o745);
        assert_eq!(setid_killed(0o1777, false), 0o1777);
    }

    #[test]
    fn setid_bits_a_chown_clears() {
        let reg = libc::S_IFREG;
        // Set-user-ID goes even for a caller with CAP_FSETID.
        assert_eq!(chown_kept(reg | 0o4755, true, true), 0o755);
        // Set-group-ID with group-exec goes; without it, only for a caller
        // neither in the group nor privileged.
        assert_eq!(chown_kept(reg | 0o2755, true, true), 0o755);
        assert_eq!(chown_kept(reg | 0o2745, true, false), 0o2745);
        assert_eq!(chown_kept(reg | 0o2745, false, true), 0o2745);
        assert_eq!(chown_kept(reg | 0o2745, false, false), 0o745);
        // A directory keeps both.
        assert_eq!(chown_kept(libc::S_IFDIR | 0o6755, false, false), 0o6755);
    }
}
