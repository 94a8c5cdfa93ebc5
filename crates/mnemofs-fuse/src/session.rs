//! Serving a mounted file system: fuser mounts it and answers the kernel's INIT
//! ([`Handshake`]); then event-loop threads of our own read `/dev/fuse` (each its
//! own cloned descriptor), decode each request ([`crate::wire`]) and hand it to the
//! adapter. Our own loop, not fuser's, because fuser 0.18 answers ENOSYS to the
//! requests it does not decode, among them `FUSE_TMPFILE` (`O_TMPFILE`) and
//! `FUSE_STATX` (`statx` with the birth time).

use crate::adapter::MnemoFuse;
use crate::wire::{self, op, Args, Header, Malformed, Out, Request};
use fuser::{
    AccessFlags, Errno, FileHandle, INodeNo, InitFlags, IoctlFlags, KernelConfig, LockOwner,
    OpenFlags, RenameFlags, TimeOrNow, WriteFlags,
};
use mnemofs::FileSystem;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What the INIT handshake settled, for the adapter.
#[derive(Debug, Default)]
pub struct Negotiated {
    /// The kernel sends the file's open flags with each write (ABI 7.9+); then they,
    /// not the flags remembered at open, decide whether a write appends (so that
    /// `fcntl(F_SETFL, O_APPEND)` is honoured).
    pub write_flags_known: AtomicBool,
    /// The kernel took `FUSE_HANDLE_KILLPRIV_V2`: it leaves clearing set-user-ID
    /// and set-group-ID on write, truncate, fallocate and chown to the adapter
    /// (which applies Linux's VFS rules; without it the kernel applies an older
    /// rule that keeps set-group-ID for a writer outside the file's group).
    pub killpriv_v2: AtomicBool,
}

/// The file system fuser mounts: it answers INIT (fuser's handshake) and nothing
/// else; every later request is read by [`serve_requests`].
#[derive(Debug)]
pub struct Handshake {
    /// Where the result goes.
    pub negotiated: Arc<Negotiated>,
    /// Ask for `FUSE_POSIX_ACL` (off: the `noacl` mount option).
    pub posix_acl: bool,
}

impl fuser::Filesystem for Handshake {
    fn init(&mut self, _req: &fuser::Request, config: &mut KernelConfig) -> io::Result<()> {
        let abi = config.kernel_abi();
        self.negotiated
            .write_flags_known
            .store((abi.0, abi.1) >= (7, 9), Ordering::Relaxed);
        // Requests of up to 1 MiB (the kernel limits this further by max_pages).
        if let Err(nearest) = config.set_max_write(crate::adapter::MAX_WRITE) {
            let _ = config.set_max_write(nearest);
        }
        // Each of these is optional: take what the kernel offers. Not FUSE_ASYNC_DIO:
        // with it the kernel sends the pieces of one large O_DIRECT/AIO write
        // concurrently, and `O_APPEND` pieces (each appended where the engine finds
        // the end of file) could then land out of order. Without it the pieces of
        // one write arrive in order, under the kernel's exclusive inode lock.
        // FUSE_EXPORT_SUPPORT: file handles (name_to_handle_at, NFS export) name the
        // inode number, which stays the file's until it is deleted.
        // FUSE_POSIX_ACL: the kernel enforces POSIX ACLs (it implies
        // default_permissions) and reads them through getxattr; the engine keeps
        // the mode and the access ACL in step and gives new nodes their parent's
        // default ACL. FUSE_DONT_MASK: the umask comes to the engine unapplied, as
        // a default ACL replaces it.
        let mut wanted = InitFlags::FUSE_BIG_WRITES
            | InitFlags::FUSE_MAX_PAGES
            | InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_EXPORT_SUPPORT
            | InitFlags::FUSE_DONT_MASK;
        if self.posix_acl {
            wanted |= InitFlags::FUSE_POSIX_ACL;
        }
        // Shared mmap of files opened with FOPEN_DIRECT_IO (Linux 6.6+): every
        // open of the direct-I/O mode, and read-only opens under strictatime in
        // any mode.
        wanted |= InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP;
        // FUSE_HANDLE_KILLPRIV_V2: the set-id bits are cleared here, by the VFS's
        // rules (`kill_setid`, `chown_kept`), not by the kernel's FUSE code.
        wanted |= InitFlags::FUSE_HANDLE_KILLPRIV_V2;
        // FUSE_ALLOW_IDMAP: idmapped mounts of this mount (`mount_setattr` with
        // MOUNT_ATTR_IDMAP; the kernel allows them with default_permissions, which
        // every mount has). The kernel maps the owner of a new node and of a chown
        // itself; in every other request it sends no caller IDs (`caller_ids`).
        wanted |= InitFlags::FUSE_ALLOW_IDMAP;
        let granted = wanted & config.capabilities();
        self.negotiated.killpriv_v2.store(
            granted.contains(InitFlags::FUSE_HANDLE_KILLPRIV_V2),
            Ordering::Relaxed,
        );
        let _ = config.add_capabilities(granted);
        Ok(())
    }
}

/// `FUSE_DEV_IOC_CLONE` (`_IOR(229, 0, uint32_t)`): attaches a fresh `/dev/fuse`
/// descriptor to the connection of another.
const FUSE_DEV_IOC_CLONE: libc::c_ulong = 0x8004_e500;

/// A descriptor of its own for the connection of `fd`: requests are handed to
/// whichever descriptor reads first, and each has its own queue in the kernel.
fn clone_fd(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let dev = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open("/dev/fuse")?;
    let mut source = fd.as_raw_fd() as u32;
    // SAFETY: `dev` is an open /dev/fuse descriptor and `source` a valid u32 the
    // ioctl reads.
    if unsafe { libc::ioctl(dev.as_raw_fd(), FUSE_DEV_IOC_CLONE, &mut source) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(OwnedFd::from(dev))
}

use std::os::unix::fs::OpenOptionsExt;

/// Serves the connection of `fd` with `threads` event loops (the first on a
/// duplicate of `fd`, the others on clones) until it ends (unmount); the first
/// error of any loop.
pub fn serve_requests<E: FileSystem + 'static>(
    adapter: Arc<MnemoFuse<E>>,
    fd: BorrowedFd<'_>,
    threads: usize,
) -> io::Result<()> {
    let mut fds = Vec::with_capacity(threads.max(1));
    fds.push(fd.try_clone_to_owned()?);
    for _ in 1..threads {
        fds.push(clone_fd(fd)?);
    }
    let mut handles = Vec::with_capacity(fds.len());
    for (i, fd) in fds.into_iter().enumerate() {
        let a = Arc::clone(&adapter);
        handles.push(
            std::thread::Builder::new()
                .name(format!("mnemofs-fuse-{i}"))
                .spawn(move || event_loop(&a, fd))?,
        );
    }
    let mut result = Ok(());
    for h in handles {
        let r = h
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("an event-loop thread panicked")));
        if result.is_ok() {
            result = r;
        }
    }
    result
}

/// Bytes of one read: the largest write and its headers (the kernel refuses reads
/// into less than `max_write` plus headers).
const BUF: usize = crate::adapter::MAX_WRITE as usize + 4096;
// The INIT reply offers MAX_WRITE; fuser caps what it offers at 16 MiB.
const _: () = assert!(crate::adapter::MAX_WRITE <= 16 << 20);

fn event_loop<E: FileSystem + 'static>(adapter: &MnemoFuse<E>, fd: OwnedFd) -> io::Result<()> {
    let mut buf = vec![0u8; BUF];
    loop {
        // SAFETY: `fd` is open for the whole loop and `buf` is valid for its length.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // Interrupted, or a request the kernel withdrew before we read it.
                Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::ENOENT) => continue,
                // Unmounted: the connection is gone.
                Some(libc::ENODEV) => return Ok(()),
                _ => return Err(e),
            }
        }
        // A request whose serving panics is answered EIO (its reply, dropped
        // unsent) and the loop goes on: one bad request must not stop the mount.
        let req = &buf[..n as usize];
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            dispatch(adapter, fd.as_fd(), req)
        }))
        .is_err()
        {
            eprintln!("mnemofs: serving a request panicked; it was answered EIO");
        }
    }
}

/// One request: decoded, served, answered (except those the kernel expects no
/// answer to).
fn dispatch<E: FileSystem + 'static>(a: &MnemoFuse<E>, fd: BorrowedFd<'_>, buf: &[u8]) {
    let (h, args) = match Args::parse(buf) {
        Ok(x) => x,
        Err(Malformed) => {
            // A header too short to name the request cannot be answered.
            if buf.len() >= wire::IN_HEADER {
                let unique = u64::from_le_bytes(buf[8..16].try_into().unwrap_or([0; 8]));
                // Dropped unsent: answered EIO.
                drop(Out::new(fd, unique));
            }
            return;
        }
    };
    match h.opcode {
        op::FORGET => {
            let mut args = args;
            if let Ok(n) = args.u64() {
                a.forget(INodeNo(h.nodeid), n);
            }
        }
        op::BATCH_FORGET => {
            let mut args = args;
            let Ok(count) = args.u32() else { return };
            let _ = args.u32();
            for _ in 0..count {
                let (Ok(ino), Ok(n)) = (args.u64(), args.u64()) else {
                    return;
                };
                a.forget(INodeNo(ino), n);
            }
        }
        // Not answered; withdrawn requests are simply answered when done.
        op::NOTIFY_REPLY => {}
        _ => {
            let out = Out::new(fd, h.unique);
            if let Err(Malformed) = serve(a, &h, args, out) {
                // `serve` consumed the reply only on success; a malformed request
                // was answered EIO when its `Out` was dropped.
            }
        }
    }
}

/// A NUL-terminated name as an `OsStr`.
fn os(b: &[u8]) -> &OsStr {
    OsStr::from_bytes(b)
}

fn time_of(sec: u64, nsec: u32) -> SystemTime {
    let sec = sec as i64;
    let nsec = Duration::from_nanos(u64::from(nsec.min(999_999_999)));
    if sec >= 0 {
        UNIX_EPOCH + Duration::from_secs(sec as u64) + nsec
    } else {
        UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs()) + nsec
    }
}

/// Serves one answered request; `Err` when its arguments do not decode (its
/// reply, dropped unsent, says EIO).
fn serve<E: FileSystem + 'static>(
    a: &MnemoFuse<E>,
    h: &Header,
    mut args: Args<'_>,
    out: Out,
) -> Result<(), Malformed> {
    let req = Request::new(h);
    let ino = INodeNo(h.nodeid);
    match h.opcode {
        op::LOOKUP => a.lookup(&req, ino, os(args.name()?), wire::ReplyEntry(out)),
        op::GETATTR => {
            let flags = args.u32()?;
            args.skip(4)?;
            let fh = args.u64()?;
            let fh = (flags & wire::GETATTR_FH != 0).then_some(FileHandle(fh));
            a.getattr(&req, ino, fh, wire::ReplyAttr(out));
        }
        op::STATX => {
            let flags = args.u32()?;
            args.skip(4)?;
            let fh = args.u64()?;
            let _sx_flags = args.u32()?;
            let _sx_mask = args.u32()?;
            let fh = (flags & wire::GETATTR_FH != 0).then_some(FileHandle(fh));
            a.statx(&req, ino, fh, wire::ReplyStatx(out));
        }
        op::SETATTR => {
            use wire::fattr as F;
            let valid = args.u32()?;
            args.skip(4)?;
            let fh = args.u64()?;
            let size = args.u64()?;
            let _lock_owner = args.u64()?;
            let (atime, mtime, ctime) = (args.u64()?, args.u64()?, args.u64()?);
            let (atimensec, mtimensec, ctimensec) = (args.u32()?, args.u32()?, args.u32()?);
            let mode = args.u32()?;
            args.skip(4)?;
            let uid = args.u32()?;
            let gid = args.u32()?;
            let on = |bit: u32| valid & bit != 0;
            let when = |set: bool, now: bool, sec, nsec| {
                if now {
                    Some(TimeOrNow::Now)
                } else if set {
                    Some(TimeOrNow::SpecificTime(time_of(sec, nsec)))
                } else {
                    None
                }
            };
            a.setattr(
                &req,
                ino,
                on(F::MODE).then_some(mode),
                on(F::UID).then_some(uid),
                on(F::GID).then_some(gid),
                on(F::SIZE).then_some(size),
                when(on(F::ATIME), on(F::ATIME_NOW), atime, atimensec),
                when(on(F::MTIME), on(F::MTIME_NOW), mtime, mtimensec),
                on(F::CTIME).then(|| time_of(ctime, ctimensec)),
                on(F::FH).then_some(FileHandle(fh)),
                wire::ReplyAttr(out),
            );
        }
        op::READLINK => a.readlink(&req, ino, wire::ReplyData(out)),
        op::SYMLINK => {
            let name = args.name()?;
            let target = args.name()?;
            a.symlink(
                &req,
                ino,
                os(name),
                Path::new(os(target)),
                wire::ReplyEntry(out),
            );
        }
        op::MKNOD => {
            let mode = args.u32()?;
            let rdev = args.u32()?;
            let umask = args.u32()?;
            args.skip(4)?;
            let name = args.name()?;
            a.mknod(
                &req,
                ino,
                os(name),
                mode,
                umask,
                rdev,
                wire::ReplyEntry(out),
            );
        }
        op::MKDIR => {
            let mode = args.u32()?;
            let umask = args.u32()?;
            let name = args.name()?;
            a.mkdir(&req, ino, os(name), mode, umask, wire::ReplyEntry(out));
        }
        op::UNLINK => a.unlink(&req, ino, os(args.name()?), wire::ReplyEmpty(out)),
        op::RMDIR => a.rmdir(&req, ino, os(args.name()?), wire::ReplyEmpty(out)),
        op::RENAME | op::RENAME2 => {
            let newdir = args.u64()?;
            let flags = if h.opcode == op::RENAME2 {
                let f = args.u32()?;
                args.skip(4)?;
                f
            } else {
                0
            };
            let name = args.name()?;
            let newname = args.name()?;
            a.rename(
                &req,
                ino,
                os(name),
                INodeNo(newdir),
                os(newname),
                RenameFlags::from_bits_retain(flags),
                wire::ReplyEmpty(out),
            );
        }
        op::LINK => {
            let old = args.u64()?;
            let name = args.name()?;
            a.link(&req, INodeNo(old), ino, os(name), wire::ReplyEntry(out));
        }
        op::OPEN => {
            let flags = args.u32()?;
            a.open(&req, ino, OpenFlags(flags as i32), wire::ReplyOpen(out));
        }
        op::READ => {
            let fh = args.u64()?;
            let offset = args.u64()?;
            let size = args.u32()?;
            let read_flags = args.u32()?;
            let lock_owner = args.u64()?;
            let flags = args.u32()?;
            let lock_owner =
                (read_flags & wire::READ_LOCKOWNER != 0).then_some(LockOwner(lock_owner));
            a.read(
                &req,
                ino,
                FileHandle(fh),
                offset,
                size,
                OpenFlags(flags as i32),
                lock_owner,
                wire::ReplyData(out),
            );
        }
        op::WRITE => {
            let fh = args.u64()?;
            let offset = args.u64()?;
            let size = args.u32()?;
            let write_flags = args.u32()?;
            let _lock_owner = args.u64()?;
            let flags = args.u32()?;
            args.skip(4)?;
            let data = args.bytes(size as usize)?;
            a.write(
                &req,
                ino,
                FileHandle(fh),
                offset,
                data,
                WriteFlags::from_bits_retain(write_flags),
                OpenFlags(flags as i32),
                wire::ReplyWrite(out),
            );
        }
        op::STATFS => a.statfs(&req, ino, wire::ReplyStatfs(out)),
        op::RELEASE | op::RELEASEDIR => {
            let fh = args.u64()?;
            let flags = args.u32()?;
            let release_flags = args.u32()?;
            let lock_owner = args.u64()?;
            let flush = release_flags & wire::RELEASE_FLUSH != 0;
            let unlock = release_flags & wire::RELEASE_FLOCK_UNLOCK != 0;
            if h.opcode == op::RELEASE {
                a.release(
                    &req,
                    ino,
                    FileHandle(fh),
                    OpenFlags(flags as i32),
                    unlock.then_some(LockOwner(lock_owner)),
                    flush,
                    wire::ReplyEmpty(out),
                );
            } else {
                a.releasedir(
                    &req,
                    ino,
                    FileHandle(fh),
                    OpenFlags(flags as i32),
                    wire::ReplyEmpty(out),
                );
            }
        }
        op::FSYNC | op::FSYNCDIR => {
            let fh = args.u64()?;
            let datasync = args.u32()? & wire::FSYNC_FDATASYNC != 0;
            if h.opcode == op::FSYNC {
                a.fsync(&req, ino, FileHandle(fh), datasync, wire::ReplyEmpty(out));
            } else {
                a.fsyncdir(&req, ino, FileHandle(fh), datasync, wire::ReplyEmpty(out));
            }
        }
        op::SETXATTR => {
            // `struct fuse_setxattr_in` without FUSE_SETXATTR_EXT: size, flags.
            let size = args.u32()?;
            let flags = args.u32()?;
            let name = args.name()?;
            let value = args.bytes(size as usize)?;
            a.setxattr(
                &req,
                ino,
                os(name),
                value,
                flags as i32,
                wire::ReplyEmpty(out),
            );
        }
        op::GETXATTR => {
            let size = args.u32()?;
            args.skip(4)?;
            let name = args.name()?;
            a.getxattr(&req, ino, os(name), size, wire::ReplyXattr(out));
        }
        op::LISTXATTR => {
            let size = args.u32()?;
            a.listxattr(&req, ino, size, wire::ReplyXattr(out));
        }
        op::REMOVEXATTR => a.removexattr(&req, ino, os(args.name()?), wire::ReplyEmpty(out)),
        op::FLUSH => {
            let fh = args.u64()?;
            args.skip(8)?;
            let lock_owner = args.u64()?;
            a.flush(
                &req,
                ino,
                FileHandle(fh),
                LockOwner(lock_owner),
                wire::ReplyEmpty(out),
            );
        }
        op::OPENDIR => {
            let flags = args.u32()?;
            a.opendir(&req, ino, OpenFlags(flags as i32), wire::ReplyOpen(out));
        }
        op::READDIR => {
            let fh = args.u64()?;
            let offset = args.u64()?;
            let size = args.u32()?;
            a.readdir(
                &req,
                ino,
                FileHandle(fh),
                offset,
                wire::ReplyDirectory::new(out, size as usize),
            );
        }
        op::ACCESS => {
            let mask = args.u32()?;
            a.access(
                &req,
                ino,
                AccessFlags::from_bits_retain(mask as i32),
                wire::ReplyEmpty(out),
            );
        }
        op::CREATE | op::TMPFILE => {
            let flags = args.u32()?;
            let mode = args.u32()?;
            let umask = args.u32()?;
            let _open_flags = args.u32()?;
            if h.opcode == op::CREATE {
                let name = args.name()?;
                a.create(
                    &req,
                    ino,
                    os(name),
                    mode,
                    umask,
                    flags as i32,
                    wire::ReplyCreate(out),
                );
            } else {
                // The name the kernel sends with an O_TMPFILE open is its
                // placeholder dentry's; the file gets none.
                a.tmpfile(&req, ino, mode, umask, flags as i32, wire::ReplyCreate(out));
            }
        }
        op::IOCTL => {
            let fh = args.u64()?;
            let flags = args.u32()?;
            let cmd = args.u32()?;
            let _arg = args.u64()?;
            let in_size = args.u32()?;
            let out_size = args.u32()?;
            let in_data = args.bytes(in_size as usize)?;
            if flags & wire::IOCTL_UNRESTRICTED != 0 {
                wire::ReplyEmpty(out).error(Errno::ENOSYS);
            } else {
                a.ioctl(
                    &req,
                    ino,
                    FileHandle(fh),
                    IoctlFlags::from_bits_retain(flags),
                    cmd,
                    in_data,
                    out_size,
                    wire::ReplyIoctl(out),
                );
            }
        }
        op::FALLOCATE => {
            let fh = args.u64()?;
            let offset = args.u64()?;
            let length = args.u64()?;
            let mode = args.u32()?;
            a.fallocate(
                &req,
                ino,
                FileHandle(fh),
                offset,
                length,
                mode as i32,
                wire::ReplyEmpty(out),
            );
        }
        // The unmount's last request; the read after it sees the end.
        op::DESTROY => wire::ReplyEmpty(out).ok(),
        // A second INIT is a protocol error; an interrupt is not served (ENOSYS
        // tells the kernel to send no more): every request finishes anyway.
        op::INIT => wire::ReplyEmpty(out).error(Errno::EIO),
        op::INTERRUPT => wire::ReplyEmpty(out).error(Errno::ENOSYS),
        // Everything else mnemofs does not serve (locks the kernel keeps itself,
        // lseek and copy_file_range the kernel does generically): ENOSYS, which
        // tells the kernel not to ask again.
        _ => wire::ReplyEmpty(out).error(Errno::ENOSYS),
    }
    Ok(())
}
