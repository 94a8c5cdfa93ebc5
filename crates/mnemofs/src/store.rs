//! The context every layer below the engine shares: the volume, the geometry, the
//! space allocator and the lite journals, and the log-commit machinery built on
//! them (append entries to inode logs, make them visible with one tail store or
//! one journal transaction, apply them, run log GC).
//!
//! Blocks that committed entries unmapped (and a freed inode's blocks) are freed only
//! through [`Store::free_data`], which first tells the data plane's invalidation hook
//! ([`FreeHook`]) so that nothing in DRAM or in the
//! small-write zone still refers to a block that may be reused.

use crate::addr::PmOff;
use crate::bugs::{self, Bug};
use crate::error::{FsError, Result};
use crate::format::{Entry, Geometry, INO_HEAD_OFF, INO_TAIL_OFF};
use crate::inode::InodeState;
use crate::journal::Journals;
use crate::log::{LogState, Staged};
use crate::space::{Run, Runs, Space};
use crate::vol::Vol;
use std::ops::Deref;
use std::sync::Arc;

/// Told about every data block before it is freed (the data plane's invalidation
/// point implements it).
pub(crate) trait FreeHook: Send + Sync {
    /// Called with runs of blocks that committed entries have unmapped (or a freed
    /// inode's data and log blocks), before
    /// they return to the allocator.
    fn before_free(&self, vol: &Vol, runs: &[Run]);
}

/// The volume, geometry, space and journals (see the module doc).
pub(crate) struct Store {
    pub vol: Arc<Vol>,
    pub geo: Geometry,
    pub space: Space,
    pub journals: Journals,
    hook: Arc<dyn FreeHook>,
}

/// The DRAM side of a commit: each inode's log takes its staged entries and its
/// state applies them; the blocks they made unreachable go to `freed`.
fn apply_staged<E: Deref<Target = [Entry]>>(
    parts: &mut [(&mut InodeState, E)],
    staged: &[Staged],
    freed: &mut Runs,
) {
    for ((st, entries), s) in parts.iter_mut().zip(staged) {
        st.log.commit(s);
        for (e, &off) in entries.iter().zip(&s.offsets) {
            freed.extend(st.apply(off, e));
        }
    }
}

impl Store {
    /// The context over `vol`, freeing data blocks through `hook`.
    pub fn new(vol: Arc<Vol>, geo: Geometry, space: Space, hook: Arc<dyn FreeHook>) -> Store {
        Store {
            journals: Journals::new(&geo),
            vol,
            geo,
            space,
            hook,
        }
    }

    /// Frees data blocks that committed entries unmapped: the invalidation hook
    /// first, then the allocator.
    pub fn free_data(&self, runs: &[Run]) {
        if runs.is_empty() {
            return;
        }
        self.hook.before_free(&self.vol, runs);
        self.space.free_runs(runs);
    }

    /// Appends `entries` to each inode's log and makes them visible atomically:
    /// one tail store for a single inode, the lite journal for several (plus the
    /// `extra` in-place words). Then applies them to DRAM, frees what they made
    /// unreachable and runs GC. Data pages and inode slots the entries refer to must
    /// already be flushed: the first fence here orders them too.
    pub(crate) fn commit<E: Deref<Target = [Entry]>>(
        &self,
        parts: &mut [(&mut InodeState, E)],
        extra: &[(PmOff, u64)],
    ) -> Result<()> {
        self.commit_keeping(parts, extra, false).map(|_| ())
    }

    /// [`commit`](Self::commit); with `keep`, a single block the entries
    /// superseded is not given back to the allocator but returned (through the
    /// invalidation point already, and after the commit's last fence, so it is free
    /// to be written), for the caller to keep as the file's spare.
    pub(crate) fn commit_keeping<E: Deref<Target = [Entry]>>(
        &self,
        parts: &mut [(&mut InodeState, E)],
        extra: &[(PmOff, u64)],
        keep: bool,
    ) -> Result<Option<u64>> {
        let mut staged: smallvec::SmallVec<[Staged; 2]> = smallvec::SmallVec::new();
        for (st, entries) in parts.iter() {
            match st.log.stage(&self.vol, &self.space, st.ino, entries) {
                Ok(s) => staged.push(s),
                Err(e) => {
                    for s in staged {
                        s.abandon(&self.vol, &self.space);
                    }
                    return Err(e);
                }
            }
        }
        let mut words: smallvec::SmallVec<[(PmOff, u64); 4]> = smallvec::SmallVec::new();
        for ((st, _), s) in parts.iter().zip(&staged) {
            let ioff = self.geo.inode_off(st.ino);
            if let Some(h) = s.new_head {
                words.push((ioff + INO_HEAD_OFF, h));
            }
            words.push((ioff + INO_TAIL_OFF, s.new_tail));
        }
        words.extend_from_slice(extra);
        let mut freed = Runs::new();
        if words.len() == 1 {
            // Nothing can fail from here on: the DRAM state takes the entries now,
            // while the data's and the entries' non-temporal stores drain, instead of
            // after the fences. The caller holds the state lock, so no caller of it
            // sees the new state early; lock-free readers of the page index may see a
            // grown size a little before the tail is durable (as during a concurrent
            // append), never a page they do not hold the range lock of. The blocks the
            // entries supersede are freed only after the second fence. (Locked
            // instructions wait for the drain: apply has none on its common path.)
            apply_staged(parts, &staged, &mut freed);
            // Fence: data pages and entries (bodies and commit marks) are durable
            // before the tail that exposes them.
            if !bugs::on(Bug::NoFenceBeforeTail) {
                self.vol.fence();
            }
            self.vol.store_u64(words[0].0, words[0].1);
            self.vol.flush(words[0].0, 8);
            // Fence: the new tail is durable before the operation returns, and
            // before the blocks it superseded can be reused.
            if !bugs::on(Bug::NoFenceAfterTail) {
                self.vol.fence();
            }
        } else {
            if let Err(e) = self.journals.run(&self.vol, &words) {
                for s in staged {
                    s.abandon(&self.vol, &self.space);
                }
                return Err(e);
            }
            apply_staged(parts, &staged, &mut freed);
        }
        // Through the data plane's invalidation point: a small-write mode clears what
        // shadows the unmapped blocks before they can be reused. (A kept block passes
        // it too; keeping it takes no locked instruction, which would wait here for
        // the drain of the commit's stores.)
        let kept = match freed.as_slice() {
            &[(b, 1)] if keep => {
                self.hook.before_free(&self.vol, &freed);
                Some(b)
            }
            _ => {
                self.free_data(&freed);
                None
            }
        };
        for (st, _) in parts.iter_mut() {
            self.gc(st);
        }
        Ok(kept)
    }

    /// Log GC after a commit: fast GC always, thorough GC when the log is mostly dead.
    pub(crate) fn gc(&self, st: &mut InodeState) {
        if st.dead {
            return;
        }
        // The entries finished concurrent appends superseded may die now.
        let InodeState { log, index, .. } = st;
        log.gc_claimed = false;
        log.settle(index.appends_if_any());
        // Fast GC scans the chain: only when a page may have died since the last scan
        // (a scan per commit made every write O(log pages)).
        if st.log.gc_hint {
            let freed = st.log.fast_gc(&self.vol, self.geo.inode_off(st.ino));
            for p in freed {
                self.space.free_run(p, 1);
            }
        }
        if st.log.wants_compaction() {
            // A failed compaction (no space for the new chain) leaves the old log
            // intact and correct; it is retried after the next commit.
            let _ = self.compact(st);
        }
    }

    /// Thorough GC: writes the live state as a fresh chain, switches head and tail
    /// through the journal, frees the old chain.
    pub(crate) fn compact(&self, st: &mut InodeState) -> Result<()> {
        let entries = st.snapshot_entries();
        let fresh = LogState::default();
        let staged = fresh.stage(&self.vol, &self.space, st.ino, &entries)?;
        let ioff = self.geo.inode_off(st.ino);
        let Some(head) = staged.new_head else {
            staged.abandon(&self.vol, &self.space);
            return Err(FsError::Invalid("empty compaction"));
        };
        let words = [
            (ioff + INO_HEAD_OFF, head),
            (ioff + INO_TAIL_OFF, staged.new_tail),
        ];
        if let Err(e) = self.journals.run(&self.vol, &words) {
            staged.abandon(&self.vol, &self.space);
            return Err(e);
        }
        let mut ns = InodeState::new(st.ino, st.kind);
        ns.generation = st.generation;
        ns.spare = st.spare.take();
        // Same mapping, same lock-free index (readers may be using it right now).
        ns.index = st.index.clone();
        ns.parent = st.parent;
        ns.log.commit(&staged);
        ns.adopt_compacted(st, &entries, &staged.offsets);
        if let (Some(nd), Some(od)) = (ns.dir.as_mut(), st.dir.as_ref()) {
            nd.next_cookie = nd.next_cookie.max(od.next_cookie);
        }
        let old_pages = std::mem::take(&mut st.log.pages);
        *st = ns;
        for p in old_pages {
            self.space.free_run(p, 1);
        }
        Ok(())
    }
}
