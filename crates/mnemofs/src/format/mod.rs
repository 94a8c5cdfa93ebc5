//! On-PM format, byte for byte (docs/FORMAT.md is the prose version of this module).
//!
//! All integers are little-endian. PM holds block numbers and byte offsets, never
//! virtual addresses. Pure codecs: nothing here touches PM.
//!
//! - `layout`: [`Geometry`], where each region of the image lies (§1).
//! - `superblock`: the superblock codec and the state word (§2.1).
//! - `inode`: the inode slot codec (§2.2).
//! - `entry`: log pages, log entries and commit words (§2.3–§2.5).
//! - `journal`: the journal block's header word and records (§2.6).
//! - `freelist`: the saved free list (§2.7).
//! - `zone`: sizes of the LAWN zone and of the fine-log redo areas (§2.8, §2.9).
//! - `device`: the devices of a volume: their headers and the device table (§2.10).
//! - `bytes`: little-endian field access and the CRC.
//!
//! Every item is re-exported here, so `crate::format::X` names each of them.

// Values read from PM are untrusted: arithmetic on them is checked (checked_*,
// saturating_* where an out-of-range result is refused later), enforced here.
#![deny(clippy::arithmetic_side_effects)]

mod bytes;
mod device;
mod entry;
mod freelist;
mod inode;
mod journal;
mod layout;
mod superblock;
mod zone;

pub use bytes::*;
pub use device::*;
pub use entry::*;
pub use freelist::*;
pub use inode::*;
pub use journal::*;
pub use layout::*;
pub use superblock::*;
pub use zone::*;
