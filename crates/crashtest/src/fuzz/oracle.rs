//! The checks on one mutated image: fsck on a private copy; mount (a clear error or
//! a file system); when mounted, a walk of the tree, a short workload whose results
//! are checked, unmount, fsck of the unmounted image and a second mount. An image
//! fsck calls clean must mount, walk, pass the workload and stay clean.

use super::corpus::{opts, Mirror};
use mnemofs::{FileKind, Fs, Ino, RenameFlags, SetAttr, SmallWriteMode, ROOT_INO};
use pm::Pm;
use std::cell::RefCell;
use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// How a failing image failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// A panic (caught).
    Panic,
    /// The process died (signal, abort, allocation failure): seen by the driver.
    Abort,
    /// A step took longer than the deadline.
    Hang,
    /// A panic of the pm layer's bounds check: an access outside the image.
    OutOfImage,
    /// fsck called the image clean, but mount or the walk failed.
    Disagreement,
    /// fsck called the image clean, but the workload failed or the image is no
    /// longer clean (or no longer mounts) after it.
    InconsistentAfterWorkload,
}

impl Class {
    /// Every class, in report order.
    pub const ALL: [Class; 6] = [
        Class::Panic,
        Class::Abort,
        Class::Hang,
        Class::OutOfImage,
        Class::Disagreement,
        Class::InconsistentAfterWorkload,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Class::Panic => "panic",
            Class::Abort => "abort",
            Class::Hang => "hang",
            Class::OutOfImage => "out-of-image",
            Class::Disagreement => "disagreement",
            Class::InconsistentAfterWorkload => "inconsistent-after-workload",
        }
    }

    /// The class a name stands for.
    pub fn by_name(s: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// What fsck said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FsckOutcome {
    /// Not run (an earlier failure).
    NotRun,
    /// `Err`: the image is unusable.
    Refused(String),
    /// No problem.
    Clean,
    /// Problems named (count, the first).
    Problems(usize, String),
}

/// What mount said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MountOutcome {
    /// Not run (an earlier failure).
    NotRun,
    /// A clear error.
    Refused(String),
    /// Mounted.
    Mounted,
}

/// A failure: its class, the step and what happened.
#[derive(Clone, Debug)]
pub struct Failure {
    /// Class.
    pub class: Class,
    /// Step it happened in.
    pub step: &'static str,
    /// Message (a panic's message and location).
    pub msg: String,
}

/// The outcome of one image.
#[derive(Clone, Debug)]
pub struct Verdict {
    /// fsck of the mutated image.
    pub fsck: FsckOutcome,
    /// Mount of the mutated image.
    pub mount: MountOutcome,
    /// The first failure, if any.
    pub failure: Option<Failure>,
}

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
    static GUARDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs a panic hook that, inside [`guarded`], keeps the message and location of
/// the panic for it and prints nothing; elsewhere it hands the panic to the hook it
/// replaced.
pub fn install_quiet_hook() {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !GUARDED.with(|g| g.get()) {
            return prev(info);
        }
        let p = info.payload();
        let what = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let msg = format!("{}{at}", what.replace('\n', " "));
        LAST_PANIC.with(|l| *l.borrow_mut() = Some(msg));
    }));
}

/// Runs `f`, turning a panic into its message (with the location when the quiet
/// hook is installed).
pub fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    LAST_PANIC.with(|l| l.borrow_mut().take());
    let was = GUARDED.with(|g| g.replace(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(was));
    r.map_err(|p| {
        LAST_PANIC
            .with(|l| l.borrow_mut().take())
            .unwrap_or_else(|| {
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into())
            })
    })
}

fn panic_failure(step: &'static str, msg: String) -> Failure {
    let class = if msg.starts_with("pm access out of bounds") {
        Class::OutOfImage
    } else {
        Class::Panic
    };
    Failure { class, step, msg }
}

fn pm_of(img: &[u8]) -> Result<Pm, String> {
    let mut pm = Pm::anonymous(img.len() as u64).map_err(|e| e.to_string())?;
    pm.load_image(img);
    Ok(pm)
}

/// fsck of a private copy of `img`.
pub fn fsck_image(img: &[u8]) -> Result<FsckOutcome, String> {
    let mut pm = pm_of(img).map_err(|e| format!("setup: {e}"))?;
    match guarded(|| mnemofs::fsck::fsck_private(&mut pm))? {
        Err(e) => Ok(FsckOutcome::Refused(e.to_string())),
        Ok(r) if r.is_clean() => Ok(FsckOutcome::Clean),
        Ok(r) => Ok(FsckOutcome::Problems(
            r.problems.len(),
            r.problems.first().cloned().unwrap_or_default(),
        )),
    }
}

/// Bytes of a file the walk reads from its start (a hostile size may be huge).
const READ_CAP: u64 = 4 << 20;

fn read_file(fs: &Fs, ino: Ino, size: u64) -> Result<(), String> {
    let mut buf = vec![0u8; 64 << 10];
    let end = size.min(READ_CAP);
    let mut off = 0;
    while off < end {
        let want = (end - off).min(buf.len() as u64) as usize;
        let n = fs
            .read(ino, off, &mut buf[..want])
            .map_err(|e| format!("read inode {ino} at {off}: {e}"))?;
        if n != want {
            return Err(format!("read inode {ino} at {off}: {n} of {want} bytes"));
        }
        off += want as u64;
    }
    if size > READ_CAP {
        let off = size - 4096;
        let n = fs
            .read(ino, off, &mut buf[..4096])
            .map_err(|e| format!("read inode {ino} at {off}: {e}"))?;
        if n != 4096 {
            return Err(format!("read inode {ino} at {off}: {n} of 4096 bytes"));
        }
    }
    Ok(())
}

/// Reads the whole tree: readdir of every directory, getattr of every entry, every
/// regular file (up to `READ_CAP`, and its last page), every symlink.
pub fn walk(fs: &Fs) -> Result<(), String> {
    let mut seen = HashSet::new();
    let mut stack = vec![ROOT_INO];
    seen.insert(ROOT_INO);
    let mut names = 0usize;
    while let Some(d) = stack.pop() {
        fs.getattr(d).map_err(|e| format!("getattr dir {d}: {e}"))?;
        let ents = fs
            .readdir(d, 0, usize::MAX)
            .map_err(|e| format!("readdir {d}: {e}"))?;
        for e in ents {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            names += 1;
            if names > 100_000 {
                return Err("more than 100000 names".into());
            }
            let a = fs.getattr(e.ino).map_err(|er| {
                format!(
                    "getattr inode {} ({:?} in {d}): {er}",
                    e.ino,
                    String::from_utf8_lossy(&e.name)
                )
            })?;
            match a.kind {
                FileKind::Directory if seen.insert(e.ino) => stack.push(e.ino),
                FileKind::Regular if seen.insert(e.ino) => read_file(fs, e.ino, a.size)?,
                FileKind::Symlink => {
                    fs.readlink(e.ino)
                        .map_err(|er| format!("readlink inode {}: {er}", e.ino))?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

fn pat(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed) | 1)
        .collect()
}

/// How a workload error that only says the file system is full starts: a consistent
/// image may have no room (e.g. a superblock edited to fewer blocks, whose owned
/// blocks all still fit), and ENOSPC is then the right answer, not a failure.
pub const FULL: &str = "full: ";

/// The short workload; every call must succeed (or find the file system full,
/// [`FULL`]) and read back what was written.
pub fn workload(fs: &Fs) -> Result<(), String> {
    let e = |what: &str| {
        let what = what.to_string();
        move |x: mnemofs::FsError| match x {
            mnemofs::FsError::NoSpace => format!("{FULL}{what}: {x}"),
            x => format!("{what}: {x}"),
        }
    };
    let name = b"\x01fuzz-probe";
    let f = fs
        .create(ROOT_INO, name, 0o644, 0, 0)
        .map_err(e("create"))?
        .ino;
    let mut want = pat(3 * 4096 + 100, 3);
    let n = fs.write(f, 0, &want).map_err(e("write"))?;
    if n != want.len() {
        return Err(format!("write: {n} of {} bytes", want.len()));
    }
    let small = pat(100, 9);
    fs.write(f, 5000, &small).map_err(e("sub-page write"))?;
    want[5000..5100].copy_from_slice(&small);
    let mut got = vec![0u8; want.len()];
    let n = fs.read(f, 0, &mut got).map_err(e("read back"))?;
    if n != want.len() || got != want {
        return Err("read back other bytes than written".into());
    }
    let d = fs
        .mkdir(ROOT_INO, b"\x01fuzz-dir", 0o755, 0, 0)
        .map_err(e("mkdir"))?
        .ino;
    fs.rename(ROOT_INO, name, d, b"moved", RenameFlags::default())
        .map_err(e("rename"))?;
    fs.setattr(
        f,
        &SetAttr {
            size: Some(6000),
            ..Default::default()
        },
    )
    .map_err(e("truncate"))?;
    let a = fs.getattr(f).map_err(e("getattr"))?;
    if a.size != 6000 {
        return Err(format!("size after truncate is {}", a.size));
    }
    let mut got = vec![0u8; 6000];
    let n = fs.read(f, 0, &mut got).map_err(e("read after truncate"))?;
    if n != 6000 || got[..] != want[..6000] {
        return Err("read after truncate: other bytes".into());
    }
    fs.fsync(f).map_err(e("fsync"))?;
    fs.unlink(d, b"moved").map_err(e("unlink"))?;
    fs.rmdir(ROOT_INO, b"\x01fuzz-dir").map_err(e("rmdir"))?;
    fs.fsync(ROOT_INO).map_err(e("fsync dir"))?;
    Ok(())
}

/// Checks one image, mounting it in `mode`; `step` is told when each step begins
/// (the deadline watchdog).
pub fn check(img: &[u8], mode: SmallWriteMode, step: &mut dyn FnMut(&'static str)) -> Verdict {
    let mut v = Verdict {
        fsck: FsckOutcome::NotRun,
        mount: MountOutcome::NotRun,
        failure: None,
    };
    let fail = |v: &mut Verdict, class, step, msg: String| {
        v.failure = Some(Failure { class, step, msg });
    };
    step("fsck");
    match fsck_image(img) {
        Ok(f) => v.fsck = f,
        Err(p) => {
            v.failure = Some(panic_failure("fsck", p));
            return v;
        }
    }
    let clean = v.fsck == FsckOutcome::Clean;
    step("mount");
    let mirror = Arc::new(Mirror::new(img));
    let mut pm = match pm_of(img) {
        Ok(p) => p,
        Err(e) => {
            fail(&mut v, Class::Abort, "mount", format!("setup: {e}"));
            return v;
        }
    };
    pm.set_tracer(Some(mirror.clone()));
    let fs = match guarded(|| Fs::from_pm(pm, &opts(mode))) {
        Err(p) => {
            v.failure = Some(panic_failure("mount", p));
            return v;
        }
        Ok(Err(e)) => {
            v.mount = MountOutcome::Refused(e.to_string());
            if clean {
                fail(
                    &mut v,
                    Class::Disagreement,
                    "mount",
                    format!("fsck clean, mount refused: {e}"),
                );
            }
            return v;
        }
        Ok(Ok(fs)) => fs,
    };
    v.mount = MountOutcome::Mounted;
    step("walk");
    match guarded(|| walk(&fs)) {
        Err(p) => {
            v.failure = Some(panic_failure("walk", p));
            return v;
        }
        Ok(Err(e)) if clean => {
            fail(
                &mut v,
                Class::Disagreement,
                "walk",
                format!("fsck clean, walk failed: {e}"),
            );
            return v;
        }
        _ => {}
    }
    step("workload");
    match guarded(|| workload(&fs)) {
        Err(p) => {
            v.failure = Some(panic_failure("workload", p));
            return v;
        }
        Ok(Err(e)) if clean && !e.starts_with(FULL) => {
            fail(
                &mut v,
                Class::InconsistentAfterWorkload,
                "workload",
                format!("fsck clean, workload failed: {e}"),
            );
            return v;
        }
        _ => {}
    }
    step("unmount");
    match guarded(|| fs.unmount()) {
        Err(p) => {
            v.failure = Some(panic_failure("unmount", p));
            return v;
        }
        Ok(Err(e)) if clean => {
            fail(
                &mut v,
                Class::InconsistentAfterWorkload,
                "unmount",
                format!("fsck clean, unmount failed: {e}"),
            );
            return v;
        }
        _ => {}
    }
    let after = mirror.bytes();
    step("fsck-after");
    match fsck_image(&after) {
        Err(p) => {
            v.failure = Some(panic_failure("fsck-after", p));
            return v;
        }
        Ok(f) if clean && f != FsckOutcome::Clean => {
            fail(
                &mut v,
                Class::InconsistentAfterWorkload,
                "fsck-after",
                format!("fsck clean before the workload, after it: {f:?}"),
            );
            return v;
        }
        _ => {}
    }
    step("remount");
    let r = guarded(|| -> Result<(), String> {
        let pm = pm_of(&after)?;
        let fs = Fs::from_pm(pm, &opts(mode)).map_err(|e| format!("mount: {e}"))?;
        walk(&fs)
    });
    match r {
        Err(p) => v.failure = Some(panic_failure("remount", p)),
        Ok(Err(e)) if clean => fail(
            &mut v,
            Class::InconsistentAfterWorkload,
            "remount",
            format!("fsck clean, second mount: {e}"),
        ),
        _ => {}
    }
    v
}
