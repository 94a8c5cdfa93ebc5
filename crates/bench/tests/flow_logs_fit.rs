//! Scenario: the file-set workloads with many threads run to their end on the image
//! the bench sizes for them. Each thread's log grows until the workload truncates
//! it; the image budgets that size per thread (when the log was truncated at four
//! times the budget, sixteen threads filled the image: ENOSPC in webproxy and
//! webserver on a 16-core machine).

use mnemofs::{MountOptions, PRESETS};
use mnemofs_bench::{run, RunConfig, Stop, Workload};

fn long_run(w: Workload) -> RunConfig {
    let mut c = RunConfig::new(w);
    c.threads = 16;
    // Enough operations for every thread's log to pass its truncation size
    // several times over.
    c.stop = Stop::Ops(4_000_000);
    c.warmup = Stop::Ops(0);
    let preset = PRESETS
        .iter()
        .find(|p| p.name == "nova")
        .expect("nova preset");
    c.preset = preset.name.to_string();
    c.mount = MountOptions::from_preset(preset);
    c.image = Some(
        tempfile::Builder::new()
            .prefix("mnemofs-bench-test")
            .tempdir_in(mnemofs_bench::runner::default_image_dir())
            .unwrap()
            .keep()
            .join("img"),
    );
    c
}

#[test]
fn sixteen_threads_of_webproxy_fit_their_image() {
    let c = long_run(Workload::WebProxy);
    let img = c.image.clone().unwrap();
    let r = run(&c);
    let _ = std::fs::remove_dir_all(img.parent().unwrap());
    let r = r.unwrap_or_else(|e| panic!("webproxy, 16 threads: {e}"));
    assert!(r.ops >= 4_000_000, "{} ops", r.ops);
}
