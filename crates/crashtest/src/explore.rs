//! Orchestration: selects the workloads of a configuration and explores them on
//! several threads (each workload by the single-thread explorer, `seq`, or the
//! multi-writer one, `multi`), sharing the deduplication set and the stop
//! conditions, and sums their reports.

use crate::config::{Config, Kind};
use crate::image::base_image;
use crate::multi;
use crate::report::Report;
use crate::seq;
use crate::workload::{self, Op};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::Instant;

/// Random crash-state choices per crash point when too many lines are in flight.
pub(crate) const RANDOM_CHOICES: usize = 24;

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
        multi_items(cfg).len()
    } else {
        workloads(cfg).len()
    }
}

/// A traced run without crash exploration: the empty image of `cfg` and the PM
/// events of single-thread workload `idx` run on it (for tests that inspect what the
/// traced runs touch, e.g. which CPUs' journals).
pub fn trace(cfg: &Config, idx: usize) -> Result<(Vec<u8>, Vec<pm::Event>), String> {
    let ops = workloads(cfg)
        .into_iter()
        .find(|(i, _)| *i == idx)
        .map(|(_, ops)| ops)
        .ok_or_else(|| format!("no {} workload {idx}", cfg.kind.name()))?;
    let base = base_image(cfg.cpus, cfg.devices, cfg.page_descriptors)?;
    let events = seq::trace(cfg, &base, idx, &ops)?;
    Ok((base, events))
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
pub(crate) struct Shared {
    pub(crate) seen: Mutex<HashSet<u128>>,
    pub(crate) explored: AtomicU64,
    pub(crate) violations: AtomicUsize,
}

impl Shared {
    pub(crate) fn stop(&self, cfg: &Config) -> bool {
        cfg.max_states
            .is_some_and(|m| self.explored.load(Ordering::Relaxed) >= m)
            || cfg
                .max_violations
                .is_some_and(|m| self.violations.load(Ordering::Relaxed) >= m)
    }

    /// Counts one explored crash state; whether its image is new (not seen by any
    /// exploring thread before).
    pub(crate) fn fresh(&self, img: &[u8]) -> bool {
        self.explored.fetch_add(1, Ordering::Relaxed);
        let h = crate::image::image_hash(img);
        match self.seen.lock() {
            Ok(mut g) => g.insert(h),
            Err(p) => p.into_inner().insert(h),
        }
    }
}

fn run_inner(cfg: &Config, progress: &mut dyn FnMut(&Report)) -> Result<Report, String> {
    let t0 = Instant::now();
    let base = base_image(cfg.cpus, cfg.devices, cfg.page_descriptors)?;
    let wls: Vec<Item> = if cfg.kind == Kind::Multi {
        multi_items(cfg)
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
        cpus: cfg.cpus,
        cpus_reached: crate::image::Pins::new(cfg.cpus).reachable(),
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
                    Item::Seq(idx, ops) => seq::explore(cfg, base, *idx, ops, shared, &mut r),
                    Item::Multi(idx, w) => multi::explore(cfg, base, *idx, w, shared, &mut r),
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

/// The multi-writer workloads of `cfg`, `--only` / `--sample` applied.
fn multi_items(cfg: &Config) -> Vec<Item> {
    select(
        cfg,
        multi::workloads(cfg.seed, cfg.random_workloads)
            .into_iter()
            .enumerate()
            .map(|(i, w)| Item::Multi(i, w))
            .collect(),
    )
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
