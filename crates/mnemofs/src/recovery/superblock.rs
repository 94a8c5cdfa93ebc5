//! Step 1 of recovery: the superblock, primary or replica.

use crate::addr::{BlockNo, PmOff};
use crate::error::{FsError, Result};
use crate::format::{Geometry, BLOCK, SB_REPLICA_BLOCK, TABLE_OFF};
use crate::vol::Vol;
/// Reads and validates the superblock (primary, else replica) and the device table
/// beside it, against the devices the volume was assembled from.
pub(crate) fn read_superblock(pm: &Vol, problems: &mut Vec<String>) -> Result<Geometry> {
    let mut geo = read_geometry(pm, problems)?;
    read_devices(pm, &mut geo, problems)?;
    Ok(geo)
}

/// The device table (docs/FORMAT.md §2.10): primary, else replica; its devices
/// must be the volume's, part for part.
fn read_devices(pm: &Vol, geo: &mut Geometry, problems: &mut Vec<String>) -> Result<()> {
    let primary = crate::devices::read_table(pm, TABLE_OFF);
    let replica = crate::devices::read_table(pm, BlockNo(SB_REPLICA_BLOCK).at(TABLE_OFF).get());
    let table = match (primary, replica) {
        (Ok(a), Ok(b)) => {
            if a != b {
                problems.push("device table replica differs from the primary".into());
            }
            a.or(b)
        }
        (Ok(a), Err(e)) => {
            problems.push(format!("device table replica: {e}"));
            a
        }
        (Err(e), Ok(b)) => {
            problems.push(format!("primary device table: {e} (the replica is intact)"));
            b
        }
        (Err(e1), Err(e2)) => {
            return Err(FsError::Corrupt(format!(
                "primary device table: {e1}; replica: {e2}"
            )))
        }
    };
    let vol = pm.volume();
    let parts: Vec<u64> = (0..vol.device_count())
        .filter_map(|i| vol.device(i).map(|(_, _, len)| len / BLOCK))
        .collect();
    let blocks: Vec<u64> = match &table {
        Some(t) => t.devices.iter().map(|d| d.blocks).collect(),
        // Before version 5: one device, the whole image.
        None if geo.devices == 1 => vec![geo.total_blocks],
        None => {
            return Err(FsError::Corrupt(format!(
                "the superblock names {} devices but there is no device table",
                geo.devices
            )))
        }
    };
    if blocks.len() != geo.devices as usize {
        return Err(FsError::Corrupt(format!(
            "the superblock names {} devices, the device table {}",
            geo.devices,
            blocks.len()
        )));
    }
    // One device: the image may be larger than the volume it holds (the superblock
    // says how much of it is in use); several: each part as the table says.
    let fits = if parts.len() == 1 && blocks.len() == 1 {
        parts[0] >= blocks[0]
    } else {
        parts == blocks
    };
    if !fits {
        return Err(FsError::Volume(format!(
            "the volume's devices hold {parts:?} blocks, its device table says {blocks:?}"
        )));
    }
    geo.set_devices(&blocks)
        .map_err(|e| FsError::Corrupt(format!("device table: {e}")))?;
    if let Some(t) = &table {
        let inodes: Vec<u64> = t.devices.iter().map(|d| u64::from(d.inodes)).collect();
        geo.set_device_inodes(&inodes)
            .map_err(|e| FsError::Corrupt(format!("device table: {e}")))?;
    }
    Ok(())
}

/// Reads and validates the superblock; repairs the primary from the replica.
fn read_geometry(pm: &Vol, problems: &mut Vec<String>) -> Result<Geometry> {
    // Blocks 0 and 1 hold the two copies (the state word is in block 0).
    if pm.len() < 2 * BLOCK {
        return Err(FsError::NotMnemofs(format!(
            "{} bytes cannot hold a superblock and its replica",
            pm.len()
        )));
    }
    let mut b = [0u8; 128];
    pm.read(PmOff::ZERO, &mut b);
    let primary = Geometry::decode(&b, pm.len());
    let mut r = [0u8; 128];
    pm.read(BlockNo(SB_REPLICA_BLOCK).off(), &mut r);
    let replica = Geometry::decode(&r, pm.len());
    match (primary, replica) {
        (Ok(g), Ok(g2)) => {
            if g != g2 {
                problems.push("superblock replica differs from the primary".into());
            }
            Ok(g)
        }
        (Ok(g), Err(e)) => {
            problems.push(format!("superblock replica: {e}"));
            Ok(g)
        }
        (Err(e), Ok(g)) => {
            problems.push(format!("primary superblock: {e} (the replica is intact)"));
            Ok(g)
        }
        (Err(e1), Err(e2)) => {
            if b[0..8] != crate::format::MAGIC && r[0..8] != crate::format::MAGIC {
                Err(FsError::NotMnemofs(
                    "no mnemofs superblock (bad magic in primary and replica)".into(),
                ))
            } else {
                Err(FsError::Corrupt(format!(
                    "primary superblock: {e1}; replica: {e2}"
                )))
            }
        }
    }
}
