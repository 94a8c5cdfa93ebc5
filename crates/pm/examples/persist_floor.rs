//! The persistence floor of one 128-byte random overwrite, per write scheme (and of a
//! 4 KiB overwrite and a 4 KiB read): only the
//! `pm` calls each scheme's critical path makes (no file system, no DRAM index, no
//! lock), at random places of a 576 MiB image on /dev/shm (pre-faulted), under each
//! PM profile. It bounds what any implementation of the schemes can reach here:
//!
//! - `page-cow` (NOVA): read the old 4 KiB page, 4 KiB non-temporal copy to a new
//!   block, a 64 B log entry flushed, fence, the 8 B log tail flushed, fence.
//! - `lawn-zone` (LAWN, slice to the zone): 128 B non-temporal into zone slots, fence,
//!   16 B descriptor (16-byte atomic store) flushed, fence; `lawn-file`: the same with the 128 B
//!   going to a random place of the file (the slice goes back); `-clwb`: the 128 B
//!   stored through the cache and written back with clwb instead; `-pf`: the
//!   descriptor's line prefetched first; `-nt`: the descriptor stored non-temporally
//!   (`movntdq`, no flush) instead, as mnemofs did on images before format version 7.
//!   `lawn-zone-sum` (format version 7): the 128 B and the non-temporal descriptor,
//!   one fence for both (the descriptor carries the slices' CRC-32, whose computation
//!   is not a `pm` call and not in the floor).
//! - `finelog`: 128 B data + 64 B header redo record flushed, fence, 128 B in place
//!   flushed, fence, 8 B retire flushed, fence.
//! - `overwrite-4k` (the floor of a 4 KiB random overwrite of a whole page, as page
//!   CoW makes it): the new 4 KiB page and a 64 B log entry non-temporal, fence, the
//!   8 B log tail flushed, fence.
//! - `read-4k` (the floor of a 4 KiB random read): one 4 KiB copy out of the image.
//! - `smallfile-32k` (the floor of `mnemofs bench smallfiles`' create + 32 KiB write +
//!   close, docs/FORMAT.md §3): *create* — read the free slot (its generation), its
//!   104 B static part stored, its second line flushed (the first is written back with
//!   `valid` by the journal's flush of that line: a line persists its stores in order);
//!   the parent's 64 B Dentry entry non-temporal (a fresh parent log page every 63
//!   entries: 4 KiB non-temporal, the `next` word flushed); the child's fresh log page
//!   with its SetAttr and Link entries in it, 4 KiB non-temporal; the lite journal over
//!   4 words (parent tail; child head, tail, valid): 4 × 16 B records flushed, fence,
//!   header flushed, fence, the words stored and their 2 lines flushed, fence, retire
//!   flushed, fence; *write* — 32 KiB non-temporal to 8 fresh blocks, a 64 B Write entry
//!   non-temporal, fence, the tail flushed, fence. 6 fences, 7 flushes.
//!   `smallfile-32k-cycle` adds what the benchmark does once 1024 files are live:
//!   *unlink* the oldest — parent Dentry REMOVE and child Link(0), 64 B each
//!   non-temporal; the journal over 2 words (2 records, 1 line): 4 fences, 5 flushes;
//!   *inode free* — `valid = 0` flushed, fence. 11 fences, 13 flushes per file.
//!
//! `cargo run --release -p pm --example persist_floor [DIR]` (docs/BENCHMARKS.md): the
//! image goes in DIR (default /dev/shm); it prints the page size the kernel mapped it
//! with (a tmpfs mounted `huge=within_size` gives 2 MiB pages, /dev/shm usually 4 KiB).

use pm::{Pm, PmProfile};
use std::time::Instant;

const MIB: u64 = 1 << 20;
const OPS: u64 = 400_000;
/// Operations of the small-file schemes (each stores 36 KiB and more).
const FILE_OPS: u64 = 100_000;
/// Files the small-file cycle keeps live (the benchmark's default).
const LIVE: usize = 1024;

/// What the small-file schemes keep between operations: the parent's log position,
/// and the slot and log page of every live file (oldest first, a ring).
struct Files {
    parent_pos: u64,
    parent_page: u64,
    next_page: u64,
    live: Vec<(u64, u64)>,
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args_os().nth(1).map_or_else(
        || std::path::PathBuf::from("/dev/shm"),
        std::path::PathBuf::from,
    );
    let path = dir.join(format!("mnemofs-floor-{}", std::process::id()));
    let len = 576 * MIB;
    let mut pm = Pm::create(&path, len)?;
    // Pre-fault: a DAX mapping has no page-cache zero-fill on first touch.
    let zero = vec![0u8; MIB as usize];
    for m in 0..len / MIB {
        // SAFETY: this program has one thread, and the image is its own (a fresh file).
        unsafe { pm.write(m * MIB, &zero) };
    }
    println!(
        "image {}: mapping {}, pre-faulted",
        path.display(),
        pm.map_report()
    );
    // Regions: file pages 0..256 MiB, fresh blocks 256..512 MiB, log 512..520, zone
    // slots 520..568, descriptors 568..576.
    let (file, fresh, log, zone, desc) = (0, 256 * MIB, 512 * MIB, 520 * MIB, 568 * MIB);
    let data = [0x5au8; 128];
    let mut page = vec![0u8; 4096];
    println!("scheme              profile  ns/op  PM bytes/op  fences/op  flushes/op");
    for profile in [PmProfile::DRAM, PmProfile::OPTANE] {
        pm.set_profile(profile);
        for scheme in [
            "page-cow",
            "lawn-zone",
            "lawn-zone-clwb",
            "lawn-file",
            "lawn-file-clwb",
            "lawn-zone-pf",
            "lawn-file-pf",
            "lawn-zone-nt",
            "lawn-file-nt",
            "lawn-zone-sum",
            "finelog",
            "overwrite-4k",
            "read-4k",
            "smallfile-32k",
            "smallfile-32k-cycle",
        ] {
            let mut seed = 0x9e37_79b9_7f4a_7c15u64;
            let ops = if scheme.starts_with("smallfile") {
                FILE_OPS
            } else {
                OPS
            };
            let mut files = Files {
                parent_pos: log,
                parent_page: log,
                next_page: log + 4096,
                live: Vec::with_capacity(LIVE),
            };
            let c0 = pm.counters();
            let t0 = Instant::now();
            for i in 0..ops {
                let r = xorshift(&mut seed);
                match scheme {
                    "smallfile-32k" | "smallfile-32k-cycle" => {
                        // Inode slots in 568..576 MiB (128 B each), the journal block
                        // at 520 MiB, the parent's slot at 524 MiB and its log in
                        // 512..520 MiB; each file's log page and 8 data blocks (36 KiB)
                        // at a random place of 256..512 MiB.
                        let slot = desc + (r % (8 * MIB / 128)) * 128;
                        let lp =
                            fresh + (xorshift(&mut seed) % (256 * MIB / (36 * 1024))) * 36 * 1024;
                        let journal = zone;
                        let pslot = zone + 4 * MIB;
                        if scheme.ends_with("cycle") && files.live.len() == LIVE {
                            let (oslot, olp) = files.live.remove(0);
                            // SAFETY: this program has one thread, and the image is its own (a fresh file).
                            unsafe { smallfile_entry(&pm, &mut files, &page[..64]) };
                            // SAFETY: as above.
                            unsafe { pm.write_nt(olp + 256, &page[..64]) };
                            let words = [(pslot + 16, files.parent_pos), (oslot + 16, olp + 320)];
                            // SAFETY: as above.
                            unsafe { smallfile_journal(&pm, journal, &words) };
                            pm.store_u64(oslot, 0);
                            pm.flush(oslot, 8);
                            pm.fence();
                        }
                        // Create: the slot's generation, its static part.
                        let mut old = [0u8; 128];
                        // SAFETY: as above.
                        unsafe { pm.read(slot, &mut old) };
                        old[24..32].copy_from_slice(&i.to_le_bytes());
                        // SAFETY: as above.
                        unsafe { pm.write(slot + 24, &old[24..]) };
                        pm.flush(slot + 64, 64);
                        // SAFETY: as above.
                        unsafe { smallfile_entry(&pm, &mut files, &page[..64]) };
                        page[..8].copy_from_slice(&i.to_le_bytes());
                        // SAFETY: as above.
                        unsafe { pm.write_nt(lp, &page) };
                        let words = [
                            (pslot + 16, files.parent_pos),
                            (slot + 8, lp / 4096),
                            (slot + 16, lp + 192),
                            (slot, 1),
                        ];
                        // SAFETY: as above.
                        unsafe { smallfile_journal(&pm, journal, &words) };
                        // Write: 32 KiB of data, its entry, fence, tail, fence.
                        for b in 0..8 {
                            // SAFETY: as above.
                            unsafe { pm.write_nt(lp + 4096 + b * 4096, &page) };
                        }
                        // SAFETY: as above.
                        unsafe { pm.write_nt(lp + 192, &page[..64]) };
                        pm.fence();
                        pm.store_u64(slot + 16, lp + 256);
                        pm.flush(slot + 16, 8);
                        pm.fence();
                        if scheme.ends_with("cycle") {
                            files.live.push((slot, lp));
                        }
                    }
                    "page-cow" => {
                        let old = file + (r % (256 * MIB / 4096)) * 4096;
                        let new = fresh + (xorshift(&mut seed) % (256 * MIB / 4096)) * 4096;
                        // SAFETY: this program has one thread, and the image is its own (a fresh file).
                        unsafe { pm.read(old, &mut page) };
                        page[(r % 32) as usize * 128..][..128].copy_from_slice(&data);
                        // SAFETY: this program has one thread, and the image is its own (a fresh file).
                        unsafe { pm.write_nt(new, &page) };
                        let e = log + (i % (8 * MIB / 64)) * 64;
                        // SAFETY: this program has one thread, and the image is its own (a fresh file).
                        unsafe { pm.write(e, &data[..64]) };
                        pm.flush(e, 64);
                        pm.fence();
                        pm.store_u64(log, e);
                        pm.flush(log, 8);
                        pm.fence();
                    }
                    "lawn-zone" | "lawn-zone-clwb" | "lawn-file" | "lawn-file-clwb"
                    | "lawn-zone-pf" | "lawn-file-pf" | "lawn-zone-nt" | "lawn-file-nt" => {
                        let slot = r % (48 * MIB / 128);
                        let at = if scheme.starts_with("lawn-zone") {
                            zone + slot * 128
                        } else {
                            file + (xorshift(&mut seed) % (256 * MIB / 128)) * 128
                        };
                        let d = desc + (slot * 2 % (8 * MIB / 16)) * 16;
                        if scheme.ends_with("pf") {
                            pm.prefetch(d);
                        }
                        if scheme.ends_with("clwb") {
                            // SAFETY: this program has one thread, and the image is its own (a fresh file).
                            unsafe { pm.write(at, &data) };
                            pm.flush(at, 128);
                        } else {
                            // SAFETY: this program has one thread, and the image is its own (a fresh file).
                            unsafe { pm.write_nt(at, &data) };
                        }
                        pm.fence();
                        if scheme.ends_with("nt") {
                            // SAFETY: this program has one thread, and the image is its own (a fresh file).
                            unsafe { pm.store_u128_nt(d, (i as u128) << 64 | 1) };
                        } else {
                            // SAFETY: this program has one thread, and the image is its own (a fresh file).
                            unsafe { pm.store_u128(d, (i as u128) << 64 | 1) };
                            pm.flush(d, 16);
                        }
                        pm.fence();
                    }
                    "lawn-zone-sum" => {
                        let slot = r % (48 * MIB / 128);
                        let d = desc + (slot * 2 % (8 * MIB / 16)) * 16;
                        // SAFETY: this program has one thread, and the image is its own (a fresh file).
                        unsafe { pm.write_nt(zone + slot * 128, &data) };
                        // SAFETY: this program has one thread, and the image is its own (a fresh file).
                        unsafe { pm.store_u128_nt(d, (i as u128) << 64 | 1) };
                        // Fence: the slices and the descriptor are durable together
                        // (in either order: the sum tells a torn pair apart).
                        pm.fence();
                    }
                    "overwrite-4k" => {
                        let new = fresh + (r % (256 * MIB / 4096)) * 4096;
                        page[..8].copy_from_slice(&i.to_le_bytes());
                        // SAFETY: this program has one thread, and the image is its own (a fresh file).
                        unsafe { pm.write_nt(new, &page) };
                        let e = log + (i % (8 * MIB / 64)) * 64;
                        // SAFETY: this program has one thread, and the image is its own (a fresh file).
                        unsafe { pm.write_nt(e, &page[..64]) };
                        pm.fence();
                        pm.store_u64(log, e);
                        pm.flush(log, 8);
                        pm.fence();
                    }
                    "read-4k" => {
                        let at = file + (r % (256 * MIB / 4096)) * 4096;
                        // SAFETY: this program has one thread, and the image is its own (a fresh file).
                        unsafe { pm.read(at, &mut page) };
                        std::hint::black_box(&page);
                    }
                    _ => {
                        let rec = log + (i % (8 * MIB / 256)) * 256;
                        // SAFETY: this program has one thread, and the image is its own (a fresh file).
                        unsafe { pm.write(rec, &data) };
                        // SAFETY: this program has one thread, and the image is its own (a fresh file).
                        unsafe { pm.write(rec + 128, &data[..64]) };
                        pm.flush(rec, 192);
                        pm.fence();
                        let at = file + (r % (256 * MIB / 128)) * 128;
                        // SAFETY: this program has one thread, and the image is its own (a fresh file).
                        unsafe { pm.write(at, &data) };
                        pm.flush(at, 128);
                        pm.fence();
                        pm.store_u64(rec, 0);
                        pm.flush(rec, 8);
                        pm.fence();
                    }
                }
            }
            let ns = t0.elapsed().as_nanos() as u64 / ops;
            let c = pm.counters().since(&c0);
            println!(
                "{scheme:<19} {:<8} {ns:>5}  {:>11}  {:>9.2}  {:>9.2}",
                profile.name,
                c.bytes_written / ops,
                c.fences as f64 / ops as f64,
                c.flushes as f64 / ops as f64
            );
        }
    }
    drop(pm);
    std::fs::remove_file(&path)?;
    Ok(())
}

/// Appends one 64 B entry to the small-file schemes' parent log, non-temporally; a
/// fresh page (4 KiB non-temporal, linked by a flushed `next` word) when the page is
/// full.
///
/// # Safety
/// As for [`Pm::write_nt`]: nothing else accesses the parent log meanwhile.
unsafe fn smallfile_entry(pm: &Pm, f: &mut Files, entry: &[u8]) {
    if f.parent_pos + 64 > f.parent_page + 4032 {
        let p = f.next_page;
        f.next_page = if p + 4096 >= 520 * MIB {
            512 * MIB
        } else {
            p + 4096
        };
        let mut fresh = [0u8; 4096];
        fresh[4048..4056].copy_from_slice(&0x4D4E_4C4F_4750_4731u64.to_le_bytes());
        // SAFETY: the caller's contract.
        unsafe { pm.write_nt(p, &fresh) };
        pm.store_u64(f.parent_page + 4032, p / 4096);
        pm.flush(f.parent_page + 4032, 8);
        f.parent_page = p;
        f.parent_pos = p;
    }
    // SAFETY: the caller's contract.
    unsafe { pm.write_nt(f.parent_pos, entry) };
    f.parent_pos += 64;
}

/// The lite journal over `words` (docs/FORMAT.md §3, multi-inode commit): the
/// records (their old values read from PM) flushed, fence; the header flushed, fence;
/// the words stored and each of their lines flushed once, fence; the retirement
/// flushed, fence.
///
/// # Safety
/// As for [`Pm::write`]: nothing else accesses the journal block or the words.
unsafe fn smallfile_journal(pm: &Pm, journal: u64, words: &[(u64, u64)]) {
    let mut recs = [0u8; 64];
    for (r, &(off, _)) in recs.chunks_exact_mut(16).zip(words) {
        r[..8].copy_from_slice(&off.to_le_bytes());
        r[8..].copy_from_slice(&pm.read_u64(off).to_le_bytes());
    }
    let n = words.len() * 16;
    // SAFETY: the caller's contract.
    unsafe { pm.write(journal + 64, &recs[..n]) };
    pm.flush(journal + 64, n as u64);
    // Fence: the records (and the entries, non-temporal) are durable before the header.
    pm.fence();
    pm.store_u64(journal, 0x4A4E << 48 | (words.len() as u64) << 32);
    pm.flush(journal, 8);
    // Fence: the transaction is active before any word changes in place.
    pm.fence();
    let mut last_line = u64::MAX;
    for &(off, v) in words {
        pm.store_u64(off, v);
    }
    for &(off, _) in words {
        if off & !63 != last_line {
            pm.flush(off, 8);
            last_line = off & !63;
        }
    }
    // Fence: the new words are durable before the retirement.
    pm.fence();
    pm.store_u64(journal, 0);
    pm.flush(journal, 8);
    // Fence: the retirement is durable before the operation returns.
    pm.fence();
}
