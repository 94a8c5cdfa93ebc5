//! Kill tests (docs/CLUSTER.md, "What each crash loses"): a client process killed
//! with SIGKILL at random points of a workload loses nothing it had fsynced, the
//! server takes back its delegated space when its lease runs out, and after the
//! server's clean shutdown fsck finds the volume clean — no block owned twice, no
//! block leaked (fsck checks the saved free list against what the logs own).
//!
//! The child is this test binary run again with `MNEMOFS_KILL_CHILD` set.

use mnemofs::{FileSystem, MkfsOptions, ROOT_INO};
use mnemofs_cluster::netdelay::DelayProxy;
use mnemofs_cluster::netns::NetNs;
use mnemofs_cluster::{mds_mount_options, Client, ClientConfig, CommitMode, MdsConfig, MdsHandle};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The bytes of file `i` (its length from `i` too).
fn content(i: u64) -> Vec<u8> {
    let len = 1000 + (i.wrapping_mul(7919) % 40_000) as usize;
    (0..len)
        .map(|k| ((k as u64 ^ i.wrapping_mul(0x9e37_79b9)) % 251) as u8)
        .collect()
}

/// The child: writes files in pieces (partial pages included) and prints
/// `synced I` after each fsync returned, until it is killed.
fn child(addr: &str, data: &str, mode: &str) {
    let commit = if mode == "delayed" {
        CommitMode::Delayed
    } else {
        CommitMode::Sync
    };
    let c = Client::connect(&ClientConfig {
        mds: addr.to_string(),
        data: mnemofs::DeviceSpec::parse_list(data).unwrap(),
        commit,
        delayed: Default::default(),
        subdir: None,
    })
    .unwrap();
    let mut out = std::io::stdout();
    // A line of its own for what follows: run with one test thread (a host with one
    // CPU), the harness has printed `test NAME ... ` without a newline.
    println!();
    // A failure, and whether it is one a lease's end explains (ESTALE: the
    // server expired the session under the child, with its uncommitted writes).
    let mut file = |i: u64| -> Result<(), (String, bool)> {
        let e = |what: &str, e: mnemofs::FsError| {
            let stale = e.errno() == libc::ESTALE;
            (format!("f{i}: {what}: {e}"), stale)
        };
        let io = |x: std::io::Error| (format!("stdout: {x}"), false);
        let name = format!("f{i}");
        let ino = c
            .create(ROOT_INO, name.as_bytes(), 0o644, 0, 0)
            .map_err(|x| e("create", x))?
            .ino;
        let bytes = content(i);
        let mut off = 0;
        for piece in bytes.chunks(3000 + (i as usize % 5) * 1111) {
            c.write(ino, off, piece).map_err(|x| e("write", x))?;
            off += piece.len() as u64;
        }
        // Every other file is fsynced; the rest may be lost.
        if i.is_multiple_of(2) {
            c.fsync(ino).map_err(|x| e("fsync", x))?;
            writeln!(out, "synced {i}").map_err(io)?;
            out.flush().map_err(io)?;
        }
        c.release(ino).map_err(|x| e("release", x))?;
        if !i.is_multiple_of(2) {
            // The others are read back through an open of their own (under
            // delayed commit one without a call: the lookup brings the layout),
            // unlinked while open (the unlink recalls the layout, its answer tells
            // of the open and of the commits still queued) and released: whatever
            // the kill interrupts, no pin and no block may be left behind.
            let a = c
                .lookup(ROOT_INO, name.as_bytes())
                .map_err(|x| e("lookup", x))?;
            c.open(a.ino).map_err(|x| e("open", x))?;
            let mut got = vec![0u8; bytes.len()];
            let n = c.read(a.ino, 0, &mut got).map_err(|x| e("read", x))?;
            if n != bytes.len() || got != bytes {
                // Explained only if a commit of it failed so (its pages then
                // read as they were before it).
                let stale = c
                    .close_check(a.ino)
                    .is_err_and(|x| x.errno() == libc::ESTALE);
                return Err((format!("f{i} read back wrong ({n} bytes)"), stale));
            }
            c.unlink(ROOT_INO, name.as_bytes())
                .map_err(|x| e("unlink", x))?;
            c.release(a.ino).map_err(|x| e("release", x))?;
        }
        Ok(())
    };
    for i in 0u64.. {
        if let Err((what, stale)) = file(i) {
            // The session ended (the lease ran out while this process waited for
            // a core: the server expired it, and its uncommitted writes went with
            // it): what failed then is what a lease's end is allowed to take, not
            // a bug; the parent accepts this exit. Anything else is one.
            if stale || c.client_stats().sessions > 1 {
                std::process::exit(EXPIRED);
            }
            panic!("{what}");
        }
    }
}

/// The child's exit when its session ended under it before the kill.
const EXPIRED: i32 = 3;

/// A fresh 256 MiB volume in `dir`: its image and its device list.
fn fresh_volume(dir: &std::path::Path) -> (std::path::PathBuf, Vec<mnemofs::DeviceSpec>) {
    let path = dir.join("vol.img");
    mnemofs::mkfs(
        &path,
        &MkfsOptions {
            size: 256 << 20,
            ..Default::default()
        },
    )
    .unwrap();
    let devs = vec![mnemofs::DeviceSpec {
        path: path.clone(),
        node: None,
    }];
    (path, devs)
}

/// A client of `addr` in this process.
fn client_of(addr: &str, devs: &[mnemofs::DeviceSpec], commit: CommitMode) -> Client {
    Client::connect(&ClientConfig {
        mds: addr.to_string(),
        data: devs.to_vec(),
        commit,
        delayed: Default::default(),
        subdir: None,
    })
    .unwrap()
}

/// The writer child (`child`) against `addr`; returns it and a thread that
/// collects the files it reports fsynced, once the first one is (the kill point
/// counts from there: the server's startup grace and the child's start are not
/// part of the workload).
fn writer_child(
    addr: &str,
    path: &std::path::Path,
    mode: &str,
) -> (std::process::Child, std::thread::JoinHandle<Vec<u64>>) {
    let me = std::env::current_exe().unwrap();
    let mut kid = Command::new(me)
        .args([
            "--exact",
            "client_killed_with_sigkill_loses_nothing_fsynced",
            "--nocapture",
        ])
        .env("MNEMOFS_KILL_CHILD", addr)
        .env("MNEMOFS_KILL_DATA", path.display().to_string())
        .env("MNEMOFS_KILL_MODE", mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = kid.stdout.take().unwrap();
    let (first_tx, first_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut synced = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(i) = line
                .strip_prefix("synced ")
                .and_then(|s| s.parse::<u64>().ok())
            {
                if synced.is_empty() {
                    let _ = first_tx.send(());
                }
                synced.push(i);
            }
        }
        synced
    });
    first_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the child fsynced nothing");
    (kid, reader)
}

/// Every file of `synced`, byte for byte, through `c`.
fn check_synced(c: &Client, synced: &[u64], what: &str) {
    for &i in synced {
        let a = c.lookup(ROOT_INO, format!("f{i}").as_bytes()).unwrap();
        let want = content(i);
        assert_eq!(a.size, want.len() as u64, "{what}: f{i} size");
        let mut got = vec![0u8; want.len()];
        assert_eq!(c.read(a.ino, 0, &mut got).unwrap(), want.len());
        assert!(got == want, "{what}: f{i} differs");
    }
}

/// Seeded kill points: `n` delays of `base + (0..spread)` ms, modes alternating.
fn kill_points(seed: u64, n: usize, base: u64, spread: u64) -> Vec<(&'static str, Duration)> {
    let mut x = seed;
    (0..n)
        .map(|round| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mode = if round % 2 == 0 { "sync" } else { "delayed" };
            (mode, Duration::from_millis(base + x % spread))
        })
        .collect()
}

fn run_round(mode: &str, kill_after: Duration) {
    let dir = tempfile::tempdir_in(pm::scratch_dir()).unwrap();
    let (path, devs) = fresh_volume(dir.path());
    let fs = mnemofs::mount_devices(&devs, &mds_mount_options()).unwrap();
    let cfg = MdsConfig {
        lease: Duration::from_millis(300),
        chunk_blocks: 64,
    };
    let mds = MdsHandle::start(fs, "127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let (mut kid, reader) = writer_child(&mds.addr().to_string(), &path, mode);
    std::thread::sleep(kill_after);
    kid.kill().unwrap(); // SIGKILL
    let status = kid.wait().unwrap();
    // Not dead by itself (a failed call, a wrong read-back) before the kill,
    // unless its session ended under it first (see `child`).
    assert!(
        std::os::unix::process::ExitStatusExt::signal(&status) == Some(libc::SIGKILL)
            || status.code() == Some(EXPIRED),
        "{mode}: the client died on its own: {status:?}"
    );
    let synced = reader.join().unwrap();
    // The lease runs out; the server takes the space back.
    let t0 = Instant::now();
    while mds.stats().expired.load(Ordering::Relaxed) == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the killed client's session never expired"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Every fsynced file, byte for byte, through another client.
    let b = client_of(&mds.addr().to_string(), &devs, CommitMode::Sync);
    check_synced(&b, &synced, &format!("{mode}, client killed"));
    b.close().unwrap();
    mds.shutdown().unwrap();
    // Clean: nothing owned twice, no block leaked (the saved free list checked).
    let report = mnemofs::fsck_devices(&devs).unwrap();
    assert!(report.is_clean(), "{mode}: {report:?}");
    eprintln!(
        "{mode}: killed {} ms after its first fsync, {} fsynced files checked",
        kill_after.as_millis(),
        synced.len()
    );
}

#[test]
fn client_killed_with_sigkill_loses_nothing_fsynced() {
    if let Ok(addr) = std::env::var("MNEMOFS_KILL_CHILD") {
        let data = std::env::var("MNEMOFS_KILL_DATA").unwrap();
        let mode = std::env::var("MNEMOFS_KILL_MODE").unwrap_or_default();
        child(&addr, &data, &mode);
        return;
    }
    // Kill points from a fixed seed: reproducible, spread over the workload.
    for (mode, after) in kill_points(0x2545_f491_4f6c_dd1d, 8, 0, 700) {
        run_round(mode, after);
    }
}

/// The server child: serves the volume on the given address until its stdin
/// closes, then shuts down cleanly.
fn server_child(addr: &str, data: &str) {
    let devs = mnemofs::DeviceSpec::parse_list(data).unwrap();
    let fs = mnemofs::mount_devices(&devs, &mds_mount_options()).unwrap();
    let cfg = MdsConfig {
        lease: Duration::from_millis(300),
        chunk_blocks: 64,
    };
    let mds = MdsHandle::start(fs, addr.parse().unwrap(), cfg).unwrap();
    // (On a line of its own: see `child`.)
    println!("\nready");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    mds.shutdown().unwrap();
}

fn spawn_server(addr: &str, path: &std::path::Path) -> std::process::Child {
    spawn_server_in(None, addr, path)
}

/// `spawn_server`, inside network namespace `ns` when one is given.
fn spawn_server_in(ns: Option<&NetNs>, addr: &str, path: &std::path::Path) -> std::process::Child {
    let me = std::env::current_exe().unwrap();
    let mut cmd = match ns {
        Some(ns) => ns.command(me),
        None => Command::new(me),
    };
    let mut kid = cmd
        .args([
            "--exact",
            "server_killed_with_sigkill_loses_nothing_answered",
            "--nocapture",
        ])
        .env("MNEMOFS_KILL_SERVER", addr)
        .env("MNEMOFS_KILL_DATA", path.display().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // (The test harness prints its own lines first.)
    let mut lines = BufReader::new(kid.stdout.take().unwrap()).lines();
    let ready = lines.by_ref().map_while(|l| l.ok()).any(|l| l == "ready");
    assert!(ready, "the server child did not start");
    // Its later output is read too (a closed pipe would fail its exit).
    std::thread::spawn(move || lines.for_each(drop));
    kid
}

fn free_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// How the clients of a server round reach the server.
enum Net<'a> {
    /// On loopback, on a free port.
    Loopback,
    /// The server in this namespace, the clients in the test's, through a delay
    /// proxy with this one-way delay on the way (the veth pair's own round trip
    /// comes on top).
    Namespace(&'a NetNs, Duration),
}

fn server_round(mode: &str, kill_after: Duration) {
    server_round_over(mode, kill_after, &Net::Loopback);
}

fn server_round_over(mode: &str, kill_after: Duration, net: &Net) {
    let dir = tempfile::tempdir_in(pm::scratch_dir()).unwrap();
    let (path, devs) = fresh_volume(dir.path());
    // (Inside a namespace of its own every port is free; the restarted server
    // takes the same one.)
    let (ns, addr, proxy) = match net {
        Net::Loopback => (None, free_port(), None),
        Net::Namespace(ns, one_way) => {
            let addr = format!("{}:4100", ns.addr());
            let proxy = DelayProxy::start(
                "127.0.0.1:0".parse().unwrap(),
                addr.parse().unwrap(),
                *one_way,
            )
            .unwrap();
            (Some(*ns), addr, Some(proxy))
        }
    };
    let mut server = spawn_server_in(ns, &addr, &path);
    // Where clients connect.
    let to = proxy
        .as_ref()
        .map_or(addr.clone(), |p| p.addr().to_string());
    let commit = if mode == "delayed" {
        CommitMode::Delayed
    } else {
        CommitMode::Sync
    };
    let c = client_of(&to, &devs, commit);
    // Writes files; a file counts once its fsync returned Ok. Calls fail while
    // the server is down; the workload goes on with the next file.
    let mut synced = Vec::new();
    let mut failed = 0;
    let mut i = 0u64;
    let mut step = |c: &Client, synced: &mut Vec<u64>, failed: &mut u64| {
        let r = (|| -> mnemofs::Result<()> {
            let ino = c
                .create(ROOT_INO, format!("f{i}").as_bytes(), 0o644, 0, 0)?
                .ino;
            let bytes = content(i);
            let mut off = 0;
            for piece in bytes.chunks(3000 + (i as usize % 5) * 1111) {
                c.write(ino, off, piece)?;
                off += piece.len() as u64;
            }
            c.fsync(ino)?;
            let _ = c.release(ino);
            Ok(())
        })();
        match r {
            Ok(()) => synced.push(i),
            Err(_) => *failed += 1,
        }
        i += 1;
    };
    let t0 = Instant::now();
    while t0.elapsed() < kill_after {
        step(&c, &mut synced, &mut failed);
    }
    server.kill().unwrap(); // SIGKILL, mid-workload
    server.wait().unwrap();
    let before = synced.len();
    // A few calls while it is down, then it comes back (recovery at mount).
    for _ in 0..3 {
        step(&c, &mut synced, &mut failed);
    }
    let mut server = spawn_server_in(ns, &addr, &path);
    // The client goes on: a new session once the server answers again.
    let t1 = Instant::now();
    while synced.len() < before + 20 {
        assert!(
            t1.elapsed() < Duration::from_secs(30),
            "{mode}: no progress after the restart"
        );
        step(&c, &mut synced, &mut failed);
    }
    // Every file whose fsync returned, byte for byte.
    check_synced(&c, &synced, &format!("{mode}, server killed"));
    // And through a second client, of the other commit mode.
    let other = if mode == "delayed" {
        CommitMode::Sync
    } else {
        CommitMode::Delayed
    };
    let b = client_of(&to, &devs, other);
    check_synced(
        &b,
        &synced,
        &format!("{mode}, server killed, second client"),
    );
    b.close().unwrap();
    c.close().unwrap();
    drop(server.stdin.take()); // clean shutdown
    assert!(server.wait().unwrap().success());
    let report = mnemofs::fsck_devices(&devs).unwrap();
    assert!(report.is_clean(), "{mode}: {report:?}");
    eprintln!(
        "{mode}: server killed after {} ms; {} files fsynced ({before} before the kill), {failed} failed calls; server {}",
        kill_after.as_millis(),
        synced.len(),
        match net {
            Net::Loopback => format!("on loopback, {addr}"),
            Net::Namespace(ns, d) => format!(
                "in namespace {} at {addr}, through a {} us round trip",
                ns.name(),
                2 * d.as_micros()
            ),
        }
    );
}

#[test]
fn server_killed_with_sigkill_loses_nothing_answered() {
    if let Ok(addr) = std::env::var("MNEMOFS_KILL_SERVER") {
        let data = std::env::var("MNEMOFS_KILL_DATA").unwrap();
        server_child(&addr, &data);
        return;
    }
    // After the startup grace (the first session waits for it).
    for (mode, after) in kill_points(0x9e37_79b9_7f4a_7c15, 6, 500, 700) {
        server_round(mode, after);
    }
}

/// The server rounds with the server in a network namespace of its own, reached
/// over a veth pair through a 100 µs round trip (docs/CLUSTER.md, "Across network
/// namespaces"). Needs root and iproute2; skipped, saying so, without them.
#[test]
fn server_killed_across_network_namespaces_loses_nothing_answered() {
    let Some(ns) = NetNs::or_skip() else {
        return;
    };
    let net = Net::Namespace(&ns, Duration::from_micros(50));
    for (mode, after) in kill_points(0x5151_7a7a_0f0f_3c3c, 4, 500, 700) {
        server_round_over(mode, after, &net);
    }
}

#[test]
fn client_and_server_killed_together_lose_nothing_fsynced() {
    for (mode, after) in kill_points(0x1234_5678_9abc_def1, 4, 0, 500) {
        let dir = tempfile::tempdir_in(pm::scratch_dir()).unwrap();
        let (path, devs) = fresh_volume(dir.path());
        let addr = free_port();
        let mut server = spawn_server(&addr, &path);
        let (mut kid, reader) = writer_child(&addr, &path, mode);
        std::thread::sleep(after);
        // Both at once: the server first, then the client.
        server.kill().unwrap();
        kid.kill().unwrap();
        server.wait().unwrap();
        kid.wait().unwrap();
        let synced = reader.join().unwrap();
        let mut server = spawn_server(&addr, &path);
        let b = client_of(&addr, &devs, CommitMode::Sync);
        check_synced(&b, &synced, &format!("{mode}, both killed"));
        // The volume is usable: a file written now reads back.
        let f = b.create(ROOT_INO, b"after", 0o644, 0, 0).unwrap().ino;
        b.write(f, 0, &content(7)).unwrap();
        let mut got = vec![0u8; content(7).len()];
        b.read(f, 0, &mut got).unwrap();
        assert_eq!(got, content(7));
        b.close().unwrap();
        drop(server.stdin.take());
        assert!(server.wait().unwrap().success());
        let report = mnemofs::fsck_devices(&devs).unwrap();
        assert!(report.is_clean(), "{mode}: {report:?}");
        eprintln!(
            "{mode}: both killed {} ms after the first fsync, {} fsynced files checked",
            after.as_millis(),
            synced.len()
        );
    }
}
