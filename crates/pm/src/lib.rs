//! The `pm` layer: the only code in mnemofs that touches persistent memory.
//!
//! It maps a region (an image file, by default on `/dev/shm`, or a DAX device/file
//! with `MAP_SYNC` where the kernel offers it), and provides the persist primitives
//! every other layer uses: cached stores, non-temporal stores, aligned 8- and 16-byte
//! atomic stores, cache-line write-back (clwb, else clflushopt, else clflush, chosen
//! once by CPUID) and store fences. Each choice made from the host can be forced by
//! an environment variable ([`HostChoices`]), so one machine runs every path.
//!
//! On DRAM-backed images a [`PmProfile`] (`optane`, `cxl`) adds the latency and
//! bandwidth cost of real PM to reads and persists with a calibrated busy-wait, more
//! for a device on another NUMA node than the accessing thread's ([`Pm::set_node`],
//! [`thread_node`], [`node_distance`], [`PmProfile::remote`]).
//!
//! Every store, flush and fence is counted (per-thread slots, summed on demand; bytes
//! stored also by (thread node, device node)) and can be reported to a [`Tracer`]: the
//! seam on which the crash explorer records a trace.
//! PM holds offsets, never virtual addresses: every call takes a byte offset into the
//! region.
//!
//! [`Volume`] is one global offset space over the devices (one [`Pm`] today); the
//! engine holds a volume, not a region.
//!
//! # Access model
//!
//! A [`Pm`] (and a [`Volume`]) is `Sync`: threads share it by reference. What a
//! `&self` method may do to the region's bytes decides whether it is safe:
//!
//! - **Safe:** aligned 8-byte atomic loads and stores ([`Pm::read_u64`],
//!   [`Pm::store_u64`]; a misaligned offset panics), write-back, fences, prefetch,
//!   `populate` and `sync_to_file` (none of which reads or changes a value), the
//!   counters, markers, and [`Pm::clone_anonymous`] (which copies with relaxed atomic
//!   word loads). Racing each other, these are atomic accesses of the same size at the
//!   same address, or not memory accesses at all, so no data race can arise in safe
//!   code. Methods that take `&mut self` ([`Pm::to_vec`], [`Pm::load_image`],
//!   `set_tracer`, `set_profile`) are safe because the borrow is exclusive.
//! - **`unsafe`:** the byte copies through `&self` ([`Pm::read`], [`Pm::read_u32`],
//!   [`Pm::write`], [`Pm::write_nt`], [`Pm::zero`]) and the 16-byte stores
//!   ([`Pm::store_u128`], [`Pm::store_u128_nt`], [`Pm::store_u128_durable`],
//!   [`Pm::calibrate_store16`]). They are plain (non-atomic) accesses, or 16-byte
//!   stores that Rust has no atomic type for (and racing atomics of different sizes
//!   over the same bytes are undefined). Contract: while the call runs, no other
//!   thread writes the bytes it reads, and no other thread reads or writes the bytes
//!   it writes. The engine meets it with its locks, in one file (`mnemofs`'s
//!   `vol.rs`), which is why its volume handle is private to the engine crate.
//!
//! Out-of-bounds offsets panic in every method (they are checked against the
//! mapping), never reach memory.
//!
//! **Other mappings and other processes.** The contract speaks of threads of this
//! process using this mapping. Memory that another process (or a second mapping of
//! the same image) changes is outside this process's abstract machine: Rust gives no
//! guarantee for it. This crate keeps the exposure the customary minimum: it never
//! hands out references into the mapping, only copies through raw pointers or
//! atomics into integers and byte buffers (every bit pattern valid), and values read
//! from PM are untrusted by every caller. `Pm::open(path, true)` takes an exclusive
//! `flock`, so a second mnemofs process cannot map an image in use (`flock` is
//! advisory: a program that does not ask is not kept out). fsck and the crash
//! explorer work on a private anonymous copy ([`Pm::clone_anonymous`]), so recovery
//! never runs on memory another party maps. A shared, data-only mapping for cluster
//! clients does not exist yet; it would need its own contract (which bytes a client
//! may map and copy, under what lease from the metadata server, and how it treats
//! bytes changed under it).

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod counters;
mod flush;
mod host;
mod lease;
mod numa;
mod profile;
mod region;
mod topology;
mod trace;
mod volume;

pub use counters::{CounterSnapshot, Counters};
pub use flush::FlushKind;
pub use host::{scratch_dir, HostChoices, HostError, Store16Insn};
pub use lease::LeasePool;
pub use numa::{
    node_distance, set_cpu_nodes, set_node_distances, set_thread_node, thread_node,
    thread_node_override, NumaError, DEFAULT_REMOTE_DISTANCE, LOCAL_DISTANCE, MAX_NODES,
    NODE_REFRESH_EVERY,
};
pub use profile::{
    PmProfile, RemoteCost, RemoteTable, SpinClock, WriteChannels, MAX_MODELED_DISTANCE,
    REMOTE_STEPS,
};
pub use region::{dram_load_latency_ns, MapMode, MapPages, MapReport, Pm, PmError, Store16};
pub use topology::{current_cpu, device_node, pin_to_cpus, Topology, TopologyError};
pub use trace::{Event, Marker, RecordingTracer, StoreKind, Tracer};
pub use volume::{Volume, MAX_DEVICES};

/// Size of a CPU cache line; the unit of flushing and of the crash model.
pub const CACHE_LINE: u64 = 64;
