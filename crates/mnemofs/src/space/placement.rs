//! Placement: which blocks an allocation tries first (MBS-LVM's monitor, DESIGN.md
//! §6).
//!
//! Every device's data area is split evenly into one range per CPU of the geometry
//! (the last takes the remainder), each range an allocator of its own; a volume of
//! one device is one range per CPU over the whole data area, as before volumes had
//! devices. An allocation tries whole devices in an order the mode gives, and
//! within a device the calling CPU's range first:
//!
//! - `local`: the devices of the thread's node first, then the others by NUMA
//!   distance (ties by index) — the paper's CandidateNode list, one per node;
//!   devices with no free block (the FatNode list, kept by `Space`) are skipped
//!   until blocks are freed on them.
//! - `interleave`: round robin, each allocation starting one device further.
//! - `single`: device order (the first until it is full).

use crate::format::Geometry;
use crate::types::PlacementMode;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Where each range lies and the device orders of the mode.
#[derive(Debug)]
pub(crate) struct Placement {
    mode: PlacementMode,
    /// Ranges per device (the geometry's CPUs, at least 1).
    per_dev: usize,
    /// Range `r` is `ranges[r]`, of device `r / per_dev`.
    ranges: Vec<(u64, u64)>,
    /// Data blocks of each device, `[lo, hi)`.
    devs: Vec<(u64, u64)>,
    /// NUMA node of each device.
    dev_node: Vec<u32>,
    /// Per node (id, device order): the local mode's candidate lists.
    order: Vec<(u32, Vec<usize>)>,
    /// The interleave mode's cursors: block allocations, new inodes (apart, so that
    /// a file's inode does not shift where its blocks go).
    next: AtomicUsize,
    next_ino: AtomicUsize,
}

impl Placement {
    /// One range per CPU of `geo` over every device's data; devices on `dev_node`
    /// (one entry per device; missing entries: node 0), nodes `distance` apart.
    pub fn new(
        geo: &Geometry,
        mode: PlacementMode,
        dev_node: &[u32],
        nodes: &[u32],
        distance: impl Fn(u32, u32) -> Option<u32>,
    ) -> Placement {
        let per_dev = geo.cpus.max(1) as usize;
        let ndev = (geo.devices as usize).max(1);
        let devs: Vec<(u64, u64)> = (0..ndev).map(|d| geo.device_data(d)).collect();
        let mut ranges = Vec::with_capacity(ndev * per_dev);
        for &(lo, hi) in &devs {
            let n = hi - lo;
            let per = n / per_dev as u64;
            for i in 0..per_dev as u64 {
                let start = lo + per * i;
                let end = if i + 1 == per_dev as u64 {
                    hi
                } else {
                    start + per
                };
                ranges.push((start, end));
            }
        }
        let dev_node: Vec<u32> = (0..ndev)
            .map(|d| dev_node.get(d).copied().unwrap_or(0))
            .collect();
        // Every node a thread may run on, and every node holding a device.
        let mut all: Vec<u32> = nodes.to_vec();
        all.extend(dev_node.iter().copied());
        all.sort_unstable();
        all.dedup();
        let order = all
            .iter()
            .map(|&n| {
                let mut v: Vec<usize> = (0..ndev).collect();
                // Unknown distances sort last.
                v.sort_by_key(|&d| (distance(n, dev_node[d]).unwrap_or(u32::MAX), d));
                (n, v)
            })
            .collect();
        Placement {
            mode,
            per_dev,
            ranges,
            devs,
            dev_node,
            order,
            next: AtomicUsize::new(0),
            next_ino: AtomicUsize::new(0),
        }
    }

    /// The mode.
    pub fn mode(&self) -> PlacementMode {
        self.mode
    }

    /// Number of ranges.
    pub fn ranges(&self) -> usize {
        self.ranges.len()
    }

    /// Ranges per device.
    pub fn per_dev(&self) -> usize {
        self.per_dev
    }

    /// Number of devices.
    pub fn devices(&self) -> usize {
        self.devs.len()
    }

    /// The data-block range `[start, end)` of range `r`.
    pub fn range(&self, r: usize) -> (u64, u64) {
        self.ranges[r]
    }

    /// The device holding data block `b` (the last for a block past the end).
    pub fn device_of(&self, b: u64) -> usize {
        if self.devs.len() == 1 {
            return 0;
        }
        self.devs
            .iter()
            .position(|&(_, hi)| b < hi)
            .unwrap_or(self.devs.len() - 1)
    }

    /// Which range data block `b` lies in.
    pub fn range_of(&self, b: u64) -> usize {
        let d = self.device_of(b);
        let (lo, hi) = self.devs[d];
        let per = ((hi - lo) / self.per_dev as u64).max(1);
        let i = ((b.saturating_sub(lo) / per) as usize).min(self.per_dev - 1);
        d * self.per_dev + i
    }

    /// The node of device `d`.
    pub fn device_node(&self, d: usize) -> u32 {
        self.dev_node[d]
    }

    /// The devices an allocation of a thread on `node` tries, in order, into `out`.
    pub fn device_order(&self, node: u32, out: &mut smallvec::SmallVec<[usize; 8]>) {
        self.order_by(&self.next, node, out)
    }

    /// The devices a new inode of a thread on `node` tries, in order, into `out`:
    /// [`Placement::device_order`], with interleave's own cursor.
    pub fn inode_order(&self, node: u32, out: &mut smallvec::SmallVec<[usize; 8]>) {
        self.order_by(&self.next_ino, node, out)
    }

    fn order_by(&self, next: &AtomicUsize, node: u32, out: &mut smallvec::SmallVec<[usize; 8]>) {
        out.clear();
        let n = self.devs.len();
        match self.mode {
            _ if n == 1 => out.push(0),
            PlacementMode::Single => out.extend(0..n),
            PlacementMode::Interleave => {
                let first = next.fetch_add(1, Ordering::Relaxed) % n;
                out.extend((0..n).map(|k| (first + k) % n));
            }
            PlacementMode::Local => match self.order.iter().find(|(id, _)| *id == node) {
                Some((_, v)) => out.extend(v.iter().copied()),
                None => out.extend(0..n),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(_: u32, _: u32) -> Option<u32> {
        Some(10)
    }

    #[test]
    fn even_split_last_takes_the_remainder() {
        let g = Geometry::compute(1 << 30, 4, 0).unwrap();
        assert_eq!(g.data_start, 9960);
        let p = Placement::new(&g, PlacementMode::Local, &[0], &[0], flat);
        let per = g.data_blocks() / 4;
        let d = g.data_start;
        assert_eq!(p.range(0), (d, d + per));
        assert_eq!(p.range(3), (d + 3 * per, g.total_blocks));
        assert_eq!(p.range_of(d), 0);
        assert_eq!(p.range_of(d + per), 1);
        assert_eq!(p.range_of(g.total_blocks - 1), 3);
    }

    #[test]
    fn devices_split_per_cpu_and_order_by_distance() {
        let mut g = Geometry::compute(4 << 30, 2, 0).unwrap();
        let q = g.total_blocks / 4;
        g.set_devices(&[q, q, q, g.total_blocks - 3 * q]).unwrap();
        // AMD-like: 0-1 and 0-2 at 16, 0-3 at 22; 1-3 at 16, 1-2 at 22.
        let m = [
            [10, 16, 16, 22],
            [16, 10, 22, 16],
            [16, 22, 10, 16],
            [22, 16, 16, 10],
        ];
        let dist = |a: u32, b: u32| Some(m[a as usize][b as usize]);
        let p = Placement::new(&g, PlacementMode::Local, &[0, 1, 2, 3], &[0, 1, 2, 3], dist);
        assert_eq!(p.ranges(), 8);
        assert_eq!(p.range(2).0, q);
        assert_eq!(p.range_of(q), 2);
        assert_eq!(p.range_of(q - 1), 1);
        assert_eq!(p.device_of(3 * q), 3);
        let mut o = smallvec::SmallVec::new();
        p.device_order(1, &mut o);
        assert_eq!(&o[..], &[1, 0, 3, 2]);
        p.device_order(3, &mut o);
        assert_eq!(&o[..], &[3, 1, 2, 0]);
        let s = Placement::new(&g, PlacementMode::Single, &[0, 1, 2, 3], &[0], dist);
        s.device_order(3, &mut o);
        assert_eq!(&o[..], &[0, 1, 2, 3]);
        let i = Placement::new(&g, PlacementMode::Interleave, &[0, 1, 2, 3], &[0], dist);
        i.device_order(0, &mut o);
        assert_eq!(o[0], 0);
        i.device_order(0, &mut o);
        assert_eq!(&o[..], &[1, 2, 3, 0]);
    }
}
