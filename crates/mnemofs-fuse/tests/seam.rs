//! The FUSE adapter serves any `mnemofs::FileSystem`: a counting decorator over the
//! local engine (crates/bench/tests/common/counting.rs, shared with the bench's seam
//! test) is mounted, used through the kernel, and unmounted; the requests reached
//! the engine through the decorator. Needs /dev/fuse and the right to mount.

#[allow(dead_code)]
#[path = "../../bench/tests/common/counting.rs"]
mod counting;

use counting::Counting;
use mnemofs::{MkfsOptions, MountOptions};
use mnemofs_fuse::{mount_and_serve_with, MountConfig, STATS_XATTR};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::Duration;

fn stats_xattr_len(path: &Path) -> isize {
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = CString::new(STATS_XATTR).unwrap();
    // SAFETY: valid NUL-terminated strings; a null buffer of size 0 asks for the size.
    unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) }
}

#[test]
fn a_second_implementation_is_served_through_the_adapter() {
    assert!(Path::new("/dev/fuse").exists(), "this test needs /dev/fuse");
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let opts = MkfsOptions {
        size: 64 << 20,
        ..MkfsOptions::default()
    };
    mnemofs::mkfs(&img, &opts).unwrap();
    let engine = Counting::new(mnemofs::mount(&img, &MountOptions::default()).unwrap());
    let calls = engine.calls();

    let cfg = MountConfig {
        threads: 1,
        handle_signals: false,
        ..MountConfig::default()
    };
    let (tx, rx) = mpsc::channel::<PathBuf>();
    let at = mnt.clone();
    let server = std::thread::spawn(move || {
        mount_and_serve_with(Arc::new(engine), &at, &cfg, |mp| {
            let _ = tx.send(mp.to_path_buf());
        })
    });
    let mp = match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(mp) => mp,
        Err(_) => panic!("mount failed: {:?}", server.join()),
    };

    let file = mp.join("a");
    std::fs::write(&file, b"hello").unwrap();
    assert_eq!(std::fs::read(&file).unwrap(), b"hello");
    assert!(
        stats_xattr_len(&mp) > 0,
        "{}",
        std::io::Error::last_os_error()
    );
    std::fs::remove_file(&file).unwrap();

    let c = CString::new(mp.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::umount2(c.as_ptr(), 0) }, 0);
    server.join().unwrap().unwrap();

    let n = calls.counts();
    let get = |m: &str| n.get(m).copied().unwrap_or(0);
    // Exactly one of each namespace change the test made, and the one unmount that
    // mount_and_serve does after the session ends.
    assert_eq!(get("create_node"), 1, "{n:?}");
    assert_eq!(get("unlink"), 1, "{n:?}");
    assert_eq!(get("unmount"), 1, "{n:?}");
    // The kernel decides how often it asks; each of these it must ask at least once.
    assert!(get("write") >= 1, "{n:?}");
    assert!(get("read") >= 1, "{n:?}");
    assert!(get("open") >= 2, "{n:?}");
    assert!(get("release") >= 2, "{n:?}");
    assert!(get("remember") >= 1, "{n:?}");
    assert!(get("stats") >= 1, "{n:?}");
    // The engine's own handles are not used by the adapter.
    assert_eq!(get("open_handle"), 0, "{n:?}");
}
