//! Small indices leased to live threads, one thread per index at a time: the per-
//! thread slots of the PM counters (`counters`) and of the engine's reader locks.
//! A slot that only its leaseholder changes can be updated with plain loads and
//! stores instead of locked instructions.

use std::sync::atomic::{AtomicU64, Ordering};

/// Up to 64 indices, each held by at most one holder at a time.
pub struct LeasePool {
    /// Bit `i`: index `i` is leased.
    bits: AtomicU64,
}

impl LeasePool {
    /// A pool with no index leased.
    pub const fn new() -> LeasePool {
        LeasePool {
            bits: AtomicU64::new(0),
        }
    }

    /// The lowest free index below `limit` (at most 64), now the caller's until it
    /// gives it back; `None` when all are leased.
    pub fn take(&self, limit: usize) -> Option<usize> {
        let mut cur = self.bits.load(Ordering::Relaxed);
        loop {
            let i = (!cur).trailing_zeros() as usize;
            if i >= limit.min(64) {
                return None;
            }
            match self.bits.compare_exchange_weak(
                cur,
                cur | (1 << i),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(i),
                Err(now) => cur = now,
            }
        }
    }

    /// Returns index `i` (taken from this pool) for another holder.
    pub fn give_back(&self, i: usize) {
        if i < 64 {
            self.bits.fetch_and(!(1 << i), Ordering::AcqRel);
        }
    }
}

impl Default for LeasePool {
    fn default() -> Self {
        LeasePool::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_are_exclusive_until_given_back() {
        let p = LeasePool::new();
        assert_eq!(p.take(3), Some(0));
        assert_eq!(p.take(3), Some(1));
        assert_eq!(p.take(3), Some(2));
        assert_eq!(p.take(3), None);
        p.give_back(1);
        assert_eq!(p.take(3), Some(1));
        assert_eq!(p.take(100), Some(3));
        let all = LeasePool::new();
        assert!((0..64).all(|i| all.take(64) == Some(i)));
        assert_eq!(all.take(64), None);
    }
}
