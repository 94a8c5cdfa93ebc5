//! Scenario: `O_TMPFILE` and statx's birth time through a mount behave as on tmpfs
//! (same calls, same results and errnos): an unnamed file is made in a directory,
//! written, given a name with `linkat` (through `/proc/self/fd` and with
//! `AT_EMPTY_PATH`) or not when opened `O_EXCL`, takes the group of a set-group-ID
//! directory, and is refused where Linux refuses it; `statx` reports a birth time
//! that writes and attribute changes leave alone. What was linked survives a
//! remount, what was not is gone, and fsck is clean. (fuser 0.18 does not decode
//! these requests; the mount serves them with its own request loop.)

mod common;
use common::xattr::c;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// open(2): the descriptor, or the errno (negative).
fn open(p: &Path, flags: i32, mode: u32) -> i32 {
    let cp = c(p);
    // SAFETY: a valid NUL-terminated path.
    let fd = unsafe { libc::open(cp.as_ptr(), flags, mode) };
    if fd < 0 {
        -errno()
    } else {
        fd
    }
}

fn close(fd: i32) {
    // SAFETY: `fd` is a descriptor this test opened.
    unsafe { libc::close(fd) };
}

/// linkat(2) of `fd`'s file to `to`: through /proc/self/fd (AT_SYMLINK_FOLLOW) or
/// with AT_EMPTY_PATH; 0 or the errno.
fn link_fd(fd: i32, to: &Path, empty_path: bool) -> i32 {
    let dst = c(to);
    let r = if empty_path {
        let empty = c(Path::new(""));
        // SAFETY: valid descriptor and NUL-terminated paths.
        unsafe {
            libc::linkat(
                fd,
                empty.as_ptr(),
                libc::AT_FDCWD,
                dst.as_ptr(),
                libc::AT_EMPTY_PATH,
            )
        }
    } else {
        let src = c(Path::new(&format!("/proc/self/fd/{fd}")));
        // SAFETY: valid NUL-terminated paths.
        unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                src.as_ptr(),
                libc::AT_FDCWD,
                dst.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        }
    };
    if r == 0 {
        0
    } else {
        errno()
    }
}

fn write(fd: i32, b: &[u8]) -> isize {
    // SAFETY: `b` is valid for its length.
    unsafe { libc::write(fd, b.as_ptr().cast(), b.len()) }
}

fn fstat(fd: i32) -> libc::stat {
    // SAFETY: a zeroed stat is a valid out-buffer; `fd` is open.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        assert_eq!(libc::fstat(fd, &mut st), 0);
        st
    }
}

/// statx(2) asking for everything: the mask and the birth time.
fn statx(p: &Path) -> (u32, libc::statx_timestamp) {
    let cp = c(p);
    // SAFETY: a zeroed statx is a valid out-buffer; the path is NUL-terminated.
    unsafe {
        let mut sx: libc::statx = std::mem::zeroed();
        let r = libc::statx(
            libc::AT_FDCWD,
            cp.as_ptr(),
            0,
            libc::STATX_ALL | libc::STATX_BTIME,
            &mut sx,
        );
        assert_eq!(r, 0, "statx {p:?}: {}", errno());
        (sx.stx_mask, sx.stx_btime)
    }
}

fn ts(t: libc::statx_timestamp) -> (i64, u32) {
    (t.tv_sec, t.tv_nsec)
}

/// The sequence in `dir`; every outcome, in order.
fn sequence(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut log = |what: &str, r: String| out.push(format!("{what}: {r}"));
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let d = dir.join("d");
    std::fs::create_dir(&d).unwrap();

    // An unnamed file, written, then named.
    let fd = open(&d, libc::O_TMPFILE | libc::O_RDWR, 0o666);
    log("O_TMPFILE", (fd >= 0).to_string());
    let st = fstat(fd);
    log(
        "unnamed",
        format!("nlink {} mode {:o}", st.st_nlink, st.st_mode),
    );
    log("write", write(fd, b"unnamed data").to_string());
    log(
        "listed before link",
        std::fs::read_dir(&d).unwrap().count().to_string(),
    );
    log(
        "linkat /proc/self/fd",
        link_fd(fd, &d.join("named"), false).to_string(),
    );
    log("nlink after", fstat(fd).st_nlink.to_string());
    log(
        "content",
        format!("{:?}", std::fs::read(d.join("named")).unwrap()),
    );
    log(
        "a second name",
        link_fd(fd, &d.join("named2"), true).to_string(),
    );
    log("nlink", fstat(fd).st_nlink.to_string());
    close(fd);

    // O_EXCL: never linkable; closed, it is gone.
    let fd = open(&d, libc::O_TMPFILE | libc::O_RDWR | libc::O_EXCL, 0o600);
    log("O_TMPFILE|O_EXCL", (fd >= 0).to_string());
    log("write", write(fd, &[7u8; 10000]).to_string());
    log(
        "linkat of O_EXCL",
        link_fd(fd, &d.join("never"), false).to_string(),
    );
    close(fd);
    // Unnamed and closed: gone (not listed).
    let fd = open(&d, libc::O_TMPFILE | libc::O_WRONLY, 0o600);
    log("write-only", (fd >= 0).to_string());
    close(fd);
    let mut names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    log("names", names.join(","));

    // Refusals: read-only, in a file, in a missing directory, a name taken.
    log(
        "O_TMPFILE|O_RDONLY",
        open(&d, libc::O_TMPFILE | libc::O_RDONLY, 0o600).to_string(),
    );
    log(
        "in a file",
        open(&d.join("named"), libc::O_TMPFILE | libc::O_RDWR, 0o600).to_string(),
    );
    log(
        "in a missing directory",
        open(&d.join("nope"), libc::O_TMPFILE | libc::O_RDWR, 0o600).to_string(),
    );
    let fd = open(&d, libc::O_TMPFILE | libc::O_RDWR, 0o600);
    log(
        "onto a taken name",
        link_fd(fd, &d.join("named"), false).to_string(),
    );
    close(fd);
    // Without write permission on the directory.
    let ro = dir.join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let cro = c(&ro);
    log(
        "as a user, a directory without write",
        common::as_user(65534, 65534, move || {
            // SAFETY: a valid NUL-terminated path.
            unsafe { libc::open(cro.as_ptr(), libc::O_TMPFILE | libc::O_RDWR, 0o600) as isize }
        })
        .to_string(),
    );
    // A set-group-ID directory gives its group.
    let sg = dir.join("sg");
    std::fs::create_dir(&sg).unwrap();
    std::os::unix::fs::chown(&sg, None, Some(4242)).unwrap();
    std::fs::set_permissions(&sg, std::fs::Permissions::from_mode(0o2777)).unwrap();
    let fd = open(&sg, libc::O_TMPFILE | libc::O_RDWR, 0o640);
    log(
        "group in a set-group-ID directory",
        fstat(fd).st_gid.to_string(),
    );
    close(fd);

    // statx: a birth time, which writes and attribute changes leave alone.
    let f = d.join("f");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    std::fs::write(&f, b"x").unwrap();
    let (mask, born) = statx(&f);
    log(
        "statx btime in mask",
        (mask & libc::STATX_BTIME != 0).to_string(),
    );
    log(
        "btime now",
        (born.tv_sec >= before - 1 && born.tv_sec <= before + 5).to_string(),
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&f, b"more").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::rename(&f, d.join("g")).unwrap();
    let (_, after) = statx(&d.join("g"));
    log("btime kept", (ts(after) == ts(born)).to_string());
    let m = std::fs::metadata(d.join("g")).unwrap();
    log(
        "btime before ctime",
        ((born.tv_sec, born.tv_nsec as i64) < (m.ctime(), m.ctime_nsec())).to_string(),
    );
    let (dmask, _) = statx(&d);
    log(
        "a directory's",
        (dmask & libc::STATX_BTIME != 0).to_string(),
    );
    out
}

#[test]
fn tmpfile_and_statx_match_tmpfs() {
    // SAFETY: umask has no preconditions.
    unsafe { libc::umask(0o022) };
    let tmp = tempfile::tempdir_in(pm::scratch_dir()).unwrap();
    let want = sequence(tmp.path());
    let e = common::env("64M");
    std::fs::set_permissions(e.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    common::mount(&e);
    let got = sequence(&e.mnt);
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(g, w, "mnemofs vs tmpfs");
    }
    assert_eq!(got.len(), want.len());
    let (_, born) = statx(&e.mnt.join("d/g"));
    common::unmount(&e);
    common::fsck_clean(&e);
    common::mount(&e);
    let d = e.mnt.join("d");
    assert_eq!(std::fs::read(d.join("named")).unwrap(), b"unnamed data");
    assert_eq!(std::fs::metadata(d.join("named")).unwrap().nlink(), 2);
    assert_eq!(
        ts(statx(&d.join("g")).1),
        ts(born),
        "birth time after a remount"
    );
    let mut names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["g", "named", "named2"]);
    common::unmount(&e);
    common::fsck_clean(&e);
}
