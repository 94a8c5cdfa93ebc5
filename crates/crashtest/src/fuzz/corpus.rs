//! The base corpus: small valid images the mutations start from, built
//! deterministically through the public engine API (fresh; after a mixed workload,
//! cleanly unmounted or not; with live LAWN runs and fine-log records; crash states
//! captured at fences inside an operation, as the crash explorer builds them; one and
//! two CPUs).
//!
//! Engine writes are captured without unmounting through the `pm` tracing seam: a
//! [`Mirror`] tracer applies every store to a copy of the image, a recording tracer
//! plus [`Tracker`](crate::crash::Tracker) gives the crash states. Timestamps and the
//! superblock's mkfs time are then set to fixed values (checksums recomputed), so the
//! same corpus comes out of every process and a seed names the same image anywhere.

use super::map::Map;
use crate::crash::Tracker;
use crate::image::Pins;
use mnemofs::format::{self, SB_CREATED_OFF, SB_SIZE};
use mnemofs::{Fs, Ino, MkfsOptions, MountOptions, RenameFlags, SetAttr, SmallWriteMode, ROOT_INO};
use pm::{Event, Pm, RecordingTracer, StoreKind, Tracer};
use std::sync::{Arc, Mutex};

/// Bytes of a corpus image.
pub const FUZZ_IMAGE_SIZE: u64 = 1 << 20;
/// Inode slots of a corpus image.
pub const FUZZ_INODES: u64 = 64;
/// The time every timestamp of a corpus image is set to.
const FIXED_SEC: u64 = 1_700_000_000;

/// One valid image of the corpus.
#[derive(Clone)]
pub struct BaseImage {
    /// What it is (printed with every failure).
    pub name: String,
    /// The image.
    pub bytes: Vec<u8>,
    /// The small-write mode it was written with (the oracle mounts with it or the
    /// default).
    pub mode: SmallWriteMode,
    /// CPUs of its geometry.
    pub cpus: u32,
}

/// A tracer that applies every store to a copy of the image: the image as the
/// engine left it, without unmounting.
pub struct Mirror(Mutex<Vec<u8>>);

impl Mirror {
    /// A mirror of `img`.
    pub fn new(img: &[u8]) -> Mirror {
        Mirror(Mutex::new(img.to_vec()))
    }

    /// The current bytes.
    pub fn bytes(&self) -> Vec<u8> {
        match self.0.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

impl Tracer for Mirror {
    fn store(&self, off: u64, data: &[u8], _kind: StoreKind) {
        let mut g = match self.0.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let s = off as usize;
        if let Some(dst) = g.get_mut(s..s.saturating_add(data.len())) {
            dst.copy_from_slice(data);
        }
    }
    fn flush(&self, _line: u64) {}
    fn fence(&self) {}
    fn marker(&self, _m: &pm::Marker) {}
}

fn e2s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// A freshly formatted image.
fn fresh(cpus: u32) -> Result<Vec<u8>, String> {
    let mut pm = Pm::anonymous(FUZZ_IMAGE_SIZE).map_err(e2s)?;
    mnemofs::mkfs_pm(
        &mut pm,
        &MkfsOptions {
            size: FUZZ_IMAGE_SIZE,
            cpus,
            inodes: FUZZ_INODES,
            force: true,
            ..Default::default()
        },
    )
    .map_err(e2s)?;
    Ok(pm.to_vec())
}

/// Mount options of the corpus builds and of the oracle.
pub fn opts(mode: SmallWriteMode) -> MountOptions {
    MountOptions {
        small_write: mode,
        exclusive: false,
        lawn_writeback_thread: false,
        lawn_desc_store: Some(pm::Store16::NonTemporal),
        ..MountOptions::default()
    }
}

/// A mounted copy of `img` whose stores go to `tracer`.
fn mount_traced(img: &[u8], mode: SmallWriteMode, tracer: Arc<dyn Tracer>) -> Result<Fs, String> {
    let mut pm = Pm::anonymous(img.len() as u64).map_err(e2s)?;
    pm.load_image(img);
    pm.set_tracer(Some(tracer));
    Fs::from_pm(pm, &opts(mode)).map_err(e2s)
}

/// Runs the corpus workloads with each operation pinned to image CPU `k % cpus`
/// (the engine picks journals, allocators and inode shares by the CPU it runs on).
struct Ops<'a> {
    fs: &'a Fs,
    pins: &'a Pins,
    cpus: u32,
    k: u32,
}

impl Ops<'_> {
    fn pin(&mut self) {
        self.pins.pin(self.k % self.cpus.max(1));
        self.k += 1;
    }
    fn lookup(&self, path: &[&[u8]]) -> Result<Ino, String> {
        let mut ino = ROOT_INO;
        for p in path {
            ino = self.fs.lookup(ino, p).map_err(e2s)?.ino;
        }
        Ok(ino)
    }
    fn mkdir(&mut self, dir: Ino, name: &[u8]) -> Result<Ino, String> {
        self.pin();
        Ok(self.fs.mkdir(dir, name, 0o755, 0, 0).map_err(e2s)?.ino)
    }
    fn create(&mut self, dir: Ino, name: &[u8]) -> Result<Ino, String> {
        self.pin();
        Ok(self.fs.create(dir, name, 0o644, 0, 0).map_err(e2s)?.ino)
    }
    fn write(&mut self, ino: Ino, off: u64, len: usize, seed: u8) -> Result<(), String> {
        self.pin();
        let data = crate::workload::pattern(len, seed, off);
        self.fs.write(ino, off, &data).map_err(e2s).map(|_| ())
    }
}

/// The mixed workload: nested directories, a directory whose entries span more than
/// one log page, a file whose log spans several pages (pinned hole punches), sparse
/// files, truncation, symlinks, hard links, renames and unlinks.
fn mixed(fs: &Fs, pins: &Pins, cpus: u32) -> Result<(), String> {
    let mut o = Ops {
        fs,
        pins,
        cpus,
        k: 0,
    };
    let a = o.mkdir(ROOT_INO, b"a")?;
    let b = o.mkdir(a, b"b")?;
    let c = o.mkdir(b, b"c")?;
    let f1 = o.create(a, b"f1")?;
    o.write(f1, 0, 3 * 4096 + 500, 1)?;
    o.write(f1, 1000, 200, 2)?;
    let sparse = o.create(b, b"sparse")?;
    o.write(sparse, 40 * 4096 + 7, 3000, 3)?;
    o.write(sparse, 3, 10, 4)?;
    // A file whose log spans several pages: 90 pinned single-page hole punches.
    let holes = o.create(c, b"holes")?;
    o.write(holes, 0, 4096, 5)?;
    o.pin();
    fs.setattr(
        holes,
        &SetAttr {
            size: Some(200 * 4096),
            ..Default::default()
        },
    )
    .map_err(e2s)?;
    for i in 0..90u64 {
        fs.fallocate(holes, (2 * i + 1) * 4096, 4096, 0x02 | 0x01)
            .map_err(e2s)?;
    }
    // Extended attributes: small and large values, a replaced and a removed one.
    fs.setxattr(f1, b"user.color", b"blue", 0).map_err(e2s)?;
    fs.setxattr(f1, b"security.big", &[7u8; 600], 0)
        .map_err(e2s)?;
    fs.setxattr(b, b"trusted.t", b"dir value", 0).map_err(e2s)?;
    fs.setxattr(f1, b"user.color", b"green", 0).map_err(e2s)?;
    fs.setxattr(f1, b"user.gone", b"x", 0).map_err(e2s)?;
    fs.removexattr(f1, b"user.gone").map_err(e2s)?;
    // Truncate down and up; punch the middle of f1.
    let t = o.create(a, b"trunc")?;
    o.write(t, 0, 9000, 6)?;
    o.pin();
    fs.setattr(
        t,
        &SetAttr {
            size: Some(5000),
            ..Default::default()
        },
    )
    .map_err(e2s)?;
    fs.fallocate(f1, 4096, 4096, 0x02 | 0x01).map_err(e2s)?;
    fs.fallocate(t, 8192, 8192, 0).map_err(e2s)?;
    // A directory whose entries span more than one log page: hard links with long
    // and short names.
    let many = o.mkdir(ROOT_INO, b"many")?;
    let target = o.create(many, b"target")?;
    o.write(target, 0, 100, 7)?;
    for i in 0..28 {
        o.pin();
        let name = format!("a-rather-long-hard-link-name-number-{i:03}");
        fs.link(target, many, name.as_bytes()).map_err(e2s)?;
    }
    for i in 0..12 {
        let name = format!("s{i}");
        fs.link(target, many, name.as_bytes()).map_err(e2s)?;
    }
    let long: Vec<u8> = (0..250).map(|i| b'a' + (i % 26) as u8).collect();
    fs.link(target, many, &long).map_err(e2s)?;
    // Symlinks, renames, unlinks.
    o.pin();
    fs.symlink(ROOT_INO, b"ln", b"a/f1", 0, 0).map_err(e2s)?;
    fs.symlink(b, b"deep-ln", &[b'x'; 300], 0, 0).map_err(e2s)?;
    fs.link(f1, ROOT_INO, b"f1-again").map_err(e2s)?;
    o.pin();
    fs.rename(a, b"trunc", b, b"moved", RenameFlags::default())
        .map_err(e2s)?;
    let gone = o.create(ROOT_INO, b"gone")?;
    o.write(gone, 0, 5000, 8)?;
    o.pin();
    fs.unlink(ROOT_INO, b"gone").map_err(e2s)?;
    for i in 0..5 {
        fs.unlink(many, format!("s{i}").as_bytes()).map_err(e2s)?;
    }
    let x = o.create(ROOT_INO, b"x")?;
    let y = o.create(ROOT_INO, b"y")?;
    o.write(x, 0, 100, 9)?;
    o.write(y, 0, 200, 10)?;
    o.pin();
    fs.rename(
        ROOT_INO,
        b"x",
        ROOT_INO,
        b"y",
        RenameFlags {
            exchange: true,
            ..Default::default()
        },
    )
    .map_err(e2s)?;
    o.pin();
    fs.fsync(ROOT_INO).map_err(e2s)?;
    debug_assert!(o.lookup(&[b"a", b"b", b"c"]).is_ok());
    Ok(())
}

/// Sub-page writes (LAWN runs, fine-log writes) on a few files.
fn small_writes(fs: &Fs, pins: &Pins, cpus: u32) -> Result<(), String> {
    let mut o = Ops {
        fs,
        pins,
        cpus,
        k: 1,
    };
    let d = o.mkdir(ROOT_INO, b"sw")?;
    for (i, name) in [&b"p"[..], b"q", b"r"].into_iter().enumerate() {
        let f = o.create(d, name)?;
        o.write(f, 0, 3 * 4096, 20 + i as u8)?;
        for j in 0..6u64 {
            o.write(
                f,
                j * 700 + 64 * i as u64,
                100 + 64 * j as usize,
                30 + j as u8,
            )?;
        }
    }
    Ok(())
}

/// The corpus, built deterministically.
pub fn build() -> Result<Vec<BaseImage>, String> {
    let mut out = Vec::new();
    for cpus in [1u32, 2] {
        let pins = Pins::new(cpus);
        let base = fresh(cpus)?;
        let mut push = |name: &str, bytes: Vec<u8>, mode| {
            out.push(BaseImage {
                name: format!("{name}-{cpus}cpu"),
                bytes,
                mode,
                cpus,
            })
        };
        push("fresh", base.clone(), SmallWriteMode::Cow);

        // Mixed workload, cleanly unmounted and not.
        let m = Arc::new(Mirror::new(&base));
        let fs = mount_traced(&base, SmallWriteMode::Cow, m.clone())?;
        mixed(&fs, &pins, cpus)?;
        let dirty = m.bytes();
        fs.unmount().map_err(e2s)?;
        let mixed_clean = m.bytes();
        push("mixed-dirty", dirty, SmallWriteMode::Cow);
        push("mixed-clean", mixed_clean.clone(), SmallWriteMode::Cow);

        // LAWN runs live in the zone: dirty and after a clean unmount.
        for mode in [SmallWriteMode::Lawn, SmallWriteMode::Finelog] {
            let m = Arc::new(Mirror::new(&mixed_clean));
            let fs = mount_traced(&mixed_clean, mode, m.clone())?;
            small_writes(&fs, &pins, cpus)?;
            let dirty = m.bytes();
            fs.unmount().map_err(e2s)?;
            push(&format!("{}-dirty", mode.name()), dirty, mode);
            if mode == SmallWriteMode::Lawn {
                push("lawn-clean", m.bytes(), mode);
            }
        }

        // Crash states at fences inside operations (as the crash explorer builds
        // them): a rename, a page write, a fine-log sub-page write (live redo
        // record), a LAWN sub-page write.
        let crash_ops: [(&str, SmallWriteMode, CrashOp); 4] = [
            ("crash-rename", SmallWriteMode::Cow, |fs| {
                let a = fs.lookup(ROOT_INO, b"a").map_err(e2s)?.ino;
                fs.rename(a, b"f1", ROOT_INO, b"f1-renamed", RenameFlags::default())
                    .map_err(e2s)
            }),
            ("crash-write", SmallWriteMode::Cow, |fs| {
                let f = fs.lookup(ROOT_INO, b"f1-again").map_err(e2s)?.ino;
                fs.write(f, 8192, &[0x5a; 6000]).map_err(e2s).map(|_| ())
            }),
            ("crash-finelog", SmallWriteMode::Finelog, |fs| {
                let f = fs.lookup(ROOT_INO, b"f1-again").map_err(e2s)?.ino;
                fs.write(f, 100, &[0x6b; 300]).map_err(e2s).map(|_| ())
            }),
            ("crash-lawn", SmallWriteMode::Lawn, |fs| {
                let f = fs.lookup(ROOT_INO, b"f1-again").map_err(e2s)?.ino;
                fs.write(f, 64, &[0x7c; 128]).map_err(e2s).map(|_| ())
            }),
        ];
        for (name, mode, op) in crash_ops {
            let states = crash_states(&mixed_clean, mode, op, &pins)?;
            for (i, s) in states.into_iter().enumerate() {
                push(&format!("{name}-fence{i}"), s, mode);
            }
        }
    }
    for b in &mut out {
        canonicalize(&mut b.bytes);
    }
    Ok(out)
}

type CrashOp = fn(&Fs) -> Result<(), String>;

/// The durable images at the fences of `op` run on a mount of `img` (distinct ones,
/// at most 3, the last fences first: they hold the most of the operation).
fn crash_states(
    img: &[u8],
    mode: SmallWriteMode,
    op: CrashOp,
    pins: &Pins,
) -> Result<Vec<Vec<u8>>, String> {
    let rec = Arc::new(RecordingTracer::new());
    let fs = mount_traced(img, mode, rec.clone())?;
    pins.pin(0);
    let setup = rec.take();
    op(&fs)?;
    let events = rec.take();
    drop(fs);
    let mut t = Tracker::new(img.to_vec());
    for e in &setup {
        t.apply(e);
    }
    let mut states: Vec<Vec<u8>> = Vec::new();
    for e in &events {
        t.apply(e);
        if *e == Event::Fence {
            let d = t.durable();
            if states.last().is_none_or(|s| s[..] != d[..]) && d != img {
                states.push(d.to_vec());
            }
        }
    }
    // The first, a middle one and the last: at most 3.
    if states.len() > 3 {
        let n = states.len();
        states = vec![
            states[0].clone(),
            states[n / 2].clone(),
            states[n - 1].clone(),
        ];
    }
    Ok(states)
}

/// Sets every timestamp (committed log entries up to each tail, the inode slots'
/// birth times, the superblock's mkfs time) to a fixed value, recomputing the
/// checksums.
fn canonicalize(img: &mut [u8]) {
    let Some(map) = Map::of(img) else { return };
    // Every intact slot, in use or not (a freed one keeps its static part).
    for ino in 1..=map.geo.inodes() {
        let s = map.geo.inode_off(ino).get() as usize;
        let mut slot = [0u8; format::INODE_SIZE as usize];
        slot.copy_from_slice(&img[s..s + format::INODE_SIZE as usize]);
        if format::decode_inode_static(&slot, ino).is_err() || format::inode_btime(&slot).is_none()
        {
            continue;
        }
        format::put_u64(&mut slot, format::INO_BTIME_OFF, FIXED_SEC);
        format::put_u32(&mut slot, format::INO_BTIME_NSEC_OFF, 0);
        let c = format::crc(&slot[format::INO_STATIC_OFF..format::INO_CSUM_OFF]);
        format::put_u32(&mut slot, format::INO_CSUM_OFF, c);
        img[s..s + format::INODE_SIZE as usize].copy_from_slice(&slot);
    }
    for sb in [0usize, 4096] {
        let b = &mut img[sb..sb + SB_SIZE];
        format::put_u64(b, SB_CREATED_OFF, FIXED_SEC);
        let c = format::crc(&b[..format::SB_CSUM_LEN]);
        format::put_u32(b, format::SB_CSUM_OFF, c);
    }
    for e in map.entries.iter().chain(&map.staged) {
        let s = e.off as usize;
        let len = (e.units * format::UNIT) as usize;
        let b = &mut img[s..s + len];
        let times: &[(usize, usize)] = match b[format::ENTRY_TYPE_OFF] {
            format::ET_WRITE => &[(format::WRITE_MTIME_SEC_OFF, format::WRITE_MTIME_NSEC_OFF)],
            format::ET_SETATTR => &[
                (
                    format::SETATTR_ATIME_SEC_OFF,
                    format::SETATTR_ATIME_NSEC_OFF,
                ),
                (
                    format::SETATTR_MTIME_SEC_OFF,
                    format::SETATTR_MTIME_NSEC_OFF,
                ),
                (
                    format::SETATTR_CTIME_SEC_OFF,
                    format::SETATTR_CTIME_NSEC_OFF,
                ),
            ],
            format::ET_LINK => &[(format::LINK_CTIME_SEC_OFF, format::LINK_CTIME_NSEC_OFF)],
            format::ET_DENTRY => &[(format::DENTRY_TIME_SEC_OFF, format::DENTRY_TIME_NSEC_OFF)],
            format::ET_XATTR => &[(format::XATTR_CTIME_SEC_OFF, format::XATTR_CTIME_NSEC_OFF)],
            _ => &[],
        };
        if times.iter().any(|&(s, _)| s + 8 > len) {
            continue;
        }
        for &(sec, nsec) in times {
            format::put_u64(b, sec, FIXED_SEC);
            format::put_u32(b, nsec, 0);
        }
        super::map::reseal(b);
    }
}
