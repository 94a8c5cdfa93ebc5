//! Sizes of the LAWN zone (slots and their 16-byte descriptors, docs/FORMAT.md §2.9)
//! and of the fine-log redo areas (§2.8). The descriptor's bit layout is coded in
//! `data/lawn/descriptor.rs`, the redo record's in `data/finelog.rs`.

use super::layout::BLOCK;
pub use crate::types::{DEFAULT_SLOT_SIZE, DEFAULT_ZONE_PERCENT};

/// Blocks of one CPU's fine-log redo area (one record of up to a page of data).
pub const REDO_BLOCKS: u64 = 2;
/// Bytes of one LAWN descriptor.
pub const DESC_SIZE: u64 = 16;

/// How much of the image the LAWN zone takes, and its slot size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneParams {
    /// Percent of the image for slots plus descriptors (0: no zone).
    pub percent: u32,
    /// Slot size: a multiple of 64 that divides the block size, at most 2048.
    pub slot_size: u32,
}

impl Default for ZoneParams {
    fn default() -> Self {
        ZoneParams {
            percent: DEFAULT_ZONE_PERCENT,
            slot_size: DEFAULT_SLOT_SIZE,
        }
    }
}

/// Whether `s` is an acceptable slot size.
pub fn valid_slot_size(s: u32) -> bool {
    (64..=2048).contains(&s) && s.is_multiple_of(64) && (BLOCK as u32).is_multiple_of(s)
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // Tests build their own values.
mod tests {
    use super::*;

    #[test]
    fn slot_sizes_and_defaults() {
        let ok: Vec<u32> = (0..=8192).filter(|&s| valid_slot_size(s)).collect();
        assert_eq!(ok, [64, 128, 256, 512, 1024, 2048]);
        assert!(valid_slot_size(ZoneParams::default().slot_size));
        assert_eq!(ZoneParams::default().percent, DEFAULT_ZONE_PERCENT);
    }
}
