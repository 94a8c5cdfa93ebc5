//! Scenario: every injected bug is caught. Each bug is run on the seq-1 workload
//! where the full run first reports it (bugs are process-wide, so one test runs them
//! one after another); the LAWN bugs with the `lawn` small-write mode, the bugs of the
//! concurrent append protocol on the multi-writer workload. The journal and allocator
//! bugs are run on 2-CPU images as well, the LAWN bugs of page-format descriptors on
//! version-6 images. The inode-flag bug is caught by the seq-1 flag sequences, the xattr bug by its
//! large-xattr sequence, the unnamed-file bug by the unnamed-file sequence.

use crashtest::{Config, Kind};
use mnemofs::SmallWriteMode;

#[test]
fn every_injected_bug_is_caught() {
    let cases = [
        ("data-not-persisted", Kind::Seq1, 0),
        ("no-fence-before-tail", Kind::Seq1, 3),
        ("no-fence-after-tail", Kind::Seq1, 0),
        ("journal-records-unfenced", Kind::Seq1, 0),
        ("journal-retired-early", Kind::Seq1, 0),
        ("rename-dentry-in-place", Kind::Seq1, 17),
        ("link-count-in-place", Kind::Seq1, 15),
        ("replay-uncommitted", Kind::Seq1, 0),
        ("free-list-before-rollback", Kind::Seq1, 0),
        ("inode-valid-in-place", Kind::Seq1, 0),
        ("free-before-commit", Kind::Seq1, 15),
        ("truncate-keeps-tail", Kind::Seq1, 11),
        ("tail-not-max", Kind::Multi, 1),
        ("mark-with-body", Kind::Multi, 0),
        ("lawn-descriptor-before-data", Kind::Seq1, 0),
        ("lawn-descriptor-kept-on-reuse", Kind::Seq1, 7),
        ("lawn-sum-unchecked", Kind::Seq1, 2),
        // The inode-flag sequences: the first sets and clears two flags at once.
        ("inode-flags-one-at-a-time", Kind::Seq1, 39),
        // The large-xattr sequence: its first value is a SET and two continuations.
        ("xattr-parts-apart", Kind::Seq1, 41),
        // The unnamed-file sequence: its second file is linked.
        ("tmpfile-link-apart", Kind::Seq1, 42),
        ("btime-stored-late", Kind::Seq1, 0),
    ];
    assert_eq!(
        cases.len(),
        mnemofs::bugs::ALL.len(),
        "a bug without a case"
    );
    for (name, kind, only) in cases {
        let bug = mnemofs::bugs::by_name(name).unwrap();
        let mut cfg = Config::new(kind);
        if kind == Kind::Multi {
            cfg.lock = mnemofs::LockMode::Segment;
            cfg.random_workloads = crashtest::DEFAULT_MULTI_WORKLOADS;
            cfg.recovery_crashes = false;
        }
        cfg.only = Some(only);
        cfg.bug = Some(bug);
        cfg.max_violations = Some(1);
        if name.starts_with("lawn-") {
            cfg.small_write = SmallWriteMode::Lawn;
        }
        let r = crashtest::run(&cfg, |_| {}).unwrap();
        assert!(r.violations > 0, "{name} was not caught: {r:?}");
        let v = &r.details[0];
        assert!(
            v.reproduce.contains(&format!("--inject-bug {name}")),
            "{v:?}"
        );
        assert!(!v.what.is_empty() && !v.crash_point.is_empty());
    }
    // The LAWN bugs that apply to page-format descriptors, on version-6 images (a
    // zone write there fences its slots before its descriptor).
    for (name, only) in [
        ("lawn-descriptor-before-data", 0),
        ("lawn-descriptor-kept-on-reuse", 7),
    ] {
        let mut cfg = Config::new(Kind::Seq1);
        cfg.small_write = SmallWriteMode::Lawn;
        cfg.page_descriptors = true;
        cfg.only = Some(only);
        cfg.bug = mnemofs::bugs::by_name(name);
        cfg.max_violations = Some(1);
        let r = crashtest::run(&cfg, |_| {}).unwrap();
        assert!(
            r.violations > 0,
            "{name} was not caught on a version-6 image: {r:?}"
        );
        assert!(
            r.details[0].reproduce.contains("--lawn-descriptors page"),
            "{:?}",
            r.details[0]
        );
    }
    // The journal and allocator bugs on 2-CPU images too (per-CPU journals and
    // allocators; each traced operation runs pinned to its CPU).
    let two_cpus = [
        ("data-not-persisted", Kind::Seq1, 0),
        ("journal-records-unfenced", Kind::Seq1, 0),
        ("journal-retired-early", Kind::Seq1, 0),
        ("replay-uncommitted", Kind::Seq1, 1),
        ("free-list-before-rollback", Kind::Seq1, 0),
        ("free-before-commit", Kind::Seq1, 15),
        ("tail-not-max", Kind::Multi, 1),
        ("mark-with-body", Kind::Multi, 0),
    ];
    for (name, kind, only) in two_cpus {
        let mut cfg = Config::new(kind);
        if kind == Kind::Multi {
            cfg.lock = mnemofs::LockMode::Segment;
            cfg.random_workloads = crashtest::DEFAULT_MULTI_WORKLOADS;
        }
        cfg.cpus = 2;
        cfg.recovery_crashes = false;
        cfg.only = Some(only);
        cfg.bug = Some(mnemofs::bugs::by_name(name).unwrap());
        cfg.max_violations = Some(1);
        let r = crashtest::run(&cfg, |_| {}).unwrap();
        assert!(r.violations > 0, "{name} was not caught on 2 CPUs: {r:?}");
        assert!(
            r.details[0].reproduce.contains("--cpus 2"),
            "{:?}",
            r.details[0]
        );
    }
    // And the bug is off again afterwards.
    let mut cfg = Config::new(Kind::Seq1);
    cfg.only = Some(3);
    let r = crashtest::run(&cfg, |_| {}).unwrap();
    assert_eq!(r.violations, 0, "{:?}", r.details);
}
