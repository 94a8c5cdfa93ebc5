//! `mnemofs mds` keeps its heap off transparent huge pages without turning THP off
//! for the process (which would map the PM image with 4 KiB pages too): no anonymous
//! mapping of the running server carries the huge-page advice (`hg`), and the
//! process's THP switch is still on (`THP_enabled: 1`). See `heap_on_small_pages`
//! in src/main.rs.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The kernel's THP mode is `madvise`: only advised mappings get huge pages, which
/// is what the server's heap is kept out of. (In `never` there is nothing to keep it
/// out of; in `always` the heap gets them unadvised.)
fn thp_madvise_mode() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|s| s.contains("[madvise]"))
}

#[test]
fn the_metadata_servers_heap_has_no_huge_page_advice() {
    if !thp_madvise_mode() {
        eprintln!("skipped: the kernel's THP mode is not `madvise`");
        return;
    }
    let dir = tempfile::tempdir_in(pm::scratch_dir()).unwrap();
    let img = dir.path().join("img");
    let o = common::run(&["mkfs", img.to_str().unwrap(), "--size", "64M"]);
    assert!(
        o.status.success(),
        "mkfs: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut child = Command::new(common::bin())
        .args(["mds", img.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mnemofs mds");
    let pid = child.id();
    let err = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            if line.contains("served on") {
                let _ = tx.send(());
            }
        }
    });
    if rx.recv_timeout(Duration::from_secs(30)).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("mds did not start serving within 30 s");
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    // Stop it before asserting, so that a failure leaves no server behind.
    // SAFETY: kill(2) on the child's pid with a stop signal mds handles.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    let st = child.wait().unwrap();
    assert!(st.success(), "mds stopped with {st}");

    if let Some(l) = status.lines().find(|l| l.starts_with("THP_enabled:")) {
        assert_eq!(
            l.split_whitespace().nth(1),
            Some("1"),
            "THP was turned off for the whole process: {l}"
        );
    }
    // Each mapping: a header line "start-end perms offset dev inode [path]", then
    // fields, the last of them "VmFlags: ...".
    let mut header = "";
    let mut anon = 0;
    for l in smaps.lines() {
        if l.starts_with("VmFlags:") {
            // No path, or a name an anonymous mapping was given (mimalloc names
            // its own `[anon:mimalloc]` where the kernel supports it).
            let path = header.split_whitespace().nth(5);
            if path.is_none_or(|p| p.starts_with("[anon:")) {
                anon += 1;
                assert!(
                    !l.split_whitespace().any(|f| f == "hg"),
                    "an anonymous mapping of mds is advised for huge pages: {header} / {l}"
                );
            }
        } else if l.split_whitespace().next().is_some_and(|w| {
            w.contains('-') && w.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        }) {
            header = l;
        }
    }
    assert!(anon > 0, "no anonymous mapping found in mds's smaps");
}
