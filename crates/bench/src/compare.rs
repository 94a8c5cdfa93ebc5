//! Side by side: variants (a preset with its modes and a PM profile) of one workload,
//! run interleaved — a b c a b c … for every thread count, round after round — so
//! that a machine that gets slower or faster during the run affects every variant
//! alike. Reports medians over the rounds and ratios to the first variant.

use crate::config::{ImagePages, RunConfig};
use crate::error::{BenchError, BenchResultT};
use crate::plot::{grouped_bars, Bar, Group};
use crate::result::{ns, render, si, BenchResult};
use crate::stats::median;
use mnemofs::MountOptions;
use std::path::Path;

/// One configuration under comparison.
#[derive(Clone, Debug)]
pub struct Variant {
    /// Shown in tables and legends, e.g. `nova` or `nova/optane`.
    pub label: String,
    /// Preset label reported in results.
    pub preset: String,
    /// Mount options including the PM profile.
    pub mount: MountOptions,
    /// Page size asked for the variant's images (`None`: the base's).
    pub image_pages: Option<ImagePages>,
}

/// What to compare.
#[derive(Clone, Debug)]
pub struct CompareConfig {
    /// Workload, stop condition, parameters, seed, image place (its preset and
    /// mount options are replaced by each variant's).
    pub base: RunConfig,
    pub variants: Vec<Variant>,
    pub threads: Vec<usize>,
    /// At least 1; the CLI asks for at least 3.
    pub rounds: u32,
}

/// Medians of one variant at one thread count.
#[derive(Clone, Debug)]
pub struct Summary {
    pub variant: String,
    pub threads: usize,
    pub rounds: usize,
    pub ops_per_sec: f64,
    pub ops_per_sec_min: f64,
    pub ops_per_sec_max: f64,
    pub p50_ns: f64,
    pub p99_ns: f64,
    pub write_amplification: Option<f64>,
    pub fences_per_op: f64,
    /// Median per-file lock acquisitions, waits for them, and shared atomic
    /// read-modify-writes per operation (`mnemofs::contention`).
    pub locks_per_op: f64,
    pub waits_per_op: f64,
    pub rmws_per_op: f64,
    /// Median CPU time per operation (steadier than ops/s on a busy machine).
    pub cpu_ns_per_op: f64,
    pub pm_modeled_delay_per_op_ns: f64,
    /// Median wait per operation behind other threads on a shared write channel.
    pub pm_modeled_queue_per_op_ns: f64,
    /// Median ops/s over the first variant's at the same thread count.
    pub ratio: Option<f64>,
    /// Page sizes measured over the rounds (`2M`, `4K`, `unknown`; several joined
    /// with `+` if rounds differed), with `/pf` when every round was pre-faulted.
    pub pages: String,
    /// The modes the variant's mounts ran (`auto` resolved) and the medium that
    /// decided them, from its first round.
    pub modes: String,
}

/// Runs every round; `each` sees every result as it comes (for JSON Lines).
pub fn run_compare(
    cfg: &CompareConfig,
    mut each: impl FnMut(&BenchResult),
) -> BenchResultT<(Vec<BenchResult>, Vec<Summary>)> {
    if cfg.variants.is_empty() {
        return Err(BenchError::msg("nothing to compare: no preset given"));
    }
    if cfg.threads.is_empty() || cfg.threads.contains(&0) {
        return Err(BenchError::msg(
            "--threads needs thread counts of at least 1",
        ));
    }
    let mut all = Vec::new();
    for round in 0..cfg.rounds.max(1) {
        for &threads in &cfg.threads {
            for v in &cfg.variants {
                let mut rc = cfg.base.clone();
                rc.threads = threads;
                rc.preset = v.preset.clone();
                rc.mount = v.mount.clone();
                if let Some(p) = v.image_pages {
                    rc.image_pages = p;
                }
                rc.round = Some(round);
                let mut r = crate::runner::run(&rc)?;
                r.variant = v.label.clone();
                each(&r);
                all.push(r);
            }
        }
    }
    let summaries = summarize(cfg, &all);
    Ok((all, summaries))
}

/// Medians per (threads, variant) and ratios to the first variant.
pub fn summarize(cfg: &CompareConfig, all: &[BenchResult]) -> Vec<Summary> {
    let mut out = Vec::new();
    for &threads in &cfg.threads {
        let mut base: Option<f64> = None;
        for v in &cfg.variants {
            let rs: Vec<&BenchResult> = all
                .iter()
                .filter(|r| r.threads == threads && r.variant == v.label)
                .collect();
            if rs.is_empty() {
                continue;
            }
            let col =
                |f: &dyn Fn(&BenchResult) -> f64| -> Vec<f64> { rs.iter().map(|r| f(r)).collect() };
            let ops = col(&|r| r.ops_per_sec);
            let med = median(&ops).unwrap_or(0.0);
            let wa: Vec<f64> = rs.iter().filter_map(|r| r.write_amplification).collect();
            let mut seen: Vec<&str> = rs.iter().map(|r| r.map_pages.as_str()).collect();
            seen.sort_unstable();
            seen.dedup();
            let mut pages = seen.join("+");
            if rs.iter().all(|r| r.prefaulted) {
                pages.push_str("/pf");
            }
            let ratio = match base {
                None => {
                    base = Some(med);
                    Some(1.0)
                }
                Some(b) if b > 0.0 => Some(med / b),
                Some(_) => None,
            };
            out.push(Summary {
                variant: v.label.clone(),
                threads,
                rounds: rs.len(),
                ops_per_sec: med,
                ops_per_sec_min: ops.iter().copied().fold(f64::INFINITY, f64::min),
                ops_per_sec_max: ops.iter().copied().fold(0.0, f64::max),
                p50_ns: median(&col(&|r| r.p50_ns as f64)).unwrap_or(0.0),
                p99_ns: median(&col(&|r| r.p99_ns as f64)).unwrap_or(0.0),
                write_amplification: median(&wa),
                fences_per_op: median(&col(&|r| r.fences_per_op)).unwrap_or(0.0),
                locks_per_op: median(&col(&|r| r.locks_per_op)).unwrap_or(0.0),
                waits_per_op: median(&col(&|r| r.waits_per_op)).unwrap_or(0.0),
                rmws_per_op: median(&col(&|r| r.rmws_per_op)).unwrap_or(0.0),
                cpu_ns_per_op: median(&col(&|r| r.cpu_ns_per_op)).unwrap_or(0.0),
                pm_modeled_delay_per_op_ns: median(&col(&|r| r.pm_modeled_delay_per_op_ns))
                    .unwrap_or(0.0),
                pm_modeled_queue_per_op_ns: median(&col(&|r| r.pm_modeled_queue_per_op_ns))
                    .unwrap_or(0.0),
                ratio,
                pages,
                modes: rs.first().map_or(String::new(), |r| {
                    let mut m = format!(
                        "lock={} small-write={} read-cache={}",
                        r.lock, r.small_write, r.read_cache
                    );
                    if !r.medium.is_empty() {
                        m.push_str(&format!(" (medium {})", r.medium));
                    }
                    m
                }),
            });
        }
    }
    out
}

/// The medians as a table.
pub fn summary_table(workload: &str, s: &[Summary]) -> String {
    let mut rows = vec![[
        "variant",
        "thr",
        "rounds",
        "ops/s (median)",
        "min",
        "max",
        "ratio",
        "p50",
        "p99",
        "WA",
        "fence/op",
        "lock/op",
        "wait/op",
        "rmw/op",
        "cpu/op",
        "modeled/op",
        "queue/op",
        "pages",
    ]
    .iter()
    .map(|h| h.to_string())
    .collect::<Vec<_>>()];
    for x in s {
        rows.push(vec![
            x.variant.clone(),
            x.threads.to_string(),
            x.rounds.to_string(),
            si(x.ops_per_sec),
            si(x.ops_per_sec_min),
            si(x.ops_per_sec_max),
            x.ratio.map_or("-".into(), |r| format!("{r:.3}")),
            ns(x.p50_ns as u64),
            ns(x.p99_ns as u64),
            x.write_amplification
                .map_or("-".into(), |w| format!("{w:.2}")),
            format!("{:.2}", x.fences_per_op),
            format!("{:.2}", x.locks_per_op),
            format!("{:.2}", x.waits_per_op),
            format!("{:.2}", x.rmws_per_op),
            ns(x.cpu_ns_per_op as u64),
            ns(x.pm_modeled_delay_per_op_ns as u64),
            ns(x.pm_modeled_queue_per_op_ns as u64),
            x.pages.clone(),
        ]);
    }
    let mut legend = String::new();
    let mut said: Vec<&str> = Vec::new();
    for x in s {
        if !x.modes.is_empty() && !said.contains(&x.variant.as_str()) {
            said.push(&x.variant);
            legend.push_str(&format!("  {}: {}\n", x.variant, x.modes));
        }
    }
    format!(
        "{workload}: medians over rounds; ratio = ops/s over the first variant's; pages: \
         measured page size of the image mapping, /pf: pre-faulted\n{}{}",
        render(&rows),
        if legend.is_empty() {
            String::new()
        } else {
            format!("modes run:\n{legend}")
        }
    )
}

/// Draws the medians (with min–max whiskers) as grouped bars: one group per thread
/// count, one bar per variant.
pub fn plot(path: &Path, title: &str, variants: &[String], s: &[Summary]) -> BenchResultT<()> {
    let mut threads: Vec<usize> = s.iter().map(|x| x.threads).collect();
    threads.dedup();
    let groups: Vec<Group> = threads
        .iter()
        .map(|&t| Group {
            label: format!("{t} thread{}", if t == 1 { "" } else { "s" }),
            bars: variants
                .iter()
                .map(|v| {
                    s.iter()
                        .find(|x| x.threads == t && &x.variant == v)
                        .map(|x| Bar {
                            value: x.ops_per_sec,
                            low: x.ops_per_sec_min,
                            high: x.ops_per_sec_max,
                        })
                })
                .collect(),
        })
        .collect();
    grouped_bars(path, title, "ops/s (median of rounds)", variants, &groups)
}
