//! Scenario: extended attributes — set, get, list, remove with Linux's flags, limits
//! and errors; stored in the inode's log, so they survive remounts, a crash (the
//! image as left without unmount) and log compaction, and fsck stays clean. Values
//! up to Linux's 64 KiB span entries committed together; images before version 9
//! keep them to one entry.

mod common;
use mnemofs::format::{SB_VERSION_OFF, XATTR_SIZE_MAX, XATTR_VALUE_MAX};
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
    // Longer values span entries (large_values_... below); Linux's limit holds.
    assert!(matches!(
        fs.setxattr(f, b"user.big", &vec![7u8; XATTR_SIZE_MAX + 1], 0),
        Err(FsError::ArgTooBig)
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
/// `⌈(32 + name + value) / 64⌉` units stored non-temporally (no flush), the tail word
/// stored and flushed, two fences; a read costs nothing on PM.
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
        // The entry's units are stored non-temporally: only the tail is flushed.
        assert_eq!(d.nt_bytes_written, units * 64, "{d:?}");
        assert_eq!(d.flushes, 1, "{d:?}");
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
        (d.bytes_written, d.nt_bytes_written, d.flushes, d.fences),
        (64 + 8, 64, 1, 2),
        "{d:?}"
    );
    fs.unmount().unwrap();
}

/// The xattr form of an ACL: (tag, perm, id) entries.
fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut v = 2u32.to_le_bytes().to_vec();
    for &(tag, perm, id) in entries {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    v
}

const U: u32 = u32::MAX;

/// POSIX ACLs in the engine: an access ACL sets the mode (a minimal one is not
/// stored), chmod rewrites its mask, a default ACL is inherited by new nodes in the
/// same commit as their creation (the umask ignored), and all of it survives a
/// crash; invalid ACLs are refused.
#[test]
fn posix_acls_keep_the_mode_in_step_and_are_inherited() {
    use mnemofs::acl::{ACL_ACCESS, ACL_DEFAULT, XATTR_ACL_KILL_SGID};
    use mnemofs::NewNode;
    let img = common::fresh(32 << 20);
    let fs = common::mount(&img);
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    let named = acl(&[
        (1, 7, U),
        (2, 6, 1000),
        (4, 5, U),
        (0x10, 6, U),
        (0x20, 4, U),
    ]);
    fs.setxattr(d, ACL_ACCESS, &named, 0).unwrap();
    assert_eq!(fs.getattr(d).unwrap().mode & 0o7777, 0o764);
    assert_eq!(fs.getxattr(d, ACL_ACCESS).unwrap(), named);
    // chmod: owner, mask and other take the new bits; the owning group keeps r-x.
    fs.setattr(
        d,
        &mnemofs::SetAttr {
            mode: Some(0o710),
            ..Default::default()
        },
    )
    .unwrap();
    let after = acl(&[
        (1, 7, U),
        (2, 6, 1000),
        (4, 5, U),
        (0x10, 1, U),
        (0x20, 0, U),
    ]);
    assert_eq!(fs.getxattr(d, ACL_ACCESS).unwrap(), after);
    // A minimal ACL is the mode alone.
    let minimal = acl(&[(1, 6, U), (4, 4, U), (0x20, 0, U)]);
    fs.setxattr(d, ACL_ACCESS, &minimal, 0).unwrap();
    assert_eq!(fs.getattr(d).unwrap().mode & 0o7777, 0o640);
    assert!(matches!(fs.getxattr(d, ACL_ACCESS), Err(FsError::NoData)));
    // Invalid: named entry without a mask; default ACL on a file.
    let no_mask = acl(&[(1, 7, U), (2, 6, 1000), (4, 5, U), (0x20, 4, U)]);
    assert!(matches!(
        fs.setxattr(d, ACL_ACCESS, &no_mask, 0),
        Err(FsError::Invalid(_))
    ));
    let f0 = fs.create(ROOT_INO, b"f0", 0o644, 0, 0).unwrap().ino;
    assert!(matches!(
        fs.setxattr(f0, ACL_DEFAULT, &named, 0),
        Err(FsError::AccessDenied)
    ));
    // Kill set-group-ID.
    fs.setattr(
        f0,
        &mnemofs::SetAttr {
            mode: Some(0o2775),
            ..Default::default()
        },
    )
    .unwrap();
    fs.setxattr(f0, ACL_ACCESS, &named, XATTR_ACL_KILL_SGID)
        .unwrap();
    assert_eq!(fs.getattr(f0).unwrap().mode & 0o7777, 0o764);

    // Inheritance.
    let def = acl(&[
        (1, 7, U),
        (2, 7, 1000),
        (4, 5, U),
        (0x10, 7, U),
        (0x20, 0, U),
    ]);
    fs.setxattr(d, ACL_DEFAULT, &def, 0).unwrap();
    let node = |mode| NewNode {
        mode,
        umask: 0o077,
        rdev: 0,
        uid: 0,
        gid: 0,
    };
    let f = fs
        .create_node(d, b"f", &node(libc::S_IFREG | 0o666))
        .unwrap();
    assert_eq!(f.mode & 0o7777, 0o660, "umask ignored under a default ACL");
    assert_eq!(
        fs.getxattr(f.ino, ACL_ACCESS).unwrap(),
        acl(&[
            (1, 6, U),
            (2, 7, 1000),
            (4, 5, U),
            (0x10, 6, U),
            (0x20, 0, U)
        ])
    );
    assert!(matches!(
        fs.getxattr(f.ino, ACL_DEFAULT),
        Err(FsError::NoData)
    ));
    let sub = fs
        .create_node(d, b"sub", &node(libc::S_IFDIR | 0o777))
        .unwrap();
    assert_eq!(sub.mode & 0o7777, 0o770);
    assert_eq!(fs.getxattr(sub.ino, ACL_DEFAULT).unwrap(), def);
    // Without a default ACL, the umask.
    let g = fs
        .create_node(ROOT_INO, b"g", &node(libc::S_IFREG | 0o666))
        .unwrap();
    assert_eq!(g.mode & 0o7777, 0o600);
    assert!(matches!(
        fs.getxattr(g.ino, ACL_ACCESS),
        Err(FsError::NoData)
    ));
    // Removing an absent ACL succeeds (as Linux); the default goes.
    fs.removexattr(g.ino, ACL_ACCESS).unwrap();
    fs.removexattr(d, ACL_DEFAULT).unwrap();

    // A crash (no unmount): all of it is in the logs.
    drop(fs);
    let fs = common::mount(&img);
    assert_eq!(fs.getattr(f.ino).unwrap().mode & 0o7777, 0o660);
    assert_eq!(fs.getxattr(sub.ino, ACL_DEFAULT).unwrap(), def);
    assert!(matches!(fs.getxattr(d, ACL_DEFAULT), Err(FsError::NoData)));
    assert_eq!(fs.getattr(f0).unwrap().mode & 0o7777, 0o764);
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

/// What ACLs cost on PM, exactly (README): setting an access ACL with a named
/// entry is one commit of two entries — the attribute (32 B head + 23 B name +
/// 44 B value: 2 units of 64 B) and the mode's SetAttr snapshot (2 units) — plus the
/// tail word: 4 lines and the tail flushed, two fences. A create under a default
/// ACL writes the inherited access ACL (2 units) into the new inode's log in the
/// create's own commit: 2 more lines, no more fences. Reading one costs nothing.
#[test]
fn what_an_acl_costs() {
    use mnemofs::acl::{ACL_ACCESS, ACL_DEFAULT};
    use mnemofs::NewNode;
    let img = common::fresh(32 << 20);
    let fs = common::mount(&img);
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    let plain = fs.mkdir(ROOT_INO, b"plain", 0o755, 0, 0).unwrap().ino;
    let named = acl(&[
        (1, 7, U),
        (2, 6, 1000),
        (4, 5, U),
        (0x10, 6, U),
        (0x20, 4, U),
    ]);
    let file = NewNode {
        mode: libc::S_IFREG | 0o644,
        ..Default::default()
    };
    // Warm the directories' logs (their first entries allocate log pages).
    fs.create_node(d, b"w", &file).unwrap();
    fs.create_node(plain, b"w", &file).unwrap();
    fs.setxattr(d, b"user.warm", b"x", 0).unwrap();

    let before = fs.thread_counters();
    fs.setxattr(d, ACL_ACCESS, &named, 0).unwrap();
    let d1 = fs.thread_counters().since(&before);
    assert_eq!(
        (d1.bytes_written, d1.nt_bytes_written, d1.flushes, d1.fences),
        (4 * 64 + 8, 4 * 64, 1, 2)
    );
    fs.setxattr(d, ACL_DEFAULT, &named, 0).unwrap();

    let before = fs.thread_counters();
    fs.create_node(plain, b"a", &file).unwrap();
    let plain_create = fs.thread_counters().since(&before);
    let before = fs.thread_counters();
    fs.create_node(d, b"a", &file).unwrap();
    let acl_create = fs.thread_counters().since(&before);
    assert_eq!(
        acl_create.bytes_written,
        plain_create.bytes_written + 2 * 64,
        "{plain_create:?} {acl_create:?}"
    );
    // (The two entries' units are stored non-temporally: no more flushes.)
    assert_eq!(acl_create.flushes, plain_create.flushes);
    assert_eq!(
        acl_create.nt_bytes_written,
        plain_create.nt_bytes_written + 2 * 64
    );
    assert_eq!(acl_create.fences, plain_create.fences);

    let before = fs.thread_counters();
    fs.getxattr(d, ACL_ACCESS).unwrap();
    let g = fs.thread_counters().since(&before);
    assert_eq!((g.bytes_written, g.flushes, g.fences), (0, 0, 0));
    fs.unmount().unwrap();
}

/// A value of `len` bytes that differs with `seed` and along its length.
fn value(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

#[test]
fn large_values_span_entries_and_survive_a_crash_compaction_and_fsck() {
    let img = common::fresh(64 << 20);
    let fs = common::mount(&img);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    let long = [b"user.".to_vec(), vec![b'n'; 250]].concat();
    // Linux's largest value with the longest name (17 entries), one just past one
    // entry, and on a directory.
    fs.setxattr(f, &long, &value(XATTR_SIZE_MAX, 1), 0).unwrap();
    fs.setxattr(f, b"user.mid", &value(XATTR_VALUE_MAX + 1, 2), 0)
        .unwrap();
    fs.setxattr(d, b"trusted.dir", &value(20_000, 3), 0)
        .unwrap();
    assert_eq!(fs.getxattr(f, &long).unwrap(), value(XATTR_SIZE_MAX, 1));
    // Replaced by a short one and back: nothing of the old value stays.
    fs.setxattr(f, b"user.mid", b"short", libc::XATTR_REPLACE)
        .unwrap();
    assert_eq!(fs.getxattr(f, b"user.mid").unwrap(), b"short");
    fs.setxattr(f, b"user.mid", &value(9_000, 4), 0).unwrap();
    // Replacements that fill log pages: GC and compaction rewrite the big values.
    for i in 0..300u32 {
        fs.setxattr(f, b"user.churn", &value(30_000 + i as usize, i as u8), 0)
            .unwrap();
    }
    fs.removexattr(f, b"user.churn").unwrap();
    let log = fs.log_bytes(f).unwrap();
    assert!(
        log < 1 << 20,
        "the log holds {log} bytes after 300 replacements of ~30 KiB"
    );
    // The total per inode: 256 KiB of names and values.
    for k in 0..2 {
        fs.setxattr(
            d,
            format!("user.{k}").as_bytes(),
            &value(XATTR_SIZE_MAX, 9),
            0,
        )
        .unwrap();
    }
    fs.setxattr(d, b"user.2", &value(XATTR_SIZE_MAX, 9), 0)
        .unwrap();
    assert!(matches!(
        fs.setxattr(d, b"user.3", &value(XATTR_SIZE_MAX, 9), 0),
        Err(FsError::NoSpace)
    ));
    let check = |fs: &mnemofs::Fs| {
        assert_eq!(fs.getxattr(f, &long).unwrap(), value(XATTR_SIZE_MAX, 1));
        assert_eq!(fs.getxattr(f, b"user.mid").unwrap(), value(9_000, 4));
        assert!(matches!(
            fs.getxattr(f, b"user.churn"),
            Err(FsError::NoData)
        ));
        assert_eq!(fs.getxattr(d, b"trusted.dir").unwrap(), value(20_000, 3));
        assert_eq!(fs.getxattr(d, b"user.2").unwrap(), value(XATTR_SIZE_MAX, 9));
    };
    check(&fs);
    // No unmount: the image as a crash leaves it; recovery replays the parts.
    drop(fs);
    let fs = common::mount(&img);
    check(&fs);
    fs.unmount().unwrap();
    let fs = common::mount(&img);
    check(&fs);
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

/// What a 64 KiB value costs on PM, exactly: its 17 entries (a SET and 16
/// continuations, each as much of the value as fits a log page) stored
/// non-temporally into 17 fresh log pages, then one tail: 136,016 bytes written
/// (half of them the pages' zeroing), 18 flushes and two fences, as a small value.
#[test]
fn a_large_value_is_one_commit() {
    let img = common::fresh(32 << 20);
    let fs = common::mount(&img);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    fs.setxattr(f, b"user.warm", b"x", 0).unwrap();
    let name = b"user.big";
    let room = 4032 - 32 - name.len();
    let entries = XATTR_SIZE_MAX.div_ceil(room) as u64;
    assert_eq!(entries, 17);
    let last = (XATTR_SIZE_MAX - (entries as usize - 1) * room) as u64;
    let units = (entries - 1) * 63 + (32 + name.len() as u64 + last).div_ceil(64);
    let before = fs.thread_counters();
    fs.setxattr(f, name, &value(XATTR_SIZE_MAX, 5), 0).unwrap();
    let d = fs.thread_counters().since(&before);
    println!("a 64 KiB xattr value: {d:?}");
    // Each entry fills a log page of its own (none fits beside the first page's
    // entries): 17 fresh pages, each zeroed non-temporally and linked from the one
    // before (an 8-byte store, flushed), the entries non-temporally, and the tail
    // (8 bytes, flushed). One commit: two fences, as a small value.
    assert_eq!(d.nt_bytes_written, entries * 4096 + units * 64, "{d:?}");
    assert_eq!(
        d.bytes_written,
        d.nt_bytes_written + (entries + 1) * 8,
        "{d:?}"
    );
    assert_eq!(d.flushes, entries + 1, "{d:?}");
    assert_eq!(d.fences, 2, "{d:?}");
    let before = fs.thread_counters();
    fs.getxattr(f, name).unwrap();
    let d = fs.thread_counters().since(&before);
    assert_eq!((d.bytes_written, d.flushes, d.fences), (0, 0, 0));
    fs.unmount().unwrap();
}

#[test]
fn an_image_before_version_9_keeps_values_to_one_entry() {
    let img = common::fresh(32 << 20);
    common::set_version(&img, 8);
    let fs = common::mount(&img);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    let max = [b"user.".to_vec(), vec![b'n'; 250]].concat();
    fs.setxattr(f, &max, &value(XATTR_VALUE_MAX, 1), 0).unwrap();
    assert!(matches!(
        fs.setxattr(f, b"user.big", &value(XATTR_VALUE_MAX + 1, 1), 0),
        Err(FsError::NoSpace)
    ));
    fs.unmount().unwrap();
    let fs = common::mount(&img);
    assert_eq!(fs.getxattr(f, &max).unwrap(), value(XATTR_VALUE_MAX, 1));
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    assert_eq!(std::fs::read(&img.path).unwrap()[SB_VERSION_OFF], 8);
}
