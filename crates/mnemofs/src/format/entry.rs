//! Log pages, log entries and commit words (docs/FORMAT.md §2.3–§2.5).
//!
//! Log page tail (the last 64 bytes of a log page):
//!
//! ```text
//!  off   size  field
//!     0  4032  entries, packed in 64-byte units
//!  4032     8  next    word: block of the next page (0: none)
//!  4040     8  owner   inode number that owns the log
//!  4048     8  magic   LOG_MAGIC
//!  4056    40  reserved
//! ```
//!
//! Entry header (every entry is `units × 64` bytes, 64-byte aligned):
//!
//! ```text
//!  off  size  field
//!    0     8  commit  commit word: tag 63..48 | units 47..32 | CRC-32 of [8, units*64)
//!    8     1  type    ET_WRITE, ET_SETATTR, ET_LINK, ET_DENTRY, ET_XATTR
//!    9     1  units
//!   10     2  group   entries in a concurrent group (in its leader), else 0 or 1
//!   12     4  reserved
//!   16     …  body
//! ```
//!
//! Bodies:
//!
//! ```text
//!  off  Write (1 unit)    SetAttr (2 units)  Link (1 unit)   Dentry (⌈(48+len)/64⌉ units)
//!   16  pgoff       u64   mode         u32   nlink      u32  ino         u64
//!   20                    uid          u32   ctime.nsec u32
//!   24  block       u64   gid          u32   ctime.sec  u64  cookie      u64
//!   28                    rdev         u32
//!   32  npages      u32   size         u64                   time.sec    u64
//!   36  mtime.nsec  u32
//!   40  size_after  u64   atime.sec    u64                   time.nsec   u32
//!   44                                                       name_len u8, op u8, d_type u8
//!   48  mtime.sec   u64   mtime.sec    u64                   name (name_len bytes)
//!   56                    ctime.sec    u64
//!   64                    atime.nsec   u32
//!   68                    mtime.nsec   u32
//!   72                    ctime.nsec   u32
//!   76                    flags        u32
//! ```

use super::bytes::{crc, get_u32, get_u64, put_u32, put_u64};
use super::layout::BLOCK;
use crate::types::{FileKind, Timespec};

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
/// The log-page magic.
pub const LOG_MAGIC: u64 = 0x4d4e_4c4f_4750_4731; // "1GPGOLNM"

/// Commit-word tag (top 16 bits).
const COMMIT_TAG: u64 = 0xC0DE;
/// Follower-mark tag (top 16 bits).
const FOLLOWER_TAG: u64 = 0xF011;
/// Commit word: the tag's lowest bit.
const WORD_TAG_SHIFT: u32 = 48;
/// Commit word: the unit count's lowest bit (16 bits wide).
const WORD_UNITS_SHIFT: u32 = 32;

/// Entry type: [`Entry::Write`].
pub const ET_WRITE: u8 = 1;
/// Entry type: [`Entry::SetAttr`].
pub const ET_SETATTR: u8 = 2;
/// Entry type: [`Entry::Link`].
pub const ET_LINK: u8 = 3;
/// Entry type: [`Entry::Dentry`].
pub const ET_DENTRY: u8 = 4;
/// Entry type: [`Entry::Xattr`].
pub const ET_XATTR: u8 = 5;

/// Xattr op: the attribute is set (created or replaced).
pub const XATTR_SET: u8 = 1;
/// Xattr op: the attribute is removed.
pub const XATTR_REMOVE: u8 = 2;
/// Xattr op (format version 9): more of the value of the [`XATTR_SET`] of the same
/// name just before it in the same commit; its bytes follow that entry's (and the
/// continuations' before it). A value longer than one entry holds is a SET and
/// continuations, committed together.
pub const XATTR_MORE: u8 = 3;
/// Xattr: offset of the name length, 1..=255 (u8).
pub const XATTR_NAME_LEN_OFF: usize = 16;
/// Xattr: offset of the op, [`XATTR_SET`] or [`XATTR_REMOVE`] (u8).
pub const XATTR_OP_OFF: usize = 17;
/// Xattr: offset of the value length (u16).
pub const XATTR_VALUE_LEN_OFF: usize = 18;
/// Xattr: offset of the inode's new ctime, nanoseconds (u32).
pub const XATTR_CTIME_NSEC_OFF: usize = 20;
/// Xattr: offset of the inode's new ctime, seconds (u64).
pub const XATTR_CTIME_SEC_OFF: usize = 24;
/// Xattr: offset of the name, followed by the value.
pub const XATTR_NAME_OFF: usize = 32;
/// The Xattr entry name that holds an inode's flags (`FS_IOC_SETFLAGS`: immutable,
/// append-only, noatime, …; [`crate::types::inode_flags`]) as a 4-byte
/// little-endian value (format version 8). Not an attribute users see or set.
pub const XATTR_FLAGS: &[u8] = b"system.mnemofs.flags";

/// Largest xattr value one entry holds with the longest name: what fits one log
/// page. The largest value of an image before version 9 (ext4 keeps an inode's
/// attributes within one 4 KiB block as well).
pub const XATTR_VALUE_MAX: usize = LOG_DATA as usize - XATTR_NAME_OFF - 255;
/// Largest xattr value (format version 9): Linux's `XATTR_SIZE_MAX`, in a SET and
/// [`XATTR_MORE`] continuations.
pub const XATTR_SIZE_MAX: usize = 64 << 10;

/// The Xattr entries that set `name` to `value`: one SET, then as many
/// [`XATTR_MORE`] continuations as the value needs, each entry filling a log page
/// (`LOG_DATA` bytes) at most. To be committed together, in this order.
pub fn xattr_set_entries(name: &[u8], value: &[u8], ctime: Timespec) -> Vec<Entry> {
    let room = (LOG_DATA as usize)
        .saturating_sub(XATTR_NAME_OFF.saturating_add(name.len()))
        .max(1);
    let mut parts = value.chunks(room);
    let first = parts.next().unwrap_or(&[]);
    let mut v = vec![Entry::Xattr {
        op: XATTR_SET,
        name: name.to_vec(),
        value: first.to_vec(),
        ctime,
    }];
    v.extend(parts.map(|p| Entry::Xattr {
        op: XATTR_MORE,
        name: name.to_vec(),
        value: p.to_vec(),
        ctime,
    }));
    v
}

/// Dentry op: the name is added.
pub const DENTRY_ADD: u8 = 1;
/// Dentry op: the name is removed.
pub const DENTRY_REMOVE: u8 = 2;

/// SetAttr flag: this setattr made the file smaller (fast GC must keep it).
pub const SETATTR_SHRINK: u32 = 1;

/// Bytes of a SetAttr entry (two units).
const SETATTR_BYTES: usize = 2 * UNIT as usize;

/// Largest file size in bytes (16 TiB); no entry names a page or size past it.
pub const MAX_FILE_SIZE: u64 = 1 << 44;
/// Pages of the largest file.
pub const MAX_FILE_PAGES: u64 = MAX_FILE_SIZE / BLOCK;
/// First readdir cookie a dentry may carry; 1 and 2 are "." and "..".
pub const DENTRY_FIRST_COOKIE: u64 = 3;

/// Header: offset of the commit word (u64).
pub const ENTRY_COMMIT_OFF: usize = 0;
/// Header: offset of the entry type (u8, `ET_*`).
pub const ENTRY_TYPE_OFF: usize = 8;
/// Header: offset of the entry size in units (u8).
pub const ENTRY_UNITS_OFF: usize = 9;
/// Header: offset of a group leader's group size (u16).
pub const ENTRY_GROUP_OFF: usize = 10;
/// Offset of the body, the first byte after the header.
pub const ENTRY_BODY_OFF: usize = 16;

/// Write: first file page (u64).
pub const WRITE_PGOFF_OFF: usize = 16;
/// Write: first data block, 0 for a hole (u64).
pub const WRITE_BLOCK_OFF: usize = 24;
/// Write: pages (u32).
pub const WRITE_NPAGES_OFF: usize = 32;
/// Write: mtime nanoseconds (u32).
pub const WRITE_MTIME_NSEC_OFF: usize = 36;
/// Write: file size after the entry (u64).
pub const WRITE_SIZE_AFTER_OFF: usize = 40;
/// Write: mtime seconds (u64).
pub const WRITE_MTIME_SEC_OFF: usize = 48;

/// SetAttr: full mode (u32).
pub const SETATTR_MODE_OFF: usize = 16;
/// SetAttr: uid (u32).
pub const SETATTR_UID_OFF: usize = 20;
/// SetAttr: gid (u32).
pub const SETATTR_GID_OFF: usize = 24;
/// SetAttr: rdev (u32).
pub const SETATTR_RDEV_OFF: usize = 28;
/// SetAttr: size (u64).
pub const SETATTR_SIZE_OFF: usize = 32;
/// SetAttr: atime seconds (u64).
pub const SETATTR_ATIME_SEC_OFF: usize = 40;
/// SetAttr: mtime seconds (u64).
pub const SETATTR_MTIME_SEC_OFF: usize = 48;
/// SetAttr: ctime seconds (u64).
pub const SETATTR_CTIME_SEC_OFF: usize = 56;
/// SetAttr: atime nanoseconds (u32).
pub const SETATTR_ATIME_NSEC_OFF: usize = 64;
/// SetAttr: mtime nanoseconds (u32).
pub const SETATTR_MTIME_NSEC_OFF: usize = 68;
/// SetAttr: ctime nanoseconds (u32).
pub const SETATTR_CTIME_NSEC_OFF: usize = 72;
/// SetAttr: flags (u32, [`SETATTR_SHRINK`]).
pub const SETATTR_FLAGS_OFF: usize = 76;

/// Link: link count (u32).
pub const LINK_NLINK_OFF: usize = 16;
/// Link: ctime nanoseconds (u32).
pub const LINK_CTIME_NSEC_OFF: usize = 20;
/// Link: ctime seconds (u64).
pub const LINK_CTIME_SEC_OFF: usize = 24;

/// Dentry: named inode (u64).
pub const DENTRY_INO_OFF: usize = 16;
/// Dentry: cookie, the name's readdir offset (u64).
pub const DENTRY_COOKIE_OFF: usize = 24;
/// Dentry: the directory's new mtime/ctime, seconds (u64).
pub const DENTRY_TIME_SEC_OFF: usize = 32;
/// Dentry: the directory's new mtime/ctime, nanoseconds (u32).
pub const DENTRY_TIME_NSEC_OFF: usize = 40;
/// Dentry: name length, 1..=255 (u8).
pub const DENTRY_NAME_LEN_OFF: usize = 44;
/// Dentry: op, [`DENTRY_ADD`] or [`DENTRY_REMOVE`] (u8).
pub const DENTRY_OP_OFF: usize = 45;
/// Dentry: `d_type` of the named inode (u8).
pub const DENTRY_DTYPE_OFF: usize = 46;
/// Dentry: the name bytes.
pub const DENTRY_NAME_OFF: usize = 48;

/// A decoded log entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// `npages` pages from `pgoff` now live in blocks `block..block+npages`
    /// (`block == 0`: the pages become holes).
    Write {
        /// First file page.
        pgoff: u64,
        /// First data block (0: hole punch).
        block: u64,
        /// Pages.
        npages: u32,
        /// File size after the entry.
        size_after: u64,
        /// New mtime (and ctime).
        mtime: Timespec,
    },
    /// Full attribute snapshot.
    SetAttr {
        /// Full mode (replay keeps the permission bits).
        mode: u32,
        /// Owner.
        uid: u32,
        /// Group.
        gid: u32,
        /// Device number of a device file.
        rdev: u32,
        /// File size.
        size: u64,
        /// Access time.
        atime: Timespec,
        /// Modification time.
        mtime: Timespec,
        /// Change time.
        ctime: Timespec,
        /// Flags ([`SETATTR_SHRINK`]).
        flags: u32,
    },
    /// New link count.
    Link {
        /// Link count.
        nlink: u32,
        /// New ctime.
        ctime: Timespec,
    },
    /// Extended attribute set or removed; `ctime` is the inode's new ctime.
    Xattr {
        /// [`XATTR_SET`] or [`XATTR_REMOVE`].
        op: u8,
        /// The full name (`user.x`, `trusted.x`, `security.x`, `system.posix_acl_*`).
        name: Vec<u8>,
        /// The value (empty for a removal).
        value: Vec<u8>,
        /// The inode's new ctime.
        ctime: Timespec,
    },
    /// Directory entry added or removed; `time` is the directory's new mtime/ctime.
    Dentry {
        /// [`DENTRY_ADD`] or [`DENTRY_REMOVE`].
        op: u8,
        /// Named inode.
        ino: u64,
        /// The name's readdir offset.
        cookie: u64,
        /// Kind of the named inode.
        kind: FileKind,
        /// The directory's new mtime and ctime.
        time: Timespec,
        /// The name (1..=255 bytes).
        name: Vec<u8>,
    },
}

/// Bytes of an entry encoded without allocating ([`Entry::encode`]).
const INLINE: usize = 2 * UNIT as usize;

/// An encoded entry body: on the stack when it has at most two units, else on the
/// heap. Dereferences to its bytes.
#[derive(Clone, Debug)]
pub struct Encoded {
    inline: [u8; INLINE],
    heap: Vec<u8>,
    len: usize,
}

impl std::ops::Deref for Encoded {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.len <= INLINE {
            &self.inline[..self.len]
        } else {
            &self.heap
        }
    }
}

impl std::ops::DerefMut for Encoded {
    fn deref_mut(&mut self) -> &mut [u8] {
        if self.len <= INLINE {
            &mut self.inline[..self.len]
        } else {
            &mut self.heap
        }
    }
}

impl Entry {
    /// Size in 64-byte units.
    pub fn units(&self) -> u64 {
        match self {
            Entry::Write { .. } | Entry::Link { .. } => 1,
            Entry::SetAttr { .. } => 2,
            Entry::Dentry { name, .. } => (name.len() as u64)
                .saturating_add(DENTRY_NAME_OFF as u64)
                .div_ceil(UNIT),
            Entry::Xattr { name, value, .. } => (name.len() as u64)
                .saturating_add(value.len() as u64)
                .saturating_add(XATTR_NAME_OFF as u64)
                .div_ceil(UNIT),
        }
    }

    /// Encodes the entry with a zero commit word. Entries of up to two units (every
    /// data write, link and attribute entry, short names) are encoded on the stack:
    /// no allocation on the write path.
    pub fn encode(&self) -> Encoded {
        let units = self.units();
        let len = units.saturating_mul(UNIT) as usize;
        let mut out = if len <= INLINE {
            Encoded {
                inline: [0u8; INLINE],
                heap: Vec::new(),
                len,
            }
        } else {
            Encoded {
                inline: [0u8; INLINE],
                heap: vec![0u8; len],
                len,
            }
        };
        let b: &mut [u8] = &mut out;
        b[ENTRY_UNITS_OFF] = units as u8;
        match self {
            Entry::Write {
                pgoff,
                block,
                npages,
                size_after,
                mtime,
            } => {
                b[ENTRY_TYPE_OFF] = ET_WRITE;
                put_u64(b, WRITE_PGOFF_OFF, *pgoff);
                put_u64(b, WRITE_BLOCK_OFF, *block);
                put_u32(b, WRITE_NPAGES_OFF, *npages);
                put_u32(b, WRITE_MTIME_NSEC_OFF, mtime.nsec);
                put_u64(b, WRITE_SIZE_AFTER_OFF, *size_after);
                put_u64(b, WRITE_MTIME_SEC_OFF, mtime.sec as u64);
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
                b[ENTRY_TYPE_OFF] = ET_SETATTR;
                put_u32(b, SETATTR_MODE_OFF, *mode);
                put_u32(b, SETATTR_UID_OFF, *uid);
                put_u32(b, SETATTR_GID_OFF, *gid);
                put_u32(b, SETATTR_RDEV_OFF, *rdev);
                put_u64(b, SETATTR_SIZE_OFF, *size);
                put_u64(b, SETATTR_ATIME_SEC_OFF, atime.sec as u64);
                put_u64(b, SETATTR_MTIME_SEC_OFF, mtime.sec as u64);
                put_u64(b, SETATTR_CTIME_SEC_OFF, ctime.sec as u64);
                put_u32(b, SETATTR_ATIME_NSEC_OFF, atime.nsec);
                put_u32(b, SETATTR_MTIME_NSEC_OFF, mtime.nsec);
                put_u32(b, SETATTR_CTIME_NSEC_OFF, ctime.nsec);
                put_u32(b, SETATTR_FLAGS_OFF, *flags);
            }
            Entry::Link { nlink, ctime } => {
                b[ENTRY_TYPE_OFF] = ET_LINK;
                put_u32(b, LINK_NLINK_OFF, *nlink);
                put_u32(b, LINK_CTIME_NSEC_OFF, ctime.nsec);
                put_u64(b, LINK_CTIME_SEC_OFF, ctime.sec as u64);
            }
            Entry::Dentry {
                op,
                ino,
                cookie,
                kind,
                time,
                name,
            } => {
                b[ENTRY_TYPE_OFF] = ET_DENTRY;
                put_u64(b, DENTRY_INO_OFF, *ino);
                put_u64(b, DENTRY_COOKIE_OFF, *cookie);
                put_u64(b, DENTRY_TIME_SEC_OFF, time.sec as u64);
                put_u32(b, DENTRY_TIME_NSEC_OFF, time.nsec);
                b[DENTRY_NAME_LEN_OFF] = name.len() as u8;
                b[DENTRY_OP_OFF] = *op;
                b[DENTRY_DTYPE_OFF] = kind.dirent_type();
                b[DENTRY_NAME_OFF..][..name.len()].copy_from_slice(name);
            }
            Entry::Xattr {
                op,
                name,
                value,
                ctime,
            } => {
                b[ENTRY_TYPE_OFF] = ET_XATTR;
                b[XATTR_NAME_LEN_OFF] = name.len() as u8;
                b[XATTR_OP_OFF] = *op;
                b[XATTR_VALUE_LEN_OFF..][..2].copy_from_slice(&(value.len() as u16).to_le_bytes());
                put_u32(b, XATTR_CTIME_NSEC_OFF, ctime.nsec);
                put_u64(b, XATTR_CTIME_SEC_OFF, ctime.sec as u64);
                b[XATTR_NAME_OFF..][..name.len()].copy_from_slice(name);
                b[XATTR_NAME_OFF..][name.len()..][..value.len()].copy_from_slice(value);
            }
        }
        out
    }

    /// Decodes an entry body (`b` starts at the entry's commit word) and checks every
    /// field that does not depend on the image ([`Entry::check`]).
    pub fn decode(b: &[u8]) -> std::result::Result<Entry, String> {
        let e = Self::decode_fields(b)?;
        e.check()?;
        Ok(e)
    }

    /// Checks the fields of a decoded entry against the format's limits: pages and
    /// sizes within [`MAX_FILE_SIZE`] (with checked arithmetic), nanoseconds below one
    /// second, known flags, and names a directory can hold (no `/` or NUL, not `.`
    /// or `..`). Checks that need the image (block numbers, inode numbers, the
    /// owner's kind) are recovery's.
    pub fn check(&self) -> std::result::Result<(), String> {
        let time = |what: &str, t: &Timespec| {
            if t.nsec >= 1_000_000_000 {
                Err(format!("{what} has {} nanoseconds", t.nsec))
            } else {
                Ok(())
            }
        };
        match self {
            Entry::Write {
                pgoff,
                npages,
                size_after,
                mtime,
                ..
            } => {
                if *npages == 0 {
                    return Err("write of zero pages".into());
                }
                if pgoff
                    .checked_add(*npages as u64)
                    .is_none_or(|end| end > MAX_FILE_PAGES)
                {
                    return Err(format!(
                        "write covers pages {pgoff}+{npages}, past the largest file ({MAX_FILE_PAGES} pages)"
                    ));
                }
                if *size_after > MAX_FILE_SIZE {
                    return Err(format!(
                        "write sets size {size_after}, past the largest file ({MAX_FILE_SIZE} bytes)"
                    ));
                }
                time("write mtime", mtime)
            }
            Entry::SetAttr {
                size,
                atime,
                mtime,
                ctime,
                flags,
                ..
            } => {
                if *size > MAX_FILE_SIZE {
                    return Err(format!(
                        "setattr sets size {size}, past the largest file ({MAX_FILE_SIZE} bytes)"
                    ));
                }
                if flags & !SETATTR_SHRINK != 0 {
                    return Err(format!("setattr has unknown flags {flags:#x}"));
                }
                time("setattr atime", atime)?;
                time("setattr mtime", mtime)?;
                time("setattr ctime", ctime)
            }
            Entry::Link { ctime, .. } => time("link ctime", ctime),
            Entry::Xattr {
                op,
                name,
                value,
                ctime,
            } => {
                if *op == XATTR_REMOVE && !value.is_empty() {
                    return Err("xattr removal carries a value".into());
                }
                let len = XATTR_NAME_OFF
                    .saturating_add(name.len())
                    .saturating_add(value.len());
                if len > LOG_DATA as usize {
                    return Err(format!("xattr value of {} bytes", value.len()));
                }
                if name.contains(&0) {
                    return Err("xattr name holds NUL".into());
                }
                if xattr_namespace(name).is_none() {
                    return Err("xattr name in no known namespace".into());
                }
                if *op == XATTR_MORE && (value.is_empty() || name.as_slice() == XATTR_FLAGS) {
                    return Err("empty or misplaced xattr continuation".into());
                }
                if name.as_slice() == XATTR_FLAGS && *op != XATTR_REMOVE && value.len() != 4 {
                    return Err(format!("inode flags of {} bytes", value.len()));
                }
                time("xattr ctime", ctime)
            }
            Entry::Dentry {
                cookie,
                time: t,
                name,
                ..
            } => {
                if name.contains(&b'/') || name.contains(&0) {
                    return Err("dentry name holds '/' or NUL".into());
                }
                if name == b"." || name == b".." {
                    return Err("dentry name is '.' or '..'".into());
                }
                if *cookie < DENTRY_FIRST_COOKIE || *cookie == u64::MAX {
                    return Err(format!("dentry cookie {cookie} out of range"));
                }
                time("dentry time", t)
            }
        }
    }

    fn decode_fields(b: &[u8]) -> std::result::Result<Entry, String> {
        if b.len() < UNIT as usize {
            return Err("short entry".into());
        }
        let ts = |s: usize, n: usize| Timespec {
            sec: get_u64(b, s) as i64,
            nsec: get_u32(b, n),
        };
        match b[ENTRY_TYPE_OFF] {
            ET_WRITE => Ok(Entry::Write {
                pgoff: get_u64(b, WRITE_PGOFF_OFF),
                block: get_u64(b, WRITE_BLOCK_OFF),
                npages: get_u32(b, WRITE_NPAGES_OFF),
                size_after: get_u64(b, WRITE_SIZE_AFTER_OFF),
                mtime: ts(WRITE_MTIME_SEC_OFF, WRITE_MTIME_NSEC_OFF),
            }),
            ET_SETATTR if b.len() >= SETATTR_BYTES => Ok(Entry::SetAttr {
                mode: get_u32(b, SETATTR_MODE_OFF),
                uid: get_u32(b, SETATTR_UID_OFF),
                gid: get_u32(b, SETATTR_GID_OFF),
                rdev: get_u32(b, SETATTR_RDEV_OFF),
                size: get_u64(b, SETATTR_SIZE_OFF),
                atime: ts(SETATTR_ATIME_SEC_OFF, SETATTR_ATIME_NSEC_OFF),
                mtime: ts(SETATTR_MTIME_SEC_OFF, SETATTR_MTIME_NSEC_OFF),
                ctime: ts(SETATTR_CTIME_SEC_OFF, SETATTR_CTIME_NSEC_OFF),
                flags: get_u32(b, SETATTR_FLAGS_OFF),
            }),
            ET_LINK => Ok(Entry::Link {
                nlink: get_u32(b, LINK_NLINK_OFF),
                ctime: ts(LINK_CTIME_SEC_OFF, LINK_CTIME_NSEC_OFF),
            }),
            ET_DENTRY => {
                let len = b[DENTRY_NAME_LEN_OFF] as usize;
                if len == 0 || b.len().saturating_sub(DENTRY_NAME_OFF) < len {
                    return Err("dentry name length out of range".into());
                }
                let op = b[DENTRY_OP_OFF];
                if op != DENTRY_ADD && op != DENTRY_REMOVE {
                    return Err(format!("bad dentry op {op}"));
                }
                let kind = kind_from_dt(b[DENTRY_DTYPE_OFF]).ok_or("bad dentry file type")?;
                Ok(Entry::Dentry {
                    op,
                    ino: get_u64(b, DENTRY_INO_OFF),
                    cookie: get_u64(b, DENTRY_COOKIE_OFF),
                    kind,
                    time: ts(DENTRY_TIME_SEC_OFF, DENTRY_TIME_NSEC_OFF),
                    name: b[DENTRY_NAME_OFF..][..len].to_vec(),
                })
            }
            ET_XATTR => {
                let nlen = b[XATTR_NAME_LEN_OFF] as usize;
                let vlen = u16::from_le_bytes([b[XATTR_VALUE_LEN_OFF], b[XATTR_VALUE_LEN_OFF + 1]])
                    as usize;
                let room = b.len().saturating_sub(XATTR_NAME_OFF);
                if nlen == 0 || nlen.saturating_add(vlen) > room {
                    return Err("xattr name or value length out of range".into());
                }
                let op = b[XATTR_OP_OFF];
                if op != XATTR_SET && op != XATTR_REMOVE && op != XATTR_MORE {
                    return Err(format!("bad xattr op {op}"));
                }
                let body = &b[XATTR_NAME_OFF..];
                Ok(Entry::Xattr {
                    op,
                    name: body[..nlen].to_vec(),
                    value: body[nlen..][..vlen].to_vec(),
                    ctime: ts(XATTR_CTIME_SEC_OFF, XATTR_CTIME_NSEC_OFF),
                })
            }
            t => Err(format!("unknown entry type {t}")),
        }
    }
}

/// The namespace of an extended attribute's name (`user.`, `trusted.`, `security.`,
/// or the two POSIX ACL names), with something after the prefix.
pub fn xattr_namespace(name: &[u8]) -> Option<&'static str> {
    const ACLS: [&[u8]; 2] = [b"system.posix_acl_access", b"system.posix_acl_default"];
    if ACLS.contains(&name) || name == XATTR_FLAGS {
        return Some("system");
    }
    ["user.", "trusted.", "security."]
        .into_iter()
        .find(|p| name.len() > p.len() && name.starts_with(p.as_bytes()))
        .map(|p| p.trim_end_matches('.'))
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

/// A commit or follower word with tag `tag` for the encoded entry `body`.
fn mark_word(tag: u64, body: &[u8]) -> u64 {
    let units = (body.len() as u64) / UNIT;
    (tag << WORD_TAG_SHIFT) | (units << WORD_UNITS_SHIFT) | crc(&body[ENTRY_TYPE_OFF..]) as u64
}

/// The commit word for an encoded entry: tag, units and the CRC of bytes 8.. .
pub fn commit_word(body: &[u8]) -> u64 {
    mark_word(COMMIT_TAG, body)
}

/// The mark of a follower in a concurrent group: like a commit word, with the
/// follower tag. It commits nothing by itself; the group's leader does.
pub fn follower_word(body: &[u8]) -> u64 {
    mark_word(FOLLOWER_TAG, body)
}

/// Group size stored in a leader's header (bytes 10..12); 0 or 1: not a group.
pub fn group_size(body: &[u8]) -> u16 {
    u16::from_le_bytes([body[ENTRY_GROUP_OFF], body[ENTRY_GROUP_OFF + 1]])
}

/// What a commit word says about the entry it heads.
#[derive(Debug, PartialEq, Eq)]
pub enum CommitState {
    /// No commit mark: the entry was never committed (skip one unit).
    Uncommitted,
    /// A commit mark for an entry of this many units.
    Committed {
        /// Entry size in units.
        units: u64,
        /// CRC-32 of the entry's bytes `[8, units*64)`.
        crc: u32,
    },
    /// A follower of a concurrent group: committed only if its leader is.
    Follower {
        /// Entry size in units.
        units: u64,
        /// CRC-32 of the entry's bytes `[8, units*64)`.
        crc: u32,
    },
    /// Not zero, not a commit mark: corruption.
    Garbage,
}

/// Parses a commit word (the tag, and units in `1..=LOG_DATA / UNIT`).
pub fn parse_commit(word: u64) -> CommitState {
    if word == 0 {
        return CommitState::Uncommitted;
    }
    let units = (word >> WORD_UNITS_SHIFT) & 0xffff;
    let tag = word >> WORD_TAG_SHIFT;
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

/// Whether the CRC of the entry's bytes `[8, len)` is `crc_expected`.
pub fn verify_entry(body: &[u8], crc_expected: u32) -> bool {
    crc(&body[ENTRY_TYPE_OFF..]) == crc_expected
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // Tests build their own values.
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
    fn garbage_commit_words_are_not_commits() {
        assert_eq!(parse_commit(0), CommitState::Uncommitted);
        assert_eq!(parse_commit(0xdead_beef), CommitState::Garbage);
        assert!(crate::format::parse_journal_word(12345).is_err());
        assert_eq!(crate::format::parse_journal_word(0).unwrap(), None);
    }

    #[test]
    fn entry_bytes_follow_format_md() {
        // Distinct field values, so that a swapped offset shows.
        let t = |sec: i64, nsec: u32| Timespec { sec, nsec };
        let w = Entry::Write {
            pgoff: 0x11,
            block: 0x22,
            npages: 0x33,
            size_after: 0x44,
            mtime: t(0x55, 0x66),
        }
        .encode();
        assert_eq!((w.len(), w[8], w[9]), (64, 1, 1));
        assert_eq!(get_u64(&w, 0), 0);
        assert_eq!(get_u64(&w, 16), 0x11);
        assert_eq!(get_u64(&w, 24), 0x22);
        assert_eq!(get_u32(&w, 32), 0x33);
        assert_eq!(get_u32(&w, 36), 0x66);
        assert_eq!(get_u64(&w, 40), 0x44);
        assert_eq!(get_u64(&w, 48), 0x55);
        assert!(w[56..].iter().all(|&x| x == 0));

        let s = Entry::SetAttr {
            mode: 1,
            uid: 2,
            gid: 3,
            rdev: 4,
            size: 5,
            atime: t(6, 7),
            mtime: t(8, 9),
            ctime: t(10, 11),
            flags: 12,
        }
        .encode();
        assert_eq!((s.len(), s[8], s[9]), (128, 2, 2));
        let u32s = [
            (16, 1),
            (20, 2),
            (24, 3),
            (28, 4),
            (64, 7),
            (68, 9),
            (72, 11),
            (76, 12),
        ];
        for (off, v) in u32s {
            assert_eq!(get_u32(&s, off), v, "offset {off}");
        }
        for (off, v) in [(32, 5), (40, 6), (48, 8), (56, 10)] {
            assert_eq!(get_u64(&s, off), v, "offset {off}");
        }
        assert!(s[80..].iter().all(|&x| x == 0));

        let l = Entry::Link {
            nlink: 13,
            ctime: t(14, 15),
        }
        .encode();
        assert_eq!((l.len(), l[8], l[9]), (64, 3, 1));
        assert_eq!(get_u32(&l, 16), 13);
        assert_eq!(get_u32(&l, 20), 15);
        assert_eq!(get_u64(&l, 24), 14);
        assert!(l[32..].iter().all(|&x| x == 0));

        let d = Entry::Dentry {
            op: DENTRY_REMOVE,
            ino: 16,
            cookie: 17,
            kind: FileKind::Directory,
            time: t(18, 19),
            name: b"seventeen bytes!!".to_vec(),
        }
        .encode();
        // 48 + 17 bytes: two units.
        assert_eq!((d.len(), d[8], d[9]), (128, 4, 2));
        assert_eq!(get_u64(&d, 16), 16);
        assert_eq!(get_u64(&d, 24), 17);
        assert_eq!(get_u64(&d, 32), 18);
        assert_eq!(get_u32(&d, 40), 19);
        assert_eq!((d[44], d[45], d[46], d[47]), (17, 2, 4, 0));
        assert_eq!(&d[48..65], b"seventeen bytes!!");
        assert!(d[65..].iter().all(|&x| x == 0));
    }

    #[test]
    fn commit_and_follower_words() {
        let mut b = Entry::Link {
            nlink: 1,
            ctime: Timespec { sec: 1, nsec: 2 },
        }
        .encode();
        let c = commit_word(&b);
        assert_eq!(c >> 48, 0xC0DE);
        assert_eq!((c >> 32) & 0xffff, 1);
        assert_eq!(c as u32, crc(&b[8..]));
        let f = follower_word(&b);
        assert_eq!(f >> 48, 0xF011);
        assert_eq!(
            parse_commit(f),
            CommitState::Follower {
                units: 1,
                crc: c as u32
            }
        );
        // Units outside 1..=63 are garbage, whatever the tag.
        assert_eq!(
            parse_commit((0xC0DE << 48) | (64 << 32)),
            CommitState::Garbage
        );
        assert_eq!(parse_commit(0xC0DE << 48), CommitState::Garbage);
        assert!(matches!(
            parse_commit((0xC0DE << 48) | (63 << 32)),
            CommitState::Committed { units: 63, .. }
        ));
        // The group size is covered by the CRC.
        assert_eq!(group_size(&b), 0);
        b[10] = 3;
        assert_eq!(group_size(&b), 3);
        assert!(!verify_entry(&b, c as u32));
    }

    #[test]
    fn bad_entries_are_refused() {
        assert!(Entry::decode(&[0u8; 63]).is_err());
        let mut b = [0u8; 64];
        b[8] = 9;
        assert!(Entry::decode(&b).is_err());
        // A SetAttr needs two units.
        b[8] = ET_SETATTR;
        assert!(Entry::decode(&b).is_err());
        let d = Entry::Dentry {
            op: DENTRY_ADD,
            ino: 2,
            cookie: 3,
            kind: FileKind::Regular,
            time: Timespec { sec: 0, nsec: 0 },
            name: b"a".to_vec(),
        }
        .encode();
        for (off, v) in [(44, 0), (44, 17), (45, 3), (46, 5)] {
            let mut bad = d.clone();
            bad[off] = v;
            assert!(Entry::decode(&bad).is_err(), "byte {off} = {v}");
        }
    }
}
