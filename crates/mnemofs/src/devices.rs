//! The devices of a volume (MBS-LVM's cluster manager): parsing `PATH[@NODE]` lists,
//! creating devices with their headers (mkfs) and assembling a volume from devices
//! given in any order (mount, fsck), refusing a missing, foreign or duplicated one
//! with a line that names it. Formats: docs/FORMAT.md §2.10 (`format::device`).

use crate::addr::{PmOff, BLOCK};
use crate::error::{FsError, Result};
use crate::format::{
    uuid_text, DeviceHeader, DeviceTable, DEV_HDR_OFF, DEV_HDR_SIZE, MAX_DEVICES, NODE_UNKNOWN,
    TABLE_OFF,
};
use crate::vol::Vol;
use pm::{Pm, Volume};
use std::path::{Path, PathBuf};

/// One device as the user names it: a path, and the NUMA node if given
/// (`PATH@NODE`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSpec {
    /// Image file or DAX device.
    pub path: PathBuf,
    /// NUMA node given explicitly.
    pub node: Option<u32>,
}

impl DeviceSpec {
    /// Parses `PATH[@NODE][,PATH[@NODE]...]`.
    pub fn parse_list(s: &str) -> Result<Vec<DeviceSpec>> {
        let mut out = Vec::new();
        for item in s.split(',') {
            if item.is_empty() {
                return Err(FsError::Volume(format!(
                    "empty device name in `{s}` (devices are separated by single commas)"
                )));
            }
            let (path, node) = match item.rsplit_once('@') {
                Some((p, n))
                    if !p.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) =>
                {
                    let node = n
                        .parse::<u32>()
                        .ok()
                        .filter(|&n| (n as usize) < pm::MAX_NODES);
                    match node {
                        Some(v) => (p, Some(v)),
                        None => {
                            return Err(FsError::Volume(format!(
                                "{item}: NUMA node `{n}` is not in 0..{}",
                                pm::MAX_NODES
                            )))
                        }
                    }
                }
                _ => (item, None),
            };
            out.push(DeviceSpec {
                path: PathBuf::from(path),
                node,
            });
        }
        if out.len() > MAX_DEVICES {
            return Err(FsError::Volume(format!(
                "{} devices given; a volume joins at most {MAX_DEVICES}",
                out.len()
            )));
        }
        Ok(out)
    }
}

/// A device of an assembled volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Where it was opened.
    pub path: PathBuf,
    /// Its index in the volume.
    pub index: u32,
    /// Its NUMA node: given (`@NODE`), else from sysfs, else recorded at mkfs.
    pub node: Option<u32>,
    /// Its blocks in the global space.
    pub blocks: u64,
    /// Its first global block.
    pub start: u64,
}

/// An assembled volume and its devices in index order.
pub(crate) struct Assembled {
    pub volume: Volume,
    pub devices: Vec<DeviceInfo>,
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino() && x.rdev() == y.rdev(),
        _ => a == b,
    }
}

/// Refuses a device named twice (two paths to one file included).
fn refuse_repeats(specs: &[DeviceSpec]) -> Result<()> {
    for (i, a) in specs.iter().enumerate() {
        for b in &specs[..i] {
            if same_file(&a.path, &b.path) {
                return Err(FsError::Volume(format!(
                    "{} is given twice (as {})",
                    a.path.display(),
                    b.path.display()
                )));
            }
        }
    }
    Ok(())
}

/// The header of a device, read from its own block 0 (outside any global space).
fn read_header(pm: &mut Pm) -> Result<std::result::Result<Option<DeviceHeader>, String>> {
    if pm.len() < BLOCK {
        return Ok(Ok(None));
    }
    let mut b = [0u8; DEV_HDR_SIZE];
    Vol::with_borrowed(pm, |v| v.read(PmOff::ZERO + DEV_HDR_OFF, &mut b))?;
    Ok(DeviceHeader::decode(&b))
}

/// The node of a device: given, else what sysfs says, else what mkfs recorded.
fn node_of(spec: &DeviceSpec, recorded: u32) -> Option<u32> {
    spec.node
        .or_else(|| pm::device_node(&spec.path, Path::new("/sys")))
        .or((recorded != NODE_UNKNOWN).then_some(recorded))
}

/// Opens the devices named by `specs` (any order) and joins them into the volume
/// their headers describe. One device without a header is an image of an older
/// format (or not a mnemofs image, which recovery then says).
pub(crate) fn open(specs: &[DeviceSpec], lock: bool) -> Result<Assembled> {
    if specs.is_empty() {
        return Err(FsError::Volume("no device given".into()));
    }
    refuse_repeats(specs)?;
    let mut found: Vec<(DeviceSpec, Pm, DeviceHeader)> = Vec::with_capacity(specs.len());
    for spec in specs {
        let mut pm = Pm::open(&spec.path, lock)?;
        let shown = spec.path.display();
        match read_header(&mut pm)? {
            Ok(Some(h)) => found.push((spec.clone(), pm, h)),
            Ok(None) if specs.len() == 1 => {
                let len = pm.len();
                return Ok(Assembled {
                    volume: Volume::single(pm),
                    devices: vec![DeviceInfo {
                        path: spec.path.clone(),
                        index: 0,
                        node: node_of(spec, NODE_UNKNOWN),
                        blocks: len / BLOCK,
                        start: 0,
                    }],
                });
            }
            Ok(None) => {
                return Err(FsError::Volume(format!(
                    "{shown} is not a device of a mnemofs volume (no device header)"
                )))
            }
            Err(e) => return Err(FsError::Volume(format!("{shown}: {e}"))),
        }
    }
    // The volume is the one device 0 belongs to (else the first device's).
    let reference = found
        .iter()
        .find(|(_, _, h)| h.index == 0)
        .unwrap_or(&found[0])
        .2;
    let uuid = reference.uuid;
    let count = reference.count as usize;
    for (spec, _, h) in &found {
        if h.uuid != uuid {
            return Err(FsError::Volume(format!(
                "{} belongs to another volume ({}, not {})",
                spec.path.display(),
                uuid_text(&h.uuid),
                uuid_text(&uuid)
            )));
        }
        if h.count as usize != count {
            return Err(FsError::Volume(format!(
                "{} says volume {} has {} devices, device 0 says {count}",
                spec.path.display(),
                uuid_text(&uuid),
                h.count
            )));
        }
    }
    let mut slots: Vec<Option<(DeviceSpec, Pm, DeviceHeader)>> = (0..count).map(|_| None).collect();
    for (spec, pm, h) in found {
        let i = h.index as usize;
        if let Some((other, _, _)) = &slots[i] {
            return Err(FsError::Volume(format!(
                "{} and {} are both device {i} of volume {} (a copy of one device?)",
                other.path.display(),
                spec.path.display(),
                uuid_text(&uuid)
            )));
        }
        slots[i] = Some((spec, pm, h));
    }
    if let Some(missing) = slots.iter().position(|s| s.is_none()) {
        return Err(FsError::Volume(format!(
            "device {missing} of volume {} ({count} devices) is missing: give all {count}",
            uuid_text(&uuid)
        )));
    }
    let mut parts = Vec::with_capacity(count);
    let mut devices = Vec::with_capacity(count);
    let mut start = 0u64;
    for (spec, pm, h) in slots.into_iter().flatten() {
        let skip = if h.index == 0 { 0 } else { BLOCK };
        let len = h.blocks.checked_mul(BLOCK);
        if len
            .and_then(|l| l.checked_add(skip))
            .is_none_or(|end| end > pm.len())
        {
            return Err(FsError::Volume(format!(
                "{}: device {} holds {} bytes, its header says {} blocks (truncated?)",
                spec.path.display(),
                h.index,
                pm.len(),
                h.blocks
            )));
        }
        devices.push(DeviceInfo {
            path: spec.path.clone(),
            index: h.index,
            node: node_of(&spec, h.node),
            blocks: h.blocks,
            start,
        });
        start = start.saturating_add(h.blocks);
        parts.push((pm, skip, len.unwrap_or(0)));
    }
    let volume = Volume::from_parts(parts)?;
    // The table beside the superblock must name the same volume.
    let vol = Vol::from_volume(volume);
    // Primary, else replica (recovery reports and repairs a bad copy).
    let table = match read_table(&vol, TABLE_OFF) {
        Ok(Some(t)) => Ok(Some(t)),
        first => match read_table(&vol, BLOCK.saturating_add(TABLE_OFF)) {
            Ok(Some(t)) => Ok(Some(t)),
            _ => first,
        },
    }
    .map_err(|e| FsError::Volume(format!("{}: {e}", devices[0].path.display())))?;
    match table {
        Some(t) if t.uuid == uuid => {}
        Some(t) => {
            return Err(FsError::Volume(format!(
                "{}: device table names volume {}, the device headers {}",
                devices[0].path.display(),
                uuid_text(&t.uuid),
                uuid_text(&uuid)
            )))
        }
        None => {
            return Err(FsError::Volume(format!(
                "{}: device 0 has no device table",
                devices[0].path.display()
            )))
        }
    }
    Ok(Assembled {
        volume: vol.into_volume(),
        devices,
    })
}

/// The device table at byte `at` of the global space (block 0 or its replica).
pub(crate) fn read_table(vol: &Vol, at: u64) -> std::result::Result<Option<DeviceTable>, String> {
    let n = crate::format::table_size(MAX_DEVICES);
    if vol.len() < at.saturating_add(n as u64) {
        return Ok(None);
    }
    let mut b = vec![0u8; n];
    vol.read(PmOff::ZERO + at, &mut b);
    DeviceTable::decode(&b)
}

/// A device's block 0 holding header `h` (the rest zero).
fn header_block(h: &DeviceHeader) -> Vec<u8> {
    let mut block = vec![0u8; BLOCK as usize];
    block[DEV_HDR_OFF as usize..DEV_HDR_OFF as usize + DEV_HDR_SIZE].copy_from_slice(&h.encode());
    block
}

/// A fresh volume UUID.
pub(crate) fn new_uuid() -> [u8; 16] {
    let mut u = [0u8; 16];
    // SAFETY: `getrandom` writes at most `u.len()` bytes into the buffer it is given.
    let n = unsafe { libc::getrandom(u.as_mut_ptr().cast(), u.len(), 0) };
    if n != u.len() as isize {
        // No kernel randomness: time and process id still tell volumes apart.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        u.copy_from_slice(&(t ^ (std::process::id() as u128) << 96).to_le_bytes());
    }
    u
}

/// Creates (or reuses, at their size) the devices of a new volume of `specs`
/// (image files of `size` bytes each; a DAX device keeps its own size), writes the
/// header of every device after the first (device 0's goes in with the
/// superblock, by `mkfs::format`) and joins them. Refuses a device that already
/// holds a mnemofs unless `force`.
pub(crate) fn create(
    specs: &[DeviceSpec],
    size: u64,
    force: bool,
) -> Result<(Volume, Vec<DeviceInfo>, [u8; 16])> {
    if specs.is_empty() {
        return Err(FsError::Volume("no device given".into()));
    }
    refuse_repeats(specs)?;
    let count = specs.len() as u32;
    let uuid = new_uuid();
    // Every device is checked before any is created or changed.
    for spec in specs {
        if !force {
            if let Ok(mut existing) = Pm::open(&spec.path, false) {
                let mut scratch = Vec::new();
                let sb = Vol::with_borrowed(&mut existing, |v| {
                    crate::recovery::read_superblock(v, &mut scratch).is_ok()
                })?;
                if sb || matches!(read_header(&mut existing)?, Ok(Some(_))) {
                    return Err(FsError::AlreadyFormatted {
                        path: spec.path.clone(),
                    });
                }
            }
        }
    }
    let mut pms = Vec::with_capacity(specs.len());
    for spec in specs {
        pms.push(Pm::create(&spec.path, size)?);
    }
    let mut parts = Vec::with_capacity(pms.len());
    let mut devices = Vec::with_capacity(pms.len());
    let mut start = 0u64;
    for (i, (spec, mut pm)) in specs.iter().zip(pms).enumerate() {
        let skip = if i == 0 { 0 } else { BLOCK };
        let blocks = pm.len().saturating_sub(skip) / BLOCK;
        if blocks == 0 {
            return Err(FsError::Volume(format!(
                "{}: {} bytes hold no block after the device header",
                spec.path.display(),
                pm.len()
            )));
        }
        let node = node_of(spec, NODE_UNKNOWN);
        let header = DeviceHeader {
            uuid,
            index: i as u32,
            count,
            node: node.unwrap_or(NODE_UNKNOWN),
            blocks,
        };
        if i > 0 {
            // The header block is outside the global space: written here, through
            // the device alone.
            Vol::with_borrowed(&mut pm, |v| {
                v.zero(PmOff::ZERO, BLOCK);
                v.write(PmOff::ZERO + DEV_HDR_OFF, &header.encode());
                v.flush(PmOff::ZERO, BLOCK);
                // Fence: the header is durable before mkfs goes on (a volume whose
                // superblock exists always has every device's header).
                v.fence();
            })?;
        }
        devices.push(DeviceInfo {
            path: spec.path.clone(),
            index: i as u32,
            node,
            blocks,
            start,
        });
        start = start.saturating_add(blocks);
        parts.push((pm, skip, blocks.saturating_mul(BLOCK)));
    }
    Ok((Volume::from_parts(parts)?, devices, uuid))
}

/// The volume whose global space is `img` (a copy of `Volume::to_vec`, e.g. a crash
/// image): anonymous devices cut as the device table in `img` says, every later
/// device's header rewritten from it. An image without a table, or with one device,
/// is one anonymous device.
pub fn volume_of_image(img: &[u8]) -> Result<Volume> {
    let n = crate::format::table_size(MAX_DEVICES);
    let table = img
        .get(TABLE_OFF as usize..TABLE_OFF as usize + n)
        .map(DeviceTable::decode)
        .and_then(|t| t.ok())
        .flatten();
    let Some(t) = table.filter(|t| t.devices.len() > 1) else {
        let mut pm = Pm::anonymous(img.len() as u64)?;
        pm.load_image(img);
        return Ok(Volume::single(pm));
    };
    let count = t.devices.len() as u32;
    let mut parts = Vec::with_capacity(t.devices.len());
    for (i, d) in t.devices.iter().enumerate() {
        let skip = if i == 0 { 0 } else { BLOCK };
        let len = d
            .blocks
            .checked_mul(BLOCK)
            .ok_or_else(|| FsError::Volume(format!("device {i} of the image is too large")))?;
        let mut pm = Pm::anonymous(len.saturating_add(skip))?;
        if i > 0 {
            pm.load_image(&header_block(&DeviceHeader {
                uuid: t.uuid,
                index: i as u32,
                count,
                node: d.node,
                blocks: d.blocks,
            }));
        }
        parts.push((pm, skip, len));
    }
    let mut v = Volume::from_parts(parts)?;
    if (v.len() as usize) < img.len() {
        return Err(FsError::Volume(format!(
            "the image's device table covers {} bytes, the image is {}",
            v.len(),
            img.len()
        )));
    }
    v.load_image(img);
    Ok(v)
}

/// Formats anonymous devices of `sizes` bytes as one volume (tests and the crash
/// explorer; every device on node 0). Deterministic: the UUID comes from the
/// superblock.
pub fn mkfs_anonymous(sizes: &[u64], opts: &crate::MkfsOptions) -> Result<Volume> {
    if sizes.is_empty() || sizes.len() > MAX_DEVICES {
        return Err(FsError::Volume(format!(
            "{} devices (a volume has 1..={MAX_DEVICES})",
            sizes.len()
        )));
    }
    let mut parts = Vec::with_capacity(sizes.len());
    let mut blocks = Vec::with_capacity(sizes.len());
    for (i, &size) in sizes.iter().enumerate() {
        let skip = if i == 0 { 0 } else { BLOCK };
        let b = size.saturating_sub(skip) / BLOCK;
        if b == 0 {
            return Err(FsError::Volume(format!(
                "device {i}: {size} bytes hold no block"
            )));
        }
        parts.push((Pm::anonymous(size)?, skip, b.saturating_mul(BLOCK)));
        blocks.push(b);
    }
    let mut volume = Volume::from_parts(parts)?;
    let geo = crate::mkfs::volume_geometry(
        volume.len(),
        &blocks,
        opts.cpus.max(1),
        opts,
        crate::mkfs::MKFS_PM_MIN,
    )?;
    let uuid = crate::mkfs::uuid_of(&geo);
    let table = DeviceTable {
        uuid,
        devices: blocks
            .iter()
            .zip(geo.dev_inodes)
            .map(|(&b, inodes)| crate::format::DeviceEntry {
                blocks: b,
                node: 0,
                inodes: inodes as u32,
            })
            .collect(),
    };
    // Later devices' headers: outside the global space, through each device.
    for (i, &b) in blocks.iter().enumerate().skip(1) {
        let h = DeviceHeader {
            uuid,
            index: i as u32,
            count: blocks.len() as u32,
            node: 0,
            blocks: b,
        };
        if let Some(pm) = volume.device_mut(i) {
            pm.load_image(&header_block(&h));
        }
    }
    let vol = Vol::from_volume(volume);
    crate::mkfs::format(&vol, &geo, &table, &[]);
    Ok(vol.into_volume())
}

/// A volume's devices mapped by someone other than its mount — a cluster client
/// that writes file data straight into them (DESIGN.md §7) — without locking them,
/// with the volume's UUID to check against the metadata server's.
pub fn open_shared(specs: &[DeviceSpec]) -> Result<(Volume, Vec<DeviceInfo>, Option<[u8; 16]>)> {
    let a = open(specs, false)?;
    let vol = Vol::from_volume(a.volume);
    let uuid = read_table(&vol, TABLE_OFF).ok().flatten().map(|t| t.uuid);
    Ok((vol.into_volume(), a.devices, uuid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_with_nodes_and_refuse_garbage() {
        let v = DeviceSpec::parse_list("/a.img@1,/b.img,/c@d.img").unwrap();
        assert_eq!(v[0].node, Some(1));
        assert_eq!(v[1].node, None);
        assert_eq!(v[2].path, PathBuf::from("/c@d.img"));
        assert!(DeviceSpec::parse_list("/a,,/b").is_err());
        assert!(DeviceSpec::parse_list("/a@99").is_err());
        assert!(DeviceSpec::parse_list("").is_err());
        let nine = ["/x"; 9].join(",");
        assert!(DeviceSpec::parse_list(&nine).is_err());
    }
}
