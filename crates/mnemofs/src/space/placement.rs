//! Placement: which blocks an allocator hands out first. Today the data area of the
//! one device is split evenly into one contiguous range per CPU (the last takes the
//! remainder), and a CPU allocates from its own range first; a volume over several
//! devices (MBS-LVM) replaces this with ranges per device and an order of nodes by
//! distance, behind the same two questions.

use crate::format::Geometry;

/// The per-CPU ranges of the data area.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placement {
    data_start: u64,
    total_blocks: u64,
    ranges: u32,
}

impl Placement {
    /// One range per CPU of `geo`.
    pub fn per_cpu(geo: &Geometry) -> Placement {
        Placement {
            data_start: geo.data_start,
            total_blocks: geo.total_blocks,
            ranges: geo.cpus.max(1),
        }
    }

    /// Number of ranges.
    pub fn ranges(&self) -> u32 {
        self.ranges
    }

    /// The data-block range `[start, end)` of range `i`.
    pub fn range(&self, i: u32) -> (u64, u64) {
        let n = self.total_blocks - self.data_start;
        let per = n / self.ranges as u64;
        let start = self.data_start + per * i as u64;
        let end = if i + 1 == self.ranges {
            self.total_blocks
        } else {
            start + per
        };
        (start, end)
    }

    /// Which range data block `b` lies in.
    pub fn range_of(&self, b: u64) -> u32 {
        let per = ((self.total_blocks - self.data_start) / self.ranges as u64).max(1);
        ((b.saturating_sub(self.data_start) / per) as u32).min(self.ranges - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_split_last_takes_the_remainder() {
        let g = Geometry::compute(1 << 30, 4, 0).unwrap();
        assert_eq!(g.data_start, 9960);
        let p = Placement::per_cpu(&g);
        let per = g.data_blocks() / 4;
        let d = g.data_start;
        assert_eq!(p.range(0), (d, d + per));
        assert_eq!(p.range(3), (d + 3 * per, g.total_blocks));
        assert_eq!(p.range_of(d), 0);
        assert_eq!(p.range_of(d + per), 1);
        assert_eq!(p.range_of(g.total_blocks - 1), 3);
    }
}
