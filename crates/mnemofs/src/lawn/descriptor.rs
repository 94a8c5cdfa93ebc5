//! LAWN descriptors: 16 bytes each, one per zone slot (docs/FORMAT.md, "LAWN zone").
//!
//! A descriptor at slot `s` says: the slices `first .. first + count` of page `pgoff`
//! of inode `ino`, *as that page is stored in data block `block`*, are held in zone
//! slots `s .. s + count`, and that copy is the newest. All zero means clear.
//!
//! ```text
//! word 0 (bytes 0..8):  ino (bits 0..32) | pgoff (bits 32..64)
//! word 1 (bytes 8..16): block (bits 0..40) | first (40..46) | count-1 (46..52)
//!                       | check (52..64) = 1 + crc32(word0 ‖ word1 bits 0..52) % 4095
//! ```
//!
//! Descriptors are set and cleared with one 16-byte non-temporal store ([`store`]),
//! and validity does not depend on those 16 bytes persisting together: `ino` is
//! never 0 and `check` is never 0, so a descriptor torn between its two 8-byte
//! halves (one half new, the other still zero) never decodes as valid, which is
//! exactly the state on one side of every transition (a descriptor only ever goes
//! clear → set → clear). The crash explorer's `--tear-16` modes check this by
//! persisting either half alone.

use crate::format::crc;
use pm::Pm;

/// Sets (or, with 0, clears) the descriptor at `off`: one 16-byte non-temporal store
/// (`movntdq`), durable at the caller's next fence. Cheaper than a cached 16-byte
/// atomic store with a flush: no read of the line, and the fence waits for 16
/// bytes, not a written-back line. Torn, it is still safe (see above).
#[inline]
pub fn store(pm: &Pm, off: u64, v: u128) {
    pm.store_u128_nt(off, v);
}

/// Largest block number a descriptor can name.
pub const MAX_BLOCK: u64 = (1 << 40) - 1;

/// A decoded, valid descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Desc {
    pub ino: u64,
    pub pgoff: u64,
    pub block: u64,
    /// First slice of the page covered.
    pub first: u32,
    /// Number of slices (and consecutive slots) covered, 1..=64.
    pub count: u32,
}

/// What 16 descriptor bytes say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded {
    Clear,
    Valid(Desc),
    /// Not zero and not a valid descriptor: torn or corrupt.
    Invalid,
}

fn check(w0: u64, w1_low: u64) -> u64 {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&w0.to_le_bytes());
    b[8..].copy_from_slice(&w1_low.to_le_bytes());
    1 + (crc(&b) as u64) % 4095
}

impl Desc {
    /// Whether the fields fit the encoding.
    pub fn encodable(&self) -> bool {
        self.ino >= 1
            && self.ino <= u32::MAX as u64
            && self.pgoff <= u32::MAX as u64
            && self.block <= MAX_BLOCK
            && self.first < 64
            && (1..=64).contains(&self.count)
    }

    /// The 16 bytes as one little-endian `u128` (word 0 in the low half).
    pub fn encode(&self) -> u128 {
        debug_assert!(self.encodable());
        let w0 = (self.ino & 0xffff_ffff) | (self.pgoff << 32);
        let low = (self.block & MAX_BLOCK)
            | ((self.first as u64 & 63) << 40)
            | (((self.count as u64 - 1) & 63) << 46);
        let w1 = low | (check(w0, low) << 52);
        (w0 as u128) | ((w1 as u128) << 64)
    }
}

/// Decodes 16 descriptor bytes.
pub fn decode(v: u128) -> Decoded {
    if v == 0 {
        return Decoded::Clear;
    }
    let w0 = v as u64;
    let w1 = (v >> 64) as u64;
    let low = w1 & ((1 << 52) - 1);
    if w1 >> 52 != check(w0, low) {
        return Decoded::Invalid;
    }
    let d = Desc {
        ino: w0 & 0xffff_ffff,
        pgoff: w0 >> 32,
        block: low & MAX_BLOCK,
        first: ((low >> 40) & 63) as u32,
        count: ((low >> 46) & 63) as u32 + 1,
    };
    if d.ino == 0 {
        return Decoded::Invalid;
    }
    Decoded::Valid(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d() -> Desc {
        Desc {
            ino: 77,
            pgoff: 123_456,
            block: 0xab_cdef_0123,
            first: 5,
            count: 64,
        }
    }

    #[test]
    fn roundtrip() {
        let x = d();
        assert!(x.encodable());
        assert_eq!(decode(x.encode()), Decoded::Valid(x));
        assert_eq!(decode(0), Decoded::Clear);
        let y = Desc {
            count: 1,
            first: 63,
            ..x
        };
        assert_eq!(decode(y.encode()), Decoded::Valid(y));
    }

    #[test]
    fn a_torn_descriptor_is_never_valid() {
        // Either 8-byte half alone (the other still zero), for many descriptors.
        for ino in 1..200u64 {
            let x = Desc {
                ino,
                pgoff: ino * 7,
                block: 1000 + ino,
                first: (ino % 60) as u32,
                count: 1 + (ino % 4) as u32,
            };
            let v = x.encode();
            let lo = v & (u64::MAX as u128);
            let hi = v & !(u64::MAX as u128);
            assert_eq!(decode(lo), Decoded::Invalid);
            assert_eq!(decode(hi), Decoded::Invalid);
        }
    }

    #[test]
    fn flipped_bits_are_detected() {
        let v = d().encode();
        let mut caught = 0;
        for bit in 0..128 {
            if decode(v ^ (1u128 << bit)) != Decoded::Valid(d()) {
                caught += 1;
            }
        }
        assert_eq!(caught, 128);
        assert!(!Desc { ino: 0, ..d() }.encodable());
        assert!(!Desc { count: 65, ..d() }.encodable());
    }
}
