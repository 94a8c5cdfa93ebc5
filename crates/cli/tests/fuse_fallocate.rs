//! Scenario: the same fallocate sequence (zero-range inside, across and past the end
//! of a file, with and without KEEP_SIZE; punch-hole; allocation) on ext4 and on a
//! mnemofs mount gives the same return values, sizes and contents.

mod common;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::process::Command;

/// Runs the sequence on a file in `dir`; every step's outcome.
fn sequence(dir: &Path) -> Vec<String> {
    let p = dir.join("f");
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8 + 1).collect();
    std::fs::write(&p, &data).unwrap();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&p)
        .unwrap();
    let fd = f.as_raw_fd();
    let mut out = Vec::new();
    let steps: [(&str, i32, i64, i64); 7] = [
        ("zero inside", libc::FALLOC_FL_ZERO_RANGE, 1000, 5000),
        ("zero whole pages", libc::FALLOC_FL_ZERO_RANGE, 4096, 4096),
        (
            "zero past end, keep size",
            libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
            9000,
            10_000,
        ),
        ("zero past end", libc::FALLOC_FL_ZERO_RANGE, 12_000, 4096),
        (
            "punch",
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            100,
            200,
        ),
        (
            "punch and zero",
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE,
            0,
            10,
        ),
        ("allocate", 0, 20_000, 100),
    ];
    for (what, mode, off, len) in steps {
        // SAFETY: fallocate on an open descriptor.
        let r = unsafe { libc::fallocate(fd, mode, off, len) };
        let e = if r < 0 {
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
        } else {
            0
        };
        let now = std::fs::read(&p).unwrap();
        let sum = now.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
            (h ^ x as u64).wrapping_mul(0x100_0000_01b3)
        });
        let zeros = now.iter().filter(|&&b| b == 0).count();
        out.push(format!(
            "{what}: ret {r} errno {e} size {} zeros {zeros} hash {sum:016x}",
            now.len()
        ));
    }
    out
}

#[test]
fn fallocate_modes_match_ext4() {
    let e = common::env("64M");
    // ext4 on a loop device.
    let ext4 = e.dir.path().join("ext4.img");
    let emnt = e.dir.path().join("ext4");
    std::fs::create_dir(&emnt).unwrap();
    let f = std::fs::File::create(&ext4).unwrap();
    f.set_len(64 << 20).unwrap();
    drop(f);
    let ok = |c: &mut Command| {
        let o = c.output().unwrap();
        assert!(
            o.status.success(),
            "{c:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    ok(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&ext4));
    ok(Command::new("mount")
        .args(["-o", "loop"])
        .arg(&ext4)
        .arg(&emnt));
    let want = sequence(&emnt);
    ok(Command::new("umount").arg(&emnt));

    common::mount(&e);
    let got = sequence(&e.mnt);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "mnemofs vs ext4");
    }
    assert_eq!(got.len(), want.len());
    common::unmount(&e);
    common::fsck_clean(&e);
}
