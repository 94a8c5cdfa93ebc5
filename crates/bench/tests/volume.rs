//! Benchmarks on a volume of several devices: `--devices N` (image files beside the
//! first) and `--image a,b@1` (the devices named), with each thread's bytes counted
//! by (thread node, device node) and the images removed afterwards.

use mnemofs::{MountOptions, PlacementMode, PRESETS};
use mnemofs_bench::{run, RunConfig, Stop, Workload};

fn config() -> RunConfig {
    let mut c = RunConfig::new(Workload::RandWrite);
    c.threads = 2;
    c.stop = Stop::Ops(400);
    c.warmup = Stop::Ops(0);
    c.params.file_size = 4 << 20;
    c.image_size = Some(32 << 20);
    c.preset = "nova".into();
    c.mount = MountOptions {
        placement: PlacementMode::Local,
        topology: Some("2".parse().unwrap()),
        exclusive: false,
        ..MountOptions::from_preset(&PRESETS[0])
    };
    c.progress = false;
    c
}

#[test]
fn a_named_device_list_is_one_volume_and_writers_stay_local() {
    let dir = tempfile::tempdir_in(mnemofs_bench::runner::default_image_dir()).unwrap();
    let (a, b) = (dir.path().join("a.img"), dir.path().join("b.img"));
    let mut c = config();
    c.image = Some(format!("{},{}@1", a.display(), b.display()).into());
    let r = run(&c).unwrap();
    assert_eq!(r.devices, 2);
    assert_eq!(r.placement, "local");
    // Threads 0 and 1 run as nodes 0 and 1, and each one's file was made as a
    // thread of its node: its data pages, log and inode are on that node's device,
    // so every byte a thread writes is local.
    let nb = &r.node_bytes;
    assert!(nb[0][0] > 0 && nb[1][1] > 0, "{nb:?}");
    assert_eq!((nb[0][1], nb[1][0]), (0, 0), "{nb:?}");
    assert!(!a.exists() && !b.exists(), "the benchmark left its images");
}

#[test]
fn devices_n_makes_the_files_beside_the_first() {
    let dir = tempfile::tempdir_in(mnemofs_bench::runner::default_image_dir()).unwrap();
    let mut c = config();
    c.devices = 2;
    c.image = Some(dir.path().join("v.img"));
    let r = run(&c).unwrap();
    assert_eq!(r.devices, 2);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn compare_keeps_variants_that_differ_only_in_placement_apart() {
    use mnemofs_bench::compare::{run_compare, CompareConfig, Variant};
    let dir = tempfile::tempdir_in(mnemofs_bench::runner::default_image_dir()).unwrap();
    let mut base = config();
    base.devices = 2;
    base.image = Some(dir.path().join("v.img"));
    let variant = |p: PlacementMode| Variant {
        label: format!("nova/{}", p.name()),
        preset: "nova".into(),
        mount: MountOptions {
            placement: p,
            ..base.mount.clone()
        },
        image_pages: None,
    };
    let cfg = CompareConfig {
        base: base.clone(),
        variants: vec![
            variant(PlacementMode::Local),
            variant(PlacementMode::Single),
        ],
        threads: vec![2],
        rounds: 1,
    };
    let (all, sums) = run_compare(&cfg, |_| {}).unwrap();
    let places: Vec<(&str, &str)> = all
        .iter()
        .map(|r| (r.variant.as_str(), r.placement.as_str()))
        .collect();
    assert_eq!(places, [("nova/local", "local"), ("nova/single", "single")]);
    let rows: Vec<(&str, usize)> = sums
        .iter()
        .map(|s| (s.variant.as_str(), s.rounds))
        .collect();
    assert_eq!(rows, [("nova/local", 1), ("nova/single", 1)]);
    // `single` puts every page on device 0: node 1's thread writes nothing local.
    assert_eq!(all[1].node_bytes[1][1], 0);
}
