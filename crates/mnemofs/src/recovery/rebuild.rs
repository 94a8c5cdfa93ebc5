//! Step 6 of recovery: free space rebuilt from what the valid inodes own.

use crate::format::Geometry;
use crate::inode::InodeState;
use crate::space::Run;
use crate::types::Ino;
use std::collections::HashMap;
/// Marks every block owned by a valid inode; names blocks owned twice.
/// Owner mark of blocks in a LAWN growth chunk.
const CHUNK_OWNER: u64 = u64::MAX;
/// Owner mark of the blocks of a later device's inode table (never free).
const TABLE_OWNER: u64 = u64::MAX - 1;

/// The blocks of the later devices' inode tables, as runs.
fn table_runs(geo: &Geometry) -> impl Iterator<Item = Run> + '_ {
    (1..geo.devices as usize)
        .map(|d| (geo.dev_start(d), geo.dev_inode_blocks(d)))
        .filter(|r| r.1 != 0)
}

/// Marks every block owned by a valid inode or a LAWN chunk (`chunks`, inside the
/// data area); names blocks owned twice.
pub(super) fn ownership(
    geo: &Geometry,
    states: &HashMap<Ino, InodeState>,
    chunks: &[Run],
    problems: &mut Vec<String>,
) -> Vec<u64> {
    let mut owner = vec![0u64; geo.data_span() as usize];
    for (s, l) in table_runs(geo) {
        for b in s..s.saturating_add(l) {
            if let Some(o) = owner.get_mut(b.saturating_sub(geo.data_start) as usize) {
                *o = TABLE_OWNER;
            }
        }
    }
    for &(s, l) in chunks {
        for b in s..s.saturating_add(l) {
            if let Some(o) = owner.get_mut(b.saturating_sub(geo.data_start) as usize) {
                *o = CHUNK_OWNER;
            }
        }
    }
    let mut inos: Vec<&Ino> = states.keys().collect();
    inos.sort_unstable();
    for &ino in inos {
        let s = &states[&ino];
        let blocks = s.log.pages.iter().copied().chain(s.data_blocks());
        for b in blocks {
            // Replay checked that every block is in the data area.
            let i = b.saturating_sub(geo.data_start) as usize;
            if owner[i] == TABLE_OWNER {
                // Replay refused blocks outside the data area; kept as a guard.
                problems.push(format!(
                    "block {b} of inode {ino} is in a device's inode table"
                ));
            } else if owner[i] == CHUNK_OWNER {
                problems.push(format!(
                    "block {b} is owned twice (a LAWN zone chunk and inode {ino})"
                ));
            } else if owner[i] != 0 {
                problems.push(format!(
                    "block {b} is owned twice (inode {} and inode {ino})",
                    owner[i]
                ));
            } else {
                owner[i] = ino;
            }
        }
    }
    owner
}

/// The first block two valid inodes (or one inode twice) own, found with one bit per
/// data block: what a mount that trusts the saved free list checks instead of
/// building [`ownership`]'s full table.
pub(super) fn first_doubly_owned(
    geo: &Geometry,
    states: &HashMap<Ino, InodeState>,
    chunks: &[Run],
) -> Option<u64> {
    let mut bits = vec![0u64; geo.data_span().div_ceil(64) as usize];
    let chunk_blocks = chunks.iter().flat_map(|&(s, l)| s..s.saturating_add(l));
    let inode_blocks = states
        .values()
        .flat_map(|s| s.log.pages.iter().copied().chain(s.data_blocks()));
    {
        for b in chunk_blocks.chain(inode_blocks) {
            // Replay checked that every block is in the data area.
            let i = b.saturating_sub(geo.data_start);
            let w = bits.get_mut((i / 64) as usize)?;
            let m = 1u64 << (i % 64);
            if *w & m != 0 {
                return Some(b);
            }
            *w |= m;
        }
    }
    None
}

pub(super) fn free_extents(geo: &Geometry, owner: &[u64]) -> Vec<Run> {
    let mut v = Vec::new();
    let mut at = geo.data_start;
    // Runs of free (0) and owned blocks; `owner` covers the data area, so the
    // positions stay below `total_blocks`.
    for run in owner.chunk_by(|a, b| (*a == 0) == (*b == 0)) {
        let len = run.len() as u64;
        if run[0] == 0 {
            v.push((at, len));
        }
        at = at.saturating_add(len);
    }
    v
}

/// Sorted runs with adjacent runs merged (allocators split runs at CPU boundaries).
pub(super) fn coalesce(runs: &[Run]) -> Vec<Run> {
    let mut v = runs.to_vec();
    v.sort_unstable();
    let mut out: Vec<Run> = Vec::with_capacity(v.len());
    for (s, l) in v {
        match out.last_mut() {
            Some(last) if last.0.checked_add(last.1) == Some(s) => {
                last.1 = last.1.saturating_add(l)
            }
            _ => out.push((s, l)),
        }
    }
    out
}

pub(super) fn describe_freelist_mismatch(saved: &[Run], computed: &[Run]) -> String {
    let a: u64 = saved.iter().map(|r| r.1).sum();
    let b: u64 = computed.iter().map(|r| r.1).sum();
    if a < b {
        format!(
            "saved free list misses {} blocks (leaked blocks)",
            b.saturating_sub(a)
        )
    } else if a > b {
        format!(
            "saved free list has {} blocks that inodes own",
            a.saturating_sub(b)
        )
    } else {
        "saved free list differs from the blocks the inodes own".into()
    }
}
