//! A test seam for deterministic interleavings of concurrent data writes.
//!
//! The crash explorer's multi-writer workloads run several real threads but let only
//! one of them run at a time; at each [`Point`] the running thread hands the turn to a
//! thread its seeded scheduler picks. That makes the PM trace of a concurrent run
//! reproducible, and covers the orders that matter to the concurrent append protocol
//! (`log` module): reservations made in one order, marks and tails in another.
//!
//! The hook is per thread and off by default; the cost when off is one relaxed load.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Where a concurrent data write may be interleaved with others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// New data pages are stored (bounded writes reserve their slots first, appends
    /// after).
    DataWritten,
    /// Log slots are reserved; nothing is written to them yet.
    Reserved,
    /// The entries are written, fenced and commit-marked; the tail is not moved yet.
    Marked,
}

/// Called at every point on the thread that installed it.
pub type Hook = Arc<dyn Fn(Point) + Send + Sync>;

static ANY: AtomicBool = AtomicBool::new(false);

thread_local! {
    static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
}

/// Installs (or with `None` removes) the calling thread's hook.
pub fn set_thread_hook(h: Option<Hook>) {
    if h.is_some() {
        ANY.store(true, Ordering::Relaxed);
    }
    HOOK.with(|c| *c.borrow_mut() = h);
}

#[inline]
pub(crate) fn point(p: Point) {
    if !ANY.load(Ordering::Relaxed) {
        return;
    }
    let h = HOOK.with(|c| c.borrow().clone());
    if let Some(h) = h {
        h(p);
    }
}
