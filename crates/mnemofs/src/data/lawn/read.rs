//! LAWN's part of the read path: zone slices newer than the file page, copied
//! over what was read from the page.

use crate::addr::page_start;
use crate::types::Ino;
use crate::vol::Vol;
use std::sync::atomic::Ordering;

use super::*;

impl LawnCore {
    /// Copies the zone slices of page `pgoff` (stored in `block`) that fall into
    /// `[lo, lo + out.len())` of the file over `out`.
    pub fn overlay(&self, pm: &Vol, ino: Ino, pgoff: u64, block: u64, lo: u64, out: &mut [u8]) {
        if !self.may_hold.load(Ordering::Acquire) || self.subs.is_empty() {
            return;
        }
        let s = self.slot_size();
        let hi = lo + out.len() as u64;
        if out.is_empty() || hi <= page_start(pgoff) || lo >= page_start(pgoff + 1) {
            return;
        }
        let s0 = ((lo.max(page_start(pgoff)) - page_start(pgoff)) / s) as u32;
        let s1 = ((hi.min(page_start(pgoff + 1)) - 1 - page_start(pgoff)) / s) as u32;
        // LRU: a read counts as a use (the sub-zone lock is held for this line only).
        let runs = self.subs[self.sub_of(ino, pgoff)]
            .lock()
            .touch(ino, pgoff, s0, s1);
        for r in runs {
            if r.desc.block != block {
                continue;
            }
            let a = page_start(pgoff) + r.desc.first as u64 * s;
            let b = a + r.desc.count as u64 * s;
            let (x, y) = (a.max(lo), b.min(hi));
            if x >= y {
                continue;
            }
            pm.read(
                self.map.slot_off(r.slot) + (x - a),
                &mut out[(x - lo) as usize..(y - lo) as usize],
            );
        }
    }
}
