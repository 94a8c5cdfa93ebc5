//! Mapping a PM region and the store/flush/fence primitives over it.

use crate::counters::{CounterSnapshot, Counters};
use crate::flush::{flush_line, sfence, FlushKind};
use crate::profile::{self, PmProfile, SpinClock};
use crate::trace::{Marker, StoreKind, Tracer};
use crate::CACHE_LINE;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Errors of the `pm` layer.
#[derive(Debug, thiserror::Error)]
pub enum PmError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: image is empty or too small to map ({len} bytes)")]
    TooSmall { path: PathBuf, len: u64 },
    #[error("{path}: mmap failed: {source}")]
    Map {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: image is in use by another mnemofs process (already mounted?)")]
    Busy { path: PathBuf },
    #[error("PM access out of bounds: offset {off} length {len} in a region of {size} bytes")]
    OutOfBounds { off: u64, len: u64, size: u64 },
}

/// How the region was mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapMode {
    /// `MAP_SHARED_VALIDATE | MAP_SYNC`: a DAX mapping where flushed lines are durable.
    Sync,
    /// `MAP_SHARED`: a file image (e.g. on /dev/shm) emulating PM.
    Shared,
    /// Anonymous memory (tests, crash explorer copies).
    Anonymous,
}

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
    pub fn name(self) -> &'static str {
        match self {
            Store16::NonTemporal => "non-temporal",
            Store16::Cached => "cached+writeback",
        }
    }
}

/// A mapped PM region.
pub struct Pm {
    base: *mut u8,
    len: u64,
    flush: FlushKind,
    mode: MapMode,
    counters: Counters,
    tracer: Option<Arc<dyn Tracer>>,
    has_cx16: bool,
    /// AVX present: an aligned 16-byte SSE store is single-copy atomic.
    has_avx: bool,
    /// Latency profile charged on reads and persists; `None` for `dram` (no cost,
    /// no work on the hot paths).
    profile: Option<(PmProfile, &'static SpinClock)>,
    _file: Option<File>,
}

// SAFETY: `base` points to a shared mapping that lives as long as `Pm`; concurrent
// access to disjoint bytes is coordinated by the layers above (locks, atomics), and
// the 8/16-byte stores used for shared words are atomic instructions.
unsafe impl Send for Pm {}
// SAFETY: see `Send`; `&Pm` only exposes methods that perform raw stores/loads which
// the engine orders with its own locks.
unsafe impl Sync for Pm {}

impl Drop for Pm {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly what mmap returned in `map`.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len as usize);
        }
    }
}

fn io_err(path: &Path, source: std::io::Error) -> PmError {
    PmError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Pm {
    /// Opens an existing image (or DAX device/file) and maps it whole. With `lock`, takes
    /// an exclusive `flock` so a second mount of the same image is refused.
    pub fn open(path: &Path, lock: bool) -> Result<Pm, PmError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io_err(path, e))?;
        if lock {
            // SAFETY: flock on a valid, open file descriptor.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                    return Err(PmError::Busy {
                        path: path.to_path_buf(),
                    });
                }
                return Err(io_err(path, e));
            }
        }
        let len = region_len(&file).map_err(|e| io_err(path, e))?;
        if len < 4096 {
            return Err(PmError::TooSmall {
                path: path.to_path_buf(),
                len,
            });
        }
        Self::map(path, file, len)
    }

    /// Creates (or truncates to) an image file of `len` bytes and maps it.
    pub fn create(path: &Path, len: u64) -> Result<Pm, PmError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| io_err(path, e))?;
        let meta = file.metadata().map_err(|e| io_err(path, e))?;
        if meta.file_type().is_file() {
            file.set_len(len).map_err(|e| io_err(path, e))?;
        }
        let have = region_len(&file).map_err(|e| io_err(path, e))?;
        if have < len {
            return Err(PmError::TooSmall {
                path: path.to_path_buf(),
                len: have,
            });
        }
        Self::map(path, file, len)
    }

    /// Anonymous zeroed memory of `len` bytes (tests, crash-state copies).
    pub fn anonymous(len: u64) -> Result<Pm, PmError> {
        let path = PathBuf::from("<anonymous>");
        // SAFETY: anonymous private mapping; no file descriptor involved.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(PmError::Map {
                path,
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(Self::from_raw(p as *mut u8, len, MapMode::Anonymous, None))
    }

    fn from_raw(base: *mut u8, len: u64, mode: MapMode, file: Option<File>) -> Pm {
        Pm {
            base,
            len,
            flush: FlushKind::detect(),
            mode,
            counters: Counters::new(),
            tracer: None,
            has_cx16: has_cx16(),
            has_avx: has_avx(),
            profile: None,
            _file: file,
        }
    }

    fn map(path: &Path, file: File, len: u64) -> Result<Pm, PmError> {
        let fd = file.as_raw_fd();
        // First try a synchronous DAX mapping; the kernel refuses it (EOPNOTSUPP or
        // EINVAL) for files that are not on a DAX file system, e.g. /dev/shm.
        // SAFETY: mapping a valid fd for `len` bytes; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC,
                fd,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            return Ok(Self::from_raw(p as *mut u8, len, MapMode::Sync, Some(file)));
        }
        // SAFETY: as above, plain shared mapping.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(PmError::Map {
                path: path.to_path_buf(),
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(Self::from_raw(
            p as *mut u8,
            len,
            MapMode::Shared,
            Some(file),
        ))
    }

    /// Installs (or removes) the tracer that sees every later event.
    pub fn set_tracer(&mut self, tracer: Option<Arc<dyn Tracer>>) {
        self.tracer = tracer;
    }

    /// Sets the latency profile charged from now on (`PmProfile::DRAM`: none). See
    /// the `profile` module for where each cost is charged.
    pub fn set_profile(&mut self, p: PmProfile) {
        self.profile = if p.is_free() {
            None
        } else {
            Some((p, SpinClock::get()))
        };
        // Write-backs made before the profile was set are not charged to it.
        let _ = profile::take_pending_write();
    }

    /// The latency profile in force.
    pub fn profile(&self) -> PmProfile {
        self.profile.map_or(PmProfile::DRAM, |(p, _)| p)
    }

    /// Charges the modeled cost of a read of `len` bytes.
    #[inline]
    fn charge_read(&self, len: u64) {
        if let Some((p, clock)) = &self.profile {
            let ns = p.read_cost_ns(len);
            clock.spin(ns);
            self.counters.add_delay(ns);
        }
    }

    /// Records `bytes` written back to PM, charged at the next fence.
    #[inline]
    fn note_writeback(&self, bytes: u64) {
        if self.profile.is_some() {
            profile::add_pending_write(bytes);
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn flush_kind(&self) -> FlushKind {
        self.flush
    }

    pub fn map_mode(&self) -> MapMode {
        self.mode
    }

    pub fn counters(&self) -> CounterSnapshot {
        self.counters.snapshot()
    }

    /// Counters of the calling thread (exact even while other threads work).
    pub fn thread_counters(&self) -> CounterSnapshot {
        self.counters.this_thread()
    }

    /// Checks that `[off, off+len)` lies in the region.
    #[inline]
    pub fn check(&self, off: u64, len: u64) -> Result<(), PmError> {
        match off.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(PmError::OutOfBounds {
                off,
                len,
                size: self.len,
            }),
        }
    }

    #[inline]
    fn ptr(&self, off: u64, len: u64) -> *mut u8 {
        // Out-of-bounds access is an engine bug (the engine validates every offset it
        // reads from PM with `check` first); stop rather than corrupt memory.
        assert!(
            off.checked_add(len).is_some_and(|e| e <= self.len),
            "pm access out of bounds: off {off} len {len} size {}",
            self.len
        );
        // SAFETY: bounds checked just above; `base` is a live mapping of `len` bytes.
        unsafe { self.base.add(off as usize) }
    }

    /// Copies `buf.len()` bytes at `off` into `buf`.
    #[inline]
    pub fn read(&self, off: u64, buf: &mut [u8]) {
        let p = self.ptr(off, buf.len() as u64);
        // SAFETY: `p` is valid for `buf.len()` bytes; PM and `buf` never overlap.
        unsafe { std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), buf.len()) };
        self.charge_read(buf.len() as u64);
    }

    /// Atomic 8-byte load of an aligned word.
    #[inline]
    pub fn read_u64(&self, off: u64) -> u64 {
        debug_assert_eq!(off % 8, 0);
        let p = self.ptr(off, 8) as *const std::sync::atomic::AtomicU64;
        // SAFETY: aligned (offsets are 8-aligned, base is page-aligned) and in bounds.
        let v = unsafe { (*p).load(std::sync::atomic::Ordering::Acquire) };
        self.charge_read(8);
        v
    }

    #[inline]
    pub fn read_u32(&self, off: u64) -> u32 {
        let mut b = [0u8; 4];
        self.read(off, &mut b);
        u32::from_le_bytes(b)
    }

    /// Cached store of `data` at `off`. Durable only after `flush` + `fence`.
    #[inline]
    pub fn write(&self, off: u64, data: &[u8]) {
        let p = self.ptr(off, data.len() as u64);
        // SAFETY: `p` is valid for `data.len()` bytes and does not overlap `data`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        self.counters.add_bytes(data.len() as u64);
        if let Some(t) = &self.tracer {
            t.store(off, data, StoreKind::Cached);
        }
    }

    /// Stores `len` zero bytes at `off` (cached).
    pub fn zero(&self, off: u64, len: u64) {
        let p = self.ptr(off, len);
        // SAFETY: `p` is valid for `len` bytes.
        unsafe { std::ptr::write_bytes(p, 0, len as usize) };
        self.counters.add_bytes(len);
        if let Some(t) = &self.tracer {
            t.store(off, &vec![0u8; len as usize], StoreKind::Cached);
        }
    }

    /// Non-temporal copy for large writes: bypasses the cache, so the data is durable
    /// after the next `fence` without flushes. Unaligned head/tail bytes are stored
    /// cached and flushed here.
    pub fn write_nt(&self, off: u64, data: &[u8]) {
        let p = self.ptr(off, data.len() as u64);
        #[cfg(target_arch = "x86_64")]
        {
            let start_pad = ((8 - (off % 8)) % 8).min(data.len() as u64) as usize;
            let body = (data.len() - start_pad) / 8 * 8;
            if start_pad > 0 {
                self.write(off, &data[..start_pad]);
                self.flush(off, start_pad as u64);
            }
            // SAFETY: `[p + start_pad, + body)` lies in the checked range and starts
            // 8-aligned (off + start_pad is a multiple of 8, the mapping is
            // page-aligned); `data[start_pad..start_pad + body]` is the source.
            unsafe {
                stream_copy(
                    p.add(start_pad),
                    data.as_ptr().add(start_pad),
                    body,
                    self.has_avx,
                )
            };
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
                self.write(off + i as u64, &data[i..]);
                self.flush(off + i as u64, (data.len() - i) as u64);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = p;
            self.write(off, data);
            self.flush(off, data.len() as u64);
        }
    }

    /// Maps in the pages of `[off, off + len)` now, writable, so that the first store
    /// to each does not take a page fault later (on an image in /dev/shm a first
    /// touch also allocates and zero-fills the page). Contents do not change. A hint:
    /// where the kernel lacks `MADV_POPULATE_WRITE` (before 5.14) nothing happens.
    pub fn populate(&self, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        // SAFETY: sysconf has no preconditions.
        let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            p if p > 0 => p as u64,
            _ => 4096,
        };
        let start = off / page * page;
        let end = off.saturating_add(len).min(self.len);
        let p = self.ptr(start, end - start);
        #[cfg(target_os = "linux")]
        // SAFETY: `[p, p + (end - start))` lies inside our mapping and starts on a page
        // boundary (the mapping is page-aligned); MADV_POPULATE_WRITE only faults the
        // pages in and never changes their contents.
        unsafe {
            libc::madvise(
                p as *mut libc::c_void,
                (end - start) as usize,
                libc::MADV_POPULATE_WRITE,
            );
        }
        #[cfg(not(target_os = "linux"))]
        let _ = p;
    }

    /// Hints the CPU to bring the cache line holding `off` in now, so that a later
    /// access (an atomic store, a read) to it overlaps its miss with the work in
    /// between. No effect on contents, persistence, counters or the PM cost model.
    #[inline]
    pub fn prefetch(&self, off: u64) {
        let p = self.ptr(off, 1);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `p` is inside the mapping; a prefetch never faults or writes.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = p;
    }

    /// Aligned 8-byte atomic store (never torn by a crash).
    #[inline]
    pub fn store_u64(&self, off: u64, v: u64) {
        assert_eq!(off % 8, 0, "unaligned 8-byte atomic store at {off}");
        let p = self.ptr(off, 8) as *const std::sync::atomic::AtomicU64;
        // SAFETY: aligned, in bounds, and the mapping outlives the reference.
        unsafe { (*p).store(v, std::sync::atomic::Ordering::Release) };
        self.counters.add_bytes(8);
        if let Some(t) = &self.tracer {
            t.store(off, &v.to_le_bytes(), StoreKind::Atomic8);
        }
    }

    /// Aligned 16-byte atomic store: one `movdqa` where the CPU has AVX (Intel SDM
    /// vol. 3A, "Guaranteed Atomic Operations", and AMD APM vol. 2, "Access
    /// Atomicity", guarantee that an aligned 16-byte SSE/AVX load or store is
    /// single-copy atomic on processors with AVX), else
    /// `lock cmpxchg16b` (a locked read-modify-write: slower, and twice when the old
    /// value is not zero).
    pub fn store_u128(&self, off: u64, v: u128) {
        assert_eq!(off % 16, 0, "unaligned 16-byte atomic store at {off}");
        let p = self.ptr(off, 16) as *mut u128;
        #[cfg(target_arch = "x86_64")]
        {
            if self.has_avx {
                // SAFETY: `p` is 16-aligned and in bounds; AVX (hence SSE2) is present.
                unsafe { store_u128_sse(p, v) };
            } else if self.has_cx16 {
                // SAFETY: `p` is 16-aligned and in bounds; cmpxchg16b is available.
                unsafe { store_u128_cx16(p, v) };
            } else {
                // SAFETY: as above; falls back to a plain (tearable) store.
                unsafe { std::ptr::write_volatile(p, v) };
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        // SAFETY: `p` is aligned and in bounds.
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
    /// crash explorer tears in its 16-byte tearing modes.
    pub fn store_u128_nt(&self, off: u64, v: u128) {
        assert_eq!(off % 16, 0, "unaligned 16-byte store at {off}");
        let p = self.ptr(off, 16) as *mut u128;
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{__m128i, _mm_set_epi64x, _mm_stream_si128};
            // SAFETY: `p` is 16-aligned and in bounds (checked above); SSE2 is part of
            // x86-64.
            unsafe {
                let x: __m128i = _mm_set_epi64x((v >> 64) as i64, v as i64);
                _mm_stream_si128(p as *mut __m128i, x);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            // SAFETY: `p` is aligned and in bounds.
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
    #[inline]
    pub fn store_u128_durable(&self, kind: Store16, off: u64, v: u128) {
        match kind {
            Store16::NonTemporal => self.store_u128_nt(off, v),
            Store16::Cached => {
                self.store_u128(off, v);
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
    /// Only for a quiescent region: every word at `offs` must be 16-aligned, zero,
    /// and not in concurrent use (it is only ever rewritten with zero, so a crash
    /// meanwhile changes nothing). Bypasses the counters and the tracer. Without
    /// offsets, or off x86-64, returns [`Store16::Cached`].
    pub fn calibrate_store16(&self, offs: &[u64]) -> Store16 {
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
                            // SAFETY: 16-aligned, in the mapping; the word is zero and
                            // stays zero (the caller's contract).
                            unsafe { _mm_stream_si128(p as *mut _, _mm_setzero_si128()) };
                        }
                        Store16::Cached => {
                            if let Some(&next) = ptrs.get(i + 1) {
                                // SAFETY: a prefetch of a mapped address.
                                unsafe { _mm_prefetch::<_MM_HINT_T0>(next as *const i8) };
                            }
                            // SAFETY: as above; the same instruction as `store_u128`.
                            unsafe {
                                if self.has_avx {
                                    store_u128_sse(p, 0)
                                } else if self.has_cx16 {
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
            if let Some((p, _)) = &self.profile {
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

    /// Writes back every cache line overlapping `[off, off+len)`.
    #[inline]
    pub fn flush(&self, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        let first = off & !(CACHE_LINE - 1);
        let end = off + len;
        let mut line = first;
        let mut n = 0;
        while line < end {
            let p = self.ptr(line, 1);
            // SAFETY: `p` is inside the mapping (bounds-checked by `ptr`).
            unsafe { flush_line(self.flush, p) };
            if let Some(t) = &self.tracer {
                t.flush(line);
            }
            line += CACHE_LINE;
            n += 1;
        }
        self.counters.add_flushes(n);
        self.note_writeback(n * CACHE_LINE);
    }

    /// Store fence: everything flushed or stored non-temporally before it is durable
    /// before anything stored after it.
    #[inline]
    pub fn fence(&self) {
        sfence();
        if let Some((p, clock)) = &self.profile {
            // The fence waits for this thread's write-backs to reach PM.
            let ns = p.persist_cost_ns(profile::take_pending_write());
            clock.spin(ns);
            self.counters.add_delay(ns);
        }
        self.counters.add_fence();
        if let Some(t) = &self.tracer {
            t.fence();
        }
    }

    /// `flush` then `fence`.
    #[inline]
    pub fn persist(&self, off: u64, len: u64) {
        self.flush(off, len);
        self.fence();
    }

    /// Operation marker for tracers (no effect on PM).
    pub fn marker(&self, m: Marker) {
        if let Some(t) = &self.tracer {
            t.marker(&m);
        }
    }

    /// A copy of the whole region (for crash-state images and tests).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len as usize];
        self.read(0, &mut v);
        v
    }

    /// A private anonymous copy of the whole region (fsck and the crash explorer work
    /// on copies so that recovery never changes the original).
    pub fn clone_anonymous(&self) -> Result<Pm, PmError> {
        let copy = Pm::anonymous(self.len)?;
        let src = self.ptr(0, self.len);
        let dst = copy.ptr(0, self.len);
        // SAFETY: both mappings are `len` bytes long and distinct.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, self.len as usize) };
        Ok(copy)
    }

    /// Overwrites the region with `bytes` (uncounted, untraced: test setup only).
    pub fn load_image(&self, bytes: &[u8]) {
        let n = bytes.len().min(self.len as usize);
        let p = self.ptr(0, n as u64);
        // SAFETY: `p` valid for `n` bytes; source is a distinct allocation.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, n) };
    }

    /// msync the mapping (for file images: pushes pages to the file; used at unmount).
    pub fn sync_to_file(&self) {
        if self.mode == MapMode::Anonymous {
            return;
        }
        // SAFETY: msync over exactly our mapping.
        unsafe {
            libc::msync(
                self.base as *mut libc::c_void,
                self.len as usize,
                libc::MS_SYNC,
            );
        }
    }
}

fn region_len(file: &File) -> std::io::Result<u64> {
    let meta = file.metadata()?;
    if meta.file_type().is_file() {
        return Ok(meta.len());
    }
    // A device: ask for its size by seeking to the end.
    use std::io::{Seek, SeekFrom};
    let mut f = file.try_clone()?;
    f.seek(SeekFrom::End(0))
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
        unsafe { _mm_stream_si64(dst as *mut i64, (src as *const i64).read_unaligned()) };
        i = 8;
    }
    if avx {
        if len - i >= 16 && !(dst as usize + i).is_multiple_of(32) {
            unsafe {
                _mm_stream_si128(
                    dst.add(i) as *mut __m128i,
                    _mm_loadu_si128(src.add(i) as *const __m128i),
                )
            };
            i += 16;
        }
        i += unsafe { stream_avx(dst.add(i), src.add(i), (len - i) / 32 * 32) };
    }
    while len - i >= 16 {
        unsafe {
            _mm_stream_si128(
                dst.add(i) as *mut __m128i,
                _mm_loadu_si128(src.add(i) as *const __m128i),
            )
        };
        i += 16;
    }
    if len - i >= 8 {
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

#[cfg(target_arch = "x86_64")]
fn has_cx16() -> bool {
    std::arch::is_x86_feature_detected!("cmpxchg16b")
}

#[cfg(not(target_arch = "x86_64"))]
fn has_cx16() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
fn has_avx() -> bool {
    std::arch::is_x86_feature_detected!("avx")
}

#[cfg(not(target_arch = "x86_64"))]
fn has_avx() -> bool {
    false
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
    use crate::PmProfile;

    #[test]
    fn counters_count_exactly() {
        let pm = Pm::anonymous(1 << 20).unwrap();
        let before = pm.thread_counters();
        pm.write(100, &[1u8; 100]); // lines 64..128..192..256 → 3 lines
        pm.flush(100, 100);
        pm.fence();
        pm.store_u64(4096, 7);
        pm.persist(4096, 8);
        let d = pm.thread_counters().since(&before);
        assert_eq!(d.bytes_written, 108);
        assert_eq!(d.flushes, 3 + 1);
        assert_eq!(d.fences, 2);
        let mut b = [0u8; 4];
        pm.read(100, &mut b);
        assert_eq!(b, [1; 4]);
        assert_eq!(pm.read_u64(4096), 7);
    }

    #[test]
    fn profile_charges_reads_and_persists_exactly() {
        let mut pm = Pm::anonymous(1 << 20).unwrap();
        assert_eq!(pm.profile(), PmProfile::DRAM);
        let mut buf = [0u8; 4096];
        pm.read(0, &mut buf);
        pm.write(0, &[1u8; 100]);
        pm.persist(0, 100);
        assert_eq!(pm.thread_counters().modeled_delay_ns, 0);

        pm.set_profile(PmProfile::OPTANE);
        assert_eq!(pm.profile().name, "optane");
        let t = pm.thread_counters();
        pm.read(0, &mut buf);
        assert_eq!(pm.thread_counters().since(&t).modeled_delay_ns, 305 + 620);
        let t = pm.thread_counters();
        let _ = pm.read_u64(8);
        assert_eq!(pm.thread_counters().since(&t).modeled_delay_ns, 305 + 1);
        // Cached stores cost nothing until written back; the fence pays for the
        // flushed lines (two lines: 128 B → 90 + 55 ns).
        let t = pm.thread_counters();
        pm.write(0, &[2u8; 100]);
        assert_eq!(pm.thread_counters().since(&t).modeled_delay_ns, 0);
        pm.flush(0, 100);
        assert_eq!(pm.thread_counters().since(&t).modeled_delay_ns, 0);
        pm.fence();
        assert_eq!(pm.thread_counters().since(&t).modeled_delay_ns, 90 + 55);
        // A fence with nothing written back costs nothing.
        let t = pm.thread_counters();
        pm.fence();
        assert_eq!(pm.thread_counters().since(&t).modeled_delay_ns, 0);
        // Non-temporal page: 4096 B → 90 + 1780 ns.
        let t = pm.thread_counters();
        pm.write_nt(4096, &buf);
        pm.fence();
        assert_eq!(pm.thread_counters().since(&t).modeled_delay_ns, 90 + 1780);

        pm.set_profile(PmProfile::DRAM);
        let t = pm.thread_counters();
        pm.read(0, &mut buf);
        pm.persist(0, 64);
        assert_eq!(pm.thread_counters().since(&t).modeled_delay_ns, 0);
    }

    #[test]
    fn recording_tracer_sees_every_event_in_order() {
        let mut pm = Pm::anonymous(1 << 16).unwrap();
        let rec = Arc::new(RecordingTracer::new());
        pm.set_tracer(Some(rec.clone()));
        pm.marker(Marker::OpBegin("w".into()));
        pm.write(0, b"abc");
        pm.flush(0, 3);
        pm.fence();
        pm.store_u128(64, 0x1122_3344_5566_7788_99aa_bbcc_ddee_ff00);
        pm.marker(Marker::OpEnd("w".into()));
        let ev = rec.take();
        assert_eq!(
            ev,
            vec![
                Event::Marker(Marker::Thread(crate::trace::thread_id())),
                Event::Marker(Marker::OpBegin("w".into())),
                Event::Store {
                    off: 0,
                    data: b"abc".to_vec(),
                    kind: StoreKind::Cached
                },
                Event::Flush { line: 0 },
                Event::Fence,
                Event::Store {
                    off: 64,
                    data: 0x1122_3344_5566_7788_99aa_bbcc_ddee_ff00u128
                        .to_le_bytes()
                        .to_vec(),
                    kind: StoreKind::Atomic16
                },
                Event::Marker(Marker::OpEnd("w".into())),
            ]
        );
        let mut b = [0u8; 16];
        pm.read(64, &mut b);
        assert_eq!(
            u128::from_le_bytes(b),
            0x1122_3344_5566_7788_99aa_bbcc_ddee_ff00
        );
    }

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
        pm.store_u128(128, a);
        pm.store_u128(128, b);
        pm.store_u128_nt(160, a);
        pm.store_u128_nt(160, b);
        pm.fence();
        let d = pm.thread_counters().since(&t);
        assert_eq!(
            (d.bytes_written, d.nt_bytes_written, d.flushes),
            (64, 32, 0)
        );
        for off in [128, 160] {
            let mut got = [0u8; 16];
            pm.read(off, &mut got);
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
    fn nt_copy_handles_unaligned_edges() {
        let pm = Pm::anonymous(1 << 16).unwrap();
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        pm.write_nt(3, &data);
        pm.fence();
        let mut back = vec![0u8; 1000];
        pm.read(3, &mut back);
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
                pm.write(0, &vec![0xee; 1024]);
                let before = pm.thread_counters();
                pm.write_nt(off, &src[..len]);
                pm.fence();
                let d = pm.thread_counters().since(&before);
                let mut back = vec![0u8; 1024];
                pm.read(0, &mut back);
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

    #[test]
    fn store16_calibration_picks_a_way_and_leaves_the_words_zero() {
        let pm = Pm::anonymous(1 << 20).unwrap();
        let offs: Vec<u64> = (0..64).map(|i| 4096 + i * 16).collect();
        let before = pm.thread_counters();
        let kind = pm.calibrate_store16(&offs);
        assert!(matches!(kind, Store16::NonTemporal | Store16::Cached));
        assert_eq!(pm.thread_counters(), before, "calibration is not counted");
        assert!(pm.to_vec().iter().all(|&b| b == 0));
        // Both ways store the same bytes.
        for (i, k) in [Store16::NonTemporal, Store16::Cached]
            .into_iter()
            .enumerate()
        {
            let off = 8192 + i as u64 * 64;
            pm.store_u128_durable(k, off, 0x1234_5678_9abc_def0_0fed_cba9_8765_4321);
            pm.fence();
            let mut b = [0u8; 16];
            pm.read(off, &mut b);
            assert_eq!(
                u128::from_le_bytes(b),
                0x1234_5678_9abc_def0_0fed_cba9_8765_4321
            );
        }
    }

    #[test]
    fn file_image_roundtrip_and_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("img");
        {
            let pm = Pm::create(&path, 1 << 20).unwrap();
            pm.write(10, b"hello");
            pm.persist(10, 5);
        }
        let pm = Pm::open(&path, true).unwrap();
        let mut b = [0u8; 5];
        pm.read(10, &mut b);
        assert_eq!(&b, b"hello");
        assert!(matches!(Pm::open(&path, true), Err(PmError::Busy { .. })));
        assert!(pm.check(1 << 20, 1).is_err());
        assert!(pm.check(0, 1 << 20).is_ok());
    }

    #[test]
    fn missing_and_empty_images_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            Pm::open(&dir.path().join("nope"), false),
            Err(PmError::Io { .. })
        ));
        let p = dir.path().join("empty");
        std::fs::write(&p, b"").unwrap();
        assert!(matches!(Pm::open(&p, false), Err(PmError::TooSmall { .. })));
    }
}
