//! Mount-time scan of the descriptor table (after log replay): every valid
//! descriptor whose shadowed block is still the inode's mapping of that page names
//! the newest copy of its slices and goes into the DRAM sub-zones; the others are
//! stale (the page was CoW'd, truncated, punched or its inode freed, and the crash
//! came before the descriptor was cleared) and are cleared. fsck runs the same scan
//! and reports what a correct engine can never leave: descriptors that do not decode,
//! name impossible slots, overlap another run, or shadow a block that now holds
//! another page (a block reused while a descriptor still named it).
//!
//! On images of the sum format (version 7, `descriptor::Format::Sum`) a descriptor
//! names no page: its page is the one its inode maps to the named block, found from
//! the replayed page indexes of the inodes the table names. Such a run is kept only
//! when the CRC-32 of that page's number and its slots' bytes is its sum; otherwise
//! the crash cut its zone write before the write's one fence (descriptor durable, a
//! slot line not), the write never returned, and the run is cleared like a stale one
//! (a state a correct engine leaves, so fsck does not report it).
//!
//! A mount in a mode other than LAWN (`keep` false) writes every valid, current run
//! back to its page the same way and clears the table: LAWN state exists only in
//! LAWN mounts, and no byte an earlier LAWN mount left in the zone is lost.
//!
//! A valid, current run in a sub-zone other than its page's (`Geometry::lawn_sub`) was
//! written by a build that placed runs by the inode's CPU: mount writes it back to its
//! page (slots into the file, fence) before clearing it, so no byte is lost.

// Values read from PM are untrusted: arithmetic on them is checked (checked_*,
// saturating_* where an out-of-range result is refused later), enforced here.
#![deny(clippy::arithmetic_side_effects)]

use super::chunks::ZoneMap;
use super::descriptor::{decode, Decoded, Desc, Format, Key, Stored};
use super::zone::SubZone;
use crate::addr::BlockNo;
use crate::bugs::{self, Bug};
use crate::format::{Geometry, BLOCK, DESC_SIZE};
use crate::inode::InodeState;
use crate::recovery::Mode;
use crate::types::{FileKind, Ino};
use crate::vol::Vol;
use std::collections::HashMap;

/// How a stored descriptor names its page, for messages.
fn key_text(k: Key) -> String {
    match k {
        Key::Page(pg) => format!("page {pg}"),
        Key::Sum(sum) => format!("slot sum {sum:#010x}"),
    }
}

/// Scans the table; returns the sub-zones. Clears stale and bad descriptors when
/// mounting; lists problems when checking. Without `keep`, a mount writes every run
/// back to its page and returns empty sub-zones.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scan(
    pm: &Vol,
    geo: &Geometry,
    map: &ZoneMap,
    states: &HashMap<Ino, InodeState>,
    mode: Mode,
    keep: bool,
    problems: &mut Vec<String>,
) -> Vec<SubZone> {
    let per = geo.slots_per_cpu();
    let per_sub = geo.chunks_per_sub();
    let spc = geo.chunk_slots();
    let mut subs: Vec<SubZone> = if geo.zone_slots == 0 {
        Vec::new()
    } else {
        (0..geo.cpus as u64)
            .map(|c| SubZone::with_chunks(c.saturating_mul(per), per, map.layout(c)))
            .collect()
    };
    // The regions of descriptors: the fixed zone's table, then each chunk's (its
    // first slot number and slot count).
    let mut regions: Vec<(u64, u64)> = vec![(0, geo.zone_slots)];
    for e in 0..geo.zone_chunks as u64 {
        if map.block(e).is_none() {
            continue;
        }
        let (Some(sub), Some(k)) = (e.checked_div(per_sub), e.checked_rem(per_sub)) else {
            continue;
        };
        if let Some(z) = subs.get_mut(sub as usize) {
            z.add_chunk(k as usize);
            let first = e.saturating_mul(spc).saturating_add(geo.zone_slots);
            regions.push((first, spc));
        }
    }
    // The sub-zone of slot `at` and whether `count` slots from it stay in its
    // region (the fixed part of a sub-zone, or one chunk).
    let place = |at: u64, count: u64| -> (usize, bool) {
        if at < geo.zone_slots {
            let fits = at.checked_rem(per).unwrap_or(0).saturating_add(count) <= per;
            (at.checked_div(per).unwrap_or(0) as usize, fits)
        } else {
            let g = at.saturating_sub(geo.zone_slots);
            let e = g.checked_div(spc).unwrap_or(0);
            let fits = g.checked_rem(spc).unwrap_or(0).saturating_add(count) <= spc;
            (e.checked_div(per_sub).unwrap_or(0) as usize, fits)
        }
    };
    let mut clear: Vec<u64> = Vec::new();
    // Valid descriptors, in table order; resolved and placed after the scan.
    let mut found: Vec<(u64, Stored)> = Vec::new();
    let mut stale: Vec<(u64, Stored)> = Vec::new();
    let mut misplaced: Vec<(u64, Desc)> = Vec::new();
    let per_block = BLOCK / DESC_SIZE;
    let fmt = Format::of(geo);
    let mut buf = vec![0u8; BLOCK as usize];
    // The table lies inside the image (`Geometry::decode`); it is read a block of
    // descriptors at a time.
    let slots = regions.iter().flat_map(|&(first, n)| {
        (first..first.saturating_add(n))
            .step_by(per_block as usize)
            .map(move |slot| {
                (
                    slot,
                    per_block.min(first.saturating_add(n).saturating_sub(slot)),
                )
            })
    });
    for (slot, n) in slots {
        let bytes = &mut buf[..n.saturating_mul(DESC_SIZE) as usize];
        // A region's descriptors are consecutive on PM.
        pm.read(map.desc_off(slot), bytes);
        for (at, w) in (slot..).zip(bytes.chunks_exact(DESC_SIZE as usize)) {
            let mut w16 = [0u8; 16];
            w16.copy_from_slice(w);
            let v = u128::from_le_bytes(w16);
            match decode(v, fmt) {
                Decoded::Clear => {}
                Decoded::Invalid => {
                    // One half zero: a set or clear torn between its 8-byte halves
                    // (reads as clear; docs/FORMAT.md §2.9). Anything else is corrupt.
                    let torn = v as u64 == 0 || (v >> 64) as u64 == 0;
                    if mode == Mode::Fsck && !torn {
                        problems.push(format!(
                            "LAWN descriptor {at}: not a valid descriptor ({v:#034x})"
                        ));
                    }
                    clear.push(at);
                }
                Decoded::Valid(d) => found.push((at, d)),
            }
        }
    }
    // The pages that sum descriptors shadow: the page of each named inode that maps
    // the named block (the first one, should a bad image map a block twice).
    let mut pages_of: HashMap<Ino, HashMap<u64, Option<u64>>> = HashMap::new();
    for (_, d) in &found {
        if let Key::Sum(_) = d.key {
            pages_of.entry(d.ino).or_default().insert(d.block, None);
        }
    }
    for (ino, blocks) in pages_of.iter_mut() {
        let Some(st) = states.get(ino).filter(|s| s.kind == FileKind::Regular) else {
            continue;
        };
        for (pg, p) in st.pages.iter() {
            if let Some(e @ None) = blocks.get_mut(&p.block) {
                *e = Some(pg);
            }
        }
    }
    let s = geo.slot_size as u64;
    let mut bytes = vec![0u8; BLOCK as usize];
    for (at, d) in found {
        let (sub, fits) = place(at, d.count as u64);
        let shape_ok = geo.valid_ino(d.ino)
            && d.first.saturating_add(d.count) as u64 <= geo.slices_per_page()
            && fits;
        if !shape_ok {
            if mode == Mode::Fsck {
                problems.push(format!(
                    "LAWN descriptor {at}: names slots or slices out of range \
                     (inode {}, {}, slices {}+{})",
                    d.ino,
                    key_text(d.key),
                    d.first,
                    d.count
                ));
            }
            clear.push(at);
            continue;
        }
        // The page whose current mapping is the named block, if any.
        let page = match d.key {
            Key::Page(pg) => states
                .get(&d.ino)
                .is_some_and(|s| {
                    s.kind == FileKind::Regular && s.pages.get(pg).map(|p| p.block) == Some(d.block)
                })
                .then_some(pg),
            Key::Sum(_) => pages_of
                .get(&d.ino)
                .and_then(|b| b.get(&d.block).copied().flatten()),
        };
        let Some(pg) = page else {
            stale.push((at, d));
            clear.push(at);
            continue;
        };
        if let Key::Sum(want) = d.key {
            // A run whose page and slots do not give its sum: a zone write the crash
            // cut before its fence (the descriptor reached PM, a slot line did not),
            // which never returned, so it reads as not written; or (only if a clear
            // was missed) a descriptor of an older page that mapped this block.
            // (`first + count` is at most the slices of a page, so the run's bytes
            // fit one block.)
            let b = &mut bytes[..(d.count as u64).saturating_mul(s) as usize];
            pm.read(map.slot_off(at), b);
            if !bugs::on(Bug::LawnSumUnchecked) && super::descriptor::sum(pg, b) != want {
                clear.push(at);
                continue;
            }
        }
        let d = d.at_page(pg);
        if geo.lawn_sub(d.ino, d.pgoff) as usize != sub {
            misplaced.push((at, d));
            clear.push(at);
        } else if !subs[sub].insert(at, d, false) {
            if mode == Mode::Fsck {
                problems.push(format!(
                    "LAWN descriptor {at}: its slots overlap another run"
                ));
            }
            clear.push(at);
        }
    }
    if mode == Mode::Fsck && !stale.is_empty() {
        let mut owner: HashMap<u64, (Ino, u64)> = HashMap::new();
        for (&ino, s) in states {
            for (pg, p) in s.pages.iter() {
                owner.insert(p.block, (ino, pg));
            }
        }
        for (at, d) in stale {
            if let Some(&(i, pg)) = owner.get(&d.block) {
                problems.push(format!(
                    "LAWN descriptor {at}: shadows block {} of inode {} ({}), but that \
                     block now holds inode {i} page {pg} (a block was reused while a \
                     descriptor named it)",
                    d.block,
                    d.ino,
                    key_text(d.key)
                ));
            }
        }
    }
    if mode == Mode::Mount && !keep {
        for z in subs.iter_mut() {
            for r in z.lru_oldest(usize::MAX) {
                misplaced.push((r.slot, r.desc));
                clear.push(r.slot);
            }
        }
        subs.clear();
    }
    if mode == Mode::Mount && !misplaced.is_empty() {
        let s = geo.slot_size as u64;
        let mut buf = vec![0u8; BLOCK as usize];
        for &(at, d) in &misplaced {
            // Slices within one page (checked in the scan above).
            let b = &mut buf[..(d.count as u64).saturating_mul(s) as usize];
            pm.read(map.slot_off(at), b);
            pm.write_nt(BlockNo(d.block).at((d.first as u64).saturating_mul(s)), b);
        }
        // Fence: the misplaced runs' slices are in their pages before their
        // descriptors are cleared below.
        pm.fence();
    }
    if mode == Mode::Mount && !clear.is_empty() {
        for &at in &clear {
            let off = map.desc_off(at);
            super::descriptor::store(pm, pm::Store16::NonTemporal, off, 0);
        }
        // Fence: stale descriptors are clear before anything can reuse their slots
        // or the blocks they named.
        pm.fence();
    }
    subs
}
