//! Superblock codec (docs/FORMAT.md §2.1): block 0 and its replica in block 1, plus
//! the state word of block 0.
//!
//! ```text
//!  off  size  field               off  size  field
//!    0     8  magic                 64     8  inode_table_start
//!    8     4  version               72     8  inode_table_blocks
//!   12     4  block_size            80     8  data_start
//!   16     8  total_blocks          88     8  created
//!   24     4  cpus                  96     8  zone_slots
//!   28     4  features (0)         104     4  slot_size
//!   32     8  inode_count          108     4  zone_chunk_blocks (v4)
//!                                  112     4  zone_chunks (v4)
//!                                  116     4  devices (v5; zero before)
//!   40     8  journal_start        120     4  csum: CRC-32 of [0, 120)
//!   48     8  freelist_start       124     4  reserved (not checksummed)
//!   56     8  freelist_blocks
//! ```
//!
//! Block 0, byte 256: the state word ([`STATE_CLEAN`] or [`STATE_DIRTY`]), neither
//! checksummed nor replicated.

use super::bytes::{crc, get_u32, get_u64, put_u32, put_u64};
use super::device::MAX_DEVICES;
use super::inode::INODE_SIZE;
use super::layout::{one_device, Geometry, BLOCK, FREELIST_BLOCKS};
use super::zone::{
    chunk_slots, valid_slot_size, CHUNK_ENTRY_SIZE, DESC_SIZE, MAX_CHUNK_BLOCKS, MIN_CHUNK_BLOCKS,
    REDO_BLOCKS,
};

/// Format version written by this build (2: LAWN zone, descriptor table and fine-log
/// redo areas after the inode table; 3: LAWN descriptor check by a multiply-xorshift
/// mix instead of a CRC-32; 4: the LAWN chunk table, by which sub-zones grow; 5: the
/// volume's devices — their count here, the device table beside the superblock and a
/// header on each device, docs/FORMAT.md §2.10; 6: an inode table at the start of
/// each device after the first, its slots in the device table's entry; 7: LAWN
/// descriptors carry a CRC-32 of their page and slots in place of the page number).
/// Version 3 and 4 images are still read as one device; version 3 images have no
/// chunk table (`zone_chunks` 0) and their zone does not grow; version 5 images keep
/// every inode on device 0 (their device table's inode fields are zero). Version 3
/// to 6 images keep their descriptors in the page format (`Geometry::lawn_sums`
/// false). 8: inodes may carry flags (immutable, append-only, …) in an Xattr entry
/// of their log; images of versions 3 to 7 keep every inode's flags 0. 9: xattr
/// values up to 64 KiB (an Xattr SET and continuations); images of versions 3 to 8
/// keep every value within one entry. 10: inode slots record the birth time;
/// images of versions 3 to 9 record none. This build writes 10 for every new image;
/// an image it only reads keeps its version.
pub const VERSION: u32 = 10;
/// The first format version whose inode slots record a birth time.
pub const VERSION_BTIME: u32 = 10;
/// The first format version whose xattr values may span entries
/// ([`super::XATTR_MORE`]).
pub const VERSION_LARGE_XATTRS: u32 = 9;
/// The first format version whose inodes may carry flags (an Xattr entry named
/// [`super::XATTR_FLAGS`]).
pub const VERSION_FLAGS: u32 = 8;
/// The first format version whose LAWN descriptors carry the CRC-32 of their page
/// and slots.
pub const VERSION_LAWN_SUMS: u32 = 7;
/// The first format version with inode tables on later devices.
pub const VERSION_DEV_INODES: u32 = 6;
/// The first format version that names its devices.
pub const VERSION_DEVICES: u32 = 5;
/// The oldest format version this build reads.
pub const VERSION_NO_GROWTH: u32 = 3;
/// Superblock magic.
pub const MAGIC: [u8; 8] = *b"MNEMOFS\0";

/// Primary superblock block number; the replica is in block 1.
pub const SB_BLOCK: u64 = 0;
/// Block number of the superblock replica.
pub const SB_REPLICA_BLOCK: u64 = 1;
/// Bytes of an encoded superblock.
pub const SB_SIZE: usize = 128;

/// Offset of `magic` ([`MAGIC`], 8 bytes).
pub const SB_MAGIC_OFF: usize = 0;
/// Offset of `version` (u32, [`VERSION`]).
pub const SB_VERSION_OFF: usize = 8;
/// Offset of `block_size` (u32, [`BLOCK`]).
pub const SB_BLOCK_SIZE_OFF: usize = 12;
/// Offset of `total_blocks` (u64).
pub const SB_TOTAL_BLOCKS_OFF: usize = 16;
/// Offset of `cpus` (u32).
pub const SB_CPUS_OFF: usize = 24;
/// Offset of the feature flags (u32, written as 0, not checked).
pub const SB_FEATURES_OFF: usize = 28;
/// Offset of `inode_count` (u64).
pub const SB_INODE_COUNT_OFF: usize = 32;
/// Offset of `journal_start` (u64).
pub const SB_JOURNAL_START_OFF: usize = 40;
/// Offset of `freelist_start` (u64).
pub const SB_FREELIST_START_OFF: usize = 48;
/// Offset of `freelist_blocks` (u64).
pub const SB_FREELIST_BLOCKS_OFF: usize = 56;
/// Offset of `inode_table_start` (u64).
pub const SB_INODE_TABLE_START_OFF: usize = 64;
/// Offset of `inode_table_blocks` (u64).
pub const SB_INODE_TABLE_BLOCKS_OFF: usize = 72;
/// Offset of `data_start` (u64).
pub const SB_DATA_START_OFF: usize = 80;
/// Offset of `created` (u64).
pub const SB_CREATED_OFF: usize = 88;
/// Offset of `zone_slots` (u64).
pub const SB_ZONE_SLOTS_OFF: usize = 96;
/// Offset of `slot_size` (u32).
pub const SB_SLOT_SIZE_OFF: usize = 104;
/// Offset of `zone_chunk_blocks` (u32; version 4).
pub const SB_ZONE_CHUNK_BLOCKS_OFF: usize = 108;
/// Offset of `zone_chunks` (u32; version 4).
pub const SB_ZONE_CHUNKS_OFF: usize = 112;
/// Offset of `devices` (u32; version 5: the devices of the volume, docs/FORMAT.md
/// §2.10; reserved zero before).
pub const SB_DEVICES_OFF: usize = 116;
/// Bytes of the superblock covered by its checksum (the checksum follows at 120).
pub const SB_CSUM_LEN: usize = 120;
/// Offset of the checksum (u32, CRC-32 of `[0, SB_CSUM_LEN)`).
pub const SB_CSUM_OFF: usize = SB_CSUM_LEN;

/// Byte offset, in block 0 and in block 1, of the file-system label (version 8):
/// [`LABEL_MAX`] bytes, NUL-padded, then a CRC-32 of them. All zero: no label.
pub const SB_LABEL_OFF: u64 = 512;
/// Longest label in bytes (FSLABEL_MAX, 256, less its NUL).
pub const LABEL_MAX: usize = 255;
/// Bytes of an encoded label copy: the label area and its CRC.
pub const LABEL_SIZE: usize = LABEL_MAX + 1 + 4;

/// A label copy for `label` (at most [`LABEL_MAX`] bytes, no NUL).
pub fn encode_label(label: &[u8]) -> [u8; LABEL_SIZE] {
    let mut b = [0u8; LABEL_SIZE];
    let n = label.len().min(LABEL_MAX);
    b[..n].copy_from_slice(&label[..n]);
    if n > 0 {
        let c = crc(&b[..LABEL_MAX + 1]);
        put_u32(&mut b, LABEL_MAX + 1, c);
    }
    b
}

/// The label a copy holds: `Some` when it is whole (its CRC matches, or it is all
/// zero: no label), `None` when it is torn or damaged. The label ends at its first
/// NUL.
pub fn decode_label(b: &[u8]) -> Option<Vec<u8>> {
    let b = b.get(..LABEL_SIZE)?;
    if b.iter().all(|&x| x == 0) {
        return Some(Vec::new());
    }
    if get_u32(b, LABEL_MAX + 1) != crc(&b[..LABEL_MAX + 1]) || b[LABEL_MAX] != 0 {
        return None;
    }
    let end = b[..LABEL_MAX]
        .iter()
        .position(|&x| x == 0)
        .unwrap_or(LABEL_MAX);
    Some(b[..end].to_vec())
}

/// Byte offset (within the primary superblock block) of the 8-byte state word.
pub const SB_STATE_OFF: u64 = 256;
/// State word: the file system was unmounted cleanly and its free list is saved.
pub const STATE_CLEAN: u64 = 0x434c_4541_4e5f_4f4b; // "KO_NAELC"
/// State word: mounted, or crashed while mounted.
pub const STATE_DIRTY: u64 = 0x4449_5254_595f_5f5f;

impl Geometry {
    /// Encodes the superblock (the same 128 bytes for block 0 and its replica).
    pub fn encode(&self) -> [u8; SB_SIZE] {
        let mut b = [0u8; SB_SIZE];
        b[SB_MAGIC_OFF..SB_MAGIC_OFF + 8].copy_from_slice(&MAGIC);
        // Version 10 when slots record birth times (every image this build makes);
        // else 9 when xattr values may span entries; else 8 when inodes may carry flags; else 7 when the LAWN descriptors carry sums; else version 6 only when a
        // later device has an inode table (what an older build would not see),
        // otherwise what version 5 describes.
        let version = if self.btime {
            VERSION_BTIME
        } else if self.large_xattrs {
            VERSION_LARGE_XATTRS
        } else if self.flags_and_label {
            VERSION_FLAGS
        } else if self.lawn_sums {
            VERSION_LAWN_SUMS
        } else if self.dev_inodes.iter().any(|&n| n != 0) {
            VERSION_DEV_INODES
        } else {
            VERSION_DEVICES
        };
        put_u32(&mut b, SB_VERSION_OFF, version);
        put_u32(&mut b, SB_BLOCK_SIZE_OFF, BLOCK as u32);
        put_u64(&mut b, SB_TOTAL_BLOCKS_OFF, self.total_blocks);
        put_u32(&mut b, SB_CPUS_OFF, self.cpus);
        put_u32(&mut b, SB_FEATURES_OFF, 0);
        put_u64(&mut b, SB_INODE_COUNT_OFF, self.inode_count);
        put_u64(&mut b, SB_JOURNAL_START_OFF, self.journal_start);
        put_u64(&mut b, SB_FREELIST_START_OFF, self.freelist_start);
        put_u64(&mut b, SB_FREELIST_BLOCKS_OFF, self.freelist_blocks);
        put_u64(&mut b, SB_INODE_TABLE_START_OFF, self.inode_table_start);
        put_u64(&mut b, SB_INODE_TABLE_BLOCKS_OFF, self.inode_table_blocks);
        put_u64(&mut b, SB_DATA_START_OFF, self.data_start);
        put_u64(&mut b, SB_CREATED_OFF, self.created);
        put_u64(&mut b, SB_ZONE_SLOTS_OFF, self.zone_slots);
        put_u32(&mut b, SB_SLOT_SIZE_OFF, self.slot_size);
        put_u32(&mut b, SB_ZONE_CHUNK_BLOCKS_OFF, self.zone_chunk_blocks);
        put_u32(&mut b, SB_ZONE_CHUNKS_OFF, self.zone_chunks);
        put_u32(&mut b, SB_DEVICES_OFF, self.devices);
        let c = crc(&b[..SB_CSUM_LEN]);
        put_u32(&mut b, SB_CSUM_OFF, c);
        b
    }

    /// Decodes and validates a superblock against an image of `image_len` bytes.
    pub fn decode(b: &[u8], image_len: u64) -> std::result::Result<Geometry, String> {
        if b.len() < SB_SIZE {
            return Err("short superblock".into());
        }
        if b[SB_MAGIC_OFF..SB_MAGIC_OFF + 8] != MAGIC {
            return Err("bad magic (not a mnemofs image)".into());
        }
        let c = get_u32(b, SB_CSUM_OFF);
        if c != crc(&b[..SB_CSUM_LEN]) {
            return Err("superblock checksum mismatch".into());
        }
        let version = get_u32(b, SB_VERSION_OFF);
        if !(VERSION_NO_GROWTH..=VERSION).contains(&version) {
            return Err(format!("unsupported format version {version}"));
        }
        // Version 5 names its devices; older images are one device (and their
        // field is reserved zero).
        let devices = match (version, get_u32(b, SB_DEVICES_OFF)) {
            (v, n) if v >= VERSION_DEVICES && (1..=MAX_DEVICES as u32).contains(&n) => n,
            (v, n) if v >= VERSION_DEVICES => {
                return Err(format!(
                    "superblock geometry: {n} devices, not 1..={MAX_DEVICES}"
                ))
            }
            (_, 0) => 1,
            (v, _) => return Err(format!("a version-{v} superblock names devices")),
        };
        if get_u32(b, SB_BLOCK_SIZE_OFF) as u64 != BLOCK {
            return Err("unsupported block size".into());
        }
        let cpus = get_u32(b, SB_CPUS_OFF);
        let total_blocks = get_u64(b, SB_TOTAL_BLOCKS_OFF);
        let inode_count = get_u64(b, SB_INODE_COUNT_OFF);
        let journal_start = get_u64(b, SB_JOURNAL_START_OFF);
        let freelist_start = get_u64(b, SB_FREELIST_START_OFF);
        let freelist_blocks = get_u64(b, SB_FREELIST_BLOCKS_OFF);
        let inode_table_start = get_u64(b, SB_INODE_TABLE_START_OFF);
        let inode_table_blocks = get_u64(b, SB_INODE_TABLE_BLOCKS_OFF);
        let zone_slots = get_u64(b, SB_ZONE_SLOTS_OFF);
        let slot_size = get_u32(b, SB_SLOT_SIZE_OFF);
        let data_start = get_u64(b, SB_DATA_START_OFF);
        let bad = |what: String| Err(format!("superblock geometry: {what}"));
        // Each region follows the one before it, in the order of docs/FORMAT.md §1,
        // every size and position computed with checked arithmetic.
        if !(1..=64).contains(&cpus) {
            return bad(format!("cpus is {cpus}, not 1..=64"));
        }
        if journal_start != 2 {
            return bad(format!("journal_start is {journal_start}, not 2"));
        }
        // journal_start is 2 and cpus at most 64: the sums below cannot saturate.
        if freelist_start != journal_start.saturating_add(cpus as u64) {
            return bad(format!(
                "freelist_start is {freelist_start}, not {}",
                journal_start.saturating_add(cpus as u64)
            ));
        }
        if freelist_blocks != FREELIST_BLOCKS {
            return bad(format!(
                "freelist_blocks is {freelist_blocks}, not {FREELIST_BLOCKS}"
            ));
        }
        if inode_table_start != freelist_start.saturating_add(freelist_blocks) {
            return bad(format!(
                "inode_table_start is {inode_table_start}, not {}",
                freelist_start.saturating_add(freelist_blocks)
            ));
        }
        // Inode numbers and every slot offset must fit the image's blocks.
        let table_blocks = inode_count
            .checked_mul(INODE_SIZE)
            .map(|bytes| bytes.div_ceil(BLOCK));
        if inode_count == 0
            || !inode_count.is_multiple_of(cpus as u64)
            || table_blocks.is_none_or(|t| t > total_blocks)
        {
            return bad(format!(
                "inode_count {inode_count} is not a positive multiple of {cpus} CPUs that fits the image"
            ));
        }
        if Some(inode_table_blocks) != table_blocks {
            return bad(format!(
                "inode_table_blocks is {inode_table_blocks}, not the {} that {inode_count} inodes need",
                table_blocks.unwrap_or(0)
            ));
        }
        if !valid_slot_size(slot_size) {
            return bad(format!("LAWN slot size {slot_size} is not valid"));
        }
        if !zone_slots.is_multiple_of(cpus as u64) {
            return bad(format!(
                "zone_slots {zone_slots} is not a multiple of {cpus} CPUs"
            ));
        }
        let redo_start = inode_table_start.checked_add(inode_table_blocks);
        let desc_start =
            redo_start.and_then(|r| r.checked_add(REDO_BLOCKS.checked_mul(cpus as u64)?));
        let slot_start = desc_start
            .and_then(|d| d.checked_add(zone_slots.checked_mul(DESC_SIZE)?.div_ceil(BLOCK)));
        let slots_end = slot_start
            .and_then(|s| s.checked_add(zone_slots.checked_mul(slot_size as u64)?.div_ceil(BLOCK)));
        let (Some(redo_start), Some(desc_start), Some(slot_start), Some(slots_end)) =
            (redo_start, desc_start, slot_start, slots_end)
        else {
            return bad(format!(
                "zone of {zone_slots} slots of {slot_size} bytes does not fit any image"
            ));
        };
        let zone_chunk_blocks = get_u32(b, SB_ZONE_CHUNK_BLOCKS_OFF);
        let zone_chunks = get_u32(b, SB_ZONE_CHUNKS_OFF);
        if version == VERSION_NO_GROWTH && (zone_chunk_blocks, zone_chunks) != (0, 0) {
            return bad("a version-3 superblock with a LAWN chunk table".into());
        }
        if zone_chunks != 0 {
            let spc = chunk_slots(zone_chunk_blocks, slot_size);
            // (`cpus` is in 1..=64, checked above.)
            let fixed = zone_slots
                .checked_div(cpus as u64)
                .unwrap_or(0)
                .div_ceil(64)
                .saturating_mul(64);
            let per_sub = (zone_chunks as u64).checked_div(cpus as u64).unwrap_or(0);
            let fits = per_sub
                .checked_mul(spc)
                .and_then(|x| x.checked_add(fixed))
                .is_some_and(|x| x <= u32::MAX as u64);
            if !zone_chunk_blocks.is_power_of_two()
                || !(MIN_CHUNK_BLOCKS..=MAX_CHUNK_BLOCKS).contains(&zone_chunk_blocks)
                || spc == 0
                || zone_slots == 0
                || !(zone_chunks as u64).is_multiple_of(cpus as u64)
                || !fits
            {
                return bad(format!(
                    "LAWN chunk table of {zone_chunks} chunks of {zone_chunk_blocks} blocks is not valid"
                ));
            }
        } else if zone_chunk_blocks != 0 {
            return bad("LAWN chunk size without a chunk table".into());
        }
        let table_blocks = (zone_chunks as u64)
            .saturating_mul(CHUNK_ENTRY_SIZE)
            .div_ceil(BLOCK);
        let want = slots_end.saturating_add(table_blocks);
        if data_start != want {
            return bad(format!(
                "data_start is {data_start}, not {want} (the end of the LAWN zone and its chunk table)"
            ));
        }
        if data_start >= total_blocks {
            return bad(format!(
                "data_start {data_start} is not below total_blocks {total_blocks}"
            ));
        }
        if total_blocks
            .checked_mul(BLOCK)
            .is_none_or(|l| l > image_len)
        {
            return bad(format!(
                "{total_blocks} blocks do not fit the {image_len}-byte image"
            ));
        }
        let g = Geometry {
            total_blocks,
            cpus,
            inode_count,
            journal_start,
            freelist_start,
            freelist_blocks,
            inode_table_start,
            inode_table_blocks,
            redo_start,
            desc_start,
            slot_start,
            zone_slots,
            slot_size,
            chunk_table_start: slots_end,
            zone_chunk_blocks,
            zone_chunks,
            data_start,
            created: get_u64(b, SB_CREATED_OFF),
            devices,
            dev_blocks: one_device(if devices == 1 { total_blocks } else { 0 }),
            dev_inodes: [0; MAX_DEVICES],
            lawn_sums: version >= VERSION_LAWN_SUMS,
            flags_and_label: version >= VERSION_FLAGS,
            large_xattrs: version >= VERSION_LARGE_XATTRS,
            btime: version >= VERSION_BTIME,
        };
        Ok(g)
    }

    /// Whichever of two superblock copies decodes to `self` (the bytes to repair the
    /// other copy with).
    pub fn encode_like(&self, a: &[u8; SB_SIZE], b: &[u8; SB_SIZE]) -> [u8; SB_SIZE] {
        if Geometry::decode(a, u64::MAX).ok().as_ref() == Some(self) {
            *a
        } else if Geometry::decode(b, u64::MAX).ok().as_ref() == Some(self) {
            *b
        } else {
            self.encode()
        }
    }
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // Tests build their own values.
mod tests {
    use super::*;
    use crate::error::FsError;

    #[test]
    fn superblock_roundtrip_and_corruption() {
        let g = Geometry::compute(64 << 20, 2, 0).unwrap();
        let b = g.encode();
        assert_eq!(Geometry::decode(&b, 64 << 20).unwrap(), g);
        let mut bad = b;
        bad[20] ^= 1;
        assert!(Geometry::decode(&bad, 64 << 20).is_err());
        assert!(Geometry::decode(&b, 32 << 20).is_err());
        assert!(matches!(
            Geometry::compute(1 << 20, 1, 0),
            Err(FsError::ImageTooSmall { .. })
        ));
    }

    #[test]
    fn superblock_bytes_follow_format_md() {
        let g = Geometry::compute(1 << 30, 4, 0).unwrap();
        let b = g.encode();
        // The table of docs/FORMAT.md §2.1, with literal offsets.
        assert_eq!(&b[0..8], b"MNEMOFS\0");
        assert_eq!(get_u32(&b, 8), 10);
        assert_eq!(get_u32(&b, 12), 4096);
        assert_eq!(get_u64(&b, 16), g.total_blocks);
        assert_eq!(get_u32(&b, 24), 4);
        assert_eq!(get_u32(&b, 28), 0);
        assert_eq!(get_u64(&b, 32), g.inode_count);
        assert_eq!(get_u64(&b, 40), 2);
        assert_eq!(get_u64(&b, 48), 6);
        assert_eq!(get_u64(&b, 56), 32);
        assert_eq!(get_u64(&b, 64), 38);
        assert_eq!(get_u64(&b, 72), 2048);
        assert_eq!(get_u64(&b, 80), g.data_start);
        assert_eq!(get_u64(&b, 88), g.created);
        assert_eq!(get_u64(&b, 96), 402652);
        assert_eq!(get_u32(&b, 104), 64);
        assert_eq!(get_u32(&b, 108), g.zone_chunk_blocks);
        assert_eq!(get_u32(&b, 112), g.zone_chunks);
        assert_eq!(get_u32(&b, 116), 1);
        assert_eq!(get_u32(&b, 120), crc(&b[..120]));
        assert!(b[124..128].iter().all(|&x| x == 0));
        // The device count is checksummed and bounded; the last four bytes are not
        // checksummed.
        let mut r = b;
        r[117] = 1;
        assert!(Geometry::decode(&r, 1 << 30).is_err());
        let mut r = b;
        put_u32(&mut r, 116, 9);
        let c = crc(&r[..120]);
        put_u32(&mut r, 120, c);
        assert!(Geometry::decode(&r, 1 << 30).is_err());
        // Version 7 has sum-format LAWN descriptors; versions 5 and 6 the page format.
        // Without the device table's inode fields (not read here), both encode as 5,
        // what they describe then.
        assert!(Geometry::decode(&b, 1 << 30).unwrap().lawn_sums);
        assert!(Geometry::decode(&b, 1 << 30).unwrap().flags_and_label);
        // Version 7: sums, no inode flags; it stays 7.
        {
            let mut r = b;
            put_u32(&mut r, 8, 7);
            let c = crc(&r[..120]);
            put_u32(&mut r, 120, c);
            let old = Geometry::decode(&r, 1 << 30).unwrap();
            assert!(old.lawn_sums && !old.flags_and_label);
            assert_eq!(get_u32(&old.encode(), 8), 7);
        }
        for v in [5, 6] {
            let mut r = b;
            put_u32(&mut r, 8, v);
            let c = crc(&r[..120]);
            put_u32(&mut r, 120, c);
            let old = Geometry::decode(&r, 1 << 30).unwrap();
            assert!(!old.lawn_sums);
            assert_eq!(get_u32(&old.encode(), 8), 5);
        }
        // A version-4 superblock is one device; one that names devices is refused.
        let mut r = b;
        put_u32(&mut r, 8, 4);
        put_u32(&mut r, 116, 0);
        let c = crc(&r[..120]);
        put_u32(&mut r, 120, c);
        assert_eq!(Geometry::decode(&r, 1 << 30).unwrap().devices, 1);
        put_u32(&mut r, 116, 2);
        let c = crc(&r[..120]);
        put_u32(&mut r, 120, c);
        assert!(Geometry::decode(&r, 1 << 30).is_err());
        let mut r = b;
        r[126] = 1;
        assert_eq!(Geometry::decode(&r, 1 << 30).unwrap(), g);
        // Either copy repairs the other.
        assert_eq!(g.encode_like(&[0; SB_SIZE], &b), b);
        assert_eq!(g.encode_like(&r, &[0; SB_SIZE]), r);
    }
}
