//! Scenario: every namespace and data operation once, then a clean remount and an
//! abandoned (crash-like) remount keep everything.

mod common;
use mnemofs::{FileKind, FsError, RenameFlags, SetAttr, ROOT_INO};

#[test]
fn namespace_and_data_survive_remounts() {
    let img = common::fresh(64 << 20);
    let fs = common::mount(&img);
    let a = fs.mkdir(ROOT_INO, b"A", 0o755, 0, 0).unwrap();
    let foo = fs.create(ROOT_INO, b"foo", 0o644, 0, 0).unwrap();
    assert_eq!(fs.write(foo.ino, 0, b"hello world").unwrap(), 11);
    assert_eq!(fs.write(foo.ino, 10000, b"tail").unwrap(), 4);
    let mut buf = vec![0u8; 10004];
    assert_eq!(fs.read(foo.ino, 0, &mut buf).unwrap(), 10004);
    assert_eq!(&buf[..11], b"hello world");
    assert!(buf[11..10000].iter().all(|&b| b == 0));
    assert_eq!(&buf[10000..], b"tail");
    fs.link(foo.ino, a.ino, b"foo2").unwrap();
    assert_eq!(fs.getattr(foo.ino).unwrap().nlink, 2);
    fs.symlink(a.ino, b"sl", b"../foo", 0, 0).unwrap();
    fs.rename(ROOT_INO, b"A", ROOT_INO, b"B", RenameFlags::default())
        .unwrap();
    assert!(matches!(fs.lookup(ROOT_INO, b"A"), Err(FsError::NotFound)));
    let b = fs.lookup(ROOT_INO, b"B").unwrap();
    assert_eq!(b.ino, a.ino);
    fs.setattr(
        foo.ino,
        &SetAttr {
            size: Some(5),
            mode: Some(0o600),
            ..Default::default()
        },
    )
    .unwrap();
    fs.setattr(
        foo.ino,
        &SetAttr {
            size: Some(8000),
            ..Default::default()
        },
    )
    .unwrap();
    let check = |fs: &mnemofs::Fs| {
        let foo = fs.lookup(ROOT_INO, b"foo").unwrap();
        assert_eq!(foo.size, 8000);
        assert_eq!(foo.mode & 0o7777, 0o600);
        assert_eq!(foo.nlink, 2);
        let mut buf = vec![0u8; 8000];
        fs.read(foo.ino, 0, &mut buf).unwrap();
        assert_eq!(&buf[..5], b"hello");
        assert!(buf[5..].iter().all(|&b| b == 0));
        let b = fs.lookup(ROOT_INO, b"B").unwrap();
        assert_eq!(b.kind, FileKind::Directory);
        let sl = fs.lookup(b.ino, b"sl").unwrap();
        assert_eq!(fs.readlink(sl.ino).unwrap(), b"../foo");
        let names: Vec<Vec<u8>> = fs
            .readdir(b.ino, 0, 100)
            .unwrap()
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(
            names,
            vec![
                b".".to_vec(),
                b"..".to_vec(),
                b"foo2".to_vec(),
                b"sl".to_vec()
            ]
        );
        assert_eq!(fs.getattr(ROOT_INO).unwrap().nlink, 3);
    };
    check(&fs);
    fs.unmount().unwrap();
    let fs = common::mount(&img);
    check(&fs);
    drop(fs); // abandoned without unmount: recovery path
    let fs = common::mount(&img);
    check(&fs);
    fs.unlink(ROOT_INO, b"foo").unwrap();
    let b = fs.lookup(ROOT_INO, b"B").unwrap();
    assert!(matches!(fs.rmdir(ROOT_INO, b"B"), Err(FsError::NotEmpty)));
    fs.unlink(b.ino, b"foo2").unwrap();
    fs.unlink(b.ino, b"sl").unwrap();
    fs.rmdir(ROOT_INO, b"B").unwrap();
    assert_eq!(fs.readdir(ROOT_INO, 0, 100).unwrap().len(), 2);
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

/// Regression (found by pjdfstest through FUSE): a directory removed while the kernel
/// still referenced it had its inode number handed to the next mkdir, and the kernel
/// took the new directory for the dead one (ENOENT on create inside it).
#[test]
fn referenced_inode_numbers_are_not_reused() {
    let img = common::fresh(32 << 20);
    let fs = common::mount(&img);
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap();
    fs.remember(d.ino);
    let f = fs.create(d.ino, b"f", 0o644, 0, 0).unwrap();
    fs.remember(f.ino);
    fs.write(f.ino, 0, b"still here").unwrap();
    fs.unlink(d.ino, b"f").unwrap();
    fs.rmdir(ROOT_INO, b"d").unwrap();
    let e = fs.mkdir(ROOT_INO, b"e", 0o755, 0, 0).unwrap();
    let g = fs.create(e.ino, b"g", 0o644, 0, 0).unwrap();
    assert_ne!(e.ino, d.ino);
    assert_ne!(g.ino, f.ino);
    // The unlinked file is still readable while referenced.
    let mut b = [0u8; 10];
    assert_eq!(fs.read(f.ino, 0, &mut b).unwrap(), 10);
    assert_eq!(&b, b"still here");
    let used = fs.stats().inodes_used;
    fs.forget(f.ino, 1);
    fs.forget(d.ino, 1);
    assert_eq!(fs.stats().inodes_used, used - 2);
    assert!(fs.getattr(f.ino).is_err());
    // Abandoned with an orphan: recovery frees it and fsck is clean.
    let h = fs.create(ROOT_INO, b"h", 0o644, 0, 0).unwrap();
    fs.open(h.ino).unwrap();
    fs.unlink(ROOT_INO, b"h").unwrap();
    drop(fs);
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    let fs = common::mount(&img);
    assert!(fs.getattr(h.ino).is_err());
    fs.unmount().unwrap();
}

/// The PM counters are exact: a page-aligned 4 KiB write into a file is one
/// non-temporal 4 KiB data page, one 64-byte log entry (stored non-temporally, no
/// flush: docs/FORMAT.md §3), one 8-byte tail (one flushed line) and two fences.
#[test]
fn counters_of_a_4k_write_are_exact() {
    let img = common::fresh(32 << 20);
    let fs = common::mount(&img);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
    let before = fs.thread_counters();
    fs.write(f.ino, 0, &[0x5a; 4096]).unwrap();
    let d = fs.thread_counters().since(&before);
    assert_eq!(d.nt_bytes_written, 4096 + 64);
    assert_eq!(d.bytes_written, 4096 + 64 + 8);
    assert_eq!(d.flushes, 1);
    assert_eq!(d.fences, 2);
    // A create touches two inodes: the journal's four fences, and six flushes — the
    // new slot's second line, the records, the header, the parent's tail line, the
    // child's slot line (head, tail, valid and the static part's first bytes: one
    // write-back), the retirement (docs/FORMAT.md §3; 9 before issue #21).
    let before = fs.thread_counters();
    fs.create(ROOT_INO, b"g", 0o644, 0, 0).unwrap();
    let d = fs.thread_counters().since(&before);
    assert_eq!((d.flushes, d.fences), (6, 4));
    // An unlink that frees the inode: the journal (records, header, two tail lines,
    // retirement), then `valid = 0` and its fence.
    let before = fs.thread_counters();
    fs.unlink(ROOT_INO, b"g").unwrap();
    let d = fs.thread_counters().since(&before);
    assert_eq!((d.flushes, d.fences), (6, 5));
}
