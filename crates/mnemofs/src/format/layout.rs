//! Layout policy: where each region of the image starts and how big it is
//! (docs/FORMAT.md §1), and the positions derived from it. The superblock codec that
//! stores a [`Geometry`] is in `superblock.rs`.

use super::device::MAX_DEVICES;
use super::inode::INODE_SIZE;
use super::zone::{
    chunk_desc_blocks, chunk_slots, default_chunk_blocks, valid_slot_size, ZoneParams,
    CHUNK_ENTRY_SIZE, DESC_SIZE, REDO_BLOCKS,
};
use crate::addr::{BlockNo, PmOff};
use crate::error::{FsError, Result};
use crate::types::Timespec;

/// Block (page) size.
pub use crate::addr::BLOCK;
/// Smallest image mkfs accepts.
pub const MIN_SIZE: u64 = 8 << 20;
/// Blocks reserved for the saved free list.
pub const FREELIST_BLOCKS: u64 = 32;

/// Geometry recorded in the superblock (block numbers unless said otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Blocks of the image (`size / BLOCK`; a trailing partial block is unused).
    pub total_blocks: u64,
    /// CPUs: per-CPU journals, inode shares, data ranges and LAWN sub-zones (1..=64).
    pub cpus: u32,
    /// Inode slots of the inode table on device 0, a multiple of `cpus`; inode
    /// numbers `1..=inode_count` are there, and the devices after the first hold
    /// the numbers after it ([`Geometry::dev_inodes`], [`Geometry::inodes`]).
    pub inode_count: u64,
    /// First journal block (always 2); CPU `c`'s journal is block `journal_start + c`.
    pub journal_start: u64,
    /// First block of the saved free list.
    pub freelist_start: u64,
    /// Blocks of the saved free list ([`FREELIST_BLOCKS`]).
    pub freelist_blocks: u64,
    /// First block of the inode table.
    pub inode_table_start: u64,
    /// Blocks of the inode table.
    pub inode_table_blocks: u64,
    /// Fine-log redo areas: `REDO_BLOCKS` blocks per CPU (docs/FORMAT.md).
    pub redo_start: u64,
    /// LAWN descriptor table: one 16-byte descriptor per zone slot.
    pub desc_start: u64,
    /// LAWN zone slots (`zone_slots` of `slot_size` bytes, split evenly per CPU).
    pub slot_start: u64,
    /// LAWN slots in all sub-zones, a multiple of `cpus` (0: no zone).
    pub zone_slots: u64,
    /// Bytes of one LAWN slot (see [`valid_slot_size`]).
    pub slot_size: u32,
    /// LAWN chunk table (docs/FORMAT.md §2.9, "Growth"): one 8-byte entry per chunk
    /// the zone may grow by, right after the slots.
    pub chunk_table_start: u64,
    /// Blocks of one growth chunk (0: the zone does not grow).
    pub zone_chunk_blocks: u32,
    /// Entries of the chunk table, a multiple of `cpus` (sub-zone `c` owns entries
    /// `c * zone_chunks / cpus ..`).
    pub zone_chunks: u32,
    /// First block of the data area (log pages and file data pages).
    pub data_start: u64,
    /// mkfs time, seconds since the epoch.
    pub created: u64,
    /// Devices of the volume (1..=[`MAX_DEVICES`]; superblock version 5, else 1).
    pub devices: u32,
    /// Blocks of each device in the global block space, in device order (device
    /// `i` holds blocks `dev_start(i) .. dev_start(i) + dev_blocks[i]`); entries
    /// past `devices` are 0. From the device table (docs/FORMAT.md §2.10).
    pub dev_blocks: [u64; MAX_DEVICES],
    /// Inode slots in the inode table at the start of each device after the first
    /// (a multiple of `cpus`; entry 0 and entries past `devices` are 0): device
    /// `i`'s slots are the inode numbers after those of devices `0..i`. From the
    /// device table (format version 6; docs/FORMAT.md §2.10).
    pub dev_inodes: [u64; MAX_DEVICES],
    /// LAWN descriptors carry a CRC-32 of their page number and slots' bytes in place
    /// of the page number (format version 7, docs/FORMAT.md §2.9): a zone write
    /// commits with one fence. False for images of versions 3 to 6 (the page number, two fences).
    pub lawn_sums: bool,
    /// Inodes may carry flags (immutable, append-only, …) in their logs (§2.5),
    /// and blocks 0 and 1 a label (§2.1): format version 8. False for older images:
    /// their flags stay 0 and they have no label (an older build would refuse the
    /// log entry that holds flags).
    pub flags_and_label: bool,
    /// Xattr values up to 64 KiB, in a SET entry and continuations (format version
    /// 9, §2.5). False for older images: their values stay within one entry (an
    /// older build would refuse a continuation).
    pub large_xattrs: bool,
    /// Inode slots record the birth time (format version 10, §2.2). False for
    /// older images: their new slots record none (an older build would refuse the
    /// bytes).
    pub btime: bool,
}

impl Geometry {
    /// Inode slots of an image of `size` bytes when `asked` are asked for (0: one per
    /// 16 KiB, at least 1024; otherwise at least 16).
    pub fn inodes_for(size: u64, asked: u64) -> u64 {
        if asked == 0 {
            (size / (16 << 10)).max(1024)
        } else {
            asked.max(16)
        }
    }

    /// Lays out an image of `size` bytes.
    pub fn compute(size: u64, cpus: u32, inodes: u64) -> Result<Geometry> {
        Self::compute_with_min(size, cpus, inodes, MIN_SIZE)
    }

    /// Like `compute`, with another minimum size (tiny in-memory images for the crash
    /// explorer; the layout rules are the same).
    pub fn compute_with_min(size: u64, cpus: u32, inodes: u64, min: u64) -> Result<Geometry> {
        Self::compute_zoned(size, cpus, inodes, min, ZoneParams::default())
    }

    /// Like `compute_with_min`, with the LAWN zone's size and slot size.
    #[allow(clippy::arithmetic_side_effects)] // Sums of values bounded as commented.
    pub fn compute_zoned(
        size: u64,
        cpus: u32,
        inodes: u64,
        min: u64,
        zone: ZoneParams,
    ) -> Result<Geometry> {
        if !valid_slot_size(zone.slot_size) {
            return Err(FsError::Invalid(
                "LAWN slot size must be a multiple of 64 that divides 4096, at most 2048",
            ));
        }
        if zone.percent > 50 {
            return Err(FsError::Invalid(
                "LAWN zone may take at most 50% of the image",
            ));
        }
        if size < min {
            return Err(FsError::ImageTooSmall { size, min });
        }
        let cpus = cpus.clamp(1, 64);
        let total_blocks = size / BLOCK;
        let inode_count = Self::inodes_for(size, inodes);
        let cpus64 = cpus as u64;
        let too_many = || FsError::Invalid("inode count too large for any image");
        // Round up so every CPU owns the same number of inode slots.
        let inode_count = inode_count
            .div_ceil(cpus64)
            .checked_mul(cpus64)
            .ok_or_else(too_many)?;
        let journal_start = 2;
        // Small sums of constants and `cpus` (at most 64) cannot overflow.
        let freelist_start = journal_start + cpus64;
        let inode_table_start = freelist_start + FREELIST_BLOCKS;
        let inode_table_blocks = inode_count
            .checked_mul(INODE_SIZE)
            .ok_or_else(too_many)?
            .div_ceil(BLOCK);
        let redo_start = inode_table_start
            .checked_add(inode_table_blocks)
            .ok_or_else(too_many)?;
        let desc_start = redo_start
            .checked_add(REDO_BLOCKS * cpus64)
            .ok_or_else(too_many)?;
        // Slots plus their descriptors take `percent` of the image; every CPU's
        // sub-zone has the same number of slots (`percent` ≤ 50 and the slot size
        // ≤ 2048 were checked above, so these products stay below `size`).
        let zone_bytes = size / 100 * zone.percent as u64;
        let per_cpu = zone_bytes / (zone.slot_size as u64 + DESC_SIZE) / cpus64;
        let zone_slots = per_cpu * cpus64;
        let zone_blocks = (zone_slots * DESC_SIZE).div_ceil(BLOCK)
            + (zone_slots * zone.slot_size as u64).div_ceil(BLOCK);
        let slot_start = desc_start + (zone_slots * DESC_SIZE).div_ceil(BLOCK);
        let chunk_table_start = desc_start.checked_add(zone_blocks).ok_or_else(too_many)?;
        // Growth: chunks of 1/64 of the rest of the image, up to half of it in all;
        // each sub-zone may own an equal share of the table's entries, as many as keep
        // its slot numbers below 2^32.
        let rest = total_blocks.saturating_sub(chunk_table_start);
        let spc0 = chunk_slots(default_chunk_blocks(rest), zone.slot_size);
        let (zone_chunk_blocks, zone_chunks) = if zone_slots == 0 || spc0 == 0 {
            (0, 0)
        } else {
            let cb = default_chunk_blocks(rest);
            let spc = chunk_slots(cb, zone.slot_size);
            let fixed = zone_slots / cpus64;
            let by_rel = (u32::MAX as u64).saturating_sub(fixed.div_ceil(64) * 64) / spc;
            let per_sub = (rest / 2 / cb as u64 / cpus64)
                .min(by_rel)
                .min(u32::MAX as u64 / 64);
            // No chunk for a sub-zone (more CPUs than half the rest has chunks, e.g.
            // 64 on 64 MiB): no growth, and no chunk size either (the superblock's
            // rule).
            if per_sub == 0 {
                (0, 0)
            } else {
                (cb, (per_sub * cpus64) as u32)
            }
        };
        let table_blocks = (zone_chunks as u64 * CHUNK_ENTRY_SIZE).div_ceil(BLOCK);
        let data_start = chunk_table_start + table_blocks;
        let need = data_start.saturating_add(64 * cpus64);
        if need > total_blocks {
            return Err(FsError::ImageTooSmall {
                size,
                min: need.saturating_mul(BLOCK),
            });
        }
        Ok(Geometry {
            total_blocks,
            cpus,
            inode_count,
            journal_start,
            freelist_start,
            freelist_blocks: FREELIST_BLOCKS,
            inode_table_start,
            inode_table_blocks,
            redo_start,
            desc_start,
            slot_start,
            zone_slots,
            slot_size: zone.slot_size,
            chunk_table_start,
            zone_chunk_blocks,
            zone_chunks,
            data_start,
            created: Timespec::now().sec as u64,
            devices: 1,
            dev_blocks: one_device(total_blocks),
            dev_inodes: [0; MAX_DEVICES],
            lawn_sums: true,
            flags_and_label: true,
            large_xattrs: true,
            btime: true,
        })
    }

    // The positions below come from a checked geometry (`Geometry::decode`: every
    // region inside the image); their arguments may come from PM, so a bad one
    // saturates to an offset past the image, which the pm layer refuses, instead
    // of wrapping into it.

    /// PM offset of CPU `cpu`'s fine-log redo area.
    pub fn redo_off(&self, cpu: u32) -> PmOff {
        BlockNo(
            self.redo_start
                .saturating_add(REDO_BLOCKS.saturating_mul(cpu as u64)),
        )
        .off()
    }

    /// PM offset of the descriptor of zone slot `slot`.
    pub fn desc_off(&self, slot: u64) -> PmOff {
        BlockNo(self.desc_start).at(slot.saturating_mul(DESC_SIZE))
    }

    /// PM offset of zone slot `slot`.
    pub fn slot_off(&self, slot: u64) -> PmOff {
        BlockNo(self.slot_start).at(slot.saturating_mul(self.slot_size as u64))
    }

    /// Slots of one growth chunk (0: no growth).
    pub fn chunk_slots(&self) -> u64 {
        if self.zone_chunks == 0 {
            return 0;
        }
        chunk_slots(self.zone_chunk_blocks, self.slot_size)
    }

    /// Blocks at the start of a chunk that hold its descriptors.
    pub fn chunk_desc_blocks(&self) -> u64 {
        chunk_desc_blocks(self.chunk_slots())
    }

    /// Chunk table entries of each sub-zone.
    pub fn chunks_per_sub(&self) -> u64 {
        (self.zone_chunks as u64)
            .checked_div(self.cpus as u64)
            .unwrap_or(0)
    }

    /// Blocks of the chunk table.
    pub fn chunk_table_blocks(&self) -> u64 {
        (self.zone_chunks as u64)
            .saturating_mul(CHUNK_ENTRY_SIZE)
            .div_ceil(BLOCK)
    }

    /// PM offset of chunk table entry `e`.
    pub fn chunk_entry_off(&self, e: u64) -> PmOff {
        BlockNo(self.chunk_table_start).at(e.saturating_mul(CHUNK_ENTRY_SIZE))
    }

    /// Slots of each CPU's sub-zone.
    pub fn slots_per_cpu(&self) -> u64 {
        self.zone_slots.checked_div(self.cpus as u64).unwrap_or(0)
    }

    /// Slices (slot-sized pieces) of one page.
    pub fn slices_per_page(&self) -> u64 {
        BLOCK.checked_div(self.slot_size as u64).unwrap_or(0)
    }

    /// PM offset of CPU `cpu`'s journal block.
    pub fn journal_off(&self, cpu: u32) -> PmOff {
        BlockNo(self.journal_start.saturating_add(cpu as u64)).off()
    }

    /// PM offset of the slot of inode `ino` (1-based; the caller checks
    /// [`valid_ino`](Self::valid_ino)).
    pub fn inode_off(&self, ino: u64) -> PmOff {
        if ino <= self.inode_count {
            return BlockNo(self.inode_table_start)
                .at(ino.saturating_sub(1).saturating_mul(INODE_SIZE));
        }
        self.dev_inode_off(ino)
    }

    /// [`Geometry::inode_off`] of an inode past device 0's table.
    #[cold]
    fn dev_inode_off(&self, ino: u64) -> PmOff {
        match self.ino_place(ino) {
            Some((d, k)) => BlockNo(self.dev_start(d)).at(k.saturating_mul(INODE_SIZE)),
            // Past every table: past the image, which the pm layer refuses.
            None => BlockNo(u64::MAX / BLOCK).off(),
        }
    }

    /// The device holding inode `ino`'s slot and the slot's index in that
    /// device's table; `None` past the last.
    fn ino_place(&self, ino: u64) -> Option<(usize, u64)> {
        let i = ino.checked_sub(1)?;
        if i < self.inode_count {
            return Some((0, i));
        }
        let mut k = i.saturating_sub(self.inode_count);
        let n = (self.devices as usize).clamp(1, MAX_DEVICES);
        for d in 1..n {
            let c = self.dev_inodes[d];
            if k < c {
                return Some((d, k));
            }
            k = k.saturating_sub(c);
        }
        None
    }

    /// The device holding inode `ino`'s slot (0 for a number past every table).
    pub fn ino_device(&self, ino: u64) -> usize {
        self.ino_place(ino).map_or(0, |(d, _)| d)
    }

    /// Every inode slot of the volume: device 0's table and the later devices'.
    pub fn inodes(&self) -> u64 {
        self.dev_inodes
            .iter()
            .fold(self.inode_count, |a, &n| a.saturating_add(n))
    }

    /// Blocks of device `i`'s inode table (0 for device 0, whose inodes are in the
    /// metadata area).
    pub fn dev_inode_blocks(&self, i: usize) -> u64 {
        self.dev_inodes
            .get(i)
            .map_or(0, |&n| n.saturating_mul(INODE_SIZE).div_ceil(BLOCK))
    }

    /// The inode table at the start of a device after the first that holds PM
    /// offset `off`, as (device, byte offset from the table's start).
    pub fn dev_table_of(&self, off: u64) -> Option<(usize, u64)> {
        let n = (self.devices as usize).clamp(1, MAX_DEVICES);
        (1..n).find_map(|d| {
            let t0 = BlockNo(self.dev_start(d)).off().get();
            let len = self.dev_inodes[d].saturating_mul(INODE_SIZE);
            let rel = off.checked_sub(t0)?;
            (rel < len).then_some((d, rel))
        })
    }

    /// Sets the inode slots of each device (`inodes[0]` must be 0: device 0's are
    /// `inode_count`) after [`Geometry::set_devices`]: each a multiple of `cpus`,
    /// and each device keeps at least one data block after its table.
    pub fn set_device_inodes(&mut self, inodes: &[u64]) -> std::result::Result<(), String> {
        let n = (self.devices as usize).clamp(1, MAX_DEVICES);
        if inodes.len() != n || inodes.first().is_some_and(|&i| i != 0) {
            return Err(format!(
                "inode slots of {} devices given for {n} devices, or some on device 0",
                inodes.len()
            ));
        }
        let mut total = self.inode_count;
        for (d, &c) in inodes.iter().enumerate().skip(1) {
            if !c.is_multiple_of(self.cpus as u64) {
                return Err(format!(
                    "device {d}: {c} inode slots are not a multiple of {} CPUs",
                    self.cpus
                ));
            }
            // Every CPU's range of the device keeps at least one data block.
            let fits = c.checked_mul(INODE_SIZE).is_some_and(|b| {
                b.div_ceil(BLOCK).saturating_add(u64::from(self.cpus)) <= self.dev_blocks[d]
            });
            if !fits {
                return Err(format!(
                    "device {d}: an inode table of {c} slots leaves fewer data blocks than the {} CPUs' ranges of its {}",
                    self.cpus, self.dev_blocks[d]
                ));
            }
            total = total
                .checked_add(c)
                .ok_or_else(|| "more than 2^64 inode slots".to_string())?;
        }
        self.dev_inodes = [0; MAX_DEVICES];
        self.dev_inodes[..n].copy_from_slice(inodes);
        Ok(())
    }

    /// Inode numbers are 1-based; inode `ino` belongs to CPU `(ino-1) % cpus`.
    pub fn ino_cpu(&self, ino: u64) -> u32 {
        ino.saturating_sub(1)
            .checked_rem(self.cpus as u64)
            .unwrap_or(0) as u32
    }

    /// The LAWN sub-zone that holds the slices of page `pgoff` of inode `ino`
    /// (docs/FORMAT.md §2.9): a hash of the page, so that one file's pages spread
    /// over every sub-zone (one writer can use the whole zone, and writers of one
    /// shared file do not all meet in one sub-zone), while each page has exactly one.
    pub fn lawn_sub(&self, ino: u64, pgoff: u64) -> u32 {
        let k = (ino << 32) ^ pgoff;
        let h = k.wrapping_mul(0xd6e8_feb8_6659_fd93) >> 32;
        (h.saturating_mul(self.cpus as u64) >> 32) as u32
    }

    /// Whether `ino` names an inode slot of this image (`1..=inode_count`).
    pub fn valid_ino(&self, ino: u64) -> bool {
        ino >= 1 && ino <= self.inodes()
    }

    /// Whether block `b` lies in the data area (not in a later device's inode
    /// table).
    pub fn is_data_block(&self, b: u64) -> bool {
        b >= self.data_start
            && b < self.total_blocks
            && (self.devices <= 1 || !self.in_dev_inode_table(b))
    }

    /// Whether blocks `start .. start + len` (len ≥ 1) all lie in the data area:
    /// inside the volume, past the metadata area, and clear of every later
    /// device's inode table.
    pub fn is_data_run(&self, start: u64, len: u64) -> bool {
        let Some(last) = len.checked_sub(1).and_then(|l| start.checked_add(l)) else {
            return false;
        };
        if !(self.is_data_block(start) && self.is_data_block(last)) {
            return false;
        }
        let n = (self.devices as usize).clamp(1, MAX_DEVICES);
        (1..n).all(|d| {
            // A device without a table is crossed freely (a run may span the
            // boundary between two devices' data).
            let tb = self.dev_inode_blocks(d);
            let t0 = self.dev_start(d);
            tb == 0 || last < t0 || start >= t0.saturating_add(tb)
        })
    }

    /// Whether block `b` is in the inode table of a device after the first.
    fn in_dev_inode_table(&self, b: u64) -> bool {
        let d = self.device_of(b);
        d != 0 && b < self.dev_start(d).saturating_add(self.dev_inode_blocks(d))
    }

    /// Blocks from the start of the data area to the end of the volume (the later
    /// devices' inode tables included): the length of tables indexed by
    /// `block - data_start`.
    pub fn data_span(&self) -> u64 {
        self.total_blocks.saturating_sub(self.data_start)
    }

    /// Blocks of the data area (the later devices' inode tables excluded).
    pub fn data_blocks(&self) -> u64 {
        (1..MAX_DEVICES).fold(self.data_span(), |a, d| {
            a.saturating_sub(self.dev_inode_blocks(d))
        })
    }

    /// Sets the devices' parts of the global block space (mkfs, and recovery from
    /// the device table): their sum must be `total_blocks`, and device 0 must hold
    /// every metadata area and at least one data block.
    pub fn set_devices(&mut self, blocks: &[u64]) -> std::result::Result<(), String> {
        if blocks.is_empty() || blocks.len() > MAX_DEVICES {
            return Err(format!(
                "{} devices (a volume has 1..={MAX_DEVICES})",
                blocks.len()
            ));
        }
        let sum = blocks.iter().try_fold(0u64, |a, &b| a.checked_add(b));
        if sum != Some(self.total_blocks) {
            return Err(format!(
                "the devices' blocks add up to {}, not the superblock's {}",
                sum.map_or_else(|| "more than 2^64".to_string(), |s| s.to_string()),
                self.total_blocks
            ));
        }
        if blocks[0] < self.data_start.saturating_add(u64::from(self.cpus).max(1))
            || blocks.contains(&0)
        {
            return Err(format!(
                "device 0 ({} blocks) does not hold the metadata area ({} blocks) and a data block per CPU",
                blocks[0], self.data_start
            ));
        }
        // Every CPU's range of a later device has at least one block.
        if let Some(i) = (1..blocks.len()).find(|&i| blocks[i] < u64::from(self.cpus)) {
            return Err(format!(
                "device {i} has {} blocks, fewer than the {} CPUs' ranges",
                blocks[i], self.cpus
            ));
        }
        self.devices = blocks.len() as u32;
        self.dev_blocks = [0; MAX_DEVICES];
        self.dev_blocks[..blocks.len()].copy_from_slice(blocks);
        self.dev_inodes = [0; MAX_DEVICES];
        Ok(())
    }

    /// First global block of device `i` (the total for `i` past the last).
    pub fn dev_start(&self, i: usize) -> u64 {
        self.dev_blocks[..i.min(MAX_DEVICES)]
            .iter()
            .fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// The device holding global block `b` (the last one for a block past the end).
    pub fn device_of(&self, b: u64) -> usize {
        let mut start = 0u64;
        let n = (self.devices as usize).clamp(1, MAX_DEVICES);
        for (i, &len) in self.dev_blocks[..n].iter().enumerate() {
            start = start.saturating_add(len);
            if b < start {
                return i;
            }
        }
        n.saturating_sub(1)
    }

    /// The data blocks `[start, end)` of device `i` (device 0's start after the
    /// metadata area, a later device's after its inode table).
    pub fn device_data(&self, i: usize) -> (u64, u64) {
        let start = self.dev_start(i);
        let end = start.saturating_add(self.dev_blocks.get(i).copied().unwrap_or(0));
        let first = start
            .saturating_add(self.dev_inode_blocks(i))
            .max(self.data_start);
        (first.min(end), end)
    }
}

/// The device table of a one-device volume of `total_blocks`.
pub fn one_device(total_blocks: u64) -> [u64; MAX_DEVICES] {
    let mut d = [0; MAX_DEVICES];
    d[0] = total_blocks;
    d
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // Tests build their own values.
mod tests {
    use super::*;
    use crate::format::MIN_SIZE;

    #[test]
    fn zone_geometry_matches_format_md() {
        let g = Geometry::compute(1 << 30, 4, 0).unwrap();
        assert_eq!(g.inode_table_start + g.inode_table_blocks, 2086);
        assert_eq!(g.redo_start, 2086);
        assert_eq!(g.desc_start, 2094);
        assert_eq!(g.zone_slots, 402652);
        assert_eq!(g.slots_per_cpu(), 100663);
        assert_eq!(g.slot_start, 3667);
        // Growth: chunks of 512 blocks, 61 per sub-zone: one block of table.
        assert_eq!((g.zone_chunk_blocks, g.zone_chunks), (512, 244));
        assert_eq!((g.chunk_table_start, g.chunk_table_blocks()), (9959, 1));
        assert_eq!(g.chunk_slots(), 26176);
        assert_eq!(g.chunk_entry_off(3).get(), 9959 * BLOCK + 24);
        assert_eq!(g.data_start, 9960);
        assert_eq!(g.redo_off(1).get(), (2086 + 2) * BLOCK);
        assert_eq!(g.slot_off(2).get(), 3667 * BLOCK + 128);
        let b = g.encode();
        assert_eq!(Geometry::decode(&b, 1 << 30).unwrap(), g);
        // No zone, other slot sizes; bad slot sizes and shares are refused.
        let z = |percent, slot_size| ZoneParams { percent, slot_size };
        let g0 = Geometry::compute_zoned(64 << 20, 2, 0, MIN_SIZE, z(0, 64)).unwrap();
        assert_eq!(
            (g0.zone_slots, g0.slot_start, g0.data_start),
            (0, g0.desc_start, g0.desc_start)
        );
        let g2 = Geometry::compute_zoned(64 << 20, 2, 0, MIN_SIZE, z(10, 512)).unwrap();
        assert_eq!(Geometry::decode(&g2.encode(), 64 << 20).unwrap(), g2);
        // More CPUs than half the rest has chunks: no growth, and the image decodes
        // (it did not, with a chunk size and no table: 64 CPUs on 64 MiB).
        for (size, cpus, grows) in [
            (64u64 << 20, 64, false),
            (64 << 20, 16, true),
            (1 << 30, 64, true),
        ] {
            let g = Geometry::compute(size, cpus, 0).unwrap();
            assert_eq!(g.zone_chunks > 0, grows, "{cpus} CPUs");
            assert_eq!(g.zone_chunk_blocks > 0, grows, "{cpus} CPUs");
            assert_eq!(
                Geometry::decode(&g.encode(), size).unwrap(),
                g,
                "{cpus} CPUs"
            );
        }
        for bad in [0, 32, 96, 4096, 8192] {
            assert!(Geometry::compute_zoned(64 << 20, 2, 0, MIN_SIZE, z(3, bad)).is_err());
        }
        assert!(Geometry::compute_zoned(64 << 20, 2, 0, MIN_SIZE, z(51, 64)).is_err());
    }

    #[test]
    fn lawn_sub_zones_follow_format_md_and_spread_one_file() {
        let g = Geometry::compute(1 << 30, 4, 0).unwrap();
        // The formula of docs/FORMAT.md §2.9, spelled out.
        let f = |ino: u64, p: u64| {
            let h = ((ino << 32) ^ p).wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 32;
            (h * 4) >> 32
        };
        let mut per = [0u64; 4];
        for p in 0..4000u64 {
            let s = g.lawn_sub(7, p);
            assert_eq!(s as u64, f(7, p));
            per[s as usize] += 1;
        }
        // One file's pages land in every sub-zone, about evenly.
        assert!(per.iter().all(|&n| (800..1200).contains(&n)), "{per:?}");
        let g1 = Geometry::compute(1 << 30, 1, 0).unwrap();
        assert!((0..100).all(|p| g1.lawn_sub(3, p) == 0));
    }

    #[test]
    fn derived_positions_match_format_md() {
        // 1 GiB, 4 CPUs: journals 2-5, free list 6-37, inode table 38-2085.
        let g = Geometry::compute(1 << 30, 4, 0).unwrap();
        assert_eq!((g.total_blocks, g.inode_count), (262144, 65536));
        assert_eq!((g.journal_start, g.freelist_start), (2, 6));
        assert_eq!((g.inode_table_start, g.inode_table_blocks), (38, 2048));
        assert_eq!(g.journal_off(3).get(), 5 * BLOCK);
        assert_eq!(g.inode_off(1).get(), 38 * BLOCK);
        assert_eq!(g.inode_off(33).get(), 39 * BLOCK);
        assert_eq!((g.ino_cpu(1), g.ino_cpu(4), g.ino_cpu(5)), (0, 3, 0));
        assert!(!g.valid_ino(0) && g.valid_ino(1) && g.valid_ino(65536));
        assert!(!g.valid_ino(65537));
        assert_eq!(g.desc_off(3).get(), 2094 * BLOCK + 48);
        assert_eq!(g.slices_per_page(), 64);
        assert!(!g.is_data_block(9959) && g.is_data_block(9960));
        assert!(!g.is_data_block(g.total_blocks));
    }

    #[test]
    fn later_devices_hold_inode_tables_at_their_start() {
        // 1 GiB over 3 devices of 1/2, 1/4 and 1/4; 32 and 64 slots (1 and 2
        // blocks) on devices 1 and 2.
        let mut g = Geometry::compute(1 << 30, 4, 0).unwrap();
        let (n0, q) = (g.inode_count, g.total_blocks / 4);
        g.set_devices(&[2 * q, q, q]).unwrap();
        assert!(g.set_device_inodes(&[0, 32, 64]).is_ok());
        assert_eq!(g.inodes(), n0 + 96);
        // Numbers past device 0's table: device 1's from its first block, then 2's.
        assert_eq!(g.inode_off(n0).get(), 38 * BLOCK + (n0 - 1) * INODE_SIZE);
        assert_eq!(g.inode_off(n0 + 1).get(), 2 * q * BLOCK);
        assert_eq!(g.inode_off(n0 + 32).get(), 2 * q * BLOCK + 31 * INODE_SIZE);
        assert_eq!(g.inode_off(n0 + 33).get(), 3 * q * BLOCK);
        assert_eq!(
            (
                g.ino_device(n0),
                g.ino_device(n0 + 1),
                g.ino_device(n0 + 33)
            ),
            (0, 1, 2)
        );
        assert!(g.valid_ino(n0 + 96) && !g.valid_ino(n0 + 97));
        assert!(g.inode_off(n0 + 97).get() > g.total_blocks * BLOCK);
        assert_eq!(g.dev_table_of(2 * q * BLOCK + 200), Some((1, 200)));
        assert_eq!(g.dev_table_of(2 * q * BLOCK + 32 * INODE_SIZE), None);
        // The tables are not data blocks; each device's data starts after its own.
        assert!(!g.is_data_block(2 * q) && g.is_data_block(2 * q + 1));
        assert!(!g.is_data_block(3 * q + 1) && g.is_data_block(3 * q + 2));
        assert_eq!(g.device_data(1), (2 * q + 1, 3 * q));
        assert_eq!(g.device_data(2), (3 * q + 2, 4 * q));
        assert_eq!(g.data_blocks(), g.data_span() - 3);
        // A run may not cross a table, even from data to data.
        assert!(g.is_data_run(2 * q - 4, 4) && !g.is_data_run(2 * q - 4, 6));
        assert!(!g.is_data_run(2 * q - 1, 3) && g.is_data_run(2 * q + 1, 3));
        assert!(!g.is_data_run(2 * q + 1, 0) && !g.is_data_run(u64::MAX, 2));
        // Refused: slots on device 0, a count not a multiple of the CPUs, a table
        // that leaves its device no data block, the wrong number of devices.
        let mut h = g;
        assert!(h.set_device_inodes(&[4, 0, 0]).is_err());
        assert!(h.set_device_inodes(&[0, 6, 0]).is_err());
        assert!(h.set_device_inodes(&[0, q * 32, 0]).is_err());
        assert!(h.set_device_inodes(&[0, 0]).is_err());
        assert_eq!(h, g);
        // New device sizes clear the tables.
        h.set_devices(&[2 * q, 2 * q]).unwrap();
        assert_eq!((h.inodes(), h.data_blocks()), (n0, h.data_span()));
        // A device without a table: a run may cross onto it (version 5 volumes, or a
        // share that rounded down to nothing).
        assert!(h.is_data_run(2 * q - 2, 4));
        h.set_device_inodes(&[0, 32]).unwrap();
        assert!(!h.is_data_run(2 * q - 2, 4));
        let mut k = g;
        k.set_device_inodes(&[0, 0, 64]).unwrap();
        assert!(k.is_data_run(2 * q - 2, 4) && !k.is_data_run(3 * q - 2, 4));
    }
}
