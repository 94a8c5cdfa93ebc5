//! Scenario: `fstrim` on a mnemofs mount (FITRIM through FUSE) gives the memory of
//! deleted files back: a DRAM-backed image shrinks by what they held, live files
//! read back unchanged, the result is reported as Linux file systems report it, a
//! user without CAP_SYS_ADMIN is refused, and a range shorter than a block is EINVAL.

mod common;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::process::Command;

fn allocated(p: &std::path::Path) -> u64 {
    std::fs::metadata(p).unwrap().blocks() * 512
}

#[test]
fn fstrim_shrinks_a_dram_backed_image() {
    let e = common::env("256M");
    std::fs::set_permissions(
        e.dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    common::mount(&e);
    let kept: Vec<u8> = (0..(2u32 << 20)).map(|i| (i % 251) as u8).collect();
    std::fs::write(e.mnt.join("keep"), &kept).unwrap();
    std::fs::write(e.mnt.join("big"), vec![0x5au8; 96 << 20]).unwrap();
    std::fs::remove_file(e.mnt.join("big")).unwrap();
    let before = allocated(&e.img);

    let o = Command::new("fstrim")
        .arg("-v")
        .arg(&e.mnt)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "fstrim: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let said = String::from_utf8_lossy(&o.stdout).to_string();
    // "DIR: 96 MiB (100663296 bytes) trimmed"
    let bytes: u64 = said
        .split('(')
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("fstrim printed {said:?}"));
    assert!(bytes >= 96 << 20, "{said}");
    let after = allocated(&e.img);
    assert!(
        before - after >= 90 << 20,
        "the image's allocation went from {before} to {after} bytes"
    );
    assert!(std::fs::read(e.mnt.join("keep")).unwrap() == kept);

    // Not for users without CAP_SYS_ADMIN.
    std::fs::set_permissions(&e.mnt, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = Command::new("fstrim")
        .arg(&e.mnt)
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert!(!o.status.success(), "fstrim as nobody succeeded");

    // A range shorter than a block is EINVAL, as on ext4 and XFS (xfstests
    // generic/288).
    for len in ["0", "100"] {
        let o = Command::new("fstrim")
            .args(["-o", "0", "-l", len])
            .arg(&e.mnt)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains("Invalid argument"),
            "fstrim -l {len}: {err}"
        );
    }

    common::unmount(&e);
    common::fsck_clean(&e);
}
