//! A second implementation of the engine interface: a decorator that wraps the local
//! engine and counts every call, with a handle type of its own. Shared by the seam
//! tests (bench harness, FUSE adapter).

use mnemofs::{
    Attr, DirEntry, FileHandle, FileSystem, Fs, FsStats, Ino, NewNode, RenameFlags, Result,
    SetAttr, StatFs,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The methods of [`FileSystem`], in declaration order.
pub const METHODS: &[&str] = &[
    "lookup",
    "getattr",
    "setattr",
    "mknod",
    "create",
    "mkdir",
    "create_node",
    "symlink",
    "readlink",
    "unlink",
    "rmdir",
    "link",
    "rename",
    "readdir",
    "read",
    "write",
    "append",
    "fallocate",
    "open",
    "release",
    "open_handle",
    "close_handle",
    "handle_read",
    "handle_write",
    "remember",
    "forget",
    "fsync",
    "statfs",
    "stats",
    "pm_counters",
    "unmount",
];

/// Counts calls per method and forwards them to `inner`.
pub struct Counting {
    pub inner: Fs,
    calls: Calls,
}

/// The call counts of a [`Counting`] engine; they outlive it (a mount consumes the
/// engine when it unmounts).
#[derive(Clone)]
pub struct Calls(Arc<Vec<AtomicU64>>);

impl Calls {
    /// Calls so far of each method that was called at least once.
    pub fn counts(&self) -> BTreeMap<&'static str, u64> {
        METHODS
            .iter()
            .zip(self.0.iter())
            .map(|(m, c)| (*m, c.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

/// The decorator's own handle type (wrapping the engine's).
pub struct CountedHandle {
    inner: FileHandle,
}

impl Counting {
    pub fn new(inner: Fs) -> Counting {
        Counting {
            inner,
            calls: Calls(Arc::new(
                METHODS.iter().map(|_| AtomicU64::new(0)).collect(),
            )),
        }
    }

    fn count(&self, method: &str) {
        let i = METHODS
            .iter()
            .position(|m| *m == method)
            .unwrap_or_else(|| panic!("unknown method {method}"));
        self.calls.0[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Calls so far of each method that was called at least once.
    pub fn counts(&self) -> BTreeMap<&'static str, u64> {
        self.calls.counts()
    }

    /// The counts, shared.
    #[allow(dead_code)]
    pub fn calls(&self) -> Calls {
        self.calls.clone()
    }
}

impl FileSystem for Counting {
    type Handle = CountedHandle;
    type Stats = FsStats;

    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.count("lookup");
        self.inner.lookup(parent, name)
    }
    fn getattr(&self, ino: Ino) -> Result<Attr> {
        self.count("getattr");
        self.inner.getattr(ino)
    }
    fn setattr(&self, ino: Ino, req: &SetAttr) -> Result<Attr> {
        self.count("setattr");
        self.inner.setattr(ino, req)
    }
    fn mknod(
        &self,
        parent: Ino,
        name: &[u8],
        mode: u32,
        rdev: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        self.count("mknod");
        self.inner.mknod(parent, name, mode, rdev, uid, gid)
    }
    fn create(&self, parent: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> {
        self.count("create");
        self.inner.create(parent, name, mode, uid, gid)
    }
    fn mkdir(&self, parent: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> {
        self.count("mkdir");
        self.inner.mkdir(parent, name, mode, uid, gid)
    }
    fn create_node(&self, parent: Ino, name: &[u8], node: &NewNode) -> Result<Attr> {
        self.count("create_node");
        self.inner.create_node(parent, name, node)
    }
    fn symlink(&self, parent: Ino, name: &[u8], target: &[u8], uid: u32, gid: u32) -> Result<Attr> {
        self.count("symlink");
        self.inner.symlink(parent, name, target, uid, gid)
    }
    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.count("readlink");
        self.inner.readlink(ino)
    }
    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.count("getxattr");
        self.inner.getxattr(ino, name)
    }
    fn listxattr(&self, ino: Ino) -> Result<Vec<u8>> {
        self.count("listxattr");
        self.inner.listxattr(ino)
    }
    fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        self.count("setxattr");
        self.inner.setxattr(ino, name, value, flags)
    }
    fn removexattr(&self, ino: Ino, name: &[u8]) -> Result<()> {
        self.count("removexattr");
        self.inner.removexattr(ino, name)
    }
    fn unlink(&self, parent: Ino, name: &[u8]) -> Result<()> {
        self.count("unlink");
        self.inner.unlink(parent, name)
    }
    fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<()> {
        self.count("rmdir");
        self.inner.rmdir(parent, name)
    }
    fn link(&self, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> {
        self.count("link");
        self.inner.link(ino, newparent, newname)
    }
    fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        self.count("rename");
        self.inner.rename(parent, name, newparent, newname, flags)
    }
    fn readdir(&self, ino: Ino, offset: u64, max: usize) -> Result<Vec<DirEntry>> {
        self.count("readdir");
        self.inner.readdir(ino, offset, max)
    }
    fn read(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.count("read");
        self.inner.read(ino, offset, buf)
    }
    fn write(&self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize> {
        self.count("write");
        self.inner.write(ino, offset, data)
    }
    fn append(&self, ino: Ino, data: &[u8]) -> Result<u64> {
        self.count("append");
        self.inner.append(ino, data)
    }
    fn fallocate(&self, ino: Ino, offset: u64, len: u64, mode: i32) -> Result<()> {
        self.count("fallocate");
        self.inner.fallocate(ino, offset, len, mode)
    }
    fn open(&self, ino: Ino) -> Result<()> {
        self.count("open");
        self.inner.open(ino)
    }
    fn release(&self, ino: Ino) -> Result<()> {
        self.count("release");
        self.inner.release(ino)
    }
    fn open_handle(&self, ino: Ino) -> Result<CountedHandle> {
        self.count("open_handle");
        Ok(CountedHandle {
            inner: self.inner.open_handle(ino)?,
        })
    }
    fn close_handle(&self, h: CountedHandle) -> Result<()> {
        self.count("close_handle");
        self.inner.close_handle(h.inner)
    }
    fn handle_read(&self, h: &CountedHandle, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.count("handle_read");
        self.inner.handle_read(&h.inner, offset, buf)
    }
    fn handle_write(&self, h: &CountedHandle, offset: u64, data: &[u8]) -> Result<usize> {
        self.count("handle_write");
        self.inner.handle_write(&h.inner, offset, data)
    }
    fn remember(&self, ino: Ino) {
        self.count("remember");
        self.inner.remember(ino)
    }
    fn forget(&self, ino: Ino, n: u64) {
        self.count("forget");
        self.inner.forget(ino, n)
    }
    fn fsync(&self, ino: Ino) -> Result<()> {
        self.count("fsync");
        self.inner.fsync(ino)
    }
    fn statfs(&self) -> StatFs {
        self.count("statfs");
        self.inner.statfs()
    }
    fn stats(&self) -> FsStats {
        self.count("stats");
        self.inner.stats()
    }
    fn pm_counters(&self) -> pm::CounterSnapshot {
        self.count("pm_counters");
        self.inner.pm_counters()
    }
    fn unmount(self) -> Result<()> {
        self.count("unmount");
        self.inner.unmount()
    }
}
