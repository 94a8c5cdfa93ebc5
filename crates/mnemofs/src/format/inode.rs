//! Inode slot codec (docs/FORMAT.md §2.2).
//!
//! ```text
//!  off  size  field
//!    0     8  valid      word: 0 free, 1 in use        } change in place,
//!    8     8  log_head   word: first log page (block)  } not checksummed
//!   16     8  log_tail   word: PM offset past the last committed entry
//!   24     8  ino        this slot's inode number      } static part, written
//!   32     4  mode       S_IFMT bits (the file kind)   } once while valid = 0
//!   36     4  generation uses of this slot so far      }
//!   40     8  btime_sec  birth time, seconds (v10)     }
//!   48     4  btime_nsec birth time, nanoseconds (v10) }
//!   52    72  reserved   zero                          }
//!  124     4  csum       CRC-32 of [24, 124)
//! ```

use super::bytes::{crc, get_u32, get_u64, put_u32, put_u64};
use crate::types::{FileKind, Timespec};

/// Size of an inode slot.
pub const INODE_SIZE: u64 = 128;
/// `valid` word (offset 0): 0 = free, 1 = in use.
pub const INO_VALID_OFF: u64 = 0;
/// `log_head` word (offset 8): block number of the first log page.
pub const INO_HEAD_OFF: u64 = 8;
/// `log_tail` word (offset 16): PM byte offset just past the last committed entry.
pub const INO_TAIL_OFF: u64 = 16;
/// Static part [24, 124), checksum at 124.
pub const INO_STATIC_OFF: usize = 24;
/// Offset of the static part's `ino` field (u64, the slot's own inode number).
pub const INO_NUM_OFF: usize = INO_STATIC_OFF;
/// Offset of the static part's `mode` field (u32, `S_IFMT` bits only).
pub const INO_MODE_OFF: usize = 32;
/// Offset of the static part's `generation` field (u32): how many times the slot
/// has been allocated before (0 for its first file), so that an export handle of a
/// deleted file never opens a later file with the same inode number.
pub const INO_GEN_OFF: usize = 36;
/// Offset of the static part's birth time (format version 10): seconds (i64) and,
/// at [`INO_BTIME_NSEC_OFF`], nanoseconds (u32). All 12 bytes zero: not recorded
/// (the slot was written by an older format, or on an image before version 10).
pub const INO_BTIME_OFF: usize = 40;
/// Offset of the birth time's nanoseconds (u32, below 10^9).
pub const INO_BTIME_NSEC_OFF: usize = 48;
/// First reserved byte of the static part (zero up to the checksum).
const INO_RESERVED_OFF: usize = 52;
/// Offset of the checksum (u32, CRC-32 of `[INO_STATIC_OFF, INO_CSUM_OFF)`).
pub const INO_CSUM_OFF: usize = 124;

/// Encodes the static part of an inode slot (bytes 24..128); `btime` only on
/// images of version 10 and later.
pub fn encode_inode_static(
    ino: u64,
    kind: FileKind,
    generation: u32,
    btime: Option<Timespec>,
) -> [u8; INODE_SIZE as usize] {
    let mut b = [0u8; INODE_SIZE as usize];
    put_u64(&mut b, INO_NUM_OFF, ino);
    put_u32(&mut b, INO_MODE_OFF, kind.mode_bits());
    put_u32(&mut b, INO_GEN_OFF, generation);
    if let Some(t) = btime {
        put_u64(&mut b, INO_BTIME_OFF, t.sec as u64);
        put_u32(&mut b, INO_BTIME_NSEC_OFF, t.nsec);
    }
    let c = crc(&b[INO_STATIC_OFF..INO_CSUM_OFF]);
    put_u32(&mut b, INO_CSUM_OFF, c);
    b
}

/// The generation of a slot's static part (any value is valid; check the slot with
/// [`decode_inode_static`] first).
pub fn inode_generation(b: &[u8; INODE_SIZE as usize]) -> u32 {
    get_u32(b, INO_GEN_OFF)
}

/// The birth time of a slot's static part (check the slot with
/// [`decode_inode_static`] first); `None` when it records none.
pub fn inode_btime(b: &[u8; INODE_SIZE as usize]) -> Option<Timespec> {
    let sec = get_u64(b, INO_BTIME_OFF) as i64;
    let nsec = get_u32(b, INO_BTIME_NSEC_OFF);
    (sec != 0 || nsec != 0).then_some(Timespec { sec, nsec })
}

/// The generation a new file in this (free) slot gets: one more than the stale
/// static part's, when that is intact; 0 for a slot never used (or whose stale
/// part is damaged: a handle is then refused for its checksum, not its generation).
pub fn next_generation(b: &[u8; INODE_SIZE as usize], ino: u64) -> u32 {
    match decode_inode_static(b, ino) {
        Ok(_) => inode_generation(b).wrapping_add(1),
        Err(_) => 0,
    }
}

/// Validates the static part of a slot; returns the kind.
pub fn decode_inode_static(
    b: &[u8; INODE_SIZE as usize],
    ino: u64,
) -> std::result::Result<FileKind, String> {
    let c = get_u32(b, INO_CSUM_OFF);
    if c != crc(&b[INO_STATIC_OFF..INO_CSUM_OFF]) {
        return Err(format!("inode {ino}: checksum mismatch"));
    }
    let stored = get_u64(b, INO_NUM_OFF);
    if stored != ino {
        return Err(format!("inode {ino}: slot records inode number {stored}"));
    }
    let mode = get_u32(b, INO_MODE_OFF);
    if mode & !libc::S_IFMT != 0 {
        return Err(format!(
            "inode {ino}: mode field {mode:#o} holds more than the file type"
        ));
    }
    let nsec = get_u32(b, INO_BTIME_NSEC_OFF);
    if nsec >= 1_000_000_000 {
        return Err(format!(
            "inode {ino}: birth time has {nsec} nanoseconds (at most 999999999)"
        ));
    }
    if b[INO_RESERVED_OFF..INO_CSUM_OFF].iter().any(|&x| x != 0) {
        return Err(format!(
            "inode {ino}: reserved bytes are not zero (written by a newer format?)"
        ));
    }
    FileKind::from_mode(mode).ok_or_else(|| format!("inode {ino}: unknown file type {mode:#o}"))
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // Tests build their own values.
mod tests {
    use super::*;

    const KINDS: [FileKind; 7] = [
        FileKind::Regular,
        FileKind::Directory,
        FileKind::Symlink,
        FileKind::Fifo,
        FileKind::Socket,
        FileKind::CharDevice,
        FileKind::BlockDevice,
    ];

    #[test]
    fn inode_static_roundtrip() {
        for (i, kind) in KINDS.into_iter().enumerate() {
            let ino = 1 + i as u64 * 1000;
            let b = encode_inode_static(ino, kind, i as u32, None);
            assert_eq!(decode_inode_static(&b, ino), Ok(kind));
            // The words before the static part do not count.
            let mut w = b;
            w[..INO_STATIC_OFF].fill(0xff);
            assert_eq!(decode_inode_static(&w, ino), Ok(kind));
        }
    }

    #[test]
    fn inode_static_bytes_follow_format_md() {
        let t = Timespec {
            sec: -5,
            nsec: 999_999_999,
        };
        let b = encode_inode_static(77, FileKind::Directory, 9, Some(t));
        assert!(b[..24].iter().all(|&x| x == 0));
        assert_eq!(get_u64(&b, 24), 77);
        assert_eq!(get_u32(&b, 32), libc::S_IFDIR);
        assert_eq!(get_u32(&b, 36), 9);
        assert_eq!(get_u64(&b, 40) as i64, -5);
        assert_eq!(get_u32(&b, 48), 999_999_999);
        assert!(b[52..124].iter().all(|&x| x == 0));
        assert_eq!(decode_inode_static(&b, 77), Ok(FileKind::Directory));
        assert_eq!(inode_btime(&b), Some(t));
        let none = encode_inode_static(77, FileKind::Directory, 9, None);
        assert!(none[40..124].iter().all(|&x| x == 0));
        assert_eq!(inode_btime(&none), None);
        assert_eq!(next_generation(&b, 77), 10);
        assert_eq!(next_generation(&[0u8; 128], 77), 0);
        assert_eq!(get_u32(&b, 124), crc(&b[24..124]));
    }

    #[test]
    fn inode_static_corruption_is_refused() {
        let b = encode_inode_static(5, FileKind::Regular, 0, None);
        // Another slot's bytes.
        assert!(decode_inode_static(&b, 6).is_err());
        // A flipped bit anywhere in the checksummed part.
        for i in INO_STATIC_OFF..INODE_SIZE as usize {
            let mut bad = b;
            bad[i] ^= 1;
            assert!(decode_inode_static(&bad, 5).is_err(), "byte {i}");
        }
        // A CRC-valid slot with an unknown file type.
        let mut bad = b;
        put_u32(&mut bad, INO_MODE_OFF, 0);
        let c = crc(&bad[INO_STATIC_OFF..INO_CSUM_OFF]);
        put_u32(&mut bad, INO_CSUM_OFF, c);
        assert!(decode_inode_static(&bad, 5).is_err());
        // CRC-valid, a birth time of 10^9 nanoseconds, or a reserved byte set.
        for (at, v) in [(INO_BTIME_NSEC_OFF, 1_000_000_000), (INO_RESERVED_OFF, 1)] {
            let mut bad = b;
            put_u32(&mut bad, at, v);
            let c = crc(&bad[INO_STATIC_OFF..INO_CSUM_OFF]);
            put_u32(&mut bad, INO_CSUM_OFF, c);
            assert!(decode_inode_static(&bad, 5).is_err(), "{at}");
        }
    }
}
