//! The result of one run: one JSON object (a line of JSON Lines) and a table row.

use serde::Serialize;

/// Version of the result format (bumped when a field changes meaning).
pub const SCHEMA: &str = "mnemofs-bench/1";

/// One run. Counter fields cover the measured phase only (warm-up and setup are
/// excluded); they are exact. Times depend on the machine.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct BenchResult {
    pub schema: &'static str,
    /// The `bench compare` variant this run belongs to (its label); empty for a
    /// single `bench run`.
    pub variant: String,
    pub workload: String,
    pub family: String,
    /// Preset name, or `preset+lock=L,small-write=W` when modes were overridden.
    pub preset: String,
    pub lock: String,
    /// The small-write mode the mount ran (`auto` resolved).
    pub small_write: String,
    /// The read cache mode the mount ran (`auto` resolved: `off` or `rcache`).
    pub read_cache: String,
    /// The medium the mount found and how (`mnemofs::medium`), which decided the
    /// `auto` modes; empty for an engine that does not say.
    pub medium: String,
    /// How LAWN descriptors were stored (`pm::Store16::name`: measured at mount
    /// unless named).
    pub lawn_desc_store: String,
    pub pm_profile: String,
    pub threads: usize,
    pub io_size: u64,
    pub file_size: u64,
    pub read_pct: u32,
    pub files: u64,
    /// `duration` or `ops`: what ended the measured phase.
    pub stop: String,
    pub warmup_s: f64,
    pub duration_s: f64,
    /// CPU time the benchmark threads used in the measured phase (all threads).
    /// On a busy machine it is steadier than wall time: a thread that waits for a
    /// core is not charged.
    pub cpu_s: f64,
    pub cpu_ns_per_op: f64,
    pub ops: u64,
    pub ops_per_sec: f64,
    /// User bytes read plus written per second.
    pub bytes_per_sec: f64,
    pub user_bytes_read: u64,
    pub user_bytes_written: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub mean_ns: f64,
    pub max_ns: u64,
    /// Bytes stored to PM (cached and non-temporal).
    pub pm_bytes_written: u64,
    pub pm_nt_bytes_written: u64,
    /// `pm_bytes_written / user_bytes_written`; null when nothing was written.
    pub write_amplification: Option<f64>,
    pub flushes: u64,
    pub fences: u64,
    pub flushes_per_op: f64,
    pub fences_per_op: f64,
    /// Per-file lock acquisitions per operation (`mnemofs::contention`; all
    /// threads of the process during the measured phase).
    pub locks_per_op: f64,
    /// Of those, acquisitions that found the lock held, per operation.
    pub waits_per_op: f64,
    /// Atomic read-modify-writes on lines shared between threads, per operation.
    pub rmws_per_op: f64,
    /// Busy-wait the PM profile added (ns, all threads).
    pub pm_modeled_delay_ns: u64,
    pub pm_modeled_delay_per_op_ns: f64,
    /// Busy-wait of fences behind other threads' write-backs on a node's shared
    /// write channel (ns, all threads; not in `pm_modeled_delay_ns`).
    pub pm_modeled_queue_ns: u64,
    pub pm_modeled_queue_per_op_ns: f64,
    /// What each modeled busy-wait is shortened by, its own measured average
    /// overshoot (ns; `pm::SpinClock::spin_excess_ns`, docs/BENCHMARKS.md "PM latency
    /// profiles").
    pub spin_excess_ns: u64,
    pub image: String,
    pub image_size: u64,
    /// Where the image lived: `private tmpfs huge=within_size` (or `huge=never`),
    /// `/dev/shm (tmpfs as mounted)`, `file (given)`, `device (given)`.
    pub image_fs: String,
    /// Page size asked for (`auto`, `2m`, `4k`; `RunConfig::image_pages`).
    pub image_pages: String,
    /// Every page of the image was mapped in before the data set (no first-touch
    /// faults in the measured phase).
    pub prefaulted: bool,
    pub map_mode: String,
    /// Page size mapping the image, measured from /proc/self/smaps after the
    /// measured phase: `2M`, `4K` or `unknown`.
    pub map_pages: String,
    /// Bytes of the image mapped by 2 MiB (PMD) entries, and resident, then.
    pub map_pmd_bytes: u64,
    pub map_resident_bytes: u64,
    /// The same in words, e.g. `2 MiB pages (130 of 130 MiB resident PMD-mapped)`.
    pub map_summary: String,
    pub flush_instruction: String,
    pub cpus: usize,
    pub host: String,
    /// UTC, ISO 8601.
    pub date: String,
    pub version: &'static str,
    pub seed: u64,
    pub round: Option<u32>,
    /// Devices of the volume, and where placement put new blocks.
    pub devices: u32,
    pub placement: String,
    /// PM bytes written by threads of node `i` (row) to devices of node `j`
    /// (column), exact (`pm` counters), over the nodes of the topology.
    pub node_bytes: Vec<Vec<u64>>,
}

impl BenchResult {
    /// Share of the PM bytes written that went to a device of the writer's node
    /// (`None` when nothing was written).
    pub fn local_share(&self) -> Option<f64> {
        let total: u64 = self.node_bytes.iter().flatten().sum();
        let local: u64 = self
            .node_bytes
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.get(i))
            .sum();
        (total > 0).then(|| local as f64 / total as f64)
    }
}

impl BenchResult {
    /// The result as one line of JSON.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// `x` with at most 3 significant digits and a unit suffix (k, M, G).
pub fn si(x: f64) -> String {
    let (v, u) = if x >= 1e9 {
        (x / 1e9, "G")
    } else if x >= 1e6 {
        (x / 1e6, "M")
    } else if x >= 1e3 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    if v >= 100.0 || u.is_empty() && v.fract() == 0.0 {
        format!("{v:.0}{u}")
    } else if v >= 10.0 {
        format!("{v:.1}{u}")
    } else {
        format!("{v:.2}{u}")
    }
}

/// Nanoseconds as `850ns`, `1.25us`, `12.3us`, `4.56ms`, `1.20s`.
pub fn ns(x: u64) -> String {
    let f = x as f64;
    if x < 1_000 {
        format!("{x}ns")
    } else if x < 10_000 {
        format!("{:.2}us", f / 1e3)
    } else if x < 1_000_000 {
        format!("{:.1}us", f / 1e3)
    } else if x < 1_000_000_000 {
        format!("{:.2}ms", f / 1e6)
    } else {
        format!("{:.2}s", f / 1e9)
    }
}

/// Bytes as `4K`, `128B`, `1.5M` (binary units, for sizes of I/O).
pub fn size(b: u64) -> String {
    const K: u64 = 1 << 10;
    const M: u64 = 1 << 20;
    const G: u64 = 1 << 30;
    match b {
        b if b >= G && b % G == 0 => format!("{}G", b / G),
        b if b >= M && b % M == 0 => format!("{}M", b / M),
        b if b >= K && b % K == 0 => format!("{}K", b / K),
        b => format!("{b}B"),
    }
}

/// Renders rows as an aligned text table (first row: header); the first column is
/// left-aligned, the others right-aligned.
pub fn render(rows: &[Vec<String>]) -> String {
    render_left(rows, &[0])
}

/// [`render`] with the columns `left` left-aligned.
pub fn render_left(rows: &[Vec<String>], left: &[usize]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut width = vec![0; cols];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for (n, r) in rows.iter().enumerate() {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if left.contains(&i) {
                    format!("{c:<w$}", w = width[i])
                } else {
                    format!("{c:>w$}", w = width[i])
                }
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
        if n == 0 {
            let total: usize = width.iter().sum::<usize>() + 2 * cols.saturating_sub(1);
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    out
}

/// Header of [`row`].
pub fn header() -> Vec<String> {
    [
        "workload", "preset", "profile", "thr", "io", "ops", "ops/s", "MB/s", "p50", "p99", "WA",
        "flush/op", "fence/op", "lock/op", "wait/op", "rmw/op", "pages", "prefault",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// A table row of one result.
pub fn row(r: &BenchResult) -> Vec<String> {
    vec![
        r.workload.clone(),
        r.preset.clone(),
        r.pm_profile.clone(),
        r.threads.to_string(),
        size(r.io_size),
        r.ops.to_string(),
        si(r.ops_per_sec),
        format!("{:.1}", r.bytes_per_sec / 1e6),
        ns(r.p50_ns),
        ns(r.p99_ns),
        r.write_amplification
            .map_or("-".to_string(), |w| format!("{w:.2}")),
        format!("{:.2}", r.flushes_per_op),
        format!("{:.2}", r.fences_per_op),
        format!("{:.2}", r.locks_per_op),
        format!("{:.2}", r.waits_per_op),
        format!("{:.2}", r.rmws_per_op),
        r.map_pages.clone(),
        (if r.prefaulted { "yes" } else { "no" }).to_string(),
    ]
}

/// The table of some results.
pub fn table(results: &[BenchResult]) -> String {
    let mut rows = vec![header()];
    rows.extend(results.iter().map(row));
    render(&rows)
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    utc(secs)
}

/// Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian calendar).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// This machine's host name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_700_000_000), "2023-11-14T22:13:20Z");
        assert!(now_utc().ends_with('Z'));
    }

    #[test]
    fn units() {
        assert_eq!(si(950.0), "950");
        assert_eq!(si(1234.0), "1.23k");
        assert_eq!(si(45_600.0), "45.6k");
        assert_eq!(si(2_500_000.0), "2.50M");
        assert_eq!(ns(850), "850ns");
        assert_eq!(ns(1_250), "1.25us");
        assert_eq!(ns(12_345), "12.3us");
        assert_eq!(ns(4_560_000), "4.56ms");
        assert_eq!(size(4096), "4K");
        assert_eq!(size(128), "128B");
        assert_eq!(size(64 << 20), "64M");
    }

    #[test]
    fn tables_align() {
        let t = render(&[
            vec!["a".into(), "bb".into()],
            vec!["ccc".into(), "d".into()],
        ]);
        assert_eq!(t, "a    bb\n-------\nccc   d\n");
    }
}
