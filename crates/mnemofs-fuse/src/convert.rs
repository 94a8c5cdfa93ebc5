//! Conversions between engine values and FUSE values, and the one place where an
//! engine error becomes an errno.

use fuser::{Errno, FileAttr, FileType, INodeNo, TimeOrNow};
use mnemofs::{Attr, FileKind, FsError, RenameFlags, Timespec};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Block size reported by `stat()` (`st_blksize`).
pub const BLKSIZE: u32 = 4096;

/// The errno the kernel gets for an engine error. Every error reply of the adapter
/// goes through here; the mapping itself is [`FsError::errno`].
pub fn errno(err: &FsError) -> Errno {
    Errno::from_i32(err.errno())
}

/// FUSE file type of an engine file kind.
pub fn file_type(kind: FileKind) -> FileType {
    match kind {
        FileKind::Regular => FileType::RegularFile,
        FileKind::Directory => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
        FileKind::Fifo => FileType::NamedPipe,
        FileKind::Socket => FileType::Socket,
        FileKind::CharDevice => FileType::CharDevice,
        FileKind::BlockDevice => FileType::BlockDevice,
    }
}

/// Engine time to `SystemTime` (times before the epoch included).
pub fn to_system_time(ts: Timespec) -> SystemTime {
    let nsec = Duration::from_nanos(u64::from(ts.nsec.min(999_999_999)));
    if ts.sec >= 0 {
        UNIX_EPOCH
            .checked_add(Duration::from_secs(ts.sec as u64) + nsec)
            .unwrap_or(UNIX_EPOCH)
    } else {
        UNIX_EPOCH
            .checked_sub(Duration::from_secs(ts.sec.unsigned_abs()))
            .and_then(|t| t.checked_add(nsec))
            .unwrap_or(UNIX_EPOCH)
    }
}

/// `SystemTime` to engine time (times before the epoch included).
pub fn to_timespec(t: SystemTime) -> Timespec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timespec {
            sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nsec: d.subsec_nanos(),
        },
        Err(e) => {
            // `t` is before the epoch by `d`: sec = -ceil(d), nsec = the remainder.
            let d = e.duration();
            let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            if d.subsec_nanos() == 0 {
                Timespec {
                    sec: -secs,
                    nsec: 0,
                }
            } else {
                Timespec {
                    sec: -secs - 1,
                    nsec: 1_000_000_000 - d.subsec_nanos(),
                }
            }
        }
    }
}

/// `utimensat` time (a given time or `UTIME_NOW`) to engine time.
pub fn time_or_now(t: TimeOrNow) -> Timespec {
    match t {
        TimeOrNow::SpecificTime(t) => to_timespec(t),
        TimeOrNow::Now => Timespec::now(),
    }
}

/// Engine attributes to FUSE attributes.
pub fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        // The engine counts 4 KiB pages; `st_blocks` is in 512-byte units.
        blocks: a.blocks.saturating_mul(8),
        atime: to_system_time(a.atime),
        mtime: to_system_time(a.mtime),
        ctime: to_system_time(a.ctime),
        crtime: to_system_time(a.ctime),
        kind: file_type(a.kind),
        perm: (a.mode & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: BLKSIZE,
        flags: 0,
    }
}

/// `renameat2` flags to engine flags: `RENAME_NOREPLACE`, `RENAME_EXCHANGE` and
/// `RENAME_WHITEOUT` (the whiteout owned by the caller); `RENAME_EXCHANGE` with either
/// of the others, or any other flag, is `EINVAL`.
pub fn rename_flags(flags: fuser::RenameFlags, uid: u32, gid: u32) -> Result<RenameFlags, Errno> {
    let bits = flags.bits();
    let noreplace = libc::RENAME_NOREPLACE;
    let exchange = libc::RENAME_EXCHANGE;
    let whiteout = libc::RENAME_WHITEOUT;
    if bits & !(noreplace | exchange | whiteout) != 0 {
        return Err(Errno::EINVAL);
    }
    let out = RenameFlags {
        noreplace: bits & noreplace != 0,
        exchange: bits & exchange != 0,
        whiteout: (bits & whiteout != 0).then_some((uid, gid)),
    };
    if out.exchange && (out.noreplace || out.whiteout.is_some()) {
        return Err(Errno::EINVAL);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: FileKind, mode: u32) -> Attr {
        Attr {
            ino: 7,
            kind,
            mode: kind.mode_bits() | mode,
            nlink: 1,
            uid: 1000,
            gid: 100,
            size: 5000,
            blocks: 2,
            rdev: 0,
            atime: Timespec { sec: 10, nsec: 5 },
            mtime: Timespec { sec: 11, nsec: 0 },
            ctime: Timespec {
                sec: 12,
                nsec: 999_999_999,
            },
            generation: 0,
            btime: Some(Timespec { sec: 9, nsec: 1 }),
        }
    }

    #[test]
    fn attr_conversion() {
        let a = file_attr(&attr(FileKind::Regular, 0o4755));
        assert_eq!(a.ino, INodeNo(7));
        assert_eq!(a.kind, FileType::RegularFile);
        assert_eq!(a.perm, 0o4755);
        assert_eq!(a.blocks, 16);
        assert_eq!(a.blksize, 4096);
        assert_eq!(a.size, 5000);
        assert_eq!(a.atime, UNIX_EPOCH + Duration::new(10, 5));
        assert_eq!(a.ctime, UNIX_EPOCH + Duration::new(12, 999_999_999));
    }

    #[test]
    fn kinds() {
        for (k, t) in [
            (FileKind::Regular, FileType::RegularFile),
            (FileKind::Directory, FileType::Directory),
            (FileKind::Symlink, FileType::Symlink),
            (FileKind::Fifo, FileType::NamedPipe),
            (FileKind::Socket, FileType::Socket),
            (FileKind::CharDevice, FileType::CharDevice),
            (FileKind::BlockDevice, FileType::BlockDevice),
        ] {
            assert_eq!(file_type(k), t);
        }
    }

    #[test]
    fn time_round_trip() {
        for ts in [
            Timespec { sec: 0, nsec: 0 },
            Timespec {
                sec: 1_700_000_000,
                nsec: 123_456_789,
            },
            Timespec { sec: -1, nsec: 0 },
            Timespec {
                sec: -2,
                nsec: 500_000_000,
            },
        ] {
            assert_eq!(to_timespec(to_system_time(ts)), ts, "{ts:?}");
        }
        let now = Timespec::now();
        let t = time_or_now(TimeOrNow::Now);
        assert!(t >= now);
    }

    #[test]
    fn errors_map_through_engine_errno() {
        assert_eq!(errno(&FsError::NotFound).code(), libc::ENOENT);
        assert_eq!(errno(&FsError::NotEmpty).code(), libc::ENOTEMPTY);
        assert_eq!(errno(&FsError::Unsupported("x")).code(), libc::EOPNOTSUPP);
        let io = std::io::Error::from_raw_os_error(libc::EROFS);
        assert_eq!(errno(&FsError::Io(io)).code(), libc::EROFS);
    }

    #[test]
    fn rename_flag_mapping() {
        use fuser::RenameFlags as F;
        assert_eq!(rename_flags(F::empty(), 5, 6), Ok(RenameFlags::default()));
        assert_eq!(
            rename_flags(F::RENAME_NOREPLACE, 5, 6),
            Ok(RenameFlags {
                noreplace: true,
                ..Default::default()
            })
        );
        assert_eq!(
            rename_flags(F::RENAME_EXCHANGE, 5, 6),
            Ok(RenameFlags {
                exchange: true,
                ..Default::default()
            })
        );
        assert_eq!(
            rename_flags(F::RENAME_WHITEOUT, 5, 6),
            Ok(RenameFlags {
                whiteout: Some((5, 6)),
                ..Default::default()
            })
        );
        assert_eq!(
            rename_flags(F::RENAME_NOREPLACE | F::RENAME_EXCHANGE, 5, 6),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            rename_flags(F::RENAME_WHITEOUT | F::RENAME_EXCHANGE, 5, 6),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            rename_flags(F::from_bits_retain(1 << 9), 0, 0),
            Err(Errno::EINVAL)
        );
    }
}
