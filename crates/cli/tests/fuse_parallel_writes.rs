//! Scenario: parallel direct writes to one file reach the engine concurrently
//! through FUSE (files are opened with FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES
//! and the daemon runs several event-loop threads): the engine sees at least two
//! writers at once, and every byte lands where it belongs.

mod common;
use std::os::unix::fs::FileExt;

#[test]
fn writes_to_one_file_arrive_in_parallel() {
    let e = common::env("256M");
    let o = common::run(&[
        "mount",
        e.img.to_str().unwrap(),
        e.mnt.to_str().unwrap(),
        "--preset",
        "pnova",
        "--threads",
        "4",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let path = e.mnt.join("shared");
    std::fs::write(&path, b"").unwrap();
    const CHUNK: usize = 256 << 10;
    // Whether two writes overlap in time depends on scheduling (a loaded 2-core
    // machine may run the writers one after another): up to 8 rounds, until the
    // engine has seen two writers at once.
    let mut max = 0;
    let mut last = serde_json::Value::Null;
    for round in 0..8u8 {
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                    for i in 0..64u64 {
                        let off = (i * 4 + t) * CHUNK as u64;
                        f.write_all_at(&vec![t as u8 + 1 + 4 * round; CHUNK], off)
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let data = std::fs::read(&path).unwrap();
        assert_eq!(data.len(), 256 * CHUNK);
        for (k, c) in data.chunks(CHUNK).enumerate() {
            let want = (k % 4) as u8 + 1 + 4 * round;
            assert!(c.iter().all(|&b| b == want), "round {round} chunk {k}");
        }
        let o = common::run(&["stat", e.mnt.to_str().unwrap(), "--json"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        last = serde_json::from_slice(&o.stdout).unwrap();
        max = last["max_concurrent_writers"].as_u64().unwrap();
        println!("round {round}: most writers inside the engine at once: {max}");
        if max >= 2 {
            break;
        }
    }
    assert!(max >= 2, "writes were serialized before the engine: {last}");
    common::unmount(&e);
    common::fsck_clean(&e);
}
