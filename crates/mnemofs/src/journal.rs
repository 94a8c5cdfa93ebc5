//! The per-CPU lite journal (NOVA §"lite journal"): undo records of 8-byte words.
//!
//! A multi-inode operation first appends (and commits) its entries in every log it
//! touches without moving the tails; then the journal records the old value of every
//! word the operation will change in place (log tails, log heads, inode `valid`
//! words), activates, writes the new values, and retires. Recovery undoes an active
//! journal, so either every tail moves or none does.

// Values read from PM are untrusted: arithmetic on them is checked (checked_*,
// saturating_* where an out-of-range result is refused later), enforced here.
#![deny(clippy::arithmetic_side_effects)]

use crate::addr::{BlockNo, PmOff};
use crate::bugs::{self, Bug};
use crate::error::{FsError, Result};
use crate::format::{
    get_u64, journal_word, parse_journal_word, put_u64, Geometry, JOURNAL_ACTIVE_OFF,
    JOURNAL_MAX_RECS, JOURNAL_REC_ADDR_OFF, JOURNAL_REC_OFF, JOURNAL_REC_OLD_OFF, JOURNAL_REC_SIZE,
};
use crate::vol::Vol;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The cache line of an offset: the unit a flush writes back.
const LINE_MASK: u64 = !(pm::CACHE_LINE - 1);

pub(crate) struct Journals {
    slots: Vec<Mutex<PmOff>>,
    next: AtomicUsize,
}

impl Journals {
    pub fn new(geo: &Geometry) -> Journals {
        Journals {
            slots: (0..geo.cpus)
                .map(|c| Mutex::new(geo.journal_off(c)))
                .collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// Atomically replaces each `(offset, new)` word. `offset`s must be distinct and
    /// 8-byte aligned. Every log entry the words make visible must already be flushed;
    /// the first fence here orders those entries before the new words.
    pub fn run(&self, pm: &Vol, words: &[(PmOff, u64)]) -> Result<()> {
        if words.len() > JOURNAL_MAX_RECS {
            return Err(FsError::Invalid("transaction too large for the journal"));
        }
        // Pick the journal of this CPU; if it is busy, any free one.
        // SAFETY: sched_getcpu has no preconditions.
        let cpu = unsafe { libc::sched_getcpu() };
        let start = if cpu >= 0 {
            cpu as usize
        } else {
            self.next.fetch_add(1, Ordering::Relaxed)
        };
        let n = self.slots.len();
        let mut guard = None;
        let pick = |k: usize| start.wrapping_add(k).checked_rem(n).unwrap_or(0);
        for k in 0..n {
            if let Some(g) = self.slots[pick(k)].try_lock() {
                guard = Some(g);
                break;
            }
        }
        let guard = match guard {
            Some(g) => g,
            None => self.slots[pick(0)].lock(),
        };
        let base = *guard;

        // At most JOURNAL_MAX_RECS records (checked above); up to 8 (every namespace
        // operation) in a buffer on the stack.
        let len = words.len().saturating_mul(JOURNAL_REC_SIZE as usize);
        let mut buf: smallvec::SmallVec<[u8; 8 * JOURNAL_REC_SIZE as usize]> =
            smallvec::smallvec![0u8; len];
        let recs: &mut [u8] = &mut buf;
        for (r, &(off, _)) in recs.chunks_exact_mut(16).zip(words) {
            put_u64(r, JOURNAL_REC_ADDR_OFF, off.get());
            put_u64(r, JOURNAL_REC_OLD_OFF, pm.read_u64(off));
        }
        pm.write(base + JOURNAL_REC_OFF, recs);
        pm.flush(base + JOURNAL_REC_OFF, recs.len() as u64);
        // Fence: the undo records (and the caller's log entries, flushed earlier) are
        // durable before the header word that makes the records count.
        if !bugs::on(Bug::JournalRecordsUnfenced) {
            pm.fence();
        }
        pm.store_u64(base + JOURNAL_ACTIVE_OFF, journal_word(words.len(), recs));
        pm.flush(base + JOURNAL_ACTIVE_OFF, 8);
        // Fence: the transaction is active before any word changes in place.
        pm.fence();
        if bugs::on(Bug::JournalRetiredEarly) {
            // Injected bug: the journal retires before the words it protects change.
            pm.store_u64(base + JOURNAL_ACTIVE_OFF, 0);
            pm.flush(base + JOURNAL_ACTIVE_OFF, 8);
            // Fence: the (too early) retirement is durable before the words change.
            pm.fence();
        }
        for &(off, new) in words {
            pm.store_u64(off, new);
        }
        // Each line that holds new words is written back once, after its last store
        // (a create's child head, tail and `valid` share one line: one flush, not
        // three; docs/FORMAT.md §3). A write-back takes the whole line, so the words
        // stored before it need no flush of their own.
        for (i, &(off, _)) in words.iter().enumerate() {
            let line = off.get() & LINE_MASK;
            if !words[..i].iter().any(|&(o, _)| o.get() & LINE_MASK == line) {
                pm.flush(off, 8);
            }
        }
        // Fence: every new word is durable before the journal retires.
        pm.fence();
        pm.store_u64(base + JOURNAL_ACTIVE_OFF, 0);
        pm.flush(base + JOURNAL_ACTIVE_OFF, 8);
        // Fence: the retirement is durable before the operation returns (otherwise
        // recovery could undo an operation that already returned).
        pm.fence();
        Ok(())
    }
}

/// Recovery: undoes the active transaction of CPU `cpu`'s journal, if any.
/// Idempotent: a crash in the middle leaves the journal active and the undo is
/// simply done again. `valid_word` says which offsets a record may name.
pub(crate) fn recover(
    pm: &Vol,
    geo: &Geometry,
    cpu: u32,
    valid_word: impl Fn(u64) -> bool,
) -> std::result::Result<usize, String> {
    let base = geo.journal_off(cpu);
    let w = pm.read_u64(base + JOURNAL_ACTIVE_OFF);
    let (n, crc) = match parse_journal_word(w)? {
        None => return Ok(0),
        Some(x) => x,
    };
    // `n` ≤ JOURNAL_MAX_RECS (`parse_journal_word`): the records fit the block.
    let mut recs = vec![0u8; n.saturating_mul(JOURNAL_REC_SIZE as usize)];
    pm.read(base + JOURNAL_REC_OFF, &mut recs);
    if crate::format::crc(&recs) != crc {
        return Err(format!("journal {cpu}: record checksum mismatch"));
    }
    let mut undo = Vec::with_capacity(n);
    for (i, r) in recs.chunks_exact(16).enumerate() {
        let off = get_u64(r, JOURNAL_REC_ADDR_OFF);
        let old = get_u64(r, JOURNAL_REC_OLD_OFF);
        let end = BlockNo(geo.total_blocks).off().get();
        if !off.is_multiple_of(8) || off.checked_add(8).is_none_or(|e| e > end) || !valid_word(off)
        {
            return Err(format!("journal {cpu}: record {i} names offset {off:#x}"));
        }
        undo.push((PmOff(off), old));
    }
    for &(off, old) in undo.iter().rev() {
        pm.store_u64(off, old);
        pm.flush(off, 8);
    }
    // Fence: the restored words are durable before the journal is retired.
    pm.fence();
    pm.store_u64(base + JOURNAL_ACTIVE_OFF, 0);
    pm.flush(base + JOURNAL_ACTIVE_OFF, 8);
    // Fence: retirement durable before recovery goes on to read the logs.
    pm.fence();
    Ok(undo.len())
}
