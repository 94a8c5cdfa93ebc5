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
//!   (`movntdq`, no flush) instead, as mnemofs does.
//! - `finelog`: 128 B data + 64 B header redo record flushed, fence, 128 B in place
//!   flushed, fence, 8 B retire flushed, fence.
//! - `overwrite-4k` (the floor of a 4 KiB random overwrite of a whole page, as page
//!   CoW makes it): the new 4 KiB page and a 64 B log entry non-temporal, fence, the
//!   8 B log tail flushed, fence.
//! - `read-4k` (the floor of a 4 KiB random read): one 4 KiB copy out of the image.
//!
//! `cargo run --release -p pm --example persist_floor [DIR]` (docs/BENCHMARKS.md): the
//! image goes in DIR (default /dev/shm); it prints the page size the kernel mapped it
//! with (a tmpfs mounted `huge=within_size` gives 2 MiB pages, /dev/shm usually 4 KiB).

use pm::{Pm, PmProfile};
use std::time::Instant;

const MIB: u64 = 1 << 20;
const OPS: u64 = 400_000;

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
    println!("scheme          profile  ns/op  PM bytes/op  fences/op");
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
            "finelog",
            "overwrite-4k",
            "read-4k",
        ] {
            let mut seed = 0x9e37_79b9_7f4a_7c15u64;
            let c0 = pm.counters();
            let t0 = Instant::now();
            for i in 0..OPS {
                let r = xorshift(&mut seed);
                match scheme {
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
            let ns = t0.elapsed().as_nanos() as u64 / OPS;
            let c = pm.counters().since(&c0);
            println!(
                "{scheme:<15} {:<8} {ns:>5}  {:>11}  {:>9.2}",
                profile.name,
                c.bytes_written / OPS,
                c.fences as f64 / OPS as f64
            );
        }
    }
    drop(pm);
    std::fs::remove_file(&path)?;
    Ok(())
}
