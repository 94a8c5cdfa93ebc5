//! The engine interface: [`FileSystem`], the calls a frontend (the FUSE adapter, the
//! bench harness, later the cluster client's users) makes on a mounted file system,
//! implemented by the local engine [`Fs`](crate::Fs) (in `engine.rs`).
//!
//! Frontends are generic over `E: FileSystem` (monomorphized: the local engine's
//! calls inline exactly as the inherent ones did), so another implementation — a
//! cluster client that asks a metadata server for the namespace and writes file data
//! straight into shared PM (DESIGN.md §7) — is mounted and benchmarked through the
//! same adapter and harness.
//!
//! The local engine's implementation (in `engine.rs`, beside `Fs`'s inherent
//! methods) only delegates to them; all logic stays in the engine.

use crate::error::{FsError, Result};
use crate::types::{Attr, DirEntry, Ino, NewNode, RenameFlags, SetAttr, StatFs};

/// A mounted file system as its frontends see it.
///
/// # Contract shared by every method
///
/// - Inode numbers are [`Ino`]s; the root directory is [`crate::ROOT_INO`]. A number
///   names one file for as long as the file exists or is pinned (open, or
///   remembered by a frontend); afterwards it may be reused.
/// - Errors are [`FsError`](crate::FsError)s; [`FsError::errno`](crate::FsError::errno)
///   is the one errno mapping every frontend uses. An implementation that fails for
///   reasons of its own (a lost connection, an expired lease) reports them as
///   `FsError::Io` with a fitting OS error.
/// - Names are bytes without `/` or NUL, at most `NAME_MAX` bytes; `.` and `..` are
///   understood by [`lookup`](Self::lookup) and listed by [`readdir`](Self::readdir).
/// - Every method may be called from many threads at once (`Send + Sync`, `&self`).
/// - Durability: an implementation states when a change is durable; whatever it
///   does, a change is durable at the latest when [`fsync`](Self::fsync) of the file
///   (or of the directory, for namespace changes) returns `Ok`. The local engine is
///   synchronous: every call that returned `Ok` is already durable. A cluster client
///   may return from `write` before its commit reaches the metadata server; errors of
///   such background work come back through the next `fsync` or `release`.
/// - Concurrency semantics are those of POSIX: a write is atomic with respect to
///   reads and other writes of an overlapping range; `rename` is atomic.
///
/// # What is not in the trait
///
/// Local-engine facts and maintenance calls stay inherent methods of [`Fs`](crate::Fs) and are
/// reached through the concrete type by code that built the local engine:
/// `lawn_writeback`, `lock_memory`, `log_bytes`, `geometry`, `thread_counters`,
/// `marker` (the crash explorer's), `pm_profile`, `map_mode` and `flush_kind`
/// (how the local image is mapped). [`pm_counters`](Self::pm_counters) is in the
/// trait with a default (all zeros) because the harness reads it around every
/// measured phase; an implementation that maps PM itself overrides it. Statistics are
/// an associated type ([`Stats`](Self::Stats)): the local engine's [`FsStats`](crate::FsStats) carry
/// PM, LAWN and lock-mode fields that another implementation would not have.
pub trait FileSystem: Send + Sync {
    /// An open file as [`open_handle`](Self::open_handle) returns it: whatever lets
    /// [`handle_read`](Self::handle_read) and [`handle_write`](Self::handle_write)
    /// skip the per-call inode lookup (the local engine holds the in-DRAM inode; a
    /// cluster client can hold the file's layout and its commit queue). `Send`, so a
    /// benchmark thread can own it.
    type Handle: Send;

    /// What [`stats`](Self::stats) returns; the FUSE adapter serves it as JSON in the
    /// root directory's `user.mnemofs.stats` xattr.
    type Stats: serde::Serialize;

    // ----------------------------------------------------------------- namespace --

    /// Attributes of `name` in directory `parent` (`.` is `parent`, `..` its
    /// parent). Errors: `NotFound`, `NotDir` when `parent` is not a directory,
    /// `NameTooLong`.
    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr>;

    /// Attributes of `ino`; `NotFound` when it does not exist.
    fn getattr(&self, ino: Ino) -> Result<Attr>;

    /// Changes the attributes `req` sets (a `None` field is left alone; `ctime`
    /// defaults to now) as one durable change and returns the new attributes. A size
    /// change truncates or extends a regular file (bytes beyond the old end read as
    /// zeros); on a directory it is `IsDir`, on other kinds `Invalid`.
    fn setattr(&self, ino: Ino, req: &SetAttr) -> Result<Attr>;

    /// Creates a node other than a directory or symlink in `parent`; `mode`
    /// includes the `S_IFMT` bits, `rdev` is the device number of a device node.
    /// `Exists` when the name is taken.
    fn mknod(
        &self,
        parent: Ino,
        name: &[u8],
        mode: u32,
        rdev: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr>;

    /// Creates an empty regular file (`mode`: the permission bits). `Exists` when
    /// the name is taken. Does not open it.
    fn create(&self, parent: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr>;

    /// Creates an empty directory (`mode`: the permission bits). `Exists` when the
    /// name is taken.
    fn mkdir(&self, parent: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr>;

    /// Creates a regular file, directory or special node (`node.mode` has the
    /// `S_IFMT` bits) with the umask applied, or, when `parent` has a POSIX default
    /// ACL, with the ACL and mode it gives instead (an access ACL, and for a
    /// directory the default ACL too, in the same durable change).
    fn create_node(&self, parent: Ino, name: &[u8], node: &NewNode) -> Result<Attr>;

    /// Creates an unnamed regular file in directory `parent` (Linux's `O_TMPFILE`)
    /// as `node` describes, returned open: one [`open`](Self::open) pin, dropped
    /// with [`release`](Self::release). Its link count is 0 until [`link`](Self::link)
    /// gives it a first name; without one it is freed with its last pin, and after
    /// a crash. `Unsupported` where the file system has no unnamed files.
    fn tmpfile(&self, parent: Ino, node: &NewNode) -> Result<Attr> {
        let _ = (parent, node);
        Err(FsError::Unsupported("unnamed files (O_TMPFILE)"))
    }

    /// Creates a symbolic link `name` in `parent` pointing at `target` (non-empty).
    fn symlink(&self, parent: Ino, name: &[u8], target: &[u8], uid: u32, gid: u32) -> Result<Attr>;

    /// The target of symlink `ino`; `Invalid` for other kinds.
    fn readlink(&self, ino: Ino) -> Result<Vec<u8>>;

    /// The value of extended attribute `name` of `ino`; `NoData` when it has none,
    /// `Range` for a name over 255 bytes, `Unsupported` outside the `user.`,
    /// `trusted.`, `security.` namespaces and the POSIX ACL names.
    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>>;

    /// The extended attribute names of `ino`, each followed by a NUL.
    fn listxattr(&self, ino: Ino) -> Result<Vec<u8>>;

    /// Sets extended attribute `name` of `ino` (`flags`: `XATTR_CREATE` → `Exists`
    /// if present, `XATTR_REPLACE` → `NoData` if absent); `NoSpace` past the per-value
    /// or per-inode limit; `NotPermitted` for `user.` on other than files and
    /// directories. Durable on return; ctime changes. The POSIX ACL names take a
    /// valid ACL (`Invalid` otherwise): an access ACL sets the permission bits of
    /// the mode with it ([`crate::acl::XATTR_ACL_KILL_SGID`] in `flags` also clears
    /// set-group-ID); a default ACL is for directories (`AccessDenied` elsewhere);
    /// an ACL of no entries removes one.
    fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8], flags: i32) -> Result<()>;

    /// Removes extended attribute `name` of `ino`; `NoData` when it has none (an
    /// absent POSIX ACL: success, as on Linux).
    fn removexattr(&self, ino: Ino, name: &[u8]) -> Result<()>;

    /// Removes the non-directory `name` from `parent`. The file's data lives on
    /// while it is open or remembered (see [`remember`](Self::remember)).
    fn unlink(&self, parent: Ino, name: &[u8]) -> Result<()>;

    /// Removes the empty directory `name` from `parent` (`NotEmpty` otherwise).
    fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<()>;

    /// Adds the name `newname` in `newparent` for the existing non-directory `ino`
    /// and returns its attributes (link count raised).
    fn link(&self, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr>;

    /// Renames `parent/name` to `newparent/newname` atomically (`renameat2`
    /// semantics with `flags`): after a crash either the old or the new namespace
    /// is there, never both or neither.
    fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        flags: RenameFlags,
    ) -> Result<()>;

    /// At most `max` entries of directory `ino` after `offset` (0 = from the start;
    /// `.` and `..` first). Each entry carries its own offset, stable for as long as
    /// the entry exists: a listing continued from it neither repeats nor skips a
    /// surviving name, even across concurrent changes.
    fn readdir(&self, ino: Ino, offset: u64, max: usize) -> Result<Vec<DirEntry>>;

    // ---------------------------------------------------------------- file data --

    /// Reads up to `buf.len()` bytes at `offset` of regular file `ino`; returns the
    /// bytes read (fewer only at end of file; holes read as zeros). `IsDir` for a
    /// directory.
    fn read(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize>;

    /// Writes `data` at `offset` of regular file `ino` (extending it as needed);
    /// returns the bytes written (all of `data` on success).
    fn write(&self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize>;

    /// `O_APPEND` write: writes `data` at the end of file, chosen atomically with
    /// respect to other appends and writes; returns the offset it was written at.
    fn append(&self, ino: Ino, data: &[u8]) -> Result<u64>;

    /// `fallocate(2)` with `mode` 0 or `FALLOC_FL_KEEP_SIZE` (allocate zeroed
    /// space for holes) or `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`
    /// (deallocate); other modes are `Unsupported`.
    fn fallocate(&self, ino: Ino, offset: u64, len: u64, mode: i32) -> Result<()>;

    // ------------------------------------------------------- open files, pinning --

    /// Pins `ino` open: after its last unlink it stays readable and writable until
    /// the matching [`release`](Self::release). `NotFound` when it does not exist.
    fn open(&self, ino: Ino) -> Result<()>;

    /// Drops one pin taken with [`open`](Self::open); the last one of an unlinked
    /// file frees it. An implementation with buffered work reports its errors here
    /// (or at `fsync`); it need not wait for that work to become durable.
    fn release(&self, ino: Ino) -> Result<()>;

    /// Opens `ino` like [`open`](Self::open) and returns a handle for
    /// [`handle_read`](Self::handle_read) / [`handle_write`](Self::handle_write)
    /// (a kernel's `struct file`). Give it back with
    /// [`close_handle`](Self::close_handle).
    fn open_handle(&self, ino: Ino) -> Result<Self::Handle>;

    /// Closes a handle from [`open_handle`](Self::open_handle), like
    /// [`release`](Self::release).
    fn close_handle(&self, h: Self::Handle) -> Result<()>;

    /// [`read`](Self::read) of the handle's file; same results.
    fn handle_read(&self, h: &Self::Handle, offset: u64, buf: &mut [u8]) -> Result<usize>;

    /// [`write`](Self::write) of the handle's file; same results.
    fn handle_write(&self, h: &Self::Handle, offset: u64, data: &[u8]) -> Result<usize>;

    /// Records that a frontend handed out a reference to `ino` (a FUSE entry reply:
    /// lookup, create, mkdir, mknod, symlink, link). Until the matching
    /// [`forget`](Self::forget), an unlinked inode keeps its number and its data.
    /// Unknown inodes are ignored.
    fn remember(&self, ino: Ino);

    /// Drops `n` references taken with [`remember`](Self::remember) (never below
    /// zero). Unknown inodes are ignored.
    fn forget(&self, ino: Ino, n: u64);

    /// Returns once every completed change of `ino` (its data, its attributes, and
    /// for a directory its entries) is durable, or with the error of a change that
    /// could not be made durable. The local engine's changes are durable when they
    /// return, so for it this only checks that `ino` exists.
    fn fsync(&self, ino: Ino) -> Result<()>;

    // ------------------------------------------------------------ whole mount --

    /// Whether every call that returned `Ok` is already durable (the local engine,
    /// a cluster client with synchronous commits). A frontend may then answer
    /// fsync and close without calling in (the FUSE adapter tells the kernel to stop
    /// sending FSYNC and FLUSH). `false` (a cluster client with delayed commits):
    /// the frontend passes fsync to [`fsync`](Self::fsync) and close to
    /// [`close_check`](Self::close_check).
    fn durable_on_return(&self) -> bool {
        true
    }

    /// At every close(2) of `ino` (FUSE FLUSH), for an implementation whose calls
    /// are not durable on return: the error of background work on the file since
    /// the last `fsync` or close, if any (it is then cleared). Need not wait.
    fn close_check(&self, ino: Ino) -> Result<()> {
        let _ = ino;
        Ok(())
    }

    /// Space and inode totals for `statfs(2)`.
    fn statfs(&self) -> StatFs;

    /// The inode flags of `ino` (`FS_IOC_GETFLAGS`; [`crate::inode_flags`]). The
    /// default: none.
    fn inode_flags(&self, ino: Ino) -> Result<u32> {
        self.getattr(ino).map(|_| 0)
    }

    /// Sets the inode flags of `ino` (`FS_IOC_SETFLAGS`). The default keeps no
    /// flags: `Unsupported` for any but none.
    fn set_inode_flags(&self, ino: Ino, flags: u32) -> Result<()> {
        self.getattr(ino)?;
        if flags == 0 {
            return Ok(());
        }
        Err(crate::FsError::Unsupported("inode flags"))
    }

    /// The file-system label (FS_IOC_GETFSLABEL; empty: none). The default: none.
    fn label(&self) -> Result<Vec<u8>> {
        Ok(Vec::new())
    }

    /// Sets the file-system label (FS_IOC_SETFSLABEL). The default: `Unsupported`.
    fn set_label(&self, label: &[u8]) -> Result<()> {
        let _ = label;
        Err(crate::FsError::Unsupported("a file-system label"))
    }

    /// FITRIM: gives back the memory behind free space within bytes `[start, start
    /// + len)`, in free runs of at least `min_len` bytes; the bytes given back. The
    /// default: `Unsupported`.
    fn trim(&self, start: u64, len: u64, min_len: u64) -> Result<u64> {
        let _ = (start, len, min_len);
        Err(crate::FsError::Unsupported("FITRIM"))
    }

    /// When reads update atime now. The default, `Noatime`, is for an
    /// implementation that keeps no access times.
    fn atime_mode(&self) -> crate::AtimeMode {
        crate::AtimeMode::Noatime
    }

    /// Whether a read of `ino` now would update its atime (the mode and, under
    /// `relatime`, its times say so). A frontend with a page cache lets such a
    /// read reach the implementation.
    fn atime_due(&self, ino: Ino) -> bool {
        let _ = ino;
        false
    }

    /// A remount changed the mount's flags: read-only (every change refused,
    /// nothing written) or read-write, and when reads update atime. The default
    /// says the implementation cannot switch (`Unsupported`): the kernel's flags
    /// still hold at its mount.
    fn remount(&self, read_only: bool, atime: crate::AtimeMode) -> Result<()> {
        let _ = (read_only, atime);
        Err(crate::FsError::Unsupported("remount"))
    }

    /// Statistics of the mount (see [`Stats`](Self::Stats)). Not a hot-path call:
    /// it may walk every inode.
    fn stats(&self) -> Self::Stats;

    /// PM traffic of the whole mount so far (all threads; monotonic), which the
    /// bench harness reads just before and after a measured phase. Default: all
    /// zeros, for an implementation that does not store to PM itself or does not
    /// count (its benchmark results then show no PM traffic).
    fn pm_counters(&self) -> pm::CounterSnapshot {
        pm::CounterSnapshot::default()
    }

    /// Ends the mount: everything completed becomes durable, the implementation's
    /// resources are released, and a later mount finds a clean file system (the
    /// local engine saves its free lists and marks the image clean).
    fn unmount(self) -> Result<()>
    where
        Self: Sized;
}
