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

use crate::delayed::{Committer, DelayedConfig, Pending, Sample};
use crate::proto::*;
use crate::rpc::mds_client::MdsClient;
use mnemofs::{
    Attr, DeviceSpec, DirEntry, FileSystem, FsError, Ino, NewNode, RenameFlags, Result, SetAttr,
    StatFs,
};
use parking_lot::{Condvar, Mutex, RwLock};
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
    /// Data persisted, commit queued, the call returns; background threads send
    /// compound commits (`delayed` module).
    Delayed,
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
    /// Settings of `Delayed`.
    pub delayed: DelayedConfig,
    /// Serve this directory of the volume as the root (made if missing), as an
    /// NFS export of a subdirectory: each benchmark client gets its own.
    pub subdir: Option<String>,
}

/// Counters of a client (exact).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    rpcs: AtomicU64,
    commit_rpcs: AtomicU64,
    commits: AtomicU64,
    layout_rpcs: AtomicU64,
    delegations: AtomicU64,
    recalls: AtomicU64,
    pub retries: AtomicU64,
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
    /// Delegated blocks not yet used (both pools).
    pub pool_blocks: u64,
    /// Delayed commit: compound commits sent by the commit threads (and fsync).
    pub batches: u64,
    /// Delayed commit: files those carried (mean compound degree: files / batches).
    pub batch_files: u64,
    /// Delayed commit: most commit threads at once.
    pub peak_threads: u64,
    /// Delayed commit: files queued now.
    pub queued: u64,
    /// Delayed commit: delay from queueing a file to its commit's answer (ns):
    /// p50, p99, max.
    pub commit_delay_ns: [u64; 3],
}

/// A file's cached layout.
#[derive(Clone, Debug)]
struct Cached {
    size: u64,
    first: u64,
    blocks: Vec<u64>,
}

impl Cached {
    /// The layout a grant describes, and the grant's number.
    fn granted(g: LayoutGrant) -> (Cached, u64) {
        (
            Cached {
                size: g.size,
                first: g.first,
                blocks: g.blocks,
            },
            g.grant,
        )
    }
}

/// What the client keeps of one file.
#[derive(Default)]
pub(crate) struct FileCache {
    /// The layout; readers copy under the read lock, so a recall (write lock) waits
    /// for reads in flight before it is answered.
    layout: RwLock<Option<Cached>>,
    /// Bumped by every invalidation: a layout fetched across one is not installed.
    gen: AtomicU64,
    /// The session a layout of the file was last granted to, and the newest grant
    /// it received (updated under the layout's write lock, before the install
    /// check). Grant numbers compare only within one session: a server restarted
    /// with its clock behind numbers its grants lower.
    granted: Mutex<(u64, u64)>,
    /// One writer of the file at a time in this client.
    write: Mutex<()>,
    /// Writes not yet committed (delayed commit).
    pub pending: Mutex<Pending>,
    /// Signalled when a batch of this file is answered.
    pub done: Condvar,
    /// This client's opens of the file, and the server pins that keep it for them.
    opens: Mutex<FileOpens>,
    /// Signalled when a recall's answer that told the server of opens is answered.
    opens_told: Condvar,
}

/// The kernel's references to an inode this client told the server of
/// (`Remember`): those of the session now, pinned there, and those of an ended
/// session (whose pins went with it). A `Forget` takes the ended ones first, as a
/// release takes an ended session's opens first (see `FileOpens`): it cannot tell
/// which references it ends.
#[derive(Default, Clone, Copy)]
struct Remembered {
    session: u64,
    n: u64,
    stale: u64,
}

impl Remembered {
    /// Counts the references of any session but `now` as stale.
    fn at(&mut self, now: u64) {
        if self.session != now {
            self.stale = self.stale.saturating_add(self.n);
            self.n = 0;
            self.session = now;
        }
    }
}

/// A create's pin taken by an open or a release (`Inner::claim_created`).
enum Claim {
    /// None left.
    None,
    /// One of this session.
    Pin(u64),
    /// One of a session that has ended: it went with it.
    Gone,
}

/// A client's opens of a file, by what keeps the file for them on the server (a
/// pin per open, of the session it was taken in; a session that ends takes its
/// pins with it).
///
/// Opens made without a call while the client held the file's layout (delayed
/// commit) are `held`: the server learns of them only from the answer to a recall
/// of the layout, which every call that could free the file sends first (an
/// unlink, a rename over it, the drop of its last pin), and takes a pin for each
/// then. Other opens are `pinned` (a call, a create's pin, or held opens told).
/// Those of a session that has ended are `stale`: nothing keeps the file for them.
///
/// A release cannot tell which open it ends, so it takes a `stale` one first
/// (no call), then a `held` one (no call), then a `pinned` one (its pin dropped
/// in its session): a pin of the session now is dropped only once no open older
/// than it is left, and every open still made stays covered.
#[derive(Default)]
struct FileOpens {
    /// Made under session `session`'s layout, not told to the server.
    held: u32,
    /// In a recall's answer on its way: pins of the session once it is answered.
    telling: u32,
    /// A pin told in a recall's answer for the file's commits not yet answered
    /// (its opens may all be released by then: the file must live until they
    /// apply), and the session it was told to; dropped once they are
    /// (`drop_commit_pin`).
    commit_pin: Option<u64>,
    /// Opens whose server pin is one of session `session`'s: taken by a call
    /// (`Open`, `OpenLayout`), a create's pin claimed, or `held` opens told in a
    /// recall's answer.
    pinned: u32,
    /// The session `held` and `pinned` are of.
    session: u64,
    /// Opens made in a session that has ended: released without a call.
    stale: u32,
}

impl FileOpens {
    /// Counts the opens of any session but `now` (whose pins went with it, and
    /// whose held opens no recall of `now` will tell) as stale.
    fn at(&mut self, now: u64) {
        if self.session != now {
            self.stale = self
                .stale
                .saturating_add(self.pinned)
                .saturating_add(self.held);
            self.pinned = 0;
            self.held = 0;
            self.session = now;
        }
    }

    /// Records `n` opens pinned in session `s`; `now`: the session now.
    fn pin(&mut self, s: u64, n: u32, now: u64) {
        self.at(now);
        if s == now {
            self.pinned = self.pinned.saturating_add(n);
        } else {
            self.stale = self.stale.saturating_add(n);
        }
    }
}

impl FileCache {
    /// Drops the cached layout, once no read through it is in flight (the write
    /// lock waits for them); a layout being fetched meanwhile is not installed.
    fn drop_layout(&self) {
        drop(self.drop_layout_locked());
    }

    /// `drop_layout`, returning the layout's write lock still held.
    fn drop_layout_locked(&self) -> parking_lot::RwLockWriteGuard<'_, Option<Cached>> {
        let mut w = self.layout.write();
        self.gen.fetch_add(1, Ordering::AcqRel);
        *w = None;
        w
    }

    /// Drops the cached layout before a commit of the file (as `drop_layout`)
    /// and returns the session and the newest grant it received until then, for
    /// the commit's `dropped` (see [`dropped_for`]): a layout granted later was asked
    /// for after this drop, and the server recalls it as any other client's.
    /// (Without it the server would recall our own layout and wait for our answer.)
    pub(crate) fn drop_for_commit(&self) -> (u64, u64) {
        // (What the commit's `keep` says is read after this: once the layout is
        // gone, opens are made on their own again only under a newer grant, which
        // the server recalls as any other.)
        let _w = self.drop_layout_locked();
        // Read under the write lock: a grant recorded after it is installed only
        // if it was asked for after the `gen` bump (so after this drop).
        *self.granted.lock()
    }

    /// A commit's `keep`, read after `drop_for_commit`: whether the server must
    /// keep this client among the file's holders after applying it, because it
    /// holds opens of the file made without a call, or writes of the file not in
    /// this commit are still to be committed (queued; or in flight beyond the
    /// `own` batches of the commit's own): until they apply, a call that would
    /// free the file must recall it (its answer then tells of a commit pin).
    pub(crate) fn keeps_holder(&self, own: u32) -> bool {
        let o = self.opens.lock();
        if o.held > 0 {
            return true;
        }
        let p = self.pending.lock();
        !p.extents.is_empty() || p.inflight > own
    }

    /// Records grant `grant` of a layout asked for by session `client`; under the
    /// layout's write lock.
    fn note_grant(&self, client: u64, grant: u64) {
        let mut g = self.granted.lock();
        *g = if g.0 == client {
            (client, g.1.max(grant))
        } else {
            (client, grant)
        };
    }
}

/// The `dropped` of a commit sent by session `sender`, from what
/// [`FileCache::drop_for_commit`] returned: 0 (recall as usual) unless the grants
/// were that session's.
pub(crate) fn dropped_for(sender: u64, (session, grant): (u64, u64)) -> u64 {
    if session == sender {
        grant
    } else {
        0
    }
}

/// Delegated space: two pools used in turn (papers/delayed-commit §IV-A). The
/// active one serves allocations; when it cannot, the standby one becomes active
/// and the emptied one is refilled by the server in the background.
#[derive(Default)]
struct Pools {
    active: VecDeque<Run>,
    standby: VecDeque<Run>,
    refilling: bool,
}

fn blocks_in(q: &VecDeque<Run>) -> u64 {
    q.iter().map(|r| r.1).sum()
}

/// Takes `n` blocks from `q` if it has them.
fn take_from(q: &mut VecDeque<Run>, n: u64) -> Option<Vec<Run>> {
    if blocks_in(q) < n {
        return None;
    }
    let mut out = Vec::new();
    let mut need = n;
    while need > 0 {
        let (a, l) = q.pop_front()?;
        let t = l.min(need);
        out.push((a, t));
        if t < l {
            q.push_front((a + t, l - t));
        }
        need -= t;
    }
    Some(out)
}

#[derive(Clone, Copy, Debug)]
struct SessionInfo {
    client: u64,
    lease: Duration,
    chunk: u64,
    /// Writes into delegated space stop at this instant unless a renewal moves it.
    deadline: Instant,
    /// The last commit batch's number in this session (one lock with the id, so
    /// a batch never carries one session's id and another's number).
    seq: u64,
}

pub(crate) struct Inner {
    rt: tokio::runtime::Handle,
    rpc: MdsClient<Channel>,
    vol: pm::Volume,
    uuid: Option<[u8; 16]>,
    commit: CommitMode,
    session: RwLock<SessionInfo>,
    pool: Mutex<Pools>,
    pub files: Mutex<HashMap<Ino, Arc<FileCache>>>,
    pub c: Counters,
    /// Delayed commit's queue and threads (`None`: synchronous commits).
    pub committer: Option<Committer>,
    /// Pins a create took for this client that no open has claimed yet, with
    /// the session they are of.
    created: Mutex<HashMap<Ino, (u64, u32)>>,
    /// References to inodes the server pinned for this client (`Remember`), by
    /// inode; an entry goes when it counts none.
    remembered: Mutex<HashMap<Ino, Remembered>>,
    /// Delayed commit: pins to drop, each with the session it was dropped in, sent
    /// with the next compound commit of that session (or not at all).
    pub deferred: Mutex<Vec<(u64, MetaReq)>>,
    stop: tokio::sync::watch::Sender<bool>,
}

/// A client of a metadata server, mounted through the engine interface.
pub struct Client {
    inner: Arc<Inner>,
    rt: tokio::runtime::Runtime,
    /// The inode served as the root (`ROOT_INO` unless `subdir`).
    root: Ino,
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

/// The `i`th block of `runs`.
fn nth_block(runs: &[Run], mut i: u64) -> Option<u64> {
    for &(b, l) in runs {
        if i < l {
            return Some(b + i);
        }
        i -= l;
    }
    None
}

/// The engine's error for an errno the server sent.
pub(crate) fn from_errno(errno: i32, msg: String) -> FsError {
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
            .worker_threads(1)
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
            rt: rt.handle().clone(),
            rpc,
            vol,
            uuid,
            commit: cfg.commit,
            session: RwLock::new(SessionInfo {
                client: 0,
                lease: Duration::ZERO,
                chunk: 0,
                deadline: Instant::now(),
                seq: 0,
            }),
            pool: Mutex::new(Pools::default()),
            files: Mutex::new(HashMap::new()),
            c: Counters::default(),
            committer: (cfg.commit == CommitMode::Delayed).then(|| Committer::new(cfg.delayed)),
            created: Mutex::new(HashMap::new()),
            remembered: Mutex::new(HashMap::new()),
            deferred: Mutex::new(Vec::new()),
            stop,
        });
        rt.block_on(Inner::open_session(&inner))?;
        let mut c = Client {
            inner,
            rt,
            root: mnemofs::ROOT_INO,
        };
        if let Some(d) = &cfg.subdir {
            let root = mnemofs::ROOT_INO;
            let a = match c.inner.attr(MetaReq::Lookup {
                parent: root,
                name: d.as_bytes().to_vec(),
            }) {
                Ok(a) => a,
                Err(FsError::NotFound) => c.inner.attr(MetaReq::Mkdir {
                    parent: root,
                    name: d.as_bytes().to_vec(),
                    mode: 0o755,
                    uid: 0,
                    gid: 0,
                })?,
                Err(e) => return Err(e),
            };
            if a.kind != mnemofs::FileKind::Directory {
                return Err(FsError::NotDir);
            }
            c.root = a.ino;
        }
        Ok(c)
    }

    /// The volume's inode for `ino` as the caller names it (its root is `subdir`).
    fn m(&self, ino: Ino) -> Ino {
        if ino == mnemofs::ROOT_INO {
            self.root
        } else {
            ino
        }
    }

    /// The caller's name for the volume's inode `ino`.
    fn back(&self, mut a: Attr) -> Attr {
        if a.ino == self.root {
            a.ino = mnemofs::ROOT_INO;
        }
        a
    }

    /// A call returning attributes, the root renamed back.
    fn attr(&self, req: MetaReq) -> Result<Attr> {
        self.inner.attr(req).map(|a| self.back(a))
    }

    /// The answer to a pinning create (`Create`, `CreateNode`): the new file's
    /// attributes, its layout installed when one came with them; `client` and
    /// `recalls` as read before the call.
    /// `pinned`: the session whose call answered (the create's pin is of it).
    fn created_reply(
        &self,
        (pinned, r): (u64, MetaReply),
        client: u64,
        recalls: u64,
    ) -> Result<Attr> {
        let a = self.with_reply_layout(r, client, recalls)?;
        self.inner.settle_end(a.ino);
        let a = self.inner.own_size(a)?;
        self.inner.created(self.m(a.ino), pinned);
        Ok(a)
    }

    /// The attributes of a create's or a lookup's answer, the layout that came
    /// with them (`Created`, `Found`) installed; `client` and `recalls` as read
    /// before the call.
    fn with_reply_layout(&self, r: MetaReply, client: u64, recalls: u64) -> Result<Attr> {
        match r {
            MetaReply::Attr(a) => Ok(a),
            MetaReply::Created { attr, layout } | MetaReply::Found { attr, layout } => {
                let (l, grant) = Cached::granted(layout);
                self.inner
                    .install_reply_layout(attr.ino, client, grant, recalls, l);
                Ok(attr)
            }
            _ => Err(io(
                std::io::ErrorKind::InvalidData,
                "metadata server: unexpected reply",
            )),
        }
    }

    /// The session's client id.
    pub fn id(&self) -> u64 {
        self.inner.session.read().client
    }

    /// Sends every queued commit and the pins still to drop, and waits until the
    /// server answered them (delayed commits; with synchronous ones nothing is
    /// queued): everything written so far is durable on the server. Returns the
    /// first error of a background commit not reported yet.
    pub fn flush(&self) -> Result<()> {
        let flushed = self.inner.flush_all();
        if self.inner.committer.is_some() {
            self.inner.commit_files(&[]);
        }
        flushed
    }

    /// Ends the session: the server takes back the unused delegated space.
    pub fn close(self) -> Result<()> {
        // Every queued commit is sent first (unmount makes everything durable),
        // and the pins still to drop.
        let flushed = self.flush();
        if let Some(cm) = &self.inner.committer {
            cm.stop();
        }
        let _ = self.inner.stop.send(true);
        let client = self.inner.session.read().client;
        let mut rpc = self.inner.rpc.clone();
        let r = self.rt.block_on(rpc.bye(SessionRef { client }));
        self.rt.shutdown_timeout(Duration::from_secs(1));
        flushed?;
        r.map(|_| ()).map_err(from_status)
    }

    /// Stops renewing the lease and answering recalls, as a client that hangs
    /// would (tests of lease expiry; the client is unusable afterwards).
    #[doc(hidden)]
    pub fn stop_renewing(&self) {
        let _ = self.inner.stop.send(true);
    }

    /// Delayed commit: samples of queue length, commit threads and compound
    /// degree over time (empty for synchronous commits).
    pub fn commit_samples(&self) -> Vec<Sample> {
        self.inner
            .committer
            .as_ref()
            .map(|c| c.samples())
            .unwrap_or_default()
    }

    /// Counters of this client.
    pub fn client_stats(&self) -> ClientStats {
        let c = &self.inner.c;
        let cm = self.inner.committer.as_ref();
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
            pool_blocks: {
                let p = self.inner.pool.lock();
                blocks_in(&p.active) + blocks_in(&p.standby)
            },
            batches: cm.map_or(0, |m| m.batches.load(Ordering::Relaxed)),
            batch_files: cm.map_or(0, |m| m.files_sent.load(Ordering::Relaxed)),
            peak_threads: cm.map_or(0, |m| m.peak_threads.load(Ordering::Relaxed) as u64),
            queued: cm.map_or(0, |m| m.queued() as u64),
            commit_delay_ns: cm.map_or([0; 3], |m| {
                let (a, b, c) = m.delay_percentiles();
                [a, b, c]
            }),
        }
    }
}

impl Inner {
    fn meta(self: &Arc<Self>, req: MetaReq) -> Result<MetaReply> {
        self.meta_in(req).map(|(_, r)| r)
    }

    /// `meta`, and the session whose call answered (a new one when the server
    /// said the first had gone).
    fn meta_in(self: &Arc<Self>, req: MetaReq) -> Result<(u64, MetaReply)> {
        let client = self.session.read().client;
        let mut rpc = self.rpc.clone();
        self.c.rpcs.fetch_add(1, Ordering::Relaxed);
        let r = self.rt.block_on(rpc.meta(MetaCall {
            client,
            req: req.clone(),
        }));
        let r = match r {
            Err(s) if s.code() == tonic::Code::FailedPrecondition => {
                // The session is gone (lease, or a server restart): open another and
                // try once more.
                self.rt.block_on(Inner::open_session(self))?;
                let client = self.session.read().client;
                self.c.rpcs.fetch_add(1, Ordering::Relaxed);
                self.rt
                    .block_on(rpc.meta(MetaCall { client, req }))
                    .map(|r| (client, r))
            }
            r => r.map(|r| (client, r)),
        };
        let (client, r) = r.map_err(from_status)?;
        match r.into_inner() {
            MetaReply::Err(e, m) => Err(from_errno(e, m)),
            ok => Ok((client, ok)),
        }
    }

    /// Sends a call of session `session` only (a pin drop): not at all when that
    /// session has ended here, and not again in a new one when the server says it
    /// is gone (its pins went with it).
    fn unit_in(self: &Arc<Self>, session: u64, req: MetaReq) -> Result<()> {
        if self.session_client() != session {
            return Ok(());
        }
        let mut rpc = self.rpc.clone();
        self.c.rpcs.fetch_add(1, Ordering::Relaxed);
        let r = self.rt.block_on(rpc.meta(MetaCall {
            client: session,
            req,
        }));
        match r {
            Err(s) if s.code() == tonic::Code::FailedPrecondition => Ok(()),
            r => match r.map_err(from_status)?.into_inner() {
                MetaReply::Unit => Ok(()),
                MetaReply::Err(e, m) => Err(from_errno(e, m)),
                _ => Err(io(
                    std::io::ErrorKind::InvalidData,
                    "metadata server: unexpected reply",
                )),
            },
        }
    }

    fn attr(self: &Arc<Self>, req: MetaReq) -> Result<Attr> {
        match self.meta(req)? {
            MetaReply::Attr(a) => self.own_size(a),
            _ => Err(io(
                std::io::ErrorKind::InvalidData,
                "metadata server: unexpected reply",
            )),
        }
    }

    /// Records the pin a create took for this client in session `s` (a pin of an
    /// earlier session of the file's, no open took, is forgotten: it went with its
    /// session).
    fn created(&self, ino: Ino, s: u64) {
        let mut c = self.created.lock();
        let e = c.entry(ino).or_insert((s, 0));
        if e.0 != s {
            // (Those of an earlier session went with it.)
            *e = (s, 0);
        }
        e.1 += 1;
    }

    /// Takes a create's pin no open took yet, for an open or a release.
    fn claim_created(&self, ino: Ino) -> Claim {
        let now = self.session_client();
        let mut c = self.created.lock();
        let Some((s, n)) = c.get_mut(&ino) else {
            return Claim::None;
        };
        let s = *s;
        *n = n.saturating_sub(1);
        if *n == 0 {
            c.remove(&ino);
        }
        if s == now {
            Claim::Pin(s)
        } else {
            Claim::Gone
        }
    }

    /// Forgets the unclaimed create pins of `ino`: how many there were of the
    /// session now, and that session.
    fn unclaimed(&self, ino: Ino) -> Option<(u64, u32)> {
        let now = self.session_client();
        self.created.lock().remove(&ino).filter(|&(s, _)| s == now)
    }

    /// Records `n` opens of `ino` pinned by the server in session `s`.
    fn pinned(self: &Arc<Self>, ino: Ino, s: u64, n: u32) {
        let fc = self.file(ino);
        // The session read under the lock, as every user of `FileOpens` reads it:
        // a session that changed is seen by all of them in one order.
        let mut o = fc.opens.lock();
        let now = self.session_client();
        o.pin(s, n, now);
    }

    /// Drops a pin (`Release` or `Forget`) of session `session`: at once with
    /// synchronous commits; with delayed commits in a later compound commit
    /// (nothing waits for it) — once every commit of the file queued or unanswered
    /// now is answered (`Pending::parked`): the pin may be all that keeps an
    /// unlinked file, and a batch of other files (another file's fsync, another
    /// commit thread) could carry it ahead of them. Sent in that session only: one
    /// that has ended took its pins with it, and a drop sent in the next one could
    /// take a pin of the new session's.
    fn unpin_in(self: &Arc<Self>, session: u64, req: MetaReq) -> Result<()> {
        if self.committer.is_none() {
            return self.unit_in(session, req);
        }
        let ino = match &req {
            MetaReq::Release { ino } | MetaReq::Forget { ino, .. } => Some(*ino),
            _ => None,
        };
        let tagged = (session, req);
        if let Some(fc) = ino.and_then(|i| self.files.lock().get(&i).cloned()) {
            let mut p = fc.pending.lock();
            if p.waiting() {
                p.parked.push(tagged);
                return Ok(());
            }
        }
        self.defer_pins(vec![tagged]);
        Ok(())
    }

    /// Pin drops (each with the session it was made in) for the next compound
    /// commit (alone after `PIN_DELAY`); those of a session that ended by then are
    /// not sent.
    pub(crate) fn defer_pins(self: &Arc<Self>, reqs: Vec<(u64, MetaReq)>) {
        if reqs.is_empty() {
            return;
        }
        let first = {
            let mut d = self.deferred.lock();
            let was_empty = d.is_empty();
            d.extend(reqs);
            was_empty
        };
        if first {
            self.kick();
        }
    }

    /// The session's client id now.
    pub(crate) fn session_client(&self) -> u64 {
        self.session.read().client
    }

    /// Delayed commit: the size counts this client's own writes not yet
    /// committed. A reply smaller than they reach while none is pending or in
    /// flight was either made before their commit applied, or the file was cut
    /// since by someone else: asked once more, the server's answer stands.
    fn own_size(self: &Arc<Self>, mut a: Attr) -> Result<Attr> {
        if self.committer.is_none() {
            return Ok(a);
        }
        let Some(fc) = self.files.lock().get(&a.ino).cloned() else {
            return Ok(a);
        };
        let (end, busy) = {
            let p = fc.pending.lock();
            (p.end, !p.extents.is_empty() || p.inflight > 0)
        };
        if end <= a.size {
            return Ok(a);
        }
        if busy {
            a.size = end;
            return Ok(a);
        }
        let fresh = match self.meta(MetaReq::Getattr { ino: a.ino })? {
            MetaReply::Attr(f) => f,
            _ => {
                return Err(io(
                    std::io::ErrorKind::InvalidData,
                    "metadata server: unexpected reply",
                ))
            }
        };
        let mut p = fc.pending.lock();
        if p.extents.is_empty() && p.inflight == 0 && p.end == end {
            p.end = 0;
        }
        Ok(fresh)
    }

    fn unit(self: &Arc<Self>, req: MetaReq) -> Result<()> {
        match self.meta(req)? {
            MetaReply::Unit => Ok(()),
            _ => Err(io(
                std::io::ErrorKind::InvalidData,
                "metadata server: unexpected reply",
            )),
        }
    }

    fn bytes(self: &Arc<Self>, req: MetaReq) -> Result<Vec<u8>> {
        match self.meta(req)? {
            MetaReply::Bytes(b) => Ok(b),
            _ => Err(io(
                std::io::ErrorKind::InvalidData,
                "metadata server: unexpected reply",
            )),
        }
    }

    /// The file's size from its cached layout, counting this client's own writes
    /// not yet committed (as a read does); `None` without a cached layout. Current:
    /// every call that changes the size from another client (a commit, a
    /// truncation, an allocation) recalls this layout before it applies, and the
    /// recall waits for the layout's lock, held here.
    fn cached_size(fc: &FileCache) -> Option<u64> {
        let g = fc.layout.read();
        let l = g.as_ref()?;
        let mut p = fc.pending.lock();
        if !p.overlay.is_empty() || !p.extents.is_empty() || p.inflight > 0 {
            return Some(l.size.max(p.end));
        }
        // Nothing of ours pending or in flight: the end of our earlier writes is
        // settled (as `own_size` does), and the current layout has the size (it may
        // be smaller: the file was cut since).
        p.end = 0;
        Some(l.size)
    }

    pub(crate) fn file(self: &Arc<Self>, ino: Ino) -> Arc<FileCache> {
        self.files.lock().entry(ino).or_default().clone()
    }

    /// Runs `f` on a layout of `ino` that covers pages `[pg0, pg1]` (or reaches the
    /// end of file), under its read lock; fetches one if the cached one does not.
    fn with_layout<T>(
        self: &Arc<Self>,
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
            let client = self.session.read().client;
            let n = (pg1 - pg0 + 1).max(1024);
            let mut rpc = self.rpc.clone();
            self.c.rpcs.fetch_add(1, Ordering::Relaxed);
            self.c.layout_rpcs.fetch_add(1, Ordering::Relaxed);
            let r = self.rt.block_on(rpc.layout(LayoutReq {
                client,
                ino,
                first: pg0,
                n,
            }));
            let r = match r {
                Err(s) if s.code() == tonic::Code::FailedPrecondition => {
                    self.rt.block_on(Inner::open_session(self))?;
                    continue;
                }
                r => r.map_err(from_status)?.into_inner(),
            };
            let (l, grant) = match r {
                LayoutReply::Ok(g) => Cached::granted(g),
                LayoutReply::Err(e, m) => return Err(from_errno(e, m)),
            };
            let mut w = fc.layout.write();
            // Recorded before the install check, under the same lock as a commit's
            // drop: either the drop promises this grant away too (and the check below
            // throws the layout away, since it was asked for before the drop), or
            // the grant is newer than what the drop promised.
            fc.note_grant(client, grant);
            if fc.gen.load(Ordering::Acquire) != gen {
                // A recall came while the reply was on its way: the blocks it names
                // may be freed already. Ask again.
                continue;
            }
            *w = Some(l.clone());
            let have = l.first + l.blocks.len() as u64;
            if l.first <= pg0 && (pg1 < have || have >= l.size.div_ceil(BLOCK)) {
                return Ok(f(&l));
            }
        }
        Err(io(std::io::ErrorKind::TimedOut, "layout kept changing"))
    }

    /// Delayed commit: opens `ino` without a call when its layout is held. The
    /// server counts this client among the file's holders then, and recalls the
    /// layout before any call that could free the file; the answer tells it of
    /// this open (`on_recall`). Other clients' changes recall the layout too, so
    /// the open sees them as an open call would.
    fn open_held(&self, ino: Ino) -> bool {
        if self.committer.is_none() {
            return false;
        }
        let Some(fc) = self.files.lock().get(&ino).cloned() else {
            return false;
        };
        let g = fc.layout.read();
        if g.is_none() {
            return false;
        }
        let mut o = fc.opens.lock();
        let now = self.session_client();
        // Only under a layout of the session now: one of a session that has
        // ended (about to be dropped) would make an open the server never hears
        // of.
        if fc.granted.lock().0 != now {
            return false;
        }
        o.at(now);
        o.held += 1;
        true
    }

    /// Forgets the end of this client's earlier writes of `ino` if none of them is
    /// queued or unanswered: the file was just created, so they were of a file
    /// freed since whose number the new one reuses (else the create's size, 0,
    /// would look behind them and `own_size` would ask the server again).
    fn settle_end(&self, ino: Ino) {
        let Some(fc) = self.files.lock().get(&ino).cloned() else {
            return;
        };
        let mut p = fc.pending.lock();
        if !p.waiting() && p.overlay.is_empty() {
            p.end = 0;
        }
    }

    /// Drops the file's commit pin (see `FileOpens::commit_pin`) if it has one and
    /// no commit of it waits any more; with the next compound commit, once the
    /// recall's answer that told of it is answered.
    pub(crate) fn drop_commit_pin(self: &Arc<Self>, fc: &FileCache, ino: Ino) {
        let mut o = fc.opens.lock();
        let Some(told) = o.commit_pin else {
            return;
        };
        {
            let p = fc.pending.lock();
            if p.waiting() {
                return;
            }
        }
        o.commit_pin = None;
        while o.telling > 0 {
            fc.opens_told.wait(&mut o);
        }
        drop(o);
        // Only a pin of the session now (one told to a session gone went with it).
        // (Delayed commit: only queued.)
        let _ = self.unpin_in(told, MetaReq::Release { ino });
    }

    /// Opens `ino` (`served`: its number on the server) and, unless a layout of it
    /// is cached, takes the layout of its first pages in the same call (the read
    /// that usually follows needs no call of its own), installed as `with_layout`
    /// installs one.
    fn open_with_layout(self: &Arc<Self>, ino: Ino, served: Ino) -> Result<()> {
        let fc = self.file(ino);
        if fc.layout.read().is_some() {
            let (s, r) = self.meta_in(MetaReq::Open { ino: served })?;
            self.pinned(served, s, 1);
            return match r {
                MetaReply::Unit => Ok(()),
                _ => Err(io(
                    std::io::ErrorKind::InvalidData,
                    "metadata server: unexpected reply",
                )),
            };
        }
        let gen = fc.gen.load(Ordering::Acquire);
        let client = self.session.read().client;
        let (s, r) = self.meta_in(MetaReq::OpenLayout {
            ino: served,
            first: 0,
            n: 1024,
        })?;
        // Pinned, whatever the layout's fate below.
        self.pinned(served, s, 1);
        let (l, grant) = match r {
            MetaReply::Layout(g) => Cached::granted(g),
            MetaReply::Unit => return Ok(()),
            _ => {
                return Err(io(
                    std::io::ErrorKind::InvalidData,
                    "metadata server: unexpected reply",
                ))
            }
        };
        // A grant is kept only by the session it was made to (`meta` opens another
        // when the first is gone): else the layout is not used.
        if self.session.read().client != client {
            return Ok(());
        }
        let mut w = fc.layout.write();
        // As in `with_layout`: recorded before the check, under the layout's lock.
        fc.note_grant(client, grant);
        if fc.gen.load(Ordering::Acquire) == gen && w.is_none() {
            *w = Some(l);
        }
        Ok(())
    }

    /// Installs the layout a create or a lookup of `ino` brought (granted `grant`
    /// to session `client`), unless a recall came since `recalls` (recalls answered
    /// before the call): the file may have had no cache entry for a recall to find,
    /// so any recall counts.
    /// A recall after the check finds the entry made here and drops the layout.
    fn install_reply_layout(
        self: &Arc<Self>,
        ino: Ino,
        client: u64,
        grant: u64,
        recalls: u64,
        l: Cached,
    ) {
        let fc = self.file(ino);
        let mut w = fc.layout.write();
        // Under the layout's lock: a session change after this check drops every
        // layout (`forget_space_and_layouts`, which waits for this lock) and finds
        // the entry made above.
        if self.session.read().client != client {
            return;
        }
        // A newer grant of this session was noted already (an open of the file by
        // another thread, answered first): what it gave, or a commit's drop that
        // promised it away since, stands; this older layout is not used.
        let newer = {
            let g = fc.granted.lock();
            g.0 == client && g.1 > grant
        };
        fc.note_grant(client, grant);
        // (`on_recall` counts before it looks for the file's entry, under the
        // table's lock, which `file` took after it.)
        if !newer && self.c.recalls.load(Ordering::Acquire) == recalls && w.is_none() {
            *w = Some(l);
        }
    }

    /// Drops the cached layout of `ino`.
    pub(crate) fn invalidate(self: &Arc<Self>, ino: Ino) {
        let fc = self.files.lock().get(&ino).cloned();
        if let Some(fc) = fc {
            fc.drop_layout();
        }
    }

    /// Takes `n` blocks of delegated space: from the active pool, else from the
    /// standby one (which becomes active while the emptied one is refilled in the
    /// background), else (both dry) from a delegation waited for; a write larger
    /// than a chunk asks the server for its own.
    fn take_blocks(self: &Arc<Self>, n: u64) -> Result<(u64, Vec<Run>)> {
        for _ in 0..4 {
            let s = *self.session.read();
            if Instant::now() >= s.deadline {
                // The lease may have run out: renew (or reopen) before writing.
                self.rt.block_on(Inner::renew_or_reopen(self))?;
                continue;
            }
            if n <= s.chunk {
                let mut p = self.pool.lock();
                if let Some(r) = take_from(&mut p.active, n) {
                    return Ok((s.client, r));
                }
                if blocks_in(&p.standby) >= n {
                    let p = &mut *p;
                    std::mem::swap(&mut p.active, &mut p.standby);
                    let r = take_from(&mut p.active, n);
                    if !p.refilling {
                        p.refilling = true;
                        let me = self.clone();
                        self.rt
                            .spawn(async move { me.refill(s.client, s.chunk).await });
                    }
                    if let Some(r) = r {
                        return Ok((s.client, r));
                    }
                }
            }
            let want = n.max(s.chunk);
            match self.rt.block_on(self.delegate(s.client, want))? {
                Some(mut runs) if n > s.chunk => {
                    // Its own delegation: all of it for this write.
                    let mut q: VecDeque<Run> = runs.drain(..).collect();
                    if let Some(r) = take_from(&mut q, n) {
                        return Ok((s.client, r));
                    }
                }
                Some(runs) => {
                    let mut p = self.pool.lock();
                    if self.session.read().client == s.client {
                        p.active.extend(runs);
                    }
                }
                None => {}
            }
        }
        Err(io(std::io::ErrorKind::TimedOut, "no delegated space"))
    }

    /// Asks for `blocks` blocks; `None` when the session had to be opened again
    /// (the caller starts over).
    async fn delegate(self: &Arc<Self>, client: u64, blocks: u64) -> Result<Option<Vec<Run>>> {
        let mut rpc = self.rpc.clone();
        self.c.rpcs.fetch_add(1, Ordering::Relaxed);
        self.c.delegations.fetch_add(1, Ordering::Relaxed);
        match rpc.delegate(DelegateReq { client, blocks }).await {
            Err(st) if st.code() == tonic::Code::FailedPrecondition => {
                Inner::open_session(self).await?;
                Ok(None)
            }
            Err(st) => Err(from_status(st)),
            Ok(r) => match r.into_inner() {
                DelegateReply::Ok(runs) => Ok(Some(runs)),
                DelegateReply::Err(e, m) => Err(from_errno(e, m)),
            },
        }
    }

    /// Refills the standby pool (in the background).
    async fn refill(self: Arc<Self>, client: u64, chunk: u64) {
        let got = self.delegate(client, chunk).await;
        let mut p = self.pool.lock();
        p.refilling = false;
        if let Ok(Some(runs)) = got {
            if self.session.read().client == client {
                p.standby.extend(runs);
            }
        }
    }

    /// Reads `[off, off + buf.len())` of `ino` straight from the shared devices:
    /// this client's uncommitted pages (delayed commit) over the file's layout.
    fn read_data(self: &Arc<Self>, ino: Ino, off: u64, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let pg0 = off / BLOCK;
        let pg1 = (off + buf.len() as u64 - 1) / BLOCK;
        let fc = self.file(ino);
        let vol = &self.vol;
        let len = vol.len();
        let copy = |block: u64, at: u64, dst: &mut [u8]| {
            let src = block.checked_mul(BLOCK).and_then(|b| b.checked_add(at));
            match src {
                Some(s) if block != 0 && s + dst.len() as u64 <= len => {
                    // SAFETY: a committed block is never written in place (page
                    // CoW), and the server frees it only after recalling the layout
                    // that named it, which waits for this read (we hold the
                    // layout's lock; a layout fetched across a recall is not used);
                    // an uncommitted block of ours is written only before it is
                    // published in the overlay, or by `remerge`, both under
                    // `pending`, which we hold while reading it.
                    unsafe { vol.read(s, dst) }
                }
                _ => dst.fill(0),
            }
        };
        // Lock order: the layout's lock (taken by `with_layout`), then `pending`
        // (held for the copy: an overlay block is ours until its commit is
        // answered, and the answer is applied under it); no call is made under it.
        self.with_layout(ino, pg0, pg1, |l| {
            let p = fc.pending.lock();
            // (A size of our own counts only while writes are uncommitted:
            // answered ones are in the layout's size.)
            let own =
                (!p.overlay.is_empty() || !p.extents.is_empty() || p.inflight > 0).then_some(&*p);
            let size = l.size.max(own.map_or(0, |p| p.end));
            if off >= size {
                return 0;
            }
            let end = size.min(off + buf.len() as u64);
            let mut at = off;
            while at < end {
                let pg = at / BLOCK;
                let in_pg = at % BLOCK;
                let n = (BLOCK - in_pg).min(end - at) as usize;
                let dst = &mut buf[(at - off) as usize..(at - off) as usize + n];
                match own.and_then(|p| p.overlay.get(&pg)) {
                    Some(&b) => copy(b, in_pg, dst),
                    None if at < l.size => {
                        let b = l.blocks.get((pg - l.first) as usize).copied().unwrap_or(0);
                        let k = ((l.size - at) as usize).min(n);
                        copy(b, in_pg, &mut dst[..k]);
                        dst[k..].fill(0);
                    }
                    None => dst.fill(0),
                }
                at += n as u64;
            }
            (end - off) as usize
        })
    }

    /// A write, one at a time per file in this client.
    fn write_data(self: &Arc<Self>, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        let fc = self.file(ino);
        let _one = fc.write.lock();
        self.write_locked(ino, off, data)
    }

    /// The synchronous write (the caller holds the file's write lock): fresh
    /// delegated blocks, merged partial pages, persisted, committed; returns once
    /// the server's log commit is durable.
    fn write_locked(self: &Arc<Self>, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
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
        let (owner, runs) = self.take_blocks(npages)?;
        let head_partial = !off.is_multiple_of(BLOCK) || end < (first + 1) * BLOCK;
        let tail_partial = last != first && !end.is_multiple_of(BLOCK);
        let fc = self.file(ino);
        let delayed = self.committer.is_some();
        for _attempt in 0..16 {
            // The old blocks of pages written in part (their other bytes stay): our
            // own uncommitted copy, else the committed one.
            let mut expect = Vec::new();
            let mut parts = Vec::new();
            if head_partial || tail_partial {
                let own = |pg: u64| {
                    if delayed {
                        fc.pending.lock().overlay.get(&pg).copied()
                    } else {
                        None
                    }
                };
                let (oh, ot) = (own(first), own(last));
                let need_layout = (head_partial && oh.is_none()) || (tail_partial && ot.is_none());
                let (h, t) = if need_layout {
                    self.with_layout(ino, first, last, |l| {
                        let at = |pg: u64| {
                            if pg * BLOCK >= l.size {
                                0
                            } else {
                                l.blocks.get((pg - l.first) as usize).copied().unwrap_or(0)
                            }
                        };
                        (at(first), at(last))
                    })?
                } else {
                    (0, 0)
                };
                if head_partial {
                    expect.push((first, oh.unwrap_or(h)));
                    let lo = off - first * BLOCK;
                    parts.push((first, lo, (end - first * BLOCK).min(BLOCK)));
                }
                if tail_partial {
                    expect.push((last, ot.unwrap_or(t)));
                    parts.push((last, 0, end - last * BLOCK));
                }
            }
            self.store_pages(&runs, off, data, &expect)?;
            // Fence: the new pages are durable before the commit that maps them is
            // sent (the server's log entry must never name unwritten blocks). In
            // delayed mode too: a fence orders only this thread's stores, so the
            // commit threads could not make them durable.
            self.vol.fence();
            let mut c = ExtentCommit {
                ino,
                first,
                end,
                runs: runs.clone(),
                expect,
                // Set when it is sent (`drop_for_commit`).
                dropped: 0,
                keep: false,
            };
            if delayed {
                let queue = {
                    let mut p = fc.pending.lock();
                    let mut pg = first;
                    for &(b, l) in &runs {
                        for blk in b..b + l {
                            p.overlay.insert(pg, blk);
                            pg += 1;
                        }
                    }
                    p.end = p.end.max(end);
                    p.extents.push((c, parts, owner));
                    p.since.get_or_insert_with(Instant::now);
                    !std::mem::replace(&mut p.queued, true)
                };
                if queue {
                    self.enqueue(ino);
                }
                return Ok(data.len());
            }
            c.dropped = dropped_for(owner, fc.drop_for_commit());
            c.keep = fc.keeps_holder(0);
            let (r, _) = self.send_commit(owner, vec![c], Vec::new())?;
            match r.first().copied().unwrap_or(libc::EIO) {
                0 => return Ok(data.len()),
                libc::EAGAIN => {
                    self.c.retries.fetch_add(1, Ordering::Relaxed);
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

    /// Merges the partial pages `parts` of a delayed commit `c` again, with the
    /// file's current committed pages (another client changed one since the write
    /// merged it): our bytes stay, the others are taken anew, in place (the blocks
    /// are ours until committed).
    pub(crate) fn remerge(
        self: &Arc<Self>,
        ino: Ino,
        c: &mut ExtentCommit,
        parts: &[(u64, u64, u64)],
    ) -> Result<()> {
        let vol = &self.vol;
        let mut page = vec![0u8; BLOCK as usize];
        for &(pg, lo, hi) in parts {
            let Some(ours) = nth_block(&c.runs, pg - c.first) else {
                continue;
            };
            let (cur, size) = self.with_layout(ino, pg, pg, |l| {
                (
                    l.blocks.get((pg - l.first) as usize).copied().unwrap_or(0),
                    l.size,
                )
            })?;
            let dst = ours.checked_mul(BLOCK).filter(|&d| d + BLOCK <= vol.len());
            let Some(dst) = dst else {
                return Err(FsError::Corrupt(format!(
                    "delegated block {ours} is outside the volume"
                )));
            };
            // Readers of our overlay read this block under `pending`: so is it
            // rewritten (no call is made under it).
            let fc = self.file(ino);
            let _p = fc.pending.lock();
            let mut mine = vec![0u8; (hi - lo) as usize];
            // SAFETY: our uncommitted block: only this file's commit path (we are
            // it, the file's batch is in our hands) writes it, under `pending`.
            unsafe { vol.read(dst + lo, &mut mine) };
            match cur
                .checked_mul(BLOCK)
                .filter(|&o| cur != 0 && pg * BLOCK < size && o + BLOCK <= vol.len())
            {
                // SAFETY: as in `store_pages` (the commit's `expect` catches a change).
                Some(o) => unsafe { vol.read(o, &mut page) },
                None => page.fill(0),
            }
            page[lo as usize..hi as usize].copy_from_slice(&mine);
            // SAFETY: as above.
            unsafe { vol.write_nt(dst, &page) };
            for e in c.expect.iter_mut().filter(|e| e.0 == pg) {
                e.1 = cur;
            }
        }
        // Fence: the merged pages are durable before their commit is sent again.
        self.vol.fence();
        Ok(())
    }

    /// Stores the pages of `data` (file offset `off`) into `runs`, partial pages
    /// merged with their old blocks (`expect`).
    fn store_pages(
        self: &Arc<Self>,
        runs: &[Run],
        off: u64,
        data: &[u8],
        expect: &[(u64, u64)],
    ) -> Result<()> {
        let vol = &self.vol;
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

    /// Sends one batch of commits and returns each one's errno (0: applied) and
    /// the server's load.
    /// `owner`: the session the blocks were delegated to; a commit of another
    /// session's blocks is never sent (that space may be someone else's now).
    pub(crate) fn send_commit(
        self: &Arc<Self>,
        owner: u64,
        commits: Vec<ExtentCommit>,
        after: Vec<MetaReq>,
    ) -> Result<(Vec<i32>, u32)> {
        let n = commits.len() as u64;
        let (client, seq) = {
            let mut s = self.session.write();
            if s.client != owner {
                return Err(FsError::Io(std::io::Error::from_raw_os_error(libc::ESTALE)));
            }
            s.seq += 1;
            (s.client, s.seq)
        };
        let batch = CommitBatch {
            client,
            seq,
            commits,
            after,
        };
        let mut rpc = self.rpc.clone();
        for attempt in 0..3 {
            self.c.rpcs.fetch_add(1, Ordering::Relaxed);
            self.c.commit_rpcs.fetch_add(1, Ordering::Relaxed);
            match self.rt.block_on(rpc.commit(batch.clone())) {
                Ok(r) => {
                    self.c.commits.fetch_add(n, Ordering::Relaxed);
                    let r = r.into_inner();
                    return Ok((r.results, r.busy));
                }
                // Lost on the way (or the reply was): the same batch again applies
                // once (the server keeps the last reply).
                Err(s) if s.code() == tonic::Code::Unavailable && attempt < 2 => continue,
                Err(s) => return Err(from_status(s)),
            }
        }
        Err(io(std::io::ErrorKind::TimedOut, "commit not acknowledged"))
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
                seq: 0,
            };
            me.forget_space_and_layouts();
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
                        _ => {
                            // Recalls can no longer reach us: this session may not
                            // read or write any more; the next call opens another.
                            w.drop_session(client);
                            break;
                        }
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
                    // The server may have ended the session (and will free its
                    // space a lease later): stop using it now; the next call opens
                    // another.
                    r.drop_session(client);
                    break;
                }
            }
        });
        Ok(())
    }

    /// Stops using session `client` (if it is still the current one): no more
    /// writes into its space, no cached layout; the next call opens a new one.
    fn drop_session(&self, client: u64) {
        {
            let mut s = self.session.write();
            if s.client != client {
                return;
            }
            s.client = 0;
            s.deadline = Instant::now();
        }
        self.forget_space_and_layouts();
    }

    /// What a session change leaves behind: the old session's delegated space and
    /// every cached layout. (The creates' pins no open claimed went with the
    /// session too: their entries say which session they were of, so an open
    /// claiming one makes a call and a release of one none.)
    fn forget_space_and_layouts(&self) {
        *self.pool.lock() = Pools::default();
        let files: Vec<Arc<FileCache>> = self.files.lock().values().cloned().collect();
        for fc in files {
            fc.drop_layout();
        }
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

    /// A recall: drop the layout once no read of it is in flight, then answer,
    /// telling the server of the opens made without a call (which a release waits
    /// for before it sends its own: the server must have their pins first).
    async fn on_recall(&self, client: u64, r: Recall) {
        self.c.recalls.fetch_add(1, Ordering::Relaxed);
        let fc = self.files.lock().get(&r.ino).cloned();
        let opens = match &fc {
            Some(fc) => {
                // Under the layout's lock: an open on its own checks for the
                // layout under it, so it is either counted here or makes a call.
                let _w = fc.drop_layout_locked();
                let mut o = fc.opens.lock();
                // Told only to the session now: a recall of a session this client
                // has left (its watch may still run) must not take opens made
                // under the new one to a session that will expire.
                let current = self.session.read().client == client;
                let mut n = 0;
                if current {
                    o.at(client);
                    n = std::mem::take(&mut o.held);
                    // Pins of this session once the answer arrives (a release
                    // waits for `telling` before it drops one).
                    o.pinned += n;
                    // (One told to a session gone went with it.)
                    if o.commit_pin.is_none_or(|s| s != client) && self.committer.is_some() {
                        let p = fc.pending.lock();
                        if p.waiting() {
                            o.commit_pin = Some(client);
                            n += 1;
                        }
                    }
                }
                o.telling += n;
                n
            }
            None => 0,
        };
        let mut rpc = self.rpc.clone();
        let _ = rpc
            .recalled(RecallAck {
                client,
                id: r.id,
                opens,
            })
            .await;
        if let (Some(fc), true) = (&fc, opens > 0) {
            fc.opens.lock().telling -= opens;
            fc.opens_told.notify_all();
        }
    }
}

impl FileSystem for Client {
    type Handle = ClientHandle;
    type Stats = ClientStats;

    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        if parent == mnemofs::ROOT_INO && name == b".." {
            // The served root is its own parent, as `/` is.
            return self.getattr(parent);
        }
        if self.inner.committer.is_none() {
            return self.attr(MetaReq::Lookup {
                parent: self.m(parent),
                name: name.to_vec(),
            });
        }
        // Delayed commit: a regular file's layout comes with it, so that an open
        // that follows needs no call (`open_held`). As for a create: counted before.
        let recalls = self.inner.c.recalls.load(Ordering::Acquire);
        let client = self.inner.session_client();
        let r = self.inner.meta(MetaReq::LookupLayout {
            parent: self.m(parent),
            name: name.to_vec(),
        })?;
        let a = self.with_reply_layout(r, client, recalls)?;
        self.inner.own_size(a).map(|a| self.back(a))
    }

    fn getattr(&self, ino: Ino) -> Result<Attr> {
        self.attr(MetaReq::Getattr { ino: self.m(ino) })
    }

    fn setattr(&self, ino: Ino, req: &SetAttr) -> Result<Attr> {
        let fc = self.inner.file(ino);
        let _one = fc.write.lock();
        // Earlier writes reach the server before a truncation does.
        if req.size.is_some() {
            self.inner.flush(ino)?;
        }
        let r = self.attr(MetaReq::Setattr {
            ino: self.m(ino),
            attr: *req,
        });
        self.inner.invalidate(ino);
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
            parent: self.m(parent),
            name: name.to_vec(),
            mode,
            rdev,
            uid,
            gid,
        })
    }

    /// The new file comes pinned for this client: the open that follows a
    /// create (FUSE's create, a benchmark's) takes that pin instead of a call.
    /// Its layout comes with it too (`MetaReply::Created`), for its first write.
    fn create(&self, parent: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> {
        // Before the call: a recall that comes while the answer is on its way may be
        // of this very file, for which no cache entry exists yet (see `on_recall`).
        let recalls = self.inner.c.recalls.load(Ordering::Acquire);
        let client = self.inner.session_client();
        let r = self.inner.meta_in(MetaReq::Create {
            parent: self.m(parent),
            name: name.to_vec(),
            mode,
            uid,
            gid,
            pin: true,
        })?;
        self.created_reply(r, client, recalls)
    }

    fn mkdir(&self, parent: Ino, name: &[u8], mode: u32, uid: u32, gid: u32) -> Result<Attr> {
        self.attr(MetaReq::Mkdir {
            parent: self.m(parent),
            name: name.to_vec(),
            mode,
            uid,
            gid,
        })
    }

    /// FUSE's create: pinned, and with its layout, as [`create`](Self::create).
    fn create_node(&self, parent: Ino, name: &[u8], node: &NewNode) -> Result<Attr> {
        let recalls = self.inner.c.recalls.load(Ordering::Acquire);
        let client = self.inner.session_client();
        let r = self.inner.meta_in(MetaReq::CreateNode {
            parent: self.m(parent),
            name: name.to_vec(),
            node: *node,
            pin: true,
        })?;
        self.created_reply(r, client, recalls)
    }

    fn symlink(&self, parent: Ino, name: &[u8], target: &[u8], uid: u32, gid: u32) -> Result<Attr> {
        self.attr(MetaReq::Symlink {
            parent: self.m(parent),
            name: name.to_vec(),
            target: target.to_vec(),
            uid,
            gid,
        })
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.inner.bytes(MetaReq::Readlink { ino: self.m(ino) })
    }

    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.inner.bytes(MetaReq::Getxattr {
            ino: self.m(ino),
            name: name.to_vec(),
        })
    }

    fn listxattr(&self, ino: Ino) -> Result<Vec<u8>> {
        self.inner.bytes(MetaReq::Listxattr { ino: self.m(ino) })
    }

    fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        self.inner.unit(MetaReq::Setxattr {
            ino: self.m(ino),
            name: name.to_vec(),
            value: value.to_vec(),
            flags,
        })
    }

    fn removexattr(&self, ino: Ino, name: &[u8]) -> Result<()> {
        self.inner.unit(MetaReq::Removexattr {
            ino: self.m(ino),
            name: name.to_vec(),
        })
    }

    fn unlink(&self, parent: Ino, name: &[u8]) -> Result<()> {
        self.inner.unit(MetaReq::Unlink {
            parent: self.m(parent),
            name: name.to_vec(),
        })
    }

    fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<()> {
        self.inner.unit(MetaReq::Rmdir {
            parent: self.m(parent),
            name: name.to_vec(),
        })
    }

    fn link(&self, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> {
        self.attr(MetaReq::Link {
            ino: self.m(ino),
            parent: self.m(newparent),
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
        self.inner.unit(MetaReq::Rename {
            parent: self.m(parent),
            name: name.to_vec(),
            newparent: self.m(newparent),
            newname: newname.to_vec(),
            flags,
        })
    }

    fn readdir(&self, ino: Ino, offset: u64, max: usize) -> Result<Vec<DirEntry>> {
        match self.inner.meta(MetaReq::Readdir {
            ino: self.m(ino),
            offset,
            max: max as u64,
        })? {
            MetaReply::Dir(mut d) => {
                for e in &mut d {
                    if e.ino == self.root {
                        e.ino = mnemofs::ROOT_INO;
                    }
                }
                Ok(d)
            }
            _ => Err(io(
                std::io::ErrorKind::InvalidData,
                "metadata server: unexpected reply",
            )),
        }
    }

    fn read(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.inner.read_data(ino, offset, buf)
    }

    fn write(&self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize> {
        self.inner.write_data(ino, offset, data)
    }

    /// The end of file as the server has it when the write starts: atomic with
    /// respect to this client's other writes of the file, not to other clients'
    /// (as over NFS).
    fn append(&self, ino: Ino, data: &[u8]) -> Result<u64> {
        let fc = self.inner.file(ino);
        let _one = fc.write.lock();
        let size = match Inner::cached_size(&fc) {
            Some(s) => s,
            None => self.getattr(ino)?.size,
        };
        self.inner.write_locked(ino, size, data)?;
        Ok(size)
    }

    fn fallocate(&self, ino: Ino, offset: u64, len: u64, mode: i32) -> Result<()> {
        let fc = self.inner.file(ino);
        let _one = fc.write.lock();
        self.inner.flush(ino)?;
        let r = self.inner.unit(MetaReq::Fallocate {
            ino: self.m(ino),
            offset,
            len,
            mode,
        });
        self.inner.invalidate(ino);
        r
    }

    fn open(&self, ino: Ino) -> Result<()> {
        let m = self.m(ino);
        // (A create's pin gone with its session: the open pins anew.)
        if let Claim::Pin(s) = self.inner.claim_created(m) {
            self.inner.pinned(m, s, 1);
            return Ok(());
        }
        if self.inner.open_held(m) {
            return Ok(());
        }
        self.inner.open_with_layout(ino, m)
    }

    /// Does not wait for the file's commits (as in the paper); returns the error
    /// of one that failed since the last `fsync` or `release`.
    fn release(&self, ino: Ino) -> Result<()> {
        // (The table's lock is let go before the file's: a reader takes them the
        // other way round.) Not cleared: FUSE drops a RELEASE's error, so the next
        // fsync or close(2) reports it too.
        let fc = self.inner.files.lock().get(&self.m(ino)).cloned();
        // A create's pin no open took is the one dropped (the caller released the
        // file without opening it): else a later open would take it for its own,
        // and hold nothing. Else an open of an ended session, then one made
        // without a call, go without one; else the pin of one of the session now
        // (see `FileOpens`), once a recall's answer that told of opens is
        // answered.
        enum Give {
            No,
            In(u64),
            NoOpen,
        }
        let give = match self.inner.claim_created(self.m(ino)) {
            Claim::Pin(s) => Give::In(s),
            Claim::Gone => Give::No,
            Claim::None => match &fc {
                None => Give::NoOpen,
                Some(fc) => {
                    let mut o = fc.opens.lock();
                    o.at(self.inner.session_client());
                    if o.stale > 0 {
                        o.stale -= 1;
                        Give::No
                    } else if o.held > 0 {
                        o.held -= 1;
                        Give::No
                    } else {
                        while o.telling > 0 {
                            fc.opens_told.wait(&mut o);
                        }
                        // (The session may have ended meanwhile.)
                        o.at(self.inner.session_client());
                        if o.stale > 0 {
                            o.stale -= 1;
                            Give::No
                        } else if o.pinned > 0 {
                            o.pinned -= 1;
                            Give::In(o.session)
                        } else {
                            Give::NoOpen
                        }
                    }
                }
            },
        };
        let failed = fc.and_then(|fc| fc.pending.lock().error);
        match give {
            Give::No => {}
            Give::In(s) => self
                .inner
                .unpin_in(s, MetaReq::Release { ino: self.m(ino) })?,
            Give::NoOpen => {
                return Err(from_errno(
                    libc::EINVAL,
                    "no open of this file to release".into(),
                ))
            }
        }
        match failed {
            Some(e) => Err(from_errno(e, "background commit failed".into())),
            None => Ok(()),
        }
    }

    fn open_handle(&self, ino: Ino) -> Result<ClientHandle> {
        self.open(ino)?;
        Ok(ClientHandle { ino })
    }

    fn close_handle(&self, h: ClientHandle) -> Result<()> {
        self.release(h.ino)
    }

    fn handle_read(&self, h: &ClientHandle, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.inner.read_data(h.ino, offset, buf)
    }

    fn handle_write(&self, h: &ClientHandle, offset: u64, data: &[u8]) -> Result<usize> {
        self.inner.write_data(h.ino, offset, data)
    }

    fn remember(&self, ino: Ino) {
        let ino = self.m(ino);
        if let Ok((s, MetaReply::Unit)) = self.inner.meta_in(MetaReq::Remember { ino }) {
            // The session read under the map's lock, as `forget` reads it.
            let mut m = self.inner.remembered.lock();
            let now = self.inner.session_client();
            let r = m.entry(ino).or_default();
            r.at(now);
            if s == now {
                r.n += 1;
            } else {
                r.stale += 1;
            }
        }
    }

    fn forget(&self, ino: Ino, n: u64) {
        let ino = self.m(ino);
        // The kernel is done with it: a create's pin no open took goes too.
        if let Some((s, n)) = self.inner.unclaimed(ino) {
            for _ in 0..n {
                let _ = self.inner.unpin_in(s, MetaReq::Release { ino });
            }
        }
        // References of an ended session first (nothing to drop: their pins went
        // with it), then those of the session now, dropped there; never below
        // zero.
        let drop = {
            let mut m = self.inner.remembered.lock();
            let now = self.inner.session_client();
            let Some(r) = m.get_mut(&ino) else {
                return;
            };
            r.at(now);
            let old = n.min(r.stale);
            r.stale -= old;
            let cur = (n - old).min(r.n);
            r.n -= cur;
            let drop = (cur > 0).then_some((r.session, cur));
            if r.n == 0 && r.stale == 0 {
                m.remove(&ino);
            }
            drop
        };
        if let Some((s, n)) = drop {
            let _ = self.inner.unpin_in(s, MetaReq::Forget { ino, n });
        }
    }

    /// Returns once every write of the file before it is committed on the server
    /// (delayed commit: sent now if still queued), with the error of one that
    /// failed. Nothing else is asked of the server: it answers a commit only once
    /// the commit is durable, and every namespace call once its change is.
    fn fsync(&self, ino: Ino) -> Result<()> {
        self.inner.flush(ino)
    }

    /// Synchronous commits: yes. Delayed commits: no (fsync and close call in).
    fn durable_on_return(&self) -> bool {
        self.inner.committer.is_none()
    }

    /// The error of a background commit of the file since the last fsync or
    /// close, without waiting.
    fn close_check(&self, ino: Ino) -> Result<()> {
        let fc = self.inner.files.lock().get(&self.m(ino)).cloned();
        let failed = fc.and_then(|fc| fc.pending.lock().error.take());
        match failed {
            Some(e) => Err(from_errno(e, "background commit failed".into())),
            None => Ok(()),
        }
    }

    fn statfs(&self) -> StatFs {
        match self.inner.meta(MetaReq::Statfs) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A commit promises away only grants its own session received: grants of an
    /// earlier session (maybe of an earlier server instance, whose numbers may be
    /// larger) make its `dropped` 0, and the server recalls as usual.
    #[test]
    fn a_commit_promises_only_its_own_sessions_grants() {
        let fc = FileCache::default();
        assert_eq!(dropped_for(7, fc.drop_for_commit()), 0);
        fc.note_grant(7, 1_000);
        fc.note_grant(7, 900);
        assert_eq!(dropped_for(7, fc.drop_for_commit()), 1_000);
        // A new session: its grants start over, whatever their numbers.
        fc.note_grant(8, 5);
        assert_eq!(dropped_for(8, fc.drop_for_commit()), 5);
        assert_eq!(dropped_for(7, fc.drop_for_commit()), 0);
        // A late grant of the old session replaces the record; the new session
        // then promises nothing.
        fc.note_grant(7, 2_000);
        assert_eq!(dropped_for(8, fc.drop_for_commit()), 0);
        // The drop also invalidates: a layout fetched across it is not installed.
        let g = fc.gen.load(Ordering::Acquire);
        fc.drop_for_commit();
        assert_ne!(fc.gen.load(Ordering::Acquire), g);
        assert!(fc.layout.read().is_none());
    }
}
