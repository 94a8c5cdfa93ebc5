//! Scenario: access times hold whatever serves a read. Read-only opens read through
//! the kernel page cache (kept across opens), and the kernel never updates a FUSE
//! file's atime itself: under `strictatime` every read must still reach the engine,
//! and under `relatime` a read must reach it whenever an update is due (atime not
//! newer than mtime or ctime), even with the file's pages cached.

mod common;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// The atime `stat` shows once the kernel's cached attributes (1 s) have expired.
fn atime(p: &Path) -> (i64, i64) {
    std::thread::sleep(Duration::from_millis(1100));
    let m = std::fs::metadata(p).unwrap();
    (m.atime(), m.atime_nsec())
}

fn read(p: &Path) {
    assert_eq!(std::fs::read(p).unwrap(), b"some data");
}

#[test]
fn strictatime_updates_atime_on_every_read() {
    let e = common::env("64M");
    common::mount_with(&e, &["-o", "strictatime"]);
    let f = e.mnt.join("f");
    std::fs::write(&f, b"some data").unwrap();
    read(&f);
    let a1 = atime(&f);
    read(&f);
    let a2 = atime(&f);
    assert!(a2 > a1, "the second read left atime at {a1:?}");
    read(&f);
    let a3 = atime(&f);
    assert!(a3 > a2, "the third read left atime at {a2:?}");
    common::unmount(&e);
    common::fsck_clean(&e);
}

#[test]
fn relatime_updates_a_due_atime_with_the_pages_cached() {
    let e = common::env("64M");
    common::mount(&e);
    let f = e.mnt.join("f");
    std::fs::write(&f, b"some data").unwrap();
    // Past the clock tick of the write (file times are taken from a coarse
    // clock; a read in the same tick sets atime equal to mtime, still due).
    std::thread::sleep(Duration::from_millis(50));
    // The first read updates atime (not newer than mtime) and caches the pages.
    read(&f);
    let a1 = atime(&f);
    // Not due: atime is newer than mtime and ctime.
    read(&f);
    assert_eq!(atime(&f), a1, "relatime updated an atime that was not due");
    // A new mtime (no data change, so the cached pages stay valid): due again.
    let file = std::fs::File::options().write(true).open(&f).unwrap();
    file.set_modified(SystemTime::now() + Duration::from_secs(3600))
        .unwrap();
    drop(file);
    read(&f);
    let a2 = atime(&f);
    assert!(a2 > a1, "a due atime was not updated by a read: {a2:?}");
    common::unmount(&e);
    common::fsck_clean(&e);
}

#[test]
fn noatime_reads_leave_atime() {
    let e = common::env("64M");
    common::mount_with(&e, &["-o", "noatime"]);
    let f = e.mnt.join("f");
    std::fs::write(&f, b"some data").unwrap();
    let a0 = atime(&f);
    read(&f);
    read(&f);
    assert_eq!(atime(&f), a0);
    common::unmount(&e);
}
