//! Latency histogram (log-linear buckets, < 0.8% relative error) and medians.

/// Sub-buckets per power of two: 2^7 = 128, so a bucket is at most 1/128 of its value.
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
const BUCKETS: usize = ((64 - SUB_BITS as usize) + 1) * SUB as usize;

/// A histogram of nanosecond values. Values below 128 are exact; above, each bucket
/// spans less than 1/128 of its lower bound.
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    n: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

fn index(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // top bit, >= SUB_BITS
    let shift = e - SUB_BITS;
    let m = v >> shift; // in [SUB, 2*SUB)
    ((e - SUB_BITS + 1) as u64 * SUB + (m - SUB)) as usize
}

/// Lowest and highest value of bucket `i`.
fn bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, i);
    }
    let e = i / SUB + u64::from(SUB_BITS) - 1;
    let m = i % SUB + SUB;
    let shift = e - u64::from(SUB_BITS);
    let lo = m << shift;
    let hi = lo + ((1u64 << shift) - 1);
    (lo, hi)
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS],
            n: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[index(v)] += 1;
        self.n += 1;
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.n += other.n;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn min(&self) -> u64 {
        if self.n == 0 {
            0
        } else {
            self.min
        }
    }

    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64
        }
    }

    /// The `p`-th percentile (0 < p <= 100) by nearest rank, as the middle of its
    /// bucket clamped to the observed min and max (100: the max); 0 when empty.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        if p >= 100.0 {
            return self.max;
        }
        let rank = ((p / 100.0) * self.n as f64).ceil().max(1.0) as u64;
        let rank = rank.min(self.n);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bounds(i);
                let mid = lo + (hi - lo) / 2;
                return mid.clamp(self.min, self.max);
            }
        }
        self.max
    }
}

/// Median of `xs` (mean of the middle two for an even count); `None` when empty or
/// when a value is NaN.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_tight() {
        let mut prev_hi = None;
        for i in 0..BUCKETS {
            let (lo, hi) = bounds(i);
            assert!(lo <= hi);
            if let Some(p) = prev_hi {
                assert_eq!(lo, p + 1, "gap before bucket {i}");
            }
            assert_eq!(index(lo), i);
            assert_eq!(index(hi), i);
            if lo >= SUB {
                assert!((hi - lo) as f64 / lo as f64 <= 1.0 / SUB as f64);
            }
            prev_hi = Some(hi);
        }
        assert_eq!(prev_hi, Some(u64::MAX));
    }

    #[test]
    fn small_values_are_exact() {
        let mut h = Histogram::new();
        for v in 1..=100 {
            h.record(v);
        }
        assert_eq!(h.count(), 100);
        assert_eq!(h.percentile(50.0), 50);
        assert_eq!(h.percentile(99.0), 99);
        assert_eq!(h.percentile(100.0), 100);
        assert_eq!(h.percentile(0.0001), 1);
        assert_eq!(h.min(), 1);
        assert_eq!(h.max(), 100);
        assert!((h.mean() - 50.5).abs() < 1e-9);
    }

    #[test]
    fn large_values_within_one_percent() {
        let mut h = Histogram::new();
        // 1..=100_000 µs in ns: p50 = 50 ms, p99 = 99 ms.
        for v in 1..=100_000u64 {
            h.record(v * 1000);
        }
        let p50 = h.percentile(50.0) as f64;
        let p99 = h.percentile(99.0) as f64;
        assert!((p50 / 50_000_000.0 - 1.0).abs() < 0.01, "{p50}");
        assert!((p99 / 99_000_000.0 - 1.0).abs() < 0.01, "{p99}");
        assert_eq!(h.percentile(100.0), 100_000_000);
    }

    #[test]
    fn merge_adds_counts() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        for _ in 0..90 {
            a.record(10);
        }
        for _ in 0..10 {
            b.record(1000);
        }
        a.merge(&b);
        assert_eq!(a.count(), 100);
        assert_eq!(a.percentile(50.0), 10);
        assert_eq!(a.percentile(90.0), 10);
        let p99 = a.percentile(99.0);
        assert!((996..=1000).contains(&p99), "{p99}");
        assert_eq!(a.max(), 1000);
        assert_eq!(Histogram::new().percentile(50.0), 0);
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }
}
