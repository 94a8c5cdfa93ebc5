//! Cache-line write-back and fence instructions (which one: [`crate::HostChoices`]).

/// Which write-back instruction this CPU offers (best first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushKind {
    /// `clwb`: writes the line back and may keep it cached.
    Clwb,
    /// `clflushopt`: writes back and invalidates, weakly ordered.
    Clflushopt,
    /// `clflush`: writes back and invalidates, strongly ordered (slow).
    Clflush,
    /// Not x86-64: no flush instruction; stores reach the mapping through the page
    /// cache only (correct for a file image, no PM durability claims).
    None,
}

impl FlushKind {
    /// The instruction's name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            FlushKind::Clwb => "clwb",
            FlushKind::Clflushopt => "clflushopt",
            FlushKind::Clflush => "clflush",
            FlushKind::None => "none",
        }
    }
}

/// Writes back the cache line containing `p`.
///
/// # Safety
/// `p` must point into a live mapping.
#[inline]
pub(crate) unsafe fn flush_line(kind: FlushKind, p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        match kind {
            // SAFETY: the caller guarantees `p` is mapped; CPUID said clwb exists.
            FlushKind::Clwb => unsafe {
                std::arch::asm!("clwb [{0}]", in(reg) p, options(nostack, preserves_flags))
            },
            // SAFETY: as above, for clflushopt.
            FlushKind::Clflushopt => unsafe {
                std::arch::asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags))
            },
            // SAFETY: clflush exists on every x86-64 CPU; `p` is mapped.
            FlushKind::Clflush => unsafe { std::arch::x86_64::_mm_clflush(p) },
            FlushKind::None => {}
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (kind, p);
    }
}

/// Store fence: orders every earlier store, write-back and non-temporal store before
/// every later store.
#[inline]
pub(crate) fn sfence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no memory operands and exists on every x86-64 CPU.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}
