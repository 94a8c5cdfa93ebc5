//! The LAWN write (papers/lawn Algorithm 1): slices to fresh zone slots, or to the
//! file in place when the zone holds the newest copy; one descriptor store is the
//! commit point (see the module doc of `lawn`). On images whose descriptors carry
//! the sum of their slots (format version 7), a zone write's slices and descriptor
//! are made durable by one fence.

use crate::addr::BlockNo;
use crate::bugs::{self, Bug};
use crate::format::BLOCK;
use crate::inode::Inode;
use crate::vol::Vol;
use descriptor::{Desc, Format};
use pm::Store16;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use zone::Overlap;

use super::*;

/// A LAWN write whose PM stores are all issued, the last (its descriptor's set or
/// clear, non-temporal) not yet fenced: [`Lawn::finish`] fences it, after the
/// caller's last bookkeeping of the write.
pub(crate) enum Staged {
    /// The slices went to a run of zone slots.
    Zone,
    /// The slices went to the file in place; the run that held their zone copy is
    /// forgotten, its slots still reserved until its cleared descriptor is durable.
    File { sub: usize, slot: u64, count: u64 },
}

impl Lawn {
    /// Completes a staged LAWN write: the fence that makes its descriptor store
    /// durable, then (file path) the slots of the forgotten run are freed.
    pub fn finish(&self, pm: &Vol, staged: Staged) {
        let core = &*self.core;
        // Fence: the descriptor set (zone path) or clear (file path) is durable
        // before the write returns, and a cleared run's slots are free only after
        // it (Algorithm 1, lines 6 and 11).
        pm.fence();
        if let Staged::File { sub, slot, count } = staged {
            core.subs[sub].lock().release(slot, count);
        }
    }

    /// Alternate writing of the slices of `[off, off + data.len())` (one page,
    /// mapped to `block`), up to the descriptor store, not yet fenced
    /// ([`Staged`]). Returns `None` when the sub-zone has no room (no descriptor and no
    /// file byte changed; at most free slots were written).
    pub fn write(
        &self,
        pm: &Vol,
        inode: &Arc<Inode>,
        pg: u64,
        block: u64,
        off: u64,
        data: &[u8],
    ) -> Option<Staged> {
        let core = &*self.core;
        if core.subs.is_empty() || block > descriptor::MAX_BLOCK {
            return None;
        }
        let ino = inode.ino;
        let s = core.slot_size();
        let in_pg = off % BLOCK;
        let s0 = (in_pg / s) as u32;
        let s1 = ((in_pg + data.len() as u64 - 1) / s) as u32;
        let sub = core.sub_of(ino, pg);
        let k = (s1 - s0 + 1) as u64;
        let desc = Desc {
            ino,
            pgoff: pg,
            block,
            first: s0,
            count: k as u32,
        };
        // The write-back thread finds the inode of a run through this map: register
        // it once per `Inode` (a freed inode's number may be reused by a new one),
        // before a run of it can exist, so the thread never locks the page of an
        // older inode that had this number while this write is under way.
        if !inode.smallwrite_registered.load(Ordering::Acquire) {
            core.handles.lock().insert(ino, Arc::downgrade(inode));
            inode.smallwrite_registered.store(true, Ordering::Release);
        }
        // Under the sub-zone lock: decide, issue the slices' non-temporal stores (to
        // fresh slots, or to the file when the zone holds the newest copy), then
        // record the new run (zone path) or forget the old one (file path; its slots
        // stay reserved until its cleared descriptor is durable) while those stores
        // drain; the lock's release is a plain store that does not wait for them
        // (`spin`), and the fences come after it. The caller's lock on the whole page
        // keeps readers, the write-back thread and block frees off this page until
        // the write returns, so a run recorded before its descriptor is set, or
        // forgotten before its descriptor is clear, is never observed.
        let mut z = core.subs[sub].lock();
        match z.overlap(ino, pg, s0, s1) {
            Overlap::Covered(r) => {
                // The newest copy is in the zone: write the file in place.
                let d = core.map.desc_off(r.slot);
                if core.desc_store == Store16::Cached {
                    // The cached store below needs the line: start its miss now.
                    pm.prefetch(d);
                }
                let lo = r.desc.first as u64 * s;
                let len = (r.desc.count as u64 * s) as usize;
                let at = (in_pg - lo) as usize;
                // The stores first, so that they drain while the run is forgotten.
                if at == 0 && data.len() == len {
                    pm.write_nt(BlockNo(block).at(lo), data);
                } else {
                    // Slices only partly overwritten keep their zone bytes.
                    let (mut small, mut big) = ([0u8; SMALL_BUF], Vec::new());
                    let buf = scratch(&mut small, &mut big, len);
                    pm.read(core.map.slot_off(r.slot), buf);
                    buf[at..at + data.len()].copy_from_slice(data);
                    pm.write_nt(BlockNo(block).at(lo), buf);
                }
                let gone = z.detach(ino, pg, r.desc.first);
                // `finish` frees the run's slots after both fences: its bitmap word
                // (a random one) arrives meanwhile.
                z.prefetch_used(r.slot);
                z.file_writes += 1;
                drop(z);
                debug_assert_eq!(gone, Some(r));
                // Fence: the file copy is durable before the descriptor that names the
                // zone copy as newest is cleared (Algorithm 1, line 9).
                pm.fence();
                descriptor::store(pm, core.desc_store, d, 0);
                Some(Staged::File {
                    sub,
                    slot: r.slot,
                    count: r.desc.count as u64,
                })
            }
            o => {
                if o == Overlap::Partial {
                    // Runs that only partly overlap: write them back first (no
                    // change of contents), so the new slices have no zone copy.
                    let v = z.runs_overlapping(ino, pg, s0, s1);
                    core.writeback_locked(pm, &mut z, &v);
                }
                // On a volume of several devices under `local` placement, slots on
                // the writer's node first; none there: any slot, and the thread is
                // asked for a chunk on this node (once, while the sub-zone can grow).
                let (slot, want_local) = if core.place.local_first {
                    let node = pm::thread_node();
                    match z.alloc_on(k, node) {
                        Some(s) => (Some(s), false),
                        None => (z.alloc(k), core.want_local(sub, node)),
                    }
                } else {
                    (z.alloc(k), false)
                };
                // (A sub-zone that can grow wakes the thread earlier, to grow it.)
                let wake_pct = if core.growable[sub].load(Ordering::Relaxed) {
                    chunks::GROW_PCT
                } else {
                    LOW_WATER_PCT
                };
                if (want_local || z.free_slots() * 100 < z.nslots * wake_pct)
                    && !core.kicked.load(Ordering::Relaxed)
                    && !core.kicked.swap(true, Ordering::AcqRel)
                {
                    // Woken outside the sub-zone lock (a mutex and maybe a futex
                    // call). Meanwhile the reserved slots stay ours, and the page's lock
                    // keeps its runs as `overlap` saw them.
                    drop(z);
                    core.kick();
                    z = core.subs[sub].lock();
                }
                let slot = slot?;
                if core.desc_store == Store16::Cached {
                    // The cached descriptor store needs the line: its miss overlaps
                    // the slice's stores and fence.
                    pm.prefetch(core.map.desc_off(slot));
                }
                if !desc.encodable() {
                    z.release(slot, k);
                    return None;
                }
                // The newest bytes of the slices: the file page (no zone copy
                // overlaps), with the new data in place.
                let lo = s0 as u64 * s;
                let len = (k * s) as usize;
                let at = (in_pg - lo) as usize;
                // (Scratch only for a patch: zeroing it costs on every write.)
                let (mut small, mut big): ([u8; SMALL_BUF], Vec<u8>);
                let slice: &[u8] = if at == 0 && data.len() == len {
                    data
                } else {
                    // Patch the partly written slices to slot boundaries.
                    (small, big) = ([0u8; SMALL_BUF], Vec::new());
                    let buf = scratch(&mut small, &mut big, len);
                    pm.read(BlockNo(block).at(lo), buf);
                    buf[at..at + data.len()].copy_from_slice(data);
                    buf
                };
                let soff = core.map.slot_off(slot);
                // The slots are reserved: store the slices now, so that they drain
                // while the run is recorded.
                if bugs::on(Bug::LawnDescriptorBeforeData) {
                    pm.write(soff, slice);
                } else {
                    pm.write_nt(soff, slice);
                }
                // The descriptor's bytes; the sum format's CRC of the slices is
                // computed while their stores drain.
                let fmt = Format::of(&core.geo);
                let v = desc.encode_as(fmt, || descriptor::sum(pg, slice));
                if !core.may_hold.load(Ordering::Relaxed) {
                    core.may_hold.store(true, Ordering::Release);
                }
                if !z.insert(slot, desc, true) {
                    // (Unreachable while `overlap` said None and the page is locked.)
                    // Fence: the slice stores drain before the slots can go to another
                    // writer, whose committed run they could otherwise overwrite.
                    pm.fence();
                    z.release(slot, k);
                    return None;
                }
                z.zone_writes += 1;
                core.hints[sub].publish(&z);
                drop(z);
                if fmt == Format::Page && !bugs::on(Bug::LawnDescriptorBeforeData) {
                    // Fence: the slice is durable in its slots before the descriptor
                    // that makes it the newest copy (Algorithm 1, line 4).
                    pm.fence();
                }
                // (Sum format: no fence between. The slots and the descriptor become
                // durable at `finish`'s fence, in any order; a crash before it that
                // leaves the descriptor durable and a slot line not leaves a run
                // whose bytes do not match its sum, which recovery reads as never
                // written: the write did not return.)
                let d = core.map.desc_off(slot);
                descriptor::store(pm, core.desc_store, d, v);
                Some(Staged::Zone)
            }
        }
    }
}
