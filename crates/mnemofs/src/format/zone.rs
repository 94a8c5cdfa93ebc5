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

/// Bytes of one entry of the LAWN chunk table (§2.9, "Growth").
pub const CHUNK_ENTRY_SIZE: u64 = 8;
/// Largest LAWN chunk (blocks): 2 MiB, one huge page.
pub const MAX_CHUNK_BLOCKS: u32 = 512;
/// Smallest LAWN chunk (blocks).
pub const MIN_CHUNK_BLOCKS: u32 = 16;
/// Bits of a chunk table entry that hold the chunk's first block.
const CHUNK_BLOCK_BITS: u32 = 40;

/// Blocks of one LAWN growth chunk for a data area of `data_blocks` blocks: a power
/// of two, 1/64 of the data area, between [`MIN_CHUNK_BLOCKS`] and
/// [`MAX_CHUNK_BLOCKS`].
#[allow(clippy::arithmetic_side_effects)]
// `target` is in 16..=512: the shift is in range.
pub fn default_chunk_blocks(data_blocks: u64) -> u32 {
    let target = (data_blocks / 64).clamp(MIN_CHUNK_BLOCKS as u64, MAX_CHUNK_BLOCKS as u64);
    // A power of two at most `target` (>= 16, so the shift is in range).
    1u32 << (63 - target.leading_zeros())
}

/// Slots of one chunk of `chunk_blocks` blocks with slots of `slot_size` bytes: the
/// largest multiple of 64 whose descriptors (first, whole blocks) and slots fit.
/// 0 when none fit (a chunk too small or an invalid size).
#[allow(clippy::arithmetic_side_effects)]
// `slot_size` is valid (<= 2048) and `n` at most 2^44/80: no product overflows.
pub fn chunk_slots(chunk_blocks: u32, slot_size: u32) -> u64 {
    if !valid_slot_size(slot_size) {
        return 0;
    }
    let bytes = (chunk_blocks as u64).saturating_mul(BLOCK);
    let mut n = bytes / (slot_size as u64 + DESC_SIZE) / 64 * 64;
    // 64 slots of at least 64 bytes fill whole blocks, so only the descriptors round.
    while n > 0 && chunk_desc_blocks(n) + n * slot_size as u64 / BLOCK > chunk_blocks as u64 {
        n -= 64;
    }
    n
}

/// Blocks at the start of a chunk that hold the descriptors of its `slots` slots.
pub fn chunk_desc_blocks(slots: u64) -> u64 {
    slots.saturating_mul(DESC_SIZE).div_ceil(BLOCK)
}

/// The check of a chunk table entry (never 0): the entry's block mixed with its
/// index, so an entry copied to another index or a stray word does not decode.
#[allow(clippy::arithmetic_side_effects)]
// Wrapping multiplications; the sum is at most 2^24.
fn chunk_check(block: u64, index: u64) -> u64 {
    let mut h = block ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    1 + h % ((1 << (64 - CHUNK_BLOCK_BITS)) - 1)
}

/// Encodes the chunk table entry `index` naming the chunk at `block`.
pub fn encode_chunk_entry(index: u64, block: u64) -> u64 {
    let b = block & ((1 << CHUNK_BLOCK_BITS) - 1);
    b | (chunk_check(b, index) << CHUNK_BLOCK_BITS)
}

/// What a chunk table entry says: `Ok(None)` empty, `Ok(Some(block))` a chunk,
/// `Err(())` neither (corrupt).
#[allow(clippy::result_unit_err)]
pub fn decode_chunk_entry(index: u64, v: u64) -> std::result::Result<Option<u64>, ()> {
    if v == 0 {
        return Ok(None);
    }
    let b = v & ((1 << CHUNK_BLOCK_BITS) - 1);
    if v >> CHUNK_BLOCK_BITS == chunk_check(b, index) {
        Ok(Some(b))
    } else {
        Err(())
    }
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

    #[test]
    fn chunks_fill_their_blocks() {
        assert_eq!(default_chunk_blocks(0), 16);
        assert_eq!(default_chunk_blocks(64 * 100), 64);
        assert_eq!(default_chunk_blocks(1 << 30), 512);
        // 2 MiB of 64-byte slots: 26,176 slots, 103 descriptor blocks + 409 of slots.
        let n = chunk_slots(512, 64);
        assert_eq!(n, 26176);
        assert_eq!(chunk_desc_blocks(n) + n * 64 / BLOCK, 512);
        for cb in [16u32, 64, 512] {
            for s in [64u32, 128, 2048] {
                let n = chunk_slots(cb, s);
                // (64 slots of 2 KiB do not fit 16 blocks: no growth then.)
                if (cb as u64) * BLOCK < 64 * (s as u64 + DESC_SIZE) {
                    assert_eq!(n, 0);
                    continue;
                }
                assert!(n > 0 && n.is_multiple_of(64), "{cb} {s}");
                assert!(chunk_desc_blocks(n) + n * s as u64 / BLOCK <= cb as u64);
                let m = n + 64;
                assert!(chunk_desc_blocks(m) + m * s as u64 / BLOCK > cb as u64);
            }
        }
        assert_eq!(chunk_slots(512, 100), 0);
    }

    #[test]
    fn chunk_entries_roundtrip_and_refuse_garbage() {
        let e = encode_chunk_entry(3, 123_456);
        assert_eq!(decode_chunk_entry(3, e), Ok(Some(123_456)));
        assert_eq!(decode_chunk_entry(4, e), Err(()));
        assert_eq!(decode_chunk_entry(3, e ^ 1), Err(()));
        assert_eq!(decode_chunk_entry(3, 0), Ok(None));
        assert_eq!(decode_chunk_entry(3, e & ((1 << 40) - 1)), Err(()));
    }
}
