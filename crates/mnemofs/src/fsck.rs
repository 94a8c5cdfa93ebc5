//! fsck: checks an image without changing it.
//!
//! The image is copied into private memory and recovery runs on the copy in its
//! collecting mode (every problem is named, nothing stops at the first), so fsck sees
//! exactly the state a mount would produce — an image left by a crash is checked as
//! it will be after recovery — and the original is never written.

use crate::acl;
use crate::error::{FsError, Result};
use crate::recovery::{self, Mode};
use crate::types::FileKind;
use crate::vol::Vol;
use pm::Pm;
use serde::Serialize;
use std::path::Path;

/// What fsck found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FsckReport {
    /// One line per problem, naming what is wrong and where.
    pub problems: Vec<String>,
    /// Live inodes.
    pub inodes: u64,
    /// Live directories.
    pub directories: u64,
    /// Live regular files.
    pub files: u64,
    /// Log pages of the live inodes.
    pub log_pages: u64,
    /// Data pages of the live inodes.
    pub data_pages: u64,
    /// Free data blocks after recovery.
    pub free_blocks: u64,
    /// Whether the image was cleanly unmounted.
    pub clean_unmount: bool,
    /// Valid LAWN descriptors (runs of zone slices).
    pub lawn_runs: u64,
}

impl self::FsckReport {
    /// Whether fsck found no problem.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the image at `path`. `Err` means the input is unusable (missing, not a
/// mnemofs, both superblocks bad, in use by a mount); problems inside a mnemofs are
/// listed in the report.
pub fn fsck(path: &Path) -> Result<FsckReport> {
    fsck_devices(&[crate::devices::DeviceSpec {
        path: path.to_path_buf(),
        node: None,
    }])
}

/// Checks the volume of the devices `specs` names (any order; on a private copy).
pub fn fsck_devices(specs: &[crate::devices::DeviceSpec]) -> Result<FsckReport> {
    let a = crate::devices::open(specs, true)?;
    let copy = a.volume.clone_anonymous().map_err(FsError::from)?;
    fsck_vol(&Vol::from_volume(copy))
}

/// Checks a mapped region (on a private copy).
pub fn fsck_pm(pm: &Pm) -> Result<FsckReport> {
    let mut copy = pm.clone_anonymous().map_err(FsError::from)?;
    fsck_private(&mut copy)
}

/// Checks a region that is already a private copy: recovery runs on it and changes
/// it (the crash explorer's copies; nobody else may use `pm` afterwards).
pub fn fsck_private(pm: &mut Pm) -> Result<FsckReport> {
    Vol::with_borrowed(pm, fsck_vol)?
}

/// Checks a volume that is already a private copy (the crash explorer's; recovery
/// runs on it and changes it).
pub fn fsck_volume_private(v: pm::Volume) -> Result<FsckReport> {
    fsck_vol(&Vol::from_volume(v))
}

/// Checks a volume that is already a private copy (recovery changes it).
pub(crate) fn fsck_vol(pm: &Vol) -> Result<FsckReport> {
    let rec = recovery::recover(pm, Mode::Fsck, true)?;
    let (loaded, subs) = (rec.loaded, rec.subs);
    let mut r = FsckReport {
        lawn_runs: subs.iter().map(|z| z.runs() as u64).sum(),
        problems: loaded.problems,
        inodes: loaded.states.len() as u64,
        log_pages: loaded.log_pages,
        data_pages: loaded.data_pages,
        free_blocks: loaded.free.iter().map(|x| x.1).sum(),
        clean_unmount: loaded.clean,
        ..Default::default()
    };
    let mut inos: Vec<_> = loaded.states.keys().copied().collect();
    inos.sort_unstable();
    for ino in inos {
        let Some(s) = loaded.states.get(&ino) else {
            continue;
        };
        // The engine leaves an ACL it cannot decode alone (no inheritance, no
        // chmod rewrite) and the kernel refuses it: name it here.
        for (name, (value, _)) in &s.xattrs {
            let shown = name.escape_ascii();
            // Values span entries only from version 9 (a SET and continuations).
            let max = if loaded.geo.large_xattrs {
                crate::format::XATTR_SIZE_MAX
            } else {
                crate::format::XATTR_VALUE_MAX
            };
            if value.len() > max {
                r.problems.push(format!(
                    "inode {ino}: {shown} has a value of {} bytes (at most {max})",
                    value.len()
                ));
            }
            if !acl::is_acl_name(name) {
                continue;
            }
            if acl::Acl::decode(value).is_err() {
                r.problems
                    .push(format!("inode {ino}: {shown} is not a valid POSIX ACL"));
            } else if name == acl::ACL_DEFAULT && s.kind != FileKind::Directory {
                r.problems.push(format!(
                    "inode {ino}: {shown} on a file that is not a directory"
                ));
            }
        }
    }
    // The label (version 8): a crash leaves at least one copy whole (mount makes
    // the other whole again); both damaged is corruption.
    if loaded.geo.flags_and_label {
        let whole = [0, crate::format::SB_REPLICA_BLOCK].iter().any(|&b| {
            let mut buf = [0u8; crate::format::LABEL_SIZE];
            pm.read(
                crate::addr::BlockNo(b).at(crate::format::SB_LABEL_OFF),
                &mut buf,
            );
            crate::format::decode_label(&buf).is_some()
        });
        if !whole {
            r.problems
                .push("superblock: both copies of the label are damaged".to_string());
        }
    }
    for s in loaded.states.values() {
        match s.kind {
            FileKind::Directory => r.directories += 1,
            FileKind::Regular => r.files += 1,
            _ => {}
        }
    }
    Ok(r)
}
