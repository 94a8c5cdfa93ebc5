//! Little-endian field access and the CRC-32 every codec uses.

/// CRC-32/ISO-HDLC of `b` (`crc32fast::hash`; docs/FORMAT.md "Conventions").
pub fn crc(b: &[u8]) -> u32 {
    crc32fast::hash(b)
}

/// Writes `v` little-endian at `b[off..off + 8]`.
pub fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..][..8].copy_from_slice(&v.to_le_bytes());
}

/// Writes `v` little-endian at `b[off..off + 4]`.
pub fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..][..4].copy_from_slice(&v.to_le_bytes());
}

/// Reads the little-endian `u64` at `b[off..off + 8]`.
pub fn get_u64(b: &[u8], off: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[off..][..8]);
    u64::from_le_bytes(x)
}

/// Reads the little-endian `u32` at `b[off..off + 4]`.
pub fn get_u32(b: &[u8], off: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[off..][..4]);
    u32::from_le_bytes(x)
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // Tests build their own values.
mod tests {
    use super::*;

    #[test]
    fn little_endian_and_the_check_value() {
        let mut b = [0u8; 12];
        put_u64(&mut b, 0, 0x0102_0304_0506_0708);
        put_u32(&mut b, 8, 0x0a0b_0c0d);
        assert_eq!(b, [8, 7, 6, 5, 4, 3, 2, 1, 0xd, 0xc, 0xb, 0xa]);
        assert_eq!(get_u64(&b, 0), 0x0102_0304_0506_0708);
        assert_eq!(get_u32(&b, 8), 0x0a0b_0c0d);
        // The check value docs/FORMAT.md quotes.
        assert_eq!(crc(b"123456789"), 0xCBF4_3926);
    }
}
