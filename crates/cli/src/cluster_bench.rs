//! `mnemofs bench cluster`: clients of a metadata server, each its own process,
//! running a workload side by side under each commit mode (papers/delayed-commit
//! §V): ops/s, latency, RPCs per operation, the compound degree, commit threads,
//! and how the files' blocks lie (extents per file, and how often a client's next
//! file starts right after its previous one: the I/O-merge effect of space
//! delegation).

use crate::error::{CliError, CliResult};
use crate::output::{emit, note};
use crate::size::size_arg;
use clap::Args;
use mnemofs::{FileKind, ROOT_INO};
use mnemofs_bench::{EngineInfo, RunConfig, Stop, Workload};
use mnemofs_cluster::netns::{NetNs, NetNsError};
use mnemofs_cluster::{
    netdelay::DelayProxy, Client, ClientConfig, ClientStats, CommitMode, Sample,
};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct ClusterArgs {
    /// Client processes
    #[arg(long, value_name = "N", value_delimiter = ',', default_value = "4")]
    pub clients: Vec<usize>,
    /// Commit modes side by side, comma separated (ratios are to the first)
    #[arg(
        long,
        value_name = "M,...",
        value_delimiter = ',',
        default_value = "sync,delayed"
    )]
    pub commit: Vec<String>,
    /// Round trip added between the clients and the server, comma separated: 0
    /// (loopback) or e.g. 100us, 1ms (a user-space delay proxy: see docs/BENCHMARKS.md)
    #[arg(long, value_name = "D,...", value_delimiter = ',', default_value = "0")]
    pub rtt: Vec<String>,
    /// Where the server runs, comma separated: loopback (same network namespace as
    /// the clients) or netns (a network namespace of its own, reached over a veth
    /// pair; needs root and iproute2's `ip`)
    #[arg(
        long,
        value_name = "N,...",
        value_delimiter = ',',
        default_value = "loopback"
    )]
    pub net: Vec<String>,
    /// smallfiles (create + write + close of 32 KiB files), largefiles (the same with
    /// 1 MiB files), varmail, webproxy, fileserver
    #[arg(long, value_name = "W", default_value = "smallfiles")]
    pub workload: String,
    /// Threads per client
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub threads: usize,
    /// Measured seconds per run
    #[arg(long, value_name = "S", value_parser = crate::bench::duration_arg, default_value = "5")]
    pub duration: Duration,
    /// File size (default: the workload's; smallfiles 32 KiB, largefiles 1 MiB)
    #[arg(long = "file-size", value_name = "SIZE", value_parser = size_arg)]
    pub file_size: Option<u64>,
    /// smallfiles/largefiles: live files per thread (the oldest is removed beyond
    /// them; default 1024); filebench workloads: the fileset
    #[arg(long, value_name = "N")]
    pub files: Option<u64>,
    /// Delayed commits: the longest a commit thread holds files back to fill a
    /// compound commit (mount's --commit-delay; default 2ms)
    #[arg(long = "commit-delay", value_name = "TIME", value_parser = crate::mount::commit_delay_arg)]
    pub commit_delay: Option<Duration>,
    /// Rounds, each running every variant once, interleaved
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub rounds: u32,
    /// Print JSON lines (one per run) instead of the table
    #[arg(long)]
    pub json: bool,
    /// Draw, for every run with delayed commits, client 0's commit queue length,
    /// commit threads and compound degree over time (the paper's Figure 6) as an
    /// SVG in this directory (`<workload>-<N>c-<net>-rtt<D>us-<mode>-r<round>.svg`; the
    /// client keeps its first 200,000 samples)
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// (internal) run one client of the server at ADDR and print its result
    #[arg(long = "client-of", hide = true, value_name = "ADDR")]
    pub client_of: Option<String>,
    /// (internal) the volume's devices, for --client-of
    #[arg(long, hide = true, value_name = "DEVS")]
    pub data: Option<PathBuf>,
    /// (internal) the client's directory, for --client-of
    #[arg(long, hide = true, value_name = "NAME")]
    pub subdir: Option<String>,
}

/// What one client process reports.
#[derive(Serialize, Deserialize)]
struct ClientOut {
    ops: u64,
    duration_s: f64,
    /// Time close took to send what was still queued (delayed commit).
    drain_s: f64,
    p50_ns: u64,
    p99_ns: u64,
    rpcs: u64,
    commit_rpcs: u64,
    commits: u64,
    #[serde(default)]
    layout_rpcs: u64,
    #[serde(default)]
    delegations: u64,
    #[serde(default)]
    recalls: u64,
    #[serde(default)]
    retries: u64,
    batches: u64,
    batch_files: u64,
    peak_threads: u64,
    commit_delay_p99_ns: u64,
    samples: Vec<(f64, usize, usize, usize)>,
}

/// One run: every client of one server.
#[derive(Serialize)]
struct RunOut {
    workload: String,
    clients: usize,
    threads: usize,
    rtt_us: f64,
    /// `loopback` or `netns` (the server behind a veth pair).
    net: String,
    commit: String,
    round: u32,
    /// Operations of all clients per second, each client's count over its measured
    /// time plus the time its unmount took to send the commits still queued.
    ops_per_sec: f64,
    p50_us: f64,
    p99_us: f64,
    rpcs_per_op: f64,
    /// Of those: commit RPCs, layout RPCs and delegation RPCs per operation, and
    /// layout recalls answered per operation.
    commit_rpcs_per_op: f64,
    layout_rpcs_per_op: f64,
    delegations_per_op: f64,
    recalls_per_op: f64,
    /// Extent commits per operation, and writes merged and committed again per
    /// operation because a page they merged had changed (refused with EAGAIN).
    commits_per_op: f64,
    retries_per_op: f64,
    /// Files per commit RPC (1 for synchronous commits).
    compound_degree: f64,
    peak_threads: u64,
    commit_delay_p99_us: f64,
    files: u64,
    extents_per_file: f64,
    /// Of each client's consecutive files, the share whose first block follows the
    /// previous file's last block.
    contiguous_pct: f64,
    /// Round trip measured through the proxy (a 1-byte ping), µs.
    rtt_measured_us: f64,
}

fn workload(name: &str) -> CliResult<(Workload, Option<u64>)> {
    match name {
        "smallfiles" => Ok((Workload::SmallFiles, None)),
        "largefiles" => Ok((Workload::SmallFiles, Some(1 << 20))),
        "varmail" => Ok((Workload::VarMail, None)),
        "webproxy" => Ok((Workload::WebProxy, None)),
        "fileserver" => Ok((Workload::FileServer, None)),
        other => Err(CliError::new(format!(
            "--workload {other}: not a cluster workload (smallfiles, largefiles, varmail, webproxy, fileserver)"
        ))
        .with_code(2)),
    }
}

/// Where the server of a run is (`--net`).
#[derive(Clone, Copy)]
enum Net {
    Loopback,
    Netns,
}

impl Net {
    fn name(self) -> &'static str {
        match self {
            Net::Loopback => "loopback",
            Net::Netns => "netns",
        }
    }
}

/// A child process killed (SIGKILL) and waited for when dropped, unless it was
/// waited for already: a run that returns an error leaves no server or client
/// running (nor, with it, a network namespace alive).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        // (Both do nothing to a child already waited for.)
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A network namespace for a run's server, or why there is none (2: this host or
/// user cannot make one).
fn make_ns() -> CliResult<NetNs> {
    NetNs::create().map_err(|e| {
        let code = match e {
            NetNsError::Unavailable(_) => 2,
            NetNsError::Ip { .. } => 1,
        };
        CliError::new(format!("--net netns: {e}")).with_code(code)
    })
}

fn net_of(s: &str) -> CliResult<Net> {
    match s {
        "loopback" => Ok(Net::Loopback),
        "netns" => Ok(Net::Netns),
        _ => Err(CliError::new(format!("--net {s}: loopback or netns")).with_code(2)),
    }
}

fn commit_mode(s: &str) -> CliResult<CommitMode> {
    match s {
        "sync" => Ok(CommitMode::Sync),
        "delayed" => Ok(CommitMode::Delayed),
        o => Err(CliError::new(format!("--commit {o}: sync or delayed")).with_code(2)),
    }
}

fn rtt_of(s: &str) -> CliResult<Duration> {
    let bad =
        || CliError::new(format!("--rtt {s}: give 0, or a time such as 100us, 2ms")).with_code(2);
    let (num, unit) = s
        .find(|c: char| c.is_ascii_alphabetic())
        .map_or((s, "us"), |i| s.split_at(i));
    let v: f64 = num.parse().map_err(|_| bad())?;
    let ns = match unit {
        "ns" => v,
        "us" => v * 1e3,
        "ms" => v * 1e6,
        "s" => v * 1e9,
        _ => return Err(bad()),
    };
    if !(0.0..=1e9).contains(&ns) {
        return Err(bad());
    }
    Ok(Duration::from_nanos(ns as u64))
}

pub fn run(a: &ClusterArgs) -> CliResult<i32> {
    if let Some(addr) = &a.client_of {
        return run_client(a, addr).map(|()| 0);
    }
    let (w, fsize) = workload(&a.workload)?;
    let modes: Vec<(String, CommitMode)> = a
        .commit
        .iter()
        .map(|m| commit_mode(m).map(|c| (m.clone(), c)))
        .collect::<CliResult<_>>()?;
    let rtts: Vec<Duration> = a.rtt.iter().map(|r| rtt_of(r)).collect::<CliResult<_>>()?;
    let nets: Vec<Net> = a.net.iter().map(|n| net_of(n)).collect::<CliResult<_>>()?;
    if nets.iter().any(|n| matches!(n, Net::Netns)) {
        // Before any run: one that cannot be made fails the command at once.
        drop(make_ns()?);
    }
    if a.clients.iter().any(|&c| c == 0 || c > 64) || a.threads == 0 || a.threads > 64 {
        return Err(CliError::new("--clients and --threads: 1 to 64").with_code(2));
    }
    if a.rounds == 0 {
        return Err(CliError::new("--rounds: at least 1").with_code(2));
    }
    if let Some(d) = &a.plot {
        std::fs::create_dir_all(d)
            .map_err(|e| CliError::new(format!("--plot {}: {e}", d.display())).with_code(2))?;
    }
    let mut rows: Vec<RunOut> = Vec::new();
    for round in 1..=a.rounds {
        for &clients in &a.clients {
            for &net in &nets {
                for &rtt in &rtts {
                    for (name, _) in &modes {
                        let r = one_run(a, w, fsize, clients, (net, rtt), name, round)?;
                        if a.json {
                            emit(&serde_json::to_string(&r).unwrap_or_default());
                        } else {
                            note(&format!(
                                "{} clients, {}, rtt {:.0} us, {}: {:.0} ops/s",
                                clients, r.net, r.rtt_us, name, r.ops_per_sec
                            ));
                        }
                        rows.push(r);
                    }
                }
            }
        }
    }
    if !a.json {
        print_table(&rows);
    }
    note(&nfs_peer());
    Ok(0)
}

/// What became of the kernel NFS peer the issue asks for where the machine allows
/// (the paper compares with NFSv3): it needs the kernel's NFS server and client,
/// which this machine's kernel does not have (docs/CLUSTER.md, "Status").
fn nfs_peer() -> String {
    let fs = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    let has = |name: &str| {
        fs.lines()
            .any(|l| l.split_whitespace().last() == Some(name))
    };
    let why = match (has("nfsd"), has("nfs")) {
        (true, true) => {
            return "kernel NFS peer: not run (this kernel has nfsd and nfs, but the peer is \
                    not built: docs/CLUSTER.md)"
                .into()
        }
        (false, false) => {
            "no nfsd nor nfs in /proc/filesystems: this kernel can neither \
                           serve nor mount NFS"
        }
        (false, true) => "no nfsd in /proc/filesystems: this kernel cannot serve NFS",
        (true, false) => "no nfs in /proc/filesystems: this kernel cannot mount NFS",
    };
    format!("kernel NFS peer: skipped ({why})")
}

fn print_table(rows: &[RunOut]) {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<11} {:>3} {:>8} {:>8} {:>8} {:>10} {:>6} {:>8} {:>9} {:>7} {:>6} {:>4} {:>9} {:>7} {:>7}\n",
        "workload",
        "cl",
        "net",
        "rtt_us",
        "commit",
        "ops/s",
        "ratio",
        "p50_us",
        "p99_us",
        "rpc/op",
        "degree",
        "thr",
        "delay99us",
        "ext/f",
        "contig%"
    ));
    for r in rows {
        // The ratio is to the first commit mode of the same round, clients, network
        // and rtt.
        let base = rows
            .iter()
            .find(|b| {
                b.round == r.round
                    && b.clients == r.clients
                    && b.net == r.net
                    && b.rtt_us == r.rtt_us
            })
            .map_or(r.ops_per_sec, |b| b.ops_per_sec);
        out.push_str(&format!(
            "{:<11} {:>3} {:>8} {:>8.0} {:>8} {:>10.0} {:>6.2} {:>8.1} {:>9.1} {:>7.2} {:>6.2} {:>4} {:>9.0} {:>7.2} {:>7.1}\n",
            r.workload, r.clients, r.net, r.rtt_measured_us, r.commit, r.ops_per_sec,
            r.ops_per_sec / base.max(1e-9), r.p50_us, r.p99_us, r.rpcs_per_op,
            r.compound_degree, r.peak_threads, r.commit_delay_p99_us, r.extents_per_file,
            r.contiguous_pct
        ));
    }
    emit(out.trim_end());
}

/// A 1-byte round trip through `addr` (the server answers gRPC's preface with
/// bytes; timing the connect handshake instead would skip the proxy's delay on
/// the way back). Median of 20 TCP connects through the proxy: each costs one
/// round trip to the proxy plus its connect to the server.
fn ping(addr: std::net::SocketAddr) -> f64 {
    use std::io::{Read, Write};
    let mut v = Vec::new();
    for _ in 0..20 {
        let Ok(mut s) = std::net::TcpStream::connect(addr) else {
            continue;
        };
        let _ = s.set_nodelay(true);
        // HTTP/2 connection preface + an empty SETTINGS frame: the server answers
        // with its own SETTINGS.
        let mut msg = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        msg.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        let t = Instant::now();
        if s.write_all(&msg).is_err() {
            continue;
        }
        let mut b = [0u8; 9];
        if s.read_exact(&mut b).is_ok() {
            v.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

#[allow(clippy::too_many_arguments)]
fn one_run(
    a: &ClusterArgs,
    w: Workload,
    fsize: Option<u64>,
    clients: usize,
    (net, rtt): (Net, Duration),
    mode: &str,
    round: u32,
) -> CliResult<RunOut> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::new(format!("cannot find the mnemofs executable: {e}")))?;
    let mut params = w.defaults();
    if let Some(s) = fsize.or(a.file_size) {
        params.file_size = s;
        params.io_size = params.io_size.min(s).max(4096);
    }
    if let Some(f) = a.files {
        params.files = f;
    }
    let size =
        mnemofs_bench::workloads::image_size_for(w, &params, a.threads * clients).max(1 << 30);
    // As the local bench: 2 MiB pages where a private tmpfs can give them, and
    // every page of the image mapped in (zeroed by the kernel) before the server
    // and the clients start, as a DAX device's would be.
    let img = mnemofs_bench::runner::fresh_image_zoned(
        None,
        size,
        mnemofs::format::DEFAULT_ZONE_PERCENT,
        mnemofs::format::DEFAULT_SLOT_SIZE,
        mnemofs_bench::ImagePages::Auto,
    )
    .map_err(|e| CliError::new(format!("image: {e}")))?;
    let path = img.path.clone();
    preallocate(&path)?;
    let lease_ms = 1000u64;
    // A namespace of the server's own: deleted when this run ends (after the
    // server, which is waited for below).
    let ns = match net {
        Net::Loopback => None,
        Net::Netns => Some(make_ns()?),
    };
    let (mut mds, listen) = match &ns {
        Some(ns) => (ns.command(&exe), format!("{}:0", ns.addr())),
        None => (Command::new(&exe), "127.0.0.1:0".to_string()),
    };
    let mut mds = Reaped(
        mds.arg("mds")
            .arg(&path)
            .arg("--listen")
            .arg(&listen)
            .arg("--lease-ms")
            .arg(lease_ms.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| CliError::new(format!("cannot start the metadata server: {e}")))?,
    );
    let mut lines = BufReader::new(
        mds.0
            .stderr
            .take()
            .ok_or_else(|| CliError::new("no server output"))?,
    )
    .lines();
    let mut addr = None;
    for line in lines.by_ref() {
        let Ok(line) = line else { break };
        if let Some(rest) = line.split(" served on ").nth(1) {
            addr = rest
                .split_whitespace()
                .next()
                .and_then(|s| s.parse::<std::net::SocketAddr>().ok());
            break;
        }
    }
    let Some(addr) = addr else {
        return Err(CliError::new("the metadata server did not start"));
    };
    // Its output keeps flowing (a full pipe would stop it).
    std::thread::spawn(move || for _ in lines {});
    let proxy = if rtt.is_zero() {
        None
    } else {
        Some(
            DelayProxy::start("127.0.0.1:0".parse().unwrap_or(addr), addr, rtt / 2)
                .map_err(|e| CliError::new(format!("delay proxy: {e}")))?,
        )
    };
    let target = proxy.as_ref().map_or(addr, |p| p.addr());
    let rtt_measured_us = ping(target);
    // No space is delegated during the server's startup grace (one lease and a
    // quarter): wait it out, so that the measured phase does not.
    std::thread::sleep(Duration::from_millis(lease_ms + lease_ms / 4 + 100));
    let mut kids = Vec::new();
    for c in 0..clients {
        let mut cmd = Command::new(&exe);
        cmd.args(["bench", "cluster", "--client-of"])
            .arg(target.to_string())
            .arg("--data")
            .arg(&path)
            .arg("--subdir")
            .arg(format!("c{c}"))
            .arg("--commit")
            .arg(mode)
            .arg("--workload")
            .arg(&a.workload)
            .arg("--threads")
            .arg(a.threads.to_string())
            .arg("--duration")
            .arg(format!("{}", a.duration.as_secs_f64()));
        if let Some(s) = fsize.or(a.file_size) {
            cmd.arg("--file-size").arg(s.to_string());
        }
        if let Some(f) = a.files {
            cmd.arg("--files").arg(f.to_string());
        }
        if let Some(d) = a.commit_delay {
            cmd.arg("--commit-delay")
                .arg(format!("{}us", d.as_nanos() as f64 / 1e3));
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| CliError::new(format!("cannot start client {c}: {e}")))?;
        kids.push(Reaped(child));
    }
    let mut outs = Vec::new();
    let mut failed = None;
    for (c, k) in kids.iter_mut().enumerate() {
        use std::io::Read;
        let mut stdout = Vec::new();
        let read = k.0.stdout.take().map(|mut o| o.read_to_end(&mut stdout));
        match (read, k.0.wait()) {
            (Some(Err(e)), _) | (_, Err(e)) => failed = Some(format!("client {c}: {e}")),
            (_, Ok(st)) if st.success() => match serde_json::from_slice::<ClientOut>(&stdout) {
                Ok(r) => outs.push(r),
                Err(e) => failed = Some(format!("client {c}: bad result: {e}")),
            },
            (_, Ok(st)) => failed = Some(format!("client {c} failed ({st})")),
        }
    }
    drop(proxy);
    // SAFETY: kill sends a signal to our own child; no memory is involved.
    unsafe { libc::kill(mds.0.id() as i32, libc::SIGTERM) };
    let _ = mds.0.wait();
    if let Some(f) = failed {
        return Err(CliError::new(f));
    }
    if let (Some(dir), Some(first)) = (&a.plot, outs.first()) {
        if !first.samples.is_empty() {
            let svg = dir.join(format!(
                "{}-{}c-{}-rtt{}us-{}-r{}.svg",
                a.workload,
                clients,
                net.name(),
                rtt.as_micros(),
                mode,
                round
            ));
            // A chart that cannot be drawn does not cost the run's figures.
            match plot_samples(&svg, &a.workload, clients, rtt, mode, &first.samples) {
                Ok(()) => note(&format!("drew {}", svg.display())),
                Err(e) => note(&format!("no chart: {e}")),
            }
        }
    }
    let (files, extents, contiguous) = layout_stats(&path, clients)?;
    drop(img);
    let ops: u64 = outs.iter().map(|o| o.ops).sum();
    let ops_per_sec: f64 = outs
        .iter()
        .map(|o| o.ops as f64 / (o.duration_s + o.drain_s).max(1e-9))
        .sum();
    let n = outs.len().max(1) as f64;
    let batches: u64 = outs.iter().map(|o| o.batches).sum();
    let batch_files: u64 = outs.iter().map(|o| o.batch_files).sum();
    let commit_rpcs: u64 = outs.iter().map(|o| o.commit_rpcs).sum();
    let commits: u64 = outs.iter().map(|o| o.commits).sum();
    let _ = commits;
    Ok(RunOut {
        workload: a.workload.clone(),
        clients,
        threads: a.threads,
        rtt_us: rtt.as_secs_f64() * 1e6,
        net: net.name().to_string(),
        commit: mode.to_string(),
        round,
        ops_per_sec,
        p50_us: outs.iter().map(|o| o.p50_ns as f64).sum::<f64>() / n / 1e3,
        p99_us: outs.iter().map(|o| o.p99_ns).max().unwrap_or(0) as f64 / 1e3,
        rpcs_per_op: outs.iter().map(|o| o.rpcs).sum::<u64>() as f64 / ops.max(1) as f64,
        commit_rpcs_per_op: commit_rpcs as f64 / ops.max(1) as f64,
        layout_rpcs_per_op: outs.iter().map(|o| o.layout_rpcs).sum::<u64>() as f64
            / ops.max(1) as f64,
        delegations_per_op: outs.iter().map(|o| o.delegations).sum::<u64>() as f64
            / ops.max(1) as f64,
        recalls_per_op: outs.iter().map(|o| o.recalls).sum::<u64>() as f64 / ops.max(1) as f64,
        commits_per_op: outs.iter().map(|o| o.commits).sum::<u64>() as f64 / ops.max(1) as f64,
        retries_per_op: outs.iter().map(|o| o.retries).sum::<u64>() as f64 / ops.max(1) as f64,
        compound_degree: if batches > 0 {
            batch_files as f64 / batches as f64
        } else if commit_rpcs > 0 {
            1.0
        } else {
            0.0
        },
        peak_threads: outs.iter().map(|o| o.peak_threads).max().unwrap_or(0),
        commit_delay_p99_us: outs
            .iter()
            .map(|o| o.commit_delay_p99_ns)
            .max()
            .unwrap_or(0) as f64
            / 1e3,
        files,
        extents_per_file: extents as f64 / files.max(1) as f64,
        contiguous_pct: contiguous,
        rtt_measured_us,
    })
}

/// Client 0's commit samples `(ms, queue, threads, degree)` as three lines over
/// time, each the largest value of every 10 ms (the samples are taken at every
/// enqueue and check-out: too many to draw one by one); where no sample falls in
/// the next 10 ms, the line goes on at the last value sampled (nothing changed).
fn plot_samples(
    svg: &std::path::Path,
    workload: &str,
    clients: usize,
    rtt: Duration,
    mode: &str,
    samples: &[(f64, usize, usize, usize)],
) -> Result<(), String> {
    use mnemofs_bench::plot::{lines, Line};
    const BIN_MS: f64 = 10.0;
    // Per bin: its start (s), the largest values and the last ones.
    let mut bins: Vec<(f64, [f64; 3], [f64; 3])> = Vec::new();
    for &(t, q, th, d) in samples {
        let b = (t / BIN_MS).floor() * BIN_MS / 1e3;
        let v = [q as f64, th as f64, d as f64];
        match bins.last_mut() {
            Some((bt, m, last)) if *bt == b => {
                for (m, v) in m.iter_mut().zip(v) {
                    *m = m.max(v);
                }
                *last = v;
            }
            _ => bins.push((b, v, v)),
        }
    }
    let names = ["queue length (files)", "commit threads", "compound degree"];
    let ls: Vec<Line> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mut points = Vec::with_capacity(bins.len() * 2);
            for (k, (t, m, last)) in bins.iter().enumerate() {
                points.push((*t, m[i]));
                let end = t + BIN_MS / 1e3;
                let gap = bins.get(k + 1).is_none_or(|next| next.0 > end + 1e-9);
                if gap && last[i] != m[i] {
                    points.push((end, last[i]));
                }
            }
            Line {
                name: n.to_string(),
                points,
            }
        })
        .collect();
    let title = format!(
        "{workload}, clients: {clients}, rtt asked: {} us, {mode} commits: client 0, max per {BIN_MS} ms",
        rtt.as_micros()
    );
    lines(
        svg,
        &title,
        "seconds since the client started",
        "count",
        &ls,
    )
    .map_err(|e| e.to_string())
}

/// Allocates every page of the image file, then maps them in (and so has them
/// zero-filled) before the server and the clients start, as a DAX device's pages
/// exist. `fallocate` reserves the pages (a tmpfs without room says so here, not
/// with a SIGBUS in the middle of a run), but tmpfs leaves a fallocated page to be
/// zeroed at its first fault, which then lands in the measured phase (`perf` of
/// the server and clients showed 16 % of the run's CPU in those faults); a fault
/// through one shared mapping zeroes it once, for every process that maps the file
/// later. (Where `MADV_POPULATE_WRITE` is missing, before Linux 5.14, the pages are
/// only reserved.)
fn preallocate(path: &std::path::Path) -> CliResult<()> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
    let len = f
        .metadata()
        .map_err(|e| CliError::new(format!("{}: {e}", path.display())))?
        .len();
    // SAFETY: fallocate on a descriptor we own; mode 0 only allocates, the file's
    // contents and size are unchanged (`len` is its size).
    let rc = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, len as libc::off_t) };
    if rc != 0 {
        return Err(CliError::new(format!(
            "{}: cannot allocate the image's pages: {}",
            path.display(),
            std::io::Error::last_os_error()
        )));
    }
    let pm =
        pm::Pm::open(path, false).map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
    pm.populate(0, pm.len());
    Ok(())
}

/// Extents per file and the contiguity of each client's files, read from the
/// volume after the server's clean shutdown.
fn layout_stats(path: &std::path::Path, clients: usize) -> CliResult<(u64, u64, f64)> {
    let fs = mnemofs::mount(path, &mnemofs_cluster::mds_mount_options())
        .map_err(|e| CliError::new(format!("mount after the run: {e}")))?;
    let (mut files, mut extents, mut pairs, mut adjacent) = (0u64, 0u64, 0u64, 0u64);
    for c in 0..clients {
        let Ok(dir) = fs.lookup(ROOT_INO, format!("c{c}").as_bytes()) else {
            continue;
        };
        // Every regular file under the client's directory, in directory order.
        let mut stack = vec![dir.ino];
        let mut order: Vec<(u64, u64)> = Vec::new();
        while let Some(d) = stack.pop() {
            let mut off = 0;
            loop {
                let ents = fs.readdir(d, off, 512).unwrap_or_default();
                if ents.is_empty() {
                    break;
                }
                for e in &ents {
                    off = e.offset;
                    if e.name == b"." || e.name == b".." {
                        continue;
                    }
                    match e.kind {
                        FileKind::Directory => stack.push(e.ino),
                        FileKind::Regular => {
                            let Ok(l) = fs.layout(e.ino, 0, mnemofs::LAYOUT_MAX_PAGES) else {
                                continue;
                            };
                            let blocks: Vec<u64> =
                                l.blocks.into_iter().filter(|&b| b != 0).collect();
                            let Some((&first, &last)) = blocks.first().zip(blocks.last()) else {
                                continue;
                            };
                            files += 1;
                            extents +=
                                1 + blocks.windows(2).filter(|w| w[1] != w[0] + 1).count() as u64;
                            order.push((first, last));
                        }
                        _ => {}
                    }
                }
            }
        }
        for w in order.windows(2) {
            pairs += 1;
            if w[1].0 == w[0].1 + 1 {
                adjacent += 1;
            }
        }
    }
    let _ = fs.unmount();
    Ok((
        files,
        extents,
        100.0 * adjacent as f64 / pairs.max(1) as f64,
    ))
}

/// The counters of a run's measured phase: those at its end less those at its
/// start (`peak_threads` and the commit delay are the whole run's).
fn measured_stats(start: &ClientStats, end: &ClientStats) -> ClientStats {
    let d = |a: u64, b: u64| b.saturating_sub(a);
    ClientStats {
        rpcs: d(start.rpcs, end.rpcs),
        commit_rpcs: d(start.commit_rpcs, end.commit_rpcs),
        commits: d(start.commits, end.commits),
        layout_rpcs: d(start.layout_rpcs, end.layout_rpcs),
        delegations: d(start.delegations, end.delegations),
        recalls: d(start.recalls, end.recalls),
        retries: d(start.retries, end.retries),
        batches: d(start.batches, end.batches),
        batch_files: d(start.batch_files, end.batch_files),
        ..end.clone()
    }
}

fn run_client(a: &ClusterArgs, addr: &str) -> CliResult<()> {
    let (w, fsize) = workload(&a.workload)?;
    let data = a
        .data
        .as_ref()
        .ok_or_else(|| CliError::new("--client-of needs --data"))?;
    let commit = a
        .commit
        .first()
        .map_or(Ok(CommitMode::Sync), |m| commit_mode(m))?;
    let client = Client::connect(&ClientConfig {
        mds: addr.to_string(),
        data: crate::devs::parse(data)?,
        commit,
        delayed: crate::mount::delayed_config(a.commit_delay),
        subdir: a.subdir.clone(),
    })
    .map_err(|e| CliError::new(format!("client: {e}")))?;
    let mut cfg = RunConfig::new(w);
    cfg.threads = a.threads;
    cfg.stop = Stop::Duration(a.duration);
    cfg.warmup = cfg.stop.default_warmup();
    if let Some(s) = fsize.or(a.file_size) {
        cfg.params.file_size = s;
        cfg.params.io_size = cfg.params.io_size.min(s).max(4096);
    }
    if let Some(f) = a.files {
        cfg.params.files = f;
    }
    cfg.preset = format!("cluster-{}", a.commit.first().map_or("sync", |s| s));
    let info = EngineInfo {
        lawn_desc_store: "-".into(),
        pm_profile: "dram".into(),
        map_mode: "shared".into(),
        map_pages: "-".into(),
        map_pmd_bytes: 0,
        map_resident_bytes: 0,
        map_summary: "cluster client: the volume's devices mapped shared".into(),
        flush_instruction: "-".into(),
        small_write: "cow".into(),
        read_cache: "off".into(),
        medium: "dram: cluster clients write the shared devices directly".into(),
    };
    // The RPC counters of the measured phase alone (not of making the data set
    // nor of the warm-up): read at its start, and once what it queued is sent.
    let at_start = std::cell::RefCell::new(ClientStats::default());
    let r = mnemofs_bench::measure_observed(&cfg, &client, &info, "cluster", 0, &|| {
        *at_start.borrow_mut() = client.client_stats()
    })
    .map_err(|e| CliError::new(format!("client: {e}")))?;
    let samples: Vec<(f64, usize, usize, usize)> = client
        .commit_samples()
        .into_iter()
        .map(|s: Sample| (s.t_ms, s.queue, s.threads, s.degree))
        .collect();
    let t = Instant::now();
    client
        .flush()
        .map_err(|e| CliError::new(format!("client flush: {e}")))?;
    let drain_s = t.elapsed().as_secs_f64();
    let end: ClientStats = client.client_stats();
    let st = measured_stats(&at_start.borrow(), &end);
    client
        .close()
        .map_err(|e| CliError::new(format!("client close: {e}")))?;
    let out = ClientOut {
        ops: r.ops,
        duration_s: r.duration_s,
        drain_s,
        p50_ns: r.p50_ns,
        p99_ns: r.p99_ns,
        rpcs: st.rpcs,
        commit_rpcs: st.commit_rpcs,
        commits: st.commits,
        layout_rpcs: st.layout_rpcs,
        delegations: st.delegations,
        recalls: st.recalls,
        retries: st.retries,
        batches: st.batches,
        batch_files: st.batch_files,
        peak_threads: st.peak_threads,
        commit_delay_p99_ns: st.commit_delay_ns[1],
        samples,
    };
    emit(&serde_json::to_string(&out).map_err(|e| CliError::new(e.to_string()))?);
    Ok(())
}
