//! The per-file data lock abstraction (DESIGN.md §4, pNOVA).
//!
//! Callers lock a byte range, shared or exclusive; `end == u64::MAX` means "to the end
//! of the file, whatever it becomes" (appends, truncates, fallocate). Ranges are
//! widened to whole pages, because copy-on-write rewrites whole pages. The mode
//! decides how much is really locked:
//! - `inode` (NOVA's baseline): one reader-writer lock for the whole file;
//! - `interval`: an augmented interval tree under one mutex ([`interval`]);
//! - `segment`: one atomic word per segment ([`segment`]; a waiting writer keeps
//!   new readers out once it has seen readers hold the segment), plus a phase-fair
//!   "big reader" lock with a reader counter per thread (a leased slot) that only
//!   to-the-end requests take exclusively, and writes from the first page to the end
//!   of file that span a few segments ([`FileLock::write_within`]: a small file
//!   written whole takes one lock, not a word per page).
//!
//!   A segment-mode file goes through three stages, each for good:
//!   - *private*: while one thread at a time uses it (almost every file: made,
//!     written, read and removed by one thread), a reader-writer lock in one word
//!     inside the inode ([`tiny`]), which names that thread. The segment words and
//!     the big reader lock are not even allocated (its per-thread counters take a
//!     cache line each: 2 KiB per file on 16 CPUs). The first locker from another
//!     thread installs them (after the word's holders left) and the file is shared;
//!   - *coarse*: shared, but until a locker first has to wait (a writer for a
//!     reader or another writer, a reader for a writer), a reader holds only its
//!     counter of the big reader lock (one locked instruction, released by a plain
//!     store) and a writer holds the big reader lock exclusively: threads that read
//!     a file together touch only their own lines;
//!   - *fine*: after the first wait (see [`BigReaderLock::adapt`]; at once if the
//!     locker that made the file shared found the word held against it), readers
//!     and writers take segment words as above. Neither earlier stage walks the
//!     segment tree or touches a segment word (measured on one thread: random 4 KiB
//!     reads of a 64 MiB file cost ~15 % more with a segment word per read than with
//!     NOVA's inode lock).
//!
//! The range modes let writers of disjoint ranges copy their data in parallel and
//! commit it with the concurrent append protocol of pNOVA §3.3 (`log` module): the
//! inode's state lock is held only to reserve log slots and to apply the result.

mod interval;
mod segment;
mod tiny;

/// The shuttle harness of the lock models, for other modules' model tests.
#[cfg(test)]
pub(crate) use segment::model as segment_model;

use crate::addr::{page_of, page_start};
use crate::format::BLOCK;
use crate::types::LockMode;
use crossbeam_utils::CachePadded;
use interval::IntervalLock;
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use segment::{SegmentLock, Word};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

pub(crate) enum FileLock {
    Inode(RwLock<()>),
    Interval(IntervalLock),
    Segment(SegmentFile),
}

/// A segment-mode file's lock (module doc): the word of a private file, and the
/// shared state installed once a second thread came.
pub(crate) struct SegmentFile {
    /// [`tiny`]'s word: the lock while the file is private.
    word: AtomicU32,
    /// The segment words and the big reader lock, once the file is shared.
    shared: OnceLock<Box<(SegmentLock, BigReaderLock)>>,
    segment_size: u64,
}

impl SegmentFile {
    /// The shared state, installed by the locker that raised `SHARING` (engaging
    /// the segment words at once if `held`: a locker found the word held against
    /// it, the first wait) once the word's holders left; the others wait for it.
    fn shared(&self, held: bool) -> &(SegmentLock, BigReaderLock) {
        if let Some(b) = self.shared.get() {
            return b;
        }
        if tiny::begin_sharing(&self.word) {
            wait::<AtomicU32>(|| tiny::drained(&self.word));
            let b = Box::new((
                SegmentLock::new(self.segment_size),
                BigReaderLock::default(),
            ));
            if held {
                b.1.mode.store(FINE, Ordering::Relaxed);
            }
            // Only the locker that raised SHARING sets it, so this cannot fail; the
            // set publishes the box (OnceLock's release, the getters' acquire).
            let _ = self.shared.set(b);
        }
        let mut step = 0u32;
        loop {
            if let Some(b) = self.shared.get() {
                return b;
            }
            <AtomicU32 as Word>::pause(step);
            step = step.saturating_add(1);
        }
    }
}

/// A held range lock; released on drop, by the thread that took it: not `Send`
/// (the marker), because a segment-mode guard releases the thread's leased reader
/// slot with a plain store ([`BigReaderLock::unlock_read`]), which is right only on
/// the thread that owns the lease. (parking_lot's guards are not `Send` either, but
/// only while its `send_guard` feature is off, which any crate in the build could
/// turn on.)
pub(crate) struct RangeGuard<'a> {
    held: Held<'a>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl<'a> RangeGuard<'a> {
    fn new(held: Held<'a>) -> Self {
        RangeGuard {
            held,
            _not_send: std::marker::PhantomData,
        }
    }
}

/// What a [`RangeGuard`] holds.
enum Held<'a> {
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
    /// One segment (the common case: a request within one page): its word, found
    /// once at lock time, so unlocking does not walk the radix tree again.
    Segment1 {
        word: &'a AtomicU32,
        whole: &'a BigReaderLock,
        slot: usize,
        write: bool,
    },
    Whole(&'a BigReaderLock),
    /// A reader of a coarse file: its counter of the big reader lock alone.
    Reader(&'a BigReaderLock, usize),
    /// A private file's word, shared or exclusive.
    Private(&'a AtomicU32, bool),
}

impl Drop for RangeGuard<'_> {
    fn drop(&mut self) {
        match &mut self.held {
            Held::Shared(_) | Held::Exclusive(_) => {}
            Held::Interval(l, t) => l.unlock(*t),
            Held::Segments {
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
            Held::Segment1 {
                word,
                whole,
                slot,
                write,
            } => {
                if *write {
                    segment::unlock_write(*word);
                } else {
                    segment::unlock_read(*word);
                }
                whole.unlock_read(*slot);
            }
            Held::Whole(w) => w.unlock_write(),
            Held::Reader(w, slot) => w.unlock_read(*slot),
            Held::Private(w, write) => tiny::unlock(*w, *write),
        }
    }
}

/// Most segments a write covering its whole file spans and still takes the whole
/// file's lock ([`FileLock::write_within`]): 16 (64 KiB with 4 KiB segments).
const WHOLE_MAX_SEGMENTS: u64 = 16;

/// Widens `[start, end)` to whole pages (`end == u64::MAX` stays unbounded).
fn pages(start: u64, end: u64) -> (u64, u64) {
    let s = page_start(page_of(start));
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
            LockMode::Segment => FileLock::Segment(SegmentFile {
                word: AtomicU32::new(0),
                shared: OnceLock::new(),
                segment_size,
            }),
        }
    }

    fn lock(&self, start: u64, end: u64, write: bool) -> RangeGuard<'_> {
        let (s, e) = pages(start, end);
        match self {
            FileLock::Inode(l) => {
                if write {
                    RangeGuard::new(Held::Exclusive(l.write()))
                } else {
                    RangeGuard::new(Held::Shared(l.read()))
                }
            }
            FileLock::Interval(l) => RangeGuard::new(Held::Interval(l, l.lock(s, e, write))),
            FileLock::Segment(f) => {
                let b = match f.shared.get() {
                    Some(b) => b,
                    None => {
                        // The interleaving explorer parks lockers at its points: its
                        // files are shared and fine from their first lock (below).
                        let held = crate::interleave::hooked()
                            || match tiny::try_lock(&f.word, thread_slot() as u32 + 1, write) {
                                Ok(()) => return RangeGuard::new(Held::Private(&f.word, write)),
                                Err(share) => share.held,
                            };
                        f.shared(held)
                    }
                };
                let (words, whole) = (&b.0, &b.1);
                if !whole.is_fine() && crate::interleave::hooked() {
                    // The interleaving explorer parks a locker at its points while
                    // another runs: a coarse file's exclusive lock would hold the
                    // others off for good. Engage the words first, under the
                    // exclusive lock (free: no hooked thread took a coarse lock).
                    whole.lock_write();
                    whole.adapt(true);
                    whole.unlock_write();
                }
                // To the end of the file: the whole file, exclusively (also for a
                // read, which must not walk 2^32 segments). A coarse file's writer
                // too (module doc).
                if e == u64::MAX || (write && !whole.is_fine()) {
                    let waited = whole.lock_write();
                    whole.adapt(waited);
                    return RangeGuard::new(Held::Whole(whole));
                }
                let (slot, waited) = whole.lock_read();
                // Read under the lock: it changes only under the exclusive lock.
                if !whole.is_fine() {
                    // A reader of a coarse file (a writer here found it fine, and a
                    // file never turns coarse again).
                    if waited {
                        whole.want_fine();
                    }
                    return RangeGuard::new(Held::Reader(whole, slot));
                }
                let (first, last) = words.segments(s, e);
                if first == last {
                    let word = words.word(first);
                    segment::lock_span(|_| word, first, first, write);
                    return RangeGuard::new(Held::Segment1 {
                        word,
                        whole,
                        slot,
                        write,
                    });
                }
                if write {
                    words.lock_write(first, last);
                } else {
                    words.lock_read(first, last);
                }
                RangeGuard::new(Held::Segments {
                    words,
                    whole,
                    slot,
                    first,
                    last,
                    write,
                })
            }
        }
    }

    /// Locks `[start, end)` for reading.
    pub fn read(&self, start: u64, end: u64) -> RangeGuard<'_> {
        self.lock(start, end, false)
    }

    /// Starts loading the lock word of the range starting at `start` into the CPU
    /// cache (a hint; segment mode only).
    pub fn prefetch(&self, start: u64) {
        if let FileLock::Segment(f) = self {
            let Some(b) = f.shared.get() else {
                return;
            };
            if !b.1.is_fine() {
                return;
            }
            let (first, _) = b.0.segments(start, start.saturating_add(1));
            b.0.prefetch(first);
        }
    }

    /// Locks `[start, end)` for writing (`end == u64::MAX`: to the end of the file).
    pub fn write(&self, start: u64, end: u64) -> RangeGuard<'_> {
        self.lock(start, end, true)
    }

    /// [`write`](Self::write) for a write to `[start, end)` of a file of `size`
    /// bytes. A write from the first page to at least the end of file, spanning
    /// more than one segment and at most [`WHOLE_MAX_SEGMENTS`] (a new small file's
    /// first write, a small file rewritten whole), takes the whole file
    /// exclusively, as a to-the-end request does: one lock instead of a word per
    /// segment, each a locked instruction to take and one to release (16 for a
    /// 32 KiB file), and no lock-word chunk allocated for a file that is only ever
    /// written whole. The cost: accesses past its end (another thread filling the
    /// next part of a new file, a read past the end of file) wait for it instead of
    /// running beside it. Hence the bound: larger pieces of a parallel fill keep
    /// their segments. (`size` may be stale: either lock is right for the range.)
    pub fn write_within(&self, start: u64, end: u64, size: u64) -> RangeGuard<'_> {
        if let Some(b) = self.shared_state() {
            let (s, e) = pages(start, end);
            if s == 0 && e != u64::MAX && e >= size {
                let (first, last) = b.0.segments(s, e);
                if first != last && last - first < WHOLE_MAX_SEGMENTS {
                    let waited = b.1.lock_write();
                    b.1.adapt(waited);
                    return RangeGuard::new(Held::Whole(&b.1));
                }
            }
        }
        self.lock(start, end, true)
    }

    /// DRAM bytes of range-lock state beyond the fixed struct (segment mode: the lock
    /// words and radix nodes plus the reader counters; 0 otherwise).
    pub fn lock_bytes(&self) -> usize {
        match self {
            FileLock::Segment(f) => f.shared.get().map_or(0, |b| b.0.bytes() + b.1.bytes()),
            _ => 0,
        }
    }

    /// A segment-mode file's shared state, once installed.
    fn shared_state(&self) -> Option<&(SegmentLock, BigReaderLock)> {
        match self {
            FileLock::Segment(f) => f.shared.get().map(|b| &**b),
            _ => None,
        }
    }
}

/// Reader slots leased to threads: one per CPU ([`pm::HostChoices::cpu_count`]), at
/// most 16 (each lock has one more, shared by the threads beyond).
fn slots() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| pm::HostChoices::cpu_count().clamp(1, 16))
}

/// Reader slots leased to live threads (index i: counter i of every
/// [`BigReaderLock`]).
static LEASED: pm::LeasePool = pm::LeasePool::new();

/// A thread's reader slot, leased when it first takes a lock and returned when it
/// exits: while leased, only this thread changes counter `i` of any lock, so it
/// releases with a plain store (a locked instruction costs ~20 cycles on every read
/// and write). Threads beyond [`slots`] share the last counter, with atomic updates.
struct ReaderLease(usize);

impl ReaderLease {
    fn take() -> ReaderLease {
        ReaderLease(LEASED.take(slots()).unwrap_or_else(slots))
    }
}

impl Drop for ReaderLease {
    fn drop(&mut self) {
        if self.0 < slots() {
            LEASED.give_back(self.0);
        }
    }
}

thread_local! {
    static READER_LEASE: ReaderLease = ReaderLease::take();
}

/// The calling thread's reader slot: its own (leased) one, or the shared one
/// ([`slots`]) — also while the thread is being torn down, after its lease went back.
fn thread_slot() -> usize {
    READER_LEASE.try_with(|l| l.0).unwrap_or_else(|_| slots())
}

/// Waits politely (see [`Word::pause`]) until `done()`.
fn wait<W: Word>(done: impl Fn() -> bool) {
    let mut step = 0u32;
    while !done() {
        W::pause(step);
        step = step.saturating_add(1);
    }
}

/// A reader-writer lock whose readers touch only their own cache line (a counter per
/// thread, in the slot the thread leases, see [`ReaderLease`]; threads beyond the
/// slots share one more): readers on different cores never bounce a shared line, and
/// the rare writer (a to-the-end request) waits for every counter to drain.
///
/// Phase-fair, after Brandenburg and Anderson's PF locks, with per-thread counters:
/// - writers queue in ticket order (FIFO among writers);
/// - a writer raises `phase` (odd: a writer is in or draining the readers), which
///   turns new readers away: a stream of readers cannot starve it, it waits only for
///   the readers already inside;
/// - a reader turned away registers in `blocked` and waits for `phase` to become even;
///   the next writer does not raise `phase` while any reader is registered, so the
///   readers a writer blocked go in before the next writer: a stream of writers cannot
///   starve readers. While a reader is registered, at most one writer holds the lock:
///   the one inside (or past its `blocked` check) when the reader registered; every
///   later writer sees the registration and waits.
///
/// Exclusion is a Dekker handshake (all SeqCst): the writer raises `phase`, then reads
/// the counters; a reader bumps its counter, then reads `phase`, and stays only if it
/// is even. One of them sees the other.
pub(crate) struct BigReaderLock<W: Word = AtomicU32> {
    /// Per-thread (leased slot) counts of the readers inside (and of those checking
    /// `phase`); the last counter is shared.
    readers: Box<[CachePadded<W>]>,
    /// Bumped when a writer starts (becomes odd) and when it leaves (even).
    phase: CachePadded<W>,
    /// Readers turned away by a writer, waiting to go in before the next one.
    blocked: CachePadded<W>,
    /// Writers' tickets: the next to hand out, and the one whose turn it is.
    tickets: CachePadded<(W, W)>,
    /// The file's mode ([`FileLock`]'s segment mode, module doc): 0 coarse, 1 fine
    /// (segment words engaged), and a coarse reader's request for fine (2 | mode).
    /// Becomes fine only under the exclusive lock, and never goes back: a locker
    /// that reads it while holding the lock, shared or exclusive, knows which
    /// locks every other holder took.
    mode: CachePadded<W>,
}

/// [`BigReaderLock::mode`]: the segment words are engaged.
const FINE: u32 = 1;
/// [`BigReaderLock::mode`]: a reader of the coarse file waited for a writer.
const WANT_FINE: u32 = 2;

impl Default for BigReaderLock {
    fn default() -> Self {
        BigReaderLock::with_slots(slots() + 1)
    }
}

impl<W: Word> BigReaderLock<W> {
    /// `n` counters: the first `n - 1` each used by one thread at a time (a leased
    /// slot), the last shared.
    fn with_slots(n: usize) -> Self {
        BigReaderLock {
            readers: (0..n.max(1)).map(|_| CachePadded::new(W::new(0))).collect(),
            phase: CachePadded::new(W::new(0)),
            blocked: CachePadded::new(W::new(0)),
            tickets: CachePadded::new((W::new(0), W::new(0))),
            mode: CachePadded::new(W::new(0)),
        }
    }

    /// The file's segment words are engaged (module doc).
    #[inline]
    fn is_fine(&self) -> bool {
        self.mode.load(Ordering::Acquire) & FINE != 0
    }

    /// A reader of the coarse file waited: the next writer engages the segment
    /// words. (A plain store: only readers raise the request, only the exclusive
    /// holder turns it into `FINE`, and a lost request is made again on the next
    /// wait.)
    fn want_fine(&self) {
        if self.mode.load(Ordering::Relaxed) == 0 {
            self.mode.store(WANT_FINE, Ordering::Relaxed);
        }
    }

    /// Called by the exclusive holder: engages the segment words for good once a
    /// locker of the file waited (`waited`: this writer did; or a reader asked).
    fn adapt(&self, waited: bool) {
        let m = self.mode.load(Ordering::Relaxed);
        if m & FINE == 0 && (waited || m & WANT_FINE != 0) {
            // Release: before the unlock that lets the next holder read it.
            self.mode.store(FINE, Ordering::Release);
        }
    }

    fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.readers)
    }

    /// Returns the counter slot to release with, and whether the reader waited for
    /// a writer.
    fn lock_read(&self) -> (usize, bool) {
        let slot = thread_slot().min(self.readers.len() - 1);
        let waited = self.lock_read_at(slot);
        (slot, waited)
    }

    /// Bumps counter `slot` and stays if no writer is in or draining.
    fn enter(&self, slot: usize) -> bool {
        self.readers[slot].fetch_add(1, Ordering::SeqCst);
        if self.phase.load(Ordering::SeqCst) & 1 == 0 {
            return true;
        }
        self.readers[slot].fetch_sub(1, Ordering::SeqCst);
        false
    }

    /// Returns whether the reader waited for a writer.
    fn lock_read_at(&self, slot: usize) -> bool {
        // Fast path: no writer about, only our own counter's line is written.
        if self.phase.load(Ordering::SeqCst) & 1 == 0 && self.enter(slot) {
            return false;
        }
        // Slow path: register, so that the next writer lets us in first; unregister
        // only once our counter is up (the writer then sees it when it drains).
        self.blocked.fetch_add(1, Ordering::SeqCst);
        loop {
            wait::<W>(|| self.phase.load(Ordering::SeqCst) & 1 == 0);
            if self.enter(slot) {
                break;
            }
        }
        self.blocked.fetch_sub(1, Ordering::SeqCst);
        true
    }

    fn unlock_read(&self, slot: usize) {
        let r = &self.readers[slot];
        if slot + 1 < self.readers.len() {
            // A leased slot: no other thread changes it, so a plain store (Release:
            // after everything done under the lock) releases it.
            r.store(r.load(Ordering::Relaxed) - 1, Ordering::Release);
        } else {
            r.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Returns whether the writer waited (for another writer, or for readers).
    fn lock_write(&self) -> bool {
        let (next, serving) = &*self.tickets;
        let ticket = next.fetch_add(1, Ordering::SeqCst);
        let drained = || self.readers.iter().all(|r| r.load(Ordering::SeqCst) == 0);
        let mut waited = serving.load(Ordering::SeqCst) != ticket;
        wait::<W>(|| serving.load(Ordering::SeqCst) == ticket);
        // The readers the previous writer turned away go first. Only readers that
        // saw that writer register, so the wait is bounded.
        waited |= self.blocked.load(Ordering::SeqCst) != 0;
        wait::<W>(|| self.blocked.load(Ordering::SeqCst) == 0);
        self.phase.fetch_add(1, Ordering::SeqCst);
        waited |= !drained();
        wait::<W>(drained);
        waited
    }

    fn unlock_write(&self) {
        self.phase.fetch_add(1, Ordering::SeqCst);
        self.tickets.1.fetch_add(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicI32;
    use std::sync::Arc;

    #[test]
    fn live_threads_lease_distinct_reader_slots_or_share_the_last() {
        // Other tests lease slots meanwhile: whatever they hold, no two live threads
        // here get the same leased slot, and a thread without one gets the shared.
        let n = slots();
        let barrier = Arc::new(std::sync::Barrier::new(n + 3));
        let hs: Vec<_> = (0..n + 3)
            .map(|_| {
                let b = barrier.clone();
                std::thread::spawn(move || {
                    let s = thread_slot();
                    b.wait();
                    s
                })
            })
            .collect();
        let got: Vec<usize> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        let mut leased: Vec<usize> = got.iter().copied().filter(|&s| s < n).collect();
        assert!(got.iter().all(|&s| s <= n), "{got:?}");
        let k = leased.len();
        leased.sort_unstable();
        leased.dedup();
        assert_eq!(leased.len(), k, "a leased slot given twice: {got:?}");
        assert!(got.iter().filter(|&&s| s == n).count() >= 3, "{got:?}");
    }

    #[test]
    fn a_file_takes_segment_words_only_once_a_locker_waited() {
        let lock = Arc::new(FileLock::new(LockMode::Segment, 4096));
        // One thread: reads and writes of every kind, nothing allocated.
        let all_kinds = |lock: &FileLock| {
            for i in 0..64u64 {
                drop(lock.read(i * 4096, i * 4096 + 100));
                drop(lock.write(i * 4096, i * 4096 + 100));
                drop(lock.write_within(0, 3 * 4096, 3 * 4096));
                drop(lock.write(0, u64::MAX));
            }
        };
        all_kinds(&lock);
        assert!(lock.shared_state().is_none(), "a private file went shared");
        assert_eq!(lock.lock_bytes(), 0);
        // Another thread, one at a time: shared, but coarse (no segment word).
        let l1 = lock.clone();
        std::thread::spawn(move || all_kinds(&l1)).join().unwrap();
        all_kinds(&lock);
        let b = lock
            .shared_state()
            .expect("shared once another thread came");
        assert!(!b.1.is_fine());
        assert_eq!(b.0.bytes(), 0, "a coarse file allocated lock words");
        // A reader that has to wait for a writer asks for them (once registered as
        // turned away, it returns having waited), and the next writer engages them.
        let w = lock.write(0, 4096);
        let l2 = lock.clone();
        let r = std::thread::spawn(move || drop(l2.read(8192, 12288)));
        while b.1.blocked.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        drop(w);
        r.join().unwrap();
        assert!(!b.1.is_fine(), "only a writer engages the words");
        drop(lock.write(0, 4096));
        assert!(b.1.is_fine());
        // Fine: disjoint ranges are held at once.
        let a = lock.write(0, 4096);
        let l3 = lock.clone();
        std::thread::spawn(move || drop(l3.write(8192, 12288)))
            .join()
            .unwrap();
        drop(a);
        assert!(b.0.bytes() > 0);
    }

    #[test]
    fn leases_come_back_and_leave_no_reader_behind() {
        // Threads read-lock and exit (their leases go back, to be reused by the next
        // ones); each counter must be back at zero, so a to-the-end writer gets in.
        let lock = Arc::new(FileLock::new(LockMode::Segment, 4096));
        for round in 0..4u64 {
            let hs: Vec<_> = (0..slots() + 2)
                .map(|t| {
                    let lock = lock.clone();
                    std::thread::spawn(move || {
                        for i in 0..200u64 {
                            let at = ((t as u64 * 7 + i + round) % 64) * 4096;
                            drop(lock.read(at, at + 100));
                            drop(lock.write(at, at + 100));
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            // (Threads that ran one after another reused one lease: the file may
            // still be private.)
            let FileLock::Segment(f) = &*lock else {
                unreachable!()
            };
            assert!(tiny::drained(&f.word));
            if let Some(b) = lock.shared_state() {
                assert!(b.1.readers.iter().all(|r| r.load(Ordering::SeqCst) == 0));
            }
            drop(lock.write(0, u64::MAX));
        }
    }

    #[test]
    fn ranges_are_widened_to_pages() {
        assert_eq!(pages(100, 200), (0, 4096));
        assert_eq!(pages(4095, 4097), (0, 8192));
        assert_eq!(pages(8192, u64::MAX), (8192, u64::MAX));
    }

    /// Stress: in every mode, overlapping writers never hold at once, readers never
    /// overlap a writer, and a to-the-end writer excludes everybody past its start.
    /// A quarter of the ranges start at the first page, and half the bounded writes
    /// say a file size (`write_within`): those covering it take the whole file.
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
                            let s = if (x >> 50) % 4 == 0 {
                                0
                            } else {
                                (x >> 40) % 24
                            };
                            let to_end = (x >> 12) % 16 == 0;
                            let e = if to_end {
                                24
                            } else {
                                (s + 1 + (x >> 20) % 4).min(24)
                            };
                            let write = to_end || (x >> 8) % 2 == 0;
                            let end = if to_end { u64::MAX } else { e * 4096 };
                            let size = ((x >> 30) % 25) * 4096;
                            let g = if write && !to_end && (x >> 56) % 2 == 0 {
                                lock.write_within(s * 4096 + 10, end, size)
                            } else if write {
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

/// Model tests of [`BigReaderLock`] under shuttle (see `segment::model`): exclusion,
/// termination under a step bound, and phase fairness both ways.
#[cfg(test)]
mod model_tests {
    use super::segment::model::{check, ModelWord};
    use super::*;
    use shuttle::sync::atomic::AtomicI32;
    use shuttle::sync::Arc;
    use shuttle::thread;

    /// Readers pass the counter slot they use: slot 0 is a leased one (one thread
    /// only, released by a plain store), slot 1 the shared one of a 2-slot lock.
    struct World {
        lock: BigReaderLock<ModelWord>,
        /// -1: a writer inside; n > 0: readers inside.
        occ: AtomicI32,
        /// Lockers still to finish their own work; the streams run while it is > 0.
        left: AtomicI32,
    }

    impl World {
        fn new(slots: usize, left: i32) -> Arc<World> {
            Arc::new(World {
                lock: BigReaderLock::with_slots(slots),
                occ: AtomicI32::new(0),
                left: AtomicI32::new(left),
            })
        }

        fn read(&self, slot: usize) {
            self.lock.lock_read_at(slot);
            assert!(
                self.occ.fetch_add(1, Ordering::SeqCst) >= 0,
                "a reader beside a writer"
            );
            thread::yield_now();
            assert!(
                self.occ.fetch_sub(1, Ordering::SeqCst) > 0,
                "a reader beside a writer"
            );
            self.lock.unlock_read(slot);
        }

        /// Returns whether a reader turned away waited (was registered) meanwhile.
        fn write(&self) -> bool {
            self.lock.lock_write();
            assert_eq!(self.occ.swap(-1, Ordering::SeqCst), 0, "a writer not alone");
            let blocked = self.lock.blocked.load(Ordering::SeqCst) != 0;
            thread::yield_now();
            assert_eq!(self.occ.swap(0, Ordering::SeqCst), -1, "a writer not alone");
            self.lock.unlock_write();
            blocked
        }

        fn running(&self) -> bool {
            self.left.load(Ordering::SeqCst) > 0
        }

        fn finished(&self) {
            self.left.fetch_sub(1, Ordering::SeqCst);
        }

        fn all_free(&self) {
            let l = &self.lock;
            assert!(l.readers.iter().all(|r| r.load(Ordering::SeqCst) == 0));
            assert_eq!(l.phase.load(Ordering::SeqCst) & 1, 0);
            assert_eq!(l.blocked.load(Ordering::SeqCst), 0);
            assert_eq!(
                l.tickets.0.load(Ordering::SeqCst),
                l.tickets.1.load(Ordering::SeqCst)
            );
        }
    }

    /// A locker's section: `occ` counts the readers inside (-1: a writer), and
    /// asserts that a writer is alone and no reader is beside a writer.
    fn inside(occ: &AtomicI32, write: bool) {
        if write {
            assert_eq!(occ.swap(-1, Ordering::SeqCst), 0, "a writer not alone");
            thread::yield_now();
            assert_eq!(occ.swap(0, Ordering::SeqCst), -1, "a writer not alone");
        } else {
            assert!(occ.fetch_add(1, Ordering::SeqCst) >= 0, "beside a writer");
            thread::yield_now();
            assert!(occ.fetch_sub(1, Ordering::SeqCst) > 0, "beside a writer");
        }
    }

    fn join(ts: Vec<thread::JoinHandle<()>>) {
        for t in ts {
            if t.join().is_err() {
                panic!("a locker panicked");
            }
        }
    }

    #[test]
    fn readers_and_writers_exclude_and_finish() {
        check(
            || {
                let world = World::new(2, 0);
                let mut ts = Vec::new();
                for slot in [0, 1, 1] {
                    let world = world.clone();
                    ts.push(thread::spawn(move || {
                        for _ in 0..2 {
                            world.read(slot);
                        }
                    }));
                }
                for _ in 0..2 {
                    let world = world.clone();
                    ts.push(thread::spawn(move || {
                        for _ in 0..2 {
                            world.write();
                        }
                    }));
                }
                join(ts);
                world.all_free();
            },
            10000,
        );
    }

    /// The segment mode's adaptive protocol (module doc) on one segment: readers
    /// and writers of a coarse file hold the big reader lock alone (shared or
    /// exclusive), of a fine one its reader counter and the segment word; the first
    /// wait turns the file fine while lockers of either kind may be inside. No
    /// writer is ever beside another locker.
    #[test]
    fn a_file_turning_fine_keeps_writers_alone() {
        struct Adaptive {
            lock: BigReaderLock<ModelWord>,
            word: ModelWord,
            occ: AtomicI32,
        }
        impl Adaptive {
            fn inside(&self, write: bool) {
                inside(&self.occ, write);
            }
            fn access(&self, slot: usize, write: bool) {
                if write && !self.lock.is_fine() {
                    let waited = self.lock.lock_write();
                    self.lock.adapt(waited);
                    self.inside(true);
                    self.lock.unlock_write();
                    return;
                }
                let waited = self.lock.lock_read_at(slot);
                if self.lock.is_fine() {
                    super::segment::lock_span(|_| &self.word, 0, 0, write);
                    self.inside(write);
                    super::segment::unlock_span(|_| &self.word, 0, 0, write);
                } else {
                    assert!(!write, "a writer took a coarse file shared");
                    if waited {
                        self.lock.want_fine();
                    }
                    self.inside(false);
                }
                self.lock.unlock_read(slot);
            }
        }
        check(
            || {
                let a = Arc::new(Adaptive {
                    lock: BigReaderLock::with_slots(2),
                    word: ModelWord::new(0),
                    occ: AtomicI32::new(0),
                });
                let mut ts = Vec::new();
                for (slot, write) in [(0, false), (1, false), (1, true), (1, true)] {
                    let a = a.clone();
                    ts.push(thread::spawn(move || {
                        for _ in 0..3 {
                            a.access(slot, write);
                        }
                    }));
                }
                join(ts);
                assert_eq!(a.word.load(Ordering::SeqCst), 0);
                assert!(a.lock.readers.iter().all(|r| r.load(Ordering::SeqCst) == 0));
            },
            10000,
        );
    }

    /// A private file turning shared ([`SegmentFile::shared`] over [`tiny`]'s word):
    /// lockers from two slots, two threads sharing the second, take the word while
    /// the file is private, and the big reader lock once a locker raised `SHARING`
    /// and installed it after the word drained. No writer is ever beside another
    /// locker, whichever of the two each holds, and everyone finishes.
    #[test]
    fn a_private_file_turning_shared_keeps_writers_alone() {
        struct Staged {
            word: ModelWord,
            /// The installed shared state (the `OnceLock` of the real code).
            installed: ModelWord,
            lock: BigReaderLock<ModelWord>,
            occ: AtomicI32,
        }
        impl Staged {
            fn inside(&self, write: bool) {
                inside(&self.occ, write);
            }
            fn access(&self, owner: u32, slot: usize, write: bool) {
                if self.installed.load(Ordering::Acquire) == 0 {
                    if tiny::try_lock(&self.word, owner, write).is_ok() {
                        self.inside(write);
                        tiny::unlock(&self.word, write);
                        return;
                    }
                    if tiny::begin_sharing(&self.word) {
                        wait::<ModelWord>(|| tiny::drained(&self.word));
                        self.installed.store(1, Ordering::Release);
                    }
                    wait::<ModelWord>(|| self.installed.load(Ordering::Acquire) == 1);
                }
                if write {
                    self.lock.lock_write();
                    self.inside(true);
                    self.lock.unlock_write();
                } else {
                    self.lock.lock_read_at(slot);
                    self.inside(false);
                    self.lock.unlock_read(slot);
                }
            }
        }
        check(
            || {
                let a = Arc::new(Staged {
                    word: ModelWord::new(0),
                    installed: ModelWord::new(0),
                    lock: BigReaderLock::with_slots(2),
                    occ: AtomicI32::new(0),
                });
                let mut ts = Vec::new();
                for (owner, slot, writes) in [
                    (1, 0, [false, true, false]),
                    (2, 1, [true; 3]),
                    (2, 1, [false; 3]),
                ] {
                    let a = a.clone();
                    ts.push(thread::spawn(move || {
                        for write in writes {
                            a.access(owner, slot, write);
                        }
                    }));
                }
                join(ts);
                assert!(tiny::drained(&a.word));
                assert!(a.lock.readers.iter().all(|r| r.load(Ordering::SeqCst) == 0));
            },
            10000,
        );
    }

    /// Two readers overlap each other for as long as the writer is not done.
    #[test]
    fn a_stream_of_readers_cannot_starve_the_writer() {
        check(
            || {
                let world = World::new(2, 1);
                let mut ts = Vec::new();
                for slot in [0, 1] {
                    let world = world.clone();
                    ts.push(thread::spawn(move || {
                        while world.running() {
                            world.read(slot);
                        }
                    }));
                }
                let w = world.clone();
                ts.push(thread::spawn(move || {
                    w.write();
                    w.finished();
                }));
                join(ts);
                world.all_free();
            },
            2000,
        );
    }

    /// Two writers take turns for as long as the reader is not done. Liveness alone
    /// is no test here (random and PCT schedules let the reader in anyway), so this
    /// checks the bound behind it: while the reader waits registered, at most one
    /// writer holds the lock (the one inside, or past its `blocked` check, when the
    /// reader registered; every later writer sees the registration).
    #[test]
    fn a_stream_of_writers_cannot_starve_readers() {
        check(
            || {
                let world = World::new(2, 1);
                let passed = Arc::new(AtomicI32::new(0));
                let mut ts = Vec::new();
                for _ in 0..2 {
                    let (world, passed) = (world.clone(), passed.clone());
                    ts.push(thread::spawn(move || {
                        while world.running() {
                            if world.write() {
                                let n = passed.fetch_add(1, Ordering::SeqCst) + 1;
                                assert!(n <= 1, "{n} writers passed a waiting reader");
                            }
                        }
                    }));
                }
                let w = world.clone();
                ts.push(thread::spawn(move || {
                    w.read(1);
                    w.finished();
                }));
                join(ts);
                world.all_free();
            },
            3000,
        );
    }
}
