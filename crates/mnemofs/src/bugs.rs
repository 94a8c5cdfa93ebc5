//! Deliberate bugs for the crash explorer to find (`mnemofs crashtest --inject-bug`).
//!
//! Each is modelled on a real PM file-system bug (Chipmunk, EuroSys'23; Vinter,
//! ATC'22): a missing flush or fence, an in-place update where an atomic one is
//! needed, recovery that trusts too much.
//!
//! Injection is compiled in only with the crate's `fault-injection` cargo feature
//! (the crash explorer, `crates/crashtest`, turns it on). With it, none is ever on
//! unless a tool calls `inject`, and each check in the engine is one relaxed atomic
//! load. Without it, `inject` does not exist and every check is the constant `false`,
//! so the engine has no load and no branch for them. [`Bug`], [`ALL`] and [`by_name`]
//! exist either way (a tool can list the bugs); [`ENABLED`] says whether they can be
//! turned on.

/// One deliberate bug; [`ALL`] names and describes each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// CoW data pages are stored with cached stores and never flushed before their log
    /// entry.
    DataNotPersisted,
    /// No fence between a log entry and the tail that exposes it.
    NoFenceBeforeTail,
    /// An operation returns before its tail update is fenced.
    NoFenceAfterTail,
    /// The journal is activated without fencing its undo records first.
    JournalRecordsUnfenced,
    /// The journal is committed before the tails it protects are written.
    JournalRetiredEarly,
    /// Rename removes the old name in its own commit, outside the journal.
    RenameDentryInPlace,
    /// Unlink commits the new link count separately from the directory entry.
    LinkCountInPlace,
    /// Recovery replays committed-looking entries past the tail.
    ReplayUncommitted,
    /// Recovery rebuilds inodes and free lists before rolling the journal back.
    FreeListBeforeRollback,
    /// A new inode is marked valid in place before its creation commits.
    InodeValidInPlace,
    /// Unlink frees the inode before the unlink commits.
    FreeBeforeCommit,
    /// Truncate leaves stale bytes past the new size in the last page.
    TruncateKeepsTail,
    /// A concurrent writer that finishes last stores its own tail even when a later
    /// entry's tail is already stored (pNOVA Fig. 3).
    TailNotMax,
    /// A concurrent append stores its commit mark with its entry's body, before the
    /// fence that makes its data durable (the tail already covers the slot: it
    /// moved when the append was served).
    MarkWithBody,
    /// LAWN sets a descriptor without its slot data persisted: the slots are stored
    /// through the cache and never written back, and on page-format images the fence
    /// between them and the descriptor is skipped (needs --small-write lawn).
    LawnDescriptorBeforeData,
    /// LAWN descriptors are not cleared before a page CoW frees their block for reuse
    /// (needs --small-write lawn).
    LawnDescriptorKeptOnReuse,
    /// LAWN recovery takes a run without checking its slots against the descriptor's
    /// sum (needs --small-write lawn).
    LawnSumUnchecked,
    /// Setting an inode's flags commits each flag that changes in a commit of its
    /// own, so a crash can leave some of them changed and others not.
    InodeFlagsOneAtATime,
    /// An xattr value longer than one log entry commits its SET and each
    /// continuation in commits of their own.
    XattrPartsApart,
    /// Linking an unnamed file (`O_TMPFILE`) commits its new name and its link
    /// count in commits of their own.
    TmpfileLinkApart,
    /// A new inode's birth time reaches its slot only after the create commits
    /// (the slot's checksum covers it from the start).
    BtimeStoredLate,
}

/// Name, bug and what it does.
pub const ALL: &[(&str, Bug, &str)] = &[
    (
        "data-not-persisted",
        Bug::DataNotPersisted,
        "CoW data pages are stored with cached stores and never flushed before their log entry",
    ),
    (
        "no-fence-before-tail",
        Bug::NoFenceBeforeTail,
        "no fence between a log entry and the tail that exposes it",
    ),
    (
        "no-fence-after-tail",
        Bug::NoFenceAfterTail,
        "an operation returns before its tail update is fenced",
    ),
    (
        "journal-records-unfenced",
        Bug::JournalRecordsUnfenced,
        "the journal is activated without fencing its undo records first",
    ),
    (
        "journal-retired-early",
        Bug::JournalRetiredEarly,
        "the journal is committed before the tails it protects are written",
    ),
    (
        "rename-dentry-in-place",
        Bug::RenameDentryInPlace,
        "rename removes the old name in its own commit, outside the journal",
    ),
    (
        "link-count-in-place",
        Bug::LinkCountInPlace,
        "unlink commits the new link count separately from the directory entry",
    ),
    (
        "replay-uncommitted",
        Bug::ReplayUncommitted,
        "recovery replays committed-looking entries past the tail",
    ),
    (
        "free-list-before-rollback",
        Bug::FreeListBeforeRollback,
        "recovery rebuilds inodes and free lists before rolling the journal back",
    ),
    (
        "inode-valid-in-place",
        Bug::InodeValidInPlace,
        "a new inode is marked valid in place before its creation commits",
    ),
    (
        "free-before-commit",
        Bug::FreeBeforeCommit,
        "unlink frees the inode before the unlink commits",
    ),
    (
        "truncate-keeps-tail",
        Bug::TruncateKeepsTail,
        "truncate leaves stale bytes past the new size in the last page",
    ),
    (
        "tail-not-max",
        Bug::TailNotMax,
        "a concurrent writer that finishes last stores its own tail even when a later entry's tail is already stored (pNOVA Fig. 3)",
    ),
    (
        "mark-with-body",
        Bug::MarkWithBody,
        "a concurrent append stores its commit mark with its entry's body, before the fence \
         that makes its data durable (the tail already covers the slot: it moved when the \
         append was served)",
    ),
    (
        "lawn-descriptor-before-data",
        Bug::LawnDescriptorBeforeData,
        "LAWN sets a descriptor without its slot data persisted: the slots are stored through the \
         cache and never written back, and with page-format descriptors the fence before the \
         descriptor is skipped (needs --small-write lawn)",
    ),
    (
        "lawn-descriptor-kept-on-reuse",
        Bug::LawnDescriptorKeptOnReuse,
        "LAWN descriptors are not cleared before a page CoW frees their block for reuse \
         (needs --small-write lawn)",
    ),
    (
        "lawn-sum-unchecked",
        Bug::LawnSumUnchecked,
        "LAWN recovery takes a run without checking its slots against its descriptor's sum, \
         so a zone write cut before its one fence can surface half written (needs \
         --small-write lawn)",
    ),
    (
        "inode-flags-one-at-a-time",
        Bug::InodeFlagsOneAtATime,
        "setting an inode's flags (chattr) commits each flag that changes in a commit of its \
         own, so a crash can leave a mix of the old and the new flags",
    ),
    (
        "xattr-parts-apart",
        Bug::XattrPartsApart,
        "an xattr value longer than one log entry commits its first part and each \
         continuation in commits of their own, so a crash can leave the value cut short",
    ),
    (
        "tmpfile-link-apart",
        Bug::TmpfileLinkApart,
        "linking an unnamed file (O_TMPFILE) commits the new name and the file's link count \
         in commits of their own, so a crash can leave a name whose file recovery frees",
    ),
    (
        "btime-stored-late",
        Bug::BtimeStoredLate,
        "a new inode's birth time is stored in its slot only after the create commits, \
         though the slot's checksum covers it, so a crash can leave a slot that fails its \
         checksum",
    ),
];

/// Whether this build can inject bugs (the `fault-injection` feature is on).
pub const ENABLED: bool = cfg!(feature = "fault-injection");

/// Looks a bug up by name.
pub fn by_name(name: &str) -> Option<Bug> {
    ALL.iter().find(|(n, _, _)| *n == name).map(|&(_, b, _)| b)
}

#[cfg(feature = "fault-injection")]
static ACTIVE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Turns one bug on (or all off with `None`), process-wide. For the crash explorer
/// only; exists only with the `fault-injection` feature.
#[cfg(feature = "fault-injection")]
#[doc(hidden)]
pub fn inject(bug: Option<Bug>) {
    ACTIVE.store(
        bug.map(|b| 1u64 << b as u64).unwrap_or(0),
        std::sync::atomic::Ordering::SeqCst,
    );
}

/// Whether `b` is on: one relaxed load.
#[cfg(feature = "fault-injection")]
#[inline]
pub(crate) fn on(b: Bug) -> bool {
    ACTIVE.load(std::sync::atomic::Ordering::Relaxed) & (1u64 << b as u64) != 0
}

/// Never: this build cannot inject bugs, and the check folds away.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub(crate) const fn on(_: Bug) -> bool {
    false
}
