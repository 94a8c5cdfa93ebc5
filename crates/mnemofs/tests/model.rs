//! Scenario: random sequences of namespace and data operations, checked after every
//! step against a simple in-memory model, with clean and abandoned (crash-like)
//! remounts in between. The whole tree (names, kinds, sizes, contents, link counts,
//! modes, hard-link identity) is compared after every operation, and fsck must be
//! clean at every remount.
//!
//! `MODEL_CASES` (default 100) × 100..150 operations per case: at least 10,000
//! operations per run.

mod common;

use mnemofs::format::XATTR_SIZE_MAX;
use mnemofs::{FileKind, Fs, FsError, Ino, RenameFlags, SetAttr, ROOT_INO};
use proptest::prelude::*;
use std::collections::{BTreeMap, HashMap};

const NAMES: &[&[u8]] = &[b"a", b"b", b"c", b"d", b"e"];

#[derive(Clone, Debug)]
enum Op {
    Create(usize, usize),
    Mkdir(usize, usize),
    Unlink(usize, usize),
    Rmdir(usize, usize),
    Rename(usize, usize, usize, usize, u8),
    Link(usize, usize, usize, usize),
    Symlink(usize, usize, usize),
    Write(usize, usize, u64, usize, u8),
    Append(usize, usize, usize, u8),
    Truncate(usize, usize, u64),
    Chmod(usize, usize, u32),
    Punch(usize, usize, u64, u64),
    /// Set attribute `XNAMES[k]` of a file to `len` bytes of a pattern (`len` 0 ..
    /// over Linux's largest value, 64 KiB: the engine must refuse that with E2BIG;
    /// values of one entry and of several).
    SetXattr(usize, usize, usize, usize, u8),
    RemoveXattr(usize, usize, usize),
    Remount(bool),
}

/// Attribute names the model's operations use.
const XNAMES: [&[u8]; 3] = [b"user.a", b"trusted.b", b"security.c"];

fn op() -> impl Strategy<Value = Op> {
    let d = 0usize..8;
    let n = 0usize..NAMES.len();
    prop_oneof![
        4 => (d.clone(), n.clone()).prop_map(|(d, n)| Op::Create(d, n)),
        3 => (d.clone(), n.clone()).prop_map(|(d, n)| Op::Mkdir(d, n)),
        2 => (d.clone(), n.clone()).prop_map(|(d, n)| Op::Unlink(d, n)),
        2 => (d.clone(), n.clone()).prop_map(|(d, n)| Op::Rmdir(d, n)),
        3 => (d.clone(), n.clone(), d.clone(), n.clone(), 0u8..3)
            .prop_map(|(a, b, c, e, f)| Op::Rename(a, b, c, e, f)),
        2 => (d.clone(), n.clone(), d.clone(), n.clone()).prop_map(|(a, b, c, e)| Op::Link(a, b, c, e)),
        1 => (d.clone(), n.clone(), 1usize..300).prop_map(|(a, b, l)| Op::Symlink(a, b, l)),
        6 => (d.clone(), n.clone(), 0u64..20000, 1usize..9000, any::<u8>())
            .prop_map(|(a, b, o, l, s)| Op::Write(a, b, o, l, s)),
        // Sub-page writes (LAWN / fine-log when the case's mode has them).
        4 => (d.clone(), n.clone(), 0u64..16000, 1usize..700, any::<u8>())
            .prop_map(|(a, b, o, l, s)| Op::Write(a, b, o, l, s)),
        2 => (d.clone(), n.clone(), 1usize..5000, any::<u8>()).prop_map(|(a, b, l, s)| Op::Append(a, b, l, s)),
        3 => (d.clone(), n.clone(), 0u64..20000).prop_map(|(a, b, s)| Op::Truncate(a, b, s)),
        1 => (d.clone(), n.clone(), 0u32..0o7777).prop_map(|(a, b, m)| Op::Chmod(a, b, m)),
        1 => (d.clone(), n.clone(), 0u64..20000, 1u64..10000).prop_map(|(a, b, o, l)| Op::Punch(a, b, o, l)),
        2 => (
            d.clone(),
            n.clone(),
            0usize..3,
            prop_oneof![0usize..4000, 3700usize..9000, 65000usize..66000],
            any::<u8>()
        )
            .prop_map(|(a, b, k, l, s)| Op::SetXattr(a, b, k, l, s)),
        1 => (d.clone(), n.clone(), 0usize..3).prop_map(|(a, b, k)| Op::RemoveXattr(a, b, k)),
        1 => any::<bool>().prop_map(Op::Remount),
    ]
}

#[derive(Clone, Debug, PartialEq)]
enum Node {
    File {
        data: Vec<u8>,
        mode: u32,
        nlink: u32,
        xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
    },
    Dir {
        names: BTreeMap<Vec<u8>, Ino>,
        parent: Ino,
    },
    Symlink {
        target: Vec<u8>,
    },
}

struct Model {
    nodes: HashMap<Ino, Node>,
}

impl Model {
    fn dirs(&self) -> Vec<Ino> {
        let mut v: Vec<Ino> = self
            .nodes
            .iter()
            .filter(|(_, n)| matches!(n, Node::Dir { .. }))
            .map(|(&i, _)| i)
            .collect();
        v.sort_unstable();
        v
    }
    fn dir(&self, d: usize) -> Ino {
        let v = self.dirs();
        v[d % v.len()]
    }
    fn names(&self, d: Ino) -> &BTreeMap<Vec<u8>, Ino> {
        match &self.nodes[&d] {
            Node::Dir { names, .. } => names,
            _ => unreachable!(),
        }
    }
    fn names_mut(&mut self, d: Ino) -> &mut BTreeMap<Vec<u8>, Ino> {
        match self.nodes.get_mut(&d) {
            Some(Node::Dir { names, .. }) => names,
            _ => unreachable!(),
        }
    }
    fn is_dir(&self, i: Ino) -> bool {
        matches!(self.nodes[&i], Node::Dir { .. })
    }
    fn kind(&self, i: Ino) -> FileKind {
        match self.nodes[&i] {
            Node::Dir { .. } => FileKind::Directory,
            Node::File { .. } => FileKind::Regular,
            Node::Symlink { .. } => FileKind::Symlink,
        }
    }
    fn nlink(&self, i: Ino) -> u32 {
        match &self.nodes[&i] {
            Node::File { nlink, .. } => *nlink,
            Node::Dir { names, .. } => {
                2 + names.values().filter(|c| self.is_dir(**c)).count() as u32
            }
            Node::Symlink { .. } => {
                // Symlinks can be hard-linked too: count the names.
                self.nodes
                    .values()
                    .map(|n| match n {
                        Node::Dir { names, .. } => {
                            names.values().filter(|&&c| c == i).count() as u32
                        }
                        _ => 0,
                    })
                    .sum()
            }
        }
    }
    fn parent(&self, i: Ino) -> Ino {
        match &self.nodes[&i] {
            Node::Dir { parent, .. } => *parent,
            _ => 0,
        }
    }
    /// Is `a` `d` or an ancestor of `d`?
    fn ancestor(&self, a: Ino, mut d: Ino) -> bool {
        loop {
            if d == a {
                return true;
            }
            if d == ROOT_INO {
                return false;
            }
            d = self.parent(d);
        }
    }
    fn drop_link(&mut self, i: Ino) {
        let gone = match self.nodes.get_mut(&i) {
            Some(Node::File { nlink, .. }) => {
                *nlink -= 1;
                *nlink == 0
            }
            Some(Node::Dir { .. }) => true,
            Some(Node::Symlink { .. }) => self.nlink(i) == 0,
            None => false,
        };
        if gone {
            self.nodes.remove(&i);
        }
    }
}

fn errno_of<T>(r: &Result<T, FsError>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.errno(),
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i % 251) as u8))
        .collect()
}

fn file_of(m: &Model, d: usize, n: usize) -> Option<(Ino, Ino)> {
    let dir = m.dir(d);
    m.names(dir).get(NAMES[n]).map(|&i| (dir, i))
}

fn step(fs: &Fs, m: &mut Model, op: &Op) {
    match *op {
        Op::Create(d, n) | Op::Mkdir(d, n) => {
            let dir = m.dir(d);
            let name = NAMES[n];
            let exists = m.names(dir).contains_key(name);
            let is_mkdir = matches!(op, Op::Mkdir(..));
            let r = if is_mkdir {
                fs.mkdir(dir, name, 0o755, 0, 0)
            } else {
                fs.create(dir, name, 0o644, 0, 0)
            };
            if exists {
                assert_eq!(errno_of(&r), libc::EEXIST, "{op:?}");
            } else {
                let a = r.unwrap();
                let node = if is_mkdir {
                    Node::Dir {
                        names: BTreeMap::new(),
                        parent: dir,
                    }
                } else {
                    Node::File {
                        data: Vec::new(),
                        mode: 0o644,
                        nlink: 1,
                        xattrs: BTreeMap::new(),
                    }
                };
                m.nodes.insert(a.ino, node);
                m.names_mut(dir).insert(name.to_vec(), a.ino);
            }
        }
        Op::Unlink(d, n) => {
            let dir = m.dir(d);
            let r = fs.unlink(dir, NAMES[n]);
            match m.names(dir).get(NAMES[n]).copied() {
                None => assert_eq!(errno_of(&r), libc::ENOENT),
                Some(c) if m.is_dir(c) => assert_eq!(errno_of(&r), libc::EISDIR),
                Some(c) => {
                    r.unwrap();
                    m.names_mut(dir).remove(NAMES[n]);
                    m.drop_link(c);
                }
            }
        }
        Op::Rmdir(d, n) => {
            let dir = m.dir(d);
            let r = fs.rmdir(dir, NAMES[n]);
            match m.names(dir).get(NAMES[n]).copied() {
                None => assert_eq!(errno_of(&r), libc::ENOENT),
                Some(c) if !m.is_dir(c) => assert_eq!(errno_of(&r), libc::ENOTDIR),
                Some(c) if !m.names(c).is_empty() => assert_eq!(errno_of(&r), libc::ENOTEMPTY),
                Some(c) => {
                    r.unwrap();
                    m.names_mut(dir).remove(NAMES[n]);
                    m.nodes.remove(&c);
                }
            }
        }
        Op::Rename(d1, n1, d2, n2, f) => {
            let (od, nd) = (m.dir(d1), m.dir(d2));
            let (on, nn) = (NAMES[n1], NAMES[n2]);
            let flags = RenameFlags {
                noreplace: f == 1,
                exchange: f == 2,
                whiteout: None,
            };
            let r = fs.rename(od, on, nd, nn, flags);
            let src = m.names(od).get(on).copied();
            let dst = m.names(nd).get(nn).copied();
            let expect = match (src, dst) {
                (None, _) => libc::ENOENT,
                (Some(s), Some(t)) if s == t => 0,
                (Some(_), Some(_)) if flags.noreplace => libc::EEXIST,
                (Some(_), None) if flags.exchange => libc::ENOENT,
                (Some(s), Some(t)) if !flags.exchange && m.is_dir(s) && !m.is_dir(t) => {
                    libc::ENOTDIR
                }
                (Some(s), Some(t)) if !flags.exchange && !m.is_dir(s) && m.is_dir(t) => {
                    libc::EISDIR
                }
                (Some(s), _) if m.is_dir(s) && od != nd && m.ancestor(s, nd) => libc::EINVAL,
                (Some(_), Some(t))
                    if flags.exchange && m.is_dir(t) && od != nd && m.ancestor(t, od) =>
                {
                    libc::EINVAL
                }
                (Some(_), Some(t)) if !flags.exchange && m.is_dir(t) && !m.names(t).is_empty() => {
                    libc::ENOTEMPTY
                }
                _ => 0,
            };
            assert_eq!(errno_of(&r), expect, "{op:?} -> {r:?}");
            if expect == 0 {
                let (s, t) = (src.unwrap(), dst);
                if t == Some(s) {
                    return;
                }
                if flags.exchange {
                    let t = t.unwrap();
                    m.names_mut(od).insert(on.to_vec(), t);
                    m.names_mut(nd).insert(nn.to_vec(), s);
                    if let Some(Node::Dir { parent, .. }) = m.nodes.get_mut(&s) {
                        *parent = nd;
                    }
                    if let Some(Node::Dir { parent, .. }) = m.nodes.get_mut(&t) {
                        *parent = od;
                    }
                } else {
                    m.names_mut(od).remove(on);
                    m.names_mut(nd).insert(nn.to_vec(), s);
                    if let Some(Node::Dir { parent, .. }) = m.nodes.get_mut(&s) {
                        *parent = nd;
                    }
                    if let Some(t) = t {
                        m.drop_link(t);
                    }
                }
            }
        }
        Op::Link(d1, n1, d2, n2) => {
            let (od, nd) = (m.dir(d1), m.dir(d2));
            let Some(src) = m.names(od).get(NAMES[n1]).copied() else {
                return;
            };
            let r = fs.link(src, nd, NAMES[n2]);
            // Linux looks the new name up first (EEXIST), then refuses directories.
            if m.names(nd).contains_key(NAMES[n2]) {
                assert_eq!(errno_of(&r), libc::EEXIST);
            } else if m.is_dir(src) {
                assert_eq!(errno_of(&r), libc::EPERM);
            } else {
                r.unwrap();
                m.names_mut(nd).insert(NAMES[n2].to_vec(), src);
                if let Some(Node::File { nlink, .. }) = m.nodes.get_mut(&src) {
                    *nlink += 1;
                }
            }
        }
        Op::Symlink(d, n, len) => {
            let dir = m.dir(d);
            let target = pattern(len, b'a')
                .iter()
                .map(|b| b'a' + b % 26)
                .collect::<Vec<u8>>();
            let r = fs.symlink(dir, NAMES[n], &target, 0, 0);
            if m.names(dir).contains_key(NAMES[n]) {
                assert_eq!(errno_of(&r), libc::EEXIST);
            } else {
                let a = r.unwrap();
                m.nodes.insert(a.ino, Node::Symlink { target });
                m.names_mut(dir).insert(NAMES[n].to_vec(), a.ino);
            }
        }
        Op::Write(d, n, off, len, seed) => {
            let Some((_, f)) = file_of(m, d, n) else {
                return;
            };
            let data = pattern(len, seed);
            let r = fs.write(f, off, &data);
            match m.nodes.get_mut(&f) {
                Some(Node::File { data: cur, .. }) => {
                    assert_eq!(r.unwrap(), len);
                    let end = off as usize + len;
                    if cur.len() < end {
                        cur.resize(end, 0);
                    }
                    cur[off as usize..end].copy_from_slice(&data);
                }
                Some(Node::Dir { .. }) => assert_eq!(errno_of(&r), libc::EISDIR),
                _ => assert!(r.is_err()),
            }
        }
        Op::Append(d, n, len, seed) => {
            let Some((_, f)) = file_of(m, d, n) else {
                return;
            };
            let data = pattern(len, seed);
            let r = fs.append(f, &data);
            if let Some(Node::File { data: cur, .. }) = m.nodes.get_mut(&f) {
                assert_eq!(r.unwrap(), cur.len() as u64);
                cur.extend_from_slice(&data);
            } else {
                assert!(r.is_err());
            }
        }
        Op::Truncate(d, n, size) => {
            let Some((_, f)) = file_of(m, d, n) else {
                return;
            };
            let r = fs.setattr(
                f,
                &SetAttr {
                    size: Some(size),
                    ..Default::default()
                },
            );
            match m.nodes.get_mut(&f) {
                Some(Node::File { data, .. }) => {
                    assert_eq!(r.unwrap().size, size);
                    data.resize(size as usize, 0);
                }
                Some(Node::Dir { .. }) => assert_eq!(errno_of(&r), libc::EISDIR),
                _ => assert!(r.is_err()),
            }
        }
        Op::SetXattr(d, n, k, len, seed) => {
            let Some((_, f)) = file_of(m, d, n) else {
                return;
            };
            let value: Vec<u8> = (0..len)
                .map(|i| (i as u8).wrapping_mul(seed) ^ seed)
                .collect();
            let r = fs.setxattr(f, XNAMES[k], &value, 0);
            match m.nodes.get_mut(&f) {
                Some(Node::File { xattrs, .. }) if len <= XATTR_SIZE_MAX => {
                    r.unwrap();
                    xattrs.insert(XNAMES[k].to_vec(), value);
                }
                Some(Node::File { .. }) => assert_eq!(errno_of(&r), libc::E2BIG),
                _ => {}
            }
        }
        Op::RemoveXattr(d, n, k) => {
            let Some((_, f)) = file_of(m, d, n) else {
                return;
            };
            let r = fs.removexattr(f, XNAMES[k]);
            if let Some(Node::File { xattrs, .. }) = m.nodes.get_mut(&f) {
                match xattrs.remove(XNAMES[k]) {
                    Some(_) => r.unwrap(),
                    None => assert_eq!(errno_of(&r), libc::ENODATA),
                }
            }
        }
        Op::Chmod(d, n, mode) => {
            let Some((_, f)) = file_of(m, d, n) else {
                return;
            };
            let a = fs
                .setattr(
                    f,
                    &SetAttr {
                        mode: Some(mode),
                        ..Default::default()
                    },
                )
                .unwrap();
            assert_eq!(a.mode & 0o7777, mode);
            if let Some(Node::File { mode: cur, .. }) = m.nodes.get_mut(&f) {
                *cur = mode;
            }
        }
        Op::Punch(d, n, off, len) => {
            let Some((_, f)) = file_of(m, d, n) else {
                return;
            };
            let r = fs.fallocate(
                f,
                off,
                len,
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            );
            if let Some(Node::File { data, .. }) = m.nodes.get_mut(&f) {
                r.unwrap();
                let end = ((off + len) as usize).min(data.len());
                if (off as usize) < end {
                    data[off as usize..end].fill(0);
                }
            } else {
                assert!(r.is_err());
            }
        }
        Op::Remount(_) => unreachable!(),
    }
}

/// Compares the whole tree with the model.
fn compare(fs: &Fs, m: &Model) {
    let mut seen: HashMap<Ino, Ino> = HashMap::new();
    compare_dir(fs, m, ROOT_INO, &mut seen);
}

fn compare_dir(fs: &Fs, m: &Model, dir: Ino, seen: &mut HashMap<Ino, Ino>) {
    let ents = fs.readdir(dir, 0, 10_000).unwrap();
    let got: BTreeMap<Vec<u8>, Ino> = ents
        .iter()
        .filter(|e| e.name != b"." && e.name != b"..")
        .map(|e| (e.name.clone(), e.ino))
        .collect();
    let want = m.names(dir);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "names of dir {dir}"
    );
    let dotdot = ents.iter().find(|e| e.name == b"..").unwrap().ino;
    assert_eq!(
        dotdot,
        if dir == ROOT_INO {
            ROOT_INO
        } else {
            m.parent(dir)
        },
        "'..' of {dir}"
    );
    let a = fs.getattr(dir).unwrap();
    assert_eq!(a.nlink, m.nlink(dir), "nlink of dir {dir}");
    for (name, &ino) in want {
        assert_eq!(
            got[name],
            ino,
            "inode of {:?}",
            String::from_utf8_lossy(name)
        );
        let a = fs.getattr(ino).unwrap();
        assert_eq!(a.kind, m.kind(ino));
        if seen.insert(ino, dir).is_some() && m.is_dir(ino) {
            panic!("directory {ino} seen twice");
        }
        match &m.nodes[&ino] {
            Node::Dir { .. } => compare_dir(fs, m, ino, seen),
            Node::File {
                data,
                mode,
                nlink,
                xattrs,
            } => {
                let list = fs.listxattr(ino).unwrap();
                let mut names: Vec<&[u8]> =
                    list.split(|&b| b == 0).filter(|n| !n.is_empty()).collect();
                names.sort();
                assert_eq!(
                    names,
                    xattrs.keys().map(|k| k.as_slice()).collect::<Vec<_>>(),
                    "attributes of {ino}"
                );
                for (k, v) in xattrs {
                    assert_eq!(&fs.getxattr(ino, k).unwrap(), v, "attribute of {ino}");
                }
                assert_eq!(a.size, data.len() as u64, "size of {ino}");
                assert_eq!(a.mode & 0o7777, *mode);
                assert_eq!(a.nlink, *nlink, "nlink of {ino}");
                let mut buf = vec![0u8; data.len() + 10];
                let n = fs.read(ino, 0, &mut buf).unwrap();
                assert_eq!(n, data.len());
                assert!(buf[..n] == data[..], "contents of {ino}");
            }
            Node::Symlink { target } => {
                assert_eq!(fs.readlink(ino).unwrap(), *target);
                assert_eq!(a.nlink, m.nlink(ino));
            }
        }
    }
}

fn run(
    ops: &[Op],
    lock: mnemofs::LockMode,
    small_write: mnemofs::SmallWriteMode,
    read_cache: mnemofs::ReadCacheMode,
    devices: usize,
    placement: mnemofs::PlacementMode,
) {
    // One image of 32 MiB, or a volume of `devices` images of 12 MiB (nodes 0, 1,
    // 0, ...), given to mount in reverse order and without their nodes.
    let img = common::fresh_empty();
    let specs: Vec<mnemofs::DeviceSpec> = (0..devices)
        .map(|i| mnemofs::DeviceSpec {
            path: img.dir.path().join(format!("dev{i}")),
            node: Some(i as u32 % 2),
        })
        .collect();
    let size = if devices == 1 { 32 << 20 } else { 12 << 20 };
    mnemofs::mkfs_devices(
        &specs,
        &mnemofs::MkfsOptions {
            size,
            cpus: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let mut order: Vec<mnemofs::DeviceSpec> = specs
        .iter()
        .map(|s| mnemofs::DeviceSpec {
            path: s.path.clone(),
            node: None,
        })
        .collect();
    order.reverse();
    let opts = mnemofs::MountOptions {
        placement,
        lock,
        small_write,
        lawn_writeback_thread: true,
        // With the cache: every page read once is hot (threshold 1) and the budget
        // is 64 pages, so the comparisons read through hits, misses and evictions.
        read_cache,
        read_cache_bytes: 64 * 4096,
        read_cache_threshold: 1,
        read_cache_window_ms: 60_000,
        ..common::opts()
    };
    let mount = |_: &common::Img| mnemofs::mount_devices(&order, &opts).unwrap();
    let fsck = || mnemofs::fsck_devices(&order).unwrap();
    let mut fs = Some(mount(&img));
    let mut m = Model {
        nodes: HashMap::new(),
    };
    m.nodes.insert(
        ROOT_INO,
        Node::Dir {
            names: BTreeMap::new(),
            parent: ROOT_INO,
        },
    );
    for op in ops {
        match op {
            Op::Remount(clean) => {
                let f = fs.take().unwrap();
                if *clean {
                    f.unmount().unwrap();
                } else {
                    drop(f);
                }
                let r = fsck();
                assert!(r.is_clean(), "fsck after {op:?}: {:?}", r.problems);
                fs = Some(mount(&img));
            }
            _ => step(fs.as_ref().unwrap(), &mut m, op),
        }
        compare(fs.as_ref().unwrap(), &m);
    }
    let f = fs.take().unwrap();
    f.unmount().unwrap();
    let r = fsck();
    assert!(r.is_clean(), "final fsck: {:?}", r.problems);
}

fn cases() -> u32 {
    std::env::var("MODEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn model_matches(
        ops in proptest::collection::vec(op(), 100..150),
        lock in proptest::sample::select(mnemofs::LockMode::ALL.iter().map(|x| x.1).collect::<Vec<_>>()),
        small_write in proptest::sample::select(mnemofs::SmallWriteMode::ALL.iter().map(|x| x.1).collect::<Vec<_>>()),
        read_cache in proptest::sample::select(mnemofs::ReadCacheMode::ALL.iter().map(|x| x.1).collect::<Vec<_>>()),
        devices in proptest::sample::select(vec![1usize, 1, 3]),
        placement in proptest::sample::select(mnemofs::PlacementMode::ALL.iter().map(|x| x.1).collect::<Vec<_>>()),
    ) {
        run(&ops, lock, small_write, read_cache, devices, placement);
    }
}
