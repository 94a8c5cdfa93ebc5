//! A mutation fuzzer for hostile images, on stable Rust.
//!
//! Each image comes from a seed: the seed picks a valid base image of the
//! [corpus](corpus), 1–4 [mutations](mutate) (bit flips, random words, structure-aware
//! field edits with the checksums recomputed) and the mode to mount it in. The
//! [oracle] then runs fsck, mount, a walk, a short workload, unmount, fsck and a second
//! mount, each step caught (panics) and watched (a deadline). Every image must end
//! refused with a clear error or mounted consistently; fsck and mount must agree.
//!
//! The process isolation (aborts, hangs that cannot be interrupted) is the driver's:
//! `mnemofs fuzz` runs workers in child processes and watches them.

pub mod corpus;
pub mod map;
pub mod mutate;
pub mod oracle;

use corpus::BaseImage;
use map::Map;
use mnemofs::SmallWriteMode;
pub use oracle::{Class, Failure, FsckOutcome, MountOutcome, Verdict};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The corpus and its maps.
pub struct Fuzzer {
    /// The base images.
    pub corpus: Vec<BaseImage>,
    maps: Vec<Map>,
}

/// One mutated image.
pub struct FuzzImage {
    /// Its seed.
    pub seed: u64,
    /// Index of the base image in the corpus.
    pub base: usize,
    /// The mutated bytes.
    pub bytes: Vec<u8>,
    /// The mutations applied, in order.
    pub mutations: Vec<String>,
    /// The small-write mode the oracle mounts it in.
    pub mode: SmallWriteMode,
}

fn mix(seed: u64) -> u64 {
    let mut x = seed ^ 0x6675_7a7a_2d6d_6e6d;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Fuzzer {
    /// Builds the corpus (deterministic) and maps it.
    pub fn new() -> Result<Fuzzer, String> {
        let corpus = corpus::build()?;
        let maps = corpus
            .iter()
            .map(|b| Map::of(&b.bytes).ok_or_else(|| format!("{}: does not map", b.name)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Fuzzer { corpus, maps })
    }

    /// The mutated image of `seed`.
    pub fn image(&self, seed: u64) -> FuzzImage {
        let mut rng = StdRng::seed_from_u64(mix(seed));
        let base = rng.random_range(0..self.corpus.len());
        let b = &self.corpus[base];
        let mode = if rng.random_range(0..2) == 0 {
            b.mode
        } else {
            SmallWriteMode::Cow
        };
        let mut bytes = b.bytes.clone();
        // 1-4 mutations, mostly few: one refused edit hides every other.
        let n = [1, 1, 1, 1, 2, 2, 3, 4][rng.random_range(0..8)];
        let mutations = (0..n)
            .map(|_| mutate::mutate(&mut bytes, &self.maps[base], &mut rng))
            .collect();
        FuzzImage {
            seed,
            base,
            bytes,
            mutations,
            mode,
        }
    }
}

/// The verdict on `img`, each step under `deadline`: the checks run on a helper
/// thread; a step that does not finish in time gives a [`Class::Hang`] failure and
/// `true` (the helper thread is left running: the caller should end the process
/// soon). `step` is told when each step begins.
pub fn check_with_deadline(
    img: Arc<Vec<u8>>,
    mode: SmallWriteMode,
    deadline: Duration,
    mut step: impl FnMut(&'static str),
) -> (Verdict, bool) {
    enum Msg {
        Step(&'static str),
        Done(Box<Verdict>),
    }
    let (tx, rx) = mpsc::channel();
    let tx2 = tx.clone();
    let spawned = std::thread::Builder::new()
        .name("fuzz-check".into())
        .stack_size(16 << 20)
        .spawn(move || {
            let v = oracle::check(&img, mode, &mut |s| {
                let _ = tx2.send(Msg::Step(s));
            });
            let _ = tx.send(Msg::Done(Box::new(v)));
        });
    let hang = |what: String| Verdict {
        fsck: FsckOutcome::NotRun,
        mount: MountOutcome::NotRun,
        failure: Some(Failure {
            class: Class::Hang,
            step: "?",
            msg: what,
        }),
    };
    if let Err(e) = spawned {
        return (hang(format!("cannot start a thread: {e}")), false);
    }
    let mut cur = "start";
    let mut since = Instant::now();
    loop {
        let left = deadline.saturating_sub(since.elapsed());
        match rx.recv_timeout(left) {
            Ok(Msg::Step(s)) => {
                step(s);
                cur = s;
                since = Instant::now();
            }
            Ok(Msg::Done(v)) => return (*v, false),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let mut v = hang(format!(
                    "step {cur} did not finish within {} ms",
                    deadline.as_millis()
                ));
                if let Some(f) = &mut v.failure {
                    f.step = cur;
                }
                return (v, true);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return (
                    hang(format!("the checking thread died in step {cur}")),
                    false,
                )
            }
        }
    }
}
