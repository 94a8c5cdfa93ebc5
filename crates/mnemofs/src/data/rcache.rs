//! RCache (papers/rcache; DESIGN.md §5): a DRAM read cache of hot data pages, on the
//! data plane's read path.
//!
//! - **Entries.** One table of `sets × WAYS` entries (set-associative, keyed by the
//!   PM block that holds the page), each owning one DRAM page, so the DRAM budget is
//!   exact: `entries × 4 KiB`. An entry is two words: its *validation word* (state,
//!   reader count, frequency, version) and its key (the block). Every state
//!   change is a CAS on the validation word, as the paper's Fig. 3:
//!   `Invalid → InUse` (an inserter claims the entry) `→ Prep` (block recorded; a job
//!   is queued for the copier) `→ Copy` (the copier claims it) `→ Ready` (the page is
//!   in DRAM); a reader takes `Ready → InUse(1)`, further readers `InUse(n) →
//!   InUse(n+1)`, and the last one out returns it to `Ready`. A write takes any of
//!   `Prep`, `Copy`, `Ready` back to `Invalid`. The version changes whenever an
//!   entry is claimed for a new block, so that a CAS made on what a thread read
//!   before the entry was reused fails.
//! - **Filling.** A reader that misses reads PM as before; when the page is hot
//!   (read `threshold` times within one `window`, counted per thread, so that
//!   counting writes no shared cache line) it claims an entry. A reader that read
//!   the whole page fills the entry itself from the bytes it just read (a 4 KiB
//!   DRAM copy, no second PM read, and as many fillers as readers); a reader of
//!   part of a page queues a job, and the copier thread reads the page from PM and
//!   fills it. A slot in the copier's queue is reserved before the entry is
//!   claimed, so a full queue turns an insert away before anything is evicted.
//!   Readers of a `Ready` entry copy from DRAM.
//! - **What an entry holds, and why it is never stale.** An entry holds the bytes
//!   of its PM block (LAWN's zone slices are laid over them on every read, as over
//!   the PM page). The copier copies under the page's shared range lock after
//!   checking that the block still maps the page. Every change of a block's bytes
//!   is made under the page's exclusive range lock and invalidates the block's
//!   entries before the lock is released (the data plane's invalidation point:
//!   LAWN and fine-log in-place writes, LAWN write-back), and so is every free of a
//!   block that was mapped (page CoW, truncate, hole punch, fallocate, unlink: the
//!   store's free hook). So a reader, which holds the page's shared range lock,
//!   finds either no entry or one equal to the PM block; and a copy that overlapped
//!   a change ends `Invalid`, because the change's invalidation turns `Copy` into
//!   `Invalid` and the copier's `Copy → Ready` then fails. An insert of a block can
//!   never race with an invalidation of the same block (the range locks keep them
//!   apart), which is why an invalidation skips entries an inserter is filling.
//! - **Budget, eviction and admission.** Fixed: `entries × 4 KiB`. Each entry
//!   keeps a small frequency in its validation word: a hit raises it (on the CAS
//!   the hit makes anyway), a candidate turned away from a full set lowers one
//!   entry's, and only an entry at 0 is evicted ([`Table::claim`]). So a scan or
//!   a loop over more data than the budget keeps the pages it has (each is read
//!   once per pass, as often as it is aged) instead of evicting every page before
//!   its next read, and pages no longer read age out. Nothing is persistent; a
//!   mount starts with an empty cache and a crash cannot expose it.
//! - **Counters** are per thread (a slot each, written with a plain store),
//!   summed for the figures.
//!
//! Why not a cache crate (quick_cache, moka): both own their values and manage them
//! behind their own (sharded) locks, with no way to express the five-state protocol
//! that lets the copier fill a page outside the read path and a write invalidate a
//! page a reader is about to claim. Frequency aging over a fixed set-associative table is a
//! few lines on top of the protocol and needs no allocation after mount.

use crate::addr::{page_start, BlockNo};
use crate::format::BLOCK;
use crate::inode::Inode;
use crate::vol::Vol;
use crossbeam_utils::CachePadded;
use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{
    sync_channel, Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Entries per set.
pub(crate) const WAYS: usize = 8;

const INVALID: u64 = 0;
const IN_USE: u64 = 1;
const PREP: u64 = 2;
const COPY: u64 = 3;
const READY: u64 = 4;
const STATE_MASK: u64 = 0b111;
const READER_SHIFT: u32 = 3;
const READER_ONE: u64 = 1 << READER_SHIFT;
const READER_MAX: u64 = (1 << 17) - 1;
const READER_MASK: u64 = READER_MAX << READER_SHIFT;
/// The entry's frequency (0..=FREQ_MAX): hits raise it, rejected candidates of its
/// set lower it, and only an entry at 0 is evicted ([`Table::claim`]).
const FREQ_SHIFT: u32 = 20;
const FREQ_MAX: u64 = 7;
const FREQ_MASK: u64 = FREQ_MAX << FREQ_SHIFT;
const VER_SHIFT: u32 = 24;

fn state(w: u64) -> u64 {
    w & STATE_MASK
}

fn readers(w: u64) -> u64 {
    (w & READER_MASK) >> READER_SHIFT
}

fn version(w: u64) -> u64 {
    w >> VER_SHIFT
}

fn freq(w: u64) -> u64 {
    (w & FREQ_MASK) >> FREQ_SHIFT
}

fn word(state: u64, readers: u64, freq: u64, version: u64) -> u64 {
    state | (readers << READER_SHIFT) | (freq.min(FREQ_MAX) << FREQ_SHIFT) | (version << VER_SHIFT)
}

/// The atomic word the protocol runs on: `AtomicU64`, or shuttle's in the model test.
pub(crate) trait Word: Send + Sync {
    fn new(v: u64) -> Self;
    fn load(&self, o: Ordering) -> u64;
    fn store(&self, v: u64, o: Ordering);
    /// Compare-and-swap (acquire-release on success, acquire on failure).
    fn cas(&self, cur: u64, new: u64) -> Result<u64, u64>;
    /// Waiting for readers to leave an entry (a spin hint; the model yields).
    fn pause();
}

impl Word for AtomicU64 {
    fn new(v: u64) -> Self {
        AtomicU64::new(v)
    }
    #[inline]
    fn load(&self, o: Ordering) -> u64 {
        AtomicU64::load(self, o)
    }
    #[inline]
    fn store(&self, v: u64, o: Ordering) {
        AtomicU64::store(self, v, o)
    }
    #[inline]
    fn cas(&self, cur: u64, new: u64) -> Result<u64, u64> {
        self.compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire)
    }
    fn pause() {
        std::hint::spin_loop();
    }
}

struct Entry<W> {
    word: W,
    key: W,
}

/// Why [`Table::claim`] gave no entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The key has an entry already.
    Present,
    /// Every entry of the set is busy or was read since the last candidate.
    Full,
    /// Another thread changed the chosen entry meanwhile.
    Raced,
}

/// What an invalidation or insert did (for the counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Claim {
    /// The entry claimed.
    pub entry: usize,
    /// Its new version (the copier's job names it).
    pub version: u64,
    /// A `Ready` page was evicted to make room.
    pub evicted: bool,
}

/// The entry table and its DRAM pages: the lock-free protocol (module doc).
pub(crate) struct Table<W: Word> {
    entries: Box<[Entry<W>]>,
    /// log2 of the number of sets.
    set_bits: u32,
    page_size: usize,
    /// `entries.len() × page_size` bytes; page `i` belongs to entry `i`.
    pages: NonNull<u8>,
    pages_len: usize,
}

// SAFETY: the table's pages are reached only through the protocol: an entry's page
// is written only by the one thread that moved it to `Copy` (no reader reads a page
// in `Copy`), and read only by threads holding a reader count (no writer writes a
// page whose entry is `InUse` with readers). The words are atomics.
unsafe impl<W: Word> Send for Table<W> {}
// SAFETY: as for `Send`.
unsafe impl<W: Word> Sync for Table<W> {}

impl<W: Word> Drop for Table<W> {
    fn drop(&mut self) {
        // SAFETY: `pages` is the mapping of `pages_len` bytes `map_pages` made for
        // this table alone; it is unmapped once, here.
        unsafe { libc::munmap(self.pages.as_ptr().cast(), self.pages_len) };
    }
}

/// Alignment of the page store: 2 MiB, so that the kernel can back it with
/// transparent huge pages (one TLB entry for 512 cached pages).
const PAGES_ALIGN: usize = 2 << 20;

/// Anonymous memory for `len` bytes of pages (`len` a multiple of 4096), 2 MiB
/// aligned and advised for huge pages; the kernel maps it in, zeroed, on first
/// touch (the mount maps it all in: [`Table::populate`]). Panics (as an allocation failure)
/// when the address space is exhausted.
fn map_pages(len: usize) -> NonNull<u8> {
    let span = len.saturating_add(PAGES_ALIGN);
    // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        let layout = std::alloc::Layout::from_size_align(len.max(1), 4096)
            .unwrap_or_else(|_| std::alloc::Layout::new::<u8>());
        std::alloc::handle_alloc_error(layout);
    }
    let base = p as usize;
    let start = base.next_multiple_of(PAGES_ALIGN);
    // SAFETY: the head and tail cut off lie inside the mapping just made, outside
    // `[start, start + len)`, and nothing refers to them.
    unsafe {
        if start > base {
            libc::munmap(p, start - base);
        }
        let tail = base + span - (start + len);
        if tail > 0 {
            libc::munmap((start + len) as *mut libc::c_void, tail);
        }
        // Refused advice (no THP) is harmless: 4 KiB pages then.
        if pm::HostChoices::get().is_ok_and(|h| h.huge_pages) {
            libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
    }
    // SAFETY: `start` lies inside a successful mapping, so it is not null.
    unsafe { NonNull::new_unchecked(start as *mut u8) }
}

/// Fibonacci hashing: use the product's top bits (they depend on every bit of the
/// key), so that neighbouring blocks spread over sets and hotness slots.
fn hash(key: u64) -> u64 {
    key.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl<W: Word> Table<W> {
    /// A table of at least `entries` entries (rounded up to whole sets of a
    /// power-of-two count), each with a page of `page_size` bytes.
    pub fn new(entries: usize, page_size: usize) -> Table<W> {
        let sets = entries.div_ceil(WAYS).max(1).next_power_of_two();
        let n = sets * WAYS;
        let pages_len = n * page_size;
        let pages = map_pages(pages_len);
        Table {
            entries: (0..n)
                .map(|_| Entry {
                    word: W::new(INVALID),
                    key: W::new(0),
                })
                .collect(),
            set_bits: sets.trailing_zeros(),
            page_size,
            pages,
            pages_len,
        }
    }

    /// Maps the table's DRAM pages in now (zero-filled by the kernel), 2 MiB at a
    /// time, until `stop`: done at mount, so that no reader takes the page fault
    /// (and its zero-fill) on the first fill of each page. Where the
    /// kernel lacks `MADV_POPULATE_WRITE` (before 5.14) the pages fault in on first
    /// use instead.
    pub fn populate(&self, stop: &AtomicBool) {
        let mut off = 0;
        while off < self.pages_len && !stop.load(Ordering::Relaxed) {
            let len = PAGES_ALIGN.min(self.pages_len - off);
            // SAFETY: the range lies inside the table's own mapping; populating only
            // faults pages in (zero-filled, or left as they are if already mapped)
            // and changes no byte a thread may be reading or writing.
            unsafe {
                libc::madvise(
                    self.pages.as_ptr().add(off).cast(),
                    len,
                    libc::MADV_POPULATE_WRITE,
                );
            }
            off += len;
        }
    }

    /// Entries (= DRAM pages) of the table.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// The set of `key`: blocks `8k..8k+7` share one, and consecutive groups take
    /// consecutive sets, so that a file's consecutive blocks (laid out together by
    /// the allocator) land in consecutive DRAM pages: a sequential reader then
    /// streams through DRAM as it would through PM, and the hardware prefetchers
    /// follow (a hashed placement measured 4× slower than reading the image itself
    /// on a DRAM-backed image).
    fn set(&self, key: u64) -> std::ops::Range<usize> {
        let mask = (1usize << self.set_bits) - 1;
        let s = ((key / WAYS as u64) as usize & mask) * WAYS;
        s..s + WAYS
    }

    fn page_ptr(&self, i: usize) -> *mut u8 {
        // SAFETY: `i < entries.len()`, so the page lies inside the allocation.
        unsafe { self.pages.as_ptr().add(i * self.page_size) }
    }

    /// On a hit, copies the cached bytes `[off, off + dst.len())` of `key`'s page
    /// into `dst` and returns true. Lock-free.
    #[inline]
    pub fn read(&self, key: u64, off: usize, dst: &mut [u8]) -> bool {
        for i in self.set(key) {
            let e = &self.entries[i];
            let mut w = e.word.load(Ordering::Acquire);
            loop {
                let st = state(w);
                let readable = st == READY || (st == IN_USE && readers(w) > 0);
                if !readable || readers(w) == READER_MAX || e.key.load(Ordering::Acquire) != key {
                    break;
                }
                let new = if st == READY {
                    word(IN_USE, 1, freq(w), version(w))
                } else {
                    w + READER_ONE
                };
                match e.word.cas(w, new) {
                    Ok(_) => {
                        // The version did not change since `w` was read, so the
                        // entry still holds `key`; a reader count keeps it so.
                        let len = dst.len().min(self.page_size.saturating_sub(off));
                        // SAFETY: the entry is `InUse` with our reader count: no
                        // thread writes its page until the count is gone, and the
                        // range lies inside the page.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                self.page_ptr(i).add(off),
                                dst.as_mut_ptr(),
                                len,
                            );
                        }
                        self.leave(e);
                        return true;
                    }
                    Err(cur) => w = cur,
                }
            }
        }
        false
    }

    /// A reader leaves entry `e`; the last one returns it to `Ready`, its frequency
    /// one up.
    fn leave(&self, e: &Entry<W>) {
        let mut w = e.word.load(Ordering::Relaxed);
        loop {
            let new = if readers(w) <= 1 {
                word(READY, 0, freq(w) + 1, version(w))
            } else {
                w - READER_ONE
            };
            match e.word.cas(w, new) {
                Ok(_) => return,
                Err(cur) => w = cur,
            }
        }
    }

    /// Invalidates every entry of `key` (its bytes changed, or its block is being
    /// freed); waits for readers of such an entry to leave. Returns how many
    /// entries it invalidated.
    pub fn invalidate(&self, key: u64) -> u32 {
        let mut n = 0;
        for i in self.set(key) {
            let e = &self.entries[i];
            loop {
                let w = e.word.load(Ordering::Acquire);
                let st = state(w);
                // Free, or being filled by an inserter (never for `key`: module doc).
                if st == INVALID || (st == IN_USE && readers(w) == 0) {
                    break;
                }
                if e.key.load(Ordering::Acquire) != key {
                    break;
                }
                if st == IN_USE {
                    W::pause();
                    continue;
                }
                if e.word.cas(w, word(INVALID, 0, 0, version(w))).is_ok() {
                    n += 1;
                    break;
                }
            }
        }
        n
    }

    /// Claims an entry for `key` (not in the table yet) and leaves it `Prep`: the
    /// caller fills it ([`copy`](Self::copy)) or queues a copier job for it (or
    /// calls [`abort`](Self::abort)). `None` when `key` has an entry already, or
    /// its set has no entry to give.
    ///
    /// Admission (scan resistance): a free entry is taken; else a `Ready` one
    /// without readers whose frequency is 0. When every entry of the set is busy or
    /// was read since, the candidate is turned away and lowers one entry's
    /// frequency by one (the entry at `hand`, modulo the ways): a page stays as
    /// long as it is read about as often as candidates of its set come. A loop over
    /// more data than the budget then keeps the pages it has (each read once per
    /// pass, and so never at 0) instead of evicting each one before its next read,
    /// and a hot set that moves on ages out within a few misses. (GCLOCK with the
    /// aging step moved from the eviction scan to the rejected candidate; S3-FIFO
    /// and W-TinyLFU, as quick_cache and moka build them, need a queue or a sketch
    /// that every read updates, a shared write per read, where the counter here
    /// rides on the compare-and-swap a hit makes anyway.)
    pub fn claim(&self, key: u64, hand: usize) -> Result<Claim, Refused> {
        let set = self.set(key);
        for i in set.clone() {
            let e = &self.entries[i];
            let w = e.word.load(Ordering::Acquire);
            let st = state(w);
            if st != INVALID
                && !(st == IN_USE && readers(w) == 0)
                && e.key.load(Ordering::Acquire) == key
            {
                return Err(Refused::Present);
            }
        }
        // The block's home way first (block `8k + j` in way `j`: a run of blocks in
        // consecutive pages), if free; then any free entry; then a cold one.
        let home = set.start + (key % WAYS as u64) as usize;
        let cold = |w: u64| state(w) == READY && readers(w) == 0 && freq(w) == 0;
        let hw = self.entries[home].word.load(Ordering::Acquire);
        let victim = if state(hw) == INVALID || cold(hw) {
            Some((home, hw))
        } else {
            let mut words = [(0usize, 0u64); WAYS];
            for (k, i) in set.clone().enumerate() {
                words[k] = (i, self.entries[i].word.load(Ordering::Acquire));
            }
            words
                .iter()
                .find(|(_, w)| state(*w) == INVALID)
                .or_else(|| words.iter().find(|(_, w)| cold(*w)))
                .copied()
        };
        let Some((i, w)) = victim else {
            // Every entry busy or read since: age one, turn the candidate away.
            let e = &self.entries[set.start + hand % WAYS];
            let w = e.word.load(Ordering::Acquire);
            if state(w) == READY && readers(w) == 0 && freq(w) > 0 {
                let _ = e.word.cas(w, word(READY, 0, freq(w) - 1, version(w)));
            }
            return Err(Refused::Full);
        };
        let e = &self.entries[i];
        let ver = (version(w) + 1) & ((1 << (64 - VER_SHIFT)) - 1);
        e.word
            .cas(w, word(IN_USE, 0, 0, ver))
            .map_err(|_| Refused::Raced)?;
        e.key.store(key, Ordering::Relaxed);
        e.word.store(word(PREP, 0, 0, ver), Ordering::Release);
        Ok(Claim {
            entry: i,
            version: ver,
            evicted: state(w) == READY,
        })
    }

    /// Gives up a claimed entry whose job could not be queued.
    pub fn abort(&self, entry: usize, ver: u64) {
        let _ = self.entries[entry]
            .word
            .cas(word(PREP, 0, 0, ver), word(INVALID, 0, 0, ver));
    }

    /// The copier's part: moves `entry` (version `ver`) from `Prep` to `Copy`, lets
    /// `fill` write its page (false: the block no longer maps the page), then to
    /// `Ready`. Returns whether the entry became `Ready` (false also when a write
    /// invalidated it meanwhile, or the job is stale).
    pub fn copy(&self, entry: usize, ver: u64, fill: impl FnOnce(&mut [u8]) -> bool) -> bool {
        let Some(e) = self.entries.get(entry) else {
            return false;
        };
        if e.word
            .cas(word(PREP, 0, 0, ver), word(COPY, 0, 0, ver))
            .is_err()
        {
            return false;
        }
        // SAFETY: the entry is `Copy` and we moved it there: no reader reads its page
        // (readers take only `Ready` or `InUse` entries with readers) and no other
        // thread writes it (only the one that moved it to `Copy`).
        let page = unsafe { std::slice::from_raw_parts_mut(self.page_ptr(entry), self.page_size) };
        if !fill(page) {
            let _ = e.word.cas(word(COPY, 0, 0, ver), word(INVALID, 0, 0, ver));
            return false;
        }
        // Frequency 1: a new page is evicted only after a candidate of its set was
        // turned away since (it had its chance to be read again).
        e.word
            .cas(word(COPY, 0, 0, ver), word(READY, 0, 1, ver))
            .is_ok()
    }

    /// Entries in each state: (invalid, in use, prep, copy, ready) and the reader
    /// counts summed (tests: quiescence, leaks).
    pub fn census(&self) -> ([usize; 5], u64) {
        let mut c = [0usize; 5];
        let mut r = 0;
        for e in self.entries.iter() {
            let w = e.word.load(Ordering::Acquire);
            if let Some(x) = c.get_mut(state(w) as usize) {
                *x += 1;
            }
            r += readers(w);
        }
        (c, r)
    }
}

// ------------------------------------------------------------------ hotness --

/// Slots of each thread's hotness table (4 bytes each: 256 KiB per reading thread).
const HEAT_SLOTS: usize = 1 << 16;

thread_local! {
    /// Per thread: direct-mapped (block tag 20 bits, count 4 bits, window 8 bits).
    static HEAT: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// Counts a read of `block` by this thread in window `tick`; true when it is the
/// `threshold`-th in this window (the count then starts over).
fn hot(block: u64, tick: u64, threshold: u32) -> bool {
    let h = hash(block);
    let slot = (h >> (64 - HEAT_SLOTS.trailing_zeros())) as usize;
    let tag = ((h >> 20) & 0xF_FFFF) as u32;
    let t = (tick & 0xFF) as u32;
    HEAT.with(|heat| {
        let mut heat = heat.borrow_mut();
        if heat.is_empty() {
            heat.resize(HEAT_SLOTS, 0);
        }
        let v = heat[slot];
        let count = if v >> 12 == tag && v & 0xFF == t {
            ((v >> 8) & 0xF) + 1
        } else {
            1
        };
        if count >= threshold {
            heat[slot] = 0;
            return true;
        }
        heat[slot] = (tag << 12) | (count.min(15) << 8) | t;
        false
    })
}

// ---------------------------------------------------------------- the cache --

/// Options of the read cache (`MountOptions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadCacheParams {
    /// DRAM budget in bytes (rounded to whole sets of 8 pages).
    pub bytes: u64,
    /// Reads of a page within one window that make it hot (1..=15).
    pub threshold: u32,
    /// The hotness window.
    pub window: Duration,
}

/// Highest admission level.
const MAX_LEVEL: u64 = 10;
/// Copies a window must have made before the copier judges whether they paid.
const MIN_COPIES: u64 = 32;

/// The hotness threshold and sampling shift of admission level `level` over the
/// configured threshold `base`: each level doubles the threshold up to 15 (the
/// counter's limit), then admits only one hot page in `2^shift`.
fn admission(base: u32, level: u64) -> (u32, u32) {
    let mut t = base.clamp(1, 15);
    let mut shift = 0u32;
    for _ in 0..level.min(MAX_LEVEL) {
        if t < 15 {
            t = (t * 2).min(15);
        } else {
            shift += 1;
        }
    }
    (t, shift)
}

/// Whether this thread admits this hot page at sampling shift `shift` (one in
/// `2^shift`).
fn sampled(shift: u32) -> bool {
    if shift == 0 {
        return true;
    }
    thread_local! {
        static N: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    N.with(|n| {
        let v = n.get().wrapping_add(1);
        n.set(v);
        v & ((1 << shift) - 1) == 0
    })
}

/// Which way of a full set a turned-away candidate ages: the calling thread's
/// next in turn.
fn hand() -> usize {
    thread_local! {
        static HAND: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }
    HAND.with(|h| {
        let v = h.get().wrapping_add(1);
        h.set(v);
        v
    })
}

/// The copier's admission control, once per window: a copy costs one PM read of
/// the page and a hit saves one, so copies pay for themselves when the window's
/// hits are at least its copies. Fewer (with enough copies to judge): admit less
/// (next level). The cache serving at least half the reads: admit more. (Uniform
/// reads over a file larger than the budget make every page "hot" at any fixed
/// threshold and copy pages that are evicted before they are read again: measured
/// 0.71× `pnova` at 2 threads before this. Their hits come from whichever pages are
/// cached, a quarter of the reads for a 4× file, so hits alone would not say that
/// more copies help.)
fn adapt(level: u64, hits: u64, misses: u64, copies: u64) -> u64 {
    if copies >= MIN_COPIES && hits < copies {
        (level + 1).min(MAX_LEVEL)
    } else if level > 0 && hits > 0 && hits >= misses {
        level - 1
    } else {
        level
    }
}

/// One thread's counts of one cache: written by that thread alone (a load and a
/// store, no locked instruction, on a line of its own), summed for the figures.
#[derive(Default)]
struct Counts {
    hits: AtomicU64,
    misses: AtomicU64,
    inserts: AtomicU64,
    copies: AtomicU64,
    evictions: AtomicU64,
    invalidations: AtomicU64,
    dropped: AtomicU64,
}

/// Adds `n` to a counter only the calling thread writes.
#[inline]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// Caches made in this process (each cache's id, for the threads' counter slots).
static CACHE_IDS: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The calling thread's counter slot of the cache it last counted for.
    static COUNTS: RefCell<(u64, Option<Arc<CachePadded<Counts>>>)> =
        const { RefCell::new((0, None)) };
}

/// The cache's shared half: the table, counters, the window clock.
pub(crate) struct Shared {
    pub table: Table<AtomicU64>,
    id: u64,
    /// Every thread's counter slot (a thread's stays after it ends).
    counts: parking_lot::Mutex<Vec<Arc<CachePadded<Counts>>>>,
    tick: CachePadded<AtomicU64>,
    /// Admission level (see [`admission`]): 0 admits every hot page; the copier
    /// raises it while copies do not pay for themselves and lowers it when they do.
    level: CachePadded<AtomicU64>,
    /// Jobs queued for the copier or about to be: a slot is reserved before an
    /// entry is claimed, so that a full queue turns the insert away before it
    /// evicts anything.
    queued: CachePadded<AtomicU64>,
    /// Set (for good) before the first entry is claimed: until then no entry can
    /// hold a block, and an invalidation — a probe of the block's set, a cache miss
    /// for each block a write or a free lets go — is skipped (a mount that never
    /// re-reads a page pays nothing for the cache). An invalidation that matters
    /// sees it: a claim is made under the page's shared range lock while its block
    /// is mapped, and the page's next change or free invalidates under the
    /// exclusive lock taken after (module doc).
    claimed: AtomicBool,
}

/// Sums of every thread's counts.
#[derive(Default)]
struct Totals {
    hits: u64,
    misses: u64,
    inserts: u64,
    copies: u64,
    evictions: u64,
    invalidations: u64,
    dropped: u64,
}

impl Shared {
    /// Runs `f` on the calling thread's counter slot of this cache.
    #[inline]
    fn count(&self, f: impl FnOnce(&Counts)) {
        let _ = COUNTS.try_with(|c| {
            let mut c = c.borrow_mut();
            if c.0 != self.id || c.1.is_none() {
                let slot = Arc::new(CachePadded::new(Counts::default()));
                self.counts.lock().push(slot.clone());
                *c = (self.id, Some(slot));
            }
            if let Some(slot) = &c.1 {
                f(slot);
            }
        });
    }

    fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for c in self.counts.lock().iter() {
            let l = |x: &AtomicU64| x.load(Ordering::Relaxed);
            t.hits += l(&c.hits);
            t.misses += l(&c.misses);
            t.inserts += l(&c.inserts);
            t.copies += l(&c.copies);
            t.evictions += l(&c.evictions);
            t.invalidations += l(&c.invalidations);
            t.dropped += l(&c.dropped);
        }
        t
    }

    /// Invalidates the cached copy of `block` (the data plane's invalidation point).
    #[inline]
    pub fn invalidate(&self, block: u64) {
        if !self.claimed.load(Ordering::Acquire) {
            return;
        }
        let n = self.table.invalidate(block);
        if n > 0 {
            self.count(|c| bump(&c.invalidations, u64::from(n)));
        }
    }
}

/// A copier job: fill `entry` (version `version`) with `block`, page `pg` of
/// `inode`.
struct Job {
    entry: usize,
    version: u64,
    block: u64,
    pg: u64,
    inode: Arc<Inode>,
}

/// Figures of the read cache (`FsStats`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ReadCacheStats {
    pub bytes: u64,
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    pub copies: u64,
    pub evictions: u64,
    pub invalidations: u64,
    pub dropped: u64,
    pub ready: u64,
}

/// The mount's read cache: the shared table, the copier thread and its queue.
pub(crate) struct ReadCache {
    pub shared: Arc<Shared>,
    tx: SyncSender<Job>,
    threshold: u32,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Jobs the copier may have queued; an insert finding the queue full is dropped.
const QUEUE: usize = 4096;

impl ReadCache {
    /// Starts an empty cache of `p.bytes` and its copier thread, which reads PM
    /// through `vol`.
    pub fn start(p: &ReadCacheParams, vol: Arc<Vol>) -> std::io::Result<ReadCache> {
        let pages = (p.bytes / BLOCK).max(WAYS as u64) as usize;
        let shared = Arc::new(Shared {
            table: Table::new(pages, BLOCK as usize),
            id: CACHE_IDS.fetch_add(1, Ordering::Relaxed),
            counts: parking_lot::Mutex::new(Vec::new()),
            tick: CachePadded::new(AtomicU64::new(0)),
            level: CachePadded::new(AtomicU64::new(0)),
            queued: CachePadded::new(AtomicU64::new(0)),
            claimed: AtomicBool::new(false),
        });
        let (tx, rx) = sync_channel(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        // The budget's DRAM, mapped in now: part of the mount's cost, not of the
        // first reads (a background fill competed with the readers for the CPU).
        shared.table.populate(&stop);
        let thread = {
            let (shared, stop) = (shared.clone(), stop.clone());
            let window = p.window.max(Duration::from_millis(1));
            std::thread::Builder::new()
                .name("mnemofs-rcache".into())
                .spawn(move || copier(&shared, &vol, &rx, &stop, window))?
        };
        Ok(ReadCache {
            shared,
            tx,
            threshold: p.threshold.clamp(1, 15),
            stop,
            thread: Some(thread),
        })
    }

    /// A hit: `dst` holds the bytes at `off` of `block`'s page from DRAM.
    #[inline]
    pub fn read(&self, block: u64, off: usize, dst: &mut [u8]) -> bool {
        let hit = self.shared.table.read(block, off, dst);
        self.shared.count(|c| {
            if hit {
                bump(&c.hits, 1);
            } else {
                bump(&c.misses, 1);
            }
        });
        hit
    }

    /// A miss of `block` (page `pg` of `inode`) was read from PM: counts it, and
    /// when the page is hot, claims an entry and fills it. `page`: the block's
    /// whole page as the reader just read it from PM (a whole-page read), which
    /// fills the entry at once, a DRAM copy instead of a second PM read; else a
    /// job is queued for the copier. The caller holds the page's shared range
    /// lock, and `block` maps the page.
    #[inline]
    pub fn missed(&self, inode: &Arc<Inode>, pg: u64, block: u64, page: Option<&[u8]>) {
        let sh = &*self.shared;
        let tick = sh.tick.load(Ordering::Relaxed);
        let (threshold, shift) = admission(self.threshold, sh.level.load(Ordering::Relaxed));
        // Sampled first: while the cache admits one hot page in 2^shift, most
        // misses skip the hotness table too.
        if !sampled(shift) || !hot(block, tick, threshold) {
            return;
        }
        if !sh.claimed.load(Ordering::Relaxed) {
            // Before the claim: see `Shared::claimed`.
            sh.claimed.store(true, Ordering::Release);
        }
        if let Some(page) = page.filter(|p| p.len() == BLOCK as usize) {
            let Ok(c) = sh.table.claim(block, hand()) else {
                return;
            };
            // The reader's shared range lock keeps the block's bytes as read (a
            // change invalidates under the exclusive lock, after we are out).
            let filled = sh.table.copy(c.entry, c.version, |p| {
                p.copy_from_slice(page);
                true
            });
            sh.count(|n| {
                bump(&n.inserts, 1);
                bump(&n.copies, u64::from(filled));
                bump(&n.evictions, u64::from(c.evicted));
            });
            return;
        }
        // A slot in the copier's queue first: a full queue turns the insert away
        // before it evicts anything.
        if sh.queued.fetch_add(1, Ordering::Relaxed) >= QUEUE as u64 {
            sh.queued.fetch_sub(1, Ordering::Relaxed);
            sh.count(|n| bump(&n.dropped, 1));
            return;
        }
        let Ok(c) = sh.table.claim(block, hand()) else {
            sh.queued.fetch_sub(1, Ordering::Relaxed);
            return;
        };
        let job = Job {
            entry: c.entry,
            version: c.version,
            block,
            pg,
            inode: inode.clone(),
        };
        match self.tx.try_send(job) {
            Ok(()) => sh.count(|n| {
                bump(&n.inserts, 1);
                bump(&n.evictions, u64::from(c.evicted));
            }),
            Err(TrySendError::Full(j) | TrySendError::Disconnected(j)) => {
                // (Full cannot happen: the slot was reserved.)
                sh.queued.fetch_sub(1, Ordering::Relaxed);
                sh.table.abort(j.entry, j.version);
                sh.count(|n| bump(&n.dropped, 1));
            }
        }
    }

    /// The cache's figures.
    pub fn stats(&self) -> ReadCacheStats {
        let s = &self.shared;
        let (census, _) = s.table.census();
        let t = s.totals();
        ReadCacheStats {
            bytes: (s.table.capacity() as u64) * BLOCK,
            hits: t.hits,
            misses: t.misses,
            inserts: t.inserts,
            copies: t.copies,
            evictions: t.evictions,
            invalidations: t.invalidations,
            dropped: t.dropped,
            ready: census[READY as usize] as u64,
        }
    }

    /// Stops the copier (unmount; also on drop).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ReadCache {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Polls of an empty queue (each after a short sleep) before the copier blocks on
/// it; while it polls, a reader that queues a job makes no system call.
const IDLE_POLLS: u32 = 16;
/// Sleep between polls: the most a queued page waits before it is copied while
/// jobs keep coming.
const POLL_SLEEP: Duration = Duration::from_millis(1);

/// The copier thread: fills queued entries, and advances the hotness window. While
/// jobs come it polls the queue (a reader's `try_send` then never has to wake it,
/// which would cost the reader a futex call); after `IDLE_POLLS` empty polls it
/// blocks until a job comes or the window ends.
fn copier(shared: &Shared, vol: &Vol, rx: &Receiver<Job>, stop: &AtomicBool, window: Duration) {
    let mut next_tick = Instant::now() + window;
    let mut idle = 0u32;
    let counts = || {
        let t = shared.totals();
        ((t.hits, t.misses), t.copies)
    };
    let (mut last_hits, mut last_misses, mut last_copies) = (0u64, 0u64, 0u64);
    while !stop.load(Ordering::Acquire) {
        let job = match rx.try_recv() {
            Ok(job) => Some(job),
            Err(TryRecvError::Disconnected) => break,
            Err(TryRecvError::Empty) if idle < IDLE_POLLS => {
                idle += 1;
                std::thread::sleep(POLL_SLEEP);
                None
            }
            Err(TryRecvError::Empty) => {
                let wait = next_tick
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(20));
                match rx.recv_timeout(wait) {
                    Ok(job) => Some(job),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
        };
        if let Some(job) = job {
            idle = 0;
            shared.queued.fetch_sub(1, Ordering::Relaxed);
            let ok = shared.table.copy(job.entry, job.version, |page| {
                let start = page_start(job.pg);
                // The page's shared range lock: no write changes the block while it
                // is copied, and the block is checked to still map the page.
                let _r = job.inode.data.read(start, start + BLOCK);
                if job.inode.index.dead() || job.inode.index.get(job.pg) != job.block {
                    return false;
                }
                vol.read(BlockNo(job.block).off(), page);
                true
            });
            if ok {
                shared.count(|c| bump(&c.copies, 1));
            }
        }
        let now = Instant::now();
        if now >= next_tick {
            shared.tick.fetch_add(1, Ordering::Relaxed);
            next_tick = now + window;
            let ((h, m), c) = counts();
            let level = shared.level.load(Ordering::Relaxed);
            let next = adapt(level, h - last_hits, m - last_misses, c - last_copies);
            if next != level {
                shared.level.store(next, Ordering::Relaxed);
            }
            (last_hits, last_misses, last_copies) = (h, m, c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_copy_hit_invalidate() {
        let t: Table<AtomicU64> = Table::new(16, 64);
        assert_eq!(t.capacity(), 16);
        let mut buf = [0u8; 8];
        assert!(!t.read(7, 0, &mut buf));
        let c = t.claim(7, 0).unwrap();
        assert_eq!(
            t.claim(7, 0).unwrap_err(),
            Refused::Present,
            "one entry per block"
        );
        assert!(!t.read(7, 0, &mut buf), "a Prep entry is not readable");
        assert!(t.copy(c.entry, c.version, |p| {
            p.fill(9);
            true
        }));
        assert!(t.read(7, 8, &mut buf));
        assert_eq!(buf, [9; 8]);
        assert_eq!(t.invalidate(7), 1);
        assert!(!t.read(7, 0, &mut buf));
        // A stale job does nothing.
        assert!(!t.copy(c.entry, c.version, |_| true));
        let (census, readers) = t.census();
        assert_eq!((census[INVALID as usize], readers), (16, 0));
    }

    #[test]
    fn an_invalidation_during_the_copy_wins() {
        let t: Table<AtomicU64> = Table::new(8, 64);
        let c = t.claim(3, 0).unwrap();
        assert!(!t.copy(c.entry, c.version, |_| {
            assert_eq!(t.invalidate(3), 1);
            true
        }));
        assert!(!t.read(3, 0, &mut [0u8; 4]));
    }

    #[test]
    fn a_full_set_admits_only_in_place_of_a_cold_page() {
        // One set: every key lands in it.
        let t: Table<AtomicU64> = Table::new(WAYS, 64);
        let fill = |k: u64, hand: usize| -> Result<Claim, Refused> {
            let c = t.claim(k, hand)?;
            assert!(t.copy(c.entry, c.version, |p| {
                p.fill(k as u8);
                true
            }));
            Ok(c)
        };
        for k in 0..WAYS as u64 {
            assert!(!fill(k, 0).unwrap().evicted);
        }
        // Every page fresh (frequency 1): a candidate is turned away and ages the
        // page at its hand to 0; the next candidate takes that page's place.
        assert_eq!(fill(100, 0).unwrap_err(), Refused::Full);
        let c = fill(100, 1).unwrap();
        assert!(c.evicted);
        assert_eq!(c.entry, 0, "the aged page was replaced");
        assert_eq!(t.census().0[READY as usize], WAYS, "the budget holds");
        // A page read between candidates keeps its place: key 1, read before every
        // round of aging, outlives a loop of candidates larger than the set
        // (scan resistance); the others are replaced.
        let mut b = [0u8; 1];
        let mut hand = 0;
        for k in 200..200 + 4 * WAYS as u64 {
            assert!(t.read(1, 0, &mut b), "a page read as often as aged stays");
            assert_eq!(b, [1]);
            while fill(k, hand) == Err(Refused::Full) {
                hand += 1;
                if hand % WAYS == 0 {
                    assert!(t.read(1, 0, &mut b));
                }
            }
        }
        assert!(t.read(1, 0, &mut b));
        assert!(!t.read(0, 0, &mut b), "an unread page was replaced");
        assert_eq!(t.census().0[READY as usize], WAYS, "the budget holds");
    }

    #[test]
    fn a_loop_over_twice_the_budget_keeps_the_pages_it_has() {
        // Pass after pass over 2 × WAYS keys of one set, each key read, and on a
        // miss offered for insertion: after the first pass the set keeps half the
        // keys and every later pass hits on them (an evict-on-every-miss policy
        // hits nothing: each page is evicted before its next read).
        let t: Table<AtomicU64> = Table::new(WAYS, 64);
        let mut b = [0u8; 1];
        let mut hits = 0;
        let mut hand = 0;
        for pass in 0..10 {
            for k in 0..2 * WAYS as u64 {
                if t.read(k, 0, &mut b) {
                    if pass > 0 {
                        hits += 1;
                    }
                } else if let Ok(c) = t.claim(k, hand) {
                    assert!(t.copy(c.entry, c.version, |_| true));
                }
                hand += 1;
            }
        }
        assert!(hits >= 9 * WAYS * 3 / 4, "{hits} hits in 9 passes");
    }

    #[test]
    fn admission_tightens_while_copies_do_not_pay() {
        assert_eq!(admission(2, 0), (2, 0));
        assert_eq!(admission(2, 1), (4, 0));
        assert_eq!(admission(2, 3), (15, 0));
        assert_eq!(admission(2, 5), (15, 2));
        // (level, hits, misses, copies): copies that do not pay raise the level.
        assert_eq!(adapt(0, 10, 300, 100), 1);
        assert_eq!(adapt(MAX_LEVEL, 0, 300, 100), MAX_LEVEL);
        // A quarter of the reads hit (uniform reads of a file 4× the budget), few
        // copies: stay.
        assert_eq!(adapt(5, 250, 750, 5), 5);
        // Most reads hit: admit more.
        assert_eq!(adapt(5, 900, 100, 5), 4);
        assert_eq!(adapt(0, 900, 100, 50), 0);
        assert_eq!(adapt(0, 0, 0, 0), 0);
        let admitted = (0..64).filter(|_| sampled(3)).count();
        assert_eq!(admitted, 8);
    }

    #[test]
    fn hotness_counts_within_a_window() {
        let b = 0xABCDEF;
        assert!(!hot(b, 5, 3));
        assert!(!hot(b, 5, 3));
        assert!(hot(b, 5, 3));
        // Starts over after a hit, and in a new window.
        assert!(!hot(b, 5, 3));
        assert!(!hot(b, 6, 3));
        assert!(!hot(b, 6, 3));
        assert!(hot(b, 6, 3));
        assert!(hot(b + 1, 0, 1));
        // A sequential pass over 16384 blocks, twice: every block is hot on the
        // second read (the table separates neighbouring blocks).
        let hot_ones = (0..2)
            .flat_map(|_| 1000..17384u64)
            .filter(|&b| hot(b, 9, 2))
            .count();
        assert!(hot_ones > 16384 * 9 / 10, "{hot_ones}");
    }
}

/// The protocol under shuttle (module `tests` for the plain cases): readers, a
/// writer that changes a block and invalidates it under the page's exclusive lock,
/// an inserter and the copier interleaved at every atomic step. A reader never sees
/// bytes other than the block's current ones; entries end `Invalid` or `Ready` with
/// no reader; the budget is the table's size.
#[cfg(test)]
mod model {
    use super::*;
    use shuttle::sync::atomic::AtomicU64 as SAtomic;
    use shuttle::sync::{Mutex, RwLock};

    struct ModelWord(SAtomic);

    impl Word for ModelWord {
        fn new(v: u64) -> Self {
            ModelWord(SAtomic::new(v))
        }
        fn load(&self, o: Ordering) -> u64 {
            self.0.load(o)
        }
        fn store(&self, v: u64, o: Ordering) {
            self.0.store(v, o)
        }
        fn cas(&self, cur: u64, new: u64) -> Result<u64, u64> {
            self.0
                .compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire)
        }
        fn pause() {
            shuttle::thread::yield_now();
        }
    }

    /// The "PM": per block, its current value (a page of 8 bytes holds it), behind
    /// the page's range lock.
    struct World {
        table: Table<ModelWord>,
        pm: Vec<RwLock<u64>>,
        jobs: Mutex<Vec<(usize, u64, usize)>>,
    }

    /// `fill`: a miss fills the entry itself from what it read (a whole-page read),
    /// else it queues a job for the copier.
    fn read(w: &World, b: usize, fill: bool) {
        let g = w.pm[b].read().unwrap();
        let mut buf = [0u8; 8];
        let v = if w.table.read(b as u64, 0, &mut buf) {
            u64::from_le_bytes(buf)
        } else {
            // A miss reads PM and inserts (hot at once in the model).
            let v = *g;
            shuttle::thread::yield_now();
            if let Ok(c) = w.table.claim(b as u64, b) {
                if fill {
                    w.table.copy(c.entry, c.version, |page| {
                        page[..8].copy_from_slice(&v.to_le_bytes());
                        shuttle::thread::yield_now();
                        true
                    });
                } else {
                    w.jobs.lock().unwrap().push((c.entry, c.version, b));
                }
            }
            v
        };
        assert_eq!(
            v, *g,
            "block {b}: a read returned bytes other than the block's"
        );
    }

    fn write(w: &World, b: usize) {
        let mut g = w.pm[b].write().unwrap();
        *g += 1;
        w.table.invalidate(b as u64);
    }

    fn copy_one(w: &World) {
        let job = w.jobs.lock().unwrap().pop();
        if let Some((entry, ver, b)) = job {
            w.table.copy(entry, ver, |page| {
                let g = w.pm[b].read().unwrap();
                page[..8].copy_from_slice(&g.to_le_bytes());
                shuttle::thread::yield_now();
                true
            });
        }
    }

    fn scenario(blocks: usize, ways_total: usize, reads: usize) {
        let w = Arc::new(World {
            table: Table::new(ways_total, 8),
            pm: (0..blocks).map(|_| RwLock::new(0)).collect(),
            jobs: Mutex::new(Vec::new()),
        });
        let mut hs = Vec::new();
        for r in 0..2 {
            let w = w.clone();
            hs.push(shuttle::thread::spawn(move || {
                for i in 0..reads {
                    read(&w, (r * 3 + i) % blocks, r == 1);
                }
            }));
        }
        {
            let w = w.clone();
            hs.push(shuttle::thread::spawn(move || {
                for i in 0..2 {
                    write(&w, i % blocks);
                }
            }));
        }
        {
            let w = w.clone();
            hs.push(shuttle::thread::spawn(move || {
                for _ in 0..reads + 1 {
                    copy_one(&w);
                    shuttle::thread::yield_now();
                }
            }));
        }
        for h in hs {
            h.join().unwrap();
        }
        // Quiescent: the queue drained, every block read again (hits now), the
        // jobs those reads queued drained too.
        for _ in 0..2 {
            while !w.jobs.lock().unwrap().is_empty() {
                copy_one(&w);
            }
            for b in 0..blocks {
                read(&w, b, b % 2 == 0);
            }
        }
        while !w.jobs.lock().unwrap().is_empty() {
            copy_one(&w);
        }
        let (census, readers) = w.table.census();
        assert_eq!(readers, 0, "a reader count leaked");
        assert_eq!(
            census[IN_USE as usize] + census[PREP as usize] + census[COPY as usize],
            0,
            "an entry is stuck: {census:?}"
        );
        assert_eq!(census.iter().sum::<usize>(), w.table.capacity());
    }

    fn check(f: impl Fn() + Send + Sync + 'static + Clone) {
        use shuttle::scheduler::{PctScheduler, RandomScheduler};
        let mut c = shuttle::Config::new();
        c.max_steps = shuttle::MaxSteps::FailAfter(200_000);
        shuttle::Runner::new(RandomScheduler::new_from_seed(0x5eed, 2000), c.clone())
            .run(f.clone());
        shuttle::Runner::new(PctScheduler::new_from_seed(0x5eed, 3, 2000), c).run(f);
    }

    #[test]
    fn readers_writer_and_copier_interleaved() {
        check(|| scenario(2, WAYS, 3));
    }

    #[test]
    fn evictions_under_a_full_set() {
        // More blocks than entries (one set): claims evict Ready pages.
        check(|| scenario(WAYS + 3, WAYS, WAYS));
    }
}
