//! A test seam for deterministic interleavings of concurrent data writes.
//!
//! The crash explorer's multi-writer workloads run several real threads but let only
//! one of them run at a time; at each [`Point`] the running thread hands the turn to a
//! thread its seeded scheduler picks. That makes the PM trace of a concurrent run
//! reproducible, and covers the orders that matter to the concurrent append protocol
//! (`log` module): reservations made in one order, marks and tails in another.
//!
//! The hook is per thread and off by default. It is compiled in only with the crate's
//! `fault-injection` cargo feature (the crash explorer, `crates/crashtest`, turns it
//! on): with it, a point where no hook was ever installed costs one relaxed load;
//! without it, `set_thread_hook` does not exist and every point is an empty inline
//! function, nothing at all.

use std::sync::Arc;

/// Where a concurrent data write may be interleaved with others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// New data pages are stored (bounded writes after their append was served,
    /// extent commits before).
    DataWritten,
    /// The append was served: slots reserved, DRAM state applied, the tail stored
    /// over the slots (not flushed); nothing is written to the slots yet.
    Reserved,
    /// The entries are written, fenced and commit-marked; mark and tail not yet
    /// flushed and fenced.
    Marked,
}

/// Called at every point on the thread that installed it.
pub type Hook = Arc<dyn Fn(Point) + Send + Sync>;

#[cfg(feature = "fault-injection")]
static ANY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[cfg(feature = "fault-injection")]
thread_local! {
    static HOOK: std::cell::RefCell<Option<Hook>> = const { std::cell::RefCell::new(None) };
}

/// Installs (or with `None` removes) the calling thread's hook. Exists only with the
/// `fault-injection` feature.
#[cfg(feature = "fault-injection")]
pub fn set_thread_hook(h: Option<Hook>) {
    if h.is_some() {
        ANY.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    HOOK.with(|c| *c.borrow_mut() = h);
}

/// Hands the turn to the calling thread's hook, if it installed one.
#[cfg(feature = "fault-injection")]
#[inline]
pub(crate) fn point(p: Point) {
    if !ANY.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let h = HOOK.with(|c| c.borrow().clone());
    if let Some(h) = h {
        h(p);
    }
}

/// Nothing: this build has no interleaving hook.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub(crate) fn point(_: Point) {}

/// Whether any thread installed a hook: writers then keep to the concurrent append
/// protocol, whose interleavings the hooks are there to explore.
#[cfg(feature = "fault-injection")]
#[inline]
pub(crate) fn hooked() -> bool {
    ANY.load(std::sync::atomic::Ordering::Relaxed)
}

/// No hook in this build.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub(crate) fn hooked() -> bool {
    false
}
