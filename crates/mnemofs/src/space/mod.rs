//! Per-CPU page allocators (DRAM only; rebuilt from PM at mount).
//!
//! The data area is split into one contiguous range per CPU ([`placement`]); each range keeps its free
//! extents in a B-tree (start → length) under its own lock, so threads on different
//! CPUs allocate without contention. An allocation that its CPU cannot satisfy takes
//! from the other CPUs. A small reserve is kept for log pages so that metadata
//! operations that free space (unlink, truncate) still work on a full device.

use crate::error::{FsError, Result};
use crate::format::Geometry;
use placement::Placement;

mod placement;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Blocks only log (metadata) allocations may use.
const META_RESERVE_MAX: u64 = 256;

pub(crate) struct Space {
    geo: Geometry,
    placement: Placement,
    cpus: Vec<Mutex<BTreeMap<u64, u64>>>,
    free: AtomicU64,
    reserve: u64,
}

/// A run of contiguous blocks.
pub(crate) type Run = (u64, u64);

impl Space {
    /// An allocator with nothing free.
    pub fn empty(geo: Geometry) -> Space {
        let placement = Placement::per_cpu(&geo);
        Space {
            geo,
            placement,
            cpus: (0..placement.ranges())
                .map(|_| Mutex::new(BTreeMap::new()))
                .collect(),
            free: AtomicU64::new(0),
            reserve: (geo.data_blocks() / 100).clamp(8, META_RESERVE_MAX),
        }
    }

    pub fn free_blocks(&self) -> u64 {
        self.free.load(Ordering::Relaxed)
    }

    /// Blocks that data writes may still take (free minus the metadata reserve).
    pub fn available(&self) -> u64 {
        self.free_blocks().saturating_sub(self.reserve)
    }

    pub fn per_cpu_free(&self) -> Vec<u64> {
        self.cpus
            .iter()
            .map(|m| m.lock().values().sum::<u64>())
            .collect()
    }

    /// All free extents, in block order.
    pub fn extents(&self) -> Vec<Run> {
        let mut v: Vec<Run> = Vec::new();
        for m in &self.cpus {
            v.extend(m.lock().iter().map(|(&s, &l)| (s, l)));
        }
        v.sort_unstable();
        v
    }

    fn current_cpu(&self) -> usize {
        // SAFETY: sched_getcpu has no preconditions.
        let c = unsafe { libc::sched_getcpu() };
        if c < 0 {
            0
        } else {
            c as usize % self.cpus.len()
        }
    }

    /// Allocates `n` blocks as one or more runs. `meta` allocations may dip into the
    /// reserve; data allocations fail with ENOSPC before touching it.
    pub fn alloc(&self, n: u64, meta: bool) -> Result<Vec<Run>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let floor = if meta { 0 } else { self.reserve };
        // Claim the count first so concurrent allocators cannot overdraw.
        let mut cur = self.free.load(Ordering::Relaxed);
        loop {
            if cur < n + floor {
                return Err(FsError::NoSpace);
            }
            match self
                .free
                .compare_exchange_weak(cur, cur - n, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(x) => cur = x,
            }
        }
        let mut runs = Vec::new();
        let mut need = n;
        let first = self.current_cpu();
        for k in 0..self.cpus.len() {
            let cpu = (first + k) % self.cpus.len();
            let mut m = self.cpus[cpu].lock();
            while need > 0 {
                // Prefer an extent that holds the whole request, else take the first.
                let pick = m
                    .iter()
                    .find(|(_, &l)| l >= need)
                    .or_else(|| m.iter().next())
                    .map(|(&s, &l)| (s, l));
                let Some((s, l)) = pick else { break };
                m.remove(&s);
                let take = l.min(need);
                if take < l {
                    m.insert(s + take, l - take);
                }
                runs.push((s, take));
                need -= take;
            }
            if need == 0 {
                break;
            }
        }
        if need > 0 {
            // The counter said there was room, so the lists must have it; give back
            // what we took rather than corrupt the accounting.
            for (s, l) in runs {
                self.free_run(s, l);
            }
            self.free.fetch_add(need, Ordering::AcqRel);
            return Err(FsError::NoSpace);
        }
        Ok(runs)
    }

    /// Allocates `n` contiguous blocks that data writes may take (not the metadata
    /// reserve), from the end of the first extent long enough (the current CPU's
    /// range first), or `None` when no extent is. Files allocate from the front of
    /// extents, so what this takes (LAWN chunks) stays out of their way.
    pub fn alloc_contiguous(&self, n: u64) -> Option<u64> {
        if n == 0 {
            return None;
        }
        let mut cur = self.free.load(Ordering::Relaxed);
        loop {
            if cur < n.saturating_add(self.reserve) {
                return None;
            }
            match self
                .free
                .compare_exchange_weak(cur, cur - n, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(x) => cur = x,
            }
        }
        let first = self.current_cpu();
        for k in 0..self.cpus.len() {
            let cpu = (first + k) % self.cpus.len();
            let mut m = self.cpus[cpu].lock();
            let pick = m.iter().find(|(_, &l)| l >= n).map(|(&s, &l)| (s, l));
            if let Some((s, l)) = pick {
                if l == n {
                    m.remove(&s);
                } else {
                    m.insert(s, l - n);
                }
                return Some(s + l - n);
            }
        }
        self.free.fetch_add(n, Ordering::AcqRel);
        None
    }

    /// Allocates one block (log page).
    pub fn alloc_one(&self, meta: bool) -> Result<u64> {
        let runs = self.alloc(1, meta)?;
        Ok(runs[0].0)
    }

    /// Returns a run to the allocator(s) owning its blocks.
    pub fn free_run(&self, start: u64, len: u64) {
        self.free_run_split(start, len);
    }

    fn free_run_split(&self, mut start: u64, mut len: u64) {
        debug_assert!(len == 0 || self.geo.is_data_block(start + len - 1));
        while len > 0 {
            let cpu = self.placement.range_of(start);
            let (_, end) = self.placement.range(cpu);
            let take = len.min(end - start);
            self.insert(cpu as usize, start, take);
            start += take;
            len -= take;
        }
    }

    fn insert(&self, cpu: usize, start: u64, len: u64) {
        let mut m = self.cpus[cpu].lock();
        let mut s = start;
        let mut l = len;
        if let Some((&ps, &pl)) = m.range(..s).next_back() {
            debug_assert!(ps + pl <= s, "double free of block {s}");
            if ps + pl == s {
                m.remove(&ps);
                s = ps;
                l += pl;
            }
        }
        if let Some(&nl) = m.get(&(start + len)) {
            m.remove(&(start + len));
            l += nl;
        }
        m.insert(s, l);
        self.free.fetch_add(len, Ordering::AcqRel);
    }

    /// Returns every block of `runs`.
    pub fn free_runs(&self, runs: &[Run]) {
        for &(s, l) in runs {
            self.free_run(s, l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        Geometry::compute(64 << 20, 2, 0).unwrap()
    }

    fn from_used(g: Geometry, used: &[bool]) -> Space {
        let s = Space::empty(g);
        for (i, &u) in used.iter().enumerate() {
            if !u {
                s.free_run(g.data_start + i as u64, 1);
            }
        }
        s
    }

    #[test]
    fn alloc_free_coalesce() {
        let g = geo();
        let used = vec![false; g.data_blocks() as usize];
        let s = from_used(g, &used);
        let total = s.free_blocks();
        assert_eq!(total, g.data_blocks());
        let r = s.alloc(10, false).unwrap();
        assert_eq!(r.iter().map(|x| x.1).sum::<u64>(), 10);
        assert_eq!(s.free_blocks(), total - 10);
        s.free_runs(&r);
        assert_eq!(s.free_blocks(), total);
        // Fully coalesced again: one extent per CPU.
        assert_eq!(s.extents().len(), 2);
    }

    #[test]
    fn contiguous_runs_come_from_the_end_of_an_extent() {
        let g = geo();
        let mut used = vec![false; g.data_blocks() as usize];
        // Holes of 5 and 600 blocks at the front, the rest used.
        for (i, u) in used.iter_mut().enumerate() {
            *u = !((10..15).contains(&i) || (100..700).contains(&i));
        }
        let s = from_used(g, &used);
        let before = s.free_blocks();
        // Only the 600-block hole holds 16; its last 16 blocks are taken.
        assert_eq!(s.alloc_contiguous(16), Some(g.data_start + 684));
        assert_eq!(s.free_blocks(), before - 16);
        // Not past the metadata reserve.
        assert_eq!(s.alloc_contiguous(before - 16 - s.reserve + 1), None);
        assert_eq!(s.free_blocks(), before - 16);
        s.free_run(g.data_start + 684, 16);
        assert_eq!(s.extents().len(), 2);
    }

    #[test]
    fn enospc_and_reserve() {
        let g = geo();
        let probe = Space::empty(g);
        let free = probe.reserve + 20;
        let mut used = vec![true; g.data_blocks() as usize];
        for u in used.iter_mut().take(free as usize) {
            *u = false;
        }
        let s = from_used(g, &used);
        assert_eq!(s.free_blocks(), free);
        // Data may not take the reserve.
        assert!(matches!(s.alloc(21, false), Err(FsError::NoSpace)));
        let r = s.alloc(20, false).unwrap();
        assert!(s.alloc(1, false).is_err());
        // Log pages may.
        let m = s.alloc_one(true).unwrap();
        s.free_runs(&r);
        s.free_run(m, 1);
        assert_eq!(s.free_blocks(), free);
    }
}
