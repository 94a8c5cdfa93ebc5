//! Scenario: extended attributes — set, get, list, remove with Linux's flags, limits
//! and errors; stored in the inode's log, so they survive remounts, a crash (the
//! image as left without unmount) and log compaction, and fsck stays clean.

mod common;
use mnemofs::format::XATTR_VALUE_MAX;
use mnemofs::{FsError, ROOT_INO};

#[test]
fn set_get_list_remove_with_linux_errors() {
    let img = common::fresh(32 << 20);
    let fs = common::mount(&img);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    let before = fs.getattr(f).unwrap().ctime;

    assert!(matches!(fs.getxattr(f, b"user.a"), Err(FsError::NoData)));
    assert_eq!(fs.listxattr(f).unwrap(), b"");
    fs.setxattr(f, b"user.a", b"one", 0).unwrap();
    fs.setxattr(f, b"trusted.b", b"", 0).unwrap();
    fs.setxattr(f, b"security.c", &[0, 1, 2, 255], 0).unwrap();
    assert_eq!(fs.getxattr(f, b"user.a").unwrap(), b"one");
    assert_eq!(fs.getxattr(f, b"trusted.b").unwrap(), b"");
    assert_eq!(fs.getxattr(f, b"security.c").unwrap(), [0, 1, 2, 255]);
    assert!(fs.getattr(f).unwrap().ctime >= before);
    let list = fs.listxattr(f).unwrap();
    let mut names: Vec<&[u8]> = list.split(|&b| b == 0).filter(|n| !n.is_empty()).collect();
    names.sort();
    assert_eq!(names, [&b"security.c"[..], b"trusted.b", b"user.a"]);

    // Flags.
    assert!(matches!(
        fs.setxattr(f, b"user.a", b"x", libc::XATTR_CREATE),
        Err(FsError::Exists)
    ));
    assert!(matches!(
        fs.setxattr(f, b"user.new", b"x", libc::XATTR_REPLACE),
        Err(FsError::NoData)
    ));
    fs.setxattr(f, b"user.a", b"two", libc::XATTR_REPLACE)
        .unwrap();
    assert_eq!(fs.getxattr(f, b"user.a").unwrap(), b"two");

    // Names: namespaces, lengths.
    for bad in [&b"other.x"[..], b"user.", b"user", b"system.other", b"nons"] {
        assert!(
            matches!(fs.setxattr(f, bad, b"x", 0), Err(FsError::Unsupported(_))),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    let long = [b"user.".to_vec(), vec![b'n'; 251]].concat();
    assert!(matches!(
        fs.setxattr(f, &long, b"x", 0),
        Err(FsError::Range)
    ));
    let max = [b"user.".to_vec(), vec![b'n'; 250]].concat();
    fs.setxattr(f, &max, &vec![7u8; XATTR_VALUE_MAX], 0)
        .unwrap();
    assert_eq!(fs.getxattr(f, &max).unwrap().len(), XATTR_VALUE_MAX);
    assert!(matches!(
        fs.setxattr(f, b"user.big", &vec![7u8; XATTR_VALUE_MAX + 1], 0),
        Err(FsError::NoSpace)
    ));
    // ACLs are stored as their attributes.
    fs.setxattr(f, b"system.posix_acl_access", &[2, 0, 0, 0], 0)
        .unwrap();

    // user. only on files and directories.
    let l = fs.symlink(ROOT_INO, b"l", b"f", 0, 0).unwrap().ino;
    assert!(matches!(
        fs.setxattr(l, b"user.a", b"x", 0),
        Err(FsError::NotPermitted)
    ));
    fs.setxattr(l, b"trusted.a", b"x", 0).unwrap();
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    fs.setxattr(d, b"user.d", b"dir", 0).unwrap();

    // Remove.
    fs.removexattr(f, b"trusted.b").unwrap();
    assert!(matches!(
        fs.removexattr(f, b"trusted.b"),
        Err(FsError::NoData)
    ));
    assert!(matches!(fs.getxattr(f, b"trusted.b"), Err(FsError::NoData)));
    fs.unmount().unwrap();

    let fs = common::mount(&img);
    assert_eq!(fs.getxattr(f, b"user.a").unwrap(), b"two");
    assert!(matches!(fs.getxattr(f, b"trusted.b"), Err(FsError::NoData)));
    assert_eq!(fs.getxattr(d, b"user.d").unwrap(), b"dir");
    assert_eq!(fs.getxattr(l, b"trusted.a").unwrap(), b"x");
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

#[test]
fn attributes_survive_log_compaction_and_a_crash() {
    let img = common::fresh(32 << 20);
    let fs = common::mount(&img);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    // Thousands of replacements and removals: log pages fill, GC and compaction
    // rewrite the state.
    for i in 0..3000u32 {
        let v = format!("value {i}").into_bytes();
        fs.setxattr(f, format!("user.k{}", i % 7).as_bytes(), &v, 0)
            .unwrap();
        if i % 5 == 0 {
            fs.removexattr(f, format!("user.k{}", i % 7).as_bytes())
                .unwrap();
        }
    }
    let want: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0..7)
        .map(|k| {
            let n = format!("user.k{k}").into_bytes();
            let v = fs.getxattr(f, &n).ok();
            (n, v)
        })
        .collect();
    let log = fs.log_bytes(f).unwrap();
    assert!(log < 64 << 10, "the log of 3000 changes holds {log} bytes");
    // No unmount: the image as a crash leaves it.
    drop(fs);
    let fs = common::mount(&img);
    for (n, v) in &want {
        assert_eq!(fs.getxattr(f, n).ok(), *v, "{}", String::from_utf8_lossy(n));
    }
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

/// What an attribute change costs on PM, exactly: one log entry of
/// `⌈(32 + name + value) / 64⌉` units, its lines flushed, the tail word stored and
/// flushed, two fences; a read costs nothing on PM.
#[test]
fn an_attribute_change_is_one_log_entry() {
    let img = common::fresh(32 << 20);
    let fs = common::mount(&img);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    fs.setxattr(f, b"user.warm", b"x", 0).unwrap();
    for (name, value, units) in [
        (&b"user.a"[..], &b"0123456789"[..], 1u64),
        (b"user.b", &[7u8; 100][..], 3),
        (b"security.c", &[1u8; 1000][..], 17),
    ] {
        let before = fs.thread_counters();
        fs.setxattr(f, name, value, 0).unwrap();
        let d = fs.thread_counters().since(&before);
        assert_eq!(d.bytes_written, units * 64 + 8, "{d:?}");
        assert_eq!(d.flushes, units + 1, "{d:?}");
        assert_eq!(d.fences, 2, "{d:?}");
        let before = fs.thread_counters();
        fs.getxattr(f, name).unwrap();
        fs.listxattr(f).unwrap();
        let d = fs.thread_counters().since(&before);
        assert_eq!((d.bytes_written, d.flushes, d.fences), (0, 0, 0));
    }
    let before = fs.thread_counters();
    fs.removexattr(f, b"user.a").unwrap();
    let d = fs.thread_counters().since(&before);
    assert_eq!(
        (d.bytes_written, d.flushes, d.fences),
        (64 + 8, 2, 2),
        "{d:?}"
    );
    fs.unmount().unwrap();
}
