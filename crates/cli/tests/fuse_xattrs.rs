//! Scenario: the same sequence of xattr calls (set, get, size query, list, remove;
//! flags, namespaces, name lengths, symlinks, directories) on a tmpfs directory and on
//! a mnemofs mount gives the same results and errnos; the attributes survive a
//! remount.

mod common;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn cn(n: &[u8]) -> CString {
    CString::new(n).unwrap()
}

/// Result of a call: the value it returned, or the errno.
fn res(r: isize) -> Result<isize, i32> {
    if r < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(r)
    }
}

fn set(p: &Path, n: &[u8], v: &[u8], flags: i32, follow: bool) -> Result<isize, i32> {
    let (p, n) = (c(p), cn(n));
    // SAFETY: valid NUL-terminated strings and a buffer of v.len() bytes.
    let r = unsafe {
        if follow {
            libc::setxattr(p.as_ptr(), n.as_ptr(), v.as_ptr().cast(), v.len(), flags)
        } else {
            libc::lsetxattr(p.as_ptr(), n.as_ptr(), v.as_ptr().cast(), v.len(), flags)
        }
    };
    res(r as isize)
}

fn get(p: &Path, n: &[u8], size: usize) -> Result<Vec<u8>, i32> {
    let (p, n) = (c(p), cn(n));
    let mut buf = vec![0u8; size];
    // SAFETY: valid strings; buf holds `size` bytes (a size query when 0).
    let r = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), size) };
    let n = res(r)?;
    if size == 0 {
        return Ok(n.to_string().into_bytes());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

fn list(p: &Path) -> Result<Vec<Vec<u8>>, i32> {
    let p = c(p);
    let mut buf = vec![0u8; 64 << 10];
    // SAFETY: valid string; buf holds its length.
    let r = unsafe { libc::listxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    let n = res(r)? as usize;
    let mut v: Vec<Vec<u8>> = buf[..n]
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        // Security modules may add their own labels; compare what the test set.
        .filter(|s| !s.starts_with(b"security.selinux"))
        .map(|s| s.to_vec())
        .collect();
    v.sort();
    Ok(v)
}

fn remove(p: &Path, n: &[u8]) -> Result<isize, i32> {
    let (p, n) = (c(p), cn(n));
    // SAFETY: valid strings.
    res(unsafe { libc::removexattr(p.as_ptr(), n.as_ptr()) } as isize)
}

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
    out
}

#[test]
fn xattr_calls_match_tmpfs() {
    let tmp = tempfile::tempdir_in("/dev/shm").unwrap();
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
    common::unmount(&e);
}
