//! Scenario: birth times (statx's `STATX_BTIME`). Every inode an image of format
//! version 10 makes records when it was made, in its slot: the root at mkfs, files,
//! directories, symlinks, special files, unnamed files and whiteouts. Writes, attribute
//! changes, renames and links leave it; it survives a remount and a crash. An image of
//! an older version records none (`None`) and keeps its version.

mod common;
use mnemofs::format::SB_VERSION_OFF;
use mnemofs::{NewNode, RenameFlags, SetAttr, Timespec, ROOT_INO};

fn btime(fs: &mnemofs::Fs, ino: u64) -> Option<Timespec> {
    fs.getattr(ino).unwrap().btime
}

#[test]
fn every_new_inode_records_its_birth_time() {
    let img = common::fresh(32 << 20);
    let fs = common::mount(&img);
    assert!(btime(&fs, ROOT_INO).is_some(), "the root's, from mkfs");
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
    let born = f.btime.expect("a file's");
    assert_eq!(born, f.ctime, "made when its inode was");
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap();
    let s = fs.symlink(ROOT_INO, b"s", b"f", 0, 0).unwrap();
    let p = fs
        .create_node(
            ROOT_INO,
            b"p",
            &NewNode {
                mode: libc::S_IFIFO | 0o644,
                umask: 0,
                rdev: 0,
                uid: 0,
                gid: 0,
            },
        )
        .unwrap();
    let t = fs
        .tmpfile(
            ROOT_INO,
            &NewNode {
                mode: libc::S_IFREG | 0o600,
                umask: 0,
                rdev: 0,
                uid: 0,
                gid: 0,
            },
        )
        .unwrap();
    for a in [&d, &s, &p, &t] {
        assert!(a.btime.is_some(), "{:?}", a.kind);
    }
    fs.link(t.ino, ROOT_INO, b"t").unwrap();
    fs.release(t.ino).unwrap();

    // Changes of contents, attributes and names leave it.
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs.write(f.ino, 0, b"hello").unwrap();
    fs.setattr(
        f.ino,
        &SetAttr {
            mode: Some(0o600),
            uid: Some(5),
            ..Default::default()
        },
    )
    .unwrap();
    fs.rename(ROOT_INO, b"f", d.ino, b"g", RenameFlags::default())
        .unwrap();
    fs.link(f.ino, ROOT_INO, b"h").unwrap();
    let a = fs.getattr(f.ino).unwrap();
    assert_eq!(a.btime, Some(born));
    assert!(a.ctime > born);
    // A whiteout is a new inode with a birth time of its own.
    fs.rename(
        ROOT_INO,
        b"h",
        ROOT_INO,
        b"h2",
        RenameFlags {
            whiteout: Some((0, 0)),
            ..Default::default()
        },
    )
    .unwrap();
    let w = fs.lookup(ROOT_INO, b"h").unwrap();
    assert!(w.btime.is_some_and(|b| b >= born));

    let all: Vec<(u64, Option<Timespec>)> = [ROOT_INO, f.ino, d.ino, s.ino, p.ino, t.ino, w.ino]
        .iter()
        .map(|&i| (i, btime(&fs, i)))
        .collect();
    fs.unmount().unwrap();
    let fs = common::mount(&img);
    for &(i, b) in &all {
        assert_eq!(btime(&fs, i), b, "inode {i} after a remount");
    }
    // No unmount: the image as a crash leaves it.
    drop(fs);
    let fs = common::mount(&img);
    for &(i, b) in &all {
        assert_eq!(btime(&fs, i), b, "inode {i} after a crash");
    }
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

#[test]
fn an_image_before_version_10_records_none() {
    let img = common::fresh(32 << 20);
    common::set_version(&img, 9);
    let fs = common::mount(&img);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
    assert_eq!(f.btime, None);
    fs.unmount().unwrap();
    let fs = common::mount(&img);
    assert_eq!(btime(&fs, f.ino), None);
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    assert_eq!(std::fs::read(&img.path).unwrap()[SB_VERSION_OFF], 9);
}
