//! What an exploration found: the summary counters (the JSON of `--json`), the
//! violations, and the per-workload recorder of violations.

use crate::config::{reproduce, Config};
use crate::explore::Shared;
use serde::Serialize;
use std::sync::atomic::Ordering;

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
    /// CPUs of the traced images.
    pub cpus: u32,
    /// Image CPUs the traced runs could be pinned to (fewer than `cpus` when this
    /// host has too few CPUs: the engine maps a host CPU `c` to image CPU `c % cpus`).
    pub cpus_reached: u32,
    /// The first violations of each workload, with how to reproduce them.
    #[serde(skip)]
    pub details: Vec<Violation>,
}

/// Violations kept per workload (the count goes on).
pub(crate) const MAX_PER_WORKLOAD: usize = 3;

/// Records the violations of one workload: counts them all (in the report and in
/// the shared count that `--max-violations` watches) and keeps the first
/// `MAX_PER_WORKLOAD` with the command that reproduces them.
pub(crate) struct Recorder<'a> {
    cfg: &'a Config,
    shared: &'a Shared,
    idx: usize,
    ops: Vec<String>,
    found: usize,
}

impl<'a> Recorder<'a> {
    pub(crate) fn new(cfg: &'a Config, shared: &'a Shared, idx: usize, ops: Vec<String>) -> Self {
        Recorder {
            cfg,
            shared,
            idx,
            ops,
            found: 0,
        }
    }

    /// Records one violation; returns how many this workload has now.
    pub(crate) fn violate(&mut self, rep: &mut Report, point: String, what: String) -> usize {
        rep.violations += 1;
        self.shared.violations.fetch_add(1, Ordering::Relaxed);
        if self.found < MAX_PER_WORKLOAD {
            rep.details.push(Violation {
                workload: self.idx,
                ops: self.ops.clone(),
                crash_point: point,
                what,
                reproduce: reproduce(self.cfg, self.idx),
            });
        }
        self.found += 1;
        self.found
    }
}
