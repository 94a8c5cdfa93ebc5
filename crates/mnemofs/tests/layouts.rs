//! Layouts (the page → block map a metadata server hands to cluster clients):
//! what a request for many pages of a small file returns, and what it locks.

mod common;

use mnemofs::{LockMode, MountOptions, SmallWriteMode, LAYOUT_MAX_PAGES, ROOT_INO};

fn cow_segment() -> MountOptions {
    MountOptions {
        exclusive: false,
        lock: LockMode::Segment,
        small_write: SmallWriteMode::Cow,
        ..Default::default()
    }
}

#[test]
fn a_small_files_layout_covers_its_pages_and_locks_only_them() {
    let img = common::fresh(64 << 20);
    let fs = mnemofs::mount(&img.path, &cow_segment()).unwrap();
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
    // Three pages and a bit: four pages, the last partial.
    let data = vec![7u8; 3 * 4096 + 100];
    assert_eq!(fs.write(f.ino, 0, &data).unwrap(), data.len());

    let l = fs.layout(f.ino, 0, LAYOUT_MAX_PAGES).unwrap();
    assert_eq!(l.size, data.len() as u64);
    assert_eq!(l.first, 0);
    assert_eq!(l.blocks.len(), 4);
    assert!(l.blocks.iter().all(|&b| b != 0), "{:?}", l.blocks);
    let mut uniq = l.blocks.clone();
    uniq.sort_unstable();
    uniq.dedup();
    assert_eq!(uniq.len(), 4, "a block twice: {:?}", l.blocks);
    // Asking for 65,536 pages of a 4-page file takes lock words for its pages, not
    // for 65,536 segments (one chunk of 256 words is 1 KiB; 65,536 would be 256).
    let mem = fs.lock_memory(f.ino).unwrap();
    assert!(mem <= 4096, "{mem} bytes of lock words for a 4-page file");

    // A window inside the file, a window past its end, and an empty one.
    let mid = fs.layout(f.ino, 1, 2).unwrap();
    assert_eq!((mid.first, mid.blocks.as_slice()), (1, &l.blocks[1..3]));
    let past = fs.layout(f.ino, 10, 5).unwrap();
    assert!(past.blocks.is_empty());
    assert_eq!(past.size, data.len() as u64);
    let none = fs.layout(f.ino, 0, 0).unwrap();
    assert!(none.blocks.is_empty());

    // A hole reads as block 0.
    assert_eq!(fs.write(f.ino, 8 * 4096, b"x").unwrap(), 1);
    let l = fs.layout(f.ino, 0, LAYOUT_MAX_PAGES).unwrap();
    assert_eq!(l.blocks.len(), 9);
    assert!(l.blocks[4..8].iter().all(|&b| b == 0), "{:?}", l.blocks);
    assert_ne!(l.blocks[8], 0);
}

#[test]
fn layouts_while_the_file_grows_see_every_page_below_the_size() {
    let img = common::fresh(64 << 20);
    let fs = std::sync::Arc::new(mnemofs::mount(&img.path, &cow_segment()).unwrap());
    let f = fs.create(ROOT_INO, b"g", 0o644, 0, 0).unwrap();
    let ino = f.ino;
    let writer = {
        let fs = fs.clone();
        std::thread::spawn(move || {
            for pg in 0..256u64 {
                fs.write(ino, pg * 4096, &[1u8; 4096]).unwrap();
            }
        })
    };
    let mut seen = 0;
    while seen < 256 * 4096 {
        let l = fs.layout(ino, 0, LAYOUT_MAX_PAGES).unwrap();
        // It describes exactly the pages of the size it read under its lock, and
        // each of them is written (the writer fills pages in order).
        let below = l.size.div_ceil(4096) as usize;
        assert_eq!(l.blocks.len(), below, "size {}", l.size);
        assert!(
            l.blocks.iter().take(below).all(|&b| b != 0),
            "a hole below the size {}: {:?}",
            l.size,
            l.blocks
        );
        seen = l.size;
    }
    writer.join().unwrap();
    let l = fs.layout(ino, 0, LAYOUT_MAX_PAGES).unwrap();
    assert_eq!(l.blocks.len(), 256);
}
