//! Mutations of a valid image: bit flips and random words weighted toward metadata,
//! and structure-aware edits of single fields with the checksums recomputed, so that
//! the edit reaches the code that interprets the field instead of being stopped by a
//! CRC. Every mutation returns a printable description (structure, location, field,
//! old → new).

use super::map::{reseal, Map};
use mnemofs::format::{self, Geometry, BLOCK, LOG_DATA, UNIT};
use mnemofs::FileKind;
use rand::rngs::StdRng;
use rand::Rng;

/// A PM region worth mutating, with a name for the description.
struct Region {
    start: u64,
    len: u64,
    what: String,
}

fn regions(m: &Map) -> Vec<Region> {
    let g = &m.geo;
    let r = |start: u64, len: u64, what: String| Region { start, len, what };
    let mut v = vec![
        r(0, format::SB_SIZE as u64, "superblock".into()),
        r(BLOCK, format::SB_SIZE as u64, "superblock replica".into()),
        r(format::SB_STATE_OFF, 8, "state word".into()),
        r(
            g.inode_table_start * BLOCK,
            g.inode_table_blocks * BLOCK,
            "inode table".into(),
        ),
        r(
            g.freelist_start * BLOCK,
            64 + 16 * m.freelist_n.max(1),
            "saved free list".into(),
        ),
    ];
    for c in 0..g.cpus {
        v.push(r(
            g.journal_off(c).get(),
            64 + 16 * 4,
            format!("journal of cpu {c}"),
        ));
        v.push(r(g.redo_off(c).get(), 128, format!("redo area of cpu {c}")));
    }
    for i in &m.inodes {
        v.push(r(
            g.inode_off(i.ino).get(),
            format::INODE_SIZE,
            format!("inode slot {}", i.ino),
        ));
        v.push(r(
            g.inode_off(i.ino).get(),
            format::INODE_SIZE,
            format!("inode slot {}", i.ino),
        ));
        for &p in &i.pages {
            v.push(r(
                p * BLOCK,
                LOG_DATA,
                format!("log page {p} of inode {}", i.ino),
            ));
            v.push(r(
                p * BLOCK + LOG_DATA,
                24,
                format!("log page {p} header of inode {}", i.ino),
            ));
        }
    }
    for &s in m.descs.iter().take(16) {
        v.push(r(g.desc_off(s).get(), 16, format!("LAWN descriptor {s}")));
    }
    if g.zone_slots > 0 {
        v.push(r(
            g.desc_start * BLOCK,
            g.zone_slots * 16,
            "LAWN descriptor table".into(),
        ));
    }
    if g.zone_chunks > 0 {
        v.push(r(
            g.chunk_table_start * BLOCK,
            g.zone_chunks as u64 * 8,
            "LAWN chunk table".into(),
        ));
    }
    v
}

/// Special values for a word of `m`'s image (`old`: the current value).
fn special(rng: &mut StdRng, m: &Map, old: u64) -> u64 {
    let g = &m.geo;
    let pages = m.log_pages();
    match rng.random_range(0..20) {
        0 => 0,
        1 => 1,
        2 => u32::MAX as u64,
        3 => i64::MAX as u64,
        4 => u64::MAX,
        5 => m.len,
        6 => m.len / BLOCK,
        7 => g.data_start,
        8 => g.total_blocks - 1,
        9 => g.total_blocks,
        10 => rng.random_range(g.data_start..g.total_blocks),
        11 if !pages.is_empty() => pages[rng.random_range(0..pages.len())].1 * BLOCK,
        12 => g.inode_off(rng.random_range(1..=g.inodes())).get(),
        13 => old.wrapping_add(1),
        14 => old.wrapping_sub(1),
        15 => old ^ (1u64 << rng.random_range(0..64)),
        16 => rng.random_range(0..g.data_start),
        17 => 1u64 << rng.random_range(0..64),
        18 if !pages.is_empty() => pages[rng.random_range(0..pages.len())].1,
        _ => rng.random(),
    }
}

fn special32(rng: &mut StdRng, old: u32) -> u32 {
    match rng.random_range(0..10) {
        0 => 0,
        1 => 1,
        2 => u32::MAX,
        3 => u32::MAX - 1,
        4 => 1 << 31,
        5 => old.wrapping_add(1),
        6 => old.wrapping_sub(1),
        7 => old ^ (1 << rng.random_range(0..32)),
        8 => rng.random_range(2..300),
        _ => rng.random(),
    }
}

fn special8(rng: &mut StdRng, old: u8) -> u8 {
    match rng.random_range(0..8) {
        0 => 0,
        1 => 255,
        2..=4 => rng.random_range(1..=12),
        5 => old.wrapping_add(1),
        6 => old.wrapping_sub(1),
        _ => rng.random(),
    }
}

/// Width of a field in bytes.
#[derive(Clone, Copy)]
enum W {
    B1,
    B2,
    B4,
    B8,
}

fn get(b: &[u8], off: usize, w: W) -> u64 {
    match w {
        W::B1 => b[off] as u64,
        W::B2 => u16::from_le_bytes([b[off], b[off + 1]]) as u64,
        W::B4 => format::get_u32(b, off) as u64,
        W::B8 => format::get_u64(b, off),
    }
}

fn put(b: &mut [u8], off: usize, w: W, v: u64) {
    match w {
        W::B1 => b[off] = v as u8,
        W::B2 => b[off..off + 2].copy_from_slice(&(v as u16).to_le_bytes()),
        W::B4 => format::put_u32(b, off, v as u32),
        W::B8 => format::put_u64(b, off, v),
    }
}

/// `new`, or `old` with its lowest bit flipped when the pick happened to be `old`
/// (an edit that writes the same value would be no mutation at all).
fn differ(new: u64, old: u64) -> u64 {
    if new == old {
        old ^ 1
    } else {
        new
    }
}

fn value(rng: &mut StdRng, m: &Map, w: W, old: u64) -> u64 {
    match w {
        W::B1 => special8(rng, old as u8) as u64,
        W::B2 => match rng.random_range(0..5) {
            0 => 0,
            1 => 0xffff,
            2 => rng.random_range(2..8),
            3 => old.wrapping_add(1) & 0xffff,
            _ => rng.random::<u16>() as u64,
        },
        W::B4 => special32(rng, old as u32) as u64,
        W::B8 => special(rng, m, old),
    }
}

fn pick<'a, T>(rng: &mut StdRng, v: &'a [T]) -> Option<&'a T> {
    if v.is_empty() {
        None
    } else {
        Some(&v[rng.random_range(0..v.len())])
    }
}

/// Applies one mutation to `img` (mapped, before any mutation, as `m`) and describes
/// it.
pub fn mutate(img: &mut [u8], m: &Map, rng: &mut StdRng) -> String {
    let kind = rng.random_range(0..100);
    let r = match kind {
        0..=14 => Some(bit_flips(img, m, rng)),
        15..=26 => Some(random_word(img, m, rng)),
        27..=33 => Some(superblock(img, m, rng)),
        34..=35 => Some(state_word(img, rng)),
        36..=42 => inode_words(img, m, rng),
        43..=46 => inode_static(img, m, rng),
        47..=53 => page_header(img, m, rng),
        54..=67 => entry_field(img, m, rng),
        68..=72 => commit_mark(img, m, rng),
        73..=78 => Some(journal(img, m, rng)),
        79..=83 => freelist(img, m, rng),
        84..=88 => Some(redo(img, m, rng)),
        89..=93 => lawn(img, m, rng),
        _ => hostile(img, m, rng),
    };
    // A structure the base image does not have: flip bits instead.
    r.unwrap_or_else(|| bit_flips(img, m, rng))
}

fn bit_flips(img: &mut [u8], m: &Map, rng: &mut StdRng) -> String {
    let regs = regions(m);
    let whole = rng.random_range(0..10) == 0;
    let (start, len, what) = if whole {
        (0, img.len() as u64, "image".to_string())
    } else {
        let r = &regs[rng.random_range(0..regs.len())];
        (r.start, r.len.max(1), r.what.clone())
    };
    let n = rng.random_range(1..=8);
    let mut bits = Vec::new();
    for _ in 0..n {
        let off = start + rng.random_range(0..len);
        let bit = rng.random_range(0..8);
        img[off as usize] ^= 1 << bit;
        bits.push(format!("{off:#x}.{bit}"));
    }
    format!("bit flips in {what}: {}", bits.join(" "))
}

fn random_word(img: &mut [u8], m: &Map, rng: &mut StdRng) -> String {
    let regs = regions(m);
    let r = &regs[rng.random_range(0..regs.len())];
    let off = (r.start + rng.random_range(0..r.len.max(8))) & !7;
    let off = off.min(img.len() as u64 - 8) as usize;
    let old = format::get_u64(img, off);
    let new = differ(special(rng, m, old), old);
    format::put_u64(img, off, new);
    format!("word at {off:#x} in {}: {old:#x} -> {new:#x}", r.what)
}

const SB_FIELDS: &[(&str, usize, W)] = &[
    ("magic", format::SB_MAGIC_OFF, W::B8),
    ("version", format::SB_VERSION_OFF, W::B4),
    ("block_size", format::SB_BLOCK_SIZE_OFF, W::B4),
    ("total_blocks", format::SB_TOTAL_BLOCKS_OFF, W::B8),
    ("cpus", format::SB_CPUS_OFF, W::B4),
    ("features", format::SB_FEATURES_OFF, W::B4),
    ("inode_count", format::SB_INODE_COUNT_OFF, W::B8),
    ("journal_start", format::SB_JOURNAL_START_OFF, W::B8),
    ("freelist_start", format::SB_FREELIST_START_OFF, W::B8),
    ("freelist_blocks", format::SB_FREELIST_BLOCKS_OFF, W::B8),
    ("inode_table_start", format::SB_INODE_TABLE_START_OFF, W::B8),
    (
        "inode_table_blocks",
        format::SB_INODE_TABLE_BLOCKS_OFF,
        W::B8,
    ),
    ("data_start", format::SB_DATA_START_OFF, W::B8),
    ("created", format::SB_CREATED_OFF, W::B8),
    ("zone_slots", format::SB_ZONE_SLOTS_OFF, W::B8),
    ("slot_size", format::SB_SLOT_SIZE_OFF, W::B4),
    ("zone_chunk_blocks", format::SB_ZONE_CHUNK_BLOCKS_OFF, W::B4),
    ("zone_chunks", format::SB_ZONE_CHUNKS_OFF, W::B4),
];

/// A geometry that passes the superblock's consistency checks but does not match the
/// image (another CPU count, inode count or zone), encoded whole.
fn consistent_geometry(rng: &mut StdRng, m: &Map) -> Geometry {
    let g = m.geo;
    let cpus = [1, 2, 3, 4, 64][rng.random_range(0..5)];
    let inodes = [16, 32, 64, 128, 1024, 4096][rng.random_range(0..6)];
    let zone = format::ZoneParams {
        percent: [0, 3, 10, 50][rng.random_range(0..4)],
        slot_size: [64, 128, 2048][rng.random_range(0..3)],
    };
    let size = [m.len, m.len * 2, 64 << 20][rng.random_range(0..3)];
    match Geometry::compute_zoned(size, cpus, inodes, 0, zone) {
        Ok(mut x) => {
            x.total_blocks = x.total_blocks.min(m.len / BLOCK);
            if x.data_start >= x.total_blocks {
                x.total_blocks = g.total_blocks;
            }
            x.created = g.created;
            x
        }
        Err(_) => g,
    }
}

fn superblock(img: &mut [u8], m: &Map, rng: &mut StdRng) -> String {
    let which = match rng.random_range(0..5) {
        0..=2 => vec![0usize],
        3 => vec![BLOCK as usize],
        _ => vec![0, BLOCK as usize],
    };
    let whole = rng.random_range(0..6) == 0;
    let (f, fo, w) = SB_FIELDS[rng.random_range(0..SB_FIELDS.len())];
    let new_geo = whole.then(|| consistent_geometry(rng, m));
    let mut desc = String::new();
    for (k, &base) in which.iter().enumerate() {
        let b = &mut img[base..base + format::SB_SIZE];
        let copy = if base == 0 { "primary" } else { "replica" };
        if let Some(gg) = &new_geo {
            let enc = gg.encode();
            b.copy_from_slice(&enc);
            desc = format!(
                "superblock {copy}: whole consistent geometry cpus {} inodes {} zone_slots {} slot_size {} total_blocks {} data_start {} (crc recomputed)",
                gg.cpus, gg.inode_count, gg.zone_slots, gg.slot_size, gg.total_blocks, gg.data_start
            );
            continue;
        }
        let old = get(b, fo, w);
        let new = if k == 0 {
            value(rng, m, w, old)
        } else {
            get(&img[0..], fo, w)
        };
        let b = &mut img[base..base + format::SB_SIZE];
        put(b, fo, w, new);
        let c = format::crc(&b[..format::SB_CSUM_LEN]);
        format::put_u32(b, format::SB_CSUM_OFF, c);
        desc += &format!("superblock {copy} {f}: {old:#x} -> {new:#x} (crc recomputed); ");
    }
    desc
}

fn state_word(img: &mut [u8], rng: &mut StdRng) -> String {
    let off = format::SB_STATE_OFF as usize;
    let old = format::get_u64(img, off);
    let new = match rng.random_range(0..3) {
        0 => format::STATE_CLEAN,
        1 => format::STATE_DIRTY,
        _ => rng.random(),
    };
    let new = differ(new, old);
    format::put_u64(img, off, new);
    format!("state word: {old:#x} -> {new:#x}")
}

fn inode_words(img: &mut [u8], m: &Map, rng: &mut StdRng) -> Option<String> {
    let g = &m.geo;
    // Mostly slots in use; sometimes any slot (a free slot made valid).
    let ino = if rng.random_range(0..5) == 0 || m.inodes.is_empty() {
        rng.random_range(1..=g.inodes())
    } else {
        pick(rng, &m.inodes)?.ino
    };
    let info = m.inodes.iter().find(|i| i.ino == ino);
    let s = g.inode_off(ino).get() as usize;
    let (field, fo) =
        [("valid", 0usize), ("log_head", 8), ("log_tail", 16)][rng.random_range(0..3)];
    let old = format::get_u64(img, s + fo);
    let pages = m.log_pages();
    let new = match (field, rng.random_range(0..4)) {
        ("valid", 0) => 0,
        ("valid", 1) => 1,
        ("valid", _) => special(rng, m, old),
        ("log_head", 0) if !pages.is_empty() => pick(rng, &pages)?.1,
        ("log_head", 1) => info.and_then(|i| i.pages.last().copied()).unwrap_or(1),
        ("log_head", _) => special(rng, m, old),
        ("log_tail", 0) => old.wrapping_add(UNIT * rng.random_range(1..4)),
        ("log_tail", 1) => old.wrapping_sub(UNIT * rng.random_range(1..4)),
        ("log_tail", 2) => match info.and_then(|i| pick(rng, &i.pages).copied()) {
            Some(p) => p * BLOCK + [0, LOG_DATA, LOG_DATA + 8, BLOCK, 1][rng.random_range(0..5)],
            None => special(rng, m, old),
        },
        _ => special(rng, m, old),
    };
    let new = differ(new, old);
    format::put_u64(img, s + fo, new);
    Some(format!("inode slot {ino} {field}: {old:#x} -> {new:#x}"))
}

fn inode_static(img: &mut [u8], m: &Map, rng: &mut StdRng) -> Option<String> {
    let g = &m.geo;
    let info = pick(rng, &m.inodes)?;
    let s = g.inode_off(info.ino).get() as usize;
    let b = &mut img[s..s + format::INODE_SIZE as usize];
    let (desc, ok) = match rng.random_range(0..5) {
        0 | 1 => {
            let old = format::get_u64(b, format::INO_NUM_OFF);
            let new = match rng.random_range(0..3) {
                0 => special(rng, m, old),
                _ => rng.random_range(1..=g.inodes()),
            };
            format::put_u64(b, format::INO_NUM_OFF, new);
            (
                format!("inode slot {} static ino: {old} -> {new}", info.ino),
                true,
            )
        }
        2 => {
            // Any generation is valid: the image must mount and check the same.
            let old = format::get_u32(b, format::INO_GEN_OFF);
            let mut new = special32(rng, old);
            if new == old {
                new ^= 1;
            }
            format::put_u32(b, format::INO_GEN_OFF, new);
            (
                format!("inode slot {} static generation: {old} -> {new}", info.ino),
                true,
            )
        }
        _ => {
            let old = format::get_u32(b, format::INO_MODE_OFF);
            let kinds = [
                FileKind::Regular,
                FileKind::Directory,
                FileKind::Symlink,
                FileKind::Fifo,
                FileKind::Socket,
                FileKind::CharDevice,
                FileKind::BlockDevice,
            ];
            let new = match rng.random_range(0..4) {
                0 => special32(rng, old),
                _ => kinds[rng.random_range(0..kinds.len())].mode_bits(),
            };
            format::put_u32(b, format::INO_MODE_OFF, new);
            (
                format!("inode slot {} static mode: {old:#o} -> {new:#o}", info.ino),
                true,
            )
        }
    };
    if ok {
        let c = format::crc(&b[format::INO_STATIC_OFF..format::INO_CSUM_OFF]);
        format::put_u32(b, format::INO_CSUM_OFF, c);
    }
    Some(desc + " (crc recomputed)")
}

fn page_header(img: &mut [u8], m: &Map, rng: &mut StdRng) -> Option<String> {
    let info = pick(rng, &m.inodes)?;
    let i = rng.random_range(0..info.pages.len().max(1));
    let &p = info.pages.get(i)?;
    let base = (p * BLOCK) as usize;
    let (field, fo) = [
        ("next", format::LOG_NEXT_OFF),
        ("next", format::LOG_NEXT_OFF),
        ("owner", format::LOG_OWNER_OFF),
        ("magic", format::LOG_MAGIC_OFF),
    ][rng.random_range(0..4)];
    let o = base + fo as usize;
    let old = format::get_u64(img, o);
    let new = match (field, rng.random_range(0..5)) {
        ("next", 0) => p,                                   // a cycle onto itself
        ("next", 1) => info.pages[rng.random_range(0..=i)], // an earlier page
        ("next", 2) => 0,
        ("next", 3) => pick(rng, &m.log_pages())?.1, // another inode's page
        ("owner", 0) => rng.random_range(1..=m.geo.inodes()),
        _ => special(rng, m, old),
    };
    let new = differ(new, old);
    format::put_u64(img, o, new);
    Some(format!(
        "log page {p} (#{i} of inode {}) {field}: {old:#x} -> {new:#x}",
        info.ino
    ))
}

fn entry_name(t: u8) -> &'static str {
    match t {
        format::ET_WRITE => "Write",
        format::ET_SETATTR => "SetAttr",
        format::ET_LINK => "Link",
        format::ET_DENTRY => "Dentry",
        format::ET_XATTR => "Xattr",
        _ => "?",
    }
}

fn entry_field(img: &mut [u8], m: &Map, rng: &mut StdRng) -> Option<String> {
    let e = pick(rng, &m.entries)?.clone();
    let s = e.off as usize;
    let len = (e.units * UNIT) as usize;
    let b = &mut img[s..s + len];
    let fields: &[(&str, usize, W)] = match e.etype {
        format::ET_WRITE => &[
            ("pgoff", format::WRITE_PGOFF_OFF, W::B8),
            ("block", format::WRITE_BLOCK_OFF, W::B8),
            ("npages", format::WRITE_NPAGES_OFF, W::B4),
            ("size_after", format::WRITE_SIZE_AFTER_OFF, W::B8),
            ("mtime.sec", format::WRITE_MTIME_SEC_OFF, W::B8),
            ("mtime.nsec", format::WRITE_MTIME_NSEC_OFF, W::B4),
        ],
        format::ET_SETATTR => &[
            ("mode", format::SETATTR_MODE_OFF, W::B4),
            ("uid", format::SETATTR_UID_OFF, W::B4),
            ("rdev", format::SETATTR_RDEV_OFF, W::B4),
            ("size", format::SETATTR_SIZE_OFF, W::B8),
            ("size", format::SETATTR_SIZE_OFF, W::B8),
            ("mtime.sec", format::SETATTR_MTIME_SEC_OFF, W::B8),
            ("atime.nsec", format::SETATTR_ATIME_NSEC_OFF, W::B4),
            ("flags", format::SETATTR_FLAGS_OFF, W::B4),
        ],
        format::ET_LINK => &[
            ("nlink", format::LINK_NLINK_OFF, W::B4),
            ("nlink", format::LINK_NLINK_OFF, W::B4),
            ("ctime.sec", format::LINK_CTIME_SEC_OFF, W::B8),
        ],
        format::ET_DENTRY => &[
            ("ino", format::DENTRY_INO_OFF, W::B8),
            ("ino", format::DENTRY_INO_OFF, W::B8),
            ("cookie", format::DENTRY_COOKIE_OFF, W::B8),
            ("name_len", format::DENTRY_NAME_LEN_OFF, W::B1),
            ("op", format::DENTRY_OP_OFF, W::B1),
            ("d_type", format::DENTRY_DTYPE_OFF, W::B1),
            ("name", format::DENTRY_NAME_OFF, W::B1),
            ("name", format::DENTRY_NAME_OFF, W::B1),
        ],
        format::ET_XATTR => &[
            ("xattr name_len", format::XATTR_NAME_LEN_OFF, W::B1),
            ("xattr op", format::XATTR_OP_OFF, W::B1),
            ("xattr value_len", format::XATTR_VALUE_LEN_OFF, W::B2),
            ("xattr value_len", format::XATTR_VALUE_LEN_OFF, W::B2),
            ("xattr ctime.sec", format::XATTR_CTIME_SEC_OFF, W::B8),
            ("xattr ctime.nsec", format::XATTR_CTIME_NSEC_OFF, W::B4),
            ("xattr name byte", format::XATTR_NAME_OFF, W::B1),
            ("xattr name byte", format::XATTR_NAME_OFF + 5, W::B1),
        ],
        _ => &[],
    };
    let common: &[(&str, usize, W)] = &[
        ("type", format::ENTRY_TYPE_OFF, W::B1),
        ("units", format::ENTRY_UNITS_OFF, W::B1),
        ("group", format::ENTRY_GROUP_OFF, W::B2),
    ];
    let (f, fo, w) = if fields.is_empty() || rng.random_range(0..6) == 0 {
        common[rng.random_range(0..common.len())]
    } else {
        fields[rng.random_range(0..fields.len())]
    };
    let what = format!(
        "{} entry at {:#x} (inode {}{})",
        entry_name(e.etype),
        e.off,
        e.ino,
        if e.dir { ", directory" } else { "" }
    );
    if f == "name" {
        let room = len - format::DENTRY_NAME_OFF;
        let old_len = b[format::DENTRY_NAME_LEN_OFF] as usize;
        let old = String::from_utf8_lossy(
            &b[format::DENTRY_NAME_OFF..format::DENTRY_NAME_OFF + old_len.min(room)],
        )
        .into_owned();
        let cands: [&[u8]; 9] = [
            b"/", b"\0", b"", b".", b"..", b"a/b", b"x\0y", b"f1", b"many",
        ];
        let new = cands[rng.random_range(0..cands.len())];
        let n = new.len().min(room);
        b[format::DENTRY_NAME_OFF..].fill(0);
        b[format::DENTRY_NAME_OFF..format::DENTRY_NAME_OFF + n].copy_from_slice(&new[..n]);
        b[format::DENTRY_NAME_LEN_OFF] = n as u8;
        reseal(b);
        return Some(format!(
            "{what} name: {old:?} -> {:?} (crc recomputed)",
            String::from_utf8_lossy(&new[..n])
        ));
    }
    let old = get(b, fo, w);
    let new = match (f, rng.random_range(0..3)) {
        ("ino", 0) => rng.random_range(1..=m.geo.inodes()),
        ("block", 0) => pick(rng, &m.writes).map_or(0, |w| w.2),
        ("block", 1) => pick(rng, &m.log_pages()).map_or(0, |p| p.1),
        ("d_type", _) => [1u64, 2, 4, 6, 8, 10, 12, 0, 3, 255][rng.random_range(0..10)],
        ("op", _) => rng.random_range(0..4),
        ("type", _) => rng.random_range(0..6),
        _ => value(rng, m, w, old),
    };
    let new = differ(new, old);
    put(b, fo, w, new);
    reseal(b);
    Some(format!("{what} {f}: {old:#x} -> {new:#x} (crc recomputed)"))
}

fn commit_mark(img: &mut [u8], m: &Map, rng: &mut StdRng) -> Option<String> {
    let e = pick(rng, &m.entries)?.clone();
    let s = e.off as usize;
    let len = (e.units * UNIT) as usize;
    let b = &mut img[s..s + len];
    let old = format::get_u64(b, 0);
    let what = format!(
        "{} entry at {:#x} (inode {})",
        entry_name(e.etype),
        e.off,
        e.ino
    );
    let desc = match rng.random_range(0..5) {
        0 => {
            // Committed <-> follower.
            let tag = if old >> 48 == 0xC0DE {
                0xF011u64
            } else {
                0xC0DE
            };
            format::put_u64(b, 0, (tag << 48) | (old & 0xffff_ffff_ffff));
            "tag swapped (commit/follower)".to_string()
        }
        1 => {
            let g: u16 = [2, 3, 5, 63, 0xffff][rng.random_range(0..5)];
            b[format::ENTRY_GROUP_OFF..format::ENTRY_GROUP_OFF + 2]
                .copy_from_slice(&g.to_le_bytes());
            reseal(b);
            format!("group size -> {g} (crc recomputed)")
        }
        2 => {
            format::put_u64(b, 0, 0);
            "uncommitted (word zeroed)".to_string()
        }
        3 => {
            let u: u64 = [1, 2, 5, 62, 63, 64, 0xffff][rng.random_range(0..7)];
            let w = (old & 0xffff_0000_ffff_ffff) | (u << 32);
            format::put_u64(b, 0, w);
            format!("units in the commit word -> {u}")
        }
        _ => {
            let w = (rng.random::<u16>() as u64) << 48 | (old & 0xffff_ffff_ffff);
            format::put_u64(b, 0, w);
            "tag garbled".to_string()
        }
    };
    let new = format::get_u64(&img[s..s + 8], 0);
    Some(format!("{what} commit mark: {desc}: {old:#x} -> {new:#x}"))
}

fn journal(img: &mut [u8], m: &Map, rng: &mut StdRng) -> String {
    let g = &m.geo;
    let cpu = rng.random_range(0..g.cpus);
    let jb = g.journal_off(cpu).get() as usize;
    let n = rng.random_range(1..=3usize);
    let mut recs = vec![0u8; n * 16];
    let mut descs = Vec::new();
    for k in 0..n {
        let ino = match pick(rng, &m.inodes) {
            Some(i) if rng.random_range(0..4) != 0 => i.ino,
            _ => rng.random_range(1..=g.inodes()),
        };
        let slot = g.inode_off(ino).get();
        let off = match rng.random_range(0..8) {
            0..=3 => slot + [0, 8, 16][rng.random_range(0..3)],
            4 => slot + 3,
            5 => special(rng, m, slot),
            6 => format::SB_STATE_OFF,
            _ => g.data_start * BLOCK + 8 * rng.random_range(0..512),
        };
        let oldv = match rng.random_range(0..3) {
            0 => format::get_u64(img, (slot + 16) as usize), // a plausible tail
            _ => special(rng, m, 0),
        };
        format::put_u64(&mut recs, k * 16, off);
        format::put_u64(&mut recs, k * 16 + 8, oldv);
        descs.push(format!("({off:#x}, old {oldv:#x})"));
    }
    img[jb + 64..jb + 64 + n * 16].copy_from_slice(&recs);
    let (word, how) = match rng.random_range(0..6) {
        0 => {
            let bad = [0u64, 253, 0xffff][rng.random_range(0..3)];
            let w = (0x4A4Eu64 << 48) | (bad << 32) | format::crc(&recs) as u64;
            (w, format!("nrec {bad}"))
        }
        1 => (
            format::journal_word(n, &recs) ^ 1,
            "crc off by one bit".into(),
        ),
        _ => (format::journal_word(n, &recs), "crc recomputed".into()),
    };
    let old = format::get_u64(img, jb);
    format::put_u64(img, jb, word);
    format!(
        "journal of cpu {cpu} made active ({how}): header {old:#x} -> {word:#x}, records {}",
        descs.join(" ")
    )
}

fn freelist(img: &mut [u8], m: &Map, rng: &mut StdRng) -> Option<String> {
    let g = &m.geo;
    let fl = (g.freelist_start * BLOCK) as usize;
    let cap = format::freelist_capacity(g) as u64;
    let desc;
    if m.freelist_n == 0 || rng.random_range(0..4) == 0 {
        // Fabricate a list (and say the image is clean): one or two extents.
        let n = rng.random_range(1..=2u64);
        for k in 0..n {
            let e = fl + 64 + 16 * k as usize;
            let start = match rng.random_range(0..3) {
                0 => g.data_start,
                1 => special(rng, m, g.data_start),
                _ => rng.random_range(g.data_start..g.total_blocks),
            };
            let len = match rng.random_range(0..3) {
                0 => g.total_blocks - g.data_start,
                1 => special(rng, m, 1),
                _ => rng.random_range(1..8),
            };
            format::put_u64(img, e, start);
            format::put_u64(img, e + 8, len);
        }
        format::put_u64(img, fl, format::FREELIST_MAGIC);
        format::put_u64(img, fl + 8, n);
        let c = format::crc(&img[fl + 64..fl + 64 + 16 * n as usize]);
        format::put_u64(img, fl + 16, c as u64);
        format::put_u64(img, format::SB_STATE_OFF as usize, format::STATE_CLEAN);
        desc = format!(
            "saved free list fabricated with {n} extents starting ({:#x},{:#x}), state word CLEAN",
            format::get_u64(img, fl + 64),
            format::get_u64(img, fl + 72)
        );
    } else if rng.random_range(0..3) == 0 {
        let old = format::get_u64(img, fl + 8);
        let new = match rng.random_range(0..5) {
            0 => 0,
            1 => old + 1,
            2 => cap,
            3 => cap + 1,
            _ => special(rng, m, old),
        };
        format::put_u64(img, fl + 8, new);
        let k = new.min(cap) as usize;
        let c = format::crc(&img[fl + 64..fl + 64 + 16 * k]);
        format::put_u64(img, fl + 16, c as u64);
        desc = format!("saved free list count: {old} -> {new} (crc recomputed)");
    } else {
        let i = rng.random_range(0..m.freelist_n) as usize;
        let (f, fo) = [("start", 0usize), ("len", 8)][rng.random_range(0..2)];
        let o = fl + 64 + 16 * i + fo;
        let old = format::get_u64(img, o);
        let new = special(rng, m, old);
        format::put_u64(img, o, new);
        let n = m.freelist_n as usize;
        let c = format::crc(&img[fl + 64..fl + 64 + 16 * n]);
        format::put_u64(img, fl + 16, c as u64);
        desc = format!("saved free list extent {i} {f}: {old:#x} -> {new:#x} (crc recomputed)");
    }
    Some(desc)
}

fn redo(img: &mut [u8], m: &Map, rng: &mut StdRng) -> String {
    let g = &m.geo;
    let cpu = if let (Some(&c), true) = (m.redo_live.first(), rng.random_range(0..2) == 0) {
        c
    } else {
        rng.random_range(0..g.cpus)
    };
    let a = g.redo_off(cpu).get() as usize;
    let area = (format::REDO_BLOCKS * BLOCK) as usize;
    let w = pick(rng, &m.writes).copied();
    let files: Vec<u64> = m
        .inodes
        .iter()
        .filter(|i| i.kind == FileKind::Regular)
        .map(|i| i.ino)
        .collect();
    let ino = match (rng.random_range(0..4), w) {
        (0, _) => special(rng, m, 1),
        (1, _) => pick(rng, &files).copied().unwrap_or(1),
        (_, Some(w)) => w.0,
        _ => 1,
    };
    let pgoff = match (rng.random_range(0..4), w) {
        (0, _) => special(rng, m, 0),
        (_, Some(w)) => w.1,
        _ => 0,
    };
    let block = match (rng.random_range(0..4), w) {
        (0, _) => special(rng, m, 0),
        (_, Some(w)) => w.2,
        _ => g.data_start,
    };
    let offset: u32 = [0, 100, 4000, 4095, 4096, u32::MAX][rng.random_range(0..6)];
    let len: u32 = [1, 64, 100, 4095, 4096, 5000, 8128, 0, u32::MAX][rng.random_range(0..9)];
    img[a..a + 64].fill(0);
    format::put_u64(img, a + 8, ino);
    format::put_u64(img, a + 16, pgoff);
    format::put_u64(img, a + 24, block);
    format::put_u32(img, a + 32, offset);
    format::put_u32(img, a + 36, len);
    let data_end = (64 + len as usize).min(area);
    for x in &mut img[a + 64..a + data_end] {
        *x = 0xd5;
    }
    let c = format::crc(&img[a + 8..a + data_end]);
    let word = (0xF10Cu64 << 48) | ((len as u64 & 0xffff) << 32) | c as u64;
    format::put_u64(img, a, word);
    format!(
        "fine-log redo record of cpu {cpu}: ino {ino:#x} pgoff {pgoff:#x} block {block:#x} offset {offset} len {len} (crc recomputed)"
    )
}

/// The 12-bit check of a LAWN descriptor (docs/FORMAT.md §2.9).
fn desc_check(w0: u64, low: u64) -> u64 {
    let mut h = w0.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(low);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    1 + h % 4095
}

fn lawn(img: &mut [u8], m: &Map, rng: &mut StdRng) -> Option<String> {
    let g = &m.geo;
    if g.zone_slots == 0 {
        return None;
    }
    let per = g.slots_per_cpu().max(1);
    let slot = match rng.random_range(0..4) {
        0 if !m.descs.is_empty() => *pick(rng, &m.descs)?,
        1 => per * rng.random_range(1..=g.cpus as u64) - 1, // last slot of a sub-zone
        2 => g.zone_slots - 1,
        _ => rng.random_range(0..g.zone_slots),
    };
    let o = g.desc_off(slot).get() as usize;
    let (mut w0, mut w1) = (format::get_u64(img, o), format::get_u64(img, o + 8));
    let (old0, old1) = (w0, w1);
    let w = pick(rng, &m.writes).copied();
    if w0 == 0 || rng.random_range(0..3) == 0 {
        let (ino, pg, blk) = w.map_or((1, 0, g.data_start), |w| (w.0, w.1, w.2));
        w0 = (ino & 0xffff_ffff) | (pg << 32);
        w1 = blk & ((1 << 40) - 1);
        w1 |= (rng.random_range(0..64u64)) << 40 | (rng.random_range(0..64u64)) << 46;
    }
    // Word 0's upper half: the page (format versions 3-6) or the CRC-32 of the
    // page number and the run's slot bytes (version 7, docs/FORMAT.md §2.9).
    let upper = if g.lawn_sums { "sum" } else { "pgoff" };
    let what = match rng.random_range(0..6) {
        0 => {
            w0 = (w0 & !0xffff_ffff) | (special(rng, m, 1) & 0xffff_ffff);
            "ino"
        }
        1 => {
            w0 = (w0 & 0xffff_ffff) | (special(rng, m, 0) << 32);
            upper
        }
        2 => {
            w1 = (w1 & !((1 << 40) - 1)) | (special(rng, m, 0) & ((1 << 40) - 1));
            "block"
        }
        3 => {
            w1 = (w1 & !(63 << 40)) | (rng.random_range(0..64u64) << 40);
            "first"
        }
        4 => {
            w1 = (w1 & !(63 << 46)) | (rng.random_range(0..64u64) << 46);
            "count-1"
        }
        _ => "all fields",
    };
    let low = w1 & ((1 << 52) - 1);
    // Sum format: half the time the sum is made to match the slots the descriptor
    // now names and the page that the newest write entry of its inode covering its
    // block gives that block (else page 0), so that recovery goes past that check to
    // the fields.
    let mut resummed = "";
    if g.lawn_sums && what != "sum" && rng.random_range(0..2) == 0 {
        let count = ((low >> 46) & 63) + 1;
        let block = low & ((1 << 40) - 1);
        let pg = m
            .writes
            .iter()
            .rev()
            .find(|w| w.0 == w0 & 0xffff_ffff && block >= w.2 && block - w.2 < u64::from(w.3))
            .map_or(0, |w| w.1 + (block - w.2));
        let a = g.slot_off(slot).get() as usize;
        let n = (count * g.slot_size as u64) as usize;
        if let Some(bytes) = a.checked_add(n).and_then(|e| img.get(a..e)) {
            let whole = [&pg.to_le_bytes()[..], bytes].concat();
            w0 = (w0 & 0xffff_ffff) | ((format::crc(&whole) as u64) << 32);
            resummed = ", sum recomputed";
        }
    }
    w1 = low | (desc_check(w0, low) << 52);
    format::put_u64(img, o, w0);
    format::put_u64(img, o + 8, w1);
    Some(format!(
        "LAWN descriptor {slot} {what}: ({old0:#x},{old1:#x}) -> ({w0:#x},{w1:#x}) (check recomputed{resummed})"
    ))
}

/// The three hostile cases of the issue, on a Write entry of a regular file.
fn hostile(img: &mut [u8], m: &Map, rng: &mut StdRng) -> Option<String> {
    let writes: Vec<_> = m
        .entries
        .iter()
        .filter(|e| e.etype == format::ET_WRITE && !e.dir && e.units == 1)
        .collect();
    let e = (*pick(rng, &writes)?).clone();
    let s = e.off as usize;
    let b = &mut img[s..s + UNIT as usize];
    let desc = match rng.random_range(0..3) {
        0 => {
            let old = format::get_u64(b, format::WRITE_PGOFF_OFF);
            format::put_u64(b, format::WRITE_PGOFF_OFF, i64::MAX as u64);
            format!("pgoff: {old:#x} -> 2^63-1")
        }
        1 => {
            let (ob, on) = (
                format::get_u64(b, format::WRITE_BLOCK_OFF),
                format::get_u32(b, format::WRITE_NPAGES_OFF),
            );
            format::put_u64(b, format::WRITE_BLOCK_OFF, 0);
            format::put_u32(b, format::WRITE_NPAGES_OFF, u32::MAX);
            format!("hole punch: block {ob:#x} -> 0, npages {on} -> 2^32-1")
        }
        _ => {
            let old = format::get_u64(b, format::WRITE_SIZE_AFTER_OFF);
            format::put_u64(b, format::WRITE_SIZE_AFTER_OFF, u64::MAX);
            format!("size_after: {old:#x} -> 2^64-1")
        }
    };
    reseal(b);
    Some(format!(
        "hostile Write entry at {:#x} (inode {}) {desc} (crc recomputed)",
        e.off, e.ino
    ))
}
