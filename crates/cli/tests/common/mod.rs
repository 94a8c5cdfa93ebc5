//! Helpers for the FUSE integration tests: they run the real `mnemofs` binary as root
//! against /dev/fuse.
#![allow(dead_code)]

pub mod xattr;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_mnemofs")
}

pub fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("run mnemofs")
}

pub struct Env {
    pub dir: tempfile::TempDir,
    pub img: PathBuf,
    pub mnt: PathBuf,
}

pub fn env(size: &str) -> Env {
    env_with(size, &[])
}

/// [`env`], with more `mkfs` flags (e.g. `--cpus 1`).
pub fn env_with(size: &str, mkfs_flags: &[&str]) -> Env {
    assert!(
        Path::new("/dev/fuse").exists(),
        "these tests need /dev/fuse"
    );
    let dir = tempfile::tempdir_in(pm::scratch_dir()).unwrap();
    let img = dir.path().join("img");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mut args = vec!["mkfs", img.to_str().unwrap(), "--size", size];
    args.extend_from_slice(mkfs_flags);
    let o = run(&args);
    assert!(
        o.status.success(),
        "mkfs: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Env { dir, img, mnt }
}

pub fn is_mounted(mnt: &Path) -> bool {
    let m = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let p = mnt.to_str().unwrap();
    m.lines().any(|l| l.split(' ').nth(4) == Some(p))
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Mounts in the background (the command returns once mounted).
pub fn mount(e: &Env) {
    mount_with(e, &[]);
}

/// [`mount`] with more `mnemofs mount` options.
pub fn mount_with(e: &Env, opts: &[&str]) {
    let mut args = vec!["mount", e.img.to_str().unwrap(), e.mnt.to_str().unwrap()];
    args.extend_from_slice(opts);
    let o = run(&args);
    assert!(
        o.status.success(),
        "mount: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(is_mounted(&e.mnt));
}

/// Mounts with `--foreground` as a child process (so a test can kill it).
pub fn mount_foreground(e: &Env) -> Child {
    let c = Command::new(bin())
        .args([
            "mount",
            e.img.to_str().unwrap(),
            e.mnt.to_str().unwrap(),
            "--foreground",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("mount", || is_mounted(&e.mnt));
    c
}

/// Unmounts with fusermount3 -u and waits until the daemon let go of the image.
pub fn unmount(e: &Env) {
    let o = Command::new("fusermount3")
        .arg("-u")
        .arg(&e.mnt)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "fusermount3 -u: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    unmount_wait(e);
}

/// Waits until `e` is unmounted (by whatever means) and its daemon let go of the
/// image.
pub fn unmount_wait(e: &Env) {
    wait_for("unmount", || !is_mounted(&e.mnt));
    // The daemon saves its free list and exits after the kernel lets go.
    wait_for("daemon exit", || {
        let o = run(&["fsck", e.img.to_str().unwrap()]);
        !String::from_utf8_lossy(&o.stderr).contains("in use")
    });
}

pub fn fsck_clean(e: &Env) {
    let o = run(&["fsck", e.img.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "fsck: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

impl Drop for Env {
    fn drop(&mut self) {
        if is_mounted(&self.mnt) {
            let _ = Command::new("fusermount3")
                .arg("-u")
                .arg("-z")
                .arg(&self.mnt)
                .status();
        }
    }
}

/// Runs `cmd` with this build's binary as the mount helper's (`MNEMOFS_BIN`).
pub fn sh(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd)
        .args(args)
        .env("MNEMOFS_BIN", bin())
        .output()
        .unwrap_or_else(|e| panic!("run {cmd}: {e}"))
}

/// Asserts that `o` succeeded, showing its output when not.
pub fn ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Installs the `mount.fuse.mnemofs` helper unless it is there.
pub fn install_mount_helper() {
    if !Path::new("/sbin/mount.fuse.mnemofs").exists() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        ok(
            &sh(
                "bash",
                &[root
                    .join("scripts/install-mount-helper.sh")
                    .to_str()
                    .unwrap()],
            ),
            "install the mount helper",
        );
    }
}

/// Runs `f` in a child process as `uid`/`gid` with no supplementary groups and no
/// capabilities; the child's errno (0 on success).
pub fn as_user(uid: u32, gid: u32, f: impl FnOnce() -> isize) -> i32 {
    // SAFETY: the child only makes system calls (setgroups, setresgid, setresuid,
    // the caller's file calls on strings built before the fork) and leaves with
    // _exit, so it touches no lock another thread of the test may hold.
    unsafe {
        let pid = libc::fork();
        assert!(pid >= 0, "fork");
        if pid == 0 {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(gid, gid, gid) != 0
                || libc::setresuid(uid, uid, uid) != 0
            {
                libc::_exit(126);
            }
            let r = f();
            let code = if r < 0 { *libc::__errno_location() } else { 0 };
            libc::_exit(code);
        }
        let mut status = 0;
        assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
        assert!(libc::WIFEXITED(status));
        libc::WEXITSTATUS(status)
    }
}
