//! Scenario: the default preset's `auto` modes. The read cache and LAWN are taken on
//! PM and left off over DRAM; the medium is told at mount (a latency profile, an
//! image file, a DAX device measured) unless the mount names it. Each way is forced
//! here, so the suite does not depend on the host's memory; what a mount chose, and
//! why, is in its stats. Data written under one medium's modes reads back under the
//! other's (LAWN's zone is written back by a mount without LAWN).

mod common;
use mnemofs::{Medium, MountOptions, ROOT_INO};

fn full(medium: Option<Medium>, profile: pm::PmProfile) -> MountOptions {
    let p = mnemofs::PRESETS
        .iter()
        .find(|p| p.name == mnemofs::DEFAULT_PRESET)
        .unwrap();
    MountOptions {
        exclusive: false,
        medium,
        pm_profile: profile,
        ..MountOptions::from_preset(p)
    }
}

#[test]
fn auto_modes_follow_the_medium_each_way() {
    let img = common::fresh(64 << 20);
    let cases = [
        // An image file on the scratch directory, no profile: DRAM, told by the mapping.
        (
            None,
            pm::PmProfile::DRAM,
            "cow",
            "off",
            "dram: an image file",
        ),
        // A latency profile is PM.
        (
            None,
            pm::PmProfile::OPTANE,
            "lawn",
            "rcache",
            "pm: latency profile optane",
        ),
        // Named by the mount, either way, whatever the profile.
        (
            Some(Medium::Pm),
            pm::PmProfile::DRAM,
            "lawn",
            "rcache",
            "pm as the mount said",
        ),
        (
            Some(Medium::Dram),
            pm::PmProfile::OPTANE,
            "cow",
            "off",
            "dram as the mount said",
        ),
    ];
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    for (i, (medium, profile, sw, rc, why)) in cases.into_iter().enumerate() {
        let fs = mnemofs::mount(&img.path, &full(medium, profile)).unwrap();
        let st = fs.stats();
        assert_eq!(
            (st.small_write_mode.as_str(), st.read_cache_mode.as_str()),
            (sw, rc),
            "case {i}: {}",
            st.medium
        );
        assert!(st.medium.starts_with(why), "case {i}: {}", st.medium);
        assert_eq!(st.read_cache_bytes > 0, rc == "rcache", "case {i}");
        // A sub-page write under these modes; every earlier case's file reads back.
        let name = format!("f{i}");
        let ino = fs
            .create(ROOT_INO, name.as_bytes(), 0o644, 0, 0)
            .unwrap()
            .ino;
        fs.write(ino, 0, &data).unwrap();
        fs.write(ino, 100, &[7u8; 300]).unwrap();
        for j in 0..=i {
            let ino = fs.lookup(ROOT_INO, format!("f{j}").as_bytes()).unwrap().ino;
            let mut buf = vec![0u8; data.len()];
            assert_eq!(fs.read(ino, 0, &mut buf).unwrap(), data.len());
            let mut want = data.clone();
            want[100..400].fill(7);
            assert_eq!(buf, want, "case {i}: file f{j}");
        }
        fs.unmount().unwrap();
    }
}
