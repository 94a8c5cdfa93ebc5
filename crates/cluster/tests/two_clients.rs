//! Two clients of one metadata server on one host: each sees the other's
//! committed writes (a cached layout is recalled before another client's commit
//! replaces its blocks), partial pages keep their other bytes, and after the
//! server's clean shutdown the volume mounts locally with the same contents and
//! fsck is clean.

use mnemofs::{FileSystem, MkfsOptions, ROOT_INO};
use mnemofs_cluster::{mds_mount_options, Client, ClientConfig, CommitMode, MdsConfig, MdsHandle};
use std::time::Duration;

fn volume(dir: &std::path::Path) -> Vec<mnemofs::DeviceSpec> {
    let path = dir.join("vol.img");
    mnemofs::mkfs(
        &path,
        &MkfsOptions {
            size: 64 << 20,
            ..Default::default()
        },
    )
    .unwrap();
    vec![mnemofs::DeviceSpec { path, node: None }]
}

fn client(addr: std::net::SocketAddr, data: &[mnemofs::DeviceSpec]) -> Client {
    Client::connect(&ClientConfig {
        mds: addr.to_string(),
        data: data.to_vec(),
        commit: CommitMode::Sync,
    })
    .unwrap()
}

fn pattern(seed: u64, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| ((i as u64).wrapping_mul(2654435761).wrapping_add(seed) >> 7) as u8)
        .collect()
}

#[test]
fn clients_see_each_others_writes() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let devs = volume(dir.path());
    let fs = mnemofs::mount_devices(&devs, &mds_mount_options()).unwrap();
    let cfg = MdsConfig {
        lease: Duration::from_millis(400),
        chunk_blocks: 64,
    };
    let mds = MdsHandle::start(fs, "127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let a = client(mds.addr(), &devs);
    let b = client(mds.addr(), &devs);
    assert_ne!(a.id(), b.id());

    // A writes 3 pages and a bit, starting mid-page (partial head and tail).
    let f = a.create(ROOT_INO, b"shared", 0o644, 0, 0).unwrap().ino;
    let mut model = vec![0u8; 100];
    let d1 = pattern(1, 3 * 4096 + 777);
    a.write(f, 100, &d1).unwrap();
    model.extend_from_slice(&d1);
    let mut buf = vec![0u8; model.len() + 50];
    assert_eq!(a.read(f, 0, &mut buf).unwrap(), model.len());
    assert_eq!(&buf[..model.len()], &model[..]);

    // B sees it, by name and by content.
    let fb = b.lookup(ROOT_INO, b"shared").unwrap();
    assert_eq!(fb.ino, f);
    assert_eq!(fb.size, model.len() as u64);
    let mut got = vec![0u8; model.len()];
    assert_eq!(b.read(f, 0, &mut got).unwrap(), model.len());
    assert_eq!(got, model);

    // B overwrites 10 bytes inside a page A has cached: A's layout is recalled.
    let recalls_before = mds
        .stats()
        .recalls
        .load(std::sync::atomic::Ordering::Relaxed);
    b.write(f, 5000, b"0123456789").unwrap();
    model[5000..5010].copy_from_slice(b"0123456789");
    assert!(
        mds.stats()
            .recalls
            .load(std::sync::atomic::Ordering::Relaxed)
            > recalls_before
    );
    let mut got = vec![0u8; model.len()];
    a.read(f, 0, &mut got).unwrap();
    assert_eq!(got, model, "A reads B's committed write");

    // A extends the file past a hole; B reads zeros in the hole.
    a.write(f, 40_000, b"tail").unwrap();
    model.resize(40_000, 0);
    model.extend_from_slice(b"tail");
    let mut got = vec![0u8; model.len()];
    assert_eq!(b.read(f, 0, &mut got).unwrap(), model.len());
    assert_eq!(got, model);

    // Truncation by one client is seen by the other's next read.
    let t = mnemofs::SetAttr {
        size: Some(6000),
        ..Default::default()
    };
    b.setattr(f, &t).unwrap();
    model.truncate(6000);
    let mut got = vec![0u8; 10_000];
    assert_eq!(a.read(f, 0, &mut got).unwrap(), 6000);
    assert_eq!(&got[..6000], &model[..]);

    // Namespace calls pass through.
    let d = a.mkdir(ROOT_INO, b"dir", 0o755, 0, 0).unwrap().ino;
    b.rename(ROOT_INO, b"shared", d, b"moved", Default::default())
        .unwrap();
    assert!(a.lookup(ROOT_INO, b"shared").is_err());
    let names: Vec<Vec<u8>> = a
        .readdir(d, 0, 100)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert!(names.contains(&b"moved".to_vec()));
    assert_eq!(
        a.lookup(ROOT_INO, b"nope").unwrap_err().errno(),
        libc::ENOENT
    );

    let sa = a.client_stats();
    assert!(sa.commits >= 2 && sa.layout_rpcs >= 1, "{sa:?}");
    a.close().unwrap();
    b.close().unwrap();
    mds.shutdown().unwrap();

    // The volume as a local mount: same contents, and fsck clean.
    let report = mnemofs::fsck_devices(&devs).unwrap();
    assert!(report.is_clean(), "{report:?}");
    let fs = mnemofs::mount_devices(&devs, &Default::default()).unwrap();
    let moved = fs.lookup(d, b"moved").unwrap();
    let mut got = vec![0u8; 6000];
    assert_eq!(fs.read(moved.ino, 0, &mut got).unwrap(), 6000);
    assert_eq!(got, model);
    fs.unmount().unwrap();
}

#[test]
fn an_expired_lease_gives_the_space_back() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let devs = volume(dir.path());
    let fs = mnemofs::mount_devices(&devs, &mds_mount_options()).unwrap();
    let cfg = MdsConfig {
        lease: Duration::from_millis(300),
        chunk_blocks: 128,
    };
    let mds = MdsHandle::start(fs, "127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let a = client(mds.addr(), &devs);
    let f = a.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    a.write(f, 0, &pattern(3, 8192)).unwrap();
    let pool = a.client_stats().pool_blocks;
    let free_before = mds.fs().statfs().blocks_free;
    assert_eq!(pool, 128 - 2, "one chunk delegated, two blocks used");
    // A hangs: no renewals. Its session expires and its unused space comes back.
    a.stop_renewing();
    let t0 = std::time::Instant::now();
    while mds
        .stats()
        .expired
        .load(std::sync::atomic::Ordering::Relaxed)
        == 0
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the session never expired"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        mds.stats()
            .reclaimed_blocks
            .load(std::sync::atomic::Ordering::Relaxed),
        pool
    );
    // Exactly the unused delegation came back (statfs counts delegated space as
    // used).
    assert_eq!(mds.fs().statfs().blocks_free, free_before + pool);
    drop(a);
    mds.shutdown().unwrap();
    assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
}
