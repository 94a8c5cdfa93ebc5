//! Scenario: a power cut at every fence of a workload. The workload runs once on
//! anonymous PM with a recording tracer; then, for every fence inside every operation
//! (and every operation's return), and after every 8-byte atomic store, crash images are built from the trace — every
//! store issued so far reached PM, and only the stores that were flushed and fenced
//! did — and each must recover, pass fsck, and equal the tree either before or after
//! the operation in flight (never something in between; after it once it returned).
//! For the first images, a second crash at every fence of recovery itself must recover
//! to the same tree. (The crash-explorer issue generalises this to every subset of
//! in-flight cache lines.)

use mnemofs::{FileKind, Fs, Ino, MkfsOptions, MountOptions, RenameFlags, SetAttr, ROOT_INO};
use pm::{Event, Marker, Pm, RecordingTracer, StoreKind};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

const SIZE: u64 = 16 << 20;

type Tree = BTreeMap<String, String>;

fn dump(fs: &Fs) -> Tree {
    let mut t = Tree::new();
    walk(fs, ROOT_INO, "", &mut t);
    t
}

fn walk(fs: &Fs, dir: Ino, path: &str, t: &mut Tree) {
    let a = fs.getattr(dir).unwrap();
    t.insert(
        format!("{path}/"),
        format!("dir nlink={} mode={:o}", a.nlink, a.mode),
    );
    for e in fs.readdir(dir, 0, 100_000).unwrap() {
        if e.name == b"." || e.name == b".." {
            continue;
        }
        let p = format!("{path}/{}", String::from_utf8_lossy(&e.name));
        let a = fs.getattr(e.ino).unwrap();
        match a.kind {
            FileKind::Directory => walk(fs, e.ino, &p, t),
            FileKind::Symlink => {
                t.insert(p, format!("link -> {:?}", fs.readlink(e.ino).unwrap()));
            }
            _ => {
                let mut b = vec![0u8; a.size as usize];
                fs.read(e.ino, 0, &mut b).unwrap();
                let h = b.iter().fold(0xcbf29ce484222325u64, |h, &x| {
                    (h ^ x as u64).wrapping_mul(0x100000001b3)
                });
                t.insert(
                    p,
                    format!(
                        "file ino={} size={} nlink={} mode={:o} data={h:x}",
                        e.ino, a.size, a.nlink, a.mode
                    ),
                );
            }
        }
    }
}

fn opts() -> MountOptions {
    MountOptions::default()
}

/// The workload: every kind of operation, on a small file set.
fn workload(fs: &Fs, i: usize) {
    let lookup = |d: Ino, n: &str| fs.lookup(d, n.as_bytes()).unwrap().ino;
    match i {
        0 => drop(fs.create(ROOT_INO, b"foo", 0o644, 0, 0).unwrap()),
        1 => drop(fs.mkdir(ROOT_INO, b"A", 0o755, 0, 0).unwrap()),
        2 => drop(fs.write(lookup(ROOT_INO, "foo"), 0, &[7u8; 6000]).unwrap()),
        3 => drop(fs.write(lookup(ROOT_INO, "foo"), 100, &[9u8; 50]).unwrap()),
        4 => drop(fs.mkdir(lookup(ROOT_INO, "A"), b"C", 0o700, 0, 0).unwrap()),
        5 => drop(
            fs.link(lookup(ROOT_INO, "foo"), lookup(ROOT_INO, "A"), b"bar")
                .unwrap(),
        ),
        6 => drop(
            fs.setattr(
                lookup(ROOT_INO, "foo"),
                &SetAttr {
                    size: Some(3000),
                    ..Default::default()
                },
            )
            .unwrap(),
        ),
        7 => fs
            .rename(ROOT_INO, b"A", ROOT_INO, b"B", RenameFlags::default())
            .unwrap(),
        8 => drop(fs.symlink(ROOT_INO, b"sl", b"B/bar", 0, 0).unwrap()),
        9 => drop(fs.create(ROOT_INO, b"baz", 0o600, 0, 0).unwrap()),
        10 => fs
            .rename(
                lookup(ROOT_INO, "B"),
                b"bar",
                ROOT_INO,
                b"baz",
                RenameFlags::default(),
            )
            .unwrap(),
        11 => drop(fs.append(lookup(ROOT_INO, "foo"), &[5u8; 9000]).unwrap()),
        12 => fs
            .rename(
                lookup(ROOT_INO, "B"),
                b"C",
                ROOT_INO,
                b"C2",
                RenameFlags::default(),
            )
            .unwrap(),
        13 => fs
            .rename(
                ROOT_INO,
                b"C2",
                ROOT_INO,
                b"sl",
                RenameFlags {
                    exchange: true,
                    noreplace: false,
                    whiteout: None,
                },
            )
            .unwrap(),
        14 => fs.unlink(ROOT_INO, b"foo").unwrap(),
        15 => fs.rmdir(ROOT_INO, b"sl").unwrap(),
        16 => drop(
            fs.setattr(
                lookup(ROOT_INO, "baz"),
                &SetAttr {
                    mode: Some(0o4755),
                    ..Default::default()
                },
            )
            .unwrap(),
        ),
        17 => fs
            .fallocate(
                lookup(ROOT_INO, "baz"),
                4096,
                4096,
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            )
            .unwrap(),
        _ => unreachable!(),
    }
}
const OPS: usize = 18;

/// Builds crash images from a trace: per crash point, (all stores, persisted only).
struct Replay {
    all: Vec<u8>,
    durable: Vec<u8>,
    /// Pending cached stores per line, in order (not yet flushed).
    unflushed: BTreeMap<u64, Vec<(u64, Vec<u8>)>>,
    /// Flushed (or non-temporal) stores waiting for a fence.
    flushed: Vec<(u64, Vec<u8>)>,
}

impl Replay {
    fn new(base: Vec<u8>) -> Replay {
        Replay {
            durable: base.clone(),
            all: base,
            unflushed: BTreeMap::new(),
            flushed: Vec::new(),
        }
    }
    fn apply(&mut self, e: &Event) {
        match e {
            Event::Store { off, data, kind } => {
                self.all[*off as usize..*off as usize + data.len()].copy_from_slice(data);
                if *kind == StoreKind::NonTemporal {
                    self.flushed.push((*off, data.clone()));
                } else {
                    // Split by cache line so a flush takes exactly its line's bytes.
                    let mut o = *off;
                    let mut rest = &data[..];
                    while !rest.is_empty() {
                        let line = o & !63;
                        let n = ((line + 64 - o) as usize).min(rest.len());
                        self.unflushed
                            .entry(line)
                            .or_default()
                            .push((o, rest[..n].to_vec()));
                        o += n as u64;
                        rest = &rest[n..];
                    }
                }
            }
            Event::Flush { line } => {
                if let Some(v) = self.unflushed.remove(line) {
                    self.flushed.extend(v);
                }
            }
            Event::Fence => {
                for (o, d) in self.flushed.drain(..) {
                    self.durable[o as usize..o as usize + d.len()].copy_from_slice(&d);
                }
            }
            Event::Marker(_) => {}
        }
    }
}

fn recover(image: &[u8]) -> (Fs, Tree) {
    let mut pm = Pm::anonymous(SIZE).unwrap();
    pm.load_image(image);
    let r = mnemofs::fsck::fsck_pm(&pm).unwrap();
    assert!(r.is_clean(), "fsck: {:?}", r.problems);
    let fs = Fs::from_pm(pm, &opts()).unwrap();
    let t = dump(&fs);
    (fs, t)
}

fn usable(fs: &Fs) {
    let f = fs.create(ROOT_INO, b"after-crash", 0o644, 0, 0).unwrap();
    fs.write(f.ino, 10, b"works").unwrap();
    let mut b = [0u8; 5];
    fs.read(f.ino, 10, &mut b).unwrap();
    assert_eq!(&b, b"works");
    fs.unlink(ROOT_INO, b"after-crash").unwrap();
}

#[test]
fn every_fence_of_every_operation_recovers_atomically() {
    let mut base_pm = Pm::anonymous(SIZE).unwrap();
    mnemofs::mkfs_pm(
        &mut base_pm,
        &MkfsOptions {
            size: SIZE,
            cpus: 2,
            inodes: 256,
            force: true,
            ..Default::default()
        },
    )
    .unwrap();
    let base = base_pm.to_vec();
    let mut pm = Pm::anonymous(SIZE).unwrap();
    pm.load_image(&base);
    let rec = Arc::new(RecordingTracer::new());
    pm.set_tracer(Some(rec.clone()));
    let fs = Fs::from_pm(pm, &opts()).unwrap();
    let mut trees = vec![dump(&fs)];
    for i in 0..OPS {
        fs.marker(Marker::OpBegin(format!("op{i}")));
        workload(&fs, i);
        fs.marker(Marker::OpEnd(format!("op{i}")));
        trees.push(dump(&fs));
    }
    let events = rec.take();
    drop(fs);

    let mut rp = Replay::new(base);
    let mut op: Option<usize> = None;
    let mut done = 0usize;
    let mut seen = HashSet::new();
    let mut checked = 0;
    let mut recovery_checks = 0;
    for e in &events {
        rp.apply(e);
        let crash_point = match e {
            Event::Marker(Marker::OpBegin(n)) => {
                op = Some(n[2..].parse().unwrap());
                false
            }
            Event::Marker(Marker::OpEnd(_)) => {
                done += 1;
                op = None;
                true
            }
            Event::Fence => op.is_some(),
            // In-order persistence: a crash right after any 8-byte atomic store (tail,
            // head, valid, journal words) with everything before it persisted.
            Event::Store {
                kind: StoreKind::Atomic8,
                ..
            } => op.is_some(),
            _ => false,
        };
        if !crash_point {
            continue;
        }
        let images = if matches!(e, Event::Store { .. }) {
            vec![rp.all.clone()]
        } else {
            vec![rp.all.clone(), rp.durable.clone()]
        };
        for image in images {
            if !seen.insert(image.clone()) {
                continue;
            }
            let (fs, t) = recover(&image);
            checked += 1;
            let ok = match op {
                Some(i) => t == trees[i] || t == trees[i + 1],
                None => t == trees[done],
            };
            assert!(ok, "crash in op {op:?} (done {done}): recovered tree {t:#?}\nbefore {:#?}\nafter {:#?}", trees[done], trees.get(done + 1));
            usable(&fs);
            drop(fs);
            // A crash at every fence of recovery must recover to the same tree.
            if recovery_checks < 25 {
                recovery_checks += 1;
                let mut pm = Pm::anonymous(SIZE).unwrap();
                pm.load_image(&image);
                let r2 = Arc::new(RecordingTracer::new());
                pm.set_tracer(Some(r2.clone()));
                drop(Fs::from_pm(pm, &opts()).unwrap());
                let mut rp2 = Replay::new(image.clone());
                for e2 in r2.take() {
                    rp2.apply(&e2);
                    if e2 == Event::Fence
                        || matches!(
                            e2,
                            Event::Store {
                                kind: StoreKind::Atomic8,
                                ..
                            }
                        )
                    {
                        for img2 in [rp2.all.clone(), rp2.durable.clone()] {
                            let (_fs2, t2) = recover(&img2);
                            assert_eq!(t2, t, "crash during recovery changed the outcome");
                        }
                    }
                }
            }
        }
    }
    assert_eq!(done, OPS);
    println!(
        "{checked} distinct crash images checked, {recovery_checks} with crashes inside recovery"
    );
    assert!(checked > OPS * 2);
}
