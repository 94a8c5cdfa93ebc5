//! Devices of a volume (docs/FORMAT.md §2.10): the header every device carries and
//! the device table beside the superblock.
//!
//! A volume joins 1 to [`MAX_DEVICES`] devices into one global block space (MBS-LVM's
//! cluster manager): device 0 from its block 0 on (it holds the superblock and every
//! metadata area), each later device from its block 1 on — its block 0 holds only its
//! header and lies outside the global space.
//!
//! Device header, 64 bytes at byte [`DEV_HDR_OFF`] of the device's own block 0:
//!
//! ```text
//!  off  size  field
//!    0     8  magic "MNEMODEV"
//!    8     4  version (1)
//!   12     4  index of the device in the volume (0..count)
//!   16    16  volume UUID
//!   32     4  count: devices in the volume
//!   36     4  node: NUMA node at mkfs (u32::MAX: unknown)
//!   40     8  blocks: blocks of the device in the global space
//!   48    12  reserved (zero)
//!   60     4  CRC-32 of [0, 60)
//! ```
//!
//! Device table, at byte [`TABLE_OFF`] of superblock block 0 and of its replica
//! (block 1): magic "MNEMOVOL" (8), volume UUID (16), count (u32), reserved (u32),
//! then `count` entries of 16 bytes (blocks u64, node u32, inodes u32: the slots of
//! the inode table at the start of the device, format version 6, zero for device 0
//! and in version 5), then the CRC-32 of everything before it (u32).

use super::bytes::{crc, get_u32, get_u64, put_u32, put_u64};

/// Most devices in one volume.
pub const MAX_DEVICES: usize = pm::MAX_DEVICES;
/// Byte offset of the device header in the device's block 0.
pub const DEV_HDR_OFF: u64 = 2048;
/// Bytes of an encoded device header.
pub const DEV_HDR_SIZE: usize = 64;
/// Byte offset of the device table in the superblock blocks.
pub const TABLE_OFF: u64 = 1024;
/// Device header magic.
pub const DEV_MAGIC: [u8; 8] = *b"MNEMODEV";
/// Device table magic.
pub const TABLE_MAGIC: [u8; 8] = *b"MNEMOVOL";
/// Device header version.
pub const DEV_VERSION: u32 = 1;
/// Node value meaning "not known".
pub const NODE_UNKNOWN: u32 = u32::MAX;

/// The header of one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceHeader {
    /// The volume's UUID (the same on every device of the volume).
    pub uuid: [u8; 16],
    /// This device's place in the volume.
    pub index: u32,
    /// Devices in the volume.
    pub count: u32,
    /// NUMA node recorded at mkfs ([`NODE_UNKNOWN`] if none).
    pub node: u32,
    /// Blocks of this device in the global space.
    pub blocks: u64,
}

impl DeviceHeader {
    /// The 64 bytes stored at [`DEV_HDR_OFF`].
    pub fn encode(&self) -> [u8; DEV_HDR_SIZE] {
        let mut b = [0u8; DEV_HDR_SIZE];
        b[0..8].copy_from_slice(&DEV_MAGIC);
        put_u32(&mut b, 8, DEV_VERSION);
        put_u32(&mut b, 12, self.index);
        b[16..32].copy_from_slice(&self.uuid);
        put_u32(&mut b, 32, self.count);
        put_u32(&mut b, 36, self.node);
        put_u64(&mut b, 40, self.blocks);
        let c = crc(&b[..60]);
        put_u32(&mut b, 60, c);
        b
    }

    /// Decodes a header; `Ok(None)` when the bytes hold no header at all (no magic:
    /// an image of an older format, or not a mnemofs device).
    pub fn decode(b: &[u8]) -> Result<Option<DeviceHeader>, String> {
        let Some(b) = b.get(..DEV_HDR_SIZE) else {
            return Err("short device header".into());
        };
        if b[0..8] != DEV_MAGIC {
            return Ok(None);
        }
        if get_u32(b, 60) != crc(&b[..60]) {
            return Err("device header checksum mismatch".into());
        }
        let version = get_u32(b, 8);
        if version != DEV_VERSION {
            return Err(format!("unsupported device header version {version}"));
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b[16..32]);
        let h = DeviceHeader {
            uuid,
            index: get_u32(b, 12),
            count: get_u32(b, 32),
            node: get_u32(b, 36),
            blocks: get_u64(b, 40),
        };
        if h.count == 0 || h.count as usize > MAX_DEVICES || h.index >= h.count {
            return Err(format!(
                "device header names device {} of {} (at most {MAX_DEVICES})",
                h.index, h.count
            ));
        }
        if h.blocks == 0 {
            return Err("device header gives the device no blocks".into());
        }
        Ok(Some(h))
    }
}

/// One entry of the device table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DeviceEntry {
    /// Blocks of the device in the global space.
    pub blocks: u64,
    /// NUMA node recorded at mkfs ([`NODE_UNKNOWN`] if none).
    pub node: u32,
    /// Inode slots of the table at the start of the device (0 for device 0, whose
    /// inodes are in the metadata area).
    pub inodes: u32,
}

/// The device table kept beside the superblock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceTable {
    /// The volume's UUID.
    pub uuid: [u8; 16],
    /// The devices, in index order.
    pub devices: Vec<DeviceEntry>,
}

/// Bytes of an encoded table of `n` devices.
pub fn table_size(n: usize) -> usize {
    // n ≤ MAX_DEVICES (8): the sum is at most 164.
    n.saturating_mul(16).saturating_add(36)
}

impl DeviceTable {
    /// The encoded table.
    pub fn encode(&self) -> Vec<u8> {
        let n = self.devices.len();
        let mut b = vec![0u8; table_size(n)];
        b[0..8].copy_from_slice(&TABLE_MAGIC);
        b[8..24].copy_from_slice(&self.uuid);
        put_u32(&mut b, 24, n as u32);
        for (i, d) in self.devices.iter().enumerate() {
            let at = 32usize.saturating_add(i.saturating_mul(16));
            put_u64(&mut b, at, d.blocks);
            put_u32(&mut b, at.saturating_add(8), d.node);
            put_u32(&mut b, at.saturating_add(12), d.inodes);
        }
        let end = table_size(n).saturating_sub(4);
        let c = crc(&b[..end]);
        put_u32(&mut b, end, c);
        b
    }

    /// Decodes a table from the bytes at [`TABLE_OFF`] (at least
    /// `table_size(MAX_DEVICES)` of them); `Ok(None)` when there is none (no magic).
    pub fn decode(b: &[u8]) -> Result<Option<DeviceTable>, String> {
        if b.len() < table_size(MAX_DEVICES) {
            return Err("short device table".into());
        }
        if b[0..8] != TABLE_MAGIC {
            return Ok(None);
        }
        let n = get_u32(b, 24) as usize;
        if n == 0 || n > MAX_DEVICES {
            return Err(format!(
                "device table lists {n} devices (1..={MAX_DEVICES})"
            ));
        }
        let end = table_size(n).saturating_sub(4);
        if get_u32(b, end) != crc(&b[..end]) {
            return Err("device table checksum mismatch".into());
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b[8..24]);
        let devices = (0..n)
            .map(|i| {
                let at = 32usize.saturating_add(i.saturating_mul(16));
                DeviceEntry {
                    blocks: get_u64(b, at),
                    node: get_u32(b, at.saturating_add(8)),
                    inodes: get_u32(b, at.saturating_add(12)),
                }
            })
            .collect::<Vec<_>>();
        if devices.iter().any(|d| d.blocks == 0) {
            return Err("device table gives a device no blocks".into());
        }
        if devices[0].inodes != 0 {
            return Err("device table gives device 0 an inode table of its own".into());
        }
        Ok(Some(DeviceTable { uuid, devices }))
    }
}

/// A volume UUID as text (`8-4-4-4-12` hex digits).
pub fn uuid_text(u: &[u8; 16]) -> String {
    let h: Vec<String> = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_refuses_damage() {
        let h = DeviceHeader {
            uuid: [7; 16],
            index: 2,
            count: 3,
            node: 1,
            blocks: 4096,
        };
        let b = h.encode();
        assert_eq!(DeviceHeader::decode(&b), Ok(Some(h)));
        let mut bad = b;
        bad[41] ^= 1;
        assert!(DeviceHeader::decode(&bad).is_err());
        assert_eq!(DeviceHeader::decode(&[0u8; 64]), Ok(None));
        let wrong = DeviceHeader { index: 3, ..h }.encode();
        assert!(DeviceHeader::decode(&wrong).is_err());
    }

    #[test]
    fn table_round_trips_and_refuses_damage() {
        let t = DeviceTable {
            uuid: [9; 16],
            devices: vec![
                DeviceEntry {
                    blocks: 100,
                    node: 0,
                    inodes: 0,
                },
                DeviceEntry {
                    blocks: 200,
                    node: NODE_UNKNOWN,
                    inodes: 64,
                },
            ],
        };
        let mut b = t.encode();
        b.resize(table_size(MAX_DEVICES), 0);
        assert_eq!(DeviceTable::decode(&b), Ok(Some(t.clone())));
        b[33] ^= 1;
        assert!(DeviceTable::decode(&b).is_err());
        assert_eq!(DeviceTable::decode(&[0u8; 200]), Ok(None));
        let mut many = t.encode();
        many.resize(table_size(MAX_DEVICES), 0);
        put_u32(&mut many, 24, 9);
        assert!(DeviceTable::decode(&many).is_err());
        assert_eq!(
            uuid_text(&[0xab; 16]),
            "abababab-abab-abab-abab-abababababab"
        );
    }
}
