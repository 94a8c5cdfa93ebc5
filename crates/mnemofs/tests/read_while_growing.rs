//! Scenario: a reader reads a file with a buffer far larger than the file (as a
//! whole-file read does) while a writer keeps appending to it. The read locks only
//! the pages the file had (docs/ARCHITECTURE.md, data plane), so this checks that
//! such a read still returns everything the file held when it started, nothing
//! torn, and nothing past the end.

mod common;
use mnemofs::ROOT_INO;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The byte the writer puts at file position `p` (never 0, so a hole shows).
fn pattern(p: u64) -> u8 {
    (p / 1000 % 250) as u8 + 1
}

#[test]
fn big_buffer_reads_of_a_growing_file() {
    let img = common::fresh(128 << 20);
    let fs = Arc::new(common::mount(&img));
    let f = fs.create(ROOT_INO, b"log", 0o644, 0, 0).unwrap().ino;
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (fs, done) = (fs.clone(), done.clone());
        std::thread::spawn(move || {
            // 20,000 appends of 700 bytes: partial pages, page crossings, 14 MB in all.
            let mut off = 0u64;
            for _ in 0..20_000 {
                let chunk: Vec<u8> = (off..off + 700).map(pattern).collect();
                fs.write(f, off, &chunk).unwrap();
                off += 700;
            }
            done.store(true, Ordering::Release);
        })
    };
    let mut buf = vec![0u8; 16 << 20];
    let mut reads = 0u64;
    while !done.load(Ordering::Acquire) || reads < 10 {
        let start = (reads * 7919) % 4096;
        let before = fs.getattr(f).unwrap().size;
        let n = fs.read(f, start, &mut buf).unwrap() as u64;
        let after = fs.getattr(f).unwrap().size;
        // Everything the file held when the read started, and nothing past its end.
        assert!(
            start + n >= before,
            "read {n} at {start} of a file of {before}"
        );
        assert!(
            n == 0 || start + n <= after,
            "read past the end: {n} at {start}, size {after}"
        );
        for (i, &b) in buf[..n as usize].iter().enumerate() {
            let p = start + i as u64;
            assert_eq!(b, pattern(p), "byte {p} of a read of {n} at {start}");
        }
        reads += 1;
        assert!(reads < 1_000_000, "the writer never finished");
    }
    writer.join().unwrap();
    let size = fs.getattr(f).unwrap().size;
    assert_eq!(size, 20_000 * 700);
    let n = fs.read(f, 0, &mut buf).unwrap() as u64;
    assert_eq!(n, size);
}
