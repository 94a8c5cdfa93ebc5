//! Scenario: the explorer on the real engine finds no violation on a few seq-1
//! workloads of every kind (namespace, data, rename, inode flags), and does explore
//! states.
//! (The full seq-1, seq-2 and random runs are `mnemofs crashtest`, run by the CI
//! script.)

use crashtest::{Config, Kind};

#[test]
fn sampled_seq1_workloads_have_no_violation() {
    for only in [0, 3, 10, 17, 23] {
        let mut cfg = Config::new(Kind::Seq1);
        cfg.only = Some(only);
        let r = crashtest::run(&cfg, |_| {}).unwrap();
        assert_eq!(r.workloads_run, 1);
        assert!(r.unique_states > 10, "workload {only}: {r:?}");
        assert!(r.recovery_crash_states > 0);
        assert_eq!(r.violations, 0, "workload {only}: {:?}", r.details);
    }
}

#[test]
fn random_workloads_have_no_violation() {
    let mut cfg = Config::new(Kind::Random);
    cfg.seed = 7;
    cfg.random_workloads = 3;
    cfg.max_states = Some(3000);
    let r = crashtest::run(&cfg, |_| {}).unwrap();
    assert!(r.states_explored > 0);
    assert_eq!(r.violations, 0, "{:?}", r.details);
}

#[test]
fn inode_flag_workloads_have_no_violation() {
    // The workloads' flag values are Linux's, as the engine keeps them.
    use crashtest::workload::flags;
    use mnemofs::inode_flags as fl;
    assert_eq!(
        [
            flags::SYNC,
            flags::IMMUTABLE,
            flags::APPEND,
            flags::NODUMP,
            flags::NOATIME,
            flags::DIRSYNC
        ],
        [
            fl::SYNC,
            fl::IMMUTABLE,
            fl::APPEND,
            fl::NODUMP,
            fl::NOATIME,
            fl::DIRSYNC
        ]
    );
    // The flag sequences are the last seq-1 workloads.
    let mut cfg = Config::new(Kind::Seq1);
    let n = crashtest::workload_count(&cfg);
    let k = crashtest::workload::flag_sequences().len();
    for only in n - k..n {
        cfg.only = Some(only);
        let r = crashtest::run(&cfg, |_| {}).unwrap();
        assert_eq!(r.workloads_run, 1);
        assert!(r.unique_states > 5, "workload {only}: {r:?}");
        assert_eq!(r.violations, 0, "workload {only}: {:?}", r.details);
    }
}
