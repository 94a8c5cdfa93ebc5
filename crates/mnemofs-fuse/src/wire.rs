//! The FUSE protocol as the kernel speaks it on `/dev/fuse` (Linux's
//! `include/uapi/linux/fuse.h`, protocol 7.31 and later): the request header and
//! the argument structs of the requests the adapter serves, decoded from the bytes
//! one read returned; and the replies, encoded and written back with one `writev`.
//!
//! Everything in a request is checked against the bytes actually read (a short or
//! malformed request is answered EIO, never trusted). Layouts are little-endian
//! `#[repr(C)]` structs without implicit padding on x86-64, read field by field.

use fuser::{Errno, FileHandle, FopenFlags, INodeNo};
use mnemofs::{Attr, FileKind, Timespec};
use std::io::IoSlice;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

/// Request opcodes (`enum fuse_opcode`).
pub mod op {
    pub const LOOKUP: u32 = 1;
    pub const FORGET: u32 = 2;
    pub const GETATTR: u32 = 3;
    pub const SETATTR: u32 = 4;
    pub const READLINK: u32 = 5;
    pub const SYMLINK: u32 = 6;
    pub const MKNOD: u32 = 8;
    pub const MKDIR: u32 = 9;
    pub const UNLINK: u32 = 10;
    pub const RMDIR: u32 = 11;
    pub const RENAME: u32 = 12;
    pub const LINK: u32 = 13;
    pub const OPEN: u32 = 14;
    pub const READ: u32 = 15;
    pub const WRITE: u32 = 16;
    pub const STATFS: u32 = 17;
    pub const RELEASE: u32 = 18;
    pub const FSYNC: u32 = 20;
    pub const SETXATTR: u32 = 21;
    pub const GETXATTR: u32 = 22;
    pub const LISTXATTR: u32 = 23;
    pub const REMOVEXATTR: u32 = 24;
    pub const FLUSH: u32 = 25;
    pub const INIT: u32 = 26;
    pub const OPENDIR: u32 = 27;
    pub const READDIR: u32 = 28;
    pub const RELEASEDIR: u32 = 29;
    pub const FSYNCDIR: u32 = 30;
    pub const ACCESS: u32 = 34;
    pub const CREATE: u32 = 35;
    pub const INTERRUPT: u32 = 36;
    pub const NOTIFY_REPLY: u32 = 41;
    pub const DESTROY: u32 = 38;
    pub const IOCTL: u32 = 39;
    pub const BATCH_FORGET: u32 = 42;
    pub const FALLOCATE: u32 = 43;
    pub const RENAME2: u32 = 45;
    pub const TMPFILE: u32 = 51;
    pub const STATX: u32 = 52;
}

/// `fuse_setattr_in.valid` bits.
pub mod fattr {
    pub const MODE: u32 = 1 << 0;
    pub const UID: u32 = 1 << 1;
    pub const GID: u32 = 1 << 2;
    pub const SIZE: u32 = 1 << 3;
    pub const ATIME: u32 = 1 << 4;
    pub const MTIME: u32 = 1 << 5;
    pub const FH: u32 = 1 << 6;
    pub const ATIME_NOW: u32 = 1 << 7;
    pub const MTIME_NOW: u32 = 1 << 8;
    pub const CTIME: u32 = 1 << 10;
}

/// `fuse_getattr_in.getattr_flags`: the request names an open file.
pub const GETATTR_FH: u32 = 1;
/// `fuse_read_in.read_flags`: `lock_owner` is set.
pub const READ_LOCKOWNER: u32 = 2;
/// `fuse_release_in.release_flags`: flush before release.
pub const RELEASE_FLUSH: u32 = 1;
/// `fuse_release_in.release_flags`: drop the flock locks of `lock_owner`.
pub const RELEASE_FLOCK_UNLOCK: u32 = 2;
/// `fuse_fsync_in.fsync_flags`: fdatasync.
pub const FSYNC_FDATASYNC: u32 = 1;
/// `fuse_ioctl_in.flags`: an unrestricted (CUSE-style) ioctl.
pub const IOCTL_UNRESTRICTED: u32 = 2;

/// Bytes of `struct fuse_in_header`.
pub const IN_HEADER: usize = 40;
/// Bytes of `struct fuse_out_header`.
const OUT_HEADER: usize = 16;

/// A request's header (`struct fuse_in_header`).
#[derive(Clone, Copy, Debug)]
pub struct Header {
    /// What it asks for ([`op`]).
    pub opcode: u32,
    /// Its number, which the reply names.
    pub unique: u64,
    /// The inode it is about.
    pub nodeid: u64,
    /// The caller's file-system user ID (`u32::MAX` when the kernel names none).
    pub uid: u32,
    /// The caller's file-system group ID.
    pub gid: u32,
    /// The caller's thread group.
    pub pid: u32,
}

/// A request that does not decode: answered EIO.
#[derive(Debug)]
pub struct Malformed;

/// Reads the arguments of a request in order.
pub struct Args<'a> {
    b: &'a [u8],
}

impl<'a> Args<'a> {
    /// The arguments of a request of `buf` (the header checked against it): the
    /// header and the arguments, without the extension headers.
    pub fn parse(buf: &'a [u8]) -> Result<(Header, Args<'a>), Malformed> {
        let mut a = Args { b: buf };
        let len = a.u32()?;
        let opcode = a.u32()?;
        let unique = a.u64()?;
        let nodeid = a.u64()?;
        let uid = a.u32()?;
        let gid = a.u32()?;
        let pid = a.u32()?;
        // Extension headers after the arguments, in 8-byte units.
        let total_extlen = a.u16()?;
        let _padding = a.u16()?;
        let h = Header {
            opcode,
            unique,
            nodeid,
            uid,
            gid,
            pid,
        };
        let ext = usize::from(total_extlen) * 8;
        let end = usize::try_from(len).map_err(|_| Malformed)?;
        if end != buf.len() || end < IN_HEADER + ext {
            return Err(Malformed);
        }
        Ok((
            h,
            Args {
                b: &buf[IN_HEADER..end - ext],
            },
        ))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.b.len() < n {
            return Err(Malformed);
        }
        let (x, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(x)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Malformed> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    /// A `u16`.
    pub fn u16(&mut self) -> Result<u16, Malformed> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    /// A `u32`.
    pub fn u32(&mut self) -> Result<u32, Malformed> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A `u64`.
    pub fn u64(&mut self) -> Result<u64, Malformed> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// `n` bytes of padding or fields the adapter does not use.
    pub fn skip(&mut self, n: usize) -> Result<(), Malformed> {
        self.take(n).map(drop)
    }

    /// A NUL-terminated name (without its NUL).
    pub fn name(&mut self) -> Result<&'a [u8], Malformed> {
        let n = self.b.iter().position(|&c| c == 0).ok_or(Malformed)?;
        let s = self.take(n)?;
        self.take(1)?;
        Ok(s)
    }

    /// Exactly `n` bytes of data.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        self.take(n)
    }
}

/// Who sent a request.
#[derive(Clone, Copy, Debug)]
pub struct Request {
    uid: u32,
    gid: u32,
    pid: u32,
}

impl Request {
    /// The caller of the request with header `h`.
    pub fn new(h: &Header) -> Request {
        Request {
            uid: h.uid,
            gid: h.gid,
            pid: h.pid,
        }
    }

    /// The caller's file-system user ID (`u32::MAX` where the kernel names none).
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// The caller's file-system group ID (`u32::MAX` where the kernel names none).
    pub fn gid(&self) -> u32 {
        self.gid
    }

    /// The caller's process (thread group) ID.
    pub fn pid(&self) -> u32 {
        self.pid
    }
}

/// Where a reply goes: the `/dev/fuse` descriptor the request came from, and the
/// request's number. A reply not sent when dropped is sent as EIO.
pub struct Out {
    fd: RawFd,
    unique: u64,
    sent: bool,
}

impl Out {
    /// A reply to request `unique` read from `fd`, which stays open while the reply
    /// exists (the session loop owns it).
    pub fn new(fd: BorrowedFd<'_>, unique: u64) -> Out {
        Out {
            fd: fd.as_raw_fd(),
            unique,
            sent: false,
        }
    }

    fn send(&mut self, error: i32, payload: &[&[u8]]) {
        self.sent = true;
        // Every reply is the header and at most two parts.
        debug_assert!(payload.len() <= 2);
        let payload = &payload[..payload.len().min(2)];
        let len: usize = OUT_HEADER + payload.iter().map(|p| p.len()).sum::<usize>();
        let mut header = [0u8; OUT_HEADER];
        header[0..4].copy_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes());
        header[4..8].copy_from_slice(&(-error).to_le_bytes());
        header[8..16].copy_from_slice(&self.unique.to_le_bytes());
        let mut iov = [IoSlice::new(&[]); 3];
        iov[0] = IoSlice::new(&header);
        let parts = payload.len();
        for (slot, p) in iov[1..].iter_mut().zip(payload) {
            *slot = IoSlice::new(p);
        }
        // SAFETY: `fd` is the session's open /dev/fuse descriptor (`Out::new`), and
        // the first `1 + parts` entries of `iov` are valid slices for the duration of
        // the call (IoSlice is ABI-compatible with struct iovec).
        let r = unsafe { libc::writev(self.fd, iov.as_ptr().cast(), 1 + parts as libc::c_int) };
        // ENOENT: the request was interrupted and is gone; ENODEV: the connection
        // is ending, which the session loop sees next. Anything else is a reply
        // the kernel refused (its caller got EIO): logged.
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if !matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENODEV)) {
                eprintln!("mnemofs: the kernel refused a reply: {e}");
            }
        }
    }

    fn error(mut self, e: Errno) {
        self.send(e.code(), &[]);
    }

    fn ok(mut self, payload: &[&[u8]]) {
        self.send(0, payload);
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        if !self.sent {
            self.send(libc::EIO, &[]);
        }
    }
}

/// Bytes of `struct fuse_attr` (protocol 7.9 and later).
const ATTR: usize = 88;

fn put(b: &mut Vec<u8>, bytes: &[u8]) {
    b.extend_from_slice(bytes);
}

/// `struct fuse_attr` of engine attributes.
fn attr_bytes(b: &mut Vec<u8>, a: &Attr) {
    put(b, &a.ino.to_le_bytes());
    put(b, &a.size.to_le_bytes());
    // The engine counts 4 KiB pages; `st_blocks` is in 512-byte units.
    put(b, &a.blocks.saturating_mul(8).to_le_bytes());
    for t in [a.atime, a.mtime, a.ctime] {
        put(b, &t.sec.to_le_bytes());
    }
    for t in [a.atime, a.mtime, a.ctime] {
        put(b, &t.nsec.min(999_999_999).to_le_bytes());
    }
    put(b, &mode(a).to_le_bytes());
    put(b, &a.nlink.to_le_bytes());
    put(b, &a.uid.to_le_bytes());
    put(b, &a.gid.to_le_bytes());
    put(b, &a.rdev.to_le_bytes());
    put(b, &crate::convert::BLKSIZE.to_le_bytes());
    put(b, &0u32.to_le_bytes()); // flags
}

/// The file type of the engine's kind with the permission bits (the kernel marks an
/// inode bad whose type changes).
fn mode(a: &Attr) -> u32 {
    a.kind.mode_bits() | (a.mode & 0o7777)
}

fn ttl_bytes(b: &mut Vec<u8>, ttl: &Duration) {
    put(b, &ttl.as_secs().to_le_bytes());
}

/// `struct fuse_entry_out`.
fn entry_bytes(b: &mut Vec<u8>, attr_ttl: &Duration, entry_ttl: &Duration, a: &Attr) {
    put(b, &a.ino.to_le_bytes());
    put(b, &u64::from(a.generation).to_le_bytes());
    ttl_bytes(b, entry_ttl);
    ttl_bytes(b, attr_ttl);
    put(b, &entry_ttl.subsec_nanos().to_le_bytes());
    put(b, &attr_ttl.subsec_nanos().to_le_bytes());
    attr_bytes(b, a);
}

/// `struct fuse_open_out`.
fn open_bytes(b: &mut Vec<u8>, fh: FileHandle, flags: FopenFlags) {
    put(b, &fh.0.to_le_bytes());
    put(b, &flags.bits().to_le_bytes());
    put(b, &0u32.to_le_bytes()); // backing_id
}

/// Reply with the entry of a name (lookup, mknod, mkdir, symlink, link).
pub struct ReplyEntry(pub Out);

impl ReplyEntry {
    /// The entry: `a`, cached for the TTLs given.
    pub fn entry(self, attr_ttl: &Duration, entry_ttl: &Duration, a: &Attr) {
        let mut b = Vec::with_capacity(40 + ATTR);
        entry_bytes(&mut b, attr_ttl, entry_ttl, a);
        self.0.ok(&[&b]);
    }

    /// An error.
    pub fn error(self, e: Errno) {
        self.0.error(e)
    }
}

/// Reply with attributes (getattr, setattr).
pub struct ReplyAttr(pub Out);

impl ReplyAttr {
    /// The attributes, cached for `ttl`.
    pub fn attr(self, ttl: &Duration, a: &Attr) {
        let mut b = Vec::with_capacity(16 + ATTR);
        ttl_bytes(&mut b, ttl);
        put(&mut b, &ttl.subsec_nanos().to_le_bytes());
        put(&mut b, &0u32.to_le_bytes());
        attr_bytes(&mut b, a);
        self.0.ok(&[&b]);
    }

    /// An error.
    pub fn error(self, e: Errno) {
        self.0.error(e)
    }
}

/// Reply with bytes (read, readlink).
pub struct ReplyData(pub Out);

impl ReplyData {
    /// The bytes.
    pub fn data(self, d: &[u8]) {
        self.0.ok(&[d]);
    }

    /// An error.
    pub fn error(self, e: Errno) {
        self.0.error(e)
    }
}

/// Reply with success or an error only.
pub struct ReplyEmpty(pub Out);

impl ReplyEmpty {
    /// Success.
    pub fn ok(self) {
        self.0.ok(&[]);
    }

    /// An error.
    pub fn error(self, e: Errno) {
        self.0.error(e)
    }
}

/// Reply to an open or opendir.
pub struct ReplyOpen(pub Out);

impl ReplyOpen {
    /// Opened: handle `fh`, with `flags` for the kernel.
    pub fn opened(self, fh: FileHandle, flags: FopenFlags) {
        let mut b = Vec::with_capacity(16);
        open_bytes(&mut b, fh, flags);
        self.0.ok(&[&b]);
    }

    /// An error.
    pub fn error(self, e: Errno) {
        self.0.error(e)
    }
}

/// Reply to a write.
pub struct ReplyWrite(pub Out);

impl ReplyWrite {
    /// `n` bytes written.
    pub fn written(self, n: u32) {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&n.to_le_bytes());
        self.0.ok(&[&b]);
    }

    /// An error.
    pub fn error(self, e: Errno) {
        self.0.error(e)
    }
}

/// Reply to a statfs.
pub struct ReplyStatfs(pub Out);

impl ReplyStatfs {
    /// `struct fuse_kstatfs`.
    #[allow(clippy::too_many_arguments)]
    pub fn statfs(
        self,
        blocks: u64,
        bfree: u64,
        bavail: u64,
        files: u64,
        ffree: u64,
        bsize: u32,
        namelen: u32,
        frsize: u32,
    ) {
        let mut b = Vec::with_capacity(80);
        for v in [blocks, bfree, bavail, files, ffree] {
            put(&mut b, &v.to_le_bytes());
        }
        for v in [bsize, namelen, frsize, 0] {
            put(&mut b, &v.to_le_bytes());
        }
        b.resize(80, 0); // spare[6]
        self.0.ok(&[&b]);
    }
}

/// Reply to getxattr or listxattr: the size asked for, or the bytes.
pub struct ReplyXattr(pub Out);

impl ReplyXattr {
    /// The size of the value (the caller asked with size 0).
    pub fn size(self, n: u32) {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&n.to_le_bytes());
        self.0.ok(&[&b]);
    }

    /// The value.
    pub fn data(self, d: &[u8]) {
        self.0.ok(&[d]);
    }

    /// An error.
    pub fn error(self, e: Errno) {
        self.0.error(e)
    }
}

/// Reply to create and tmpfile: the entry and the open handle.
pub struct ReplyCreate(pub Out);

impl ReplyCreate {
    /// Created and opened.
    pub fn created(self, ttl: &Duration, a: &Attr, fh: FileHandle, flags: FopenFlags) {
        let mut b = Vec::with_capacity(40 + ATTR + 16);
        entry_bytes(&mut b, ttl, ttl, a);
        open_bytes(&mut b, fh, flags);
        self.0.ok(&[&b]);
    }

    /// An error.
    pub fn error(self, e: Errno) {
        self.0.error(e)
    }
}

/// Reply to an ioctl.
pub struct ReplyIoctl(pub Out);

impl ReplyIoctl {
    /// The ioctl's result and its output bytes.
    pub fn ioctl(self, result: i32, d: &[u8]) {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&result.to_le_bytes());
        self.0.ok(&[&b, d]);
    }

    /// An error.
    pub fn error(self, e: Errno) {
        self.0.error(e)
    }
}

/// Reply to a readdir: `struct fuse_dirent` records up to the size the kernel
/// asked for.
pub struct ReplyDirectory {
    out: Out,
    buf: Vec<u8>,
    max: usize,
}

impl ReplyDirectory {
    /// A listing of at most `max` bytes.
    pub fn new(out: Out, max: usize) -> ReplyDirectory {
        ReplyDirectory {
            out,
            buf: Vec::with_capacity(max.min(64 << 10)),
            max,
        }
    }

    /// Adds an entry; true (and nothing added) when it does not fit.
    pub fn add(&mut self, ino: INodeNo, offset: u64, kind: FileKind, name: &[u8]) -> bool {
        let rec = 24 + name.len();
        let padded = rec.next_multiple_of(8);
        if self.buf.len() + padded > self.max {
            return true;
        }
        put(&mut self.buf, &ino.0.to_le_bytes());
        put(&mut self.buf, &offset.to_le_bytes());
        put(&mut self.buf, &(name.len() as u32).to_le_bytes());
        put(&mut self.buf, &(kind.mode_bits() >> 12).to_le_bytes());
        put(&mut self.buf, name);
        self.buf.resize(self.buf.len() + padded - rec, 0);
        false
    }

    /// Sends what was added.
    pub fn ok(self) {
        let ReplyDirectory { out, buf, .. } = self;
        out.ok(&[&buf]);
    }

    /// An error.
    pub fn error(self, e: Errno) {
        self.out.error(e)
    }
}

/// `STATX_*` bits of `struct statx`'s mask.
pub mod statx_mask {
    /// The fields GETATTR has too (`STATX_BASIC_STATS`).
    pub const BASIC_STATS: u32 = 0x7ff;
    /// `stx_btime`.
    pub const BTIME: u32 = 0x800;
}

/// Reply to a statx.
pub struct ReplyStatx(pub Out);

impl ReplyStatx {
    /// `struct fuse_statx_out` of `a`, cached for `ttl`: the basic fields, and the
    /// birth time where the engine records one.
    pub fn statx(self, ttl: &Duration, a: &Attr) {
        let mut b = Vec::with_capacity(256);
        ttl_bytes(&mut b, ttl);
        put(&mut b, &ttl.subsec_nanos().to_le_bytes());
        put(&mut b, &0u32.to_le_bytes()); // flags
        put(&mut b, &[0u8; 16]); // spare[2]
        let mut mask = statx_mask::BASIC_STATS;
        if a.btime.is_some() {
            mask |= statx_mask::BTIME;
        }
        put(&mut b, &mask.to_le_bytes());
        put(&mut b, &crate::convert::BLKSIZE.to_le_bytes());
        put(&mut b, &0u64.to_le_bytes()); // attributes
        put(&mut b, &a.nlink.to_le_bytes());
        put(&mut b, &a.uid.to_le_bytes());
        put(&mut b, &a.gid.to_le_bytes());
        put(&mut b, &(mode(a) as u16).to_le_bytes());
        put(&mut b, &0u16.to_le_bytes()); // __spare0
        put(&mut b, &a.ino.to_le_bytes());
        put(&mut b, &a.size.to_le_bytes());
        put(&mut b, &a.blocks.saturating_mul(8).to_le_bytes());
        put(&mut b, &0u64.to_le_bytes()); // attributes_mask
        let btime = a.btime.unwrap_or(Timespec { sec: 0, nsec: 0 });
        for t in [a.atime, btime, a.ctime, a.mtime] {
            put(&mut b, &t.sec.to_le_bytes());
            put(&mut b, &t.nsec.min(999_999_999).to_le_bytes());
            put(&mut b, &0i32.to_le_bytes());
        }
        // rdev as major and minor (Linux's new encoding of dev_t), then the
        // device's (the kernel fills that in).
        let rdev = u64::from(a.rdev);
        put(&mut b, &libc::major(rdev).to_le_bytes());
        put(&mut b, &libc::minor(rdev).to_le_bytes());
        put(&mut b, &[0u8; 8]); // dev_major, dev_minor
        put(&mut b, &[0u8; 14 * 8]); // __spare2
        self.0.ok(&[&b]);
    }

    /// An error.
    pub fn error(self, e: Errno) {
        self.0.error(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(len: u32, opcode: u32, extlen: u16) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&opcode.to_le_bytes());
        b.extend_from_slice(&7u64.to_le_bytes());
        b.extend_from_slice(&1u64.to_le_bytes());
        b.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]);
        b.extend_from_slice(&extlen.to_le_bytes());
        b.extend_from_slice(&[0, 0]);
        b
    }

    #[test]
    fn a_request_decodes_only_within_its_bytes() {
        let mut b = header(IN_HEADER as u32 + 6, op::LOOKUP, 0);
        b.extend_from_slice(b"name\0x");
        let (h, mut a) = Args::parse(&b).unwrap();
        assert_eq!(
            (h.opcode, h.unique, h.uid, h.gid, h.pid),
            (op::LOOKUP, 7, 1, 2, 3)
        );
        assert_eq!(a.name().unwrap(), b"name");
        assert_eq!(a.bytes(1).unwrap(), b"x");
        assert!(a.bytes(1).is_err());
        // A length that disagrees with the bytes read, a name without its NUL, a
        // struct cut short, extension headers longer than the request.
        let mut bad = b.clone();
        bad[0] = 99;
        assert!(Args::parse(&bad).is_err());
        let mut b2 = header(IN_HEADER as u32 + 4, op::LOOKUP, 0);
        b2.extend_from_slice(b"name");
        assert!(Args::parse(&b2).unwrap().1.name().is_err());
        assert!(Args::parse(&b2).unwrap().1.u64().is_err());
        let b3 = header(IN_HEADER as u32, op::LOOKUP, 1);
        assert!(Args::parse(&b3).is_err());
        assert!(Args::parse(&b[..20]).is_err());
    }

    #[test]
    fn dirents_are_padded_and_stop_at_the_size_asked() {
        let (r, w) = std::os::unix::net::UnixStream::pair().unwrap();
        let fd = std::os::fd::AsFd::as_fd(&w);
        let mut d = ReplyDirectory::new(Out::new(fd, 9), 72);
        assert!(!d.add(INodeNo(5), 1, FileKind::Directory, b"abc"));
        assert!(!d.add(INodeNo(6), 2, FileKind::Regular, b"0123456789"));
        assert!(d.add(INodeNo(7), 3, FileKind::Regular, b"x"), "full");
        d.ok();
        let mut got = vec![0u8; 256];
        let n = std::io::Read::read(&mut &r, &mut got).unwrap();
        got.truncate(n);
        assert_eq!(n, 16 + 32 + 40, "two records of 32 and 40 bytes");
        assert_eq!(u32::from_le_bytes(got[0..4].try_into().unwrap()), n as u32);
        assert_eq!(u64::from_le_bytes(got[8..16].try_into().unwrap()), 9);
        assert_eq!(u64::from_le_bytes(got[16..24].try_into().unwrap()), 5);
        assert_eq!(
            u32::from_le_bytes(got[36..40].try_into().unwrap()),
            4,
            "DT_DIR"
        );
        assert_eq!(&got[40..43], b"abc");
        assert_eq!(
            u32::from_le_bytes(got[68..72].try_into().unwrap()),
            8,
            "DT_REG"
        );
    }

    fn attr() -> Attr {
        let t = Timespec { sec: 1, nsec: 2 };
        Attr {
            ino: 9,
            kind: FileKind::Regular,
            mode: libc::S_IFREG | 0o644,
            nlink: 1,
            uid: 3,
            gid: 4,
            size: 5,
            blocks: 1,
            rdev: 0,
            atime: t,
            mtime: t,
            ctime: t,
            generation: 6,
            btime: Some(t),
        }
    }

    #[test]
    fn an_unsent_reply_is_eio_and_attrs_have_the_kernels_size() {
        let (r, w) = std::os::unix::net::UnixStream::pair().unwrap();
        drop(ReplyEmpty(Out::new(std::os::fd::AsFd::as_fd(&w), 3)));
        let mut got = [0u8; 64];
        let n = std::io::Read::read(&mut &r, &mut got).unwrap();
        assert_eq!(n, 16);
        assert_eq!(
            i32::from_le_bytes(got[4..8].try_into().unwrap()),
            -libc::EIO
        );
        let mut b = Vec::new();
        attr_bytes(&mut b, &attr());
        assert_eq!(b.len(), ATTR);
        let mut e = Vec::new();
        entry_bytes(&mut e, &Duration::ZERO, &Duration::ZERO, &attr());
        assert_eq!(e.len(), 128, "struct fuse_entry_out");
        // struct fuse_statx_out: 32 bytes, then struct fuse_statx (256).
        ReplyStatx(Out::new(std::os::fd::AsFd::as_fd(&w), 4)).statx(&Duration::ZERO, &attr());
        let mut got = [0u8; 512];
        let n = std::io::Read::read(&mut &r, &mut got).unwrap();
        assert_eq!(n, 16 + 32 + 256);
        let sx = &got[16 + 32..n];
        let mask = u32::from_le_bytes(sx[0..4].try_into().unwrap());
        assert_eq!(mask, statx_mask::BASIC_STATS | statx_mask::BTIME);
        assert_eq!(u64::from_le_bytes(sx[32..40].try_into().unwrap()), 9, "ino");
        // btime: the second fuse_sx_time, at 80.
        assert_eq!(i64::from_le_bytes(sx[80..88].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(sx[88..92].try_into().unwrap()), 2);
    }
}
