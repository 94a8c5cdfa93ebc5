//! The images the explorer works on: the empty formatted image every workload
//! starts from, the traced mount of a copy of it, and the hash that deduplicates
//! crash images.

use crate::check::guarded;
use crate::config::{Config, IMAGE_SIZE};
use mnemofs::{Fs, MkfsOptions, MountOptions};
use pm::{Pm, RecordingTracer};
use std::sync::Arc;

pub(crate) fn mount_opts() -> MountOptions {
    MountOptions::default()
}

/// The empty formatted image every workload starts from.
pub(crate) fn base_image() -> Result<Vec<u8>, String> {
    let pm = Pm::anonymous(IMAGE_SIZE).map_err(|e| e.to_string())?;
    mnemofs::mkfs_pm(
        &pm,
        &MkfsOptions {
            size: IMAGE_SIZE,
            cpus: 1,
            inodes: 64,
            force: true,
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())?;
    Ok(pm.to_vec())
}

/// Mounts a copy of `base` with `cfg`'s modes and a recording tracer (no LAWN
/// write-back thread: the trace must come from the workload's threads only). An error
/// names the step (`setup`, `mount`) and what went wrong.
pub(crate) fn traced_mount(
    cfg: &Config,
    base: &[u8],
) -> Result<(Fs, Arc<RecordingTracer>), (&'static str, String)> {
    let mut pm = Pm::anonymous(base.len() as u64).map_err(|e| ("setup", e.to_string()))?;
    pm.load_image(base);
    let rec = Arc::new(RecordingTracer::new());
    pm.set_tracer(Some(rec.clone()));
    let opts = MountOptions {
        lock: cfg.lock,
        small_write: cfg.small_write,
        lawn_writeback_thread: false,
        lawn_desc_store: Some(cfg.desc_store),
        ..mount_opts()
    };
    match guarded(|| Fs::from_pm(pm, &opts)) {
        Ok(Ok(fs)) => Ok((fs, rec)),
        Ok(Err(e)) => Err(("mount", e.to_string())),
        Err(p) => Err(("mount", format!("panicked: {p}"))),
    }
}

/// 128-bit hash of an image for deduplication: two independent multiply-rotate
/// lanes over 8-byte words (fast: images are hashed once per explored state).
pub(crate) fn image_hash(img: &[u8]) -> u128 {
    let (mut a, mut b) = (0x9e37_79b9_7f4a_7c15u64, 0xc2b2_ae3d_27d4_eb4fu64);
    let mut chunks = img.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let w = u64::from_le_bytes(w);
        a = (a ^ w).wrapping_mul(0xff51_afd7_ed55_8ccd).rotate_left(31);
        b = (b.rotate_left(27) ^ w).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    }
    for &x in chunks.remainder() {
        a = (a ^ x as u64).wrapping_mul(0xff51_afd7_ed55_8ccd);
        b = (b ^ x as u64).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    }
    ((a as u128) << 64) | b as u128
}
