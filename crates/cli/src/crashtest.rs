//! `mnemofs crashtest`: the crash-consistency explorer (crates/crashtest).

use crate::error::{CliError, CliResult};
use clap::Args;
use crashtest::{Config, Kind};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

#[derive(Args, Debug)]
pub struct CrashtestArgs {
    /// Workloads: seq1 (each single operation), seq2 (all ordered pairs), random,
    /// multi (2-4 threads writing one shared file, scheduled interleavings)
    #[arg(long, value_name = "W", default_value = "seq1")]
    pub workload: String,
    /// Seed of random workloads, samples and random crash-state choices
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Stop after exploring this many crash states
    #[arg(long, value_name = "N")]
    pub max_states: Option<u64>,
    /// Run a seeded random sample of N workloads
    #[arg(long, value_name = "N")]
    pub sample: Option<usize>,
    /// Number of random workloads to generate (with --workload random or multi)
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub random_workloads: usize,
    /// Run only workload number I (as a violation report names it)
    #[arg(long, value_name = "I")]
    pub only: Option<usize>,
    /// Turn on a deliberate engine bug (see --list-bugs); the explorer must catch it
    #[arg(long, value_name = "NAME")]
    pub inject_bug: Option<String>,
    /// List the bugs --inject-bug knows and exit
    #[arg(long)]
    pub list_bugs: bool,
    /// Stop after this many violations
    #[arg(long, value_name = "N")]
    pub max_violations: Option<usize>,
    /// Exploring threads (0 = one per CPU)
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub threads: usize,
    /// Lock mode of the traced runs (inode, interval, segment) [default: inode; segment
    /// with --workload multi]
    #[arg(long, value_name = "L")]
    pub lock: Option<String>,
    /// Small-write mode of the traced runs (cow, finelog, lawn); finelog and lawn add
    /// sub-page writes to the workloads
    #[arg(long = "small-write", value_name = "W", default_value = "cow")]
    pub small_write: String,
    /// Model aligned 16-byte stores (atomic or non-temporal, e.g. LAWN descriptors)
    /// as two 8-byte stores that a crash can tear (low-first or high-first) instead
    /// of whole ones (no)
    #[arg(long = "tear-16", value_name = "ORDER", default_value = "no")]
    pub tear_16: String,
    /// How the traced runs store LAWN descriptors: nt (one 16-byte non-temporal
    /// store) or cached (a 16-byte atomic store and a write-back of its line); a
    /// mount picks the cheaper one by measuring, which a trace must not depend on
    #[arg(long = "desc-store", value_name = "HOW", default_value = "nt")]
    pub desc_store: String,
    /// CPUs of the traced images (per-CPU journals, allocators, inode tables, LAWN
    /// sub-zones); with more than one, each traced operation runs pinned to a CPU
    /// the engine maps to the image CPU it is assigned to (seeded by workload and
    /// operation)
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub cpus: u32,
    /// Devices of the traced volume: 1, or 2 (512 KiB + 256 KiB, placement
    /// interleave: a file's data and its log pages on different devices; the tracer
    /// sees global offsets)
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub devices: u32,
    /// LAWN descriptors of the traced images: sum (format version 7, what mkfs
    /// makes: a zone write's slots and descriptor made durable by one fence) or page
    /// (version 6, as images of earlier builds: a fence between them)
    #[arg(long = "lawn-descriptors", value_name = "F", default_value = "sum")]
    pub lawn_descriptors: String,
    /// Do not also crash inside recovery
    #[arg(long)]
    pub no_recovery_crashes: bool,
    /// Print one JSON summary object (violations included) instead of text
    #[arg(long)]
    pub json: bool,
}

fn usage(msg: String) -> CliError {
    CliError::new(msg).with_code(2)
}

pub fn run(a: &CrashtestArgs) -> CliResult<i32> {
    if a.list_bugs {
        for (name, _, what) in mnemofs::bugs::ALL {
            println!("{name:<28} {what}");
        }
        return Ok(0);
    }
    let kind = match a.workload.as_str() {
        "seq1" => Kind::Seq1,
        "seq2" => Kind::Seq2,
        "random" => Kind::Random,
        "multi" => Kind::Multi,
        w => {
            return Err(usage(format!(
                "unknown workload '{w}' (valid: seq1, seq2, random, multi)"
            )))
        }
    };
    let bug = match &a.inject_bug {
        None => None,
        Some(n) => Some(mnemofs::bugs::by_name(n).ok_or_else(|| {
            let names: Vec<&str> = mnemofs::bugs::ALL.iter().map(|x| x.0).collect();
            usage(format!("unknown bug '{n}' (valid: {})", names.join(", ")))
        })?),
    };
    let mut cfg = Config::new(kind);
    cfg.seed = a.seed;
    cfg.max_states = a.max_states;
    cfg.sample = a.sample;
    cfg.only = a.only;
    cfg.random_workloads = a.random_workloads;
    cfg.bug = bug;
    cfg.recovery_crashes = !a.no_recovery_crashes;
    cfg.max_violations = a.max_violations;
    let lock = a.lock.as_deref().unwrap_or(if kind == Kind::Multi {
        "segment"
    } else {
        "inode"
    });
    cfg.lock = mnemofs::LockMode::ALL
        .iter()
        .find(|x| x.0 == lock)
        .map(|x| x.1)
        .ok_or_else(|| {
            let names: Vec<&str> = mnemofs::LockMode::ALL.iter().map(|x| x.0).collect();
            usage(format!(
                "unknown lock mode '{lock}' (valid: {})",
                names.join(", ")
            ))
        })?;
    // A named mode: the explorer's traces must not depend on the medium (`auto`).
    let named = || {
        mnemofs::SmallWriteMode::ALL
            .iter()
            .filter(|x| x.1 != mnemofs::SmallWriteMode::Auto)
    };
    cfg.small_write = named()
        .find(|x| x.0 == a.small_write)
        .map(|x| x.1)
        .ok_or_else(|| {
            let names: Vec<&str> = named().map(|x| x.0).collect();
            usage(format!(
                "unknown small-write mode '{}' (valid: {})",
                a.small_write,
                names.join(", ")
            ))
        })?;
    cfg.tear16 = match a.tear_16.as_str() {
        "no" => crashtest::crash::Tear16::No,
        "low-first" => crashtest::crash::Tear16::LowFirst,
        "high-first" => crashtest::crash::Tear16::HighFirst,
        t => {
            return Err(usage(format!(
                "unknown --tear-16 '{t}' (valid: no, low-first, high-first)"
            )))
        }
    };
    cfg.desc_store = match a.desc_store.as_str() {
        "nt" => pm::Store16::NonTemporal,
        "cached" => pm::Store16::Cached,
        d => {
            return Err(usage(format!(
                "unknown --desc-store '{d}' (valid: nt, cached)"
            )))
        }
    };
    if !(1..=64).contains(&a.cpus) {
        return Err(usage(format!("--cpus {} (valid: 1 to 64)", a.cpus)));
    }
    cfg.cpus = a.cpus;
    if !(1..=2).contains(&a.devices) {
        return Err(usage(format!("--devices {} (valid: 1 or 2)", a.devices)));
    }
    cfg.devices = a.devices;
    cfg.page_descriptors = match a.lawn_descriptors.as_str() {
        "sum" => false,
        "page" => true,
        f => {
            return Err(usage(format!(
                "unknown --lawn-descriptors '{f}' (valid: sum, page)"
            )))
        }
    };
    if a.threads > 0 {
        cfg.threads = a.threads;
    }
    if kind == Kind::Multi && a.random_workloads == 200 {
        // The default count is for `random`; multi workloads are larger.
        cfg.random_workloads = crashtest::DEFAULT_MULTI_WORKLOADS;
    }
    let total = crashtest::workload_count(&cfg);
    if total == 0 {
        return Err(usage("no workload selected (check --only)".into()));
    }

    let bar = if std::io::stderr().is_terminal() && !a.json {
        let b = ProgressBar::new(total as u64);
        b.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} workloads {elapsed} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Some(b)
    } else {
        None
    };
    let rep = crashtest::run(&cfg, |r| {
        if let Some(b) = &bar {
            b.set_position(r.workloads_run as u64);
            b.set_message(format!(
                "{} states ({} unique), {} violations",
                r.states_explored, r.unique_states, r.violations
            ));
        }
    })
    .map_err(CliError::new)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if rep.cpus_reached < rep.cpus {
        eprintln!(
            "note: this host reaches only {} of the image's {} CPUs (the engine uses CPU c % {}); the others' journals and allocators are used only as fallbacks",
            rep.cpus_reached, rep.cpus, rep.cpus
        );
    }

    if a.json {
        let mut v = serde_json::to_value(&rep).map_err(|e| CliError::new(e.to_string()))?;
        v["violation_details"] =
            serde_json::to_value(&rep.details).map_err(|e| CliError::new(e.to_string()))?;
        println!("{v}");
    } else {
        for d in &rep.details {
            println!(
                "VIOLATION in {} workload {} [{}]",
                rep.workload,
                d.workload,
                d.ops.join("; ")
            );
            println!("  crash point: {}", d.crash_point);
            println!("  what:        {}", d.what);
            println!("  reproduce:   {}", d.reproduce);
        }
        println!(
            "{}{}: {} workloads, {} crash points, {} crash states explored ({} unique, {} more inside recovery), {} violations, {:.1} s ({:.0} states/s){}",
            rep.workload,
            if rep.cpus > 1 {
                format!(" ({} CPUs)", rep.cpus)
            } else {
                String::new()
            },
            rep.workloads_run,
            rep.crash_points,
            rep.states_explored,
            rep.unique_states,
            rep.recovery_crash_states,
            rep.violations,
            rep.seconds,
            rep.states_per_second,
            rep.injected_bug
                .as_ref()
                .map(|b| format!(", injected bug: {b}"))
                .unwrap_or_default()
        );
    }
    Ok(if rep.violations > 0 { 1 } else { 0 })
}
