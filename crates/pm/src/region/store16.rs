//! Aligned 16-byte stores ([`Pm::store_u128`], [`Pm::store_u128_nt`]), the two
//! ways of making one durable ([`Store16`]) and the measurement that picks the
//! cheaper ([`Pm::calibrate_store16`]).

use super::Pm;
#[cfg(target_arch = "x86_64")]
use crate::flush::{flush_line, sfence, FlushKind};
use crate::host::Store16Insn;
#[cfg(target_arch = "x86_64")]
use crate::profile::SpinClock;
use crate::trace::StoreKind;
#[cfg(target_arch = "x86_64")]
use crate::CACHE_LINE;

/// Two equivalent ways to store an aligned 16-byte word so that it is durable at the
/// next fence; which costs less depends on the machine ([`Pm::calibrate_store16`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Store16 {
    /// One `movntdq`: no read of the line and no flush, but a partial-line
    /// non-temporal write, which some memory systems complete only after reading and
    /// merging the rest of the line. Not single-copy atomic (see
    /// [`Pm::store_u128_nt`]).
    NonTemporal,
    /// A cached 16-byte atomic store ([`Pm::store_u128`]) and a write-back of its
    /// line: a whole-line write, but the line must be in the cache first, so callers
    /// prefetch it ([`Pm::prefetch`]) well before the store.
    Cached,
}

impl Store16 {
    /// The way's name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            Store16::NonTemporal => "non-temporal",
            Store16::Cached => "cached+writeback",
        }
    }
}

impl Pm {
    /// Aligned 16-byte atomic store: one `movdqa` where the CPU has AVX (Intel SDM
    /// vol. 3A, "Guaranteed Atomic Operations", and AMD APM vol. 2, "Access
    /// Atomicity", guarantee that an aligned 16-byte SSE/AVX load or store is
    /// single-copy atomic on processors with AVX), else
    /// `lock cmpxchg16b` (a locked read-modify-write: slower, and twice when the old
    /// value is not zero). Panics if `off` is not 16-aligned or the word is not in
    /// the region.
    ///
    /// # Safety
    /// No other thread may access any of the 16 bytes at `off` while this call
    /// runs. (Rust has no 16-byte atomic type, and racing accesses of different
    /// sizes to overlapping bytes are undefined even when each is atomic; without
    /// AVX or cmpxchg16b the store is a plain one.)
    pub unsafe fn store_u128(&self, off: u64, v: u128) {
        assert_eq!(off % 16, 0, "unaligned 16-byte atomic store at {off}");
        let p = self.ptr(off, 16) as *mut u128;
        #[cfg(target_arch = "x86_64")]
        {
            if self.store16 == Store16Insn::Sse {
                // SAFETY: `p` is 16-aligned and in bounds; AVX (hence SSE2) is present;
                // no other thread accesses the word meanwhile (the caller's contract).
                unsafe { store_u128_sse(p, v) };
            } else if self.store16 == Store16Insn::Cmpxchg16b {
                // SAFETY: `p` is 16-aligned and in bounds; cmpxchg16b is available; no
                // other thread accesses the word meanwhile (the caller's contract).
                unsafe { store_u128_cx16(p, v) };
            } else {
                // SAFETY: as above; falls back to a plain (tearable) store, which races
                // with nothing (the caller's contract).
                unsafe { std::ptr::write_volatile(p, v) };
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        // SAFETY: `p` is aligned and in bounds; no other thread accesses the word
        // meanwhile (the caller's contract).
        unsafe {
            std::ptr::write_volatile(p, v)
        };
        self.counters.add_bytes(16);
        if let Some(t) = &self.tracer {
            t.store(off, &v.to_le_bytes(), StoreKind::Atomic16);
        }
    }

    /// Aligned 16-byte non-temporal store (`movntdq`): durable after the next fence
    /// like [`Pm::write_nt`], without a flush, and without loading the line first —
    /// about 60 ns less than a cached store, `clwb` and fence of a line that is in
    /// the cache, and no read miss when it is not. **Not single-copy atomic**: no
    /// vendor guarantees it for non-temporal stores, so a crash may persist one
    /// 8-byte half alone; the tracer records it as a non-temporal store, which the
    /// crash explorer tears in its 16-byte tearing modes. Panics if `off` is not
    /// 16-aligned or the word is not in the region.
    ///
    /// # Safety
    /// As for [`Pm::store_u128`]: no other thread may access any of the 16 bytes at
    /// `off` while this call runs.
    pub unsafe fn store_u128_nt(&self, off: u64, v: u128) {
        assert_eq!(off % 16, 0, "unaligned 16-byte store at {off}");
        let p = self.ptr(off, 16) as *mut u128;
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{__m128i, _mm_set_epi64x, _mm_stream_si128};
            // SAFETY: `p` is 16-aligned and in bounds (checked above); SSE2 is part of
            // x86-64; no other thread accesses the word meanwhile (the caller's
            // contract).
            unsafe {
                let x: __m128i = _mm_set_epi64x((v >> 64) as i64, v as i64);
                _mm_stream_si128(p as *mut __m128i, x);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            // SAFETY: `p` is aligned and in bounds; no other thread accesses the word
            // meanwhile (the caller's contract).
            unsafe { std::ptr::write_volatile(p, v) };
            self.flush(off, 16);
        }
        self.counters.add_nt_bytes(16);
        self.note_writeback(16);
        if let Some(t) = &self.tracer {
            t.store(off, &v.to_le_bytes(), StoreKind::NonTemporal);
        }
    }

    /// Stores the aligned 16-byte `v` at `off` the way `kind` says, durable at the
    /// next fence: [`Pm::store_u128_nt`], or [`Pm::store_u128`] and a flush of its
    /// line.
    ///
    /// # Safety
    /// As for [`Pm::store_u128`]: no other thread may access any of the 16 bytes at
    /// `off` while this call runs.
    #[inline]
    pub unsafe fn store_u128_durable(&self, kind: Store16, off: u64, v: u128) {
        match kind {
            // SAFETY: the same word and contract.
            Store16::NonTemporal => unsafe { self.store_u128_nt(off, v) },
            Store16::Cached => {
                // SAFETY: the same word and contract.
                unsafe { self.store_u128(off, v) };
                self.flush(off, 16);
            }
        }
    }

    /// Which [`Store16`] way costs less here: both are timed (alternating rounds, the
    /// fastest round of each counts) storing zeros over the 16-byte words at `offs`
    /// (ideally one per cache line, so that neither way finds a line the other left),
    /// each word followed by its write-back and a fence, each line evicted from the
    /// cache before a round; the cached way prefetches the next word's line one store
    /// ahead, as a caller that prefetches before its previous fence does. The
    /// latency profile's modeled cost of each (16 non-temporal bytes or one 64-byte
    /// line per fence) is added. Takes a few milliseconds.
    ///
    /// Only for a quiescent region: every word at `offs` must be 16-aligned (else
    /// this panics) and zero (it is only ever rewritten with zero, so a crash
    /// meanwhile changes nothing). Bypasses the counters and the tracer. Without
    /// offsets, or off x86-64, returns [`Store16::Cached`]; where
    /// `MNEMOFS_DESC_STORE` names a way ([`crate::HostChoices`]), returns it without
    /// measuring.
    ///
    /// # Safety
    /// No other thread may access any byte of the 16-byte words at `offs` while this
    /// call runs.
    pub unsafe fn calibrate_store16(&self, offs: &[u64]) -> Store16 {
        if let Some(forced) = self.forced_desc_store {
            return forced;
        }
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_clflush, _mm_mfence, _mm_prefetch, _MM_HINT_T0};
            if offs.is_empty() || self.flush == FlushKind::None {
                return Store16::Cached;
            }
            let ptrs: Vec<*mut u128> = offs
                .iter()
                .map(|&o| {
                    assert_eq!(o % 16, 0, "unaligned 16-byte word at {o}");
                    self.ptr(o, 16) as *mut u128
                })
                .collect();
            let clock = SpinClock::get();
            let round = |kind: Store16| -> u64 {
                for &p in &ptrs {
                    // SAFETY: `p` lies in the mapping (checked by `ptr` above).
                    unsafe { _mm_clflush(p as *const u8) };
                }
                // SAFETY: mfence has no operands; it orders the evictions first.
                unsafe { _mm_mfence() };
                let t0 = clock.ticks();
                for (i, &p) in ptrs.iter().enumerate() {
                    match kind {
                        Store16::NonTemporal => {
                            use std::arch::x86_64::{_mm_setzero_si128, _mm_stream_si128};
                            // SAFETY: 16-aligned, in the mapping; no other thread
                            // accesses the word meanwhile (the caller's contract).
                            unsafe { _mm_stream_si128(p as *mut _, _mm_setzero_si128()) };
                        }
                        Store16::Cached => {
                            if let Some(&next) = ptrs.get(i + 1) {
                                // SAFETY: a prefetch of a mapped address.
                                unsafe { _mm_prefetch::<_MM_HINT_T0>(next as *const i8) };
                            }
                            // SAFETY: as above; the same instruction as `store_u128`
                            // (AVX or cmpxchg16b checked here as there).
                            unsafe {
                                if self.store16 == Store16Insn::Sse {
                                    store_u128_sse(p, 0)
                                } else if self.store16 == Store16Insn::Cmpxchg16b {
                                    store_u128_cx16(p, 0)
                                } else {
                                    std::ptr::write_volatile(p, 0)
                                }
                            };
                            // SAFETY: `p` is mapped.
                            unsafe { flush_line(self.flush, p as *const u8) };
                        }
                    }
                    // Fence: each word is durable before the next is stored (what a
                    // LAWN write waits for).
                    sfence();
                }
                clock.ticks_to_ns(clock.ticks().wrapping_sub(t0))
            };
            let (mut nt, mut cached) = (u64::MAX, u64::MAX);
            for _ in 0..6 {
                nt = nt.min(round(Store16::NonTemporal));
                cached = cached.min(round(Store16::Cached));
            }
            if let Some((p, _, _)) = &self.profile {
                let n = ptrs.len() as u64;
                nt += n * p.persist_cost_ns(16);
                cached += n * p.persist_cost_ns(CACHE_LINE);
            }
            if nt < cached {
                Store16::NonTemporal
            } else {
                Store16::Cached
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = offs;
            Store16::Cached
        }
    }
}

/// # Safety
/// `p` must be 16-byte aligned, mapped and writable; the CPU must have AVX (for the
/// atomicity of the store; SSE2 alone executes it, tearable).
#[cfg(target_arch = "x86_64")]
unsafe fn store_u128_sse(p: *mut u128, v: u128) {
    use std::arch::x86_64::{__m128i, _mm_set_epi64x};
    // SAFETY: SSE2 is part of x86-64; building a vector has no preconditions.
    let x: __m128i = unsafe { _mm_set_epi64x((v >> 64) as i64, v as i64) };
    // SAFETY: the caller guarantees alignment and mapping; one aligned `movdqa`
    // store, which the assembler cannot split or elide.
    unsafe {
        std::arch::asm!(
            "movdqa xmmword ptr [{p}], {x}",
            p = in(reg) p,
            x = in(xmm_reg) x,
            options(nostack, preserves_flags)
        );
    }
}

/// # Safety
/// `p` must be 16-byte aligned, mapped and writable; the CPU must have cmpxchg16b.
#[cfg(target_arch = "x86_64")]
unsafe fn store_u128_cx16(p: *mut u128, v: u128) {
    let lo = v as u64;
    let hi = (v >> 64) as u64;
    // SAFETY: the caller guarantees alignment and mapping. The loop reads the current
    // value into rdx:rax (first cmpxchg16b fails and loads it), then retries until
    // the compare succeeds, which stores rcx:rbx atomically. rbx is reserved by LLVM,
    // so it is swapped in and out around the instruction.
    unsafe {
        std::arch::asm!(
            "xchg {lo}, rbx",
            "2:",
            "lock cmpxchg16b [{p}]",
            "jne 2b",
            "xchg {lo}, rbx",
            p = in(reg) p,
            lo = inout(reg) lo => _,
            in("rcx") hi,
            inout("rax") 0u64 => _,
            inout("rdx") 0u64 => _,
            options(nostack)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Event, RecordingTracer};
    use std::sync::Arc;

    #[test]
    fn sixteen_byte_stores_land_whole_and_are_traced_by_kind() {
        let mut pm = Pm::anonymous(1 << 16).unwrap();
        let rec = Arc::new(RecordingTracer::new());
        pm.set_tracer(Some(rec.clone()));
        let (a, b) = (
            0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10u128,
            0xfedc_ba98_7654_3210_0123_4567_89ab_cdefu128,
        );
        let t = pm.thread_counters();
        // Over a non-zero value too (cmpxchg16b retries then; movdqa just stores).
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.store_u128(128, a) };
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.store_u128(128, b) };
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.store_u128_nt(160, a) };
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.store_u128_nt(160, b) };
        pm.fence();
        let d = pm.thread_counters().since(&t);
        assert_eq!(
            (d.bytes_written, d.nt_bytes_written, d.flushes),
            (64, 32, 0)
        );
        for off in [128, 160] {
            let mut got = [0u8; 16];
            // SAFETY: only this thread uses this test's region.
            unsafe { pm.read(off, &mut got) };
            assert_eq!(u128::from_le_bytes(got), b);
        }
        let kinds: Vec<_> = rec
            .take()
            .into_iter()
            .filter_map(|e| match e {
                Event::Store { off, kind, .. } => Some((off, kind)),
                _ => None,
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                (128, StoreKind::Atomic16),
                (128, StoreKind::Atomic16),
                (160, StoreKind::NonTemporal),
                (160, StoreKind::NonTemporal)
            ]
        );
    }

    #[test]
    fn store16_calibration_picks_a_way_and_leaves_the_words_zero() {
        let mut pm = Pm::anonymous(1 << 20).unwrap();
        let offs: Vec<u64> = (0..64).map(|i| 4096 + i * 16).collect();
        let before = pm.thread_counters();
        // SAFETY: only this thread uses this test's region.
        let kind = unsafe { pm.calibrate_store16(&offs) };
        assert!(matches!(kind, Store16::NonTemporal | Store16::Cached));
        assert_eq!(pm.thread_counters(), before, "calibration is not counted");
        assert!(pm.to_vec().iter().all(|&b| b == 0));
        // Both ways store the same bytes.
        for (i, k) in [Store16::NonTemporal, Store16::Cached]
            .into_iter()
            .enumerate()
        {
            let off = 8192 + i as u64 * 64;
            // SAFETY: only this thread uses this test's region.
            unsafe { pm.store_u128_durable(k, off, 0x1234_5678_9abc_def0_0fed_cba9_8765_4321) };
            pm.fence();
            let mut b = [0u8; 16];
            // SAFETY: only this thread uses this test's region.
            unsafe { pm.read(off, &mut b) };
            assert_eq!(
                u128::from_le_bytes(b),
                0x1234_5678_9abc_def0_0fed_cba9_8765_4321
            );
        }
    }
}
