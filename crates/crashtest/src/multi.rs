//! Multi-writer workloads: 2–4 threads write their own ranges of one shared file at
//! once, through the concurrent append protocol of the `interval` and `segment` lock
//! modes (pNOVA).
//!
//! The threads are real, but a seeded scheduler lets one run at a time and switches
//! at the engine's interleaving points (`mnemofs::interleave`: data written, slots
//! reserved, entry marked) and between operations. So the traced run is reproducible
//! and covers reservations taken in one order and completed in another — the order
//! in which a tail alone would expose an entry still in flight (pNOVA Fig. 3). The
//! trace says which thread issued each event, and the tracker applies a fence only to
//! its own thread's flushes.
//!
//! Oracle: at a crash, every operation that returned is in the file, and each
//! thread's operation in flight is all or nothing, independently of the others
//! (threads write disjoint bytes; the size is the largest end written).

use crate::check::{check_multi_state, diff, guarded};
use crate::config::Config;
use crate::crash::Tracker;
use crate::explore::{Shared, RANDOM_CHOICES};
use crate::image::{op_cpu, traced_mount, Pins};
use crate::model::Model;
use crate::report::{Recorder, Report, MAX_PER_WORKLOAD};
use crate::workload::{apply_fs, dump_fs, Op};
use mnemofs::interleave::{self, Point};
use mnemofs::Fs;
use pm::{Event, Marker};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Crash points with more lines than this in flight (several threads' data pages)
/// explore single lines, not every pair.
const MULTI_PAIR_LINES: usize = 24;

/// The shared file.
pub const FILE: &str = "shared";
/// Bytes of the file each thread owns: thread t writes `[t * REGION, (t+1) * REGION)`.
pub const REGION: u64 = 3 * 4096;

/// One multi-writer workload.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Operations of each thread, in order.
    pub threads: Vec<Vec<Op>>,
    /// Seed of the interleaving.
    pub schedule: u64,
    /// Fragment free space first, so multi-page writes get several runs (one
    /// grouped commit of several entries).
    pub fragment: bool,
}

impl Workload {
    /// One line for the schedule, then each thread's operations.
    pub fn describe(&self) -> Vec<String> {
        let mut v = vec![format!(
            "{} writers, schedule {}{}",
            self.threads.len(),
            self.schedule,
            if self.fragment {
                ", fragmented space"
            } else {
                ""
            }
        )];
        for (t, ops) in self.threads.iter().enumerate() {
            for op in ops {
                v.push(format!("t{t}: {op}"));
            }
        }
        v
    }
}

fn write_op(rng: &mut StdRng, t: usize) -> Op {
    let base = t as u64 * REGION;
    let (off, len) = match rng.random_range(0..4) {
        // Sub-page.
        0 => {
            let off = rng.random_range(0..REGION - 200);
            (off, rng.random_range(1..200usize))
        }
        // One aligned page.
        1 => (rng.random_range(0..3u64) * 4096, 4096),
        // Two or three pages (a group when space is fragmented).
        2 => (0, rng.random_range(2..=3usize) * 4096),
        // Unaligned, crossing a page boundary.
        _ => {
            let off = rng.random_range(2000..6000u64);
            (off, rng.random_range(3000..6000usize))
        }
    };
    let len = len.min((REGION - off) as usize);
    Op::Write {
        path: FILE.into(),
        off: base + off,
        len,
        seed: rng.random_range(1..250u8),
    }
}

/// The multi-writer workloads for `seed`: `count` of them, 2, 3 and 4 writers in
/// turn, 2–3 writes each.
pub fn workloads(seed: u64, count: usize) -> Vec<Workload> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6d75_6c74_6977_7269);
    (0..count)
        .map(|i| {
            let n = 2 + i % 3;
            let threads = (0..n)
                .map(|t| {
                    let k = rng.random_range(2..=3);
                    (0..k).map(|_| write_op(&mut rng, t)).collect()
                })
                .collect();
            Workload {
                threads,
                schedule: rng.random(),
                fragment: i % 2 == 1,
            }
        })
        .collect()
}

/// The setup before the threads start: the shared file, and with `fragment` a file
/// that fills the free space and then has every other page punched out.
pub fn setup(fs: &Fs, fragment: bool) -> Vec<Op> {
    let mut v = vec![Op::Creat(FILE.into())];
    if fragment {
        // Keep room for the writers' new pages and logs.
        let pages = fs.stats().free_blocks.saturating_sub(40).min(64);
        v.push(Op::Creat("frag".into()));
        v.push(Op::Write {
            path: "frag".into(),
            off: 0,
            len: (pages * 4096) as usize,
            seed: 77,
        });
        for k in (1..pages).step_by(2) {
            v.push(Op::Punch {
                path: "frag".into(),
                off: k * 4096,
                len: 4096,
            });
        }
    }
    v
}

struct Turn {
    turn: usize,
    live: Vec<bool>,
    rng: StdRng,
    stuck: bool,
}

/// Lets one thread run at a time; the running thread picks the next at each point.
pub struct Scheduler {
    st: Mutex<Turn>,
    cv: Condvar,
}

/// A scheduled thread waits at most this long for its turn before the run is
/// declared stuck (a deadlock between the scheduler and an engine lock).
const STUCK: Duration = Duration::from_secs(20);

impl Scheduler {
    /// A scheduler of `n` threads, the first and every next one picked by `seed`.
    pub fn new(n: usize, seed: u64) -> Arc<Scheduler> {
        let mut rng = StdRng::seed_from_u64(seed);
        let first = rng.random_range(0..n);
        Arc::new(Scheduler {
            st: Mutex::new(Turn {
                turn: first,
                live: vec![true; n],
                rng,
                stuck: false,
            }),
            cv: Condvar::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Turn> {
        match self.st.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn wait_turn(&self, me: usize, mut g: std::sync::MutexGuard<'_, Turn>) {
        while g.turn != me && !g.stuck {
            let (ng, to) = match self.cv.wait_timeout(g, STUCK) {
                Ok(x) => x,
                Err(p) => p.into_inner(),
            };
            g = ng;
            if to.timed_out() && g.turn != me {
                g.stuck = true;
                self.cv.notify_all();
            }
        }
    }

    fn pick(g: &mut Turn) -> Option<usize> {
        let live: Vec<usize> = (0..g.live.len()).filter(|&i| g.live[i]).collect();
        if live.is_empty() {
            return None;
        }
        let i = g.rng.random_range(0..live.len());
        Some(live[i])
    }

    /// Waits until it is `me`'s turn.
    pub fn start(&self, me: usize) {
        let g = self.lock();
        self.wait_turn(me, g);
    }

    /// Hands the turn to a thread the seed picks (maybe `me` again) and waits for
    /// `me`'s next turn.
    pub fn pass(&self, me: usize) {
        let mut g = self.lock();
        if let Some(n) = Self::pick(&mut g) {
            g.turn = n;
        }
        self.cv.notify_all();
        self.wait_turn(me, g);
    }

    /// `me` is done; the turn goes on.
    pub fn finish(&self, me: usize) {
        let mut g = self.lock();
        g.live[me] = false;
        if let Some(n) = Self::pick(&mut g) {
            g.turn = n;
        }
        self.cv.notify_all();
    }

    /// Whether a thread gave up waiting for its turn (the run deadlocked).
    pub fn stuck(&self) -> bool {
        self.lock().stuck
    }
}

/// The result recorded for an operation that panicked.
pub const PANICKED: i32 = -1;

/// Runs the threads of `w` on `fs` under the scheduler; `marker(t, k, begin)` is
/// called around operation `k` of thread `t`, and `pin(t, k)` before it (to move the
/// thread onto the CPU the operation is assigned to). Returns each operation's
/// result.
pub fn run_threads(
    fs: &Fs,
    w: &Workload,
    marker: &(dyn Fn(usize, usize, bool) + Sync),
    pin: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<Vec<Result<(), i32>>>, String> {
    let n = w.threads.len();
    let sched = Scheduler::new(n, w.schedule);
    let results = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..n)
            .map(|t| {
                let sched = sched.clone();
                let ops = &w.threads[t];
                sc.spawn(move || {
                    let s2 = sched.clone();
                    interleave::set_thread_hook(Some(Arc::new(move |_p: Point| s2.pass(t))));
                    sched.start(t);
                    let mut res = Vec::new();
                    for (k, op) in ops.iter().enumerate() {
                        pin(t, k);
                        marker(t, k, true);
                        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            apply_fs(fs, op)
                        }));
                        let Ok(r) = r else {
                            // An engine panic (injected bugs): report it, and let the
                            // others go on.
                            res.push(Err(PANICKED));
                            break;
                        };
                        res.push(r);
                        marker(t, k, false);
                        sched.pass(t);
                    }
                    interleave::set_thread_hook(None);
                    sched.finish(t);
                    res
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| "a writer thread panicked".to_string()))
            .collect::<Result<Vec<_>, String>>()
    })?;
    if sched.stuck() {
        return Err("the scheduled threads got stuck (deadlock?)".into());
    }
    Ok(results)
}

/// Explores one multi-writer workload: a scheduled concurrent run, then a crash at
/// every fence and every return, checked against every combination of the threads'
/// operations in flight.
pub(crate) fn explore(
    cfg: &Config,
    base: &[u8],
    idx: usize,
    w: &Workload,
    shared: &Shared,
    rep: &mut Report,
) {
    let names = w.describe();
    let mut viol = Recorder::new(cfg, shared, idx, names);
    // 1. The traced, scheduled run.
    let (fs, rec) = match traced_mount(cfg, base) {
        Ok(x) => x,
        Err((point, what)) => {
            viol.violate(rep, point.into(), what);
            return;
        }
    };
    let pins = Pins::new(cfg.cpus);
    let setup = setup(&fs, w.fragment);
    let mut model0 = Model::default();
    for (k, op) in setup.iter().enumerate() {
        pins.pin(op_cpu(cfg.cpus, idx, 0, k));
        let got = guarded(|| apply_fs(&fs, op));
        let want = model0.apply(op);
        if got.as_ref().ok() != Some(&want) {
            viol.violate(
                rep,
                format!("setup {op}"),
                format!("engine returned {got:?}, the oracle {want:?}"),
            );
            return;
        }
    }
    fs.marker(Marker::OpBegin("threads".into()));
    let marker = |t: usize, k: usize, begin: bool| {
        let m = format!("{t}:{k}");
        fs.marker(if begin {
            Marker::OpBegin(m)
        } else {
            Marker::OpEnd(m)
        });
    };
    let pin = |t: usize, k: usize| pins.pin(op_cpu(cfg.cpus, idx, t + 1, k));
    let results = match run_threads(&fs, w, &marker, &pin) {
        Ok(r) => r,
        Err(e) => {
            viol.violate(rep, "concurrent run".into(), e);
            return;
        }
    };
    for (t, rs) in results.iter().enumerate() {
        for (k, r) in rs.iter().enumerate() {
            if *r != Ok(()) {
                viol.violate(
                    rep,
                    format!("t{t}: {}", w.threads[t][k]),
                    format!("engine returned {r:?}, the oracle Ok(())"),
                );
                return;
            }
        }
    }
    let n = w.threads.len();
    // The oracle for `done[t]` returned operations per thread plus the in-flight
    // operations of the threads in `mask`.
    let expect = |done: &[usize], mask: u32| -> Vec<String> {
        let mut m = model0.clone();
        for (t, (ops, &d)) in w.threads.iter().zip(done).enumerate() {
            let upto = d + usize::from(mask & (1 << t) != 0);
            for op in &ops[..upto.min(ops.len())] {
                let _ = m.apply(op);
            }
        }
        m.dump()
    };
    let all: Vec<usize> = w.threads.iter().map(|v| v.len()).collect();
    match guarded(|| dump_fs(&fs)) {
        Ok(Ok(d)) if d == expect(&all, 0) => {}
        Ok(Ok(d)) => {
            viol.violate(
                rep,
                "after the run (no crash)".into(),
                diff(&d, &expect(&all, 0)),
            );
            return;
        }
        Ok(Err(e)) => {
            viol.violate(rep, "after the run (no crash)".into(), e);
            return;
        }
        Err(p) => {
            viol.violate(
                rep,
                "after the run (no crash)".into(),
                format!("panicked: {p}"),
            );
            return;
        }
    }
    let events = rec.take();
    drop(fs);
    drop(pins);

    // 2. Replay; crash at every fence while an operation is in flight, and at every
    // return.
    let mut tracker = Tracker::with_tear16(base.to_vec(), cfg.tear16);
    let mut scratch = Vec::with_capacity(base.len());
    let mut started = false;
    let mut done = vec![0usize; n];
    let mut inflight = vec![false; n];
    let mut cache: std::collections::HashMap<(Vec<usize>, u32), Vec<String>> = Default::default();
    let parse = |s: &str| -> Option<usize> { s.split(':').next()?.parse().ok() };
    for e in &events {
        if *e != Event::Fence {
            tracker.apply(e);
        }
        let point = match e {
            Event::Marker(Marker::OpBegin(s)) if s == "threads" => {
                started = true;
                continue;
            }
            Event::Marker(Marker::OpBegin(s)) if started => {
                if let Some(t) = parse(s) {
                    inflight[t] = true;
                }
                continue;
            }
            Event::Marker(Marker::OpEnd(s)) if started => match parse(s) {
                Some(t) if inflight[t] => {
                    inflight[t] = false;
                    done[t] += 1;
                    format!("t{t}: {} returned", w.threads[t][done[t] - 1])
                }
                _ => continue,
            },
            Event::Fence if started && inflight.iter().any(|&b| b) => {
                let ts: Vec<String> = (0..n)
                    .filter(|&t| inflight[t])
                    .map(|t| format!("t{t}: {}", w.threads[t][done[t]]))
                    .collect();
                format!("fence inside [{}]", ts.join(", "))
            }
            Event::Fence => {
                tracker.apply(e);
                continue;
            }
            _ => continue,
        };
        if shared.stop(cfg) {
            return;
        }
        rep.crash_points += 1;
        let flying: Vec<usize> = (0..n).filter(|&t| inflight[t]).collect();
        let mut candidates = Vec::new();
        for sub in 0u32..(1 << flying.len()) {
            let mut mask = 0u32;
            for (i, &t) in flying.iter().enumerate() {
                if sub & (1 << i) != 0 {
                    mask |= 1 << t;
                }
            }
            let key = (done.clone(), mask);
            let d = cache
                .entry(key)
                .or_insert_with(|| expect(&done, mask))
                .clone();
            candidates.push(d);
        }
        let infl = tracker.in_flight();
        let choices = infl.choices_with(
            cfg.seed ^ ((idx as u64) << 32) ^ rep.crash_points,
            RANDOM_CHOICES,
            MULTI_PAIR_LINES,
        );
        for choice in choices {
            rep.states_explored += 1;
            infl.build_into(tracker.durable(), &choice, &mut scratch);
            let img = &scratch;
            if !shared.fresh(img) {
                continue;
            }
            rep.unique_states += 1;
            let checked = check_multi_state(cfg, img, &candidates, rep);
            if let Err(what) = checked {
                let persisted: Vec<String> = choice.iter().map(|c| c.to_string()).collect();
                let k = viol.violate(
                    rep,
                    format!(
                        "{point} (in-flight lines: {}, stores persisted per line: [{}])",
                        infl.lines(),
                        persisted.join(",")
                    ),
                    what,
                );
                if k >= MAX_PER_WORKLOAD {
                    return;
                }
            }
            if shared.stop(cfg) {
                return;
            }
        }
        if *e == Event::Fence {
            tracker.apply(e);
        }
    }
}
