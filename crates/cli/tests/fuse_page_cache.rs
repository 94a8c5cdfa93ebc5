//! Scenario: files opened read-only are read through the kernel page cache, and it
//! stays coherent with every write: through another descriptor, by another process,
//! by parallel direct-I/O writers, and with truncate, hole punch and reopening
//! (`FOPEN_KEEP_CACHE`). A read that starts after a write returned never returns the
//! old bytes. fsync(2) succeeds without a round trip (the daemon told the kernel it
//! needs none) and the data it covers is durable (it was when the write returned).

mod common;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn page(v: u64) -> Vec<u8> {
    let mut p = vec![0u8; 4096];
    for c in p.chunks_mut(8) {
        c.copy_from_slice(&v.to_le_bytes());
    }
    p
}

fn version(p: &[u8]) -> u64 {
    let v = u64::from_le_bytes(p[..8].try_into().unwrap());
    assert!(
        p.chunks(8).all(|c| c == v.to_le_bytes()),
        "a torn page: starts with version {v}"
    );
    v
}

/// Page reads the engine served so far (hits and misses of its read cache, which
/// count every page read that reaches the engine: the mount names the cache, which
/// `full` leaves off over DRAM).
fn engine_page_reads(mnt: &Path) -> u64 {
    let v = common::xattr::get(mnt, b"user.mnemofs.stats", 64 << 10).unwrap();
    let j: serde_json::Value = serde_json::from_slice(&v).unwrap();
    j["read_cache_hits"].as_u64().unwrap() + j["read_cache_misses"].as_u64().unwrap()
}

#[test]
fn read_only_opens_use_the_page_cache_coherently() {
    let e = common::env("256M");
    common::mount_with(&e, &["--read-cache", "rcache"]);
    let f = e.mnt.join("f");
    std::fs::write(&f, (0..16).flat_map(page).collect::<Vec<u8>>()).unwrap();
    let ro = std::fs::File::open(&f).unwrap();
    let rw = OpenOptions::new().read(true).write(true).open(&f).unwrap();
    let mut buf = vec![0u8; 4096];

    // The page cache serves a repeated read; a direct-I/O descriptor does not.
    ro.read_exact_at(&mut buf, 4096).unwrap();
    let before = engine_page_reads(&e.mnt);
    for _ in 0..10 {
        ro.read_exact_at(&mut buf, 4096).unwrap();
    }
    assert_eq!(
        engine_page_reads(&e.mnt),
        before,
        "cached reads reached the engine"
    );
    rw.read_exact_at(&mut buf, 4096).unwrap();
    assert!(
        engine_page_reads(&e.mnt) > before,
        "a read-write descriptor is direct I/O"
    );

    // Another descriptor of this process writes; the cached one reads it at once.
    for i in 0..1000u64 {
        let off = (i % 16) * 4096;
        ro.read_exact_at(&mut buf, off).unwrap();
        rw.write_all_at(&page(1000 + i), off).unwrap();
        ro.read_exact_at(&mut buf, off).unwrap();
        assert_eq!(version(&buf), 1000 + i, "stale page after a write returned");
    }

    // Another process writes (dd opens the file write-only: direct I/O).
    ro.read_exact_at(&mut buf, 0).unwrap();
    let src = e.dir.path().join("src");
    std::fs::write(&src, page(77)).unwrap();
    let o = Command::new("dd")
        .arg(format!("if={}", src.display()))
        .arg(format!("of={}", f.display()))
        .args(["bs=4096", "seek=0", "conv=notrunc", "status=none"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    ro.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(version(&buf), 77, "stale page after another process wrote");

    // Parallel direct-I/O writers, a cached reader: every read returns at least
    // the version whose write had returned before the read began.
    let done: Arc<Vec<AtomicU64>> = Arc::new((0..4).map(|_| AtomicU64::new(0)).collect());
    for p in 0..4u64 {
        rw.write_all_at(&page(0), p * 4096).unwrap();
    }
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (done, f) = (done.clone(), &f);
            s.spawn(move || {
                let fd = OpenOptions::new().write(true).open(f).unwrap();
                // Each writer has its own two pages, so each page's versions only
                // grow (two writers of one page may land in either order).
                for v in 1..=600u64 {
                    let p = w * 2 + v % 2;
                    fd.write_all_at(&page(v), p * 4096).unwrap();
                    done[p as usize].store(v, Ordering::SeqCst);
                }
            });
        }
        let (done, ro) = (done.clone(), &ro);
        s.spawn(move || {
            let mut buf = vec![0u8; 4096];
            for i in 0..3000u64 {
                let p = i % 4;
                let floor = done[p as usize].load(Ordering::SeqCst);
                ro.read_exact_at(&mut buf, p * 4096).unwrap();
                let v = version(&buf);
                assert!(
                    v >= floor,
                    "page {p}: read version {v} after {floor} returned"
                );
            }
        });
    });

    // Truncate and hole punch through the read-write descriptor.
    ro.read_exact_at(&mut buf, 8 * 4096).unwrap();
    rw.set_len(8 * 4096 + 100).unwrap();
    let n = ro.read_at(&mut buf, 8 * 4096).unwrap();
    assert_eq!(n, 100);
    rw.set_len(16 * 4096).unwrap();
    ro.read_exact_at(&mut buf, 8 * 4096).unwrap();
    assert!(
        buf[100..].iter().all(|&b| b == 0),
        "old bytes past a truncate"
    );
    ro.read_exact_at(&mut buf, 12 * 4096).unwrap();
    assert!(buf.iter().all(|&b| b == 0), "old bytes past a truncate");
    rw.write_all_at(&page(55), 5 * 4096).unwrap();
    ro.read_exact_at(&mut buf, 5 * 4096).unwrap();
    // SAFETY: a valid descriptor; punch one page, keep the size.
    let r = unsafe {
        libc::fallocate(
            std::os::unix::io::AsRawFd::as_raw_fd(&rw),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            5 * 4096,
            4096,
        )
    };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
    ro.read_exact_at(&mut buf, 5 * 4096).unwrap();
    assert!(buf.iter().all(|&b| b == 0), "old bytes after a hole punch");

    // The page cache is kept across opens: a write in between still shows.
    drop(ro);
    let ro = std::fs::File::open(&f).unwrap();
    ro.read_exact_at(&mut buf, 6 * 4096).unwrap();
    drop(ro);
    rw.write_all_at(&page(66), 6 * 4096).unwrap();
    let ro = std::fs::File::open(&f).unwrap();
    ro.read_exact_at(&mut buf, 6 * 4096).unwrap();
    assert_eq!(version(&buf), 66, "stale page in a reopened file");

    // fsync: success on files and directories (no round trip; already durable).
    rw.sync_all().unwrap();
    ro.sync_all().unwrap();
    std::fs::File::open(&e.mnt).unwrap().sync_all().unwrap();
    drop((ro, rw));
    common::unmount(&e);
    common::fsck_clean(&e);
    common::mount(&e);
    let mut all = std::fs::read(&f).unwrap();
    all.truncate(7 * 4096);
    assert_eq!(version(&all[6 * 4096..]), 66);
    common::unmount(&e);
}
