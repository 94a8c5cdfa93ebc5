//! What an exploration found: the summary counters (the JSON of `--json`), the
//! violations, and the per-workload recorder of violations.

use crate::config::{reproduce, Config};
use crate::explore::Shared;
use serde::Serialize;
use std::sync::atomic::Ordering;

/// One violated check.
#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    pub workload: usize,
    pub ops: Vec<String>,
    pub crash_point: String,
    pub what: String,
    pub reproduce: String,
}

/// Progress counters (also the final summary).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub workload: String,
    pub workloads: usize,
    pub workloads_run: usize,
    pub crash_points: u64,
    pub states_explored: u64,
    pub unique_states: u64,
    pub recovery_crash_states: u64,
    /// Violations found (all of them; `details` keeps the first few per workload).
    pub violations: usize,
    pub seconds: f64,
    pub states_per_second: f64,
    pub injected_bug: Option<String>,
    /// CPUs of the traced images.
    pub cpus: u32,
    /// Image CPUs the traced runs could be pinned to (fewer than `cpus` when this
    /// host has too few CPUs: the engine maps a host CPU `c` to image CPU `c % cpus`).
    pub cpus_reached: u32,
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
