//! Scenario: the file-system label through the mount — `mkfs --label`, then
//! FS_IOC_GETFSLABEL / FS_IOC_SETFSLABEL on any file of the mount (as btrfs and xfs
//! take them), `mnemofs stat` showing it, CAP_SYS_ADMIN needed to change it, and the
//! change kept across a remount.

mod common;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;

const GET: libc::c_ulong = 0x8100_9431;
const SET: libc::c_ulong = 0x4100_9432;

fn ioctl_label(p: &Path, req: libc::c_ulong, label: &[u8]) -> Result<Vec<u8>, i32> {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    let mut buf = [0u8; 256];
    buf[..label.len()].copy_from_slice(label);
    // SAFETY: both ioctls take a 256-byte buffer, valid for the call.
    let r = unsafe { libc::ioctl(fd, req, buf.as_mut_ptr()) };
    let err = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
    if r < 0 {
        return Err(err);
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(256);
    Ok(buf[..end].to_vec())
}

#[test]
fn label_through_the_mount() {
    let e = common::env_with("64M", &["--label", "pm-data"]);
    std::fs::set_permissions(
        e.dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    common::mount(&e);
    assert_eq!(ioctl_label(&e.mnt, GET, b"").unwrap(), b"pm-data");
    let stat = common::run(&["stat", e.mnt.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&stat.stdout).contains("label         pm-data"));
    assert_eq!(ioctl_label(&e.mnt, SET, b"scratch").unwrap(), b"scratch");
    assert_eq!(ioctl_label(&e.mnt, GET, b"").unwrap(), b"scratch");
    // Any file of the mount answers for the file system.
    std::fs::write(e.mnt.join("f"), b"x").unwrap();
    assert_eq!(ioctl_label(&e.mnt.join("f"), GET, b"").unwrap(), b"scratch");
    // Without CAP_SYS_ADMIN: EPERM (as btrfs and xfs).
    std::fs::set_permissions(&e.mnt, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let helper = std::process::Command::new("sh")
        .arg("-c")
        .arg("exec python3 -c 'import fcntl,os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); fcntl.ioctl(fd, 0x41009432, b\"x\" + bytes(255))' \"$1\"")
        .arg("sh")
        .arg(&e.mnt)
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert!(!helper.status.success(), "a user changed the label");
    assert!(
        String::from_utf8_lossy(&helper.stderr).contains("Operation not permitted"),
        "{}",
        String::from_utf8_lossy(&helper.stderr)
    );
    common::unmount(&e);
    common::fsck_clean(&e);
    common::mount(&e);
    assert_eq!(ioctl_label(&e.mnt, GET, b"").unwrap(), b"scratch");
    common::unmount(&e);

    // mkfs refuses a label that does not fit, in one line.
    let o = common::run(&[
        "mkfs",
        e.img.to_str().unwrap(),
        "--force",
        "--label",
        &"x".repeat(256),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1);
}
