//! MBS-LVM placement on a volume of 4 devices on 4 emulated NUMA nodes: each
//! writer's data lands on its own node's device until that device is full, then on
//! the nearest device with room in distance order, and a device whose blocks are
//! freed is a candidate again.

use mnemofs::{
    mkfs_devices, mount_devices, DeviceSpec, Fs, MkfsOptions, MountOptions, PlacementMode,
    SmallWriteMode, ROOT_INO,
};
use std::path::Path;
use std::sync::Arc;

/// An AMD-like 4-socket matrix: unequal remote distances, so the order matters.
const TOPOLOGY: &str = "nodes=4;cpus=0/0/0/0;dist=10,16,16,22/16,10,22,16/16,22,10,16/22,16,16,10";

fn specs(dir: &Path, with_nodes: bool) -> Vec<DeviceSpec> {
    (0..4)
        .map(|i| DeviceSpec {
            path: dir.join(format!("dev{i}.img")),
            node: with_nodes.then_some(i),
        })
        .collect()
}

fn volume(dir: &Path, size: u64, placement: PlacementMode) -> Fs {
    let opts = MkfsOptions {
        size,
        cpus: 2,
        zone_percent: 0,
        ..Default::default()
    };
    mkfs_devices(&specs(dir, true), &opts).unwrap();
    let m = MountOptions {
        small_write: SmallWriteMode::Cow,
        placement,
        topology: Some(TOPOLOGY.parse().unwrap()),
        lawn_fixed_zone: true,
        ..MountOptions::default()
    };
    // Given in another order and without nodes: the headers put them in place.
    let mut s = specs(dir, false);
    s.reverse();
    mount_devices(&s, &m).unwrap()
}

/// Writes `bytes` to a new file `name` in 64 KiB writes as a thread of `node`.
fn write_file(fs: &Fs, node: u32, name: &str, bytes: usize) -> Result<u64, mnemofs::FsError> {
    pm::set_thread_node(Some(node));
    let a = fs.create(ROOT_INO, name.as_bytes(), 0o644, 0, 0)?;
    let chunk = vec![node as u8 + 1; 64 << 10];
    let mut off = 0;
    while off < bytes {
        fs.write(a.ino, off as u64, &chunk)?;
        off += chunk.len();
    }
    Ok(a.ino)
}

/// The device of each data and log block of `ino`.
fn devices_of(fs: &Fs, ino: u64) -> (Vec<usize>, Vec<usize>) {
    let g = fs.geometry();
    let (data, log) = fs.file_blocks(ino).unwrap();
    (
        data.iter().map(|&b| g.device_of(b)).collect(),
        log.iter().map(|&b| g.device_of(b)).collect(),
    )
}

#[test]
fn eight_writers_on_four_nodes_write_locally() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(volume(dir.path(), 64 << 20, PlacementMode::Local));
    assert_eq!(fs.devices().len(), 4);
    let before = fs.pm_counters();
    let inos: Vec<(u32, u64)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8u32)
            .map(|t| {
                let fs = fs.clone();
                s.spawn(move || {
                    (
                        t % 4,
                        write_file(&fs, t % 4, &format!("f{t}"), 4 << 20).unwrap(),
                    )
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for &(node, ino) in &inos {
        let (data, log) = devices_of(&fs, ino);
        let local = data.iter().filter(|&&d| d == node as usize).count();
        // Exact: every data page of a writer on node n is on device n.
        assert_eq!(
            local,
            data.len(),
            "file of node {node}: data devices {data:?}"
        );
        assert!(
            log.iter().all(|&d| d == node as usize),
            "log devices {log:?}"
        );
        // The inode slot too: in node n's device's inode table.
        assert_eq!(fs.geometry().ino_device(ino), node as usize, "inode {ino}");
    }
    // The counters by (thread node, device node): every thread wrote ≥ 99 % of its
    // bytes to its own node's device (the rest: the root directory's entry for its
    // file, on device 0).
    let c = fs.pm_counters().since(&before);
    for n in 0..4 {
        let row = c.node_bytes[n];
        let total: u64 = row.iter().sum();
        assert!(total >= 8 << 20, "node {n} wrote {total} bytes");
        assert!(
            row[n] * 100 >= total * 99,
            "node {n}: {} of {total} bytes local ({row:?})",
            row[n]
        );
    }
}

#[test]
fn a_full_device_sends_writes_to_the_nearest_with_room_until_space_is_freed() {
    let dir = tempfile::tempdir().unwrap();
    let fs = volume(dir.path(), 16 << 20, PlacementMode::Local);
    // Node 1's candidates by distance: 1, then 0 (16), then 3 (16: ties by index
    // after 0), then 2 (22).
    let mut files = Vec::new();
    let mut k = 0;
    while !fs.fat_devices().contains(&1) {
        files.push(write_file(&fs, 1, &format!("fill{k}"), 256 << 10).unwrap());
        k += 1;
        assert!(
            k < 200,
            "device 1 never filled: {:?}",
            fs.device_free_blocks()
        );
    }
    // Everything so far went to device 1, but the last file's overflow.
    let (data, _) = devices_of(&fs, files[0]);
    assert!(data.iter().all(|&d| d == 1));
    let next = write_file(&fs, 1, "next", 256 << 10).unwrap();
    let (data, _) = devices_of(&fs, next);
    assert!(
        data.iter().all(|&d| d == 0),
        "after device 1 filled: {data:?}"
    );
    assert_eq!(fs.device_free_blocks()[1], 0);
    // Freeing blocks on device 1 puts it back among node 1's candidates.
    fs.unlink(ROOT_INO, b"fill0").unwrap();
    assert!(!fs.fat_devices().contains(&1));
    let back = write_file(&fs, 1, "back", 64 << 10).unwrap();
    let (data, _) = devices_of(&fs, back);
    assert!(
        data.iter().all(|&d| d == 1),
        "after a free on device 1: {data:?}"
    );
    // Single placement fills device 0 whatever node writes; interleave spreads.
    drop(fs);
    let dir = tempfile::tempdir().unwrap();
    let fs = volume(dir.path(), 16 << 20, PlacementMode::Single);
    let f = write_file(&fs, 3, "s", 256 << 10).unwrap();
    assert!(devices_of(&fs, f).0.iter().all(|&d| d == 0));
    drop(fs);
    let dir = tempfile::tempdir().unwrap();
    let fs = volume(dir.path(), 16 << 20, PlacementMode::Interleave);
    let f = write_file(&fs, 3, "i", 1 << 20).unwrap();
    let (data, _) = devices_of(&fs, f);
    for d in 0..4 {
        assert!(data.contains(&d), "interleave missed device {d}: {data:?}");
    }
}

#[test]
fn a_new_file_s_inode_follows_the_placement() {
    let dir = tempfile::tempdir().unwrap();
    let fs = volume(dir.path(), 16 << 20, PlacementMode::Single);
    let g = *fs.geometry();
    // Every later device has an inode table, in proportion to its size.
    assert!((1..4).all(|d| g.dev_inodes[d] > 0), "{:?}", g.dev_inodes);
    for node in 0..4 {
        let ino = write_file(&fs, node, &format!("s{node}"), 4096).unwrap();
        assert_eq!(g.ino_device(ino), 0, "single: every inode on device 0");
    }
    fs.unmount().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = volume(dir.path(), 16 << 20, PlacementMode::Local);
    let g = *fs.geometry();
    // Node 2 fills its device's inode table, then takes the nearest device's
    // (node 2's order: 2, then 0 and 3 at 16, then 1 at 22).
    let mut devs = Vec::new();
    for k in 0..g.dev_inodes[2] + 1 {
        pm::set_thread_node(Some(2));
        let a = fs
            .create(ROOT_INO, format!("n{k}").as_bytes(), 0o644, 0, 0)
            .unwrap();
        devs.push(g.ino_device(a.ino));
    }
    let last = devs.pop().unwrap();
    assert!(devs.iter().all(|&d| d == 2), "{devs:?}");
    assert_eq!(last, 0);
    // They all come back after a remount, and fsck is clean.
    fs.unmount().unwrap();
    let m = MountOptions {
        topology: Some(TOPOLOGY.parse().unwrap()),
        ..MountOptions::default()
    };
    let fs = mount_devices(&specs(dir.path(), false), &m).unwrap();
    for k in 0..=g.dev_inodes[2] {
        fs.lookup(ROOT_INO, format!("n{k}").as_bytes()).unwrap();
    }
    fs.unmount().unwrap();
    assert!(mnemofs::fsck_devices(&specs(dir.path(), false))
        .unwrap()
        .is_clean());
}

#[test]
fn sub_page_writes_take_lawn_slots_on_the_writer_s_node() {
    let dir = tempfile::tempdir().unwrap();
    let opts = MkfsOptions {
        size: 32 << 20,
        cpus: 2,
        ..Default::default()
    };
    mkfs_devices(&specs(dir.path(), true), &opts).unwrap();
    let m = MountOptions {
        small_write: SmallWriteMode::Lawn,
        placement: PlacementMode::Local,
        topology: Some(TOPOLOGY.parse().unwrap()),
        lawn_writeback_thread: false,
        ..MountOptions::default()
    };
    let fs = mount_devices(&specs(dir.path(), false), &m).unwrap();
    let small = vec![7u8; 1024];
    // Each node's file: 16 pages, then one 1 KiB write to each page. The zone's
    // fixed part is on device 0: nodes 1-3 find no slot of their own, and ask for
    // chunks on their nodes, which one pass of the write-back work adds.
    let mut files = Vec::new();
    for node in 0..4u32 {
        let ino = write_file(&fs, node, &format!("l{node}"), 64 << 10).unwrap();
        for p in 0..16u64 {
            fs.write(ino, p * 4096 + 1024, &small).unwrap();
        }
        files.push((node, ino));
    }
    assert!(fs.lawn_resize() >= 3, "no chunk grown for nodes 1-3");
    // From now on every byte a writer stores is on its own node's device: its
    // slots, their descriptors, its pages written in place.
    let before = fs.pm_counters();
    for round in 0..4u64 {
        for &(node, ino) in &files {
            pm::set_thread_node(Some(node));
            for p in 0..16u64 {
                fs.write(ino, p * 4096 + (round % 2) * 2048, &small)
                    .unwrap();
            }
        }
    }
    let c = fs.pm_counters().since(&before);
    let st = fs.stats();
    assert!(st.lawn_zone_writes > 0, "no write went to the zone");
    for n in 0..4 {
        let row = c.node_bytes[n];
        let total: u64 = row.iter().sum();
        assert!(total > 0, "node {n} wrote nothing");
        assert_eq!(row[n], total, "node {n}: {row:?}");
    }
    pm::set_thread_node(None);
}
