//! Scenario: inode flags (`chattr`/`lsattr`: FS_IOC_GETFLAGS/SETFLAGS) are kept
//! across remounts and enforced as Linux file systems enforce them — immutable files
//! and directories change in no way, append-only files take only appends and keep
//! their names, append-only directories take new names only. The same sequence of
//! calls runs on tmpfs (which has these flags) and on a mnemofs mount, and every
//! result and errno must match.

mod common;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const FS_IOC_GETFLAGS: libc::c_ulong = 0x8008_6601;
const FS_IOC_SETFLAGS: libc::c_ulong = 0x4008_6602;
const IMMUTABLE: i32 = 0x10;
const APPEND: i32 = 0x20;
const NODUMP: i32 = 0x40;
const NOATIME: i32 = 0x80;
/// FS_COMPR_FL: a flag neither file system keeps.
const COMPR: i32 = 0x4;

type R = Result<i64, i32>;

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn res(r: i64) -> R {
    if r < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(r)
    }
}

fn open(p: &Path, flags: i32) -> R {
    // SAFETY: a valid NUL-terminated path; the descriptor is closed at once.
    let fd = unsafe { libc::open(c(p).as_ptr(), flags | libc::O_CLOEXEC, 0o644) };
    if fd >= 0 {
        // SAFETY: `fd` is ours.
        unsafe { libc::close(fd) };
    }
    res(fd as i64).map(|_| 0)
}

/// Opens `p` (read-only, or a directory) and runs an ioctl with an int argument.
fn flags_ioctl(p: &Path, req: libc::c_ulong, v: i32) -> R {
    // SAFETY: as in `open`.
    let fd = unsafe { libc::open(c(p).as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    res(fd as i64)?;
    let mut x: libc::c_int = v;
    // SAFETY: both flag ioctls take a pointer to an int, valid for the call.
    let r = unsafe { libc::ioctl(fd, req, &mut x as *mut libc::c_int) };
    let r = res(r as i64);
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
    r.map(|_| i64::from(x))
}

fn setflags(p: &Path, f: i32) -> R {
    flags_ioctl(p, FS_IOC_SETFLAGS, f).map(|_| 0)
}

fn getflags(p: &Path) -> R {
    // The flags both keep (tmpfs may report others of its own).
    flags_ioctl(p, FS_IOC_GETFLAGS, 0).map(|f| f & i64::from(IMMUTABLE | APPEND | NODUMP | NOATIME))
}

fn write_append(p: &Path, data: &[u8]) -> R {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(p)
        .and_then(|mut f| f.write_all(data))
        .map(|_| 0)
        .map_err(|e| e.raw_os_error().unwrap_or(0))
}

/// utimes(2) with NULL (`now`) or with chosen times.
fn utimes(p: &Path, now: bool) -> R {
    let t = [libc::timeval {
        tv_sec: 1_000_000_000,
        tv_usec: 0,
    }; 2];
    let times = if now { std::ptr::null() } else { t.as_ptr() };
    // SAFETY: a valid NUL-terminated path; `times` is NULL or two timevals.
    res(unsafe { libc::utimes(c(p).as_ptr(), times) } as i64)
}

/// ctime of `p` (seconds, nanoseconds).
fn ctime(p: &Path) -> (i64, i64) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).unwrap();
    (m.ctime(), m.ctime_nsec())
}

fn io<T>(r: std::io::Result<T>) -> R {
    r.map(|_| 0).map_err(|e| e.raw_os_error().unwrap_or(0))
}

/// The calls and their results on the file system mounted at `root`.
fn sequence(root: &Path) -> Vec<(String, R)> {
    let mut out = Vec::new();
    let mut step = |what: &str, r: R| out.push((what.to_string(), r));
    let d = root.join("t");
    std::fs::create_dir(&d).unwrap();
    let f = d.join("f");
    std::fs::write(&f, b"data").unwrap();
    std::fs::write(d.join("other"), b"x").unwrap();

    // Immutable.
    step("set i", setflags(&f, IMMUTABLE));
    step("get", getflags(&f));
    step("open wr", open(&f, libc::O_WRONLY));
    step("open rdwr", open(&f, libc::O_RDWR));
    step("open rd", open(&f, libc::O_RDONLY));
    step("read", io(std::fs::read(&f)));
    step("append", write_append(&f, b"more"));
    step("unlink", io(std::fs::remove_file(&f)));
    step("rename", io(std::fs::rename(&f, d.join("g"))));
    step("rename onto", io(std::fs::rename(d.join("other"), &f)));
    step("link", io(std::fs::hard_link(&f, d.join("h"))));
    step(
        "chmod",
        io(std::fs::set_permissions(
            &f,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )),
    );
    step("chown", io(std::os::unix::fs::chown(&f, Some(1), None)));
    step("truncate", {
        // SAFETY: a valid NUL-terminated path.
        res(unsafe { libc::truncate(c(&f).as_ptr(), 1) } as i64)
    });
    step(
        "utimes",
        io(std::fs::File::open(&f).and_then(|x| x.set_modified(std::time::SystemTime::now()))),
    );
    step("setxattr", {
        let n = CString::new("user.a").unwrap();
        // SAFETY: valid NUL-terminated path and name, a 1-byte value.
        res(
            unsafe { libc::setxattr(c(&f).as_ptr(), n.as_ptr(), b"v".as_ptr().cast(), 1, 0) }
                as i64,
        )
    });
    step("unsupported flag", setflags(&f, IMMUTABLE | COMPR));
    step("get", getflags(&f));
    step("utimes now", utimes(&f, true));

    // Append-only.
    step("set a", setflags(&f, APPEND));
    step("get", getflags(&f));
    step("open wr", open(&f, libc::O_WRONLY));
    step(
        "open wr|trunc|append",
        open(&f, libc::O_WRONLY | libc::O_TRUNC | libc::O_APPEND),
    );
    step("append", write_append(&f, b"more"));
    step(
        "read",
        io(std::fs::read(&f)).map(|_| std::fs::read(&f).unwrap().len() as i64),
    );
    step("truncate", {
        // SAFETY: a valid NUL-terminated path.
        res(unsafe { libc::truncate(c(&f).as_ptr(), 1) } as i64)
    });
    // Linux's may_setattr: times set to now (utimes with NULL) pass on an
    // append-only file; chosen times do not.
    step("utimes now", utimes(&f, true));
    step("utimes chosen", utimes(&f, false));
    step("unlink", io(std::fs::remove_file(&f)));
    step(
        "chmod",
        io(std::fs::set_permissions(
            &f,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )),
    );
    step("set none", setflags(&f, 0));
    step("get", getflags(&f));
    // A change of flags is a change of the inode: its ctime moves, and `stat` right
    // after shows it (the kernel's cached attributes are dropped).
    let before = ctime(&f);
    std::thread::sleep(std::time::Duration::from_millis(20));
    step("set d A", setflags(&f, NODUMP | NOATIME));
    step("ctime moved", Ok(i64::from(ctime(&f) > before)));
    step("get", getflags(&f));
    step("unlink", io(std::fs::remove_file(&f)));

    // Directories.
    let sub = d.join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("x"), b"x").unwrap();
    step("dir set i", setflags(&sub, IMMUTABLE));
    step("dir create", io(std::fs::write(sub.join("y"), b"y")));
    step("dir unlink", io(std::fs::remove_file(sub.join("x"))));
    step("dir mkdir", io(std::fs::create_dir(sub.join("z"))));
    step(
        "dir rename in",
        io(std::fs::rename(d.join("other"), sub.join("o"))),
    );
    step("rmdir", io(std::fs::remove_dir(&sub)));
    step("dir set a", setflags(&sub, APPEND));
    step("dir create", io(std::fs::write(sub.join("y"), b"y")));
    step("dir unlink", io(std::fs::remove_file(sub.join("x"))));
    step(
        "dir rename out",
        io(std::fs::rename(sub.join("y"), d.join("y"))),
    );
    step("dir set none", setflags(&sub, 0));
    step("dir unlink", io(std::fs::remove_file(sub.join("x"))));

    // Who may: a user without CAP_LINUX_IMMUTABLE cannot set immutable, even on
    // a file of its own (the kernel's check, against the flags we report).
    let mine = d.join("mine");
    std::fs::write(&mine, b"m").unwrap();
    std::os::unix::fs::chown(&mine, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(root, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = std::process::Command::new("chattr")
        .arg("+i")
        .arg(&mine)
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    step(
        "chattr +i as its owner",
        if o.status.success() { Ok(0) } else { Err(1) },
    );
    step("get", getflags(&mine));
    out
}

use std::os::unix::process::CommandExt;

#[test]
fn inode_flags_match_tmpfs_and_persist() {
    let e = common::env("64M");
    std::fs::set_permissions(
        e.dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    // tmpfs first.
    let t = e.dir.path().join("tmpfs");
    std::fs::create_dir(&t).unwrap();
    let m = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "none", t.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(m.success());
    let want = sequence(&t);
    let _ = std::process::Command::new("umount").arg(&t).status();
    // The sequence is not vacuous: most of its changes are refused.
    let eperm = want.iter().filter(|(_, r)| *r == Err(libc::EPERM)).count();
    assert!(eperm >= 20, "tmpfs refused only {eperm} calls: {want:?}");

    common::mount(&e);
    let got = sequence(&e.mnt);
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(w, g, "tmpfs (left) and mnemofs (right) differ");
    }
    assert_eq!(want.len(), got.len());
    // The flags outlive a remount.
    let keep = e.mnt.join("t/kept");
    std::fs::write(&keep, b"k").unwrap();
    setflags(&keep, APPEND | NODUMP).unwrap();
    common::unmount(&e);
    common::fsck_clean(&e);
    common::mount(&e);
    assert_eq!(getflags(&keep), Ok(i64::from(APPEND | NODUMP)));
    assert_eq!(open(&keep, libc::O_WRONLY), Err(libc::EPERM));
    setflags(&keep, 0).unwrap();
    std::fs::remove_file(&keep).unwrap();
    common::unmount(&e);
    common::fsck_clean(&e);
}
