//! The lock word of a segment-mode file that one thread at a time uses ([`super`]'s
//! module doc): a reader-writer lock in one 32-bit word inside the inode, which also
//! names the thread that uses the file. Almost every file is only ever used by one
//! thread at a time (created, written, read and removed by the thread that made it);
//! such a file never allocates the segment words and the big reader lock, whose
//! per-thread counters take a cache line each (2 KiB per file on 16 CPUs).
//!
//! # The word
//!
//! ```text
//!  31       30        29 .. 24   23 .. 0
//! [WRITER][SHARING][ owner + 1 ][ readers ]
//! ```
//! - `owner`: the reader slot ([`super::thread_slot`]) of the thread that first
//!   locked the file, plus one (0: nobody yet). A locker from another slot does not
//!   take the word: the file is *shared* from then on, and the locker raises
//!   `SHARING` instead. So is a locker that finds the word held against it (only
//!   threads beyond the leased slots share a slot, and they share it with others).
//! - `SHARING`: raised once, by CAS, by the locker that turns the file shared; from
//!   then on nobody takes the word. That locker waits until the holders inside have
//!   left, then installs the file's shared lock state, which every later locker uses.
//!   Holders of the word and holders of the shared state are never inside at once:
//!   the word is taken only while `SHARING` is clear (one CAS on the word decides),
//!   and the shared state is installed only after the word drained.
//! - `WRITER`, `readers`: the lock itself. A writer takes the word with no reader
//!   and no writer inside; readers while no writer is.
//!
//! The protocol is generic over [`Word`], so the model test runs it on a model
//! checker's atomics.

use super::segment::Word;
use std::sync::atomic::Ordering;

/// A writer holds the file.
pub(crate) const WRITER: u32 = 1 << 31;
/// The file is shared: the word is no longer taken.
pub(crate) const SHARING: u32 = 1 << 30;
const OWNER_SHIFT: u32 = 24;
const OWNER: u32 = 0x3f << OWNER_SHIFT;
/// The reader count.
pub(crate) const READERS: u32 = (1 << OWNER_SHIFT) - 1;
/// The largest owner tag (`slot + 1`) the word holds.
pub(crate) const MAX_OWNER: u32 = OWNER >> OWNER_SHIFT;

/// Why [`try_lock`] did not take the word: the file must turn shared. `held`: a
/// holder was inside against this request (the locker would have waited, which
/// engages the segment words at once, as a wait does later).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Share {
    pub held: bool,
}

/// Takes `w` for the thread tagged `owner` (its reader slot plus one, at most
/// [`MAX_OWNER`]), shared or exclusive, unless the file is or must turn shared.
/// Lock-free: the CAS is retried only when another locker changed the word.
pub(crate) fn try_lock<W: Word>(w: &W, owner: u32, write: bool) -> Result<(), Share> {
    debug_assert!((1..=MAX_OWNER).contains(&owner));
    let me = owner << OWNER_SHIFT;
    let mut v = w.load(Ordering::Relaxed);
    loop {
        let held = if write {
            v & (WRITER | READERS) != 0
        } else {
            v & WRITER != 0
        };
        let other = v & OWNER != 0 && v & OWNER != me;
        if v & SHARING != 0 || other || held {
            return Err(Share { held });
        }
        debug_assert!(v & READERS < READERS, "reader count overflows");
        let new = if write { v | WRITER | me } else { (v + 1) | me };
        // Acquire: the section sees what the previous holder did before its release.
        match w.compare_exchange_weak(v, new, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return Ok(()),
            Err(now) => v = now,
        }
    }
}

/// Releases what [`try_lock`] took.
pub(crate) fn unlock<W: Word>(w: &W, write: bool) {
    // Release: everything done under the lock happens before the next holder's (or
    // the sharing locker's) acquiring read of the word.
    w.fetch_sub(if write { WRITER } else { 1 }, Ordering::Release);
}

/// Raises `SHARING`; true for the one caller that raised it, which then waits for
/// [`drained`] and installs the shared state.
pub(crate) fn begin_sharing<W: Word>(w: &W) -> bool {
    let mut v = w.load(Ordering::Relaxed);
    loop {
        if v & SHARING != 0 {
            return false;
        }
        match w.compare_exchange_weak(v, v | SHARING, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(now) => v = now,
        }
    }
}

/// No holder of the word is inside.
pub(crate) fn drained<W: Word>(w: &W) -> bool {
    // Acquire: pairs with the holders' releasing `unlock`.
    w.load(Ordering::Acquire) & (WRITER | READERS) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn one_thread_takes_the_word_in_every_mode() {
        let w = AtomicU32::new(0);
        assert_eq!(try_lock(&w, 3, false), Ok(()));
        assert_eq!(try_lock(&w, 3, false), Ok(()), "readers nest");
        unlock(&w, false);
        unlock(&w, false);
        assert_eq!(try_lock(&w, 3, true), Ok(()));
        unlock(&w, true);
        assert!(drained(&w));
        assert_eq!(w.load(Ordering::SeqCst), 3 << OWNER_SHIFT);
    }

    #[test]
    fn another_thread_or_a_conflict_turns_the_file_shared() {
        let w = AtomicU32::new(0);
        assert_eq!(try_lock(&w, 1, false), Ok(()));
        // Another slot, idle word or not: shared.
        assert_eq!(try_lock(&w, 2, false), Err(Share { held: false }));
        assert_eq!(try_lock(&w, 2, true), Err(Share { held: true }));
        // The same slot (threads beyond the leased slots) against a holder: shared.
        assert_eq!(try_lock(&w, 1, true), Err(Share { held: true }));
        assert!(begin_sharing(&w));
        assert!(!begin_sharing(&w), "raised once");
        assert!(!drained(&w));
        assert_eq!(try_lock(&w, 1, false), Err(Share { held: false }));
        unlock(&w, false);
        assert!(drained(&w));
        assert_eq!(
            try_lock(&w, 1, false),
            Err(Share { held: false }),
            "never taken again"
        );
        assert_eq!(MAX_OWNER, 63);
    }
}
