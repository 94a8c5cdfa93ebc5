//! One in-process run: fresh image → mkfs → mount (preset, PM profile) → data set →
//! warm-up (not measured) → measured phase → unmount → image removed.
//!
//! [`run`] builds the local engine ([`Fs`]) and hands it to [`measure`], which knows
//! only the engine interface [`FileSystem`]: the data set, the threads, the timing
//! and the PM counters go through it, so another implementation (a cluster client)
//! is measured by the same code. What only the local mount can tell (LAWN descriptor
//! store, PM profile, mapping, flush instruction) comes in as [`EngineInfo`].
//!
//! Every thread times each of its operations with the monotonic clock (the end of
//! one operation is the start of the next, so the harness's own bookkeeping, a few
//! nanoseconds, is inside the figures). PM counters are read while every thread
//! waits at a barrier just before the measured phase and after all have finished, so
//! they cover exactly the measured operations.

use crate::config::{RunConfig, Stop};
use crate::error::{BenchError, BenchResultT};
use crate::result::{hostname, now_utc, BenchResult, SCHEMA};
use crate::stats::Histogram;
use crate::workloads::{image_size_for, prepare, Worker};
use crossbeam_utils::CachePadded;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mnemofs::{FileSystem, Fs, FsError, MkfsOptions};
use std::io::IsTerminal;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// A fresh image for one run; a file this run created is removed when dropped.
pub struct Image {
    pub path: PathBuf,
    remove: bool,
}

impl Drop for Image {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

static NEXT_IMAGE: AtomicU64 = AtomicU64::new(0);

/// Directory of default images: /dev/shm when present, else the temporary directory.
pub fn default_image_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Bytes available to an unprivileged writer in the file system holding `dir`.
fn available_bytes(dir: &Path) -> Option<u64> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statvfs is plain old data; zeroed is a valid value for it.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a valid out-pointer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Creates and formats a fresh image of `size` bytes at `at` (or a new file in
/// [`default_image_dir`]).
pub fn fresh_image(at: Option<&Path>, size: u64) -> BenchResultT<Image> {
    fresh_image_zoned(
        at,
        size,
        mnemofs::format::DEFAULT_ZONE_PERCENT,
        mnemofs::format::DEFAULT_SLOT_SIZE,
    )
}

/// Like `fresh_image`, with the LAWN zone's share of the image and slot size.
pub fn fresh_image_zoned(
    at: Option<&Path>,
    size: u64,
    zone_percent: u32,
    slot_size: u32,
) -> BenchResultT<Image> {
    let image = match at {
        Some(p) => match std::fs::metadata(p) {
            Ok(m) if m.file_type().is_block_device() || m.file_type().is_char_device() => Image {
                path: p.to_path_buf(),
                remove: false,
            },
            Ok(_) => {
                return Err(BenchError::msg(format!(
                    "{} exists; the benchmark creates a fresh image there and will not \
                     overwrite a file (remove it, or name a new path)",
                    p.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Image {
                path: p.to_path_buf(),
                remove: true,
            },
            Err(e) => return Err(BenchError::io(p, e)),
        },
        None => {
            let n = NEXT_IMAGE.fetch_add(1, Ordering::Relaxed);
            Image {
                path: default_image_dir()
                    .join(format!("mnemofs-bench-{}-{n}.img", std::process::id())),
                remove: true,
            }
        }
    };
    if image.remove {
        let dir = image
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if let Some(avail) = available_bytes(dir) {
            if avail < size {
                return Err(BenchError::msg(format!(
                    "{}: {} MiB free, the image needs {} MiB (use a smaller --file-size, or \
                     --image on a larger file system)",
                    dir.display(),
                    avail >> 20,
                    size >> 20
                )));
            }
        }
    }
    let opts = MkfsOptions {
        size,
        cpus: 0,
        inodes: 0,
        force: true,
        zone_percent,
        slot_size,
    };
    mnemofs::mkfs(&image.path, &opts)
        .map_err(|e| BenchError::fs(format!("mkfs {}", image.path.display()), e))?;
    Ok(image)
}

/// What one thread measured.
struct ThreadOut {
    hist: Histogram,
    ops: u64,
    read: u64,
    written: u64,
    end: Instant,
    /// CPU time of the thread in the measured phase.
    cpu_ns: u64,
    err: Option<FsError>,
}

/// CPU time the calling thread has used (ns).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the provided, valid timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Share of thread `t` of `n` operations over `threads` threads.
fn share(n: u64, t: usize, threads: usize) -> u64 {
    let th = threads as u64;
    n / th + u64::from((t as u64) < n % th)
}

/// Runs `stop` worth of operations. `on_op` sees (latency ns, outcome) of each.
/// Operations are timed with the time-stamp counter ([`pm::SpinClock::ticks`]), as
/// fio times its I/Os by default: a clock read costs ~55 ns on this VM, a large share
/// of a sub-microsecond write, and one read per operation is all the loop takes.
fn run_phase<E: FileSystem>(
    w: &mut dyn Worker<E>,
    fs: &E,
    stop: Stop,
    quota: u64,
    abort: &AtomicBool,
    mut on_op: impl FnMut(u64, crate::workloads::OpOutcome),
) -> Result<(), FsError> {
    let clock = pm::SpinClock::get();
    let start = clock.ticks();
    let deadline = match stop {
        Stop::Duration(d) => {
            Some(start.saturating_add(clock.ns_to_ticks(d.as_nanos().min(u64::MAX as u128) as u64)))
        }
        Stop::Ops(_) => None,
    };
    let mut s = start;
    let mut done = 0u64;
    loop {
        match deadline {
            Some(d) if s >= d => break,
            None if done >= quota => break,
            _ => {}
        }
        if abort.load(Ordering::Relaxed) {
            break;
        }
        let r = w.op(fs);
        let e = clock.ticks();
        match r {
            Ok(o) => on_op(clock.ticks_to_ns(e.saturating_sub(s)), o),
            Err(err) => {
                abort.store(true, Ordering::Relaxed);
                return Err(err);
            }
        }
        done += 1;
        s = e;
    }
    Ok(())
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// Runs one benchmark as `cfg` says.
pub fn run(cfg: &RunConfig) -> BenchResultT<BenchResult> {
    cfg.validate().map_err(BenchError::Msg)?;
    let size = cfg
        .image_size
        .unwrap_or_else(|| image_size_for(cfg.workload, &cfg.params, cfg.threads));
    let image = fresh_image_zoned(cfg.image.as_deref(), size, cfg.zone_percent, cfg.slot_size)?;
    let fs = mnemofs::mount(&image.path, &cfg.mount)
        .map_err(|e| BenchError::fs(format!("mount {}", image.path.display()), e))?;
    let info = EngineInfo::of(&fs);
    let label = image.path.display().to_string();
    let measured = measure(cfg, &fs, &info, &label, size);
    let unmounted = fs
        .unmount()
        .map_err(|e| BenchError::fs(format!("unmount {}", image.path.display()), e));
    let r = measured?;
    unmounted?;
    Ok(r)
}

/// What a result reports about the engine beyond what [`FileSystem`] offers: facts
/// of the local engine's mount (an implementation without them passes
/// `EngineInfo::default()`: empty strings).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineInfo {
    /// How LAWN descriptors are stored (`FsStats::lawn_desc_store`).
    pub lawn_desc_store: String,
    /// Name of the PM latency profile charged.
    pub pm_profile: String,
    /// How the image is mapped (`Debug` of `pm::MapMode`).
    pub map_mode: String,
    /// The cache-line write-back instruction.
    pub flush_instruction: String,
}

impl EngineInfo {
    /// The facts of a mounted local engine.
    pub fn of(fs: &Fs) -> EngineInfo {
        EngineInfo {
            lawn_desc_store: fs.stats().lawn_desc_store,
            pm_profile: fs.pm_profile().name.to_string(),
            map_mode: format!("{:?}", fs.map_mode()),
            flush_instruction: fs.flush_kind().name().to_string(),
        }
    }
}

/// Runs `cfg`'s workload (data set, warm-up, measured phase; `cfg.mount`, `image*`,
/// `zone_percent` and `slot_size` are not used here) on the mounted engine `fs` and
/// reports it; `image` and `image_size` are only reported. The engine is left
/// mounted, holding the data set.
pub fn measure<E: FileSystem + 'static>(
    cfg: &RunConfig,
    fs: &E,
    info: &EngineInfo,
    image: &str,
    image_size: u64,
) -> BenchResultT<BenchResult> {
    cfg.validate().map_err(BenchError::Msg)?;
    let threads = cfg.threads;
    let workers = prepare(cfg.workload, fs, &cfg.params, threads, cfg.seed)?;
    let barrier = Barrier::new(threads + 1);
    let abort = AtomicBool::new(false);
    let progress: Vec<CachePadded<AtomicU64>> = (0..threads)
        .map(|_| CachePadded::new(AtomicU64::new(0)))
        .collect();

    let (outs, start, c0) = std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .into_iter()
            .enumerate()
            .map(|(t, mut w)| {
                let (barrier, abort, slot) = (&barrier, &abort, &progress[t]);
                let warm_quota = match cfg.warmup {
                    Stop::Ops(n) => share(n, t, threads),
                    Stop::Duration(_) => 0,
                };
                let quota = match cfg.stop {
                    Stop::Ops(n) => share(n, t, threads),
                    Stop::Duration(_) => 0,
                };
                s.spawn(move || {
                    let warm = run_phase(&mut *w, fs, cfg.warmup, warm_quota, abort, |_, _| {});
                    barrier.wait();
                    barrier.wait();
                    let cpu0 = thread_cpu_ns();
                    let mut out = ThreadOut {
                        hist: Histogram::new(),
                        ops: 0,
                        read: 0,
                        written: 0,
                        end: Instant::now(),
                        cpu_ns: 0,
                        err: warm.err(),
                    };
                    if out.err.is_none() {
                        let r = run_phase(&mut *w, fs, cfg.stop, quota, abort, |lat, o| {
                            out.hist.record(lat);
                            out.ops += 1;
                            out.read += o.read;
                            out.written += o.written;
                            slot.store(out.ops, Ordering::Relaxed);
                        });
                        out.err = r.err();
                    }
                    out.end = Instant::now();
                    out.cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
                    out
                })
            })
            .collect();
        barrier.wait();
        let c0 = fs.pm_counters();
        let start = Instant::now();
        barrier.wait();
        let bar = progress_bar(cfg);
        let mut shown = false;
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(50));
            if let Some(bar) = &bar {
                let el = start.elapsed();
                if !shown && el >= Duration::from_secs(2) {
                    bar.set_draw_target(ProgressDrawTarget::stderr());
                    shown = true;
                }
                let ops: u64 = progress.iter().map(|p| p.load(Ordering::Relaxed)).sum();
                match cfg.stop {
                    Stop::Duration(_) => bar.set_position(el.as_millis() as u64),
                    Stop::Ops(_) => bar.set_position(ops),
                }
                bar.set_message(format!(
                    "{ops} ops, {:.0} ops/s",
                    ops as f64 / el.as_secs_f64().max(1e-9)
                ));
            }
        }
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        let outs: Vec<Option<ThreadOut>> = handles.into_iter().map(|h| h.join().ok()).collect();
        (outs, start, c0)
    });
    let c = fs.pm_counters().since(&c0);

    let mut hist = Histogram::new();
    let (mut ops, mut read, mut written, mut cpu) = (0u64, 0u64, 0u64, 0u64);
    let mut end = start;
    for (t, out) in outs.into_iter().enumerate() {
        let out = out.ok_or_else(|| BenchError::msg(format!("benchmark thread {t} panicked")))?;
        if let Some(e) = out.err {
            return Err(BenchError::fs(
                format!("{} thread {t}", cfg.workload.name()),
                e,
            ));
        }
        hist.merge(&out.hist);
        ops += out.ops;
        read += out.read;
        written += out.written;
        cpu += out.cpu_ns;
        end = end.max(out.end);
    }
    let secs = end.duration_since(start).as_secs_f64().max(1e-9);
    let per_op = |x: u64| if ops == 0 { 0.0 } else { x as f64 / ops as f64 };
    let m = &cfg.mount;
    Ok(BenchResult {
        schema: SCHEMA,
        workload: cfg.workload.name().to_string(),
        family: cfg.workload.family().to_string(),
        preset: cfg.preset.clone(),
        lock: m.lock.name().to_string(),
        small_write: m.small_write.name().to_string(),
        lawn_desc_store: info.lawn_desc_store.clone(),
        pm_profile: info.pm_profile.clone(),
        threads,
        io_size: cfg.params.io_size,
        file_size: cfg.params.file_size,
        read_pct: cfg.params.read_pct,
        files: cfg.params.files,
        stop: match cfg.stop {
            Stop::Duration(_) => "duration".to_string(),
            Stop::Ops(_) => "ops".to_string(),
        },
        warmup_s: match cfg.warmup {
            Stop::Duration(d) => d.as_secs_f64(),
            Stop::Ops(_) => 0.0,
        },
        duration_s: secs,
        cpu_s: cpu as f64 / 1e9,
        cpu_ns_per_op: per_op(cpu),
        ops,
        ops_per_sec: ops as f64 / secs,
        bytes_per_sec: (read + written) as f64 / secs,
        user_bytes_read: read,
        user_bytes_written: written,
        p50_ns: hist.percentile(50.0),
        p99_ns: hist.percentile(99.0),
        p999_ns: hist.percentile(99.9),
        mean_ns: hist.mean(),
        max_ns: hist.max(),
        pm_bytes_written: c.bytes_written,
        pm_nt_bytes_written: c.nt_bytes_written,
        write_amplification: (written > 0).then(|| c.bytes_written as f64 / written as f64),
        flushes: c.flushes,
        fences: c.fences,
        flushes_per_op: per_op(c.flushes),
        fences_per_op: per_op(c.fences),
        pm_modeled_delay_ns: c.modeled_delay_ns,
        pm_modeled_delay_per_op_ns: per_op(c.modeled_delay_ns),
        image: image.to_string(),
        image_size,
        map_mode: info.map_mode.clone(),
        flush_instruction: info.flush_instruction.clone(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        host: hostname(),
        date: now_utc(),
        version: env!("CARGO_PKG_VERSION"),
        seed: cfg.seed,
        round: cfg.round,
    })
}

/// A hidden bar that the caller shows after 2 s, when a terminal is there.
fn progress_bar(cfg: &RunConfig) -> Option<ProgressBar> {
    if !cfg.progress || !std::io::stderr().is_terminal() {
        return None;
    }
    let label = format!("{} {} {}t", cfg.workload.name(), cfg.preset, cfg.threads);
    let bar = match cfg.stop {
        Stop::Duration(d) => {
            let b = ProgressBar::with_draw_target(
                Some(d.as_millis() as u64),
                ProgressDrawTarget::hidden(),
            );
            b.set_style(style("{prefix} [{bar:30}] {elapsed}/{duration} {msg}"));
            b
        }
        Stop::Ops(n) => {
            let b = ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::hidden());
            b.set_style(style("{prefix} [{bar:30}] {pos}/{len} ops {msg}"));
            b
        }
    };
    bar.set_prefix(label);
    Some(bar)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up() {
        for n in [0u64, 1, 7, 100, 1001] {
            for t in 1..6 {
                let total: u64 = (0..t).map(|i| share(n, i, t)).sum();
                assert_eq!(total, n);
            }
        }
    }

    #[test]
    fn an_existing_file_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x");
        std::fs::write(&p, b"keep").unwrap();
        let e = fresh_image(Some(&p), 64 << 20).err().unwrap();
        assert!(e.to_string().contains("will not overwrite"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), b"keep");
    }

    #[test]
    fn a_fresh_image_is_removed_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("img");
        let img = fresh_image(Some(&p), 64 << 20).unwrap();
        assert!(p.exists());
        drop(img);
        assert!(!p.exists());
    }
}
