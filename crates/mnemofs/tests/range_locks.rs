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
    let before = fs.lock_memory(f.ino).unwrap();
    let mut x = 42u64;
    for _ in 0..10 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let off = (x >> 16) % ((1 << 30) - 4096);
        fs.write(f.ino, off, &[7u8; 4096]).unwrap();
    }
    let bytes = fs.lock_memory(f.ino).unwrap();
    println!(
        "segment lock memory, 1 GiB file, 10 random 4 KiB writes: {bytes} bytes (before: {before})"
    );
    assert!(bytes > 0 && bytes <= 1 << 20);
    fs.unmount().unwrap();
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
