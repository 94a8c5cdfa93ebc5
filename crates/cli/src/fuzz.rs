//! `mnemofs fuzz`: the mutation fuzzer for hostile images (crates/crashtest/src/fuzz).
//!
//! The driver runs `--jobs` worker processes (this binary, `fuzz --worker`), hands
//! them chunks of seeds on stdin and reads one line per step and per image from
//! their stdout. A worker that dies (abort, signal, allocation failure) or goes
//! silent past the deadline is recorded as a failure of the seed in flight, killed
//! if needed and restarted from the next seed. Image `i` of a run has seed
//! `--seed + i`; `--only SEED` replays one image in-process and says what happens.

use crate::error::{CliError, CliResult};
use clap::Args;
use crashtest::fuzz::{check_with_deadline, Class, FsckOutcome, Fuzzer, MountOutcome, Verdict};
use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct FuzzArgs {
    /// Mutated images to check
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub images: u64,
    /// First seed: image i has seed S+i
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Worker processes (0 = one per CPU)
    #[arg(long, value_name = "J", default_value_t = 0)]
    pub jobs: usize,
    /// Replay the image of this seed alone: its base image, each mutation, each step
    #[arg(long, value_name = "SEED")]
    pub only: Option<u64>,
    /// Deadline of each step (fsck, mount, walk, workload, unmount, ...) in ms
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub deadline_ms: u64,
    /// Write the images of failing seeds to DIR (seed-<S>.img)
    #[arg(long, value_name = "DIR")]
    pub save_failures: Option<PathBuf>,
    /// Only write the mutated images of the seeds to DIR (seed-<S>.img), check
    /// nothing (for running `mnemofs fsck` or `mount` on them)
    #[arg(long, value_name = "DIR")]
    pub write_images: Option<PathBuf>,
    /// Stop printing failure lines after this many (all are counted)
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub max_printed: usize,
    /// Internal: run as a worker process (seed chunks on stdin)
    #[arg(long, hide = true)]
    pub worker: bool,
}

fn usage(msg: String) -> CliError {
    CliError::new(msg).with_code(2)
}

/// Bounds a worker's address space, so that a hostile size that makes the engine
/// allocate without limit aborts the worker instead of exhausting the machine.
fn limit_memory() {
    let lim = libc::rlimit {
        rlim_cur: 8 << 30,
        rlim_max: 8 << 30,
    };
    // SAFETY: setrlimit reads the valid rlimit passed; failure leaves the limit as is.
    unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) };
}

pub fn run(a: &FuzzArgs) -> CliResult<i32> {
    if a.deadline_ms == 0 {
        return Err(usage("--deadline-ms must be at least 1".into()));
    }
    let deadline = Duration::from_millis(a.deadline_ms);
    if a.worker {
        return worker(deadline);
    }
    if let Some(seed) = a.only {
        return only(seed, deadline, a.save_failures.as_ref());
    }
    if a.seed.checked_add(a.images).is_none() {
        return Err(usage("--seed plus --images overflows".into()));
    }
    if let Some(dir) = &a.write_images {
        return write_images(a, dir);
    }
    drive(a, deadline)
}

fn build() -> CliResult<Fuzzer> {
    Fuzzer::new().map_err(|e| CliError::new(format!("building the corpus: {e}")))
}

fn save(dir: &PathBuf, seed: u64, bytes: &[u8]) -> CliResult<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| CliError::new(format!("{}: {e}", dir.display())))?;
    let p = dir.join(format!("seed-{seed}.img"));
    std::fs::write(&p, bytes).map_err(|e| CliError::new(format!("{}: {e}", p.display())))?;
    Ok(p)
}

fn write_images(a: &FuzzArgs, dir: &PathBuf) -> CliResult<i32> {
    let fz = build()?;
    for s in a.seed..a.seed.saturating_add(a.images) {
        let img = fz.image(s);
        save(dir, s, &img.bytes)?;
    }
    crate::output::emit(&format!(
        "fuzz: wrote {} images (seeds {}..{}) to {}",
        a.images,
        a.seed,
        a.seed.saturating_add(a.images),
        dir.display()
    ));
    Ok(0)
}

fn fsck_word(f: &FsckOutcome) -> &'static str {
    match f {
        FsckOutcome::NotRun => "notrun",
        FsckOutcome::Refused(_) => "refused",
        FsckOutcome::Clean => "clean",
        FsckOutcome::Problems(..) => "problems",
    }
}

fn mount_word(m: &MountOutcome) -> &'static str {
    match m {
        MountOutcome::NotRun => "notrun",
        MountOutcome::Refused(_) => "refused",
        MountOutcome::Mounted => "mounted",
    }
}

fn clean_field(s: &str) -> String {
    s.replace(['\t', '\n', '\r'], " ")
}

fn only(seed: u64, deadline: Duration, save_dir: Option<&PathBuf>) -> CliResult<i32> {
    crashtest::fuzz::oracle::install_quiet_hook();
    limit_memory();
    let fz = build()?;
    let img = fz.image(seed);
    let base = &fz.corpus[img.base];
    crate::output::emit(&format!(
        "seed {seed}: base image {} ({} CPUs, written in {} mode), mounted in {} mode",
        base.name,
        base.cpus,
        base.mode.name(),
        img.mode.name()
    ));
    for (i, m) in img.mutations.iter().enumerate() {
        crate::output::emit(&format!("  mutation {}: {m}", i + 1));
    }
    if let Some(d) = save_dir {
        let p = save(d, seed, &img.bytes)?;
        crate::output::emit(&format!("  image saved to {}", p.display()));
    }
    let bytes = Arc::new(img.bytes);
    let (v, hung) = check_with_deadline(bytes, img.mode, deadline, |s| {
        crate::output::emit(&format!("  step {s}"));
        let _ = std::io::stdout().flush();
    });
    crate::output::emit(&format!("  fsck: {:?}", v.fsck));
    crate::output::emit(&format!("  mount: {:?}", v.mount));
    let code = match &v.failure {
        None => {
            crate::output::emit("  result: ok");
            0
        }
        Some(f) => {
            crate::output::emit(&format!(
                "  result: FAILURE {} in step {}: {}",
                f.class.name(),
                f.step,
                f.msg
            ));
            1
        }
    };
    let _ = std::io::stdout().flush();
    if hung {
        // The checking thread is still running; do not wait for it.
        std::process::exit(code);
    }
    Ok(code)
}

/// The worker: reads `FROM COUNT` lines, checks those seeds, prints `S` lines at
/// each step and an `R` line per image, `C` after each chunk.
fn worker(deadline: Duration) -> CliResult<i32> {
    crashtest::fuzz::oracle::install_quiet_hook();
    limit_memory();
    let fz = build()?;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| CliError::new(format!("worker stdin: {e}")))?;
        let mut it = line.split_whitespace().map(|x| x.parse::<u64>());
        let (Some(Ok(from)), Some(Ok(count))) = (it.next(), it.next()) else {
            return Err(usage(format!("worker: bad command {line:?}")));
        };
        for seed in from..from.saturating_add(count) {
            let _ = writeln!(out, "S\t{seed}\tbegin");
            let _ = out.flush();
            let img = fz.image(seed);
            let base = fz.corpus[img.base].name.clone();
            let bytes = Arc::new(img.bytes);
            let (v, hung) = check_with_deadline(bytes, img.mode, deadline, |s| {
                let _ = writeln!(std::io::stdout(), "S\t{seed}\t{s}");
                let _ = std::io::stdout().flush();
            });
            let _ = writeln!(out, "{}", result_line(seed, &base, &v));
            let _ = out.flush();
            if hung {
                std::process::exit(3);
            }
        }
        let _ = writeln!(out, "C");
        let _ = out.flush();
    }
    Ok(0)
}

fn result_line(seed: u64, base: &str, v: &Verdict) -> String {
    let (class, step, msg) = match &v.failure {
        None => ("ok", "", String::new()),
        Some(f) => (f.class.name(), f.step, clean_field(&f.msg)),
    };
    format!(
        "R\t{seed}\t{}\t{}\t{class}\t{step}\t{base}\t{msg}",
        fsck_word(&v.fsck),
        mount_word(&v.mount)
    )
}

/// Counters of a run.
#[derive(Default)]
struct Tally {
    images: u64,
    fsck: BTreeMap<&'static str, u64>,
    mount: BTreeMap<&'static str, u64>,
    failures: BTreeMap<Class, u64>,
    failed: Vec<(u64, Class, String)>,
}

struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    /// The chunk it works on: next seed to finish, end (exclusive).
    chunk: Option<(u64, u64)>,
    /// The seed in flight and its step.
    in_flight: Option<(u64, String)>,
    last: Instant,
}

enum Msg {
    Line(usize, u64, String),
    Eof(usize, u64),
}

fn spawn(id: usize, gen: u64, deadline_ms: u64, tx: &mpsc::Sender<Msg>) -> CliResult<Worker> {
    let exe = std::env::current_exe().map_err(|e| CliError::new(format!("current exe: {e}")))?;
    let mut child = Command::new(exe)
        .args([
            "fuzz",
            "--worker",
            "--deadline-ms",
            &deadline_ms.to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| CliError::new(format!("starting a worker: {e}")))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| CliError::new("worker without stdout"))?;
    let tx = tx.clone();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines() {
            match l {
                Ok(l) => {
                    if tx.send(Msg::Line(id, gen, l)).is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = tx.send(Msg::Eof(id, gen));
    });
    let stdin = child.stdin.take();
    Ok(Worker {
        child,
        stdin,
        chunk: None,
        in_flight: None,
        last: Instant::now(),
    })
}

fn give(w: &mut Worker, queue: &mut VecDeque<(u64, u64)>) {
    match queue.pop_front() {
        Some((from, end)) => {
            w.chunk = Some((from, end));
            w.last = Instant::now();
            if let Some(s) = &mut w.stdin {
                let _ = writeln!(s, "{from} {}", end - from);
                let _ = s.flush();
            }
        }
        None => {
            w.chunk = None;
            w.stdin = None; // EOF: the worker ends
        }
    }
}

fn drive(a: &FuzzArgs, deadline: Duration) -> CliResult<i32> {
    let t0 = Instant::now();
    let jobs = if a.jobs == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        a.jobs
    };
    let end = a.seed.saturating_add(a.images);
    let chunk = (a.images / (jobs as u64 * 8)).clamp(1, 500);
    let mut queue: VecDeque<(u64, u64)> = VecDeque::new();
    let mut s = a.seed;
    while s < end {
        let e = (s + chunk).min(end);
        queue.push_back((s, e));
        s = e;
    }
    let (tx, rx) = mpsc::channel();
    let jobs = jobs.min(queue.len().max(1));
    let mut gens = vec![0u64; jobs];
    let mut ws: Vec<Option<Worker>> = Vec::new();
    for id in 0..jobs {
        let mut w = spawn(id, 0, a.deadline_ms, &tx)?;
        give(&mut w, &mut queue);
        ws.push(Some(w));
    }
    let mut t = Tally::default();
    let mut printed = 0usize;
    // A worker the driver must kill: silent this long with an image in flight (it
    // reports its own hangs at the deadline), or this long starting up.
    let backstop = deadline * 3 + Duration::from_secs(2);
    let startup = Duration::from_secs(60);
    let mut last_progress = Instant::now();
    let mut fail = |t: &mut Tally, seed: u64, class: Class, what: String| {
        *t.failures.entry(class).or_default() += 1;
        if printed < a.max_printed {
            crate::output::emit(&format!(
                "FAIL {} seed {seed}: {what} | reproduce: mnemofs fuzz --only {seed}",
                class.name()
            ));
            printed += 1;
        }
        t.failed.push((seed, class, what));
    };
    while ws.iter().any(|w| w.is_some()) {
        let msg = rx.recv_timeout(Duration::from_millis(200));
        let mut restart: Option<(usize, Option<(Class, String)>)> = None;
        match msg {
            Ok(Msg::Line(id, g, l)) if g == gens[id] => {
                let Some(w) = ws[id].as_mut() else { continue };
                w.last = Instant::now();
                let f: Vec<&str> = l.split('\t').collect();
                match f.first().copied() {
                    Some("S") if f.len() >= 3 => {
                        if let Ok(seed) = f[1].parse::<u64>() {
                            w.in_flight = Some((seed, f[2].to_string()));
                        }
                    }
                    Some("R") if f.len() >= 8 => {
                        let Ok(seed) = f[1].parse::<u64>() else {
                            continue;
                        };
                        w.in_flight = None;
                        if let Some((_, e)) = &mut w.chunk {
                            w.chunk = Some((seed + 1, *e));
                        }
                        t.images += 1;
                        for (map, k) in [(&mut t.fsck, f[2]), (&mut t.mount, f[3])] {
                            let k: &'static str = match k {
                                "clean" => "clean",
                                "problems" => "problems",
                                "refused" => "refused",
                                "mounted" => "mounted",
                                _ => "notrun",
                            };
                            *map.entry(k).or_default() += 1;
                        }
                        if let Some(c) = Class::by_name(f[4]) {
                            let what = format!(
                                "base {} step {}: {} (fsck {}, mount {})",
                                f[6], f[5], f[7], f[2], f[3]
                            );
                            fail(&mut t, seed, c, what);
                        }
                        if last_progress.elapsed() > Duration::from_secs(10) {
                            last_progress = Instant::now();
                            let el = t0.elapsed().as_secs_f64();
                            crate::output::note(&format!(
                                "fuzz: {} / {} images, {} failures, {:.0} images/s",
                                t.images,
                                a.images,
                                t.failed.len(),
                                t.images as f64 / el
                            ));
                        }
                    }
                    Some("C") => give(w, &mut queue),
                    _ => {}
                }
            }
            Ok(Msg::Line(..)) => {}
            Ok(Msg::Eof(id, g)) if g == gens[id] => {
                let Some(w) = ws[id].as_mut() else { continue };
                let status = w.child.wait();
                let finished = w.chunk.is_none() && w.in_flight.is_none();
                if finished && status.as_ref().is_ok_and(|s| s.success()) {
                    ws[id] = None;
                    continue;
                }
                let how = match &status {
                    Ok(s) => {
                        use std::os::unix::process::ExitStatusExt;
                        match (s.code(), s.signal()) {
                            (Some(3), _) => None, // a hang it reported itself
                            (Some(c), _) => Some(format!("worker exited with status {c}")),
                            (None, Some(sig)) => Some(format!("worker killed by signal {sig}")),
                            _ => Some("worker ended".to_string()),
                        }
                    }
                    Err(e) => Some(format!("worker lost: {e}")),
                };
                restart = Some((id, how.map(|h| (Class::Abort, h))));
            }
            Ok(Msg::Eof(..)) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        // Silent workers.
        if restart.is_none() {
            for (id, w) in ws.iter_mut().enumerate() {
                let Some(w) = w else { continue };
                let limit = if w.in_flight.is_some() {
                    backstop
                } else {
                    startup
                };
                if w.chunk.is_some() && w.last.elapsed() > limit {
                    let _ = w.child.kill();
                    let _ = w.child.wait();
                    let step = w.in_flight.as_ref().map_or("start".into(), |x| x.1.clone());
                    restart = Some((
                        id,
                        Some((
                            Class::Hang,
                            format!(
                                "worker silent for {} ms in step {step}; killed",
                                limit.as_millis()
                            ),
                        )),
                    ));
                    break;
                }
            }
        }
        if let Some((id, what)) = restart {
            let Some(mut w) = ws[id].take() else { continue };
            let mut next = w.chunk;
            if let Some((seed, step)) = w.in_flight.take() {
                if let Some((class, h)) = what {
                    t.images += 1;
                    fail(&mut t, seed, class, format!("step {step}: {h}"));
                }
                next = next.map(|(_, e)| (seed + 1, e));
            }
            gens[id] += 1;
            let mut nw = spawn(id, gens[id], a.deadline_ms, &tx)?;
            match next {
                Some((from, e)) if from < e => queue.push_front((from, e)),
                _ => {}
            }
            give(&mut nw, &mut queue);
            ws[id] = Some(nw);
        }
    }
    let el = t0.elapsed().as_secs_f64();
    if let Some(dir) = &a.save_failures {
        if !t.failed.is_empty() {
            let fz = build()?;
            for (seed, _, _) in &t.failed {
                save(dir, *seed, &fz.image(*seed).bytes)?;
            }
            crate::output::emit(&format!(
                "fuzz: {} failing images saved to {}",
                t.failed.len(),
                dir.display()
            ));
        }
    }
    let g = |m: &BTreeMap<&'static str, u64>, k: &str| m.get(k).copied().unwrap_or(0);
    let classes: Vec<String> = Class::ALL
        .iter()
        .map(|c| format!("{} {}", c.name(), t.failures.get(c).copied().unwrap_or(0)))
        .collect();
    crate::output::emit(&format!(
        "fuzz: {} images (seeds {}..{}), mount refused {}, mounted {}; fsck clean {}, named problems {}, refused {}; failures {} ({}); {:.1} s, {:.0} images/s",
        t.images,
        a.seed,
        end,
        g(&t.mount, "refused"),
        g(&t.mount, "mounted"),
        g(&t.fsck, "clean"),
        g(&t.fsck, "problems"),
        g(&t.fsck, "refused"),
        t.failed.len(),
        classes.join(", "),
        el,
        t.images as f64 / el
    ));
    Ok(if t.failed.is_empty() { 0 } else { 1 })
}
