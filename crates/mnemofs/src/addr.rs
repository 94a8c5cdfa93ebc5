//! Addresses on the volume: a block number ([`BlockNo`]) and a byte offset
//! ([`PmOff`]) are distinct types, and [`BlockNo::off`] is the one conversion from
//! the first to the second. The engine addresses PM only with a `PmOff`
//! (`vol::Vol` takes nothing else); block numbers stay plain `u64` only where they
//! are stored — in on-PM codecs and in DRAM indexes packed into atomics — and become
//! a `BlockNo` where they are used to address PM.
//!
//! File positions (a byte of a file, a page index within a file) are not PM
//! addresses; [`page_of`] and [`page_start`] convert between them.

use std::fmt;
use std::ops::Add;

/// Bytes per block: data pages, log pages, and the unit of every on-PM region.
pub const BLOCK: u64 = 4096;

/// A block number in the volume's global block space.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockNo(pub u64);

/// A byte offset in the volume's global offset space.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PmOff(pub u64);

impl BlockNo {
    /// Where the block starts: the one block-to-offset conversion.
    #[inline]
    pub const fn off(self) -> PmOff {
        PmOff(self.0.saturating_mul(BLOCK))
    }

    /// The byte `within` bytes into the block.
    #[inline]
    pub const fn at(self, within: u64) -> PmOff {
        PmOff(self.off().0.saturating_add(within))
    }
}

impl PmOff {
    /// Offset 0 (the primary superblock).
    pub const ZERO: PmOff = PmOff(0);

    /// The offset as a number (for the `pm` layer and for codecs).
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The block holding this byte.
    #[inline]
    pub const fn block(self) -> BlockNo {
        BlockNo(self.0 / BLOCK)
    }

    /// Bytes from `earlier` to this offset (`earlier` must not lie after it).
    #[inline]
    pub const fn since(self, earlier: PmOff) -> u64 {
        self.0 - earlier.0
    }
}

impl Add<u64> for PmOff {
    type Output = PmOff;
    #[inline]
    fn add(self, n: u64) -> PmOff {
        PmOff(self.0.saturating_add(n))
    }
}

impl fmt::Display for PmOff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for BlockNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The page of a file that holds byte `pos` of the file.
#[inline]
pub const fn page_of(pos: u64) -> u64 {
    pos / BLOCK
}

/// The first byte of page `pg` of a file.
#[inline]
pub const fn page_start(pg: u64) -> u64 {
    pg * BLOCK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_conversion() {
        assert_eq!(BlockNo(3).off(), PmOff(3 * 4096));
        assert_eq!(BlockNo(3).at(17), PmOff(3 * 4096 + 17));
        assert_eq!(PmOff(3 * 4096 + 17).block(), BlockNo(3));
        assert_eq!((PmOff(10) + 6).since(PmOff(10)), 6);
        assert_eq!(page_of(page_start(9) + 4095), 9);
    }
}
