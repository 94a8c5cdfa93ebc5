//! Scenario: the range-lock modes (pNOVA). Threads write and read random ranges of
//! one shared file in every lock mode; the final content equals the model, readers
//! never see a torn page of another thread's write, and the segment table of a big
//! sparse file stays small.

mod common;
use mnemofs::{LockMode, MountOptions, SetAttr, ROOT_INO};
use std::sync::Arc;

fn opts(lock: LockMode) -> MountOptions {
    MountOptions {
        lock,
        segment_size: 4096,
        exclusive: false,
        ..Default::default()
    }
}

#[test]
fn segment_lock_memory_of_a_1gib_file_touched_at_10_places() {
    let img = common::fresh(64 << 20);
    let fs = mnemofs::mount(&img.path, &opts(LockMode::Segment)).unwrap();
    let f = fs.create(ROOT_INO, b"big", 0o644, 0, 0).unwrap();
    fs.setattr(
        f.ino,
        &SetAttr {
            size: Some(1 << 30),
            ..Default::default()
        },
    )
    .unwrap();
    let mut x = 42u64;
    let places: Vec<u64> = (0..10)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 16) % ((1 << 30) - 4096)
        })
        .collect();
    for &off in &places {
        fs.write(f.ino, off, &[7u8; 4096]).unwrap();
    }
    // One thread: the file is private, its lock one word in the inode.
    assert_eq!(fs.lock_memory(f.ino).unwrap(), 0);
    // Two threads writing the same places: shared (the big-reader lock's counters),
    // and fine once one waited (words for the places touched only).
    let fs = Arc::new(fs);
    let ts: Vec<_> = (0..2u8)
        .map(|t| {
            let (fs, places) = (fs.clone(), places.clone());
            std::thread::spawn(move || {
                for _ in 0..50 {
                    for &off in &places {
                        fs.write(f.ino, off, &[t; 4096]).unwrap();
                    }
                }
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
    let bytes = fs.lock_memory(f.ino).unwrap();
    println!("segment lock memory, 1 GiB file, 10 places written by 2 threads: {bytes} bytes");
    assert!(bytes > 0 && bytes <= 1 << 20);
    Arc::into_inner(fs).unwrap().unmount().unwrap();
}

#[test]
fn shared_file_writers_in_every_mode_match_the_model() {
    const T: u64 = 4;
    const BLOCKS: u64 = 64;
    for mode in [LockMode::Inode, LockMode::Interval, LockMode::Segment] {
        let img = common::fresh(64 << 20);
        let fs = Arc::new(mnemofs::mount(&img.path, &opts(mode)).unwrap());
        let f = fs.create(ROOT_INO, b"shared", 0o644, 0, 0).unwrap().ino;
        fs.write(f, 0, &vec![0u8; (BLOCKS * 4096) as usize])
            .unwrap();
        // Thread t owns the blocks b with b % T == t; each write fills a random part
        // of one owned block with one byte value, so a torn page shows as two values.
        let threads: Vec<_> = (0..T)
            .map(|t| {
                let fs = fs.clone();
                std::thread::spawn(move || {
                    let mut model = vec![0u8; (BLOCKS * 4096) as usize];
                    let mut x = t + 11;
                    for i in 0..1500u64 {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        let b = ((x >> 33) % (BLOCKS / T)) * T + t;
                        let lo = (x >> 20) % 4096;
                        let len = 1 + (x >> 8) % (4096 - lo);
                        let v = (i % 250) as u8 + 1;
                        let off = b * 4096 + lo;
                        fs.write(f, off, &vec![v; len as usize]).unwrap();
                        model[off as usize..(off + len) as usize].fill(v);
                        // Read back an owned block: exactly what this thread wrote.
                        let mut got = vec![0u8; 4096];
                        fs.read(f, b * 4096, &mut got).unwrap();
                        assert!(got[..] == model[(b * 4096) as usize..((b + 1) * 4096) as usize]);
                    }
                    model
                })
            })
            .collect();
        let models: Vec<Vec<u8>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let mut all = vec![0u8; (BLOCKS * 4096) as usize];
        fs.read(f, 0, &mut all).unwrap();
        for b in 0..BLOCKS {
            let r = (b * 4096) as usize..((b + 1) * 4096) as usize;
            assert!(
                all[r.clone()] == models[(b % T) as usize][r],
                "{mode:?}: block {b}"
            );
        }
        let fs = Arc::try_unwrap(fs).ok().unwrap();
        drop(fs);
        let r = mnemofs::fsck(&img.path).unwrap();
        assert!(r.is_clean(), "{mode:?}: {:?}", r.problems);
    }
}

/// In the range-lock modes a writer alone with its file takes the locked append (a
/// 4 KiB overwrite: the tail is the one flushed line, as in the `inode` mode); once
/// another writer of the file was seen, writes keep to the concurrent append for a
/// while (1024 writes that meet nobody), then go back. Content stays the model's
/// throughout, and the volume is clean.
#[test]
fn a_writer_alone_takes_the_locked_append_and_shared_files_the_concurrent_one() {
    for lock in [LockMode::Interval, LockMode::Segment] {
        let img = common::fresh(64 << 20);
        let fs = Arc::new(mnemofs::mount(&img.path, &opts(lock)).unwrap());
        let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
        fs.write(f, 0, &vec![0u8; 64 * 4096]).unwrap();
        let contention = || fs.write_contention(f).unwrap();
        // Flushes of each of 8 overwrites of page `pg`, with `v`. The locked append
        // flushes one line (the tail; the entry is stored non-temporally), the
        // concurrent one at least two (the commit mark and the tail); a write that
        // also links a new log page or runs GC flushes more.
        let flushes = |pg: u64, v: u8| -> Vec<u64> {
            (0..8)
                .map(|_| {
                    let before = fs.thread_counters();
                    fs.write(f, pg * 4096, &[v; 4096]).unwrap();
                    fs.thread_counters().since(&before).flushes
                })
                .collect()
        };
        let alone = flushes(3, 1);
        assert_eq!(alone.iter().min(), Some(&1), "{lock:?}: alone: {alone:?}");
        assert_eq!(contention(), 0, "{lock:?}");

        // Four threads overwrite pages of their own (page p belongs to thread p % 4)
        // until the file has been seen shared.
        let mut model = [0u8; 64];
        let round = common::write_until_shared(&fs, f, 50, 400);
        let round = round.unwrap_or_else(|| panic!("{lock:?}: four writers never met"));
        for (pg, m) in model.iter_mut().enumerate() {
            *m = round.wrapping_add((pg % 4) as u8);
        }
        // Seen shared: the concurrent append, even for a writer alone now.
        let after = flushes(4, 3);
        assert!(after.iter().all(|&n| n >= 2), "{lock:?}: shared: {after:?}");
        model[4] = 3;
        // Lone writes count down to the locked append again.
        let mut n = 0u32;
        while contention() > 0 {
            let pg = 5 + (n % 50) as u64;
            fs.write(f, pg * 4096, &[9; 4096]).unwrap();
            model[pg as usize] = 9;
            n += 1;
            assert!(
                n <= 2048,
                "{lock:?}: still counted shared after {n} lone writes"
            );
        }
        let again = flushes(3, 7);
        assert_eq!(
            again.iter().min(),
            Some(&1),
            "{lock:?}: alone again: {again:?}"
        );
        model[3] = 7;
        let mut buf = vec![0u8; 64 * 4096];
        assert_eq!(fs.read(f, 0, &mut buf).unwrap(), buf.len());
        for (pg, &m) in model.iter().enumerate() {
            assert!(
                buf[pg * 4096..(pg + 1) * 4096].iter().all(|&b| b == m),
                "{lock:?}: page {pg}"
            );
        }
        drop(fs);
        let r = mnemofs::fsck(&img.path).unwrap();
        assert!(r.is_clean(), "{lock:?}: {:?}", r.problems);
    }
}
