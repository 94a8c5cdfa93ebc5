//! `mnemofs bench paper <pnova|lawn|rcache|mbs-lvm|delayed-commit|all>`: each paper's
//! headline experiment at mnemofs's defaults — the default preset `full` against the
//! paper's baseline, on the workload of the paper's headline figure — printed beside
//! the paper's own figure (the catalogue: `mnemofs_bench::paper`), with the plain
//! `bench compare` / `bench cluster` command that gives ours, and an SVG in the shape
//! of the paper's figure.
//!
//! The in-process experiments go through `bench compare` itself (their command line
//! is parsed as `bench compare` parses it, and run by the same code); delayed commit
//! runs `bench cluster` as a child process of this binary, as that command runs its
//! own clients.

use crate::bench::{compare_table, sweep_counts, CompareArgs};
use crate::error::{clap_one_line, CliError, CliResult};
use crate::output::{emit, note};
use clap::{Args, Parser};
use mnemofs_bench::compare::Summary;
use mnemofs_bench::paper::{self, Claim, Paper, PAPERS};
use mnemofs_bench::plot::{self, Bar, Group, Line};
use mnemofs_bench::result::{self, si};
use mnemofs_bench::stats::median;
use serde::Serialize;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Measured time of each in-process run, and their rounds, unless overridden.
const RUN_DURATION: Duration = Duration::from_secs(3);
const RUN_ROUNDS: u32 = 7;
/// The same for each cluster run (a run also starts a server and its clients).
const CLUSTER_DURATION: Duration = Duration::from_secs(3);
const CLUSTER_ROUNDS: u32 = 3;
/// The threads of MBS-LVM's run: one per emulated NUMA node.
const MBS_NODES: usize = 4;
/// The clients of delayed commit's run (`bench cluster`'s default).
const CLUSTER_CLIENTS: usize = 4;
/// What JSON rows carry in `schema`.
const SCHEMA: &str = "mnemofs-bench-paper/1";

#[derive(Args, Debug)]
#[command(
    after_help = "Defaults: in-process runs 3 s x 7 rounds, cluster runs 3 s x 3 \
    rounds; `all` takes about 7 minutes on a 2-core machine. Every row names the `bench \
    compare` or `bench cluster` command that gives its figure."
)]
pub struct PaperArgs {
    /// Which paper's headline experiment: pnova, lawn, rcache, mbs-lvm, delayed-commit,
    /// or all of them
    #[arg(value_name = "PAPER")]
    pub paper: String,
    /// Measured time of every run (`2`, `0.5`, `300ms`) [default: 3 s in-process and
    /// per cluster run]
    #[arg(long, value_name = "S", value_parser = crate::bench::duration_arg)]
    pub duration: Option<Duration>,
    /// Rounds of every experiment, variants interleaved in each; in-process ones need
    /// at least 3 [default: 7 in-process, 3 cluster]
    #[arg(long, value_name = "N")]
    pub rounds: Option<u32>,
    /// The largest thread count of pNOVA's sweep, and RCache's threads [default: this
    /// machine's CPUs]
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Folder for the SVGs [default: a fresh bench-results/paper-<UTC time> here, or
    /// under the temporary directory where this one is not writable]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// JSON Lines on standard output: every run's record (as `bench compare --json` and
    /// `bench cluster --json` print them) and one row per headline (`"schema":
    /// "mnemofs-bench-paper/1"`); the tables go to standard error
    #[arg(long)]
    pub json: bool,
}

/// `bench compare`'s options, parsed from a command line as `bench compare` parses
/// them.
#[derive(Parser, Debug)]
#[command(name = "mnemofs bench compare", no_binary_name = true)]
struct CompareLine {
    #[command(flatten)]
    args: CompareArgs,
}

/// How long and how often, after the overrides.
#[derive(Clone, Debug)]
struct Plan {
    run_duration: Duration,
    run_rounds: u32,
    cluster_duration: Duration,
    cluster_rounds: u32,
    /// pNOVA's largest thread count and RCache's threads.
    threads: usize,
    json: bool,
    out: PathBuf,
    machine: String,
}

/// One headline: the paper's claim and ours beside it.
#[derive(Serialize, Debug, Clone)]
struct Row {
    schema: &'static str,
    paper: &'static str,
    claim: &'static str,
    technique: &'static str,
    in_mnemofs: &'static str,
    title: &'static str,
    authors: &'static str,
    venue: &'static str,
    experiment: &'static str,
    paper_claim: &'static str,
    paper_value: Option<f64>,
    paper_compares: &'static str,
    paper_source: &'static str,
    paper_quote: &'static str,
    paper_scale: &'static str,
    paper_testbed: &'static str,
    /// Our factor, formatted as the paper's (`1.78×`).
    ours: String,
    ours_value: Option<f64>,
    /// What our factor compares, and the figures it is made of.
    ours_compares: String,
    baseline: String,
    baseline_per_sec: f64,
    ours_per_sec: f64,
    unit: &'static str,
    /// Threads (or clients) we ran, and the paper's.
    scale: String,
    /// PM latency profile (or network) and the medium `full`'s `auto` modes went by.
    setting: String,
    /// The modes `full` ran, as `bench compare` reports them.
    modes: String,
    /// Threads, profile and workload in a few words, for the summary table.
    at: String,
    machine: String,
    command: String,
    svg: Option<String>,
}

impl Row {
    fn new(p: &'static Paper, c: &'static Claim, plan: &Plan) -> Row {
        Row {
            schema: SCHEMA,
            paper: p.key,
            claim: c.id,
            technique: p.technique,
            in_mnemofs: p.in_mnemofs,
            title: p.title,
            authors: p.authors,
            venue: p.venue,
            experiment: c.experiment,
            paper_claim: c.value_text,
            paper_value: c.value,
            paper_compares: c.compares,
            paper_source: c.source,
            paper_quote: c.quote,
            paper_scale: c.paper_scale,
            paper_testbed: p.testbed,
            ours: String::new(),
            ours_value: None,
            ours_compares: String::new(),
            baseline: String::new(),
            baseline_per_sec: 0.0,
            ours_per_sec: 0.0,
            unit: "ops/s",
            scale: String::new(),
            setting: String::new(),
            modes: String::new(),
            at: String::new(),
            machine: plan.machine.clone(),
            command: String::new(),
            svg: None,
        }
    }

    /// Ours from the medians of a baseline and our variant.
    fn measured(&mut self, base: &Summary, ours: &Summary, rounds: u32) {
        let r = paper::ratio_of(ours.ops_per_sec, base.ops_per_sec);
        self.ours_value = r;
        self.ours = paper::ratio(r);
        self.baseline = base.variant.clone();
        self.baseline_per_sec = base.ops_per_sec;
        self.ours_per_sec = ours.ops_per_sec;
        self.modes = ours.modes.clone();
        self.ours_compares = format!(
            "{} over {}: {} vs {} {}, medians of {rounds} rounds",
            ours.variant,
            base.variant,
            si(ours.ops_per_sec),
            si(base.ops_per_sec),
            self.unit
        );
    }
}

/// A command line of this binary (after `mnemofs`), printed and run as it is.
#[derive(Clone, Debug)]
struct Cmd(Vec<String>);

impl Cmd {
    fn new(args: &[&str]) -> Cmd {
        Cmd(args.iter().map(|s| s.to_string()).collect())
    }

    fn arg(mut self, a: impl Into<String>) -> Cmd {
        self.0.push(a.into());
        self
    }

    /// `--rounds N --duration D`.
    fn timed(self, rounds: impl std::fmt::Display, duration: Duration) -> Cmd {
        self.arg("--rounds")
            .arg(rounds.to_string())
            .arg("--duration")
            .arg(duration_text(duration))
    }

    fn shown(&self) -> String {
        format!("mnemofs {}", self.0.join(" "))
    }
}

/// `--duration`'s value for a command line: whole seconds, else milliseconds.
fn duration_text(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        d.as_secs().to_string()
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// The papers `name` selects.
fn select(name: &str) -> CliResult<Vec<&'static Paper>> {
    let name = name.trim();
    if name == "all" {
        return Ok(PAPERS.iter().collect());
    }
    paper::by_key(name).map(|p| vec![p]).ok_or_else(|| {
        CliError::new(format!("unknown paper '{name}'; valid: {}", paper::names())).with_code(2)
    })
}

/// The machine in words, from /proc/cpuinfo: its CPU model, cores and logical CPUs.
fn machine() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    describe_cpus(&info, online)
}

/// [`machine`] from the text of /proc/cpuinfo (`online`: where it says nothing).
fn describe_cpus(info: &str, online: usize) -> String {
    let field = |line: &str, name: &str| -> Option<String> {
        let (k, v) = line.split_once(':')?;
        (k.trim() == name).then(|| v.trim().to_string())
    };
    let mut model = None;
    let mut cpus = 0usize;
    // (physical id, cores of that package)
    let mut packages: Vec<(String, usize)> = Vec::new();
    let mut package = String::from("0");
    for line in info.lines() {
        if field(line, "processor").is_some() {
            cpus += 1;
        } else if let Some(m) = field(line, "model name") {
            model.get_or_insert(m);
        } else if let Some(id) = field(line, "physical id") {
            package = id;
        } else if let Some(n) = field(line, "cpu cores").and_then(|v| v.parse().ok()) {
            if !packages.iter().any(|(p, _)| *p == package) {
                packages.push((package.clone(), n));
            }
        }
    }
    let cpus = if cpus == 0 { online } else { cpus };
    let cores: usize = packages.iter().map(|(_, n)| n).sum();
    let model = model.unwrap_or_else(|| "unknown CPU".to_string());
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    if cores == 0 || cores == cpus {
        format!("{model}, {cpus} core{}", plural(cpus))
    } else {
        format!(
            "{model}, {cores} core{} ({cpus} logical CPUs)",
            plural(cores)
        )
    }
}

/// The folder for the SVGs: `--out` (made if missing), else a fresh one.
fn out_dir(given: Option<&Path>) -> CliResult<PathBuf> {
    if let Some(d) = given {
        std::fs::create_dir_all(d)
            .map_err(|e| CliError::new(format!("--out {}: {e}", d.display())).with_code(2))?;
        return Ok(d.to_path_buf());
    }
    let stamp = format!("paper-{}", result::now_utc().replace(':', ""));
    let here = PathBuf::from("bench-results");
    let tmp = std::env::temp_dir().join("mnemofs-bench-results");
    let mut last = None;
    for parent in [here, tmp] {
        if let Err(e) = std::fs::create_dir_all(&parent) {
            last = Some(format!("{}: {e}", parent.display()));
            continue;
        }
        for n in 1..100 {
            let name = if n == 1 {
                stamp.clone()
            } else {
                format!("{stamp}-{n}")
            };
            let d = parent.join(name);
            match std::fs::create_dir(&d) {
                Ok(()) => return Ok(d),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    last = Some(format!("{}: {e}", d.display()));
                    break;
                }
            }
        }
    }
    Err(CliError::new(format!(
        "no folder for the SVGs ({}); name one with --out",
        last.unwrap_or_else(|| "all names taken".into())
    )))
}

pub fn run(a: &PaperArgs) -> CliResult<i32> {
    let chosen = select(&a.paper)?;
    if let Some(d) = a.duration {
        if d < Duration::from_millis(10) {
            return Err(CliError::new("--duration must be at least 10ms").with_code(2));
        }
    }
    let in_process = chosen.iter().any(|p| p.key != "delayed-commit");
    match a.rounds {
        Some(0) => return Err(CliError::new("--rounds must be at least 1").with_code(2)),
        Some(r) if r < 3 && in_process => {
            return Err(CliError::new(
                "--rounds must be at least 3 (medians of interleaved rounds; delayed-commit \
                 alone takes 1)",
            )
            .with_code(2))
        }
        Some(r) if r > 1000 => {
            return Err(CliError::new("--rounds must be at most 1000").with_code(2))
        }
        _ => {}
    }
    let threads = match a.threads {
        Some(0) => return Err(CliError::new("--threads must be at least 1").with_code(2)),
        Some(n) if n > 1024 => {
            return Err(CliError::new("--threads must be at most 1024").with_code(2))
        }
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let plan = Plan {
        run_duration: a.duration.unwrap_or(RUN_DURATION),
        run_rounds: a.rounds.unwrap_or(RUN_ROUNDS),
        cluster_duration: a.duration.unwrap_or(CLUSTER_DURATION),
        cluster_rounds: a.rounds.unwrap_or(CLUSTER_ROUNDS),
        threads,
        json: a.json,
        out: {
            let d = out_dir(a.out.as_deref())?;
            std::fs::canonicalize(&d).unwrap_or(d)
        },
        machine: machine(),
    };
    note(&format!(
        "bench paper {}: SVGs into {}",
        a.paper.trim(),
        plan.out.display()
    ));
    let mut rows = Vec::new();
    for p in chosen {
        note(&format!("== {}: {}", p.cite(), p.title));
        let got = match p.key {
            "pnova" => pnova(p, &plan)?,
            "lawn" => lawn(p, &plan)?,
            "rcache" => rcache(p, &plan)?,
            "mbs-lvm" => mbs_lvm(p, &plan)?,
            "delayed-commit" => delayed_commit(p, &plan)?,
            other => {
                return Err(CliError::new(format!(
                    "paper '{other}' has no experiment here"
                )))
            }
        };
        let block = paper_block(p, &got);
        if plan.json {
            note(block.trim_end());
        } else {
            emit(block.trim_end());
        }
        rows.extend(got);
    }
    if plan.json {
        for r in &rows {
            emit(&serde_json::to_string(r).map_err(|e| CliError::new(e.to_string()))?);
        }
        note(summary_table(&rows, &plan).trim_end());
    } else {
        emit(summary_table(&rows, &plan).trim_end());
    }
    Ok(0)
}

/// Runs `cmd` (`bench compare ...`) as `bench compare` would, printing what it
/// prints; its medians.
fn compare(cmd: &Cmd, json: bool) -> CliResult<Vec<Summary>> {
    let mut argv: Vec<String> = cmd.0.iter().skip(2).cloned().collect();
    if json {
        argv.push("--json".into());
    }
    let line = CompareLine::try_parse_from(&argv).map_err(|e| {
        CliError::new(format!(
            "{}: {}",
            cmd.shown(),
            clap_one_line(&e.to_string())
        ))
    })?;
    note(&format!("running: {}", cmd.shown()));
    let (_, summary) = compare_table(&line.args)?;
    Ok(summary)
}

/// The median of `variant` at `threads`, or why there is none.
fn median_of<'a>(s: &'a [Summary], variant: &str, threads: usize) -> CliResult<&'a Summary> {
    s.iter()
        .find(|x| x.variant == variant && x.threads == threads)
        .ok_or_else(|| CliError::new(format!("no result of {variant} at {threads} threads")))
}

/// Bytes per second as `2.17GB/s`.
fn bandwidth(bytes_per_sec: f64) -> String {
    format!("{}B/s", si(bytes_per_sec))
}

/// `ours vs base` as bandwidths, for runs of `io` bytes per operation.
fn bandwidths(ours: &Summary, base: &Summary, io: f64) -> String {
    format!(
        "{} vs {}",
        bandwidth(ours.ops_per_sec * io),
        bandwidth(base.ops_per_sec * io)
    )
}

/// A bar of a median with its min–max range, scaled (ops/s to bytes/s, ...).
fn bar(x: &Summary, scale: f64) -> Bar {
    Bar {
        value: x.ops_per_sec * scale,
        low: x.ops_per_sec_min * scale,
        high: x.ops_per_sec_max * scale,
    }
}

/// Draws an SVG; a chart that cannot be drawn costs the figures nothing.
fn draw(row_svg: &mut [Row], path: &Path, what: CliResult<()>) {
    match what {
        Ok(()) => {
            for r in row_svg {
                r.svg = Some(path.display().to_string());
            }
        }
        Err(e) => note(&format!("no chart: {}", e.msg)),
    }
}

/// Draws `groups` (baseline, ours) as bars with the paper's factor marked over
/// each group: where the baseline times the paper's factor would put ours.
fn headline_bars(
    rows: &mut [Row],
    svg: &Path,
    title: &str,
    y_label: &str,
    series: [&str; 2],
    groups: &[Group],
    claim: &Claim,
) {
    let reference = plot::Reference {
        name: format!(
            "paper: {} the baseline ({})",
            claim.value_text, claim.figure
        ),
        values: groups
            .iter()
            .map(|g| {
                let base = g.bars.first().copied().flatten()?;
                Some(base.value * claim.value?)
            })
            .collect(),
    };
    let series: Vec<String> = series.iter().map(|s| s.to_string()).collect();
    let drawn = plot::bars_with_reference(svg, title, y_label, &series, groups, &reference)
        .map_err(bench_err);
    draw(rows, svg, drawn);
}

fn bench_err(e: mnemofs_bench::BenchError) -> CliError {
    CliError::new(e.to_string())
}

fn threads_word(n: usize) -> String {
    format!("{n} thread{}", if n == 1 { "" } else { "s" })
}

/// pNOVA, Fig. 4: FxMark DWOM, throughput against threads, NOVA against pNOVA.
fn pnova(p: &'static Paper, plan: &Plan) -> CliResult<Vec<Row>> {
    let c = &p.claims[0];
    let counts = sweep_counts(plan.threads);
    let list: Vec<String> = counts.iter().map(|n| n.to_string()).collect();
    let cmd = Cmd::new(&[
        "bench",
        "compare",
        "--workload",
        "dwom",
        "--presets",
        "nova,full",
    ])
    .arg("--threads")
    .arg(list.join(","))
    .timed(plan.run_rounds, plan.run_duration);
    let s = compare(&cmd, plan.json)?;
    let max = plan.threads;
    let mut row = Row::new(p, c, plan);
    row.measured(
        median_of(&s, "nova", max)?,
        median_of(&s, "full", max)?,
        plan.run_rounds,
    );
    let others: Vec<String> = counts
        .iter()
        .filter(|&&t| t != max)
        .filter_map(|&t| {
            let b = median_of(&s, "nova", t).ok()?;
            let o = median_of(&s, "full", t).ok()?;
            Some(format!(
                "{}: {}",
                threads_word(t),
                paper::ratio(paper::ratio_of(o.ops_per_sec, b.ops_per_sec))
            ))
        })
        .collect();
    row.ours_compares = format!(
        "{} at {}{}",
        row.ours_compares,
        threads_word(max),
        if others.is_empty() {
            String::new()
        } else {
            format!(" ({})", others.join(", "))
        }
    );
    row.scale = format!(
        "{} (sweep {}; paper: {})",
        threads_word(max),
        list.join(","),
        c.paper_scale
    );
    row.at = format!("{}, dram, dwom", threads_word(max));
    row.setting = "profile dram (the paper's NVM was DRAM)".into();
    row.command = cmd.shown();
    let lines: Vec<Line> = ["nova", "full"]
        .iter()
        .map(|v| Line {
            name: if *v == "nova" {
                "nova (NOVA's per-file lock)".to_string()
            } else {
                "full (default: segment range locks)".to_string()
            },
            points: s
                .iter()
                .filter(|x| x.variant == *v)
                .map(|x| (x.threads as f64, x.ops_per_sec))
                .collect(),
        })
        .collect();
    let svg = plan.out.join("pnova.svg");
    let title = format!(
        "pNOVA, Fig. 4 shape: FxMark DWOM, ops/s against threads (paper: {} at {})",
        c.value_text, c.paper_scale
    );
    let drawn =
        plot::thread_curves(&svg, &title, "ops/s (median of rounds)", &lines).map_err(bench_err);
    let mut rows = vec![row];
    draw(&mut rows, &svg, drawn);
    Ok(rows)
}

/// LAWN, Fig. 5: 128 B random writes, NOVA against LAWN.
fn lawn(p: &'static Paper, plan: &Plan) -> CliResult<Vec<Row>> {
    let c = &p.claims[0];
    let io = 128.0;
    // Under optane (PM as full's `auto` modes see it), and over DRAM told it is PM:
    // the paper's NVM was DRAM emulating STT-RAM.
    let runs: [(&str, Option<&str>, &str); 2] = [
        (
            "optane",
            None,
            "profile optane (PM latency; full's auto modes see PM and take LAWN)",
        ),
        (
            "dram",
            Some("pm"),
            "profile dram with --medium pm (the paper's STT-RAM was emulated on DRAM; \
             --medium pm makes full take LAWN there)",
        ),
    ];
    let mut rows = Vec::new();
    let mut groups = Vec::new();
    for (profile, medium, setting) in runs {
        let mut cmd = Cmd::new(&[
            "bench",
            "compare",
            "--workload",
            "randwrite",
            "--presets",
            "nova,full",
            "--pm-profiles",
            profile,
        ]);
        if let Some(m) = medium {
            cmd = cmd.arg("--medium").arg(m);
        }
        let cmd = cmd
            .arg("--io-size")
            .arg("128")
            .arg("--file-size")
            .arg("256M")
            .arg("--threads")
            .arg("1")
            .timed(plan.run_rounds, plan.run_duration);
        let s = compare(&cmd, plan.json)?;
        let (b, o) = (median_of(&s, "nova", 1)?, median_of(&s, "full", 1)?);
        let mut row = Row::new(p, c, plan);
        row.measured(b, o, plan.run_rounds);
        row.ours_compares = format!("{}; {}", row.ours_compares, bandwidths(o, b, io));
        row.scale = format!("1 thread, a 256 MiB file (paper: {})", c.paper_scale);
        row.at = if medium.is_some() {
            format!("1 thread, {profile} --medium pm, randwrite 128 B")
        } else {
            format!("1 thread, {profile}, randwrite 128 B")
        };
        row.setting = setting.to_string();
        row.command = cmd.shown();
        rows.push(row);
        groups.push(Group {
            label: if medium.is_some() {
                format!("128 B, {profile} (--medium pm)")
            } else {
                format!("128 B, {profile}")
            },
            bars: vec![Some(bar(b, io)), Some(bar(o, io))],
        });
    }
    let svg = plan.out.join("lawn.svg");
    headline_bars(
        &mut rows,
        &svg,
        "LAWN, Fig. 5 shape: 128 B random writes, 1 thread",
        "bytes/s (median of rounds)",
        ["nova (page CoW)", "full (default: LAWN on PM)"],
        &groups,
        c,
    );
    Ok(rows)
}

/// RCache, Fig. 5(a) and (b): sequential and skewed reads under Optane, NOVA against
/// RCache.
fn rcache(p: &'static Paper, plan: &Plan) -> CliResult<Vec<Row>> {
    let mut rows = Vec::new();
    let mut groups = Vec::new();
    let t = plan.threads;
    let io = 4096.0;
    for (c, panel) in p.claims.iter().zip(["(a)", "(b)"]) {
        let cmd = Cmd::new(&[
            "bench",
            "compare",
            "--workload",
            c.id,
            "--presets",
            "nova,full",
            "--pm-profiles",
            "optane",
        ])
        .arg("--threads")
        .arg(t.to_string())
        .timed(plan.run_rounds, plan.run_duration);
        let s = compare(&cmd, plan.json)?;
        let (b, o) = (median_of(&s, "nova", t)?, median_of(&s, "full", t)?);
        let mut row = Row::new(p, c, plan);
        row.measured(b, o, plan.run_rounds);
        row.ours_compares = format!(
            "{}; {} at {}",
            row.ours_compares,
            bandwidths(o, b, io),
            threads_word(t)
        );
        row.scale = format!(
            "{}, a 64 MiB file each, 4 KiB reads (paper: {})",
            threads_word(t),
            c.paper_scale
        );
        row.at = format!("{}, optane, {}", threads_word(t), c.id);
        row.setting = "profile optane (the paper ran on Optane DC PMM; full's auto modes \
                       see PM and take the read cache, default budget 256 MiB)"
            .into();
        row.command = cmd.shown();
        rows.push(row);
        groups.push(Group {
            label: format!("{panel} {}", c.id),
            bars: vec![Some(bar(b, io)), Some(bar(o, io))],
        });
    }
    let svg = plan.out.join("rcache.svg");
    let title = format!(
        "RCache, Fig. 5 shape: read bandwidth, optane, {}",
        threads_word(t)
    );
    headline_bars(
        &mut rows,
        &svg,
        &title,
        "bytes/s (median of rounds)",
        ["nova (DAX reads)", "full (default: RCache on PM)"],
        &groups,
        &p.claims[0],
    );
    Ok(rows)
}

/// MBS-LVM, Fig. 5(a): random writes over 4 NUMA nodes, one volume without NUMA
/// awareness (`single`) against local placement.
fn mbs_lvm(p: &'static Paper, plan: &Plan) -> CliResult<Vec<Row>> {
    let c = &p.claims[0];
    let io = 4096.0;
    let nodes = MBS_NODES.to_string();
    let cmd = Cmd::new(&[
        "bench",
        "compare",
        "--workload",
        "randwrite",
        "--presets",
        "full",
        "--placement",
        "single,local",
        "--pm-profiles",
        "optane",
    ])
    .arg("--devices")
    .arg(nodes.clone())
    .arg("--topology")
    .arg(nodes)
    .arg("--threads")
    .arg(MBS_NODES.to_string())
    .arg("--io-size")
    .arg("4K")
    .arg("--file-size")
    .arg("32M")
    .timed(plan.run_rounds, plan.run_duration);
    let s = compare(&cmd, plan.json)?;
    let (b, o) = (
        median_of(&s, "full/single", MBS_NODES)?,
        median_of(&s, "full/local", MBS_NODES)?,
    );
    let mut row = Row::new(p, c, plan);
    row.measured(b, o, plan.run_rounds);
    row.ours_compares = format!("{}; {}", row.ours_compares, bandwidths(o, b, io));
    row.scale = format!(
        "{} threads, one per emulated node, 4 KiB writes (paper: {})",
        MBS_NODES, c.paper_scale
    );
    row.at = format!("{MBS_NODES} threads, optane, {MBS_NODES} nodes, randwrite 4K");
    row.setting = format!(
        "{MBS_NODES} devices on {MBS_NODES} emulated NUMA nodes, profile optane (only a PM \
         profile gives a remote device a cost here; the paper's MBSs were DRAM-speed \
         NVDIMM-N on real nodes)"
    );
    row.command = cmd.shown();
    let svg = plan.out.join("mbs-lvm.svg");
    let mut rows = vec![row];
    headline_bars(
        &mut rows,
        &svg,
        &format!("MBS-LVM, Fig. 5(a) shape: 4 KiB random writes, {MBS_NODES} nodes"),
        "bytes/s (median of rounds)",
        ["full, placement single", "full (default placement: local)"],
        &[Group {
            label: format!("{MBS_NODES} threads, optane"),
            bars: vec![Some(bar(b, io)), Some(bar(o, io))],
        }],
        c,
    );
    Ok(rows)
}

/// One `bench cluster --json` run's record, the fields used here.
#[derive(Clone, Debug)]
struct ClusterRun {
    commit: String,
    ops_per_sec: f64,
    rpcs_per_op: f64,
    compound_degree: f64,
    rtt_measured_us: f64,
}

impl ClusterRun {
    fn parse(line: &str) -> Option<ClusterRun> {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        let f = |k: &str| v.get(k).and_then(serde_json::Value::as_f64).unwrap_or(0.0);
        Some(ClusterRun {
            commit: v.get("commit")?.as_str()?.to_string(),
            ops_per_sec: v.get("ops_per_sec")?.as_f64()?,
            rpcs_per_op: f("rpcs_per_op"),
            compound_degree: f("compound_degree"),
            rtt_measured_us: f("rtt_measured_us"),
        })
    }
}

/// Medians of one commit mode's runs.
#[derive(Clone, Debug)]
struct ModeMedians {
    mode: &'static str,
    runs: usize,
    ops: f64,
    min: f64,
    max: f64,
    rpcs_per_op: f64,
    degree: f64,
    rtt_us: f64,
}

fn mode_medians(runs: &[ClusterRun], mode: &'static str) -> CliResult<ModeMedians> {
    let of: Vec<&ClusterRun> = runs.iter().filter(|r| r.commit == mode).collect();
    let col = |f: &dyn Fn(&ClusterRun) -> f64| -> Vec<f64> { of.iter().map(|r| f(r)).collect() };
    let ops = col(&|r| r.ops_per_sec);
    let med = median(&ops)
        .ok_or_else(|| CliError::new(format!("bench cluster gave no result for {mode} commits")))?;
    Ok(ModeMedians {
        mode,
        runs: of.len(),
        ops: med,
        min: ops.iter().copied().fold(f64::INFINITY, f64::min),
        max: ops.iter().copied().fold(0.0, f64::max),
        rpcs_per_op: median(&col(&|r| r.rpcs_per_op)).unwrap_or(0.0),
        degree: median(&col(&|r| r.compound_degree)).unwrap_or(0.0),
        rtt_us: median(&col(&|r| r.rtt_measured_us)).unwrap_or(0.0),
    })
}

/// Delayed commit, Fig. 3: 32 KiB small files (xcdn), synchronous against delayed
/// commits, through `bench cluster` (its clients are processes of their own).
fn delayed_commit(p: &'static Paper, plan: &Plan) -> CliResult<Vec<Row>> {
    let c = &p.claims[0];
    let cmd = Cmd::new(&["bench", "cluster", "--workload", "smallfiles", "--clients"])
        .arg(CLUSTER_CLIENTS.to_string())
        .arg("--commit")
        .arg("sync,delayed")
        .arg("--rtt")
        .arg("100us")
        .arg("--files")
        .arg("20000")
        .timed(plan.cluster_rounds, plan.cluster_duration);
    let exe = std::env::current_exe()
        .map_err(|e| CliError::new(format!("cannot find the mnemofs executable: {e}")))?;
    note(&format!("running: {}", cmd.shown()));
    let mut child = Command::new(&exe)
        .args(&cmd.0)
        .arg("--json")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| CliError::new(format!("cannot start bench cluster: {e}")))?;
    let mut runs = Vec::new();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if plan.json {
                emit(&line);
            }
            if let Some(r) = ClusterRun::parse(&line) {
                runs.push(r);
            }
        }
    }
    let st = child
        .wait()
        .map_err(|e| CliError::new(format!("bench cluster: {e}")))?;
    if !st.success() {
        return Err(CliError::new(format!(
            "bench cluster failed ({st}): {}",
            cmd.shown()
        )));
    }
    let sync = mode_medians(&runs, "sync")?;
    let delayed = mode_medians(&runs, "delayed")?;
    let table = cluster_table(&[&sync, &delayed]);
    if plan.json {
        note(table.trim_end());
    } else {
        emit(table.trim_end());
    }
    let r = paper::ratio_of(delayed.ops, sync.ops);
    let mut row = Row::new(p, c, plan);
    row.unit = "files/s";
    row.ours_value = r;
    row.ours = paper::ratio(r);
    row.baseline = "sync".into();
    row.baseline_per_sec = sync.ops;
    row.ours_per_sec = delayed.ops;
    row.ours_compares = format!(
        "delayed over sync commits: {} vs {} files/s, medians of {} rounds; {:.2} vs {:.2} \
         RPCs per file, {:.1} files per commit RPC",
        si(delayed.ops),
        si(sync.ops),
        plan.cluster_rounds,
        delayed.rpcs_per_op,
        sync.rpcs_per_op,
        delayed.degree
    );
    row.scale = format!(
        "{CLUSTER_CLIENTS} client processes x 1 thread, 32 KiB files, no deletions (paper: \
         {})",
        c.paper_scale
    );
    row.at = format!("{CLUSTER_CLIENTS} clients, rtt 100 us, smallfiles 32K");
    row.setting = format!(
        "server and clients on this machine, 100 us round trip asked of a delay proxy \
         ({:.0} us measured; the paper's metadata went over 1 Gb Ethernet)",
        delayed.rtt_us.max(sync.rtt_us)
    );
    row.modes = "cluster mode (sync: every close commits; delayed: mount's default commit \
                 delay)"
        .into();
    row.command = cmd.shown();
    let svg = plan.out.join("delayed-commit.svg");
    let norm = |m: &ModeMedians| {
        let b = sync.ops.max(1e-9);
        Bar {
            value: m.ops / b,
            low: m.min / b,
            high: m.max / b,
        }
    };
    let mut rows = vec![row];
    headline_bars(
        &mut rows,
        &svg,
        "Delayed commit, Fig. 3 shape: 32 KiB files",
        "files/s, normalized to sync",
        ["sync commits (the baseline)", "delayed commits"],
        &[Group {
            label: format!("{CLUSTER_CLIENTS} clients, rtt 100 us"),
            bars: vec![Some(norm(&sync)), Some(norm(&delayed))],
        }],
        c,
    );
    Ok(rows)
}

fn cluster_table(ms: &[&ModeMedians]) -> String {
    let mut rows = vec![[
        "commit", "runs", "files/s", "min", "max", "ratio", "rpc/file", "degree", "rtt_us",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<_>>()];
    let base = ms.first().map_or(0.0, |m| m.ops);
    for m in ms {
        rows.push(vec![
            m.mode.to_string(),
            m.runs.to_string(),
            si(m.ops),
            si(m.min),
            si(m.max),
            paper::ratio(paper::ratio_of(m.ops, base)),
            format!("{:.2}", m.rpcs_per_op),
            format!("{:.2}", m.degree),
            format!("{:.0}", m.rtt_us),
        ]);
    }
    format!(
        "smallfiles (cluster): medians over rounds; ratio = files/s over sync's\n{}",
        result::render(&rows)
    )
}

/// A paper's rows as a block of `field  value` lines.
fn paper_block(p: &Paper, rows: &[Row]) -> String {
    let mut out = format!(
        "\n{}: {}\n  {}; {}\n",
        p.cite(),
        p.title,
        p.authors,
        p.venue
    );
    let mut kv = |k: &str, v: &str| out.push_str(&format!("  {k:<11} {v}\n"));
    kv("technique", &format!("{}: {}", p.technique, p.in_mnemofs));
    kv("paper's hw", p.testbed);
    let mut claim = "";
    for r in rows {
        if r.claim != claim {
            claim = r.claim;
            kv("experiment", r.experiment);
            kv(
                "paper",
                &format!(
                    "{}: {} [{}]",
                    r.paper_claim, r.paper_compares, r.paper_source
                ),
            );
            kv("", &format!("\"{}\"", r.paper_quote));
        }
        kv("ours", &format!("{}: {}", r.ours, r.ours_compares));
        kv("threads", &r.scale);
        kv("setting", &r.setting);
        if !r.modes.is_empty() {
            kv("modes", &r.modes);
        }
        kv("machine", &r.machine);
        kv("reproduce", &r.command);
        if let Some(s) = &r.svg {
            kv("figure", s);
        }
    }
    out
}

/// One line per headline.
fn summary_table(rows: &[Row], plan: &Plan) -> String {
    let mut t = vec![[
        "technique",
        "paper",
        "paper's claim",
        "source",
        "ours",
        "at",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<_>>()];
    for r in rows {
        let p = paper::by_key(r.paper);
        t.push(vec![
            r.technique.to_string(),
            p.map_or_else(|| r.paper.to_string(), |p| p.cite()),
            format!("{} ({})", r.paper_claim, r.paper_scale),
            paper::by_key(r.paper)
                .and_then(|p| p.claims.iter().find(|c| c.id == r.claim))
                .map_or(r.paper_source, |c| c.figure)
                .to_string(),
            r.ours.clone(),
            r.at.clone(),
        ]);
    }
    format!(
        "\nHeadlines: mnemofs at its defaults (preset full) against each paper's baseline, \
         as the same kind of ratio\nmachine: {}\n{}SVGs: {}\n",
        plan.machine,
        result::render_left(&t, &[0, 1, 2, 3, 5]),
        plan.out.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_names_select_papers_or_are_refused() {
        assert_eq!(select("all").unwrap().len(), PAPERS.len());
        assert_eq!(select("lawn").unwrap()[0].key, "lawn");
        assert_eq!(select(" mbs-lvm ").unwrap()[0].key, "mbs-lvm");
        let e = select("nova").unwrap_err();
        assert_eq!(e.code, 2);
        assert!(e.msg.contains("unknown paper 'nova'"), "{}", e.msg);
        assert!(e.msg.contains("delayed-commit, all"), "{}", e.msg);
        assert!(!e.msg.contains('\n'));
    }

    #[test]
    fn durations_print_as_bench_takes_them() {
        assert_eq!(duration_text(Duration::from_secs(2)), "2");
        assert_eq!(duration_text(Duration::from_millis(300)), "300ms");
        assert_eq!(duration_text(Duration::from_millis(1500)), "1500ms");
        for d in [Duration::from_secs(3), Duration::from_millis(250)] {
            assert_eq!(crate::bench::duration_arg(&duration_text(d)), Ok(d));
        }
    }

    #[test]
    fn machines_are_described_from_cpuinfo() {
        let two = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\nphysical id\t: 0\n\
                   cpu cores\t: 2\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) Processor\n\
                   physical id\t: 0\ncpu cores\t: 2\n";
        assert_eq!(describe_cpus(two, 9), "Intel(R) Xeon(R) Processor, 2 cores");
        let smt = "processor : 0\nmodel name : X\nphysical id : 0\ncpu cores : 1\n\
                   processor : 1\nmodel name : X\nphysical id : 0\ncpu cores : 1\n";
        assert_eq!(describe_cpus(smt, 2), "X, 1 core (2 logical CPUs)");
        assert_eq!(describe_cpus("", 4), "unknown CPU, 4 cores");
    }

    #[test]
    fn every_paper_command_parses_as_bench_compare_does() {
        let plan = Plan {
            run_duration: Duration::from_millis(100),
            run_rounds: 3,
            cluster_duration: Duration::from_millis(100),
            cluster_rounds: 1,
            threads: 2,
            json: false,
            out: PathBuf::from("/nonexistent"),
            machine: "m".into(),
        };
        let cmd = Cmd::new(&["bench", "compare", "--workload", "dwom"])
            .timed(plan.run_rounds, plan.run_duration);
        assert_eq!(
            cmd.shown(),
            "mnemofs bench compare --workload dwom --rounds 3 --duration 100ms"
        );
        let argv: Vec<String> = cmd.0.iter().skip(2).cloned().collect();
        let line = CompareLine::try_parse_from(&argv).unwrap();
        assert_eq!(line.args.workload, "dwom");
        assert_eq!(line.args.rounds, 3);
        assert_eq!(line.args.common.duration, Some(Duration::from_millis(100)));
        assert!(CompareLine::try_parse_from(["--bogus"]).is_err());
    }

    #[test]
    fn cluster_records_give_medians_per_mode() {
        let line = |m: &str, ops: f64| {
            format!(
                "{{\"commit\":\"{m}\",\"ops_per_sec\":{ops},\"rpcs_per_op\":3.0,\
                 \"compound_degree\":1.0,\"rtt_measured_us\":190.0}}"
            )
        };
        let runs: Vec<ClusterRun> = [
            line("sync", 100.0),
            line("delayed", 260.0),
            line("sync", 120.0),
            line("delayed", 250.0),
            line("sync", 110.0),
            line("delayed", 300.0),
            "not json".into(),
        ]
        .iter()
        .filter_map(|l| ClusterRun::parse(l))
        .collect();
        assert_eq!(runs.len(), 6);
        let s = mode_medians(&runs, "sync").unwrap();
        let d = mode_medians(&runs, "delayed").unwrap();
        assert_eq!((s.ops, s.min, s.max, s.runs), (110.0, 100.0, 120.0, 3));
        assert_eq!(d.ops, 260.0);
        assert_eq!(paper::ratio(paper::ratio_of(d.ops, s.ops)), "2.36×");
        assert!(mode_medians(&runs, "async").is_err());
        let t = cluster_table(&[&s, &d]);
        assert!(t.contains("2.36×") && t.contains("1.00×"), "{t}");
    }
}
