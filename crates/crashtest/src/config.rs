//! What to explore: the workload kind, the engine's modes for the traced runs, the
//! image's CPUs, and the exploration's limits; and the command that reproduces one
//! workload of a configuration.

use crate::crash;
use mnemofs::bugs::Bug;

/// Size of the in-memory images of one CPU.
pub const IMAGE_SIZE: u64 = 768 << 10;
/// Multi-writer workloads generated unless asked otherwise.
pub const DEFAULT_MULTI_WORKLOADS: usize = 60;

/// Which workloads to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Every single operation after the setup (`workload::seq1`).
    Seq1,
    /// Every ordered pair of seq-1 operations.
    Seq2,
    /// Seeded random operation sequences (`Config::random_workloads` of them).
    Random,
    /// 2–4 threads writing one shared file (`multi` module).
    Multi,
}

impl Kind {
    /// The name `--workload` takes.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Seq1 => "seq1",
            Kind::Seq2 => "seq2",
            Kind::Random => "random",
            Kind::Multi => "multi",
        }
    }
}

/// What to explore.
#[derive(Clone, Debug)]
pub struct Config {
    /// Which workloads.
    pub kind: Kind,
    /// Seed of random workloads, samples, schedules and random crash states.
    pub seed: u64,
    /// Stop after this many crash states (explored, before deduplication).
    pub max_states: Option<u64>,
    /// Run only the workload with this index.
    pub only: Option<usize>,
    /// Run a seeded random sample of this many workloads.
    pub sample: Option<usize>,
    /// Number of random workloads to generate (`Kind::Random`, `Kind::Multi`).
    pub random_workloads: usize,
    /// The deliberate bug to turn on (`mnemofs::bugs`), if any.
    pub bug: Option<Bug>,
    /// Check crashes inside recovery too.
    pub recovery_crashes: bool,
    /// Stop once this many violations were found.
    pub max_violations: Option<usize>,
    /// Exploring threads (workloads are independent).
    pub threads: usize,
    /// Lock mode of the traced run.
    pub lock: mnemofs::LockMode,
    /// Small-write mode of the traced run (LAWN and fine-log add sub-page writes to
    /// the setup and to seq-1/seq-2).
    pub small_write: mnemofs::SmallWriteMode,
    /// Model 16-byte atomic stores as two 8-byte stores (`crash::Tear16`).
    pub tear16: crash::Tear16,
    /// How the traced runs store LAWN descriptors (named: measuring the cheaper way
    /// at mount would make traces differ from run to run).
    pub desc_store: pm::Store16,
    /// CPUs of the traced images (per-CPU journals, allocators, inode tables, LAWN
    /// sub-zones); with more than one, each operation's thread is pinned to a host
    /// CPU that the engine maps to the image CPU the operation is assigned to.
    pub cpus: u32,
    /// Devices of the traced volume (1 or 2; two: 512 KiB and 256 KiB, placement
    /// `interleave`, so a file's data and its log entries land on different devices).
    pub devices: u32,
    /// Format the traced images with page-format LAWN descriptors (format version
    /// 6, as images of earlier builds have: a zone write fences its slots before
    /// its descriptor) instead of sum-format ones (version 7: one fence).
    pub page_descriptors: bool,
}

impl Config {
    /// Defaults for `kind`: seed 1, every workload, crashes inside recovery, the
    /// `inode` lock with page CoW, one exploring thread per CPU.
    pub fn new(kind: Kind) -> Config {
        Config {
            kind,
            seed: 1,
            max_states: None,
            only: None,
            sample: None,
            random_workloads: 200,
            bug: None,
            recovery_crashes: true,
            max_violations: None,
            lock: mnemofs::LockMode::Inode,
            small_write: mnemofs::SmallWriteMode::Cow,
            tear16: crash::Tear16::No,
            desc_store: pm::Store16::NonTemporal,
            cpus: 1,
            devices: 1,
            page_descriptors: false,
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
        }
    }
}

/// The command that explores workload `idx` of `cfg` alone.
pub(crate) fn reproduce(cfg: &Config, idx: usize) -> String {
    let mut s = format!(
        "mnemofs crashtest --workload {} --only {idx}",
        cfg.kind.name()
    );
    if matches!(cfg.kind, Kind::Random | Kind::Multi) {
        s += &format!(" --seed {}", cfg.seed);
    }
    if cfg.kind == Kind::Multi || cfg.lock != mnemofs::LockMode::Inode {
        s += &format!(" --lock {}", cfg.lock.name());
    }
    if cfg.small_write != mnemofs::SmallWriteMode::Cow {
        s += &format!(" --small-write {}", cfg.small_write.name());
    }
    match cfg.tear16 {
        crash::Tear16::No => {}
        crash::Tear16::LowFirst => s += " --tear-16 low-first",
        crash::Tear16::HighFirst => s += " --tear-16 high-first",
    }
    if cfg.small_write == mnemofs::SmallWriteMode::Lawn && cfg.desc_store == pm::Store16::Cached {
        s += " --desc-store cached";
    }
    if cfg.cpus != 1 {
        s += &format!(" --cpus {}", cfg.cpus);
    }
    if cfg.devices != 1 {
        s += &format!(" --devices {}", cfg.devices);
    }
    if cfg.page_descriptors {
        s += " --lawn-descriptors page";
    }
    if let Some(b) = &cfg.bug {
        if let Some(x) = mnemofs::bugs::ALL.iter().find(|x| x.1 == *b) {
            s += &format!(" --inject-bug {}", x.0);
        }
    }
    s
}
