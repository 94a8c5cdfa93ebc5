//! pNOVA's segment range lock: one 32-bit atomic word per fixed-size segment of the
//! file (top bit: a writer holds it; low 31 bits: readers). Writers CAS 0 → writer
//! bit; readers add one unless the writer bit is set; segments are always taken in
//! ascending order, so lockers never deadlock. A waiter spins briefly, then yields,
//! then sleeps in growing steps: it never burns a core indefinitely.
//!
//! The words live in chunks of 256 allocated on first touch, under a radix tree of
//! 64-way nodes, so a file costs lock memory only for the ranges that were locked
//! (`bytes()` reports it).

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

const WRITER: u32 = 1 << 31;
const CHUNK_BITS: u32 = 8;
const CHUNK: usize = 1 << CHUNK_BITS;
const FAN_BITS: u32 = 6;
const FAN: usize = 1 << FAN_BITS;
/// Radix levels above the chunks: 64^4 chunks × 256 segments = 2^32 segments.
const LEVELS: u32 = 4;
/// Segments the table can address.
pub(crate) const MAX_SEGMENTS: u64 = 1 << (CHUNK_BITS + FAN_BITS * LEVELS);

/// Words per 64-byte cache line.
const PER_LINE: usize = 64 / 4;

/// Where segment `i` of a chunk keeps its word: neighbouring segments land on
/// different cache lines (i and i+1 are 16 words apart), so threads working on
/// adjacent blocks (FxMark DWOM) do not bounce one line between cores. Segments 16
/// apart share a line instead. A bijection on `0..CHUNK`.
#[inline]
fn spread(i: usize) -> usize {
    (i % PER_LINE) * (CHUNK / PER_LINE) + i / PER_LINE
}

struct Chunk {
    words: [AtomicU32; CHUNK],
}

struct Node {
    slots: [AtomicPtr<()>; FAN],
}

pub(crate) struct SegmentLock {
    shift: u32,
    root: AtomicPtr<()>,
    bytes: AtomicUsize,
}

/// Installs a fresh `T` in `slot` unless another thread was first; returns the
/// pointer in the slot.
fn install<T>(slot: &AtomicPtr<()>, make: impl FnOnce() -> Box<T>, bytes: &AtomicUsize) -> *mut () {
    let cur = slot.load(Ordering::Acquire);
    if !cur.is_null() {
        return cur;
    }
    let fresh = Box::into_raw(make()) as *mut ();
    match slot.compare_exchange(
        std::ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => {
            bytes.fetch_add(std::mem::size_of::<T>(), Ordering::Relaxed);
            fresh
        }
        Err(winner) => {
            // SAFETY: `fresh` came from Box::into_raw above and was never shared.
            drop(unsafe { Box::from_raw(fresh as *mut T) });
            winner
        }
    }
}

fn new_node() -> Box<Node> {
    Box::new(Node {
        slots: std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())),
    })
}

fn new_chunk() -> Box<Chunk> {
    Box::new(Chunk {
        words: std::array::from_fn(|_| AtomicU32::new(0)),
    })
}

/// Waits politely: spin, then yield, then sleep up to 100 µs.
#[derive(Default)]
pub(crate) struct Backoff(u32);

impl Backoff {
    pub(crate) fn snooze(&mut self) {
        self.0 += 1;
        if self.0 < 64 {
            std::hint::spin_loop();
        } else if self.0 < 128 {
            std::thread::yield_now();
        } else {
            let us = (self.0 - 127).min(100) as u64;
            std::thread::sleep(std::time::Duration::from_micros(us));
        }
    }
}

impl SegmentLock {
    /// `segment_size` must be a power of two, at least 4096.
    pub fn new(segment_size: u64) -> SegmentLock {
        let size = segment_size.clamp(4096, 1 << 40).next_power_of_two();
        SegmentLock {
            shift: size.trailing_zeros(),
            root: AtomicPtr::new(std::ptr::null_mut()),
            bytes: AtomicUsize::new(0),
        }
    }

    /// Bytes of lock words and radix nodes allocated so far.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Segments covering `[start, end)` (clamped to the table).
    pub fn segments(&self, start: u64, end: u64) -> (u64, u64) {
        let first = (start >> self.shift).min(MAX_SEGMENTS - 1);
        let last = ((end.max(start.saturating_add(1)) - 1) >> self.shift).min(MAX_SEGMENTS - 1);
        (first, last)
    }

    fn word(&self, seg: u64) -> &AtomicU32 {
        let chunk_ix = seg >> CHUNK_BITS;
        let mut slot = &self.root;
        for level in (0..LEVELS).rev() {
            let ptr = install(slot, new_node, &self.bytes) as *const Node;
            let i = ((chunk_ix >> (level * FAN_BITS)) as usize) & (FAN - 1);
            // SAFETY: `ptr` is a live Node installed in the tree; nodes are freed only
            // in Drop, which needs `&mut self`, so none is freed while `&self` lives.
            slot = unsafe { &(*ptr).slots[i] };
        }
        let chunk = install(slot, new_chunk, &self.bytes) as *const Chunk;
        // SAFETY: as above, for the chunk installed in the last level.
        unsafe { &(*chunk).words[spread((seg as usize) & (CHUNK - 1))] }
    }

    pub fn lock_write(&self, first: u64, last: u64) {
        for s in first..=last {
            let w = self.word(s);
            let mut b = Backoff(0);
            while w
                .compare_exchange_weak(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                b.snooze();
            }
        }
    }

    pub fn unlock_write(&self, first: u64, last: u64) {
        for s in first..=last {
            self.word(s).store(0, Ordering::Release);
        }
    }

    pub fn lock_read(&self, first: u64, last: u64) {
        for s in first..=last {
            let w = self.word(s);
            let mut b = Backoff(0);
            loop {
                let v = w.load(Ordering::Relaxed);
                if v & WRITER == 0
                    && w.compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    break;
                }
                b.snooze();
            }
        }
    }

    pub fn unlock_read(&self, first: u64, last: u64) {
        for s in first..=last {
            self.word(s).fetch_sub(1, Ordering::Release);
        }
    }
}

fn free_level(p: *mut (), level: u32) {
    if p.is_null() {
        return;
    }
    if level == 0 {
        // SAFETY: at level 0 the slot holds a Chunk from `new_chunk`; Drop owns it.
        drop(unsafe { Box::from_raw(p as *mut Chunk) });
        return;
    }
    // SAFETY: above level 0 the slot holds a Node from `new_node`; Drop owns it.
    let node = unsafe { Box::from_raw(p as *mut Node) };
    for s in node.slots.iter() {
        free_level(s.load(Ordering::Relaxed), level - 1);
    }
}

impl Drop for SegmentLock {
    fn drop(&mut self) {
        free_level(self.root.load(Ordering::Relaxed), LEVELS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_a_bijection_that_separates_neighbours() {
        let mut seen = [false; CHUNK];
        for i in 0..CHUNK {
            let w = spread(i);
            assert!(!seen[w], "two segments share word {w}");
            seen[w] = true;
            if i + 1 < CHUNK {
                assert_ne!(
                    w / PER_LINE,
                    spread(i + 1) / PER_LINE,
                    "segments {i}, {} share a line",
                    i + 1
                );
            }
        }
    }

    #[test]
    fn a_1gib_file_touched_at_10_places_costs_little() {
        let l = SegmentLock::new(4096);
        let mut x = 99u64;
        for _ in 0..10 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let off = (x >> 20) % (1 << 30);
            let (a, b) = l.segments(off, off + 4096);
            l.lock_write(a, b);
            l.unlock_write(a, b);
        }
        println!(
            "lock memory for 10 touches of a 1 GiB file: {} bytes",
            l.bytes()
        );
        assert!(l.bytes() <= 1 << 20);
        assert!(l.bytes() < 64 << 10);
    }

    #[test]
    fn readers_share_writers_exclude() {
        let l = SegmentLock::new(4096);
        l.lock_read(0, 3);
        l.lock_read(2, 5);
        assert_eq!(l.word(2).load(Ordering::Relaxed), 2);
        l.unlock_read(0, 3);
        l.unlock_read(2, 5);
        l.lock_write(0, 5);
        assert_eq!(l.word(4).load(Ordering::Relaxed), WRITER);
        l.unlock_write(0, 5);
        assert_eq!(l.word(4).load(Ordering::Relaxed), 0);
        // The far end of the table works and is clamped.
        let (a, b) = l.segments(u64::MAX - 10, u64::MAX);
        assert_eq!((a, b), (MAX_SEGMENTS - 1, MAX_SEGMENTS - 1));
        l.lock_write(a, b);
        l.unlock_write(a, b);
    }
}
