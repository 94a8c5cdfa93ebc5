//! The non-temporal streaming copy ([`Pm::write_nt`]).

use super::Pm;
use crate::trace::StoreKind;

impl Pm {
    /// Non-temporal copy for large writes: bypasses the cache, so the data is durable
    /// after the next `fence` without flushes. Unaligned head/tail bytes are stored
    /// cached and flushed here. Panics if the range is not in the region.
    ///
    /// # Safety
    /// As for [`Pm::write`]: no other thread may read or write any byte of
    /// `[off, off + data.len())` while this call runs.
    pub unsafe fn write_nt(&self, off: u64, data: &[u8]) {
        let p = self.ptr(off, data.len() as u64);
        #[cfg(target_arch = "x86_64")]
        {
            let start_pad = ((8 - (off % 8)) % 8).min(data.len() as u64) as usize;
            let body = (data.len() - start_pad) / 8 * 8;
            if start_pad > 0 {
                // SAFETY: a part of this call's range (the caller's contract).
                unsafe { self.write(off, &data[..start_pad]) };
                self.flush(off, start_pad as u64);
            }
            // (A write shorter than its distance to the next 8-byte boundary has no
            // aligned body: `p + start_pad` is then not aligned, and nothing streams.)
            if body > 0 {
                // SAFETY: `[p + start_pad, + body)` lies in the checked range and
                // starts 8-aligned (off + start_pad is a multiple of 8, the mapping is
                // page-aligned); `data[start_pad..start_pad + body]` is the source; no
                // other thread accesses these bytes meanwhile (the caller's contract).
                unsafe {
                    stream_copy(
                        p.add(start_pad),
                        data.as_ptr().add(start_pad),
                        body,
                        self.has_avx,
                    )
                };
            }
            let i = start_pad + body;
            self.counters.add_nt_bytes(body as u64);
            self.note_writeback(body as u64);
            if let Some(t) = &self.tracer {
                t.store(
                    off + start_pad as u64,
                    &data[start_pad..start_pad + body],
                    StoreKind::NonTemporal,
                );
            }
            if i < data.len() {
                // SAFETY: a part of this call's range (the caller's contract).
                unsafe { self.write(off + i as u64, &data[i..]) };
                self.flush(off + i as u64, (data.len() - i) as u64);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = p;
            // SAFETY: this call's range (the caller's contract).
            unsafe { self.write(off, data) };
            self.flush(off, data.len() as u64);
        }
    }
}

/// Non-temporal copy of `len` bytes (a multiple of 8) from `src` to `dst`, which is
/// 8-byte aligned: one 8-byte `movnti` to reach 16-byte alignment if needed, then
/// 32-byte `vmovntdq` (with AVX) or 16-byte `movntdq` stores, then an 8-byte tail.
/// Wider stores fill the write-combining buffers with fewer instructions (a 4 KiB
/// page: 128 stores instead of 512 `movnti`).
///
/// # Safety
/// `dst` must be valid for `len` bytes of writes and 8-byte aligned, `src` valid for
/// `len` bytes of reads, the two must not overlap, and `avx` only if the CPU has AVX.
#[cfg(target_arch = "x86_64")]
#[inline]
unsafe fn stream_copy(dst: *mut u8, src: *const u8, len: usize, avx: bool) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128, _mm_stream_si64};
    debug_assert_eq!(dst as usize % 8, 0);
    debug_assert_eq!(len % 8, 0);
    let mut i = 0;
    // SAFETY (every block below): the caller's contract; each store lies in
    // `dst[..len]` at the alignment its instruction needs, each load in `src[..len]`.
    if len >= 8 && !(dst as usize).is_multiple_of(16) {
        // SAFETY: as stated above this block.
        unsafe { _mm_stream_si64(dst as *mut i64, (src as *const i64).read_unaligned()) };
        i = 8;
    }
    if avx {
        if len - i >= 16 && !(dst as usize + i).is_multiple_of(32) {
            // SAFETY: as stated above this block.
            unsafe {
                _mm_stream_si128(
                    dst.add(i) as *mut __m128i,
                    _mm_loadu_si128(src.add(i) as *const __m128i),
                )
            };
            i += 16;
        }
        // SAFETY: as stated above this block.
        i += unsafe { stream_avx(dst.add(i), src.add(i), (len - i) / 32 * 32) };
    }
    while len - i >= 16 {
        // SAFETY: as stated above this block.
        unsafe {
            _mm_stream_si128(
                dst.add(i) as *mut __m128i,
                _mm_loadu_si128(src.add(i) as *const __m128i),
            )
        };
        i += 16;
    }
    if len - i >= 8 {
        // SAFETY: as stated above this block.
        unsafe {
            _mm_stream_si64(
                dst.add(i) as *mut i64,
                (src.add(i) as *const i64).read_unaligned(),
            )
        };
    }
}

/// 32-byte non-temporal stores over `len` bytes (a multiple of 32); returns `len`.
///
/// # Safety
/// `dst` valid for `len` bytes and 32-byte aligned, `src` valid for `len` bytes,
/// no overlap, and the CPU has AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn stream_avx(dst: *mut u8, src: *const u8, len: usize) -> usize {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_stream_si256};
    let mut i = 0;
    while i < len {
        // SAFETY: the caller's contract; `dst + i` is 32-aligned and in bounds.
        unsafe {
            _mm256_stream_si256(
                dst.add(i) as *mut __m256i,
                _mm256_loadu_si256(src.add(i) as *const __m256i),
            )
        };
        i += 32;
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nt_copy_handles_unaligned_edges() {
        let pm = Pm::anonymous(1 << 16).unwrap();
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.write_nt(3, &data) };
        pm.fence();
        let mut back = vec![0u8; 1000];
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.read(3, &mut back) };
        assert_eq!(back, data);
        assert_eq!(pm.thread_counters().bytes_written, 1000);
    }

    #[test]
    fn nt_copy_is_exact_at_every_offset_and_length() {
        // Every start offset modulo 64 and lengths around the 8/16/32-byte store
        // widths: the bytes land, nothing around them changes, and the
        // non-temporal count is the 8-aligned body.
        let pm = Pm::anonymous(1 << 16).unwrap();
        let src: Vec<u8> = (0..600u32).map(|i| (i * 13 + 1) as u8).collect();
        for off in 64..128u64 {
            for len in [
                0usize, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 100, 128, 200, 513,
            ] {
                // SAFETY: only this thread uses this test's region.
                unsafe { pm.write(0, &vec![0xee; 1024]) };
                let before = pm.thread_counters();
                // SAFETY: only this thread uses this test's region.
                unsafe { pm.write_nt(off, &src[..len]) };
                pm.fence();
                let d = pm.thread_counters().since(&before);
                let mut back = vec![0u8; 1024];
                // SAFETY: only this thread uses this test's region.
                unsafe { pm.read(0, &mut back) };
                let mut want = vec![0xeeu8; 1024];
                want[off as usize..off as usize + len].copy_from_slice(&src[..len]);
                assert_eq!(back, want, "off {off} len {len}");
                let pad = ((8 - off % 8) % 8).min(len as u64);
                assert_eq!(
                    d.nt_bytes_written,
                    (len as u64 - pad) / 8 * 8,
                    "off {off} len {len}"
                );
                assert_eq!(d.bytes_written, len as u64);
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_sse_only_stream_copy_is_exact_too() {
        // `write_nt` takes the AVX path on this machine; the 16-byte path must hold
        // on CPUs without AVX.
        let mut dst = vec![0xeeu8; 1024];
        let src: Vec<u8> = (0..600u32).map(|i| (i * 29 + 3) as u8).collect();
        for start in (0..64usize).step_by(8) {
            for len in (0..=520usize).step_by(8) {
                dst.fill(0xee);
                let base = (dst.as_ptr() as usize).next_multiple_of(64) - dst.as_ptr() as usize;
                let at = base + start;
                // SAFETY: `dst[at..at + len]` is in bounds and 8-aligned, `src` is valid
                // for `len` bytes, they do not overlap; avx = false needs nothing.
                unsafe { stream_copy(dst.as_mut_ptr().add(at), src.as_ptr(), len, false) };
                // SAFETY: sfence has no operands.
                unsafe { std::arch::x86_64::_mm_sfence() };
                assert_eq!(&dst[at..at + len], &src[..len], "start {start} len {len}");
                assert!(dst[..at].iter().chain(&dst[at + len..]).all(|&b| b == 0xee));
            }
        }
    }
}
