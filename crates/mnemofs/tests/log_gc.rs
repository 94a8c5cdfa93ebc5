//! Scenario: one 4 KiB block of a file overwritten 1,000,000 times. Log GC must keep
//! the file's log small, and unlinking the file must give the space back.

mod common;
use mnemofs::ROOT_INO;

#[test]
fn overwriting_one_block_forever_keeps_the_log_small() {
    let img = common::fresh(64 << 20);
    let fs = common::mount(&img);
    let free_before = fs.statfs().blocks_free;
    let f = fs.create(ROOT_INO, b"hot", 0o644, 0, 0).unwrap();
    let mut block = vec![0u8; 4096];
    let mut max_log = 0;
    let n: u64 = std::env::var("GC_OVERWRITES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    for i in 0..n {
        block[..8].copy_from_slice(&i.to_le_bytes());
        fs.write(f.ino, 4096, &block).unwrap();
        if i % 1000 == 0 {
            max_log = max_log.max(fs.log_bytes(f.ino).unwrap());
        }
    }
    let log = fs.log_bytes(f.ino).unwrap();
    max_log = max_log.max(log);
    println!("after {n} overwrites: log {log} bytes, largest seen {max_log} bytes");
    assert!(max_log < 64 << 10, "log grew to {max_log} bytes");
    let mut back = vec![0u8; 8];
    fs.read(f.ino, 4096, &mut back).unwrap();
    assert_eq!(u64::from_le_bytes(back.try_into().unwrap()), n - 1);
    fs.unlink(ROOT_INO, b"hot").unwrap();
    let free_after = fs.statfs().blocks_free;
    println!("free blocks: before {free_before}, after unlink {free_after}");
    assert!(free_after as f64 >= free_before as f64 * 0.99);
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

#[test]
fn directory_churn_is_compacted() {
    let img = common::fresh(64 << 20);
    let fs = common::mount(&img);
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap();
    for i in 0..20_000u32 {
        let name = format!("file-{}", i % 7);
        let _ = fs.create(d.ino, name.as_bytes(), 0o644, 0, 0);
        let _ = fs.unlink(d.ino, format!("file-{}", (i + 3) % 7).as_bytes());
    }
    let log = fs.log_bytes(d.ino).unwrap();
    assert!(log <= 16 * 4096, "directory log {log} bytes");
    drop(fs);
    let fs = common::mount(&img);
    assert!(fs.readdir(d.ino, 0, 100).unwrap().len() <= 9);
    fs.unmount().unwrap();
    assert!(mnemofs::fsck(&img.path).unwrap().is_clean());
}
