//! Anonymous mappings kept for reuse: a dropped anonymous [`super::Pm`] of at most
//! [`MAX_LEN`] bytes gives its mapping back here (up to [`MAX_KEPT`] of them) instead
//! of unmapping it, and [`super::Pm::anonymous`] takes one of the same length before
//! it maps anew. A reused mapping has its pages already, so a copy into it takes no
//! page faults.

use std::sync::Mutex;

/// Mappings kept at most (the crash explorer holds two or three per thread).
const MAX_KEPT: usize = 32;
/// The longest mapping kept.
const MAX_LEN: u64 = 16 << 20;

/// Kept mappings: base address and length.
static KEPT: Mutex<Vec<(usize, u64)>> = Mutex::new(Vec::new());

/// A kept mapping of exactly `len` bytes, now the caller's (to own as a `Pm`, which
/// gives it back or unmaps it when dropped).
pub(super) fn take(len: u64) -> Option<*mut u8> {
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    let i = kept.iter().position(|&(_, l)| l == len)?;
    Some(kept.swap_remove(i).0 as *mut u8)
}

/// Keeps the whole anonymous mapping `[base, base + len)`, which its owner no longer
/// uses; false (the caller unmaps it) when it is too long or enough are kept.
pub(super) fn give(base: *mut u8, len: u64) -> bool {
    if len > MAX_LEN {
        return false;
    }
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    if kept.len() >= MAX_KEPT {
        return false;
    }
    kept.push((base as usize, len));
    true
}

#[cfg(test)]
mod tests {
    use crate::Pm;

    #[test]
    fn a_reused_mapping_reads_as_zeros() {
        let len = 3 * 4096 + 4096 * 7;
        let mut pm = Pm::anonymous(len).unwrap();
        pm.load_image(&vec![0xa5; len as usize]);
        drop(pm);
        // Whether or not another test took the kept mapping meanwhile, a new one of
        // that length reads as zeros.
        for _ in 0..3 {
            let mut pm = Pm::anonymous(len).unwrap();
            assert!(pm.to_vec().iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn long_mappings_are_not_kept() {
        assert!(!super::give(std::ptr::null_mut(), super::MAX_LEN + 1));
    }
}
