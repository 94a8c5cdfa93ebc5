//! Scenario: the DRAM read cache (RCache). Hot pages are copied into DRAM by the
//! background copier and served from there; every kind of write or free of a cached
//! page drops the copy before it returns (page CoW, LAWN zone and in-place writes,
//! LAWN write-back, fine-log in-place writes, truncate, hole punch, zero range,
//! unlink and reuse of the blocks), so no read after a write returns old bytes; the
//! budget holds; the cache starts empty at every mount.

mod common;
use mnemofs::{Fs, MountOptions, ReadCacheMode, SetAttr, SmallWriteMode, ROOT_INO};
use std::time::{Duration, Instant};

fn opts(small_write: SmallWriteMode, bytes: u64) -> MountOptions {
    MountOptions {
        exclusive: false,
        small_write,
        read_cache: ReadCacheMode::Rcache,
        read_cache_bytes: bytes,
        read_cache_threshold: 2,
        // Long enough that a test's reads fall in one window.
        read_cache_window_ms: 10_000,
        ..Default::default()
    }
}

fn page(seed: u8) -> Vec<u8> {
    (0..4096u32)
        .map(|i| (i as u8).wrapping_mul(7) ^ seed)
        .collect()
}

/// Reads page `pg` of `ino` until the copier has brought it into DRAM and a read is
/// served from there (the hit counter moves); then checks the bytes.
fn make_hot(fs: &Fs, ino: u64, pg: u64, want: &[u8]) {
    let t = Instant::now();
    let mut buf = vec![0u8; 4096];
    loop {
        let before = fs.stats().read_cache_hits;
        assert_eq!(fs.read(ino, pg * 4096, &mut buf).unwrap(), 4096);
        assert_eq!(buf, want, "page {pg} of inode {ino} read wrong bytes");
        if fs.stats().read_cache_hits > before {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "page {pg} never became a cache hit: {:?}",
            fs.stats()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn read_page(fs: &Fs, ino: u64, pg: u64) -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    let n = fs.read(ino, pg * 4096, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn hot_pages_are_served_from_dram_and_every_write_drops_them() {
    for mode in [
        SmallWriteMode::Cow,
        SmallWriteMode::Lawn,
        SmallWriteMode::Finelog,
    ] {
        let img = common::fresh(64 << 20);
        let fs = mnemofs::mount(&img.path, &opts(mode, 1 << 20)).unwrap();
        let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
        for pg in 0..8u64 {
            fs.write(f, pg * 4096, &page(pg as u8)).unwrap();
        }
        for pg in 0..8u64 {
            make_hot(&fs, f, pg, &page(pg as u8));
        }
        let s = fs.stats();
        assert_eq!(s.read_cache_mode, "rcache");
        assert!(s.read_cache_pages >= 8, "{s:?}");

        // Page CoW (a whole page).
        fs.write(f, 0, &page(100)).unwrap();
        assert_eq!(read_page(&fs, f, 0), page(100), "{mode:?}: page CoW");
        // A sub-page write (LAWN: zone or in place; fine-log: in place; CoW: CoW).
        make_hot(&fs, f, 1, &page(1));
        fs.write(f, 4096 + 100, b"sub-page").unwrap();
        let mut want = page(1);
        want[100..108].copy_from_slice(b"sub-page");
        assert_eq!(read_page(&fs, f, 1), want, "{mode:?}: first sub-page write");
        // The same bytes again: LAWN writes the file page in place this time.
        make_hot(&fs, f, 1, &want);
        fs.write(f, 4096 + 100, b"SUB-PAGE").unwrap();
        want[100..108].copy_from_slice(b"SUB-PAGE");
        assert_eq!(
            read_page(&fs, f, 1),
            want,
            "{mode:?}: second sub-page write"
        );
        // LAWN write-back moves zone slices into the block (contents unchanged).
        make_hot(&fs, f, 2, &page(2));
        fs.write(f, 2 * 4096 + 64, b"zone").unwrap();
        let mut want2 = page(2);
        want2[64..68].copy_from_slice(b"zone");
        make_hot(&fs, f, 2, &want2);
        fs.lawn_writeback();
        assert_eq!(read_page(&fs, f, 2), want2, "{mode:?}: after write-back");
        make_hot(&fs, f, 2, &want2);
        fs.write(f, 2 * 4096 + 64, b"ZONE").unwrap();
        want2[64..68].copy_from_slice(b"ZONE");
        assert_eq!(
            read_page(&fs, f, 2),
            want2,
            "{mode:?}: after write-back and a write"
        );
        // Hole punch, zero range, truncate.
        make_hot(&fs, f, 3, &page(3));
        fs.fallocate(
            f,
            3 * 4096,
            4096,
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        )
        .unwrap();
        assert_eq!(read_page(&fs, f, 3), vec![0u8; 4096], "{mode:?}: punch");
        make_hot(&fs, f, 4, &page(4));
        fs.fallocate(f, 4 * 4096, 4096, libc::FALLOC_FL_ZERO_RANGE)
            .unwrap();
        assert_eq!(
            read_page(&fs, f, 4),
            vec![0u8; 4096],
            "{mode:?}: zero range"
        );
        make_hot(&fs, f, 7, &page(7));
        make_hot(&fs, f, 6, &page(6));
        let trunc = |size| SetAttr {
            size: Some(size),
            ..Default::default()
        };
        fs.setattr(f, &trunc(6 * 4096 + 10)).unwrap();
        fs.setattr(f, &trunc(8 * 4096)).unwrap();
        let mut want6 = page(6);
        want6[10..].fill(0);
        assert_eq!(
            read_page(&fs, f, 6),
            want6,
            "{mode:?}: truncate inside a page"
        );
        assert_eq!(read_page(&fs, f, 7), vec![0u8; 4096], "{mode:?}: truncate");
        // Unlink frees the blocks; new files get them, with other bytes.
        make_hot(&fs, f, 5, &page(5));
        fs.unlink(ROOT_INO, b"f").unwrap();
        for i in 0..4u8 {
            let g = fs
                .create(ROOT_INO, format!("g{i}").as_bytes(), 0o644, 0, 0)
                .unwrap()
                .ino;
            for pg in 0..8u64 {
                fs.write(g, pg * 4096, &page(200 + i)).unwrap();
            }
            for pg in 0..8u64 {
                assert_eq!(
                    read_page(&fs, g, pg),
                    page(200 + i),
                    "{mode:?}: reused block"
                );
            }
        }
        let s = fs.stats();
        assert!(s.read_cache_invalidations > 0, "{s:?}");
        assert!(s.read_cache_pages * 4096 <= s.read_cache_bytes, "{s:?}");
        fs.unmount().unwrap();
        // Nothing of the cache is persistent.
        let fs = mnemofs::mount(&img.path, &opts(mode, 1 << 20)).unwrap();
        let s = fs.stats();
        assert_eq!((s.read_cache_pages, s.read_cache_hits), (0, 0), "{s:?}");
        fs.unmount().unwrap();
        let r = mnemofs::fsck(&img.path).unwrap();
        assert!(r.is_clean(), "{:?}", r.problems);
    }
}

/// A budget of 64 pages and a working set of 512: pages are evicted, the budget
/// holds, and every read returns the right bytes.
#[test]
fn the_budget_holds_under_a_working_set_larger_than_it() {
    let img = common::fresh(64 << 20);
    let fs = mnemofs::mount(&img.path, &opts(SmallWriteMode::Cow, 64 * 4096)).unwrap();
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    for pg in 0..512u64 {
        fs.write(f, pg * 4096, &page(pg as u8)).unwrap();
    }
    for round in 0..6 {
        for pg in 0..512u64 {
            assert_eq!(read_page(&fs, f, pg), page(pg as u8), "round {round}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = fs.stats();
    assert_eq!(s.read_cache_bytes, 64 * 4096);
    assert!(s.read_cache_pages <= 64, "{s:?}");
    assert!(s.read_cache_evictions > 0, "{s:?}");
    fs.unmount().unwrap();
}
