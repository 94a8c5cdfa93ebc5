//! The mnemofs extent allocator against a buddy allocator, on the same region and the
//! same request streams.
//!
//! Run: `cargo run --release -p mnemofs --example alloc_compare`
//!
//! - extent: `mnemofs::alloc_bench::ExtentAllocator`, the engine's own per-range
//!   allocator (best fit by length, else the longest extents; exact sizes; an
//!   allocation may be several runs).
//! - buddy: `buddy_system_allocator::FrameAllocator` (crates.io), a binary buddy
//!   system: sizes round up to a power of two, naturally aligned, always one run.
//!
//! Both manage the same 1 Mi blocks of 4 KiB (4 GiB) starting at block 9960 (not a
//! power-of-two boundary, as a data area after the metadata is not). Each stream is
//! generated once, from a seeded `SmallRng`, as a list of operations (allocate `n`
//! blocks; free the `i`-th live allocation), with the fill level kept in blocks
//! requested, so that both allocators replay exactly the same operations. A stream
//! has an untimed setup part (fill, then churn to a steady state) and a timed part.
//! In the timed part (where no random numbers are drawn) each allocator call is
//! clocked on its own (`Instant` before and after), so the replay's bookkeeping (the
//! live list, moving handles) is not counted. The `timer` row clocks an allocator that does nothing: the clock's own
//! cost, included in every other row.
//!
//! Timings are the median of 5 runs (each from a fresh allocator); the counts
//! (waste, runs, alignment, fill at failure) are deterministic.

use buddy_system_allocator::FrameAllocator;
use mnemofs::alloc_bench::{AllocRuns, ExtentAllocator};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// First block of the region.
const START: u64 = 9960;
/// Blocks in the region (4 GiB of 4 KiB blocks).
const REGION: u64 = 1 << 20;
/// Buddy orders: blocks of up to 2^20, the whole region.
const ORDER: usize = 21;
/// Timed runs per stream and allocator.
const RUNS: usize = 5;
/// Mixed request sizes, in blocks, drawn uniformly.
const MIXED: &[u32] = &[1, 2, 3, 5, 8, 16, 64, 256, 512];
/// 2 MiB requests.
const HUGE: &[u32] = &[512];
/// 4 KiB requests.
const SINGLE: &[u32] = &[1];

#[derive(Clone, Copy)]
enum Op {
    /// Allocate this many blocks (pushed onto the live list, failed or not).
    Alloc(u32),
    /// Free the live allocation at this index (swap_remove).
    Free(u32),
}

/// The operations of one stream.
struct Trace {
    ops: Vec<Op>,
    /// Where the timed part starts.
    timed_from: usize,
}

/// What the stream generator tracks: the sizes of the live allocations.
struct Model {
    rng: SmallRng,
    live: Vec<u32>,
    requested: u64,
    ops: Vec<Op>,
}

impl Model {
    fn new(seed: u64) -> Model {
        Model {
            rng: SmallRng::seed_from_u64(seed),
            live: Vec::new(),
            requested: 0,
            ops: Vec::new(),
        }
    }

    fn alloc(&mut self, sizes: &[u32]) -> u32 {
        let n = sizes[self.rng.random_range(0..sizes.len())];
        self.live.push(n);
        self.requested += u64::from(n);
        self.ops.push(Op::Alloc(n));
        n
    }

    fn free(&mut self) {
        let i = self.rng.random_range(0..self.live.len());
        self.requested -= u64::from(self.live.swap_remove(i));
        self.ops.push(Op::Free(i as u32));
    }

    fn fill(&mut self, sizes: &[u32], target: u64) {
        while self.requested < target {
            self.alloc(sizes);
        }
    }

    /// One step of a stream held at `target` requested blocks: below the band
    /// allocate, above it free, within it either at even odds.
    fn banded(&mut self, sizes: &[u32], target: u64) {
        let band = REGION / 100;
        let alloc = if self.requested + band < target {
            true
        } else if self.requested > target + band || self.live.is_empty() {
            false
        } else {
            self.rng.random_bool(0.5)
        };
        if alloc {
            self.alloc(sizes);
        } else {
            self.free();
        }
    }
}

/// (a) 4 KiB overwrite churn at `fill` of the region: allocate one block, free a
/// random live one.
fn churn_trace(seed: u64, fill: f64, warm_pairs: usize, timed_pairs: usize) -> Trace {
    let mut m = Model::new(seed);
    m.fill(SINGLE, (REGION as f64 * fill) as u64);
    for _ in 0..warm_pairs {
        m.alloc(SINGLE);
        m.free();
    }
    let timed_from = m.ops.len();
    for _ in 0..timed_pairs {
        m.alloc(SINGLE);
        m.free();
    }
    Trace {
        ops: m.ops,
        timed_from,
    }
}

/// (b) Sizes from `sizes`, allocations and frees at random, held at `fill`.
fn mixed_trace(seed: u64, sizes: &[u32], fill: f64, warm: usize, timed: usize) -> Trace {
    let mut m = Model::new(seed);
    let target = (REGION as f64 * fill) as u64;
    m.fill(sizes, target);
    for _ in 0..warm {
        m.banded(sizes, target);
    }
    let timed_from = m.ops.len();
    for _ in 0..timed {
        m.banded(sizes, target);
    }
    Trace {
        ops: m.ops,
        timed_from,
    }
}

/// (c) Fill to failure: after `age` operations held at 70% (0: from empty), allocate
/// with odds 2:1 against freeing a random live allocation, until a request exceeds
/// what is free in total (where even an exact allocator must fail). All timed.
fn failure_trace(seed: u64, sizes: &[u32], age: usize) -> Trace {
    let mut m = Model::new(seed);
    let target = (REGION as f64 * 0.7) as u64;
    if age > 0 {
        m.fill(sizes, target);
        for _ in 0..age {
            m.banded(sizes, target);
        }
    }
    let timed_from = m.ops.len();
    loop {
        if m.live.is_empty() || m.rng.random_bool(2.0 / 3.0) {
            let before = m.requested;
            let n = m.alloc(sizes);
            if before + u64::from(n) > REGION {
                break;
            }
        } else {
            m.free();
        }
    }
    Trace {
        ops: m.ops,
        timed_from,
    }
}

/// An allocator under test.
trait Allocator {
    /// What an allocation returns, to free it with.
    type H;
    fn new() -> Self;
    fn alloc(&mut self, n: u64) -> Option<Self::H>;
    fn free(&mut self, h: Self::H);
    /// The runs an allocation holds (for a buddy, the rounded-up block).
    fn runs(h: &Self::H) -> Vec<(u64, u64)>;
    /// Free extents, where the allocator tells.
    fn pieces(&self) -> Option<usize> {
        None
    }
}

struct Extent(ExtentAllocator);

impl Allocator for Extent {
    type H = AllocRuns;
    fn new() -> Self {
        Extent(ExtentAllocator::new(START, REGION))
    }
    #[inline]
    fn alloc(&mut self, n: u64) -> Option<AllocRuns> {
        let r = self.0.alloc(n);
        (!r.is_empty()).then_some(r)
    }
    #[inline]
    fn free(&mut self, h: AllocRuns) {
        for &(s, l) in &h {
            self.0.free(s, l);
        }
    }
    fn runs(h: &AllocRuns) -> Vec<(u64, u64)> {
        h.to_vec()
    }
    fn pieces(&self) -> Option<usize> {
        Some(self.0.extent_count())
    }
}

struct Buddy(FrameAllocator<ORDER>);

impl Allocator for Buddy {
    /// First block and the count asked for (dealloc takes the count and rounds it as
    /// alloc did).
    type H = (usize, usize);
    fn new() -> Self {
        let mut f = FrameAllocator::<ORDER>::new();
        f.add_frame(START as usize, (START + REGION) as usize);
        Buddy(f)
    }
    #[inline]
    fn alloc(&mut self, n: u64) -> Option<(usize, usize)> {
        let n = n as usize;
        self.0.alloc(n).map(|s| (s, n))
    }
    #[inline]
    fn free(&mut self, (s, n): (usize, usize)) {
        self.0.dealloc(s, n);
    }
    fn runs(h: &(usize, usize)) -> Vec<(u64, u64)> {
        vec![(h.0 as u64, h.1.next_power_of_two() as u64)]
    }
}

/// Does nothing: what the clock costs.
struct Nothing(u64);

impl Allocator for Nothing {
    type H = (usize, usize);
    fn new() -> Self {
        Nothing(START)
    }
    #[inline]
    fn alloc(&mut self, n: u64) -> Option<(usize, usize)> {
        self.0 = black_box(self.0.wrapping_add(n));
        Some((self.0 as usize, n as usize))
    }
    #[inline]
    fn free(&mut self, h: (usize, usize)) {
        black_box(h);
    }
    fn runs(h: &(usize, usize)) -> Vec<(u64, u64)> {
        vec![(h.0 as u64, h.1 as u64)]
    }
}

/// Replays `ops` from `live`, calling `seen` with each allocation's size and result;
/// with `stop`, stops at the first failed allocation and returns its index. With
/// `clock`, each allocator call is timed on its own and the sum returned: the
/// replay's own work (the live list, the handles) is outside the clock.
#[inline(always)]
fn replay<A: Allocator>(
    a: &mut A,
    live: &mut Vec<Option<A::H>>,
    ops: &[Op],
    stop: bool,
    clock: bool,
    mut seen: impl FnMut(u32, Option<&A::H>),
) -> (Option<usize>, Duration) {
    let mut spent = Duration::ZERO;
    for (k, op) in ops.iter().enumerate() {
        match *op {
            Op::Alloc(n) => {
                let h = if clock {
                    let t0 = Instant::now();
                    let h = black_box(a.alloc(black_box(u64::from(n))));
                    spent += t0.elapsed();
                    h
                } else {
                    a.alloc(u64::from(n))
                };
                seen(n, h.as_ref());
                let failed = h.is_none();
                live.push(h);
                if failed && stop {
                    return (Some(k), spent);
                }
            }
            Op::Free(i) => {
                if let Some(h) = live.swap_remove(i as usize) {
                    if clock {
                        let h = black_box(h);
                        let t0 = Instant::now();
                        a.free(h);
                        spent += t0.elapsed();
                    } else {
                        a.free(h);
                    }
                }
            }
        }
    }
    (None, spent)
}

/// Deterministic counts of one allocator on one stream.
#[derive(Default)]
struct Counts {
    allocs: u64,
    failed: u64,
    requested: u64,
    reserved: u64,
    runs: u64,
    multi_run: u64,
    max_runs: u64,
    /// Allocations that are one run starting at a multiple of the size rounded up to
    /// a power of two.
    aligned: u64,
    /// Timed operations replayed (up to the first failure with `stop`).
    ops: usize,
    /// At the first failure (`stop`): the request, and blocks requested and reserved
    /// by the live allocations.
    fail_size: u32,
    live_requested: u64,
    live_reserved: u64,
    /// Free extents at the end (extent allocator).
    pieces: Option<usize>,
}

/// The counts, from an untimed replay.
fn count<A: Allocator>(t: &Trace, stop: bool) -> Counts {
    let mut a = A::new();
    let mut live = Vec::new();
    let (setup_failed, _) = replay(
        &mut a,
        &mut live,
        &t.ops[..t.timed_from],
        true,
        false,
        |_, _| {},
    );
    assert!(setup_failed.is_none(), "a setup allocation failed");
    let mut c = Counts::default();
    let timed = &t.ops[t.timed_from..];
    let (fail, _) = replay(&mut a, &mut live, timed, stop, false, |n, h| {
        c.allocs += 1;
        let Some(h) = h else {
            c.failed += 1;
            return;
        };
        let runs = A::runs(h);
        let n = u64::from(n);
        c.requested += n;
        c.reserved += runs.iter().map(|r| r.1).sum::<u64>();
        let k = runs.len() as u64;
        c.runs += k;
        c.multi_run += u64::from(k > 1);
        c.max_runs = c.max_runs.max(k);
        c.aligned += u64::from(k == 1 && runs[0].0 % n.next_power_of_two() == 0);
    });
    c.ops = fail.map_or(timed.len(), |k| k + 1);
    c.pieces = a.pieces();
    if let Some(k) = fail {
        let Op::Alloc(n) = timed[k] else {
            unreachable!()
        };
        c.fail_size = n;
        // The failed request itself is the last entry of `live`.
        live.pop();
        for h in live.iter().flatten() {
            c.live_reserved += A::runs(h).iter().map(|r| r.1).sum::<u64>();
        }
        // Requested blocks of the live allocations: replay the sizes.
        c.live_requested = live_requested(&t.ops[..t.timed_from + k]);
    }
    c
}

/// Blocks requested by the allocations live after `ops`.
fn live_requested(ops: &[Op]) -> u64 {
    let mut live: Vec<u32> = Vec::new();
    for op in ops {
        match *op {
            Op::Alloc(n) => live.push(n),
            Op::Free(i) => {
                live.swap_remove(i as usize);
            }
        }
    }
    live.iter().map(|&n| u64::from(n)).sum()
}

/// One timed replay: the setup untimed, then the timed part, clocking only the
/// allocator's calls.
fn time_once<A: Allocator>(t: &Trace, stop: bool) -> Duration {
    let mut a = A::new();
    let mut live = Vec::with_capacity(t.ops.len());
    let setup = &t.ops[..t.timed_from];
    replay(&mut a, &mut live, setup, true, false, |_, _| {});
    let timed = &t.ops[t.timed_from..];
    let (_, d) = replay(&mut a, &mut live, timed, stop, true, |_, _| {});
    black_box(&live);
    d
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

struct Row {
    name: &'static str,
    c: Counts,
    /// ns per allocate+free pair (time over half the operations replayed): median,
    /// min, max over the runs.
    ns: (f64, f64, f64),
}

/// ns per pair of one timed replay.
fn ns_per_pair<A: Allocator>(t: &Trace, stop: bool, ops: usize) -> f64 {
    time_once::<A>(t, stop).as_nanos() as f64 / (ops as f64 / 2.0)
}

/// Runs one stream on both allocators (and, without `stop`, the timer alone), timing
/// them in turn, run after run.
fn run(t: &Trace, stop: bool) -> Vec<Row> {
    let mut rows = vec![
        Row {
            name: "extent",
            c: count::<Extent>(t, stop),
            ns: (0.0, 0.0, 0.0),
        },
        Row {
            name: "buddy",
            c: count::<Buddy>(t, stop),
            ns: (0.0, 0.0, 0.0),
        },
    ];
    if !stop {
        rows.push(Row {
            name: "timer",
            c: count::<Nothing>(t, false),
            ns: (0.0, 0.0, 0.0),
        });
    }
    let mut v = vec![Vec::new(); rows.len()];
    for _ in 0..RUNS {
        for (k, r) in rows.iter().enumerate() {
            v[k].push(match r.name {
                "extent" => ns_per_pair::<Extent>(t, stop, r.c.ops),
                "buddy" => ns_per_pair::<Buddy>(t, stop, r.c.ops),
                _ => ns_per_pair::<Nothing>(t, stop, r.c.ops),
            });
        }
    }
    for (r, v) in rows.iter_mut().zip(v) {
        r.ns = median(v);
    }
    rows
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn pct(a: u64, b: u64) -> f64 {
    100.0 * ratio(a, b)
}

fn print_steady(title: &str, t: &Trace) {
    let rows = run(t, false);
    let timed = t.ops.len() - t.timed_from;
    println!(
        "\n{title}  [{} setup ops untimed, {} timed ops]",
        t.timed_from, timed
    );
    println!(
        "  {:<8} {:>9} {:>17} {:>8} {:>9} {:>8} {:>9} {:>8} {:>8}",
        "alloc",
        "ns/pair",
        "(min..max)",
        "failed",
        "waste",
        "runs/al",
        "multi-run",
        "max runs",
        "aligned"
    );
    for r in &rows {
        let c = &r.c;
        let (m, lo, hi) = r.ns;
        if r.name == "timer" {
            println!(
                "  {:<8} {:>9.1} {:>17}",
                r.name,
                m,
                format!("({lo:.1}..{hi:.1})")
            );
            continue;
        }
        println!(
            "  {:<8} {:>9.1} {:>17} {:>8} {:>9.4} {:>8.4} {:>8.2}% {:>8} {:>7.2}%",
            r.name,
            m,
            format!("({lo:.1}..{hi:.1})"),
            c.failed,
            ratio(c.reserved, c.requested),
            ratio(c.runs, c.allocs - c.failed),
            pct(c.multi_run, c.allocs - c.failed),
            c.max_runs,
            pct(c.aligned, c.allocs - c.failed),
        );
        if let Some(p) = c.pieces {
            println!("  {:<8} (free extents in its trees at the end: {p})", "");
        }
    }
}

fn print_failure(title: &str, t: &Trace) {
    let rows = run(t, true);
    println!(
        "\n{title}  [{} setup ops untimed; timed until the first failure]",
        t.timed_from
    );
    println!(
        "  {:<8} {:>9} {:>17} {:>9} {:>8} {:>11} {:>11} {:>9} {:>8}",
        "alloc",
        "ns/pair",
        "(min..max)",
        "ops",
        "fail at",
        "fill req",
        "fill resv",
        "waste",
        "runs/al"
    );
    for r in rows.iter().filter(|r| r.name != "timer") {
        let c = &r.c;
        let (m, lo, hi) = r.ns;
        let served = c.allocs - c.failed;
        println!(
            "  {:<8} {:>9.1} {:>17} {:>9} {:>8} {:>10.3}% {:>10.3}% {:>9.4} {:>8.4}",
            r.name,
            m,
            format!("({lo:.1}..{hi:.1})"),
            c.ops,
            c.fail_size,
            pct(c.live_requested, REGION),
            pct(c.live_reserved, REGION),
            ratio(c.reserved, c.requested),
            ratio(c.runs, served),
        );
    }
}

fn main() {
    println!(
        "region: {REGION} blocks of 4 KiB ({} GiB) from block {START}; buddy ORDER {ORDER}; \
         median of {RUNS} runs",
        (REGION * 4096) >> 30
    );
    let t = churn_trace(1, 0.5, 1_000_000, 1_000_000);
    print_steady(
        "(a) 4 KiB churn at 50% full: alloc 1 block, free a random one",
        &t,
    );
    let t = churn_trace(2, 0.9, 1_000_000, 1_000_000);
    print_steady(
        "(a) 4 KiB churn at 90% full: alloc 1 block, free a random one",
        &t,
    );
    let t = mixed_trace(3, MIXED, 0.7, 1_000_000, 1_000_000);
    print_steady(
        "(b) mixed {1,2,3,5,8,16,64,256,512} blocks, random alloc/free, held at 70%",
        &t,
    );
    let t = mixed_trace(4, HUGE, 0.7, 1_000_000, 1_000_000);
    print_steady("(b) 2 MiB (512 blocks), random alloc/free, held at 70%", &t);
    let t = failure_trace(5, MIXED, 0);
    print_failure(
        "(c) mixed sizes from empty, alloc:free 2:1, to the first failure",
        &t,
    );
    let t = failure_trace(6, MIXED, 1_000_000);
    print_failure(
        "(c) mixed sizes, aged (1M ops held at 70%), then alloc:free 2:1 to the first failure",
        &t,
    );
    let t = failure_trace(7, HUGE, 0);
    print_failure(
        "(c) 2 MiB from empty, alloc:free 2:1, to the first failure",
        &t,
    );
    let t = failure_trace(8, HUGE, 1_000_000);
    print_failure(
        "(c) 2 MiB, aged (1M ops held at 70%), then alloc:free 2:1 to the first failure",
        &t,
    );
}
