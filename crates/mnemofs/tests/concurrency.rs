//! Scenario: many threads at once — namespace churn in private and shared
//! directories, writers of private files and of one shared file, renames across
//! directories — then fsck must be clean and every private file must hold exactly
//! what its thread wrote.

mod common;
use mnemofs::{RenameFlags, ROOT_INO};
use std::sync::Arc;

#[test]
fn parallel_operations_stay_consistent() {
    let img = common::fresh(128 << 20);
    let fs = Arc::new(common::mount(&img));
    let shared_dir = fs.mkdir(ROOT_INO, b"shared", 0o755, 0, 0).unwrap().ino;
    let shared_file = fs.create(ROOT_INO, b"big", 0o644, 0, 0).unwrap().ino;
    let threads: Vec<_> = (0..6u64)
        .map(|t| {
            let fs = fs.clone();
            std::thread::spawn(move || {
                let mine = fs
                    .mkdir(ROOT_INO, format!("t{t}").as_bytes(), 0o755, 0, 0)
                    .unwrap()
                    .ino;
                let f = fs.create(mine, b"data", 0o644, 0, 0).unwrap().ino;
                let mut expect = vec![0u8; 64 << 10];
                for i in 0..400u64 {
                    let off = (i * 7919 + t * 131) % (60 << 10);
                    let len = 1 + (i * 31 % 4000) as usize;
                    let byte = (t * 40 + i % 40) as u8;
                    fs.write(f, off, &vec![byte; len]).unwrap();
                    expect[off as usize..off as usize + len].fill(byte);
                    // Shared file: each thread owns a 4 KiB block.
                    fs.write(shared_file, t * 4096, &[byte; 4096]).unwrap();
                    // Shared directory churn.
                    let n = format!("n{}", i % 5);
                    let _ = fs.create(shared_dir, n.as_bytes(), 0o644, 0, 0);
                    let _ = fs.rename(
                        shared_dir,
                        n.as_bytes(),
                        mine,
                        b"moved",
                        RenameFlags::default(),
                    );
                    let _ = fs.unlink(mine, b"moved");
                    let _ = fs.mkdir(shared_dir, format!("d{}", i % 3).as_bytes(), 0o755, 0, 0);
                    let _ = fs.rmdir(shared_dir, format!("d{}", (i + 1) % 3).as_bytes());
                }
                let size = fs.getattr(f).unwrap().size as usize;
                let mut got = vec![0u8; size];
                fs.read(f, 0, &mut got).unwrap();
                assert!(got[..] == expect[..size], "thread {t}: contents differ");
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let fs = Arc::try_unwrap(fs).ok().unwrap();
    for t in 0..6u64 {
        let mut b = vec![0u8; 4096];
        fs.read(shared_file, t * 4096, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == b[0]), "block {t} torn");
    }
    drop(fs);
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}
