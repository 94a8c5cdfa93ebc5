//! PM latency profiles: the cost of real persistent memory, added on DRAM-backed
//! images (DESIGN.md §5), and its growth with NUMA distance (§6).
//!
//! A profile gives, for reads and writes separately, a per-access latency and a
//! bandwidth (bytes per second), plus a table of remote factors by NUMA distance
//! ([`RemoteTable`]). `dram` adds nothing; `optane` and `cxl` add their modeled cost
//! with a calibrated busy-wait (never a sleep: the costs are hundreds of
//! nanoseconds).
//!
//! Where the cost is charged, and why:
//! - **Reads** (`Pm::read`, `Pm::read_u64`, `Pm::read_u32`): one access latency per
//!   call plus `len / read_bandwidth`. A multi-line read is one access whose lines
//!   stream at the device's bandwidth (the prefetchers and the memory controller
//!   pipeline them); CPU-cache hits are not modeled (every read pays).
//! - **Writes**: a cached store costs nothing when it is made (it lands in the CPU
//!   cache). The bytes become PM traffic when they are written back: each flushed
//!   line (64 B) and each non-temporal byte is added to the calling thread's pending
//!   write bytes. The next fence pays `write_latency + pending / write_bandwidth` and
//!   clears the pending bytes: `sfence` is where a thread waits for its write-backs
//!   to reach the persistence domain, and on Optane the sustained write bandwidth,
//!   not the latency of one store, is what limits persistent writes.
//!
//! **Remote devices.** An access is remote when the calling thread's NUMA node
//! ([`crate::thread_node`]) is not the device's ([`crate::Pm::node`]); its cost grows
//! with the distance between the two ([`crate::node_distance`]) by the factors of
//! [`PmProfile::remote`]:
//! - a remote read costs `read_latency × read-latency factor` plus
//!   `len / (read_bandwidth / read-bandwidth divisor)`;
//! - pending write-back bytes are kept per device node; a fence pays the **largest**
//!   latency among its pending classes (`write_latency × write-latency factor` of
//!   each distance that has bytes pending), plus the transfer time of each class's
//!   bytes at its own bandwidth (`write_bandwidth / write-bandwidth divisor`): the
//!   write-backs travel concurrently, and the fence waits for the slowest. All bytes
//!   pending are charged with the profile of the device the fence is called on (one
//!   profile per volume). The distance of a class is taken at the fence, from the
//!   thread's node then.
//! - A local access (thread and device on the same node) is charged exactly the
//!   local formulas above, with no factor applied ([`PmProfile::read_cost_ns`],
//!   [`PmProfile::persist_cost_ns`]).
//!
//! **Shared write bandwidth.** A node's PM is one write channel at the profile's
//! write bandwidth, shared by every thread of the volume that writes to it
//! ([`WriteChannels`]). A fence queues each class of its pending bytes on the
//! channel of the node they go to, for their transfer time at the class's bandwidth
//! (a remote class occupies the channel longer: Yang et al.'s remote write
//! bandwidth with four threads, ÷2.29, is as low as with one, so the loss is in
//! the device's throughput, not only in one thread's), and waits behind whatever was
//! queued there first, on the most loaded channel it joins. An idle channel adds
//! nothing: one thread alone is charged exactly the formulas above. The wait is
//! counted apart from the own cost ([`crate::CounterSnapshot::modeled_queue_ns`]).
//! This is what makes one node's device the bottleneck when every thread writes to
//! it (MBS-LVM's baseline), and what spreading writes over nodes relieves.
//!
//! Not modeled: the 256-byte internal write granularity of Optane (read-modify-write
//! inside the DIMM), several devices on one node (they share one channel here),
//! read bandwidth shared between threads (each read pays its own transfer time),
//! the collapse of remote Optane bandwidth under mixed read/write traffic that Yang
//! et al. report, and cache hits on reads.

use crate::numa::{LOCAL_DISTANCE, MAX_NODES};
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The cost model of one kind of PM. All figures are *added* to what the DRAM
/// access itself costs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PmProfile {
    /// Name used on the command line and in every benchmark result.
    pub name: &'static str,
    /// Latency of one read access (ns).
    pub read_latency_ns: u64,
    /// Read bandwidth (bytes per second); 0 = no transfer cost.
    pub read_bandwidth: u64,
    /// Latency of one persist (a fence that drains written-back bytes), in ns.
    pub write_latency_ns: u64,
    /// Write bandwidth (bytes per second); 0 = no transfer cost.
    pub write_bandwidth: u64,
    /// Cost factors of a device on another NUMA node, by distance
    /// ([`PmProfile::remote`]).
    pub numa: RemoteTable,
}

impl Default for PmProfile {
    fn default() -> Self {
        PmProfile::DRAM
    }
}

impl PmProfile {
    /// DRAM-backed image as it is: no added cost.
    pub const DRAM: PmProfile = PmProfile {
        name: "dram",
        read_latency_ns: 0,
        read_bandwidth: 0,
        write_latency_ns: 0,
        write_bandwidth: 0,
        numa: RemoteTable::LOCAL_ONLY,
    };

    /// Intel Optane DC PMM (first generation), one DIMM, App Direct mode.
    /// Izraelevitz et al., "Basic Performance Measurements of the Intel Optane DC
    /// Persistent Memory Module", arXiv:1903.05714 (2019): random read latency
    /// ≈305 ns; bandwidth of one DIMM ≈6.6 GB/s read, ≈2.3 GB/s write. The persist
    /// latency (90 ns) is our reading of the same paper's finding that a flushed or
    /// non-temporal store completes about as fast as to DRAM, because it is durable
    /// once it reaches the memory controller's ADR-protected queue. See
    /// docs/BENCHMARKS.md.
    ///
    /// **Remote** (one entry, distance 21: the other socket of the two-socket
    /// Cascade Lake machine of Yang et al., "An Empirical Guide to the Behavior and
    /// Use of Scalable Persistent Memory", FAST 2020):
    /// - Bandwidths are Yang et al.'s measurements, from the data of the paper's NUMA
    ///   figure as the authors publish it (github.com/NVSL/OptaneStudy,
    ///   `graphs/17-numa.csv`; GB/s, one thread, six interleaved DIMMs): pure reads
    ///   4.70 local vs 4.32 remote, read bandwidth ÷1.089; pure writes 5.23 local vs
    ///   2.14 remote, write bandwidth ÷2.447. (With four threads: ÷1.10 and ÷2.29.)
    ///   The one-thread ratios are used because each thread pays its own transfer
    ///   time in this model.
    /// - Latencies are **assumed**, not Yang et al.'s: we could not retrieve a remote
    ///   latency figure of theirs (their artifact publishes latencies of local media
    ///   only, `graphs/02-best_case_latency.csv`). Assumption: the socket hop adds to
    ///   Optane what it adds to DRAM on the same CPU generation: Intel MLC idle
    ///   latency on a two-socket Cascade Lake, 80.8 ns local vs 140.4 ns remote,
    ///   +59.6 ns (the MLC output published in github.com/gjbex/Code-optimization,
    ///   `info/cascadelake_mlc.txt`). Read latency (305 + 59.6) / 305 = ×1.195;
    ///   persist latency (90 + 59.6) / 90 = ×1.662 (a write-back to a remote memory
    ///   controller's queue crosses the same link, and its completion comes back
    ///   over it).
    ///
    /// Other distances follow [`RemoteTable::at`] (linear in the distance through
    /// local and 21).
    pub const OPTANE: PmProfile = PmProfile {
        name: "optane",
        read_latency_ns: 305,
        read_bandwidth: 6_600_000_000,
        write_latency_ns: 90,
        write_bandwidth: 2_300_000_000,
        numa: RemoteTable::new(&[
            RemoteCost::LOCAL,
            RemoteCost {
                distance: 21,
                read_latency: 1195,
                read_bandwidth: 1089,
                write_latency: 1662,
                write_bandwidth: 2447,
            },
        ]),
    };

    /// A CXL memory expander (CXL 1.1/2.0 Type-3 device behind a PCIe 5.0 x8 link).
    /// Latency: 250 ns, the upper end of the ≈170–250 ns load latency reported for
    /// real CXL devices by Sun et al., "Demystifying CXL Memory with Genuine
    /// CXL-Ready Systems and Devices", MICRO 2023, for reads and for persists alike.
    /// Bandwidth: the PCIe 5.0 x8 link limit, ≈31.5 GB/s per direction (an upper
    /// bound; devices measure lower), so the transfer cost is a lower bound.
    ///
    /// **Remote** (a thread on the other socket of the device's host, distance 21) is
    /// **assumed**, not measured on CXL: the socket hop adds what it adds to DRAM on
    /// the CPU generation Sun et al. used (4th-generation Xeon, Sapphire Rapids):
    /// Intel MLC idle latency from node 0, 95.4 ns local vs 188.1–188.4 ns (mean
    /// 188.3) to the other socket's nodes, +92.9 ns (MLC output published in
    /// github.com/gjbex/Code-optimization, `info/sapphirerapids_mlc.txt`); so
    /// (250 + 92.9) / 250 = ×1.372 for reads and persists. Bandwidth is not divided:
    /// the same run measures ≈56 GB/s of reads from the other socket, above the x8
    /// link's 31.5 GB/s, so the link, not the hop, stays the limit (writes across the
    /// socket link are assumed alike; that run does not measure them).
    pub const CXL: PmProfile = PmProfile {
        name: "cxl",
        read_latency_ns: 250,
        read_bandwidth: 31_500_000_000,
        write_latency_ns: 250,
        write_bandwidth: 31_500_000_000,
        numa: RemoteTable::new(&[
            RemoteCost::LOCAL,
            RemoteCost {
                distance: 21,
                read_latency: 1372,
                read_bandwidth: 1000,
                write_latency: 1372,
                write_bandwidth: 1000,
            },
        ]),
    };

    /// Every profile, in the order the help text lists them.
    pub const ALL: &'static [PmProfile] = &[PmProfile::DRAM, PmProfile::OPTANE, PmProfile::CXL];

    /// The profile called `name`.
    pub fn by_name(name: &str) -> Option<PmProfile> {
        PmProfile::ALL.iter().copied().find(|p| p.name == name)
    }

    /// Names of every profile, comma separated (for help and error messages).
    pub fn names() -> String {
        PmProfile::ALL
            .iter()
            .map(|p| p.name)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether this profile adds no cost at all (then `Pm` skips the model).
    pub fn is_free(&self) -> bool {
        self.read_latency_ns == 0
            && self.read_bandwidth == 0
            && self.write_latency_ns == 0
            && self.write_bandwidth == 0
    }

    /// Added cost (ns) of one read access of `len` bytes to a local device.
    pub fn read_cost_ns(&self, len: u64) -> u64 {
        self.read_latency_ns + transfer_ns(len, self.read_bandwidth)
    }

    /// Added cost (ns) of a fence that drains `pending` written-back bytes, all to
    /// local devices; a fence with nothing pending costs nothing.
    pub fn persist_cost_ns(&self, pending: u64) -> u64 {
        if pending == 0 {
            return 0;
        }
        self.write_latency_ns + transfer_ns(pending, self.write_bandwidth)
    }

    /// The cost factors of a device at NUMA `distance` (SLIT units) from the
    /// accessing thread: [`RemoteTable::at`] of this profile's table.
    pub fn remote(&self, distance: u32) -> RemoteCost {
        self.numa.at(distance)
    }

    /// Added cost (ns) of one read access of `len` bytes to a device at `distance`:
    /// `read_latency × factor + len / (read_bandwidth / divisor)`. At
    /// [`LOCAL_DISTANCE`] (or below) exactly [`PmProfile::read_cost_ns`].
    pub fn read_cost_at_ns(&self, len: u64, distance: u32) -> u64 {
        if distance <= LOCAL_DISTANCE {
            return self.read_cost_ns(len);
        }
        let c = self.remote(distance);
        scale(self.read_latency_ns, c.read_latency)
            + transfer_scaled_ns(len, self.read_bandwidth, c.read_bandwidth)
    }

    /// Added cost (ns) of a fence that drains written-back bytes to devices at
    /// several distances: `pending` holds (distance, bytes) classes. The fence waits
    /// for the slowest class's latency (`write_latency × factor`, over the classes
    /// with bytes) plus every class's transfer time at its own bandwidth
    /// (`write_bandwidth / divisor`). Nothing pending costs nothing; one class at
    /// [`LOCAL_DISTANCE`] costs exactly [`PmProfile::persist_cost_ns`].
    pub fn persist_cost_at_ns(&self, pending: &[(u32, u64)]) -> u64 {
        let mut latency = None;
        let mut transfer = 0u64;
        for &(distance, bytes) in pending {
            if bytes == 0 {
                continue;
            }
            let c = self.remote(distance);
            let l = scale(self.write_latency_ns, c.write_latency);
            latency = Some(latency.map_or(l, |m: u64| m.max(l)));
            transfer = transfer.saturating_add(transfer_scaled_ns(
                bytes,
                self.write_bandwidth,
                c.write_bandwidth,
            ));
        }
        latency.map_or(0, |l| l.saturating_add(transfer))
    }
}

/// Cost factors of accessing a device at one NUMA distance, in thousandths
/// (1000 = ×1): latencies are multiplied by their factor, bandwidths divided by
/// theirs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteCost {
    /// The distance (ACPI SLIT units, 10 = local) these factors are for.
    pub distance: u32,
    /// Read latency factor, in thousandths.
    pub read_latency: u32,
    /// Read bandwidth divisor, in thousandths.
    pub read_bandwidth: u32,
    /// Persist (fence) latency factor, in thousandths.
    pub write_latency: u32,
    /// Write bandwidth divisor, in thousandths.
    pub write_bandwidth: u32,
}

impl RemoteCost {
    /// A local access: every factor ×1.
    pub const LOCAL: RemoteCost = RemoteCost {
        distance: LOCAL_DISTANCE,
        read_latency: 1000,
        read_bandwidth: 1000,
        write_latency: 1000,
        write_bandwidth: 1000,
    };

    /// Whether every factor is ×1 (the access costs what a local one does).
    pub fn is_local(&self) -> bool {
        self.read_latency == 1000
            && self.read_bandwidth == 1000
            && self.write_latency == 1000
            && self.write_bandwidth == 1000
    }
}

/// Entries a [`RemoteTable`] holds at most.
pub const REMOTE_STEPS: usize = 4;

/// Largest distance [`RemoteTable::at`] extrapolates to; larger ones cost as much
/// (a guard: SLIT distances of real machines stay far below it, and a wrong matrix
/// must not produce absurd waits).
pub const MAX_MODELED_DISTANCE: u32 = 64;

/// A profile's remote cost factors by NUMA distance: [`RemoteCost`] entries at
/// increasing distances, the first one [`RemoteCost::LOCAL`]. Fixed size, so that
/// [`PmProfile`] stays `Copy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteTable {
    len: usize,
    steps: [RemoteCost; REMOTE_STEPS],
}

impl RemoteTable {
    /// Local only: every distance costs as local.
    pub const LOCAL_ONLY: RemoteTable = RemoteTable::new(&[RemoteCost::LOCAL]);

    /// A table of `steps`.
    ///
    /// # Panics
    /// (At compile time in a constant.) Unless there are 1 to [`REMOTE_STEPS`]
    /// steps, the first is [`RemoteCost::LOCAL`], distances strictly increase, and no
    /// factor is below ×1 (a remote device is never cheaper than a local one).
    pub const fn new(steps: &[RemoteCost]) -> RemoteTable {
        assert!(
            !steps.is_empty() && steps.len() <= REMOTE_STEPS,
            "a remote table has 1 to REMOTE_STEPS entries"
        );
        let first = steps[0];
        assert!(
            first.distance == LOCAL_DISTANCE
                && first.read_latency == 1000
                && first.read_bandwidth == 1000
                && first.write_latency == 1000
                && first.write_bandwidth == 1000,
            "a remote table starts with RemoteCost::LOCAL"
        );
        let mut out = [RemoteCost::LOCAL; REMOTE_STEPS];
        let mut i = 0;
        while i < steps.len() {
            let s = steps[i];
            assert!(
                i == 0 || s.distance > steps[i - 1].distance,
                "remote table distances must increase"
            );
            assert!(
                s.read_latency >= 1000
                    && s.read_bandwidth >= 1000
                    && s.write_latency >= 1000
                    && s.write_bandwidth >= 1000,
                "remote factors are at least x1 (1000)"
            );
            out[i] = s;
            i += 1;
        }
        RemoteTable {
            len: steps.len(),
            steps: out,
        }
    }

    /// The entries, by increasing distance.
    pub fn steps(&self) -> &[RemoteCost] {
        &self.steps[..self.len]
    }

    /// The factors at `distance`: an entry's own at its distance; **linear
    /// interpolation** between the two entries around it; beyond the last entry,
    /// linear extrapolation along the last two (SLIT distances are relative
    /// latencies, so a two-hop 31 or 32 costs about twice a one-hop 21's extra),
    /// with the distance capped at [`MAX_MODELED_DISTANCE`]. [`RemoteCost::LOCAL`]
    /// at 10 or below, and at every distance for a local-only table. Factors are
    /// rounded down to whole thousandths.
    pub fn at(&self, distance: u32) -> RemoteCost {
        let steps = self.steps();
        let d = distance.min(MAX_MODELED_DISTANCE);
        if d <= LOCAL_DISTANCE || steps.len() == 1 {
            return RemoteCost::LOCAL;
        }
        let i = steps
            .iter()
            .position(|s| s.distance >= d)
            .unwrap_or(steps.len() - 1)
            .max(1);
        if steps[i].distance == d {
            return steps[i];
        }
        let (a, b) = (steps[i - 1], steps[i]);
        let f = |x: u32, y: u32| -> u32 {
            // x + (y - x) * (d - a.d) / (b.d - a.d), in i64: exact, and for
            // extrapolation d - a.d exceeds b.d - a.d.
            let v = i64::from(x)
                + (i64::from(y) - i64::from(x)) * (i64::from(d) - i64::from(a.distance))
                    / (i64::from(b.distance) - i64::from(a.distance));
            u32::try_from(v.max(1000)).unwrap_or(u32::MAX)
        };
        RemoteCost {
            distance: d,
            read_latency: f(a.read_latency, b.read_latency),
            read_bandwidth: f(a.read_bandwidth, b.read_bandwidth),
            write_latency: f(a.write_latency, b.write_latency),
            write_bandwidth: f(a.write_bandwidth, b.write_bandwidth),
        }
    }
}

/// `ns × factor / 1000` (factor in thousandths), rounded down.
fn scale(ns: u64, factor: u32) -> u64 {
    let v = u128::from(ns) * u128::from(factor) / 1000;
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Time (ns, rounded down) to move `bytes` at `bandwidth / (divisor / 1000)` bytes
/// per second; with a divisor of 1000 exactly [`transfer_ns`].
fn transfer_scaled_ns(bytes: u64, bandwidth: u64, divisor: u32) -> u64 {
    if bandwidth == 0 {
        return 0;
    }
    let ns =
        u128::from(bytes) * 1_000_000_000 * u128::from(divisor) / (u128::from(bandwidth) * 1000);
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// Time (ns, rounded down) to move `bytes` at `bandwidth` bytes per second.
fn transfer_ns(bytes: u64, bandwidth: u64) -> u64 {
    if bandwidth == 0 {
        return 0;
    }
    let ns = u128::from(bytes) * 1_000_000_000 / u128::from(bandwidth);
    u64::try_from(ns).unwrap_or(u64::MAX)
}

// Two plain thread-locals, not one struct: the write-back and fence paths must stay
// as cheap as the single counter they replace. (A struct of both, reached through a
// non-inlined `LocalKey::with`, added ~60 ns to each 128-byte random write + clwb +
// fence + 16-byte descriptor + clwb + fence under `optane` on the development VM.)
thread_local! {
    /// Bytes written back (flushed lines, non-temporal stores) by this thread since
    /// its last fence on a profiled region, by the node of the device written.
    static PENDING_BYTES: [Cell<u64>; MAX_NODES] = const { [const { Cell::new(0) }; MAX_NODES] };
    /// Bit `n`: `PENDING_BYTES[n]` is not zero.
    static PENDING_NODES: Cell<u64> = const { Cell::new(0) };
}

/// Adds `bytes` written back by the calling thread to a device on `node` (charged
/// at its next fence).
#[inline]
pub(crate) fn add_pending_write(node: u32, bytes: u64) {
    // (`Pm::set_node` keeps nodes below MAX_NODES; the remainder only spares the
    // bounds check.)
    let n = node as usize % MAX_NODES;
    PENDING_BYTES.with(|p| p[n].set(p[n].get().saturating_add(bytes)));
    PENDING_NODES.with(|m| m.set(m.get() | 1 << n));
}

/// Takes the calling thread's pending written-back bytes, by device node.
#[inline]
pub(crate) fn take_pending_writes() -> [u64; MAX_NODES] {
    let mut m = PENDING_NODES.with(|m| m.replace(0));
    let mut out = [0; MAX_NODES];
    while m != 0 {
        let n = m.trailing_zeros() as usize % MAX_NODES;
        out[n] = PENDING_BYTES.with(|p| p[n].replace(0));
        m &= m - 1;
    }
    out
}

/// The write channels of one volume: for each NUMA node, when the write-backs
/// queued on that node's PM so far will have been transferred (a
/// [`SpinClock::ticks`] reading). A fence queues its thread's pending bytes on the
/// channel of each node they go to and waits behind what is already queued there:
/// a node's write bandwidth is shared by every thread writing to it (see the module
/// documentation). One per profiled volume, shared by its devices.
#[derive(Debug, Default)]
pub struct WriteChannels {
    busy: [CachePadded<AtomicU64>; MAX_NODES],
}

impl WriteChannels {
    /// Queues `ticks` of transfer on `node`'s channel by a thread arriving at `now`;
    /// returns the ticks it waits behind transfers queued before it (0 when the
    /// channel is idle).
    #[inline]
    fn queue(&self, node: usize, now: u64, ticks: u64) -> u64 {
        let busy = &self.busy[node % MAX_NODES];
        let mut cur = busy.load(Ordering::Relaxed);
        if cur <= now {
            // Idle: a plain store, not a locked read-modify-write. Right after the
            // fence's `sfence` a locked instruction would wait for the thread's
            // non-temporal stores to drain, which the modeled wait is meant to
            // overlap (it cost ~95 ns per fence on the development VM). A fence that
            // finds the channel idle and is then delayed before its store (another
            // fence finding it idle at the same instant, or a preemption) overwrites
            // what was queued meanwhile: contention can be under-counted, never
            // over-counted.
            busy.store(now.saturating_add(ticks), Ordering::Relaxed);
            return 0;
        }
        loop {
            let start = cur.max(now);
            // Relaxed: the channel's time is the only datum; no other memory is
            // published through it.
            match busy.compare_exchange_weak(
                cur,
                start.saturating_add(ticks),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return start - now,
                Err(c) => cur = c,
            }
        }
    }
}

/// What one fence is charged: its own modeled cost (latency and transfer, as if
/// alone: [`PmProfile::persist_cost_ns`] / [`PmProfile::persist_cost_at_ns`]) and the
/// time it waits behind other threads' transfers queued on the same channels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FenceCharge {
    pub own_ns: u64,
    pub queue_ns: u64,
}

/// Takes the calling thread's pending written-back bytes and returns what the fence
/// that drains them costs under `p`, for a thread on `thread_node`: bytes pending
/// only to devices on the thread's own node cost exactly
/// [`PmProfile::persist_cost_ns`]; otherwise each device node is a class at its
/// distance from `thread_node` ([`PmProfile::persist_cost_at_ns`]). The bytes are
/// queued on `channels` (each class at its own bandwidth) at `now`
/// ([`SpinClock::ticks`]; `None`: the clock is read when needed, tests give the
/// time), and the fence also waits for the longest queue ahead of them.
#[inline]
pub(crate) fn take_pending_charge(
    p: &PmProfile,
    thread_node: u32,
    channels: &WriteChannels,
    clock: &SpinClock,
    now: Option<u64>,
) -> FenceCharge {
    let t = thread_node as usize % MAX_NODES;
    let mask = PENDING_NODES.with(|m| m.get());
    if mask == 1 << t {
        // Local only: the single-node model, exactly, plus the queue.
        PENDING_NODES.with(|m| m.set(0));
        let bytes = PENDING_BYTES.with(|b| b[t].replace(0));
        let own_ns = p.persist_cost_ns(bytes);
        let ticks = clock.ns_to_ticks(transfer_ns(bytes, p.write_bandwidth));
        let now = now.unwrap_or_else(|| clock.ticks());
        let queued = channels.queue(t, now, ticks);
        return FenceCharge {
            own_ns,
            queue_ns: clock.ticks_to_ns(queued),
        };
    }
    if mask == 0 {
        return FenceCharge::default();
    }
    take_pending_mixed_charge(p, thread_node, channels, clock, now)
}

/// [`take_pending_charge`] with bytes pending to other nodes than the thread's.
#[cold]
#[inline(never)]
fn take_pending_mixed_charge(
    p: &PmProfile,
    thread_node: u32,
    channels: &WriteChannels,
    clock: &SpinClock,
    now: Option<u64>,
) -> FenceCharge {
    let pending = take_pending_writes();
    let mut classes = [(0u32, 0u64); MAX_NODES];
    let mut n = 0;
    let now = now.unwrap_or_else(|| clock.ticks());
    let mut queued = 0;
    for (node, &bytes) in pending.iter().enumerate() {
        if bytes != 0 {
            let distance = crate::numa::node_distance(thread_node, node as u32);
            classes[n] = (distance, bytes);
            n += 1;
            let divisor = p.remote(distance).write_bandwidth;
            let ticks = clock.ns_to_ticks(transfer_scaled_ns(bytes, p.write_bandwidth, divisor));
            queued = queued.max(channels.queue(node, now, ticks));
        }
    }
    FenceCharge {
        own_ns: p.persist_cost_at_ns(&classes[..n]),
        queue_ns: clock.ticks_to_ns(queued),
    }
}

/// A calibrated busy-wait clock: the time-stamp counter where it is invariant
/// (constant rate, runs in every C-state) and `MNEMOFS_CLOCK=monotonic` does not
/// say otherwise ([`crate::HostChoices`]), else the monotonic clock.
#[derive(Clone, Copy, Debug)]
pub struct SpinClock {
    /// TSC ticks per nanosecond; `None`: spin on `Instant`.
    ticks_per_ns: Option<f64>,
    /// Ticks a wait lasts beyond what it asks, on average (subtracted from each
    /// wait; see [`SpinClock::spin_excess_ticks`]).
    overhead_ticks: u64,
}

impl SpinClock {
    /// The process-wide clock, calibrated once (about 10 ms on first use).
    pub fn get() -> &'static SpinClock {
        static CLOCK: OnceLock<SpinClock> = OnceLock::new();
        CLOCK.get_or_init(SpinClock::calibrate)
    }

    /// Whether waits spin on the time-stamp counter (else on the monotonic clock).
    pub fn uses_tsc(&self) -> bool {
        self.ticks_per_ns.is_some()
    }

    /// What each wait is shortened by (ns): its measured average overshoot (see
    /// `spin_excess_ticks`); 0 when spinning on the monotonic clock.
    pub fn spin_excess_ns(&self) -> u64 {
        self.ticks_to_ns(self.overhead_ticks)
    }

    /// TSC ticks per nanosecond, when the TSC is used.
    pub fn tsc_ghz(&self) -> Option<f64> {
        self.ticks_per_ns
    }

    fn calibrate() -> SpinClock {
        #[cfg(target_arch = "x86_64")]
        {
            if invariant_tsc() && crate::HostChoices::get().is_ok_and(|h| h.tsc) {
                let t0 = Instant::now();
                let c0 = rdtsc();
                while t0.elapsed() < Duration::from_millis(10) {
                    std::hint::spin_loop();
                }
                let c1 = rdtsc();
                let ns = t0.elapsed().as_nanos() as f64;
                let ticks = c1.wrapping_sub(c0) as f64;
                if ns > 0.0 && ticks > 0.0 {
                    let mut clock = SpinClock {
                        ticks_per_ns: Some(ticks / ns),
                        overhead_ticks: 0,
                    };
                    clock.overhead_ticks = clock.spin_excess_ticks();
                    return clock;
                }
            }
        }
        SpinClock {
            ticks_per_ns: None,
            overhead_ticks: 0,
        }
    }

    /// How much longer than asked a [`SpinClock::spin`] lasts on average, in ticks,
    /// with nothing subtracted: the fence before the first reading, the readings
    /// themselves (about 9 ns each on the development VM) and the last loop step's
    /// overshoot (a reading and a `pause`: about 35 ns there, so a 100 ns wait lasted
    /// 137 ns). Measured as `spin` runs it, 200 ns waits in 15 batches of 100; the
    /// least of the batches' means (an interruption or a busy host only lengthens a
    /// batch), and never more than `MAX_EXCESS_NS`: a calibration at another clock
    /// speed of the core than the waits run at (the `pause` step costs cycles, the
    /// counter counts time) cannot make them skip much of the profile's cost.
    /// Reported with every benchmark result ([`SpinClock::spin_excess_ns`]).
    /// Subtracting it from every wait makes the mean wait what the profile charges.
    #[cfg(target_arch = "x86_64")]
    fn spin_excess_ticks(&self) -> u64 {
        /// The most a wait's overshoot is taken to be (the development VM: ~35 ns).
        const MAX_EXCESS_NS: u64 = 50;
        const WAIT_NS: u64 = 200;
        const PER_BATCH: u64 = 100;
        let want = self.ns_to_ticks(WAIT_NS);
        let least = (0..15)
            .map(|_| {
                let a = rdtsc();
                for _ in 0..PER_BATCH {
                    self.spin(std::hint::black_box(WAIT_NS));
                }
                let took = rdtsc().wrapping_sub(a) / PER_BATCH;
                took.saturating_sub(want)
            })
            .min()
            .unwrap_or(0);
        least.min(self.ns_to_ticks(MAX_EXCESS_NS))
    }

    /// A cheap timestamp for measuring short intervals: the time-stamp counter where
    /// it is invariant (a few ns to read, as fio's default `clocksource=cpu`),
    /// otherwise nanoseconds of the monotonic clock since the first call. Convert a
    /// difference with [`SpinClock::ticks_to_ns`].
    #[inline]
    pub fn ticks(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if self.ticks_per_ns.is_some() {
            return rdtsc();
        }
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }

    /// Nanoseconds in `ticks` (a difference of two [`SpinClock::ticks`] readings).
    #[inline]
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        match self.ticks_per_ns {
            Some(tpn) => (ticks as f64 / tpn) as u64,
            None => ticks,
        }
    }

    /// Ticks in `ns` nanoseconds (for deadlines in ticks).
    #[inline]
    pub fn ns_to_ticks(&self, ns: u64) -> u64 {
        match self.ticks_per_ns {
            Some(tpn) => (ns as f64 * tpn) as u64,
            None => ns,
        }
    }

    /// Busy-waits for `ns` nanoseconds.
    #[inline]
    pub fn spin(&self, ns: u64) {
        if ns == 0 {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(tpn) = self.ticks_per_ns {
            // The wait starts once the access it models has completed: without the
            // fence, the counter may be read while the access's loads are still in
            // flight, and the modeled cost would overlap the real one.
            // SAFETY: lfence has no operands and exists on every x86-64 CPU.
            unsafe { std::arch::x86_64::_mm_lfence() };
            let start = rdtsc();
            let ticks = ((ns as f64) * tpn) as u64;
            let ticks = ticks.saturating_sub(self.overhead_ticks);
            while rdtsc().wrapping_sub(start) < ticks {
                std::hint::spin_loop();
            }
            return;
        }
        let start = Instant::now();
        let d = Duration::from_nanos(ns);
        while start.elapsed() < d {
            std::hint::spin_loop();
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no memory operands and exists on every x86-64 CPU.
    unsafe { std::arch::x86_64::_rdtsc() }
}

/// CPUID 0x8000_0007 EDX bit 8: the TSC runs at a constant rate in every state.
#[cfg(target_arch = "x86_64")]
fn invariant_tsc() -> bool {
    use std::arch::x86_64::__cpuid;
    let max_ext = __cpuid(0x8000_0000).eax;
    max_ext >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for p in PmProfile::ALL {
            assert_eq!(PmProfile::by_name(p.name), Some(*p));
            assert_eq!(p.numa.steps()[0], RemoteCost::LOCAL);
            assert_eq!(p.remote(LOCAL_DISTANCE), RemoteCost::LOCAL);
        }
        assert_eq!(PmProfile::by_name("nvdimm"), None);
        assert_eq!(PmProfile::names(), "dram, optane, cxl");
        assert_eq!(PmProfile::default(), PmProfile::DRAM);
    }

    #[test]
    fn dram_is_free_and_costs_nothing() {
        let d = PmProfile::DRAM;
        assert!(d.is_free());
        assert_eq!(d.read_cost_ns(4096), 0);
        assert_eq!(d.persist_cost_ns(1 << 20), 0);
        // Remote too: the factors scale nothing.
        assert_eq!(d.read_cost_at_ns(4096, 21), 0);
        assert_eq!(d.persist_cost_at_ns(&[(21, 4096), (10, 64)]), 0);
        assert!(!PmProfile::OPTANE.is_free());
        assert!(!PmProfile::CXL.is_free());
    }

    #[test]
    fn optane_cost_math() {
        let o = PmProfile::OPTANE;
        // 305 ns + 4096 B / 6.6 GB/s = 305 + 620.6 → 925 ns.
        assert_eq!(o.read_cost_ns(4096), 305 + 620);
        assert_eq!(o.read_cost_ns(8), 305 + 1);
        assert_eq!(o.read_cost_ns(0), 305);
        // A 4 KiB non-temporal page plus one flushed 64 B log line and one 8 B tail
        // line: 90 ns + 4160 B / 2.3 GB/s = 90 + 1808.6 → 1898 ns.
        assert_eq!(o.persist_cost_ns(4096 + 64), 90 + 1808);
        assert_eq!(o.persist_cost_ns(64), 90 + 27);
        assert_eq!(o.persist_cost_ns(0), 0);
    }

    #[test]
    fn cxl_cost_math() {
        let c = PmProfile::CXL;
        // 250 ns + 4096 B / 31.5 GB/s = 250 + 130.0 → 380 ns.
        assert_eq!(c.read_cost_ns(4096), 250 + 130);
        assert_eq!(c.persist_cost_ns(64), 250 + 2);
    }

    #[test]
    fn transfer_rounds_down_and_never_overflows() {
        assert_eq!(transfer_ns(999, 1_000_000_000), 999);
        assert_eq!(transfer_ns(1, 3_000_000_000), 0);
        assert_eq!(transfer_ns(u64::MAX, 1), u64::MAX);
        assert_eq!(transfer_ns(123, 0), 0);
    }

    #[test]
    fn pending_bytes_are_per_thread_per_node_and_taken_once() {
        let _ = take_pending_writes();
        add_pending_write(0, 64);
        add_pending_write(0, 4096);
        add_pending_write(3, 100);
        let other = std::thread::spawn(|| {
            add_pending_write(0, 1);
            take_pending_writes()
        })
        .join()
        .unwrap();
        assert_eq!(other, [1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(take_pending_writes(), [4160, 0, 0, 100, 0, 0, 0, 0]);
        assert_eq!(take_pending_writes(), [0; MAX_NODES]);
    }

    /// The formulas of the single-node model, written out: the local case must
    /// charge exactly these.
    fn old_read(p: &PmProfile, len: u64) -> u64 {
        p.read_latency_ns + (len as u128 * 1_000_000_000 / p.read_bandwidth as u128) as u64
    }
    fn old_persist(p: &PmProfile, pending: u64) -> u64 {
        if pending == 0 {
            0
        } else {
            p.write_latency_ns
                + (pending as u128 * 1_000_000_000 / p.write_bandwidth as u128) as u64
        }
    }

    #[test]
    fn local_costs_are_the_single_node_formulas() {
        for p in [PmProfile::OPTANE, PmProfile::CXL] {
            for len in [0u64, 1, 8, 63, 64, 100, 4096, 4160, 65536, 1 << 20] {
                assert_eq!(p.read_cost_ns(len), old_read(&p, len));
                assert_eq!(p.read_cost_at_ns(len, LOCAL_DISTANCE), old_read(&p, len));
                assert_eq!(p.persist_cost_ns(len), old_persist(&p, len));
                assert_eq!(
                    p.persist_cost_at_ns(&[(LOCAL_DISTANCE, len)]),
                    old_persist(&p, len)
                );
            }
        }
    }

    #[test]
    fn distance_lookup_interpolates_and_extrapolates() {
        let t = PmProfile::OPTANE.numa;
        let at21 = t.steps()[1];
        assert_eq!(t.at(21), at21);
        assert_eq!(t.at(10), RemoteCost::LOCAL);
        assert_eq!(t.at(0), RemoteCost::LOCAL);
        // 16: 6/11 of the way from local to 21, rounded down.
        let c = |distance, rl, rb, wl, wb| RemoteCost {
            distance,
            read_latency: rl,
            read_bandwidth: rb,
            write_latency: wl,
            write_bandwidth: wb,
        };
        assert_eq!(t.at(16), c(16, 1106, 1048, 1361, 1789));
        // Beyond 21: the same line, extended (two hops, 32: twice the extra of 21).
        assert_eq!(t.at(31), c(31, 1372, 1169, 2263, 3762));
        assert_eq!(t.at(32), c(32, 1390, 1178, 2324, 3894));
        // Capped: SLIT's 255 ("unreachable") costs as much as 64.
        assert_eq!(t.at(255), t.at(MAX_MODELED_DISTANCE));
        assert_eq!(t.at(64), c(64, 1957, 1436, 4249, 8103));
        // Through PmProfile.
        assert_eq!(PmProfile::OPTANE.remote(21), at21);

        // A local-only table costs every distance as local.
        assert_eq!(RemoteTable::LOCAL_ONLY.at(32), RemoteCost::LOCAL);
        assert_eq!(PmProfile::DRAM.remote(21), RemoteCost::LOCAL);

        // Between two remote entries, and past the last along their line.
        let t3 = RemoteTable::new(&[
            RemoteCost::LOCAL,
            c(21, 1500, 1000, 2000, 3000),
            c(31, 2000, 1000, 2000, 5000),
        ]);
        assert_eq!(t3.at(26), c(26, 1750, 1000, 2000, 4000));
        assert_eq!(t3.at(41), c(41, 2500, 1000, 2000, 7000));
        assert_eq!(t3.at(15), c(15, 1227, 1000, 1454, 1909));
        assert_eq!(t3.steps().len(), 3);
    }

    #[test]
    #[should_panic(expected = "starts with RemoteCost::LOCAL")]
    fn a_table_must_start_local() {
        let mut far = RemoteCost::LOCAL;
        far.distance = 21;
        RemoteTable::new(&[far]);
    }

    #[test]
    #[should_panic(expected = "distances must increase")]
    fn a_table_must_be_sorted() {
        let mut far = RemoteCost::LOCAL;
        far.distance = 21;
        far.read_latency = 1200;
        RemoteTable::new(&[RemoteCost::LOCAL, far, far]);
    }

    #[test]
    #[should_panic(expected = "at least x1")]
    fn a_remote_device_is_never_cheaper() {
        let mut far = RemoteCost::LOCAL;
        far.distance = 21;
        far.write_bandwidth = 999;
        RemoteTable::new(&[RemoteCost::LOCAL, far]);
    }

    #[test]
    fn remote_cost_math() {
        let o = PmProfile::OPTANE;
        // Read at 21: 305 ns × 1.195 = 364.5 → 364; 4096 B at 6.6 GB/s ÷ 1.089:
        // 675.8 → 675.
        assert_eq!(o.read_cost_at_ns(4096, 21), 364 + 675);
        assert_eq!(o.read_cost_at_ns(8, 21), 364 + 1);
        // Persist of 64 B at 21: 90 × 1.662 = 149.6 → 149; 64 B at 2.3 GB/s ÷ 2.447:
        // 68.1 → 68.
        assert_eq!(o.persist_cost_at_ns(&[(21, 64)]), 149 + 68);
        // Local and remote pending together: the slower latency (remote), plus each
        // class's transfer at its own bandwidth (4096 B local: 1780 ns).
        assert_eq!(
            o.persist_cost_at_ns(&[(LOCAL_DISTANCE, 4096), (21, 64)]),
            149 + 1780 + 68
        );
        // A class with nothing pending adds no latency.
        assert_eq!(
            o.persist_cost_at_ns(&[(21, 0), (LOCAL_DISTANCE, 64)]),
            o.persist_cost_ns(64)
        );
        assert_eq!(o.persist_cost_at_ns(&[]), 0);
        assert_eq!(o.persist_cost_at_ns(&[(21, 0)]), 0);
        // CXL at 21: 250 × 1.372 = 343 for reads and persists; bandwidth undivided.
        let c = PmProfile::CXL;
        assert_eq!(c.read_cost_at_ns(4096, 21), 343 + 130);
        assert_eq!(c.persist_cost_at_ns(&[(21, 64)]), 343 + 2);
    }

    #[test]
    fn the_fence_cost_takes_every_class_pending() {
        // Uses the default distances (21 between different nodes).
        let _g = crate::numa::TEST_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let o = PmProfile::OPTANE;
        // Fresh channels each time: nothing queued ahead, the own cost only.
        let take_pending_cost_ns = |o: &PmProfile, node: u32| {
            let c = take_pending_charge(o, node, &WriteChannels::default(), SpinClock::get(), None);
            assert_eq!(c.queue_ns, 0);
            c.own_ns
        };
        let _ = take_pending_writes();
        assert_eq!(take_pending_cost_ns(&o, 0), 0);
        // Only the thread's own node: the local formula.
        add_pending_write(0, 4096);
        add_pending_write(0, 64);
        assert_eq!(take_pending_cost_ns(&o, 0), o.persist_cost_ns(4160));
        assert_eq!(take_pending_writes(), [0; MAX_NODES]);
        // Local and two remote devices (both at 21): one latency, three transfers.
        add_pending_write(0, 4096);
        add_pending_write(1, 64);
        add_pending_write(5, 64);
        assert_eq!(take_pending_cost_ns(&o, 0), 149 + 1780 + 68 + 68);
        // Seen from node 1, the node-1 bytes are the local ones.
        add_pending_write(0, 64);
        add_pending_write(1, 4096);
        assert_eq!(take_pending_cost_ns(&o, 1), 149 + 1780 + 68);
        assert_eq!(take_pending_cost_ns(&o, 1), 0);
    }

    #[test]
    fn a_channel_queues_transfers_in_arrival_order() {
        let ch = WriteChannels::default();
        // Idle: no wait; the channel is busy until 100 + 50.
        assert_eq!(ch.queue(0, 100, 50), 0);
        // Arriving at 120, behind it: waits 30, then busy until 200.
        assert_eq!(ch.queue(0, 120, 50), 30);
        // Another node's channel is independent.
        assert_eq!(ch.queue(1, 120, 50), 0);
        // Arriving after the channel went idle: no wait, and the idle time is not
        // credited.
        assert_eq!(ch.queue(0, 500, 10), 0);
        assert_eq!(ch.queue(0, 505, 10), 5);
    }

    #[test]
    fn concurrent_fences_share_a_channel_without_losing_a_transfer() {
        // A busy channel (one tick queued from time 0), then 4 threads × 1000
        // one-tick transfers, all arriving at time 0: every transfer gets its own
        // slot, so the waits are exactly 1..=4000 in some order. (Arrivals at an
        // idle channel store without a CAS: see `queue`.)
        let ch = WriteChannels::default();
        assert_eq!(ch.queue(3, 0, 1), 0);
        let waits: Vec<u64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..1000).map(|_| ch.queue(3, 0, 1)).collect::<Vec<_>>()))
                .collect();
            hs.into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        });
        let mut w = waits;
        w.sort_unstable();
        assert_eq!(w, (1..=4000).collect::<Vec<u64>>());
    }

    #[test]
    fn a_fence_waits_behind_the_longest_queue_it_joins() {
        let _g = crate::numa::TEST_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let o = PmProfile::OPTANE;
        let clock = SpinClock::get();
        let ch = WriteChannels::default();
        let _ = take_pending_writes();
        // Another thread has 1 ms of transfers queued on node 1's channel at time
        // t0 (times given, not read: the result does not depend on the host).
        let t0 = 1u64 << 40;
        let ahead = clock.ns_to_ticks(1_000_000);
        ch.queue(1, t0, ahead);
        // A local-only fence on node 0 does not wait for it.
        add_pending_write(0, 4096);
        let c = take_pending_charge(&o, 0, &ch, clock, Some(t0));
        assert_eq!((c.own_ns, c.queue_ns), (o.persist_cost_ns(4096), 0));
        // A fence with bytes for node 1, a quarter of the way through, waits the
        // other three quarters; its own cost is unchanged.
        add_pending_write(0, 64);
        add_pending_write(1, 64);
        let c = take_pending_charge(&o, 0, &ch, clock, Some(t0 + ahead / 4));
        assert_eq!(c.own_ns, o.persist_cost_at_ns(&[(10, 64), (21, 64)]));
        assert_eq!(c.queue_ns, clock.ticks_to_ns(ahead - ahead / 4), "{c:?}");
    }

    #[test]
    fn spin_clock_calibrates() {
        let c = SpinClock::get();
        if let Some(g) = c.tsc_ghz() {
            assert!(g > 0.0);
        }
        // A zero wait returns at once; a short one returns (no timing asserted).
        c.spin(0);
        c.spin(100);
    }
}
