//! The file ioctls the mount serves (`FUSE_IOCTL`): inode flags, as the kernel's
//! `fileattr` code asks for them on `FS_IOC_GETFLAGS`/`SETFLAGS` (`chattr`,
//! `lsattr`) and `FS_IOC_FSGETXATTR`/`FSSETXATTR` (xfs_io's `chattr`). The kernel
//! checks who may change what (owner or CAP_FOWNER; CAP_LINUX_IMMUTABLE for
//! immutable and append-only, against the flags this returns) before it asks.
//! Anything else is ENOTTY, as a file system without the ioctl answers.

use fuser::Errno;
use mnemofs::{inode_flags, FileSystem};

/// `FS_IOC_GETFLAGS` (`_IOR('f', 1, long)`; the kernel passes an int).
pub const FS_IOC_GETFLAGS: u32 = 0x8008_6601;
/// `FS_IOC_SETFLAGS` (`_IOW('f', 2, long)`).
pub const FS_IOC_SETFLAGS: u32 = 0x4008_6602;
/// `FS_IOC_FSGETXATTR` (`_IOR('X', 31, struct fsxattr)`).
pub const FS_IOC_FSGETXATTR: u32 = 0x801c_581f;
/// `FS_IOC_FSSETXATTR` (`_IOW('X', 32, struct fsxattr)`).
pub const FS_IOC_FSSETXATTR: u32 = 0x401c_5820;
/// `FS_IOC_GETFSLABEL` (`_IOR(0x94, 49, char[256])`).
pub const FS_IOC_GETFSLABEL: u32 = 0x8100_9431;
/// `FS_IOC_SETFSLABEL` (`_IOW(0x94, 50, char[256])`).
pub const FS_IOC_SETFSLABEL: u32 = 0x4100_9432;
/// Bytes of the label argument (FSLABEL_MAX).
const FSLABEL_MAX: usize = 256;
/// `FITRIM` (`_IOWR('X', 121, struct fstrim_range)`).
pub const FITRIM: u32 = 0xc018_5879;
/// Bytes of `struct fstrim_range` (start, len, minlen: u64 each).
const FSTRIM_RANGE_SIZE: usize = 24;
/// Bytes of `struct fsxattr`.
const FSXATTR_SIZE: usize = 28;

/// `FS_XFLAG_*` bits and the `FS_*_FL` flag each stands for.
const XFLAGS: [(u32, u32); 5] = [
    (0x0000_0008, inode_flags::IMMUTABLE),
    (0x0000_0010, inode_flags::APPEND),
    (0x0000_0020, inode_flags::SYNC),
    (0x0000_0040, inode_flags::NOATIME),
    (0x0000_0080, inode_flags::NODUMP),
];

/// `fsx_xflags` for inode flags `f`.
pub fn xflags_of(f: u32) -> u32 {
    XFLAGS
        .iter()
        .filter(|(_, fl)| f & fl != 0)
        .fold(0, |x, (xf, _)| x | xf)
}

/// Inode flags for `fsx_xflags` `x`, keeping `old`'s flags that have no xflag
/// (`DIRSYNC`); `None` when `x` holds a bit mnemofs does not keep.
pub fn flags_of_xflags(x: u32, old: u32) -> Option<u32> {
    let known = XFLAGS.iter().fold(0, |m, (xf, _)| m | xf);
    if x & !known != 0 {
        return None;
    }
    let mapped = XFLAGS
        .iter()
        .filter(|(xf, _)| x & xf != 0)
        .fold(0, |f, (_, fl)| f | fl);
    let kept = old & !XFLAGS.iter().fold(0, |m, (_, fl)| m | fl);
    Some(mapped | kept)
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|v| u32::from_le_bytes([v[0], v[1], v[2], v[3]]))
}

/// Serves ioctl `cmd` on `ino` with input `input`; returns the output bytes (at
/// most `out_size`).
pub fn serve<E: FileSystem + ?Sized>(
    fs: &E,
    ino: u64,
    cmd: u32,
    input: &[u8],
    out_size: u32,
) -> Result<Vec<u8>, Errno> {
    let e = |err: mnemofs::FsError| crate::convert::errno(&err);
    match cmd {
        FS_IOC_GETFLAGS => {
            let f = fs.inode_flags(ino).map_err(e)?;
            let mut out = f.to_le_bytes().to_vec();
            out.truncate(out_size as usize);
            Ok(out)
        }
        FS_IOC_SETFLAGS => {
            let f = le32(input, 0).ok_or(Errno::EINVAL)?;
            fs.set_inode_flags(ino, f).map_err(e)?;
            Ok(Vec::new())
        }
        FS_IOC_FSGETXATTR => {
            let f = fs.inode_flags(ino).map_err(e)?;
            let mut out = vec![0u8; FSXATTR_SIZE];
            out[..4].copy_from_slice(&xflags_of(f).to_le_bytes());
            out.truncate(out_size as usize);
            Ok(out)
        }
        FS_IOC_FSSETXATTR => {
            let x = le32(input, 0).ok_or(Errno::EINVAL)?;
            // Extent size, project ID and CoW extent size: mnemofs keeps none.
            if [4, 12, 16]
                .iter()
                .any(|&at| le32(input, at).is_some_and(|v| v != 0))
            {
                return Err(Errno::EOPNOTSUPP);
            }
            let old = fs.inode_flags(ino).map_err(e)?;
            let f = flags_of_xflags(x, old).ok_or(Errno::EOPNOTSUPP)?;
            fs.set_inode_flags(ino, f).map_err(e)?;
            Ok(Vec::new())
        }
        FS_IOC_GETFSLABEL => {
            let l = fs.label().map_err(e)?;
            let mut out = vec![0u8; FSLABEL_MAX];
            let n = l.len().min(FSLABEL_MAX - 1);
            out[..n].copy_from_slice(&l[..n]);
            out.truncate(out_size as usize);
            Ok(out)
        }
        FS_IOC_SETFSLABEL => {
            let b = input.get(..FSLABEL_MAX).ok_or(Errno::EINVAL)?;
            // As btrfs and xfs: the label must end within the buffer.
            let end = b.iter().position(|&x| x == 0).ok_or(Errno::EINVAL)?;
            fs.set_label(&b[..end]).map_err(e)?;
            Ok(Vec::new())
        }
        FITRIM => {
            let le64 = |at: usize| {
                input
                    .get(at..at + 8)
                    .map(|v| u64::from_le_bytes(v.try_into().unwrap_or([0; 8])))
            };
            let (Some(start), Some(len), Some(min)) = (le64(0), le64(8), le64(16)) else {
                return Err(Errno::EINVAL);
            };
            let st = fs.statfs();
            // As ext4 and XFS: a range starting past the end, shorter than a block,
            // or a minimum run longer than the file system, is EINVAL.
            let size = st.blocks.saturating_mul(u64::from(st.block_size));
            if start >= size || len < u64::from(st.block_size) || min > size {
                return Err(Errno::EINVAL);
            }
            let trimmed = fs.trim(start, len, min).map_err(e)?;
            let mut out = vec![0u8; FSTRIM_RANGE_SIZE];
            out[..8].copy_from_slice(&start.to_le_bytes());
            out[8..16].copy_from_slice(&trimmed.to_le_bytes());
            out[16..24].copy_from_slice(&min.to_le_bytes());
            out.truncate(out_size as usize);
            Ok(out)
        }
        _ => Err(Errno::ENOTTY),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xflags_map_both_ways() {
        let f = inode_flags::IMMUTABLE | inode_flags::NOATIME | inode_flags::DIRSYNC;
        assert_eq!(xflags_of(f), 0x8 | 0x40);
        // DIRSYNC has no xflag: kept from the old flags.
        assert_eq!(flags_of_xflags(0x8 | 0x40, f), Some(f));
        assert_eq!(
            flags_of_xflags(0x10, f),
            Some(inode_flags::APPEND | inode_flags::DIRSYNC)
        );
        // FS_XFLAG_DAX (0x8000): not kept.
        assert_eq!(flags_of_xflags(0x8000, 0), None);
    }

    #[test]
    fn the_ioctl_numbers_are_linuxs() {
        // _IOC(dir, type, nr, size): dir << 30 | size << 16 | type << 8 | nr.
        let ioc =
            |dir: u32, ty: u8, nr: u32, size: u32| dir << 30 | size << 16 | (ty as u32) << 8 | nr;
        assert_eq!(FS_IOC_GETFLAGS, ioc(2, b'f', 1, 8));
        assert_eq!(FS_IOC_SETFLAGS, ioc(1, b'f', 2, 8));
        assert_eq!(FS_IOC_FSGETXATTR, ioc(2, b'X', 31, 28));
        assert_eq!(FS_IOC_FSSETXATTR, ioc(1, b'X', 32, 28));
        assert_eq!(FITRIM, ioc(3, b'X', 121, 24));
        assert_eq!(FS_IOC_GETFSLABEL, ioc(2, 0x94, 49, 256));
        assert_eq!(FS_IOC_SETFSLABEL, ioc(1, 0x94, 50, 256));
    }
}
