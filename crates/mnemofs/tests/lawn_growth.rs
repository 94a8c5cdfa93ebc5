//! Scenario: LAWN sub-zones grow by chunks of free space when they run low, keep
//! every byte in them across clean and abandoned remounts, give chunks back when
//! they empty and when files need the space (ENOSPC only once the zone's chunks
//! are gone too), and fsck checks the chunk table (docs/FORMAT.md §2.9, "Growth").

mod common;

use common::Img;
use mnemofs::{Fs, FsError, Ino, MountOptions, SmallWriteMode, ROOT_INO};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Images: `common::fresh` (2 CPUs, the default zone: 3 %, 64 B slots).
/// No background thread: growth happens at `Fs::lawn_resize`, deterministically.
fn mount(img: &Img, mode: SmallWriteMode) -> Fs {
    mnemofs::mount(
        &img.path,
        &MountOptions {
            small_write: mode,
            lawn_writeback_thread: false,
            lawn_desc_store: Some(pm::Store16::NonTemporal),
            ..common::opts()
        },
    )
    .unwrap()
}

/// One file and what it must hold.
struct File {
    ino: Ino,
    want: Vec<u8>,
}

impl File {
    fn new(fs: &Fs, name: &[u8], size: usize, rng: &mut StdRng) -> File {
        let ino = fs.create(ROOT_INO, name, 0o644, 0, 0).unwrap().ino;
        let want: Vec<u8> = (0..size).map(|_| rng.random()).collect();
        for (i, c) in want.chunks(1 << 20).enumerate() {
            fs.write(ino, (i << 20) as u64, c).unwrap();
        }
        File { ino, want }
    }

    fn write(&mut self, fs: &Fs, off: usize, b: &[u8]) {
        fs.write(self.ino, off as u64, b).unwrap();
        self.want[off..off + b.len()].copy_from_slice(b);
    }

    fn check(&self, fs: &Fs, when: &str) {
        let mut got = vec![0u8; self.want.len()];
        assert_eq!(fs.read(self.ino, 0, &mut got).unwrap(), got.len(), "{when}");
        if let Some(at) = got.iter().zip(&self.want).position(|(a, b)| a != b) {
            panic!("{when}: differs at byte {at}");
        }
    }
}

/// Distinct 128-byte slices (each a fresh run) in batches, with a resize pass after
/// each batch, `batches` times; returns the writes made.
fn small_writes(fs: &Fs, f: &mut File, rng: &mut StdRng, batches: usize, next: &mut usize) {
    let slices = f.want.len() / 128;
    for _ in 0..batches {
        for _ in 0..500 {
            // A stride that visits every slice once before any twice.
            let at = (*next * 7919 % slices) * 128;
            *next += 1;
            let b: Vec<u8> = (0..128).map(|_| rng.random()).collect();
            f.write(fs, at, &b);
        }
        fs.lawn_resize();
    }
}

#[test]
fn a_low_sub_zone_grows_and_keeps_every_byte_across_remounts() {
    let img = common::fresh(32 << 20);
    let mut rng = StdRng::seed_from_u64(1);
    let fs = mount(&img, SmallWriteMode::Lawn);
    let mut f = File::new(&fs, b"f", 8 << 20, &mut rng);
    let st = fs.stats();
    let fixed = st.lawn_slots_free;
    assert_eq!((st.lawn_chunk_blocks, st.lawn_chunks_grown), (0, 0));
    // Far more distinct slices than the fixed zone holds (2 slots each).
    let mut next = 0;
    small_writes(&fs, &mut f, &mut rng, 30, &mut next);
    let st = fs.stats();
    assert!(st.lawn_chunks_grown >= 2, "{st:?}");
    assert!(st.lawn_slots_used > fixed, "runs live in chunks: {st:?}");
    // Growth ran between batches, so no batch ran the zone out (no page CoW).
    assert_eq!(st.small_write_fallbacks, 0, "{st:?}");
    assert_eq!(st.lawn_zone_writes, 15_000);
    // statfs counts the chunks' blocks free: they are given back on demand.
    let sf = fs.statfs();
    assert_eq!(sf.blocks_free, st.free_blocks + st.lawn_chunk_blocks);
    f.check(&fs, "grown");
    let used = st.lawn_slots_used;
    let chunk_blocks = st.lawn_chunk_blocks;
    // Abandoned: recovery finds the chunks and their runs.
    drop(fs);
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    let fs = mount(&img, SmallWriteMode::Lawn);
    let st = fs.stats();
    assert_eq!(
        (st.lawn_slots_used, st.lawn_chunk_blocks),
        (used, chunk_blocks)
    );
    f.check(&fs, "abandoned mount");
    // More writes: half of them flip slices back to the file, freeing slots.
    small_writes(&fs, &mut f, &mut rng, 10, &mut next);
    f.check(&fs, "after more writes");
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    let fs = mount(&img, SmallWriteMode::Lawn);
    f.check(&fs, "clean remount");
    let before = fs.stats();
    fs.unmount().unwrap();
    // A mount without LAWN writes every run back and returns the chunks.
    let fs = mount(&img, SmallWriteMode::Cow);
    let st = fs.stats();
    assert_eq!(st.lawn_chunk_blocks, 0);
    assert_eq!(
        st.free_blocks,
        before.free_blocks + before.lawn_chunk_blocks
    );
    f.check(&fs, "cow mount");
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    let fs = mount(&img, SmallWriteMode::Lawn);
    assert_eq!(fs.stats().lawn_chunk_blocks, 0);
    assert_eq!(fs.stats().lawn_slots_used, 0);
    f.check(&fs, "lawn again");
    fs.unmount().unwrap();
}

#[test]
fn empty_chunks_go_back_and_growth_stops_short_of_the_files_share() {
    let img = common::fresh(32 << 20);
    let mut rng = StdRng::seed_from_u64(2);
    let fs = mount(&img, SmallWriteMode::Lawn);
    let mut f = File::new(&fs, b"f", 12 << 20, &mut rng);
    let mut next = 0;
    // Grow until the zone stops (free space down to an eighth of the data area).
    let mut grown = 0;
    for _ in 0..200 {
        small_writes(&fs, &mut f, &mut rng, 1, &mut next);
        let g = fs.stats().lawn_chunks_grown;
        if g == grown && fs.stats().small_write_fallbacks > 0 {
            break;
        }
        grown = g;
    }
    let st = fs.stats();
    assert!(
        st.lawn_chunks_grown > 0 && st.small_write_fallbacks > 0,
        "{st:?}"
    );
    let sf = fs.statfs();
    let zone = st.lawn_chunk_blocks;
    // Growth left at least an eighth of the data area (less one chunk) to files.
    let chunk = zone / (st.lawn_chunks_grown - st.lawn_chunks_shrunk);
    assert!(
        sf.blocks_avail - zone + chunk >= st.data_blocks / 8,
        "{sf:?} {st:?}"
    );
    f.check(&fs, "grown to the limit");
    // Every run written back: the chunks are empty and go back.
    assert!(fs.lawn_writeback() > 0);
    assert_eq!(fs.lawn_resize(), 0);
    let st = fs.stats();
    assert_eq!(st.lawn_chunk_blocks, 0);
    assert_eq!(st.lawn_chunks_shrunk, st.lawn_chunks_grown);
    f.check(&fs, "chunks returned");
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

#[test]
fn a_file_write_takes_the_zones_space_before_enospc() {
    let img = common::fresh(32 << 20);
    let mut rng = StdRng::seed_from_u64(3);
    let fs = mount(&img, SmallWriteMode::Lawn);
    let mut f = File::new(&fs, b"f", 8 << 20, &mut rng);
    let mut next = 0;
    small_writes(&fs, &mut f, &mut rng, 30, &mut next);
    let st = fs.stats();
    assert!(st.lawn_chunk_blocks > 0, "{st:?}");
    let avail = fs.statfs().blocks_avail;
    // Fill the file system with a second file, 64 KiB at a time.
    let g = fs.create(ROOT_INO, b"g", 0o644, 0, 0).unwrap().ino;
    let chunk = vec![0x5au8; 64 << 10];
    let mut written = 0u64;
    loop {
        match fs.write(g, written, &chunk) {
            Ok(n) => written += n as u64,
            Err(FsError::NoSpace) => break,
            Err(e) => panic!("{e}"),
        }
    }
    let st = fs.stats();
    // Every chunk went to the file; what statfs called available was written,
    // less the second file's log pages and the last partial write.
    assert_eq!(st.lawn_chunk_blocks, 0, "{st:?}");
    assert!(st.lawn_chunks_shrunk > 0);
    assert!(
        written / 4096 + 64 >= avail,
        "{written} bytes of {avail} blocks"
    );
    f.check(&fs, "after the zone gave its chunks back");
    let mut got = vec![0u8; chunk.len()];
    fs.read(g, written - chunk.len() as u64, &mut got).unwrap();
    assert_eq!(got, chunk);
    fs.unmount().unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

#[test]
fn fsck_and_mount_refuse_a_bad_chunk_table() {
    let img = common::fresh(32 << 20);
    let mut rng = StdRng::seed_from_u64(4);
    let fs = mount(&img, SmallWriteMode::Lawn);
    let mut f = File::new(&fs, b"f", 8 << 20, &mut rng);
    let mut next = 0;
    small_writes(&fs, &mut f, &mut rng, 20, &mut next);
    assert!(fs.stats().lawn_chunk_blocks > 0);
    // A file no small write touches, to find on PM by its bytes.
    let h = File::new(&fs, b"h", 64 << 10, &mut rng);
    let geo = *fs.geometry();
    fs.unmount().unwrap();
    let pm = pm::Pm::open(&img.path, false).unwrap();
    let entries: Vec<(u64, u64)> = (0..geo.zone_chunks as u64)
        .map(|e| (e, pm.read_u64(geo.chunk_entry_off(e).get())))
        .filter(|&(_, v)| v != 0)
        .collect();
    assert!(!entries.is_empty());
    let (e, v) = entries[0];
    drop(pm);
    let poke = |v: u64| {
        let pm = pm::Pm::open(&img.path, false).unwrap();
        pm.store_u64(geo.chunk_entry_off(e).get(), v);
        pm.persist(geo.chunk_entry_off(e).get(), 8);
    };
    // A flipped bit: the entry does not decode.
    poke(v ^ 2);
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(
        r.problems
            .iter()
            .any(|p| p.contains(&format!("LAWN chunk table entry {e}: not a valid entry"))),
        "{:?}",
        r.problems
    );
    let err = mnemofs::mount(&img.path, &common::opts()).err().unwrap();
    assert!(err.to_string().contains("LAWN chunk table"), "{err}");
    // A valid entry naming blocks a file owns (found by its bytes).
    let file_block = {
        let pm = pm::Pm::open(&img.path, false).unwrap();
        let mut page = vec![0u8; 4096];
        (geo.data_start..geo.total_blocks - geo.zone_chunk_blocks as u64)
            .find(|&b| {
                // SAFETY: the image is unmounted and this thread is the only one
                // mapping it.
                unsafe { pm.read(b * 4096, &mut page) };
                page[..] == h.want[..4096]
            })
            .unwrap()
    };
    poke(mnemofs::format::encode_chunk_entry(e, file_block));
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(
        r.problems.iter().any(|p| p.contains("LAWN zone chunk")),
        "{:?}",
        r.problems
    );
    // Restored, the image is clean again.
    poke(v);
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    let fs = mount(&img, SmallWriteMode::Lawn);
    f.check(&fs, "restored");
    h.check(&fs, "restored");
    fs.unmount().unwrap();
}

/// `mkfs --force` over an image whose sub-zones grew starts from an empty chunk table:
/// the old table's entries name chunks of the old file system (their descriptor
/// blocks are old data), and nothing of them may reach the new one.
#[test]
fn mkfs_over_a_grown_zone_leaves_no_chunk_behind() {
    let img = common::fresh(32 << 20);
    let fresh_free = {
        let fs = mount(&img, SmallWriteMode::Lawn);
        let free = fs.stats().free_blocks;
        let mut rng = StdRng::seed_from_u64(7);
        let mut f = File::new(&fs, b"f", 8 << 20, &mut rng);
        let mut next = 0;
        small_writes(&fs, &mut f, &mut rng, 30, &mut next);
        assert!(fs.stats().lawn_chunks_grown >= 2);
        // Abandoned with its chunks in the table.
        drop(fs);
        free
    };
    mnemofs::mkfs(
        &img.path,
        &mnemofs::MkfsOptions {
            size: 32 << 20,
            cpus: 2,
            force: true,
            ..Default::default()
        },
    )
    .unwrap();
    let r = mnemofs::fsck(&img.path).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    let fs = mount(&img, SmallWriteMode::Lawn);
    let st = fs.stats();
    assert_eq!((st.lawn_chunk_blocks, st.lawn_slots_used), (0, 0), "{st:?}");
    assert_eq!(st.free_blocks, fresh_free);
    // "." and "..": the old file is gone.
    assert_eq!(fs.readdir(ROOT_INO, 0, 100).unwrap().len(), 2);
    fs.unmount().unwrap();
}
