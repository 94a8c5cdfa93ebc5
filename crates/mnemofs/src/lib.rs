//! The engine of mnemofs: a NOVA-lineage persistent-memory file system.
//!
//! mnemofs keeps a file system in a byte-addressable region — a DAX device, or an
//! image file that emulates PM over DRAM — as NOVA lays one out: a log of
//! commit-marked entries per inode, copy-on-write data pages, DRAM indexes rebuilt
//! at mount, per-CPU allocators and a lite journal for operations on several inodes.
//! Every call that returned is durable, and a crash leaves the one in flight all or
//! nothing. This crate is all of it; the `mnemofs` binary's FUSE mount, the benchmark
//! harness and the crash explorer are frontends that call it in-process.
//!
//! # Five techniques, each a mode chosen at mount
//!
//! On top of the NOVA baseline, each technique is a mode of [`MountOptions`], so the
//! baseline of each stays runnable and the presets of [`PRESETS`] (`nova`, `pnova`,
//! `finelog`, `lawn`, `rcache`, `full`) put them side by side:
//! - **range locks** (pNOVA, [`LockMode`]): writers of disjoint ranges of one file
//!   copy their data and append their log entries in parallel, under an interval
//!   tree or per-segment lock words;
//! - **fine-grained logging** ([`SmallWriteMode::Finelog`]): a sub-page write is
//!   logged in a per-CPU redo area, then written in place;
//! - **LAWN** ([`SmallWriteMode::Lawn`]): a sub-page write alternates between a slot
//!   of the LAWN zone and the file's page, committed by one descriptor;
//! - **RCache** ([`ReadCacheMode`]): a DRAM cache of hot data pages on the read path;
//! - **volumes over NUMA nodes** (MBS-LVM, [`PlacementMode`]): up to 8 devices form
//!   one volume, and new blocks go to the writer's node.
//!
//! The default preset, [`DEFAULT_PRESET`] (`full`), takes every technique where it
//! pays: LAWN and RCache on PM, not over DRAM ([`medium`]).
//!
//! # The engine interface
//!
//! [`mkfs()`](fn@mkfs) formats an image, [`mount()`](fn@mount) returns an [`Fs`], and
//! [`fsck()`](fn@fsck) checks an image read-only ([`mkfs_devices`], [`mount_devices`]
//! and [`fsck_devices`] take the devices of a volume). Frontends use a mounted file
//! system through the [`FileSystem`] trait ([`api`]): inode numbers, byte names,
//! POSIX semantics, [`FsError`]s with one errno mapping. A frontend generic over it
//! runs as well on the cluster client, which implements the same trait.
//!
//! ```
//! use mnemofs::{FileSystem, MkfsOptions, MountOptions, DEFAULT_PRESET, PRESETS, ROOT_INO};
//!
//! // What a frontend does, through the engine interface.
//! fn hello<E: FileSystem>(fs: &E) -> mnemofs::Result<Vec<u8>> {
//!     let file = fs.create(ROOT_INO, b"hello.txt", 0o644, 0, 0)?;
//!     fs.write(file.ino, 0, b"hello, persistent memory")?;
//!     let mut buf = vec![0; 64];
//!     let n = fs.read(file.ino, 0, &mut buf)?;
//!     buf.truncate(n);
//!     Ok(buf)
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let image = dir.path().join("pm.img");
//! mnemofs::mkfs(&image, &MkfsOptions { size: 16 << 20, cpus: 1, ..Default::default() })?;
//!
//! let preset = PRESETS.iter().find(|p| p.name == DEFAULT_PRESET).unwrap();
//! let fs = mnemofs::mount(&image, &MountOptions::from_preset(preset))?;
//! assert_eq!(hello(&fs)?, b"hello, persistent memory");
//! fs.unmount()?;
//!
//! let report = mnemofs::fsck(&image)?;
//! assert!(report.is_clean(), "{:?}", report.problems);
//! assert!(report.clean_unmount);
//! assert_eq!(report.files, 1);
//! # Ok(())
//! # }
//! ```
//!
//! # Inside
//!
//! [`Fs`] (`engine`) is the engine and its public API; below it, top to bottom
//! (docs/ARCHITECTURE.md):
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
