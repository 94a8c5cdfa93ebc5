//! Scenario: bad input gets a one-line error naming the problem and a non-zero exit,
//! never a panic or a backtrace.

mod common;
use std::process::Output;

fn one_line_error(o: &Output, needle: &str) {
    assert!(!o.status.success(), "expected failure");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(
        err.to_lowercase().contains(needle),
        "'{needle}' not in: {err}"
    );
}

#[test]
fn bad_inputs_are_refused_cleanly() {
    let e = common::env("64M");
    let d = e.dir.path();
    let s = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let mnt = s(&e.mnt);

    // Missing image.
    one_line_error(
        &common::run(&["mount", &s(&d.join("missing")), &mnt]),
        "no such file",
    );
    one_line_error(
        &common::run(&["fsck", &s(&d.join("missing"))]),
        "no such file",
    );

    // 64 MiB of random bytes.
    let junk = d.join("junk");
    let mut x = 0x9e3779b97f4a7c15u64;
    let bytes: Vec<u8> = (0..64 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&junk, bytes).unwrap();
    one_line_error(&common::run(&["mount", &s(&junk), &mnt]), "not a mnemofs");
    let o = common::run(&["fsck", &s(&junk)]);
    assert_eq!(o.status.code(), Some(2));
    one_line_error(&o, "not a mnemofs");

    // Both superblocks corrupted.
    let bad = d.join("bad");
    std::fs::copy(&e.img, &bad).unwrap();
    let mut b = std::fs::read(&bad).unwrap();
    b[20] ^= 0xff;
    b[4096 + 20] ^= 0xff;
    std::fs::write(&bad, b).unwrap();
    one_line_error(&common::run(&["mount", &s(&bad), &mnt]), "superblock");
    let o = common::run(&["fsck", &s(&bad)]);
    assert_eq!(o.status.code(), Some(2));

    // Mountpoint that does not exist, or is not an empty directory.
    one_line_error(
        &common::run(&["mount", &s(&e.img), &s(&d.join("nodir"))]),
        "does not exist",
    );
    let full = d.join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("x"), b"x").unwrap();
    one_line_error(&common::run(&["mount", &s(&e.img), &s(&full)]), "not empty");
    one_line_error(
        &common::run(&["mount", &s(&e.img), &s(&junk)]),
        "not a directory",
    );

    // A cluster benchmark's unknown network placement (refused before anything
    // starts).
    let o = common::run(&["bench", "cluster", "--net", "wan", "--duration", "1"]);
    assert_eq!(o.status.code(), Some(2));
    one_line_error(&o, "--net wan: loopback or netns");

    // A scaling sweep to zero threads, and one with too few rounds.
    let o = common::run(&["bench", "scale", "--workload", "dwom", "--threads", "0"]);
    assert_eq!(o.status.code(), Some(2));
    one_line_error(&o, "--threads must be at least 1");
    let o = common::run(&["bench", "scale", "--workload", "dwom", "--rounds", "2"]);
    assert_eq!(o.status.code(), Some(2));
    one_line_error(&o, "--rounds must be at least 3");

    // mkfs below the minimum size, and over an existing mnemofs.
    one_line_error(
        &common::run(&["mkfs", &s(&d.join("tiny")), "--size", "1M"]),
        "minimum",
    );
    one_line_error(
        &common::run(&["mkfs", &s(&e.img), "--size", "64M"]),
        "--force",
    );

    // Image already served by another daemon: a second daemon (`--foreground`
    // serves in this process) is refused; a plain second mount shares the first
    // (tests/fuse_second_mount.rs).
    common::mount(&e);
    let other = d.join("other");
    std::fs::create_dir(&other).unwrap();
    one_line_error(
        &common::run(&["mount", &s(&e.img), &s(&other), "--foreground"]),
        "mounted",
    );
    common::unmount(&e);
}
