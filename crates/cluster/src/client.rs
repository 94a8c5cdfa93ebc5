//! A cluster client (DESIGN.md §7): the namespace and attributes come from the
//! metadata server; file data is read straight from the shared devices through
//! layouts the server hands out (and recalls before another commit replaces their
//! blocks), and written straight into space the server delegated to this client,
//! then committed to the server as extents.
//!
//! Order of persistence of a write (docs/CLUSTER.md): the pages go to fresh
//! delegated blocks with non-temporal stores; a fence makes them durable; then the
//! commit message names them, and the server's log commit makes them part of the
//! file. A crash before the commit leaves the blocks unreferenced (the server
//! reclaims them with the session, or at its restart).

use crate::proto::*;
use crate::rpc::mds_client::MdsClient;
use mnemofs::{
    Attr, DeviceSpec, DirEntry, FileSystem, FsError, Ino, NewNode, RenameFlags, Result, SetAttr,
    StatFs,
};
use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

const BLOCK: u64 = 4096;

/// When a write's commit is sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum CommitMode {
    /// Data persisted, commit sent, reply awaited, then the call returns.
    #[default]
    Sync,
}

/// How to reach a metadata server and the shared devices.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The server's address (`HOST:PORT`).
    pub mds: String,
    /// The volume's devices as this host maps them.
    pub data: Vec<DeviceSpec>,
    /// When commits are sent.
    pub commit: CommitMode,
}

/// Counters of a client (exact).
#[derive(Debug, Default)]
struct Counters {
    rpcs: AtomicU64,
    commit_rpcs: AtomicU64,
    commits: AtomicU64,
    layout_rpcs: AtomicU64,
    delegations: AtomicU64,
    recalls: AtomicU64,
    retries: AtomicU64,
    sessions: AtomicU64,
}

/// A client's statistics (served in the FUSE root's `user.mnemofs.stats` xattr).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClientStats {
    /// The commit mode.
    pub commit: CommitMode,
    /// RPCs sent.
    pub rpcs: u64,
    /// Commit RPCs (batches) sent.
    pub commit_rpcs: u64,
    /// Extent commits sent.
    pub commits: u64,
    /// Layout RPCs sent.
    pub layout_rpcs: u64,
    /// Delegation RPCs sent.
    pub delegations: u64,
    /// Recalls answered.
    pub recalls: u64,
    /// Writes merged again because a merged page changed meanwhile.
    pub retries: u64,
    /// Sessions opened (more than one: the server restarted or a lease ran out).
    pub sessions: u64,
    /// Delegated blocks not yet used.
    pub pool_blocks: u64,
}

/// A file's cached layout.
#[derive(Clone, Debug)]
struct Cached {
    size: u64,
    first: u64,
    blocks: Vec<u64>,
}

/// What the client keeps of one file.
#[derive(Default)]
struct FileCache {
    /// The layout; readers copy under the read lock, so a recall (write lock) waits
    /// for reads in flight before it is answered.
    layout: RwLock<Option<Cached>>,
    /// Bumped by every invalidation: a layout fetched across one is not installed.
    gen: AtomicU64,
    /// One writer of the file at a time in this client.
    write: Mutex<()>,
}

#[derive(Clone, Copy, Debug)]
struct SessionInfo {
    client: u64,
    lease: Duration,
    chunk: u64,
    /// Writes into delegated space stop at this instant unless a renewal moves it.
    deadline: Instant,
}

struct Inner {
    rpc: MdsClient<Channel>,
    vol: pm::Volume,
    uuid: Option<[u8; 16]>,
    commit: CommitMode,
    session: RwLock<SessionInfo>,
    pool: Mutex<VecDeque<Run>>,
    files: Mutex<HashMap<Ino, Arc<FileCache>>>,
    seq: Mutex<u64>,
    c: Counters,
    stop: tokio::sync::watch::Sender<bool>,
}

/// A client of a metadata server, mounted through the engine interface.
pub struct Client {
    inner: Arc<Inner>,
    rt: tokio::runtime::Runtime,
}

/// An open file of a [`Client`].
#[derive(Debug)]
pub struct ClientHandle {
    ino: Ino,
}

fn io(kind: std::io::ErrorKind, what: impl Into<String>) -> FsError {
    FsError::Io(std::io::Error::new(kind, what.into()))
}

fn from_status(s: tonic::Status) -> FsError {
    use tonic::Code;
    let kind = match s.code() {
        Code::FailedPrecondition => std::io::ErrorKind::NotConnected,
        Code::Unavailable => std::io::ErrorKind::ConnectionRefused,
        Code::DeadlineExceeded => std::io::ErrorKind::TimedOut,
        _ => std::io::ErrorKind::Other,
    };
    io(kind, format!("metadata server: {}", s.message()))
}

/// The engine's error for an errno the server sent.
fn from_errno(errno: i32, msg: String) -> FsError {
    match errno {
        libc::ENOENT => FsError::NotFound,
        libc::EEXIST => FsError::Exists,
        libc::ENOTDIR => FsError::NotDir,
        libc::EISDIR => FsError::IsDir,
        libc::ENOTEMPTY => FsError::NotEmpty,
        libc::ENAMETOOLONG => FsError::NameTooLong,
        libc::ENOSPC => FsError::NoSpace,
        libc::EMLINK => FsError::TooManyLinks,
        libc::EFBIG => FsError::TooBig,
        libc::EPERM => FsError::NotPermitted,
        libc::EACCES => FsError::AccessDenied,
        libc::EBUSY => FsError::Busy,
        libc::ELOOP => FsError::Loop,
        libc::ENODATA => FsError::NoData,
        libc::ERANGE => FsError::Range,
        // Any other errno exactly as the server gave it (EINVAL, EOPNOTSUPP,
        // ESTALE, EIO, ...); its words are in the server's log.
        e => {
            let _ = msg;
            FsError::Io(std::io::Error::from_raw_os_error(e))
        }
    }
}

impl Client {
    /// Maps the shared devices, connects to the server and opens a session.
    pub fn connect(cfg: &ClientConfig) -> Result<Client> {
        let (vol, _devices, uuid) = mnemofs::open_shared(&cfg.data)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("mnemofs-client")
            .enable_all()
            .build()?;
        let url = if cfg.mds.contains("://") {
            cfg.mds.clone()
        } else {
            format!("http://{}", cfg.mds)
        };
        let endpoint = Channel::from_shared(url)
            .map_err(|e| FsError::Volume(format!("--mds {}: {e}", cfg.mds)))?
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(5));
        let channel = rt.block_on(endpoint.connect()).map_err(|e| {
            io(
                std::io::ErrorKind::ConnectionRefused,
                format!("--mds {}: {e}", cfg.mds),
            )
        })?;
        let rpc = MdsClient::new(channel);
        let (stop, _) = tokio::sync::watch::channel(false);
        let inner = Arc::new(Inner {
            rpc,
            vol,
            uuid,
            commit: cfg.commit,
            session: RwLock::new(SessionInfo {
                client: 0,
                lease: Duration::ZERO,
                chunk: 0,
                deadline: Instant::now(),
            }),
            pool: Mutex::new(VecDeque::new()),
            files: Mutex::new(HashMap::new()),
            seq: Mutex::new(0),
            c: Counters::default(),
            stop,
        });
        rt.block_on(Inner::open_session(&inner))?;
        Ok(Client { inner, rt })
    }

    /// The session's client id.
    pub fn id(&self) -> u64 {
        self.inner.session.read().client
    }

    /// Ends the session: the server takes back the unused delegated space.
    pub fn close(self) -> Result<()> {
        let _ = self.inner.stop.send(true);
        let client = self.inner.session.read().client;
        let mut rpc = self.inner.rpc.clone();
        let r = self.rt.block_on(rpc.bye(SessionRef { client }));
        self.rt.shutdown_timeout(Duration::from_secs(1));
        r.map(|_| ()).map_err(from_status)
    }

    fn meta(&self, req: MetaReq) -> Result<MetaReply> {
        let client = self.inner.session.read().client;
        let mut rpc = self.inner.rpc.clone();
        self.inner.c.rpcs.fetch_add(1, Ordering::Relaxed);
        let r = self.rt.block_on(rpc.meta(MetaCall {
            client,
            req: req.clone(),
        }));
        let r = match r {
            Err(s) if s.code() == tonic::Code::FailedPrecondition => {
                // The session is gone (lease, or a server restart): open another and
                // try once more.
                self.rt.block_on(Inner::open_session(&self.inner))?;
                let client = self.inner.session.read().client;
                self.inner.c.rpcs.fetch_add(1, Ordering::Relaxed);
                self.rt.block_on(rpc.meta(MetaCall { client, req }))
            }
            r => r,
        };
        match r.map_err(from_status)?.into_inner() {
            MetaReply::Err(e, m) => Err(from_errno(e, m)),
            ok => Ok(ok),
        }
    }

    fn attr(&self, req: MetaReq) -> Result<Attr> {
        match self.meta(req)? {
            MetaReply::Attr(a) => Ok(a),
            _ => Err(io(
                std::io::ErrorKind::InvalidData,
                "metadata server: unexpected reply",
            )),
        }
    }

    fn unit(&self, req: MetaReq) -> Result<()> {
        match self.meta(req)? {
            MetaReply::Unit => Ok(()),
            _ => Err(io(
                std::io::ErrorKind::InvalidData,
                "metadata server: unexpected reply",
            )),
        }
    }

    fn bytes(&self, req: MetaReq) -> Result<Vec<u8>> {
        match self.meta(req)? {
            MetaReply::Bytes(b) => Ok(b),
            _ => Err(io(
                std::io::ErrorKind::InvalidData,
                "metadata server: unexpected reply",
            )),
        }
    }

    fn file(&self, ino: Ino) -> Arc<FileCache> {
        self.inner.files.lock().entry(ino).or_default().clone()
    }

    /// Runs `f` on a layout of `ino` that covers pages `[pg0, pg1]` (or reaches the
    /// end of file), under its read lock; fetches one if the cached one does not.
    fn with_layout<T>(
        &self,
        ino: Ino,
        pg0: u64,
        pg1: u64,
        mut f: impl FnMut(&Cached) -> T,
    ) -> Result<T> {
        let fc = self.file(ino);
        for _ in 0..64 {
            {
                let g = fc.layout.read();
                if let Some(l) = g.as_ref() {
                    let have = l.first + l.blocks.len() as u64;
                    let last_in_file = l.size.div_ceil(BLOCK);
                    if l.first <= pg0 && (pg1 < have || have >= last_in_file) {
                        return Ok(f(l));
                    }
                }
            }
            let gen = fc.gen.load(Ordering::Acquire);
            let client = self.inner.session.read().client;
            let n = (pg1 - pg0 + 1).max(1024);
            let mut rpc = self.inner.rpc.clone();
            self.inner.c.rpcs.fetch_add(1, Ordering::Relaxed);
            self.inner.c.layout_rpcs.fetch_add(1, Ordering::Relaxed);
            let r = self.rt.block_on(rpc.layout(LayoutReq {
                client,
                ino,
                first: pg0,
                n,
            }));
            let r = match r {
                Err(s) if s.code() == tonic::Code::FailedPrecondition => {
                    self.rt.block_on(Inner::open_session(&self.inner))?;
                    continue;
                }
                r => r.map_err(from_status)?.into_inner(),
            };
            let l = match r {
                LayoutReply::Ok {
                    size,
                    first,
                    blocks,
                } => Cached {
                    size,
                    first,
                    blocks,
                },
                LayoutReply::Err(e, m) => return Err(from_errno(e, m)),
            };
            let mut w = fc.layout.write();
            if fc.gen.load(Ordering::Acquire) == gen {
                *w = Some(l.clone());
            }
            // Used once even if a recall came meanwhile: the server answered after
            // the recall's commit (its file lock orders them), so it is current.
            let have = l.first + l.blocks.len() as u64;
            if l.first <= pg0 && (pg1 < have || have >= l.size.div_ceil(BLOCK)) {
                return Ok(f(&l));
            }
        }
        Err(io(std::io::ErrorKind::TimedOut, "layout kept changing"))
    }

    /// Drops the cached layout of `ino`.
    fn invalidate(&self, ino: Ino) {
        if let Some(fc) = self.inner.files.lock().get(&ino).cloned() {
            let mut w = fc.layout.write();
            fc.gen.fetch_add(1, Ordering::AcqRel);
            *w = None;
        }
    }

    /// Takes `n` blocks of delegated space (asking the server for more first when
    /// the pool runs low: a write larger than a chunk asks for its own).
    fn take_blocks(&self, n: u64) -> Result<Vec<Run>> {
        for _ in 0..4 {
            let s = *self.inner.session.read();
            if Instant::now() >= s.deadline {
                // The lease may have run out: renew (or reopen) before writing.
                self.rt.block_on(Inner::renew_or_reopen(&self.inner))?;
                continue;
            }
            {
                let mut pool = self.inner.pool.lock();
                let have: u64 = pool.iter().map(|r| r.1).sum();
                if have >= n {
                    let mut out = Vec::new();
                    let mut need = n;
                    while need > 0 {
                        let Some((a, l)) = pool.pop_front() else {
                            break;
                        };
                        let t = l.min(need);
                        out.push((a, t));
                        if t < l {
                            pool.push_front((a + t, l - t));
                        }
                        need -= t;
                    }
                    return Ok(out);
                }
            }
            let want = if n > s.chunk { n } else { s.chunk };
            let mut rpc = self.inner.rpc.clone();
            self.inner.c.rpcs.fetch_add(1, Ordering::Relaxed);
            self.inner.c.delegations.fetch_add(1, Ordering::Relaxed);
            let r = self.rt.block_on(rpc.delegate(DelegateReq {
                client: s.client,
                blocks: want,
            }));
            match r {
                Err(st) if st.code() == tonic::Code::FailedPrecondition => {
                    self.rt.block_on(Inner::open_session(&self.inner))?;
                }
                Err(st) => return Err(from_status(st)),
                Ok(r) => match r.into_inner() {
                    DelegateReply::Ok(runs) => {
                        let mut pool = self.inner.pool.lock();
                        if self.inner.session.read().client == s.client {
                            pool.extend(runs);
                        }
                    }
                    DelegateReply::Err(e, m) => return Err(from_errno(e, m)),
                },
            }
        }
        Err(io(std::io::ErrorKind::TimedOut, "no delegated space"))
    }

    /// Reads `[off, off + buf.len())` of `ino` straight from the shared devices.
    fn read_data(&self, ino: Ino, off: u64, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let pg0 = off / BLOCK;
        let pg1 = (off + buf.len() as u64 - 1) / BLOCK;
        let vol = &self.inner.vol;
        let len = vol.len();
        self.with_layout(ino, pg0, pg1, |l| {
            if off >= l.size {
                return 0;
            }
            let end = l.size.min(off + buf.len() as u64);
            let mut at = off;
            while at < end {
                let pg = at / BLOCK;
                let in_pg = at % BLOCK;
                let n = (BLOCK - in_pg).min(end - at) as usize;
                let dst = &mut buf[(at - off) as usize..(at - off) as usize + n];
                let block = l.blocks.get((pg - l.first) as usize).copied().unwrap_or(0);
                let src = block.checked_mul(BLOCK).and_then(|b| b.checked_add(in_pg));
                match src {
                    Some(s) if block != 0 && s + n as u64 <= len => {
                        // SAFETY: a committed block is never written in place (page
                        // CoW), and the server frees it only after recalling this
                        // layout, which waits for this read (we hold its read lock).
                        unsafe { vol.read(s, dst) }
                    }
                    _ => dst.fill(0),
                }
                at += n as u64;
            }
            (end - off) as usize
        })
    }

    /// A write, one at a time per file in this client.
    fn write_data(&self, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        let fc = self.file(ino);
        let _one = fc.write.lock();
        self.write_locked(ino, off, data)
    }

    /// The synchronous write (the caller holds the file's write lock): fresh
    /// delegated blocks, merged partial pages, persisted, committed; returns once
    /// the server's log commit is durable.
    fn write_locked(&self, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        if data.is_empty() {
            // Still a regular-file check, like the engine.
            let a = self.attr(MetaReq::Getattr { ino })?;
            return match a.kind {
                mnemofs::FileKind::Regular => Ok(0),
                mnemofs::FileKind::Directory => Err(FsError::IsDir),
                _ => Err(FsError::Invalid("write to a special file")),
            };
        }
        let end = off.checked_add(data.len() as u64).ok_or(FsError::TooBig)?;
        let first = off / BLOCK;
        let last = (end - 1) / BLOCK;
        let npages = last - first + 1;
        let runs = self.take_blocks(npages)?;
        let head_partial = !off.is_multiple_of(BLOCK) || end < (first + 1) * BLOCK;
        let tail_partial = last != first && !end.is_multiple_of(BLOCK);
        for _attempt in 0..16 {
            // The old blocks of pages written in part (their other bytes stay).
            let mut expect = Vec::new();
            if head_partial || tail_partial {
                let (h, t) = self.with_layout(ino, first, last, |l| {
                    let at = |pg: u64| {
                        if pg * BLOCK >= l.size {
                            0
                        } else {
                            l.blocks.get((pg - l.first) as usize).copied().unwrap_or(0)
                        }
                    };
                    (at(first), at(last))
                })?;
                if head_partial {
                    expect.push((first, h));
                }
                if tail_partial {
                    expect.push((last, t));
                }
            }
            self.store_pages(&runs, off, data, &expect)?;
            // Fence: the new pages are durable before the commit that maps them is
            // sent (the server's log entry must never name unwritten blocks).
            self.inner.vol.fence();
            let r = self.send_commit(vec![ExtentCommit {
                ino,
                first,
                end,
                runs: runs.clone(),
                expect,
            }])?;
            match r.first().copied().unwrap_or(libc::EIO) {
                0 => return Ok(data.len()),
                libc::EAGAIN => {
                    self.inner.c.retries.fetch_add(1, Ordering::Relaxed);
                    self.invalidate(ino);
                }
                e => return Err(from_errno(e, "commit refused".into())),
            }
        }
        Err(io(
            std::io::ErrorKind::TimedOut,
            "a page kept changing under the write",
        ))
    }

    /// Stores the pages of `data` (file offset `off`) into `runs`, partial pages
    /// merged with their old blocks (`expect`).
    fn store_pages(
        &self,
        runs: &[Run],
        off: u64,
        data: &[u8],
        expect: &[(u64, u64)],
    ) -> Result<()> {
        let vol = &self.inner.vol;
        let end = off + data.len() as u64;
        let mut pg = off / BLOCK;
        let mut page = Vec::new();
        for &(start, n) in runs {
            for b in start..start + n {
                let ps = pg * BLOCK;
                let lo = off.max(ps) - ps;
                let hi = end.min(ps + BLOCK) - ps;
                let src = &data[(ps + lo - off) as usize..(ps + hi - off) as usize];
                let dst = b.checked_mul(BLOCK).filter(|&d| d + BLOCK <= vol.len());
                let Some(dst) = dst else {
                    return Err(FsError::Corrupt(format!(
                        "delegated block {b} is outside the volume"
                    )));
                };
                if lo == 0 && hi == BLOCK {
                    // SAFETY: the block is delegated to this client and not yet
                    // committed: nobody else reads or writes it.
                    unsafe { vol.write_nt(dst, src) };
                } else {
                    page.resize(BLOCK as usize, 0);
                    let old = expect.iter().find(|e| e.0 == pg).map_or(0, |e| e.1);
                    match old
                        .checked_mul(BLOCK)
                        .filter(|&o| old != 0 && o + BLOCK <= vol.len())
                    {
                        // SAFETY: a committed block is read while the server holds
                        // it for us: the commit's `expect` refuses the write if it
                        // was replaced meanwhile, and the bytes are then merged
                        // again.
                        Some(o) => unsafe { vol.read(o, &mut page) },
                        None => page.fill(0),
                    }
                    page[lo as usize..hi as usize].copy_from_slice(src);
                    // SAFETY: as for a whole page.
                    unsafe { vol.write_nt(dst, &page) };
                }
                pg += 1;
            }
        }
        Ok(())
    }

    /// Sends one batch of commits and returns each one's errno (0: applied).
    fn send_commit(&self, commits: Vec<ExtentCommit>) -> Result<Vec<i32>> {
        let client = self.inner.session.read().client;
        let n = commits.len() as u64;
        let seq = {
            let mut s = self.inner.seq.lock();
            *s += 1;
            *s
        };
        let batch = CommitBatch {
            client,
            seq,
            commits,
        };
        let mut rpc = self.inner.rpc.clone();
        for attempt in 0..3 {
            self.inner.c.rpcs.fetch_add(1, Ordering::Relaxed);
            self.inner.c.commit_rpcs.fetch_add(1, Ordering::Relaxed);
            match self.rt.block_on(rpc.commit(batch.clone())) {
                Ok(r) => {
                    self.inner.c.commits.fetch_add(n, Ordering::Relaxed);
                    return Ok(r.into_inner().results);
                }
                // Lost on the way (or the reply was): the same batch again applies
                // once (the server keeps the last reply).
                Err(s) if s.code() == tonic::Code::Unavailable && attempt < 2 => continue,
                Err(s) => return Err(from_status(s)),
            }
        }
        Err(io(std::io::ErrorKind::TimedOut, "commit not acknowledged"))
    }

    /// Stops renewing the lease and answering recalls, as a client that hangs
    /// would (tests of lease expiry; the client is unusable afterwards).
    #[doc(hidden)]
    pub fn stop_renewing(&self) {
        let _ = self.inner.stop.send(true);
    }

    /// Counters of this client.
    pub fn client_stats(&self) -> ClientStats {
        let c = &self.inner.c;
        ClientStats {
            commit: self.inner.commit,
            rpcs: c.rpcs.load(Ordering::Relaxed),
            commit_rpcs: c.commit_rpcs.load(Ordering::Relaxed),
            commits: c.commits.load(Ordering::Relaxed),
            layout_rpcs: c.layout_rpcs.load(Ordering::Relaxed),
            delegations: c.delegations.load(Ordering::Relaxed),
            recalls: c.recalls.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
            sessions: c.sessions.load(Ordering::Relaxed),
            pool_blocks: self.inner.pool.lock().iter().map(|r| r.1).sum(),
        }
    }
}

impl Inner {
    /// Opens a session (again): a fresh id, an empty pool and no cached layout.
    async fn open_session(me: &Arc<Inner>) -> Result<()> {
        let mut rpc = me.rpc.clone();
        let sent = Instant::now();
        let s = rpc
            .hello(Hello { uuid: me.uuid })
            .await
            .map_err(from_status)?
            .into_inner();
        me.c.sessions.fetch_add(1, Ordering::Relaxed);
        let lease = Duration::from_millis(s.lease_ms);
        {
            *me.session.write() = SessionInfo {
                client: s.client,
                lease,
                chunk: s.chunk_blocks.max(1),
                deadline: sent + lease - lease / 8,
            };
            me.pool.lock().clear();
            *me.seq.lock() = 0;
            for fc in me.files.lock().values() {
                let mut w = fc.layout.write();
                fc.gen.fetch_add(1, Ordering::AcqRel);
                *w = None;
            }
        }
        // Recalls come on a stream of their own; renewals on a timer.
        let stream = rpc
            .watch(SessionRef { client: s.client })
            .await
            .map_err(from_status)?
            .into_inner();
        let w = me.clone();
        let mut stop = me.stop.subscribe();
        let client = s.client;
        tokio::spawn(async move {
            let mut stream = stream;
            loop {
                tokio::select! {
                    _ = stop.changed() => break,
                    m = stream.message() => match m {
                        Ok(Some(r)) => w.on_recall(client, r).await,
                        _ => break,
                    },
                }
            }
        });
        let r = me.clone();
        let mut stop = me.stop.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.changed() => break,
                    _ = tokio::time::sleep(lease / 4) => {}
                }
                if r.session.read().client != client {
                    break;
                }
                if Inner::renew(&r).await.is_err() {
                    // Left to the next call: it opens a new session.
                    break;
                }
            }
        });
        Ok(())
    }

    /// Renews the lease; an error when the session is gone.
    async fn renew(me: &Arc<Inner>) -> Result<()> {
        let s = *me.session.read();
        let mut rpc = me.rpc.clone();
        let sent = Instant::now();
        let ok = rpc
            .renew(SessionRef { client: s.client })
            .await
            .map_err(from_status)?
            .into_inner()
            .ok;
        if !ok {
            return Err(io(std::io::ErrorKind::NotConnected, "session expired"));
        }
        let mut w = me.session.write();
        if w.client == s.client {
            w.deadline = w.deadline.max(sent + s.lease - s.lease / 8);
        }
        Ok(())
    }

    async fn renew_or_reopen(me: &Arc<Inner>) -> Result<()> {
        match Inner::renew(me).await {
            Ok(()) => Ok(()),
            Err(_) => Inner::open_session(me).await,
        }
    }

    /// A recall: drop the layout once no read of it is in flight, then answer.
    async fn on_recall(&self, client: u64, r: Recall) {
        self.c.recalls.fetch_add(1, Ordering::Relaxed);
        if let Some(fc) = self.files.lock().get(&r.ino).cloned() {
            let mut w = fc.layout.write();
            fc.gen.fetch_add(1, Ordering::AcqRel);
            *w = None;
        }
        let mut rpc = self.rpc.clone();
        let _ = rpc.recalled(RecallAck { client, id: r.id }).await;
    }
}

impl FileSystem for Client {
    type Handle = ClientHandle;
    type Stats = ClientStats;

    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.attr(MetaReq::Lookup {
            parent,
            name: name.to_vec(),
        })
    }

    fn getattr(&self, ino: Ino) -> Result<Attr> {
        self.attr(MetaReq::Getattr { ino })
    }

    fn setattr(&self, ino: Ino, req: &SetAttr) -> Result<Attr> {
        let fc = self.file(ino);
        let _one = fc.write.lock();
        let r = self.attr(MetaReq::Setattr { ino, attr: *req });
        self.invalidate(ino);
        r
    }

    fn mknod(
        &self,
        parent: Ino,
        name: &[u8],
        mode: u32,
        rdev: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        self.attr(MetaReq::Mknod {
            parent,
            name: name.to_vec(),
            mode,
            rdev,
            uid,
            gid,
        })
    }

    fn create(&self, parent: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> {
        self.attr(MetaReq::Create {
            parent,
            name: name.to_vec(),
            mode,
            uid,
            gid,
        })
    }

    fn mkdir(&self, parent: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> {
        self.attr(MetaReq::Mkdir {
            parent,
            name: name.to_vec(),
            mode,
            uid,
            gid,
        })
    }

    fn create_node(&self, parent: Ino, name: &[u8], node: &NewNode) -> Result<Attr> {
        self.attr(MetaReq::CreateNode {
            parent,
            name: name.to_vec(),
            node: *node,
        })
    }

    fn symlink(&self, parent: Ino, name: &[u8], target: &[u8], uid: u32, gid: u32) -> Result<Attr> {
        self.attr(MetaReq::Symlink {
            parent,
            name: name.to_vec(),
            target: target.to_vec(),
            uid,
            gid,
        })
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.bytes(MetaReq::Readlink { ino })
    }

    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.bytes(MetaReq::Getxattr {
            ino,
            name: name.to_vec(),
        })
    }

    fn listxattr(&self, ino: Ino) -> Result<Vec<u8>> {
        self.bytes(MetaReq::Listxattr { ino })
    }

    fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        self.unit(MetaReq::Setxattr {
            ino,
            name: name.to_vec(),
            value: value.to_vec(),
            flags,
        })
    }

    fn removexattr(&self, ino: Ino, name: &[u8]) -> Result<()> {
        self.unit(MetaReq::Removexattr {
            ino,
            name: name.to_vec(),
        })
    }

    fn unlink(&self, parent: Ino, name: &[u8]) -> Result<()> {
        self.unit(MetaReq::Unlink {
            parent,
            name: name.to_vec(),
        })
    }

    fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<()> {
        self.unit(MetaReq::Rmdir {
            parent,
            name: name.to_vec(),
        })
    }

    fn link(&self, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> {
        self.attr(MetaReq::Link {
            ino,
            parent: newparent,
            name: newname.to_vec(),
        })
    }

    fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        self.unit(MetaReq::Rename {
            parent,
            name: name.to_vec(),
            newparent,
            newname: newname.to_vec(),
            flags,
        })
    }

    fn readdir(&self, ino: Ino, offset: u64, max: usize) -> Result<Vec<DirEntry>> {
        match self.meta(MetaReq::Readdir {
            ino,
            offset,
            max: max as u64,
        })? {
            MetaReply::Dir(d) => Ok(d),
            _ => Err(io(
                std::io::ErrorKind::InvalidData,
                "metadata server: unexpected reply",
            )),
        }
    }

    fn read(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.read_data(ino, offset, buf)
    }

    fn write(&self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize> {
        self.write_data(ino, offset, data)
    }

    /// The end of file as the server has it when the write starts: atomic with
    /// respect to this client's other writes of the file, not to other clients'
    /// (as over NFS).
    fn append(&self, ino: Ino, data: &[u8]) -> Result<u64> {
        let fc = self.file(ino);
        let _one = fc.write.lock();
        let size = self.getattr(ino)?.size;
        self.write_locked(ino, size, data)?;
        Ok(size)
    }

    fn fallocate(&self, ino: Ino, offset: u64, len: u64, mode: i32) -> Result<()> {
        let fc = self.file(ino);
        let _one = fc.write.lock();
        let r = self.unit(MetaReq::Fallocate {
            ino,
            offset,
            len,
            mode,
        });
        self.invalidate(ino);
        r
    }

    fn open(&self, ino: Ino) -> Result<()> {
        self.unit(MetaReq::Open { ino })
    }

    fn release(&self, ino: Ino) -> Result<()> {
        self.unit(MetaReq::Release { ino })
    }

    fn open_handle(&self, ino: Ino) -> Result<ClientHandle> {
        self.open(ino)?;
        Ok(ClientHandle { ino })
    }

    fn close_handle(&self, h: ClientHandle) -> Result<()> {
        self.release(h.ino)
    }

    fn handle_read(&self, h: &ClientHandle, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.read_data(h.ino, offset, buf)
    }

    fn handle_write(&self, h: &ClientHandle, offset: u64, data: &[u8]) -> Result<usize> {
        self.write_data(h.ino, offset, data)
    }

    fn remember(&self, ino: Ino) {
        let _ = self.unit(MetaReq::Remember { ino });
    }

    fn forget(&self, ino: Ino, n: u64) {
        let _ = self.unit(MetaReq::Forget { ino, n });
    }

    /// Synchronous commits are durable on the server when the write returns; this
    /// asks the server to check the file.
    fn fsync(&self, ino: Ino) -> Result<()> {
        self.unit(MetaReq::Fsync { ino })
    }

    fn statfs(&self) -> StatFs {
        match self.meta(MetaReq::Statfs) {
            Ok(MetaReply::Statfs(s)) => s,
            _ => StatFs {
                block_size: BLOCK as u32,
                blocks: 0,
                blocks_free: 0,
                blocks_avail: 0,
                files: 0,
                files_free: 0,
                name_max: mnemofs::NAME_MAX as u32,
            },
        }
    }

    fn stats(&self) -> ClientStats {
        self.client_stats()
    }

    fn pm_counters(&self) -> pm::CounterSnapshot {
        self.inner.vol.counters()
    }

    fn unmount(self) -> Result<()> {
        self.close()
    }
}
