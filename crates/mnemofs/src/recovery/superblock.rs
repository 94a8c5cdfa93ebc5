//! Step 1 of recovery: the superblock, primary or replica.

use crate::addr::{BlockNo, PmOff};
use crate::error::{FsError, Result};
use crate::format::{Geometry, BLOCK, SB_REPLICA_BLOCK};
use crate::vol::Vol;
/// Reads and validates the superblock; repairs the primary from the replica.
pub(crate) fn read_superblock(pm: &Vol, problems: &mut Vec<String>) -> Result<Geometry> {
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
