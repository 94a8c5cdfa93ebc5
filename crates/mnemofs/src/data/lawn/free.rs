//! LAWN's part of the invalidation point: before a data block is freed, every
//! descriptor that shadows it is cleared (persisted), so that a reused block can
//! never match a stale descriptor.

use crate::bugs::{self, Bug};
use crate::space::Run;
use crate::vol::Vol;
use std::sync::atomic::Ordering;
use zone::RunInfo;

use super::*;

impl LawnCore {
    /// Before data blocks are freed: clears (persisted) every descriptor that shadows
    /// one of them, so that a block reused later can never match a stale descriptor.
    /// The caller has committed the entries that unmapped the blocks.
    pub fn before_free(&self, pm: &Vol, freed: &[Run]) {
        if !self.may_hold.load(Ordering::Acquire) || freed.is_empty() {
            return;
        }
        for sub in &self.subs {
            let mut z = sub.lock();
            if z.runs() == 0 {
                continue;
            }
            let mut gone: Vec<RunInfo> = Vec::new();
            for &(s, l) in freed {
                for b in s..s + l {
                    if let Some((ino, pg)) = z.page_of_block(b) {
                        gone.extend(
                            z.page_runs(ino, pg)
                                .into_iter()
                                .filter(|r| r.desc.block == b),
                        );
                    }
                }
            }
            if gone.is_empty() {
                continue;
            }
            if !bugs::on(Bug::LawnDescriptorKeptOnReuse) {
                for r in &gone {
                    let off = self.map.desc_off(r.slot);
                    descriptor::store(pm, self.desc_store, off, 0);
                }
            }
            // Fence: the descriptors of the freed blocks are clear on PM before the
            // blocks (and these slots) can be reused.
            pm.fence();
            for r in gone {
                z.remove(r.desc.ino, r.desc.pgoff, r.desc.first);
            }
        }
    }
}
