//! Scenario: POSIX ACLs through a mount behave as on tmpfs (same calls, same
//! results and errnos): setting access and default ACLs and the modes they give,
//! inheritance by files, directories and special files (the umask ignored under a
//! default ACL, applied without one), chmod rewriting the mask, a minimal ACL
//! folded into the mode, invalid ACLs refused, the kernel enforcing named-user
//! entries for other users, and set-group-ID cleared when an ACL is set by an owner
//! outside the file's group. The ACLs survive a remount and fsck is clean.

mod common;
use common::xattr::{c, get, remove, res, set};
use std::ffi::CString;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

const ACCESS: &[u8] = b"system.posix_acl_access";
const DEFAULT: &[u8] = b"system.posix_acl_default";
const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;

/// The xattr form of an ACL: (tag, perm, id) entries.
fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut v = 2u32.to_le_bytes().to_vec();
    for &(tag, perm, id) in entries {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    v
}

const U: u32 = u32::MAX;

/// open(2) as another user: 0 or the errno.
fn open_as(uid: u32, path: &Path, flags: i32) -> i32 {
    let p = c(path);
    common::as_user(uid, uid, move || {
        // SAFETY: a valid NUL-terminated path.
        let fd = unsafe { libc::open(p.as_ptr(), flags) };
        fd as isize
    })
}

fn mode(p: &Path) -> String {
    match std::fs::symlink_metadata(p) {
        Ok(m) => format!("{:o}", m.mode()),
        Err(e) => format!("{e}"),
    }
}

/// The sequence, in `dir`; every call's outcome, in order.
fn sequence(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut log = |what: &str, r: String| out.push(format!("{what}: {r}"));
    let d = dir.join("d");
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    // An access ACL with a named user and a mask: the group bits show the mask.
    let a = acl(&[
        (USER_OBJ, 7, U),
        (USER, 7, 1000),
        (GROUP_OBJ, 5, U),
        (MASK, 7, U),
        (OTHER, 5, U),
    ]);
    log(
        "set access on dir",
        format!("{:?}", set(&d, ACCESS, &a, 0, true)),
    );
    log("dir mode", mode(&d));
    log("get access", format!("{:?}", get(&d, ACCESS, 1024)));
    let def = acl(&[
        (USER_OBJ, 7, U),
        (USER, 7, 1000),
        (GROUP_OBJ, 5, U),
        (MASK, 7, U),
        (OTHER, 0, U),
    ]);
    log(
        "set default",
        format!("{:?}", set(&d, DEFAULT, &def, 0, true)),
    );
    // Inheritance: the umask (022) is not applied under a default ACL.
    std::fs::write(d.join("f"), b"secret").unwrap();
    log("file mode", mode(&d.join("f")));
    log(
        "file access",
        format!("{:?}", get(&d.join("f"), ACCESS, 1024)),
    );
    log(
        "file default",
        format!("{:?}", get(&d.join("f"), DEFAULT, 1024)),
    );
    std::fs::create_dir(d.join("sub")).unwrap();
    log("subdir mode", mode(&d.join("sub")));
    log(
        "subdir access",
        format!("{:?}", get(&d.join("sub"), ACCESS, 1024)),
    );
    log(
        "subdir default",
        format!("{:?}", get(&d.join("sub"), DEFAULT, 1024)),
    );
    let fifo = c(&d.join("p"));
    // SAFETY: a valid NUL-terminated path.
    let r = unsafe { libc::mkfifo(fifo.as_ptr(), 0o666) };
    log("mkfifo", format!("{:?}", res(r as isize)));
    log("fifo mode", mode(&d.join("p")));
    log(
        "fifo access",
        format!("{:?}", get(&d.join("p"), ACCESS, 1024)),
    );
    std::os::unix::fs::symlink("f", d.join("l")).unwrap();
    log("symlink mode", mode(&d.join("l")));
    // chmod rewrites the mask (not the owning group) of the access ACL.
    std::fs::set_permissions(d.join("f"), std::fs::Permissions::from_mode(0o640)).unwrap();
    log("chmod mode", mode(&d.join("f")));
    log(
        "chmod access",
        format!("{:?}", get(&d.join("f"), ACCESS, 1024)),
    );
    // Enforcement by the kernel: uid 1000 may read through its entry (mask r--),
    // not write; uid 1001 falls to "other" (none).
    log(
        "read as 1000",
        open_as(1000, &d.join("f"), libc::O_RDONLY).to_string(),
    );
    log(
        "write as 1000",
        open_as(1000, &d.join("f"), libc::O_WRONLY).to_string(),
    );
    log(
        "read as 1001",
        open_as(1001, &d.join("f"), libc::O_RDONLY).to_string(),
    );
    // A minimal ACL is the mode: not stored.
    let minimal = acl(&[(USER_OBJ, 6, U), (GROUP_OBJ, 4, U), (OTHER, 0, U)]);
    log(
        "set minimal",
        format!("{:?}", set(&d.join("f"), ACCESS, &minimal, 0, true)),
    );
    log("minimal mode", mode(&d.join("f")));
    log(
        "minimal access",
        format!("{:?}", get(&d.join("f"), ACCESS, 1024)),
    );
    log(
        "read as 1000 after",
        open_as(1000, &d.join("f"), libc::O_RDONLY).to_string(),
    );
    // Invalid ACLs and misplaced default ACLs.
    let no_mask = acl(&[
        (USER_OBJ, 6, U),
        (USER, 4, 5),
        (GROUP_OBJ, 4, U),
        (OTHER, 0, U),
    ]);
    log(
        "no mask",
        format!("{:?}", set(&d.join("f"), ACCESS, &no_mask, 0, true)),
    );
    let mut bad_version = minimal.clone();
    bad_version[0] = 1;
    log(
        "bad version",
        format!("{:?}", set(&d.join("f"), ACCESS, &bad_version, 0, true)),
    );
    log(
        "default on file",
        format!("{:?}", set(&d.join("f"), DEFAULT, &def, 0, true)),
    );
    // Without a default ACL the umask applies again.
    log("remove default", format!("{:?}", remove(&d, DEFAULT)));
    log("remove default again", format!("{:?}", remove(&d, DEFAULT)));
    std::fs::write(d.join("h"), b"").unwrap();
    log("after removal mode", mode(&d.join("h")));
    log(
        "after removal access",
        format!("{:?}", get(&d.join("h"), ACCESS, 1024)),
    );
    // Set-group-ID: an owner outside the file's group setting an ACL loses it.
    let s = d.join("s");
    std::fs::write(&s, b"").unwrap();
    std::os::unix::fs::chown(&s, Some(1000), Some(0)).unwrap();
    std::fs::set_permissions(&s, std::fs::Permissions::from_mode(0o2770)).unwrap();
    let (sp, name) = (c(&s), CString::new(ACCESS).unwrap());
    let named = acl(&[
        (USER_OBJ, 7, U),
        (USER, 5, 1002),
        (GROUP_OBJ, 7, U),
        (MASK, 7, U),
        (OTHER, 0, U),
    ]);
    let r = common::as_user(1000, 1000, || {
        // SAFETY: valid strings and a buffer of named.len() bytes.
        unsafe {
            libc::setxattr(
                sp.as_ptr(),
                name.as_ptr(),
                named.as_ptr().cast(),
                named.len(),
                0,
            ) as isize
        }
    });
    log("set acl as owner outside group", r.to_string());
    log("sgid mode", mode(&s));
    out
}

#[test]
fn acls_match_tmpfs() {
    // SAFETY: umask(2) cannot fail; this binary has one test.
    unsafe { libc::umask(0o022) };
    let tmp = tempfile::tempdir_in(pm::scratch_dir()).unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let want = sequence(tmp.path());
    let e = common::env("64M");
    std::fs::set_permissions(e.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    common::mount(&e);
    let got = sequence(&e.mnt);
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(g, w, "mnemofs vs tmpfs");
    }
    assert_eq!(got.len(), want.len());
    // What tmpfs and mnemofs agreed on is what ACLs mean (so agreement on a broken
    // behaviour would not pass): inheritance ignored the umask, the kernel let uid
    // 1000 read through its entry and kept 1001 out, set-group-ID was cleared.
    let find = |k: &str| {
        got.iter()
            .find_map(|l| l.strip_prefix(&format!("{k}: ")))
            .unwrap()
            .to_string()
    };
    assert_eq!(find("dir mode"), "40775");
    assert_eq!(find("file mode"), "100660");
    assert_eq!(find("subdir mode"), "40770");
    assert_eq!(find("read as 1000"), "0");
    assert_eq!(find("write as 1000"), libc::EACCES.to_string());
    assert_eq!(find("read as 1001"), libc::EACCES.to_string());
    assert_eq!(find("read as 1000 after"), libc::EACCES.to_string());
    assert_eq!(find("minimal access"), format!("Err({})", libc::ENODATA));
    assert_eq!(find("no mask"), format!("Err({})", libc::EINVAL));
    assert_eq!(find("default on file"), format!("Err({})", libc::EACCES));
    assert_eq!(find("after removal mode"), "100644");
    assert_eq!(find("set acl as owner outside group"), "0");
    assert_eq!(find("sgid mode"), "100770");
    common::unmount(&e);
    common::fsck_clean(&e);
    common::mount(&e);
    let sub = e.mnt.join("d/sub");
    assert_eq!(
        format!("subdir default: {:?}", get(&sub, DEFAULT, 1024)),
        find_line(&want, "subdir default")
    );
    assert_eq!(
        open_as(
            1000,
            &e.mnt.join("d/sub"),
            libc::O_RDONLY | libc::O_DIRECTORY
        ),
        0,
        "the named-user entry still applies after a remount"
    );
    assert_eq!(
        open_as(
            1001,
            &e.mnt.join("d/sub"),
            libc::O_RDONLY | libc::O_DIRECTORY
        ),
        libc::EACCES
    );
    common::unmount(&e);
}

fn find_line(v: &[String], k: &str) -> String {
    v.iter()
        .find(|l| l.starts_with(&format!("{k}: ")))
        .unwrap()
        .clone()
}

/// `-o noacl`, as ext4 takes it: the ACL names are refused (EOPNOTSUPP), an ACL
/// stored before is neither shown nor enforced (the mode bits alone decide), and it
/// is back on the next mount without the option.
#[test]
fn noacl_turns_acls_off() {
    let e = common::env("64M");
    std::fs::set_permissions(e.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    common::mount(&e);
    std::fs::set_permissions(&e.mnt, std::fs::Permissions::from_mode(0o755)).unwrap();
    let f = e.mnt.join("f");
    std::fs::write(&f, b"x").unwrap();
    // Owner rw, named user 1000 rw, mask rw, group and other nothing: the mode
    // shows the mask (0660).
    let a = acl(&[
        (USER_OBJ, 6, U),
        (USER, 6, 1000),
        (GROUP_OBJ, 0, U),
        (MASK, 6, U),
        (OTHER, 0, U),
    ]);
    assert_eq!(set(&f, ACCESS, &a, 0, true), Ok(0));
    assert_eq!(open_as(1000, &f, libc::O_RDONLY), 0);
    common::unmount(&e);
    common::mount_with(&e, &["-o", "noacl"]);
    assert_eq!(get(&f, ACCESS, 1024), Err(libc::EOPNOTSUPP));
    assert_eq!(set(&f, ACCESS, &a, 0, true), Err(libc::EOPNOTSUPP));
    assert_eq!(remove(&f, ACCESS), Err(libc::EOPNOTSUPP));
    let names = common::xattr::list(&f).unwrap();
    assert!(
        names.iter().all(|n| !n.starts_with(b"system.posix_acl")),
        "{names:?}"
    );
    // Group bits rw-: user 1000, outside the group, falls to "other".
    assert_eq!(open_as(1000, &f, libc::O_RDONLY), libc::EACCES);
    common::unmount(&e);
    common::mount(&e);
    assert_eq!(get(&f, ACCESS, 1024), Ok(a));
    common::unmount(&e);
    common::fsck_clean(&e);
}
