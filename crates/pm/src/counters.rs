//! Per-thread PM counters: bytes stored (also by NUMA node pair), cache lines
//! flushed, fences.
//!
//! Each thread increments its own cache-padded slot (no shared cache line bounces on
//! the hot path, no locked instruction); a snapshot sums the slots.

use crate::lease::LeasePool;
use crate::numa::{self, MAX_NODES};
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, Ordering};

const SLOTS: usize = 64;

struct Slot {
    bytes: AtomicU64,
    nt_bytes: AtomicU64,
    flushes: AtomicU64,
    fences: AtomicU64,
    delay_ns: AtomicU64,
    queue_ns: AtomicU64,
    /// `bytes` again, by (thread node × MAX_NODES + device node).
    node_bytes: [AtomicU64; MAX_NODES * MAX_NODES],
}

impl Default for Slot {
    fn default() -> Self {
        Slot {
            bytes: AtomicU64::new(0),
            nt_bytes: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            fences: AtomicU64::new(0),
            delay_ns: AtomicU64::new(0),
            queue_ns: AtomicU64::new(0),
            node_bytes: [const { AtomicU64::new(0) }; MAX_NODES * MAX_NODES],
        }
    }
}

impl Slot {
    /// This slot's counts.
    fn load(&self) -> CounterSnapshot {
        let mut node_bytes = [[0; MAX_NODES]; MAX_NODES];
        for (i, c) in self.node_bytes.iter().enumerate() {
            node_bytes[i / MAX_NODES][i % MAX_NODES] = c.load(Ordering::Relaxed);
        }
        CounterSnapshot {
            bytes_written: self.bytes.load(Ordering::Relaxed),
            nt_bytes_written: self.nt_bytes.load(Ordering::Relaxed),
            flushes: self.flushes.load(Ordering::Relaxed),
            fences: self.fences.load(Ordering::Relaxed),
            modeled_delay_ns: self.delay_ns.load(Ordering::Relaxed),
            modeled_queue_ns: self.queue_ns.load(Ordering::Relaxed),
            node_bytes,
        }
    }
}

/// Counters of one PM region: a slot per live thread (up to 64), one slot shared by
/// the threads beyond.
pub struct Counters {
    slots: Box<[CachePadded<Slot>]>,
    /// NUMA node of the region's device: the column its bytes count in.
    node: u32,
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
    /// Nanoseconds of busy-wait fences spent behind other threads' write-backs
    /// queued on the same node's write channel (the profile's shared bandwidth; not
    /// in `modeled_delay_ns`, which is each access's own cost).
    pub modeled_queue_ns: u64,
    /// `bytes_written` by NUMA node pair: `node_bytes[thread node][device node]` (the
    /// node of the storing thread as [`crate::thread_node`] gave it, and the node of
    /// the device stored to). Sums to `bytes_written`.
    pub node_bytes: [[u64; MAX_NODES]; MAX_NODES],
}

impl CounterSnapshot {
    /// Difference `self - earlier`, saturating at zero.
    pub fn since(&self, earlier: &CounterSnapshot) -> CounterSnapshot {
        let mut node_bytes = [[0; MAX_NODES]; MAX_NODES];
        for (t, row) in node_bytes.iter_mut().enumerate() {
            for (d, v) in row.iter_mut().enumerate() {
                *v = self.node_bytes[t][d].saturating_sub(earlier.node_bytes[t][d]);
            }
        }
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
            modeled_queue_ns: self
                .modeled_queue_ns
                .saturating_sub(earlier.modeled_queue_ns),
            node_bytes,
        }
    }

    /// Bytes stored by threads on `thread_node` to devices on `device_node`.
    ///
    /// # Panics
    /// If either node is not below [`MAX_NODES`].
    pub fn node_bytes_written(&self, thread_node: u32, device_node: u32) -> u64 {
        self.node_bytes[thread_node as usize][device_node as usize]
    }

    /// Bytes stored by threads to devices on their own node.
    pub fn local_bytes_written(&self) -> u64 {
        (0..MAX_NODES).map(|n| self.node_bytes[n][n]).sum()
    }

    /// Bytes stored by threads to devices on other nodes.
    pub fn remote_bytes_written(&self) -> u64 {
        let all: u64 = self.node_bytes.iter().flatten().sum();
        all - self.local_bytes_written()
    }
}

/// Sum (e.g. over the devices of a volume), saturating.
impl std::ops::Add for CounterSnapshot {
    type Output = CounterSnapshot;

    fn add(mut self, rhs: CounterSnapshot) -> CounterSnapshot {
        self += rhs;
        self
    }
}

/// Sum in place, saturating.
impl std::ops::AddAssign for CounterSnapshot {
    fn add_assign(&mut self, rhs: CounterSnapshot) {
        self.bytes_written = self.bytes_written.saturating_add(rhs.bytes_written);
        self.nt_bytes_written = self.nt_bytes_written.saturating_add(rhs.nt_bytes_written);
        self.flushes = self.flushes.saturating_add(rhs.flushes);
        self.fences = self.fences.saturating_add(rhs.fences);
        self.modeled_delay_ns = self.modeled_delay_ns.saturating_add(rhs.modeled_delay_ns);
        self.modeled_queue_ns = self.modeled_queue_ns.saturating_add(rhs.modeled_queue_ns);
        for (row, r) in self.node_bytes.iter_mut().zip(rhs.node_bytes.iter()) {
            for (v, x) in row.iter_mut().zip(r.iter()) {
                *v = v.saturating_add(*x);
            }
        }
    }
}

/// Sum of snapshots (e.g. `devices.iter().map(Pm::counters).sum()`).
impl std::iter::Sum for CounterSnapshot {
    fn sum<I: Iterator<Item = CounterSnapshot>>(iter: I) -> CounterSnapshot {
        iter.fold(CounterSnapshot::default(), |a, b| a + b)
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
    /// All counters at zero, for a device on node 0.
    pub fn new() -> Self {
        Counters {
            slots: (0..=SLOTS)
                .map(|_| CachePadded::new(Slot::default()))
                .collect(),
            node: 0,
        }
    }

    /// Counts the bytes stored from now on as stored to a device on `node`.
    ///
    /// # Panics
    /// If `node` is not below [`MAX_NODES`].
    pub fn set_node(&mut self, node: u32) {
        assert!(
            (node as usize) < MAX_NODES,
            "NUMA node {node} is not below the {MAX_NODES} nodes modeled"
        );
        self.node = node;
    }

    /// The node the device's bytes count on.
    pub fn node(&self) -> u32 {
        self.node
    }

    /// Counts `n` bytes of slot `i` in the (calling thread's node, device node) cell.
    #[inline]
    fn bump_node_bytes(&self, i: usize, s: &Slot, n: u64) {
        let t = numa::cached_thread_node() as usize;
        bump(i, &s.node_bytes[t * MAX_NODES + self.node as usize], n);
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
        self.bump_node_bytes(i, s, n);
    }

    /// Counts `n` bytes stored non-temporally (also counted as bytes stored).
    #[inline]
    pub fn add_nt_bytes(&self, n: u64) {
        let (i, s) = self.slot();
        bump(i, &s.bytes, n);
        bump(i, &s.nt_bytes, n);
        self.bump_node_bytes(i, s, n);
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

    /// Counts `ns` nanoseconds a fence waited behind other threads' write-backs on
    /// a shared write channel.
    #[inline]
    pub fn add_queue(&self, ns: u64) {
        let (i, s) = self.slot();
        bump(i, &s.queue_ns, ns);
    }

    /// Counters of the calling thread only (its slot; beyond 64 live threads, the
    /// slot they share). A slot outlives its thread, so use differences.
    pub fn this_thread(&self) -> CounterSnapshot {
        let (_, s) = self.slot();
        s.load()
    }

    /// Sum over all threads.
    pub fn snapshot(&self) -> CounterSnapshot {
        self.slots.iter().map(|s| s.load()).sum()
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

    #[test]
    fn bytes_are_attributed_to_thread_node_and_device_node() {
        let mut c = Counters::new();
        c.set_node(5);
        assert_eq!(c.node(), 5);
        let c = std::sync::Arc::new(c);
        let before = c.snapshot();
        let hs: Vec<_> = [(Some(2), 10), (Some(5), 7), (None, 1)]
            .into_iter()
            .map(|(node, n)| {
                let c = c.clone();
                std::thread::spawn(move || {
                    crate::numa::set_thread_node(node);
                    let t0 = c.this_thread();
                    c.add_bytes(n);
                    c.add_nt_bytes(n);
                    c.add_flushes(1);
                    c.this_thread().since(&t0)
                })
            })
            .collect();
        let per_thread: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        // Each thread's own slot: its bytes in its (thread node, device node) cell.
        assert_eq!(per_thread[0].node_bytes_written(2, 5), 20);
        assert_eq!(per_thread[0].remote_bytes_written(), 20);
        assert_eq!(per_thread[1].node_bytes_written(5, 5), 14);
        assert_eq!(per_thread[1].local_bytes_written(), 14);
        assert_eq!(per_thread[1].remote_bytes_written(), 0);

        let d = c.snapshot().since(&before);
        assert_eq!(d.bytes_written, 36);
        assert_eq!(d.node_bytes_written(2, 5), 20);
        assert_eq!(d.node_bytes_written(5, 5), 14);
        // The thread without an override is on its CPU's node (0 without a map;
        // another test may have installed one meanwhile): 2 bytes somewhere in
        // column 5, and nothing in any other column.
        let column: u64 = (0..MAX_NODES as u32)
            .map(|t| d.node_bytes_written(t, 5))
            .sum();
        assert_eq!(column, 36);
        let all: u64 = d.node_bytes.iter().flatten().sum();
        assert_eq!(all, d.bytes_written);
    }

    #[test]
    fn snapshots_subtract_and_add_every_field() {
        let mut a = CounterSnapshot {
            bytes_written: 100,
            nt_bytes_written: 40,
            flushes: 3,
            fences: 2,
            modeled_delay_ns: 900,
            modeled_queue_ns: 70,
            ..Default::default()
        };
        a.node_bytes[0][0] = 60;
        a.node_bytes[1][0] = 40;
        let mut b = CounterSnapshot {
            bytes_written: 30,
            nt_bytes_written: 10,
            flushes: 1,
            fences: 1,
            modeled_delay_ns: 100,
            modeled_queue_ns: 20,
            ..Default::default()
        };
        b.node_bytes[0][0] = 20;
        b.node_bytes[1][0] = 10;
        let d = a.since(&b);
        assert_eq!(
            (d.bytes_written, d.nt_bytes_written, d.flushes, d.fences),
            (70, 30, 2, 1)
        );
        assert_eq!((d.modeled_delay_ns, d.modeled_queue_ns), (800, 50));
        assert_eq!((d.node_bytes[0][0], d.node_bytes[1][0]), (40, 30));
        // Saturates at zero.
        assert_eq!(b.since(&a).node_bytes[1][0], 0);
        assert_eq!(b.since(&a).bytes_written, 0);

        assert_eq!(d + b, a);
        let mut e = d;
        e += b;
        assert_eq!(e, a);
        let s: CounterSnapshot = [d, b, CounterSnapshot::default()].into_iter().sum();
        assert_eq!(s, a);
        assert_eq!(
            (s.local_bytes_written(), s.remote_bytes_written()),
            (60, 40)
        );
    }
}
