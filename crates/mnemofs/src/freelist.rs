//! The free list saved on PM at a clean unmount (docs/FORMAT.md): written by
//! unmount and mkfs, read by the next mount instead of a scan.

use crate::addr::BlockNo;
use crate::format::{get_u64, Geometry, FREELIST_EXT_OFF, FREELIST_MAGIC};
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
    let n = n as usize;
    let crc = pm.read_u64(base + 16) as u32;
    let mut bytes = vec![0u8; n * 16];
    pm.read(base + FREELIST_EXT_OFF, &mut bytes);
    if crate::format::crc(&bytes) != crc {
        return Ok(None);
    }
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let s = get_u64(&bytes, i * 16);
        let l = get_u64(&bytes, i * 16 + 8);
        let inside = l != 0
            && geo.is_data_block(s)
            && s.checked_add(l).is_some_and(|end| end <= geo.total_blocks);
        if !inside {
            return Err(format!(
                "saved free list: extent {i} (blocks {s}+{l}) is not inside the data area"
            ));
        }
        v.push((s, l));
    }
    v.sort_unstable();
    for w in v.windows(2) {
        // In the data area, so the sum cannot wrap.
        if w[0].0 + w[0].1 > w[1].0 {
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
        i > 0 && b - free[i - 1].0 < free[i - 1].1
    })
}

/// Saves the free list (clean unmount). Returns false when it does not fit (the next
/// mount then rebuilds it by scanning).
pub(crate) fn save_freelist(pm: &Vol, geo: &Geometry, runs: &[Run]) -> bool {
    if runs.len() > crate::format::freelist_capacity(geo) {
        return false;
    }
    let base = BlockNo(geo.freelist_start).off();
    let mut bytes = vec![0u8; runs.len() * 16];
    for (i, &(s, l)) in runs.iter().enumerate() {
        crate::format::put_u64(&mut bytes, i * 16, s);
        crate::format::put_u64(&mut bytes, i * 16 + 8, l);
    }
    pm.write(base + FREELIST_EXT_OFF, &bytes);
    let mut hdr = [0u8; 24];
    crate::format::put_u64(&mut hdr, 0, FREELIST_MAGIC);
    crate::format::put_u64(&mut hdr, 8, runs.len() as u64);
    crate::format::put_u64(&mut hdr, 16, crate::format::crc(&bytes) as u64);
    pm.write(base, &hdr);
    pm.flush(base, FREELIST_EXT_OFF + bytes.len() as u64);
    true
}
