//! LAWN descriptors: 16 bytes each, one per zone slot (docs/FORMAT.md, "LAWN zone").
//!
//! A descriptor at slot `s` says: the slices `first .. first + count` of a page of
//! inode `ino`, *as that page is stored in data block `block`*, are held in zone
//! slots `s .. s + count`, and that copy is the newest. All zero means clear. Two
//! formats ([`Format`]), by the image's format version:
//!
//! ```text
//! sum (version 7):
//! word 0 (bytes 0..8):  ino (bits 0..32) | sum (bits 32..64)
//! page (versions 3-6):
//! word 0 (bytes 0..8):  ino (bits 0..32) | pgoff (bits 32..64)
//! both:
//! word 1 (bytes 8..16): block (bits 0..40) | first (40..46) | count-1 (46..52)
//!                       | check (52..64) = 1 + fmix64(word0 * K + word1 bits 0..52) % 4095
//! ```
//!
//! `sum` is the CRC-32 of the page number and the run's `count` slots' bytes
//! ([`sum`]). It makes a run
//! whose slots did not all persist read as not written, so the slots and the
//! descriptor are stored and made durable by one fence (a zone write's commit), where
//! the page format needs a fence between them. The page a sum descriptor shadows is
//! the one its inode maps to `block` (a data block is mapped by one page at most),
//! found at recovery.
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

/// How an image's descriptors name the page they shadow (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Versions 3 to 6: the page number; the slots are durable before the
    /// descriptor is set (a fence between).
    Page,
    /// Version 7: the CRC-32 of the page number and the slots' bytes ([`sum`]); one
    /// fence for both.
    Sum,
}

impl Format {
    /// The format of an image of geometry `geo`.
    pub fn of(geo: &crate::format::Geometry) -> Format {
        if geo.lawn_sums {
            Format::Sum
        } else {
            Format::Page
        }
    }
}

/// The sum a descriptor of the sum format keeps of its run: CRC-32 (ISO-HDLC,
/// `crc32fast`, as every checksum of the format) of the page number `pgoff` (8 bytes,
/// little-endian) followed by the run's slot bytes. With the page in it, a
/// descriptor matches only the page it was written for, although it names only the
/// block: a block that moved to another page of the same file (a file's spare block,
/// reused by its next page CoW) never takes the run.
#[inline]
pub fn sum(pgoff: u64, bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&pgoff.to_le_bytes());
    h.update(bytes);
    h.finalize()
}

/// A run as the DRAM side knows it.
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

/// A valid descriptor as stored: its page (page format) or the sum of its page and
/// slots
/// (sum format).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stored {
    pub ino: u64,
    pub key: Key,
    pub block: u64,
    pub first: u32,
    pub count: u32,
}

/// What word 0 holds beside the inode number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    /// The page number (page format).
    Page(u64),
    /// The CRC-32 of the run's page number and slot bytes ([`sum`]; sum format).
    Sum(u32),
}

impl Stored {
    /// The run, shadowing page `pgoff` of its inode.
    pub fn at_page(&self, pgoff: u64) -> Desc {
        Desc {
            ino: self.ino,
            pgoff,
            block: self.block,
            first: self.first,
            count: self.count,
        }
    }
}

/// What 16 descriptor bytes say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded {
    Clear,
    Valid(Stored),
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

    /// The 16 bytes in the page format as one little-endian `u128` (word 0 in the
    /// low half).
    pub fn encode(&self) -> u128 {
        self.encode_word0((self.ino & 0xffff_ffff) | (self.pgoff << 32))
    }

    /// The 16 bytes in the sum format, `sum` being [`sum`] of the run's page number
    /// and slot bytes.
    pub fn encode_sum(&self, sum: u32) -> u128 {
        self.encode_word0((self.ino & 0xffff_ffff) | ((sum as u64) << 32))
    }

    /// The 16 bytes in `fmt`: the page format, or the sum format with `sum` (only
    /// then computed).
    #[inline]
    pub fn encode_as(&self, fmt: Format, sum: impl FnOnce() -> u32) -> u128 {
        match fmt {
            Format::Page => self.encode(),
            Format::Sum => self.encode_sum(sum()),
        }
    }

    fn encode_word0(&self, w0: u64) -> u128 {
        debug_assert!(self.encodable());
        let low = (self.block & MAX_BLOCK)
            | ((self.first as u64 & 63) << 40)
            | (((self.count as u64 - 1) & 63) << 46);
        let w1 = low | (check(w0, low) << 52);
        (w0 as u128) | ((w1 as u128) << 64)
    }
}

/// Decodes 16 descriptor bytes of format `fmt`.
pub fn decode(v: u128, fmt: Format) -> Decoded {
    if v == 0 {
        return Decoded::Clear;
    }
    let w0 = v as u64;
    let w1 = (v >> 64) as u64;
    let low = w1 & ((1 << 52) - 1);
    if w1 >> 52 != check(w0, low) {
        return Decoded::Invalid;
    }
    let d = Stored {
        ino: w0 & 0xffff_ffff,
        key: match fmt {
            Format::Page => Key::Page(w0 >> 32),
            Format::Sum => Key::Sum((w0 >> 32) as u32),
        },
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

    fn stored(x: Desc, key: Key) -> Decoded {
        Decoded::Valid(Stored {
            ino: x.ino,
            key,
            block: x.block,
            first: x.first,
            count: x.count,
        })
    }

    #[test]
    fn roundtrip() {
        let x = d();
        assert!(x.encodable());
        assert_eq!(
            decode(x.encode(), Format::Page),
            stored(x, Key::Page(x.pgoff))
        );
        assert_eq!(decode(0, Format::Page), Decoded::Clear);
        assert_eq!(decode(0, Format::Sum), Decoded::Clear);
        let y = Desc {
            count: 1,
            first: 63,
            ..x
        };
        assert_eq!(
            decode(y.encode(), Format::Page),
            stored(y, Key::Page(y.pgoff))
        );
        for s in [0, 1, 0xdead_beef, u32::MAX] {
            assert_eq!(decode(y.encode_sum(s), Format::Sum), stored(y, Key::Sum(s)));
            assert_eq!(
                decode(y.encode_as(Format::Sum, || s), Format::Sum),
                stored(y, Key::Sum(s))
            );
            if let Decoded::Valid(v) = decode(x.encode_sum(s), Format::Sum) {
                assert_eq!(v.at_page(x.pgoff), x);
            }
        }
        assert_eq!(y.encode_as(Format::Page, || unreachable!()), y.encode());
    }

    #[test]
    fn the_sum_is_crc32_of_the_page_and_the_slot_bytes() {
        // CRC-32/ISO-HDLC of the 8-byte page number and the bytes (the format's CRC:
        // its check value is that of "123456789"), and a change of one byte or of the
        // page changes it.
        assert_eq!(crc32fast::hash(b"123456789"), 0xcbf4_3926);
        let mut b = [7u8; 128];
        let mut whole = 5u64.to_le_bytes().to_vec();
        whole.extend_from_slice(&b);
        let a = sum(5, &b);
        assert_eq!(a, crc32fast::hash(&whole));
        assert_ne!(sum(6, &b), a);
        b[100] = 8;
        assert_ne!(sum(5, &b), a);
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
            for (v, fmt) in [
                (x.encode(), Format::Page),
                (x.encode_sum(0), Format::Sum),
                (
                    x.encode_sum((ino as u32).wrapping_mul(0x9e37_79b9)),
                    Format::Sum,
                ),
            ] {
                let lo = v & (u64::MAX as u128);
                let hi = v & !(u64::MAX as u128);
                assert_eq!(decode(lo, fmt), Decoded::Invalid);
                assert_eq!(decode(hi, fmt), Decoded::Invalid);
            }
        }
    }

    #[test]
    fn check_matches_format_md() {
        // The worked examples of docs/FORMAT.md §2.9, the page format's first.
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
        // The sum format's.
        let s = sum(0, &[0u8; 64]);
        assert_eq!(s, 0x0fc2_bb52);
        assert_eq!(
            a.encode_sum(s),
            0x0fc2_bb52_0000_0001 | (0x79b0_0000_0000_0001u128 << 64)
        );
        let b = Desc { count: 2, ..d() };
        let s = sum(123_456, &[0xab; 128]);
        assert_eq!(s, 0xc0dd_460f);
        assert_eq!(
            b.encode_sum(s),
            0xc0dd_460f_0000_004d | (0x95f0_45ab_cdef_0123u128 << 64)
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
        for (v, fmt, key) in [
            (d().encode(), Format::Page, Key::Page(d().pgoff)),
            (
                d().encode_sum(0x1234_5678),
                Format::Sum,
                Key::Sum(0x1234_5678),
            ),
        ] {
            let mut caught = 0;
            for bit in 0..128 {
                if decode(v ^ (1u128 << bit), fmt) != stored(d(), key) {
                    caught += 1;
                }
            }
            assert_eq!(caught, 128);
        }
        assert!(!Desc { ino: 0, ..d() }.encodable());
        assert!(!Desc { count: 65, ..d() }.encodable());
    }
}
