//! What each thread of each workload does, through the engine interface
//! [`FileSystem`] (the same calls the FUSE adapter makes:
//! lookup/create/open/read/write/release/unlink/setattr), so any implementation of it
//! runs every workload.
//!
//! [`prepare`] builds the data set (not measured) and returns one [`Worker`] per
//! thread; the runner calls [`Worker::op`] in a loop and times each call. One call is
//! one operation: an I/O call for the FxMark and fio-style workloads, one flow step
//! (create, open, read whole file, append, fsync, close, delete, stat) for the
//! filebench-like ones, one create+write+close for `smallfiles`.

use crate::config::{Params, Workload};
use crate::dist::skewed_block;
use crate::error::{BenchError, BenchResultT};
use mnemofs::{FileSystem, FsError, Ino, SetAttr, ROOT_INO};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;

const MIB: u64 = 1 << 20;
/// Chunk of whole-file reads and writes (filebench's `iosize=1m`).
const WHOLE_IO: u64 = MIB;
/// A log file (webproxy, webserver, oltp, dwal) is truncated to 0 when it reaches
/// this size, so that long runs do not fill the image.
pub const LOG_LIMIT: u64 = 64 * MIB;
/// The per-thread log of the file-set workloads (fileserver, varmail, webproxy,
/// webserver) is truncated at this size, which [`image_size_for`] budgets per
/// thread (at `LOG_LIMIT` sixteen threads' logs outgrew the image).
pub const FLOW_LOG_LIMIT: u64 = 16 * MIB;
/// OLTP log writes.
pub const OLTP_LOG_IO: u64 = 256 << 10;

/// Bytes one operation moved for the user.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpOutcome {
    pub read: u64,
    pub written: u64,
}

impl OpOutcome {
    fn read(n: u64) -> OpOutcome {
        OpOutcome {
            read: n,
            written: 0,
        }
    }
    fn written(n: u64) -> OpOutcome {
        OpOutcome {
            read: 0,
            written: n,
        }
    }
}

/// One thread's part of a workload over the engine `E` (any [`FileSystem`]; the
/// calls inside `op` are monomorphized for `E`).
pub trait Worker<E: FileSystem>: Send {
    /// Runs one operation.
    fn op(&mut self, fs: &E) -> Result<OpOutcome, FsError>;
}

fn name(prefix: &str, i: u64) -> Vec<u8> {
    format!("{prefix}{i}").into_bytes()
}

fn pattern(len: u64, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

fn create<E: FileSystem>(fs: &E, dir: Ino, n: &[u8]) -> BenchResultT<Ino> {
    fs.create(dir, n, 0o644, 0, 0)
        .map(|a| a.ino)
        .map_err(|e| BenchError::fs(format!("create {}", String::from_utf8_lossy(n)), e))
}

fn mkdir<E: FileSystem>(fs: &E, n: &[u8]) -> BenchResultT<Ino> {
    fs.mkdir(ROOT_INO, n, 0o755, 0, 0)
        .map(|a| a.ino)
        .map_err(|e| BenchError::fs(format!("mkdir {}", String::from_utf8_lossy(n)), e))
}

/// Writes `size` bytes of a pattern to `ino` from offset 0, in 1 MiB calls.
fn fill<E: FileSystem>(fs: &E, ino: Ino, size: u64, chunk: &[u8]) -> Result<(), FsError> {
    let mut off = 0;
    while off < size {
        let n = (size - off).min(chunk.len() as u64);
        fs.write(ino, off, &chunk[..n as usize])?;
        off += n;
    }
    Ok(())
}

fn truncate<E: FileSystem>(fs: &E, ino: Ino) -> Result<(), FsError> {
    fs.setattr(
        ino,
        &SetAttr {
            size: Some(0),
            ..SetAttr::default()
        },
    )
    .map(|_| ())
}

/// Reads the whole file in 1 MiB calls; returns the bytes read.
fn read_whole<E: FileSystem>(fs: &E, ino: Ino, buf: &mut [u8]) -> Result<u64, FsError> {
    let mut off = 0u64;
    loop {
        let n = fs.read(ino, off, buf)? as u64;
        off += n;
        if n < buf.len() as u64 {
            return Ok(off);
        }
    }
}

/// Image size that holds the workload's data set with room for copy-on-write,
/// logs and metadata: twice the data plus 64 MiB, at least 128 MiB.
pub fn image_size_for(w: Workload, p: &Params, threads: usize) -> u64 {
    let t = threads as u64;
    let data = match w {
        Workload::Dwom | Workload::Drbm | Workload::Drbl => t * p.io_size.max(p.file_size),
        Workload::Dwal => t * (p.file_size + p.io_size),
        Workload::RandWrite
        | Workload::RandRead
        | Workload::Mixed
        | Workload::SeqRead
        | Workload::SkewRead => t * p.file_size,
        Workload::FileServer | Workload::VarMail | Workload::WebProxy | Workload::WebServer => {
            // Appended files grow; logs are capped per thread.
            let per_thread = files_per_thread(p.files, threads);
            t * per_thread * (p.file_size + 4 * p.io_size) + t * FLOW_LOG_LIMIT
        }
        Workload::Oltp => p.files.max(1) * p.file_size + LOG_LIMIT,
        Workload::SmallFiles => t * (p.files + 1) * p.file_size.div_ceil(4096) * 4096,
    };
    let size = data.saturating_mul(2).saturating_add(64 * MIB);
    size.max(128 * MIB).div_ceil(MIB) * MIB
}

/// Files of the fileset each thread owns (at least 8).
pub fn files_per_thread(files: u64, threads: usize) -> u64 {
    (files / threads.max(1) as u64).max(8)
}

/// Builds the data set and one worker per thread. `as_thread(t)` is called before
/// the files that only thread `t` uses are made (a benchmark on emulated NUMA nodes
/// makes them as a thread of `t`'s node, so that they are placed where that thread
/// would have made them itself, as fio's jobs lay out their own files); files every
/// thread shares are made as the calling thread.
pub fn prepare<E: FileSystem + 'static>(
    w: Workload,
    fs: &E,
    p: &Params,
    threads: usize,
    seed: u64,
    as_thread: &dyn Fn(usize),
) -> BenchResultT<Vec<Box<dyn Worker<E>>>> {
    let chunk = pattern(WHOLE_IO.max(p.io_size), 0x5a);
    let rng =
        |t: usize| SmallRng::seed_from_u64(seed ^ (t as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let io = pattern(p.io_size, 0xa5);
    let mut out: Vec<Box<dyn Worker<E>>> = Vec::with_capacity(threads);
    let fill_err = |what: &str, e| BenchError::fs(format!("filling {what}"), e);
    match w {
        Workload::Dwom | Workload::Drbm => {
            let ino = create(fs, ROOT_INO, b"shared")?;
            fill(fs, ino, threads as u64 * p.io_size, &chunk).map_err(|e| fill_err("shared", e))?;
            for t in 0..threads {
                let off = t as u64 * p.io_size;
                out.push(if w == Workload::Dwom {
                    Box::new(Overwrite {
                        file: fs.open_handle(ino).map_err(|e| BenchError::fs("open", e))?,
                        off,
                        buf: io.clone(),
                    })
                } else {
                    Box::new(ReadAt {
                        file: fs.open_handle(ino).map_err(|e| BenchError::fs("open", e))?,
                        off,
                        buf: vec![0; p.io_size as usize],
                    })
                });
            }
        }
        Workload::Drbl => {
            for t in 0..threads {
                as_thread(t);
                let ino = create(fs, ROOT_INO, &name("private", t as u64))?;
                fill(fs, ino, p.io_size, &chunk).map_err(|e| fill_err("private", e))?;
                out.push(Box::new(ReadAt {
                    file: fs.open_handle(ino).map_err(|e| BenchError::fs("open", e))?,
                    off: 0,
                    buf: vec![0; p.io_size as usize],
                }));
            }
        }
        Workload::Dwal => {
            for t in 0..threads {
                as_thread(t);
                let ino = create(fs, ROOT_INO, &name("append", t as u64))?;
                out.push(Box::new(Append {
                    ino,
                    size: 0,
                    limit: p.file_size.max(p.io_size),
                    buf: io.clone(),
                }));
            }
        }
        Workload::RandWrite
        | Workload::RandRead
        | Workload::Mixed
        | Workload::SeqRead
        | Workload::SkewRead => {
            let kind = match w {
                Workload::RandWrite => Access::Write,
                Workload::RandRead => Access::Read,
                Workload::Mixed => Access::Mixed(p.read_pct),
                Workload::SeqRead => Access::Sequential,
                _ => Access::Skewed,
            };
            for t in 0..threads {
                as_thread(t);
                let ino = create(fs, ROOT_INO, &name("data", t as u64))?;
                fill(fs, ino, p.file_size, &chunk).map_err(|e| fill_err("data file", e))?;
                out.push(Box::new(Random {
                    file: fs.open_handle(ino).map_err(|e| BenchError::fs("open", e))?,
                    io: p.io_size,
                    nblocks: p.file_size / p.io_size,
                    kind,
                    next: 0,
                    rng: rng(t),
                    wbuf: io.clone(),
                    rbuf: vec![0; p.io_size as usize],
                }));
            }
        }
        Workload::FileServer | Workload::VarMail | Workload::WebProxy | Workload::WebServer => {
            let per = files_per_thread(p.files, threads);
            // filebench preallocates 80% of the fileset (webserver: all of it).
            let prealloc = if w == Workload::WebServer {
                per
            } else {
                per * 8 / 10
            };
            for t in 0..threads {
                as_thread(t);
                let dir = mkdir(fs, &name("t", t as u64))?;
                let mut present = Vec::with_capacity(per as usize);
                let mut absent = Vec::new();
                for i in 0..per {
                    if i < prealloc {
                        let ino = create(fs, dir, &name("f", i))?;
                        fill(fs, ino, p.file_size, &chunk).map_err(|e| fill_err("fileset", e))?;
                        present.push(i);
                    } else {
                        absent.push(i);
                    }
                }
                let log = match w {
                    Workload::WebProxy | Workload::WebServer => Some((create(fs, dir, b"log")?, 0)),
                    _ => None,
                };
                out.push(Box::new(Flow {
                    steps: flow_of(w),
                    at: 0,
                    dir,
                    present,
                    absent,
                    cur: None,
                    log,
                    file_size: p.file_size,
                    append_max: p.io_size,
                    rng: rng(t),
                    whole: chunk.clone(),
                    rbuf: vec![0; WHOLE_IO as usize],
                }));
            }
        }
        Workload::Oltp => {
            let n = p.files.max(1);
            let mut data = Vec::with_capacity(n as usize);
            for i in 0..n {
                let ino = create(fs, ROOT_INO, &name("datafile", i))?;
                fill(fs, ino, p.file_size, &chunk).map_err(|e| fill_err("datafile", e))?;
                data.push(ino);
            }
            let log = create(fs, ROOT_INO, b"logfile")?;
            let log_buf = pattern(OLTP_LOG_IO, 0x3c);
            for t in 0..threads {
                out.push(Box::new(Oltp {
                    data: data.clone(),
                    log,
                    nblocks: p.file_size / p.io_size,
                    io: p.io_size,
                    step: 0,
                    cycles: 0,
                    rng: rng(t),
                    wbuf: io.clone(),
                    rbuf: vec![0; p.io_size as usize],
                    log_buf: log_buf.clone(),
                }));
            }
        }
        Workload::SmallFiles => {
            for t in 0..threads {
                as_thread(t);
                let dir = mkdir(fs, &name("small", t as u64))?;
                out.push(Box::new(SmallFiles {
                    dir,
                    next: 0,
                    live: VecDeque::new(),
                    cap: p.files.max(1),
                    size: p.file_size,
                    buf: pattern(p.io_size.min(p.file_size), 0x77),
                }));
            }
        }
    }
    Ok(out)
}

/// FxMark DWOM: overwrite one block (through a handle each thread opened, as
/// FxMark's processes open the file once and then pwrite).
struct Overwrite<E: FileSystem> {
    file: E::Handle,
    off: u64,
    buf: Vec<u8>,
}

impl<E: FileSystem> Worker<E> for Overwrite<E> {
    fn op(&mut self, fs: &E) -> Result<OpOutcome, FsError> {
        let n = fs.handle_write(&self.file, self.off, &self.buf)?;
        Ok(OpOutcome::written(n as u64))
    }
}

/// FxMark DRBM / DRBL: read one block (through a handle, as above).
struct ReadAt<E: FileSystem> {
    file: E::Handle,
    off: u64,
    buf: Vec<u8>,
}

impl<E: FileSystem> Worker<E> for ReadAt<E> {
    fn op(&mut self, fs: &E) -> Result<OpOutcome, FsError> {
        let n = fs.handle_read(&self.file, self.off, &mut self.buf)?;
        Ok(OpOutcome::read(n as u64))
    }
}

/// FxMark DWAL: append; the operation that reaches `limit` also truncates to 0.
struct Append {
    ino: Ino,
    size: u64,
    limit: u64,
    buf: Vec<u8>,
}

impl<E: FileSystem> Worker<E> for Append {
    fn op(&mut self, fs: &E) -> Result<OpOutcome, FsError> {
        fs.append(self.ino, &self.buf)?;
        self.size += self.buf.len() as u64;
        if self.size >= self.limit {
            truncate(fs, self.ino)?;
            self.size = 0;
        }
        Ok(OpOutcome::written(self.buf.len() as u64))
    }
}

#[derive(Clone, Copy, Debug)]
enum Access {
    Write,
    Read,
    Mixed(u32),
    Sequential,
    Skewed,
}

/// fio-style access to one file in `io`-sized, `io`-aligned blocks, through a
/// handle opened once (fio opens its file, then preads/pwrites).
struct Random<E: FileSystem> {
    file: E::Handle,
    io: u64,
    nblocks: u64,
    kind: Access,
    next: u64,
    rng: SmallRng,
    wbuf: Vec<u8>,
    rbuf: Vec<u8>,
}

impl<E: FileSystem> Worker<E> for Random<E> {
    fn op(&mut self, fs: &E) -> Result<OpOutcome, FsError> {
        let (block, write) = match self.kind {
            Access::Write => (self.rng.random_range(0..self.nblocks), true),
            Access::Read => (self.rng.random_range(0..self.nblocks), false),
            Access::Mixed(pct) => (
                self.rng.random_range(0..self.nblocks),
                self.rng.random_range(0..100) >= pct,
            ),
            Access::Sequential => {
                let b = self.next;
                self.next = (self.next + 1) % self.nblocks;
                (b, false)
            }
            Access::Skewed => (skewed_block(&mut self.rng, self.nblocks), false),
        };
        let off = block * self.io;
        if write {
            let n = fs.handle_write(&self.file, off, &self.wbuf)?;
            Ok(OpOutcome::written(n as u64))
        } else {
            let n = fs.handle_read(&self.file, off, &mut self.rbuf)?;
            Ok(OpOutcome::read(n as u64))
        }
    }
}

/// A filebench flow step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Create a file that does not exist and keep it open.
    Create,
    /// Write the open file whole (`file_size`, 1 MiB calls).
    WriteWhole,
    /// Append a random amount in 1..=io_size to the open file.
    AppendRand,
    /// fsync the open file.
    Fsync,
    /// Close (release) the open file.
    Close,
    /// Look up and open a random existing file.
    Open,
    /// Read the open file whole (1 MiB calls).
    ReadWhole,
    /// Unlink a random existing file.
    Delete,
    /// Look up and stat a random existing file.
    Stat,
    /// Append a random amount in 1..=io_size to the thread's log file.
    AppendLog,
}

fn flow_of(w: Workload) -> &'static [Step] {
    use Step::*;
    match w {
        // filebench fileserver.f
        Workload::FileServer => &[
            Create, WriteWhole, Close, Open, AppendRand, Close, Open, ReadWhole, Close, Delete,
            Stat,
        ],
        // filebench varmail.f
        Workload::VarMail => &[
            Delete, Create, AppendRand, Fsync, Close, Open, ReadWhole, AppendRand, Fsync, Close,
            Open, ReadWhole, Close,
        ],
        // filebench webproxy.f
        Workload::WebProxy => &[
            Delete, Create, AppendRand, Close, Open, ReadWhole, Close, Open, ReadWhole, Close,
            Open, ReadWhole, Close, Open, ReadWhole, Close, Open, ReadWhole, Close, AppendLog,
        ],
        // filebench webserver.f
        _ => &[
            Open, ReadWhole, Close, Open, ReadWhole, Close, Open, ReadWhole, Close, Open,
            ReadWhole, Close, Open, ReadWhole, Close, Open, ReadWhole, Close, Open, ReadWhole,
            Close, Open, ReadWhole, Close, Open, ReadWhole, Close, Open, ReadWhole, Close,
            AppendLog,
        ],
    }
}

/// A filebench-like flow over the thread's own fileset directory.
struct Flow {
    steps: &'static [Step],
    at: usize,
    dir: Ino,
    /// File indexes that exist / do not exist.
    present: Vec<u64>,
    absent: Vec<u64>,
    cur: Option<Ino>,
    log: Option<(Ino, u64)>,
    file_size: u64,
    append_max: u64,
    rng: SmallRng,
    whole: Vec<u8>,
    rbuf: Vec<u8>,
}

impl Flow {
    fn pick(&mut self, present: bool) -> Option<u64> {
        let v = if present { &self.present } else { &self.absent };
        if v.is_empty() {
            return None;
        }
        Some(v[self.rng.random_range(0..v.len())])
    }

    fn close_cur<E: FileSystem>(&mut self, fs: &E) -> Result<(), FsError> {
        if let Some(ino) = self.cur.take() {
            fs.release(ino)?;
        }
        Ok(())
    }

    fn append_len(&mut self) -> u64 {
        self.rng.random_range(1..=self.append_max)
    }

    fn step<E: FileSystem>(&mut self, fs: &E, s: Step) -> Result<OpOutcome, FsError> {
        let none = OpOutcome::default();
        match s {
            Step::Create => {
                self.close_cur(fs)?;
                let Some(i) = self.pick(false) else {
                    return Ok(none);
                };
                let ino = fs.create(self.dir, &name("f", i), 0o644, 0, 0)?.ino;
                fs.open(ino)?;
                self.cur = Some(ino);
                self.absent.retain(|&x| x != i);
                self.present.push(i);
                Ok(none)
            }
            Step::Open => {
                self.close_cur(fs)?;
                let Some(i) = self.pick(true) else {
                    return Ok(none);
                };
                let ino = fs.lookup(self.dir, &name("f", i))?.ino;
                fs.open(ino)?;
                self.cur = Some(ino);
                Ok(none)
            }
            Step::Close => {
                self.close_cur(fs)?;
                Ok(none)
            }
            Step::WriteWhole => {
                let Some(ino) = self.cur else { return Ok(none) };
                fill(fs, ino, self.file_size, &self.whole)?;
                Ok(OpOutcome::written(self.file_size))
            }
            Step::AppendRand => {
                let Some(ino) = self.cur else { return Ok(none) };
                let n = self.append_len();
                fs.append(ino, &self.whole[..n as usize])?;
                Ok(OpOutcome::written(n))
            }
            Step::Fsync => {
                if let Some(ino) = self.cur {
                    fs.fsync(ino)?;
                }
                Ok(none)
            }
            Step::ReadWhole => {
                let Some(ino) = self.cur else { return Ok(none) };
                let n = read_whole(fs, ino, &mut self.rbuf)?;
                Ok(OpOutcome::read(n))
            }
            Step::Delete => {
                let Some(i) = self.pick(true) else {
                    return Ok(none);
                };
                fs.unlink(self.dir, &name("f", i))?;
                self.present.retain(|&x| x != i);
                self.absent.push(i);
                Ok(none)
            }
            Step::Stat => {
                let Some(i) = self.pick(true) else {
                    return Ok(none);
                };
                let ino = fs.lookup(self.dir, &name("f", i))?.ino;
                fs.getattr(ino)?;
                Ok(none)
            }
            Step::AppendLog => {
                let n = self.append_len();
                let Some((ino, size)) = self.log.as_mut() else {
                    return Ok(none);
                };
                let ino = *ino;
                fs.append(ino, &self.whole[..n as usize])?;
                *size += n;
                if *size >= FLOW_LOG_LIMIT {
                    *size = 0;
                    truncate(fs, ino)?;
                }
                Ok(OpOutcome::written(n))
            }
        }
    }
}

impl<E: FileSystem> Worker<E> for Flow {
    fn op(&mut self, fs: &E) -> Result<OpOutcome, FsError> {
        let s = self.steps[self.at];
        self.at = (self.at + 1) % self.steps.len();
        self.step(fs, s)
    }
}

/// OLTP-like: cycles of 10 random reads and 1 random write over shared data files;
/// every 10th cycle ends with a 256 KiB append to the shared log.
struct Oltp {
    data: Vec<Ino>,
    log: Ino,
    nblocks: u64,
    io: u64,
    step: u32,
    cycles: u64,
    rng: SmallRng,
    wbuf: Vec<u8>,
    rbuf: Vec<u8>,
    log_buf: Vec<u8>,
}

impl<E: FileSystem> Worker<E> for Oltp {
    fn op(&mut self, fs: &E) -> Result<OpOutcome, FsError> {
        let s = self.step;
        let cycle_len = if self.cycles % 10 == 9 { 12 } else { 11 };
        self.step += 1;
        if self.step == cycle_len {
            self.step = 0;
            self.cycles += 1;
        }
        if s == 11 {
            let off = fs.append(self.log, &self.log_buf)?;
            if off + OLTP_LOG_IO >= LOG_LIMIT {
                truncate(fs, self.log)?;
            }
            return Ok(OpOutcome::written(OLTP_LOG_IO));
        }
        let ino = self.data[self.rng.random_range(0..self.data.len())];
        let off = self.rng.random_range(0..self.nblocks) * self.io;
        if s == 10 {
            let n = fs.write(ino, off, &self.wbuf)?;
            Ok(OpOutcome::written(n as u64))
        } else {
            let n = fs.read(ino, off, &mut self.rbuf)?;
            Ok(OpOutcome::read(n as u64))
        }
    }
}

/// Small files: create + write `size` bytes (in io-sized calls) + close; once
/// `cap` files are live, the same operation first unlinks the oldest.
struct SmallFiles {
    dir: Ino,
    next: u64,
    live: VecDeque<u64>,
    cap: u64,
    size: u64,
    buf: Vec<u8>,
}

impl<E: FileSystem> Worker<E> for SmallFiles {
    fn op(&mut self, fs: &E) -> Result<OpOutcome, FsError> {
        if self.live.len() as u64 >= self.cap {
            if let Some(old) = self.live.pop_front() {
                fs.unlink(self.dir, &name("s", old))?;
            }
        }
        let i = self.next;
        self.next += 1;
        let ino = fs.create(self.dir, &name("s", i), 0o644, 0, 0)?.ino;
        fs.open(ino)?;
        let written = fill(fs, ino, self.size, &self.buf);
        let released = fs.release(ino);
        written?;
        released?;
        self.live.push_back(i);
        Ok(OpOutcome::written(self.size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_sizes_cover_the_data_set() {
        for &w in Workload::ALL {
            let p = w.defaults();
            for t in [1, 2, 8] {
                let s = image_size_for(w, &p, t);
                assert!(s >= 128 * MIB, "{}", w.name());
                assert_eq!(s % MIB, 0);
            }
        }
        let p = Workload::RandWrite.defaults();
        assert_eq!(
            image_size_for(Workload::RandWrite, &p, 2),
            2 * 2 * 64 * MIB + 64 * MIB
        );
    }

    #[test]
    fn flows_follow_filebench() {
        assert_eq!(flow_of(Workload::FileServer).len(), 11);
        assert_eq!(flow_of(Workload::VarMail).len(), 13);
        let wp = flow_of(Workload::WebProxy);
        assert_eq!(wp.iter().filter(|s| **s == Step::ReadWhole).count(), 5);
        let ws = flow_of(Workload::WebServer);
        assert_eq!(ws.iter().filter(|s| **s == Step::ReadWhole).count(), 10);
        assert_eq!(ws.last(), Some(&Step::AppendLog));
        assert_eq!(files_per_thread(1000, 2), 500);
        assert_eq!(files_per_thread(10, 4), 8);
    }
}
