//! Scenario: behaviours a Linux file system has that the Linux test suite checks:
//! a truncate updates mtime as well as ctime; a directory listing ends, each name
//! seen at most once, while another thread renames every entry away and back.

mod common;
use mnemofs::{RenameFlags, SetAttr, Timespec, ROOT_INO};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[test]
fn truncate_updates_mtime_and_ctime() {
    let img = common::fresh(32 << 20);
    let fs = common::mount(&img);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
    fs.write(f.ino, 0, &[1u8; 10_000]).unwrap();
    let old = Timespec { sec: 1000, nsec: 0 };
    fs.setattr(
        f.ino,
        &SetAttr {
            mtime: Some(old),
            ctime: Some(old),
            ..Default::default()
        },
    )
    .unwrap();
    for size in [100, 20_000, 20_000] {
        // Only the size: what the kernel sends for truncate(2) and O_TRUNC.
        let a = fs
            .setattr(
                f.ino,
                &SetAttr {
                    size: Some(size),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(a.size, size);
        assert!(
            a.mtime > old,
            "size {size}: mtime {:?} not updated",
            a.mtime
        );
        assert!(
            a.ctime > old,
            "size {size}: ctime {:?} not updated",
            a.ctime
        );
        fs.setattr(
            f.ino,
            &SetAttr {
                mtime: Some(old),
                ctime: Some(old),
                ..Default::default()
            },
        )
        .unwrap();
    }
    // An explicit mtime with the size wins (utimensat after a truncate in one call).
    let t = Timespec { sec: 5000, nsec: 7 };
    let a = fs
        .setattr(
            f.ino,
            &SetAttr {
                size: Some(1),
                mtime: Some(t),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(a.mtime, t);
    fs.unmount().unwrap();
    // Durable like any attribute.
    let fs = common::mount(&img);
    assert_eq!(fs.getattr(f.ino).unwrap().mtime, t);
    fs.unmount().unwrap();
}

#[test]
fn a_listing_ends_while_every_entry_is_renamed_away_and_back() {
    const N: usize = 5000;
    // 8192 inodes (one per 16 KiB).
    let img = common::fresh(128 << 20);
    let fs = Arc::new(common::mount(&img));
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    for i in 0..N {
        fs.create(d, format!("e{i}").as_bytes(), 0o644, 0, 0)
            .unwrap();
    }
    let offset_of = |fs: &mnemofs::Fs, name: &[u8]| {
        let mut off = 0;
        loop {
            let v = fs.readdir(d, off, 512).unwrap();
            if v.is_empty() {
                return None;
            }
            for e in &v {
                if e.name == name {
                    return Some(e.offset);
                }
            }
            off = v.last().unwrap().offset;
        }
    };
    let before = offset_of(&fs, b"e17").unwrap();

    // One thread renames every entry away and back, over and over, while this one
    // lists the directory 64 names at a time and also renames what it sees.
    let stop = Arc::new(AtomicBool::new(false));
    let renamer = {
        let (fs, stop) = (fs.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rounds = 0;
            while !stop.load(Ordering::Relaxed) && rounds < 20 {
                for i in (0..N).rev() {
                    let a = format!("e{i}");
                    let t = format!("t{i}");
                    // The lister may hold this entry under its own temporary name.
                    match fs.rename(d, a.as_bytes(), d, t.as_bytes(), RenameFlags::default()) {
                        Err(mnemofs::FsError::NotFound) => continue,
                        r => r.unwrap(),
                    }
                    fs.rename(d, t.as_bytes(), d, a.as_bytes(), RenameFlags::default())
                        .unwrap();
                }
                rounds += 1;
            }
        })
    };
    let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut off = 0;
    let mut listed = 0;
    loop {
        let v = fs.readdir(d, off, 64).unwrap();
        if v.is_empty() {
            break;
        }
        for e in &v {
            listed += 1;
            assert!(listed <= 4 * N, "the listing does not end ({listed} names)");
            if e.name == b"." || e.name == b".." {
                continue;
            }
            *seen.entry(e.name.clone()).or_default() += 1;
            let n = String::from_utf8_lossy(&e.name).into_owned();
            if let Some(i) = n.strip_prefix('e') {
                let t = format!("x{i}");
                // The renamer may have moved it meanwhile: then it is not there.
                if fs
                    .rename(d, n.as_bytes(), d, t.as_bytes(), RenameFlags::default())
                    .is_ok()
                {
                    fs.rename(d, t.as_bytes(), d, n.as_bytes(), RenameFlags::default())
                        .unwrap();
                }
            }
        }
        off = v.last().unwrap().offset;
    }
    stop.store(true, Ordering::Relaxed);
    renamer.join().unwrap();
    for (name, n) in &seen {
        assert_eq!(*n, 1, "{} listed {n} times", String::from_utf8_lossy(name));
    }
    // Offsets stay stable across renames within the directory and across mounts.
    assert_eq!(offset_of(&fs, b"e17"), Some(before));
    let fs = Arc::into_inner(fs).unwrap();
    fs.unmount().unwrap();
    let fs = common::mount(&img);
    assert_eq!(offset_of(&fs, b"e17"), Some(before));
    fs.unmount().unwrap();
}

fn mount_with(img: &common::Img, atime: mnemofs::AtimeMode) -> mnemofs::Fs {
    let o = mnemofs::MountOptions {
        atime,
        ..common::opts()
    };
    mnemofs::mount(&img.path, &o).unwrap()
}

#[test]
fn reads_update_atime_as_relatime_noatime_and_strictatime_say() {
    use mnemofs::AtimeMode::*;
    let img = common::fresh(32 << 20);
    let old = Timespec { sec: 1000, nsec: 0 };
    let mut buf = [0u8; 10];
    for mode in [Relatime, Noatime, Strictatime] {
        let fs = mount_with(&img, mode);
        let name = format!("{mode:?}");
        let f = fs
            .create(ROOT_INO, name.as_bytes(), 0o644, 0, 0)
            .unwrap()
            .ino;
        fs.write(f, 0, b"0123456789").unwrap();
        // atime older than mtime and ctime.
        let a = fs
            .setattr(
                f,
                &SetAttr {
                    atime: Some(old),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(a.atime, old);
        // A later tick than the ctime that setattr set (relatime compares them).
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs.read(f, 0, &mut buf).unwrap();
        let a1 = fs.getattr(f).unwrap().atime;
        match mode {
            Noatime => assert_eq!(a1, old, "noatime: a read changed atime"),
            _ => assert!(a1 >= a.ctime, "{mode:?}: atime {a1:?} not updated"),
        }
        // Past the clock's granularity (times are coarse, as the kernel's).
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs.read(f, 0, &mut buf).unwrap();
        let a2 = fs.getattr(f).unwrap().atime;
        match mode {
            // Newer than mtime and ctime and under a day old: unchanged.
            Relatime | Noatime => assert_eq!(a2, a1, "{mode:?}: second read"),
            Strictatime => assert!(a2 > a1, "strictatime: second read left {a2:?}"),
        }
        // A write makes mtime newer: the next read updates atime again (relatime).
        fs.write(f, 0, b"x").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs.read(f, 0, &mut buf).unwrap();
        let a3 = fs.getattr(f).unwrap();
        match mode {
            Noatime => assert_eq!(a3.atime, old),
            _ => assert!(a3.atime > a3.mtime, "{mode:?}: {a3:?}"),
        }
        // A listing updates the directory's atime the same way.
        let d = fs
            .mkdir(ROOT_INO, format!("d{name}").as_bytes(), 0o755, 0, 0)
            .unwrap();
        fs.setattr(
            d.ino,
            &SetAttr {
                atime: Some(old),
                ..Default::default()
            },
        )
        .unwrap();
        fs.readdir(d.ino, 0, 10).unwrap();
        let da = fs.getattr(d.ino).unwrap().atime;
        match mode {
            Noatime => assert_eq!(da, old),
            _ => assert!(da > old, "{mode:?}: readdir left the directory's atime"),
        }
        fs.unmount().unwrap();
        // The access time reached the log at unmount.
        let fs = mount_with(&img, Noatime);
        assert_eq!(
            fs.getattr(f).unwrap().atime,
            a3.atime,
            "{mode:?}: after remount"
        );
        fs.unmount().unwrap();
        let r = mnemofs::fsck(&img.path).unwrap();
        assert!(r.is_clean(), "{:?}", r.problems);
    }
}

#[test]
fn rename_whiteout_leaves_a_whiteout_in_the_same_commit() {
    let img = common::fresh(32 << 20);
    let fs = common::mount(&img);
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    let f = fs.create(d, b"a", 0o644, 0, 0).unwrap().ino;
    fs.write(f, 0, b"data").unwrap();
    let used = fs.statfs().files_free;
    let wo = RenameFlags {
        whiteout: Some((7, 8)),
        ..Default::default()
    };
    fs.rename(d, b"a", ROOT_INO, b"b", wo).unwrap();
    let w = fs.lookup(d, b"a").unwrap();
    assert_eq!(w.kind, mnemofs::FileKind::CharDevice);
    assert_eq!(
        (w.rdev, w.mode & 0o7777, w.uid, w.gid, w.nlink),
        (0, 0, 7, 8, 1)
    );
    assert_eq!(fs.lookup(ROOT_INO, b"b").unwrap().ino, f);
    assert_eq!(fs.statfs().files_free, used - 1);
    // Not with RENAME_EXCHANGE; with NOREPLACE onto a name that exists: EEXIST and
    // no whiteout.
    let x = RenameFlags {
        exchange: true,
        whiteout: Some((0, 0)),
        ..Default::default()
    };
    assert!(matches!(
        fs.rename(ROOT_INO, b"b", d, b"a", x),
        Err(mnemofs::FsError::Invalid(_))
    ));
    fs.create(d, b"c", 0o644, 0, 0).unwrap();
    let nr = RenameFlags {
        noreplace: true,
        whiteout: Some((0, 0)),
        ..Default::default()
    };
    assert!(matches!(
        fs.rename(ROOT_INO, b"b", d, b"c", nr),
        Err(mnemofs::FsError::Exists)
    ));
    // As a crash leaves it (no unmount): the whiteout and the move are both there.
    drop(fs);
    let fs = common::mount(&img);
    assert_eq!(
        fs.lookup(d, b"a").unwrap().kind,
        mnemofs::FileKind::CharDevice
    );
    let mut buf = [0u8; 4];
    let b = fs.lookup(ROOT_INO, b"b").unwrap().ino;
    fs.read(b, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"data");
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}
