//! One range's extent allocator (`Extents`) on its own, behind a thin handle, so
//! that an example can measure it against other allocators
//! (`examples/alloc_compare.rs`). Allocation and free run the engine's own code,
//! as `Space` calls it for one range, minus the locks and the
//! per-device counters; nothing here changes how the engine allocates.
#![deny(clippy::arithmetic_side_effects)]

use super::Extents;

/// Forces the CPU index the calling thread's per-CPU choices use (tests on a
/// machine with fewer CPUs than the image's ranges).
pub use super::set_thread_cpu;

/// The runs of one allocation, `(first block, length)`, in the order taken.
pub type AllocRuns = super::Runs;

/// The extent allocator of one range of blocks.
pub struct ExtentAllocator {
    ext: Extents,
    /// Free blocks (as [`Space`](super::Space) counts them before it takes any).
    free: u64,
}

impl ExtentAllocator {
    /// An allocator whose free space is the `len` blocks from `start`, as one
    /// extent (as mount frees a free extent).
    pub fn new(start: u64, len: u64) -> ExtentAllocator {
        let mut a = ExtentAllocator {
            ext: Extents::default(),
            free: 0,
        };
        a.free(start, len);
        a
    }

    /// Free blocks.
    pub fn free_blocks(&self) -> u64 {
        self.free
    }

    /// Extents in the trees (not counting the single-block stack).
    pub fn extent_count(&self) -> usize {
        self.ext.by_start.len()
    }

    /// Allocates `need` blocks as one or more runs, as the engine does in a range:
    /// empty when fewer than `need` blocks are free (or `need` is 0).
    pub fn alloc(&mut self, need: u64) -> AllocRuns {
        let mut runs = AllocRuns::new();
        if need == 0 || need > self.free {
            return runs;
        }
        let left = self.ext.take_into(need, &mut runs);
        if left > 0 {
            // The count said there was room, so this does not happen; give back
            // what was taken, as `Space` does.
            for &(s, l) in &runs {
                self.ext.put(s, l);
            }
            return AllocRuns::new();
        }
        self.free = self.free.saturating_sub(need);
        runs
    }

    /// Frees the `len` blocks from `start` (a run of an allocation, or part of it),
    /// coalescing them with their free neighbours.
    pub fn free(&mut self, start: u64, len: u64) {
        if len == 0 {
            return;
        }
        self.ext.put(start, len);
        self.free = self.free.saturating_add(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_runs_and_coalescing() {
        let mut a = ExtentAllocator::new(100, 50);
        let r = a.alloc(10);
        assert_eq!(r.to_vec(), vec![(100, 10)]);
        assert_eq!(a.free_blocks(), 40);
        assert!(a.alloc(41).is_empty());
        assert_eq!(a.free_blocks(), 40);
        a.free(100, 10);
        assert_eq!(a.free_blocks(), 50);
        assert_eq!(a.extent_count(), 1);
        // Holes of 3 and 2 blocks: 5 blocks come as two runs, the longer first.
        let x = a.alloc(3);
        assert_eq!(x.to_vec(), vec![(100, 3)]);
        let _y = a.alloc(47);
        assert_eq!(a.free_blocks(), 0);
        a.free(100, 3);
        a.free(110, 2);
        assert_eq!(a.alloc(5).to_vec(), vec![(100, 3), (110, 2)]);
        assert_eq!(a.free_blocks(), 0);
    }
}
