//! Workloads in the style of CrashMonkey's ACE: operations over a small file set
//! (`foo`, `bar`, `A/`, `B/`, `A/C/`), run against both the engine and the oracle.

use mnemofs::{FileKind, Fs, FsError, Ino, RenameFlags, SetAttr, ROOT_INO};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt;

/// One file-system operation on paths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Create a regular file.
    Creat(String),
    /// Create a directory.
    Mkdir(String),
    /// Write `len` bytes of [`pattern`] at `off`.
    Write {
        /// The file.
        path: String,
        /// Byte offset.
        off: u64,
        /// Bytes.
        len: usize,
        /// Pattern seed.
        seed: u8,
    },
    /// Write `len` bytes of [`pattern`] at the end of the file.
    Append {
        /// The file.
        path: String,
        /// Bytes.
        len: usize,
        /// Pattern seed.
        seed: u8,
    },
    /// Set the size of a file.
    Truncate(String, u64),
    /// Hard-link the first path as the second.
    Link(String, String),
    /// Remove a name.
    Unlink(String),
    /// Rename, with the `RENAME_NOREPLACE` or `RENAME_EXCHANGE` flag.
    Rename {
        /// Old path.
        from: String,
        /// New path.
        to: String,
        /// Fail if `to` exists.
        noreplace: bool,
        /// Swap `from` and `to`.
        exchange: bool,
    },
    /// Create a symbolic link.
    Symlink {
        /// Link target.
        target: String,
        /// Path of the link.
        path: String,
    },
    /// Remove an empty directory.
    Rmdir(String),
    /// Set the permission bits.
    Chmod(String, u32),
    /// Punch a hole.
    Punch {
        /// The file.
        path: String,
        /// Byte offset.
        off: u64,
        /// Bytes.
        len: u64,
    },
    /// LAWN write-back of every zone slice (`Fs::lawn_writeback`): changes no file
    /// contents, so the oracle does nothing.
    WriteBack,
    /// One pass of LAWN zone growth and shrinking (`Fs::lawn_resize`): changes no
    /// file contents.
    Resize,
    /// Does nothing; the explorer crashes only inside the operations after the
    /// last checkpoint of a workload (what comes before builds its starting state).
    Checkpoint,
    /// An unnamed file (`O_TMPFILE`) in directory `dir`, `len` bytes of [`pattern`]
    /// written to it, then linked as `link` (Linux's `linkat` of
    /// `/proc/self/fd/N`) or, with `None`, closed unnamed (and freed).
    Tmpfile {
        /// The directory it is made in.
        dir: String,
        /// Its first name, if any.
        link: Option<String>,
        /// Bytes written before the link.
        len: usize,
        /// Pattern seed.
        seed: u8,
    },
    /// Set extended attribute `name` to `len` bytes of [`pattern`].
    SetXattr {
        /// The file or directory.
        path: String,
        /// The attribute's name.
        name: String,
        /// Bytes of the value.
        len: usize,
        /// Pattern seed.
        seed: u8,
    },
    /// Remove extended attribute `name`.
    RemoveXattr(String, String),
    /// Set the inode flags (`chattr`, `FS_IOC_SETFLAGS`: [`flags`]) to exactly these.
    SetFlags(String, u32),
    /// Set a POSIX access ACL of five entries: owner, the named user `uid`, owning
    /// group, mask, other (`perms` in that order); the mode follows it in the same
    /// commit.
    SetAcl {
        /// The file or directory.
        path: String,
        /// The named user.
        uid: u32,
        /// Permissions of owner, named user, owning group, mask, other.
        perms: [u16; 5],
    },
}

/// Inode flags, Linux's `FS_*_FL` values (written out here, not taken from the
/// engine, so the oracle stays independent of it).
pub mod flags {
    /// `S`: synchronous updates.
    pub const SYNC: u32 = 0x8;
    /// `i`: immutable.
    pub const IMMUTABLE: u32 = 0x10;
    /// `a`: append only.
    pub const APPEND: u32 = 0x20;
    /// `d`: no dump.
    pub const NODUMP: u32 = 0x40;
    /// `A`: no atime updates.
    pub const NOATIME: u32 = 0x80;
    /// `D`: synchronous directory updates (kept on directories only).
    pub const DIRSYNC: u32 = 0x1_0000;
    /// `chattr`'s letter of each.
    pub const LETTERS: [(u32, char); 6] = [
        (SYNC, 'S'),
        (IMMUTABLE, 'i'),
        (APPEND, 'a'),
        (NODUMP, 'd'),
        (NOATIME, 'A'),
        (DIRSYNC, 'D'),
    ];

    /// The flags as `chattr` letters (`-` for none).
    pub fn letters(f: u32) -> String {
        let s: String = LETTERS
            .iter()
            .filter(|(b, _)| f & b != 0)
            .map(|&(_, c)| c)
            .collect();
        if s.is_empty() {
            "-".into()
        } else {
            s
        }
    }
}

/// The xattr form of the five-entry ACL of [`Op::SetAcl`] (written out here, not
/// by the engine's codec, so the oracle stays independent of the engine).
pub fn acl_bytes(uid: u32, perms: [u16; 5]) -> Vec<u8> {
    let tags = [0x01u16, 0x02, 0x04, 0x10, 0x20];
    let mut v = 2u32.to_le_bytes().to_vec();
    for (i, (tag, perm)) in tags.into_iter().zip(perms).enumerate() {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        let id = if i == 1 { uid } else { u32::MAX };
        v.extend_from_slice(&id.to_le_bytes());
    }
    v
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Creat(p) => write!(f, "creat({p})"),
            Op::Mkdir(p) => write!(f, "mkdir({p})"),
            Op::Write { path, off, len, .. } => write!(f, "write({path}, off {off}, len {len})"),
            Op::Append { path, len, .. } => write!(f, "append({path}, len {len})"),
            Op::Truncate(p, s) => write!(f, "truncate({p}, {s})"),
            Op::Link(a, b) => write!(f, "link({a}, {b})"),
            Op::Unlink(p) => write!(f, "unlink({p})"),
            Op::Rename {
                from,
                to,
                noreplace,
                exchange,
            } => {
                let fl = if *exchange {
                    ", EXCHANGE"
                } else if *noreplace {
                    ", NOREPLACE"
                } else {
                    ""
                };
                write!(f, "rename({from}, {to}{fl})")
            }
            Op::Symlink { target, path } => write!(f, "symlink({target}, {path})"),
            Op::Rmdir(p) => write!(f, "rmdir({p})"),
            Op::Chmod(p, m) => write!(f, "chmod({p}, {m:o})"),
            Op::Punch { path, off, len } => write!(f, "punch_hole({path}, off {off}, len {len})"),
            Op::WriteBack => write!(f, "lawn_writeback()"),
            Op::Resize => write!(f, "lawn_resize()"),
            Op::Checkpoint => write!(f, "checkpoint()"),
            Op::SetXattr {
                path, name, len, ..
            } => write!(f, "setxattr({path}, {name}, len {len})"),
            Op::RemoveXattr(p, n) => write!(f, "removexattr({p}, {n})"),
            Op::Tmpfile { dir, link, len, .. } => match link {
                Some(l) => write!(f, "tmpfile({dir}, len {len}) linked as {l}"),
                None => write!(f, "tmpfile({dir}, len {len}) closed unnamed"),
            },
            Op::SetAcl { path, uid, perms } => {
                write!(f, "setfacl({path}, u:{uid}, perms {perms:?})")
            }
            Op::SetFlags(p, fl) => write!(f, "chattr({p}, ={})", flags::letters(*fl)),
        }
    }
}

/// Bytes written by a write with `seed` (position-dependent, so misplaced data shows).
pub fn pattern(len: usize, seed: u8, off: u64) -> Vec<u8> {
    (0..len)
        .map(|i| {
            seed.wrapping_mul(31)
                .wrapping_add(((off as usize + i) % 251) as u8)
                | 1
        })
        .collect()
}

fn s(x: &str) -> String {
    x.to_string()
}

/// The state every workload starts from.
pub fn setup() -> Vec<Op> {
    vec![
        Op::Mkdir(s("A")),
        Op::Mkdir(s("A/C")),
        Op::Mkdir(s("B")),
        Op::Creat(s("foo")),
        Op::Write {
            path: s("foo"),
            off: 0,
            len: 6000,
            seed: 1,
        },
        Op::Truncate(s("foo"), 5000),
        Op::Creat(s("bar")),
        Op::Write {
            path: s("bar"),
            off: 0,
            len: 100,
            seed: 2,
        },
    ]
}

fn rename(from: &str, to: &str) -> Op {
    Op::Rename {
        from: s(from),
        to: s(to),
        noreplace: false,
        exchange: false,
    }
}

/// Every single operation seq-1 tries (after `setup`).
pub fn seq1_ops() -> Vec<Op> {
    vec![
        Op::Creat(s("A/baz")),
        Op::Mkdir(s("B/D")),
        Op::Mkdir(s("A/C/E")),
        Op::Write {
            path: s("foo"),
            off: 5000,
            len: 100,
            seed: 3,
        },
        Op::Append {
            path: s("foo"),
            len: 5000,
            seed: 4,
        },
        Op::Write {
            path: s("foo"),
            off: 1000,
            len: 3000,
            seed: 5,
        },
        Op::Write {
            path: s("foo"),
            off: 4500,
            len: 2000,
            seed: 6,
        },
        Op::Write {
            path: s("bar"),
            off: 10,
            len: 20,
            seed: 7,
        },
        Op::Write {
            path: s("foo"),
            off: 0,
            len: 12288,
            seed: 8,
        },
        Op::Write {
            path: s("foo"),
            off: 100,
            len: 9000,
            seed: 9,
        },
        Op::Truncate(s("foo"), 1000),
        Op::Truncate(s("foo"), 20000),
        Op::Truncate(s("bar"), 0),
        Op::Link(s("foo"), s("A/foo2")),
        Op::Link(s("bar"), s("B/bar")),
        Op::Unlink(s("foo")),
        Op::Unlink(s("bar")),
        rename("foo", "baz"),
        rename("A", "Z"),
        rename("foo", "bar"),
        rename("foo", "A/C/foo"),
        rename("A/C", "B/C"),
        rename("B", "A/C"),
        Op::Rename {
            from: s("foo"),
            to: s("bar"),
            noreplace: false,
            exchange: true,
        },
        Op::Rename {
            from: s("A"),
            to: s("bar"),
            noreplace: false,
            exchange: true,
        },
        Op::Symlink {
            target: s("foo"),
            path: s("A/sl"),
        },
        Op::Rmdir(s("B")),
        Op::Rmdir(s("A/C")),
        Op::Chmod(s("foo"), 0o600),
        Op::Punch {
            path: s("foo"),
            off: 1000,
            len: 3000,
        },
        xattr("foo", "user.a", 100, 1),
        xattr("A", "user.d", 10, 2),
        // Over a thousand bytes: an entry of 17 units, which may span log pages.
        xattr("foo", "security.big", 1000, 3),
        xattr("A/sl-missing", "user.a", 1, 4),
        // A POSIX ACL: the attribute and the mode in one commit (the last seq-1
        // workload then chmods a file with an ACL); a set-id chmod.
        acl("foo", [6, 6, 4, 6, 0]),
        acl("A", [7, 7, 5, 7, 5]),
        Op::Chmod(s("bar"), 0o6755),
    ]
}

fn acl(path: &str, perms: [u16; 5]) -> Op {
    Op::SetAcl {
        path: s(path),
        uid: 1000,
        perms,
    }
}

fn xattr(path: &str, name: &str, len: usize, seed: u8) -> Op {
    Op::SetXattr {
        path: s(path),
        name: s(name),
        len,
        seed,
    }
}

fn w(path: &str, off: u64, len: usize, seed: u8) -> Op {
    Op::Write {
        path: s(path),
        off,
        len,
        seed,
    }
}

/// With a sub-page small-write mode (LAWN, fine-log): sub-page overwrites at the end
/// of the setup, so that the zone holds slices of `foo` and `bar` when the explored
/// operations start (page CoW, truncate, punch and unlink then meet them).
pub fn small_setup() -> Vec<Op> {
    vec![
        w("foo", 64, 128, 20),
        w("foo", 2048, 1000, 21),
        w("foo", 4200, 300, 22),
        w("bar", 0, 64, 23),
    ]
}

/// Extra seq-1 operations with a sub-page small-write mode: each kind of alternate
/// write (to the zone, back to the file, over runs that only partly overlap) and the
/// write-back.
pub fn small_ops() -> Vec<Op> {
    vec![
        // Same slices as a setup run: the file copy (alternation back).
        w("foo", 64, 128, 30),
        // Inside a setup run.
        w("foo", 100, 50, 31),
        // Fresh slices: a new zone run.
        w("foo", 512, 200, 32),
        // Partly over two runs: write-back, then a new run.
        w("foo", 0, 2200, 33),
        // Over the run of the second page.
        w("foo", 4200, 300, 34),
        Op::WriteBack,
    ]
}

/// A LAWN zone that grows and shrinks (docs/FORMAT.md §2.9, "Growth"). Not explored
/// (before the checkpoint): runs of 63 slots on 4 pages of a new file fill the
/// sub-zones (147 slots each in the explorer's image) below a quarter free, leaving
/// fewer than 24 free slots in a row. Explored: a resize pass adds a chunk
/// (descriptors zeroed, table entry), runs of 24 slots on 4 more pages go into it
/// (those of a sub-zone that grew),
/// everything is written back and the empty chunks go (table entry cleared).
pub fn growth_sequence() -> Vec<Op> {
    let mut v = vec![
        Op::Creat(s("grow")),
        Op::Write {
            path: s("grow"),
            off: 0,
            len: 8 * 4096,
            seed: 50,
        },
    ];
    for p in 0..4u64 {
        v.push(w("grow", p * 4096, 4032, 51 + p as u8));
    }
    v.push(Op::Checkpoint);
    v.push(Op::Resize);
    for p in 4..8u64 {
        v.push(w("grow", p * 4096 + 64, 1500, 56 + p as u8));
    }
    v.push(Op::WriteBack);
    v.push(Op::Resize);
    v
}

/// Extra seq-1 sequences with a sub-page small-write mode: alternation back and
/// forth, a page CoW'd twice (its first block freed, then reused), and the zone
/// growing and shrinking.
pub fn small_sequences() -> Vec<Vec<Op>> {
    vec![
        vec![
            w("foo", 64, 128, 40),
            w("foo", 64, 128, 41),
            w("foo", 64, 128, 42),
        ],
        vec![
            w("foo", 0, 4096, 43),
            w("foo", 0, 4096, 44),
            w("foo", 0, 4096, 45),
        ],
        vec![
            w("bar", 10, 20, 46),
            Op::Truncate(s("bar"), 0),
            w("bar", 0, 64, 47),
        ],
        // Last: earlier sequences keep their workload numbers (tests name them).
        growth_sequence(),
    ]
}

/// One workload: setup, then these operations.
pub fn seq1() -> Vec<Vec<Op>> {
    let mut v: Vec<Vec<Op>> = seq1_ops().into_iter().map(|o| vec![o]).collect();
    // A chmod of a file with an access ACL rewrites the ACL in the chmod's commit.
    v.push(vec![
        acl("foo", [6, 6, 4, 6, 0]),
        Op::Chmod(s("foo"), 0o751),
    ]);
    // A page overwritten three times, one page each: the first keeps the block it
    // supersedes as the file's spare, the next write into the spare (the last in
    // part, merged) and keep the block each supersedes (`DataPlane::blocks_for`).
    v.push(vec![
        w("foo", 0, 4096, 60),
        w("foo", 0, 4096, 61),
        w("foo", 100, 50, 62),
    ]);
    // Last: earlier workloads keep their numbers (tests name them).
    v.extend(flag_sequences());
    v.push(large_xattr_sequence());
    v.push(tmpfile_sequence());
    v
}

/// Unnamed files (`O_TMPFILE`): one closed unnamed (freed), one linked after a
/// write of two pages and a bit (the name and the data appear together), one whose
/// name is taken (EEXIST; freed).
pub fn tmpfile_sequence() -> Vec<Op> {
    let t = |dir: &str, link: Option<&str>, len, seed| Op::Tmpfile {
        dir: s(dir),
        link: link.map(s),
        len,
        seed,
    };
    vec![
        t("A", None, 5000, 90),
        t("A", Some("A/t"), 9000, 91),
        t("B", Some("foo"), 100, 92),
    ]
}

/// Values longer than one log entry holds (a SET and continuations in one commit):
/// set (2 entries), replaced by Linux's largest (17), by a short one (1), removed;
/// a directory's too (2).
pub fn large_xattr_sequence() -> Vec<Op> {
    vec![
        xattr("foo", "user.big", 5000, 80),
        xattr("foo", "user.big", 65536, 81),
        xattr("foo", "user.big", 100, 82),
        Op::RemoveXattr(s("foo"), s("user.big")),
        xattr("A", "user.dir", 4500, 83),
    ]
}

fn chattr(path: &str, f: u32) -> Op {
    Op::SetFlags(s(path), f)
}

/// The seq-1 sequences of inode flags (one log entry each: set, replaced, removed),
/// with the changes the flags forbid refused (EPERM) and those they allow done.
pub fn flag_sequences() -> Vec<Vec<Op>> {
    use flags::*;
    vec![
        // A new file (not explored: other workloads are) made immutable and
        // no-dump, cleared, made append-only: a write is refused while it is
        // immutable, an append allowed and a truncate refused while it is
        // append-only.
        vec![
            Op::Creat(s("A/f")),
            w("A/f", 0, 4096, 70),
            Op::Checkpoint,
            chattr("A/f", IMMUTABLE | NODUMP),
            w("A/f", 100, 10, 71),
            chattr("A/f", 0),
            chattr("A/f", APPEND),
            Op::Append {
                path: s("A/f"),
                len: 64,
                seed: 72,
            },
            Op::Truncate(s("A/f"), 0),
        ],
        // Flags follow the inode through a rename, change from one set to another,
        // refuse a link and an unlink (append-only) and a new name in an immutable
        // directory; DIRSYNC stays on a directory only; an unlinked inode's flags
        // go with it (a new file, which may take its number, has none).
        vec![
            chattr("foo", NODUMP | NOATIME),
            rename("foo", "A/C/foo"),
            chattr("A/C/foo", APPEND | NODUMP),
            Op::Link(s("A/C/foo"), s("B/l")),
            Op::Unlink(s("A/C/foo")),
            chattr("A", IMMUTABLE | DIRSYNC),
            Op::Creat(s("A/new")),
            chattr("bar", SYNC | DIRSYNC),
            chattr("A/C/foo", NOATIME),
            Op::Unlink(s("A/C/foo")),
            Op::Creat(s("B/g")),
            chattr("A", DIRSYNC),
        ],
    ]
}

/// `seq1` for a small-write mode other than page CoW: the extra operations and
/// sequences first (a `--max-states` budget reaches them), then the common ones.
pub fn seq1_small() -> Vec<Vec<Op>> {
    let mut v: Vec<Vec<Op>> = small_ops().into_iter().map(|o| vec![o]).collect();
    v.extend(small_sequences());
    v.extend(seq1());
    v
}

/// Every ordered pair of seq-1 operations (with `small`, the small-write ones too).
pub fn seq2_for(small: bool) -> Vec<Vec<Op>> {
    let mut ops = seq1_ops();
    if small {
        ops.extend(small_ops());
    }
    let mut v = Vec::new();
    for a in &ops {
        for b in &ops {
            v.push(vec![a.clone(), b.clone()]);
        }
    }
    v
}

const PATHS: &[&str] = &[
    "foo", "bar", "baz", "A/foo", "A/C/bar", "B/x", "A", "B", "A/C", "B/D",
];

/// `count` seeded random sequences of 5–20 operations (inode flags among them:
/// set, replaced, cleared).
/// With `small`, a quarter of the operations are sub-page writes or LAWN
/// write-backs (the other choices draw the same way as without).
pub fn random(seed: u64, count: usize, small: bool) -> Vec<Vec<Op>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..count)
        .map(|_| {
            let n = rng.random_range(5..=20);
            (0..n).map(|_| random_op(&mut rng, small)).collect()
        })
        .collect()
}

fn random_op(rng: &mut StdRng, small: bool) -> Op {
    let p = |rng: &mut StdRng| s(PATHS[rng.random_range(0..PATHS.len())]);
    if small && rng.random_range(0..4) == 0 {
        if rng.random_range(0..8) == 0 {
            return Op::WriteBack;
        }
        return Op::Write {
            path: p(rng),
            off: rng.random_range(0..9000),
            len: rng.random_range(1..700),
            seed: rng.random(),
        };
    }
    // `user.` names only: the listing shows no attributes of symlinks, which refuse
    // `user.` names (EPERM) on the engine and in the model alike.
    let names = ["user.a", "user.b"];
    let name = |rng: &mut StdRng| s(names[rng.random_range(0..names.len())]);
    match rng.random_range(0..17) {
        16 => {
            // A set of flags (locking ones among them: the model refuses what
            // they forbid, as the engine does), or none (a locked inode changes
            // again).
            const SETS: [u32; 8] = [
                0,
                0,
                flags::IMMUTABLE,
                flags::APPEND,
                flags::NODUMP | flags::NOATIME,
                flags::IMMUTABLE | flags::NODUMP,
                flags::APPEND | flags::NOATIME,
                flags::SYNC | flags::DIRSYNC,
            ];
            Op::SetFlags(p(rng), SETS[rng.random_range(0..SETS.len())])
        }
        14 => Op::SetXattr {
            path: p(rng),
            name: name(rng),
            len: rng.random_range(0..1200),
            seed: rng.random(),
        },
        15 => Op::RemoveXattr(p(rng), name(rng)),
        0 => Op::Creat(p(rng)),
        1 => Op::Mkdir(p(rng)),
        2 | 3 => Op::Write {
            path: p(rng),
            off: rng.random_range(0..12000),
            len: rng.random_range(1..9000),
            seed: rng.random(),
        },
        4 => Op::Append {
            path: p(rng),
            len: rng.random_range(1..6000),
            seed: rng.random(),
        },
        5 => Op::Truncate(p(rng), rng.random_range(0..16000)),
        6 => Op::Link(p(rng), p(rng)),
        7 => Op::Unlink(p(rng)),
        8 | 9 => {
            let f = rng.random_range(0..4);
            Op::Rename {
                from: p(rng),
                to: p(rng),
                noreplace: f == 1,
                exchange: f == 2,
            }
        }
        10 => Op::Symlink {
            target: p(rng),
            path: p(rng),
        },
        11 => Op::Rmdir(p(rng)),
        12 => Op::Chmod(p(rng), rng.random_range(0..0o7777)),
        _ => Op::Punch {
            path: p(rng),
            off: rng.random_range(0..12000),
            len: rng.random_range(1..8000),
        },
    }
}

// ------------------------------------------------------------ engine side ----

fn err(e: FsError) -> i32 {
    e.errno()
}

/// Resolves `path` to (parent inode, last name).
fn parent_of<'a>(fs: &Fs, path: &'a str) -> Result<(Ino, &'a str), i32> {
    let mut dir = ROOT_INO;
    let mut parts: Vec<&str> = path.split('/').collect();
    let last = parts.pop().unwrap_or("");
    for c in parts {
        let a = fs.lookup(dir, c.as_bytes()).map_err(err)?;
        if a.kind != FileKind::Directory {
            return Err(libc::ENOTDIR);
        }
        dir = a.ino;
    }
    Ok((dir, last))
}

fn resolve(fs: &Fs, path: &str) -> Result<Ino, i32> {
    let (d, name) = parent_of(fs, path)?;
    fs.lookup(d, name.as_bytes()).map(|a| a.ino).map_err(err)
}

/// Runs `op` on the engine; `Err(errno)` on failure.
pub fn apply_fs(fs: &Fs, op: &Op) -> Result<(), i32> {
    match op {
        Op::Tmpfile {
            dir,
            link,
            len,
            seed,
        } => {
            let d = resolve(fs, dir)?;
            let node = mnemofs::NewNode {
                mode: libc::S_IFREG | 0o644,
                umask: 0,
                rdev: 0,
                uid: 0,
                gid: 0,
            };
            let a = fs.tmpfile(d, &node).map_err(err)?;
            let named = (|| {
                if *len > 0 {
                    fs.write(a.ino, 0, &pattern(*len, *seed, 0)).map_err(err)?;
                }
                if let Some(l) = link {
                    let (pd, n) = parent_of(fs, l)?;
                    fs.link(a.ino, pd, n.as_bytes()).map_err(err)?;
                }
                Ok(())
            })();
            // Closed: an unnamed one is freed here.
            fs.release(a.ino).map_err(err)?;
            named
        }
        Op::Creat(p) => {
            let (d, n) = parent_of(fs, p)?;
            fs.create(d, n.as_bytes(), 0o644, 0, 0)
                .map(drop)
                .map_err(err)
        }
        Op::Mkdir(p) => {
            let (d, n) = parent_of(fs, p)?;
            fs.mkdir(d, n.as_bytes(), 0o755, 0, 0)
                .map(drop)
                .map_err(err)
        }
        Op::Write {
            path,
            off,
            len,
            seed,
        } => {
            let i = resolve(fs, path)?;
            fs.write(i, *off, &pattern(*len, *seed, *off))
                .map(drop)
                .map_err(err)
        }
        Op::Append { path, len, seed } => {
            let i = resolve(fs, path)?;
            let size = fs.getattr(i).map_err(err)?.size;
            fs.append(i, &pattern(*len, *seed, size))
                .map(drop)
                .map_err(err)
        }
        Op::Truncate(p, size) => {
            let i = resolve(fs, p)?;
            fs.setattr(
                i,
                &SetAttr {
                    size: Some(*size),
                    ..Default::default()
                },
            )
            .map(drop)
            .map_err(err)
        }
        Op::Link(a, b) => {
            let i = resolve(fs, a)?;
            let (d, n) = parent_of(fs, b)?;
            fs.link(i, d, n.as_bytes()).map(drop).map_err(err)
        }
        Op::Unlink(p) => {
            let (d, n) = parent_of(fs, p)?;
            fs.unlink(d, n.as_bytes()).map_err(err)
        }
        Op::Rename {
            from,
            to,
            noreplace,
            exchange,
        } => {
            let (od, on) = parent_of(fs, from)?;
            let (nd, nn) = parent_of(fs, to)?;
            let flags = RenameFlags {
                noreplace: *noreplace,
                exchange: *exchange,
                whiteout: None,
            };
            fs.rename(od, on.as_bytes(), nd, nn.as_bytes(), flags)
                .map_err(err)
        }
        Op::Symlink { target, path } => {
            let (d, n) = parent_of(fs, path)?;
            fs.symlink(d, n.as_bytes(), target.as_bytes(), 0, 0)
                .map(drop)
                .map_err(err)
        }
        Op::Rmdir(p) => {
            let (d, n) = parent_of(fs, p)?;
            fs.rmdir(d, n.as_bytes()).map_err(err)
        }
        Op::Chmod(p, m) => {
            let i = resolve(fs, p)?;
            fs.setattr(
                i,
                &SetAttr {
                    mode: Some(*m),
                    ..Default::default()
                },
            )
            .map(drop)
            .map_err(err)
        }
        Op::Punch { path, off, len } => {
            let i = resolve(fs, path)?;
            fs.fallocate(
                i,
                *off,
                *len,
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            )
            .map_err(err)
        }
        Op::WriteBack => {
            fs.lawn_writeback();
            Ok(())
        }
        Op::Resize => {
            fs.lawn_resize();
            Ok(())
        }
        Op::Checkpoint => Ok(()),
        Op::SetXattr {
            path,
            name,
            len,
            seed,
        } => {
            let i = resolve(fs, path)?;
            fs.setxattr(i, name.as_bytes(), &pattern(*len, *seed, 0), 0)
                .map_err(err)
        }
        Op::RemoveXattr(p, n) => {
            let i = resolve(fs, p)?;
            fs.removexattr(i, n.as_bytes()).map_err(err)
        }
        Op::SetAcl { path, uid, perms } => {
            let i = resolve(fs, path)?;
            fs.setxattr(i, b"system.posix_acl_access", &acl_bytes(*uid, *perms), 0)
                .map_err(err)
        }
        Op::SetFlags(p, f) => {
            let i = resolve(fs, p)?;
            fs.set_inode_flags(i, *f).map_err(err)
        }
    }
}

/// ` flags=HEX` of inode `ino` (empty without flags), for listings: read through
/// `Fs::inode_flags`, so a recovered image shows what its replay set.
fn flags_of(fs: &Fs, ino: Ino, path: &str) -> Result<String, String> {
    let f = fs
        .inode_flags(ino)
        .map_err(|e| format!("inode flags {path}: {e}"))?;
    Ok(flags_suffix(f))
}

/// The listing suffix of inode flags `f`.
pub fn flags_suffix(f: u32) -> String {
    if f == 0 {
        String::new()
    } else {
        format!(" flags={f:x}")
    }
}

/// ` xattrs=name:hash,...` of inode `ino` (empty without attributes), for listings.
fn xattr_list(fs: &Fs, ino: Ino, path: &str) -> Result<String, String> {
    let names = fs
        .listxattr(ino)
        .map_err(|e| format!("listxattr {path}: {e}"))?;
    let mut v: Vec<String> = Vec::new();
    for n in names.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let val = fs
            .getxattr(ino, n)
            .map_err(|e| format!("getxattr {path}: {e}"))?;
        v.push(format!("{}:{:016x}", String::from_utf8_lossy(n), fnv(&val)));
    }
    v.sort();
    Ok(xattr_suffix(&v))
}

/// The listing suffix of sorted `name:hash` attribute strings.
pub fn xattr_suffix(v: &[String]) -> String {
    if v.is_empty() {
        String::new()
    } else {
        format!(" xattrs={}", v.join(","))
    }
}

/// A canonical listing of the whole tree: one line per name, with kind, size, link
/// count, mode, a hash of the contents, which earlier name it is a hard link of, its
/// extended attributes and its inode flags.
pub fn dump_fs(fs: &Fs) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut first: std::collections::HashMap<Ino, String> = Default::default();
    walk(fs, ROOT_INO, "", &mut out, &mut first)?;
    Ok(out)
}

fn walk(
    fs: &Fs,
    dir: Ino,
    path: &str,
    out: &mut Vec<String>,
    first: &mut std::collections::HashMap<Ino, String>,
) -> Result<(), String> {
    let a = fs
        .getattr(dir)
        .map_err(|e| format!("getattr {path}/: {e}"))?;
    out.push(format!(
        "{path}/ dir nlink={} mode={:o}{}{}",
        a.nlink,
        a.mode & 0o7777,
        xattr_list(fs, dir, path)?,
        flags_of(fs, dir, path)?
    ));
    let mut ents = fs
        .readdir(dir, 0, usize::MAX)
        .map_err(|e| format!("readdir {path}/: {e}"))?;
    ents.sort_by(|x, y| x.name.cmp(&y.name));
    for e in ents {
        if e.name == b"." || e.name == b".." {
            continue;
        }
        let p = if path.is_empty() {
            String::from_utf8_lossy(&e.name).into_owned()
        } else {
            format!("{path}/{}", String::from_utf8_lossy(&e.name))
        };
        let a = fs
            .getattr(e.ino)
            .map_err(|er| format!("getattr {p}: {er}"))?;
        if a.kind == FileKind::Directory {
            walk(fs, e.ino, &p, out, first)?;
            continue;
        }
        let alias = match first.get(&e.ino) {
            Some(f) => format!(" same-as={f}"),
            None => {
                first.insert(e.ino, p.clone());
                String::new()
            }
        };
        let line = if a.kind == FileKind::Symlink {
            let t = fs
                .readlink(e.ino)
                .map_err(|er| format!("readlink {p}: {er}"))?;
            format!(
                "{p} symlink -> {} nlink={}{alias}{}",
                String::from_utf8_lossy(&t),
                a.nlink,
                flags_of(fs, e.ino, &p)?
            )
        } else {
            let mut b = vec![0u8; a.size as usize];
            let n = fs
                .read(e.ino, 0, &mut b)
                .map_err(|er| format!("read {p}: {er}"))?;
            if n != b.len() {
                return Err(format!("read {p}: {n} of {} bytes", b.len()));
            }
            format!(
                "{p} file size={} nlink={} mode={:o} data={:016x}{alias}{}{}",
                a.size,
                a.nlink,
                a.mode & 0o7777,
                fnv(&b),
                xattr_list(fs, e.ino, &p)?,
                flags_of(fs, e.ino, &p)?
            )
        };
        out.push(line);
    }
    Ok(())
}

/// FNV-1a 64-bit hash of `b` (file contents in tree listings).
pub fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100_0000_01b3)
    })
}
