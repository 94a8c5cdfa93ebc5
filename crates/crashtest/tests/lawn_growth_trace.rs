//! Scenario: the crash explorer's LAWN workloads include the zone growing and
//! shrinking, so its crash states cover both protocols (docs/FORMAT.md §2.9,
//! "Growth"): the traced run of the growth sequence stores a chunk table entry (the
//! zone grew), writes slots inside the chunk (runs went there), and clears the
//! entry again (the chunk went back), on 1 and 2 CPUs.

use crashtest::workload::Op;
use crashtest::{Config, Kind};
use mnemofs::format::{Geometry, BLOCK};
use pm::Event;

#[test]
fn the_growth_workload_grows_uses_and_returns_a_chunk() {
    for cpus in [1, 2] {
        let mut cfg = Config::new(Kind::Seq1);
        cfg.cpus = cpus;
        cfg.small_write = mnemofs::SmallWriteMode::Lawn;
        let (idx, _) = crashtest::workloads(&cfg)
            .into_iter()
            .find(|(_, ops)| ops.contains(&Op::Resize))
            .expect("a workload with lawn_resize()");
        let (base, events) = crashtest::trace(&cfg, idx).unwrap();
        let geo = Geometry::decode(&base[..128], base.len() as u64).unwrap();
        assert!(geo.zone_chunks > 0, "{geo:?}");
        let table = geo.chunk_entry_off(0).get()..geo.chunk_entry_off(geo.zone_chunks as u64).get();
        let (mut set, mut cleared) = (Vec::new(), 0);
        for e in &events {
            if let Event::Store { off, data, .. } = e {
                if table.contains(off) {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(&data[..8]);
                    match u64::from_le_bytes(w) {
                        0 => cleared += 1,
                        v => {
                            let entry = (off - table.start) / 8;
                            let b = mnemofs::format::decode_chunk_entry(entry, v)
                                .unwrap()
                                .unwrap();
                            set.push(b);
                        }
                    }
                }
            }
        }
        assert!(
            !set.is_empty() && cleared >= set.len(),
            "{cpus} CPUs: set {set:?}, cleared {cleared}"
        );
        // Slots of a chunk: past its descriptor blocks.
        let in_chunk_slots = events.iter().any(|e| match e {
            Event::Store { off, .. } => set.iter().any(|&b| {
                let lo = (b + geo.chunk_desc_blocks()) * BLOCK;
                (lo..(b + geo.zone_chunk_blocks as u64) * BLOCK).contains(off)
            }),
            _ => false,
        });
        assert!(in_chunk_slots, "{cpus} CPUs: no run went into a chunk");
    }
}
