//! Scenario: kill -9 of the daemon at a random moment during a write-heavy workload;
//! then the daemon's guard detaches the dead mount (as root; else `fusermount3 -u`),
//! fsck must be clean, and after a remount every write that
//! returned before the kill is there, byte for byte.

mod common;
use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[test]
fn kill_9_loses_no_returned_write() {
    let e = common::env("256M");
    let mut daemon = common::mount_foreground(&e);
    // What each file must contain: the bytes of every write that returned.
    let done: Arc<Mutex<HashMap<String, Vec<u8>>>> = Arc::default();
    let workers: Vec<_> = (0..3u32)
        .map(|t| {
            let mnt = e.mnt.clone();
            let done = done.clone();
            std::thread::spawn(move || {
                for i in 0..100_000u32 {
                    let name = format!("t{t}-f{}", i % 40);
                    let path = mnt.join(&name);
                    let mut f = match std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&path)
                    {
                        Ok(f) => f,
                        Err(_) => return,
                    };
                    let chunk: Vec<u8> = (0..(1 + (i * 977) % 20000))
                        .map(|k| (k ^ i ^ t) as u8)
                        .collect();
                    if f.write_all(&chunk).is_err() {
                        return;
                    }
                    done.lock()
                        .unwrap()
                        .entry(name)
                        .or_default()
                        .extend_from_slice(&chunk);
                }
            })
        })
        .collect();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    std::thread::sleep(Duration::from_millis(300 + (nanos % 1500) as u64));
    // SAFETY: sending SIGKILL to our own child process.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGKILL) };
    daemon.wait().unwrap();
    for w in workers {
        w.join().unwrap();
    }
    // As root the daemon's guard (`mnemofs guard`) aborts the dead daemon's
    // connection and detaches the mount point within a few seconds; otherwise the
    // user unmounts.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let t0 = std::time::Instant::now();
        while common::is_mounted(&e.mnt) && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(
            !common::is_mounted(&e.mnt),
            "the killed daemon's mount is still there after 10 s"
        );
    } else {
        let o = std::process::Command::new("fusermount3")
            .arg("-u")
            .arg(&e.mnt)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    common::fsck_clean(&e);
    common::mount(&e);
    let done = done.lock().unwrap();
    assert!(!done.is_empty(), "no write returned before the kill");
    let mut bytes = 0;
    for (name, want) in done.iter() {
        let got = std::fs::read(e.mnt.join(name)).unwrap();
        // A write in flight at the kill may or may not be there, but only whole
        // returned writes count: the file starts with exactly what returned.
        assert!(
            got.len() >= want.len(),
            "{name}: {} < {}",
            got.len(),
            want.len()
        );
        assert!(got[..want.len()] == want[..], "{name}: contents differ");
        bytes += want.len();
    }
    println!(
        "{} files, {bytes} bytes of returned writes verified",
        done.len()
    );
    common::unmount(&e);
    common::fsck_clean(&e);
}
