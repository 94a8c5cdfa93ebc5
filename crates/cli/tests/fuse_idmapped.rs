//! Scenario: an idmapped mount of a mnemofs mount (`open_tree` + `mount_setattr`
//! with MOUNT_ATTR_IDMAP, as `mount -o X-mount.idmap` and container runtimes make
//! them) behaves as an idmapped mount of tmpfs — the same calls give the same
//! results and errnos: owners seen through it shifted by the mapping, new nodes of
//! every kind owned by the caller's unmapped IDs, a caller or a chown target outside
//! the mapping refused, permissions checked against the mapped owner, set-group-ID
//! directories, POSIX ACL entries mapped both ways, the sticky bit, and set-user-ID
//! cleared by a write through it. Without `FUSE_ALLOW_IDMAP` the kernel refuses the
//! idmapped mount (EINVAL). fsck is clean afterwards.

mod common;
use common::xattr::{c, get, set};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// The mapping: IDs 0..1000 in the file system are 10000..11000 through the mount.
const BASE: u32 = 10000;
const ACCESS: &[u8] = b"system.posix_acl_access";

/// A user namespace with the mapping, held by a child that waits to be killed.
struct Userns {
    pid: libc::pid_t,
    fd: OwnedFd,
}

impl Userns {
    fn new() -> Userns {
        // SAFETY: the child makes system calls only (unshare, pause) and leaves by
        // _exit or a signal, so it touches no lock another thread may hold.
        let pid = unsafe {
            let pid = libc::fork();
            assert!(pid >= 0, "fork");
            if pid == 0 {
                if libc::unshare(libc::CLONE_NEWUSER) != 0 {
                    libc::_exit(1);
                }
                loop {
                    libc::pause();
                }
            }
            pid
        };
        let ours = std::fs::read_link("/proc/self/ns/user").unwrap();
        let theirs = format!("/proc/{pid}/ns/user");
        let t = std::time::Instant::now();
        while std::fs::read_link(&theirs).unwrap() == ours {
            assert!(t.elapsed().as_secs() < 10, "the child did not unshare");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        for map in ["uid_map", "gid_map"] {
            std::fs::write(format!("/proc/{pid}/{map}"), format!("0 {BASE} 1000")).unwrap();
        }
        let f = std::fs::File::open(&theirs).unwrap();
        Userns {
            pid,
            fd: OwnedFd::from(f),
        }
    }
}

impl Drop for Userns {
    fn drop(&mut self) {
        // SAFETY: `pid` is our child; kill and waitpid have no memory arguments
        // but the status, a valid local.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            let mut st = 0;
            libc::waitpid(self.pid, &mut st, 0);
        }
    }
}

/// `struct mount_attr` of mount_setattr(2).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;

/// Mounts an idmapped copy of the tree at `src` on `dst`; the errno on failure.
fn idmapped_mount(src: &Path, dst: &Path, ns: &Userns) -> Result<(), i32> {
    let (s, d) = (c(src), c(dst));
    let empty = c(Path::new(""));
    // SAFETY: valid NUL-terminated paths; open_tree returns a new descriptor that
    // is owned below.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            s.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    // SAFETY: `fd` is a fresh descriptor nothing else owns.
    let tree = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        userns_fd: ns.fd.as_raw_fd() as u64,
    };
    // SAFETY: `attr` is a valid mount_attr of the size passed; the path is empty
    // and NUL-terminated.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_EMPTY_PATH,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    // SAFETY: valid descriptors and NUL-terminated paths.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_FDCWD,
            d.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    Ok(())
}

fn umount(p: &Path) {
    let cp = c(p);
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::umount2(cp.as_ptr(), 0) }, 0, "umount {p:?}");
}

fn owner(p: &Path) -> String {
    match std::fs::symlink_metadata(p) {
        Ok(m) => format!("{}:{} {:o}", m.uid(), m.gid(), m.mode()),
        Err(e) => format!("{e}"),
    }
}

fn create_as(uid: u32, p: &Path, kind: &str) -> i32 {
    let cp = c(p);
    let target = c(Path::new("target"));
    let kind = kind.to_string();
    common::as_user(uid, uid, move || {
        // SAFETY: valid NUL-terminated paths.
        unsafe {
            match kind.as_str() {
                "file" => libc::open(cp.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644) as isize,
                "dir" => libc::mkdir(cp.as_ptr(), 0o755) as isize,
                "symlink" => libc::symlink(target.as_ptr(), cp.as_ptr()) as isize,
                _ => libc::mknod(cp.as_ptr(), libc::S_IFIFO | 0o644, 0) as isize,
            }
        }
    })
}

fn open_as(uid: u32, p: &Path, flags: i32) -> i32 {
    let cp = c(p);
    // SAFETY: a valid NUL-terminated path.
    common::as_user(uid, uid, move || unsafe { libc::open(cp.as_ptr(), flags) }
        as isize)
}

fn chown(p: &Path, uid: u32, gid: u32) -> i32 {
    let cp = c(p);
    // SAFETY: a valid NUL-terminated path.
    let r = unsafe { libc::lchown(cp.as_ptr(), uid, gid) };
    if r == 0 {
        0
    } else {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }
}

/// An access ACL with one named user `id`.
fn acl(id: u32) -> Vec<u8> {
    let mut v = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in [
        (0x01u16, 6u16, u32::MAX),
        (0x02, 4, id),
        (0x04, 4, u32::MAX),
        (0x10, 4, u32::MAX),
        (0x20, 0, u32::MAX),
    ] {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    v
}

/// The named user of an access ACL.
fn acl_user(p: &Path) -> String {
    match get(p, ACCESS, 1024) {
        Ok(v) => v[4..]
            .chunks(8)
            .find(|e| u16::from_le_bytes([e[0], e[1]]) == 0x02)
            .map(|e| u32::from_le_bytes([e[4], e[5], e[6], e[7]]).to_string())
            .unwrap_or_else(|| "none".to_string()),
        Err(e) => format!("errno {e}"),
    }
}

/// The sequence on the tree `base` and its idmapped mount `idm`; every outcome.
fn sequence(base: &Path, idm: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut log = |what: &str, r: String| out.push(format!("{what}: {r}"));
    std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o777)).unwrap();
    log("root through the mapping", owner(idm));
    // An existing file: its owner shifted through the mapping.
    std::fs::write(base.join("a"), b"data").unwrap();
    log("chown a 5:6", chown(&base.join("a"), 5, 6).to_string());
    log("a seen mapped", owner(&idm.join("a")));
    // New nodes of every kind by a mapped caller: owned by its unmapped IDs.
    for kind in ["file", "dir", "symlink", "fifo"] {
        let p = idm.join(kind);
        log(
            &format!("create {kind} as {}", BASE + 5),
            create_as(BASE + 5, &p, kind).to_string(),
        );
        log(&format!("{kind} stored"), owner(&base.join(kind)));
        log(&format!("{kind} mapped"), owner(&p));
    }
    // A caller outside the mapping cannot create (its IDs cannot be stored).
    for kind in ["file", "dir"] {
        log(
            &format!("create {kind} unmapped"),
            create_as(50000, &idm.join(format!("u{kind}")), kind).to_string(),
        );
    }
    // chown through the mapping: stored unmapped; a target outside it is refused.
    log(
        "chown through",
        chown(&idm.join("a"), BASE + 7, BASE + 8).to_string(),
    );
    log("a stored", owner(&base.join("a")));
    log("chown to unmapped", chown(&idm.join("a"), 5, 5).to_string());
    // Permissions against the mapped owner.
    let p = base.join("private");
    std::fs::write(&p, b"x").unwrap();
    chown(&p, 5, 5);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    for (uid, through) in [(BASE + 5, true), (5, true), (BASE + 5, false), (5, false)] {
        let path = if through { idm } else { base }.join("private");
        log(
            &format!("open as {uid} through mapping {through}"),
            open_as(uid, &path, libc::O_RDONLY).to_string(),
        );
    }
    // chmod only by the mapped owner.
    let cp = c(&idm.join("private"));
    for uid in [BASE + 5, 5] {
        let cp = cp.clone();
        log(
            &format!("chmod as {uid}"),
            // SAFETY: a valid NUL-terminated path.
            common::as_user(uid, uid, move || unsafe { libc::chmod(cp.as_ptr(), 0o640) }
                as isize)
            .to_string(),
        );
    }
    // A set-group-ID directory: its group (mapped) goes to new nodes.
    let sg = base.join("sg");
    std::fs::create_dir(&sg).unwrap();
    chown(&sg, 0, 9);
    std::fs::set_permissions(&sg, std::fs::Permissions::from_mode(0o2777)).unwrap();
    log(
        "file in sgid dir",
        create_as(BASE + 5, &idm.join("sg/f"), "file").to_string(),
    );
    log("  stored", owner(&sg.join("f")));
    log(
        "dir in sgid dir",
        create_as(BASE + 5, &idm.join("sg/d"), "dir").to_string(),
    );
    log("  stored", owner(&sg.join("d")));
    // POSIX ACLs: a named user mapped both ways.
    log(
        "acl set on base",
        format!("{:?}", set(&base.join("a"), ACCESS, &acl(3), 0, true)),
    );
    log("acl user mapped", acl_user(&idm.join("a")));
    log(
        "acl set through",
        format!("{:?}", set(&idm.join("a"), ACCESS, &acl(BASE + 4), 0, true)),
    );
    log("acl user stored", acl_user(&base.join("a")));
    log(
        "acl set unmapped",
        format!("{:?}", set(&idm.join("a"), ACCESS, &acl(4), 0, true)),
    );
    // The sticky bit: only the mapped owner removes.
    let st = base.join("sticky");
    std::fs::create_dir(&st).unwrap();
    std::fs::set_permissions(&st, std::fs::Permissions::from_mode(0o1777)).unwrap();
    create_as(BASE + 5, &idm.join("sticky/f"), "file");
    let cf = c(&idm.join("sticky/f"));
    for uid in [BASE + 6, BASE + 5] {
        let cf = cf.clone();
        log(
            &format!("unlink sticky as {uid}"),
            // SAFETY: a valid NUL-terminated path.
            common::as_user(uid, uid, move || unsafe { libc::unlink(cf.as_ptr()) }
                as isize)
            .to_string(),
        );
    }
    // A write through the mapping clears set-user-ID (and set-group-ID with
    // group-exec) for a caller without CAP_FSETID.
    for (name, perm) in [("suid", 0o4666), ("sgid-gx", 0o2676)] {
        let f = base.join(name);
        std::fs::write(&f, b"x").unwrap();
        chown(&f, 5, 5);
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(perm)).unwrap();
        let cf = c(&idm.join(name));
        log(
            &format!("write {name}"),
            common::as_user(BASE + 5, BASE + 5, move || {
                // SAFETY: a valid path; the buffer is one byte long.
                unsafe {
                    let fd = libc::open(cf.as_ptr(), libc::O_WRONLY | libc::O_APPEND);
                    if fd < 0 {
                        return -1;
                    }
                    libc::write(fd, b"y".as_ptr().cast(), 1)
                }
            })
            .to_string(),
        );
        log(&format!("{name} after"), owner(&f));
    }
    out
}

#[test]
fn idmapped_mounts_match_tmpfs() {
    let ns = Userns::new();
    let tmp = tempfile::tempdir_in(pm::scratch_dir()).unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (t_base, t_idm) = (tmp.path().join("base"), tmp.path().join("idm"));
    std::fs::create_dir(&t_base).unwrap();
    std::fs::create_dir(&t_idm).unwrap();
    idmapped_mount(&t_base, &t_idm, &ns).expect("idmapped tmpfs");
    let want = sequence(&t_base, &t_idm);
    umount(&t_idm);

    let e = common::env("64M");
    // The unprivileged callers reach the mount through the test's directory.
    std::fs::set_permissions(e.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    common::mount(&e);
    let idm = e.dir.path().join("idm");
    std::fs::create_dir(&idm).unwrap();
    idmapped_mount(&e.mnt, &idm, &ns).expect("idmapped mnemofs");
    let got = sequence(&e.mnt, &idm);
    umount(&idm);
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(g, w, "mnemofs vs tmpfs");
    }
    assert_eq!(got.len(), want.len());
    // What the kernel checked is what was stored: the same after a remount.
    common::unmount(&e);
    common::fsck_clean(&e);
    common::mount(&e);
    assert_eq!(owner(&e.mnt.join("file")), format!("{}:{} 100644", 5, 5));
    assert_eq!(owner(&e.mnt.join("a")), "7:8 100640");
    common::unmount(&e);
}
