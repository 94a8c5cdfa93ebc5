//! Scenario: a file handle from name_to_handle_at opens the file with
//! open_by_handle_at after the kernel has dropped its cached inodes (the export path
//! that NFS and overlayfs's index use), and a deleted file's handle is stale — also
//! once a new file has its inode number (the slot's generation differs), and across
//! a remount.

mod common;
use std::ffi::CString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
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
    // One CPU: a freed inode number goes back to one free list, which the next
    // create takes from whichever CPU the daemon's thread runs on (with one list
    // per CPU, reuse within the loop below depended on the scheduler).
    let e = common::env_with("64M", &["--cpus", "1"]);
    common::mount(&e);
    std::fs::create_dir(e.mnt.join("d")).unwrap();
    let p = e.mnt.join("d/f");
    std::fs::write(&p, b"by handle").unwrap();
    let gone = e.mnt.join("d/g");
    std::fs::write(&gone, b"x").unwrap();
    let mut h = handle_of(&p);
    let mut hg = handle_of(&gone);
    let gone_ino = std::fs::metadata(&gone).unwrap().ino();
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
    // A new file takes the deleted file's inode number: the old handle must not
    // open it (the slot's generation went up), the new file's handle does.
    let mut reused = None;
    for i in 0..1000 {
        let q = e.mnt.join(format!("d/new{i}"));
        std::fs::write(&q, b"new file").unwrap();
        if std::fs::metadata(&q).unwrap().ino() == gone_ino {
            reused = Some(q);
            break;
        }
    }
    let reused = reused.expect("no new file took the freed inode number in 1000 creates");
    let mut hn = handle_of(&reused);
    drop_caches();
    assert_eq!(open_by(&mount, &mut hg).err(), Some(libc::ESTALE));
    let mut s = String::new();
    open_by(&mount, &mut hn)
        .expect("the new file's handle")
        .read_to_string(&mut s)
        .unwrap();
    assert_eq!(s, "new file");
    drop(mount);
    common::unmount(&e);
    // The generation is on PM: after a remount the same handles mean the same.
    common::mount(&e);
    let mount = std::fs::File::open(&e.mnt).unwrap();
    assert_eq!(open_by(&mount, &mut hg).err(), Some(libc::ESTALE));
    let mut s = String::new();
    open_by(&mount, &mut hn)
        .expect("the new file's handle after a remount")
        .read_to_string(&mut s)
        .unwrap();
    assert_eq!(s, "new file");
    drop(mount);
    common::unmount(&e);
    common::fsck_clean(&e);
}
