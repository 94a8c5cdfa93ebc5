//! mnemofs engine: a NOVA-lineage persistent-memory file system.
//!
//! [`Fs`] (`engine`) is the engine and its public API; frontends use it through the
//! [`FileSystem`] interface ([`api`]). Below it, top to bottom (docs/ARCHITECTURE.md):
//! - `namespace`: names, links, rename, attributes;
//! - `data`: the data plane — read path, write dispatch, invalidation point; page
//!   CoW (`data::cow`), the fine-log baseline (`data::finelog`), LAWN (`data::lawn`);
//! - `itable`, `inode`, `index`, `lock`: DRAM inodes, page indexes, range locks;
//! - `store`, `log`, `journal`: the log-commit machinery over the volume, per-inode
//!   logs of commit-marked entries, the lite journal;
//! - `space`: per-CPU allocators and placement; `freelist`: the saved free list;
//! - `recovery` (mount and [`fsck`](mod@fsck)), `mkfs`;
//! - [`format`](mod@format): on-PM codecs with named byte offsets (docs/FORMAT.md);
//! - [`addr`]: block numbers and PM offsets; `vol`: the engine's only PM handle.
//!
//! All PM access goes through the `pm` crate.

pub mod acl;
pub mod addr;
pub mod api;
#[doc(hidden)]
pub mod bugs;
mod combine;
pub mod contention;
pub mod error;
pub mod format;
pub mod types;

mod data;
mod devices;
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
pub mod medium;
mod mkfs;
mod namespace;
mod pagemap;
mod recovery;
mod space;
mod store;
mod tagged;
mod vol;

/// The engine's extent allocator on its own, for measuring it against other
/// allocators (`examples/alloc_compare.rs`). Not a stable API.
#[doc(hidden)]
pub use space::bench as alloc_bench;

pub use api::FileSystem;
pub use data::extent::{Layout, LAYOUT_MAX_PAGES};
pub use devices::{mkfs_anonymous, open_shared, volume_of_image, DeviceInfo, DeviceSpec};
pub use engine::{mount, mount_devices, FileHandle, Fs};
pub use error::{FsError, Result};
pub use fsck::{fsck, fsck_devices, FsckReport};
pub use mkfs::{mkfs, mkfs_devices, mkfs_pm, MKFS_PM_MIN};
/// The host's choices the engine runs by, and the variables that force them.
pub use pm::{HostChoices, HostError};
pub use types::*;
