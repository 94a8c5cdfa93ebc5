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

/// The empty formatted image of `cpus` CPUs (and `devices` devices: its global
/// space) every workload starts from; with `page_descriptors`, as the image of a
/// build before format version 7 (LAWN descriptors in the page format,
/// docs/FORMAT.md §2.9).
pub(crate) fn base_image(
    cpus: u32,
    devices: u32,
    page_descriptors: bool,
) -> Result<Vec<u8>, String> {
    let mut img = formatted(cpus, devices)?;
    if page_descriptors {
        as_page_format(&mut img, devices);
    }
    Ok(img)
}

/// Rewrites both superblock copies of a fresh image (device 0 holds them at the
/// start of the global space) to the version the mkfs before version 7 wrote, with
/// page-format LAWN descriptors: 6 for a volume whose later devices have inode
/// tables (mkfs gives every later device one), else 5; checksums recomputed. That
/// is what that mkfs made, save the creation time: a fresh image has no LAWN
/// descriptor set, so nothing else differs.
fn as_page_format(img: &mut [u8], devices: u32) {
    use mnemofs::format::{self, BLOCK, SB_CSUM_LEN, SB_CSUM_OFF, SB_VERSION_OFF};
    let version = if devices > 1 {
        format::VERSION_DEV_INODES
    } else {
        format::VERSION_DEVICES
    };
    for b in [format::SB_BLOCK, format::SB_REPLICA_BLOCK] {
        let at = (b * BLOCK) as usize;
        format::put_u32(img, at + SB_VERSION_OFF, version);
        let c = format::crc(&img[at..at + SB_CSUM_LEN]);
        format::put_u32(img, at + SB_CSUM_OFF, c);
    }
}

fn formatted(cpus: u32, devices: u32) -> Result<Vec<u8>, String> {
    let opts = MkfsOptions {
        size: IMAGE_SIZE,
        cpus,
        inodes: 64,
        force: true,
        ..Default::default()
    };
    if devices > 1 {
        // Device 0 (metadata and the start of the data area) and device 1 (its
        // header block, then data): the same 768 KiB of global space.
        let mut v = mnemofs::mkfs_anonymous(&[IMAGE_SIZE - (256 << 10), (256 << 10) + 4096], &opts)
            .map_err(|e| e.to_string())?;
        return Ok(v.to_vec());
    }
    let mut pm = Pm::anonymous(IMAGE_SIZE).map_err(|e| e.to_string())?;
    mnemofs::mkfs_pm(&mut pm, &opts).map_err(|e| e.to_string())?;
    Ok(pm.to_vec())
}

/// Mounts a copy of `base` with `cfg`'s modes and a recording tracer (no LAWN
/// write-back thread: the trace must come from the workload's threads only). An error
/// names the step (`setup`, `mount`) and what went wrong. A volume of several devices
/// places by `interleave`, so that consecutive allocations (a file's data block and
/// its next log page) take different devices.
pub(crate) fn traced_mount(
    cfg: &Config,
    base: &[u8],
) -> Result<(Fs, Arc<RecordingTracer>), (&'static str, String)> {
    let mut v = mnemofs::volume_of_image(base).map_err(|e| ("setup", e.to_string()))?;
    let rec = Arc::new(RecordingTracer::new());
    v.set_tracer(Some(rec.clone()));
    let opts = MountOptions {
        lock: cfg.lock,
        small_write: cfg.small_write,
        lawn_writeback_thread: false,
        lawn_desc_store: Some(cfg.desc_store),
        placement: if cfg.devices > 1 {
            mnemofs::PlacementMode::Interleave
        } else {
            mnemofs::PlacementMode::Local
        },
        ..mount_opts()
    };
    match guarded(|| Fs::from_volume(v, &opts)) {
        Ok(Ok(fs)) => Ok((fs, rec)),
        Ok(Err(e)) => Err(("mount", e.to_string())),
        Err(p) => Err(("mount", format!("panicked: {p}"))),
    }
}

/// 128-bit hash of an image for deduplication (XXH3: images are hashed once per
/// explored state and once per crash inside recovery).
pub(crate) fn image_hash(img: &[u8]) -> u128 {
    xxhash_rust::xxh3::xxh3_128(img)
}

/// Which CPU of the image operation `k` of workload `idx` runs on (thread `t` of a
/// multi-writer workload; 0 for the single-thread explorers): a fixed mix of the
/// three, so a workload's traced run is the same every time and the CPUs of one
/// workload differ from operation to operation.
pub(crate) fn op_cpu(cpus: u32, idx: usize, t: usize, k: usize) -> u32 {
    let mut x = ((idx as u64) << 32) ^ ((t as u64) << 24) ^ k as u64;
    // splitmix64's finalizer.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x % cpus.max(1) as u64) as u32
}

/// Pins the threads of a traced run so that the engine, which picks per-CPU
/// journals, allocators and inode tables by `sched_getcpu() % cpus`, uses the CPU of
/// the image each operation is assigned to (`op_cpu`). Image CPU `v` runs on the
/// first host CPU `c` this process may use with `c % cpus == v`; an image CPU with
/// no such host CPU is not reachable (its operations run wherever they are). With
/// one image CPU nothing is pinned. Dropping it restores the creating thread's
/// affinity (the exploring thread goes on to check crash states on any CPU).
pub(crate) struct Pins {
    host: Vec<Option<usize>>,
    saved: Option<libc::cpu_set_t>,
}

impl Pins {
    pub(crate) fn new(cpus: u32) -> Pins {
        if cpus <= 1 {
            return Pins {
                host: Vec::new(),
                saved: None,
            };
        }
        let Some(saved) = affinity() else {
            return Pins {
                host: vec![None; cpus as usize],
                saved: None,
            };
        };
        let host = (0..cpus as usize)
            .map(|v| {
                // SAFETY: CPU_ISSET reads the set within its size (the index is
                // below CPU_SETSIZE).
                (0..libc::CPU_SETSIZE as usize)
                    .find(|&c| c % cpus as usize == v && unsafe { libc::CPU_ISSET(c, &saved) })
            })
            .collect();
        Pins {
            host,
            saved: Some(saved),
        }
    }

    /// Image CPUs the traced runs can be pinned to.
    pub(crate) fn reachable(&self) -> u32 {
        if self.host.is_empty() {
            1
        } else {
            self.host.iter().filter(|h| h.is_some()).count() as u32
        }
    }

    /// Moves the calling thread onto image CPU `cpu` (when reachable).
    pub(crate) fn pin(&self, cpu: u32) {
        if let Some(Some(c)) = self.host.get(cpu as usize) {
            // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes within it.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: `*c` is a host CPU number from `sched_getaffinity`'s set, below
            // CPU_SETSIZE, so CPU_SET writes inside `set`.
            unsafe { libc::CPU_SET(*c, &mut set) };
            set_affinity(&set);
        }
    }
}

impl Drop for Pins {
    fn drop(&mut self) {
        if let Some(s) = &self.saved {
            set_affinity(s);
        }
    }
}

/// The calling thread's CPU affinity.
fn affinity() -> Option<libc::cpu_set_t> {
    // SAFETY: an all-zero cpu_set_t is valid; the kernel fills at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed; pid 0 is the
    // calling thread.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    (r == 0).then_some(set)
}

/// Sets the calling thread's CPU affinity (best effort: a failure leaves the thread
/// where it is, which only makes the run use fewer of the image's CPUs).
fn set_affinity(set: &libc::cpu_set_t) {
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) };
}
