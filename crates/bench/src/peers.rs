//! `bench peers`: the same fio job against the file systems a user would pick
//! instead of mnemofs, through the kernel (DESIGN.md §9):
//!
//! - `ext4-dj`: ext4 with `data=journal` on a loop device over a file on /dev/shm,
//!   fsync after each write (LAWN's comparator);
//! - `tmpfs`: no consistency at all — an upper bound;
//! - `bindfs`: bindfs (FUSE) over tmpfs — what FUSE itself costs;
//! - `mnemofs`: a mnemofs FUSE mount (`mnemofs mount`: direct-I/O writes, read-only
//!   opens through the kernel page cache).
//!
//! Needs root. Every mount, loop device and file it makes is undone when the peer
//! is done, also when something fails or the run is interrupted (SIGINT/SIGTERM).

use crate::error::{BenchError, BenchResultT};
use crate::result::{hostname, now_utc, ns, render, si, size};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

/// The fio job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerWorkload {
    RandWrite,
    RandRead,
}

impl PeerWorkload {
    pub fn from_name(s: &str) -> Option<PeerWorkload> {
        match s {
            "randwrite" => Some(PeerWorkload::RandWrite),
            "randread" => Some(PeerWorkload::RandRead),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PeerWorkload::RandWrite => "randwrite",
            PeerWorkload::RandRead => "randread",
        }
    }
}

/// The peers, in table order.
pub const PEERS: &[&str] = &["ext4-dj", "tmpfs", "bindfs", "mnemofs"];

/// What to run.
#[derive(Clone, Debug)]
pub struct PeersConfig {
    /// The `mnemofs` binary (for `mkfs` and `mount`).
    pub mnemofs_exe: PathBuf,
    pub workload: PeerWorkload,
    pub io_size: u64,
    /// Size of the file fio works on (written beforehand in 1 MiB calls).
    pub file_size: u64,
    /// Size of each file system (ext4 image, tmpfs, mnemofs image).
    pub fs_size: u64,
    /// Measured seconds (after 1 s of ramp).
    pub runtime_s: u64,
    /// Preset of the mnemofs mount.
    pub preset: String,
    /// Peers to run (names from [`PEERS`]).
    pub peers: Vec<String>,
}

impl PeersConfig {
    pub fn new(mnemofs_exe: PathBuf) -> PeersConfig {
        PeersConfig {
            mnemofs_exe,
            workload: PeerWorkload::RandWrite,
            io_size: 4096,
            file_size: 64 << 20,
            fs_size: 1 << 30,
            runtime_s: 5,
            preset: "nova".to_string(),
            peers: PEERS.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// One row: a peer's fio figures, or why it was skipped.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PeerResult {
    pub peer: String,
    /// What the peer is, in words.
    pub fs: String,
    pub workload: String,
    pub io_size: u64,
    pub file_size: u64,
    pub fsync_each_write: bool,
    pub runtime_s: u64,
    pub iops: f64,
    pub bytes_per_sec: f64,
    /// Completion latency of the read or write call.
    pub p50_ns: u64,
    pub p99_ns: u64,
    /// Latency of the fsync after each write (writes only).
    pub fsync_p50_ns: Option<u64>,
    pub fsync_p99_ns: Option<u64>,
    /// Set when the peer did not run (missing tool, ...); the figures are then 0.
    pub skipped: Option<String>,
    pub fio: String,
    pub host: String,
    pub date: String,
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// SIGINT/SIGTERM set a flag (so that cleanup runs) while this lives; the old
/// handlers come back when it is dropped.
struct SignalGuard {
    old: Vec<(libc::c_int, libc::sigaction)>,
}

impl SignalGuard {
    fn install() -> SignalGuard {
        let mut old = Vec::new();
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: sigaction is plain old data; zeroed is a valid value.
            let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
            sa.sa_sigaction = on_signal as *const () as usize;
            // SAFETY: `sa.sa_mask` is a valid sigset to initialise.
            unsafe { libc::sigemptyset(&mut sa.sa_mask) };
            // SAFETY: as above, for the out-value.
            let mut prev: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: valid signal number and pointers; the handler only stores to
            // an atomic, which is async-signal-safe.
            if unsafe { libc::sigaction(sig, &sa, &mut prev) } == 0 {
                old.push((sig, prev));
            }
        }
        SignalGuard { old }
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: restores a handler sigaction returned earlier.
            unsafe { libc::sigaction(*sig, prev, std::ptr::null_mut()) };
        }
    }
}

fn check_interrupted() -> BenchResultT<()> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        return Err(BenchError::msg(
            "interrupted; mounts and loop devices undone",
        ));
    }
    Ok(())
}

/// Something to undo.
#[derive(Debug)]
enum Undo {
    Umount(PathBuf),
    FuseUnmount(PathBuf),
    LoopDetach(String),
    RemoveDir(PathBuf),
}

/// Undoes what was done, last first, when dropped (also on error or panic).
#[derive(Default)]
struct Cleanup {
    stack: Vec<Undo>,
}

impl Cleanup {
    fn push(&mut self, u: Undo) {
        self.stack.push(u);
    }
}

fn is_mounted(p: &Path) -> bool {
    let m = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let Some(s) = p.to_str() else { return false };
    m.lines().any(|l| l.split(' ').nth(4) == Some(s))
}

fn quiet(cmd: &mut Command) -> bool {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Unmounts `p`, retrying while it is busy, then lazily as a last resort.
fn umount(p: &Path, fuse: bool) -> bool {
    for _ in 0..50 {
        if !is_mounted(p) {
            return true;
        }
        let ok = if fuse {
            quiet(Command::new("fusermount3").arg("-u").arg(p))
                || quiet(Command::new("umount").arg(p))
        } else {
            quiet(Command::new("umount").arg(p))
        };
        if ok {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    quiet(Command::new("umount").arg("-l").arg(p))
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        while let Some(u) = self.stack.pop() {
            let ok = match &u {
                Undo::Umount(p) => umount(p, false),
                Undo::FuseUnmount(p) => umount(p, true),
                Undo::LoopDetach(dev) => {
                    let mut ok = false;
                    for _ in 0..20 {
                        if quiet(Command::new("losetup").arg("-d").arg(dev)) {
                            ok = true;
                            break;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    }
                    ok
                }
                Undo::RemoveDir(p) => std::fs::remove_dir_all(p).is_ok() || !p.exists(),
            };
            if !ok {
                eprintln!("mnemofs bench peers: could not undo {u:?}; please undo it by hand");
            }
        }
    }
}

/// The path of `tool` on PATH (and the sbin directories, which root's PATH may lack).
pub fn find_tool(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    for d in ["/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin", "/bin"] {
        dirs.push(PathBuf::from(d));
    }
    dirs.into_iter().map(|d| d.join(tool)).find(|p| p.is_file())
}

fn missing(tool: &str, package: &str) -> String {
    format!("{tool} not found: install it with `apt-get install {package}` (or `scripts/setup.sh --bench`)")
}

/// Runs `cmd`; its standard output, or an error naming it with its stderr.
fn run_cmd(cmd: &mut Command) -> BenchResultT<String> {
    let shown = format!("{cmd:?}").replace('"', "");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| BenchError::msg(format!("cannot run {shown}: {e}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(BenchError::msg(format!(
            "{shown} failed ({}): {first}",
            out.status
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn mkdir(p: &Path) -> BenchResultT<()> {
    std::fs::create_dir_all(p).map_err(|e| BenchError::io(p, e))
}

/// Writes the file fio will use, `size` bytes in 1 MiB calls, and syncs it.
fn prefill(path: &Path, size: u64) -> BenchResultT<()> {
    use std::io::Write;
    let mut f = std::fs::File::create(path).map_err(|e| BenchError::io(path, e))?;
    let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i * 7) as u8).collect();
    let mut left = size;
    while left > 0 {
        check_interrupted()?;
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n])
            .map_err(|e| BenchError::io(path, e))?;
        left -= n as u64;
    }
    f.sync_all().map_err(|e| BenchError::io(path, e))
}

/// The fio job (the same for every peer).
pub fn fio_args(cfg: &PeersConfig, file: &Path) -> Vec<String> {
    let mut a = vec![
        "--name=peer".to_string(),
        format!("--filename={}", file.display()),
        format!("--size={}", cfg.file_size),
        format!("--bs={}", cfg.io_size),
        format!("--blockalign={}", cfg.io_size),
        format!("--rw={}", cfg.workload.name()),
        "--ioengine=psync".to_string(),
        "--iodepth=1".to_string(),
        "--numjobs=1".to_string(),
        "--direct=0".to_string(),
        "--time_based=1".to_string(),
        format!("--runtime={}", cfg.runtime_s),
        "--ramp_time=1".to_string(),
        "--norandommap=1".to_string(),
        "--randrepeat=0".to_string(),
        "--output-format=json".to_string(),
    ];
    if cfg.workload == PeerWorkload::RandWrite {
        a.push("--fsync=1".to_string());
    }
    a
}

/// Figures from fio's JSON output.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FioFigures {
    pub iops: f64,
    pub bytes_per_sec: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub fsync_p50_ns: Option<u64>,
    pub fsync_p99_ns: Option<u64>,
    pub version: String,
}

/// Parses fio's `--output-format=json` (text before the first `{` is ignored).
pub fn parse_fio(out: &str, write: bool) -> BenchResultT<FioFigures> {
    let start = out
        .find('{')
        .ok_or_else(|| BenchError::msg("fio printed no JSON"))?;
    let v: serde_json::Value = serde_json::from_str(&out[start..])
        .map_err(|e| BenchError::msg(format!("cannot parse fio's JSON: {e}")))?;
    let job = &v["jobs"][0];
    let side = &job[if write { "write" } else { "read" }];
    if side.is_null() {
        return Err(BenchError::msg("fio's JSON has no job figures"));
    }
    let pct = |lat: &serde_json::Value, p: &str| lat["percentile"][p].as_u64();
    let clat = &side["clat_ns"];
    let sync = &job["sync"]["lat_ns"];
    Ok(FioFigures {
        iops: side["iops"].as_f64().unwrap_or(0.0),
        bytes_per_sec: side["bw_bytes"].as_f64().unwrap_or(0.0),
        p50_ns: pct(clat, "50.000000").unwrap_or(0),
        p99_ns: pct(clat, "99.000000").unwrap_or(0),
        fsync_p50_ns: if write { pct(sync, "50.000000") } else { None },
        fsync_p99_ns: if write { pct(sync, "99.000000") } else { None },
        version: v["fio version"].as_str().unwrap_or("fio").to_string(),
    })
}

fn describe(peer: &str) -> &'static str {
    match peer {
        "ext4-dj" => "ext4 data=journal, loop device over /dev/shm, fsync after each write",
        "tmpfs" => "tmpfs (no consistency; upper bound)",
        "bindfs" => "bindfs (FUSE) over tmpfs: the cost of FUSE",
        _ => "mnemofs FUSE mount (direct-I/O writes; read-only opens through the page cache)",
    }
}

/// Mounts `peer` under `work`, returns the directory fio writes in. What it mounted
/// is pushed on `undo`.
fn set_up(cfg: &PeersConfig, peer: &str, work: &Path, undo: &mut Cleanup) -> BenchResultT<PathBuf> {
    let mnt = work.join(format!("{peer}-mnt"));
    mkdir(&mnt)?;
    let fs_size = cfg.fs_size.to_string();
    match peer {
        "ext4-dj" => {
            let img = work.join("ext4.img");
            let f = std::fs::File::create(&img).map_err(|e| BenchError::io(&img, e))?;
            f.set_len(cfg.fs_size)
                .map_err(|e| BenchError::io(&img, e))?;
            drop(f);
            let dev = run_cmd(
                Command::new("losetup")
                    .arg("--find")
                    .arg("--show")
                    .arg(&img),
            )?
            .trim()
            .to_string();
            if dev.is_empty() {
                return Err(BenchError::msg("losetup named no loop device"));
            }
            undo.push(Undo::LoopDetach(dev.clone()));
            run_cmd(Command::new("mkfs.ext4").args(["-q", "-F", &dev]))?;
            run_cmd(
                Command::new("mount")
                    .args(["-t", "ext4", "-o", "data=journal", &dev])
                    .arg(&mnt),
            )?;
            undo.push(Undo::Umount(mnt.clone()));
        }
        "tmpfs" => {
            run_cmd(
                Command::new("mount")
                    .args(["-t", "tmpfs", "-o", &format!("size={fs_size}"), "tmpfs"])
                    .arg(&mnt),
            )?;
            undo.push(Undo::Umount(mnt.clone()));
        }
        "bindfs" => {
            let src = work.join("bindfs-src");
            mkdir(&src)?;
            run_cmd(
                Command::new("mount")
                    .args(["-t", "tmpfs", "-o", &format!("size={fs_size}"), "tmpfs"])
                    .arg(&src),
            )?;
            undo.push(Undo::Umount(src.clone()));
            run_cmd(Command::new("bindfs").arg(&src).arg(&mnt))?;
            undo.push(Undo::FuseUnmount(mnt.clone()));
        }
        _ => {
            let img = work.join("mnemofs.img");
            run_cmd(
                Command::new(&cfg.mnemofs_exe)
                    .arg("mkfs")
                    .arg(&img)
                    .args(["--size", &fs_size]),
            )?;
            run_cmd(
                Command::new(&cfg.mnemofs_exe)
                    .arg("mount")
                    .arg(&img)
                    .arg(&mnt)
                    .args(["--preset", &cfg.preset]),
            )?;
            undo.push(Undo::FuseUnmount(mnt.clone()));
        }
    }
    Ok(mnt)
}

/// Why `peer` cannot run here, if it cannot.
fn unavailable(peer: &str) -> Option<String> {
    let need: &[(&str, &str)] = match peer {
        "ext4-dj" => &[("losetup", "mount"), ("mkfs.ext4", "e2fsprogs")],
        "bindfs" => &[("bindfs", "bindfs"), ("fusermount3", "fuse3")],
        "mnemofs" => &[("fusermount3", "fuse3")],
        _ => &[],
    };
    for (tool, pkg) in need {
        if find_tool(tool).is_none() {
            return Some(missing(tool, pkg));
        }
    }
    if matches!(peer, "bindfs" | "mnemofs") && !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing".to_string());
    }
    None
}

/// Runs every peer; `note` gets a line before each.
pub fn run_peers(cfg: &PeersConfig, mut note: impl FnMut(&str)) -> BenchResultT<Vec<PeerResult>> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(BenchError::msg(
            "bench peers needs root (it mounts file systems and sets up a loop device)",
        ));
    }
    let fio = find_tool("fio").ok_or_else(|| BenchError::msg(missing("fio", "fio")))?;
    for p in &cfg.peers {
        if !PEERS.contains(&p.as_str()) {
            return Err(BenchError::msg(format!(
                "unknown peer '{p}'; peers: {}",
                PEERS.join(", ")
            )));
        }
    }
    if cfg.io_size == 0 || cfg.file_size < cfg.io_size || cfg.fs_size < 2 * cfg.file_size {
        return Err(BenchError::msg(
            "peers need 0 < --io-size <= file size, and a file system at least twice the file",
        ));
    }
    INTERRUPTED.store(false, Ordering::SeqCst);
    let _signals = SignalGuard::install();
    let work =
        crate::runner::default_image_dir().join(format!("mnemofs-peers-{}", std::process::id()));
    let mut outer = Cleanup::default();
    mkdir(&work)?;
    outer.push(Undo::RemoveDir(work.clone()));
    let mut results = Vec::new();
    for peer in &cfg.peers {
        check_interrupted()?;
        let mut r = PeerResult {
            peer: peer.clone(),
            fs: describe(peer).to_string(),
            workload: cfg.workload.name().to_string(),
            io_size: cfg.io_size,
            file_size: cfg.file_size,
            fsync_each_write: cfg.workload == PeerWorkload::RandWrite,
            runtime_s: cfg.runtime_s,
            iops: 0.0,
            bytes_per_sec: 0.0,
            p50_ns: 0,
            p99_ns: 0,
            fsync_p50_ns: None,
            fsync_p99_ns: None,
            skipped: None,
            fio: String::new(),
            host: hostname(),
            date: now_utc(),
        };
        if let Some(why) = unavailable(peer) {
            note(&format!("{peer}: skipped: {why}"));
            r.skipped = Some(why);
            results.push(r);
            continue;
        }
        note(&format!(
            "{peer}: fio {} {} for {} s ({})",
            cfg.workload.name(),
            size(cfg.io_size),
            cfg.runtime_s,
            describe(peer)
        ));
        let mut undo = Cleanup::default();
        let dir = set_up(cfg, peer, &work, &mut undo)?;
        let file = dir.join("fio.dat");
        prefill(&file, cfg.file_size)?;
        check_interrupted()?;
        let out = run_cmd(Command::new(&fio).args(fio_args(cfg, &file)))?;
        check_interrupted()?;
        drop(undo);
        let f = parse_fio(&out, cfg.workload == PeerWorkload::RandWrite)?;
        r.iops = f.iops;
        r.bytes_per_sec = f.bytes_per_sec;
        r.p50_ns = f.p50_ns;
        r.p99_ns = f.p99_ns;
        r.fsync_p50_ns = f.fsync_p50_ns;
        r.fsync_p99_ns = f.fsync_p99_ns;
        r.fio = f.version;
        results.push(r);
    }
    Ok(results)
}

/// The results as a table.
pub fn table(rs: &[PeerResult]) -> String {
    let mut rows = vec![[
        "peer",
        "workload",
        "io",
        "IOPS",
        "MB/s",
        "p50",
        "p99",
        "fsync p50",
        "",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<_>>()];
    for r in rs {
        if let Some(why) = &r.skipped {
            rows.push(vec![
                r.peer.clone(),
                r.workload.clone(),
                size(r.io_size),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                format!("skipped: {why}"),
            ]);
            continue;
        }
        rows.push(vec![
            r.peer.clone(),
            r.workload.clone(),
            size(r.io_size),
            si(r.iops),
            format!("{:.1}", r.bytes_per_sec / 1e6),
            ns(r.p50_ns),
            ns(r.p99_ns),
            r.fsync_p50_ns.map_or("-".into(), ns),
            String::new(),
        ]);
    }
    render(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIO: &str = r#"note: both iodepth >= 1 and synchronous I/O engine are selected
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "peer",
      "read" : { "iops" : 0.0, "bw_bytes" : 0, "clat_ns" : { "N" : 0 } },
      "write" : {
        "iops" : 12345.5,
        "bw_bytes" : 50567168,
        "clat_ns" : { "percentile" : { "50.000000" : 1800, "99.000000" : 4200 } }
      },
      "sync" : {
        "total_ios" : 100,
        "lat_ns" : { "percentile" : { "50.000000" : 60000, "99.000000" : 90000 } }
      }
    }
  ]
}"#;

    #[test]
    fn fio_json_is_parsed() {
        let f = parse_fio(FIO, true).unwrap();
        assert_eq!(f.iops, 12345.5);
        assert_eq!(f.bytes_per_sec, 50567168.0);
        assert_eq!((f.p50_ns, f.p99_ns), (1800, 4200));
        assert_eq!((f.fsync_p50_ns, f.fsync_p99_ns), (Some(60000), Some(90000)));
        assert_eq!(f.version, "fio-3.33");
        let r = parse_fio(FIO, false).unwrap();
        assert_eq!(r.iops, 0.0);
        assert_eq!(r.fsync_p50_ns, None);
        assert!(parse_fio("garbage", true).is_err());
    }

    #[test]
    fn the_job_is_the_same_but_for_fsync() {
        let mut c = PeersConfig::new(PathBuf::from("/bin/true"));
        let w = fio_args(&c, Path::new("/m/f"));
        assert!(w.contains(&"--fsync=1".to_string()));
        assert!(w.contains(&"--bs=4096".to_string()));
        assert!(w.contains(&"--rw=randwrite".to_string()));
        c.workload = PeerWorkload::RandRead;
        c.io_size = 128;
        let r = fio_args(&c, Path::new("/m/f"));
        assert!(!r.iter().any(|a| a.starts_with("--fsync")));
        assert!(r.contains(&"--bs=128".to_string()));
        assert_eq!(
            PeerWorkload::from_name("randread"),
            Some(PeerWorkload::RandRead)
        );
        assert_eq!(PeerWorkload::from_name("seq"), None);
    }

    #[test]
    fn cleanup_undoes_in_reverse() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("w");
        std::fs::create_dir(&d).unwrap();
        {
            let mut c = Cleanup::default();
            c.push(Undo::RemoveDir(d.clone()));
        }
        assert!(!d.exists());
        assert!(find_tool("sh").is_some());
        assert!(find_tool("no-such-tool-here").is_none());
    }
}
