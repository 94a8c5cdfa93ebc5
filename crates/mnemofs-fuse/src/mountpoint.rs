//! Mount point checks and `/proc/self/mountinfo` lookups.

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// File system type of a mnemofs mount in the mount table.
pub const MNEMOFS_FSTYPE: &str = "fuse.mnemofs";

/// Why a path cannot be used as a mount point (one line).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MountpointError(pub String);

/// One line of `/proc/self/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountEntry {
    /// Where it is mounted.
    pub mount_point: PathBuf,
    /// File system type, e.g. `fuse.mnemofs` or `ext4`.
    pub fstype: String,
    /// Mount source (the `fsname` of a FUSE mount).
    pub source: OsString,
    /// The mount's own options (`rw`/`ro`, `nosuid`, `noatime`, …).
    pub options: Vec<String>,
    /// Its super block's options (`rw`/`ro`, `sync`, `user_id=0`, …).
    pub super_options: Vec<String>,
}

/// Checks that `path` can be mounted on: it exists, is a directory, is not a mount
/// point already and is empty. Returns the canonical path.
pub fn check_mountpoint(path: &Path) -> Result<PathBuf, MountpointError> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| {
        MountpointError(match e.raw_os_error() {
            Some(libc::ENOENT) => format!("mount point {shown} does not exist"),
            Some(libc::ENOTCONN) => format!(
                "mount point {shown} is a dead mount (its file system daemon is gone); \
                 run `umount {shown}` first"
            ),
            _ => format!("mount point {shown}: {}", strip_os_error(&e)),
        })
    })?;
    if !meta.is_dir() {
        return Err(MountpointError(format!(
            "mount point {shown} is not a directory"
        )));
    }
    let canon = path
        .canonicalize()
        .map_err(|e| MountpointError(format!("mount point {shown}: {}", strip_os_error(&e))))?;
    match is_mount_point(&canon) {
        Ok(false) => {}
        Ok(true) => {
            let what = match mount_entry(&canon) {
                Some(m) if m.fstype == MNEMOFS_FSTYPE => "a mnemofs mount point".to_string(),
                Some(m) => format!("a mount point ({})", m.fstype),
                None => "a mount point".to_string(),
            };
            return Err(MountpointError(format!(
                "{} is already {what}; unmount it first",
                canon.display()
            )));
        }
        Err(e) => {
            return Err(MountpointError(format!(
                "mount point {shown}: {}",
                strip_os_error(&e)
            )))
        }
    }
    let mut entries = std::fs::read_dir(&canon)
        .map_err(|e| MountpointError(format!("mount point {shown}: {}", strip_os_error(&e))))?;
    if entries.next().is_some() {
        return Err(MountpointError(format!("mount point {shown} is not empty")));
    }
    Ok(canon)
}

/// Whether the canonical directory `path` is the root of a mount: it is on another
/// device than its parent, it is `/`, or the mount table names it.
pub fn is_mount_point(path: &Path) -> io::Result<bool> {
    let meta = std::fs::metadata(path)?;
    let parent = std::fs::metadata(path.join(".."))?;
    if meta.dev() != parent.dev() || meta.ino() == parent.ino() {
        return Ok(true);
    }
    Ok(mount_entry(path).is_some())
}

/// The topmost mount whose mount point is `path` (canonical), if any.
pub fn mount_entry(path: &Path) -> Option<MountEntry> {
    let table = std::fs::read("/proc/self/mountinfo").ok()?;
    parse_mountinfo(&table)
        .into_iter()
        .rev()
        .find(|m| m.mount_point == path)
}

/// Parses `/proc/self/mountinfo` text; malformed lines are skipped.
pub fn parse_mountinfo(text: &[u8]) -> Vec<MountEntry> {
    let mut out = Vec::new();
    for line in text.split(|&b| b == b'\n') {
        let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        // id parent major:minor root mount-point options [optional...] - fstype source super
        let Some(sep) = fields.iter().position(|f| *f == b"-") else {
            continue;
        };
        if fields.len() < 5 || sep < 6 || fields.len() < sep + 3 {
            continue;
        }
        let list = |f: Option<&&[u8]>| -> Vec<String> {
            f.map(|f| {
                String::from_utf8_lossy(f)
                    .split(',')
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
        };
        out.push(MountEntry {
            mount_point: PathBuf::from(OsString::from_vec(unescape(fields[4]))),
            fstype: String::from_utf8_lossy(&unescape(fields[sep + 1])).into_owned(),
            source: OsString::from_vec(unescape(fields[sep + 2])),
            options: list(fields.get(5)),
            super_options: list(fields.get(sep + 3)),
        });
    }
    out
}

/// Undoes the kernel's octal escapes (`\040` for space and the like).
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        if field[i] == b'\\' && i + 3 < field.len() {
            let digits = &field[i + 1..i + 4];
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let v = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                if let Ok(b) = u8::try_from(v) {
                    out.push(b);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(field[i]);
        i += 1;
    }
    out
}

/// `io::Error` text without the " (os error N)" suffix.
pub fn strip_os_error(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Path as bytes for C calls.
pub(crate) fn path_cstring(path: &Path) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &[u8] = b"22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
36 22 0:45 / /tmp/my\\040dir rw,nosuid,nodev,relatime shared:5 - fuse.mnemofs mnemofs rw,user_id=0\n\
37 22 0:46 / /mnt rw - tmpfs tmpfs rw\n\
garbage line\n";

    #[test]
    fn parses_mountinfo() {
        let m = parse_mountinfo(SAMPLE);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].mount_point, PathBuf::from("/"));
        assert_eq!(m[0].fstype, "ext4");
        assert_eq!(m[1].mount_point, PathBuf::from("/tmp/my dir"));
        assert_eq!(m[1].fstype, MNEMOFS_FSTYPE);
        assert_eq!(m[1].source, OsString::from("mnemofs"));
        assert_eq!(m[2].fstype, "tmpfs");
    }

    #[test]
    fn unescapes() {
        assert_eq!(unescape(b"a\\040b"), b"a b");
        assert_eq!(unescape(b"a\\134b"), b"a\\b");
        assert_eq!(unescape(b"end\\04"), b"end\\04");
        assert_eq!(unescape(b"x\\9zz"), b"x\\9zz");
    }

    #[test]
    fn root_is_a_mount_point() {
        assert!(is_mount_point(Path::new("/")).unwrap());
    }

    #[test]
    fn mountpoint_checks() {
        let dir = std::env::temp_dir().join(format!("mnemofs-mp-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing");
        let e = check_mountpoint(&missing).unwrap_err().0;
        assert!(e.contains("does not exist"), "{e}");
        let file = dir.join("file");
        std::fs::write(&file, b"x").unwrap();
        let e = check_mountpoint(&file).unwrap_err().0;
        assert!(e.contains("not a directory"), "{e}");
        let empty = dir.join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert_eq!(
            check_mountpoint(&empty).unwrap(),
            empty.canonicalize().unwrap()
        );
        let e = check_mountpoint(&dir).unwrap_err().0;
        assert!(e.contains("not empty"), "{e}");
        let e = check_mountpoint(Path::new("/")).unwrap_err().0;
        assert!(e.contains("already"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn strips_os_error() {
        let e = io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(strip_os_error(&e), "No such file or directory");
    }
}
