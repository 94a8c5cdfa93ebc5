//! Fine-grained redo logging (the `finelog` small-write mode): the baseline that
//! LAWN is measured against (papers/lawn §3, "Fine-log"). A sub-page overwrite
//! inside one mapped page and inside the file's size is written twice: first as a
//! redo record (header + data) into the CPU's redo area, then in place into the
//! file page; then the record is retired.
//!
//! Record (docs/FORMAT.md, "Fine-log redo areas"), at the start of a CPU's area:
//! ```text
//! 0  commit word: 0xF10C << 48 | len << 32 | crc32(bytes 8 .. 64 + len)
//! 8  ino   16 pgoff   24 block (the data block the record targets)
//! 32 offset in page (u32)   36 len (u32)   64.. data
//! ```
//! Persistence order: record and commit word (cached stores, flushed) → fence →
//! data in place (non-temporal) → fence → commit word 0 → fence. The CRC decides
//! whether a record is whole, so the record needs one fence, not two. The retire is
//! fenced before the write returns: a later write of the same bytes through another
//! CPU's area must never be followed, on recovery, by a replay of this older record.
//!
//! Recovery replays a whole record whose block is still the inode's mapping of the
//! page, then clears it.

use crate::addr::BlockNo;
use crate::format::{crc, get_u32, get_u64, put_u32, put_u64, Geometry, BLOCK};
use crate::inode::InodeState;
use crate::recovery::Mode;
use crate::types::{FileKind, Ino};
use crate::vol::Vol;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

const TAG: u64 = 0xF10C;
const HDR: u64 = 64;

fn commit_word(rec: &[u8], len: u64) -> u64 {
    (TAG << 48) | (len << 32) | crc(&rec[8..]) as u64
}

/// The per-CPU redo areas (one record in flight per area).
pub(crate) struct Finelog {
    areas: Vec<Mutex<()>>,
    /// Writes done (exact; `FsStats::finelog_writes`).
    writes: AtomicU64,
}

impl Finelog {
    /// The areas of an image with `geo`.
    pub fn new(geo: &Geometry) -> Finelog {
        Finelog {
            areas: (0..geo.cpus).map(|_| Mutex::new(())).collect(),
            writes: AtomicU64::new(0),
        }
    }

    /// Writes done.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Redo-logs then writes `data` in place at `off` (one page, mapped to `block`).
    /// (A record in flight waits for its area: this never falls back to page CoW.)
    #[allow(clippy::too_many_arguments)]
    pub fn write(
        &self,
        pm: &Vol,
        geo: &Geometry,
        ino: Ino,
        pg: u64,
        block: u64,
        off: u64,
        data: &[u8],
    ) {
        // SAFETY: sched_getcpu has no preconditions.
        let c = unsafe { libc::sched_getcpu() };
        let n = self.areas.len();
        let first = if c < 0 { 0 } else { c as usize % n };
        // Any free area, starting with this CPU's; else wait for this CPU's.
        let mut guard = None;
        let mut area = first;
        for k in 0..n {
            if let Some(g) = self.areas[(first + k) % n].try_lock() {
                area = (first + k) % n;
                guard = Some(g);
                break;
            }
        }
        let _g = guard.unwrap_or_else(|| self.areas[first].lock());
        let base = geo.redo_off(area as u32);
        let in_pg = off % BLOCK;
        let len = data.len() as u64;
        // `len` < BLOCK (checked above): the record fits its area.
        let mut rec = vec![0u8; len.saturating_add(HDR) as usize];
        put_u64(&mut rec, 8, ino);
        put_u64(&mut rec, 16, pg);
        put_u64(&mut rec, 24, block);
        put_u32(&mut rec, 32, in_pg as u32);
        put_u32(&mut rec, 36, len as u32);
        rec[HDR as usize..].copy_from_slice(data);
        let cw = commit_word(&rec, len);
        put_u64(&mut rec, 0, cw);
        pm.write(base, &rec);
        pm.flush(base, rec.len() as u64);
        // Fence: the whole record (its CRC-checked commit word included) is durable
        // before the file is changed in place.
        pm.fence();
        pm.write_nt(BlockNo(block).at(in_pg), data);
        // Fence: the in-place data is durable before the record is retired.
        pm.fence();
        pm.store_u64(base, 0);
        pm.flush(base, 8);
        // Fence: the retire is durable before the write returns (and before any
        // later record of the same bytes can commit).
        pm.fence();
        self.writes.fetch_add(1, Ordering::Relaxed);
    }
}

/// Replays (mount) or checks (fsck) every CPU's redo area.
#[deny(clippy::arithmetic_side_effects)]
pub(crate) fn recover(
    pm: &Vol,
    geo: &Geometry,
    states: &HashMap<Ino, InodeState>,
    mode: Mode,
    problems: &mut Vec<String>,
) {
    let mut changed = false;
    for cpu in 0..geo.cpus {
        let base = geo.redo_off(cpu);
        let w = pm.read_u64(base);
        if w == 0 {
            continue;
        }
        let len = (w >> 32) & 0xffff;
        let mut hdr = [0u8; HDR as usize];
        pm.read(base, &mut hdr);
        let in_pg = get_u32(&hdr, 32) as u64;
        let whole = if w >> 48 != TAG || len == 0 || len >= BLOCK {
            if mode == Mode::Fsck {
                problems.push(format!(
                    "fine-log area {cpu}: commit word {w:#x} is not a record"
                ));
            }
            None
        } else {
            // `len` < BLOCK (checked above): the record fits its area.
            let mut rec = vec![0u8; len.saturating_add(HDR) as usize];
            pm.read(base, &mut rec);
            // A record whose CRC does not match was never committed (torn).
            (commit_word(&rec, len) == w && get_u32(&rec, 36) as u64 == len).then_some(rec)
        };
        if let Some(rec) = whole {
            let ino = get_u64(&rec, 8);
            let pg = get_u64(&rec, 16);
            let block = get_u64(&rec, 24);
            let current = states.get(&ino).is_some_and(|s| {
                s.kind == FileKind::Regular && s.pages.get(pg).map(|p| p.block) == Some(block)
            });
            if !current || in_pg.saturating_add(len) > BLOCK {
                if mode == Mode::Fsck {
                    problems.push(format!(
                        "fine-log area {cpu}: record for inode {ino} page {pg} names block \
                         {block}, which is not that page's block"
                    ));
                }
            } else if mode == Mode::Mount {
                let off = BlockNo(block).at(in_pg);
                pm.write(off, &rec[HDR as usize..]);
                pm.flush(off, len);
                // Fence: the replayed data is durable before its record is retired.
                pm.fence();
            }
        }
        if mode == Mode::Mount {
            pm.store_u64(base, 0);
            pm.flush(base, 8);
            changed = true;
        }
    }
    if changed {
        // Fence: the redo areas are retired before the file system is used.
        pm.fence();
    }
}
