//! Delayed commit (papers/delayed-commit §III–IV): a write stores its pages into
//! delegated space and makes them durable on the application's thread (a fence:
//! on PM the "local write" is the stores themselves), queues one commit request
//! per file and returns. Background commit threads check files out of the queue
//! and send their extents to the metadata server as compound RPCs.
//!
//! - **Queue**: at most one entry per file; a file's extents accumulate in its
//!   [`Pending`] until a thread checks them all out, and a file with a batch in
//!   flight is not checked out again until that batch is answered, so a file's
//!   commits reach the server in the order of its writes.
//! - **Threads**: `ρ × queue length` (at least one while the queue is not empty), up
//!   to `max_threads`, with `ρ = max_threads / max_queue`; a thread above the
//!   target leaves. A writer waits while the queue holds `max_queue` files (the
//!   bound on how far commits trail writes).
//! - **Compound degree**: how many files one RPC carries. It grows by one when the
//!   server is busy (it reports the batches it is applying) or the round trip is
//!   well above the fastest seen, and shrinks by one when neither holds.
//! - **Errors** of a background commit stay with the file and are returned by its
//!   next `fsync` or `close`; `fsync` first waits until every write of the file
//!   before it is committed.

use crate::client::{FileCache, Inner};
use crate::proto::ExtentCommit;
use parking_lot::{Condvar, Mutex};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Settings of delayed commit.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct DelayedConfig {
    /// Most commit threads.
    pub max_threads: usize,
    /// Most files queued before writers wait.
    pub max_queue: usize,
    /// Most files in one compound commit.
    pub max_degree: usize,
    /// How long a commit thread waits to fill a compound commit up to the degree
    /// in force (the bound the degree adds to a commit's delay; `--commit-delay`).
    pub gather: Duration,
}

impl Default for DelayedConfig {
    fn default() -> Self {
        DelayedConfig {
            // The paper's Figure 6 runs with at most 9 commit threads.
            max_threads: 8,
            max_queue: 64,
            max_degree: 16,
            // 2 ms: at 4 clients and a 100 µs round trip, 1 ms gathered 2.9 files
            // per commit RPC and 2 ms 4.9, for 12-20 % more files per second
            // (docs/BENCHMARKS.md, "Cluster").
            gather: Duration::from_millis(2),
        }
    }
}

/// The bytes `[lo, hi)` a write stored into partial page `page`: `(page, lo, hi)`.
pub(crate) type Part = (u64, u64, u64);

/// A file's writes not yet committed.
#[derive(Default)]
pub(crate) struct Pending {
    /// Extents in write order, with each one's partial pages `(page, lo, hi)` (the
    /// bytes it wrote there) for merging again on a conflict.
    /// The third member is the session the extent's blocks were delegated to.
    pub extents: Vec<(ExtentCommit, Vec<Part>, u64)>,
    /// Page → block of the newest uncommitted copy (reads look here first).
    pub overlay: BTreeMap<u64, u64>,
    /// End of the furthest uncommitted write.
    pub end: u64,
    /// In the commit queue.
    pub queued: bool,
    /// Batches of this file sent and not yet answered (0 or 1).
    pub inflight: u32,
    /// The first error of a background commit, for the next fsync or close.
    pub error: Option<i32>,
    /// When the oldest uncommitted write was queued.
    pub since: Option<Instant>,
    /// Pin drops of the file (`Release`, `Forget`) waiting until its commits queued
    /// or unanswered when they were made are answered (`Inner::unpin`).
    pub parked: Vec<(u64, crate::proto::MetaReq)>,
}

impl Pending {
    /// Commits of the file are queued, or sent and not yet answered.
    pub fn waiting(&self) -> bool {
        !self.extents.is_empty() || self.inflight > 0
    }
}

/// One sample of the commit machinery (the paper's Figure 6).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Sample {
    /// Milliseconds since the client started.
    pub t_ms: f64,
    /// Files queued.
    pub queue: usize,
    /// Commit threads running.
    pub threads: usize,
    /// Compound degree in force.
    pub degree: usize,
}

/// The commit queue and its threads.
pub(crate) struct Committer {
    pub cfg: DelayedConfig,
    queue: Mutex<VecDeque<u64>>,
    /// Signalled when the queue gets an entry, shrinks, or a batch is answered.
    cv: Condvar,
    threads: AtomicUsize,
    pub degree: AtomicUsize,
    stop: std::sync::atomic::AtomicBool,
    start: Instant,
    /// Fastest round trip of a commit seen, and a moving average (ns).
    rtt_min: AtomicU64,
    rtt_avg: AtomicU64,
    samples: Mutex<Vec<Sample>>,
    /// Commit delays (queue → answer), ns, for percentiles.
    delays: Mutex<Vec<u64>>,
    pub batches: AtomicU64,
    pub files_sent: AtomicU64,
    pub peak_threads: AtomicUsize,
}

const MAX_SAMPLES: usize = 200_000;

/// How long pins to drop (releases, forgets) wait for a commit to ride with
/// before they are sent alone. Nothing waits for them: a pin held longer only keeps
/// an unlinked file's space a little longer (and its holder registered), so the
/// bound is looser than the commit delay's: a release rides with the next file's
/// commit in loads that commit every few milliseconds per client.
const PIN_DELAY: Duration = Duration::from_millis(10);

impl Committer {
    pub fn new(cfg: DelayedConfig) -> Committer {
        Committer {
            cfg,
            queue: Mutex::new(VecDeque::new()),
            cv: Condvar::new(),
            threads: AtomicUsize::new(0),
            degree: AtomicUsize::new(1),
            stop: std::sync::atomic::AtomicBool::new(false),
            start: Instant::now(),
            rtt_min: AtomicU64::new(u64::MAX),
            rtt_avg: AtomicU64::new(0),
            samples: Mutex::new(Vec::new()),
            delays: Mutex::new(Vec::new()),
            batches: AtomicU64::new(0),
            files_sent: AtomicU64::new(0),
            peak_threads: AtomicUsize::new(0),
        }
    }

    /// The threads wanted for `len` queued files: ρ × len, at least one while any
    /// is queued.
    fn target(&self, len: usize) -> usize {
        if len == 0 {
            return 0;
        }
        let c = &self.cfg;
        (len * c.max_threads)
            .div_ceil(c.max_queue.max(1))
            .clamp(1, c.max_threads.max(1))
    }

    fn sample(&self, queue: usize) {
        let mut s = self.samples.lock();
        if s.len() < MAX_SAMPLES {
            s.push(Sample {
                t_ms: self.start.elapsed().as_secs_f64() * 1e3,
                queue,
                threads: self.threads.load(Ordering::Relaxed),
                degree: self.degree.load(Ordering::Relaxed),
            });
        }
    }

    /// Samples so far.
    pub fn samples(&self) -> Vec<Sample> {
        self.samples.lock().clone()
    }

    /// Commit delay percentiles (ns): p50, p99, max.
    pub fn delay_percentiles(&self) -> (u64, u64, u64) {
        let mut d = self.delays.lock().clone();
        if d.is_empty() {
            return (0, 0, 0);
        }
        d.sort_unstable();
        let at = |q: f64| d[((d.len() - 1) as f64 * q) as usize];
        (at(0.5), at(0.99), d[d.len() - 1])
    }

    /// Files queued now.
    pub fn queued(&self) -> usize {
        self.queue.lock().len()
    }

    /// Stops the threads (after the queue is drained by [`Inner::flush_all`]).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        let _q = self.queue.lock();
        self.cv.notify_all();
    }
}

impl Inner {
    /// Queues file `ino` (its pending extents) for a background commit; waits
    /// while the queue is full. The caller holds no lock of the file.
    pub(crate) fn enqueue(self: &Arc<Self>, ino: u64) {
        self.enqueue_with(ino, true);
    }

    /// `wait`: a writer waits while the queue is full; a commit thread putting a
    /// file back never does (all of them waiting would leave none to drain it).
    fn enqueue_with(self: &Arc<Self>, ino: u64, wait: bool) {
        let Some(cm) = self.committer.as_ref() else {
            return;
        };
        let mut q = cm.queue.lock();
        while wait && q.len() >= cm.cfg.max_queue && !cm.stop.load(Ordering::Acquire) {
            cm.cv.wait_for(&mut q, Duration::from_millis(50));
        }
        q.push_back(ino);
        let len = q.len();
        let want = cm.target(len);
        let have = cm.threads.load(Ordering::Acquire);
        cm.sample(len);
        cm.cv.notify_one();
        drop(q);
        if have < want {
            self.spawn_committer();
        }
    }

    /// Makes sure a commit thread will send the deferred pin drops (called when the
    /// first of them is deferred): starts one if none runs, else wakes one, so that
    /// an idle thread's long wait becomes PIN_DELAY.
    pub(crate) fn kick(self: &Arc<Self>) {
        let Some(cm) = self.committer.as_ref() else {
            return;
        };
        // Under the queue's lock, as a thread's look at the pins and its wait (or
        // its idle exit) are: the count read here is after any exit that did not
        // see the pin, and a thread that stays is waiting when notified.
        let _q = cm.queue.lock();
        if cm.threads.load(Ordering::Acquire) == 0 {
            self.spawn_committer();
        } else {
            cm.cv.notify_one();
        }
    }

    fn spawn_committer(self: &Arc<Self>) {
        let Some(cm) = self.committer.as_ref() else {
            return;
        };
        let n = cm.threads.fetch_add(1, Ordering::AcqRel) + 1;
        cm.peak_threads.fetch_max(n, Ordering::Relaxed);
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("mnemofs-commit".into())
            .spawn(move || me.commit_loop());
        if spawned.is_err() {
            cm.threads.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// A commit thread: checks files out of the queue, sends them as one
    /// compound commit, hands the results back to the files.
    fn commit_loop(self: Arc<Self>) {
        let Some(cm) = self.committer.as_ref() else {
            return;
        };
        loop {
            let inos: Vec<u64> = {
                let mut q = cm.queue.lock();
                // When pins seen waiting are sent even without a commit to ride with
                // (a release arriving meanwhile does not put it off).
                let mut pins_due: Option<Instant> = None;
                loop {
                    let stopping = cm.stop.load(Ordering::Acquire);
                    if stopping && q.is_empty() {
                        cm.threads.fetch_sub(1, Ordering::AcqRel);
                        cm.cv.notify_all();
                        return;
                    }
                    let threads = cm.threads.load(Ordering::Acquire);
                    if threads > 1 && threads > cm.target(q.len()) {
                        // Above ρ × queue length: this one leaves.
                        cm.threads.fetch_sub(1, Ordering::AcqRel);
                        cm.sample(q.len());
                        return;
                    }
                    if !q.is_empty() {
                        break;
                    }
                    // Pins to drop ride with the next commit; alone they wait at
                    // most PIN_DELAY.
                    let pins = !self.deferred.lock().is_empty();
                    let wait = if pins {
                        let due = *pins_due.get_or_insert_with(|| Instant::now() + PIN_DELAY);
                        let left = due.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break;
                        }
                        left
                    } else {
                        pins_due = None;
                        Duration::from_millis(200)
                    };
                    let timed_out = cm.cv.wait_for(&mut q, wait).timed_out();
                    if timed_out && q.is_empty() && pins {
                        break;
                    }
                    if timed_out && q.is_empty() && threads > 0 && self.deferred.lock().is_empty() {
                        // Idle: the pool shrinks to nothing; a write (or a first pin
                        // deferred) starts one again.
                        cm.threads.fetch_sub(1, Ordering::AcqRel);
                        cm.sample(0);
                        return;
                    }
                }
                let degree = cm.degree.load(Ordering::Relaxed).max(1);
                // A compound commit of more than one file: let the queue fill up
                // to the degree for at most `gather`.
                if degree > 1 && q.len() < degree {
                    let until = Instant::now() + cm.cfg.gather;
                    while q.len() < degree {
                        let now = Instant::now();
                        if now >= until || cm.cv.wait_for(&mut q, until - now).timed_out() {
                            break;
                        }
                    }
                }
                let mut taken = Vec::new();
                let mut skipped = Vec::new();
                let mut seen = HashSet::new();
                while taken.len() < degree {
                    let Some(ino) = q.pop_front() else {
                        break;
                    };
                    if !seen.insert(ino) {
                        continue;
                    }
                    // A file whose previous batch is unanswered waits its turn.
                    let fc = self.file(ino);
                    if fc.pending.lock().inflight > 0 {
                        skipped.push(ino);
                    } else {
                        taken.push(ino);
                    }
                }
                for s in skipped.into_iter().rev() {
                    q.push_front(s);
                }
                cm.sample(q.len());
                cm.cv.notify_all();
                taken
            };
            if inos.is_empty() && !self.deferred.lock().is_empty() {
                // Only pins to drop.
                self.commit_files(&[]);
                continue;
            }
            if inos.is_empty() {
                // Only files with a batch in flight: wait for an answer.
                let mut q = cm.queue.lock();
                cm.cv.wait_for(&mut q, Duration::from_millis(5));
                continue;
            }
            self.commit_files(&inos);
        }
    }

    /// Checks out every pending extent of `inos` and commits them in one compound
    /// RPC (also used by `fsync`, on the caller's thread).
    pub(crate) fn commit_files(self: &Arc<Self>, inos: &[u64]) {
        let mut files: Vec<(u64, Arc<FileCache>, usize, Option<Instant>)> = Vec::new();
        let mut commits = Vec::new();
        let mut parts = Vec::new();
        let mut owners = Vec::new();
        for &ino in inos {
            let fc = self.file(ino);
            let mut p = fc.pending.lock();
            p.queued = false;
            if p.inflight > 0 || p.extents.is_empty() {
                continue;
            }
            p.inflight += 1;
            let since = p.since.take();
            let ex = std::mem::take(&mut p.extents);
            let n = ex.len();
            drop(p);
            // The file's layout goes before its commits are sent (their `dropped`):
            // reads of the pages they write come from the overlay until answered.
            let dropped = fc.drop_for_commit();
            // Every commit of the file but the batch's last keeps this client a
            // holder: the server spares it (no recall) at the first, and the file
            // must not be freed before the last is applied.
            let keep = fc.keeps_holder(1);
            for (k, (mut c, pr, o)) in ex.into_iter().enumerate() {
                c.dropped = crate::client::dropped_for(o, dropped);
                c.keep = keep || k + 1 < n;
                commits.push(c);
                parts.push(pr);
                owners.push(o);
            }
            files.push((ino, fc, n, since));
        }
        if files.is_empty() && !inos.is_empty() {
            // Asked for files that had nothing left to send (a queue entry an fsync
            // served meanwhile): the pins keep waiting for a commit to ride with,
            // up to PIN_DELAY, rather than going alone now.
            return;
        }
        let cur = self.session_client();
        // Pin drops of an ended session are not sent: its pins went with it.
        let after: Vec<_> = std::mem::take(&mut *self.deferred.lock())
            .into_iter()
            .filter_map(|(s, r)| (s == cur).then_some(r))
            .collect();
        if files.is_empty() && after.is_empty() {
            return;
        }
        let t0 = Instant::now();
        let sent = commits.clone();
        // Only extents in this session's blocks are sent: blocks of an ended
        // session may be another client's by now (ESTALE, reported by fsync).
        let mut results = vec![libc::ESTALE; sent.len()];
        let mine: Vec<usize> = (0..sent.len()).filter(|&k| owners[k] == cur).collect();
        let batch: Vec<ExtentCommit> = mine.iter().map(|&k| commits[k].clone()).collect();
        let sent_ok = self.send_commit(cur, batch, after);
        let rtt = t0.elapsed().as_nanos() as u64;
        let busy = match sent_ok {
            Ok((r, busy)) => {
                for (j, &k) in mine.iter().enumerate() {
                    results[k] = r.get(j).copied().unwrap_or(libc::EIO);
                }
                busy
            }
            Err(e) => {
                for &k in &mine {
                    results[k] = e.errno();
                }
                0
            }
        };
        if let Some(cm) = self.committer.as_ref() {
            cm.batches.fetch_add(1, Ordering::Relaxed);
            cm.files_sent
                .fetch_add(files.len() as u64, Ordering::Relaxed);
            if !files.is_empty() {
                self.adapt(cm, rtt, busy);
            }
        }
        let mut at = 0;
        for (ino, fc, n, since) in files {
            let mut again = Vec::new();
            {
                let mut p = fc.pending.lock();
                for k in at..at + n {
                    let c = &sent[k];
                    let r = results.get(k).copied().unwrap_or(libc::EIO);
                    if r == libc::EAGAIN {
                        again.push((c.clone(), parts[k].clone(), owners[k]));
                        continue;
                    }
                    if r != 0 && p.error.is_none() {
                        p.error = Some(r);
                    }
                    // Committed (or failed for good): the overlay keeps only newer
                    // copies than this extent's.
                    let mut pg = c.first;
                    for &(b, l) in &c.runs {
                        for blk in b..b + l {
                            if p.overlay.get(&pg) == Some(&blk) {
                                p.overlay.remove(&pg);
                            }
                            pg += 1;
                        }
                    }
                }
                // (`end` stays: a size the server gave before this answer may
                // not count these writes yet; `own_size` settles it.)
            }
            at += n;
            // Merged pages another client changed: merge again, commit before
            // anything later of the file.
            if !again.is_empty() {
                self.c
                    .retries
                    .fetch_add(again.len() as u64, Ordering::Relaxed);
                self.invalidate(ino);
                let mut fixed = Vec::new();
                for (mut c, pr, o) in again {
                    match self.remerge(ino, &mut c, &pr) {
                        Ok(()) => fixed.push((c, pr, o)),
                        Err(e) => {
                            let mut p = fc.pending.lock();
                            p.error.get_or_insert(e.errno());
                        }
                    }
                }
                let mut p = fc.pending.lock();
                let later = std::mem::take(&mut p.extents);
                p.extents = fixed;
                p.extents.extend(later);
            }
            let (requeue, parked) = {
                let mut p = fc.pending.lock();
                p.inflight -= 1;
                if let (Some(cm), Some(s)) = (self.committer.as_ref(), since) {
                    let mut d = cm.delays.lock();
                    if d.len() < MAX_SAMPLES {
                        d.push(s.elapsed().as_nanos() as u64);
                    }
                }
                if !p.extents.is_empty() && !p.queued {
                    p.queued = true;
                    p.since.get_or_insert_with(Instant::now);
                    (true, Vec::new())
                } else if !p.waiting() {
                    // Every commit of the file made before its parked pin drops
                    // is answered: they may go.
                    (false, std::mem::take(&mut p.parked))
                } else {
                    (false, Vec::new())
                }
            };
            // Before the wake-up: a flush that waited for this file sends them next.
            self.defer_pins(parked);
            fc.done.notify_all();
            if requeue {
                self.enqueue_with(ino, false);
            } else {
                self.drop_commit_pin(&fc, ino);
            }
        }
        if let Some(cm) = self.committer.as_ref() {
            let _q = cm.queue.lock();
            cm.cv.notify_all();
        }
    }

    /// The compound degree follows the server's load and the round trip: up when
    /// the server was serving other requests too or the round trip is well above
    /// the fastest seen (a slow network or a busy server), down when neither.
    fn adapt(&self, cm: &Committer, rtt: u64, busy: u32) {
        let min = cm.rtt_min.fetch_min(rtt, Ordering::Relaxed).min(rtt);
        let avg = cm.rtt_avg.load(Ordering::Relaxed);
        let avg = if avg == 0 { rtt } else { (avg * 7 + rtt) / 8 };
        cm.rtt_avg.store(avg, Ordering::Relaxed);
        let d = cm.degree.load(Ordering::Relaxed);
        let nd = if busy > 1 || avg > min.saturating_mul(2) {
            (d + 1).min(cm.cfg.max_degree.max(1))
        } else if avg < min.saturating_add(min / 4) {
            d.saturating_sub(1).max(1)
        } else {
            d
        };
        cm.degree.store(nd, Ordering::Relaxed);
    }

    /// Waits until every write of `ino` made before the call is committed, sending
    /// them from this thread if no commit thread has; returns (and clears) the
    /// file's first background error.
    pub(crate) fn flush(self: &Arc<Self>, ino: u64) -> mnemofs::Result<()> {
        let fc = self.file(ino);
        loop {
            let mut p = fc.pending.lock();
            if p.extents.is_empty() && p.inflight == 0 {
                return match p.error.take() {
                    Some(e) => Err(crate::client::from_errno(
                        e,
                        "background commit failed".into(),
                    )),
                    None => Ok(()),
                };
            }
            if p.inflight == 0 {
                drop(p);
                self.commit_files(&[ino]);
                continue;
            }
            fc.done.wait_for(&mut p, Duration::from_millis(50));
        }
    }

    /// Waits until nothing is queued or in flight (unmount).
    pub(crate) fn flush_all(self: &Arc<Self>) -> mnemofs::Result<()> {
        let inos: Vec<u64> = self.files.lock().keys().copied().collect();
        let mut first = Ok(());
        for ino in inos {
            if let Err(e) = self.flush(ino) {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }
}
