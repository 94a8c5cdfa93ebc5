//! Scenario: a POSIX workload through the FUSE mount, a clean unmount, fsck, a
//! remount, and everything is still there.

mod common;
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};

#[test]
fn posix_workload_survives_remount() {
    let e = common::env("128M");
    common::mount(&e);
    let m = &e.mnt;
    fs::create_dir_all(m.join("a/b/c")).unwrap();
    fs::write(m.join("a/hello.txt"), b"hello, mnemofs\n").unwrap();
    let big: Vec<u8> = (0..5_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    fs::write(m.join("a/b/big.bin"), &big).unwrap();
    // Overwrite in the middle, unaligned, through one open file.
    let mut f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(m.join("a/b/big.bin"))
        .unwrap();
    f.seek(SeekFrom::Start(12345)).unwrap();
    f.write_all(&[0xee; 7000]).unwrap();
    drop(f);
    let mut expect = big.clone();
    expect[12345..12345 + 7000].fill(0xee);
    // O_APPEND.
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(m.join("a/hello.txt"))
        .unwrap();
    f.write_all(b"second line\n").unwrap();
    drop(f);
    fs::rename(m.join("a/b/c"), m.join("c-moved")).unwrap();
    std::os::unix::fs::symlink("a/hello.txt", m.join("link")).unwrap();
    fs::hard_link(m.join("a/hello.txt"), m.join("c-moved/hard")).unwrap();
    fs::set_permissions(m.join("a/hello.txt"), fs::Permissions::from_mode(0o640)).unwrap();
    fs::write(m.join("gone"), b"x").unwrap();
    // Unlinked while open: still readable through the descriptor.
    let mut open = fs::File::open(m.join("gone")).unwrap();
    fs::remove_file(m.join("gone")).unwrap();
    let mut s = String::new();
    open.read_to_string(&mut s).unwrap();
    assert_eq!(s, "x");
    drop(open);
    let t = fs::OpenOptions::new()
        .write(true)
        .open(m.join("a/b/big.bin"))
        .unwrap();
    t.set_len(4_000_000).unwrap();
    drop(t);
    expect.truncate(4_000_000);
    let mut names: Vec<_> = fs::read_dir(m)
        .unwrap()
        .map(|d| d.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["a", "c-moved", "link"]);

    let check = || {
        assert_eq!(
            fs::read(m.join("a/hello.txt")).unwrap(),
            b"hello, mnemofs\nsecond line\n"
        );
        assert_eq!(
            fs::read(m.join("link")).unwrap(),
            b"hello, mnemofs\nsecond line\n"
        );
        assert_eq!(
            fs::read_link(m.join("link")).unwrap().to_str(),
            Some("a/hello.txt")
        );
        assert!(fs::read(m.join("a/b/big.bin")).unwrap() == expect);
        let md = fs::metadata(m.join("a/hello.txt")).unwrap();
        assert_eq!(md.mode() & 0o7777, 0o640);
        assert_eq!(md.nlink(), 2);
        assert_eq!(
            fs::metadata(m.join("c-moved/hard")).unwrap().ino(),
            md.ino()
        );
        assert!(!m.join("gone").exists());
        assert!(m.join("c-moved").is_dir());
        assert_eq!(fs::metadata(m.join("a")).unwrap().nlink(), 3);
    };
    check();
    common::unmount(&e);
    common::fsck_clean(&e);
    common::mount(&e);
    check();
    fs::remove_dir_all(m.join("a")).unwrap();
    fs::remove_dir_all(m.join("c-moved")).unwrap();
    fs::remove_file(m.join("link")).unwrap();
    assert_eq!(fs::read_dir(m).unwrap().count(), 0);
    common::unmount(&e);
    common::fsck_clean(&e);
}
