//! Per-thread PM counters: bytes stored, cache lines flushed, fences.
//!
//! Each thread increments its own cache-padded slot (no shared cache line bounces on
//! the hot path, no locked instruction); a snapshot sums the slots.

use crate::lease::LeasePool;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, Ordering};

const SLOTS: usize = 64;

#[derive(Default)]
struct Slot {
    bytes: AtomicU64,
    nt_bytes: AtomicU64,
    flushes: AtomicU64,
    fences: AtomicU64,
    delay_ns: AtomicU64,
}

/// Counters of one PM region: a slot per live thread (up to 64), one slot shared by
/// the threads beyond.
pub struct Counters {
    slots: Box<[CachePadded<Slot>]>,
}

/// A sum of all slots at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterSnapshot {
    /// Bytes stored to PM (cached and non-temporal together).
    pub bytes_written: u64,
    /// Of those, bytes stored with non-temporal stores.
    pub nt_bytes_written: u64,
    /// Cache lines written back (clwb/clflushopt/clflush).
    pub flushes: u64,
    /// Store fences.
    pub fences: u64,
    /// Nanoseconds of busy-wait added by the PM latency profile (0 for `dram`).
    pub modeled_delay_ns: u64,
}

impl CounterSnapshot {
    /// Difference `self - earlier`, saturating at zero.
    pub fn since(&self, earlier: &CounterSnapshot) -> CounterSnapshot {
        CounterSnapshot {
            bytes_written: self.bytes_written.saturating_sub(earlier.bytes_written),
            nt_bytes_written: self
                .nt_bytes_written
                .saturating_sub(earlier.nt_bytes_written),
            flushes: self.flushes.saturating_sub(earlier.flushes),
            fences: self.fences.saturating_sub(earlier.fences),
            modeled_delay_ns: self
                .modeled_delay_ns
                .saturating_sub(earlier.modeled_delay_ns),
        }
    }
}

/// Slots leased to live threads.
static LEASED: LeasePool = LeasePool::new();

/// The calling thread's slot: exclusive while the thread lives (returned when it
/// exits), or [`SHARED`] when all are leased.
struct Lease(usize);

impl Lease {
    fn take() -> Lease {
        Lease(LEASED.take(SLOTS).unwrap_or(SHARED))
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // From now on this thread counts in the shared slot (its destructors may
        // still store to PM), and the slot can go to a new thread.
        CACHED_SLOT.with(|c| c.set(SHARED));
        if self.0 < SHARED {
            LEASED.give_back(self.0);
        }
    }
}

thread_local! {
    static THREAD_SLOT: Lease = Lease::take();
    /// The lease's slot once known (`usize::MAX` before): a constant-initialized
    /// thread-local without a destructor is one load, where the lazily initialized
    /// lease costs a state check on each of the several PM calls of every operation.
    static CACHED_SLOT: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

/// Index of the slot shared by threads beyond the first [`SHARED`] live ones.
const SHARED: usize = SLOTS;

#[inline]
fn my_slot() -> usize {
    let c = CACHED_SLOT.with(|c| c.get());
    if c != usize::MAX {
        return c;
    }
    // First PM call of the thread. A thread being torn down (its lease already
    // dropped) counts in the shared slot.
    let s = THREAD_SLOT.try_with(|l| l.0).unwrap_or(SHARED);
    CACHED_SLOT.with(|c| c.set(s));
    s
}

/// Adds `n` to a counter of slot `i`. A leased slot has one writer, its thread, so
/// a plain load and store suffice (no locked instruction on the PM path: a locked
/// add right after non-temporal stores or flushes would wait for them to drain);
/// the shared slot needs the atomic add.
#[inline]
fn bump(i: usize, c: &AtomicU64, n: u64) {
    if i < SHARED {
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    } else {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

impl Default for Counters {
    fn default() -> Self {
        Self::new()
    }
}

impl Counters {
    /// All counters at zero.
    pub fn new() -> Self {
        Counters {
            slots: (0..=SLOTS)
                .map(|_| CachePadded::new(Slot::default()))
                .collect(),
        }
    }

    #[inline]
    fn slot(&self) -> (usize, &Slot) {
        let i = my_slot();
        (i, &self.slots[i])
    }

    /// Counts `n` bytes stored (any kind) by the calling thread.
    #[inline]
    pub fn add_bytes(&self, n: u64) {
        let (i, s) = self.slot();
        bump(i, &s.bytes, n);
    }

    /// Counts `n` bytes stored non-temporally (also counted as bytes stored).
    #[inline]
    pub fn add_nt_bytes(&self, n: u64) {
        let (i, s) = self.slot();
        bump(i, &s.bytes, n);
        bump(i, &s.nt_bytes, n);
    }

    /// Counts `n` cache-line write-backs.
    #[inline]
    pub fn add_flushes(&self, n: u64) {
        let (i, s) = self.slot();
        bump(i, &s.flushes, n);
    }

    /// Counts one store fence.
    #[inline]
    pub fn add_fence(&self) {
        let (i, s) = self.slot();
        bump(i, &s.fences, 1);
    }

    /// Counts `ns` nanoseconds of modeled PM latency charged.
    #[inline]
    pub fn add_delay(&self, ns: u64) {
        let (i, s) = self.slot();
        bump(i, &s.delay_ns, ns);
    }

    /// Counters of the calling thread only (its slot; beyond 64 live threads, the
    /// slot they share). A slot outlives its thread, so use differences.
    pub fn this_thread(&self) -> CounterSnapshot {
        let (_, s) = self.slot();
        CounterSnapshot {
            bytes_written: s.bytes.load(Ordering::Relaxed),
            nt_bytes_written: s.nt_bytes.load(Ordering::Relaxed),
            flushes: s.flushes.load(Ordering::Relaxed),
            fences: s.fences.load(Ordering::Relaxed),
            modeled_delay_ns: s.delay_ns.load(Ordering::Relaxed),
        }
    }

    /// Sum over all threads.
    pub fn snapshot(&self) -> CounterSnapshot {
        let mut t = CounterSnapshot::default();
        for s in self.slots.iter() {
            t.bytes_written += s.bytes.load(Ordering::Relaxed);
            t.nt_bytes_written += s.nt_bytes.load(Ordering::Relaxed);
            t.flushes += s.flushes.load(Ordering::Relaxed);
            t.fences += s.fences.load(Ordering::Relaxed);
            t.modeled_delay_ns += s.delay_ns.load(Ordering::Relaxed);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_exact_with_more_threads_than_slots() {
        let c = std::sync::Arc::new(Counters::new());
        let before = c.snapshot();
        // 100 threads alive at once: 64 leased slots (plain adds) and the shared one.
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(100));
        let hs: Vec<_> = (0..100)
            .map(|_| {
                let (c, b) = (c.clone(), barrier.clone());
                std::thread::spawn(move || {
                    c.add_fence();
                    b.wait();
                    for _ in 0..1000 {
                        c.add_nt_bytes(3);
                        c.add_flushes(1);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let d = c.snapshot().since(&before);
        assert_eq!(d.fences, 100);
        assert_eq!(d.flushes, 100_000);
        assert_eq!(d.bytes_written, 300_000);
        assert_eq!(d.nt_bytes_written, 300_000);
        // Slots were handed back: a new thread gets a leased one.
        let i = std::thread::spawn(my_slot).join().unwrap();
        assert!(i < SHARED);
    }
}
