//! The kernel page cache as the mount's DRAM tier for reads (DESIGN.md §5), kept
//! coherent with direct-I/O writes.
//!
//! A file opened read-only gets a handle without `FOPEN_DIRECT_IO` and with
//! `FOPEN_KEEP_CACHE`: the kernel serves its reads from the page cache and asks the
//! daemon only for pages it does not hold (readahead). Writable handles stay direct
//! I/O: writes reach the engine synchronously, durable on return, in parallel.
//!
//! Coherence: every page the kernel caches came through a READ of a page-cache
//! handle, and each such READ first marks its inode ([`PageCacheTracker::filled`]).
//! A write (or size change, fallocate) that finds the mark, after the engine has
//! changed the data, has the kernel drop *every* cached page of the file
//! (`FUSE_NOTIFY_INVAL_INODE` from offset 0) before the write is answered. The
//! invalidation thread clears the mark as it starts, after setting a second bit,
//! *pending*, which it clears when the kernel has dropped the pages; a write that
//! finds either bit waits for an invalidation that starts after it. So an inode with
//! neither bit has no cached page at all, and after a write returns no page of the
//! file holds bytes from before it: a page cached before the write was dropped, and
//! a READ that raced with the write either read after the engine's change (new
//! bytes) or before it, in which case it had marked the inode first and the write
//! saw the mark. (Dropping only the written range would leave other pages of the
//! same READ cached while the mark says none are: the parallel-writers test caught
//! exactly that.) Marks are bits of fixed tables indexed by inode number (a shared
//! bit only costs a needless invalidation), so a write looks at two words and
//! nothing else when no page-cache reader exists.
//!
//! The kernel, inside an invalidation, waits for what only a daemon thread can
//! finish: READs of the same pages still in flight, and the write-back of dirty
//! pages of a shared writable mapping (`fuse_launder_folio` sends each as a WRITE
//! and waits for its answer). So no request thread ever sends an invalidation: they
//! run on a thread of their own (`mnemofs-inval`), and a request thread never waits
//! for anything that thread does without a bound:
//!
//! - a writer hands its inode to the thread through an unbounded set (an inode
//!   already waiting is not queued twice: its invalidation has not started, so it
//!   covers the new write too) and waits for the invalidation at most
//!   [`INVAL_WAIT`]; the bound is reached when the invalidation itself waits on
//!   requests (then the writer is answered first, and the invalidation completes
//!   right after) or behind a long queue (counted: [`PageCacheTracker::timeouts`]);
//! - a WRITE the kernel sends from its page cache (`FUSE_WRITE_CACHE`: write-back of
//!   a mapped or cached page) invalidates nothing (the cached page is the written
//!   data), so write-back, which an invalidation may wait for, never waits for one.
//!
//! Before this, writers queued on a bounded channel: with the invalidation thread
//! waiting in the kernel for a mapped page's write-back, the channel filled, every
//! request thread blocked sending, nobody answered the write-back, and the mount
//! wedged for good (docs/ARCHITECTURE.md, "Page cache and invalidation").

use fuser::{INodeNo, Notifier};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Bits of the mark table (inode numbers hash onto them).
const MARK_BITS: usize = 1 << 20;

/// The longest a writer waits for its invalidation (see the module doc).
pub const INVAL_WAIT: Duration = Duration::from_millis(200);

/// Inodes waiting for their invalidation, in order, each once, with the sequence
/// number of its turn; and how far the thread has come.
#[derive(Default)]
struct Queue {
    order: VecDeque<u64>,
    turn: HashMap<u64, u64>,
    /// Sequence number of the next inode queued.
    next: u64,
    /// Every turn below this one is done.
    done: u64,
    /// The invalidation thread runs.
    started: bool,
    /// The tracker is gone: the thread ends.
    shutdown: bool,
}

struct Shared {
    /// Set by a page-cache READ of the inode (hashed), cleared by the invalidation
    /// thread as it starts dropping the inode's pages.
    marks: Box<[AtomicU64]>,
    /// Set while the invalidation thread drops the inode's pages (hashed): a write
    /// that finds it must wait for a later invalidation, since this one may have
    /// passed a page already.
    pending: Box<[AtomicU64]>,
    q: Mutex<Queue>,
    /// The inode the invalidation thread is invalidating, and since when.
    busy: Mutex<Option<(u64, Instant)>>,
    /// Signalled when an inode is queued (the thread waits on it) and when an
    /// invalidation is done (writers wait on it).
    cv: Condvar,
}

/// Marks of page-cache reads and the invalidation thread.
pub struct PageCacheTracker {
    notifier: OnceLock<Notifier>,
    shared: Arc<Shared>,
    invalidations: AtomicU64,
    /// Writers that stopped waiting at [`INVAL_WAIT`].
    timeouts: AtomicU64,
}

impl std::fmt::Debug for PageCacheTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageCacheTracker")
            .field("invalidations", &self.invalidations.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Default for PageCacheTracker {
    fn default() -> Self {
        let table = || (0..MARK_BITS / 64).map(|_| AtomicU64::new(0)).collect();
        PageCacheTracker {
            notifier: OnceLock::new(),
            shared: Arc::new(Shared {
                marks: table(),
                pending: table(),
                q: Mutex::default(),
                busy: Mutex::default(),
                cv: Condvar::new(),
            }),
            invalidations: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
        }
    }
}

fn slot(ino: u64) -> (usize, u64) {
    let h = (ino.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 44) as usize % MARK_BITS;
    (h / 64, 1 << (h % 64))
}

impl Drop for PageCacheTracker {
    fn drop(&mut self) {
        // The session is over: the invalidation thread ends (with its notifier).
        let mut q = self.shared.q.lock().unwrap_or_else(|e| e.into_inner());
        q.shutdown = true;
        self.shared.cv.notify_all();
    }
}

impl PageCacheTracker {
    /// The session's notifier (set once the session exists; until then, and on a
    /// kernel without notifications, no page-cache handle is handed out).
    pub fn set_notifier(&self, n: Notifier) {
        let _ = self.notifier.set(n);
    }

    /// Whether page-cache handles may be handed out (invalidation is possible).
    pub fn ready(&self) -> bool {
        self.notifier.get().is_some()
    }

    /// A READ of a page-cache handle of `ino` is about to read the engine.
    #[inline]
    pub fn filled(&self, ino: u64) {
        let (w, b) = slot(ino);
        // SeqCst: ordered before the engine read that follows, against the
        // writer's SeqCst load after its engine write (module doc).
        let marks = &self.shared.marks;
        if marks[w].load(Ordering::Relaxed) & b == 0 {
            marks[w].fetch_or(b, Ordering::SeqCst);
        } else {
            std::sync::atomic::fence(Ordering::SeqCst);
        }
    }

    /// `ino`'s bytes changed in the engine: if a page-cache read may have cached any
    /// page of the file, drops them all. Returns when the kernel has dropped them
    /// (or after [`INVAL_WAIT`]). The mark stays set until the invalidation thread
    /// starts on the inode, and a write that finds an invalidation under way waits
    /// for the next one: so no write returns while a page cached before it may
    /// still be there (unless the wait is cut at the bound).
    #[inline]
    pub fn changed(&self, ino: u64) {
        let (w, b) = slot(ino);
        let sh = &self.shared;
        if sh.marks[w].load(Ordering::SeqCst) & b == 0
            && sh.pending[w].load(Ordering::SeqCst) & b == 0
        {
            return;
        }
        self.invalidate(ino);
    }

    /// Has the kernel drop every cached page of `ino`, on the invalidation thread;
    /// waits for it at most [`INVAL_WAIT`].
    fn invalidate(&self, ino: u64) {
        let Some(notifier) = self.notifier.get() else {
            return;
        };
        let sh = &self.shared;
        let mut q = sh.q.lock().unwrap_or_else(|e| e.into_inner());
        if !q.started {
            let n = notifier.clone();
            let shared = sh.clone();
            let spawned = std::thread::Builder::new()
                .name("mnemofs-inval".into())
                .spawn(move || invalidator(&n, &shared));
            if spawned.is_err() {
                // No thread (never invalidate on a request thread): the mark stays,
                // and the next write tries again.
                return;
            }
            q.started = true;
        }
        let mine = match q.turn.get(&ino) {
            // Queued and not started: its invalidation covers this write too.
            Some(&t) => t,
            None => {
                let t = q.next;
                q.next += 1;
                q.turn.insert(ino, t);
                q.order.push_back(ino);
                self.invalidations.fetch_add(1, Ordering::Relaxed);
                sh.cv.notify_all();
                t
            }
        };
        let deadline = Instant::now() + INVAL_WAIT;
        while q.done <= mine {
            let now = Instant::now();
            if now >= deadline {
                self.timeouts.fetch_add(1, Ordering::Relaxed);
                return;
            }
            q = sh
                .cv
                .wait_timeout(q, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Has the kernel drop its cached attributes of `ino` (not its pages: nothing
    /// in that waits for a request, so any thread may send it). For changes the
    /// kernel does not expect from a request, e.g. set-id bits a write cleared.
    pub fn attributes_changed(&self, ino: u64) {
        if let Some(n) = self.notifier.get() {
            // A negative offset: attributes only (the kernel's
            // fuse_reverse_inval_inode). ENOENT: the kernel has no such inode.
            let _ = n.inval_inode(INodeNo(ino), -1, 0);
        }
    }

    /// What the invalidation thread is doing, in words (the watchdog's report).
    pub fn describe(&self) -> String {
        let busy = *self.shared.busy.lock().unwrap_or_else(|e| e.into_inner());
        let queued = self.shared.q.lock().map_or(0, |q| q.order.len());
        let now = match busy {
            Some((ino, t)) => format!(
                "invalidating inode {ino} for {} ms (the kernel may be waiting for a \
                 write-back WRITE of a mapped page)",
                t.elapsed().as_millis()
            ),
            None => "idle".into(),
        };
        format!(
            "page-cache invalidation thread: {now}; {queued} queued, {} queued in all, {} writers \
             stopped waiting at {} ms",
            self.invalidations(),
            self.timeouts(),
            INVAL_WAIT.as_millis()
        )
    }

    /// Writers that stopped waiting for their invalidation at [`INVAL_WAIT`].
    pub fn timeouts(&self) -> u64 {
        self.timeouts.load(Ordering::Relaxed)
    }

    /// Invalidations sent so far.
    pub fn invalidations(&self) -> u64 {
        self.invalidations.load(Ordering::Relaxed)
    }
}

/// The invalidation thread: takes the queue's inodes in order; each turn is done
/// once the kernel has dropped the inode's pages.
fn invalidator(n: &Notifier, sh: &Shared) {
    let mut q = sh.q.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let Some(ino) = q.order.pop_front() else {
            if q.shutdown {
                return;
            }
            q = sh.cv.wait(q).unwrap_or_else(|e| e.into_inner());
            continue;
        };
        // Out of the set before it starts: a write from now on queues anew.
        let Some(turn) = q.turn.remove(&ino) else {
            continue;
        };
        drop(q);
        // Pending before the mark is cleared: a write finding neither set comes
        // after this invalidation has dropped the pages (module doc).
        let (w, b) = slot(ino);
        sh.pending[w].fetch_or(b, Ordering::SeqCst);
        sh.marks[w].fetch_and(!b, Ordering::SeqCst);
        // May wait in the kernel for READs and write-back WRITEs, which request
        // threads answer (none of them waits on this without a bound). ENOENT: the
        // kernel no longer has the inode (nothing cached).
        *sh.busy.lock().unwrap_or_else(|e| e.into_inner()) = Some((ino, Instant::now()));
        let _ = n.inval_inode(INodeNo(ino), 0, 0);
        *sh.busy.lock().unwrap_or_else(|e| e.into_inner()) = None;
        sh.pending[w].fetch_and(!b, Ordering::SeqCst);
        q = sh.q.lock().unwrap_or_else(|e| e.into_inner());
        q.done = q.done.max(turn + 1);
        sh.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_without_a_page_cache_read_costs_two_loads() {
        let t = PageCacheTracker::default();
        // No notifier: nothing is sent, marks still work.
        t.changed(5);
        assert_eq!(t.invalidations(), 0);
        t.filled(5);
        let (w, b) = slot(5);
        assert_ne!(t.shared.marks[w].load(Ordering::Relaxed) & b, 0);
        t.changed(5);
        assert_ne!(
            t.shared.marks[w].load(Ordering::Relaxed) & b,
            0,
            "without an invalidation thread the mark stays: the pages may be cached"
        );
        assert_eq!(t.invalidations(), 0);
    }
}
