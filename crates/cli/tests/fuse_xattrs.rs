//! Scenario: the same sequence of xattr calls (set, get, size query, list, remove;
//! flags, namespaces, name lengths, symlinks, directories) on a tmpfs directory and on
//! a mnemofs mount gives the same results and errnos, values of Linux's largest size
//! included; the attributes survive a remount.

mod common;
use common::xattr::{get, list, remove, set};
use std::path::Path;

/// The sequence, in `dir`; every call's outcome, in order.
fn sequence(dir: &Path) -> Vec<String> {
    let f = dir.join("f");
    std::fs::write(&f, b"data").unwrap();
    let d = dir.join("d");
    std::fs::create_dir(&d).unwrap();
    let l = dir.join("l");
    std::os::unix::fs::symlink("f", &l).unwrap();
    let long = [b"user.".to_vec(), vec![b'n'; 251]].concat();
    let mut out = Vec::new();
    let mut log = |what: &str, r: String| out.push(format!("{what}: {r}"));
    log("get missing", format!("{:?}", get(&f, b"user.a", 100)));
    log("set", format!("{:?}", set(&f, b"user.a", b"one", 0, true)));
    log(
        "create existing",
        format!("{:?}", set(&f, b"user.a", b"x", libc::XATTR_CREATE, true)),
    );
    log(
        "replace missing",
        format!("{:?}", set(&f, b"user.b", b"x", libc::XATTR_REPLACE, true)),
    );
    log(
        "replace",
        format!(
            "{:?}",
            set(&f, b"user.a", b"three", libc::XATTR_REPLACE, true)
        ),
    );
    log("size query", format!("{:?}", get(&f, b"user.a", 0)));
    log("short buffer", format!("{:?}", get(&f, b"user.a", 2)));
    log("get", format!("{:?}", get(&f, b"user.a", 100)));
    log(
        "empty value",
        format!("{:?}", set(&f, b"user.empty", b"", 0, true)),
    );
    log("get empty", format!("{:?}", get(&f, b"user.empty", 100)));
    log(
        "trusted",
        format!("{:?}", set(&f, b"trusted.t", b"tv", 0, true)),
    );
    log(
        "security",
        format!("{:?}", set(&f, b"security.s", b"sv", 0, true)),
    );
    log(
        "unknown namespace",
        format!("{:?}", set(&f, b"bogus.x", b"x", 0, true)),
    );
    log("long name", format!("{:?}", set(&f, &long, b"x", 0, true)));
    log("list", format!("{:?}", list(&f)));
    log(
        "user on symlink",
        format!("{:?}", set(&l, b"user.a", b"x", 0, false)),
    );
    log(
        "trusted on symlink",
        format!("{:?}", set(&l, b"trusted.a", b"x", 0, false)),
    );
    log(
        "user on dir",
        format!("{:?}", set(&d, b"user.d", b"dv", 0, true)),
    );
    log("get dir", format!("{:?}", get(&d, b"user.d", 100)));
    log("remove", format!("{:?}", remove(&f, b"user.a")));
    log("remove again", format!("{:?}", remove(&f, b"user.a")));
    log("get removed", format!("{:?}", get(&f, b"user.a", 100)));
    log("list after", format!("{:?}", list(&f)));
    // Linux's largest value (64 KiB), on a file and a directory; one byte more is
    // refused by the kernel.
    let big: Vec<u8> = (0..65536u32).map(|i| (i * 7 + i / 251) as u8).collect();
    log(
        "largest value",
        format!("{:?}", set(&f, b"trusted.big", &big, 0, true)),
    );
    log(
        "get largest",
        format!("{:?}", get(&f, b"trusted.big", 65536).map(|v| v == big)),
    );
    log(
        "size of largest",
        format!("{:?}", get(&f, b"trusted.big", 0)),
    );
    log(
        "largest on dir",
        format!("{:?}", set(&d, b"user.big", &big[..40000], 0, true)),
    );
    log(
        "get largest on dir",
        format!(
            "{:?}",
            get(&d, b"user.big", 65536).map(|v| v == big[..40000])
        ),
    );
    let more = [big.as_slice(), b"x"].concat();
    log(
        "one byte more",
        format!("{:?}", set(&f, b"trusted.big2", &more, 0, true)),
    );
    out
}

#[test]
fn xattr_calls_match_tmpfs() {
    let tmp = tempfile::tempdir_in(pm::scratch_dir()).unwrap();
    let want = sequence(tmp.path());
    let e = common::env("64M");
    common::mount(&e);
    let got = sequence(&e.mnt);
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(g, w, "mnemofs vs tmpfs");
    }
    assert_eq!(got.len(), want.len());
    common::unmount(&e);
    common::fsck_clean(&e);
    common::mount(&e);
    let f = e.mnt.join("f");
    assert_eq!(get(&f, b"trusted.t", 100), Ok(b"tv".to_vec()));
    assert_eq!(get(&e.mnt.join("d"), b"user.d", 100), Ok(b"dv".to_vec()));
    assert_eq!(get(&f, b"user.a", 100), Err(libc::ENODATA));
    assert_eq!(get(&f, b"trusted.big", 65536).map(|v| v.len()), Ok(65536));
    common::unmount(&e);
}
