//! Volumes of several devices: mount in any order, data across devices survives a
//! clean and an unclean remount, fsck covers every device, bad device lists are
//! refused with a line naming the device, and an image's bytes rebuild its volume.

use mnemofs::{
    fsck_devices, mkfs_anonymous, mkfs_devices, mount_devices, volume_of_image, DeviceSpec, Fs,
    FsError, MkfsOptions, MountOptions, PlacementMode, ROOT_INO,
};
use std::path::Path;

fn specs(dir: &Path, names: &[&str]) -> Vec<DeviceSpec> {
    names
        .iter()
        .map(|n| DeviceSpec {
            path: dir.join(n),
            node: None,
        })
        .collect()
}

fn opts(placement: PlacementMode) -> MountOptions {
    MountOptions {
        placement,
        exclusive: false,
        ..MountOptions::default()
    }
}

fn pattern(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|k| (k * 31 + i * 7) as u8).collect()
}

#[test]
fn a_volume_of_three_devices_keeps_its_files_across_remounts_in_any_order() {
    let dir = tempfile::tempdir().unwrap();
    let all = specs(dir.path(), &["a", "b", "c"]);
    let made = mkfs_devices(
        &all,
        &MkfsOptions {
            size: 16 << 20,
            cpus: 2,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(made.len(), 3);
    let order = specs(dir.path(), &["c", "a", "b"]);
    let fs = mount_devices(&order, &opts(PlacementMode::Interleave)).unwrap();
    assert_eq!(fs.devices().len(), 3);
    assert_eq!(
        fs.devices().iter().map(|d| d.index).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    // Interleave spreads 24 files of 256 KiB over every device.
    let mut inos = Vec::new();
    for i in 0..24 {
        let a = fs
            .create(ROOT_INO, format!("f{i}").as_bytes(), 0o644, 0, 0)
            .unwrap();
        fs.write(a.ino, 0, &pattern(i, 256 << 10)).unwrap();
        inos.push(a.ino);
    }
    let g = *fs.geometry();
    let mut used = [false; 3];
    for &ino in &inos {
        for b in fs.file_blocks(ino).unwrap().0 {
            used[g.device_of(b)] = true;
        }
    }
    assert_eq!(used, [true, true, true]);
    // Their inode slots too, round robin: each device's inode table holds some.
    let mut slots = [0; 3];
    for &ino in &inos {
        slots[g.ino_device(ino)] += 1;
    }
    assert_eq!(slots, [8, 8, 8]);
    let check = |fs: &Fs| {
        for i in 0..24 {
            let a = fs.lookup(ROOT_INO, format!("f{i}").as_bytes()).unwrap();
            let mut buf = vec![0u8; 256 << 10];
            assert_eq!(fs.read(a.ino, 0, &mut buf).unwrap(), buf.len());
            assert!(buf == pattern(i, 256 << 10), "file {i} differs");
        }
    };
    fs.unmount().unwrap();
    assert!(fsck_devices(&order).unwrap().is_clean());
    // Clean remount, another order; then a crash (no unmount) and recovery.
    let fs = mount_devices(
        &specs(dir.path(), &["b", "c", "a"]),
        &opts(PlacementMode::Local),
    )
    .unwrap();
    check(&fs);
    let a = fs.create(ROOT_INO, b"late", 0o644, 0, 0).unwrap();
    fs.write(a.ino, 0, &pattern(99, 100 << 10)).unwrap();
    drop(fs);
    let r = fsck_devices(&all).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
    let fs = mount_devices(&all, &opts(PlacementMode::Single)).unwrap();
    check(&fs);
    let a = fs.lookup(ROOT_INO, b"late").unwrap();
    let mut buf = vec![0u8; 100 << 10];
    fs.read(a.ino, 0, &mut buf).unwrap();
    assert!(buf == pattern(99, 100 << 10));
    let st = fs.stats();
    assert_eq!(st.devices.len(), 3);
    assert_eq!(
        st.devices.iter().map(|d| d.free_blocks).sum::<u64>(),
        st.free_blocks
    );
    fs.unmount().unwrap();
}

#[test]
fn missing_foreign_and_repeated_devices_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let o = MkfsOptions {
        size: 12 << 20,
        cpus: 1,
        ..Default::default()
    };
    mkfs_devices(&specs(dir.path(), &["a", "b"]), &o).unwrap();
    mkfs_devices(&specs(dir.path(), &["x", "y"]), &o).unwrap();
    let err = |names: &[&str]| match mount_devices(
        &specs(dir.path(), names),
        &opts(PlacementMode::Local),
    ) {
        Err(FsError::Volume(m)) => m,
        Err(e) => panic!("{names:?}: not a volume error: {e}"),
        Ok(_) => panic!("{names:?} mounted"),
    };
    assert!(
        err(&["a"]).contains("device 1 of volume"),
        "{}",
        err(&["a"])
    );
    assert!(err(&["b"]).contains("device 0 of volume"));
    assert!(err(&["a", "y"]).contains("belongs to another volume"));
    assert!(err(&["a", "b", "a"]).contains("given twice"));
    std::fs::copy(dir.path().join("b"), dir.path().join("b2")).unwrap();
    assert!(err(&["a", "b", "b2"]).contains("both device 1"));
    assert!(mkfs_devices(&specs(dir.path(), &["new", "a"]), &o).is_err());
    assert!(
        !dir.path().join("new").exists(),
        "a refused mkfs created a device"
    );
    assert!(fsck_devices(&specs(dir.path(), &["x"])).is_err());
}

#[test]
fn an_image_of_a_volume_rebuilds_it() {
    let mut v = mkfs_anonymous(
        &[512 << 10, 260 << 10],
        &MkfsOptions {
            size: 0,
            cpus: 1,
            inodes: 64,
            ..Default::default()
        },
    )
    .unwrap();
    let img = v.to_vec();
    let v2 = volume_of_image(&img).unwrap();
    assert_eq!(v2.device_count(), 2);
    let fs = Fs::from_volume(v2, &opts(PlacementMode::Interleave)).unwrap();
    let a = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
    fs.write(a.ino, 0, &pattern(1, 64 << 10)).unwrap();
    fs.unmount().unwrap();
    let r = mnemofs::fsck::fsck_volume_private(volume_of_image(&img).unwrap()).unwrap();
    assert!(r.is_clean(), "{:?}", r.problems);
}

#[test]
fn a_damaged_device_table_is_repaired_from_its_replica_and_both_damaged_refused() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let all = specs(dir.path(), &["a", "b"]);
    let o = MkfsOptions {
        size: 12 << 20,
        cpus: 1,
        ..Default::default()
    };
    mkfs_devices(&all, &o).unwrap();
    let poke = |at: u64| {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("a"))
            .unwrap();
        f.write_all_at(&[0xff], at).unwrap();
    };
    let table = mnemofs::format::TABLE_OFF;
    poke(table + 30);
    let r = fsck_devices(&all).unwrap();
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert!(r.problems[0].contains("primary device table"));
    mount_devices(&all, &opts(PlacementMode::Local))
        .unwrap()
        .unmount()
        .unwrap();
    assert!(fsck_devices(&all).unwrap().is_clean());
    poke(table + 30);
    poke(4096 + table + 30);
    match mount_devices(&all, &opts(PlacementMode::Local)) {
        Err(FsError::Volume(m)) => assert!(m.contains("device table"), "{m}"),
        Err(e) => panic!("not a volume error: {e}"),
        Ok(_) => panic!("mounted with both device tables damaged"),
    }
}

#[test]
fn a_device_table_whose_inode_table_does_not_fit_its_device_is_refused() {
    use mnemofs::format::{DeviceTable, TABLE_OFF};
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let all = specs(dir.path(), &["a", "b"]);
    let o = MkfsOptions {
        size: 12 << 20,
        cpus: 2,
        ..Default::default()
    };
    mkfs_devices(&all, &o).unwrap();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.path().join("a"))
        .unwrap();
    let mut b = vec![0u8; 256];
    f.read_exact_at(&mut b, TABLE_OFF).unwrap();
    let good = DeviceTable::decode(&b).unwrap().unwrap();
    assert!(good.devices[1].inodes > 0, "{good:?}");
    for (inodes, what) in [(u32::MAX - 1, "leaves fewer data blocks"), (3, "multiple")] {
        let mut t = good.clone();
        t.devices[1].inodes = inodes;
        for at in [TABLE_OFF, 4096 + TABLE_OFF] {
            f.write_all_at(&t.encode(), at).unwrap();
        }
        match mount_devices(&all, &opts(PlacementMode::Local)) {
            Err(FsError::Corrupt(m)) => assert!(m.contains(what), "{m}"),
            Err(e) => panic!("not a corruption error: {e}"),
            Ok(_) => panic!("mounted with {inodes} inodes on device 1"),
        }
        assert!(fsck_devices(&all).is_err() || !fsck_devices(&all).unwrap().is_clean());
    }
}
