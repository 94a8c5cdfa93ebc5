//! Scenario: an image whose log holds a checksum-valid entry with a hostile value
//! (a Write of page 2^63-1): `mnemofs mount` refuses it with one line and exit 2,
//! `mnemofs fsck` names the problem and exits 1; neither panics.

mod common;
use mnemofs::format::{
    commit_word, get_u64, parse_commit, put_u64, CommitState, Entry, Geometry, BLOCK,
    ENTRY_TYPE_OFF, ET_WRITE, INO_HEAD_OFF, UNIT,
};
use mnemofs::{MountOptions, ROOT_INO};

/// Rewrites the first Write entry of `ino`'s log to name page 2^63-1, with its
/// commit word recomputed.
fn hostile_pgoff(path: &std::path::Path, ino: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    let geo = Geometry::decode(&bytes[..128], bytes.len() as u64).unwrap();
    let slot = geo.inode_off(ino).get() as usize;
    let mut pos = (get_u64(&bytes, slot + INO_HEAD_OFF as usize) * BLOCK) as usize;
    loop {
        let CommitState::Committed { units, .. } = parse_commit(get_u64(&bytes, pos)) else {
            panic!("no committed Write entry");
        };
        let len = (units * UNIT) as usize;
        if bytes[pos + ENTRY_TYPE_OFF] == ET_WRITE {
            let mut e = Entry::decode(&bytes[pos..pos + len]).unwrap();
            if let Entry::Write { pgoff, .. } = &mut e {
                *pgoff = (1 << 63) - 1;
            }
            let mut body = e.encode();
            let w = commit_word(&body);
            put_u64(&mut body, 0, w);
            bytes[pos..pos + len].copy_from_slice(&body);
            std::fs::write(path, &bytes).unwrap();
            return;
        }
        pos += len;
    }
}

#[test]
fn a_hostile_log_entry_is_refused_in_one_line() {
    let e = common::env("64M");
    let fs = mnemofs::mount(&e.img, &MountOptions::default()).unwrap();
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
    fs.write(f.ino, 0, &[7u8; 20_000]).unwrap();
    fs.unmount().unwrap();
    hostile_pgoff(&e.img, f.ino);
    let img = e.img.to_str().unwrap();

    for args in [
        vec!["mount", img, e.mnt.to_str().unwrap()],
        vec!["mount", "--foreground", img, e.mnt.to_str().unwrap()],
    ] {
        let o = common::run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
        assert!(err.contains("past the largest file"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!common::is_mounted(&e.mnt));
    }

    let o = common::run(&["fsck", img]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("past the largest file"), "{out}");
}
