//! Opening, creating and mapping regions; populating and syncing them; private
//! copies.

use super::pages::HUGE_ALIGN;
use super::{MapMode, Pm, PmError};
use crate::counters::Counters;
use crate::host::HostChoices;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

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

    /// Anonymous zeroed memory of `len` bytes (tests, crash-state copies). A mapping
    /// of the same length that a dropped anonymous `Pm` gave back is reused, zeroed
    /// (`region/recycle.rs`): the crash explorer maps two or three copies of its image
    /// per crash state, and fresh mappings cost a page fault, a zeroed page and a
    /// memory-cgroup charge per page.
    pub fn anonymous(len: u64) -> Result<Pm, PmError> {
        if let Some(p) = super::recycle::take(len) {
            // SAFETY: `p` is a whole mapping of `len` bytes that its dropped `Pm`
            // gave back and nothing else references; zeroing it makes it what a
            // fresh anonymous mapping reads as.
            unsafe { std::ptr::write_bytes(p, 0, len as usize) };
            return Self::from_raw(p, len, MapMode::Anonymous, None);
        }
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
        Self::from_raw(p as *mut u8, len, MapMode::Anonymous, None)
    }

    /// Takes ownership of the mapping `[base, base + len)`: unmapped when the `Pm`
    /// drops, and also when the host's choices are refused ([`HostChoices::get`]).
    pub(super) fn from_raw(
        base: *mut u8,
        len: u64,
        mode: MapMode,
        file: Option<File>,
    ) -> Result<Pm, PmError> {
        let mut pm = Pm {
            base,
            len,
            flush: crate::FlushKind::Clflush,
            mode,
            counters: Counters::new(),
            tracer: None,
            store16: crate::host::Store16Insn::Plain,
            has_avx: false,
            forced_desc_store: None,
            profile: None,
            node: 0,
            huge_advised: false,
            _file: file,
        };
        let host = HostChoices::get()?;
        pm.flush = host.flush;
        pm.store16 = host.store16;
        pm.has_avx = host.avx;
        pm.forced_desc_store = host.desc_store;
        Ok(pm)
    }

    /// Maps the image 2 MiB aligned (so the kernel can map it with PMD entries)
    /// and advises huge pages on it ([`Pm::map_report`] says what the kernel did).
    fn map(path: &Path, file: File, len: u64) -> Result<Pm, PmError> {
        let fd = file.as_raw_fd();
        // A synchronous DAX mapping where the kernel gives one; it refuses it
        // (EOPNOTSUPP or EINVAL) for files that are not on a DAX file system, e.g.
        // /dev/shm, or ext4 without DAX. Asked at an address of the kernel's choice
        // first: a refused MAP_FIXED request may already have unmapped the range it
        // was to replace (ext4 refuses MAP_SYNC only after that), and another thread
        // could map something there before we could give the rest back.
        let sync = if sync_mappable(fd, len) {
            map_aligned(fd, len, libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC).ok()
        } else {
            None
        };
        let mode = match sync {
            Some(p) => Ok((p, MapMode::Sync)),
            None => map_aligned(fd, len, libc::MAP_SHARED).map(|p| (p, MapMode::Shared)),
        };
        let (p, mode) = mode.map_err(|source| PmError::Map {
            path: path.to_path_buf(),
            source,
        })?;
        let mut pm = Self::from_raw(p, len, mode, Some(file))?;
        pm.advise_huge();
        Ok(pm)
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

    /// Gives back the memory behind the 4 KiB pages inside `[off, off + len)`
    /// (`MADV_REMOVE`: a hole punched in the image file; the range reads as zeros
    /// after). For free space only: the caller keeps every reader and writer away
    /// from the range meanwhile. Returns the bytes given back, or the error of a
    /// medium that cannot (a device-DAX mapping, a private copy: EINVAL or
    /// EOPNOTSUPP).
    pub fn discard(&self, off: u64, len: u64) -> std::io::Result<u64> {
        const PAGE: u64 = 4096;
        let start = off.div_ceil(PAGE).saturating_mul(PAGE);
        let end = (off.saturating_add(len).min(self.len)) / PAGE * PAGE;
        if end <= start {
            return Ok(0);
        }
        let p = self.ptr(start, end - start);
        // SAFETY: `[p, p + (end - start))` lies inside our mapping and is page
        // aligned (the mapping is); MADV_REMOVE only drops the backing pages of a
        // shared mapping, which the caller has made sure nobody uses.
        let r = unsafe {
            libc::madvise(
                p as *mut libc::c_void,
                (end - start) as usize,
                libc::MADV_REMOVE,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(end - start)
    }

    /// A private anonymous copy of the whole region (fsck and the crash explorer work
    /// on copies so that recovery never changes the original).
    ///
    /// Safe on a shared region: the source is read with relaxed atomic loads of its
    /// aligned 8-byte words (and of single bytes for a tail shorter than a word), so
    /// it races with nothing safe code can do. A word changed meanwhile is copied
    /// either old or new; the copy is only consistent if nobody writes the region
    /// meanwhile (`Pm::open(path, true)` keeps other mnemofs processes out).
    pub fn clone_anonymous(&self) -> Result<Pm, PmError> {
        use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
        let copy = Pm::anonymous(self.len)?;
        let src = self.ptr(0, self.len);
        let dst = copy.ptr(0, self.len);
        let words = (self.len / 8) as usize;
        for i in 0..words {
            // SAFETY: word `i` lies in both mappings (each `len` bytes, page-aligned,
            // so the word is 8-aligned); `copy` is not shared yet; the source is read
            // atomically (see above).
            unsafe {
                let w = (*(src as *const AtomicU64).add(i)).load(Ordering::Relaxed);
                (dst as *mut u64).add(i).write(w);
            }
        }
        for i in words * 8..self.len as usize {
            // SAFETY: byte `i` lies in both mappings; as above.
            unsafe {
                let b = (*(src as *const AtomicU8).add(i)).load(Ordering::Relaxed);
                dst.add(i).write(b);
            }
        }
        Ok(copy)
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

/// Maps `len` bytes of `fd` read-write with `flags` at a 2 MiB-aligned address:
/// reserves `len + 2 MiB` of address space (`PROT_NONE`, no memory), maps the file
/// over its first 2 MiB boundary with `MAP_FIXED`, and gives back the rest of the
/// reservation. A 4 KiB-aligned mapping would leave the kernel no 2 MiB-aligned
/// virtual range to put a PMD entry on.
fn map_aligned(fd: libc::c_int, len: u64, flags: libc::c_int) -> std::io::Result<*mut u8> {
    let len = usize::try_from(len).map_err(|_| std::io::Error::from_raw_os_error(libc::ENOMEM))?;
    // SAFETY: sysconf has no preconditions.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        p if p > 0 => p as usize,
        _ => 4096,
    };
    let mapped = len
        .checked_next_multiple_of(page)
        .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOMEM))?;
    let span = mapped
        .checked_add(HUGE_ALIGN)
        .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOMEM))?;
    // SAFETY: a fresh private anonymous reservation; no existing memory is touched.
    let r = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if r == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    let base = r as usize;
    let start = base.next_multiple_of(HUGE_ALIGN);
    // SAFETY: `[start, start + mapped)` lies inside the reservation just made, which
    // nothing else refers to; MAP_FIXED replaces that part of it with the file.
    let p = unsafe {
        libc::mmap(
            start as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags | libc::MAP_FIXED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        let e = std::io::Error::last_os_error();
        // Only the head and tail are given back: a failed MAP_FIXED may have
        // unmapped `[start, start + mapped)` already, and another thread may have
        // mapped something there since (unmapping it would pull memory from under
        // that thread). Left as it is, the middle is at worst an unused PROT_NONE
        // reservation (address space, no memory).
        trim_reservation(base, span, start, mapped);
        return Err(e);
    }
    trim_reservation(base, span, start, mapped);
    Ok(p as *mut u8)
}

/// Gives back the head `[base, start)` and the tail `[start + mapped, base + span)`
/// of a reservation made by [`map_aligned`], whose middle is the file's mapping (or
/// the range a failed fixed mapping was given).
fn trim_reservation(base: usize, span: usize, start: usize, mapped: usize) {
    // SAFETY: head and tail lie inside the reservation, outside
    // `[start, start + mapped)`, and nothing else refers to them.
    unsafe {
        if start > base {
            libc::munmap(base as *mut libc::c_void, start - base);
        }
        let tail = base + span - (start + mapped);
        if tail > 0 {
            libc::munmap((start + mapped) as *mut libc::c_void, tail);
        }
    }
}

/// Whether the kernel maps `fd` with `MAP_SYNC` (a DAX file): a trial mapping at
/// an address of its choice, given back at once.
fn sync_mappable(fd: libc::c_int, len: u64) -> bool {
    let Ok(len) = usize::try_from(len) else {
        return false;
    };
    // SAFETY: a new shared mapping at an address the kernel picks; no existing
    // memory is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return false;
    }
    // SAFETY: exactly the mapping just made, which nothing refers to.
    unsafe { libc::munmap(p, len) };
    true
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_image_roundtrip_and_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("img");
        {
            let pm = Pm::create(&path, 1 << 20).unwrap();
            // SAFETY: only this thread uses this test's region.
            unsafe { pm.write(10, b"hello") };
            pm.persist(10, 5);
        }
        let pm = Pm::open(&path, true).unwrap();
        let mut b = [0u8; 5];
        // SAFETY: only this thread uses this test's region.
        unsafe { pm.read(10, &mut b) };
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
