//! Per-thread PM counters: bytes stored, cache lines flushed, fences.
//!
//! Each thread increments its own cache-padded slot (no shared cache line bounces on
//! the hot path); a snapshot sums the slots.

use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const SLOTS: usize = 64;

#[derive(Default)]
struct Slot {
    bytes: AtomicU64,
    nt_bytes: AtomicU64,
    flushes: AtomicU64,
    fences: AtomicU64,
    delay_ns: AtomicU64,
}

/// Counters of one PM region, one slot per thread (threads beyond 64 share slots).
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

static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static THREAD_SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn my_slot() -> usize {
    THREAD_SLOT.with(|s| {
        let v = s.get();
        if v != usize::MAX {
            return v;
        }
        let n = NEXT_THREAD.fetch_add(1, Ordering::Relaxed) % SLOTS;
        s.set(n);
        n
    })
}

impl Default for Counters {
    fn default() -> Self {
        Self::new()
    }
}

impl Counters {
    pub fn new() -> Self {
        Counters {
            slots: (0..SLOTS)
                .map(|_| CachePadded::new(Slot::default()))
                .collect(),
        }
    }

    #[inline]
    fn slot(&self) -> &Slot {
        &self.slots[my_slot()]
    }

    #[inline]
    pub fn add_bytes(&self, n: u64) {
        self.slot().bytes.fetch_add(n, Ordering::Relaxed);
    }

    #[inline]
    pub fn add_nt_bytes(&self, n: u64) {
        let s = self.slot();
        s.bytes.fetch_add(n, Ordering::Relaxed);
        s.nt_bytes.fetch_add(n, Ordering::Relaxed);
    }

    #[inline]
    pub fn add_flushes(&self, n: u64) {
        self.slot().flushes.fetch_add(n, Ordering::Relaxed);
    }

    #[inline]
    pub fn add_fence(&self) {
        self.slot().fences.fetch_add(1, Ordering::Relaxed);
    }

    #[inline]
    pub fn add_delay(&self, ns: u64) {
        self.slot().delay_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Counters of the calling thread only.
    pub fn this_thread(&self) -> CounterSnapshot {
        let s = self.slot();
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
