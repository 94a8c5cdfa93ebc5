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

use crate::config::{ImagePages, RunConfig, Stop};
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

/// A fresh image for one run; a file this run created is removed when dropped,
/// and a private tmpfs made for it is unmounted.
pub struct Image {
    pub path: PathBuf,
    remove: bool,
    /// Where the image lives, as results state it ([`BenchResult::image_fs`]).
    pub place: String,
    /// A private tmpfs mounted for this image, still attached.
    tmpfs: Option<PathBuf>,
    /// The volume's other devices (files beside `path`), with their nodes.
    pub more: Vec<PathBuf>,
    /// The node of each device, `path` first.
    pub nodes: Vec<u32>,
}

impl Image {
    /// The devices of the volume, `path` first, each with its node.
    pub fn specs(&self) -> Vec<mnemofs::DeviceSpec> {
        std::iter::once(&self.path)
            .chain(&self.more)
            .enumerate()
            .map(|(i, p)| mnemofs::DeviceSpec {
                path: p.clone(),
                node: self.nodes.get(i).copied(),
            })
            .collect()
    }
}

impl Image {
    /// Detaches the image's private tmpfs (if any) from the directory tree once the
    /// engine holds the image open and mapped: the tmpfs lives on while it is
    /// mapped and disappears with the mapping, and a benchmark killed later leaves
    /// no mount behind. The path no longer names the image afterwards.
    pub fn detach(&mut self) {
        if let Some(dir) = self.tmpfs.take() {
            unmount_tmpfs(&dir);
            self.remove = false;
        }
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_file(&self.path);
            for p in &self.more {
                let _ = std::fs::remove_file(p);
            }
        }
        if let Some(dir) = self.tmpfs.take() {
            unmount_tmpfs(&dir);
        }
    }
}

/// Lazily unmounts the private tmpfs at `dir` and removes the directory.
fn unmount_tmpfs(dir: &Path) {
    if let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) {
        // SAFETY: `c` is a NUL-terminated path.
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    }
    let _ = std::fs::remove_dir(dir);
}

static NEXT_IMAGE: AtomicU64 = AtomicU64::new(0);

/// Directory of default images: `MNEMOFS_SCRATCH`, else /dev/shm when present, else
/// the temporary directory ([`pm::scratch_dir`]).
pub fn default_image_dir() -> PathBuf {
    pm::scratch_dir()
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

/// `MemAvailable` of /proc/meminfo in bytes.
fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}

/// Mounts a private tmpfs (`huge=` `huge`) on a new directory of the temporary
/// directory, sized for an image of `size` bytes; the directory, or why not.
fn mount_private_tmpfs(size: u64, huge: &str) -> Result<PathBuf, String> {
    if let Some(avail) = mem_available() {
        if avail < size {
            return Err(format!(
                "{} MiB of memory available, the image needs {} MiB",
                avail >> 20,
                size >> 20
            ));
        }
    }
    let n = NEXT_IMAGE.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("mnemofs-bench-{}-{n}.tmpfs", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // Room for the image rounded up to 2 MiB, and one spare huge page.
    let bytes = size
        .div_ceil(2 << 20)
        .saturating_add(1)
        .saturating_mul(2 << 20);
    let data = format!("size={bytes},huge={huge},mode=0700");
    let cstr = |t: &str| std::ffi::CString::new(t).map_err(|_| "a NUL byte in a path".to_string());
    let target = cstr(&dir.to_string_lossy())?;
    let (fstype, cdata) = (cstr("tmpfs")?, cstr(&data)?);
    // SAFETY: every pointer is a NUL-terminated string that outlives the call.
    let rc = unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            cdata.as_ptr().cast(),
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        let _ = std::fs::remove_dir(&dir);
        return Err(format!("mount -t tmpfs -o {data}: {e}"));
    }
    Ok(dir)
}

/// Creates and formats a fresh image of `size` bytes at `at` (or a new file in
/// [`default_image_dir`]).
pub fn fresh_image(at: Option<&Path>, size: u64) -> BenchResultT<Image> {
    fresh_image_zoned(
        at,
        size,
        mnemofs::format::DEFAULT_ZONE_PERCENT,
        mnemofs::format::DEFAULT_SLOT_SIZE,
        ImagePages::Small,
    )
}

/// Like `fresh_image`, with the LAWN zone's share of the image and slot size, and
/// (for a default image, `at` `None`) the page size asked for: [`ImagePages::Huge`]
/// (and `Auto` where it can) puts the image on a private tmpfs mounted
/// `huge=within_size`, `Small` on one mounted `huge=never` (where this process may
/// mount, else on [`default_image_dir`]).
pub fn fresh_image_zoned(
    at: Option<&Path>,
    size: u64,
    zone_percent: u32,
    slot_size: u32,
    pages: ImagePages,
) -> BenchResultT<Image> {
    fresh_volume(at, size, zone_percent, slot_size, pages, &[0])
}

/// Like `fresh_image_zoned`, a volume of one device per entry of `nodes` (each
/// `size` bytes, on that NUMA node): the first at `at` (or a new default image),
/// the others beside it (`NAME.dev1`, …; a device given at `at` is the first and
/// only device there can be).
pub fn fresh_volume(
    at: Option<&Path>,
    size: u64,
    zone_percent: u32,
    slot_size: u32,
    pages: ImagePages,
    nodes: &[u32],
) -> BenchResultT<Image> {
    let devices = nodes.len().max(1) as u64;
    let total = size.saturating_mul(devices);
    let mut image = match at {
        Some(p) => match std::fs::metadata(p) {
            Ok(m) if m.file_type().is_block_device() || m.file_type().is_char_device() => Image {
                path: p.to_path_buf(),
                remove: false,
                place: "device (given)".to_string(),
                tmpfs: None,
                more: Vec::new(),
                nodes: Vec::new(),
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
                place: "file (given)".to_string(),
                tmpfs: None,
                more: Vec::new(),
                nodes: Vec::new(),
            },
            Err(e) => return Err(BenchError::io(p, e)),
        },
        None => {
            let huge = match pages {
                ImagePages::Auto | ImagePages::Huge => "within_size",
                ImagePages::Small => "never",
            };
            let (dir, place, tmpfs) = match mount_private_tmpfs(total, huge) {
                Ok(d) => (d.clone(), format!("private tmpfs huge={huge}"), Some(d)),
                Err(why) if pages == ImagePages::Huge => {
                    return Err(BenchError::msg(format!(
                        "--image-pages 2m needs a private tmpfs with huge pages (as root): {why}"
                    )))
                }
                Err(_) => {
                    let d = default_image_dir();
                    let place = format!("{} (tmpfs as mounted)", d.display());
                    (d, place, None)
                }
            };
            let n = NEXT_IMAGE.fetch_add(1, Ordering::Relaxed);
            Image {
                path: dir.join(format!("mnemofs-bench-{}-{n}.img", std::process::id())),
                remove: true,
                place,
                tmpfs,
                more: Vec::new(),
                nodes: Vec::new(),
            }
        }
    };
    if image.remove && image.tmpfs.is_none() {
        let dir = image
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if let Some(avail) = available_bytes(dir) {
            if avail < total {
                return Err(BenchError::msg(format!(
                    "{}: {} MiB free, the image needs {} MiB (use a smaller --file-size, or \
                     --image on a larger file system)",
                    dir.display(),
                    avail >> 20,
                    total >> 20
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
        label: Vec::new(),
    };
    if nodes.len() > 1 && image.place.starts_with("device") {
        return Err(BenchError::msg(
            "--devices with --image on a device: give one device, or let the benchmark \
             create image files",
        ));
    }
    image.more = (1..nodes.len())
        .map(|i| {
            let mut p = image.path.clone().into_os_string();
            p.push(format!(".dev{i}"));
            PathBuf::from(p)
        })
        .collect();
    if nodes.len() > 1 {
        image.nodes = nodes.to_vec();
    }
    mnemofs::mkfs_devices(&image.specs(), &opts)
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
    // Device `i` on node `i` modulo the topology's nodes; the data set's size is
    // each device's (every device could hold it all, as placement may put it on one).
    let topo_nodes = topology_nodes(cfg);
    let dev_nodes: Vec<u32> = (0..cfg.devices.max(1) as usize)
        .map(|i| topo_nodes[i % topo_nodes.len()])
        .collect();
    let given = cfg
        .image
        .as_deref()
        .filter(|p| p.to_string_lossy().contains([',', '@']));
    let mut image = match given {
        // A device list (`--image a.img,b.img@1`): the volume mkfs and mount take.
        Some(list) => given_volume(list, size, cfg, &topo_nodes)?,
        None => fresh_volume(
            cfg.image.as_deref(),
            size,
            cfg.zone_percent,
            cfg.slot_size,
            cfg.image_pages,
            &dev_nodes,
        )?,
    };
    let fs = mnemofs::mount_devices(&image.specs(), &cfg.mount)
        .map_err(|e| BenchError::fs(format!("mount {}", image.path.display()), e))?;
    image.detach();
    if cfg.prefault {
        fs.prefault();
    }
    let info = EngineInfo::of(&fs);
    let label = image.path.display().to_string();
    let measured = measure(cfg, &fs, &info, &label, size).map(|mut r| {
        // Measured after the run: the pages the measured operations went through.
        let map = fs.map_report();
        r.map_pages = map.pages.name().to_string();
        r.map_pmd_bytes = map.pmd_bytes;
        r.map_resident_bytes = map.resident_bytes;
        r.map_summary = map.to_string();
        r.image_fs = image.place.clone();
        r.devices = 1 + image.more.len() as u32;
        r.image_pages = cfg.image_pages.name().to_string();
        r.prefaulted = cfg.prefault;
        r
    });
    let unmounted = fs
        .unmount()
        .map_err(|e| BenchError::fs(format!("unmount {}", image.path.display()), e));
    let r = measured?;
    unmounted?;
    Ok(r)
}

/// A fresh volume on the devices `list` names (`PATH[@NODE],...`, as mkfs takes
/// them): all new image files (created at `size` bytes each, removed afterwards) or
/// all PM devices (formatted and left in place). Device i without `@NODE` sits on
/// node i modulo the topology's nodes.
fn given_volume(list: &Path, size: u64, cfg: &RunConfig, nodes: &[u32]) -> BenchResultT<Image> {
    let mut specs = mnemofs::DeviceSpec::parse_list(&list.to_string_lossy())
        .map_err(|e| BenchError::fs("--image", e))?;
    let mut devices = 0;
    for (i, s) in specs.iter_mut().enumerate() {
        match std::fs::metadata(&s.path) {
            Ok(m) if m.file_type().is_block_device() || m.file_type().is_char_device() => {
                devices += 1
            }
            Ok(_) => {
                return Err(BenchError::msg(format!(
                    "{} exists; the benchmark creates fresh images and will not overwrite a file",
                    s.path.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(BenchError::io(&s.path, e)),
        }
        s.node = s.node.or(Some(nodes[i % nodes.len()]));
    }
    if devices != 0 && devices != specs.len() {
        return Err(BenchError::msg(
            "--image: give new image files or PM devices, not both",
        ));
    }
    let image = Image {
        path: specs[0].path.clone(),
        remove: devices == 0,
        place: if devices == 0 {
            "files (given)"
        } else {
            "devices (given)"
        }
        .to_string(),
        tmpfs: None,
        more: specs[1..].iter().map(|s| s.path.clone()).collect(),
        nodes: specs.iter().filter_map(|s| s.node).collect(),
    };
    let opts = MkfsOptions {
        size,
        cpus: 0,
        inodes: 0,
        force: true,
        zone_percent: cfg.zone_percent,
        slot_size: cfg.slot_size,
        label: Vec::new(),
    };
    mnemofs::mkfs_devices(&image.specs(), &opts)
        .map_err(|e| BenchError::fs(format!("mkfs {}", list.display()), e))?;
    Ok(image)
}

/// The node ids of the run's topology (given, else this machine's; at least one).
fn topology_nodes(cfg: &RunConfig) -> Vec<u32> {
    let t = cfg
        .mount
        .topology
        .clone()
        .or_else(|| pm::Topology::from_sysfs(Path::new("/sys")).ok());
    match t {
        Some(t) if t.node_count() > 0 => t.nodes().to_vec(),
        _ => vec![0],
    }
}

/// The node benchmark thread `t` runs as, and the CPUs to pin it to (this
/// machine's, when its topology has several nodes and none was given).
fn thread_placement(cfg: &RunConfig, t: usize) -> Option<(u32, Vec<u32>)> {
    let real = cfg.mount.topology.is_none();
    let topo = cfg
        .mount
        .topology
        .clone()
        .or_else(|| pm::Topology::from_sysfs(Path::new("/sys")).ok())?;
    let node = if cfg.node_of_thread.is_empty() {
        if topo.node_count() < 2 {
            return None;
        }
        topo.nodes()[t % topo.node_count()]
    } else {
        cfg.node_of_thread[t % cfg.node_of_thread.len()]
    };
    let pin = if real && topo.node_count() > 1 {
        topo.cpus_of(node).to_vec()
    } else {
        Vec::new()
    };
    Some((node, pin))
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
    /// Page size mapping the image when measured (`pm::MapPages::name`).
    pub map_pages: String,
    /// Bytes of the image mapped by 2 MiB entries, and resident, when measured.
    pub map_pmd_bytes: u64,
    pub map_resident_bytes: u64,
    /// `pm::MapReport` in words.
    pub map_summary: String,
    /// The cache-line write-back instruction.
    pub flush_instruction: String,
    /// The small-write and read cache modes the mount ran (`auto` resolved), and
    /// the medium that decided them (`FsStats::medium`).
    pub small_write: String,
    pub read_cache: String,
    pub medium: String,
}

impl EngineInfo {
    /// The facts of a mounted local engine.
    pub fn of(fs: &Fs) -> EngineInfo {
        let map = fs.map_report();
        let st = fs.stats();
        EngineInfo {
            lawn_desc_store: st.lawn_desc_store,
            small_write: st.small_write_mode,
            read_cache: st.read_cache_mode,
            medium: st.medium,
            pm_profile: fs.pm_profile().name.to_string(),
            map_mode: format!("{:?}", fs.map_mode()),
            map_pages: map.pages.name().to_string(),
            map_pmd_bytes: map.pmd_bytes,
            map_resident_bytes: map.resident_bytes,
            map_summary: map.to_string(),
            flush_instruction: fs.flush_kind().name().to_string(),
        }
    }
}

/// Runs `cfg`'s workload (data set, warm-up, measured phase; `cfg.mount`, `image*`,
/// `prefault`, `zone_percent` and `slot_size` are not used here) on the mounted
/// engine `fs` and reports it; `image` and `image_size` are only reported, the
/// mapping as `info` says, and `image_fs` empty and `prefaulted` false ([`run`]
/// fills them in for the image it made). The engine is left
/// mounted, holding the data set.
pub fn measure<E: FileSystem + 'static>(
    cfg: &RunConfig,
    fs: &E,
    info: &EngineInfo,
    image: &str,
    image_size: u64,
) -> BenchResultT<BenchResult> {
    measure_observed(cfg, fs, info, image, image_size, &|| {})
}

/// [`measure`], calling `at_start` once the data set is made and the warm-up done,
/// just before the measured phase starts (no worker runs meanwhile), where the
/// harness reads [`FileSystem::pm_counters`]: for a caller's own counters of the
/// measured phase alone (the cluster bench's RPC counts).
pub fn measure_observed<E: FileSystem + 'static>(
    cfg: &RunConfig,
    fs: &E,
    info: &EngineInfo,
    image: &str,
    image_size: u64,
    at_start: &dyn Fn(),
) -> BenchResultT<BenchResult> {
    cfg.validate().map_err(BenchError::Msg)?;
    let threads = cfg.threads;
    // Each thread's own files are made as a thread of its node (see `prepare`).
    let own = pm::thread_node_override();
    let as_thread = |t: usize| pm::set_thread_node(thread_placement(cfg, t).map(|(n, _)| n));
    let prepared = prepare(cfg.workload, fs, &cfg.params, threads, cfg.seed, &as_thread);
    pm::set_thread_node(own);
    let workers = prepared?;
    let barrier = Barrier::new(threads + 1);
    let abort = AtomicBool::new(false);
    let progress: Vec<CachePadded<AtomicU64>> = (0..threads)
        .map(|_| CachePadded::new(AtomicU64::new(0)))
        .collect();

    let (outs, start, c0, k0) = std::thread::scope(|s| {
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
                let place = thread_placement(cfg, t);
                s.spawn(move || {
                    if let Some((node, cpus)) = place {
                        pm::set_thread_node(Some(node));
                        if !cpus.is_empty() {
                            // A failed pin leaves the thread where the kernel runs it.
                            let _ = pm::pin_to_cpus(&cpus);
                        }
                    }
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
        let k0 = mnemofs::contention::snapshot();
        at_start();
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
        (outs, start, c0, k0)
    });
    let c = fs.pm_counters().since(&c0);
    let k = mnemofs::contention::snapshot().since(&k0);

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
        variant: String::new(),
        workload: cfg.workload.name().to_string(),
        family: cfg.workload.family().to_string(),
        preset: cfg.preset.clone(),
        lock: m.lock.name().to_string(),
        small_write: if info.small_write.is_empty() {
            m.small_write.name().to_string()
        } else {
            info.small_write.clone()
        },
        read_cache: if info.read_cache.is_empty() {
            m.read_cache.name().to_string()
        } else {
            info.read_cache.clone()
        },
        medium: info.medium.clone(),
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
        locks_per_op: per_op(k.locks),
        waits_per_op: per_op(k.waits),
        rmws_per_op: per_op(k.rmws),
        pm_modeled_delay_ns: c.modeled_delay_ns,
        pm_modeled_delay_per_op_ns: per_op(c.modeled_delay_ns),
        pm_modeled_queue_ns: c.modeled_queue_ns,
        pm_modeled_queue_per_op_ns: per_op(c.modeled_queue_ns),
        spin_excess_ns: pm::SpinClock::get().spin_excess_ns(),
        image: image.to_string(),
        image_size,
        map_mode: info.map_mode.clone(),
        map_pages: info.map_pages.clone(),
        map_pmd_bytes: info.map_pmd_bytes,
        map_resident_bytes: info.map_resident_bytes,
        map_summary: info.map_summary.clone(),
        image_fs: String::new(),
        image_pages: cfg.image_pages.name().to_string(),
        prefaulted: false,
        flush_instruction: info.flush_instruction.clone(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        host: hostname(),
        date: now_utc(),
        version: env!("CARGO_PKG_VERSION"),
        seed: cfg.seed,
        round: cfg.round,
        devices: cfg.devices.max(1),
        placement: m.placement.name().to_string(),
        node_bytes: {
            let n = topology_nodes(cfg)
                .iter()
                .map(|&x| x as usize + 1)
                .max()
                .unwrap_or(1);
            c.node_bytes[..n.min(pm::MAX_NODES)]
                .iter()
                .map(|row| row[..n.min(pm::MAX_NODES)].to_vec())
                .collect()
        },
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
    fn a_run_states_its_image_and_mapping() {
        for pages in [ImagePages::Small, ImagePages::Auto] {
            let mut rc = RunConfig::new(crate::Workload::RandWrite);
            rc.params.file_size = 1 << 20;
            rc.stop = Stop::Ops(100);
            rc.warmup = Stop::Ops(0);
            rc.image_size = Some(128 << 20);
            rc.image_pages = pages;
            let r = run(&rc).unwrap();
            assert!(r.prefaulted);
            assert_eq!(r.image_pages, pages.name());
            assert!(!r.image_fs.is_empty());
            // Pre-faulted: the whole image is resident, and measured as one page
            // size or the other (which one depends on the kernel and on root).
            assert!(
                r.map_pages == "2M" || r.map_pages == "4K",
                "{}",
                r.map_summary
            );
            assert_eq!(r.map_resident_bytes, 128 << 20, "{}", r.map_summary);
            if r.image_fs.contains("huge=never") {
                assert_eq!((r.map_pages.as_str(), r.map_pmd_bytes), ("4K", 0));
            }
        }
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
