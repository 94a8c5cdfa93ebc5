//! Two clients of one metadata server on one host: each sees the other's
//! committed writes (a cached layout is recalled before another client's commit
//! replaces its blocks), partial pages keep their other bytes, and after the
//! server's clean shutdown the volume mounts locally with the same contents and
//! fsck is clean.

use mnemofs::{FileSystem, MkfsOptions, ROOT_INO};
use mnemofs_cluster::{mds_mount_options, Client, ClientConfig, CommitMode, MdsConfig, MdsHandle};
use std::time::Duration;

fn volume(dir: &std::path::Path) -> Vec<mnemofs::DeviceSpec> {
    volume_of(dir, 0)
}

/// [`volume`] with `cpus` per-CPU structures (0: one per CPU of the host).
fn volume_of(dir: &std::path::Path, cpus: u32) -> Vec<mnemofs::DeviceSpec> {
    let path = dir.join("vol.img");
    mnemofs::mkfs(
        &path,
        &MkfsOptions {
            size: 64 << 20,
            cpus,
            ..Default::default()
        },
    )
    .unwrap();
    vec![mnemofs::DeviceSpec { path, node: None }]
}

/// A fresh volume in a temporary directory and a server of it (`lease`,
/// delegation chunks of `chunk_blocks`).
fn server(
    lease: Duration,
    chunk_blocks: u64,
) -> (tempfile::TempDir, Vec<mnemofs::DeviceSpec>, MdsHandle) {
    server_of(lease, chunk_blocks, 0)
}

/// [`server`] of a volume with `cpus` per-CPU structures ([`volume_of`]).
fn server_of(
    lease: Duration,
    chunk_blocks: u64,
    cpus: u32,
) -> (tempfile::TempDir, Vec<mnemofs::DeviceSpec>, MdsHandle) {
    let dir = tempfile::tempdir_in(pm::scratch_dir()).unwrap();
    let devs = volume_of(dir.path(), cpus);
    let fs = mnemofs::mount_devices(&devs, &mds_mount_options()).unwrap();
    let cfg = MdsConfig {
        lease,
        chunk_blocks,
    };
    let mds = MdsHandle::start(fs, "127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    (dir, devs, mds)
}

/// Polls `done` every `poll` until it holds; fails after 20 s ("`what`").
fn wait_for(what: &str, poll: Duration, mut done: impl FnMut() -> bool) {
    let t0 = std::time::Instant::now();
    while !done() {
        assert!(t0.elapsed() < Duration::from_secs(20), "{what}");
        std::thread::sleep(poll);
    }
}

/// Sessions the server has expired so far.
fn expired(mds: &MdsHandle) -> u64 {
    mds.stats()
        .expired
        .load(std::sync::atomic::Ordering::Relaxed)
}

fn client(addr: std::net::SocketAddr, data: &[mnemofs::DeviceSpec]) -> Client {
    client_with(addr, data, CommitMode::Sync)
}

fn client_with(
    addr: std::net::SocketAddr,
    data: &[mnemofs::DeviceSpec],
    commit: CommitMode,
) -> Client {
    Client::connect(&ClientConfig {
        mds: addr.to_string(),
        data: data.to_vec(),
        commit,
        delayed: Default::default(),
        subdir: None,
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
    let (_dir, devs, mds) = server(Duration::from_millis(400), 64);
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
    let (_dir, devs, mds) = server(Duration::from_millis(300), 128);
    let a = client(mds.addr(), &devs);
    let f = a.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    a.write(f, 0, &pattern(3, 8192)).unwrap();
    let pool = a.client_stats().pool_blocks;
    let free_before = mds.fs().statfs().blocks_free;
    assert_eq!(pool, 128 - 2, "one chunk delegated, two blocks used");
    // A hangs: no renewals. Its session expires and its unused space comes back.
    a.stop_renewing();
    wait_for(
        "the session never expired",
        Duration::from_millis(50),
        || expired(&mds) > 0,
    );
    assert_eq!(
        mds.stats()
            .reclaimed_blocks
            .load(std::sync::atomic::Ordering::Relaxed),
        pool
    );
    // Exactly the unused delegation comes back (statfs counts delegated space as
    // used), one lease after the expiry (the client may write until its lease ends).
    wait_for(
        "the delegation never came back",
        Duration::from_millis(20),
        || mds.fs().statfs().blocks_free == free_before + pool,
    );
    assert_eq!(mds.fs().statfs().blocks_free, free_before + pool);
    drop(a);
    mds.shutdown().unwrap();
    assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
}

#[test]
fn delayed_commits_are_read_back_ordered_and_durable_at_fsync() {
    let (_dir, devs, mds) = server(Duration::from_millis(400), 16);
    let a = client_with(mds.addr(), &devs, CommitMode::Delayed);
    let b = client(mds.addr(), &devs);

    // Many small files, each written in pieces (partial pages merged with the
    // writer's own uncommitted copies), read back before any fsync.
    let mut files = Vec::new();
    for i in 0..40u64 {
        let name = format!("f{i}");
        let ino = a
            .create(ROOT_INO, name.as_bytes(), 0o644, 0, 0)
            .unwrap()
            .ino;
        let mut model = Vec::new();
        for k in 0..5u64 {
            let piece = pattern(i * 10 + k, 3000 + 500 * k as usize);
            a.write(ino, model.len() as u64, &piece).unwrap();
            model.extend_from_slice(&piece);
        }
        // An overwrite across a page boundary of what is still uncommitted.
        a.write(ino, 4000, &[0xAB; 300]).unwrap();
        model[4000..4300].fill(0xAB);
        assert_eq!(a.getattr(ino).unwrap().size, model.len() as u64);
        let mut got = vec![0u8; model.len()];
        assert_eq!(a.read(ino, 0, &mut got).unwrap(), model.len());
        assert_eq!(got, model, "own uncommitted writes of f{i}");
        files.push((name, ino, model));
    }
    // fsync of one file: it is committed; B sees it whole.
    let (_, ino0, model0) = &files[0];
    a.fsync(*ino0).unwrap();
    let mut got = vec![0u8; model0.len()];
    assert_eq!(b.read(*ino0, 0, &mut got).unwrap(), model0.len());
    assert_eq!(&got, model0);
    // Every file, after its fsync.
    for (_, ino, model) in &files {
        a.fsync(*ino).unwrap();
        let mut got = vec![0u8; model.len() + 10];
        assert_eq!(b.read(*ino, 0, &mut got).unwrap(), model.len());
        assert_eq!(&got[..model.len()], &model[..]);
    }
    let st = a.client_stats();
    assert!(st.batches > 0 && st.batch_files >= 40, "{st:?}");
    assert!(st.commits >= 40 * 6, "{st:?}");
    assert!(!a.commit_samples().is_empty());
    // A truncation waits for earlier writes (they reach the server first).
    let (_, ino1, _) = &files[1];
    a.write(*ino1, 100_000, b"far").unwrap();
    a.setattr(
        *ino1,
        &mnemofs::SetAttr {
            size: Some(10),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(b.getattr(*ino1).unwrap().size, 10);
    // Writes still queued at unmount are committed by it.
    let (_, ino2, _) = &files[2];
    a.write(*ino2, 0, b"last words").unwrap();
    a.close().unwrap();
    let mut got = [0u8; 10];
    b.read(*ino2, 0, &mut got).unwrap();
    assert_eq!(&got, b"last words");
    b.close().unwrap();
    mds.shutdown().unwrap();
    assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
}

#[test]
fn pins_from_create_and_deferred_releases_free_an_unlinked_file() {
    let (_dir, devs, mds) = server(Duration::from_millis(300), 16);
    let b = client(mds.addr(), &devs);
    for mode in [CommitMode::Sync, CommitMode::Delayed] {
        let a = client_with(mds.addr(), &devs, mode);
        let f = a.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
        // The open takes the create's pin: no call.
        let rpcs = a.client_stats().rpcs;
        a.open(f).unwrap();
        assert_eq!(a.client_stats().rpcs, rpcs, "{mode:?}");
        a.write(f, 0, &pattern(9, 3 * 4096)).unwrap();
        a.fsync(f).unwrap();
        // Unlinked by the other client while A holds it open: still readable.
        b.unlink(ROOT_INO, b"f").unwrap();
        let mut got = vec![0u8; 3 * 4096];
        assert_eq!(a.read(f, 0, &mut got).unwrap(), 3 * 4096);
        assert_eq!(got, pattern(9, 3 * 4096));
        // A's release frees it: under delayed commit it is deferred, and goes out
        // on its own (no commit to ride with follows, nor a close) — after A's
        // commit threads have had time to go idle.
        std::thread::sleep(Duration::from_millis(300));
        a.release(f).unwrap();
        wait_for(
            &format!("{mode:?}: never freed"),
            Duration::from_millis(10),
            || mds.fs().getattr(f).is_err(),
        );
        a.close().unwrap();
    }
    b.close().unwrap();
    mds.shutdown().unwrap();
    assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
}

#[test]
fn a_pin_is_dropped_once_however_many_releases_race_for_it() {
    let (_dir, devs, mds) = server(Duration::from_millis(1000), 16);
    let a = std::sync::Arc::new(client(mds.addr(), &devs));
    let b = client(mds.addr(), &devs);
    for round in 0..20u64 {
        let name = format!("f{round}");
        let f = a
            .create(ROOT_INO, name.as_bytes(), 0o644, 0, 0)
            .unwrap()
            .ino;
        a.open(f).unwrap();
        a.write(f, 0, &pattern(round, 2 * 4096)).unwrap();
        // B holds the file open too.
        b.open(f).unwrap();
        // A's one pin, dropped by 8 threads at once: one of them drops it.
        let oks: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| {
                    let a = a.clone();
                    s.spawn(move || a.release(f).is_ok())
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap() as usize).sum()
        });
        assert_eq!(oks, 1, "round {round}: {oks} releases of one pin succeeded");
        // Unlinked: B's pin alone keeps it, whole.
        a.unlink(ROOT_INO, name.as_bytes()).unwrap();
        let mut got = vec![0u8; 2 * 4096];
        assert_eq!(b.read(f, 0, &mut got).unwrap(), 2 * 4096, "round {round}");
        assert_eq!(got, pattern(round, 2 * 4096), "round {round}");
        assert!(
            mds.fs().getattr(f).is_ok(),
            "round {round}: freed while B has it open"
        );
        b.release(f).unwrap();
    }
    b.close().unwrap();
    match std::sync::Arc::try_unwrap(a) {
        Ok(a) => a.close().unwrap(),
        Err(_) => panic!("client still shared"),
    }
    mds.shutdown().unwrap();
    assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
}

#[test]
fn an_expired_sessions_pins_are_dropped_a_lease_later() {
    let lease = Duration::from_millis(1500);
    let (_dir, devs, mds) = server(lease, 16);
    let a = client(mds.addr(), &devs);
    let b = client(mds.addr(), &devs);
    let f = a.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    a.open(f).unwrap();
    a.write(f, 0, &pattern(5, 2 * 4096)).unwrap();
    a.fsync(f).unwrap();
    // Unlinked while A holds it open: A's pin alone keeps it.
    b.unlink(ROOT_INO, b"f").unwrap();
    assert!(mds.fs().getattr(f).is_ok());
    // A hangs. Its session expires; A may read through its layouts until its
    // lease runs out, so the file stays a while (a lease), then goes.
    a.stop_renewing();
    wait_for("never expired", Duration::from_millis(10), || {
        expired(&mds) > 0
    });
    assert!(
        mds.fs().getattr(f).is_ok(),
        "freed at the expiry, not a lease later"
    );
    wait_for("never freed", Duration::from_millis(20), || {
        mds.fs().getattr(f).is_err()
    });
    drop(a);
    b.close().unwrap();
    mds.shutdown().unwrap();
    assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
}

#[test]
fn the_server_forgets_files_nobody_uses() {
    let (_dir, devs, mds) = server(Duration::from_millis(1000), 64);
    for mode in [CommitMode::Sync, CommitMode::Delayed] {
        let a = client_with(mds.addr(), &devs, mode);
        for i in 0..200u64 {
            let name = format!("{mode:?}{i}");
            let f = a
                .create(ROOT_INO, name.as_bytes(), 0o644, 0, 0)
                .unwrap()
                .ino;
            a.open(f).unwrap();
            a.write(f, 0, &pattern(i, 4096 + 100)).unwrap();
            a.fsync(f).unwrap();
            a.release(f).unwrap();
            if i % 2 == 0 {
                a.unlink(ROOT_INO, name.as_bytes()).unwrap();
            }
        }
        a.close().unwrap();
        // Every file was committed, released, half of them unlinked: none is in
        // use and no layout of them is held.
        assert!(
            mds.tracked_files() <= 2,
            "{mode:?}: {} files still tracked",
            mds.tracked_files()
        );
    }
    mds.shutdown().unwrap();
    assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
}

/// A client that commits to a file whose layout it holds drops that layout itself
/// before it sends the commit, so the server does not recall it (no round trip
/// while the commit waits); another client's layout is still recalled; both read
/// what was committed. In both commit modes.
#[test]
fn a_clients_own_commit_does_not_recall_its_own_layout() {
    use std::sync::atomic::Ordering::Relaxed;
    for mode in [CommitMode::Sync, CommitMode::Delayed] {
        let (_dir, devs, mds) = server(Duration::from_millis(400), 64);
        let a = client_with(mds.addr(), &devs, mode);
        let b = client(mds.addr(), &devs);
        let recalls = || mds.stats().recalls.load(Relaxed);
        let spared = || mds.stats().recalls_spared.load(Relaxed);

        let f = a.create(ROOT_INO, b"own", 0o644, 0, 0).unwrap().ino;
        let mut model = pattern(7, 3 * 4096 + 500);
        a.write(f, 0, &model).unwrap();
        a.fsync(f).unwrap();
        // A reads the committed file through a layout it now holds.
        let mut got = vec![0u8; model.len()];
        assert_eq!(a.read(f, 0, &mut got).unwrap(), model.len());
        assert_eq!(got, model);

        // A overwrites bytes inside page 1 (merged with the block its layout
        // names) and commits: its own layout is not recalled.
        let (r0, s0) = (recalls(), spared());
        a.write(f, 5000, b"0123456789").unwrap();
        model[5000..5010].copy_from_slice(b"0123456789");
        a.fsync(f).unwrap();
        assert_eq!(recalls(), r0, "{mode:?}: own layout recalled");
        assert!(spared() > s0, "{mode:?}: no commit dropped its own layout");
        let mut got = vec![0u8; model.len()];
        assert_eq!(a.read(f, 0, &mut got).unwrap(), model.len());
        assert_eq!(got, model, "{mode:?}: A reads its commit");

        // B holds a layout too: A's next commit recalls B's, not A's.
        let mut got = vec![0u8; model.len()];
        assert_eq!(b.read(f, 0, &mut got).unwrap(), model.len());
        assert_eq!(got, model);
        let (r1, s1) = (recalls(), spared());
        a.write(f, 9000, b"abcdef").unwrap();
        model[9000..9006].copy_from_slice(b"abcdef");
        a.fsync(f).unwrap();
        assert_eq!(recalls(), r1 + 1, "{mode:?}: B's layout recalled, only it");
        assert!(spared() > s1);
        for c in [&a, &b] {
            let mut got = vec![0u8; model.len()];
            assert_eq!(c.read(f, 0, &mut got).unwrap(), model.len());
            assert_eq!(got, model, "{mode:?}: both read the last commit");
        }
        a.close().unwrap();
        b.close().unwrap();
        mds.shutdown().unwrap();
        assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
    }
}

#[test]
fn an_append_takes_the_size_from_a_current_layout() {
    for mode in [CommitMode::Sync, CommitMode::Delayed] {
        let (_dir, devs, mds) = server(Duration::from_millis(400), 64);
        let a = client_with(mds.addr(), &devs, mode);
        let b = client_with(mds.addr(), &devs, mode);
        // Namespace and attribute calls a client has sent.
        let meta = |c: &Client| {
            let s = c.stats();
            s.rpcs - s.commit_rpcs - s.layout_rpcs - s.delegations
        };
        let read_all = |c: &Client, f| {
            let mut got = vec![0u8; 8192];
            let n = c.read(f, 0, &mut got).unwrap();
            got.truncate(n);
            got
        };

        let f = a.create(ROOT_INO, b"log", 0o644, 0, 0).unwrap().ino;
        let mut model = pattern(3, 1000);
        a.write(f, 0, &model).unwrap();
        a.fsync(f).unwrap();
        // Both read the file, so both hold a layout of it.
        assert_eq!(read_all(&a, f), model);
        assert_eq!(read_all(&b, f), model);

        // B appends from its layout's size and commits: A's layout is recalled.
        let m0 = meta(&b);
        assert_eq!(b.append(f, &pattern(4, 50)).unwrap(), 1000, "{mode:?}");
        assert_eq!(
            meta(&b),
            m0,
            "{mode:?}: B's append asked the server its size"
        );
        b.fsync(f).unwrap();
        model.extend(pattern(4, 50));

        // A's layout went with the recall: its append asks, and lands after B's.
        assert_eq!(a.append(f, &pattern(5, 100)).unwrap(), 1050, "{mode:?}");
        model.extend(pattern(5, 100));
        // Its own uncommitted bytes count in the next append's size.
        assert_eq!(a.append(f, &pattern(6, 10)).unwrap(), 1150, "{mode:?}");
        model.extend(pattern(6, 10));
        a.fsync(f).unwrap();
        assert_eq!(read_all(&b, f), model, "{mode:?}: B reads every append");
        assert_eq!(read_all(&a, f), model, "{mode:?}: A reads every append");

        // B cuts the file (A's layout is recalled); A reads it empty and appends
        // twice: the end of A's earlier writes no longer counts.
        b.setattr(
            f,
            &mnemofs::SetAttr {
                size: Some(0),
                ..Default::default()
            },
        )
        .unwrap();
        assert!(read_all(&a, f).is_empty(), "{mode:?}");
        assert_eq!(a.append(f, &pattern(7, 10)).unwrap(), 0, "{mode:?}");
        assert_eq!(a.append(f, &pattern(8, 10)).unwrap(), 10, "{mode:?}");
        a.fsync(f).unwrap();
        let mut cut = pattern(7, 10);
        cut.extend(pattern(8, 10));
        assert_eq!(read_all(&b, f), cut, "{mode:?}: B reads both appends");

        a.close().unwrap();
        b.close().unwrap();
        mds.shutdown().unwrap();
        assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
    }
}

#[test]
fn an_open_brings_the_layout_its_read_uses() {
    for mode in [CommitMode::Sync, CommitMode::Delayed] {
        let (_dir, devs, mds) = server(Duration::from_millis(400), 64);
        let a = client_with(mds.addr(), &devs, mode);
        let b = client_with(mds.addr(), &devs, mode);
        let f = a.create(ROOT_INO, b"read-me", 0o644, 0, 0).unwrap().ino;
        let model = pattern(9, 3 * 4096 + 100);
        a.write(f, 0, &model).unwrap();
        a.fsync(f).unwrap();

        // B opens the file: the open's reply carries the layout, so the read
        // after it sends nothing.
        assert_eq!(b.lookup(ROOT_INO, b"read-me").unwrap().ino, f);
        b.open(f).unwrap();
        let before = b.stats();
        let mut got = vec![0u8; 8 * 4096];
        assert_eq!(b.read(f, 0, &mut got).unwrap(), model.len(), "{mode:?}");
        assert_eq!(&got[..model.len()], &model[..], "{mode:?}");
        let after = b.stats();
        assert_eq!(after.rpcs, before.rpcs, "{mode:?}: the read sent a call");

        // A's next commit recalls that layout like any other: B reads the change.
        a.write(f, 4096, b"changed").unwrap();
        a.fsync(f).unwrap();
        let mut got = vec![0u8; 8 * 4096];
        assert_eq!(b.read(f, 0, &mut got).unwrap(), model.len(), "{mode:?}");
        assert_eq!(
            &got[4096..4096 + 7],
            b"changed",
            "{mode:?}: a stale layout was read"
        );
        b.release(f).unwrap();

        // An open of a directory (no layout) is an open all the same.
        let d = a.mkdir(ROOT_INO, b"dir", 0o755, 0, 0).unwrap().ino;
        b.open(d).unwrap();
        b.release(d).unwrap();

        a.close().unwrap();
        b.close().unwrap();
        mds.shutdown().unwrap();
        assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
    }
}

#[test]
fn a_create_brings_the_layout_its_first_write_uses() {
    for mode in [CommitMode::Sync, CommitMode::Delayed] {
        let (_dir, devs, mds) = server(Duration::from_millis(400), 64);
        let a = client_with(mds.addr(), &devs, mode);
        let b = client_with(mds.addr(), &devs, mode);

        // A's first write into a page in part needs the page's block: the create's
        // layout says it has none, without a call; B reads the bytes after A's fsync.
        let first_write = |f: u64, off: usize, bytes: &[u8], how: &str| {
            a.open(f).unwrap();
            let before = a.stats();
            a.write(f, off as u64, bytes).unwrap();
            assert_eq!(
                a.stats().layout_rpcs,
                before.layout_rpcs,
                "{mode:?}: the first write after {how} asked for a layout"
            );
            a.fsync(f).unwrap();
            let mut model = vec![0u8; off + bytes.len()];
            model[off..].copy_from_slice(bytes);
            let mut got = vec![0u8; 4096];
            assert_eq!(b.read(f, 0, &mut got).unwrap(), model.len(), "{mode:?}");
            assert_eq!(&got[..model.len()], &model[..], "{mode:?}");
            a.release(f).unwrap();
        };
        let f = a.create(ROOT_INO, b"new", 0o644, 0, 0).unwrap().ino;
        first_write(f, 100, b"0123456789", "create");
        // FUSE's create (`create_node`, a regular file) brings it too; a fifo's
        // create answers without one.
        let regular = mnemofs::NewNode {
            mode: libc::S_IFREG | 0o644,
            ..Default::default()
        };
        let n = a.create_node(ROOT_INO, b"node", &regular).unwrap().ino;
        first_write(n, 7, b"abc", "create_node");
        let fifo = mnemofs::NewNode {
            mode: libc::S_IFIFO | 0o644,
            ..Default::default()
        };
        let p = a.create_node(ROOT_INO, b"fifo", &fifo).unwrap();
        assert_eq!(p.kind, mnemofs::FileKind::Fifo, "{mode:?}");

        // Another client writes a file A just created: A's layout from the create
        // is recalled, and A reads B's bytes.
        let g = a.create(ROOT_INO, b"shared", 0o644, 0, 0).unwrap().ino;
        assert_eq!(b.lookup(ROOT_INO, b"shared").unwrap().ino, g);
        b.open(g).unwrap();
        b.write(g, 0, b"from b").unwrap();
        b.fsync(g).unwrap();
        let mut got = vec![0u8; 4096];
        assert_eq!(a.read(g, 0, &mut got).unwrap(), 6, "{mode:?}");
        assert_eq!(&got[..6], b"from b", "{mode:?}: A read a stale layout");
        b.release(g).unwrap();

        a.close().unwrap();
        b.close().unwrap();
        mds.shutdown().unwrap();
        assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
    }
}

/// A delay proxy to `mds`, `one_way` each way (a client through it has a round
/// trip of twice that).
fn delay_proxy(mds: &MdsHandle, one_way: Duration) -> mnemofs_cluster::netdelay::DelayProxy {
    mnemofs_cluster::netdelay::DelayProxy::start(
        "127.0.0.1:0".parse().unwrap(),
        mds.addr(),
        one_way,
    )
    .unwrap()
}

/// A file `name` in the root made by `c`: created, written with `data`, fsynced
/// and released.
fn written(c: &Client, name: &[u8], data: &[u8]) -> u64 {
    let f = c.create(ROOT_INO, name, 0o644, 0, 0).unwrap().ino;
    c.open(f).unwrap();
    c.write(f, 0, data).unwrap();
    c.fsync(f).unwrap();
    c.release(f).unwrap();
    f
}

/// Waits until the server has freed `f` (fails after 20 s).
fn wait_freed(mds: &MdsHandle, f: u64, what: &str) {
    wait_for(
        &format!("{what}: never freed"),
        Duration::from_millis(10),
        || mds.fs().getattr(f).is_err(),
    );
}

#[test]
fn opens_made_without_a_call_keep_an_unlinked_file() {
    let (_dir, devs, mds) = server(Duration::from_millis(400), 64);
    let a = client_with(mds.addr(), &devs, CommitMode::Delayed);
    let b = client(mds.addr(), &devs);
    let model = pattern(3, 2 * 4096 + 10);
    let make = |name: &[u8]| written(&b, name, &model);
    let read_all = |f: u64, what: &str| {
        let mut got = vec![0u8; 4 * 4096];
        assert_eq!(a.read(f, 0, &mut got).unwrap(), model.len(), "{what}");
        assert_eq!(&got[..model.len()], &model[..], "{what}");
    };
    let freed = |f: u64, what: &str| wait_freed(&mds, f, what);

    // The lookup brings the layout: the open, the read and the release send
    // nothing, and leave no pin behind (the other client's unlink frees the file).
    let f = make(b"quiet");
    assert_eq!(a.lookup(ROOT_INO, b"quiet").unwrap().ino, f);
    let before = a.client_stats().rpcs;
    a.open(f).unwrap();
    read_all(f, "held open");
    a.release(f).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        a.client_stats().rpcs,
        before,
        "open, read and release sent calls"
    );
    b.unlink(ROOT_INO, b"quiet").unwrap();
    freed(f, "after open and release");

    // Unlinked by the other client while held open without a call: the unlink
    // recalls the layout, the answer tells of the open, and the file stays
    // readable until the release.
    let f = make(b"other");
    a.lookup(ROOT_INO, b"other").unwrap();
    a.open(f).unwrap();
    b.unlink(ROOT_INO, b"other").unwrap();
    read_all(f, "unlinked by the other client");
    assert!(mds.fs().getattr(f).is_ok());
    a.release(f).unwrap();
    freed(f, "unlinked by the other client");

    // The same after the opener's own commit (which drops its layout without a
    // recall, but keeps it among the holders: `ExtentCommit::keep`).
    let f = make(b"written");
    a.lookup(ROOT_INO, b"written").unwrap();
    a.open(f).unwrap();
    a.write(f, 4096, &model[4096..8192]).unwrap();
    a.fsync(f).unwrap();
    b.unlink(ROOT_INO, b"written").unwrap();
    read_all(f, "written, then unlinked by the other client");
    a.release(f).unwrap();
    freed(f, "written, then unlinked");

    // Unlinked by the opener itself (whose own unlink recalls its layout too).
    let f = make(b"own");
    a.lookup(ROOT_INO, b"own").unwrap();
    a.open(f).unwrap();
    a.open(f).unwrap();
    a.unlink(ROOT_INO, b"own").unwrap();
    read_all(f, "unlinked by the opener");
    a.release(f).unwrap();
    read_all(f, "one open left");
    a.release(f).unwrap();
    freed(f, "unlinked by the opener");

    a.close().unwrap();
    b.close().unwrap();
    mds.shutdown().unwrap();
    assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
}

#[test]
fn a_commit_on_its_way_keeps_a_file_its_held_opens_let_go() {
    // A reaches the server through a 100 ms round trip, B directly: B's unlink
    // comes while A's commit is on its way, and its recall reaches A before the
    // commit's answer does.
    let (_dir, devs, mds) = server(Duration::from_millis(3000), 64);
    let proxy = delay_proxy(&mds, Duration::from_millis(50));
    let a = client_with(proxy.addr(), &devs, CommitMode::Delayed);
    let b = client(mds.addr(), &devs);
    let f = written(&b, b"f", &pattern(1, 4096));

    // Opened without a call, written (the commit queued and sent at once) and
    // released without a call: only the commit keeps A's interest in the file.
    a.lookup(ROOT_INO, b"f").unwrap();
    a.open(f).unwrap();
    a.write(f, 4096, &pattern(2, 4096)).unwrap();
    a.release(f).unwrap();
    std::thread::sleep(Duration::from_millis(10));
    b.unlink(ROOT_INO, b"f").unwrap();
    // The recall's answer told of a pin for the commit: the commit applies to the
    // unlinked file, and the pin goes once it is answered, which frees the file.
    a.fsync(f).unwrap();
    wait_freed(&mds, f, "the file");

    a.close().unwrap();
    b.close().unwrap();
    drop(proxy);
    mds.shutdown().unwrap();
    assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
}

#[test]
fn a_create_that_reuses_a_files_number_sends_one_call() {
    // One CPU: the freed number goes back to the one free list the next creates
    // take from (with a list per CPU, reuse depended on the CPU the server's thread
    // ran on, and with 64 lists on a 2-CPU host it never came).
    let (_dir, devs, mds) = server_of(Duration::from_millis(400), 64, 1);
    let a = client_with(mds.addr(), &devs, CommitMode::Delayed);
    let f = a.create(ROOT_INO, b"old", 0o644, 0, 0).unwrap().ino;
    a.open(f).unwrap();
    a.write(f, 0, &pattern(5, 8 * 4096)).unwrap();
    a.fsync(f).unwrap();
    a.release(f).unwrap();
    a.unlink(ROOT_INO, b"old").unwrap();
    wait_freed(&mds, f, "the file");
    // The end of A's writes of the old file must not make the new one's size
    // look stale (a getattr more per create).
    let mut reused = false;
    for i in 0..64 {
        let before = a.client_stats().rpcs;
        let attr = a
            .create(ROOT_INO, format!("new{i}").as_bytes(), 0o644, 0, 0)
            .unwrap();
        assert_eq!(a.client_stats().rpcs, before + 1, "create {i}");
        assert_eq!(attr.size, 0);
        if attr.ino == f {
            reused = true;
            break;
        }
    }
    assert!(reused, "no create reused the freed number");
    a.close().unwrap();
    mds.shutdown().unwrap();
    assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
}

#[test]
fn a_batch_keeps_its_client_a_holder_until_its_last_commit() {
    // C reads the file through a 400 ms round trip: a holder every commit of A
    // recalls, slow to answer. A's second batch carries two commits of the file;
    // the first spares A (its own layout dropped) and waits for C; B's unlink,
    // queued on the file's lock behind it, runs before the second. A must still be
    // a holder then, to tell of the pin its unapplied commit needs.
    let (_dir, devs, mds) = server(Duration::from_millis(3000), 64);
    let one_way = Duration::from_millis(200);
    let proxy = delay_proxy(&mds, one_way);
    let a = client_with(mds.addr(), &devs, CommitMode::Delayed);
    let b = client(mds.addr(), &devs);
    let c = std::sync::Arc::new(client(proxy.addr(), &devs));
    let f = written(&b, b"f", &pattern(1, 4 * 4096));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (c2, s2) = (c.clone(), stop.clone());
    let reader = std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        let mut buf = vec![0u8; 4096];
        while !s2.load(std::sync::atomic::Ordering::Relaxed) && t0.elapsed().as_secs() < 20 {
            if c2.read(f, 0, &mut buf).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    a.lookup(ROOT_INO, b"f").unwrap();
    a.open(f).unwrap();
    let t0 = std::time::Instant::now();
    // The first batch (one commit, kept: the open is held).
    a.write(f, 0, &pattern(2, 4096)).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    // Queued behind it: the second batch, two commits; released without a call.
    a.write(f, 4096, &pattern(3, 4096)).unwrap();
    a.write(f, 8192, &pattern(4, 4096)).unwrap();
    a.release(f).unwrap();
    // The second batch's first commit waits for C's answer by now.
    std::thread::sleep((5 * one_way / 2 + Duration::from_millis(100)).saturating_sub(t0.elapsed()));
    b.unlink(ROOT_INO, b"f").unwrap();
    let r = a.fsync(f);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.join().unwrap();
    assert!(
        r.is_ok(),
        "a commit of the batch found the file freed: {r:?}"
    );
    wait_freed(&mds, f, "the file");
    a.close().unwrap();
    b.close().unwrap();
    if let Ok(c) = std::sync::Arc::try_unwrap(c) {
        c.close().unwrap();
    }
    drop(proxy);
    mds.shutdown().unwrap();
    assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
}

#[test]
fn a_holder_expired_for_not_answering_keeps_the_file_a_lease() {
    // A holds the file open without a call and stops answering (as a hung client):
    // B's unlink expires it after a lease, and the file, which A may still read
    // through its layout until its own lease runs out, stays for one more.
    let (_dir, devs, mds) = server(Duration::from_millis(600), 64);
    let a = client_with(mds.addr(), &devs, CommitMode::Delayed);
    let b = client(mds.addr(), &devs);
    let f = written(&b, b"f", &pattern(1, 2 * 4096));
    a.lookup(ROOT_INO, b"f").unwrap();
    a.open(f).unwrap();
    a.stop_renewing();
    b.unlink(ROOT_INO, b"f").unwrap();
    assert_eq!(expired(&mds), 1);
    assert!(mds.fs().getattr(f).is_ok(), "freed at once");
    wait_freed(&mds, f, "the file");
    b.close().unwrap();
    drop(a);
    mds.shutdown().unwrap();
    assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
}

#[test]
fn a_release_waits_for_the_commits_of_its_file() {
    // A (delayed) reaches the server through 50 ms each way, B (sync) directly.
    // A releases x while a commit of x is queued behind one in flight, then an
    // fsync of y sends a batch: x's release must not ride with it, ahead of x's
    // queued commit, or B's unlink lets it free x (and a create of B may reuse
    // the number, x's commit then landing in the new file).
    let (_dir, devs, mds) = server(Duration::from_millis(3000), 64);
    let proxy = delay_proxy(&mds, Duration::from_millis(50));
    let a = client_with(proxy.addr(), &devs, CommitMode::Delayed);
    let b = std::sync::Arc::new(client(mds.addr(), &devs));
    let x = a.create(ROOT_INO, b"x", 0o644, 0, 0).unwrap().ino;
    let y = a.create(ROOT_INO, b"y", 0o644, 0, 0).unwrap().ino;
    a.open(x).unwrap();
    a.open(y).unwrap();
    a.write(y, 0, &pattern(9, 4096)).unwrap();
    a.fsync(y).unwrap();
    let t0 = std::time::Instant::now();
    // Sent at once (nothing else of x waits: the client does not stay a holder).
    a.write(x, 0, &pattern(1, 4096)).unwrap();
    std::thread::sleep(Duration::from_millis(10));
    // A whole page (no layout asked): queued behind the first.
    a.write(x, 4096, &pattern(2, 4096)).unwrap();
    a.release(x).unwrap();
    a.write(y, 4096, &pattern(3, 4096)).unwrap();
    let b2 = b.clone();
    let unlinker = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(65).saturating_sub(t0.elapsed()));
        b2.unlink(ROOT_INO, b"x").unwrap();
        std::thread::sleep(Duration::from_millis(95).saturating_sub(t0.elapsed()));
        (0..64).find(|i| {
            b2.create(ROOT_INO, format!("z{i}").as_bytes(), 0o644, 0, 0)
                .unwrap()
                .ino
                == x
        })
    });
    std::thread::sleep(Duration::from_millis(30).saturating_sub(t0.elapsed()));
    a.fsync(y).unwrap();
    let reused = unlinker.join().unwrap();
    let r = a.fsync(x);
    if reused.is_some() {
        assert_eq!(
            b.getattr(x).unwrap().size,
            0,
            "a new file got the freed file's queued write"
        );
    }
    assert!(r.is_ok(), "x's queued commit found the file freed: {r:?}");
    wait_for("x never freed", Duration::from_millis(10), || {
        reused.is_some() || mds.fs().getattr(x).is_err()
    });
    a.close().unwrap();
    drop(proxy);
    mds.shutdown().unwrap();
    assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
}

#[test]
fn a_create_released_without_an_open_leaves_no_pin_for_a_later_open() {
    let (_dir, devs, mds) = server(Duration::from_millis(400), 64);
    let b = client(mds.addr(), &devs);
    for mode in [CommitMode::Sync, CommitMode::Delayed] {
        let a = client_with(mds.addr(), &devs, mode);
        // Created (pinned for the open after it), written and released with no
        // open: the release drops the create's pin, and a later open pins anew.
        let f = a.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
        a.write(f, 0, &pattern(4, 4096)).unwrap();
        a.fsync(f).unwrap();
        a.release(f).unwrap();
        a.lookup(ROOT_INO, b"f").unwrap();
        a.open(f).unwrap();
        b.unlink(ROOT_INO, b"f").unwrap();
        let mut got = vec![0u8; 4096];
        assert_eq!(a.read(f, 0, &mut got).unwrap(), 4096, "{mode:?}");
        assert_eq!(got, pattern(4, 4096), "{mode:?}");
        a.release(f).unwrap();
        wait_freed(&mds, f, &format!("{mode:?}"));
        a.close().unwrap();
    }
    b.close().unwrap();
    mds.shutdown().unwrap();
    assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
}

/// A file opened twice by one client, once before and once after its session
/// ended (a server restart): the first open's pin went with the old session, so
/// its release must not drop what keeps the file for the second open (its pin,
/// or under delayed commit after a lookup brought the layout, the open the
/// client tells the server of when the unlink recalls that layout), which alone
/// keeps the file once another client unlinks it.
#[test]
fn a_release_of_an_open_from_an_ended_session_keeps_the_new_sessions_pin() {
    let cfg = || MdsConfig {
        lease: Duration::from_millis(300),
        chunk_blocks: 16,
    };
    for (mode, lookup) in [
        (CommitMode::Sync, false),
        (CommitMode::Delayed, false),
        (CommitMode::Delayed, true),
    ] {
        let dir = tempfile::tempdir_in(pm::scratch_dir()).unwrap();
        let devs = volume(dir.path());
        let fs = mnemofs::mount_devices(&devs, &mds_mount_options()).unwrap();
        let mds = MdsHandle::start(fs, "127.0.0.1:0".parse().unwrap(), cfg()).unwrap();
        let addr = mds.addr();
        let a = client_with(addr, &devs, mode);
        let f = a.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
        // Open 1: the create's pin, of session 1.
        a.open(f).unwrap();
        a.write(f, 0, &pattern(11, 2 * 4096)).unwrap();
        a.fsync(f).unwrap();
        // The server restarts: session 1 and its pins are gone. A finds out at its
        // next renewal and lets its delegated space and layouts go.
        mds.shutdown().unwrap();
        let fs = mnemofs::mount_devices(&devs, &mds_mount_options()).unwrap();
        let mds = MdsHandle::start(fs, addr, cfg()).unwrap();
        wait_for(
            &format!("{mode:?} {lookup}: A never left its session"),
            Duration::from_millis(10),
            || a.client_stats().pool_blocks == 0,
        );
        // Open 2: pinned in a new session (a call), or made without a call under
        // the layout the lookup brought.
        if lookup {
            // (The first call after the restart opens the new session; a layout
            // answered to a session that changed during its call is not kept.)
            a.lookup(ROOT_INO, b"f").unwrap();
            a.lookup(ROOT_INO, b"f").unwrap();
        }
        let rpcs = a.client_stats().rpcs;
        a.open(f).unwrap();
        assert_eq!(a.client_stats().rpcs == rpcs, lookup, "{mode:?}");
        // Open 1 ends (a release does not say which open it ends).
        a.release(f).unwrap();
        let b = client(addr, &devs);
        b.unlink(ROOT_INO, b"f").unwrap();
        assert!(
            mds.fs().getattr(f).is_ok(),
            "{mode:?} {lookup}: freed while open 2 holds it"
        );
        let mut got = vec![0u8; 2 * 4096];
        assert_eq!(a.read(f, 0, &mut got).unwrap(), 2 * 4096, "{mode:?}");
        assert_eq!(got, pattern(11, 2 * 4096), "{mode:?}");
        // Open 2 ends: its pin goes, and the file with it.
        a.release(f).unwrap();
        wait_freed(&mds, f, &format!("{mode:?}"));
        // No third open to release.
        assert!(a.release(f).is_err(), "{mode:?}");
        a.close().unwrap();
        b.close().unwrap();
        mds.shutdown().unwrap();
        assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean(), "{mode:?}");
    }
}

/// The same for the kernel's references (`remember`/`forget`): a forget of a
/// reference taken before the client's session ended (a server restart) must
/// not drop the one taken after it, which alone keeps the file once another
/// client unlinks it.
#[test]
fn a_forget_of_a_reference_from_an_ended_session_keeps_the_new_sessions_pin() {
    let cfg = || MdsConfig {
        lease: Duration::from_millis(300),
        chunk_blocks: 16,
    };
    let dir = tempfile::tempdir_in(pm::scratch_dir()).unwrap();
    let devs = volume(dir.path());
    let fs = mnemofs::mount_devices(&devs, &mds_mount_options()).unwrap();
    let mds = MdsHandle::start(fs, "127.0.0.1:0".parse().unwrap(), cfg()).unwrap();
    let addr = mds.addr();
    let a = client(addr, &devs);
    let f = written(&a, b"f", &pattern(12, 4096));
    // Reference 1, of session 1.
    a.remember(f);
    mds.shutdown().unwrap();
    let fs = mnemofs::mount_devices(&devs, &mds_mount_options()).unwrap();
    let mds = MdsHandle::start(fs, addr, cfg()).unwrap();
    wait_for(
        "A never left its session",
        Duration::from_millis(10),
        || a.client_stats().pool_blocks == 0,
    );
    // Reference 2, of a new session; then reference 1 is forgotten.
    a.remember(f);
    assert_eq!(a.client_stats().sessions, 2);
    a.forget(f, 1);
    let b = client(addr, &devs);
    b.unlink(ROOT_INO, b"f").unwrap();
    assert!(
        mds.fs().getattr(f).is_ok(),
        "freed while reference 2 holds it"
    );
    a.forget(f, 1);
    wait_freed(&mds, f, "after the last forget");
    a.close().unwrap();
    b.close().unwrap();
    mds.shutdown().unwrap();
    assert!(mnemofs::fsck_devices(&devs).unwrap().is_clean());
}
