//! Scenario: traced runs on a 2-CPU image really use both CPUs' per-CPU structures.
//! The engine picks a journal, an allocator range and an inode table by the CPU a
//! thread runs on, so the explorer pins each traced operation to a CPU; here the
//! PM stores of the seq-1 workloads' explored operations (after the setup) are
//! mapped onto the image's layout (the engine's public `Geometry`), and each CPU's
//! journal area and each CPU's data range must have been written.

use crashtest::{Config, Kind};
use mnemofs::format::{Geometry, BLOCK};
use pm::{Event, Marker};

#[test]
fn two_cpu_runs_write_both_cpus_journals_and_data_ranges() {
    // Both image CPUs need a host CPU of their parity that this process may run on
    // (not only two CPUs: {0, 2} reaches image CPU 0 alone).
    let reached = crashtest::reachable_cpus(2);
    if reached < 2 {
        eprintln!("skipped: this host lets the test pin to {reached} of the image's 2 CPUs");
        return;
    }
    let mut cfg = Config::new(Kind::Seq1);
    cfg.cpus = 2;
    let first_explored = crashtest::workload::setup().len();
    let mut journals = [0usize; 2];
    let mut data = [0usize; 2];
    for (idx, _) in crashtest::workloads(&cfg) {
        let (base, events) = crashtest::trace(&cfg, idx).unwrap();
        let geo = Geometry::decode(&base[..128], base.len() as u64).unwrap();
        assert_eq!(geo.cpus, 2);
        let mut explored = false;
        let (mut j, mut d) = ([false; 2], [false; 2]);
        for e in &events {
            match e {
                Event::Marker(Marker::OpBegin(k)) => {
                    explored = k.parse::<usize>().is_ok_and(|k| k >= first_explored)
                }
                Event::Store { off, .. } if explored => {
                    for c in 0..2u32 {
                        let js = geo.journal_off(c).get();
                        if (js..js + BLOCK).contains(off) {
                            j[c as usize] = true;
                        }
                    }
                    let b = off / BLOCK;
                    if geo.is_data_block(b) {
                        // The allocator's per-CPU ranges: an even split of the data
                        // area (space/placement.rs), the last CPU takes the rest.
                        let per = geo.data_blocks() / 2;
                        d[((b - geo.data_start) / per).min(1) as usize] = true;
                    }
                }
                _ => {}
            }
        }
        for c in 0..2 {
            journals[c] += usize::from(j[c]);
            data[c] += usize::from(d[c]);
        }
    }
    eprintln!("workloads writing CPU 0/1 journal: {journals:?}; data range: {data:?}");
    assert!(journals.iter().all(|&n| n > 0), "journals {journals:?}");
    assert!(data.iter().all(|&n| n > 0), "data ranges {data:?}");
}

#[test]
fn two_cpu_lawn_runs_write_both_sub_zones() {
    // LAWN's sub-zone of a page is a hash of (inode, page), not the CPU: a 2-CPU
    // image's small writes must land in both sub-zones' slots.
    let mut cfg = Config::new(Kind::Seq1);
    cfg.cpus = 2;
    cfg.small_write = mnemofs::SmallWriteMode::Lawn;
    let mut subs = [0usize; 2];
    for (idx, _) in crashtest::workloads(&cfg) {
        let (base, events) = crashtest::trace(&cfg, idx).unwrap();
        let geo = Geometry::decode(&base[..128], base.len() as u64).unwrap();
        let per = geo.slots_per_cpu() * geo.slot_size as u64;
        for e in &events {
            if let Event::Store { off, .. } = e {
                let start = geo.slot_off(0).get();
                if (start..start + 2 * per).contains(off) {
                    subs[((off - start) / per) as usize] += 1;
                }
            }
        }
    }
    eprintln!("LAWN slot stores per sub-zone: {subs:?}");
    assert!(subs.iter().all(|&n| n > 0), "sub-zones {subs:?}");
}

/// The store offsets of a trace (timestamps make the stored bytes differ from run
/// to run; where they go must not).
fn offsets(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Store { off, .. } => Some(*off),
            _ => None,
        })
        .collect()
}

#[test]
fn two_cpu_traced_runs_are_reproducible() {
    // Each operation's CPU is fixed by the workload and the operation, not by where
    // the scheduler happened to run the thread: two traces of a workload store at
    // the same places.
    let mut cfg = Config::new(Kind::Seq1);
    cfg.cpus = 2;
    for (idx, _) in crashtest::workloads(&cfg) {
        let (_, a) = crashtest::trace(&cfg, idx).unwrap();
        for _ in 0..3 {
            let (_, b) = crashtest::trace(&cfg, idx).unwrap();
            assert_eq!(offsets(&a), offsets(&b), "seq1 workload {idx}");
        }
    }
}
