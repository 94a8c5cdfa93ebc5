//! The single-thread explorer (seq-1, seq-2, random): one traced run of a workload
//! beside the oracle, then a crash at every fence inside each of its operations and
//! at each return, every crash state checked (`check::check_state`).

use crate::check::{check_state, diff, guarded};
use crate::config::Config;
use crate::crash::Tracker;
use crate::explore::{Shared, RANDOM_CHOICES};

/// Most lines in flight at a crash point for which every pair of whole lines is
/// explored; beyond (a 64 KiB xattr value's 17 log pages: ~1,100 lines, 600,000
/// pairs) single lines, all-but-one and random choices. Every other seq workload
/// stays below it.
const SEQ_PAIR_LINES: usize = 512;
use crate::image::{op_cpu, traced_mount, Pins};
use crate::model::Model;
use crate::report::{Recorder, Report, MAX_PER_WORKLOAD};
use crate::workload::{self, apply_fs, dump_fs, Op};
use pm::{Event, Marker};

/// Explores workload `idx` (`ops`, after the setup) from the image `base`.
pub(crate) fn explore(
    cfg: &Config,
    base: &[u8],
    idx: usize,
    ops: &[Op],
    shared: &Shared,
    rep: &mut Report,
) {
    let setup = setup_ops(cfg);
    let all: Vec<Op> = setup.iter().chain(ops.iter()).cloned().collect();
    // Crashes only after the workload's last checkpoint (if any).
    let first_crash_op = setup.len()
        + ops
            .iter()
            .rposition(|o| *o == Op::Checkpoint)
            .map_or(0, |i| i + 1);
    let op_names: Vec<String> = ops.iter().map(|o| o.to_string()).collect();
    let mut viol = Recorder::new(cfg, shared, idx, op_names);

    // 1. Run once, traced, beside the oracle.
    let (events, dumps) = match traced_run(cfg, base, idx, &all) {
        Ok(x) => x,
        Err((point, what)) => {
            viol.violate(rep, point, what);
            return;
        }
    };

    // 2. Replay the trace; crash at every fence inside a workload operation and at
    // its return.
    let mut tracker = Tracker::with_tear16(base.to_vec(), cfg.tear16);
    let mut scratch = Vec::with_capacity(base.len());
    let mut cur: Option<usize> = None;
    let mut fence_no = 0;
    for e in &events {
        // A crash "at a fence" happens before the fence completes: what it would
        // make durable is still in flight. Every other event is applied first.
        if *e != Event::Fence {
            tracker.apply(e);
        }
        let (k, returned) = match e {
            Event::Marker(Marker::OpBegin(k)) => {
                cur = k.parse().ok();
                fence_no = 0;
                continue;
            }
            Event::Marker(Marker::OpEnd(_)) => match cur.take() {
                Some(k) => (k, true),
                None => continue,
            },
            Event::Fence => {
                let at = cur.map(|k| (k, false));
                match at {
                    Some(x) if x.0 >= first_crash_op => {
                        fence_no += 1;
                        x
                    }
                    _ => {
                        tracker.apply(e);
                        continue;
                    }
                }
            }
            _ => continue,
        };
        if k < first_crash_op {
            continue;
        }
        if shared.stop(cfg) {
            return;
        }
        rep.crash_points += 1;
        let op = &all[k];
        let point = if returned {
            format!("{op}: after it returned")
        } else {
            format!("{op}: at fence {fence_no}")
        };
        let inflight = tracker.in_flight();
        let choices = inflight.choices_with(
            cfg.seed ^ ((idx as u64) << 32) ^ rep.crash_points,
            RANDOM_CHOICES,
            SEQ_PAIR_LINES,
        );
        for choice in choices {
            rep.states_explored += 1;
            inflight.build_into(tracker.durable(), &choice, &mut scratch);
            let img = &scratch;
            if !shared.fresh(img) {
                continue;
            }
            rep.unique_states += 1;
            let (before, after) = (&dumps[k], &dumps[k + 1]);
            if let Err(what) = check_state(cfg, img, before, after, returned, op, rep) {
                let persisted: Vec<String> = choice.iter().map(|c| c.to_string()).collect();
                let n = viol.violate(
                    rep,
                    format!(
                        "{point} (in-flight lines: {}, stores persisted per line: [{}])",
                        inflight.lines(),
                        persisted.join(",")
                    ),
                    what,
                );
                if n >= MAX_PER_WORKLOAD {
                    return;
                }
            }
            if shared.stop(cfg) {
                return;
            }
        }
        if *e == Event::Fence {
            tracker.apply(e);
        }
    }
}

/// The setup of every single-thread workload of `cfg`.
fn setup_ops(cfg: &Config) -> Vec<Op> {
    let mut setup = workload::setup();
    if cfg.small_write != mnemofs::SmallWriteMode::Cow {
        setup.extend(workload::small_setup());
    }
    setup
}

/// The PM events of the traced run of workload `idx` (`ops`) of `cfg` from the image
/// `base`, without exploring crashes (the `crashtest::trace` of tests).
pub(crate) fn trace(
    cfg: &Config,
    base: &[u8],
    idx: usize,
    ops: &[Op],
) -> Result<Vec<Event>, String> {
    let all: Vec<Op> = setup_ops(cfg)
        .into_iter()
        .chain(ops.iter().cloned())
        .collect();
    traced_run(cfg, base, idx, &all)
        .map(|(events, _)| events)
        .map_err(|(point, what)| format!("{point}: {what}"))
}

/// The PM events of a traced run and the oracle's trees.
type Traced = (Vec<Event>, Vec<Vec<String>>);

/// Runs the operations `all` of workload `idx` once on a traced mount of `base`,
/// each on its CPU (`op_cpu`), beside the oracle; returns the PM events and the
/// oracle's tree before the first operation and after each one. An error is a
/// violation: where, and what.
fn traced_run(
    cfg: &Config,
    base: &[u8],
    idx: usize,
    all: &[Op],
) -> Result<Traced, (String, String)> {
    let (fs, rec) = match traced_mount(cfg, base) {
        Ok(x) => x,
        Err((point, what)) => return Err((point.into(), what)),
    };
    let pins = Pins::new(cfg.cpus);
    let mut model = Model::default();
    let mut dumps = vec![model.dump()];
    for (k, op) in all.iter().enumerate() {
        pins.pin(op_cpu(cfg.cpus, idx, 0, k));
        fs.marker(Marker::OpBegin(k.to_string()));
        let got = guarded(|| apply_fs(&fs, op));
        fs.marker(Marker::OpEnd(k.to_string()));
        let want = model.apply(op);
        let got = match got {
            Ok(g) => g,
            Err(p) => return Err((format!("{op}"), format!("engine panicked: {p}"))),
        };
        if got != want {
            return Err((
                format!("{op}"),
                format!("engine returned {got:?}, the oracle {want:?}"),
            ));
        }
        let now = model.dump();
        match guarded(|| dump_fs(&fs)) {
            Ok(Ok(d)) if d == now => {}
            Ok(Ok(d)) => return Err((format!("after {op} (no crash)"), diff(&d, &now))),
            Ok(Err(e)) => return Err((format!("after {op} (no crash)"), e)),
            Err(p) => return Err((format!("after {op} (no crash)"), format!("panicked: {p}"))),
        }
        dumps.push(now);
    }
    let events = rec.take();
    drop(fs);
    drop(pins);
    Ok((events, dumps))
}
