//! Offset distributions: the normal distribution of `skewread` (Box–Muller).

use rand::Rng;

/// A normal distribution with mean `mean` and standard deviation `sd`.
#[derive(Clone, Copy, Debug)]
pub struct Normal {
    pub mean: f64,
    pub sd: f64,
}

impl Normal {
    /// One sample (Box–Muller; one of the pair is used).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        // u1 in (0, 1]: ln(u1) is finite.
        let u1: f64 = 1.0 - rng.random::<f64>();
        let u2: f64 = rng.random::<f64>();
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        self.mean + self.sd * z
    }
}

/// Fraction of the file that one standard deviation of `skewread` spans.
pub const SKEW_SD_FRACTION: f64 = 1.0 / 8.0;

/// A block index in `0..nblocks` drawn from a normal distribution centred on the
/// middle of the file with a standard deviation of `nblocks / 8`; draws that fall
/// outside the file are drawn again.
pub fn skewed_block<R: Rng + ?Sized>(rng: &mut R, nblocks: u64) -> u64 {
    if nblocks <= 1 {
        return 0;
    }
    let n = nblocks as f64;
    let d = Normal {
        mean: n / 2.0,
        sd: n * SKEW_SD_FRACTION,
    };
    loop {
        let x = d.sample(rng).floor();
        if x >= 0.0 && x < n {
            return x as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn normal_has_its_mean_and_sd() {
        let mut rng = SmallRng::seed_from_u64(7);
        let d = Normal {
            mean: 100.0,
            sd: 10.0,
        };
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| d.sample(&mut rng)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        assert!((mean - 100.0).abs() < 0.2, "mean {mean}");
        assert!((var.sqrt() - 10.0).abs() < 0.2, "sd {}", var.sqrt());
        // About 68% within one standard deviation.
        let within = xs.iter().filter(|x| (**x - 100.0).abs() <= 10.0).count();
        let frac = within as f64 / n as f64;
        assert!((frac - 0.6827).abs() < 0.01, "{frac}");
    }

    #[test]
    fn skewed_blocks_stay_in_the_file_and_crowd_the_middle() {
        let mut rng = SmallRng::seed_from_u64(1);
        let nblocks = 1024;
        let mut hist = vec![0u32; nblocks as usize];
        for _ in 0..100_000 {
            let b = skewed_block(&mut rng, nblocks);
            assert!(b < nblocks);
            hist[b as usize] += 1;
        }
        let middle: u32 = hist[384..640].iter().sum();
        let edges: u32 = hist[..128].iter().chain(&hist[896..]).sum();
        // ±1 sd (128 blocks) around the middle holds ~68%; beyond ±3 sd ~0.27%.
        assert!(middle > 65_000, "{middle}");
        assert!((150..400).contains(&edges), "{edges}");
        assert_eq!(skewed_block(&mut rng, 1), 0);
        assert_eq!(skewed_block(&mut rng, 0), 0);
    }
}
