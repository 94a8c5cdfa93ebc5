//! LAWN descriptors: 16 bytes each, one per zone slot (docs/FORMAT.md, "LAWN zone").
//!
//! A descriptor at slot `s` says: the slices `first .. first + count` of page `pgoff`
//! of inode `ino`, *as that page is stored in data block `block`*, are held in zone
//! slots `s .. s + count`, and that copy is the newest. All zero means clear.
//!
//! ```text
//! word 0 (bytes 0..8):  ino (bits 0..32) | pgoff (bits 32..64)
//! word 1 (bytes 8..16): block (bits 0..40) | first (40..46) | count-1 (46..52)
//!                       | check (52..64) = 1 + fmix64(word0 * K + word1 bits 0..52) % 4095
//! ```
//!
//! Descriptors are set and cleared with one 16-byte store ([`store`]: non-temporal,
//! or cached and written back, whichever is cheaper on the machine), and validity
//! does not depend on those 16 bytes persisting together: `ino` is
//! never 0 and `check` is never 0, so a descriptor torn between its two 8-byte
//! halves (one half new, the other still zero) never decodes as valid, which is
//! exactly the state on one side of every transition (a descriptor only ever goes
//! clear → set → clear). The crash explorer's `--tear-16` modes check this by
//! persisting either half alone.

use crate::addr::PmOff;
use crate::vol::Vol;
use pm::Store16;

/// Sets (or, with 0, clears) the descriptor at `off`, durable at the caller's next
/// fence: one 16-byte store, non-temporal or cached and written back, as `kind` says
/// (`LawnCore::desc_store`, measured at mount). Torn, either is still safe (see
/// above).
#[inline]
pub fn store(pm: &Vol, kind: Store16, off: PmOff, v: u128) {
    pm.store_u128_durable(kind, off, v);
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

/// The 12-bit check of a descriptor (never 0): murmur3's 64-bit finalizer over
/// `word0 * K + word1_low` (K odd), reduced to `1..=4095`. A change of one or two of
/// the 116 described bits always changes the finalized word (multiplying by an odd
/// K is a bijection, and no `±2^i * K` equals `∓2^j`; the finalizer is a bijection);
/// the reduction keeps 1 in 4095 of such changes undetected, as any 12-bit check
/// must. Seven multiply/shift steps instead of a table-driven CRC on every LAWN
/// write.
fn check(w0: u64, w1_low: u64) -> u64 {
    1 + mix(w0, w1_low) % 4095
}

/// The finalized word the check is reduced from.
fn mix(w0: u64, w1_low: u64) -> u64 {
    let mut h = w0.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(w1_low);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
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
    fn check_matches_format_md() {
        // The worked examples of docs/FORMAT.md §2.9.
        let a = Desc {
            ino: 1,
            pgoff: 0,
            block: 1,
            first: 0,
            count: 1,
        };
        assert_eq!(a.encode(), 0x1 | (0xab40_0000_0000_0001u128 << 64));
        assert_eq!(
            d().encode(),
            0x1_e240_0000_004d | (0x13ff_c5ab_cdef_0123u128 << 64)
        );
    }

    #[test]
    fn one_or_two_changed_bits_always_change_the_mixed_word() {
        // The 116 described bits: word 0 and the low 52 bits of word 1.
        let bit = |i: u32| -> (u64, u64) {
            if i < 64 {
                (1 << i, 0)
            } else {
                (0, 1 << (i - 64))
            }
        };
        for x in [
            d(),
            Desc {
                ino: 1,
                pgoff: 0,
                block: 1,
                first: 0,
                count: 1,
            },
        ] {
            let v = x.encode();
            let (w0, low) = (v as u64, (v >> 64) as u64 & ((1 << 52) - 1));
            let m = mix(w0, low);
            for i in 0..116 {
                let (a, b) = bit(i);
                assert_ne!(mix(w0 ^ a, low ^ b), m, "bit {i}");
                for j in i + 1..116 {
                    let (c, e) = bit(j);
                    assert_ne!(mix(w0 ^ a ^ c, low ^ b ^ e), m, "bits {i} {j}");
                }
            }
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
