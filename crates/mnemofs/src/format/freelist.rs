//! Saved free list layout (docs/FORMAT.md §2.7): blocks `freelist_start ..
//! freelist_start + freelist_blocks`, read as one area. Written at clean unmount and
//! read at mount by recovery (`freelist.rs` at the crate root).
//!
//! ```text
//!  off     size    field
//!    0        8    magic FREELIST_MAGIC
//!    8        8    n: extent count, ≤ freelist_capacity
//!   16        8    CRC-32 of the n*16 extent bytes (high 32 bits 0)
//!   24       40    reserved
//!   64   16 × n    extent i: start u64 (data block) at +0, len u64 (≥ 1) at +8
//! ```

use super::layout::{Geometry, BLOCK};

/// Saved free list header (at the first free-list block): magic, extent count, CRC
/// of the extents; extents (start u64, len u64) follow at offset 64.
pub const FREELIST_MAGIC: u64 = 0x5453_494c_4545_5246; // "FREELIST"
/// Header: offset of the magic (u64).
pub const FREELIST_MAGIC_OFF: u64 = 0;
/// Header: offset of the extent count (u64).
pub const FREELIST_COUNT_OFF: u64 = 8;
/// Header: offset of the extents' CRC-32 (stored as a u64).
pub const FREELIST_CRC_OFF: u64 = 16;
/// Offset of the first extent.
pub const FREELIST_EXT_OFF: u64 = 64;
/// Bytes of one extent.
pub const FREELIST_EXT_SIZE: u64 = 16;
/// Extent: offset of the first data block (u64).
pub const FREELIST_EXT_START_OFF: usize = 0;
/// Extent: offset of the length in blocks (u64).
pub const FREELIST_EXT_LEN_OFF: usize = 8;

/// Extents that fit in the saved free list of `g`.
pub fn freelist_capacity(g: &Geometry) -> usize {
    (g.freelist_blocks
        .saturating_mul(BLOCK)
        .saturating_sub(FREELIST_EXT_OFF)
        / FREELIST_EXT_SIZE) as usize
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // Tests build their own values.
mod tests {
    use super::*;

    #[test]
    fn capacity_matches_format_md() {
        let g = Geometry::compute(64 << 20, 2, 0).unwrap();
        assert_eq!(freelist_capacity(&g), 8188);
    }
}
