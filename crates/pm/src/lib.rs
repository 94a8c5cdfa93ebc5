//! The `pm` layer: the only code in mnemofs that touches persistent memory.
//!
//! It maps a region (an image file, by default on `/dev/shm`, or a DAX device/file
//! with `MAP_SYNC` where the kernel offers it), and provides the persist primitives
//! every other layer uses: cached stores, non-temporal stores, aligned 8- and 16-byte
//! atomic stores, cache-line write-back (clwb, else clflushopt, else clflush, chosen
//! once by CPUID) and store fences.
//!
//! On DRAM-backed images a [`PmProfile`] (`optane`, `cxl`) adds the latency and
//! bandwidth cost of real PM to reads and persists with a calibrated busy-wait.
//!
//! Every store, flush and fence is counted (per-thread slots, summed on demand) and can
//! be reported to a [`Tracer`]: the seam on which the crash explorer records a trace.
//! PM holds offsets, never virtual addresses: every call takes a byte offset into the
//! region.

mod counters;
mod flush;
mod lease;
mod profile;
mod region;
mod trace;
mod volume;

pub use counters::{CounterSnapshot, Counters};
pub use flush::FlushKind;
pub use lease::LeasePool;
pub use profile::{PmProfile, SpinClock};
pub use region::{MapMode, Pm, PmError, Store16};
pub use trace::{Event, Marker, RecordingTracer, StoreKind, Tracer};
pub use volume::Volume;

/// Size of a CPU cache line; the unit of flushing and of the crash model.
pub const CACHE_LINE: u64 = 64;
