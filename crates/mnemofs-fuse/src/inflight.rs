//! Requests in flight: each request thread records, in a slot of its own, which
//! request it serves and since when ([`enter`]); `mnemofs stat MOUNTPOINT` shows how
//! many there are and the oldest, and the daemon's watchdog ([`spawn_watchdog`])
//! reports any older than [`STUCK_AFTER`] on stderr (the daemon's log), with what the
//! page-cache invalidation thread is doing, so that a hang leaves a report instead of
//! a silent wedge.
//!
//! A slot is three relaxed atomics written by its own thread only; a reader may see
//! a request's fields from two different requests for an instant, which a report can
//! live with. Process-wide: a daemon serves one mount.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A request older than this is reported by the watchdog.
pub const STUCK_AFTER: Duration = Duration::from_secs(30);

/// One request thread's slot.
#[derive(Default)]
struct Slot {
    /// Microseconds since [`epoch`] plus one when the request started; 0: idle.
    since: AtomicU64,
    /// Index into [`OPS`].
    op: AtomicU64,
    ino: AtomicU64,
    /// The thread's name.
    thread: String,
}

/// Request names, by the index a slot records.
pub const OPS: &[&str] = &[
    "lookup",
    "forget",
    "getattr",
    "setattr",
    "readlink",
    "mknod",
    "mkdir",
    "unlink",
    "rmdir",
    "symlink",
    "rename",
    "link",
    "open",
    "read",
    "write",
    "flush",
    "release",
    "fsync",
    "opendir",
    "readdir",
    "readdirplus",
    "releasedir",
    "fsyncdir",
    "statfs",
    "setxattr",
    "getxattr",
    "listxattr",
    "removexattr",
    "access",
    "create",
    "getlk",
    "setlk",
    "fallocate",
    "lseek",
    "copy_file_range",
    "ioctl",
    "other",
];

fn epoch() -> Instant {
    static E: OnceLock<Instant> = OnceLock::new();
    *E.get_or_init(Instant::now)
}

fn slots() -> &'static Mutex<Vec<Arc<Slot>>> {
    static S: OnceLock<Mutex<Vec<Arc<Slot>>>> = OnceLock::new();
    S.get_or_init(Mutex::default)
}

thread_local! {
    static MINE: Arc<Slot> = {
        let s = Arc::new(Slot {
            thread: std::thread::current().name().unwrap_or("?").to_string(),
            ..Slot::default()
        });
        slots().lock().unwrap_or_else(|e| e.into_inner()).push(s.clone());
        s
    };
}

/// Marks the calling thread busy with request `op` on `ino` until the guard drops.
pub fn enter(op: &'static str, ino: u64) -> Busy {
    let idx = OPS.iter().position(|o| *o == op).unwrap_or(OPS.len() - 1);
    let now = epoch().elapsed().as_micros() as u64 + 1;
    MINE.with(|s| {
        s.op.store(idx as u64, Ordering::Relaxed);
        s.ino.store(ino, Ordering::Relaxed);
        s.since.store(now, Ordering::Relaxed);
    });
    Busy(())
}

/// While it lives, the calling thread's request is in flight ([`enter`]).
pub struct Busy(());

impl Drop for Busy {
    fn drop(&mut self) {
        MINE.with(|s| s.since.store(0, Ordering::Relaxed));
    }
}

/// A request in flight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Its name ([`OPS`]).
    pub op: &'static str,
    /// The inode it names.
    pub ino: u64,
    /// How long it has been served.
    pub age: Duration,
    /// The thread serving it.
    pub thread: String,
}

/// Every request in flight in this process, oldest first.
pub fn snapshot() -> Vec<Request> {
    let now = epoch().elapsed().as_micros() as u64 + 1;
    let slots = slots().lock().unwrap_or_else(|e| e.into_inner());
    let mut out: Vec<Request> = slots
        .iter()
        .filter_map(|s| {
            let since = s.since.load(Ordering::Relaxed);
            (since != 0).then(|| Request {
                op: OPS[(s.op.load(Ordering::Relaxed) as usize).min(OPS.len() - 1)],
                ino: s.ino.load(Ordering::Relaxed),
                age: Duration::from_micros(now.saturating_sub(since)),
                thread: s.thread.clone(),
            })
        })
        .collect();
    out.sort_by_key(|r| std::cmp::Reverse(r.age));
    out
}

/// Starts the watchdog: every few seconds it looks at the requests in flight and
/// writes to stderr each that is older than `after` (again every `after` while it
/// stays), with the other requests and `extra()` (what the invalidation thread is
/// doing). Ends when `extra()` returns `None` (the session is gone).
pub fn spawn_watchdog(after: Duration, extra: impl Fn() -> Option<String> + Send + 'static) {
    let _ = std::thread::Builder::new()
        .name("mnemofs-watchdog".into())
        .spawn(move || {
            let tick = (after / 6).max(Duration::from_millis(100));
            let mut last_report = None::<Instant>;
            loop {
                std::thread::sleep(tick);
                let Some(state) = extra() else { return };
                let reqs = snapshot();
                let Some(oldest) = reqs.first() else { continue };
                if oldest.age < after || last_report.is_some_and(|t| t.elapsed() < after) {
                    continue;
                }
                last_report = Some(Instant::now());
                let mut msg = format!(
                    "mnemofs: watchdog: {} request(s) in flight, the oldest for {} s:",
                    reqs.len(),
                    oldest.age.as_secs()
                );
                for r in reqs.iter().take(16) {
                    msg.push_str(&format!(
                        "\n  {} inode {} for {} ms on thread {}",
                        r.op,
                        r.ino,
                        r.age.as_millis(),
                        r.thread
                    ));
                }
                msg.push_str(&format!("\n  {state}"));
                eprintln!("{msg}");
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_in_flight_while_its_guard_lives() {
        let t = std::thread::Builder::new()
            .name("req-test".into())
            .spawn(|| {
                let g = enter("write", 42);
                std::thread::sleep(Duration::from_millis(20));
                let mine: Vec<Request> = snapshot()
                    .into_iter()
                    .filter(|r| r.thread == "req-test")
                    .collect();
                assert_eq!(mine.len(), 1);
                assert_eq!((mine[0].op, mine[0].ino), ("write", 42));
                assert!(mine[0].age >= Duration::from_millis(20));
                drop(g);
                assert!(snapshot().iter().all(|r| r.thread != "req-test"));
                let _g = enter("no-such-request", 1);
                let r = snapshot().into_iter().find(|r| r.thread == "req-test");
                assert_eq!(r.map(|r| r.op), Some("other"));
            })
            .unwrap();
        t.join().unwrap();
    }
}
