//! Scenario: unnamed files (Linux's `O_TMPFILE`): made in a directory with link
//! count 0 and no name, open once; read and written like any file; given a first
//! name by `link` (name and data appear together) or freed with their last pin, and
//! after a crash. Owner, umask, default ACL and a set-group-ID parent apply as to a
//! named file; the errors are Linux's. fsck stays clean.

mod common;
use mnemofs::{FileKind, FsError, NewNode, ROOT_INO};

fn node(mode: u32, umask: u32) -> NewNode {
    NewNode {
        mode: libc::S_IFREG | mode,
        umask,
        rdev: 0,
        uid: 7,
        gid: 8,
    }
}

fn read_all(fs: &mnemofs::Fs, ino: u64) -> Vec<u8> {
    let mut buf = vec![0u8; 20_000];
    let n = fs.read(ino, 0, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

fn names(fs: &mnemofs::Fs, dir: u64) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = fs
        .readdir(dir, 0, 1000)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .filter(|n| n != b"." && n != b"..")
        .collect();
    v.sort();
    v
}

#[test]
fn an_unnamed_file_is_written_then_linked() {
    let img = common::fresh(32 << 20);
    let fs = common::mount(&img);
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    let a = fs.tmpfile(d, &node(0o666, 0o022)).unwrap();
    assert_eq!(a.kind, FileKind::Regular);
    assert_eq!(a.nlink, 0);
    assert_eq!(a.mode, libc::S_IFREG | 0o644, "the umask applies");
    assert_eq!((a.uid, a.gid), (7, 8));
    assert!(names(&fs, d).is_empty(), "no name in its directory");
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    fs.write(a.ino, 0, &data).unwrap();
    assert_eq!(read_all(&fs, a.ino), data);
    assert_eq!(fs.getattr(a.ino).unwrap().size, 10_000);

    let l = fs.link(a.ino, d, b"t").unwrap();
    assert_eq!(l.nlink, 1);
    assert_eq!(names(&fs, d), [b"t".to_vec()]);
    assert_eq!(fs.lookup(d, b"t").unwrap().ino, a.ino);
    // Linked once, it is an ordinary file: another name, closed, kept.
    fs.link(a.ino, ROOT_INO, b"t2").unwrap();
    fs.release(a.ino).unwrap();
    assert_eq!(fs.getattr(a.ino).unwrap().nlink, 2);
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    let fs = common::mount(&img);
    let t = fs.lookup(d, b"t").unwrap().ino;
    assert_eq!(read_all(&fs, t), data);
    fs.unmount().unwrap();
}

#[test]
fn an_unnamed_file_is_freed_when_closed_and_after_a_crash() {
    let img = common::fresh(32 << 20);
    let fs = common::mount(&img);
    let before = fs.statfs();
    let a = fs.tmpfile(ROOT_INO, &node(0o600, 0)).unwrap();
    fs.write(a.ino, 0, &vec![1u8; 64 << 10]).unwrap();
    let during = fs.statfs();
    assert!(during.blocks_free < before.blocks_free);
    assert_eq!(during.files_free + 1, before.files_free);
    fs.release(a.ino).unwrap();
    let after = fs.statfs();
    assert_eq!(after.files_free, before.files_free, "the inode is free");
    assert!(
        after.blocks_free >= during.blocks_free + 16,
        "its blocks are free"
    );
    assert!(matches!(fs.getattr(a.ino), Err(FsError::NotFound)));

    // Open at a crash: recovery frees it.
    let b = fs.tmpfile(ROOT_INO, &node(0o600, 0)).unwrap();
    fs.write(b.ino, 0, &vec![2u8; 64 << 10]).unwrap();
    drop(fs);
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    let fs = common::mount(&img);
    assert!(matches!(fs.getattr(b.ino), Err(FsError::NotFound)));
    assert!(names(&fs, ROOT_INO).is_empty());
    assert_eq!(fs.statfs().files_free, before.files_free);
    fs.unmount().unwrap();
}

#[test]
fn linux_rules_for_unnamed_files() {
    let img = common::fresh(32 << 20);
    let fs = common::mount(&img);
    // Only in a directory, and only a regular file.
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    assert!(matches!(
        fs.tmpfile(f, &node(0o644, 0)),
        Err(FsError::NotDir)
    ));
    let mut dir_node = node(0o755, 0);
    dir_node.mode = libc::S_IFDIR | 0o755;
    assert!(matches!(
        fs.tmpfile(ROOT_INO, &dir_node),
        Err(FsError::Invalid(_))
    ));
    // Not in a removed directory.
    let gone = fs.mkdir(ROOT_INO, b"gone", 0o755, 0, 0).unwrap().ino;
    fs.open(gone).unwrap();
    fs.rmdir(ROOT_INO, b"gone").unwrap();
    assert!(matches!(
        fs.tmpfile(gone, &node(0o644, 0)),
        Err(FsError::NotFound)
    ));
    fs.release(gone).unwrap();
    // A taken name: EEXIST, the file stays unnamed.
    let a = fs.tmpfile(ROOT_INO, &node(0o644, 0)).unwrap();
    assert!(matches!(
        fs.link(a.ino, ROOT_INO, b"f"),
        Err(FsError::Exists)
    ));
    assert_eq!(fs.getattr(a.ino).unwrap().nlink, 0);
    // Named, then unlinked while open: no longer linkable (Linux's I_LINKABLE goes
    // with the first link), as an ordinary unlinked file is not.
    fs.link(a.ino, ROOT_INO, b"a").unwrap();
    fs.unlink(ROOT_INO, b"a").unwrap();
    assert!(matches!(
        fs.link(a.ino, ROOT_INO, b"a2"),
        Err(FsError::NotFound)
    ));
    fs.release(a.ino).unwrap();
    fs.open(f).unwrap();
    fs.unlink(ROOT_INO, b"f").unwrap();
    assert!(matches!(
        fs.link(f, ROOT_INO, b"f2"),
        Err(FsError::NotFound)
    ));
    fs.release(f).unwrap();
    // A set-group-ID directory gives its group.
    let sg = fs.mkdir(ROOT_INO, b"sg", 0o755, 0, 0).unwrap().ino;
    fs.setattr(
        sg,
        &mnemofs::SetAttr {
            mode: Some(0o2775),
            gid: Some(42),
            ..Default::default()
        },
    )
    .unwrap();
    let g = fs.tmpfile(sg, &node(0o644, 0)).unwrap();
    assert_eq!(g.gid, 42);
    fs.release(g.ino).unwrap();
    // A read-only mount makes none.
    fs.remount(true, mnemofs::AtimeMode::Relatime).unwrap();
    assert!(matches!(
        fs.tmpfile(ROOT_INO, &node(0o644, 0)),
        Err(FsError::ReadOnly)
    ));
    fs.remount(false, mnemofs::AtimeMode::Relatime).unwrap();
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}
