//! Scenario: ENOSPC only when the file system is full, whichever CPUs the writers
//! run on, and `statfs` tells what one large allocation can get.
//!
//! An image formatted for 16 CPUs has 16 per-CPU ranges of free space (and 16 inode
//! free lists); on a 16-core machine, threads on different CPUs start from
//! different ranges. Each thread here is made to choose as if it ran on a CPU of
//! its own (`alloc_bench::set_thread_cpu`), so a 2-core machine spreads them as a
//! 16-core one does. Every allocation must take free space wherever it is (other
//! CPUs' ranges, files' spare blocks, LAWN's reclaimable chunks) before it fails,
//! and a fallocate of all the space `statfs` reports available must succeed, even
//! when that space is scattered in single blocks (each run of it costs a log entry
//! to map, and those entries need log pages too).

mod common;

use common::Img;
use mnemofs::{Fs, FsError, Ino, MkfsOptions, MountOptions, PRESETS, ROOT_INO};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const BLOCK: u64 = 4096;
const CPUS: u32 = 16;

fn image(size: u64) -> Img {
    let img = common::fresh_empty();
    mnemofs::mkfs(
        &img.path,
        &MkfsOptions {
            size,
            cpus: CPUS,
            ..Default::default()
        },
    )
    .unwrap();
    img
}

/// A mount with `preset`'s modes; LAWN (where the preset has it) without its
/// background thread, so that growth happens only at `Fs::lawn_resize`.
fn mount(img: &Img, preset: &str) -> Fs {
    let p = PRESETS.iter().find(|p| p.name == preset).unwrap();
    let opts = MountOptions {
        exclusive: false,
        lawn_writeback_thread: false,
        ..MountOptions::from_preset(p)
    };
    mnemofs::mount(&img.path, &opts).unwrap()
}

fn mib(blocks: u64) -> u64 {
    blocks * BLOCK / MIB
}

/// `statfs` and the free blocks of each CPU's ranges, for failure messages.
fn space(fs: &Fs) -> String {
    let s = fs.statfs();
    format!(
        "statfs: {} MiB free, {} MiB available; per-CPU free MiB {:?}",
        mib(s.blocks_free),
        mib(s.blocks_avail),
        fs.stats()
            .free_blocks_per_cpu
            .iter()
            .map(|&b| mib(b))
            .collect::<Vec<_>>()
    )
}

/// filebench's webproxy fileset, as `mnemofs bench` makes it: 1000 files over the
/// threads (62 each), 16 KiB, appends of up to 16 KiB.
const FILES: u64 = 62;
const FILE_SIZE: u64 = 16 * KIB;
const IO: u64 = 16 * KIB;

/// One webproxy thread: its own directory of 16 KiB files, 80 % of them present;
/// each round deletes a file, creates one with an append of up to 16 KiB, reads
/// two files whole, and appends up to 16 KiB to the thread's log file.
struct Proxy {
    t: usize,
    dir: Ino,
    log: Ino,
    present: Vec<u64>,
    absent: Vec<u64>,
    rng: SmallRng,
}

impl Proxy {
    fn new(fs: &Fs, t: usize) -> Proxy {
        let dir = fs
            .mkdir(ROOT_INO, format!("t{t}").as_bytes(), 0o755, 0, 0)
            .unwrap()
            .ino;
        let data = vec![0x5au8; FILE_SIZE as usize];
        let mut present = Vec::new();
        let mut absent = Vec::new();
        for i in 0..FILES {
            if i < FILES * 8 / 10 {
                let f = fs
                    .create(dir, format!("f{i}").as_bytes(), 0o644, 0, 0)
                    .unwrap()
                    .ino;
                fs.write(f, 0, &data).unwrap();
                present.push(i);
            } else {
                absent.push(i);
            }
        }
        let log = fs.create(dir, b"log", 0o644, 0, 0).unwrap().ino;
        Proxy {
            t,
            dir,
            log,
            present,
            absent,
            rng: SmallRng::seed_from_u64(t as u64),
        }
    }

    /// One round; returns the bytes appended to the log.
    fn round(&mut self, fs: &Fs, buf: &mut [u8]) -> Result<u64, FsError> {
        let data = [0xa5u8; IO as usize];
        if !self.present.is_empty() {
            let k = self.rng.random_range(0..self.present.len());
            let i = self.present.swap_remove(k);
            fs.unlink(self.dir, format!("f{i}").as_bytes())?;
            self.absent.push(i);
        }
        if !self.absent.is_empty() {
            let k = self.rng.random_range(0..self.absent.len());
            let i = self.absent.swap_remove(k);
            let f = fs.create(self.dir, format!("f{i}").as_bytes(), 0o644, 0, 0)?;
            self.present.push(i);
            fs.open(f.ino)?;
            let n = self.rng.random_range(1..=IO) as usize;
            let r = fs.append(f.ino, &data[..n]);
            fs.release(f.ino)?;
            r?;
        }
        for _ in 0..2 {
            let i = self.present[self.rng.random_range(0..self.present.len())];
            let ino = fs.lookup(self.dir, format!("f{i}").as_bytes())?.ino;
            fs.open(ino)?;
            let r = fs.read(ino, 0, buf);
            fs.release(ino)?;
            r?;
        }
        let n = self.rng.random_range(1..=IO);
        fs.append(self.log, &data[..n as usize])?;
        Ok(n)
    }
}

/// 16 threads, each on a CPU index of its own, run webproxy rounds on an image of
/// `mnemofs bench`'s size for them (twice the data set plus 64 MiB): their logs
/// grow (the bench truncates one only at 64 MiB) until the image is full. No
/// thread may see ENOSPC before half the space is used, and the first ENOSPC must
/// come when `statfs` says hardly anything is available any more.
fn webproxy_spread(preset: &str) {
    let threads = CPUS as usize;
    let data = threads as u64 * FILES * (FILE_SIZE + 4 * IO) + threads as u64 * 16 * MIB;
    let size = (2 * data + 64 * MIB).div_ceil(MIB) * MIB;
    let img = image(size);
    let fs = Arc::new(mount(&img, preset));
    let mut workers: Vec<Proxy> = (0..threads)
        .map(|t| {
            mnemofs::alloc_bench::set_thread_cpu(Some(t));
            Proxy::new(&fs, t)
        })
        .collect();
    mnemofs::alloc_bench::set_thread_cpu(None);
    let avail0 = fs.statfs().blocks_avail * BLOCK;
    let stop = Arc::new(AtomicBool::new(false));
    let ths: Vec<_> = workers
        .drain(..)
        .map(|mut w| {
            let fs = fs.clone();
            let stop = stop.clone();
            std::thread::spawn(move || -> (u64, Option<String>) {
                mnemofs::alloc_bench::set_thread_cpu(Some(w.t));
                let mut buf = vec![0u8; (FILE_SIZE + IO) as usize];
                let mut logged = 0;
                while !stop.load(Ordering::Relaxed) {
                    match w.round(&fs, &mut buf) {
                        Ok(n) => logged += n,
                        Err(FsError::NoSpace) => {
                            // Full: every thread stops (what the others free
                            // meanwhile would make `statfs` below say more).
                            stop.store(true, Ordering::Relaxed);
                            let avail = fs.statfs().blocks_avail;
                            // A round needs at most 5 pages of data at once; 1 MiB
                            // leaves room for other threads' frees since.
                            let msg = (avail > 256).then(|| {
                                format!(
                                    "webproxy thread {}: ENOSPC after {} MiB of log; {}",
                                    w.t,
                                    logged / MIB,
                                    space(&fs)
                                )
                            });
                            return (logged, msg);
                        }
                        Err(e) => panic!("thread {}: {e}", w.t),
                    }
                }
                (logged, None)
            })
        })
        .collect();
    let mut logged = 0;
    let mut errs = Vec::new();
    for t in ths {
        let (n, e) = t.join().unwrap();
        logged += n;
        errs.extend(e);
    }
    assert!(errs.is_empty(), "{preset}: {}", errs.join("\n"));
    assert!(
        logged >= avail0 / 2,
        "{preset}: ENOSPC with only {} of {} MiB logged; {}",
        logged / MIB,
        avail0 / MIB,
        space(&fs)
    );
    let fs = Arc::try_unwrap(fs).ok().unwrap();
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

#[test]
fn webproxy_on_16_cpus_fills_the_image_before_enospc_nova() {
    webproxy_spread("nova");
}

#[test]
fn webproxy_on_16_cpus_fills_the_image_before_enospc_full() {
    webproxy_spread("full");
}

/// Ages a 1 GiB image from 8 CPU indexes, as a test device is aged by the tests
/// run on it: files written page by page in pairs (their blocks interleave), one
/// of each pair deleted, sub-page overwrites of the other; about half the image
/// stays used and the free half is scattered in single blocks. Then one fallocate
/// asks for all the space `statfs` reports available: it must get it.
fn aged_fallocate(preset: &str) {
    let img = image(1 << 30);
    let fs = Arc::new(mount(&img, preset));
    let ths: Vec<_> = (0..8usize)
        .map(|t| {
            let fs = fs.clone();
            std::thread::spawn(move || {
                mnemofs::alloc_bench::set_thread_cpu(Some(t * 2));
                let mut rng = SmallRng::seed_from_u64(0x213 + t as u64);
                let dir = fs
                    .mkdir(ROOT_INO, format!("a{t}").as_bytes(), 0o755, 0, 0)
                    .unwrap()
                    .ino;
                let page = vec![t as u8 + 1; BLOCK as usize];
                for i in 0..240u64 {
                    let keep = fs
                        .create(dir, format!("k{i}").as_bytes(), 0o644, 0, 0)
                        .unwrap()
                        .ino;
                    let gone = fs
                        .create(dir, format!("g{i}").as_bytes(), 0o644, 0, 0)
                        .unwrap()
                        .ino;
                    for _ in 0..32 {
                        fs.append(keep, &page).unwrap();
                        fs.append(gone, &page).unwrap();
                    }
                    fs.unlink(dir, format!("g{i}").as_bytes()).unwrap();
                    for _ in 0..4 {
                        let at = rng.random_range(0..32 * BLOCK - 512);
                        let n = rng.random_range(1..=512usize);
                        fs.write(keep, at, &page[..n]).unwrap();
                    }
                }
            })
        })
        .collect();
    for t in ths {
        t.join().unwrap();
    }
    let fs = Arc::try_unwrap(fs).ok().unwrap();
    fs.lawn_resize();
    let f = fs.create(ROOT_INO, b"big", 0o644, 0, 0).unwrap().ino;
    let st = fs.statfs();
    let avail = st.blocks_avail;
    assert!(
        avail * 3 > st.blocks,
        "{preset}: aging left too little free: {}",
        space(&fs)
    );
    let before = space(&fs);
    let r = fs.fallocate(f, 0, avail * BLOCK, 0);
    assert!(
        r.is_ok(),
        "{preset}: fallocate of all {} MiB available failed ({:?}); before it, {before}",
        mib(avail),
        r.err(),
    );
    assert_eq!(fs.getattr(f).unwrap().size, avail * BLOCK);
    assert_eq!(fs.statfs().blocks_avail, 0, "{preset}: {}", space(&fs));
    // A full device still takes the metadata operations that free space.
    fs.unlink(ROOT_INO, b"big").unwrap();
    assert!(
        fs.statfs().blocks_avail >= avail,
        "{preset}: {}",
        space(&fs)
    );
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

#[test]
fn fallocate_of_all_available_after_aging_from_many_cpus_nova() {
    aged_fallocate("nova");
}

#[test]
fn fallocate_of_all_available_after_aging_from_many_cpus_lawn() {
    aged_fallocate("lawn");
}

#[test]
fn fallocate_of_all_available_after_aging_from_many_cpus_full() {
    aged_fallocate("full");
}
