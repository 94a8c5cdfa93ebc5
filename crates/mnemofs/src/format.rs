//! On-PM format, byte for byte (docs/FORMAT.md is the prose version of this file).
//!
//! All integers are little-endian. PM holds block numbers and byte offsets, never
//! virtual addresses.

use crate::error::{FsError, Result};
use crate::types::{FileKind, Timespec};

/// Block (page) size.
pub const BLOCK: u64 = 4096;
/// Format version written by this build (2: LAWN zone, descriptor table and fine-log
/// redo areas after the inode table; 3: LAWN descriptor check by a multiply-xorshift
/// mix instead of a CRC-32).
pub const VERSION: u32 = 3;
/// Superblock magic.
pub const MAGIC: [u8; 8] = *b"MNEMOFS\0";

// ---------------------------------------------------------------- superblock ----
/// Primary superblock block number; the replica is in block 1.
pub const SB_BLOCK: u64 = 0;
pub const SB_REPLICA_BLOCK: u64 = 1;
/// Bytes of the superblock covered by its checksum (the checksum follows at 120).
pub const SB_CSUM_LEN: usize = 120;
/// Byte offset (within the primary superblock block) of the 8-byte state word.
pub const SB_STATE_OFF: u64 = 256;
/// State word: the file system was unmounted cleanly and its free list is saved.
pub const STATE_CLEAN: u64 = 0x434c_4541_4e5f_4f4b; // "KO_NAELC"
/// State word: mounted, or crashed while mounted.
pub const STATE_DIRTY: u64 = 0x4449_5254_595f_5f5f;

/// Geometry recorded in the superblock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub total_blocks: u64,
    pub cpus: u32,
    pub inode_count: u64,
    pub journal_start: u64,
    pub freelist_start: u64,
    pub freelist_blocks: u64,
    pub inode_table_start: u64,
    pub inode_table_blocks: u64,
    /// Fine-log redo areas: `REDO_BLOCKS` blocks per CPU (docs/FORMAT.md).
    pub redo_start: u64,
    /// LAWN descriptor table: one 16-byte descriptor per zone slot.
    pub desc_start: u64,
    /// LAWN zone slots (`zone_slots` of `slot_size` bytes, split evenly per CPU).
    pub slot_start: u64,
    pub zone_slots: u64,
    pub slot_size: u32,
    pub data_start: u64,
    pub created: u64,
}

/// Blocks of one CPU's fine-log redo area (one record of up to a page of data).
pub const REDO_BLOCKS: u64 = 2;
/// Bytes of one LAWN descriptor.
pub const DESC_SIZE: u64 = 16;
/// Default LAWN slot size and zone share of the image.
pub const DEFAULT_SLOT_SIZE: u32 = 64;
pub const DEFAULT_ZONE_PERCENT: u32 = 3;

/// How much of the image the LAWN zone takes, and its slot size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneParams {
    /// Percent of the image for slots plus descriptors (0: no zone).
    pub percent: u32,
    /// Slot size: a multiple of 64 that divides the block size, at most 2048.
    pub slot_size: u32,
}

impl Default for ZoneParams {
    fn default() -> Self {
        ZoneParams {
            percent: DEFAULT_ZONE_PERCENT,
            slot_size: DEFAULT_SLOT_SIZE,
        }
    }
}

/// Whether `s` is an acceptable slot size.
pub fn valid_slot_size(s: u32) -> bool {
    (64..=2048).contains(&s) && s.is_multiple_of(64) && (BLOCK as u32).is_multiple_of(s)
}

/// Smallest image mkfs accepts.
pub const MIN_SIZE: u64 = 8 << 20;
/// Blocks reserved for the saved free list.
pub const FREELIST_BLOCKS: u64 = 32;

impl Geometry {
    /// Lays out an image of `size` bytes.
    pub fn compute(size: u64, cpus: u32, inodes: u64) -> Result<Geometry> {
        Self::compute_with_min(size, cpus, inodes, MIN_SIZE)
    }

    /// Like `compute`, with another minimum size (tiny in-memory images for the crash
    /// explorer; the layout rules are the same).
    pub fn compute_with_min(size: u64, cpus: u32, inodes: u64, min: u64) -> Result<Geometry> {
        Self::compute_zoned(size, cpus, inodes, min, ZoneParams::default())
    }

    /// Like `compute_with_min`, with the LAWN zone's size and slot size.
    pub fn compute_zoned(
        size: u64,
        cpus: u32,
        inodes: u64,
        min: u64,
        zone: ZoneParams,
    ) -> Result<Geometry> {
        if !valid_slot_size(zone.slot_size) {
            return Err(FsError::Invalid(
                "LAWN slot size must be a multiple of 64 that divides 4096, at most 2048",
            ));
        }
        if zone.percent > 50 {
            return Err(FsError::Invalid(
                "LAWN zone may take at most 50% of the image",
            ));
        }
        if size < min {
            return Err(FsError::ImageTooSmall { size, min });
        }
        let cpus = cpus.clamp(1, 64);
        let total_blocks = size / BLOCK;
        let inode_count = if inodes == 0 {
            (size / (16 << 10)).max(1024)
        } else {
            inodes.max(16)
        };
        // Round up so every CPU owns the same number of inode slots.
        let inode_count = inode_count.div_ceil(cpus as u64) * cpus as u64;
        let journal_start = 2;
        let freelist_start = journal_start + cpus as u64;
        let inode_table_start = freelist_start + FREELIST_BLOCKS;
        let inode_table_blocks = (inode_count * INODE_SIZE).div_ceil(BLOCK);
        let redo_start = inode_table_start + inode_table_blocks;
        let desc_start = redo_start + REDO_BLOCKS * cpus as u64;
        // Slots plus their descriptors take `percent` of the image; every CPU's
        // sub-zone has the same number of slots.
        let zone_bytes = size / 100 * zone.percent as u64;
        let per_cpu = zone_bytes / (zone.slot_size as u64 + DESC_SIZE) / cpus as u64;
        let zone_slots = per_cpu * cpus as u64;
        let slot_start = desc_start + (zone_slots * DESC_SIZE).div_ceil(BLOCK);
        let data_start = slot_start + (zone_slots * zone.slot_size as u64).div_ceil(BLOCK);
        if data_start + 64 * cpus as u64 > total_blocks {
            return Err(FsError::ImageTooSmall {
                size,
                min: (data_start + 64 * cpus as u64) * BLOCK,
            });
        }
        Ok(Geometry {
            total_blocks,
            cpus,
            inode_count,
            journal_start,
            freelist_start,
            freelist_blocks: FREELIST_BLOCKS,
            inode_table_start,
            inode_table_blocks,
            redo_start,
            desc_start,
            slot_start,
            zone_slots,
            slot_size: zone.slot_size,
            data_start,
            created: Timespec::now().sec as u64,
        })
    }

    pub fn encode(&self) -> [u8; 128] {
        let mut b = [0u8; 128];
        b[0..8].copy_from_slice(&MAGIC);
        put_u32(&mut b, 8, VERSION);
        put_u32(&mut b, 12, BLOCK as u32);
        put_u64(&mut b, 16, self.total_blocks);
        put_u32(&mut b, 24, self.cpus);
        put_u32(&mut b, 28, 0); // feature flags
        put_u64(&mut b, 32, self.inode_count);
        put_u64(&mut b, 40, self.journal_start);
        put_u64(&mut b, 48, self.freelist_start);
        put_u64(&mut b, 56, self.freelist_blocks);
        put_u64(&mut b, 64, self.inode_table_start);
        put_u64(&mut b, 72, self.inode_table_blocks);
        put_u64(&mut b, 80, self.data_start);
        put_u64(&mut b, 88, self.created);
        put_u64(&mut b, 96, self.zone_slots);
        put_u32(&mut b, 104, self.slot_size);
        let c = crc(&b[..SB_CSUM_LEN]);
        put_u32(&mut b, SB_CSUM_LEN, c);
        b
    }

    /// Decodes and validates a superblock against an image of `image_len` bytes.
    pub fn decode(b: &[u8], image_len: u64) -> std::result::Result<Geometry, String> {
        if b.len() < 128 {
            return Err("short superblock".into());
        }
        if b[0..8] != MAGIC {
            return Err("bad magic (not a mnemofs image)".into());
        }
        let c = get_u32(b, SB_CSUM_LEN);
        if c != crc(&b[..SB_CSUM_LEN]) {
            return Err("superblock checksum mismatch".into());
        }
        let version = get_u32(b, 8);
        if version != VERSION {
            return Err(format!("unsupported format version {version}"));
        }
        if get_u32(b, 12) as u64 != BLOCK {
            return Err("unsupported block size".into());
        }
        let cpus = get_u32(b, 24);
        let inode_table_start = get_u64(b, 64);
        let inode_table_blocks = get_u64(b, 72);
        let zone_slots = get_u64(b, 96);
        let slot_size = get_u32(b, 104);
        // Derived positions (checked against data_start below); saturating so that
        // garbage cannot overflow before it is rejected.
        let redo_start = inode_table_start.saturating_add(inode_table_blocks);
        let desc_start = redo_start.saturating_add(REDO_BLOCKS.saturating_mul(cpus as u64));
        let slot_start =
            desc_start.saturating_add(zone_slots.saturating_mul(DESC_SIZE).div_ceil(BLOCK));
        let slots_end =
            slot_start.saturating_add(zone_slots.saturating_mul(slot_size as u64).div_ceil(BLOCK));
        let g = Geometry {
            total_blocks: get_u64(b, 16),
            cpus,
            inode_count: get_u64(b, 32),
            journal_start: get_u64(b, 40),
            freelist_start: get_u64(b, 48),
            freelist_blocks: get_u64(b, 56),
            inode_table_start,
            inode_table_blocks,
            redo_start,
            desc_start,
            slot_start,
            zone_slots,
            slot_size,
            data_start: get_u64(b, 80),
            created: get_u64(b, 88),
        };
        let ok = g.cpus >= 1
            && valid_slot_size(g.slot_size)
            && g.zone_slots.is_multiple_of(g.cpus.max(1) as u64)
            && g.data_start == slots_end
            && g.cpus <= 64
            && g.journal_start == 2
            && g.freelist_start == g.journal_start + g.cpus as u64
            && g.inode_table_start == g.freelist_start + g.freelist_blocks
            && g.inode_count > 0
            && g.inode_count.is_multiple_of(g.cpus as u64)
            && g.inode_table_blocks == (g.inode_count * INODE_SIZE).div_ceil(BLOCK)
            && g.data_start < g.total_blocks
            && g.total_blocks
                .checked_mul(BLOCK)
                .is_some_and(|l| l <= image_len);
        if !ok {
            return Err("superblock geometry is inconsistent with the image".into());
        }
        Ok(g)
    }

    /// Whichever of two superblock copies decodes to `self` (the bytes to repair the
    /// other copy with).
    pub fn encode_like(&self, a: &[u8; 128], b: &[u8; 128]) -> [u8; 128] {
        if Geometry::decode(a, u64::MAX).ok().as_ref() == Some(self) {
            *a
        } else if Geometry::decode(b, u64::MAX).ok().as_ref() == Some(self) {
            *b
        } else {
            self.encode()
        }
    }

    /// PM offset of CPU `cpu`'s fine-log redo area.
    pub fn redo_off(&self, cpu: u32) -> u64 {
        (self.redo_start + REDO_BLOCKS * cpu as u64) * BLOCK
    }

    /// PM offset of the descriptor of zone slot `slot`.
    pub fn desc_off(&self, slot: u64) -> u64 {
        self.desc_start * BLOCK + slot * DESC_SIZE
    }

    /// PM offset of zone slot `slot`.
    pub fn slot_off(&self, slot: u64) -> u64 {
        self.slot_start * BLOCK + slot * self.slot_size as u64
    }

    /// Slots of each CPU's sub-zone.
    pub fn slots_per_cpu(&self) -> u64 {
        self.zone_slots / self.cpus as u64
    }

    /// Slices (slot-sized pieces) of one page.
    pub fn slices_per_page(&self) -> u64 {
        BLOCK / self.slot_size as u64
    }

    pub fn journal_off(&self, cpu: u32) -> u64 {
        (self.journal_start + cpu as u64) * BLOCK
    }

    pub fn inode_off(&self, ino: u64) -> u64 {
        self.inode_table_start * BLOCK + (ino - 1) * INODE_SIZE
    }

    /// Inode numbers are 1-based; inode `ino` belongs to CPU `(ino-1) % cpus`.
    pub fn ino_cpu(&self, ino: u64) -> u32 {
        ((ino - 1) % self.cpus as u64) as u32
    }

    /// The LAWN sub-zone that holds the slices of page `pgoff` of inode `ino`
    /// (docs/FORMAT.md §2.9): a hash of the page, so that one file's pages spread
    /// over every sub-zone (one writer can use the whole zone, and writers of one
    /// shared file do not all meet in one sub-zone), while each page has exactly one.
    pub fn lawn_sub(&self, ino: u64, pgoff: u64) -> u32 {
        let k = (ino << 32) ^ pgoff;
        let h = k.wrapping_mul(0xd6e8_feb8_6659_fd93) >> 32;
        ((h * self.cpus as u64) >> 32) as u32
    }

    pub fn valid_ino(&self, ino: u64) -> bool {
        ino >= 1 && ino <= self.inode_count
    }

    pub fn is_data_block(&self, b: u64) -> bool {
        b >= self.data_start && b < self.total_blocks
    }

    pub fn data_blocks(&self) -> u64 {
        self.total_blocks - self.data_start
    }

    /// The data-block range of CPU `cpu`'s allocator.
    pub fn cpu_range(&self, cpu: u32) -> (u64, u64) {
        let n = self.data_blocks();
        let per = n / self.cpus as u64;
        let start = self.data_start + per * cpu as u64;
        let end = if cpu + 1 == self.cpus {
            self.total_blocks
        } else {
            start + per
        };
        (start, end)
    }

    /// Which CPU range a data block lies in.
    pub fn block_cpu(&self, b: u64) -> u32 {
        let per = (self.data_blocks() / self.cpus as u64).max(1);
        (((b - self.data_start) / per) as u32).min(self.cpus - 1)
    }
}

// ------------------------------------------------------------------ inodes ------
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
pub const INO_CSUM_OFF: usize = 124;

/// Encodes the static part of an inode slot (bytes 24..128).
pub fn encode_inode_static(ino: u64, kind: FileKind) -> [u8; 128] {
    let mut b = [0u8; 128];
    put_u64(&mut b, 24, ino);
    put_u32(&mut b, 32, kind.mode_bits());
    let c = crc(&b[INO_STATIC_OFF..INO_CSUM_OFF]);
    put_u32(&mut b, INO_CSUM_OFF, c);
    b
}

/// Validates the static part of a slot; returns the kind.
pub fn decode_inode_static(b: &[u8; 128], ino: u64) -> std::result::Result<FileKind, String> {
    let c = get_u32(b, INO_CSUM_OFF);
    if c != crc(&b[INO_STATIC_OFF..INO_CSUM_OFF]) {
        return Err(format!("inode {ino}: checksum mismatch"));
    }
    let stored = get_u64(b, 24);
    if stored != ino {
        return Err(format!("inode {ino}: slot records inode number {stored}"));
    }
    FileKind::from_mode(get_u32(b, 32)).ok_or_else(|| format!("inode {ino}: unknown file type"))
}

// -------------------------------------------------------------------- logs ------
/// Log entries are multiples of this unit.
pub const UNIT: u64 = 64;
/// Bytes of a log page available to entries; the page tail follows.
pub const LOG_DATA: u64 = BLOCK - 64;
/// Page tail: next-page block number (8-byte atomic).
pub const LOG_NEXT_OFF: u64 = LOG_DATA;
/// Page tail: owning inode number.
pub const LOG_OWNER_OFF: u64 = LOG_DATA + 8;
/// Page tail: magic, to tell log pages apart in fsck.
pub const LOG_MAGIC_OFF: u64 = LOG_DATA + 16;
pub const LOG_MAGIC: u64 = 0x4d4e_4c4f_4750_4731; // "1GPGOLNM"

/// Commit-word tag (top 16 bits).
const COMMIT_TAG: u64 = 0xC0DE;
/// Follower-mark tag (top 16 bits).
const FOLLOWER_TAG: u64 = 0xF011;

pub const ET_WRITE: u8 = 1;
pub const ET_SETATTR: u8 = 2;
pub const ET_LINK: u8 = 3;
pub const ET_DENTRY: u8 = 4;

pub const DENTRY_ADD: u8 = 1;
pub const DENTRY_REMOVE: u8 = 2;

/// SetAttr flag: this setattr made the file smaller (fast GC must keep it).
pub const SETATTR_SHRINK: u32 = 1;

/// A decoded log entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// `npages` pages from `pgoff` now live in blocks `block..block+npages`
    /// (`block == 0`: the pages become holes).
    Write {
        pgoff: u64,
        block: u64,
        npages: u32,
        size_after: u64,
        mtime: Timespec,
    },
    /// Full attribute snapshot.
    SetAttr {
        mode: u32,
        uid: u32,
        gid: u32,
        rdev: u32,
        size: u64,
        atime: Timespec,
        mtime: Timespec,
        ctime: Timespec,
        flags: u32,
    },
    /// New link count.
    Link { nlink: u32, ctime: Timespec },
    /// Directory entry added or removed; `time` is the directory's new mtime/ctime.
    Dentry {
        op: u8,
        ino: u64,
        cookie: u64,
        kind: FileKind,
        time: Timespec,
        name: Vec<u8>,
    },
}

impl Entry {
    /// Size in 64-byte units.
    pub fn units(&self) -> u64 {
        match self {
            Entry::Write { .. } | Entry::Link { .. } => 1,
            Entry::SetAttr { .. } => 2,
            Entry::Dentry { name, .. } => (48 + name.len() as u64).div_ceil(UNIT),
        }
    }

    /// Encodes the entry with a zero commit word.
    pub fn encode(&self) -> Vec<u8> {
        let units = self.units();
        let mut b = vec![0u8; (units * UNIT) as usize];
        b[9] = units as u8;
        match self {
            Entry::Write {
                pgoff,
                block,
                npages,
                size_after,
                mtime,
            } => {
                b[8] = ET_WRITE;
                put_u64(&mut b, 16, *pgoff);
                put_u64(&mut b, 24, *block);
                put_u32(&mut b, 32, *npages);
                put_u32(&mut b, 36, mtime.nsec);
                put_u64(&mut b, 40, *size_after);
                put_u64(&mut b, 48, mtime.sec as u64);
            }
            Entry::SetAttr {
                mode,
                uid,
                gid,
                rdev,
                size,
                atime,
                mtime,
                ctime,
                flags,
            } => {
                b[8] = ET_SETATTR;
                put_u32(&mut b, 16, *mode);
                put_u32(&mut b, 20, *uid);
                put_u32(&mut b, 24, *gid);
                put_u32(&mut b, 28, *rdev);
                put_u64(&mut b, 32, *size);
                put_u64(&mut b, 40, atime.sec as u64);
                put_u64(&mut b, 48, mtime.sec as u64);
                put_u64(&mut b, 56, ctime.sec as u64);
                put_u32(&mut b, 64, atime.nsec);
                put_u32(&mut b, 68, mtime.nsec);
                put_u32(&mut b, 72, ctime.nsec);
                put_u32(&mut b, 76, *flags);
            }
            Entry::Link { nlink, ctime } => {
                b[8] = ET_LINK;
                put_u32(&mut b, 16, *nlink);
                put_u32(&mut b, 20, ctime.nsec);
                put_u64(&mut b, 24, ctime.sec as u64);
            }
            Entry::Dentry {
                op,
                ino,
                cookie,
                kind,
                time,
                name,
            } => {
                b[8] = ET_DENTRY;
                put_u64(&mut b, 16, *ino);
                put_u64(&mut b, 24, *cookie);
                put_u64(&mut b, 32, time.sec as u64);
                put_u32(&mut b, 40, time.nsec);
                b[44] = name.len() as u8;
                b[45] = *op;
                b[46] = kind.dirent_type();
                b[48..48 + name.len()].copy_from_slice(name);
            }
        }
        b
    }

    /// Decodes an entry body (`b` starts at the entry's commit word).
    pub fn decode(b: &[u8]) -> std::result::Result<Entry, String> {
        if b.len() < 64 {
            return Err("short entry".into());
        }
        let ts = |s: usize, n: usize| Timespec {
            sec: get_u64(b, s) as i64,
            nsec: get_u32(b, n),
        };
        match b[8] {
            ET_WRITE => Ok(Entry::Write {
                pgoff: get_u64(b, 16),
                block: get_u64(b, 24),
                npages: get_u32(b, 32),
                size_after: get_u64(b, 40),
                mtime: ts(48, 36),
            }),
            ET_SETATTR if b.len() >= 128 => Ok(Entry::SetAttr {
                mode: get_u32(b, 16),
                uid: get_u32(b, 20),
                gid: get_u32(b, 24),
                rdev: get_u32(b, 28),
                size: get_u64(b, 32),
                atime: ts(40, 64),
                mtime: ts(48, 68),
                ctime: ts(56, 72),
                flags: get_u32(b, 76),
            }),
            ET_LINK => Ok(Entry::Link {
                nlink: get_u32(b, 16),
                ctime: ts(24, 20),
            }),
            ET_DENTRY => {
                let len = b[44] as usize;
                if len == 0 || 48 + len > b.len() {
                    return Err("dentry name length out of range".into());
                }
                let op = b[45];
                if op != DENTRY_ADD && op != DENTRY_REMOVE {
                    return Err(format!("bad dentry op {op}"));
                }
                let kind = kind_from_dt(b[46]).ok_or("bad dentry file type")?;
                Ok(Entry::Dentry {
                    op,
                    ino: get_u64(b, 16),
                    cookie: get_u64(b, 24),
                    kind,
                    time: ts(32, 40),
                    name: b[48..48 + len].to_vec(),
                })
            }
            t => Err(format!("unknown entry type {t}")),
        }
    }
}

fn kind_from_dt(dt: u8) -> Option<FileKind> {
    [
        FileKind::Regular,
        FileKind::Directory,
        FileKind::Symlink,
        FileKind::Fifo,
        FileKind::Socket,
        FileKind::CharDevice,
        FileKind::BlockDevice,
    ]
    .into_iter()
    .find(|k| k.dirent_type() == dt)
}

/// The commit word for an encoded entry: tag, units and the CRC of bytes 8.. .
pub fn commit_word(body: &[u8]) -> u64 {
    let units = (body.len() as u64) / UNIT;
    (COMMIT_TAG << 48) | (units << 32) | crc(&body[8..]) as u64
}

/// The mark of a follower in a concurrent group: like a commit word, with the
/// follower tag. It commits nothing by itself; the group's leader does.
pub fn follower_word(body: &[u8]) -> u64 {
    let units = (body.len() as u64) / UNIT;
    (FOLLOWER_TAG << 48) | (units << 32) | crc(&body[8..]) as u64
}

/// Group size stored in a leader's header (bytes 10..12); 0 or 1: not a group.
pub fn group_size(body: &[u8]) -> u16 {
    u16::from_le_bytes([body[10], body[11]])
}

/// What a commit word says about the entry it heads.
#[derive(Debug, PartialEq, Eq)]
pub enum CommitState {
    /// No commit mark: the entry was never committed (skip one unit).
    Uncommitted,
    /// A commit mark for an entry of this many units.
    Committed { units: u64, crc: u32 },
    /// A follower of a concurrent group: committed only if its leader is.
    Follower { units: u64, crc: u32 },
    /// Not zero, not a commit mark: corruption.
    Garbage,
}

pub fn parse_commit(word: u64) -> CommitState {
    if word == 0 {
        return CommitState::Uncommitted;
    }
    let units = (word >> 32) & 0xffff;
    let tag = word >> 48;
    if (tag != COMMIT_TAG && tag != FOLLOWER_TAG) || units == 0 || units > LOG_DATA / UNIT {
        return CommitState::Garbage;
    }
    if tag == FOLLOWER_TAG {
        return CommitState::Follower {
            units,
            crc: word as u32,
        };
    }
    CommitState::Committed {
        units,
        crc: word as u32,
    }
}

pub fn verify_entry(body: &[u8], crc_expected: u32) -> bool {
    crc(&body[8..]) == crc_expected
}

// ----------------------------------------------------------------- journal ------
/// Journal header word (offset 0 of a CPU's journal block): 0 = idle, else
/// `0x4A4E << 48 | nrec << 32 | crc32(records)`.
pub const JOURNAL_ACTIVE_OFF: u64 = 0;
/// Records start here: 16 bytes each, (PM offset u64, old value u64).
pub const JOURNAL_REC_OFF: u64 = 64;
pub const JOURNAL_MAX_RECS: usize = ((BLOCK - JOURNAL_REC_OFF) / 16) as usize;
const JOURNAL_TAG: u64 = 0x4A4E;

pub fn journal_word(nrec: usize, records: &[u8]) -> u64 {
    (JOURNAL_TAG << 48) | ((nrec as u64) << 32) | crc(records) as u64
}

/// Parses a journal header word: `Ok(None)` idle, `Ok(Some((n, crc)))` active.
pub fn parse_journal_word(w: u64) -> std::result::Result<Option<(usize, u32)>, String> {
    if w == 0 {
        return Ok(None);
    }
    let n = ((w >> 32) & 0xffff) as usize;
    if w >> 48 != JOURNAL_TAG || n == 0 || n > JOURNAL_MAX_RECS {
        return Err(format!("journal header word {w:#x} is not valid"));
    }
    Ok(Some((n, w as u32)))
}

// --------------------------------------------------------------- free list ------
/// Saved free list header (at the first free-list block): magic, extent count, CRC
/// of the extents; extents (start u64, len u64) follow at offset 64.
pub const FREELIST_MAGIC: u64 = 0x5453_494c_4545_5246; // "FREELIST"
pub const FREELIST_EXT_OFF: u64 = 64;

pub fn freelist_capacity(g: &Geometry) -> usize {
    ((g.freelist_blocks * BLOCK - FREELIST_EXT_OFF) / 16) as usize
}

// ----------------------------------------------------------------- helpers ------
pub fn crc(b: &[u8]) -> u32 {
    crc32fast::hash(b)
}

pub fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

pub fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

pub fn get_u64(b: &[u8], off: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(x)
}

pub fn get_u32(b: &[u8], off: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_roundtrip() {
        let t = Timespec { sec: 12, nsec: 34 };
        let es = vec![
            Entry::Write {
                pgoff: 7,
                block: 99,
                npages: 3,
                size_after: 40000,
                mtime: t,
            },
            Entry::SetAttr {
                mode: 0o100644,
                uid: 1,
                gid: 2,
                rdev: 3,
                size: 4,
                atime: t,
                mtime: t,
                ctime: t,
                flags: SETATTR_SHRINK,
            },
            Entry::Link { nlink: 5, ctime: t },
            Entry::Dentry {
                op: DENTRY_ADD,
                ino: 9,
                cookie: 10,
                kind: FileKind::Symlink,
                time: t,
                name: vec![b'x'; 255],
            },
        ];
        for e in es {
            let b = e.encode();
            assert_eq!(b.len() as u64, e.units() * UNIT);
            assert_eq!(Entry::decode(&b).unwrap(), e);
            let w = commit_word(&b);
            match parse_commit(w) {
                CommitState::Committed { units, crc } => {
                    assert_eq!(units, e.units());
                    assert!(verify_entry(&b, crc));
                }
                s => panic!("{s:?}"),
            }
        }
    }

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
    fn zone_geometry_matches_format_md() {
        let g = Geometry::compute(1 << 30, 4, 0).unwrap();
        assert_eq!(g.inode_table_start + g.inode_table_blocks, 2086);
        assert_eq!(g.redo_start, 2086);
        assert_eq!(g.desc_start, 2094);
        assert_eq!(g.zone_slots, 402652);
        assert_eq!(g.slots_per_cpu(), 100663);
        assert_eq!(g.slot_start, 3667);
        assert_eq!(g.data_start, 9959);
        assert_eq!(g.redo_off(1), (2086 + 2) * BLOCK);
        assert_eq!(g.slot_off(2), 3667 * BLOCK + 128);
        let b = g.encode();
        assert_eq!(Geometry::decode(&b, 1 << 30).unwrap(), g);
        // No zone, other slot sizes; bad slot sizes and shares are refused.
        let z = |percent, slot_size| ZoneParams { percent, slot_size };
        let g0 = Geometry::compute_zoned(64 << 20, 2, 0, MIN_SIZE, z(0, 64)).unwrap();
        assert_eq!(
            (g0.zone_slots, g0.slot_start, g0.data_start),
            (0, g0.desc_start, g0.desc_start)
        );
        let g2 = Geometry::compute_zoned(64 << 20, 2, 0, MIN_SIZE, z(10, 512)).unwrap();
        assert_eq!(Geometry::decode(&g2.encode(), 64 << 20).unwrap(), g2);
        for bad in [0, 32, 96, 4096, 8192] {
            assert!(Geometry::compute_zoned(64 << 20, 2, 0, MIN_SIZE, z(3, bad)).is_err());
        }
        assert!(Geometry::compute_zoned(64 << 20, 2, 0, MIN_SIZE, z(51, 64)).is_err());
    }

    #[test]
    fn lawn_sub_zones_follow_format_md_and_spread_one_file() {
        let g = Geometry::compute(1 << 30, 4, 0).unwrap();
        // The formula of docs/FORMAT.md §2.9, spelled out.
        let f = |ino: u64, p: u64| {
            let h = ((ino << 32) ^ p).wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 32;
            (h * 4) >> 32
        };
        let mut per = [0u64; 4];
        for p in 0..4000u64 {
            let s = g.lawn_sub(7, p);
            assert_eq!(s as u64, f(7, p));
            per[s as usize] += 1;
        }
        // One file's pages land in every sub-zone, about evenly.
        assert!(per.iter().all(|&n| (800..1200).contains(&n)), "{per:?}");
        let g1 = Geometry::compute(1 << 30, 1, 0).unwrap();
        assert!((0..100).all(|p| g1.lawn_sub(3, p) == 0));
    }

    #[test]
    fn garbage_commit_words_are_not_commits() {
        assert_eq!(parse_commit(0), CommitState::Uncommitted);
        assert_eq!(parse_commit(0xdead_beef), CommitState::Garbage);
        assert!(parse_journal_word(12345).is_err());
        assert_eq!(parse_journal_word(0).unwrap(), None);
    }
}
