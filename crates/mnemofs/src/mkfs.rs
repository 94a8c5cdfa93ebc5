//! mkfs: formats a region as an empty mnemofs (superblocks, clear metadata areas,
//! the root directory's inode and log, the free list).

use crate::addr::{BlockNo, PmOff};
use crate::error::{FsError, Result};
use crate::format::{
    encode_inode_static, Entry, Geometry, ZoneParams, INO_HEAD_OFF, INO_TAIL_OFF, INO_VALID_OFF,
    SB_REPLICA_BLOCK, SB_STATE_OFF, STATE_CLEAN,
};
use crate::log::init_page;
use crate::recovery;
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

/// Formats `path` (created when missing) as an empty mnemofs.
pub fn mkfs(path: &Path, opts: &MkfsOptions) -> Result<()> {
    let cpus = if opts.cpus == 0 {
        std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1)
    } else {
        opts.cpus
    };
    let geo = Geometry::compute_zoned(
        opts.size,
        cpus,
        opts.inodes,
        crate::format::MIN_SIZE,
        zone_params(opts),
    )?;
    if !opts.force {
        if let Ok(mut existing) = Pm::open(path, false) {
            let mut scratch = Vec::new();
            if recovery::read_superblock(Vol::of(&mut existing), &mut scratch).is_ok() {
                return Err(FsError::AlreadyFormatted {
                    path: path.to_path_buf(),
                });
            }
        }
    }
    let pm = Vol::new(Pm::create(path, opts.size)?);
    format(&pm, &geo);
    pm.sync_to_file();
    Ok(())
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
    format(Vol::of(pm), &geo);
    Ok(())
}

/// Writes an empty file system onto `pm`.
pub(crate) fn format(pm: &Vol, geo: &Geometry) {
    // Metadata area: superblocks, journals, free list, inode table, fine-log redo
    // areas, LAWN descriptor table (all clear). Zone slots hold nothing until a
    // descriptor names them, so they are left as they are.
    pm.zero(PmOff::ZERO, BlockNo(geo.slot_start).off().get());
    pm.flush(PmOff::ZERO, BlockNo(geo.slot_start).off().get());
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
    let slot = encode_inode_static(ROOT_INO, FileKind::Directory, 0);
    pm.write(ioff + 24, &slot[24..]);
    pm.store_u64(ioff + INO_HEAD_OFF, root_page);
    pm.store_u64(ioff + INO_TAIL_OFF, pos.get());
    pm.store_u64(ioff + INO_VALID_OFF, 1);
    pm.flush(ioff, 128);
    crate::freelist::save_freelist(pm, geo, &[(geo.data_start + 1, geo.data_blocks() - 1)]);
    // Fence: root inode, its log and the free list are durable before the superblock
    // that makes the image a mnemofs.
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
