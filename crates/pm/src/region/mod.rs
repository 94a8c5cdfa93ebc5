//! A mapped PM region ([`Pm`]): the type, its ownership of the mapping, and the CPU
//! features its stores depend on.
//!
//! - [`map`]: opening, creating and mapping regions, populating and syncing them,
//!   private copies.
//! - [`access`]: bounds, cached byte copies, aligned 8-byte words, write-back,
//!   fences, counters and the tracer calls.
//! - [`nt`]: the non-temporal streaming copy.
//! - [`store16`]: aligned 16-byte stores and their calibration.
//! - [`pages`]: which pages map the region (2 MiB or 4 KiB), measured.
//! - [`latency`]: the region's read latency against DRAM's, measured.
//! - [`recycle`]: anonymous mappings kept for reuse.

mod access;
mod latency;
mod map;
mod nt;
mod pages;
mod recycle;
mod store16;

pub(crate) use access::check_range;
pub use latency::dram_load_latency_ns;
pub use pages::{MapPages, MapReport};
pub use store16::Store16;

use crate::counters::Counters;
use crate::flush::FlushKind;
use crate::profile::{PmProfile, SpinClock, WriteChannels};
use crate::trace::Tracer;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

/// Errors of the `pm` layer.
#[derive(Debug, thiserror::Error)]
pub enum PmError {
    /// Opening, sizing or locking the image failed.
    #[error("{path}: {source}")]
    Io {
        /// The image.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The image is smaller than asked for, or than one page.
    #[error("{path}: image is empty or too small to map ({len} bytes)")]
    TooSmall {
        /// The image.
        path: PathBuf,
        /// Its size in bytes.
        len: u64,
    },
    /// `mmap` refused.
    #[error("{path}: mmap failed: {source}")]
    Map {
        /// The image (`<anonymous>` for anonymous memory).
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// Another process holds the image's exclusive lock.
    #[error("{path}: image is in use by another mnemofs process (already mounted?)")]
    Busy {
        /// The image.
        path: PathBuf,
    },
    /// Devices that cannot form a volume ([`crate::Volume::from_parts`]).
    #[error("{0}")]
    Volume(String),
    /// An environment variable that overrides a host choice has a value this host
    /// cannot honour ([`crate::HostChoices`]).
    #[error(transparent)]
    Host(#[from] crate::host::HostError),
    /// `[off, off + len)` is not inside the region ([`Pm::check`]).
    #[error("PM access out of bounds: offset {off} length {len} in a region of {size} bytes")]
    OutOfBounds {
        /// Start of the access.
        off: u64,
        /// Its length.
        len: u64,
        /// Size of the region.
        size: u64,
    },
}

/// How the region was mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapMode {
    /// `MAP_SHARED_VALIDATE | MAP_SYNC`: a DAX mapping where flushed lines are durable.
    Sync,
    /// `MAP_SHARED`: a file image (e.g. on /dev/shm) emulating PM.
    Shared,
    /// Anonymous memory (tests, crash explorer copies).
    Anonymous,
}

/// A mapped PM region.
pub struct Pm {
    base: *mut u8,
    len: u64,
    flush: FlushKind,
    mode: MapMode,
    counters: Counters,
    tracer: Option<Arc<dyn Tracer>>,
    /// How an aligned 16-byte atomic store is made (SSE where the CPU has AVX, which
    /// makes it single-copy atomic).
    store16: crate::host::Store16Insn,
    /// AVX is used (streaming copies 32 bytes at a time).
    has_avx: bool,
    /// What [`Pm::calibrate_store16`] returns without measuring (`MNEMOFS_DESC_STORE`).
    forced_desc_store: Option<Store16>,
    /// Latency profile charged on reads and persists; `None` for `dram` (no cost,
    /// no work on the hot paths), the clock it spins on, and the write channels its
    /// fences queue on (shared by a volume's devices).
    profile: Option<(PmProfile, &'static SpinClock, Arc<WriteChannels>)>,
    /// NUMA node of the device ([`Pm::set_node`]).
    node: u32,
    /// `madvise(MADV_HUGEPAGE)` was accepted on the mapping.
    huge_advised: bool,
    _file: Option<File>,
}

// SAFETY: `Pm` owns its mapping (unmapped only by `Drop`), its file, its counters
// (atomics) and its tracer (`Send + Sync`); nothing in it is tied to a thread.
unsafe impl Send for Pm {}
// SAFETY: every `&self` method is either free of memory accesses to the region
// (bounds, counters, flush, fence, prefetch, populate, msync), or accesses it only with
// aligned atomic 8-byte loads and stores (`read_u64`, `store_u64`, the copy of
// `clone_anonymous`), which cannot race with each other; every `&self` method that
// copies bytes non-atomically or stores 16 bytes is `unsafe`, and its contract makes
// its caller keep every other thread off those bytes meanwhile. See "Access model" in
// the crate documentation.
unsafe impl Sync for Pm {}

impl Drop for Pm {
    fn drop(&mut self) {
        if self.mode == MapMode::Anonymous && recycle::give(self.base, self.len) {
            return;
        }
        // SAFETY: `base`/`len` are exactly what mmap returned in `map`.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len as usize);
        }
    }
}
