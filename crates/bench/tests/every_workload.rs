//! Scenario: a tiny run of every workload with every preset that exists yields a
//! complete JSON result whose counters are consistent. Benchmarks are not tests:
//! nothing here depends on time.

use mnemofs::{MountOptions, PRESETS};
use mnemofs_bench::{run, BenchResult, RunConfig, Stop, Workload};
use pm::PmProfile;

const FIELDS: &[&str] = &[
    "workload",
    "preset",
    "threads",
    "io_size",
    "duration_s",
    "ops",
    "ops_per_sec",
    "bytes_per_sec",
    "p50_ns",
    "p99_ns",
    "pm_bytes_written",
    "user_bytes_written",
    "write_amplification",
    "flushes",
    "fences",
    "pm_profile",
];

const OPS: u64 = 240;

fn tiny(w: Workload, preset: &mnemofs::Preset, profile: PmProfile) -> RunConfig {
    let mut c = RunConfig::new(w);
    c.threads = 2;
    c.stop = Stop::Ops(OPS);
    c.warmup = Stop::Ops(20);
    c.preset = preset.name.to_string();
    c.mount = MountOptions::from_preset(preset);
    c.mount.pm_profile = profile;
    c.image = Some(
        tempfile::Builder::new()
            .prefix("mnemofs-bench-test")
            .tempdir_in(mnemofs_bench::runner::default_image_dir())
            .unwrap()
            .keep()
            .join("img"),
    );
    let p = &mut c.params;
    match w {
        Workload::RandWrite
        | Workload::RandRead
        | Workload::Mixed
        | Workload::SeqRead
        | Workload::SkewRead => p.file_size = 1 << 20,
        Workload::Dwal => p.file_size = 256 << 10,
        Workload::FileServer | Workload::VarMail | Workload::WebProxy | Workload::WebServer => {
            p.files = 32;
            p.file_size = 32 << 10;
        }
        Workload::Oltp => {
            p.files = 2;
            p.file_size = 1 << 20;
        }
        Workload::SmallFiles => p.files = 50,
        Workload::Dwom | Workload::Drbm | Workload::Drbl => {}
    }
    c
}

fn run_tiny(c: &RunConfig) -> BenchResult {
    let dir = c
        .image
        .as_ref()
        .and_then(|p| p.parent())
        .map(|d| d.to_path_buf());
    let r = run(c).unwrap_or_else(|e| panic!("{}: {e}", c.workload.name()));
    if let Some(d) = dir {
        // The run removed its image; the directory is empty.
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
        std::fs::remove_dir(&d).unwrap();
    }
    r
}

fn is_read_only(w: Workload) -> bool {
    matches!(
        w,
        Workload::Drbm
            | Workload::Drbl
            | Workload::RandRead
            | Workload::SeqRead
            | Workload::SkewRead
    )
}

fn check(w: Workload, r: &BenchResult) {
    let name = w.name();
    let v = serde_json::to_value(r).unwrap();
    for f in FIELDS {
        assert!(v.get(f).is_some(), "{name}: field {f} missing");
    }
    let line = r.to_json_line();
    assert!(!line.contains('\n'));
    let back: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(back["workload"], name);
    assert_eq!(back["ops"], OPS);

    assert_eq!(r.workload, name);
    assert_eq!(r.threads, 2);
    assert_eq!(r.ops, OPS, "{name}");
    assert!(
        r.duration_s > 0.0 && r.ops_per_sec > 0.0 && r.cpu_s > 0.0,
        "{name}"
    );
    assert!(
        r.p50_ns > 0 && r.p50_ns <= r.p99_ns && r.p99_ns <= r.max_ns,
        "{name}"
    );
    assert!(
        r.user_bytes_read + r.user_bytes_written > 0,
        "{name}: moved no data"
    );
    if is_read_only(w) {
        assert_eq!(r.user_bytes_written, 0, "{name}");
        assert!(r.user_bytes_read >= OPS * r.io_size, "{name}");
        // Reads store nothing to PM.
        assert_eq!(r.pm_bytes_written, 0, "{name}");
        assert_eq!((r.flushes, r.fences), (0, 0), "{name}");
        assert_eq!(r.write_amplification, None, "{name}");
    } else {
        assert!(r.user_bytes_written > 0, "{name}");
        // Every user byte reaches PM at least once (copy-on-write), and every
        // durable write flushes and fences.
        assert!(r.pm_bytes_written >= r.user_bytes_written, "{name}");
        assert!(r.fences > 0 && r.flushes > 0, "{name}");
        let wa = r.write_amplification.unwrap();
        let expect = r.pm_bytes_written as f64 / r.user_bytes_written as f64;
        assert!((wa - expect).abs() < 1e-9, "{name}");
        assert!(r.pm_nt_bytes_written <= r.pm_bytes_written, "{name}");
    }
    assert!((r.fences_per_op - r.fences as f64 / OPS as f64).abs() < 1e-9);
}

#[test]
fn every_workload_runs_with_every_preset() {
    for preset in PRESETS {
        for &w in Workload::ALL {
            let r = run_tiny(&tiny(w, preset, PmProfile::DRAM));
            assert_eq!(r.preset, preset.name);
            assert_eq!(r.pm_profile, "dram");
            assert_eq!(r.pm_modeled_delay_ns, 0);
            check(w, &r);
        }
    }
}

#[test]
fn optane_charges_exactly_the_modeled_cost_of_a_4k_read() {
    let preset = &PRESETS[0];
    let mut c = tiny(Workload::RandRead, preset, PmProfile::OPTANE);
    // One node, whatever the host has: on a NUMA host the bench would place thread 1
    // on node 1, away from the image, and charge its reads the remote cost
    // (crates/mnemofs/tests/numa_placement.rs asserts those on given topologies).
    c.mount.topology = Some(pm::Topology::parse("1").unwrap());
    let r = run_tiny(&c);
    check(Workload::RandRead, &r);
    assert_eq!(r.pm_profile, "optane");
    // One 4 KiB PM read per operation: 305 ns + 4096 B / 6.6 GB/s = 925 ns.
    assert_eq!(PmProfile::OPTANE.read_cost_ns(4096), 925);
    assert_eq!(r.pm_modeled_delay_ns, OPS * 925);
}

#[test]
fn counters_of_a_4k_overwrite_run_are_exact() {
    // DWOM overwrites one 4 KiB block per op: the engine's exact per-write traffic
    // (crates/mnemofs/tests/basic_ops.rs `counters_of_a_4k_write_are_exact`) times
    // the ops: a 4 KiB page and a 64 B log entry, both non-temporal, and an 8 B
    // tail; two fences. Log upkeep adds a little: a fresh log page (4 KiB,
    // non-temporal) every ~62 entries, and GC's stores.
    let preset = &PRESETS[0];
    let r = run_tiny(&tiny(Workload::Dwom, preset, PmProfile::DRAM));
    check(Workload::Dwom, &r);
    assert_eq!(r.user_bytes_written, OPS * 4096);
    let extra = r.pm_nt_bytes_written - OPS * (4096 + 64);
    assert!(
        extra.is_multiple_of(64) && extra <= (OPS / 32 + 2) * 4096,
        "{}",
        r.pm_nt_bytes_written
    );
    // Two fences per write, plus the few of log GC when a log page is retired.
    assert!(r.fences >= OPS * 2, "{}", r.fences);
    assert!(r.fences <= OPS * 2 + OPS / 10, "{}", r.fences);
    assert!(r.pm_bytes_written >= OPS * (4096 + 64 + 8));
}
