//! `mnemofs mds`: a metadata server for cluster clients (docs/CLUSTER.md). Serves
//! in the foreground until SIGINT, SIGTERM or SIGHUP, then stops, gives back every
//! session's delegated space and unmounts the volume cleanly.

use crate::error::{fs_error, retry_if_busy, CliError, CliResult};
use crate::output::note;
use clap::Args;
use mnemofs_cluster::{mds_mount_options, MdsConfig, MdsHandle};
use mnemofs_fuse::{BlockedSignals, STOP_SIGNALS};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct MdsArgs {
    /// The volume: an image file or PM device, or the devices of a volume
    /// comma-separated in any order; every client maps the same devices
    pub devices: PathBuf,
    /// Address to listen on (`HOST:PORT`; port 0: any free port)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7420")]
    pub listen: String,
    /// Session lease in milliseconds: a client that has not renewed for this long
    /// loses its delegated space (and a restarted server delegates none before it)
    #[arg(long = "lease-ms", value_name = "MS", default_value_t = 3000)]
    pub lease_ms: u64,
    /// Blocks (4 KiB) of one delegated chunk
    #[arg(long = "chunk-blocks", value_name = "N", default_value_t = 2048)]
    pub chunk_blocks: u64,
}

pub fn run(args: &MdsArgs) -> CliResult<()> {
    let listen: std::net::SocketAddr = args.listen.parse().map_err(|e| {
        CliError::new(format!(
            "--listen {}: {e} (want HOST:PORT, e.g. 127.0.0.1:7420)",
            args.listen
        ))
        .with_code(2)
    })?;
    if !(100..=3_600_000).contains(&args.lease_ms) {
        return Err(CliError::new("--lease-ms: give 100 to 3600000").with_code(2));
    }
    if args.chunk_blocks == 0 || args.chunk_blocks > 1 << 20 {
        return Err(CliError::new("--chunk-blocks: give 1 to 1048576").with_code(2));
    }
    // Before any thread starts, so that every thread inherits the mask and only
    // this one takes a stop signal.
    let blocked = BlockedSignals::block(&STOP_SIGNALS)
        .map_err(|e| CliError::new(format!("cannot block signals: {e}")))?;
    let specs = crate::devs::parse(&args.devices)?;
    let fs = retry_if_busy(|| mnemofs::mount_devices(&specs, &mds_mount_options()))
        .map_err(|e| fs_error(&args.devices, &e))?;
    let cfg = MdsConfig {
        lease: Duration::from_millis(args.lease_ms),
        chunk_blocks: args.chunk_blocks,
    };
    let mds = MdsHandle::start(fs, listen, cfg)
        .map_err(|e| CliError::new(format!("--listen {}: {e}", args.listen)))?;
    note(&format!(
        "mnemofs mds: {} served on {} (lease {} ms); Ctrl-C stops it",
        args.devices.display(),
        mds.addr(),
        args.lease_ms
    ));
    let set = blocked.set();
    let sig = loop {
        if let Some(s) = set.wait(Duration::from_millis(500)) {
            break s;
        }
    };
    note(&format!(
        "mnemofs mds: {} received, stopping",
        mnemofs_fuse::signal_name(sig)
    ));
    mds.shutdown().map_err(|e| fs_error(&args.devices, &e))?;
    note("mnemofs mds: volume unmounted cleanly");
    Ok(())
}
