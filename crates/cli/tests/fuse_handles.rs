//! Scenario: a file handle from name_to_handle_at opens the file with
//! open_by_handle_at after the kernel has dropped its cached inodes (the export path
//! that NFS and overlayfs's index use), and a deleted file's handle is stale.

mod common;
use std::ffi::CString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::{AsRawFd, FromRawFd};

/// A `file_handle` with room for a FUSE handle (nodeid + generation).
#[repr(C)]
struct Handle {
    bytes: u32,
    kind: i32,
    data: [u8; 64],
}

fn handle_of(path: &std::path::Path) -> Handle {
    let mut h = Handle {
        bytes: 64,
        kind: 0,
        data: [0; 64],
    };
    let mut mount_id = 0;
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid path and a handle buffer of `bytes` data bytes.
    let r = unsafe {
        libc::name_to_handle_at(
            libc::AT_FDCWD,
            p.as_ptr(),
            (&mut h as *mut Handle).cast(),
            &mut mount_id,
            0,
        )
    };
    assert_eq!(
        r,
        0,
        "name_to_handle_at: {}",
        std::io::Error::last_os_error()
    );
    h
}

fn open_by(mount: &std::fs::File, h: &mut Handle) -> Result<std::fs::File, i32> {
    // SAFETY: a valid mount descriptor and a handle name_to_handle_at filled.
    let fd = unsafe {
        libc::open_by_handle_at(mount.as_raw_fd(), (h as *mut Handle).cast(), libc::O_RDONLY)
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

fn drop_caches() {
    std::fs::write("/proc/sys/vm/drop_caches", b"2").unwrap();
}

#[test]
fn handles_open_files_after_the_kernel_forgot_them() {
    let e = common::env("64M");
    common::mount(&e);
    std::fs::create_dir(e.mnt.join("d")).unwrap();
    let p = e.mnt.join("d/f");
    std::fs::write(&p, b"by handle").unwrap();
    let gone = e.mnt.join("d/g");
    std::fs::write(&gone, b"x").unwrap();
    let mut h = handle_of(&p);
    let mut hg = handle_of(&gone);
    std::fs::remove_file(&gone).unwrap();
    let mount = std::fs::File::open(&e.mnt).unwrap();
    drop_caches();
    let mut f = open_by(&mount, &mut h).expect("open_by_handle_at after drop_caches");
    let mut s = String::new();
    f.read_to_string(&mut s).unwrap();
    assert_eq!(s, "by handle");
    drop(f);
    drop_caches();
    assert_eq!(open_by(&mount, &mut hg).err(), Some(libc::ESTALE));
    drop(mount);
    common::unmount(&e);
}
