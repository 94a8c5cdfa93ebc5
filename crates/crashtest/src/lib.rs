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
//!
//! Modules: `config` (what to explore), `image` (the images: formatted, traced
//! mount, dedup hash), `explore` (workload selection, the exploring threads),
//! `seq` and `multi` (the single-thread and the multi-writer explorers), `check`
//! (the checks on one crash state), `report` (counters and violations); `crash`
//! builds crash states, `workload` and `model` are the workloads and the oracle.

mod check;
pub mod config;
pub mod crash;
pub mod explore;
pub mod fuzz;
mod image;
pub mod model;
pub mod multi;
pub mod report;
mod seq;
pub mod workload;

pub use config::{Config, Kind, DEFAULT_MULTI_WORKLOADS, IMAGE_SIZE};
pub use explore::{run, trace, workload_count, workloads};
pub use report::{Report, Violation};

/// Of an image's `cpus` CPUs, how many a traced run can pin its operations to on
/// this host (image CPU `v` needs a host CPU `c` with `c % cpus == v` that this
/// process may run on).
pub fn reachable_cpus(cpus: u32) -> u32 {
    image::Pins::new(cpus).reachable()
}
