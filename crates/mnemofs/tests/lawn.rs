//! Scenario: LAWN alternate writing (and the fine-log baseline) keep every byte
//! across clean and abandoned remounts, interleaved with page CoW, truncate, hole
//! punch and unlink; a full zone falls back to page CoW; write-back (inline and the
//! background thread) moves slices home; fsck checks the descriptor table.

mod common;

use common::Img;
use mnemofs::{Fs, Ino, MkfsOptions, MountOptions, SetAttr, SmallWriteMode, ROOT_INO};
use pm::Store16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

const PUNCH: i32 = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;

fn image(size: u64, zone_percent: u32, slot_size: u32) -> Img {
    let img = common::fresh_empty();
    mnemofs::mkfs(
        &img.path,
        &MkfsOptions {
            size,
            cpus: 2,
            inodes: 0,
            force: false,
            zone_percent,
            slot_size,
            label: Vec::new(),
        },
    )
    .unwrap();
    img
}

fn opts(mode: SmallWriteMode, thread: bool) -> MountOptions {
    MountOptions {
        small_write: mode,
        lawn_writeback_thread: thread,
        ..common::opts()
    }
}

fn mount(img: &Img, mode: SmallWriteMode, thread: bool) -> Fs {
    mnemofs::mount(&img.path, &opts(mode, thread)).unwrap()
}

/// The files and what they must hold.
#[derive(Default)]
struct Files {
    data: HashMap<Vec<u8>, Vec<u8>>,
}

impl Files {
    fn ino(fs: &Fs, name: &[u8]) -> Ino {
        fs.lookup(ROOT_INO, name).unwrap().ino
    }

    fn write(&mut self, fs: &Fs, name: &[u8], off: u64, bytes: &[u8]) {
        fs.write(Self::ino(fs, name), off, bytes).unwrap();
        let d = self.data.get_mut(name).unwrap();
        let end = off as usize + bytes.len();
        if d.len() < end {
            d.resize(end, 0);
        }
        d[off as usize..end].copy_from_slice(bytes);
    }

    fn check(&self, fs: &Fs, when: &str) {
        for (name, want) in &self.data {
            let ino = Self::ino(fs, name);
            assert_eq!(fs.getattr(ino).unwrap().size, want.len() as u64, "{when}");
            let mut got = vec![0u8; want.len() + 10];
            let n = fs.read(ino, 0, &mut got).unwrap();
            assert_eq!(n, want.len(), "{when}");
            if got[..n] != want[..] {
                let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
                panic!(
                    "{when}: {} differs at byte {at}",
                    String::from_utf8_lossy(name)
                );
            }
            // Unaligned small reads see the same bytes.
            for off in [0usize, 63, 64, 100, 4095, 4096, 5000] {
                if off < want.len() {
                    let mut b = [0u8; 77];
                    let n = fs.read(ino, off as u64, &mut b).unwrap();
                    assert_eq!(b[..n], want[off..off + n], "{when}: read at {off}");
                }
            }
        }
    }
}

fn bytes(rng: &mut StdRng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.random()).collect()
}

/// Sub-page writes over files with page CoW, truncate, punch and unlink between.
fn workload(fs: &Fs, files: &mut Files, rng: &mut StdRng, rounds: usize) {
    for r in 0..rounds {
        let name = format!("f{}", rng.random_range(0..4)).into_bytes();
        if !files.data.contains_key(&name) {
            fs.create(ROOT_INO, &name, 0o644, 0, 0).unwrap();
            files.data.insert(name.clone(), Vec::new());
            let b = bytes(rng, 5 * 4096 + 123);
            files.write(fs, &name, 0, &b);
        }
        let size = files.data[&name].len() as u64;
        match rng.random_range(0..20) {
            0 => {
                // Whole-page CoW over slices.
                let pg = rng.random_range(0..(size / 4096).max(1));
                let b = bytes(rng, 4096);
                files.write(fs, &name, pg * 4096, &b);
            }
            1 => {
                let to = rng.random_range(0..size + 3000);
                let ino = Files::ino(fs, &name);
                fs.setattr(
                    ino,
                    &SetAttr {
                        size: Some(to),
                        ..Default::default()
                    },
                )
                .unwrap();
                files.data.get_mut(&name).unwrap().resize(to as usize, 0);
            }
            2 if size > 0 => {
                let off = rng.random_range(0..size);
                let len = rng.random_range(1..6000);
                fs.fallocate(Files::ino(fs, &name), off, len, PUNCH)
                    .unwrap();
                let d = files.data.get_mut(&name).unwrap();
                let end = ((off + len) as usize).min(d.len());
                d[off as usize..end].fill(0);
            }
            3 if r % 7 == 0 => {
                fs.unlink(ROOT_INO, &name).unwrap();
                files.data.remove(&name);
            }
            _ if size > 0 => {
                // Sub-page overwrite inside the file; often the same aligned slices
                // again, so writes alternate between zone and file.
                let (off, len) = if rng.random_bool(0.5) {
                    let off = rng.random_range(0..(size / 128).max(1)) * 128;
                    (off, 128)
                } else {
                    let off = rng.random_range(0..size);
                    (off, rng.random_range(1..1500))
                };
                let len = len.min((size - off) as usize).max(1);
                let b = bytes(rng, len);
                files.write(fs, &name, off, &b);
            }
            _ => {}
        }
    }
}

#[test]
fn every_byte_reads_back_after_clean_and_abandoned_remounts() {
    let img = image(48 << 20, 3, 64);
    let mut rng = StdRng::seed_from_u64(7);
    let mut files = Files::default();
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    workload(&fs, &mut files, &mut rng, 3000);
    files.check(&fs, "before remount");
    let st = fs.stats();
    assert!(st.lawn_zone_writes > 100, "{st:?}");
    assert!(st.lawn_file_writes > 100, "{st:?}");
    assert!(st.lawn_slots_used > 0, "{st:?}");
    // Abandoned mount (no unmount): recovery rebuilds the zone from the descriptors.
    drop(fs);
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    assert!(r.lawn_runs > 0);
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    files.check(&fs, "after an abandoned mount");
    assert!(fs.stats().lawn_slots_used > 0);
    workload(&fs, &mut files, &mut rng, 1000);
    files.check(&fs, "after more writes");
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    // Clean remount, in another mode: page CoW merges the slices it meets.
    let fs = mount(&img, SmallWriteMode::Cow, false);
    files.check(&fs, "after a clean unmount");
    workload(&fs, &mut files, &mut rng, 300);
    files.check(&fs, "cow over slices");
    fs.unmount().unwrap();
    // Fine-log over pages that still have slices falls back to CoW for those.
    let fs = mount(&img, SmallWriteMode::Finelog, false);
    files.check(&fs, "finelog mount");
    workload(&fs, &mut files, &mut rng, 1000);
    files.check(&fs, "finelog writes");
    assert!(fs.stats().finelog_writes > 100);
    drop(fs);
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    files.check(&fs, "after an abandoned finelog mount");
    // Writing everything back leaves an empty zone and the same bytes.
    assert!(fs.lawn_writeback() > 0 || fs.stats().lawn_slots_used == 0);
    assert_eq!(fs.stats().lawn_slots_used, 0);
    files.check(&fs, "after write-back");
    fs.unmount().unwrap();
    assert!(mnemofs::fsck(&img.path).unwrap().is_clean());
}

#[test]
fn a_full_zone_falls_back_to_page_cow_and_write_back_frees_it() {
    // About 400 slots per CPU.
    let img = image(16 << 20, 1, 256);
    let mut rng = StdRng::seed_from_u64(3);
    let mut files = Files::default();
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    fs.create(ROOT_INO, b"big", 0o644, 0, 0).unwrap();
    files.data.insert(b"big".to_vec(), Vec::new());
    let b = bytes(&mut rng, 4 << 20);
    files.write(&fs, b"big", 0, &b);
    // Distinct slices: each goes to the zone until it is full.
    for i in 0..2000u64 {
        let b = bytes(&mut rng, 100);
        files.write(&fs, b"big", i * 2048 + 7, &b);
    }
    let st = fs.stats();
    // The zone is full; the rest of the writes took page CoW.
    assert!(st.small_write_fallbacks > 0, "{st:?}");
    assert!(st.lawn_zone_writes > 0 && st.lawn_slots_used > 0, "{st:?}");
    files.check(&fs, "full zone");
    assert!(fs.lawn_writeback() > 0);
    assert_eq!(fs.stats().lawn_slots_used, 0);
    files.check(&fs, "after write-back");
    fs.unmount().unwrap();

    // The background thread: it starts below 10 % free and writes LRU runs back
    // (growth off: a zone that may grow grows instead, tests/lawn_growth.rs).
    let fs = mnemofs::mount(
        &img.path,
        &MountOptions {
            lawn_fixed_zone: true,
            ..opts(SmallWriteMode::Lawn, true)
        },
    )
    .unwrap();
    files.check(&fs, "remount");
    for i in 0..2000u64 {
        let b = bytes(&mut rng, 100);
        files.write(&fs, b"big", i * 2048 + 300, &b);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while fs.stats().lawn_writebacks == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(fs.stats().lawn_writebacks > 0, "{:?}", fs.stats());
    files.check(&fs, "with the write-back thread");
    drop(fs);
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    files.check(&fs, "abandoned mount with the thread");
    fs.unmount().unwrap();
}

#[test]
fn fsck_reports_a_corrupted_descriptor() {
    let img = image(16 << 20, 3, 64);
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    let ino = fs.create(ROOT_INO, b"x", 0o644, 0, 0).unwrap().ino;
    fs.write(ino, 0, &[1u8; 8192]).unwrap();
    fs.write(ino, 128, &[2u8; 64]).unwrap();
    assert_eq!(fs.stats().lawn_zone_writes, 1);
    let g = *fs.geometry();
    fs.unmount().unwrap();
    assert!(mnemofs::fsck(&img.path).unwrap().is_clean());
    // Find the set descriptor and flip one bit of its block number.
    let mut raw = std::fs::read(&img.path).unwrap();
    let base = (g.desc_start * 4096) as usize;
    let at = (0..g.zone_slots as usize)
        .map(|i| base + i * 16)
        .find(|&o| raw[o..o + 16].iter().any(|&b| b != 0))
        .unwrap();
    raw[at + 8] ^= 4;
    std::fs::write(&img.path, &raw).unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(
        r.problems.iter().any(|p| p.contains("LAWN descriptor")),
        "{:?}",
        r.problems
    );
    // A mount treats it as clear: the file holds its older copy of those bytes.
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    let mut b = [0u8; 64];
    fs.read(ino, 128, &mut b).unwrap();
    assert_eq!(b, [1u8; 64]);
    fs.unmount().unwrap();
    assert!(mnemofs::fsck(&img.path).unwrap().is_clean());
}

#[test]
fn sub_page_writes_that_extend_or_span_pages_take_page_cow() {
    let img = image(16 << 20, 3, 64);
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    let ino = fs.create(ROOT_INO, b"x", 0o644, 0, 0).unwrap().ino;
    fs.write(ino, 0, &[1u8; 100]).unwrap(); // extends: CoW
    fs.write(ino, 50, &[2u8; 100]).unwrap(); // extends: CoW
    assert_eq!(fs.stats().lawn_zone_writes, 0);
    fs.write(ino, 0, &[3u8; 8192]).unwrap();
    fs.write(ino, 4000, &[4u8; 200]).unwrap(); // spans two pages: CoW
    assert_eq!(fs.stats().lawn_zone_writes, 0);
    fs.write(ino, 10, &[5u8; 20]).unwrap(); // inside: zone
    assert_eq!(fs.stats().lawn_zone_writes, 1);
    fs.write(ino, 0, &[6u8; 64]).unwrap(); // same slice: back to the file
    assert_eq!(fs.stats().lawn_file_writes, 1);
    assert_eq!(fs.stats().lawn_slots_used, 0);
    let mut b = vec![0u8; 8192];
    fs.read(ino, 0, &mut b).unwrap();
    let mut want = vec![3u8; 8192];
    want[4000..4200].fill(4);
    want[0..64].fill(6);
    assert_eq!(b, want);
    fs.unmount().unwrap();
}

/// Bytes stored, non-temporal bytes, flushes, fences.
type Counts = (u64, u64, u64, u64);

#[test]
fn counters_of_a_128_byte_write_are_exact_in_every_mode() {
    let img = image(32 << 20, 3, 64);
    // (mode, descriptor store, bytes stored, non-temporal bytes, flushes, fences) of a
    // 128 B overwrite at a slot boundary inside a mapped page; LAWN twice: to the
    // zone, then back to the file.
    let cases: [(SmallWriteMode, Store16, &[Counts]); 4] = [
        // Page CoW: the 4 KiB page and a 64 B entry (both non-temporal), the 8 B
        // tail (flushed).
        (
            SmallWriteMode::Cow,
            Store16::NonTemporal,
            &[(4096 + 64 + 8, 4096 + 64, 1, 2)],
        ),
        // Fine-log: a 64 B header + 128 B record (3 lines flushed), the data in place,
        // the 8 B retire.
        (
            SmallWriteMode::Finelog,
            Store16::NonTemporal,
            &[(192 + 128 + 8, 128, 4, 3)],
        ),
        // LAWN: the slices into two slots and the 16 B descriptor carrying their sum
        // (both non-temporal, no flush), one fence for both; then the slices into the
        // file, a fence, the 16 B clear, a fence.
        (
            SmallWriteMode::Lawn,
            Store16::NonTemporal,
            &[(128 + 16, 128 + 16, 0, 1), (128 + 16, 128 + 16, 0, 2)],
        ),
        // The same with the descriptor stored cached and its line written back.
        (
            SmallWriteMode::Lawn,
            Store16::Cached,
            &[(128 + 16, 128, 1, 1), (128 + 16, 128, 1, 2)],
        ),
    ];
    for (i, (mode, store, want)) in cases.iter().enumerate() {
        let o = MountOptions {
            lawn_desc_store: Some(*store),
            ..opts(*mode, false)
        };
        let fs = mnemofs::mount(&img.path, &o).unwrap();
        assert_eq!(fs.stats().lawn_desc_store, store.name());
        let name = format!("f{i}");
        let ino = fs
            .create(ROOT_INO, name.as_bytes(), 0o644, 0, 0)
            .unwrap()
            .ino;
        fs.write(ino, 0, &[1u8; 8192]).unwrap();
        for (k, &(bytes, nt, flushes, fences)) in want.iter().enumerate() {
            let before = fs.thread_counters();
            fs.write(ino, 640, &[2 + k as u8; 128]).unwrap();
            let d = fs.thread_counters().since(&before);
            let got = (d.bytes_written, d.nt_bytes_written, d.flushes, d.fences);
            assert_eq!(
                got,
                (bytes, nt, flushes, fences),
                "{mode:?} {store:?} write {k}"
            );
        }
        let mut b = [0u8; 128];
        fs.read(ino, 640, &mut b).unwrap();
        assert_eq!(b, [1 + want.len() as u8; 128]);
        fs.unmount().unwrap();
    }
}

#[test]
fn the_descriptor_store_is_measured_at_mount_and_both_ways_read_back() {
    // Unnamed, the mount measures which way is cheaper here and says which; named,
    // either way keeps every byte across a remount.
    let img = image(16 << 20, 3, 64);
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    let got = fs.stats().lawn_desc_store;
    assert!(
        [Store16::NonTemporal.name(), Store16::Cached.name()].contains(&got.as_str()),
        "{got}"
    );
    fs.unmount().unwrap();
    // Measuring again at later mounts, with runs in the zone (free slots' descriptors
    // share lines with live ones), must leave every run as it was.
    let mut rng = StdRng::seed_from_u64(5);
    let mut files = Files::default();
    for (i, store) in [
        Some(Store16::Cached),
        None,
        Some(Store16::NonTemporal),
        None,
        Some(Store16::Cached),
    ]
    .into_iter()
    .enumerate()
    {
        let o = MountOptions {
            lawn_desc_store: store,
            ..opts(SmallWriteMode::Lawn, false)
        };
        let fs = mnemofs::mount(&img.path, &o).unwrap();
        files.check(&fs, "after remount");
        if i == 0 {
            fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
            files.data.insert(b"f".to_vec(), Vec::new());
            let b = bytes(&mut rng, 4 * 4096);
            files.write(&fs, b"f", 0, &b);
        }
        for _ in 0..200 {
            // Inside one page (a write spanning two takes page CoW and is not a
            // small write).
            let off = rng.random_range(0..4) * 4096 + rng.random_range(0..=62) * 64;
            let b = bytes(&mut rng, 128);
            files.write(&fs, b"f", off, &b);
        }
        // Every one of the 200 sub-page writes went to the zone, to the file in
        // place, or (none here: the zone is large) to page CoW; counted in whichever
        // sub-zone its page hashes to.
        let st = fs.stats();
        assert!(st.lawn_zone_writes > 0 && st.lawn_file_writes > 0);
        assert_eq!(
            st.lawn_zone_writes + st.lawn_file_writes + st.small_write_fallbacks,
            200
        );
        files.check(&fs, "after writes");
        fs.unmount().unwrap();
    }
}

#[test]
fn a_run_in_another_sub_zone_than_its_page_is_written_back_at_mount() {
    // Builds before the page-hashed placement kept a file's runs in its inode's
    // CPU's sub-zone. Move a run to the other sub-zone by hand (slots and
    // descriptor): mount must write it back to its page, not lose it.
    let img = image(16 << 20, 3, 64);
    let mut rng = StdRng::seed_from_u64(11);
    let mut files = Files::default();
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
    files.data.insert(b"f".to_vec(), Vec::new());
    let b = bytes(&mut rng, 2 * 4096);
    files.write(&fs, b"f", 0, &b);
    let b = bytes(&mut rng, 128);
    files.write(&fs, b"f", 4096 + 256, &b);
    assert_eq!(fs.stats().lawn_zone_writes, 1);
    let geo = *fs.geometry();
    fs.unmount().unwrap();

    let pm = pm::Pm::open(&img.path, false).unwrap();
    let per = geo.zone_slots / geo.cpus as u64;
    let mut found = Vec::new();
    for i in 0..geo.zone_slots {
        let mut d = [0u8; 16];
        // SAFETY: the image is unmounted and this thread is the only one mapping it.
        unsafe { pm.read(geo.desc_off(i).get(), &mut d) };
        if d != [0u8; 16] {
            found.push((i, d));
        }
    }
    assert_eq!(found.len(), 1, "one run in the zone");
    let (at, d) = found[0];
    let to = ((at / per + 1) % geo.cpus as u64) * per + 10;
    let mut slots = vec![0u8; 2 * geo.slot_size as usize];
    // SAFETY: the image is unmounted and this thread is the only one mapping it.
    unsafe { pm.read(geo.slot_off(at).get(), &mut slots) };
    assert_eq!(slots[..128], b[..], "the run holds the slices");
    // SAFETY: the image is unmounted and this thread is the only one mapping it.
    unsafe { pm.write(geo.slot_off(to).get(), &slots) };
    // SAFETY: the image is unmounted and this thread is the only one mapping it.
    unsafe { pm.write(geo.desc_off(to).get(), &d) };
    // SAFETY: the image is unmounted and this thread is the only one mapping it.
    unsafe { pm.write(geo.desc_off(at).get(), &[0u8; 16]) };
    pm.persist(geo.slot_off(to).get(), slots.len() as u64);
    pm.persist(geo.desc_off(at).get(), 16);
    pm.persist(geo.desc_off(to).get(), 16);
    drop(pm);

    // Not a problem for fsck (mount moves it home), and every byte is back.
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    assert_eq!(fs.stats().lawn_slots_used, 0, "written back, not kept");
    files.check(&fs, "after mount");
    fs.unmount().unwrap();
    // Its descriptor is clear and the bytes are in the page itself.
    let pm = pm::Pm::open(&img.path, false).unwrap();
    let mut d = [0u8; 16];
    // SAFETY: the image is unmounted and this thread is the only one mapping it.
    unsafe { pm.read(geo.desc_off(to).get(), &mut d) };
    assert_eq!(d, [0u8; 16]);
    drop(pm);
    let fs = mount(&img, SmallWriteMode::Cow, false);
    files.check(&fs, "cow mount");
    fs.unmount().unwrap();
}

/// The first set descriptor of the fixed zone: its slot and 16 bytes.
fn first_run(img: &Img, geo: &mnemofs::format::Geometry) -> (u64, [u8; 16]) {
    let pm = pm::Pm::open(&img.path, false).unwrap();
    for i in 0..geo.zone_slots {
        let mut d = [0u8; 16];
        // SAFETY: the image is unmounted and this thread is the only one mapping it.
        unsafe { pm.read(geo.desc_off(i).get(), &mut d) };
        if d != [0u8; 16] {
            return (i, d);
        }
    }
    panic!("no run in the zone");
}

#[test]
fn a_run_whose_slots_do_not_match_its_sum_reads_as_not_written() {
    // What a crash before a zone write's one fence can leave: the descriptor durable,
    // a slot line not. Mount must read the run as never written (the file's older
    // bytes), clear it, and fsck must not call it a problem.
    let img = image(16 << 20, 3, 64);
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    let ino = fs.create(ROOT_INO, b"x", 0o644, 0, 0).unwrap().ino;
    fs.write(ino, 0, &[1u8; 8192]).unwrap();
    fs.write(ino, 4096 + 128, &[2u8; 128]).unwrap();
    assert_eq!(fs.stats().lawn_zone_writes, 1);
    let geo = *fs.geometry();
    assert!(geo.lawn_sums, "a new image has sum-format descriptors");
    drop(fs);
    let (at, d) = first_run(&img, &geo);
    // Word 0's upper half is the CRC-32 of the page number (1) and the run's two
    // slots.
    let pm = pm::Pm::open(&img.path, false).unwrap();
    let mut slots = [0u8; 128];
    // SAFETY: the image is unmounted and this thread is the only one mapping it.
    unsafe { pm.read(geo.slot_off(at).get(), &mut slots) };
    assert_eq!(slots, [2u8; 128]);
    assert_eq!(
        u32::from_le_bytes(d[4..8].try_into().unwrap()),
        mnemofs::format::crc(&[&1u64.to_le_bytes()[..], &slots[..]].concat())
    );
    drop(pm);
    // Intact, the run survives the abandoned mount.
    assert!(mnemofs::fsck(&img.path).unwrap().is_clean());
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    let mut b = [0u8; 128];
    fs.read(ino, 4096 + 128, &mut b).unwrap();
    assert_eq!(b, [2u8; 128]);
    drop(fs);
    // The second slot's line as it was before the write (the bytes of a free slot).
    let pm = pm::Pm::open(&img.path, false).unwrap();
    // SAFETY: the image is unmounted and this thread is the only one mapping it.
    unsafe { pm.write(geo.slot_off(at + 1).get(), &[0u8; 64]) };
    pm.persist(geo.slot_off(at + 1).get(), 64);
    drop(pm);
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    assert_eq!(fs.stats().lawn_slots_used, 0, "the torn run is not kept");
    fs.read(ino, 4096 + 128, &mut b).unwrap();
    assert_eq!(b, [1u8; 128], "the write reads as never made");
    fs.unmount().unwrap();
    let pm = pm::Pm::open(&img.path, false).unwrap();
    let mut d = [0u8; 16];
    // SAFETY: the image is unmounted and this thread is the only one mapping it.
    unsafe { pm.read(geo.desc_off(at).get(), &mut d) };
    assert_eq!(d, [0u8; 16], "cleared at mount");
}

#[test]
fn a_version_6_image_keeps_page_format_descriptors_and_their_two_fences() {
    // Images of earlier builds (versions 3 to 6) name the page in word 0 and take a
    // fence between a zone write's slots and its descriptor.
    let img = image(48 << 20, 3, 64);
    {
        let mut raw = std::fs::read(&img.path).unwrap();
        for sb in [0usize, 4096] {
            raw[sb + 8..sb + 12].copy_from_slice(&6u32.to_le_bytes());
            let c = mnemofs::format::crc(&raw[sb..sb + 120]);
            raw[sb + 120..sb + 124].copy_from_slice(&c.to_le_bytes());
        }
        std::fs::write(&img.path, &raw).unwrap();
    }
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    let geo = *fs.geometry();
    assert!(!geo.lawn_sums);
    let ino = fs.create(ROOT_INO, b"x", 0o644, 0, 0).unwrap().ino;
    fs.write(ino, 0, &[1u8; 8192]).unwrap();
    // The slots (non-temporal), a fence, the descriptor, a fence. The descriptor's
    // 16 bytes are non-temporal or cached and written back, whichever the mount chose
    // (measured, or forced by MNEMOFS_DESC_STORE: the suite runs both).
    let (nt, flushes) = match fs.stats().lawn_desc_store.as_str() {
        s if s == Store16::NonTemporal.name() => (128 + 16, 0),
        s if s == Store16::Cached.name() => (128, 1),
        s => panic!("descriptor store {s}"),
    };
    let before = fs.thread_counters();
    fs.write(ino, 4096 + 128, &[2u8; 128]).unwrap();
    let c = fs.thread_counters().since(&before);
    assert_eq!((c.nt_bytes_written, c.flushes, c.fences), (nt, flushes, 2));
    drop(fs);
    let (_, d) = first_run(&img, &geo);
    assert_eq!(u32::from_le_bytes(d[0..4].try_into().unwrap()) as u64, ino);
    assert_eq!(u32::from_le_bytes(d[4..8].try_into().unwrap()), 1, "page 1");
    // Every byte across abandoned and clean remounts, as on a new image.
    let mut rng = StdRng::seed_from_u64(5);
    let mut files = Files::default();
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    let mut b = [0u8; 128];
    fs.read(ino, 4096 + 128, &mut b).unwrap();
    assert_eq!(b, [2u8; 128]);
    workload(&fs, &mut files, &mut rng, 1500);
    assert!(fs.stats().lawn_slots_used > 0);
    drop(fs);
    assert!(mnemofs::fsck(&img.path).unwrap().is_clean());
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    files.check(&fs, "after an abandoned mount");
    fs.unmount().unwrap();
    let fs = mount(&img, SmallWriteMode::Lawn, false);
    files.check(&fs, "after a clean unmount");
    assert!(!fs.geometry().lawn_sums);
    fs.unmount().unwrap();
    assert!(mnemofs::fsck(&img.path).unwrap().is_clean());
}
