//! FUSE adapter for mnemofs: each kernel request becomes one engine call
//! ([`MnemoFuse`], generic over the engine interface [`mnemofs::FileSystem`], so the
//! local engine and any other implementation are served alike), engine errors become
//! errnos in one place ([`errno`]), and
//! [`mount_and_serve`] mounts with several event-loop threads and stops cleanly.

mod adapter;
mod convert;
pub mod inflight;
pub mod ioctl;
pub mod mountpoint;
pub mod pagecache;
pub mod remount;
mod serve;
mod session;
pub mod signals;
mod wire;

pub use adapter::{
    AdapterOptions, MnemoFuse, DEFAULT_ATTR_TTL, DEFAULT_ENTRY_TTL, MAX_WRITE, STATS_XATTR,
};
pub use convert::{errno, file_attr, file_type, BLKSIZE};
pub use mountpoint::{check_mountpoint, MountpointError, MNEMOFS_FSTYPE};
pub use serve::{mount_and_serve, mount_and_serve_with, KernelFlags, MountConfig, MountError};
pub use signals::{signal_name, BlockedSignals, STOP_SIGNALS};
