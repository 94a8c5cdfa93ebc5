//! The free list saved on PM at a clean unmount (docs/FORMAT.md): written by
//! unmount and mkfs, read by the next mount instead of a scan.

use crate::addr::BlockNo;
use crate::format::{get_u64, Geometry, FREELIST_EXT_OFF, FREELIST_MAGIC};
use crate::space::Run;
use crate::vol::Vol;
/// The free list saved at the last clean unmount, if intact.
pub(crate) fn read_saved_freelist(pm: &Vol, geo: &Geometry) -> Option<Vec<Run>> {
    let base = BlockNo(geo.freelist_start).off();
    if pm.read_u64(base) != FREELIST_MAGIC {
        return None;
    }
    let n = pm.read_u64(base + 8) as usize;
    if n > crate::format::freelist_capacity(geo) {
        return None;
    }
    let crc = pm.read_u64(base + 16) as u32;
    let mut bytes = vec![0u8; n * 16];
    pm.read(base + FREELIST_EXT_OFF, &mut bytes);
    if crate::format::crc(&bytes) != crc {
        return None;
    }
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let s = get_u64(&bytes, i * 16);
        let l = get_u64(&bytes, i * 16 + 8);
        if l == 0 || !geo.is_data_block(s) || !geo.is_data_block(s + l - 1) {
            return None;
        }
        v.push((s, l));
    }
    Some(v)
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
