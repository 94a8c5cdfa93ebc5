//! The sub-zones' lock: a spin lock whose release is a plain store.
//!
//! Why not `parking_lot::Mutex`: its release is a locked `cmpxchg`, and on x86 a
//! locked instruction waits until every earlier non-temporal store of the thread has
//! drained to memory. A LAWN write issues the non-temporal stores of its slices
//! inside its sub-zone section, right after deciding where they go, so that they
//! drain while the section's bookkeeping runs; a locked release would wait for them
//! there (measured: 15 % slower). A release by a plain `mov` (x86
//! TSO: a store is not reordered with earlier loads and stores) does not wait, and
//! the fence after the section still orders the slices before the descriptor.
//!
//! Sections are short (a hash lookup and a few updates, or a write-back batch's
//! selection); a waiter spins on a plain load, then yields the processor.

use parking_lot::lock_api::{GuardSend, RawMutex};
use std::sync::atomic::{AtomicBool, Ordering};

/// Spins of a waiter before it starts yielding.
const SPINS: u32 = 200;

/// The flag a spin lock runs on: std's [`AtomicBool`], or a model checker's.
pub(crate) trait Flag {
    fn load(&self, o: Ordering) -> bool;
    fn swap(&self, v: bool, o: Ordering) -> bool;
    fn store(&self, v: bool, o: Ordering);
    /// Waits before the next look; `step` counts the looks so far.
    fn pause(step: u32);
}

impl Flag for AtomicBool {
    fn load(&self, o: Ordering) -> bool {
        AtomicBool::load(self, o)
    }
    fn swap(&self, v: bool, o: Ordering) -> bool {
        AtomicBool::swap(self, v, o)
    }
    fn store(&self, v: bool, o: Ordering) {
        AtomicBool::store(self, v, o)
    }
    fn pause(step: u32) {
        if step < SPINS {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// One attempt to take the lock held in `f` (true: taken).
pub(crate) fn try_lock<F: Flag>(f: &F) -> bool {
    // Look before swapping: a waiter's plain loads keep the line shared.
    !f.load(Ordering::Relaxed) && !f.swap(true, Ordering::Acquire)
}

/// Takes the lock held in `f`, waiting as long as it takes.
pub(crate) fn lock<F: Flag>(f: &F) {
    let mut step = 0u32;
    while !try_lock(f) {
        while f.load(Ordering::Relaxed) {
            F::pause(step);
            step = step.saturating_add(1);
        }
    }
}

/// Releases the lock held in `f`: a plain store.
pub(crate) fn unlock<F: Flag>(f: &F) {
    f.store(false, Ordering::Release);
}

/// The raw lock of [`SpinMutex`].
pub(crate) struct RawSpin(AtomicBool);

// SAFETY: `lock` returns only after this thread swapped the flag from false to true
// (Acquire), and `unlock` stores false (Release): one holder at a time, and each
// holder sees the writes of the one before.
unsafe impl RawMutex for RawSpin {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawSpin = RawSpin(AtomicBool::new(false));
    type GuardMarker = GuardSend;

    fn lock(&self) {
        lock(&self.0);
    }

    fn try_lock(&self) -> bool {
        try_lock(&self.0)
    }

    unsafe fn unlock(&self) {
        unlock(&self.0);
    }
}

/// A mutex on [`RawSpin`] (the `lock_api` guard and API).
pub(crate) type SpinMutex<T> = parking_lot::lock_api::Mutex<RawSpin, T>;

/// The lock under shuttle: every schedule keeps one holder at a time, and no update
/// made under the lock is lost.
#[cfg(test)]
mod model {
    use super::*;
    use crate::lock::segment_model::check;
    use shuttle::sync::atomic::{AtomicBool as SAtomicBool, AtomicU32};
    use shuttle::sync::Arc;
    use shuttle::thread;

    struct ModelFlag(SAtomicBool);

    impl Flag for ModelFlag {
        fn load(&self, o: Ordering) -> bool {
            self.0.load(o)
        }
        fn swap(&self, v: bool, o: Ordering) -> bool {
            self.0.swap(v, o)
        }
        fn store(&self, v: bool, o: Ordering) {
            self.0.store(v, o)
        }
        fn pause(_step: u32) {
            thread::yield_now();
        }
    }

    #[test]
    fn one_holder_at_a_time_and_no_lost_update() {
        check(
            || {
                let flag = Arc::new(ModelFlag(SAtomicBool::new(false)));
                let inside = Arc::new(AtomicU32::new(0));
                let count = Arc::new(AtomicU32::new(0));
                let hs: Vec<_> = (0..3)
                    .map(|_| {
                        let (flag, inside, count) = (flag.clone(), inside.clone(), count.clone());
                        thread::spawn(move || {
                            for _ in 0..2 {
                                lock(&*flag);
                                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                                // A read-modify-write in two steps: lost if two
                                // threads were inside at once.
                                let c = count.load(Ordering::SeqCst);
                                thread::yield_now();
                                count.store(c + 1, Ordering::SeqCst);
                                inside.fetch_sub(1, Ordering::SeqCst);
                                unlock(&*flag);
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
                assert_eq!(count.load(Ordering::SeqCst), 6);
            },
            2000,
        );
    }

    #[test]
    fn the_model_catches_a_lock_that_does_not_exclude() {
        // A "lock" that only looks (no swap) lets two threads in: the same check
        // must fail, or it could not catch anything.
        let r = std::panic::catch_unwind(|| {
            check(
                || {
                    let flag = Arc::new(ModelFlag(SAtomicBool::new(false)));
                    let inside = Arc::new(AtomicU32::new(0));
                    let hs: Vec<_> = (0..2)
                        .map(|_| {
                            let (flag, inside) = (flag.clone(), inside.clone());
                            thread::spawn(move || {
                                while flag.load(Ordering::SeqCst) {
                                    thread::yield_now();
                                }
                                thread::yield_now();
                                flag.store(true, Ordering::SeqCst);
                                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                                inside.fetch_sub(1, Ordering::SeqCst);
                                unlock(&*flag);
                            })
                        })
                        .collect();
                    for h in hs {
                        h.join().unwrap();
                    }
                },
                200,
            )
        });
        assert!(r.is_err());
    }
}
