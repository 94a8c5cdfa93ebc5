//! The tracing seam: a [`Tracer`] sees every store, flush, fence and marker.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// A small number naming the calling thread in traces (1, 2, ...).
    static THREAD: u64 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

/// The trace's name for the calling thread.
pub fn thread_id() -> u64 {
    THREAD.with(|t| *t)
}

/// How a store reached PM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// Ordinary cached store: durable only after a flush of its line and a fence.
    Cached,
    /// Non-temporal store: durable after the next fence.
    NonTemporal,
    /// Aligned 8-byte atomic store (never torn).
    Atomic8,
    /// Aligned 16-byte atomic store (cmpxchg16b; never torn in the crash model).
    Atomic16,
}

/// Operation boundaries, so a trace can be cut into operations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Marker {
    /// An operation (named) begins.
    OpBegin(String),
    /// The operation (named) ends.
    OpEnd(String),
    /// The events that follow come from this thread (see [`thread_id`]); recorded
    /// whenever the recording thread changes, so a replay can tell which thread's
    /// fence orders which flushes.
    Thread(u64),
}

/// One recorded event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A store of `data` at offset `off`.
    Store {
        /// Offset of the first byte stored.
        off: u64,
        /// The bytes stored.
        data: Vec<u8>,
        /// How they were stored.
        kind: StoreKind,
    },
    /// A write-back of one cache line.
    Flush {
        /// Offset of the line (64-byte aligned).
        line: u64,
    },
    /// A store fence.
    Fence,
    /// An operation marker.
    Marker(Marker),
}

/// Receives every PM event of a region. Called synchronously, in program order of the
/// calling thread.
pub trait Tracer: Send + Sync {
    /// `data` was stored at offset `off` the way `kind` says.
    fn store(&self, off: u64, data: &[u8], kind: StoreKind);
    /// `line` is the byte offset of the flushed cache line (64-byte aligned).
    fn flush(&self, line: u64);
    /// A store fence.
    fn fence(&self);
    /// An operation marker.
    fn marker(&self, m: &Marker);
}

/// A tracer that keeps every event in memory.
#[derive(Default)]
pub struct RecordingTracer {
    events: Mutex<Vec<Event>>,
    /// The thread of the last recorded event (0: none yet). Written under `events`.
    last_thread: AtomicU64,
}

impl RecordingTracer {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the recorded events, leaving the recorder empty.
    pub fn take(&self) -> Vec<Event> {
        match self.events.lock() {
            Ok(mut g) => std::mem::take(&mut *g),
            Err(p) => std::mem::take(&mut *p.into_inner()),
        }
    }

    fn push(&self, e: Event) {
        let me = thread_id();
        let mut g = match self.events.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if self.last_thread.swap(me, Ordering::Relaxed) != me {
            g.push(Event::Marker(Marker::Thread(me)));
        }
        g.push(e);
    }
}

impl Tracer for RecordingTracer {
    fn store(&self, off: u64, data: &[u8], kind: StoreKind) {
        self.push(Event::Store {
            off,
            data: data.to_vec(),
            kind,
        });
    }
    fn flush(&self, line: u64) {
        self.push(Event::Flush { line });
    }
    fn fence(&self) {
        self.push(Event::Fence);
    }
    fn marker(&self, m: &Marker) {
        self.push(Event::Marker(m.clone()));
    }
}
