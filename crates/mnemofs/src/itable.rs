//! The DRAM inode table: live inodes by number (sharded), per-CPU lists of free
//! inode numbers, and the reference counts that decide when an unlinked inode is
//! freed (open handles, frontend lookups).

use crate::error::{FsError, Result};
use crate::format::{
    encode_inode_static, next_generation, Geometry, INODE_SIZE, INO_BTIME_OFF, INO_VALID_OFF,
};
use crate::inode::{Inode, InodeState};
use crate::store::Store;
use crate::types::*;
use crate::vol::Vol;
use parking_lot::{ArcMutexGuard, Mutex, RawMutex, RwLock};
use rustc_hash::FxHashMap;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const SHARDS: usize = 64;

/// An inode's state, locked.
pub(crate) type Guard = ArcMutexGuard<RawMutex, InodeState>;

/// DRAM inode table: sharded map plus free inode lists per device and CPU.
pub(crate) struct InodeTable {
    geo: Geometry,
    /// (Keyed by inode number, which no user picks: a fast hash, not SipHash.)
    shards: Vec<RwLock<FxHashMap<Ino, Arc<Inode>>>>,
    /// Free inode numbers of device `d` and CPU share `c` at `d * cpus + c`.
    free: Vec<Mutex<Vec<Ino>>>,
    used: AtomicU64,
    lock_mode: LockMode,
    segment_size: u64,
}

impl InodeTable {
    /// The table of the recovered inodes `states`; `free_inos` are the free slots.
    pub fn new(
        geo: Geometry,
        states: HashMap<Ino, InodeState>,
        mut free_inos: Vec<Ino>,
        opts: &MountOptions,
    ) -> InodeTable {
        let table = InodeTable {
            geo,
            shards: (0..SHARDS)
                .map(|_| RwLock::new(FxHashMap::default()))
                .collect(),
            free: (0..geo.cpus.saturating_mul(geo.devices.max(1)))
                .map(|_| Mutex::new(Vec::new()))
                .collect(),
            used: AtomicU64::new(states.len() as u64),
            lock_mode: opts.lock,
            segment_size: opts.segment_size,
        };
        // Lowest numbers are handed out first.
        free_inos.sort_unstable_by(|a, b| b.cmp(a));
        for ino in free_inos {
            table.free[table.free_list(ino)].lock().push(ino);
        }
        for (ino, st) in states {
            let inode = Arc::new(Inode::new(st, opts.lock, opts.segment_size));
            table.shards[ino as usize % SHARDS]
                .write()
                .insert(ino, inode);
        }
        table
    }

    /// Inodes in use.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Free inode numbers.
    pub fn free_count(&self) -> u64 {
        self.free.iter().map(|f| f.lock().len() as u64).sum()
    }

    /// Free inode numbers of device `d`'s table.
    pub fn free_count_on(&self, d: usize) -> u64 {
        let cpus = (self.geo.cpus as usize).max(1);
        self.free
            .iter()
            .skip(d.saturating_mul(cpus))
            .take(cpus)
            .map(|f| f.lock().len() as u64)
            .sum()
    }

    /// Every live inode (handles collected first: a shard lock is never held while
    /// waiting for an inode lock, since creators hold an inode lock while inserting).
    pub fn all(&self) -> Vec<Arc<Inode>> {
        self.shards
            .iter()
            .flat_map(|sh| sh.read().values().cloned().collect::<Vec<_>>())
            .collect()
    }

    pub fn get(&self, ino: Ino) -> Result<Arc<Inode>> {
        if !self.geo.valid_ino(ino) {
            return Err(FsError::NotFound);
        }
        self.shards[ino as usize % SHARDS]
            .read()
            .get(&ino)
            .cloned()
            .ok_or(FsError::NotFound)
    }

    pub fn lock(&self, ino: Ino) -> Result<(Arc<Inode>, Guard)> {
        let inode = self.get(ino)?;
        let g = inode.state.lock_arc();
        if g.dead {
            return Err(FsError::NotFound);
        }
        Ok((inode, g))
    }

    /// Locks several inodes in ascending inode order (the global lock order).
    pub fn lock_many(&self, inos: &[Ino]) -> Result<Vec<(Arc<Inode>, Guard)>> {
        let mut v: Vec<Ino> = inos.to_vec();
        v.sort_unstable();
        v.dedup();
        let mut out = Vec::with_capacity(v.len());
        for ino in v {
            out.push(self.lock(ino)?);
        }
        Ok(out)
    }

    /// The free list inode `ino` goes back to.
    fn free_list(&self, ino: Ino) -> usize {
        let cpus = self.geo.cpus as usize;
        (self.geo.ino_device(ino) * cpus + self.geo.ino_cpu(ino) as usize) % self.free.len()
    }

    /// A free inode number: on the devices of `devices` in that order (the
    /// placement's order for the calling thread: its own node's first), then on any
    /// other; on each, the calling CPU's share first.
    pub fn alloc_ino(&self, devices: &[usize]) -> Result<Ino> {
        let cpus = (self.geo.cpus as usize).max(1);
        let ndev = self.free.len() / cpus;
        let first = crate::space::thread_cpu().map_or(0, |c| c % cpus);
        let mut tried = 0u64;
        for d in devices.iter().copied().chain(0..ndev) {
            if d >= ndev || tried & (1 << d) != 0 {
                continue;
            }
            tried |= 1 << d;
            for k in 0..cpus {
                if let Some(ino) = self.free[d * cpus + (first + k) % cpus].lock().pop() {
                    self.used.fetch_add(1, Ordering::Relaxed);
                    return Ok(ino);
                }
            }
        }
        Err(FsError::NoSpace)
    }

    pub fn release_ino(&self, ino: Ino) {
        self.free[self.free_list(ino)].lock().push(ino);
        self.used.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn insert_inode(&self, st: InodeState) -> Arc<Inode> {
        let ino = st.ino;
        let inode = Arc::new(Inode::new(st, self.lock_mode, self.segment_size));
        self.shards[ino as usize % SHARDS]
            .write()
            .insert(ino, inode.clone());
        inode
    }

    /// Writes the static part of a free inode slot (harmless while `valid` is 0).
    /// Writes the static part of free slot `ino` for a new file of `kind`; returns
    /// its generation (one more than the slot's last file's).
    pub fn write_slot(&self, vol: &Vol, ino: Ino, kind: FileKind, btime: Option<Timespec>) -> u32 {
        let ioff = self.geo.inode_off(ino);
        let mut old = [0u8; INODE_SIZE as usize];
        vol.read(ioff, &mut old);
        let generation = next_generation(&old, ino);
        let mut slot = encode_inode_static(ino, kind, generation, btime.filter(|_| self.geo.btime));
        if crate::bugs::on(crate::bugs::Bug::BtimeStoredLate) {
            // The birth time's bytes stay as they were; `store_btime_late` writes them.
            let at = INO_BTIME_OFF..INO_BTIME_OFF + 12;
            slot[at.clone()].copy_from_slice(&old[at]);
        }
        vol.write(ioff + 24, &slot[24..]);
        // Only the slot's second line [64, 128) is flushed (the caller's first fence
        // orders it). The static bytes [24, 64) share the first line with `valid`,
        // whose `1` is stored after them and flushed with them by the create's
        // journal: a line reaches PM with its stores in program order, so it never
        // holds `valid = 1` without them (docs/FORMAT.md §3).
        vol.flush(ioff + 64, 64);
        generation
    }

    /// The injected bug `btime-stored-late`: stores a new slot's birth time after
    /// its create committed.
    pub fn store_btime_late(&self, vol: &Vol, ino: Ino, btime: Timespec) {
        if !crate::bugs::on(crate::bugs::Bug::BtimeStoredLate) || !self.geo.btime {
            return;
        }
        let ioff = self.geo.inode_off(ino);
        let mut b = [0u8; 12];
        b[..8].copy_from_slice(&btime.sec.to_le_bytes());
        b[8..].copy_from_slice(&btime.nsec.to_le_bytes());
        vol.write(ioff + INO_BTIME_OFF as u64, &b);
        vol.flush(ioff + INO_BTIME_OFF as u64, 12);
        // Fence: the late bytes are durable before the create returns.
        vol.fence();
    }

    /// Frees an inode whose link count is 0, which nobody has open and whose number
    /// no frontend still references.
    pub fn maybe_free(&self, store: &Store, ino: Ino) {
        let Ok(inode) = self.get(ino) else { return };
        let _d = inode.data.write(0, u64::MAX);
        let mut st = inode.state.lock();
        if st.dead
            || st.nlink > 0
            || inode.opens.load(Ordering::Acquire) > 0
            || inode.lookups.load(Ordering::Acquire) > 0
            || ino == ROOT_INO
        {
            return;
        }
        let ioff = store.geo.inode_off(ino);
        store.vol.store_u64(ioff + INO_VALID_OFF, 0);
        store.vol.flush(ioff + INO_VALID_OFF, 8);
        // Fence: the inode is free on PM before its blocks can be reused.
        store.vol.fence();
        st.dead = true;
        st.index.set_dead();
        let mut runs = crate::space::Runs::new();
        st.pages
            .for_each_block(|b| crate::inode::push_run(&mut runs, b));
        for &p in &st.log.pages {
            runs.push((p, 1));
        }
        if let Some(b) = st.spare.take() {
            runs.push((b, 1));
            store.space.spare_gone();
        }
        st.pages.clear();
        st.log.pages.clear();
        drop(st);
        // (Log pages too: no small-write mode shadows them, so the hook passes over
        // them.)
        store.free_data(&runs);
        self.shards[ino as usize % SHARDS].write().remove(&ino);
        self.release_ino(ino);
    }

    /// Pins the inode: an unlinked file stays readable and writable until `release`.
    pub fn open(&self, ino: Ino) -> Result<Arc<Inode>> {
        let inode = self.get(ino)?;
        let st = inode.state.lock();
        if st.dead {
            return Err(FsError::NotFound);
        }
        inode.opens.fetch_add(1, Ordering::AcqRel);
        drop(st);
        Ok(inode)
    }

    /// Drops an `open` pin; frees the inode when it was the last reference of an
    /// unlinked file.
    pub fn release(&self, store: &Store, ino: Ino) -> Result<()> {
        let inode = self.get(ino)?;
        let prev = inode
            .opens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        if prev == Ok(1) {
            self.maybe_free(store, ino);
        }
        Ok(())
    }

    /// A frontend holds one more reference to `ino`'s number.
    pub fn remember(&self, ino: Ino) {
        if let Ok(inode) = self.get(ino) {
            inode.lookups.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// A frontend dropped `n` references to `ino`'s number.
    pub fn forget(&self, store: &Store, ino: Ino, n: u64) {
        let Ok(inode) = self.get(ino) else { return };
        let prev = inode
            .lookups
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                Some(c.saturating_sub(n))
            });
        if prev.is_ok_and(|p| p <= n) {
            self.maybe_free(store, ino);
        }
    }
}
