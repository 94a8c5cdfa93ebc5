//! The metadata server (DESIGN.md §7): a mnemofs engine over the shared devices
//! that serves the namespace, hands out layouts, delegates space and commits the
//! extents clients wrote. Every metadata change goes through the engine (its logs
//! and journal), so the server is as crash-consistent as a local mount; what lives
//! only in its DRAM — sessions, delegations, layout holders — is rebuilt by clients
//! after a restart, and the engine's recovery gives back every delegated block no
//! commit mapped.

use crate::proto::*;
use crate::rpc::mds_server::{Mds, MdsServer};
use mnemofs::{FileKind, Fs, FsError, Ino};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// Settings of a metadata server.
#[derive(Clone, Copy, Debug)]
pub struct MdsConfig {
    /// A client's session lease.
    pub lease: Duration,
    /// Blocks of one delegated chunk (a client keeps two: the double pool).
    pub chunk_blocks: u64,
}

impl Default for MdsConfig {
    fn default() -> Self {
        MdsConfig {
            lease: Duration::from_secs(3),
            chunk_blocks: 2048,
        }
    }
}

/// A session as the server keeps it.
struct Sess {
    last_heard: Instant,
    /// Delegated blocks no commit has used yet, by first block.
    pool: BTreeMap<u64, u64>,
    watch: Option<mpsc::Sender<Result<Recall, Status>>>,
    /// Files whose layout the client holds.
    holds: HashSet<Ino>,
    /// Pins the client took (open, remember), released if the session expires.
    opens: HashMap<Ino, u64>,
    remembers: HashMap<Ino, u64>,
    /// The batches applied lately and their replies (a resend gets the reply
    /// again): a client's commit threads send concurrently, so batches may arrive
    /// out of order; a batch older than all of these is refused.
    applied: BTreeMap<u64, CommitReply>,
    /// One batch at a time per session, so that a resend waits for the first.
    commit_lock: Arc<tokio::sync::Mutex<()>>,
}

/// Counts a request in `serving` while it is served.
struct Busy<'a>(&'a AtomicU64);

impl<'a> Busy<'a> {
    fn new(c: &'a AtomicU64) -> Busy<'a> {
        c.fetch_add(1, Ordering::Relaxed);
        Busy(c)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Batches per session whose replies are kept for resends.
const APPLIED_KEPT: usize = 1024;

/// Per file: the clients holding its layout; its lock orders layouts, recalls and
/// commits of the file.
#[derive(Default)]
struct FileState {
    /// Each holder's newest layout grant of the file.
    holders: HashMap<u64, u64>,
}

/// A recall awaiting its answer: the recalled client, the file, the waiter.
type PendingRecall = (u64, Ino, oneshot::Sender<()>);

/// An expired session's delegated runs and pins, waiting out its lease.
type Limbo = (Vec<(u64, u64)>, Pins);

/// Pins to drop: opens and remembered lookups, per file.
#[derive(Default)]
struct Pins {
    opens: Vec<(Ino, u64)>,
    remembers: Vec<(Ino, u64)>,
}

impl Pins {
    /// `n` opens of `ino`.
    fn open(ino: Ino, n: u64) -> Pins {
        Pins {
            opens: vec![(ino, n)],
            ..Pins::default()
        }
    }

    /// `n` remembered lookups of `ino`.
    fn remembered(ino: Ino, n: u64) -> Pins {
        Pins {
            remembers: vec![(ino, n)],
            ..Pins::default()
        }
    }
}

struct Inner {
    fs: Fs,
    cfg: MdsConfig,
    instance: u64,
    /// No space is delegated before this: a client of the previous instance may
    /// write into the space it held until its lease runs out.
    grace_until: Instant,
    next_client: AtomicU64,
    /// Keys of the hash that makes session ids.
    ids: std::hash::RandomState,
    next_recall: AtomicU64,
    /// The last layout grant's number (see `LayoutReply::Ok::grant`).
    grants: AtomicU64,
    sessions: Mutex<HashMap<u64, Sess>>,
    files: Mutex<HashMap<Ino, Arc<tokio::sync::Mutex<FileState>>>>,
    /// Namespace changes hold their directories' stripes (by directory inode):
    /// an unlink or a rename exclusively, from looking up the file a name will stop
    /// naming until the change is made, so that the file whose layouts were
    /// recalled is the one unlinked or replaced; calls that only add names share
    /// them (they run side by side, but not inside an unlink or a rename).
    ns: Vec<tokio::sync::RwLock<()>>,
    /// Recalls awaiting an answer: id → (client, file, waiter).
    pending: Mutex<HashMap<u64, PendingRecall>>,
    /// Expired sessions' delegations and pins (opens, remembered lookups) waiting
    /// out the lease before they are freed and dropped: the client may write into
    /// its space and read through its layouts until its lease runs out.
    limbo: Mutex<HashMap<u64, Limbo>>,
    /// Requests (namespace, layout, commit) being served now.
    serving: AtomicU64,
    stats: ServerStats,
}

/// Counters of a server (exact).
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Commit batches received (a resend counts again).
    pub batches: AtomicU64,
    /// Extent commits applied.
    pub commits: AtomicU64,
    /// Recalls sent.
    pub recalls: AtomicU64,
    /// Recalls not sent: the committing client had dropped the layout itself.
    pub recalls_spared: AtomicU64,
    /// Sessions expired (lease ran out, or a recall went unanswered).
    pub expired: AtomicU64,
    /// Blocks given back from expired sessions' pools.
    pub reclaimed_blocks: AtomicU64,
}

/// Stripes of the namespace lock.
const NS_STRIPES: usize = 64;

/// The namespace stripe of directory `dir`.
fn ns_stripe(dir: Ino) -> usize {
    (dir.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % NS_STRIPES
}

/// The directories whose names `req` adds, removes or rebinds.
fn dirs_changed(req: &MetaReq) -> Vec<Ino> {
    match req {
        MetaReq::Create { parent, .. }
        | MetaReq::Mkdir { parent, .. }
        | MetaReq::Mknod { parent, .. }
        | MetaReq::CreateNode { parent, .. }
        | MetaReq::Symlink { parent, .. }
        | MetaReq::Link { parent, .. }
        | MetaReq::Unlink { parent, .. }
        | MetaReq::Rmdir { parent, .. } => vec![*parent],
        MetaReq::Rename {
            parent, newparent, ..
        } => vec![*parent, *newparent],
        _ => Vec::new(),
    }
}

fn errno_of(e: &FsError) -> (i32, String) {
    (e.errno(), e.to_string())
}

fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Takes run `(s, l)` out of `pool` if it lies inside one of its extents.
fn take_run(pool: &mut BTreeMap<u64, u64>, s: u64, l: u64) -> bool {
    let Some(end) = s.checked_add(l) else {
        return false;
    };
    let Some((&ps, &pl)) = pool.range(..=s).next_back() else {
        return false;
    };
    let pend = ps + pl;
    if l == 0 || end > pend {
        return false;
    }
    pool.remove(&ps);
    if ps < s {
        pool.insert(ps, s - ps);
    }
    if end < pend {
        pool.insert(end, pend - end);
    }
    true
}

/// Puts run `(s, l)` back into `pool`, joining neighbours.
fn put_run(pool: &mut BTreeMap<u64, u64>, mut s: u64, mut l: u64) {
    if let Some((&ps, &pl)) = pool.range(..s).next_back() {
        if ps + pl == s {
            pool.remove(&ps);
            s = ps;
            l += pl;
        }
    }
    if let Some(&nl) = pool.get(&(s + l)) {
        pool.remove(&(s + l));
        l += nl;
    }
    pool.insert(s, l);
}

impl Inner {
    fn file(&self, ino: Ino) -> Arc<tokio::sync::Mutex<FileState>> {
        self.files.lock().entry(ino).or_default().clone()
    }

    fn alive(&self, client: u64) -> Result<(), Status> {
        match self.sessions.lock().get_mut(&client) {
            Some(s) => {
                s.last_heard = Instant::now();
                Ok(())
            }
            None => Err(Status::failed_precondition(
                "no such session (expired, or the server restarted)",
            )),
        }
    }

    /// Ends a session: its undelegated pool back to free space, its pins dropped,
    /// its layouts forgotten.
    ///
    /// The pool and the pins go only a full lease later (`later`): the client may
    /// have renewed just before, and writes into its pool and reads through its
    /// layouts until its lease runs out. At
    /// shutdown it goes back at once (no client can commit into it any more, and a
    /// restarted server delegates nothing during its grace).
    fn expire_with(self: &Arc<Self>, client: u64, later: bool) {
        let Some(s) = self.sessions.lock().remove(&client) else {
            return;
        };
        let runs: Vec<(u64, u64)> = s.pool.into_iter().collect();
        let blocks: u64 = runs.iter().map(|r| r.1).sum();
        let pins = Pins {
            opens: s.opens.into_iter().collect(),
            remembers: s.remembers.into_iter().collect(),
        };
        let nothing = runs.is_empty() && pins.opens.is_empty() && pins.remembers.is_empty();
        match tokio::runtime::Handle::try_current() {
            Ok(h) if later && !nothing => {
                // In limbo for a lease, then the space freed and the pins dropped
                // as any pin is (a file they alone kept has its layouts recalled
                // first); shutdown deals with what is still there.
                let key = self.next_recall.fetch_add(1, Ordering::Relaxed);
                self.limbo.lock().insert(key, (runs, pins));
                let me = self.clone();
                let lease = self.cfg.lease;
                h.spawn(async move {
                    tokio::time::sleep(lease).await;
                    let held = me.limbo.lock().remove(&key);
                    if let Some((runs, pins)) = held {
                        me.fs.reclaim_delegated(&runs);
                        let _ = me.drop_pins(pins).await;
                    }
                });
            }
            _ => {
                self.fs.reclaim_delegated(&runs);
                self.drop_pins_now(pins);
            }
        }
        self.stats.expired.fetch_add(1, Ordering::Relaxed);
        self.stats
            .reclaimed_blocks
            .fetch_add(blocks, Ordering::Relaxed);
        // Holder sets name the client until the next recall of each file skips it.
    }

    /// Takes `n` open pins of `ino` for session `client`: opens its client made
    /// without a call while it held the layout, reported in a recall's answer.
    /// Nothing if the session is gone (its pins went with it). Under the sessions'
    /// lock, so that an expiry drops either all of them or none.
    fn pin_reported_opens(&self, client: u64, ino: Ino, n: u32) {
        let mut ss = self.sessions.lock();
        let Some(s) = ss.get_mut(&client) else {
            return;
        };
        for _ in 0..n {
            if self.fs.open(ino).is_err() {
                return;
            }
            *s.opens.entry(ino).or_insert(0) += 1;
        }
    }

    /// Ends a session whose client went quiet (see `expire_with`).
    fn expire(self: &Arc<Self>, client: u64) {
        self.expire_with(client, true);
    }

    /// Drops engine pins (taken from a session's counts already, or of no session
    /// any more), each under its file's lock, recalling the file's layouts first
    /// where it is unlinked (the last pin frees it); the first release's error.
    async fn drop_pins(self: &Arc<Self>, p: Pins) -> mnemofs::Result<()> {
        let mut first = Ok(());
        for (ino, opens, forgets) in p
            .opens
            .iter()
            .map(|&(i, n)| (i, n, 0))
            .chain(p.remembers.iter().map(|&(i, n)| (i, 0, n)))
        {
            let f = self.file(ino);
            let mut g = f.lock().await;
            if self.fs.getattr(ino).is_ok_and(|a| a.nlink == 0) {
                self.recall(&mut g, ino, None).await;
            }
            for _ in 0..opens {
                if let Err(e) = self.fs.release(ino) {
                    if first.is_ok() {
                        first = Err(e);
                    }
                }
            }
            if forgets > 0 {
                self.fs.forget(ino, forgets);
            }
            drop(g);
            drop(f);
            self.forget_idle(ino);
        }
        first
    }

    /// `drop_pins` where no client is served any more (shutdown): no recall.
    fn drop_pins_now(&self, p: Pins) {
        for &(ino, n) in &p.opens {
            for _ in 0..n {
                let _ = self.fs.release(ino);
            }
        }
        for &(ino, n) in &p.remembers {
            self.fs.forget(ino, n);
        }
    }

    /// Removes the lock entry of `ino` if nobody uses it and no client holds its
    /// layout (the map would otherwise keep one per file ever released).
    fn forget_idle(&self, ino: Ino) {
        let mut m = self.files.lock();
        let idle = m.get(&ino).is_some_and(|f| {
            Arc::strong_count(f) == 1 && f.try_lock().is_ok_and(|st| st.holders.is_empty())
        });
        if idle {
            m.remove(&ino);
        }
    }

    /// Recalls the layout of `ino` from every holder — the caller too: another
    /// thread of it may be reading through the layout — waiting for each to answer
    /// (a holder that does not within its lease is expired: it can no longer read
    /// or write). Called with the file's lock held.
    ///
    /// A holder leaves the set only once it answered or was expired, so a call
    /// cut off meanwhile (its client gone: the handler runs in a task of its own
    /// anyway) leaves the rest to the next recall.
    ///
    /// `spare`: a client, the newest grant it dropped before the call and whether
    /// it keeps opens of its own (see `ExtentCommit::dropped` and `keep`); a holder
    /// of no newer grant is not recalled (and stays a holder if it keeps opens).
    async fn recall(
        self: &Arc<Self>,
        st: &mut FileState,
        ino: Ino,
        spare: Option<(u64, u64, bool)>,
    ) {
        let holders: Vec<(u64, u64)> = st.holders.iter().map(|(&c, &g)| (c, g)).collect();
        let mut waits = Vec::new();
        for (c, grant) in holders {
            if let Some((_, _, keep)) =
                spare.filter(|&(sc, dropped, _)| sc == c && grant <= dropped)
            {
                // The caller dropped every layout of the file it had been granted
                // up to `dropped` before it asked: it holds none to recall. Opens
                // it made on its own keep it a holder: a call that would free the
                // file must still recall it and learn of them.
                if !keep {
                    st.holders.remove(&c);
                    if let Some(s) = self.sessions.lock().get_mut(&c) {
                        s.holds.remove(&ino);
                    }
                }
                self.stats.recalls_spared.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let tx = match self.sessions.lock().get(&c) {
                Some(s) => s.watch.clone(),
                None => {
                    st.holders.remove(&c);
                    continue;
                }
            };
            let id = self.next_recall.fetch_add(1, Ordering::Relaxed);
            let (otx, orx) = oneshot::channel();
            self.pending.lock().insert(id, (c, ino, otx));
            self.stats.recalls.fetch_add(1, Ordering::Relaxed);
            // Never waits for a full stream: a client that does not drain its
            // recalls is treated as one that does not answer.
            let sent = match tx {
                Some(tx) => tx.try_send(Ok(Recall { ino, id })).is_ok(),
                None => false,
            };
            waits.push((c, id, sent, orx));
        }
        for (c, id, sent, orx) in waits {
            let answered =
                sent && matches!(tokio::time::timeout(self.cfg.lease, orx).await, Ok(Ok(())));
            self.pending.lock().remove(&id);
            if !answered {
                // It may hold opens of the file made without a call (delayed
                // commit), and read through its layout until its lease runs out:
                // the file is kept a lease, as the pins of its opens made with a
                // call are (`expire` moves this pin with them).
                self.pin_reported_opens(c, ino, 1);
                self.expire(c);
            }
            st.holders.remove(&c);
            if let Some(s) = self.sessions.lock().get_mut(&c) {
                s.holds.remove(&ino);
            }
        }
    }

    /// A namespace call on behalf of `client`.
    async fn meta(self: &Arc<Self>, client: u64, req: MetaReq) -> MetaReply {
        let (r, victim) = self.meta_call(client, req).await;
        // Its guard is gone: the entry of the file it locked may be idle now.
        if let Some(ino) = victim {
            self.forget_idle(ino);
        }
        r
    }

    /// The call, and the file it locked (whose lock entry may be idle after it).
    async fn meta_call(self: &Arc<Self>, client: u64, req: MetaReq) -> (MetaReply, Option<Ino>) {
        let fs = &self.fs;
        // A change of names holds its directories' stripes (in stripe order) to its
        // end: nothing can make a name name another file between the lookup of the
        // file below and the change itself.
        let mut stripes: Vec<usize> = dirs_changed(&req).into_iter().map(ns_stripe).collect();
        stripes.sort_unstable();
        stripes.dedup();
        let rebinds = matches!(
            req,
            MetaReq::Unlink { .. } | MetaReq::Rmdir { .. } | MetaReq::Rename { .. }
        );
        let (mut _excl, mut _shared) = (Vec::new(), Vec::new());
        for s in stripes {
            if rebinds {
                _excl.push(self.ns[s].write().await);
            } else {
                _shared.push(self.ns[s].read().await);
            }
        }
        // Calls that may free or cut a file's blocks recall its layouts first.
        let victim = match &req {
            MetaReq::Setattr { ino, attr } if attr.size.is_some() => Some(*ino),
            MetaReq::Fallocate { ino, .. } => Some(*ino),
            MetaReq::Unlink { parent, name } => fs.lookup(*parent, name).ok().map(|a| a.ino),
            MetaReq::Rename {
                newparent, newname, ..
            } => fs.lookup(*newparent, newname).ok().map(|a| a.ino),
            // (Release and Forget drop the engine's pin in `drop_pins`, under the
            // file's lock, once the session's count says the pin is its own.)
            _ => None,
        };
        let file = victim.map(|i| (i, self.file(i)));
        let mut guard = match &file {
            Some((_, f)) => Some(f.lock().await),
            None => None,
        };
        if let (Some((ino, _)), Some(g)) = (&file, guard.as_mut()) {
            self.recall(g, *ino, None).await;
        }
        let attr = |r: mnemofs::Result<mnemofs::Attr>| match r {
            Ok(a) => MetaReply::Attr(a),
            Err(e) => MetaReply::Err(errno_of(&e).0, errno_of(&e).1),
        };
        let unit = |r: mnemofs::Result<()>| match r {
            Ok(()) => MetaReply::Unit,
            Err(e) => MetaReply::Err(errno_of(&e).0, errno_of(&e).1),
        };
        let bytes = |r: mnemofs::Result<Vec<u8>>| match r {
            Ok(b) => MetaReply::Bytes(b),
            Err(e) => MetaReply::Err(errno_of(&e).0, errno_of(&e).1),
        };
        // Counts a pin for the session; false when the session is gone (it expired
        // while this call ran: its pins were dropped then, so the caller drops the
        // engine's pin it took for it, else it would never be dropped).
        let pin = |map: fn(&mut Sess) -> &mut HashMap<Ino, u64>, ino: Ino, add: i64| -> bool {
            match self.sessions.lock().get_mut(&client) {
                Some(s) => {
                    let e = map(s).entry(ino).or_insert(0);
                    *e = e.saturating_add_signed(add);
                    if *e == 0 {
                        map(s).remove(&ino);
                    }
                    true
                }
                None => false,
            }
        };
        // Takes up to `n` of the session's pins of `ino` in one step (two drops of
        // one pin never both pass): how many it took; None when the session is gone
        // (its pins were dropped when it expired).
        let unpin = |map: fn(&mut Sess) -> &mut HashMap<Ino, u64>, ino: Ino, n: u64| {
            let mut ss = self.sessions.lock();
            let s = ss.get_mut(&client)?;
            let have = map(s).get(&ino).copied().unwrap_or(0);
            let took = n.min(have);
            if have == took {
                map(s).remove(&ino);
            } else {
                map(s).insert(ino, have - took);
            }
            Some(took)
        };
        let gone = || MetaReply::Err(libc::ESTALE, "session expired during the call".into());
        // A create that asked for it comes pinned for its client.
        let pin_new = |r: &mnemofs::Result<mnemofs::Attr>, wanted: bool| {
            if let (Ok(a), true) = (r, wanted) {
                if fs.open(a.ino).is_ok() && !pin(|s| &mut s.opens, a.ino, 1) {
                    let _ = fs.release(a.ino);
                }
            }
        };
        let reply = async {
            match req {
                MetaReq::Lookup { parent, name } => attr(fs.lookup(parent, &name)),
                MetaReq::LookupLayout { parent, name } => match fs.lookup(parent, &name) {
                    // Found all the same without a layout (not a regular file; or
                    // the session went meanwhile: the next call opens another).
                    Ok(a) => match self.first_layout(client, &a).await {
                        Some(layout) => MetaReply::Found { attr: a, layout },
                        None => MetaReply::Attr(a),
                    },
                    r => attr(r),
                },
                MetaReq::Getattr { ino } => attr(fs.getattr(ino)),
                MetaReq::Setattr { ino, attr: a } => attr(fs.setattr(ino, &a)),
                MetaReq::Create {
                    parent,
                    name,
                    mode,
                    uid,
                    gid,
                    pin: p,
                } => {
                    let r = fs.create(parent, &name, mode, uid, gid);
                    pin_new(&r, p);
                    match r {
                        Ok(a) if p => self.created(client, a).await,
                        r => attr(r),
                    }
                }
                MetaReq::Mkdir {
                    parent,
                    name,
                    mode,
                    uid,
                    gid,
                } => attr(fs.mkdir(parent, &name, mode, uid, gid)),
                MetaReq::Mknod {
                    parent,
                    name,
                    mode,
                    rdev,
                    uid,
                    gid,
                } => attr(fs.mknod(parent, &name, mode, rdev, uid, gid)),
                MetaReq::CreateNode {
                    parent,
                    name,
                    node,
                    pin: p,
                } => {
                    let r = fs.create_node(parent, &name, &node);
                    pin_new(&r, p);
                    match r {
                        Ok(a) if p => self.created(client, a).await,
                        r => attr(r),
                    }
                }
                MetaReq::Symlink {
                    parent,
                    name,
                    target,
                    uid,
                    gid,
                } => attr(fs.symlink(parent, &name, &target, uid, gid)),
                MetaReq::Readlink { ino } => bytes(fs.readlink(ino)),
                MetaReq::Getxattr { ino, name } => bytes(fs.getxattr(ino, &name)),
                MetaReq::Listxattr { ino } => bytes(fs.listxattr(ino)),
                MetaReq::Setxattr {
                    ino,
                    name,
                    value,
                    flags,
                } => unit(fs.setxattr(ino, &name, &value, flags)),
                MetaReq::Removexattr { ino, name } => unit(fs.removexattr(ino, &name)),
                MetaReq::Unlink { parent, name } => unit(fs.unlink(parent, &name)),
                MetaReq::Rmdir { parent, name } => unit(fs.rmdir(parent, &name)),
                MetaReq::Link { ino, parent, name } => attr(fs.link(ino, parent, &name)),
                MetaReq::Rename {
                    parent,
                    name,
                    newparent,
                    newname,
                    flags,
                } => unit(fs.rename(parent, &name, newparent, &newname, flags)),
                MetaReq::Readdir { ino, offset, max } => {
                    match fs.readdir(ino, offset, max.min(4096) as usize) {
                        Ok(d) => MetaReply::Dir(d),
                        Err(e) => MetaReply::Err(e.errno(), e.to_string()),
                    }
                }
                MetaReq::Fallocate {
                    ino,
                    offset,
                    len,
                    mode,
                } => unit(fs.fallocate(ino, offset, len, mode)),
                MetaReq::Open { ino } => {
                    let r = fs.open(ino);
                    if r.is_ok() && !pin(|s| &mut s.opens, ino, 1) {
                        let _ = self.drop_pins(Pins::open(ino, 1)).await;
                        return gone();
                    }
                    unit(r)
                }
                MetaReq::OpenLayout { ino, first, n } => {
                    if let Err(e) = fs.open(ino) {
                        return unit(Err(e));
                    }
                    if !pin(|s| &mut s.opens, ino, 1) {
                        let _ = self.drop_pins(Pins::open(ino, 1)).await;
                        return gone();
                    }
                    // The file's lock is taken inside, as for a `Layout` call.
                    let l = self
                        .layout(LayoutReq {
                            client,
                            ino,
                            first,
                            n,
                        })
                        .await;
                    match l {
                        Ok(LayoutReply::Ok(layout)) => MetaReply::Layout(layout),
                        // Open, without a layout (not a regular file).
                        Ok(LayoutReply::Err(..)) => MetaReply::Unit,
                        // The session went meanwhile (its pins go a lease later):
                        // the client opens another and asks again.
                        Err(_) => gone(),
                    }
                }
                MetaReq::Release { ino } => {
                    // Only a pin this session holds.
                    match unpin(|s| &mut s.opens, ino, 1) {
                        None => gone(),
                        Some(0) => MetaReply::Err(libc::EINVAL, "no open of this session".into()),
                        Some(_) => unit(self.drop_pins(Pins::open(ino, 1)).await),
                    }
                }
                MetaReq::Remember { ino } => {
                    fs.remember(ino);
                    if !pin(|s| &mut s.remembers, ino, 1) {
                        let _ = self.drop_pins(Pins::remembered(ino, 1)).await;
                        return gone();
                    }
                    MetaReply::Unit
                }
                MetaReq::Forget { ino, n } => {
                    let Some(n) = unpin(|s| &mut s.remembers, ino, n) else {
                        return gone();
                    };
                    if n > 0 {
                        let _ = self.drop_pins(Pins::remembered(ino, n)).await;
                    }
                    MetaReply::Unit
                }
                MetaReq::Fsync { ino } => unit(fs.fsync(ino)),
                MetaReq::Statfs => MetaReply::Statfs(fs.statfs()),
            }
        }
        .await;
        drop(guard);
        (reply, file.map(|(ino, _)| ino))
    }

    /// The answer to a create that pins the new file for its client (`Create`, and
    /// FUSE's `CreateNode`): for a regular file its layout comes with it, for the
    /// first write (granted as a `Layout` call grants one: recalled like any other).
    async fn created(&self, client: u64, a: mnemofs::Attr) -> MetaReply {
        match self.first_layout(client, &a).await {
            Some(layout) => MetaReply::Created { attr: a, layout },
            None => MetaReply::Attr(a),
        }
    }

    /// The layout of the first 1024 pages of `a`, granted to `client` (as a
    /// `Layout` call grants one), if `a` is a regular file and the session lives.
    async fn first_layout(&self, client: u64, a: &mnemofs::Attr) -> Option<LayoutGrant> {
        if a.kind != FileKind::Regular {
            return None;
        }
        let l = self
            .layout(LayoutReq {
                client,
                ino: a.ino,
                first: 0,
                n: 1024,
            })
            .await;
        match l {
            Ok(LayoutReply::Ok(layout)) => Some(layout),
            _ => None,
        }
    }

    async fn layout(&self, r: LayoutReq) -> Result<LayoutReply, Status> {
        self.alive(r.client)?;
        let f = self.file(r.ino);
        let mut st = f.lock().await;
        let reply = match self.fs.layout(r.ino, r.first, r.n) {
            Ok(l) => {
                // Under the file's lock: grants of one file are numbered in the
                // order they are made.
                let grant = self.grants.fetch_add(1, Ordering::Relaxed) + 1;
                st.holders.insert(r.client, grant);
                if let Some(s) = self.sessions.lock().get_mut(&r.client) {
                    s.holds.insert(r.ino);
                }
                LayoutReply::Ok(LayoutGrant {
                    size: l.size,
                    first: l.first,
                    blocks: l.blocks,
                    grant,
                })
            }
            Err(e) => LayoutReply::Err(e.errno(), e.to_string()),
        };
        Ok(reply)
    }

    async fn delegate(&self, r: DelegateReq) -> Result<DelegateReply, Status> {
        self.alive(r.client)?;
        let cap = self.cfg.chunk_blocks.saturating_mul(64);
        let want = r.blocks.clamp(1, cap);
        // A session holds at most 64 chunks of unused delegation.
        let held: u64 = self
            .sessions
            .lock()
            .get(&r.client)
            .map_or(0, |s| s.pool.values().sum());
        if held.saturating_add(want) > cap {
            return Ok(DelegateReply::Err(
                libc::EDQUOT,
                format!("a session holds at most {cap} delegated blocks"),
            ));
        }
        let runs = match self.fs.delegate(want) {
            Ok(runs) => runs,
            Err(e) => return Ok(DelegateReply::Err(e.errno(), e.to_string())),
        };
        let mut ss = self.sessions.lock();
        match ss.get_mut(&r.client) {
            Some(s) => {
                for &(a, l) in &runs {
                    put_run(&mut s.pool, a, l);
                }
                Ok(DelegateReply::Ok(runs))
            }
            None => {
                // Expired meanwhile.
                drop(ss);
                self.fs.reclaim_delegated(&runs);
                Err(Status::failed_precondition("session expired"))
            }
        }
    }

    async fn commit(self: &Arc<Self>, b: CommitBatch) -> Result<CommitReply, Status> {
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
        let lock = {
            let mut ss = self.sessions.lock();
            let s = ss.get_mut(&b.client).ok_or_else(|| {
                Status::failed_precondition("no such session (expired, or the server restarted)")
            })?;
            s.last_heard = Instant::now();
            s.commit_lock.clone()
        };
        let _one = lock.lock().await;
        {
            let ss = self.sessions.lock();
            let s = ss
                .get(&b.client)
                .ok_or_else(|| Status::failed_precondition("session expired"))?;
            if let Some(r) = s.applied.get(&b.seq) {
                return Ok(r.clone());
            }
            match s.applied.first_key_value() {
                Some((&oldest, _)) if s.applied.len() >= APPLIED_KEPT && b.seq < oldest => {
                    return Err(Status::invalid_argument(format!(
                        "commit batch {} is older than the {APPLIED_KEPT} remembered",
                        b.seq
                    )));
                }
                _ => {}
            }
        }
        // The load the client's compound degree follows: requests of every kind
        // being served now (this one included).
        let busy = self.serving.load(Ordering::Relaxed);
        let mut results = Vec::with_capacity(b.commits.len());
        // A file whose commit must be merged again (EAGAIN) has none of its later
        // commits of this batch applied either: they reach the server in order.
        let mut again = HashSet::new();
        for c in &b.commits {
            let r = if again.contains(&c.ino) {
                libc::EAGAIN
            } else {
                let r = self.commit_one(b.client, c).await;
                self.forget_idle(c.ino);
                r
            };
            if r == libc::EAGAIN {
                again.insert(c.ino);
            }
            results.push(r);
        }
        for req in &b.after {
            if matches!(req, MetaReq::Release { .. } | MetaReq::Forget { .. }) {
                self.meta(b.client, req.clone()).await;
            }
        }
        let reply = CommitReply {
            results,
            busy: busy.min(u32::MAX as u64) as u32,
        };
        if let Some(s) = self.sessions.lock().get_mut(&b.client) {
            s.applied.insert(b.seq, reply.clone());
            while s.applied.len() > APPLIED_KEPT {
                s.applied.pop_first();
            }
        }
        Ok(reply)
    }

    async fn commit_one(self: &Arc<Self>, client: u64, c: &ExtentCommit) -> i32 {
        let f = self.file(c.ino);
        let mut st = f.lock().await;
        // The blocks must be this session's delegated, uncommitted space.
        {
            let mut ss = self.sessions.lock();
            let Some(s) = ss.get_mut(&client) else {
                return libc::ESTALE;
            };
            let mut pool = s.pool.clone();
            if !c.runs.iter().all(|&(a, l)| take_run(&mut pool, a, l)) {
                return libc::EINVAL;
            }
        }
        // Pages merged with old contents must still map where the client read them.
        for &(pg, block) in &c.expect {
            match self.fs.layout(c.ino, pg, 1) {
                Ok(l) if l.blocks.first().copied().unwrap_or(0) == block => {}
                Ok(_) => return libc::EAGAIN,
                Err(e) => return e.errno(),
            }
        }
        let spare = (c.dropped != 0).then_some((client, c.dropped, c.keep));
        self.recall(&mut st, c.ino, spare).await;
        // Taken from the pool only now: a recall that expired this very session
        // has given the pool back already.
        {
            let mut ss = self.sessions.lock();
            let Some(s) = ss.get_mut(&client) else {
                return libc::ESTALE;
            };
            if !c.runs.iter().all(|&(a, l)| take_run(&mut s.pool, a, l)) {
                return libc::EINVAL;
            }
        }
        match self.fs.commit_extent(c.ino, c.first, c.end, &c.runs) {
            Ok(()) => {
                self.stats.commits.fetch_add(1, Ordering::Relaxed);
                0
            }
            Err(e) => e.errno(),
        }
    }
}

/// The gRPC service over [`Inner`].
struct Service(Arc<Inner>);

type RecallStream = Pin<Box<dyn Stream<Item = Result<Recall, Status>> + Send>>;

#[tonic::async_trait]
impl Mds for Service {
    async fn hello(&self, req: Request<Hello>) -> Result<Response<Session>, Status> {
        let h = req.into_inner();
        let me = self.0.fs.volume_uuid();
        if h.uuid != me {
            return Err(Status::failed_precondition(
                "the client's data devices are not this server's volume",
            ));
        }
        // No session before the grace is over: a client of the previous instance
        // may write into space it held until its lease runs out, and every
        // allocation (a create's log page too) could hand that space out.
        tokio::time::sleep_until(self.0.grace_until.into()).await;
        let mut ss = self.0.sessions.lock();
        // An id no one can guess (the process's random hasher keys), never reused.
        let client = loop {
            let n = self.0.next_client.fetch_add(1, Ordering::Relaxed);
            let c = std::hash::BuildHasher::hash_one(&self.0.ids, n) | 1;
            if !ss.contains_key(&c) {
                break c;
            }
        };
        ss.insert(
            client,
            Sess {
                last_heard: Instant::now(),
                pool: BTreeMap::new(),
                watch: None,
                holds: HashSet::new(),
                opens: HashMap::new(),
                remembers: HashMap::new(),
                applied: BTreeMap::new(),
                commit_lock: Arc::default(),
            },
        );
        drop(ss);
        Ok(Response::new(Session {
            client,
            lease_ms: self.0.cfg.lease.as_millis() as u64,
            chunk_blocks: self.0.cfg.chunk_blocks,
            instance: self.0.instance,
        }))
    }

    async fn renew(&self, req: Request<SessionRef>) -> Result<Response<LeaseReply>, Status> {
        let ok = self.0.alive(req.into_inner().client).is_ok();
        Ok(Response::new(LeaseReply { ok }))
    }

    async fn bye(&self, req: Request<SessionRef>) -> Result<Response<LeaseReply>, Status> {
        // The client stopped writing before it said goodbye.
        self.0.expire_with(req.into_inner().client, false);
        Ok(Response::new(LeaseReply { ok: true }))
    }

    async fn meta(&self, req: Request<MetaCall>) -> Result<Response<MetaReply>, Status> {
        let _busy = Busy::new(&self.0.serving);
        let c = req.into_inner();
        self.0.alive(c.client)?;
        // In a task of its own: a client that disconnects does not cut a call
        // (and its recall) in the middle.
        let me = self.0.clone();
        tokio::spawn(async move { me.meta(c.client, c.req).await })
            .await
            .map(Response::new)
            .map_err(|e| Status::internal(format!("namespace call: {e}")))
    }

    async fn layout(&self, req: Request<LayoutReq>) -> Result<Response<LayoutReply>, Status> {
        let _busy = Busy::new(&self.0.serving);
        self.0.layout(req.into_inner()).await.map(Response::new)
    }

    async fn delegate(&self, req: Request<DelegateReq>) -> Result<Response<DelegateReply>, Status> {
        self.0.delegate(req.into_inner()).await.map(Response::new)
    }

    async fn commit(&self, req: Request<CommitBatch>) -> Result<Response<CommitReply>, Status> {
        let _busy = Busy::new(&self.0.serving);
        // In a task of its own: a batch is applied whole even if its client
        // disconnects meanwhile (its resend is then answered from `applied`).
        let me = self.0.clone();
        let b = req.into_inner();
        tokio::spawn(async move { me.commit(b).await })
            .await
            .map_err(|e| Status::internal(format!("commit: {e}")))?
            .map(Response::new)
    }

    async fn recalled(&self, req: Request<RecallAck>) -> Result<Response<LeaseReply>, Status> {
        let a = req.into_inner();
        let ok = self.0.alive(a.client).is_ok();
        // Only the recalled client answers its recall.
        let found = {
            let mut p = self.0.pending.lock();
            match p.get(&a.id) {
                Some((c, ..)) if *c == a.client => p.remove(&a.id),
                _ => None,
            }
        };
        if let Some((client, ino, tx)) = found {
            // The opens it made on its own become pins of its session before the
            // recalling call (waiting for `tx`, under the file's lock) goes on:
            // the file is alive (every call that could free it recalls first).
            self.0.pin_reported_opens(client, ino, a.opens);
            let _ = tx.send(());
        }
        Ok(Response::new(LeaseReply { ok }))
    }

    type WatchStream = RecallStream;

    async fn watch(&self, req: Request<SessionRef>) -> Result<Response<RecallStream>, Status> {
        let client = req.into_inner().client;
        let (tx, rx) = mpsc::channel(64);
        match self.0.sessions.lock().get_mut(&client) {
            Some(s) => s.watch = Some(tx),
            None => return Err(Status::failed_precondition("no such session")),
        }
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}

/// A running metadata server (in-process: tests and the bench harness; the
/// `mnemofs mds` command runs one until a signal).
pub struct MdsHandle {
    addr: SocketAddr,
    inner: Arc<Inner>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

impl MdsHandle {
    /// Starts serving `fs` on `listen` (port 0: any free port) on a runtime of its
    /// own.
    pub fn start(fs: Fs, listen: SocketAddr, cfg: MdsConfig) -> Result<MdsHandle, FsError> {
        let listener = std::net::TcpListener::bind(listen)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let inner = Arc::new(Inner {
            fs,
            cfg,
            instance: (now_nanos() >> 10) & 0xff_ffff_ffff,
            grace_until: Instant::now() + cfg.lease + cfg.lease / 4,
            next_client: AtomicU64::new(1),
            ids: std::hash::RandomState::new(),
            next_recall: AtomicU64::new(1),
            // Numbers above any an earlier run of the server gave (nanoseconds of
            // the wall clock), so a promise made to one never matches the other.
            grants: AtomicU64::new(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64),
            ),
            sessions: Mutex::new(HashMap::new()),
            files: Mutex::new(HashMap::new()),
            ns: (0..NS_STRIPES)
                .map(|_| tokio::sync::RwLock::new(()))
                .collect(),
            pending: Mutex::new(HashMap::new()),
            serving: AtomicU64::new(0),
            limbo: Mutex::new(HashMap::new()),
            stats: ServerStats::default(),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let srv = inner.clone();
        let thread = std::thread::Builder::new()
            .name("mnemofs-mds".into())
            .spawn(move || -> Result<(), String> {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .map_err(|e| format!("runtime: {e}"))?;
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener)
                        .map_err(|e| format!("listen: {e}"))?;
                    let reaper = srv.clone();
                    tokio::spawn(async move {
                        let every = reaper.cfg.lease / 4;
                        loop {
                            tokio::time::sleep(every).await;
                            let late = reaper.cfg.lease + reaper.cfg.lease / 4;
                            let gone: Vec<u64> = reaper
                                .sessions
                                .lock()
                                .iter()
                                .filter(|(_, s)| s.last_heard.elapsed() > late)
                                .map(|(&c, _)| c)
                                .collect();
                            for c in gone {
                                reaper.expire(c);
                            }
                        }
                    });
                    // (The builder's own nodelay applies only to what it binds.)
                    let incoming = tonic::transport::server::TcpIncoming::from(listener)
                        .with_nodelay(Some(true));
                    tonic::transport::Server::builder()
                        .tcp_nodelay(true)
                        .add_service(MdsServer::new(Service(srv)))
                        .serve_with_incoming_shutdown(incoming, async {
                            let _ = stopped.await;
                        })
                        .await
                        .map_err(|e| format!("serve: {e}"))
                })
            })?;
        Ok(MdsHandle {
            addr,
            inner,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its counters.
    pub fn stats(&self) -> &ServerStats {
        &self.inner.stats
    }

    /// Files it keeps a lock entry for now (in use, or with a layout held).
    pub fn tracked_files(&self) -> usize {
        self.inner.files.lock().len()
    }

    /// The engine it serves (for checks in tests).
    pub fn fs(&self) -> &Fs {
        &self.inner.fs
    }

    /// Stops serving, reclaims every session's delegated space, and unmounts the
    /// engine cleanly.
    pub fn shutdown(self) -> Result<(), FsError> {
        let MdsHandle {
            inner,
            stop,
            thread,
            ..
        } = self;
        if let Some(s) = stop {
            let _ = s.send(());
        }
        if let Some(t) = thread {
            match t.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(FsError::Io(std::io::Error::other(e))),
                Err(_) => return Err(FsError::Io(std::io::Error::other("server thread panicked"))),
            }
        }
        let clients: Vec<u64> = inner.sessions.lock().keys().copied().collect();
        for c in clients {
            inner.expire_with(c, false);
        }
        let limbo: Vec<_> = inner.limbo.lock().drain().map(|(_, h)| h).collect();
        for (runs, pins) in limbo {
            inner.fs.reclaim_delegated(&runs);
            inner.drop_pins_now(pins);
        }
        // The runtime and its tasks are gone with the thread: this is the last
        // reference.
        match Arc::try_unwrap(inner) {
            Ok(i) => i.fs.unmount(),
            Err(_) => Err(FsError::Busy),
        }
    }
}

/// The mount options of a metadata server's engine: segment locks and page CoW,
/// no small-write mode (a LAWN zone would hold the newest bytes of pages where
/// clients do not read) and no read cache (clients read the devices themselves).
pub fn mds_mount_options() -> mnemofs::MountOptions {
    mnemofs::MountOptions {
        lock: mnemofs::LockMode::Segment,
        small_write: mnemofs::SmallWriteMode::Cow,
        read_cache: mnemofs::ReadCacheMode::Off,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::{put_run, take_run};
    use std::collections::BTreeMap;

    #[test]
    fn pool_runs_are_taken_only_inside_and_join_back() {
        let mut pool = BTreeMap::new();
        put_run(&mut pool, 100, 10);
        put_run(&mut pool, 200, 5);
        // Outside, straddling, empty, overflowing: refused, pool unchanged.
        assert!(!take_run(&mut pool, 95, 6));
        assert!(!take_run(&mut pool, 108, 3));
        assert!(!take_run(&mut pool, 150, 1));
        assert!(!take_run(&mut pool, 100, 0));
        assert!(!take_run(&mut pool, u64::MAX - 1, 5));
        assert_eq!(pool.len(), 2);
        // The middle of a run splits it; taking it twice fails.
        assert!(take_run(&mut pool, 103, 4));
        assert!(!take_run(&mut pool, 104, 1));
        assert_eq!(pool.get(&100), Some(&3));
        assert_eq!(pool.get(&107), Some(&3));
        // Given back, the neighbours join into the original run.
        put_run(&mut pool, 103, 4);
        assert_eq!(pool.get(&100), Some(&10));
        assert_eq!(pool.len(), 2);
        assert!(take_run(&mut pool, 200, 5));
        assert_eq!(pool.len(), 1);
    }
}
