//! The per-file data lock abstraction (DESIGN.md §4, pNOVA).
//!
//! Callers lock a byte range, shared or exclusive; `end == u64::MAX` means "to the end
//! of the file, whatever it becomes" (appends, truncates, fallocate). Ranges are
//! widened to whole pages, because copy-on-write rewrites whole pages. The mode
//! decides how much is really locked:
//! - `inode` (NOVA's baseline): one reader-writer lock for the whole file;
//! - `interval`: an augmented interval tree under one mutex ([`interval`]);
//! - `segment`: one atomic word per segment ([`segment`]), plus a per-CPU "big
//!   reader" lock that only to-the-end requests take exclusively.
//!
//! The range modes let writers of disjoint ranges copy their data in parallel; the
//! log append that commits a write still happens under the inode's state lock (the
//! concurrent append protocol of pNOVA §3.3 is the next step of the range-lock issue).

mod interval;
mod segment;

use crate::format::BLOCK;
use crate::types::LockMode;
use crossbeam_utils::CachePadded;
use interval::IntervalLock;
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub(crate) use segment::{Backoff, SegmentLock};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

pub(crate) enum FileLock {
    Inode(RwLock<()>),
    Interval(IntervalLock),
    Segment(Box<(SegmentLock, BigReaderLock)>),
}

/// A held range lock; released on drop.
pub(crate) enum RangeGuard<'a> {
    Shared(#[allow(dead_code)] RwLockReadGuard<'a, ()>),
    Exclusive(#[allow(dead_code)] RwLockWriteGuard<'a, ()>),
    Interval(&'a IntervalLock, u32),
    Segments {
        words: &'a SegmentLock,
        whole: &'a BigReaderLock,
        slot: usize,
        first: u64,
        last: u64,
        write: bool,
    },
    Whole(&'a BigReaderLock),
}

impl Drop for RangeGuard<'_> {
    fn drop(&mut self) {
        match self {
            RangeGuard::Shared(_) | RangeGuard::Exclusive(_) => {}
            RangeGuard::Interval(l, t) => l.unlock(*t),
            RangeGuard::Segments {
                words,
                whole,
                slot,
                first,
                last,
                write,
            } => {
                if *write {
                    words.unlock_write(*first, *last);
                } else {
                    words.unlock_read(*first, *last);
                }
                whole.unlock_read(*slot);
            }
            RangeGuard::Whole(w) => w.unlock_write(),
        }
    }
}

/// Widens `[start, end)` to whole pages (`end == u64::MAX` stays unbounded).
fn pages(start: u64, end: u64) -> (u64, u64) {
    let s = start / BLOCK * BLOCK;
    let e = if end == u64::MAX {
        u64::MAX
    } else {
        end.max(start.saturating_add(1))
            .div_ceil(BLOCK)
            .saturating_mul(BLOCK)
    };
    (s, e)
}

impl FileLock {
    pub fn new(mode: LockMode, segment_size: u64) -> FileLock {
        match mode {
            LockMode::Inode => FileLock::Inode(RwLock::new(())),
            LockMode::Interval => FileLock::Interval(IntervalLock::default()),
            LockMode::Segment => FileLock::Segment(Box::new((
                SegmentLock::new(segment_size),
                BigReaderLock::default(),
            ))),
        }
    }

    fn lock(&self, start: u64, end: u64, write: bool) -> RangeGuard<'_> {
        let (s, e) = pages(start, end);
        match self {
            FileLock::Inode(l) => {
                if write {
                    RangeGuard::Exclusive(l.write())
                } else {
                    RangeGuard::Shared(l.read())
                }
            }
            FileLock::Interval(l) => RangeGuard::Interval(l, l.lock(s, e, write)),
            FileLock::Segment(b) => {
                let (words, whole) = (&b.0, &b.1);
                // To the end of the file: the whole file, exclusively (also for a
                // read, which must not walk 2^32 segments).
                if e == u64::MAX {
                    whole.lock_write();
                    return RangeGuard::Whole(whole);
                }
                let slot = whole.lock_read();
                let (first, last) = words.segments(s, e);
                if write {
                    words.lock_write(first, last);
                } else {
                    words.lock_read(first, last);
                }
                RangeGuard::Segments {
                    words,
                    whole,
                    slot,
                    first,
                    last,
                    write,
                }
            }
        }
    }

    /// Locks `[start, end)` for reading.
    pub fn read(&self, start: u64, end: u64) -> RangeGuard<'_> {
        self.lock(start, end, false)
    }

    /// Locks `[start, end)` for writing (`end == u64::MAX`: to the end of the file).
    pub fn write(&self, start: u64, end: u64) -> RangeGuard<'_> {
        self.lock(start, end, true)
    }

    /// DRAM bytes of range-lock state beyond the fixed struct (segment mode: the lock
    /// words and radix nodes plus the per-CPU reader counters; 0 otherwise).
    pub fn lock_bytes(&self) -> usize {
        match self {
            FileLock::Segment(b) => b.0.bytes() + b.1.bytes(),
            _ => 0,
        }
    }
}

/// Reader slots: one per CPU, at most 16.
fn slots() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, 16)
    })
}

/// A reader-writer lock whose readers touch only their own cache line (per-CPU
/// counters): readers on different CPUs never bounce a shared line, and the rare
/// writer (a to-the-end request) waits for every counter to drain.
pub(crate) struct BigReaderLock {
    readers: Box<[CachePadded<AtomicU32>]>,
    writer: AtomicBool,
}

impl Default for BigReaderLock {
    fn default() -> Self {
        BigReaderLock {
            readers: (0..slots())
                .map(|_| CachePadded::new(AtomicU32::new(0)))
                .collect(),
            writer: AtomicBool::new(false),
        }
    }
}

impl BigReaderLock {
    fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.readers)
    }

    /// Returns the counter slot to release with.
    fn lock_read(&self) -> usize {
        let mut b = Backoff::default();
        loop {
            while self.writer.load(Ordering::SeqCst) {
                b.snooze();
            }
            // SAFETY: sched_getcpu has no preconditions.
            let s = (unsafe { libc::sched_getcpu() }.max(0) as usize) % self.readers.len();
            self.readers[s].fetch_add(1, Ordering::SeqCst);
            // Dekker: the writer sets its flag, then reads the counters; a reader
            // bumps its counter, then reads the flag. One of them sees the other.
            if !self.writer.load(Ordering::SeqCst) {
                return s;
            }
            self.readers[s].fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn unlock_read(&self, slot: usize) {
        self.readers[slot].fetch_sub(1, Ordering::SeqCst);
    }

    fn lock_write(&self) {
        let mut b = Backoff::default();
        while self
            .writer
            .compare_exchange_weak(false, true, Ordering::SeqCst, Ordering::Relaxed)
            .is_err()
        {
            b.snooze();
        }
        let mut b = Backoff::default();
        while self.readers.iter().any(|r| r.load(Ordering::SeqCst) != 0) {
            b.snooze();
        }
    }

    fn unlock_write(&self) {
        self.writer.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicI32;
    use std::sync::Arc;

    #[test]
    fn ranges_are_widened_to_pages() {
        assert_eq!(pages(100, 200), (0, 4096));
        assert_eq!(pages(4095, 4097), (0, 8192));
        assert_eq!(pages(8192, u64::MAX), (8192, u64::MAX));
    }

    /// Stress: in every mode, overlapping writers never hold at once, readers never
    /// overlap a writer, and a to-the-end writer excludes everybody past its start.
    #[test]
    fn every_mode_excludes_overlapping_writers() {
        for mode in [LockMode::Inode, LockMode::Interval, LockMode::Segment] {
            let lock = Arc::new(FileLock::new(mode, 4096));
            let occ: Arc<Vec<AtomicI32>> = Arc::new((0..24).map(|_| AtomicI32::new(0)).collect());
            let threads: Vec<_> = (0..4u64)
                .map(|t| {
                    let (lock, occ) = (lock.clone(), occ.clone());
                    std::thread::spawn(move || {
                        let mut x = t * 31 + 5;
                        for _ in 0..1500 {
                            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                            let s = (x >> 40) % 24;
                            let to_end = (x >> 12) % 16 == 0;
                            let e = if to_end {
                                24
                            } else {
                                (s + 1 + (x >> 20) % 4).min(24)
                            };
                            let write = to_end || (x >> 8) % 2 == 0;
                            let end = if to_end { u64::MAX } else { e * 4096 };
                            let g = if write {
                                lock.write(s * 4096 + 10, end)
                            } else {
                                lock.read(s * 4096 + 10, end)
                            };
                            for o in &occ[s as usize..e as usize] {
                                if write {
                                    assert_eq!(
                                        o.swap(-1, Ordering::SeqCst),
                                        0,
                                        "{mode:?}: writers overlap"
                                    );
                                } else {
                                    assert!(
                                        o.fetch_add(1, Ordering::SeqCst) >= 0,
                                        "{mode:?}: reader under writer"
                                    );
                                }
                            }
                            for o in &occ[s as usize..e as usize] {
                                if write {
                                    o.store(0, Ordering::SeqCst);
                                } else {
                                    o.fetch_sub(1, Ordering::SeqCst);
                                }
                            }
                            drop(g);
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
        }
    }
}
