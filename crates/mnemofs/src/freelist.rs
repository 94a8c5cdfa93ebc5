//! The free list saved on PM at a clean unmount (docs/FORMAT.md): written by
//! unmount and mkfs, read by the next mount instead of a scan.

// Values read from PM are untrusted: arithmetic on them is checked (checked_*,
// saturating_* where an out-of-range result is refused later), enforced here.
#![deny(clippy::arithmetic_side_effects)]

use crate::addr::BlockNo;
use crate::format::{
    get_u64, Geometry, FREELIST_EXT_LEN_OFF, FREELIST_EXT_OFF, FREELIST_EXT_SIZE,
    FREELIST_EXT_START_OFF, FREELIST_MAGIC,
};

/// Bytes of one saved extent.
const EXT: usize = FREELIST_EXT_SIZE as usize;
use crate::space::Run;
use crate::vol::Vol;
/// The free list saved at the last clean unmount: `Ok(None)` when none is saved
/// (no magic, or a checksum that does not match: a save torn by a crash), the
/// extents sorted by start when it is intact, `Err` naming the extent when a
/// checksum-valid list is impossible (an extent outside the data area, or two that
/// overlap).
pub(crate) fn read_saved_freelist(
    pm: &Vol,
    geo: &Geometry,
) -> std::result::Result<Option<Vec<Run>>, String> {
    let base = BlockNo(geo.freelist_start).off();
    if pm.read_u64(base) != FREELIST_MAGIC {
        return Ok(None);
    }
    let n = pm.read_u64(base + 8);
    let cap = crate::format::freelist_capacity(geo);
    if n > cap as u64 {
        return Err(format!(
            "saved free list at block {}: {n} extents, more than its {cap}",
            geo.freelist_start
        ));
    }
    // At most `cap` extents: they fit the free-list blocks.
    let n = n as usize;
    let crc = pm.read_u64(base + 16) as u32;
    let mut bytes = vec![0u8; n.saturating_mul(EXT)];
    pm.read(base + FREELIST_EXT_OFF, &mut bytes);
    if crate::format::crc(&bytes) != crc {
        return Ok(None);
    }
    let mut v = Vec::with_capacity(n);
    for (i, e) in bytes.chunks_exact(EXT).enumerate() {
        let s = get_u64(e, FREELIST_EXT_START_OFF);
        let l = get_u64(e, FREELIST_EXT_LEN_OFF);
        let inside = geo.is_data_run(s, l);
        if !inside {
            return Err(format!(
                "saved free list: extent {i} (blocks {s}+{l}) is not inside the data area"
            ));
        }
        v.push((s, l));
    }
    v.sort_unstable();
    for w in v.windows(2) {
        // In the data area, so the sum cannot saturate.
        if w[0].0.saturating_add(w[0].1) > w[1].0 {
            return Err(format!(
                "saved free list: extents {}+{} and {}+{} overlap",
                w[0].0, w[0].1, w[1].0, w[1].1
            ));
        }
    }
    Ok(Some(v))
}

/// The first block of `owned` that lies in one of the sorted, disjoint `free` runs.
pub(crate) fn first_owned_free(free: &[Run], owned: impl Iterator<Item = u64>) -> Option<u64> {
    owned.into_iter().find(|&b| {
        let i = free.partition_point(|r| r.0 <= b);
        // free[i - 1] is the last run starting at or before `b`.
        i.checked_sub(1)
            .and_then(|j| free.get(j))
            .is_some_and(|r| b.saturating_sub(r.0) < r.1)
    })
}

/// Saves the free list (clean unmount). Returns false when it does not fit (the next
/// mount then rebuilds it by scanning).
pub(crate) fn save_freelist(pm: &Vol, geo: &Geometry, runs: &[Run]) -> bool {
    if runs.len() > crate::format::freelist_capacity(geo) {
        return false;
    }
    let base = BlockNo(geo.freelist_start).off();
    let mut bytes = vec![0u8; runs.len().saturating_mul(EXT)];
    for (e, &(s, l)) in bytes.chunks_exact_mut(EXT).zip(runs) {
        crate::format::put_u64(e, FREELIST_EXT_START_OFF, s);
        crate::format::put_u64(e, FREELIST_EXT_LEN_OFF, l);
    }
    pm.write(base + FREELIST_EXT_OFF, &bytes);
    let mut hdr = [0u8; 24];
    crate::format::put_u64(&mut hdr, 0, FREELIST_MAGIC);
    crate::format::put_u64(&mut hdr, 8, runs.len() as u64);
    crate::format::put_u64(&mut hdr, 16, crate::format::crc(&bytes) as u64);
    pm.write(base, &hdr);
    pm.flush(base, FREELIST_EXT_OFF.saturating_add(bytes.len() as u64));
    true
}
