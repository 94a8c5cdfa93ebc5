//! Mount-time loading and crash recovery.
//!
//! Order (each step is idempotent, so a crash during recovery just recovers again):
//! 1. superblock: primary, else replica (the primary is repaired from it);
//! 2. the state word says whether the last unmount was clean;
//! 3. every CPU's lite journal: an active transaction is rolled back (undo records);
//! 4. every valid inode: its log is walked from head to the page holding the tail and
//!    each committed entry is applied (the same `InodeState::apply` the live file
//!    system uses); bytes past the tail in the tail page are zeroed;
//! 5. directory entries are resolved; link counts are checked; orphans (link count 0:
//!    unlinked while open) are freed;
//! 6. free space: from the saved free list after a clean unmount, else from a scan of
//!    every block the valid inodes own.
//!
//! The same code serves fsck, which runs it on a private copy of the image and reports
//! every problem instead of stopping at the first.
//!
//! Submodules: [`superblock`] (step 1), [`replay`] (step 4), [`check`] (step 5),
//! [`rebuild`] (step 6); the saved free list's codec is `freelist`.

// Values read from PM are untrusted: arithmetic on them is checked (checked_*,
// saturating_* where an out-of-range result is refused later), enforced here.
#![deny(clippy::arithmetic_side_effects)]

mod check;
mod rebuild;
pub(crate) mod replay;
mod superblock;

use crate::addr::{BlockNo, PmOff};
use crate::bugs::{self, Bug};
use crate::data::lawn::zone::SubZone;
use crate::data::{finelog, lawn};
use crate::error::{FsError, Result};
use crate::format::{
    Geometry, INODE_SIZE, INO_HEAD_OFF, INO_TAIL_OFF, INO_VALID_OFF, SB_REPLICA_BLOCK,
    SB_STATE_OFF, STATE_CLEAN, STATE_DIRTY,
};
use crate::freelist::{first_owned_free, read_saved_freelist};
use crate::inode::InodeState;
use crate::space::Run;
use crate::types::{Ino, ROOT_INO};
use crate::vol::Vol;
use check::check_namespace;
use rebuild::{coalesce, describe_freelist_mismatch, first_doubly_owned, free_extents, ownership};
use replay::load_inode;
use std::collections::HashMap;
pub(crate) use superblock::read_superblock;
/// What loading an image produced.
pub(crate) struct Loaded {
    pub geo: Geometry,
    pub clean: bool,
    pub states: HashMap<Ino, InodeState>,
    /// Free inode slots.
    pub free_inos: Vec<Ino>,
    /// Free data-block extents.
    pub free: Vec<Run>,
    /// LAWN growth chunks: (chunk table entry, first block).
    pub chunks: Vec<(u64, u64)>,
    pub problems: Vec<String>,
    pub log_pages: u64,
    pub data_pages: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Mounting: stop at the first problem, trust a saved free list.
    Mount,
    /// Checking a private copy: collect every problem, verify the free list.
    Fsck,
}

/// What the recovery pipeline produced.
pub(crate) struct Recovered {
    /// Inodes, free space, problems.
    pub loaded: Loaded,
    /// LAWN runs recovered from the descriptor table (empty unless kept).
    pub subs: Vec<SubZone>,
    /// Where the LAWN zone's slots lie (its chunks; none unless kept).
    pub map: lawn::chunks::ZoneMap,
}

/// The recovery pipeline, one for mount and fsck: [`load`] (superblock, journals,
/// logs, namespace, space), then the small-write areas against the replayed
/// mappings — fine-log redo records, LAWN descriptors. `keep_lawn`: a LAWN mount
/// keeps the zone's runs; any other mount writes them back (`lawn::recover`).
pub(crate) fn recover(vol: &Vol, mode: Mode, keep_lawn: bool) -> Result<Recovered> {
    let mut loaded = load(vol, mode)?;
    finelog::recover(vol, &loaded.geo, &loaded.states, mode, &mut loaded.problems);
    let map = lawn::chunks::ZoneMap::new(&loaded.geo, &loaded.chunks);
    let subs = lawn::recover::scan(
        vol,
        &loaded.geo,
        &map,
        &loaded.states,
        mode,
        keep_lawn,
        &mut loaded.problems,
    );
    if mode == Mode::Mount && !keep_lawn && !loaded.chunks.is_empty() {
        // Not a LAWN mount: the zone's runs are back in their pages and its
        // descriptors clear (`scan`); its chunks go back to free space.
        let cb = loaded.geo.zone_chunk_blocks as u64;
        for &(e, _) in &loaded.chunks {
            let at = loaded.geo.chunk_entry_off(e);
            vol.store_u64(at, 0);
            vol.flush(at, 8);
        }
        // Fence: the entries are clear on PM before the chunks' blocks can be reused.
        vol.fence();
        for (_, b) in std::mem::take(&mut loaded.chunks) {
            loaded.free.push((b, cb));
        }
        loaded.free.sort_unstable();
        let map = lawn::chunks::ZoneMap::new(&loaded.geo, &[]);
        return Ok(Recovered { loaded, subs, map });
    }
    Ok(Recovered { loaded, subs, map })
}

/// Whether `off` is a word the lite journal may name: the valid/head/tail words of an
/// inode slot.
fn journalable(geo: &Geometry, off: u64) -> bool {
    let t0 = BlockNo(geo.inode_table_start).off().get();
    // The table lies inside the image (`Geometry::decode`).
    let t1 = t0.saturating_add(geo.inode_count.saturating_mul(INODE_SIZE));
    let rel = if off >= t0 && off < t1 {
        off.saturating_sub(t0)
    } else {
        // Or in a later device's table (inside its device: `set_device_inodes`).
        match geo.dev_table_of(off) {
            Some((_, rel)) => rel,
            None => return false,
        }
    };
    let w = rel % INODE_SIZE;
    w == INO_VALID_OFF || w == INO_HEAD_OFF || w == INO_TAIL_OFF
}

/// Loads the image: journal rollback, log replay, orphans, free space.
pub(crate) fn load(pm: &Vol, mode: Mode) -> Result<Loaded> {
    let mut problems = Vec::new();
    let geo = read_superblock(pm, &mut problems)?;
    let state = pm.read_u64(PmOff::ZERO + SB_STATE_OFF);
    let clean = state == STATE_CLEAN;
    if state != STATE_CLEAN && state != STATE_DIRTY {
        problems.push(format!(
            "superblock state word has garbage value {state:#x}"
        ));
    }
    if mode == Mode::Mount {
        // Only superblock trouble so far, and `geo` came from a valid copy: repair
        // whichever copy is bad from the good one.
        let mut p = [0u8; 128];
        pm.read(PmOff::ZERO, &mut p);
        let mut r = [0u8; 128];
        pm.read(BlockNo(SB_REPLICA_BLOCK).off(), &mut r);
        let good = geo.encode_like(&p, &r);
        if Geometry::decode(&p, pm.len()).is_err() {
            pm.write(PmOff::ZERO, &good);
            pm.flush(PmOff::ZERO, 128);
        }
        if Geometry::decode(&r, pm.len()).is_err() {
            pm.write(BlockNo(SB_REPLICA_BLOCK).off(), &good);
            pm.flush(BlockNo(SB_REPLICA_BLOCK).off(), 128);
        }
        // The device table likewise: `read_superblock` accepted one copy, which
        // becomes both (docs/FORMAT.md §2.10).
        let at = [
            PmOff::ZERO + crate::format::TABLE_OFF,
            BlockNo(SB_REPLICA_BLOCK).at(crate::format::TABLE_OFF),
        ];
        let copies = at.map(|o| crate::devices::read_table(pm, o.get()));
        let good = copies
            .iter()
            .find_map(|c| c.as_ref().ok().cloned().flatten());
        if let Some(t) = good {
            for (o, c) in at.iter().zip(&copies) {
                if c.as_ref().ok().and_then(|x| x.as_ref()) != Some(&t) {
                    let b = t.encode();
                    pm.write(*o, &b);
                    pm.flush(*o, b.len() as u64);
                }
            }
        }
        problems.clear();
        pm.store_u64(PmOff::ZERO + SB_STATE_OFF, STATE_DIRTY);
        pm.flush(PmOff::ZERO + SB_STATE_OFF, 8);
        // Fence: the repaired superblock and device-table copies, and the dirty
        // mark, are durable before recovery changes anything else, so a crash from
        // here on never trusts the saved free list.
        pm.fence();
    }

    // The LAWN chunk table: which blocks the zone's growth chunks hold.
    let chunks = read_chunks(pm, &geo, &mut problems);

    // 3. Journals (the injected bug defers this until after the logs are replayed).
    let early_rollback = !bugs::on(Bug::FreeListBeforeRollback);
    if early_rollback {
        rollback_journals(pm, &geo, mode, &mut problems)?;
    }

    // 4. Inodes and logs.
    let (states, free_inos) = load_inodes(pm, &geo, mode, &mut problems)?;
    if !early_rollback {
        rollback_journals(pm, &geo, mode, &mut problems)?;
    }
    load_rest(pm, geo, mode, clean, problems, states, free_inos, chunks)
}

/// Reads the LAWN chunk table (docs/FORMAT.md §2.9, "Growth"): every entry that
/// names a chunk, as (entry, first block). Names entries that do not decode, chunks
/// outside the data area and chunks that overlap; those are left out.
fn read_chunks(pm: &Vol, geo: &Geometry, problems: &mut Vec<String>) -> Vec<(u64, u64)> {
    let cb = geo.zone_chunk_blocks as u64;
    let mut out: Vec<(u64, u64)> = Vec::new();
    for e in 0..geo.zone_chunks as u64 {
        let v = pm.read_u64(geo.chunk_entry_off(e));
        match crate::format::decode_chunk_entry(e, v) {
            Ok(None) => {}
            Ok(Some(b)) => {
                let inside = geo.is_data_run(b, cb);
                if inside {
                    out.push((e, b));
                } else {
                    problems.push(format!(
                        "LAWN chunk table entry {e}: chunk at block {b} is outside the data area"
                    ));
                }
            }
            Err(()) => problems.push(format!(
                "LAWN chunk table entry {e}: not a valid entry ({v:#018x})"
            )),
        }
    }
    let mut by_block = out.clone();
    by_block.sort_unstable_by_key(|&(_, b)| b);
    for w in by_block.windows(2) {
        if w[0].1.saturating_add(cb) > w[1].1 {
            problems.push(format!(
                "LAWN chunk table entries {} and {}: chunks at blocks {} and {} overlap",
                w[0].0, w[1].0, w[0].1, w[1].1
            ));
            out.retain(|&(e, _)| e != w[1].0);
        }
    }
    out
}

fn rollback_journals(
    pm: &Vol,
    geo: &Geometry,
    mode: Mode,
    problems: &mut Vec<String>,
) -> Result<()> {
    for cpu in 0..geo.cpus {
        if let Err(e) = crate::journal::recover(pm, geo, cpu, |o| journalable(geo, o)) {
            problems.push(e);
            if mode == Mode::Mount {
                return Err(FsError::Corrupt(problems.join("; ")));
            }
        }
    }
    Ok(())
}

type Inodes = (HashMap<Ino, InodeState>, Vec<Ino>);

fn load_inodes(pm: &Vol, geo: &Geometry, mode: Mode, problems: &mut Vec<String>) -> Result<Inodes> {
    let mut states: HashMap<Ino, InodeState> = HashMap::new();
    let mut free_inos = Vec::new();
    let mut tail_fixes = 0;
    for ino in 1..=geo.inodes() {
        let ioff = geo.inode_off(ino);
        let valid = pm.read_u64(ioff + INO_VALID_OFF);
        match valid {
            0 => free_inos.push(ino),
            1 => match load_inode(pm, geo, ino, &mut tail_fixes) {
                Ok(st) => {
                    states.insert(ino, st);
                }
                Err(e) => {
                    problems.push(e);
                    if mode == Mode::Mount {
                        return Err(FsError::Corrupt(problems.join("; ")));
                    }
                }
            },
            v => {
                problems.push(format!("inode {ino}: valid word has garbage value {v:#x}"));
                if mode == Mode::Mount {
                    return Err(FsError::Corrupt(problems.join("; ")));
                }
            }
        }
    }
    if tail_fixes > 0 {
        // Fence: stale bytes past the tails are gone before anything is appended.
        pm.fence();
    }
    Ok((states, free_inos))
}

#[allow(clippy::too_many_arguments)]
fn load_rest(
    pm: &Vol,
    geo: Geometry,
    mode: Mode,
    clean: bool,
    mut problems: Vec<String>,
    mut states: HashMap<Ino, InodeState>,
    mut free_inos: Vec<Ino>,
    chunks: Vec<(u64, u64)>,
) -> Result<Loaded> {
    let cb = geo.zone_chunk_blocks as u64;
    let chunk_runs: Vec<Run> = chunks.iter().map(|&(_, b)| (b, cb)).collect();
    // 5. Namespace: resolve names, link counts, orphans.
    check_namespace(&geo, &mut states, &mut problems);
    let orphans: Vec<Ino> = states
        .iter()
        .filter(|(&i, s)| i != ROOT_INO && s.nlink == 0)
        .map(|(&i, _)| i)
        .collect();
    for &o in &orphans {
        states.remove(&o);
        pm.store_u64(geo.inode_off(o) + INO_VALID_OFF, 0);
        pm.flush(geo.inode_off(o) + INO_VALID_OFF, 8);
        free_inos.push(o);
    }
    if !orphans.is_empty() {
        // Fence: orphans are freed on PM before their blocks can be reused.
        pm.fence();
    }
    if mode == Mode::Mount && !problems.is_empty() {
        return Err(FsError::Corrupt(problems.join("; ")));
    }

    // 6. Space.
    let mut log_pages = 0;
    let mut data_pages = 0;
    for s in states.values() {
        log_pages = (s.log.pages.len() as u64).saturating_add(log_pages);
        data_pages = (s.pages.len() as u64).saturating_add(data_pages);
    }
    let saved = if clean && orphans.is_empty() {
        match read_saved_freelist(pm, &geo) {
            Ok(s) => s,
            Err(e) => {
                // The logs, not the saved list, say what is free: a mount rebuilds
                // the list; fsck names the bad one.
                if mode == Mode::Fsck {
                    problems.push(e);
                }
                None
            }
        }
    } else {
        None
    };
    // A mount trusts a saved list only when it frees exactly the blocks no valid
    // inode owns: none of the owned blocks, and as many blocks as the data area
    // minus the owned ones (so none leaks). Otherwise it rebuilds the list from the
    // logs; fsck compares the two below and names the difference.
    let saved = saved.filter(|s| {
        if mode == Mode::Fsck {
            return true;
        }
        let owned = || {
            states
                .values()
                .flat_map(|st| st.log.pages.iter().copied().chain(st.data_blocks()))
        };
        let free: u64 = s.iter().map(|r| r.1).sum();
        let in_chunks = (chunk_runs.len() as u64).saturating_mul(cb);
        let chunk_blocks = || chunk_runs.iter().flat_map(|&(b, l)| b..b.saturating_add(l));
        first_owned_free(s, owned().chain(chunk_blocks())).is_none()
            && free
                .checked_add(owned().count() as u64)
                .and_then(|x| x.checked_add(in_chunks))
                == Some(geo.data_blocks())
    });
    if mode == Mode::Mount && saved.is_some() {
        // The full ownership table below is built only without a trusted list;
        // a block with two owners is refused either way.
        if let Some(b) = first_doubly_owned(&geo, &states, &chunk_runs) {
            return Err(FsError::Corrupt(format!(
                "block {b} is owned twice (by two inodes, or twice by one)"
            )));
        }
    }
    let free = match (mode, saved) {
        (Mode::Mount, Some(f)) => f,
        (_, saved) => {
            let used = ownership(&geo, &states, &chunk_runs, &mut problems);
            let computed = free_extents(&geo, &used);
            if let (Some(s), Mode::Fsck) = (saved, mode) {
                if coalesce(&s) != coalesce(&computed) {
                    problems.push(describe_freelist_mismatch(&s, &computed));
                }
            }
            computed
        }
    };
    if mode == Mode::Mount && !problems.is_empty() {
        return Err(FsError::Corrupt(problems.join("; ")));
    }
    Ok(Loaded {
        geo,
        clean,
        states,
        free_inos,
        free,
        chunks,
        problems,
        log_pages,
        data_pages,
    })
}
