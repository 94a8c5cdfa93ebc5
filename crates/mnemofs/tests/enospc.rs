//! Scenario: filling the device returns ENOSPC and leaves a consistent file system;
//! after deleting files, writes succeed again.

mod common;
use mnemofs::{FsError, ROOT_INO};

#[test]
fn full_device_then_recovery_of_space() {
    let img = common::fresh(16 << 20);
    let fs = common::mount(&img);
    let chunk = vec![0xabu8; 256 << 10];
    let mut files = Vec::new();
    let mut full = false;
    'outer: for i in 0..1000u32 {
        let f = match fs.create(ROOT_INO, format!("f{i}").as_bytes(), 0o644, 0, 0) {
            Ok(f) => f,
            Err(FsError::NoSpace) => {
                full = true;
                break;
            }
            Err(e) => panic!("{e}"),
        };
        files.push(f.ino);
        for k in 0..8u64 {
            match fs.write(f.ino, k * chunk.len() as u64, &chunk) {
                Ok(_) => {}
                Err(FsError::NoSpace) => {
                    full = true;
                    break 'outer;
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
    assert!(full, "never ran out of space");
    // Use up the last pages one at a time, then even one byte in a new page fails.
    let mut off = 0;
    while fs.write(files[0], (64 << 20) + off, &[1u8; 4096]).is_ok() {
        off += 4096;
    }
    assert_eq!(
        fs.write(files[0], 1 << 30, b"x").unwrap_err().errno(),
        libc::ENOSPC
    );
    assert_eq!(fs.statfs().blocks_avail, 0);
    // Metadata operations that free space still work on a full device.
    for i in 0..files.len() / 2 {
        fs.unlink(ROOT_INO, format!("f{i}").as_bytes()).unwrap();
    }
    let last = *files.last().unwrap();
    fs.write(last, 0, &chunk).unwrap();
    drop(fs);
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    let fs = common::mount(&img);
    let mut b = vec![0u8; 16];
    fs.read(last, 0, &mut b).unwrap();
    assert_eq!(b, vec![0xab; 16]);
    fs.unmount().unwrap();
}
