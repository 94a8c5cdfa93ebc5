//! Pointers that carry a small number in their three low bits: the page index and the
//! segment lock keep a radix tree's root and its height in one atomic word, so a
//! lock-free reader loads both at once. Every pointer tagged here is at least 8-byte
//! aligned.

/// The low bits that hold the number.
const MASK: usize = 0b111;

/// The number carried by `tagged`.
pub(crate) fn height(tagged: *mut ()) -> u32 {
    (tagged as usize & MASK) as u32
}

/// The pointer of `tagged`, without its number.
pub(crate) fn untag(tagged: *mut ()) -> *mut () {
    (tagged as usize & !MASK) as *mut ()
}

/// `p` carrying `h` (at most 7; `p` 8-byte aligned or null).
pub(crate) fn tag(p: *mut (), h: u32) -> *mut () {
    debug_assert!(p as usize & MASK == 0 && h as usize <= MASK);
    (p as usize | h as usize) as *mut ()
}
