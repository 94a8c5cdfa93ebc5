//! Raw xattr calls (no tool needed): each returns the value or the errno.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

pub fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

pub fn cn(n: &[u8]) -> CString {
    CString::new(n).unwrap()
}

/// Result of a call: the value it returned, or the errno.
pub fn res(r: isize) -> Result<isize, i32> {
    if r < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(r)
    }
}

pub fn set(p: &Path, n: &[u8], v: &[u8], flags: i32, follow: bool) -> Result<isize, i32> {
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

pub fn get(p: &Path, n: &[u8], size: usize) -> Result<Vec<u8>, i32> {
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

pub fn list(p: &Path) -> Result<Vec<Vec<u8>>, i32> {
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

pub fn remove(p: &Path, n: &[u8]) -> Result<isize, i32> {
    let (p, n) = (c(p), cn(n));
    // SAFETY: valid strings.
    res(unsafe { libc::removexattr(p.as_ptr(), n.as_ptr()) } as isize)
}
