//! mnemofs engine: a NOVA-lineage persistent-memory file system.
//!
//! Layers (DESIGN.md §1), one module each:
//! - [`format`]: on-PM layout (superblock, inodes, log entries, journal), byte for byte
//!   as docs/FORMAT.md describes it.
//! - [`space`]: per-CPU page allocators.
//! - [`journal`]: the per-CPU lite journal (undo records of 8-byte words) that makes
//!   multi-inode operations atomic.
//! - [`log`]: per-inode logs of commit-marked entries, log GC.
//! - [`lock`]: the per-file lock abstraction (`inode` mode: NOVA's rwlock).
//! - [`cow`]: page copy-on-write file data.
//! - `lawn`: LAWN alternate writing of sub-page writes (zone, descriptors, write-back).
//! - `finelog`: the fine-grained redo-log baseline for sub-page writes.
//! - [`namespace`]: directories, links, rename.
//! - [`recovery`]: mount, journal rollback, log replay, free-list rebuild.
//! - [`fsck`]: the checker.
//!
//! All PM access goes through the `pm` crate.

pub mod addr;
pub mod api;
#[doc(hidden)]
pub mod bugs;
pub mod error;
pub mod format;
pub mod types;

mod data;
mod engine;
mod freelist;
pub mod fsck;
mod index;
mod inode;
#[doc(hidden)]
pub mod interleave;
mod itable;
mod journal;
mod lock;
mod log;
mod mkfs;
mod namespace;
mod recovery;
mod space;
mod store;
mod vol;

pub use api::FileSystem;
pub use engine::{mount, FileHandle, Fs};
pub use error::{FsError, Result};
pub use fsck::{fsck, FsckReport};
pub use mkfs::{mkfs, mkfs_pm, MKFS_PM_MIN};
pub use types::*;
