//! Crash states under the x86 persistence model.
//!
//! The tracker replays a trace of PM events. A cached store is *guaranteed* once its
//! cache line was flushed after it and a fence followed; a non-temporal store once a
//! fence followed. At a crash point, the image holds everything guaranteed, plus for
//! each cache line with stores still in flight an in-order *prefix* of them (a line is
//! written back whole, with whatever it held at that moment). Stores are split at line
//! boundaries, so a multi-line write can tear at any line; aligned 8-byte and 16-byte
//! atomic stores never cross a line, so they never tear — unless the tracker is told
//! to tear 16-byte stores ([`Tear16`]): then each aligned 16-byte atomic or
//! non-temporal store is two 8-byte stores in the order given, so a crash can
//! persist the first half without the second. That checks that the format does not
//! rely on 16-byte failure atomicity (LAWN descriptors, stored non-temporally).
//!
//! Fences are per thread (traces say which thread issued each event): a fence
//! guarantees the stores whose line *that thread* flushed (or that it stored
//! non-temporally). A flush covers every earlier store to its line, whoever made it;
//! a store another thread flushed is not guaranteed by this thread's fence.

use pm::{Event, Marker, StoreKind};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

const LINE: u64 = 64;

#[derive(Clone, Debug)]
struct Pend {
    off: u64,
    data: Vec<u8>,
    /// Threads (bit per thread slot) that flushed the line after the store, or
    /// stored it non-temporally: the next fence of any of them guarantees it.
    flushed: u64,
}

/// How aligned 16-byte stores (atomic or non-temporal) are modeled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tear16 {
    /// Never torn (a 16-byte store within one cache line).
    #[default]
    No,
    /// Two 8-byte stores, low half (bytes 0..8) first.
    LowFirst,
    /// Two 8-byte stores, high half (bytes 8..16) first.
    HighFirst,
}

/// The persistent state seen so far.
pub struct Tracker {
    durable: Vec<u8>,
    tear16: Tear16,
    /// Stores not yet guaranteed, per cache line, in program order.
    pending: BTreeMap<u64, Vec<Pend>>,
    /// Thread slots by trace thread id (at most 64 threads).
    threads: Vec<u64>,
    /// Bit of the thread whose events come now.
    cur: u64,
}

/// The in-flight stores at a crash point, per line.
pub struct InFlight {
    lines: Vec<Vec<(u64, Vec<u8>)>>,
}

impl Tracker {
    /// A tracker whose durable image starts as `image` (16-byte stores not torn).
    pub fn new(image: Vec<u8>) -> Tracker {
        Tracker::with_tear16(image, Tear16::No)
    }

    /// Like [`new`](Self::new), with how 16-byte stores may tear.
    pub fn with_tear16(image: Vec<u8>, tear16: Tear16) -> Tracker {
        Tracker {
            tear16,
            durable: image,
            pending: BTreeMap::new(),
            threads: Vec::new(),
            cur: 1,
        }
    }

    fn switch_to(&mut self, tid: u64) {
        let slot = match self.threads.iter().position(|&t| t == tid) {
            Some(i) => i,
            None => {
                self.threads.push(tid);
                self.threads.len() - 1
            }
        };
        self.cur = 1u64 << (slot % 64);
    }

    /// Takes one traced event: a store becomes pending on its line, a flush and a
    /// fence make stores durable as x86 does, a thread marker switches threads.
    pub fn apply(&mut self, e: &Event) {
        match e {
            Event::Store { off, data, kind }
                if matches!(kind, StoreKind::Atomic16 | StoreKind::NonTemporal)
                    && self.tear16 != Tear16::No
                    && data.len() == 16
                    && off % 16 == 0 =>
            {
                let halves = [(*off, &data[..8]), (*off + 8, &data[8..])];
                let order = if self.tear16 == Tear16::LowFirst {
                    [halves[0], halves[1]]
                } else {
                    [halves[1], halves[0]]
                };
                let nt = if *kind == StoreKind::NonTemporal {
                    self.cur
                } else {
                    0
                };
                let line = off & !(LINE - 1);
                for (o, d) in order {
                    self.pending.entry(line).or_default().push(Pend {
                        off: o,
                        data: d.to_vec(),
                        flushed: nt,
                    });
                }
            }
            Event::Store { off, data, kind } => {
                let nt = if *kind == StoreKind::NonTemporal {
                    self.cur
                } else {
                    0
                };
                let mut o = *off;
                let mut rest = &data[..];
                while !rest.is_empty() {
                    let line = o & !(LINE - 1);
                    let n = ((line + LINE - o) as usize).min(rest.len());
                    self.pending.entry(line).or_default().push(Pend {
                        off: o,
                        data: rest[..n].to_vec(),
                        flushed: nt,
                    });
                    o += n as u64;
                    rest = &rest[n..];
                }
            }
            Event::Flush { line } => {
                if let Some(v) = self.pending.get_mut(line) {
                    for p in v.iter_mut() {
                        p.flushed |= self.cur;
                    }
                }
            }
            Event::Fence => {
                let durable = &mut self.durable;
                let me = self.cur;
                self.pending.retain(|_, v| {
                    // The stores this thread flushed form a prefix (a flush covers
                    // every earlier store to its line); they are now guaranteed.
                    let k = v.iter().take_while(|p| p.flushed & me != 0).count();
                    for p in v.drain(..k) {
                        durable[p.off as usize..p.off as usize + p.data.len()]
                            .copy_from_slice(&p.data);
                    }
                    // A non-temporal store behind an unflushed cached one is durable
                    // too; keep it in order with the rest (conservative).
                    !v.is_empty()
                });
            }
            Event::Marker(Marker::Thread(t)) => self.switch_to(*t),
            Event::Marker(_) => {}
        }
    }

    /// The image of the stores that are durable for certain.
    pub fn durable(&self) -> &[u8] {
        &self.durable
    }

    /// The in-flight stores, dropping lines whose stores would change nothing.
    pub fn in_flight(&self) -> InFlight {
        let mut lines = Vec::new();
        for v in self.pending.values() {
            let changes = v
                .iter()
                .any(|p| self.durable[p.off as usize..p.off as usize + p.data.len()] != p.data[..]);
            if changes {
                lines.push(v.iter().map(|p| (p.off, p.data.clone())).collect());
            }
        }
        InFlight { lines }
    }

    /// The image with every store issued so far (nothing lost).
    pub fn everything(&self) -> Vec<u8> {
        let mut img = self.durable.clone();
        for v in self.pending.values() {
            for p in v {
                img[p.off as usize..p.off as usize + p.data.len()].copy_from_slice(&p.data);
            }
        }
        img
    }
}

impl InFlight {
    /// Cache lines with stores in flight.
    pub fn lines(&self) -> usize {
        self.lines.len()
    }

    /// The choices to explore: for each, how many stores of each line persist.
    /// All combinations of prefixes when at most 8 lines are in flight (and the
    /// product stays small); otherwise none, all, every set of at most two whole
    /// lines, every all-but-one, and `random` random prefix choices.
    pub fn choices(&self, seed: u64, random: usize) -> Vec<Vec<usize>> {
        self.choices_with(seed, random, usize::MAX)
    }

    /// Like [`choices`](Self::choices), but sets of two lines only while at most
    /// `pair_lines` lines are in flight (otherwise single lines): bounds the states
    /// of crash points with whole data pages in flight.
    pub fn choices_with(&self, seed: u64, random: usize, pair_lines: usize) -> Vec<Vec<usize>> {
        let n = self.lines.len();
        let full: Vec<usize> = self.lines.iter().map(|l| l.len()).collect();
        let product: u128 = full.iter().map(|&k| k as u128 + 1).product();
        if n <= 8 && product <= 4096 {
            let mut out = vec![vec![0usize; n]];
            for (i, &k) in full.iter().enumerate() {
                let mut next = Vec::with_capacity(out.len() * (k + 1));
                for c in &out {
                    for p in 0..=k {
                        let mut c2 = c.clone();
                        c2[i] = p;
                        next.push(c2);
                    }
                }
                out = next;
            }
            return out;
        }
        let mut out = vec![vec![0; n], full.clone()];
        for i in 0..n {
            let mut c = vec![0; n];
            c[i] = full[i];
            out.push(c);
            for j in (i + 1..n).filter(|_| n <= pair_lines) {
                let mut c = vec![0; n];
                c[i] = full[i];
                c[j] = full[j];
                out.push(c);
            }
            let mut c = full.clone();
            c[i] = 0;
            out.push(c);
        }
        let mut rng = StdRng::seed_from_u64(seed);
        for _ in 0..random {
            out.push(full.iter().map(|&k| rng.random_range(0..=k)).collect());
        }
        out
    }

    /// Applies a choice to a copy of `durable`.
    pub fn build(&self, durable: &[u8], choice: &[usize]) -> Vec<u8> {
        let mut img = Vec::new();
        self.build_into(durable, choice, &mut img);
        img
    }

    /// Like `build`, into a reused buffer.
    pub fn build_into(&self, durable: &[u8], choice: &[usize], img: &mut Vec<u8>) {
        img.clear();
        img.extend_from_slice(durable);
        for (line, &k) in self.lines.iter().zip(choice) {
            for (off, data) in &line[..k] {
                img[*off as usize..*off as usize + data.len()].copy_from_slice(data);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(off: u64, data: &[u8], kind: StoreKind) -> Event {
        Event::Store {
            off,
            data: data.to_vec(),
            kind,
        }
    }

    #[test]
    fn flush_and_fence_make_stores_durable() {
        let mut t = Tracker::new(vec![0; 256]);
        t.apply(&store(0, &[1; 8], StoreKind::Cached));
        t.apply(&store(64, &[2; 8], StoreKind::Cached));
        t.apply(&Event::Flush { line: 0 });
        t.apply(&Event::Fence);
        assert_eq!(&t.durable()[0..8], &[1; 8]);
        assert_eq!(&t.durable()[64..72], &[0; 8]);
        assert_eq!(t.in_flight().lines(), 1);
        assert_eq!(&t.everything()[64..72], &[2; 8]);
        // Non-temporal stores need only the fence.
        t.apply(&store(128, &[3; 64], StoreKind::NonTemporal));
        t.apply(&Event::Fence);
        assert_eq!(&t.durable()[128..192], &[3; 64]);
    }

    #[test]
    fn a_fence_orders_only_its_own_threads_flushes() {
        let mut t = Tracker::new(vec![0; 256]);
        t.apply(&Event::Marker(Marker::Thread(7)));
        t.apply(&store(0, &[1; 8], StoreKind::Cached));
        t.apply(&Event::Flush { line: 0 });
        t.apply(&store(64, &[4; 64], StoreKind::NonTemporal));
        t.apply(&Event::Marker(Marker::Thread(9)));
        t.apply(&store(128, &[2; 8], StoreKind::Cached));
        t.apply(&Event::Flush { line: 128 });
        t.apply(&Event::Fence);
        // Thread 9's fence guarantees its own flush, not thread 7's.
        assert_eq!(&t.durable()[128..136], &[2; 8]);
        assert_eq!(&t.durable()[0..8], &[0; 8]);
        assert_eq!(&t.durable()[64..72], &[0; 8]);
        // A flush by thread 9 of thread 7's line covers thread 7's store.
        t.apply(&Event::Flush { line: 0 });
        t.apply(&Event::Fence);
        assert_eq!(&t.durable()[0..8], &[1; 8]);
        assert_eq!(&t.durable()[64..72], &[0; 8]);
        t.apply(&Event::Marker(Marker::Thread(7)));
        t.apply(&Event::Fence);
        assert_eq!(&t.durable()[64..72], &[4; 8]);
    }

    #[test]
    fn a_store_after_the_flush_stays_in_flight() {
        let mut t = Tracker::new(vec![0; 128]);
        t.apply(&store(0, &[1; 8], StoreKind::Cached));
        t.apply(&Event::Flush { line: 0 });
        t.apply(&store(8, &[2; 8], StoreKind::Atomic8));
        t.apply(&Event::Fence);
        assert_eq!(&t.durable()[0..8], &[1; 8]);
        assert_eq!(&t.durable()[8..16], &[0; 8]);
    }

    #[test]
    fn a_torn_16_byte_store_can_persist_one_half() {
        for kind in [StoreKind::Atomic16, StoreKind::NonTemporal] {
            for (tear, first) in [(Tear16::LowFirst, 0usize), (Tear16::HighFirst, 8)] {
                let mut t = Tracker::with_tear16(vec![0; 64], tear);
                t.apply(&store(16, &[9; 16], kind));
                let f = t.in_flight();
                assert_eq!(f.lines(), 1);
                let img = f.build(t.durable(), &[1]);
                assert_eq!(img[16 + first], 9);
                assert_eq!(img[16 + (8 - first)], 0);
                // A fence makes a non-temporal store durable whole, torn or not.
                if kind == StoreKind::NonTemporal {
                    t.apply(&Event::Fence);
                    assert_eq!(&t.durable()[16..32], &[9; 16]);
                }
            }
        }
        // Not torn by default.
        let mut t = Tracker::new(vec![0; 64]);
        t.apply(&store(16, &[9; 16], StoreKind::Atomic16));
        assert_eq!(t.in_flight().choices(1, 0).len(), 2);
    }

    #[test]
    fn choices_are_prefixes_and_cover_the_extremes() {
        let mut t = Tracker::new(vec![0; 4096]);
        // A multi-line write tears at line boundaries: 3 lines.
        t.apply(&store(32, &[7; 160], StoreKind::Cached));
        t.apply(&store(40, &[8; 8], StoreKind::Atomic8));
        let f = t.in_flight();
        assert_eq!(f.lines(), 3);
        let c = f.choices(1, 20);
        // Line 0 has two stores (prefixes 0..=2), lines 1 and 2 one each.
        assert_eq!(c.len(), 3 * 2 * 2);
        let img = f.build(t.durable(), &[1, 0, 1]);
        assert_eq!(img[40], 7);
        assert_eq!(img[64], 0);
        assert_eq!(img[128], 7);
        // Many lines: the sampled set.
        let mut t = Tracker::new(vec![0; 64 * 20]);
        t.apply(&store(0, &[1; 64 * 20], StoreKind::NonTemporal));
        let f = t.in_flight();
        let c = f.choices(1, 20);
        assert_eq!(c.len(), 2 + 20 + 20 * 19 / 2 + 20 + 20);
        assert!(c.contains(&vec![0; 20]) && c.contains(&vec![1; 20]));
    }
}
