//! Read latency of a region against DRAM's, measured: what tells a DAX device of
//! persistent memory (slower reads than DRAM) from one backed by DRAM, for the
//! engine's `auto` modes.
//!
//! The measure is a pointer chase: each 8-byte load's address depends on the value
//! the previous load returned, so the loads cannot overlap and each costs the
//! medium's full latency. The addresses are random lines of the span, so that most
//! miss the CPU caches once the span is larger than the last-level cache.

use super::Pm;

/// Mixes a loaded value and the step into the next line index.
fn next_line(x: u64, i: u64, lines: u64) -> u64 {
    (x ^ i).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29) % lines
}

impl Pm {
    /// Nanoseconds per dependent load at `loads` random lines of the first `span`
    /// bytes of the region (clamped to it). Reads only; charged by the latency
    /// profile, if any, as every read is.
    pub fn load_latency_ns(&self, span: u64, loads: u32) -> f64 {
        let lines = (span.min(self.len()) / 64).max(1);
        let mut x = 0u64;
        let t = std::time::Instant::now();
        for i in 0..u64::from(loads) {
            x = self.read_u64(next_line(x, i, lines) * 64);
        }
        std::hint::black_box(x);
        t.elapsed().as_nanos() as f64 / f64::from(loads.max(1))
    }
}

/// The same chase as [`Pm::load_latency_ns`] over `span` bytes of fresh anonymous
/// DRAM (every page of it written first, so that no load reads the shared zero
/// page). Returns `None` when the memory cannot be had.
pub fn dram_load_latency_ns(span: u64, loads: u32) -> Option<f64> {
    let words = usize::try_from(span / 8).ok()?.max(8);
    let mut v: Vec<u64> = Vec::new();
    v.try_reserve_exact(words).ok()?;
    // Distinct values, so that the chase is as random as over a device's contents.
    v.extend((0..words as u64).map(|i| i.wrapping_mul(0x2545_F491_4F6C_DD1D)));
    let lines = (words / 8) as u64;
    let mut x = 0u64;
    let t = std::time::Instant::now();
    for i in 0..u64::from(loads) {
        let line = next_line(x, i, lines) as usize;
        x = std::hint::black_box(&v)[line * 8];
    }
    std::hint::black_box(x);
    Some(t.elapsed().as_nanos() as f64 / f64::from(loads.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chase_stays_in_its_span_and_counts_its_loads() {
        let mut pm = Pm::anonymous(1 << 20).unwrap();
        pm.set_profile(crate::PmProfile::OPTANE);
        let before = pm.counters();
        let ns = pm.load_latency_ns(u64::MAX, 1000);
        assert!(ns.is_finite() && ns > 0.0, "{ns}");
        // Every load went through the region's read path: each charged the profile's
        // read cost (and a load out of the span would have panicked).
        let per_load = crate::PmProfile::OPTANE.read_cost_ns(8);
        assert_eq!(
            pm.counters().since(&before).modeled_delay_ns,
            1000 * per_load
        );
        let d = dram_load_latency_ns(1 << 20, 1000).unwrap();
        assert!(d.is_finite() && d > 0.0, "{d}");
        assert!(dram_load_latency_ns(u64::MAX, 10).is_none());
    }
}
