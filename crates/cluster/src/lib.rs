//! mnemofs cluster mode (DESIGN.md §7, docs/CLUSTER.md): a metadata server
//! ([`MdsHandle`]) runs the engine over devices every client can map; clients
//! ([`Client`]) ask it for the namespace and for layouts, write file data straight
//! into space it delegated to them, and commit the new extents to it.

mod client;
pub mod codec;
mod delayed;
pub mod netdelay;
pub mod netns;
pub mod proto;
mod server;

/// The generated gRPC service (tonic-build's manual builder, `build.rs`).
#[allow(missing_docs, clippy::all)]
pub mod rpc {
    include!(concat!(env!("OUT_DIR"), "/mnemofs.cluster.Mds.rs"));
}

pub use client::{Client, ClientConfig, ClientHandle, ClientStats, CommitMode};
pub use delayed::{DelayedConfig, Sample};
pub use server::{mds_mount_options, MdsConfig, MdsHandle, ServerStats};
