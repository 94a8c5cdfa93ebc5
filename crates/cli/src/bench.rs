//! `mnemofs bench`: argument parsing only; the benchmarks live in `crates/bench`.

use crate::error::{CliError, CliResult};
use crate::modes;
use crate::output::{emit, note};
use crate::size::size_arg;
use clap::{Args, Subcommand};
use mnemofs_bench::compare::{self, CompareConfig, Variant};
use mnemofs_bench::peers::{self, PeerWorkload, PeersConfig, PEERS};
use mnemofs_bench::suite::{self, SuiteConfig};
use mnemofs_bench::{result, BenchError, ImagePages, RunConfig, Stop, Workload};
use pm::PmProfile;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    arg_required_else_help = true,
    after_help = "Workloads and their parameters: `mnemofs bench --list` and docs/BENCHMARKS.md."
)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub cmd: Option<BenchCmd>,
    /// Workload to run in-process on a fresh image (see --list)
    #[arg(value_name = "WORKLOAD")]
    pub workload: Option<String>,
    /// List the workloads, presets and PM profiles
    #[arg(long)]
    pub list: bool,
    /// Threads issuing operations
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub threads: usize,
    #[arg(long, value_name = "P", default_value = mnemofs::DEFAULT_PRESET, help = modes::preset_help())]
    pub preset: String,
    #[arg(long, value_name = "L", help = modes::lock_help())]
    pub lock: Option<String>,
    #[arg(long = "small-write", value_name = "W", help = modes::small_write_help())]
    pub small_write: Option<String>,
    #[arg(long = "read-cache", value_name = "MODE", help = modes::read_cache_help())]
    pub read_cache: Option<String>,
    #[arg(long = "pm-profile", value_name = "NAME", default_value = "dram", help = profile_help())]
    pub pm_profile: String,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Options every in-process run shares.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// Measured time per run, in seconds (`5`, `1.5`, `500ms`) [default: 5]
    #[arg(long, value_name = "S", value_parser = duration_arg, conflicts_with = "ops")]
    pub duration: Option<Duration>,
    /// Measured operations per run, all threads together (instead of --duration)
    #[arg(long, value_name = "N")]
    pub ops: Option<u64>,
    /// Warm-up before the measured phase, not counted, in seconds [default: a tenth
    /// of --duration, at most 1 s; with --ops: a tenth of the ops]
    #[arg(long, value_name = "S", value_parser = duration_arg)]
    pub warmup: Option<Duration>,
    /// Size of each data file [default: per workload, see --list]
    #[arg(long = "file-size", value_name = "SIZE", value_parser = size_arg)]
    pub file_size: Option<u64>,
    /// Bytes per read/write call [default: per workload, see --list]
    #[arg(long = "io-size", value_name = "SIZE", value_parser = size_arg)]
    pub io_size: Option<u64>,
    /// Percentage of reads (mixed) [default: 50]
    #[arg(long = "read-pct", value_name = "P")]
    pub read_pct: Option<u32>,
    /// Files: filebench fileset, OLTP data files, live small files per thread
    #[arg(long, value_name = "N")]
    pub files: Option<u64>,
    /// Create the fresh image here (must not exist; removed afterwards) instead of
    /// a new file on /dev/shm; a DAX device is formatted and left in place. A list
    /// `PATH[@NODE],...` (as mkfs takes it) makes a volume of those devices
    #[arg(long, value_name = "PATH")]
    pub image: Option<PathBuf>,
    /// Pages for the fresh image when --image is not given: `auto` (2 MiB where a
    /// private tmpfs with huge=within_size can be mounted, i.e. as root, else a
    /// file on /dev/shm), `2m` (that tmpfs, or an error), `4k` (a private tmpfs with
    /// huge=never, or /dev/shm); `compare` takes a list (`2m,4k`) and runs each
    /// preset with each. The page size the kernel gave is measured and reported
    #[arg(
        long = "image-pages",
        value_name = "P,...",
        value_delimiter = ',',
        default_value = "auto"
    )]
    pub image_pages: Vec<String>,
    /// Do not map the image's pages in before the data set (default: pre-fault
    /// them, so that no measured operation takes a first-touch page fault)
    #[arg(long = "no-prefault")]
    pub no_prefault: bool,
    /// Image size [default: twice the data set plus 64 MiB, at least 128 MiB]
    #[arg(long = "image-size", value_name = "SIZE", value_parser = size_arg)]
    pub image_size: Option<u64>,
    /// Seed of the random offsets and file choices
    #[arg(long, value_name = "N", default_value_t = 42)]
    pub seed: u64,
    /// Percent of the fresh image for the LAWN zone (mkfs --zone-percent)
    #[arg(long = "zone-percent", value_name = "P", default_value_t = mnemofs::format::DEFAULT_ZONE_PERCENT)]
    pub zone_percent: u32,
    /// LAWN slot size of the fresh image in bytes (mkfs --slot-size)
    #[arg(long = "slot-size", value_name = "B", default_value_t = mnemofs::format::DEFAULT_SLOT_SIZE)]
    pub slot_size: u32,
    #[arg(long = "desc-store", value_name = "HOW", value_enum, default_value_t = modes::DescStore::Auto, hide_possible_values = true, help = modes::DESC_STORE_HELP)]
    pub desc_store: modes::DescStore,
    /// Keep the LAWN zone at its mkfs size (no growth; the write-back thread alone
    /// frees slots)
    #[arg(long = "fixed-zone")]
    pub fixed_zone: bool,
    /// DRAM budget of the read cache, where a preset has one [default: 256M]
    #[arg(long = "read-cache-size", value_name = "SIZE", value_parser = size_arg)]
    pub read_cache_size: Option<u64>,
    /// Reads of a page within one window that make it hot (1-15) [default: 2]
    #[arg(long = "read-cache-threshold", value_name = "N")]
    pub read_cache_threshold: Option<u32>,
    /// The read cache's hotness window in ms [default: 100]
    #[arg(long = "read-cache-window", value_name = "MS")]
    pub read_cache_window: Option<u64>,
    /// The medium the `auto` modes (full's read cache and small writes) go by:
    /// `dram` or `pm` [default: told at mount: pm under a latency profile or on a
    /// DAX device measured slower than DRAM, else dram]
    #[arg(long, value_name = "M")]
    pub medium: Option<String>,
    /// Devices of the fresh volume (MBS-LVM): image files of the image size each,
    /// device i on NUMA node i modulo the topology's nodes
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub devices: u32,
    /// NUMA topology: `N` emulated nodes, `nodes=N;cpus=L/L/..;dist=R/R/..`, or
    /// `sysfs:PATH` [default: this machine's, from /sys/devices/system/node]
    #[arg(long, value_name = "SPEC")]
    pub topology: Option<String>,
    /// Placement over the devices: local, interleave, single [default: the
    /// preset's]; `compare` takes a list and runs each preset with each
    #[arg(long, value_name = "P,...", value_delimiter = ',')]
    pub placement: Vec<String>,
    /// NUMA node of each benchmark thread, comma separated (thread t takes entry t
    /// modulo the list) [default: round robin over the topology's nodes]; with this
    /// machine's topology threads are also pinned to their node's CPUs
    #[arg(long = "node-of-thread", value_name = "N,...", value_delimiter = ',')]
    pub node_of_thread: Vec<u32>,
    /// One JSON object per run on standard output (JSON Lines) instead of a table
    #[arg(long)]
    pub json: bool,
}

/// `--topology`, parsed.
fn topology(c: &CommonArgs) -> CliResult<Option<pm::Topology>> {
    c.topology
        .as_deref()
        .map(|t| {
            t.parse::<pm::Topology>()
                .map_err(|e| CliError::new(format!("--topology: {e}")).with_code(2))
        })
        .transpose()
}

/// `--placement` values, parsed (empty: the preset's).
fn placements(c: &CommonArgs) -> CliResult<Vec<mnemofs::PlacementMode>> {
    c.placement.iter().map(|p| modes::placement(p)).collect()
}

#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// Run presets (and PM profiles) side by side, interleaved over rounds; medians
    /// and ratios to the first
    Compare(Box<CompareArgs>),
    /// The scaling sweep (FxMark style): a workload at 1, 2, 4, ... threads up to the
    /// core count, presets side by side, interleaved rounds; ops/s and contention
    /// counters per point, and a plot of ops/s against threads
    Scale(Box<ScaleArgs>),
    /// Run fio against ext4 data=journal, tmpfs, bindfs and a mnemofs FUSE mount
    /// (needs root and fio)
    Peers(PeersArgs),
    /// Every workload x every existing preset into a results folder (JSONL, SVGs)
    Suite(SuiteArgs),
    /// Clients of a metadata server, each its own process, under each commit mode
    /// (sync, delayed) side by side
    Cluster(Box<crate::cluster_bench::ClusterArgs>),
    /// Each paper's headline experiment at mnemofs's defaults (preset full against the
    /// paper's baseline), its figure beside ours, and an SVG in the figure's shape
    Paper(Box<crate::paper::PaperArgs>),
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Workload to compare on
    #[arg(long, value_name = "W")]
    pub workload: String,
    /// Presets to compare, comma separated; ratios are to the first
    #[arg(
        long,
        value_name = "A,B,...",
        value_delimiter = ',',
        default_value = "nova,full"
    )]
    pub presets: Vec<String>,
    /// PM profiles to compare, comma separated (each preset under each profile)
    #[arg(
        long = "pm-profiles",
        value_name = "P,...",
        value_delimiter = ',',
        default_value = "dram"
    )]
    pub pm_profiles: Vec<String>,
    /// Thread counts, comma separated
    #[arg(long, value_name = "N,...", value_delimiter = ',', default_value = "1")]
    pub threads: Vec<usize>,
    /// Rounds (each runs every variant once, interleaved); at least 3
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub rounds: u32,
    /// Draw the medians as an SVG bar chart
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct ScaleArgs {
    /// Workload to sweep
    #[arg(long, value_name = "W")]
    pub workload: String,
    /// Presets to sweep, comma separated; ratios are to the first
    #[arg(
        long,
        value_name = "A,B,...",
        value_delimiter = ',',
        default_value = "nova,pnova"
    )]
    pub presets: Vec<String>,
    /// The largest thread count: the sweep runs 1, 2, 4, ... and this [default: this
    /// machine's CPUs]
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Rounds (each runs every preset at every thread count once, interleaved); at
    /// least 3
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub rounds: u32,
    /// Draw ops/s against threads, one line per preset, as an SVG chart
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The thread counts of a sweep up to `max`: the powers of two below it, and it.
pub(crate) fn sweep_counts(max: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut n = 1;
    while n < max {
        v.push(n);
        n *= 2;
    }
    v.push(max.max(1));
    v
}

#[derive(Args, Debug)]
pub struct PeersArgs {
    /// fio job: randwrite (fsync after each write) or randread
    #[arg(long, value_name = "W", default_value = "randwrite")]
    pub workload: String,
    /// Block size of the job
    #[arg(long = "io-size", value_name = "SIZE", value_parser = size_arg, default_value = "4K")]
    pub io_size: u64,
    /// Size of the file fio works on
    #[arg(long = "file-size", value_name = "SIZE", value_parser = size_arg, default_value = "64M")]
    pub file_size: u64,
    /// Size of each file system (ext4 image, tmpfs, mnemofs image)
    #[arg(long = "fs-size", value_name = "SIZE", value_parser = size_arg, default_value = "1G")]
    pub fs_size: u64,
    /// Measured seconds per peer (after 1 s of ramp)
    #[arg(long, value_name = "S", default_value_t = 5)]
    pub runtime: u64,
    #[arg(long, value_name = "P", default_value = mnemofs::DEFAULT_PRESET, help = modes::preset_help())]
    pub preset: String,
    /// Peers to run, comma separated
    #[arg(
        long,
        value_name = "P,...",
        value_delimiter = ',',
        default_value = "ext4-dj,tmpfs,bindfs,mnemofs"
    )]
    pub peers: Vec<String>,
    /// One JSON object per peer on standard output instead of a table
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct SuiteArgs {
    /// Short runs (1 s each) on smaller data sets: a few minutes in all
    #[arg(long)]
    pub quick: bool,
    /// Results folder [default: bench-results/<UTC date and time>]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Thread counts, comma separated [default: 1 and the number of CPUs]
    #[arg(long, value_name = "N,...", value_delimiter = ',')]
    pub threads: Option<Vec<usize>>,
    #[arg(long = "pm-profile", value_name = "NAME", default_value = "dram", help = profile_help())]
    pub pm_profile: String,
    /// Rounds per workload (variants interleaved in each)
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub rounds: u32,
}

fn profile_help() -> String {
    format!(
        "PM latency profile added to the DRAM-backed image: {} (see docs/BENCHMARKS.md)",
        PmProfile::names()
    )
}

/// Seconds (`5`, `0.5`, `5s`) or milliseconds (`500ms`).
pub(crate) fn duration_arg(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("invalid duration '{s}' (examples: 5, 1.5, 500ms)"))?;
    if !v.is_finite() || v < 0.0 || v * scale > 86_400.0 {
        return Err(format!("invalid duration '{s}' (0 to 86400 seconds)"));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

fn bench_err(e: BenchError) -> CliError {
    CliError::new(e.to_string())
}

fn profile(name: &str) -> CliResult<PmProfile> {
    PmProfile::by_name(name).ok_or_else(|| {
        CliError::new(format!(
            "unknown PM profile '{name}'; valid profiles: {}",
            PmProfile::names()
        ))
    })
}

fn workload(name: &str) -> CliResult<Workload> {
    Workload::from_name(name).ok_or_else(|| {
        CliError::new(format!(
            "unknown workload '{name}'; valid workloads: {}",
            Workload::names()
        ))
    })
}

/// The `--image-pages` values, checked.
fn image_pages(c: &CommonArgs) -> CliResult<Vec<ImagePages>> {
    let mut out = Vec::new();
    for name in &c.image_pages {
        let p = ImagePages::from_name(name).ok_or_else(|| {
            let valid: Vec<&str> = ImagePages::ALL.iter().map(|p| p.name()).collect();
            CliError::new(format!(
                "unknown --image-pages '{}'; valid: {}",
                name.trim(),
                valid.join(", ")
            ))
            .with_code(2)
        })?;
        if out.contains(&p) {
            return Err(
                CliError::new(format!("--image-pages '{}' is given twice", p.name())).with_code(2),
            );
        }
        out.push(p);
    }
    if out.is_empty() {
        out.push(ImagePages::Auto);
    }
    Ok(out)
}

/// The run configuration from the shared options.
fn run_config(w: Workload, c: &CommonArgs) -> RunConfig {
    let mut rc = RunConfig::new(w);
    if let Some(n) = c.ops {
        rc.stop = Stop::Ops(n);
    } else if let Some(d) = c.duration {
        rc.stop = Stop::Duration(d);
    }
    rc.warmup = match (c.warmup, rc.stop) {
        (Some(d), Stop::Duration(_)) => Stop::Duration(d),
        (Some(d), Stop::Ops(_)) if d.is_zero() => Stop::Ops(0),
        (Some(d), Stop::Ops(_)) => Stop::Duration(d),
        (None, s) => s.default_warmup(),
    };
    if let Some(v) = c.file_size {
        rc.params.file_size = v;
    }
    if let Some(v) = c.io_size {
        rc.params.io_size = v;
    }
    if let Some(v) = c.read_pct {
        rc.params.read_pct = v;
    }
    if let Some(v) = c.files {
        rc.params.files = v;
    }
    rc.image = c.image.clone();
    rc.prefault = !c.no_prefault;
    rc.zone_percent = c.zone_percent;
    rc.slot_size = c.slot_size;
    rc.image_size = c.image_size;
    rc.seed = c.seed;
    rc.progress = true;
    rc.devices = c.devices;
    rc.node_of_thread = c.node_of_thread.clone();
    rc
}

pub fn run(a: &BenchArgs) -> CliResult<i32> {
    match &a.cmd {
        Some(BenchCmd::Compare(c)) => return run_compare(c),
        Some(BenchCmd::Scale(c)) => return run_scale(c),
        Some(BenchCmd::Peers(p)) => return run_peers(p),
        Some(BenchCmd::Suite(s)) => return run_suite(s),
        Some(BenchCmd::Cluster(c)) => return crate::cluster_bench::run(c),
        Some(BenchCmd::Paper(p)) => return crate::paper::run(p),
        None => {}
    }
    if a.list {
        emit(&list());
        return Ok(0);
    }
    let Some(name) = &a.workload else {
        return Err(CliError::new(format!(
            "name a workload ({}), or use --list, compare, peers or suite",
            Workload::names()
        ))
        .with_code(2));
    };
    let w = workload(name)?;
    let mut rc = run_config(w, &a.common);
    rc.threads = a.threads;
    rc.image_pages = match image_pages(&a.common)?.as_slice() {
        [one] => *one,
        _ => {
            return Err(CliError::new(
                "give one --image-pages value (a list is for `bench compare`)",
            )
            .with_code(2))
        }
    };
    let mut mount = modes::resolve_with(
        &a.preset,
        a.lock.as_deref(),
        a.small_write.as_deref(),
        a.read_cache.as_deref(),
    )?;
    mount.pm_profile = profile(&a.pm_profile)?;
    mount.lawn_desc_store = a.common.desc_store.option();
    mount.lawn_fixed_zone = a.common.fixed_zone;
    read_cache_options(&mut mount, &a.common)?;
    mount.topology = topology(&a.common)?;
    match placements(&a.common)?.as_slice() {
        [] => {}
        [one] => mount.placement = *one,
        _ => {
            return Err(
                CliError::new("give one --placement (a list is for `bench compare`)").with_code(2),
            )
        }
    }
    rc.mount = mount;
    rc.preset = preset_label(
        &a.preset,
        a.lock.as_deref(),
        a.small_write.as_deref(),
        a.read_cache.as_deref(),
    );
    rc.validate().map_err(|m| CliError::new(m).with_code(2))?;
    let r = mnemofs_bench::run(&rc).map_err(bench_err)?;
    if a.common.json {
        emit(&r.to_json_line());
    } else {
        emit(result::table(std::slice::from_ref(&r)).trim_end());
        emit(&format!(
            "{:.2} s measured, {} user bytes written, {} PM bytes written, {} flushes, {} \
             fences, {:.0} ns/op modeled PM cost ({}{})",
            r.duration_s,
            r.user_bytes_written,
            r.pm_bytes_written,
            r.flushes,
            r.fences,
            r.pm_modeled_delay_per_op_ns,
            r.pm_profile,
            if r.pm_profile == "dram" {
                String::new()
            } else {
                format!(
                    "; each busy-wait shortened by its measured overshoot, {} ns",
                    r.spin_excess_ns
                )
            }
        ));
        emit(&format!(
            "image: {}, mapping: {}, {}",
            if r.image_fs.is_empty() {
                "?"
            } else {
                &r.image_fs
            },
            r.map_summary,
            if r.prefaulted {
                "pre-faulted"
            } else {
                "not pre-faulted"
            }
        ));
    }
    Ok(0)
}

/// The read cache's tuning options of a run.
fn read_cache_options(m: &mut mnemofs::MountOptions, c: &CommonArgs) -> CliResult<()> {
    if let Some(b) = c.read_cache_size {
        m.read_cache_bytes = b;
    }
    if let Some(t) = c.read_cache_threshold {
        if !(1..=15).contains(&t) {
            return Err(
                CliError::new(format!("--read-cache-threshold {t}: must be 1 to 15")).with_code(2),
            );
        }
        m.read_cache_threshold = t;
    }
    if let Some(w) = c.read_cache_window {
        if w == 0 {
            return Err(CliError::new("--read-cache-window must be at least 1 ms").with_code(2));
        }
        m.read_cache_window_ms = w;
    }
    if let Some(x) = &c.medium {
        m.medium = Some(modes::medium(x)?);
    }
    Ok(())
}

/// `nova`, or `nova+lock=inode,small-write=cow` when modes are overridden.
fn preset_label(preset: &str, lock: Option<&str>, sw: Option<&str>, rc: Option<&str>) -> String {
    let mut mods = Vec::new();
    if let Some(l) = lock {
        mods.push(format!("lock={l}"));
    }
    if let Some(w) = sw {
        mods.push(format!("small-write={w}"));
    }
    if let Some(r) = rc {
        mods.push(format!("read-cache={r}"));
    }
    if mods.is_empty() {
        preset.to_string()
    } else {
        format!("{preset}+{}", mods.join(","))
    }
}

fn list() -> String {
    let mut rows = vec![[
        "workload",
        "family",
        "file size",
        "io size",
        "read %",
        "files",
        "what a thread does",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<_>>()];
    for &w in Workload::ALL {
        let p = w.defaults();
        rows.push(vec![
            w.name().to_string(),
            w.family().to_string(),
            result::size(p.file_size),
            result::size(p.io_size),
            if w.uses_read_pct() {
                p.read_pct.to_string()
            } else {
                "-".into()
            },
            if p.files == 0 {
                "-".into()
            } else {
                p.files.to_string()
            },
            w.describe().to_string(),
        ]);
    }
    let mut out = format!("Workloads\n{}", result::render_left(&rows, &[0, 1, 6]));
    out.push_str("\nPresets: ");
    out.push_str(
        &mnemofs::PRESETS
            .iter()
            .map(|p| p.name)
            .collect::<Vec<_>>()
            .join(", "),
    );
    out.push('\n');
    out.push_str("\nPM profiles (added to the DRAM-backed image)\n");
    let mut prow = vec![[
        "profile",
        "read latency",
        "read GB/s",
        "persist latency",
        "write GB/s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<_>>()];
    let gb = |b: u64| {
        if b == 0 {
            "-".to_string()
        } else {
            format!("{:.1}", b as f64 / 1e9)
        }
    };
    for p in PmProfile::ALL {
        prow.push(vec![
            p.name.to_string(),
            format!("{} ns", p.read_latency_ns),
            gb(p.read_bandwidth),
            format!("{} ns", p.write_latency_ns),
            gb(p.write_bandwidth),
        ]);
    }
    out.push_str(&result::render(&prow));
    out.push_str("\nAlso: mnemofs bench compare | scale | peers | suite | cluster | paper (see --help of each)");
    out
}

fn run_scale(c: &ScaleArgs) -> CliResult<i32> {
    let max = match c.threads {
        Some(0) => {
            return Err(CliError::new("--threads must be at least 1").with_code(2));
        }
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let args = CompareArgs {
        workload: c.workload.clone(),
        presets: c.presets.clone(),
        pm_profiles: vec!["dram".to_string()],
        threads: sweep_counts(max),
        rounds: c.rounds,
        plot: None,
        common: c.common.clone(),
    };
    let (w, summary) = compare_table(&args)?;
    if let Some(p) = &c.plot {
        let lines: Vec<mnemofs_bench::plot::Line> = variant_labels(&summary)
            .into_iter()
            .map(|label| mnemofs_bench::plot::Line {
                points: summary
                    .iter()
                    .filter(|x| x.variant == label)
                    .map(|x| (x.threads as f64, x.ops_per_sec))
                    .collect(),
                name: label,
            })
            .collect();
        let title = format!(
            "{} ({}): ops/s against threads, median of {} rounds",
            w.name(),
            w.family(),
            c.rounds
        );
        mnemofs_bench::plot::curves(p, &title, "threads", "ops/s", &lines).map_err(bench_err)?;
        note(&format!("plot: {}", p.display()));
    }
    Ok(0)
}

fn run_compare(c: &CompareArgs) -> CliResult<i32> {
    let (w, summary) = compare_table(c)?;
    if let Some(p) = &c.plot {
        let labels = variant_labels(&summary);
        let title = format!(
            "{} ({}): ops/s, median of {} rounds",
            w.name(),
            w.family(),
            c.rounds
        );
        compare::plot(p, &title, &labels, &summary).map_err(bench_err)?;
        note(&format!("plot: {}", p.display()));
    }
    Ok(0)
}

/// The variants of a comparison's medians, in their order.
fn variant_labels(summary: &[compare::Summary]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for x in summary {
        if !v.contains(&x.variant) {
            v.push(x.variant.clone());
        }
    }
    v
}

/// Runs the comparison `c` describes and prints its table; the workload and the
/// medians.
pub(crate) fn compare_table(c: &CompareArgs) -> CliResult<(Workload, Vec<compare::Summary>)> {
    let w = workload(&c.workload)?;
    if c.rounds < 3 {
        return Err(
            CliError::new("--rounds must be at least 3 (medians of interleaved rounds)")
                .with_code(2),
        );
    }
    let mut base = run_config(w, &c.common);
    base.validate().map_err(|m| CliError::new(m).with_code(2))?;
    base.progress = true;
    let pages = image_pages(&c.common)?;
    let topo = topology(&c.common)?;
    let places: Vec<Option<mnemofs::PlacementMode>> = match placements(&c.common)? {
        v if v.is_empty() => vec![None],
        v => v.into_iter().map(Some).collect(),
    };
    let mut variants = Vec::new();
    for &pg in &pages {
        for pname in &c.pm_profiles {
            let prof = profile(pname.trim())?;
            for preset in &c.presets {
                for &place in &places {
                    let preset = preset.trim();
                    let mut mount = modes::resolve(preset, None, None)?;
                    mount.topology = topo.clone();
                    if let Some(p) = place {
                        mount.placement = p;
                    }
                    mount.pm_profile = prof;
                    mount.lawn_desc_store = c.common.desc_store.option();
                    mount.lawn_fixed_zone = c.common.fixed_zone;
                    read_cache_options(&mut mount, &c.common)?;
                    let mut label = if c.pm_profiles.len() > 1 {
                        format!("{preset}/{}", prof.name)
                    } else {
                        preset.to_string()
                    };
                    if pages.len() > 1 {
                        label = format!("{label}/{}", pg.name());
                    }
                    if places.len() > 1 {
                        label = format!("{label}/{}", mount.placement.name());
                    }
                    if variants.iter().any(|v: &Variant| v.label == label) {
                        return Err(CliError::new(format!("'{label}' is given twice")).with_code(2));
                    }
                    variants.push(Variant {
                        label,
                        preset: preset.to_string(),
                        mount,
                        image_pages: Some(pg),
                    });
                }
            }
        }
    }
    let cfg = CompareConfig {
        base,
        variants,
        threads: c.threads.clone(),
        rounds: c.rounds,
    };
    let json = c.common.json;
    let (_, summary) = compare::run_compare(&cfg, |r| {
        if json {
            emit(&r.to_json_line());
        } else {
            note(&format!(
                "round {} {} {}/{} {}t: {:.0} ops/s; image: {}, mapping: {}{}",
                r.round.unwrap_or(0) + 1,
                r.workload,
                r.preset,
                r.pm_profile,
                r.threads,
                r.ops_per_sec,
                r.image_fs,
                r.map_summary,
                if r.prefaulted { ", pre-faulted" } else { "" }
            ));
        }
    })
    .map_err(bench_err)?;
    let table = compare::summary_table(w.name(), &summary);
    if json {
        note(table.trim_end());
    } else {
        emit(table.trim_end());
    }
    Ok((w, summary))
}

fn run_peers(p: &PeersArgs) -> CliResult<i32> {
    let wl = PeerWorkload::from_name(&p.workload).ok_or_else(|| {
        CliError::new(format!(
            "unknown peers workload '{}'; valid: randwrite, randread",
            p.workload
        ))
        .with_code(2)
    })?;
    // The mnemofs mount must use a preset that exists.
    modes::resolve(&p.preset, None, None)?;
    let exe = std::env::current_exe()
        .map_err(|e| CliError::new(format!("cannot find the mnemofs executable: {e}")))?;
    let mut cfg = PeersConfig::new(exe);
    cfg.workload = wl;
    cfg.io_size = p.io_size;
    cfg.file_size = p.file_size;
    cfg.fs_size = p.fs_size;
    cfg.runtime_s = p.runtime.max(1);
    cfg.preset = p.preset.clone();
    cfg.peers = p.peers.iter().map(|s| s.trim().to_string()).collect();
    for peer in &cfg.peers {
        if !PEERS.contains(&peer.as_str()) {
            return Err(CliError::new(format!(
                "unknown peer '{peer}'; peers: {}",
                PEERS.join(", ")
            ))
            .with_code(2));
        }
    }
    let rs = peers::run_peers(&cfg, note).map_err(bench_err)?;
    if p.json {
        for r in &rs {
            emit(&serde_json::to_string(r).unwrap_or_default());
        }
    } else {
        emit(peers::table(&rs).trim_end());
    }
    Ok(0)
}

fn run_suite(s: &SuiteArgs) -> CliResult<i32> {
    let out = s
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("bench-results").join(result::now_utc().replace(':', "")));
    let mut cfg = SuiteConfig::new(s.quick, out.clone());
    if let Some(t) = &s.threads {
        if t.is_empty() || t.contains(&0) {
            return Err(CliError::new("--threads needs thread counts of at least 1").with_code(2));
        }
        cfg.threads = t.clone();
    }
    if s.rounds == 0 {
        return Err(CliError::new("--rounds must be at least 1").with_code(2));
    }
    cfg.rounds = s.rounds;
    cfg.pm_profile = profile(&s.pm_profile)?;
    cfg.progress = true;
    let files = suite::run_suite(&cfg, note).map_err(bench_err)?;
    emit(&format!("results in {}:", out.display()));
    for f in files {
        emit(&format!("  {}", f.display()));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_doubles_up_to_the_core_count() {
        assert_eq!(sweep_counts(16), vec![1, 2, 4, 8, 16]);
        assert_eq!(sweep_counts(12), vec![1, 2, 4, 8, 12]);
        assert_eq!(sweep_counts(2), vec![1, 2]);
        assert_eq!(sweep_counts(1), vec![1]);
    }

    #[test]
    fn durations() {
        assert_eq!(duration_arg("5"), Ok(Duration::from_secs(5)));
        assert_eq!(duration_arg("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration_arg("500ms"), Ok(Duration::from_millis(500)));
        assert!(duration_arg("-1").is_err());
        assert!(duration_arg("fast").is_err());
        assert!(duration_arg("1e9").is_err());
    }

    #[test]
    fn labels_and_lookups() {
        assert_eq!(preset_label("nova", None, None, None), "nova");
        assert_eq!(
            preset_label("nova", Some("inode"), Some("cow"), None),
            "nova+lock=inode,small-write=cow"
        );
        assert!(profile("optane").is_ok());
        assert!(profile("pmem")
            .unwrap_err()
            .msg
            .contains("dram, optane, cxl"));
        assert!(workload("dwom").is_ok());
        assert!(workload("x").unwrap_err().msg.contains("smallfiles"));
        let l = list();
        for w in Workload::ALL {
            assert!(l.contains(w.name()));
        }
        assert!(l.contains("optane"));
    }
}
