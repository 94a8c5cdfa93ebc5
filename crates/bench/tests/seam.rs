//! The engine interface is a real seam: the bench harness runs workloads on a second
//! implementation of `mnemofs::FileSystem` (a decorator over the local engine that
//! counts calls and has its own handle type), and every engine call of the harness
//! goes through it — the exact counts below would be zeros (or off) if any part of
//! the harness still reached `Fs` directly.

mod common;

use common::counting::Counting;
use mnemofs::{FileSystem, MountOptions, PRESETS};
use mnemofs_bench::runner::fresh_image;
use mnemofs_bench::{measure, EngineInfo, RunConfig, Stop, Workload};
use std::collections::BTreeMap;

const OPS: u64 = 240;
const WARMUP: u64 = 20;

fn config(w: Workload) -> RunConfig {
    let mut c = RunConfig::new(w);
    c.threads = 2;
    c.stop = Stop::Ops(OPS);
    c.warmup = Stop::Ops(WARMUP);
    c.preset = PRESETS[0].name.to_string();
    c.mount = MountOptions::from_preset(&PRESETS[0]);
    c
}

/// Runs `c` through the harness on a `Counting` engine over a fresh local image;
/// returns the result and the calls the harness made.
fn run_counted(c: &RunConfig) -> (mnemofs_bench::BenchResult, BTreeMap<&'static str, u64>) {
    let dir = tempfile::tempdir_in(mnemofs_bench::runner::default_image_dir()).unwrap();
    let image = fresh_image(Some(&dir.path().join("img")), 128 << 20).unwrap();
    let fs = mnemofs::mount(&image.path, &c.mount).unwrap();
    let info = EngineInfo::of(&fs);
    let engine = Counting::new(fs);
    let r = measure(c, &engine, &info, "counted", 128 << 20).unwrap();
    let counts = engine.counts();
    engine.unmount().unwrap();
    (r, counts)
}

fn expect(pairs: &[(&'static str, u64)]) -> BTreeMap<&'static str, u64> {
    pairs.iter().copied().collect()
}

#[test]
fn dwom_runs_through_the_interface_with_its_handles() {
    let (r, counts) = run_counted(&config(Workload::Dwom));
    assert_eq!(r.ops, OPS);
    assert_eq!(r.user_bytes_written, OPS * 4096);
    // The PM counters came through the interface too: DWOM's per-write traffic (see
    // every_workload.rs): a 4 KiB page and a 64 B entry non-temporal per op, and a
    // fresh 4 KiB log page (non-temporal) now and then.
    let extra = r.pm_nt_bytes_written - OPS * (4096 + 64);
    assert!(
        extra.is_multiple_of(64) && extra <= (OPS / 32 + 2) * 4096,
        "{}",
        r.pm_nt_bytes_written
    );
    assert!(r.fences >= OPS * 2);
    assert_eq!(
        counts,
        expect(&[
            // Data set: one shared file, filled with one 8 KiB write (2 threads × 4 KiB).
            ("create", 1),
            ("write", 1),
            // One handle per thread, then every op (warm-up included) through it.
            ("open_handle", 2),
            ("handle_write", OPS + WARMUP),
            // Read just before and just after the measured phase.
            ("pm_counters", 2),
        ])
    );
}

#[test]
fn smallfiles_runs_its_namespace_ops_through_the_interface() {
    let mut c = config(Workload::SmallFiles);
    c.params.files = 50;
    let (r, counts) = run_counted(&c);
    assert_eq!(r.ops, OPS);
    let per_thread = (OPS + WARMUP) / 2;
    // Each op: create + open + one write (file size = io size) + release; once 50
    // files are live in a thread's directory, it first unlinks the oldest.
    assert_eq!(
        counts,
        expect(&[
            ("mkdir", 2),
            ("create", OPS + WARMUP),
            ("open", OPS + WARMUP),
            ("write", OPS + WARMUP),
            ("release", OPS + WARMUP),
            ("unlink", 2 * (per_thread - 50)),
            ("pm_counters", 2),
        ])
    );
}
