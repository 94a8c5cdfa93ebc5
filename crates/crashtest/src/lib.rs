//! mnemofs' crash-consistency explorer.
//!
//! 1. A workload runs once on an in-memory image through the engine, with the `pm`
//!    layer's tracing seam recording every store, flush, fence and operation marker;
//!    the oracle ([`model::Model`]) runs beside it, and both must agree on every result.
//! 2. The trace is replayed ([`crash::Tracker`]); at every fence inside an operation
//!    and at its return, crash states are built from the guaranteed image plus
//!    choices of in-flight cache lines (x86 persistence model).
//! 3. Each distinct crash image is checked on a private copy: fsck is clean, recovery
//!    succeeds, the tree equals the oracle before or after the operation in flight
//!    (after it, once it returned), the file system is usable, and a crash at every
//!    fence of recovery itself recovers to the same tree.

pub mod crash;
pub mod model;
pub mod multi;
pub mod workload;

use crash::Tracker;
use mnemofs::bugs::Bug;
use mnemofs::{Fs, MkfsOptions, MountOptions, ROOT_INO};
use model::Model;
use pm::{Event, Marker, Pm, RecordingTracer};
use serde::Serialize;
use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;
use workload::{apply_fs, dump_fs, Op};

/// Size of the in-memory images.
pub const IMAGE_SIZE: u64 = 768 << 10;
/// Multi-writer workloads generated unless asked otherwise.
pub const DEFAULT_MULTI_WORKLOADS: usize = 60;
/// Multi-writer crash points with more lines than this in flight (several threads'
/// data pages) explore single lines, not every pair.
const MULTI_PAIR_LINES: usize = 24;
/// Random crash-state choices per crash point when too many lines are in flight.
const RANDOM_CHOICES: usize = 24;

/// Which workloads to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Every single operation after the setup (`workload::seq1`).
    Seq1,
    /// Every ordered pair of seq-1 operations.
    Seq2,
    /// Seeded random operation sequences (`Config::random_workloads` of them).
    Random,
    /// 2–4 threads writing one shared file (`multi` module).
    Multi,
}

impl Kind {
    /// The name `--workload` takes.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Seq1 => "seq1",
            Kind::Seq2 => "seq2",
            Kind::Random => "random",
            Kind::Multi => "multi",
        }
    }
}

/// What to explore.
#[derive(Clone, Debug)]
pub struct Config {
    /// Which workloads.
    pub kind: Kind,
    /// Seed of random workloads, samples, schedules and random crash states.
    pub seed: u64,
    /// Stop after this many crash states (explored, before deduplication).
    pub max_states: Option<u64>,
    /// Run only the workload with this index.
    pub only: Option<usize>,
    /// Run a seeded random sample of this many workloads.
    pub sample: Option<usize>,
    /// Number of random workloads to generate (`Kind::Random`, `Kind::Multi`).
    pub random_workloads: usize,
    /// The deliberate bug to turn on (`mnemofs::bugs`), if any.
    pub bug: Option<Bug>,
    /// Check crashes inside recovery too.
    pub recovery_crashes: bool,
    /// Stop once this many violations were found.
    pub max_violations: Option<usize>,
    /// Exploring threads (workloads are independent).
    pub threads: usize,
    /// Lock mode of the traced run.
    pub lock: mnemofs::LockMode,
    /// Small-write mode of the traced run (LAWN and fine-log add sub-page writes to
    /// the setup and to seq-1/seq-2).
    pub small_write: mnemofs::SmallWriteMode,
    /// Model 16-byte atomic stores as two 8-byte stores (`crash::Tear16`).
    pub tear16: crash::Tear16,
    /// How the traced runs store LAWN descriptors (named: measuring the cheaper way
    /// at mount would make traces differ from run to run).
    pub desc_store: pm::Store16,
}

impl Config {
    /// Defaults for `kind`: seed 1, every workload, crashes inside recovery, the
    /// `inode` lock with page CoW, one exploring thread per CPU.
    pub fn new(kind: Kind) -> Config {
        Config {
            kind,
            seed: 1,
            max_states: None,
            only: None,
            sample: None,
            random_workloads: 200,
            bug: None,
            recovery_crashes: true,
            max_violations: None,
            lock: mnemofs::LockMode::Inode,
            small_write: mnemofs::SmallWriteMode::Cow,
            tear16: crash::Tear16::No,
            desc_store: pm::Store16::NonTemporal,
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
        }
    }
}

/// One violated check.
#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    /// Index of the workload.
    pub workload: usize,
    /// Its operations.
    pub ops: Vec<String>,
    /// Where in the trace the crash was.
    pub crash_point: String,
    /// What check failed.
    pub what: String,
    /// A command line that explores this workload alone.
    pub reproduce: String,
}

/// Progress counters (also the final summary).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// The workload kind's name.
    pub workload: String,
    /// Workloads selected.
    pub workloads: usize,
    /// Workloads explored so far.
    pub workloads_run: usize,
    /// Crash points (fences and operation ends) reached.
    pub crash_points: u64,
    /// Crash states built.
    pub states_explored: u64,
    /// Crash states that differed from every one before (the ones checked).
    pub unique_states: u64,
    /// Crash states of crashes inside recovery.
    pub recovery_crash_states: u64,
    /// Violations found (all of them; `details` keeps the first few per workload).
    pub violations: usize,
    /// Time taken so far.
    pub seconds: f64,
    /// `states_explored / seconds`.
    pub states_per_second: f64,
    /// Name of the injected bug, if any.
    pub injected_bug: Option<String>,
    /// The violations kept for printing.
    #[serde(skip)]
    pub details: Vec<Violation>,
}

/// The workloads of `cfg`, each with its index.
pub fn workloads(cfg: &Config) -> Vec<(usize, Vec<Op>)> {
    let small = cfg.small_write != mnemofs::SmallWriteMode::Cow;
    let all = match cfg.kind {
        Kind::Seq1 if small => workload::seq1_small(),
        Kind::Seq1 => workload::seq1(),
        Kind::Seq2 => workload::seq2_for(small),
        Kind::Random => workload::random(cfg.seed, cfg.random_workloads, small),
        Kind::Multi => Vec::new(),
    };
    let mut v: Vec<(usize, Vec<Op>)> = all.into_iter().enumerate().collect();
    if let Some(i) = cfg.only {
        v.retain(|(k, _)| *k == i);
    } else if let Some(n) = cfg.sample {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(cfg.seed);
        v.shuffle(&mut rng);
        v.truncate(n);
        v.sort_by_key(|(k, _)| *k);
    }
    v
}

/// How many workloads `cfg` selects (either kind).
pub fn workload_count(cfg: &Config) -> usize {
    if cfg.kind == Kind::Multi {
        let all = multi::workloads(cfg.seed, cfg.random_workloads)
            .into_iter()
            .enumerate()
            .map(|(i, w)| Item::Multi(i, w))
            .collect();
        select(cfg, all).len()
    } else {
        workloads(cfg).len()
    }
}

fn mount_opts() -> MountOptions {
    MountOptions::default()
}

/// Runs engine code, turning a panic into an error message (`run` silences the
/// panic hook while it explores).
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panic".into())
    })
}

/// 128-bit hash of an image for deduplication: two independent multiply-rotate
/// lanes over 8-byte words (fast: images are hashed once per explored state).
fn image_hash(img: &[u8]) -> u128 {
    let (mut a, mut b) = (0x9e37_79b9_7f4a_7c15u64, 0xc2b2_ae3d_27d4_eb4fu64);
    let mut chunks = img.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let w = u64::from_le_bytes(w);
        a = (a ^ w).wrapping_mul(0xff51_afd7_ed55_8ccd).rotate_left(31);
        b = (b.rotate_left(27) ^ w).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    }
    for &x in chunks.remainder() {
        a = (a ^ x as u64).wrapping_mul(0xff51_afd7_ed55_8ccd);
        b = (b ^ x as u64).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    }
    ((a as u128) << 64) | b as u128
}

/// Mounts a copy of `img` (recovery); returns the file system, its listing and the
/// PM events recovery issued.
fn recover(img: &[u8], trace: bool) -> Result<(Fs, Vec<String>, Vec<Event>), String> {
    let mut pm = Pm::anonymous(img.len() as u64).map_err(|e| e.to_string())?;
    pm.load_image(img);
    let rec = Arc::new(RecordingTracer::new());
    if trace {
        pm.set_tracer(Some(rec.clone()));
    }
    let fs = guarded(|| Fs::from_pm(pm, &mount_opts()))
        .map_err(|p| format!("recovery panicked: {p}"))?
        .map_err(|e| format!("recovery failed: {e}"))?;
    let events = rec.take();
    let dump =
        guarded(|| dump_fs(&fs)).map_err(|p| format!("listing after recovery panicked: {p}"))??;
    Ok((fs, dump, events))
}

fn fsck(img: &[u8]) -> Result<(), String> {
    let mut pm = Pm::anonymous(img.len() as u64).map_err(|e| e.to_string())?;
    pm.load_image(img);
    let r = guarded(|| mnemofs::fsck::fsck_private(&mut pm))
        .map_err(|p| format!("fsck panicked: {p}"))?
        .map_err(|e| format!("fsck: {e}"))?;
    if r.is_clean() {
        Ok(())
    } else {
        Err(format!("fsck: {}", r.problems.join("; ")))
    }
}

fn usable(fs: &Fs) -> Result<(), String> {
    guarded(|| -> Result<(), String> {
        let e = |x: mnemofs::FsError| format!("not usable after recovery: {x}");
        let f = fs
            .create(ROOT_INO, b"crashtest-probe", 0o644, 0, 0)
            .map_err(e)?;
        fs.write(f.ino, 100, b"probe data").map_err(e)?;
        let mut b = [0u8; 10];
        fs.read(f.ino, 100, &mut b).map_err(e)?;
        if &b != b"probe data" {
            return Err("not usable after recovery: read back other bytes".into());
        }
        fs.unlink(ROOT_INO, b"crashtest-probe").map_err(e)?;
        Ok(())
    })
    .map_err(|p| format!("not usable after recovery: panicked: {p}"))?
}

fn diff(got: &[String], want: &[String]) -> String {
    let extra: Vec<&String> = got.iter().filter(|l| !want.contains(l)).take(3).collect();
    let missing: Vec<&String> = want.iter().filter(|l| !got.contains(l)).take(3).collect();
    format!("unexpected {extra:?}; missing {missing:?}")
}

/// The empty formatted image every workload starts from.
fn base_image() -> Result<Vec<u8>, String> {
    let mut pm = Pm::anonymous(IMAGE_SIZE).map_err(|e| e.to_string())?;
    mnemofs::mkfs_pm(
        &mut pm,
        &MkfsOptions {
            size: IMAGE_SIZE,
            cpus: 1,
            inodes: 64,
            force: true,
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())?;
    Ok(pm.to_vec())
}

/// Explores `cfg` on `cfg.threads` threads; `progress` is called after every
/// workload.
pub fn run(cfg: &Config, mut progress: impl FnMut(&Report)) -> Result<Report, String> {
    mnemofs::bugs::inject(cfg.bug);
    // Engine panics are expected under injected bugs; they are caught and reported
    // as violations, so the hook (which may exit the process) is off meanwhile.
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = run_inner(cfg, &mut progress);
    std::panic::set_hook(prev);
    mnemofs::bugs::inject(None);
    r
}

/// State shared by the exploring threads.
struct Shared {
    seen: Mutex<HashSet<u128>>,
    explored: AtomicU64,
    violations: AtomicUsize,
}

impl Shared {
    fn stop(&self, cfg: &Config) -> bool {
        cfg.max_states
            .is_some_and(|m| self.explored.load(Ordering::Relaxed) >= m)
            || cfg
                .max_violations
                .is_some_and(|m| self.violations.load(Ordering::Relaxed) >= m)
    }
}

fn run_inner(cfg: &Config, progress: &mut dyn FnMut(&Report)) -> Result<Report, String> {
    let t0 = Instant::now();
    let base = base_image()?;
    let wls: Vec<Item> = if cfg.kind == Kind::Multi {
        select(
            cfg,
            multi::workloads(cfg.seed, cfg.random_workloads)
                .into_iter()
                .enumerate()
                .map(|(i, w)| Item::Multi(i, w))
                .collect(),
        )
    } else {
        workloads(cfg)
            .into_iter()
            .map(|(i, ops)| Item::Seq(i, ops))
            .collect()
    };
    let mut rep = Report {
        workload: cfg.kind.name().into(),
        workloads: wls.len(),
        injected_bug: cfg.bug.and_then(|b| {
            mnemofs::bugs::ALL
                .iter()
                .find(|x| x.1 == b)
                .map(|x| x.0.to_string())
        }),
        ..Default::default()
    };
    let shared = Shared {
        seen: Mutex::new(HashSet::new()),
        explored: AtomicU64::new(0),
        violations: AtomicUsize::new(0),
    };
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<Report>();
    std::thread::scope(|sc| {
        for _ in 0..cfg.threads.max(1) {
            let tx = tx.clone();
            let (shared, next, wls, base) = (&shared, &next, &wls, &base);
            sc.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= wls.len() || shared.stop(cfg) {
                    break;
                }
                let mut r = Report::default();
                match &wls[i] {
                    Item::Seq(idx, ops) => explore_workload(cfg, base, *idx, ops, shared, &mut r),
                    Item::Multi(idx, w) => explore_multi(cfg, base, *idx, w, shared, &mut r),
                }
                if tx.send(r).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        for r in rx {
            rep.workloads_run += 1;
            rep.crash_points += r.crash_points;
            rep.states_explored += r.states_explored;
            rep.unique_states += r.unique_states;
            rep.recovery_crash_states += r.recovery_crash_states;
            rep.violations += r.violations;
            rep.details.extend(r.details);
            rep.seconds = t0.elapsed().as_secs_f64();
            rep.states_per_second = rep.states_explored as f64 / rep.seconds.max(1e-9);
            progress(&rep);
        }
    });
    rep.details.sort_by_key(|d| d.workload);
    rep.seconds = t0.elapsed().as_secs_f64();
    rep.states_per_second = rep.states_explored as f64 / rep.seconds.max(1e-9);
    Ok(rep)
}

/// A workload of either kind.
enum Item {
    Seq(usize, Vec<Op>),
    Multi(usize, multi::Workload),
}

/// `--only` / `--sample` applied to indexed items.
fn select(cfg: &Config, mut v: Vec<Item>) -> Vec<Item> {
    let idx = |it: &Item| match it {
        Item::Seq(i, _) | Item::Multi(i, _) => *i,
    };
    if let Some(i) = cfg.only {
        v.retain(|it| idx(it) == i);
    } else if let Some(n) = cfg.sample {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(cfg.seed);
        v.shuffle(&mut rng);
        v.truncate(n);
        v.sort_by_key(idx);
    }
    v
}

fn reproduce(cfg: &Config, idx: usize) -> String {
    let mut s = format!(
        "mnemofs crashtest --workload {} --only {idx}",
        cfg.kind.name()
    );
    if matches!(cfg.kind, Kind::Random | Kind::Multi) {
        s += &format!(" --seed {}", cfg.seed);
    }
    if cfg.kind == Kind::Multi || cfg.lock != mnemofs::LockMode::Inode {
        s += &format!(" --lock {}", cfg.lock.name());
    }
    if cfg.small_write != mnemofs::SmallWriteMode::Cow {
        s += &format!(" --small-write {}", cfg.small_write.name());
    }
    match cfg.tear16 {
        crash::Tear16::No => {}
        crash::Tear16::LowFirst => s += " --tear-16 low-first",
        crash::Tear16::HighFirst => s += " --tear-16 high-first",
    }
    if cfg.small_write == mnemofs::SmallWriteMode::Lawn && cfg.desc_store == pm::Store16::Cached {
        s += " --desc-store cached";
    }
    if let Some(b) = &cfg.bug {
        if let Some(x) = mnemofs::bugs::ALL.iter().find(|x| x.1 == *b) {
            s += &format!(" --inject-bug {}", x.0);
        }
    }
    s
}

/// Violations kept per workload (the count goes on).
const MAX_PER_WORKLOAD: usize = 3;

fn explore_workload(
    cfg: &Config,
    base: &[u8],
    idx: usize,
    ops: &[Op],
    shared: &Shared,
    rep: &mut Report,
) {
    let mut setup = workload::setup();
    if cfg.small_write != mnemofs::SmallWriteMode::Cow {
        setup.extend(workload::small_setup());
    }
    let all: Vec<Op> = setup.iter().chain(ops.iter()).cloned().collect();
    let first_crash_op = setup.len();
    let op_names: Vec<String> = ops.iter().map(|o| o.to_string()).collect();
    let mut found = 0usize;
    let mut violate = |rep: &mut Report, point: String, what: String| -> usize {
        rep.violations += 1;
        shared.violations.fetch_add(1, Ordering::Relaxed);
        if found < MAX_PER_WORKLOAD {
            rep.details.push(Violation {
                workload: idx,
                ops: op_names.clone(),
                crash_point: point,
                what,
                reproduce: reproduce(cfg, idx),
            });
        }
        found += 1;
        found
    };

    // 1. Run once, traced, beside the oracle.
    let (fs, rec) = match traced_mount(cfg, base) {
        Ok(x) => x,
        Err((point, what)) => {
            violate(rep, point.into(), what);
            return;
        }
    };
    let mut model = Model::default();
    let mut dumps = vec![model.dump()];
    for (k, op) in all.iter().enumerate() {
        fs.marker(Marker::OpBegin(k.to_string()));
        let got = guarded(|| apply_fs(&fs, op));
        fs.marker(Marker::OpEnd(k.to_string()));
        let want = model.apply(op);
        let got = match got {
            Ok(g) => g,
            Err(p) => {
                violate(rep, format!("{op}"), format!("engine panicked: {p}"));
                return;
            }
        };
        if got != want {
            {
                violate(
                    rep,
                    format!("{op}"),
                    format!("engine returned {got:?}, the oracle {want:?}"),
                );
                return;
            };
        }
        let now = model.dump();
        match guarded(|| dump_fs(&fs)) {
            Ok(Ok(d)) if d == now => {}
            Ok(Ok(d)) => {
                {
                    violate(rep, format!("after {op} (no crash)"), diff(&d, &now));
                    return;
                };
            }
            Ok(Err(e)) => {
                violate(rep, format!("after {op} (no crash)"), e);
                return;
            }
            Err(p) => {
                violate(
                    rep,
                    format!("after {op} (no crash)"),
                    format!("panicked: {p}"),
                );
                return;
            }
        }
        dumps.push(now);
    }
    let events = rec.take();
    drop(fs);

    // 2. Replay the trace; crash at every fence inside a workload operation and at
    // its return.
    let mut tracker = Tracker::with_tear16(base.to_vec(), cfg.tear16);
    let mut scratch = Vec::with_capacity(base.len());
    let mut cur: Option<usize> = None;
    let mut fence_no = 0;
    for e in &events {
        // A crash "at a fence" happens before the fence completes: what it would
        // make durable is still in flight. Every other event is applied first.
        if *e != Event::Fence {
            tracker.apply(e);
        }
        let (k, returned) = match e {
            Event::Marker(Marker::OpBegin(k)) => {
                cur = k.parse().ok();
                fence_no = 0;
                continue;
            }
            Event::Marker(Marker::OpEnd(_)) => match cur.take() {
                Some(k) => (k, true),
                None => continue,
            },
            Event::Fence => {
                let at = cur.map(|k| (k, false));
                match at {
                    Some(x) if x.0 >= first_crash_op => {
                        fence_no += 1;
                        x
                    }
                    _ => {
                        tracker.apply(e);
                        continue;
                    }
                }
            }
            _ => continue,
        };
        if k < first_crash_op {
            continue;
        }
        if shared.stop(cfg) {
            return;
        }
        rep.crash_points += 1;
        let op = &all[k];
        let point = if returned {
            format!("{op}: after it returned")
        } else {
            format!("{op}: at fence {fence_no}")
        };
        let inflight = tracker.in_flight();
        let choices = inflight.choices(
            cfg.seed ^ ((idx as u64) << 32) ^ rep.crash_points,
            RANDOM_CHOICES,
        );
        for choice in choices {
            rep.states_explored += 1;
            shared.explored.fetch_add(1, Ordering::Relaxed);
            inflight.build_into(tracker.durable(), &choice, &mut scratch);
            let img = &scratch;
            let fresh = match shared.seen.lock() {
                Ok(mut g) => g.insert(image_hash(img)),
                Err(p) => p.into_inner().insert(image_hash(img)),
            };
            if !fresh {
                continue;
            }
            rep.unique_states += 1;
            let (before, after) = (&dumps[k], &dumps[k + 1]);
            if let Err(what) = check_state(cfg, img, before, after, returned, op, rep) {
                let persisted: Vec<String> = choice.iter().map(|c| c.to_string()).collect();
                let n = violate(
                    rep,
                    format!(
                        "{point} (in-flight lines: {}, stores persisted per line: [{}])",
                        inflight.lines(),
                        persisted.join(",")
                    ),
                    what,
                );
                if n >= MAX_PER_WORKLOAD {
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

/// A crash at each fence of recovery (of `img`, traced as `events`) must recover to
/// the same tree `got`.
fn recovery_crashes(
    cfg: &Config,
    img: &[u8],
    events: &[Event],
    got: &[String],
    rep: &mut Report,
) -> Result<(), String> {
    if !cfg.recovery_crashes {
        return Ok(());
    }
    let mut t = Tracker::with_tear16(img.to_vec(), cfg.tear16);
    let mut local = HashSet::new();
    for e in events {
        t.apply(e);
        if *e != Event::Fence {
            continue;
        }
        for img2 in [t.durable().to_vec(), t.everything()] {
            if !local.insert(image_hash(&img2)) {
                continue;
            }
            rep.recovery_crash_states += 1;
            let (_fs2, got2, _) =
                recover(&img2, false).map_err(|e| format!("crash during recovery, then: {e}"))?;
            if got2 != got {
                return Err(format!(
                    "a crash during recovery changes the outcome: {}",
                    diff(&got2, got)
                ));
            }
        }
    }
    Ok(())
}

/// Mounts a copy of `base` with `cfg`'s modes and a recording tracer (no LAWN
/// write-back thread: the trace must come from the workload's threads only). An error
/// names the step (`setup`, `mount`) and what went wrong.
fn traced_mount(
    cfg: &Config,
    base: &[u8],
) -> Result<(Fs, Arc<RecordingTracer>), (&'static str, String)> {
    let mut pm = Pm::anonymous(base.len() as u64).map_err(|e| ("setup", e.to_string()))?;
    pm.load_image(base);
    let rec = Arc::new(RecordingTracer::new());
    pm.set_tracer(Some(rec.clone()));
    let opts = MountOptions {
        lock: cfg.lock,
        small_write: cfg.small_write,
        lawn_writeback_thread: false,
        lawn_desc_store: Some(cfg.desc_store),
        ..mount_opts()
    };
    match guarded(|| Fs::from_pm(pm, &opts)) {
        Ok(Ok(fs)) => Ok((fs, rec)),
        Ok(Err(e)) => Err(("mount", e.to_string())),
        Err(p) => Err(("mount", format!("panicked: {p}"))),
    }
}

/// All checks on one crash image.
fn check_state(
    cfg: &Config,
    img: &[u8],
    before: &[String],
    after: &[String],
    returned: bool,
    op: &Op,
    rep: &mut Report,
) -> Result<(), String> {
    fsck(img)?;
    let (fs, got, events) = recover(img, cfg.recovery_crashes)?;
    let ok = if returned {
        got == after
    } else {
        got == before || got == after
    };
    if !ok {
        let mut what = if returned {
            format!("a returned operation is not durable: {}", diff(&got, after))
        } else {
            format!(
                "neither before nor after the operation: vs before {}; vs after {}",
                diff(&got, before),
                diff(&got, after)
            )
        };
        if let Op::Rename {
            from,
            to,
            exchange: false,
            ..
        } = op
        {
            let has = |p: &str| {
                got.iter()
                    .any(|l| l.starts_with(&format!("{p} ")) || l.starts_with(&format!("{p}/ ")))
            };
            match (has(from), has(to)) {
                (true, true) => what = format!("rename left both names; {what}"),
                (false, false) => what = format!("rename left neither name; {what}"),
                _ => {}
            }
        }
        return Err(what);
    }
    recovery_crashes(cfg, img, &events, &got, rep)?;
    usable(&fs)
}

/// Explores one multi-writer workload: a scheduled concurrent run, then a crash at
/// every fence and every return, checked against every combination of the threads'
/// operations in flight.
fn explore_multi(
    cfg: &Config,
    base: &[u8],
    idx: usize,
    w: &multi::Workload,
    shared: &Shared,
    rep: &mut Report,
) {
    let names = w.describe();
    let mut found = 0usize;
    let mut violate = |rep: &mut Report, point: String, what: String| -> usize {
        rep.violations += 1;
        shared.violations.fetch_add(1, Ordering::Relaxed);
        if found < MAX_PER_WORKLOAD {
            rep.details.push(Violation {
                workload: idx,
                ops: names.clone(),
                crash_point: point,
                what,
                reproduce: reproduce(cfg, idx),
            });
        }
        found += 1;
        found
    };
    // 1. The traced, scheduled run.
    let (fs, rec) = match traced_mount(cfg, base) {
        Ok(x) => x,
        Err((point, what)) => {
            violate(rep, point.into(), what);
            return;
        }
    };
    let setup = multi::setup(&fs, w.fragment);
    let mut model0 = Model::default();
    for op in &setup {
        let got = guarded(|| apply_fs(&fs, op));
        let want = model0.apply(op);
        if got.as_ref().ok() != Some(&want) {
            violate(
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
    let results = match multi::run_threads(&fs, w, &marker) {
        Ok(r) => r,
        Err(e) => {
            violate(rep, "concurrent run".into(), e);
            return;
        }
    };
    for (t, rs) in results.iter().enumerate() {
        for (k, r) in rs.iter().enumerate() {
            if *r != Ok(()) {
                violate(
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
            violate(
                rep,
                "after the run (no crash)".into(),
                diff(&d, &expect(&all, 0)),
            );
            return;
        }
        Ok(Err(e)) => {
            violate(rep, "after the run (no crash)".into(), e);
            return;
        }
        Err(p) => {
            violate(
                rep,
                "after the run (no crash)".into(),
                format!("panicked: {p}"),
            );
            return;
        }
    }
    let events = rec.take();
    drop(fs);

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
            shared.explored.fetch_add(1, Ordering::Relaxed);
            infl.build_into(tracker.durable(), &choice, &mut scratch);
            let img = &scratch;
            let fresh = match shared.seen.lock() {
                Ok(mut g) => g.insert(image_hash(img)),
                Err(p) => p.into_inner().insert(image_hash(img)),
            };
            if !fresh {
                continue;
            }
            rep.unique_states += 1;
            let checked = (|| -> Result<(), String> {
                fsck(img)?;
                let (fs, got, revents) = recover(img, cfg.recovery_crashes)?;
                if !candidates.contains(&got) {
                    return Err(format!(
                        "not a combination of the returned writes and all-or-nothing writes in flight: vs all returned only {}",
                        diff(&got, &candidates[0])
                    ));
                }
                recovery_crashes(cfg, img, &revents, &got, rep)?;
                usable(&fs)
            })();
            if let Err(what) = checked {
                let persisted: Vec<String> = choice.iter().map(|c| c.to_string()).collect();
                let k = violate(
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
