//! mkfs: formats a region as an empty mnemofs (superblocks, clear metadata areas,
//! the root directory's inode and log, the free list).

use crate::addr::{BlockNo, PmOff};
use crate::devices::{DeviceInfo, DeviceSpec};
use crate::error::{FsError, Result};
use crate::format::{
    encode_inode_static, DeviceEntry, DeviceHeader, DeviceTable, Entry, Geometry, ZoneParams,
    DEV_HDR_OFF, DEV_HDR_SIZE, INO_HEAD_OFF, INO_TAIL_OFF, INO_VALID_OFF, NODE_UNKNOWN,
    SB_REPLICA_BLOCK, SB_STATE_OFF, STATE_CLEAN, TABLE_OFF,
};
use crate::log::init_page;
use crate::types::*;
use crate::vol::Vol;
use pm::Pm;
use std::path::Path;

/// Smallest region `mkfs_pm` formats (in-memory images of the crash explorer).
pub const MKFS_PM_MIN: u64 = 256 << 10;

fn zone_params(opts: &MkfsOptions) -> ZoneParams {
    ZoneParams {
        percent: opts.zone_percent,
        slot_size: opts.slot_size,
    }
}

/// Formats `path` (created when missing) as an empty mnemofs of one device.
pub fn mkfs(path: &Path, opts: &MkfsOptions) -> Result<()> {
    mkfs_devices(
        &[DeviceSpec {
            path: path.to_path_buf(),
            node: None,
        }],
        opts,
    )
    .map(|_| ())
}

/// Formats the devices of `specs` (image files are created at `opts.size` each when
/// missing) as one empty mnemofs volume; returns the devices as formatted.
pub fn mkfs_devices(specs: &[DeviceSpec], opts: &MkfsOptions) -> Result<Vec<DeviceInfo>> {
    let cpus = if opts.cpus == 0 {
        u32::try_from(pm::HostChoices::cpu_count()).unwrap_or(u32::MAX)
    } else {
        opts.cpus
    };
    let (volume, devices, uuid) = crate::devices::create(specs, opts.size, opts.force)?;
    let blocks: Vec<u64> = devices.iter().map(|d| d.blocks).collect();
    let geo = volume_geometry(volume.len(), &blocks, cpus, opts, crate::format::MIN_SIZE).map_err(
        |e| match e {
            FsError::Volume(m) => FsError::Volume(format!(
                "{}: {m}; give device 0 more room",
                devices[0].path.display()
            )),
            e => e,
        },
    )?;
    let pm = Vol::from_volume(volume);
    check_label(&opts.label)?;
    format(&pm, &geo, &table_of(uuid, &geo, &devices), &opts.label);
    pm.sync_to_file();
    Ok(devices)
}

/// The geometry of a volume of `len` bytes over devices of `blocks`: one device
/// is laid out as ever; with several, the inode slots asked for (or one per 16
/// KiB) are shared out in proportion to the devices' sizes, device 0's in the
/// metadata area and each later device's in a table at its start (so that a
/// file's inode can be on its creator's node). An error that a device cannot hold
/// its part is [`FsError::Volume`].
pub(crate) fn volume_geometry(
    len: u64,
    blocks: &[u64],
    cpus: u32,
    opts: &MkfsOptions,
    min: u64,
) -> Result<Geometry> {
    let total: u64 = blocks.iter().fold(0u64, |a, &b| a.saturating_add(b));
    let wanted = Geometry::inodes_for(len, opts.inodes);
    let cpus64 = u64::from(cpus.clamp(1, 64));
    // `wanted × blocks[i] / total`, exact in u128 and at most `wanted`.
    let share = |b: u64| -> u64 {
        let s = u128::from(wanted) * u128::from(b) / u128::from(total.max(1));
        u64::try_from(s).unwrap_or(wanted)
    };
    // The later devices' shares (rounded down to whole CPU shares), and device 0
    // the rest: the volume has at least the slots asked for.
    let mut inodes = vec![0u64; blocks.len()];
    for (i, &b) in blocks.iter().enumerate().skip(1) {
        // At most half of the device, and what a table entry can count.
        let half = b.saturating_mul(crate::format::BLOCK) / 2 / crate::format::INODE_SIZE;
        let n = share(b).min(half).min(u64::from(u32::MAX));
        inodes[i] = n / cpus64 * cpus64;
    }
    let later = inodes.iter().fold(0u64, |a, &n| a.saturating_add(n));
    let first = if blocks.len() <= 1 {
        opts.inodes
    } else {
        wanted.saturating_sub(later).max(16)
    };
    let mut geo = Geometry::compute_zoned(len, cpus, first, min, zone_params(opts))?;
    geo.set_devices(blocks).map_err(FsError::Volume)?;
    if blocks.len() > 1 {
        geo.set_device_inodes(&inodes).map_err(FsError::Volume)?;
    }
    Ok(geo)
}

/// The device table of a volume of geometry `geo` over `devices`.
fn table_of(uuid: [u8; 16], geo: &Geometry, devices: &[DeviceInfo]) -> DeviceTable {
    DeviceTable {
        uuid,
        devices: devices
            .iter()
            .enumerate()
            .map(|(i, d)| DeviceEntry {
                blocks: d.blocks,
                node: d.node.unwrap_or(NODE_UNKNOWN),
                inodes: geo.dev_inodes.get(i).map_or(0, |&n| n as u32),
            })
            .collect(),
    }
}

/// Formats an already mapped region (anonymous memory in tests and the crash
/// explorer).
pub fn mkfs_pm(pm: &mut Pm, opts: &MkfsOptions) -> Result<()> {
    let size = pm.len().min(opts.size);
    let geo = Geometry::compute_zoned(
        size,
        opts.cpus.max(1),
        opts.inodes,
        MKFS_PM_MIN,
        zone_params(opts),
    )?;
    let table = DeviceTable {
        uuid: uuid_of(&geo),
        devices: vec![DeviceEntry {
            blocks: geo.total_blocks,
            node: NODE_UNKNOWN,
            inodes: 0,
        }],
    };
    check_label(&opts.label)?;
    Vol::with_borrowed(pm, |v| format(v, &geo, &table, &opts.label))?;
    Ok(())
}

/// The UUID of a volume formatted in memory: derived from its superblock, so that
/// the same options give the same bytes (the crash explorer's and the fuzzer's
/// images are deterministic).
pub(crate) fn uuid_of(geo: &Geometry) -> [u8; 16] {
    let sb = geo.encode();
    let mut uuid = [0u8; 16];
    for (i, q) in uuid.chunks_mut(4).enumerate() {
        let mut h = crc32fast::Hasher::new();
        h.update(&[i as u8]);
        h.update(&sb);
        q.copy_from_slice(&h.finalize().to_le_bytes());
    }
    uuid
}

/// Writes an empty file system onto `pm`, a volume of the devices `table` lists
/// (whose headers, but device 0's, are written already).
/// A label mkfs takes: at most 255 bytes, no NUL.
fn check_label(label: &[u8]) -> Result<()> {
    if label.len() > crate::format::LABEL_MAX || label.contains(&0) {
        return Err(crate::FsError::Invalid(
            "a label is at most 255 bytes, without NUL",
        ));
    }
    Ok(())
}

pub(crate) fn format(pm: &Vol, geo: &Geometry, table: &DeviceTable, label: &[u8]) {
    // Metadata area: superblocks, journals, free list, inode table, fine-log redo
    // areas, LAWN descriptor table (all clear). Zone slots hold nothing until a
    // descriptor names them, so they are left as they are.
    pm.zero(PmOff::ZERO, BlockNo(geo.slot_start).off().get());
    pm.flush(PmOff::ZERO, BlockNo(geo.slot_start).off().get());
    // The chunk table, after the slots: an entry left by an earlier file system on
    // these bytes (`mkfs --force`, a DAX device) would give a sub-zone a chunk of
    // blocks the new free list also holds.
    let chunks = BlockNo(geo.chunk_table_start).off();
    let chunks_len = BlockNo(geo.chunk_table_blocks()).off().get();
    pm.zero(chunks, chunks_len);
    pm.flush(chunks, chunks_len);
    // Root directory: slot, one log page with its initial attributes.
    let root_page = geo.data_start;
    init_page(pm, root_page, ROOT_INO);
    let now = Timespec::now();
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let entries = [
        Entry::SetAttr {
            mode: libc::S_IFDIR | 0o755,
            uid,
            gid,
            rdev: 0,
            size: 0,
            atime: now,
            mtime: now,
            ctime: now,
            flags: 0,
        },
        Entry::Link {
            nlink: 2,
            ctime: now,
        },
    ];
    let mut pos = BlockNo(root_page).off();
    for e in &entries {
        let mut body = e.encode();
        let cw = crate::format::commit_word(&body);
        body[0..8].copy_from_slice(&cw.to_le_bytes());
        pm.write(pos, &body);
        pm.flush(pos, body.len() as u64);
        pos = pos + body.len() as u64;
    }
    let ioff = geo.inode_off(ROOT_INO);
    let slot = encode_inode_static(
        ROOT_INO,
        FileKind::Directory,
        0,
        geo.btime.then(Timespec::now),
    );
    pm.write(ioff + 24, &slot[24..]);
    pm.store_u64(ioff + INO_HEAD_OFF, root_page);
    pm.store_u64(ioff + INO_TAIL_OFF, pos.get());
    pm.store_u64(ioff + INO_VALID_OFF, 1);
    pm.flush(ioff, 128);
    // The later devices' inode tables (all clear: no slot valid).
    for d in 1..geo.devices as usize {
        let at = BlockNo(geo.dev_start(d)).off();
        let len = BlockNo(geo.dev_inode_blocks(d)).off().get();
        pm.zero(at, len);
        pm.flush(at, len);
    }
    // Free: every data block but the root's first log page, device by device (the
    // later devices' inode tables are not data blocks).
    let free: Vec<(u64, u64)> = (0..geo.devices as usize)
        .map(|d| geo.device_data(d))
        .map(|(lo, hi)| {
            if lo == root_page {
                (lo + 1, hi)
            } else {
                (lo, hi)
            }
        })
        .filter(|&(lo, hi)| hi > lo)
        .map(|(lo, hi)| (lo, hi - lo))
        .collect();
    crate::freelist::save_freelist(pm, geo, &free);
    // The device table in both superblock blocks, and device 0's header in block 0
    // (docs/FORMAT.md §2.10).
    let t = table.encode();
    for b in [0, SB_REPLICA_BLOCK] {
        let at = BlockNo(b).at(TABLE_OFF);
        pm.write(at, &t);
        pm.flush(at, t.len() as u64);
    }
    let header = DeviceHeader {
        uuid: table.uuid,
        index: 0,
        count: table.devices.len() as u32,
        node: table.devices.first().map_or(NODE_UNKNOWN, |d| d.node),
        blocks: geo.dev_blocks[0],
    };
    let h = BlockNo(0).at(DEV_HDR_OFF);
    pm.write(h, &header.encode());
    pm.flush(h, DEV_HDR_SIZE as u64);
    if !label.is_empty() {
        let l = crate::format::encode_label(label);
        for b in [0, SB_REPLICA_BLOCK] {
            let at = BlockNo(b).at(crate::format::SB_LABEL_OFF);
            pm.write(at, &l);
            pm.flush(at, l.len() as u64);
        }
    }
    // Fence: root inode, its log, the free list, the device table, device 0's
    // header and the label are durable before the superblock that makes the image
    // a mnemofs.
    pm.fence();
    let sb = geo.encode();
    pm.write(BlockNo(SB_REPLICA_BLOCK).off(), &sb);
    pm.flush(BlockNo(SB_REPLICA_BLOCK).off(), sb.len() as u64);
    pm.write(PmOff::ZERO, &sb);
    pm.flush(PmOff::ZERO, sb.len() as u64);
    pm.store_u64(PmOff::ZERO + SB_STATE_OFF, STATE_CLEAN);
    pm.flush(PmOff::ZERO + SB_STATE_OFF, 8);
    // Fence: the superblocks and the clean state are durable before mkfs returns.
    pm.fence();
}
