//! mnemofs benchmarks (DESIGN.md §9, docs/BENCHMARKS.md).
//!
//! - [`config`]: the workloads (FxMark, fio-style, filebench-like, small files), their
//!   parameters and a run's configuration.
//! - [`workloads`]: what each thread of each workload does, through the engine
//!   interface (`mnemofs::FileSystem`), generic over the implementation.
//! - [`runner`]: one in-process run on a fresh image: warm-up excluded, per-op
//!   latency, PM counters over the measured phase only, progress bar. [`run`] builds
//!   the local engine; [`measure`] runs a workload on any `FileSystem`.
//! - [`stats`]: latency histogram and medians. [`dist`]: the normal distribution of
//!   `skewread`.
//! - [`result`]: one JSON object per run and the terminal tables.
//! - [`compare`]: variants (presets × profiles) interleaved over rounds; medians and
//!   ratios. [`suite`]: every workload × every preset into a results folder.
//! - [`plot`]: SVG bar charts (plotters). [`peers`]: fio against kernel file systems
//!   and a mnemofs FUSE mount.
//! - [`paper`]: the papers mnemofs implements and their headline claims, as data
//!   (`mnemofs bench paper`).
//!
//! Benchmarks print figures; they assert nothing about time.

// Not yet documented item by item: 132 public items, mostly the fields of serialized
// result and config records; the engine's docs came first (engine-seams issue).
#![allow(missing_docs)]

pub mod compare;
pub mod config;
pub mod dist;
mod error;
pub mod paper;
pub mod peers;
pub mod plot;
pub mod result;
pub mod runner;
pub mod stats;
pub mod suite;
pub mod workloads;

pub use config::{ImagePages, Params, RunConfig, Stop, Workload};
pub use error::{BenchError, BenchResultT};
pub use result::BenchResult;
pub use runner::{measure, measure_observed, run, EngineInfo};
