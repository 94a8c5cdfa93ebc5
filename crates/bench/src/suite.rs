//! `bench suite`: every workload × every preset that exists, interleaved over rounds,
//! into a results folder: `results.jsonl` (one line per run), `summary.txt` (medians
//! and ratios per workload) and one `<workload>.svg` per workload.

use crate::compare::{plot, run_compare, summary_table, CompareConfig, Variant};
use crate::config::{RunConfig, Stop, Workload};
use crate::error::{BenchError, BenchResultT};
use mnemofs::{MountOptions, PRESETS};
use pm::PmProfile;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What the suite runs.
#[derive(Clone, Debug)]
pub struct SuiteConfig {
    /// Short runs (1 s, 3 rounds) and smaller data sets.
    pub quick: bool,
    pub out: PathBuf,
    pub threads: Vec<usize>,
    pub pm_profile: PmProfile,
    pub rounds: u32,
    pub progress: bool,
}

impl SuiteConfig {
    /// Defaults: 1 and all CPUs' threads, 3 rounds; quick: 1 s runs, else 5 s.
    pub fn new(quick: bool, out: PathBuf) -> SuiteConfig {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut threads = vec![1];
        if cpus > 1 {
            threads.push(cpus);
        }
        SuiteConfig {
            quick,
            out,
            threads,
            pm_profile: PmProfile::DRAM,
            rounds: 3,
            progress: false,
        }
    }
}

/// The run configuration the suite uses for `w`.
pub fn suite_run_config(w: Workload, quick: bool) -> RunConfig {
    let mut rc = RunConfig::new(w);
    if quick {
        rc.stop = Stop::Duration(Duration::from_secs(1));
        rc.warmup = Stop::Duration(Duration::from_millis(200));
        let p = &mut rc.params;
        match w {
            Workload::RandWrite
            | Workload::RandRead
            | Workload::Mixed
            | Workload::SeqRead
            | Workload::SkewRead
            | Workload::Dwal => p.file_size = 16 << 20,
            Workload::FileServer | Workload::VarMail | Workload::WebProxy | Workload::WebServer => {
                p.files = 200
            }
            Workload::Oltp => p.file_size = 4 << 20,
            Workload::SmallFiles => p.files = 256,
            Workload::Dwom | Workload::Drbm | Workload::Drbl => {}
        }
    }
    rc
}

/// Every existing preset under `profile`.
pub fn all_presets(profile: PmProfile) -> Vec<Variant> {
    PRESETS
        .iter()
        .map(|p| {
            let mut mount = MountOptions::from_preset(p);
            mount.pm_profile = profile;
            Variant {
                label: format!("{}/{}", p.name, profile.name),
                preset: p.name.to_string(),
                mount,
                image_pages: None,
            }
        })
        .collect()
}

fn io_err(p: &Path) -> impl FnOnce(std::io::Error) -> BenchError + '_ {
    move |e| BenchError::io(p, e)
}

/// Runs the suite; `note` gets one line per finished run and per workload.
/// Returns the files written.
pub fn run_suite(cfg: &SuiteConfig, mut note: impl FnMut(&str)) -> BenchResultT<Vec<PathBuf>> {
    std::fs::create_dir_all(&cfg.out).map_err(io_err(&cfg.out))?;
    let jsonl = cfg.out.join("results.jsonl");
    let summary = cfg.out.join("summary.txt");
    let mut lines = std::fs::File::create(&jsonl).map_err(io_err(&jsonl))?;
    let mut sum = std::fs::File::create(&summary).map_err(io_err(&summary))?;
    let mut files = vec![jsonl.clone(), summary.clone()];
    let variants = all_presets(cfg.pm_profile);
    let labels: Vec<String> = variants.iter().map(|v| v.label.clone()).collect();
    let t0 = Instant::now();
    for &w in Workload::ALL {
        let mut base = suite_run_config(w, cfg.quick);
        base.progress = cfg.progress;
        let cc = CompareConfig {
            base,
            variants: variants.clone(),
            threads: cfg.threads.clone(),
            rounds: cfg.rounds,
        };
        let mut write_err = None;
        let (_, s) = run_compare(&cc, |r| {
            if let Err(e) = writeln!(lines, "{}", r.to_json_line()) {
                write_err.get_or_insert(e);
            }
            note(&format!(
                "[{:>4.0}s] {} {} {}t round {}: {:.0} ops/s",
                t0.elapsed().as_secs_f64(),
                r.workload,
                r.preset,
                r.threads,
                r.round.unwrap_or(0),
                r.ops_per_sec
            ));
        })?;
        if let Some(e) = write_err {
            return Err(BenchError::io(&jsonl, e));
        }
        let table = summary_table(w.name(), &s);
        writeln!(sum, "{table}").map_err(io_err(&summary))?;
        let svg = cfg.out.join(format!("{}.svg", w.name()));
        let title = format!(
            "{} ({}), pm profile {}",
            w.name(),
            w.family(),
            cfg.pm_profile.name
        );
        plot(&svg, &title, &labels, &s)?;
        files.push(svg);
        note(&table);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_configs_are_valid_and_smaller() {
        for &w in Workload::ALL {
            let q = suite_run_config(w, true);
            let f = suite_run_config(w, false);
            assert_eq!(q.validate(), Ok(()));
            assert_eq!(f.validate(), Ok(()));
            assert!(q.params.file_size <= f.params.file_size);
            assert!(q.params.files <= f.params.files);
        }
        let v = all_presets(PmProfile::OPTANE);
        assert_eq!(v.len(), PRESETS.len());
        assert_eq!(v[0].label, "nova/optane");
        assert_eq!(v[0].mount.pm_profile, PmProfile::OPTANE);
    }
}
