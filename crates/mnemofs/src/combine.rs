//! Flat combining for a lock whose sections are short and taken by many threads at
//! once (a shared file's state lock, taken by every concurrent writer of the file):
//! instead of each thread taking the lock in turn — the lock's line and every line
//! the section touches crossing cores at each handover, a waiter spinning or parked
//! behind barging threads — each thread publishes its request on a lock-free stack
//! and one thread, the *combiner*, takes the lock once and serves every request
//! queued, in the order they were queued, while the others wait on their own request.
//!
//! Per request: one compare-and-swap on the stack's head (the shared line), and,
//! for the combiner only, one lock acquisition for a whole batch. A waiter spins on a
//! flag in its own request (its stack frame: no shared line), and after a bound takes
//! the lock itself (sleeping in the lock's queue), so a combiner descheduled on a
//! machine with fewer cores than writers never leaves the others spinning; holding
//! the lock, it serves what is queued, its own request included if nobody did.
//!
//! The combiner serves requests with its own `serve` closure: every request of a
//! queue must mean the same to every caller (the queue's type says what they are).
//!
//! The implementation is written once over the atomics it uses
//! (`combine_impl.rs`): built here on the standard ones, and in the tests on
//! shuttle's, whose scheduler explores the interleavings.

mod imp {
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr};

    /// A spin-wait step.
    #[inline]
    pub(crate) fn pause() {
        std::hint::spin_loop();
    }

    /// Spins before a waiter takes the lock itself: about 2 µs, several batches of
    /// a few hundred nanoseconds each.
    pub(crate) const SPINS: u32 = 4096;

    include!("combine_impl.rs");
}

pub(crate) use imp::Queue;

#[cfg(test)]
mod model {
    pub(crate) use shuttle::sync::atomic::{AtomicBool, AtomicPtr};

    pub(crate) fn pause() {
        shuttle::thread::yield_now();
    }

    pub(crate) const SPINS: u32 = 3;

    include!("combine_impl.rs");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// Every request is served exactly once, with the state it saw, and each
    /// thread's requests in its order.
    #[test]
    fn threads_get_their_own_answers() {
        let q = Arc::new(Queue::<u64, (u64, u64)>::new());
        let m = Arc::new(parking_lot::Mutex::new(Vec::<u64>::new()));
        let served = Arc::new(AtomicU64::new(0));
        let hs: Vec<_> = (0..4)
            .map(|t| {
                let (q, m, served) = (q.clone(), m.clone(), served.clone());
                std::thread::spawn(move || {
                    for i in 0..2000u64 {
                        let req = t * 1_000_000 + i;
                        let (echo, pos) = q.run(
                            req,
                            || m.try_lock(),
                            || m.lock(),
                            |log: &mut Vec<u64>, r: &u64| {
                                served.fetch_add(1, Ordering::Relaxed);
                                log.push(*r);
                                (*r, log.len() as u64 - 1)
                            },
                        );
                        assert_eq!(echo, req);
                        assert_eq!(m.lock()[pos as usize], req);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(served.load(Ordering::Relaxed), 8000);
        let log = m.lock();
        for t in 0..4u64 {
            let mine: Vec<u64> = log.iter().copied().filter(|r| r / 1_000_000 == t).collect();
            assert_eq!(
                mine,
                (0..2000).map(|i| t * 1_000_000 + i).collect::<Vec<_>>()
            );
        }
    }

    /// Under shuttle: every schedule serves each request once, answers each thread
    /// with its own result, and finishes (a lost request would leave its thread
    /// spinning past the step bound).
    #[test]
    fn model_every_schedule_serves_each_request_once() {
        use shuttle::sync::{Arc, Mutex};
        crate::lock::segment_model::check(
            || {
                let q = Arc::new(model::Queue::<u32, u32>::new());
                let m = Arc::new(Mutex::new(0u32));
                let hs: Vec<_> = (0..3u32)
                    .map(|t| {
                        let (q, m) = (q.clone(), m.clone());
                        shuttle::thread::spawn(move || {
                            for i in 0..2u32 {
                                let req = t * 10 + i;
                                let got = q.run(
                                    req,
                                    || m.try_lock().ok(),
                                    || m.lock().unwrap(),
                                    |n: &mut u32, r: &u32| {
                                        *n += 1;
                                        r + 100
                                    },
                                );
                                assert_eq!(got, req + 100);
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
                assert_eq!(*m.lock().unwrap(), 6);
            },
            300,
        );
    }
}
