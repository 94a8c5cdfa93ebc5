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
//! changed the data, clears it and has the kernel drop *every* cached page of the
//! file (`FUSE_NOTIFY_INVAL_INODE` from offset 0) before the write is answered. So
//! an unmarked inode has no cached page at all, and after a write returns no page of
//! the file holds bytes from before it: a page cached before the write was dropped,
//! and a READ that raced with the write either read after the engine's change (new
//! bytes) or before it, in which case it had marked the inode first and the write
//! saw the mark. (Dropping only the written range would leave other pages of the
//! same READ cached while the mark says none are: the parallel-writers test caught
//! exactly that.) Marks are bits of a fixed table indexed by
//! inode number (a shared bit only costs a needless invalidation), so a write looks
//! at one word and nothing else when no page-cache reader exists.
//!
//! The kernel waits, inside an invalidation, for reads of the same pages still in
//! flight, which a daemon thread must answer. So that a burst of invalidations can
//! never hold every daemon thread, they run on one thread of their own and a
//! writer waits for its invalidation at most [`INVAL_WAIT`]; that bound is reached
//! only when every daemon thread is waiting this way (then the writes are answered
//! and their invalidations complete right after; the mount never deadlocks).

use fuser::{INodeNo, Notifier};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Bits of the mark table (inode numbers hash onto them).
const MARK_BITS: usize = 1 << 20;

/// The longest a writer waits for its invalidation (see the module doc).
pub const INVAL_WAIT: Duration = Duration::from_millis(200);

/// One invalidation and the writer waiting for it.
struct Inval {
    ino: u64,
    offset: i64,
    len: i64,
    done: SyncSender<()>,
}

/// Marks of page-cache reads and the invalidation thread.
pub struct PageCacheTracker {
    marks: Box<[AtomicU64]>,
    notifier: OnceLock<Notifier>,
    tx: Mutex<Option<SyncSender<Inval>>>,
    invalidations: AtomicU64,
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
        PageCacheTracker {
            marks: (0..MARK_BITS / 64).map(|_| AtomicU64::new(0)).collect(),
            notifier: OnceLock::new(),
            tx: Mutex::new(None),
            invalidations: AtomicU64::new(0),
        }
    }
}

fn slot(ino: u64) -> (usize, u64) {
    let h = (ino.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 44) as usize % MARK_BITS;
    (h / 64, 1 << (h % 64))
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
        if self.marks[w].load(Ordering::Relaxed) & b == 0 {
            self.marks[w].fetch_or(b, Ordering::SeqCst);
        } else {
            std::sync::atomic::fence(Ordering::SeqCst);
        }
    }

    /// `ino`'s bytes changed in the engine: if a page-cache read may have cached any
    /// page of the file, drops them all. Returns when the kernel has dropped them
    /// (or after [`INVAL_WAIT`]).
    #[inline]
    pub fn changed(&self, ino: u64) {
        let (w, b) = slot(ino);
        if self.marks[w].load(Ordering::SeqCst) & b == 0 {
            return;
        }
        self.marks[w].fetch_and(!b, Ordering::SeqCst);
        self.invalidate(ino, 0, 0);
    }

    fn invalidate(&self, ino: u64, offset: u64, len: u64) {
        let Some(notifier) = self.notifier.get() else {
            return;
        };
        let tx = {
            let mut g = self.tx.lock().unwrap_or_else(|e| e.into_inner());
            if g.is_none() {
                let (tx, rx) = sync_channel::<Inval>(64);
                let n = notifier.clone();
                let spawned = std::thread::Builder::new()
                    .name("mnemofs-inval".into())
                    .spawn(move || invalidator(&n, &rx));
                if spawned.is_err() {
                    // No thread: invalidate on this one.
                    drop(g);
                    let _ = notifier.inval_inode(INodeNo(ino), to_i64(offset), to_i64(len));
                    return;
                }
                *g = Some(tx);
            }
            g.as_ref().cloned()
        };
        let Some(tx) = tx else { return };
        let (done, wait) = sync_channel(1);
        let job = Inval {
            ino,
            offset: to_i64(offset),
            len: to_i64(len),
            done,
        };
        if tx.send(job).is_ok() {
            self.invalidations.fetch_add(1, Ordering::Relaxed);
            let _ = wait.recv_timeout(INVAL_WAIT);
        }
    }

    /// Invalidations sent so far.
    pub fn invalidations(&self) -> u64 {
        self.invalidations.load(Ordering::Relaxed)
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn invalidator(n: &Notifier, rx: &Receiver<Inval>) {
    while let Ok(j) = rx.recv() {
        // ENOENT: the kernel no longer has the inode (nothing cached).
        let _ = n.inval_inode(INodeNo(j.ino), j.offset, j.len);
        let _ = j.done.try_send(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_without_a_page_cache_read_costs_one_load() {
        let t = PageCacheTracker::default();
        // No notifier: nothing is sent, marks still work.
        t.changed(5);
        assert_eq!(t.invalidations(), 0);
        t.filled(5);
        let (w, b) = slot(5);
        assert_ne!(t.marks[w].load(Ordering::Relaxed) & b, 0);
        t.changed(5);
        assert_eq!(
            t.marks[w].load(Ordering::Relaxed) & b,
            0,
            "a write clears the mark"
        );
    }
}
