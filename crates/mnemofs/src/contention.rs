//! Contention counters: what makes a shared-file write scale or not, counted
//! exactly, so that a scalability regression shows on any machine, two cores
//! included (docs/ARCHITECTURE.md, "Contention counters").
//!
//! Three counts, per thread:
//! - **lock**: acquisitions of a per-file lock on the data path (the inode's state
//!   lock, the `interval` range lock's mutex);
//! - **wait**: of those, acquisitions that found the lock taken (the thread spun or
//!   slept);
//! - **rmw**: atomic read-modify-writes on lines other threads write too (the
//!   allocator's shared counters and range locks, a file's writer counters, the
//!   combining queue of a shared file).
//!
//! Each thread counts in a cache-padded slot of its own, with plain loads and stores
//! (one writer per slot: no locked instruction, no shared line); a snapshot sums
//! the slots of every thread that ever counted. The counts are per process: the
//! benchmark divides the change over a run by its operations, tests read the
//! calling thread's own slot.

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Counts of one thread, or summed over threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Contention {
    /// Per-file lock acquisitions.
    pub locks: u64,
    /// Of those, the ones that found the lock taken.
    pub waits: u64,
    /// Atomic read-modify-writes on lines shared between threads.
    pub rmws: u64,
}

impl Contention {
    /// The counts since `earlier`.
    pub fn since(&self, earlier: &Contention) -> Contention {
        Contention {
            locks: self.locks.saturating_sub(earlier.locks),
            waits: self.waits.saturating_sub(earlier.waits),
            rmws: self.rmws.saturating_sub(earlier.rmws),
        }
    }
}

#[derive(Default)]
struct Slot {
    locks: AtomicU64,
    waits: AtomicU64,
    rmws: AtomicU64,
}

impl Slot {
    fn load(&self) -> Contention {
        Contention {
            locks: self.locks.load(Ordering::Relaxed),
            waits: self.waits.load(Ordering::Relaxed),
            rmws: self.rmws.load(Ordering::Relaxed),
        }
    }
}

/// Every thread's slot (a thread's stays after it ends: the totals only grow).
static SLOTS: Mutex<Vec<Arc<CachePadded<Slot>>>> = Mutex::new(Vec::new());

thread_local! {
    static MINE: Arc<CachePadded<Slot>> = {
        let s = Arc::new(CachePadded::new(Slot::default()));
        SLOTS.lock().push(s.clone());
        s
    };
}

/// Adds `n` to one of the calling thread's counters: a load and a store (the slot
/// has one writer).
#[inline]
fn bump(pick: impl Fn(&Slot) -> &AtomicU64, n: u64) {
    // (A thread being torn down counts nothing.)
    let _ = MINE.try_with(|s| {
        let c = pick(s);
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    });
}

/// A per-file lock was taken; `waited`: it was held by another thread first.
#[inline]
pub(crate) fn lock(waited: bool) {
    bump(|s| &s.locks, 1);
    if waited {
        bump(|s| &s.waits, 1);
    }
}

/// `n` atomic read-modify-writes on lines other threads write too.
#[inline]
pub(crate) fn rmw(n: u64) {
    bump(|s| &s.rmws, n);
}

/// The calling thread's counts so far.
pub fn this_thread() -> Contention {
    MINE.try_with(|s| s.load()).unwrap_or_default()
}

/// Every thread's counts so far, summed.
pub fn snapshot() -> Contention {
    let slots = SLOTS.lock();
    let mut t = Contention::default();
    for s in slots.iter() {
        let c = s.load();
        t.locks += c.locks;
        t.waits += c.waits;
        t.rmws += c.rmws;
    }
    t
}

/// Takes `m`, counting the acquisition and whether it had to wait.
#[inline]
pub(crate) fn take<T>(m: &parking_lot::Mutex<T>) -> parking_lot::MutexGuard<'_, T> {
    match m.try_lock() {
        Some(g) => {
            lock(false);
            g
        }
        None => {
            lock(true);
            m.lock()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_per_thread_and_summed() {
        let before = this_thread();
        let all_before = snapshot();
        lock(false);
        lock(true);
        rmw(3);
        let mine = this_thread().since(&before);
        assert_eq!(
            mine,
            Contention {
                locks: 2,
                waits: 1,
                rmws: 3
            }
        );
        let other = std::thread::spawn(|| {
            let b = this_thread();
            rmw(5);
            this_thread().since(&b)
        })
        .join()
        .unwrap();
        assert_eq!(other.rmws, 5);
        // Other tests may count meanwhile: at least ours.
        let all = snapshot().since(&all_before);
        assert!(all.rmws >= 8 && all.locks >= 2 && all.waits >= 1);
    }

    #[test]
    fn take_counts_a_wait_only_when_the_lock_is_held() {
        let m = parking_lot::Mutex::new(0u32);
        let b = this_thread();
        drop(take(&m));
        assert_eq!(
            this_thread().since(&b),
            Contention {
                locks: 1,
                waits: 0,
                rmws: 0
            }
        );
        let g = m.lock();
        let t = std::thread::scope(|sc| {
            let h = sc.spawn(|| {
                let b = this_thread();
                drop(take(&m));
                this_thread().since(&b)
            });
            std::thread::sleep(std::time::Duration::from_millis(20));
            drop(g);
            h.join().unwrap()
        });
        assert_eq!(
            t,
            Contention {
                locks: 1,
                waits: 1,
                rmws: 0
            }
        );
    }
}
