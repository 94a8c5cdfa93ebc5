//! The checks on one crash image: fsck is clean, recovery succeeds, the recovered
//! tree is one the oracle allows, the file system is usable, and a crash at every
//! fence of recovery itself recovers to the same tree.

use crate::config::Config;
use crate::crash::Tracker;
use crate::image::{image_hash, mount_opts};
use crate::report::Report;
use crate::workload::{dump_fs, Op};
use mnemofs::{Fs, ROOT_INO};
use pm::{Event, RecordingTracer};
use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// Runs engine code, turning a panic into an error message (`run` silences the
/// panic hook while it explores).
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panic".into())
    })
}

/// Mounts a copy of `img` (recovery); returns the file system, its listing and the
/// PM events recovery issued.
pub(crate) fn recover(img: &[u8], trace: bool) -> Result<(Fs, Vec<String>, Vec<Event>), String> {
    let mut v = mnemofs::volume_of_image(img).map_err(|e| e.to_string())?;
    let rec = Arc::new(RecordingTracer::new());
    if trace {
        v.set_tracer(Some(rec.clone()));
    }
    let fs = guarded(|| Fs::from_volume(v, &mount_opts()))
        .map_err(|p| format!("recovery panicked: {p}"))?
        .map_err(|e| format!("recovery failed: {e}"))?;
    let events = rec.take();
    let dump =
        guarded(|| dump_fs(&fs)).map_err(|p| format!("listing after recovery panicked: {p}"))??;
    Ok((fs, dump, events))
}

pub(crate) fn fsck(img: &[u8]) -> Result<(), String> {
    let v = mnemofs::volume_of_image(img).map_err(|e| e.to_string())?;
    let r = guarded(|| mnemofs::fsck::fsck_volume_private(v))
        .map_err(|p| format!("fsck panicked: {p}"))?
        .map_err(|e| format!("fsck: {e}"))?;
    if r.is_clean() {
        Ok(())
    } else {
        Err(format!("fsck: {}", r.problems.join("; ")))
    }
}

pub(crate) fn usable(fs: &Fs) -> Result<(), String> {
    guarded(|| -> Result<(), String> {
        let e = |x: mnemofs::FsError| format!("not usable after recovery: {x}");
        let f = fs
            .create(ROOT_INO, b"crashtest-probe", 0o644, 0, 0)
            .map_err(e)?;
        fs.write(f.ino, 100, b"probe data").map_err(e)?;
        let mut b = [0u8; 10];
        fs.read(f.ino, 100, &mut b).map_err(e)?;
        if &b != b"probe data" {
            return Err("not usable after recovery: read back other bytes".into());
        }
        fs.unlink(ROOT_INO, b"crashtest-probe").map_err(e)?;
        Ok(())
    })
    .map_err(|p| format!("not usable after recovery: panicked: {p}"))?
}

pub(crate) fn diff(got: &[String], want: &[String]) -> String {
    let extra: Vec<&String> = got.iter().filter(|l| !want.contains(l)).take(3).collect();
    let missing: Vec<&String> = want.iter().filter(|l| !got.contains(l)).take(3).collect();
    format!("unexpected {extra:?}; missing {missing:?}")
}

/// A crash at each fence of recovery (of `img`, traced as `events`) must recover to
/// the same tree `got`.
fn recovery_crashes(
    cfg: &Config,
    img: &[u8],
    events: &[Event],
    got: &[String],
    rep: &mut Report,
) -> Result<(), String> {
    if !cfg.recovery_crashes {
        return Ok(());
    }
    let mut t = Tracker::with_tear16(img.to_vec(), cfg.tear16);
    let mut local = HashSet::new();
    for e in events {
        t.apply(e);
        if *e != Event::Fence {
            continue;
        }
        for img2 in [t.durable().to_vec(), t.everything()] {
            if !local.insert(image_hash(&img2)) {
                continue;
            }
            rep.recovery_crash_states += 1;
            let (_fs2, got2, _) =
                recover(&img2, false).map_err(|e| format!("crash during recovery, then: {e}"))?;
            if got2 != got {
                return Err(format!(
                    "a crash during recovery changes the outcome: {}",
                    diff(&got2, got)
                ));
            }
        }
    }
    Ok(())
}

/// All checks on one crash image of a single-threaded workload: the tree is the
/// oracle's `before` or `after` the operation `op` in flight (`after` once it
/// `returned`).
pub(crate) fn check_state(
    cfg: &Config,
    img: &[u8],
    before: &[String],
    after: &[String],
    returned: bool,
    op: &Op,
    rep: &mut Report,
) -> Result<(), String> {
    fsck(img)?;
    let (fs, got, events) = recover(img, cfg.recovery_crashes)?;
    let ok = if returned {
        got == after
    } else {
        got == before || got == after
    };
    if !ok {
        let mut what = if returned {
            format!("a returned operation is not durable: {}", diff(&got, after))
        } else {
            format!(
                "neither before nor after the operation: vs before {}; vs after {}",
                diff(&got, before),
                diff(&got, after)
            )
        };
        if let Op::Rename {
            from,
            to,
            exchange: false,
            ..
        } = op
        {
            let has = |p: &str| {
                got.iter()
                    .any(|l| l.starts_with(&format!("{p} ")) || l.starts_with(&format!("{p}/ ")))
            };
            match (has(from), has(to)) {
                (true, true) => what = format!("rename left both names; {what}"),
                (false, false) => what = format!("rename left neither name; {what}"),
                _ => {}
            }
        }
        return Err(what);
    }
    recovery_crashes(cfg, img, &events, &got, rep)?;
    usable(&fs)
}

/// All checks on one crash image of a multi-writer workload: the tree is one of the
/// oracle's `candidates` (the returned writes plus any subset of the writes in
/// flight; the first is the returned writes only).
pub(crate) fn check_multi_state(
    cfg: &Config,
    img: &[u8],
    candidates: &[Vec<String>],
    rep: &mut Report,
) -> Result<(), String> {
    fsck(img)?;
    let (fs, got, revents) = recover(img, cfg.recovery_crashes)?;
    if !candidates.contains(&got) {
        return Err(format!(
            "not a combination of the returned writes and all-or-nothing writes in flight: vs all returned only {}",
            diff(&got, &candidates[0])
        ));
    }
    recovery_crashes(cfg, img, &revents, &got, rep)?;
    usable(&fs)
}
