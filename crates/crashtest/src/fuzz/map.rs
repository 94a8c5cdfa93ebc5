//! Where the structures of a valid image lie: the geometry, the inode slots in use,
//! their log pages and committed entries, the saved free list, live fine-log redo
//! records and LAWN descriptors. Built once per corpus image with the format codecs;
//! the structure-aware mutations pick their targets from it.

use mnemofs::format::{self, parse_commit, CommitState, Geometry, BLOCK, LOG_DATA, UNIT};
use mnemofs::FileKind;

/// A committed log entry of the base image.
#[derive(Clone, Debug)]
pub struct EntryInfo {
    /// PM offset of its commit word.
    pub off: u64,
    /// Size in 64-byte units.
    pub units: u64,
    /// Owning inode.
    pub ino: u64,
    /// Whether the owner is a directory.
    pub dir: bool,
    /// Entry type byte.
    pub etype: u8,
}

/// An inode slot in use and its log.
#[derive(Clone, Debug)]
pub struct InodeInfo {
    /// Inode number.
    pub ino: u64,
    /// Its kind.
    pub kind: FileKind,
    /// `log_head`.
    pub head: u64,
    /// `log_tail`.
    pub tail: u64,
    /// Log pages in chain order.
    pub pages: Vec<u64>,
}

/// The map of a valid image.
#[derive(Clone, Debug)]
pub struct Map {
    /// Geometry of the primary superblock.
    pub geo: Geometry,
    /// Image length.
    pub len: u64,
    /// Valid inodes.
    pub inodes: Vec<InodeInfo>,
    /// Committed entries (up to each tail).
    pub entries: Vec<EntryInfo>,
    /// Entries with a valid commit mark past the tail of a tail page (staged by an
    /// append that had not moved the tail yet: crash states).
    pub staged: Vec<EntryInfo>,
    /// Write entries with a block: (ino, pgoff, block, npages).
    pub writes: Vec<(u64, u64, u64, u32)>,
    /// Extents in the saved free list (0 without a valid-looking one).
    pub freelist_n: u64,
    /// CPUs whose redo area holds a nonzero commit word.
    pub redo_live: Vec<u32>,
    /// Zone slots whose descriptor is not zero.
    pub descs: Vec<u64>,
}

/// Recomputes the commit word of the entry `b` (its whole `units*64` bytes): the tag
/// and unit count stay, the CRC covers bytes `[8, len)` as they are now.
pub fn reseal(b: &mut [u8]) {
    let old = format::get_u64(b, 0);
    let c = format::crc(&b[format::ENTRY_TYPE_OFF..]);
    format::put_u64(b, 0, (old & 0xffff_ffff_0000_0000) | c as u64);
}

impl Map {
    /// Maps `img`; `None` when its primary superblock does not decode.
    pub fn of(img: &[u8]) -> Option<Map> {
        let len = img.len() as u64;
        let geo = Geometry::decode(&img[..format::SB_SIZE], len).ok()?;
        let mut m = Map {
            geo,
            len,
            inodes: Vec::new(),
            entries: Vec::new(),
            staged: Vec::new(),
            writes: Vec::new(),
            freelist_n: 0,
            redo_live: Vec::new(),
            descs: Vec::new(),
        };
        for ino in 1..=geo.inodes() {
            let s = geo.inode_off(ino).get() as usize;
            let slot = &img[s..s + format::INODE_SIZE as usize];
            if format::get_u64(slot, 0) != 1 {
                continue;
            }
            let mut st = [0u8; format::INODE_SIZE as usize];
            st.copy_from_slice(slot);
            let Ok(kind) = format::decode_inode_static(&st, ino) else {
                continue;
            };
            let head = format::get_u64(slot, 8);
            let tail = format::get_u64(slot, 16);
            let mut info = InodeInfo {
                ino,
                kind,
                head,
                tail,
                pages: Vec::new(),
            };
            m.walk(img, &mut info);
            m.inodes.push(info);
        }
        let fl = geo.freelist_start * BLOCK;
        if format::get_u64(img, fl as usize) == format::FREELIST_MAGIC {
            m.freelist_n =
                format::get_u64(img, fl as usize + 8).min(format::freelist_capacity(&geo) as u64);
        }
        for cpu in 0..geo.cpus {
            if format::get_u64(img, geo.redo_off(cpu).get() as usize) != 0 {
                m.redo_live.push(cpu);
            }
        }
        for slot in 0..geo.zone_slots {
            let o = geo.desc_off(slot).get() as usize;
            if img[o..o + 16].iter().any(|&x| x != 0) {
                m.descs.push(slot);
            }
        }
        Some(m)
    }

    fn walk(&mut self, img: &[u8], info: &mut InodeInfo) {
        let geo = self.geo;
        let mut page = info.head;
        while geo.is_data_block(page) && !info.pages.contains(&page) && info.pages.len() < 4096 {
            info.pages.push(page);
            let p = page * BLOCK;
            let holds_tail = info.tail >= p && info.tail <= p + LOG_DATA;
            let end = if holds_tail { info.tail } else { p + LOG_DATA };
            let mut off = p;
            if holds_tail && info.tail.is_multiple_of(UNIT) {
                self.staged_after(img, info, info.tail, p + LOG_DATA);
            }
            while off + UNIT <= end {
                let w = format::get_u64(img, off as usize);
                match parse_commit(w) {
                    CommitState::Committed { units, .. } | CommitState::Follower { units, .. }
                        if off + units * UNIT <= end =>
                    {
                        let b = &img[off as usize..(off + units * UNIT) as usize];
                        let etype = b[format::ENTRY_TYPE_OFF];
                        if etype == format::ET_WRITE {
                            let blk = format::get_u64(b, format::WRITE_BLOCK_OFF);
                            if blk != 0 {
                                self.writes.push((
                                    info.ino,
                                    format::get_u64(b, format::WRITE_PGOFF_OFF),
                                    blk,
                                    format::get_u32(b, format::WRITE_NPAGES_OFF),
                                ));
                            }
                        }
                        self.entries.push(EntryInfo {
                            off,
                            units,
                            ino: info.ino,
                            dir: info.kind == FileKind::Directory,
                            etype,
                        });
                        off += units * UNIT;
                    }
                    _ => off += UNIT,
                }
            }
            if holds_tail {
                break;
            }
            page = format::get_u64(img, (p + format::LOG_NEXT_OFF) as usize);
        }
    }

    fn staged_after(&mut self, img: &[u8], info: &InodeInfo, from: u64, end: u64) {
        let mut off = from;
        while off + UNIT <= end {
            let w = format::get_u64(img, off as usize);
            match parse_commit(w) {
                CommitState::Committed { units, crc } | CommitState::Follower { units, crc }
                    if off + units * UNIT <= end
                        && format::verify_entry(
                            &img[off as usize..(off + units * UNIT) as usize],
                            crc,
                        ) =>
                {
                    self.staged.push(EntryInfo {
                        off,
                        units,
                        ino: info.ino,
                        dir: info.kind == FileKind::Directory,
                        etype: img[off as usize + format::ENTRY_TYPE_OFF],
                    });
                    off += units * UNIT;
                }
                _ => off += UNIT,
            }
        }
    }

    /// The log pages of every valid inode, with their owner.
    pub fn log_pages(&self) -> Vec<(u64, u64)> {
        self.inodes
            .iter()
            .flat_map(|i| i.pages.iter().map(move |&p| (i.ino, p)))
            .collect()
    }
}
