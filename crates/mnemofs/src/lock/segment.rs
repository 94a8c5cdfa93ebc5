//! pNOVA's segment range lock: one 32-bit atomic word per fixed-size segment of the
//! file. Segments are always taken in ascending order. A waiter spins briefly, then
//! yields, then sleeps in growing steps: it never burns a core indefinitely.
//!
//! # The lock word
//!
//! ```text
//!  31       30        29 .. 0
//! [WRITER][WAITING][ readers ]
//! ```
//! - `WRITER`: a writer holds the segment. Writers take it by CAS from "no writer, no
//!   readers" (`WAITING` may be set) to exactly `WRITER`, which also clears `WAITING`.
//!   Nobody else changes a word while a writer holds it (readers and the `WAITING`
//!   raise below both need `WRITER` clear), so a held word is exactly `WRITER`, and
//!   the holder releases it with a plain store of 0, not a locked instruction. (A
//!   locked instruction waits for every store before it to drain: right after a
//!   write's last fence, that was the write's non-temporal stores reaching memory,
//!   which the plain store lets overlap with what follows. It is still ordered after
//!   them, as every store is after an `sfence`.)
//! - `WAITING`: a writer that failed [`Word::PATIENCE`] times raises it while readers
//!   hold the segment (by CAS, never while a writer holds it); new readers then back
//!   off, so the readers inside drain and the writer gets in: a stream of readers
//!   cannot starve a writer (pNOVA's word had no such bit). A writer waiting behind
//!   another writer needs no bit: the holder's release lets it in unless a reader is
//!   first, and then it raises the bit. Raising it is a CAS that fails only when
//!   another locker changed the word meanwhile, and a writer that finds the word free
//!   on the way tries to take it instead: lock-free, not wait-free (the old
//!   unconditional `fetch_or` always succeeded). The bit is cleared only by a writer's
//!   acquiring CAS; a writer that still waits raises it again.
//!   Hence *`WAITING` set implies some writer is waiting on this very segment*: the
//!   last writer that raised it has not acquired since (acquiring would have cleared
//!   it), and writers leave their wait loop only by acquiring.
//! - readers (30 bits): readers add one by CAS unless `WRITER` or `WAITING` is set,
//!   and subtract one on release.
//!
//! The plain-store release relies on every writer having fenced after its last
//! non-temporal store before it drops its guard: the `sfence` orders those stores
//! before the release, where a locked release would also have hidden a missing fence.
//!
//! # Why ascending order cannot deadlock, `WAITING` included
//!
//! A locker waiting on segment `s` holds only segments below `s` (it takes its range
//! upwards, one segment at a time). Suppose a set of lockers were stuck forever, and
//! let `s` be the highest segment any of them waits on, `T` one that waits on it.
//! `T` waits because of (a) a holder of `s` (writer or reader), or (b), `T` being a
//! reader, because `WAITING` is set, i.e. (invariant above) a writer `U` waits on `s`.
//! In (b), `U` itself only waits for holders of `s` (a writer's CAS ignores
//! `WAITING`), so both cases come down to a holder `H` of `s`. `H` is not running to
//! its release, so it is stuck too, on a segment above `s` (it holds `s`, and takes
//! segments upwards) — contradicting the choice of `s`. So someone always progresses.
//! In particular, a reader never waits for a writer while holding something that
//! writer needs: what the writer needs is `s` and above, what a reader waiting on `s`
//! holds is below `s`.
//!
//! The words live in chunks of 256 allocated on first touch, under a radix tree of
//! 64-way nodes only as tall as the highest segment locked needs (the root pointer
//! carries the height; the tree grows by a new root, installed by CAS, whose first
//! slot is the old one), so a file costs lock memory only for the ranges that were
//! locked (`bytes()` reports it), and a file of up to 256 segments is one chunk: a
//! lock word one load away.
//!
//! The word protocol ([`try_read`], [`try_write`], [`lock_span`], ...) is generic over
//! [`Word`], so the model tests run it unchanged on a model checker's atomics.

use crate::tagged::{height, tag, untag};
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

/// A writer holds the segment.
pub(crate) const WRITER: u32 = 1 << 31;
/// A writer waits for the segment: new readers stay out.
pub(crate) const WAITING: u32 = 1 << 30;
/// The reader count.
pub(crate) const READERS: u32 = WAITING - 1;

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

// Cache-line aligned: the words' spread assumes lines, and the root pointer's low
// bits carry the tree's height.
#[repr(align(64))]
struct Chunk {
    words: [AtomicU32; CHUNK],
}

#[repr(align(64))]
struct Node {
    slots: [AtomicPtr<()>; FAN],
}

/// Chunks a tree of height `h` covers.
fn chunks_covered(h: u32) -> u64 {
    1 << (FAN_BITS * h)
}

pub(crate) struct SegmentLock {
    shift: u32,
    /// The top node (a chunk at height 0), tagged with the height; null: nothing
    /// locked yet.
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

/// Steps of a wait spent yielding, after the spinning ones, before it sleeps.
const YIELDS: u32 = 2048;

/// One step of a polite wait, the `step`-th (from 0): spin, then yield (a millisecond
/// or more: the holder of a whole-file lock, an append of 256 KiB say, is done long
/// before), then sleep up to 100 µs. Sleeping early cost more than it saved: a sleep
/// lasts at least the timer slack (50 µs), so appenders queued on a shared log's
/// whole-file lock each slept well past the holder's release, and OLTP on 8 and 16
/// threads lost half its throughput to the gaps.
fn pause(step: u32) {
    if step < 64 {
        std::hint::spin_loop();
    } else if step < 64 + YIELDS {
        std::thread::yield_now();
    } else {
        let us = (step - 63 - YIELDS).min(100) as u64;
        std::thread::sleep(std::time::Duration::from_micros(us));
    }
}

/// The atomic 32-bit word the lock protocols run on: `std`'s [`AtomicU32`] in the file
/// system, a model checker's in the model tests.
pub(crate) trait Word {
    /// Failed attempts after which a writer raises `WAITING`.
    const PATIENCE: u32;
    fn new(v: u32) -> Self;
    fn load(&self, o: Ordering) -> u32;
    fn store(&self, v: u32, o: Ordering);
    fn compare_exchange_weak(
        &self,
        cur: u32,
        new: u32,
        ok: Ordering,
        err: Ordering,
    ) -> Result<u32, u32>;
    fn fetch_add(&self, v: u32, o: Ordering) -> u32;
    fn fetch_sub(&self, v: u32, o: Ordering) -> u32;
    /// Waits before the next attempt; `step` counts the attempts that failed so far.
    fn pause(step: u32);
}

impl Word for AtomicU32 {
    /// As long as the waiter spins: it raises `WAITING` when it starts yielding.
    const PATIENCE: u32 = 64;
    fn new(v: u32) -> Self {
        AtomicU32::new(v)
    }
    fn load(&self, o: Ordering) -> u32 {
        AtomicU32::load(self, o)
    }
    fn store(&self, v: u32, o: Ordering) {
        AtomicU32::store(self, v, o)
    }
    fn compare_exchange_weak(
        &self,
        cur: u32,
        new: u32,
        ok: Ordering,
        err: Ordering,
    ) -> Result<u32, u32> {
        AtomicU32::compare_exchange_weak(self, cur, new, ok, err)
    }
    fn fetch_add(&self, v: u32, o: Ordering) -> u32 {
        AtomicU32::fetch_add(self, v, o)
    }
    fn fetch_sub(&self, v: u32, o: Ordering) -> u32 {
        AtomicU32::fetch_sub(self, v, o)
    }
    fn pause(step: u32) {
        pause(step)
    }
}

/// One attempt to take `w` shared: fails while a writer holds or waits for it.
pub(crate) fn try_read<W: Word>(w: &W) -> bool {
    let mut v = w.load(Ordering::Relaxed);
    loop {
        if v & (WRITER | WAITING) != 0 {
            return false;
        }
        debug_assert!(v & READERS < READERS, "segment reader count overflows");
        // Retried only when another locker changed the word meanwhile (or spuriously):
        // lock-free, nobody waits here.
        match w.compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(now) => v = now,
        }
    }
}

/// One attempt to take `w` exclusively after `failed` failed ones: once patience ran
/// out, raises `WAITING` while readers hold it, so that new readers stay out until
/// a writer got in. Lock-free: its CAS is retried only when another locker changed
/// the word meanwhile (or spuriously), and a word found free on the way is tried.
pub(crate) fn try_write<W: Word>(w: &W, failed: u32) -> bool {
    let mut v = w.load(Ordering::Relaxed);
    loop {
        if v & !WAITING == 0 {
            // No holder. A raised WAITING is ours or another waiting writer's: the CAS
            // clears it, and a writer left waiting raises it again.
            match w.compare_exchange_weak(v, WRITER, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => v = now,
            }
            continue;
        }
        // Held. By a writer, or with WAITING already up: nothing to do (a writer's
        // word must stay exactly WRITER: its release is a plain store). By readers
        // only, once patience ran out: raise WAITING.
        if failed < W::PATIENCE || v & (WRITER | WAITING) != 0 {
            return false;
        }
        match w.compare_exchange_weak(v, v | WAITING, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return false,
            Err(now) => v = now,
        }
    }
}

pub(crate) fn unlock_read<W: Word>(w: &W) {
    let old = w.fetch_sub(1, Ordering::Release);
    debug_assert!(old & READERS != 0, "segment read-unlocked without readers");
}

pub(crate) fn unlock_write<W: Word>(w: &W) {
    // The word is exactly WRITER while we hold it (nobody else changes a held
    // word, see the module doc): a plain store releases it.
    debug_assert_eq!(
        w.load(Ordering::Relaxed),
        WRITER,
        "segment write-unlocked without writer, or changed while held"
    );
    w.store(0, Ordering::Release);
}

/// Takes segments `first..=last` of `word`, in ascending order.
pub(crate) fn lock_span<'a, W: Word + 'a>(
    word: impl Fn(u64) -> &'a W,
    first: u64,
    last: u64,
    write: bool,
) {
    for s in first..=last {
        let w = word(s);
        let mut failed = 0u32;
        while !(if write {
            try_write(w, failed)
        } else {
            try_read(w)
        }) {
            W::pause(failed);
            failed = failed.saturating_add(1);
        }
    }
}

/// Releases segments `first..=last` of `word`, taken by [`lock_span`].
pub(crate) fn unlock_span<'a, W: Word + 'a>(
    word: impl Fn(u64) -> &'a W,
    first: u64,
    last: u64,
    write: bool,
) {
    for s in first..=last {
        if write {
            unlock_write(word(s));
        } else {
            unlock_read(word(s));
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

    /// The tagged root, grown (by CAS: lockers run concurrently) until it covers
    /// chunk `chunk_ix` and non-null.
    fn root_for(&self, chunk_ix: u64) -> *mut () {
        let mut cur = self.root.load(Ordering::Acquire);
        loop {
            let (p, h) = (untag(cur), height(cur));
            let next = if chunk_ix >= chunks_covered(h) {
                // One level up: a new root whose first slot is the old one.
                if p.is_null() {
                    tag(p, h + 1)
                } else {
                    let node = new_node();
                    node.slots[0].store(p, Ordering::Relaxed);
                    tag(Box::into_raw(node) as *mut (), h + 1)
                }
            } else if p.is_null() {
                let fresh = if h == 0 {
                    Box::into_raw(new_chunk()) as *mut ()
                } else {
                    Box::into_raw(new_node()) as *mut ()
                };
                tag(fresh, h)
            } else {
                return cur;
            };
            match self
                .root
                .compare_exchange(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    if !untag(next).is_null() && untag(next) != p {
                        let size = if h == 0 && p.is_null() {
                            std::mem::size_of::<Chunk>()
                        } else {
                            std::mem::size_of::<Node>()
                        };
                        self.bytes.fetch_add(size, Ordering::Relaxed);
                    }
                    cur = next;
                }
                Err(actual) => {
                    let n = untag(next);
                    if !n.is_null() && n != p {
                        if h == 0 && p.is_null() && height(next) == 0 {
                            // SAFETY: our chunk from Box::into_raw above, never shared
                            // (the CAS that would have published it failed).
                            drop(unsafe { Box::from_raw(n as *mut Chunk) });
                        } else {
                            // SAFETY: our node from Box::into_raw above, never
                            // shared; dropping it frees the node alone (its first
                            // slot, the old root, is not owned by it).
                            drop(unsafe { Box::from_raw(n as *mut Node) });
                        }
                    }
                    cur = actual;
                }
            }
        }
    }

    /// Segment `seg`'s lock word (allocated on first use).
    pub(crate) fn word(&self, seg: u64) -> &AtomicU32 {
        debug_assert!(seg < MAX_SEGMENTS);
        let chunk = self.chunk(seg >> CHUNK_BITS);
        // SAFETY: a live chunk of the tree (freed only in Drop, which needs `&mut self`).
        unsafe { &(*chunk).words[spread((seg as usize) & (CHUNK - 1))] }
    }

    /// The words of consecutive segments, walking the tree once per chunk (a span
    /// of 16 segments is one walk, not 16).
    fn span_words<'a>(&'a self) -> impl Fn(u64) -> &'a AtomicU32 + 'a {
        let cached = std::cell::Cell::new((u64::MAX, std::ptr::null::<Chunk>()));
        move |seg| {
            let ix = seg >> CHUNK_BITS;
            let (k, mut chunk) = cached.get();
            if k != ix || chunk.is_null() {
                chunk = self.chunk(ix);
                cached.set((ix, chunk));
            }
            // SAFETY: a live chunk of the tree (freed only in Drop, which needs `&mut
            // self`, and this closure borrows `self`).
            unsafe { &(*chunk).words[spread((seg as usize) & (CHUNK - 1))] }
        }
    }

    /// Chunk `chunk_ix` (allocated, with the nodes above it, on first use).
    fn chunk(&self, chunk_ix: u64) -> *const Chunk {
        let root = self.root_for(chunk_ix);
        let mut ptr = untag(root);
        for level in (0..height(root)).rev() {
            let node = ptr as *const Node;
            let i = ((chunk_ix >> (level * FAN_BITS)) as usize) & (FAN - 1);
            // SAFETY: `node` is a live Node of the tree (the root or a child installed
            // by `install`); nodes are freed only in Drop, which needs `&mut self`, so
            // none is freed while `&self` lives. A root replaced by a taller one stays
            // alive as its first child.
            let slot = unsafe { &(*node).slots[i] };
            ptr = if level == 0 {
                install(slot, new_chunk, &self.bytes)
            } else {
                install(slot, new_node, &self.bytes)
            };
        }
        ptr as *const Chunk
    }

    /// Starts loading segment `seg`'s word into the CPU cache (a hint), if the
    /// word exists; never allocates.
    pub fn prefetch(&self, seg: u64) {
        let chunk_ix = seg >> CHUNK_BITS;
        let root = self.root.load(Ordering::Acquire);
        if chunk_ix >= chunks_covered(height(root)) {
            return;
        }
        let mut ptr = untag(root);
        for level in (0..height(root)).rev() {
            let node = ptr as *const Node;
            if node.is_null() {
                return;
            }
            let i = ((chunk_ix >> (level * FAN_BITS)) as usize) & (FAN - 1);
            // SAFETY: a non-null pointer of the tree is a live Node (freed only in
            // Drop).
            ptr = unsafe { &(*node).slots[i] }.load(Ordering::Acquire);
        }
        let chunk = ptr as *const Chunk;
        if !chunk.is_null() {
            // SAFETY: as above, for the chunk.
            crate::index::prefetch(unsafe {
                &(*chunk).words[spread((seg as usize) & (CHUNK - 1))]
            });
        }
    }

    pub fn lock_write(&self, first: u64, last: u64) {
        lock_span(self.span_words(), first, last, true);
    }

    pub fn unlock_write(&self, first: u64, last: u64) {
        unlock_span(self.span_words(), first, last, true);
    }

    pub fn lock_read(&self, first: u64, last: u64) {
        lock_span(self.span_words(), first, last, false);
    }

    pub fn unlock_read(&self, first: u64, last: u64) {
        unlock_span(self.span_words(), first, last, false);
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
        let t = self.root.load(Ordering::Relaxed);
        free_level(untag(t), height(t));
    }
}

/// The lock protocols on shuttle's atomics, for the model tests (shuttle explores the
/// interleavings of its threads at every atomic operation; it models sequentially
/// consistent atomics, so it checks the protocol's logic, not its memory orderings).
#[cfg(test)]
pub(crate) mod model {
    use super::Word;
    use shuttle::sync::atomic::AtomicU32;
    use std::sync::atomic::Ordering;

    /// shuttle's atomic word, raising `WAITING` after one failed attempt, so that the
    /// explored schedules reach the waiting-writer states.
    pub(crate) struct ModelWord(AtomicU32);

    impl Word for ModelWord {
        const PATIENCE: u32 = 1;
        fn new(v: u32) -> Self {
            ModelWord(AtomicU32::new(v))
        }
        fn load(&self, o: Ordering) -> u32 {
            self.0.load(o)
        }
        fn store(&self, v: u32, o: Ordering) {
            self.0.store(v, o)
        }
        fn compare_exchange_weak(
            &self,
            cur: u32,
            new: u32,
            ok: Ordering,
            err: Ordering,
        ) -> Result<u32, u32> {
            self.0.compare_exchange_weak(cur, new, ok, err)
        }
        fn fetch_add(&self, v: u32, o: Ordering) -> u32 {
            self.0.fetch_add(v, o)
        }
        fn fetch_sub(&self, v: u32, o: Ordering) -> u32 {
            self.0.fetch_sub(v, o)
        }
        /// A waiter hands the processor to the scheduler at every step.
        fn pause(_step: u32) {
            shuttle::thread::yield_now();
        }
    }

    /// A shuttle configuration whose step bound turns a livelock (every thread
    /// spinning forever: a deadlock or a lost wakeup of a spinning lock) into a
    /// failure instead of a hang.
    pub(crate) fn config() -> shuttle::Config {
        let mut c = shuttle::Config::new();
        c.max_steps = shuttle::MaxSteps::FailAfter(100_000);
        c
    }

    /// Runs `f` under shuttle's random scheduler, then its PCT scheduler.
    pub(crate) fn check<F: Fn() + Send + Sync + Clone + 'static>(f: F, iterations: usize) {
        use shuttle::scheduler::{PctScheduler, RandomScheduler};
        shuttle::Runner::new(RandomScheduler::new_from_seed(0x5eed, iterations), config())
            .run(f.clone());
        shuttle::Runner::new(PctScheduler::new_from_seed(0x5eed, 3, iterations), config()).run(f);
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

    /// Threads that look up words at the same time, while the tree grows under them
    /// (root installs and raises race by CAS), all get the same word for a segment,
    /// and a small file's words sit in one chunk.
    #[test]
    fn concurrent_growth_gives_one_word_per_segment() {
        let segs: Vec<u64> = vec![
            0,
            5,
            255,
            256,
            70_000,
            1 << 20,
            3,
            (1 << 30) + 7,
            MAX_SEGMENTS - 1,
        ];
        for round in 0..20 {
            let l = SegmentLock::new(4096);
            let found: Vec<Vec<usize>> = std::thread::scope(|sc| {
                let hs: Vec<_> = (0..4)
                    .map(|t| {
                        let (l, segs) = (&l, &segs);
                        sc.spawn(move || {
                            // Each thread in its own order.
                            let mut order: Vec<usize> = (0..segs.len()).collect();
                            order.rotate_left((t * 3 + round) % segs.len());
                            let mut got = vec![0usize; segs.len()];
                            for i in order {
                                got[i] = l.word(segs[i]) as *const AtomicU32 as usize;
                            }
                            got
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for g in &found[1..] {
                assert_eq!(g, &found[0]);
            }
            let mut distinct = found[0].clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(distinct.len(), segs.len());
            assert_eq!(height(l.root.load(Ordering::Relaxed)), LEVELS);
        }
        let small = SegmentLock::new(4096);
        small.word(0);
        small.word(255);
        assert_eq!(small.bytes(), std::mem::size_of::<Chunk>());
        assert_eq!(height(small.root.load(Ordering::Relaxed)), 0);
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

    /// The schedule that starved pNOVA's writers, step by step: reader 1 holds the
    /// segment, the writer fails until it raises WAITING, reader 2 arrives; reader 2
    /// must stay out (else readers 1 and 2 could hand the segment to each other
    /// forever), and the writer gets in once reader 1 leaves.
    #[test]
    fn a_waiting_writer_keeps_new_readers_out() {
        let w = AtomicU32::new(0);
        assert!(try_read(&w));
        let mut failed = 0;
        while failed <= <AtomicU32 as Word>::PATIENCE {
            assert!(!try_write(&w, failed));
            failed += 1;
        }
        assert_eq!(w.load(Ordering::Relaxed), WAITING | 1);
        assert!(!try_read(&w), "a new reader overtook a waiting writer");
        unlock_read(&w);
        // A weak CAS may fail spuriously: retry a few times.
        assert!((0..100).any(|_| try_write(&w, failed)));
        assert_eq!(
            w.load(Ordering::Relaxed),
            WRITER,
            "acquiring clears WAITING"
        );
        // A second writer waits meanwhile: it leaves the held word as it is (the
        // holder releases it with a plain store).
        assert!(!try_write(&w, <AtomicU32 as Word>::PATIENCE));
        assert_eq!(w.load(Ordering::Relaxed), WRITER);
        unlock_write(&w);
        assert_eq!(w.load(Ordering::Relaxed), 0);
        // A reader gets in first; the patient writer then raises WAITING at once, and
        // the next reader stays out.
        assert!(try_read(&w));
        assert!(!try_write(&w, <AtomicU32 as Word>::PATIENCE));
        assert_eq!(w.load(Ordering::Relaxed), WAITING | 1);
        assert!(!try_read(&w));
        unlock_read(&w);
        assert!((0..100).any(|_| try_write(&w, 0)));
        unlock_write(&w);
        assert!(try_read(&w));
        unlock_read(&w);
        assert_eq!(w.load(Ordering::Relaxed), 0);
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

/// Model tests of the word protocol under shuttle: every schedule explored must keep
/// writers apart and readers out of a writer's segments, finish (a deadlock or lost
/// wakeup would spin past the step bound), and leave every word at zero.
#[cfg(test)]
mod model_tests {
    use super::model::{check, ModelWord};
    use super::*;
    use shuttle::sync::atomic::AtomicI32;
    use shuttle::sync::Arc;
    use shuttle::thread;

    /// Shadow occupancy per segment: -1 a writer, n > 0 readers.
    struct World {
        words: Vec<ModelWord>,
        occ: Vec<AtomicI32>,
    }

    impl World {
        fn new(n: usize) -> Arc<World> {
            Arc::new(World {
                words: (0..n).map(|_| ModelWord::new(0)).collect(),
                occ: (0..n).map(|_| AtomicI32::new(0)).collect(),
            })
        }

        /// Locks `first..=last`, checks exclusion inside, releases.
        fn visit(&self, first: u64, last: u64, write: bool) {
            let word = |s: u64| &self.words[s as usize];
            lock_span(word, first, last, write);
            for o in &self.occ[first as usize..=last as usize] {
                if write {
                    assert_eq!(
                        o.swap(-1, Ordering::SeqCst),
                        0,
                        "a writer shares its segment"
                    );
                } else {
                    assert!(
                        o.fetch_add(1, Ordering::SeqCst) >= 0,
                        "a reader in a written segment"
                    );
                }
            }
            thread::yield_now();
            for o in &self.occ[first as usize..=last as usize] {
                if write {
                    assert_eq!(
                        o.swap(0, Ordering::SeqCst),
                        -1,
                        "a writer shares its segment"
                    );
                } else {
                    assert!(
                        o.fetch_sub(1, Ordering::SeqCst) > 0,
                        "a reader in a written segment"
                    );
                }
            }
            unlock_span(word, first, last, write);
        }

        fn all_free(&self) {
            for (i, w) in self.words.iter().enumerate() {
                assert_eq!(
                    w.load(Ordering::SeqCst),
                    0,
                    "segment {i} left locked or WAITING"
                );
            }
        }
    }

    /// Overlapping writers and readers over three segments, twice each.
    #[test]
    fn writers_and_readers_exclude_and_finish() {
        check(
            || {
                let world = World::new(3);
                let jobs = [(0, 1, true), (1, 2, true), (0, 2, false), (1, 1, false)];
                let ts: Vec<_> = jobs
                    .into_iter()
                    .map(|(a, b, write)| {
                        let world = world.clone();
                        thread::spawn(move || {
                            for _ in 0..2 {
                                world.visit(a, b, write);
                            }
                        })
                    })
                    .collect();
                for t in ts {
                    if t.join().is_err() {
                        panic!("a locker panicked");
                    }
                }
                world.all_free();
            },
            10000,
        );
    }

    /// Two readers re-take a segment as long as the writer is not done, always
    /// overlapping each other so that the word is never free; the writer must still
    /// get in (without WAITING, round-robin-like schedules spin forever).
    #[test]
    fn a_stream_of_readers_cannot_starve_writers() {
        check(
            || {
                let world = World::new(2);
                let done = Arc::new(AtomicI32::new(0));
                let writers: Vec<_> = [(0, 1), (1, 1)]
                    .into_iter()
                    .map(|(a, b)| {
                        let (world, done) = (world.clone(), done.clone());
                        thread::spawn(move || {
                            world.visit(a, b, true);
                            done.fetch_add(1, Ordering::SeqCst);
                        })
                    })
                    .collect();
                let readers: Vec<_> = (0..2)
                    .map(|_| {
                        let (world, done) = (world.clone(), done.clone());
                        thread::spawn(move || {
                            while done.load(Ordering::SeqCst) < 2 {
                                world.visit(1, 1, false);
                            }
                        })
                    })
                    .collect();
                for t in writers.into_iter().chain(readers) {
                    if t.join().is_err() {
                        panic!("a locker panicked");
                    }
                }
                world.all_free();
            },
            2000,
        );
    }
}
