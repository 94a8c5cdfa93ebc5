//! Scenario: the contention counters of a shared-file write path, exactly. What a
//! 4 KiB overwrite costs in per-file lock acquisitions, waits and atomic
//! read-modify-writes on shared lines is fixed by the design, whatever the machine:
//! a change that adds a shared write to the common path fails here on two cores as
//! it would on sixty-four.

mod common;
use mnemofs::contention::{this_thread, Contention};
use mnemofs::{LockMode, MountOptions, ROOT_INO};
use std::sync::Arc;

fn opts(lock: LockMode) -> MountOptions {
    MountOptions {
        lock,
        segment_size: 4096,
        exclusive: false,
        ..Default::default()
    }
}

/// The calling thread's counts for each of `n` overwrites of page `pg` (`ino` on
/// `fs`), with the flushes each made (a write that links a log page or runs GC
/// flushes more than the common path).
fn per_write(fs: &mnemofs::Fs, ino: u64, pg: u64, n: usize) -> Vec<(Contention, u64)> {
    (0..n)
        .map(|i| {
            let (c0, p0) = (this_thread(), fs.thread_counters());
            fs.write(ino, pg * 4096, &[i as u8 + 1; 4096]).unwrap();
            (
                this_thread().since(&c0),
                fs.thread_counters().since(&p0).flushes,
            )
        })
        .collect()
}

/// The writes of `v` on the common path (the fewest flushes): each must cost
/// exactly `want`; at most two of the eight may be off it (a log page linked, GC).
fn assert_common(label: &str, v: &[(Contention, u64)], want: Contention) {
    let fewest = v.iter().map(|x| x.1).min().unwrap();
    let common: Vec<&Contention> = v.iter().filter(|x| x.1 == fewest).map(|x| &x.0).collect();
    assert!(common.len() >= v.len() - 2, "{label}: {v:?}");
    for c in common {
        assert_eq!(*c, want, "{label}: {v:?}");
    }
}

/// A writer alone with its file (pnova's segment locks, and the `interval` mode):
/// the locked append, one state-lock acquisition, no wait, and no shared
/// read-modify-write at all (the page's block comes from the file's spare).
#[test]
fn a_lone_overwrite_takes_one_lock_and_no_shared_write() {
    for lock in [LockMode::Segment, LockMode::Inode] {
        let img = common::fresh(64 << 20);
        let fs = mnemofs::mount(&img.path, &opts(lock)).unwrap();
        let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
        fs.write(f, 0, &vec![0u8; 16 * 4096]).unwrap();
        // The first overwrite allocates (and keeps the block it supersedes as the
        // file's spare).
        fs.write(f, 3 * 4096, &[9; 4096]).unwrap();
        let v = per_write(&fs, f, 3, 8);
        assert_common(
            &format!("{lock:?}"),
            &v,
            Contention {
                locks: 1,
                waits: 0,
                rmws: 0,
            },
        );
        fs.unmount().unwrap();
    }
}

/// A file seen shared keeps to the concurrent append: a writer that finds no other
/// queued is its own combiner — one lock acquisition, no wait, and two
/// read-modify-writes on the file's queue (its push, the combiner's take); the
/// data block comes from the thread's magazine and the superseded one goes back to
/// it, so the allocator's shared counters are not touched.
#[test]
fn a_shared_file_overwrite_costs_one_combined_section_and_two_queue_operations() {
    let img = common::fresh(64 << 20);
    let fs = Arc::new(mnemofs::mount(&img.path, &opts(LockMode::Segment)).unwrap());
    let f = fs.create(ROOT_INO, b"shared", 0o644, 0, 0).unwrap().ino;
    fs.write(f, 0, &vec![0u8; 64 * 4096]).unwrap();
    // Writers of disjoint pages until the file is seen shared.
    assert!(
        common::write_until_shared(&fs, f, 200, 200).is_some(),
        "four writers never met"
    );
    // Warm this thread's magazine (its first allocation refills it).
    fs.write(f, 5 * 4096, &[1; 4096]).unwrap();
    let v = per_write(&fs, f, 5, 8);
    assert_common(
        "segment, shared",
        &v,
        Contention {
            locks: 1,
            waits: 0,
            rmws: 2,
        },
    );
    let fs = Arc::try_unwrap(fs).ok().unwrap();
    fs.unmount().unwrap();
    assert!(mnemofs::fsck(&img.path).unwrap().is_clean());
}
