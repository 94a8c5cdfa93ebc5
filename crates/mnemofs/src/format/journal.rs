//! Journal block codec (docs/FORMAT.md §2.6): block `journal_start + cpu`.
//!
//! ```text
//!  off     size    field
//!    0        8    header word: 0 idle, else tag 0x4A4E 63..48 | nrec 47..32 | CRC-32 of the records
//!    8       56    unused
//!   64   16 × n    record i: off u64 (PM offset of a word) at +0, old u64 (its old value) at +8
//! ```

use super::bytes::crc;
use super::layout::BLOCK;

/// Journal header word (offset 0 of a CPU's journal block): 0 = idle, else
/// `0x4A4E << 48 | nrec << 32 | crc32(records)`.
pub const JOURNAL_ACTIVE_OFF: u64 = 0;
/// Records start here: 16 bytes each, (PM offset u64, old value u64).
pub const JOURNAL_REC_OFF: u64 = 64;
/// Bytes of one journal record.
pub const JOURNAL_REC_SIZE: u64 = 16;
/// Record: offset of the PM byte offset of the word (u64).
pub const JOURNAL_REC_ADDR_OFF: usize = 0;
/// Record: offset of the word's value before the transaction (u64).
pub const JOURNAL_REC_OLD_OFF: usize = 8;
/// Records that fit in a journal block.
pub const JOURNAL_MAX_RECS: usize = ((BLOCK - JOURNAL_REC_OFF) / JOURNAL_REC_SIZE) as usize;
const JOURNAL_TAG: u64 = 0x4A4E;
/// Header word: the tag's lowest bit.
const WORD_TAG_SHIFT: u32 = 48;
/// Header word: the record count's lowest bit (16 bits wide).
const WORD_NREC_SHIFT: u32 = 32;

/// The header word of an active journal with `nrec` records, `records` their bytes.
pub fn journal_word(nrec: usize, records: &[u8]) -> u64 {
    (JOURNAL_TAG << WORD_TAG_SHIFT) | ((nrec as u64) << WORD_NREC_SHIFT) | crc(records) as u64
}

/// Parses a journal header word: `Ok(None)` idle, `Ok(Some((n, crc)))` active.
pub fn parse_journal_word(w: u64) -> std::result::Result<Option<(usize, u32)>, String> {
    if w == 0 {
        return Ok(None);
    }
    let n = ((w >> WORD_NREC_SHIFT) & 0xffff) as usize;
    if w >> WORD_TAG_SHIFT != JOURNAL_TAG || n == 0 || n > JOURNAL_MAX_RECS {
        return Err(format!("journal header word {w:#x} is not valid"));
    }
    Ok(Some((n, w as u32)))
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // Tests build their own values.
mod tests {
    use super::*;

    #[test]
    fn journal_word_roundtrip() {
        assert_eq!(JOURNAL_MAX_RECS, 252);
        for n in [1, 2, 100, JOURNAL_MAX_RECS] {
            let recs: Vec<u8> = (0..n * JOURNAL_REC_SIZE as usize)
                .map(|i| i as u8)
                .collect();
            let w = journal_word(n, &recs);
            assert_eq!(w >> 48, 0x4A4E);
            assert_eq!(parse_journal_word(w), Ok(Some((n, crc(&recs)))));
        }
        // No records, too many, or another tag: not a valid header.
        assert!(parse_journal_word(journal_word(0, &[])).is_err());
        assert!(parse_journal_word(journal_word(JOURNAL_MAX_RECS + 1, &[])).is_err());
        assert!(parse_journal_word((0x4A4F << 48) | (1 << 32)).is_err());
    }
}
