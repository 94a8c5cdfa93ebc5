//! The workloads, their parameters, and the configuration of one run.

use mnemofs::MountOptions;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// One benchmark workload. Parameters and sources: docs/BENCHMARKS.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Workload {
    Dwom,
    Drbm,
    Drbl,
    Dwal,
    RandWrite,
    RandRead,
    Mixed,
    SeqRead,
    SkewRead,
    FileServer,
    VarMail,
    WebProxy,
    WebServer,
    Oltp,
    SmallFiles,
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

impl Workload {
    pub const ALL: &'static [Workload] = &[
        Workload::Dwom,
        Workload::Drbm,
        Workload::Drbl,
        Workload::Dwal,
        Workload::RandWrite,
        Workload::RandRead,
        Workload::Mixed,
        Workload::SeqRead,
        Workload::SkewRead,
        Workload::FileServer,
        Workload::VarMail,
        Workload::WebProxy,
        Workload::WebServer,
        Workload::Oltp,
        Workload::SmallFiles,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Dwom => "dwom",
            Workload::Drbm => "drbm",
            Workload::Drbl => "drbl",
            Workload::Dwal => "dwal",
            Workload::RandWrite => "randwrite",
            Workload::RandRead => "randread",
            Workload::Mixed => "mixed",
            Workload::SeqRead => "seqread",
            Workload::SkewRead => "skewread",
            Workload::FileServer => "fileserver",
            Workload::VarMail => "varmail",
            Workload::WebProxy => "webproxy",
            Workload::WebServer => "webserver",
            Workload::Oltp => "oltp",
            Workload::SmallFiles => "smallfiles",
        }
    }

    pub fn from_name(name: &str) -> Option<Workload> {
        Workload::ALL.iter().copied().find(|w| w.name() == name)
    }

    /// Names of every workload, comma separated.
    pub fn names() -> String {
        Workload::ALL
            .iter()
            .map(|w| w.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The suite the workload comes from.
    pub fn family(self) -> &'static str {
        match self {
            Workload::Dwom | Workload::Drbm | Workload::Drbl | Workload::Dwal => "FxMark",
            Workload::RandWrite
            | Workload::RandRead
            | Workload::Mixed
            | Workload::SeqRead
            | Workload::SkewRead => "fio-style",
            Workload::FileServer
            | Workload::VarMail
            | Workload::WebProxy
            | Workload::WebServer
            | Workload::Oltp => "filebench-like",
            Workload::SmallFiles => "small files (xcdn-like)",
        }
    }

    /// One line: what a thread does.
    pub fn describe(self) -> &'static str {
        match self {
            Workload::Dwom => "each thread overwrites its own block of one shared file",
            Workload::Drbm => "each thread reads its own block of one shared file",
            Workload::Drbl => "each thread reads the one block of its own file",
            Workload::Dwal => "each thread appends blocks to its own file",
            Workload::RandWrite => "random aligned writes to each thread's own file",
            Workload::RandRead => "random aligned reads of each thread's own file",
            Workload::Mixed => "random reads (read-pct) and writes of each thread's own file",
            Workload::SeqRead => "sequential reads of each thread's own file, wrapping",
            Workload::SkewRead => {
                "random reads, offsets normal around the middle of the file (sd = size/8)"
            }
            Workload::FileServer => {
                "create+write whole, append, read whole, delete, stat over a fileset"
            }
            Workload::VarMail => "delete, create+append+fsync, read+append+fsync, read (mail)",
            Workload::WebProxy => "delete, create+append, 5x read whole file, log append",
            Workload::WebServer => "10x open+read whole file+close, log append",
            Workload::Oltp => "10 random reads + 1 random write on shared data files, log appends",
            Workload::SmallFiles => "create + write + close of many small files",
        }
    }

    /// Default parameters of the workload.
    pub fn defaults(self) -> Params {
        let p = |file_size, io_size, read_pct, files| Params {
            file_size,
            io_size,
            read_pct,
            files,
        };
        match self {
            Workload::Dwom | Workload::Drbm | Workload::Drbl => p(4 * KIB, 4 * KIB, 0, 0),
            Workload::Dwal => p(64 * MIB, 4 * KIB, 0, 0),
            Workload::RandWrite | Workload::SeqRead | Workload::SkewRead => {
                p(64 * MIB, 4 * KIB, 0, 0)
            }
            Workload::RandRead => p(64 * MIB, 4 * KIB, 100, 0),
            Workload::Mixed => p(64 * MIB, 4 * KIB, 50, 0),
            Workload::FileServer => p(128 * KIB, 16 * KIB, 0, 1000),
            Workload::VarMail | Workload::WebProxy | Workload::WebServer => {
                p(16 * KIB, 16 * KIB, 0, 1000)
            }
            Workload::Oltp => p(16 * MIB, 2 * KIB, 0, 10),
            Workload::SmallFiles => p(32 * KIB, 32 * KIB, 0, 1024),
        }
    }

    /// Whether `--read-pct` means something for this workload.
    pub fn uses_read_pct(self) -> bool {
        self == Workload::Mixed
    }
}

/// Size parameters of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Params {
    /// Size of each data file (fio-style: per thread; filebench: each file of the
    /// fileset; dwal: the size at which the file is truncated again; smallfiles: the
    /// size of each file).
    pub file_size: u64,
    /// Bytes per read or write call (filebench: per append; smallfiles: per write).
    pub io_size: u64,
    /// Percentage of reads (`mixed`).
    pub read_pct: u32,
    /// Files: filebench fileset size (all threads), OLTP data files, live small files
    /// per thread; 0 where unused.
    pub files: u64,
}

/// When the measured phase (or the warm-up) ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// After this long.
    Duration(Duration),
    /// After this many operations in all (split between the threads).
    Ops(u64),
}

impl Stop {
    /// The default warm-up for a measured phase: a tenth of it, at most 1 s.
    pub fn default_warmup(&self) -> Stop {
        match *self {
            Stop::Duration(d) => Stop::Duration((d / 10).min(Duration::from_secs(1))),
            Stop::Ops(n) => Stop::Ops(n / 10),
        }
    }
}

/// Which pages a default image (no `image` given) should be mapped with; what the
/// kernel then did is measured and reported (`BenchResult::map_pages`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ImagePages {
    /// 2 MiB where this process may mount a private tmpfs with `huge=within_size`
    /// (root), else a file on /dev/shm (whatever pages its mount gives).
    #[default]
    Auto,
    /// 2 MiB: a private tmpfs with `huge=within_size`; an error where it cannot be
    /// mounted.
    Huge,
    /// 4 KiB: a private tmpfs with `huge=never` (root), else a file on /dev/shm.
    Small,
}

impl ImagePages {
    /// Every choice, as the CLI spells them.
    pub const ALL: &'static [ImagePages] = &[ImagePages::Auto, ImagePages::Huge, ImagePages::Small];

    /// `auto`, `2m` or `4k`.
    pub fn name(self) -> &'static str {
        match self {
            ImagePages::Auto => "auto",
            ImagePages::Huge => "2m",
            ImagePages::Small => "4k",
        }
    }

    /// The choice named `name` (`auto`, `2m`/`2M`/`huge`, `4k`/`4K`/`small`).
    pub fn from_name(name: &str) -> Option<ImagePages> {
        match name.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(ImagePages::Auto),
            "2m" | "huge" => Some(ImagePages::Huge),
            "4k" | "small" => Some(ImagePages::Small),
            _ => None,
        }
    }
}

/// Everything one run needs.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub workload: Workload,
    pub threads: usize,
    pub stop: Stop,
    pub warmup: Stop,
    pub params: Params,
    /// Preset name as given (with mode overrides, the label says so).
    pub preset: String,
    /// Engine mount options, including the PM profile.
    pub mount: MountOptions,
    /// Where to create the fresh image (default: a new file on /dev/shm). A regular
    /// file there must not exist yet; it is removed afterwards. A device is
    /// formatted (its contents are lost) and left in place.
    pub image: Option<PathBuf>,
    /// Image size (default: from the workload's data set).
    pub image_size: Option<u64>,
    /// Page size asked for a default image ([`ImagePages`]; ignored with `image`).
    pub image_pages: ImagePages,
    /// Map every page of the image in (`MADV_POPULATE_WRITE`) after mounting, before
    /// the data set, so that no measured operation takes a first-touch fault (real PM
    /// has no allocation or zero-fill on first touch). Default on.
    pub prefault: bool,
    /// LAWN zone share of the image (percent) and slot size, given to mkfs.
    pub zone_percent: u32,
    pub slot_size: u32,
    pub seed: u64,
    /// Show a progress bar on a terminal once a run has taken 2 s.
    pub progress: bool,
    /// Round number within a comparison (reported in the result).
    pub round: Option<u32>,
    /// Devices of the fresh volume (1: one image, as always); device `i` sits on
    /// node `i` modulo the topology's nodes (`mount.topology`).
    pub devices: u32,
    /// NUMA node of each benchmark thread (thread `t` takes entry `t` modulo the
    /// list); empty: round robin over the topology's nodes when it has several.
    pub node_of_thread: Vec<u32>,
}

impl RunConfig {
    /// A configuration with the workload's defaults, the `nova` preset, `dram`.
    pub fn new(workload: Workload) -> RunConfig {
        let stop = Stop::Duration(Duration::from_secs(5));
        RunConfig {
            workload,
            threads: 1,
            stop,
            warmup: stop.default_warmup(),
            params: workload.defaults(),
            preset: "nova".to_string(),
            mount: mnemofs::PRESETS
                .first()
                .map(MountOptions::from_preset)
                .unwrap_or_default(),
            image: None,
            image_size: None,
            image_pages: ImagePages::Auto,
            prefault: true,
            zone_percent: mnemofs::format::DEFAULT_ZONE_PERCENT,
            slot_size: mnemofs::format::DEFAULT_SLOT_SIZE,
            seed: 42,
            progress: false,
            round: None,
            devices: 1,
            node_of_thread: Vec::new(),
        }
    }

    /// Checks the parameters; a message names the first bad one.
    pub fn validate(&self) -> Result<(), String> {
        let p = &self.params;
        if self.threads == 0 {
            return Err("--threads must be at least 1".into());
        }
        if self.threads > 1024 {
            return Err("--threads must be at most 1024".into());
        }
        if p.io_size == 0 {
            return Err("--io-size must be at least 1 byte".into());
        }
        if p.io_size > 64 * MIB {
            return Err("--io-size must be at most 64 MiB".into());
        }
        if p.file_size == 0 {
            return Err("--file-size must be at least 1 byte".into());
        }
        if p.read_pct > 100 {
            return Err("--read-pct must be between 0 and 100".into());
        }
        let needs_whole_blocks = matches!(
            self.workload,
            Workload::RandWrite
                | Workload::RandRead
                | Workload::Mixed
                | Workload::SeqRead
                | Workload::SkewRead
                | Workload::Oltp
        );
        if needs_whole_blocks && p.file_size < p.io_size {
            return Err(format!(
                "--file-size ({}) must be at least --io-size ({})",
                p.file_size, p.io_size
            ));
        }
        if self.devices == 0 || self.devices as usize > mnemofs::format::MAX_DEVICES {
            return Err(format!(
                "--devices must be between 1 and {}",
                mnemofs::format::MAX_DEVICES
            ));
        }
        if let Some(&n) = self
            .node_of_thread
            .iter()
            .find(|&&n| n as usize >= pm::MAX_NODES)
        {
            return Err(format!(
                "--node-of-thread: node {n} is not below {}",
                pm::MAX_NODES
            ));
        }
        if let Stop::Ops(0) = self.stop {
            return Err("--ops must be at least 1".into());
        }
        if let Stop::Duration(d) = self.stop {
            if d.is_zero() {
                return Err("--duration must be more than 0".into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_has_a_unique_name_and_defaults_that_validate() {
        let mut names: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 15);
        for &w in Workload::ALL {
            assert_eq!(Workload::from_name(w.name()), Some(w));
            let c = RunConfig::new(w);
            assert_eq!(c.validate(), Ok(()), "{}", w.name());
            assert!(!w.describe().is_empty());
        }
        assert_eq!(Workload::from_name("nope"), None);
        assert!(Workload::names().starts_with("dwom, drbm, drbl, dwal, randwrite"));
    }

    #[test]
    fn bad_parameters_are_named() {
        let mut c = RunConfig::new(Workload::RandRead);
        c.params.file_size = 1024;
        assert!(c.validate().unwrap_err().contains("--file-size"));
        let mut c = RunConfig::new(Workload::Mixed);
        c.params.read_pct = 101;
        assert!(c.validate().unwrap_err().contains("--read-pct"));
        let mut c = RunConfig::new(Workload::Dwom);
        c.threads = 0;
        assert!(c.validate().unwrap_err().contains("--threads"));
        c.threads = 1;
        c.stop = Stop::Ops(0);
        assert!(c.validate().unwrap_err().contains("--ops"));
    }

    #[test]
    fn warmup_defaults() {
        assert_eq!(
            Stop::Duration(Duration::from_secs(5)).default_warmup(),
            Stop::Duration(Duration::from_millis(500))
        );
        assert_eq!(
            Stop::Duration(Duration::from_secs(60)).default_warmup(),
            Stop::Duration(Duration::from_secs(1))
        );
        assert_eq!(Stop::Ops(1000).default_warmup(), Stop::Ops(100));
    }
}
