//! PM latency profiles: the cost of real persistent memory, added on DRAM-backed
//! images (DESIGN.md §5).
//!
//! A profile gives, for reads and writes separately, a per-access latency and a
//! bandwidth (bytes per second), plus a remote-node factor for the NUMA work (stored,
//! not applied yet: every access is local until volumes span nodes). `dram` adds
//! nothing; `optane` and `cxl` add their modeled cost with a calibrated busy-wait
//! (never a sleep: the costs are hundreds of nanoseconds).
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
//! Not modeled: the 256-byte internal write granularity of Optane (read-modify-write
//! inside the DIMM), contention between threads for one device's bandwidth (each
//! thread pays its own transfer time), and cache hits on reads.

use std::cell::Cell;
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
    /// Multiplier of the whole cost for an access to another NUMA node's device.
    /// Stored for the NUMA work; not applied yet (all accesses are local).
    pub remote_factor: f64,
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
        remote_factor: 1.0,
    };

    /// Intel Optane DC PMM (first generation), one DIMM, App Direct mode.
    /// Izraelevitz et al., "Basic Performance Measurements of the Intel Optane DC
    /// Persistent Memory Module", arXiv:1903.05714 (2019): random read latency
    /// ≈305 ns; bandwidth of one DIMM ≈6.6 GB/s read, ≈2.3 GB/s write. The persist
    /// latency (90 ns) is our reading of the same paper's finding that a flushed or
    /// non-temporal store completes about as fast as to DRAM, because it is durable
    /// once it reaches the memory controller's ADR-protected queue. See
    /// docs/BENCHMARKS.md.
    pub const OPTANE: PmProfile = PmProfile {
        name: "optane",
        read_latency_ns: 305,
        read_bandwidth: 6_600_000_000,
        write_latency_ns: 90,
        write_bandwidth: 2_300_000_000,
        remote_factor: 1.0,
    };

    /// A CXL memory expander (CXL 1.1/2.0 Type-3 device behind a PCIe 5.0 x8 link).
    /// Latency: 250 ns, the upper end of the ≈170–250 ns load latency reported for
    /// real CXL devices by Sun et al., "Demystifying CXL Memory with Genuine
    /// CXL-Ready Systems and Devices", MICRO 2023, for reads and for persists alike.
    /// Bandwidth: the PCIe 5.0 x8 link limit, ≈31.5 GB/s per direction (an upper
    /// bound; devices measure lower), so the transfer cost is a lower bound.
    pub const CXL: PmProfile = PmProfile {
        name: "cxl",
        read_latency_ns: 250,
        read_bandwidth: 31_500_000_000,
        write_latency_ns: 250,
        write_bandwidth: 31_500_000_000,
        remote_factor: 1.0,
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

    /// Added cost (ns) of one read access of `len` bytes.
    pub fn read_cost_ns(&self, len: u64) -> u64 {
        self.read_latency_ns + transfer_ns(len, self.read_bandwidth)
    }

    /// Added cost (ns) of a fence that drains `pending` written-back bytes; a fence
    /// with nothing pending costs nothing.
    pub fn persist_cost_ns(&self, pending: u64) -> u64 {
        if pending == 0 {
            return 0;
        }
        self.write_latency_ns + transfer_ns(pending, self.write_bandwidth)
    }
}

/// Time (ns, rounded down) to move `bytes` at `bandwidth` bytes per second.
fn transfer_ns(bytes: u64, bandwidth: u64) -> u64 {
    if bandwidth == 0 {
        return 0;
    }
    let ns = u128::from(bytes) * 1_000_000_000 / u128::from(bandwidth);
    u64::try_from(ns).unwrap_or(u64::MAX)
}

thread_local! {
    /// Bytes written back (flushed lines, non-temporal stores) by this thread since
    /// its last fence on a profiled region.
    static PENDING_WRITE_BYTES: Cell<u64> = const { Cell::new(0) };
}

/// Adds written-back bytes of the calling thread (charged at its next fence).
#[inline]
pub(crate) fn add_pending_write(bytes: u64) {
    PENDING_WRITE_BYTES.with(|p| p.set(p.get().saturating_add(bytes)));
}

/// Takes the calling thread's pending written-back bytes.
#[inline]
pub(crate) fn take_pending_write() -> u64 {
    PENDING_WRITE_BYTES.with(|p| p.replace(0))
}

/// A calibrated busy-wait clock: the time-stamp counter where it is invariant
/// (constant rate, runs in every C-state), otherwise the monotonic clock.
#[derive(Clone, Copy, Debug)]
pub struct SpinClock {
    /// TSC ticks per nanosecond; `None`: spin on `Instant`.
    ticks_per_ns: Option<f64>,
    /// Ticks one reading of the counter costs (subtracted from each wait).
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

    /// TSC ticks per nanosecond, when the TSC is used.
    pub fn tsc_ghz(&self) -> Option<f64> {
        self.ticks_per_ns
    }

    fn calibrate() -> SpinClock {
        #[cfg(target_arch = "x86_64")]
        {
            if invariant_tsc() {
                let t0 = Instant::now();
                let c0 = rdtsc();
                while t0.elapsed() < Duration::from_millis(10) {
                    std::hint::spin_loop();
                }
                let c1 = rdtsc();
                let ns = t0.elapsed().as_nanos() as f64;
                let ticks = c1.wrapping_sub(c0) as f64;
                if ns > 0.0 && ticks > 0.0 {
                    let mut overhead = u64::MAX;
                    for _ in 0..1000 {
                        let a = rdtsc();
                        let b = rdtsc();
                        overhead = overhead.min(b.wrapping_sub(a));
                    }
                    return SpinClock {
                        ticks_per_ns: Some(ticks / ns),
                        overhead_ticks: overhead,
                    };
                }
            }
        }
        SpinClock {
            ticks_per_ns: None,
            overhead_ticks: 0,
        }
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
            assert_eq!(p.remote_factor, 1.0);
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
    fn pending_bytes_are_per_thread_and_taken_once() {
        let _ = take_pending_write();
        add_pending_write(64);
        add_pending_write(4096);
        let other = std::thread::spawn(|| {
            add_pending_write(1);
            take_pending_write()
        })
        .join()
        .unwrap();
        assert_eq!(other, 1);
        assert_eq!(take_pending_write(), 4160);
        assert_eq!(take_pending_write(), 0);
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
