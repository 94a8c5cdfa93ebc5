//! Mount-time loading and crash recovery.
//!
//! Order (each step is idempotent, so a crash during recovery just recovers again):
//! 1. superblock: primary, else replica (the primary is repaired from it);
//! 2. the state word says whether the last unmount was clean;
//! 3. every CPU's lite journal: an active transaction is rolled back (undo records);
//! 4. every valid inode: its log is walked from head to the page holding the tail and
//!    each committed entry is applied (the same `InodeState::apply` the live file
//!    system uses); bytes past the tail in the tail page are zeroed;
//! 5. directory entries are resolved; link counts are checked; orphans (link count 0:
//!    unlinked while open) are freed;
//! 6. free space: from the saved free list after a clean unmount, else from a scan of
//!    every block the valid inodes own.
//!
//! The same code serves fsck, which runs it on a private copy of the image and reports
//! every problem instead of stopping at the first.

use crate::bugs::{self, Bug};
use crate::data::lawn::zone::SubZone;
use crate::data::{finelog, lawn};
use crate::error::{FsError, Result};
use crate::format::{
    get_u64, group_size, parse_commit, verify_entry, CommitState, Entry, Geometry, BLOCK,
    FREELIST_EXT_OFF, FREELIST_MAGIC, INODE_SIZE, INO_HEAD_OFF, INO_TAIL_OFF, INO_VALID_OFF,
    LOG_DATA, LOG_MAGIC, LOG_MAGIC_OFF, LOG_NEXT_OFF, LOG_OWNER_OFF, SB_REPLICA_BLOCK,
    SB_STATE_OFF, STATE_CLEAN, STATE_DIRTY, UNIT,
};
use crate::inode::InodeState;
use crate::space::Run;
use crate::types::{FileKind, Ino, ROOT_INO};
use crate::vol::Vol;
use std::collections::{HashMap, HashSet};

/// What loading an image produced.
pub(crate) struct Loaded {
    pub geo: Geometry,
    pub clean: bool,
    pub states: HashMap<Ino, InodeState>,
    /// Free inode slots.
    pub free_inos: Vec<Ino>,
    /// Free data-block extents.
    pub free: Vec<Run>,
    pub problems: Vec<String>,
    pub log_pages: u64,
    pub data_pages: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Mounting: stop at the first problem, trust a saved free list.
    Mount,
    /// Checking a private copy: collect every problem, verify the free list.
    Fsck,
}

/// What the recovery pipeline produced.
pub(crate) struct Recovered {
    /// Inodes, free space, problems.
    pub loaded: Loaded,
    /// LAWN runs recovered from the descriptor table (empty unless kept).
    pub subs: Vec<SubZone>,
}

/// The recovery pipeline, one for mount and fsck: [`load`] (superblock, journals,
/// logs, namespace, space), then the small-write areas against the replayed
/// mappings — fine-log redo records, LAWN descriptors. `keep_lawn`: a LAWN mount
/// keeps the zone's runs; any other mount writes them back (`lawn::recover`).
pub(crate) fn recover(vol: &Vol, mode: Mode, keep_lawn: bool) -> Result<Recovered> {
    let mut loaded = load(vol, mode)?;
    finelog::recover(vol, &loaded.geo, &loaded.states, mode, &mut loaded.problems);
    let subs = lawn::recover::scan(
        vol,
        &loaded.geo,
        &loaded.states,
        mode,
        keep_lawn,
        &mut loaded.problems,
    );
    Ok(Recovered { loaded, subs })
}

/// Reads and validates the superblock; repairs the primary from the replica.
pub(crate) fn read_superblock(pm: &Vol, problems: &mut Vec<String>) -> Result<Geometry> {
    let mut b = [0u8; 128];
    pm.read(0, &mut b);
    let primary = Geometry::decode(&b, pm.len());
    let mut r = [0u8; 128];
    pm.read(SB_REPLICA_BLOCK * BLOCK, &mut r);
    let replica = Geometry::decode(&r, pm.len());
    match (primary, replica) {
        (Ok(g), Ok(g2)) => {
            if g != g2 {
                problems.push("superblock replica differs from the primary".into());
            }
            Ok(g)
        }
        (Ok(g), Err(e)) => {
            problems.push(format!("superblock replica: {e}"));
            Ok(g)
        }
        (Err(e), Ok(g)) => {
            problems.push(format!("primary superblock: {e} (the replica is intact)"));
            Ok(g)
        }
        (Err(e1), Err(e2)) => {
            if b[0..8] != crate::format::MAGIC && r[0..8] != crate::format::MAGIC {
                Err(FsError::NotMnemofs(
                    "no mnemofs superblock (bad magic in primary and replica)".into(),
                ))
            } else {
                Err(FsError::Corrupt(format!(
                    "primary superblock: {e1}; replica: {e2}"
                )))
            }
        }
    }
}

/// Whether `off` is a word the lite journal may name: the valid/head/tail words of an
/// inode slot.
fn journalable(geo: &Geometry, off: u64) -> bool {
    let t0 = geo.inode_table_start * BLOCK;
    let t1 = t0 + geo.inode_count * INODE_SIZE;
    if off >= t0 && off < t1 {
        let w = (off - t0) % INODE_SIZE;
        return w == INO_VALID_OFF || w == INO_HEAD_OFF || w == INO_TAIL_OFF;
    }
    false
}

/// Loads the image: journal rollback, log replay, orphans, free space.
pub(crate) fn load(pm: &Vol, mode: Mode) -> Result<Loaded> {
    let mut problems = Vec::new();
    let geo = read_superblock(pm, &mut problems)?;
    let state = pm.read_u64(SB_STATE_OFF);
    let clean = state == STATE_CLEAN;
    if state != STATE_CLEAN && state != STATE_DIRTY {
        problems.push(format!(
            "superblock state word has garbage value {state:#x}"
        ));
    }
    if mode == Mode::Mount {
        // Only superblock trouble so far, and `geo` came from a valid copy: repair
        // whichever copy is bad from the good one.
        let mut p = [0u8; 128];
        pm.read(0, &mut p);
        let mut r = [0u8; 128];
        pm.read(SB_REPLICA_BLOCK * BLOCK, &mut r);
        let good = geo.encode_like(&p, &r);
        if Geometry::decode(&p, pm.len()).is_err() {
            pm.write(0, &good);
            pm.flush(0, 128);
        }
        if Geometry::decode(&r, pm.len()).is_err() {
            pm.write(SB_REPLICA_BLOCK * BLOCK, &good);
            pm.flush(SB_REPLICA_BLOCK * BLOCK, 128);
        }
        problems.clear();
        pm.store_u64(SB_STATE_OFF, STATE_DIRTY);
        pm.flush(SB_STATE_OFF, 8);
        // Fence: the image is marked dirty before recovery changes anything, so a
        // crash from here on never trusts the saved free list.
        pm.fence();
    }

    // 3. Journals (the injected bug defers this until after the logs are replayed).
    let early_rollback = !bugs::on(Bug::FreeListBeforeRollback);
    if early_rollback {
        rollback_journals(pm, &geo, mode, &mut problems)?;
    }

    // 4. Inodes and logs.
    let (states, free_inos) = load_inodes(pm, &geo, mode, &mut problems)?;
    if !early_rollback {
        rollback_journals(pm, &geo, mode, &mut problems)?;
    }
    load_rest(pm, geo, mode, clean, problems, states, free_inos)
}

fn rollback_journals(
    pm: &Vol,
    geo: &Geometry,
    mode: Mode,
    problems: &mut Vec<String>,
) -> Result<()> {
    for cpu in 0..geo.cpus {
        if let Err(e) = crate::journal::recover(pm, geo, cpu, |o| journalable(geo, o)) {
            problems.push(e);
            if mode == Mode::Mount {
                return Err(FsError::Corrupt(problems.join("; ")));
            }
        }
    }
    Ok(())
}

type Inodes = (HashMap<Ino, InodeState>, Vec<Ino>);

fn load_inodes(pm: &Vol, geo: &Geometry, mode: Mode, problems: &mut Vec<String>) -> Result<Inodes> {
    let mut states: HashMap<Ino, InodeState> = HashMap::new();
    let mut free_inos = Vec::new();
    let mut tail_fixes = 0;
    for ino in 1..=geo.inode_count {
        let ioff = geo.inode_off(ino);
        let valid = pm.read_u64(ioff + INO_VALID_OFF);
        match valid {
            0 => free_inos.push(ino),
            1 => match load_inode(pm, geo, ino, &mut tail_fixes) {
                Ok(st) => {
                    states.insert(ino, st);
                }
                Err(e) => {
                    problems.push(e);
                    if mode == Mode::Mount {
                        return Err(FsError::Corrupt(problems.join("; ")));
                    }
                }
            },
            v => {
                problems.push(format!("inode {ino}: valid word has garbage value {v:#x}"));
                if mode == Mode::Mount {
                    return Err(FsError::Corrupt(problems.join("; ")));
                }
            }
        }
    }
    if tail_fixes > 0 {
        // Fence: stale bytes past the tails are gone before anything is appended.
        pm.fence();
    }
    Ok((states, free_inos))
}

fn load_rest(
    pm: &Vol,
    geo: Geometry,
    mode: Mode,
    clean: bool,
    mut problems: Vec<String>,
    mut states: HashMap<Ino, InodeState>,
    mut free_inos: Vec<Ino>,
) -> Result<Loaded> {
    // 5. Namespace: resolve names, link counts, orphans.
    check_namespace(&geo, &mut states, &mut problems);
    let orphans: Vec<Ino> = states
        .iter()
        .filter(|(&i, s)| i != ROOT_INO && s.nlink == 0)
        .map(|(&i, _)| i)
        .collect();
    for &o in &orphans {
        states.remove(&o);
        pm.store_u64(geo.inode_off(o) + INO_VALID_OFF, 0);
        pm.flush(geo.inode_off(o) + INO_VALID_OFF, 8);
        free_inos.push(o);
    }
    if !orphans.is_empty() {
        // Fence: orphans are freed on PM before their blocks can be reused.
        pm.fence();
    }
    if mode == Mode::Mount && !problems.is_empty() {
        return Err(FsError::Corrupt(problems.join("; ")));
    }

    // 6. Space.
    let mut log_pages = 0;
    let mut data_pages = 0;
    for s in states.values() {
        log_pages += s.log.pages.len() as u64;
        data_pages += s.pages.len() as u64;
    }
    let saved = if clean && orphans.is_empty() {
        read_saved_freelist(pm, &geo)
    } else {
        None
    };
    let free = match (mode, saved) {
        (Mode::Mount, Some(f)) => f,
        (_, saved) => {
            let used = ownership(&geo, &states, &mut problems);
            let computed = free_extents(&geo, &used);
            if let (Some(s), Mode::Fsck) = (saved, mode) {
                if coalesce(&s) != coalesce(&computed) {
                    problems.push(describe_freelist_mismatch(&s, &computed));
                }
            }
            computed
        }
    };
    if mode == Mode::Mount && !problems.is_empty() {
        return Err(FsError::Corrupt(problems.join("; ")));
    }
    Ok(Loaded {
        geo,
        clean,
        states,
        free_inos,
        free,
        problems,
        log_pages,
        data_pages,
    })
}

/// Loads one inode: static part, log chain, replay.
fn load_inode(
    pm: &Vol,
    geo: &Geometry,
    ino: Ino,
    tail_fixes: &mut u32,
) -> std::result::Result<InodeState, String> {
    let ioff = geo.inode_off(ino);
    let mut slot = [0u8; 128];
    pm.read(ioff, &mut slot);
    let kind = crate::format::decode_inode_static(&slot, ino)?;
    let head = get_u64(&slot, INO_HEAD_OFF as usize);
    let tail = get_u64(&slot, INO_TAIL_OFF as usize);
    let mut st = InodeState::new(ino, kind);
    if !geo.is_data_block(head) {
        return Err(format!(
            "inode {ino}: log head {head} is outside the data area"
        ));
    }
    // Walk the chain to the page holding the tail.
    let mut group = None;
    let mut seen = HashSet::new();
    let mut p = head;
    loop {
        if !geo.is_data_block(p) {
            return Err(format!(
                "inode {ino}: log chain leaves the data area (block {p})"
            ));
        }
        if !seen.insert(p) {
            return Err(format!("inode {ino}: log chain has a cycle at block {p}"));
        }
        let base = p * BLOCK;
        if pm.read_u64(base + LOG_MAGIC_OFF) != LOG_MAGIC {
            return Err(format!(
                "inode {ino}: block {p} in its log chain is not a log page"
            ));
        }
        let owner = pm.read_u64(base + LOG_OWNER_OFF);
        if owner != ino {
            return Err(format!(
                "inode {ino}: log page {p} belongs to inode {owner}"
            ));
        }
        st.log.pages.push(p);
        let in_page = tail >= base && tail <= base + LOG_DATA;
        let end = if in_page && !bugs::on(Bug::ReplayUncommitted) {
            tail
        } else {
            base + LOG_DATA
        };
        if !(end - base).is_multiple_of(UNIT) {
            return Err(format!(
                "inode {ino}: log tail {tail:#x} is not entry-aligned"
            ));
        }
        replay_page(pm, geo, &mut st, base, end, &mut group)?;
        if in_page {
            // Zero whatever an uncommitted append left past the tail.
            let rest = base + LOG_DATA - tail;
            if rest > 0 && !bugs::on(Bug::ReplayUncommitted) {
                let mut buf = vec![0u8; rest as usize];
                pm.read(tail, &mut buf);
                if buf.iter().any(|&b| b != 0) {
                    pm.zero(tail, rest);
                    pm.flush(tail, rest);
                    *tail_fixes += 1;
                }
            }
            break;
        }
        p = pm.read_u64(base + LOG_NEXT_OFF);
    }
    if group.is_some() {
        return Err(format!(
            "inode {ino}: a committed group runs past the log tail"
        ));
    }
    st.log.tail = tail;
    st.log.durable = tail;
    // Replay does not know which pages died; let the first commit's fast GC look.
    st.log.gc_hint = true;
    Ok(st)
}

/// A committed group leader whose followers are still being read.
pub(crate) struct Group {
    left: u16,
    entries: Vec<(u64, Entry)>,
}

/// Reads, checks and decodes the entry at `pos` whose mark announced `units` and `crc`.
fn read_entry(
    pm: &Vol,
    geo: &Geometry,
    st: &InodeState,
    pos: u64,
    end: u64,
    units: u64,
    crc: u32,
) -> std::result::Result<(Entry, u16), String> {
    let ino = st.ino;
    let len = units * UNIT;
    if pos + len > end {
        return Err(format!(
            "inode {ino}: log entry at {pos:#x} runs past the tail"
        ));
    }
    let mut body = vec![0u8; len as usize];
    pm.read(pos, &mut body);
    if !verify_entry(&body, crc) {
        return Err(format!(
            "inode {ino}: log entry at {pos:#x}: checksum mismatch"
        ));
    }
    let e = Entry::decode(&body).map_err(|m| format!("inode {ino}: log entry at {pos:#x}: {m}"))?;
    if e.units() != units {
        return Err(format!("inode {ino}: log entry at {pos:#x}: size mismatch"));
    }
    validate_entry(geo, st, &e).map_err(|m| format!("inode {ino}: log entry at {pos:#x}: {m}"))?;
    Ok((e, group_size(&body)))
}

/// Replays the committed entries of one log page in `[base, end)`. `group` carries a
/// committed concurrent group across pages (its members are consecutive slots).
pub(crate) fn replay_page(
    pm: &Vol,
    geo: &Geometry,
    st: &mut InodeState,
    base: u64,
    end: u64,
    group: &mut Option<Group>,
) -> std::result::Result<(), String> {
    let ino = st.ino;
    let mut pos = base;
    while pos < end {
        match parse_commit(pm.read_u64(pos)) {
            CommitState::Uncommitted => {
                if group.is_some() {
                    // Followers are persisted (fenced) before their leader's mark.
                    return Err(format!(
                        "inode {ino}: log slot at {pos:#x}: a committed group misses a member"
                    ));
                }
                pos += UNIT;
            }
            CommitState::Garbage => {
                return Err(format!(
                    "inode {ino}: log entry at {pos:#x}: bad commit mark"
                ));
            }
            CommitState::Follower { units, crc } => {
                let Some(g) = group.as_mut() else {
                    // A member of a group whose leader never committed: skipped unread
                    // (its body may be torn).
                    pos += units * UNIT;
                    continue;
                };
                let (e, _) = read_entry(pm, geo, st, pos, end, units, crc)?;
                g.entries.push((pos, e));
                g.left -= 1;
                if g.left == 0 {
                    if let Some(g) = group.take() {
                        for (off, e) in &g.entries {
                            st.apply(*off, e);
                        }
                    }
                }
                pos += units * UNIT;
            }
            CommitState::Committed { units, crc } => {
                if group.is_some() {
                    return Err(format!(
                        "inode {ino}: log entry at {pos:#x}: a committed group is cut short"
                    ));
                }
                let (e, n) = read_entry(pm, geo, st, pos, end, units, crc)?;
                if n > 1 {
                    *group = Some(Group {
                        left: n - 1,
                        entries: vec![(pos, e)],
                    });
                } else {
                    st.apply(pos, &e);
                }
                pos += units * UNIT;
            }
        }
    }
    Ok(())
}

fn validate_entry(geo: &Geometry, st: &InodeState, e: &Entry) -> std::result::Result<(), String> {
    match e {
        Entry::Write { block, npages, .. } => {
            if *npages == 0 {
                return Err("write of zero pages".into());
            }
            if *block != 0
                && !(geo.is_data_block(*block) && geo.is_data_block(block + *npages as u64 - 1))
            {
                return Err(format!(
                    "write names blocks {block}+{npages} outside the data area"
                ));
            }
            if st.kind == FileKind::Directory {
                return Err("data write in a directory log".into());
            }
        }
        Entry::Dentry { ino, .. } => {
            if st.kind != FileKind::Directory {
                return Err("directory entry in a non-directory log".into());
            }
            if !geo.valid_ino(*ino) {
                return Err(format!("directory entry names inode {ino} out of range"));
            }
        }
        Entry::SetAttr { .. } | Entry::Link { .. } => {}
    }
    Ok(())
}

/// Resolves directory entries, sets parents, checks link counts.
fn check_namespace(
    geo: &Geometry,
    states: &mut HashMap<Ino, InodeState>,
    problems: &mut Vec<String>,
) {
    let _ = geo;
    match states.get(&ROOT_INO) {
        Some(r) if r.kind == FileKind::Directory => {}
        Some(_) => problems.push("root inode 1 is not a directory".into()),
        None => problems.push("root inode 1 is not allocated".into()),
    }
    let mut refs: HashMap<Ino, u32> = HashMap::new();
    let mut parents: Vec<(Ino, Ino)> = Vec::new();
    for (&dino, d) in states.iter() {
        let Some(dir) = &d.dir else { continue };
        for (name, slot) in &dir.names {
            let shown = String::from_utf8_lossy(name);
            match states.get(&slot.ino) {
                None => problems.push(format!(
                    "directory {dino}: entry '{shown}' names free inode {}",
                    slot.ino
                )),
                Some(c) => {
                    if c.kind != slot.kind {
                        problems.push(format!(
                            "directory {dino}: entry '{shown}' has the wrong file type for inode {}",
                            slot.ino
                        ));
                    }
                    *refs.entry(slot.ino).or_insert(0) += 1;
                    if c.kind == FileKind::Directory {
                        parents.push((slot.ino, dino));
                    }
                }
            }
        }
    }
    for (child, parent) in parents {
        if let Some(c) = states.get_mut(&child) {
            c.parent = parent;
        }
    }
    if let Some(r) = states.get_mut(&ROOT_INO) {
        r.parent = ROOT_INO;
    }
    for (&ino, s) in states.iter() {
        let r = refs.get(&ino).copied().unwrap_or(0);
        match s.kind {
            FileKind::Directory => {
                let subdirs = s.dir.as_ref().map(|d| d.subdirs).unwrap_or(0);
                let want_refs = if ino == ROOT_INO { 0 } else { 1 };
                if s.nlink != 0 && r != want_refs {
                    problems.push(format!("directory {ino} is named by {r} entries"));
                }
                if s.nlink != 0 && s.nlink != 2 + subdirs {
                    problems.push(format!(
                        "directory {ino}: link count {} but {} subdirectories",
                        s.nlink, subdirs
                    ));
                }
                if s.nlink == 0 && r > 0 {
                    problems.push(format!(
                        "directory {ino}: link count 0 but named by {r} entries"
                    ));
                }
            }
            _ => {
                if s.nlink != r {
                    problems.push(format!(
                        "inode {ino}: link count {} but named by {r} directory entries",
                        s.nlink
                    ));
                }
            }
        }
    }
    // Every directory must reach the root through its parents.
    for (&ino, s) in states.iter() {
        if s.kind != FileKind::Directory || ino == ROOT_INO || s.nlink == 0 {
            continue;
        }
        let mut cur = ino;
        let mut steps = 0;
        while cur != ROOT_INO && steps <= states.len() {
            cur = states.get(&cur).map(|x| x.parent).unwrap_or(0);
            if cur == 0 {
                break;
            }
            steps += 1;
        }
        if cur != ROOT_INO {
            problems.push(format!("directory {ino} is not reachable from the root"));
        }
    }
}

/// Marks every block owned by a valid inode; names blocks owned twice.
fn ownership(
    geo: &Geometry,
    states: &HashMap<Ino, InodeState>,
    problems: &mut Vec<String>,
) -> Vec<u64> {
    let mut owner = vec![0u64; geo.data_blocks() as usize];
    let mut inos: Vec<&Ino> = states.keys().collect();
    inos.sort_unstable();
    for &ino in inos {
        let s = &states[&ino];
        let blocks = s.log.pages.iter().copied().chain(s.data_blocks());
        for b in blocks {
            let i = (b - geo.data_start) as usize;
            if owner[i] != 0 {
                problems.push(format!(
                    "block {b} is owned twice (inode {} and inode {ino})",
                    owner[i]
                ));
            } else {
                owner[i] = ino;
            }
        }
    }
    owner
}

fn free_extents(geo: &Geometry, owner: &[u64]) -> Vec<Run> {
    let mut v = Vec::new();
    let mut i = 0;
    while i < owner.len() {
        if owner[i] != 0 {
            i += 1;
            continue;
        }
        let s = i;
        while i < owner.len() && owner[i] == 0 {
            i += 1;
        }
        v.push((geo.data_start + s as u64, (i - s) as u64));
    }
    v
}

/// Sorted runs with adjacent runs merged (allocators split runs at CPU boundaries).
fn coalesce(runs: &[Run]) -> Vec<Run> {
    let mut v = runs.to_vec();
    v.sort_unstable();
    let mut out: Vec<Run> = Vec::with_capacity(v.len());
    for (s, l) in v {
        match out.last_mut() {
            Some(last) if last.0 + last.1 == s => last.1 += l,
            _ => out.push((s, l)),
        }
    }
    out
}

fn describe_freelist_mismatch(saved: &[Run], computed: &[Run]) -> String {
    let a: u64 = saved.iter().map(|r| r.1).sum();
    let b: u64 = computed.iter().map(|r| r.1).sum();
    if a < b {
        format!("saved free list misses {} blocks (leaked blocks)", b - a)
    } else if a > b {
        format!("saved free list has {} blocks that inodes own", a - b)
    } else {
        "saved free list differs from the blocks the inodes own".into()
    }
}

/// The free list saved at the last clean unmount, if intact.
fn read_saved_freelist(pm: &Vol, geo: &Geometry) -> Option<Vec<Run>> {
    let base = geo.freelist_start * BLOCK;
    if pm.read_u64(base) != FREELIST_MAGIC {
        return None;
    }
    let n = pm.read_u64(base + 8) as usize;
    if n > crate::format::freelist_capacity(geo) {
        return None;
    }
    let crc = pm.read_u64(base + 16) as u32;
    let mut bytes = vec![0u8; n * 16];
    pm.read(base + FREELIST_EXT_OFF, &mut bytes);
    if crate::format::crc(&bytes) != crc {
        return None;
    }
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let s = get_u64(&bytes, i * 16);
        let l = get_u64(&bytes, i * 16 + 8);
        if l == 0 || !geo.is_data_block(s) || !geo.is_data_block(s + l - 1) {
            return None;
        }
        v.push((s, l));
    }
    Some(v)
}

/// Saves the free list (clean unmount). Returns false when it does not fit (the next
/// mount then rebuilds it by scanning).
pub(crate) fn save_freelist(pm: &Vol, geo: &Geometry, runs: &[Run]) -> bool {
    if runs.len() > crate::format::freelist_capacity(geo) {
        return false;
    }
    let base = geo.freelist_start * BLOCK;
    let mut bytes = vec![0u8; runs.len() * 16];
    for (i, &(s, l)) in runs.iter().enumerate() {
        crate::format::put_u64(&mut bytes, i * 16, s);
        crate::format::put_u64(&mut bytes, i * 16 + 8, l);
    }
    pm.write(base + FREELIST_EXT_OFF, &bytes);
    let mut hdr = [0u8; 24];
    crate::format::put_u64(&mut hdr, 0, FREELIST_MAGIC);
    crate::format::put_u64(&mut hdr, 8, runs.len() as u64);
    crate::format::put_u64(&mut hdr, 16, crate::format::crc(&bytes) as u64);
    pm.write(base, &hdr);
    pm.flush(base, FREELIST_EXT_OFF + bytes.len() as u64);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{mark_reserved, write_reserved, LogState};
    use crate::space::Space;
    use crate::types::Timespec;

    fn setup() -> (Vol, Geometry, Space, LogState) {
        let pm = Vol::new(pm::Pm::anonymous(8 << 20).unwrap());
        let geo = Geometry::compute(8 << 20, 1, 64).unwrap();
        let space = Space::empty(geo);
        space.free_run(geo.data_start, 4);
        let mut log = LogState::default();
        let link = Entry::Link {
            nlink: 1,
            ctime: Timespec::default(),
        };
        let st = log.stage(&pm, &space, 9, &[link]).unwrap();
        log.commit(&st);
        (pm, geo, space, log)
    }

    fn write(geo: &Geometry, pg: u64) -> Entry {
        Entry::Write {
            pgoff: pg,
            block: geo.data_start + 100 + pg,
            npages: 1,
            size_after: (pg + 1) * BLOCK,
            mtime: Timespec::default(),
        }
    }

    fn replay(pm: &Vol, geo: &Geometry, log: &LogState) -> std::result::Result<Vec<u64>, String> {
        let mut st = InodeState::new(9, FileKind::Regular);
        let base = log.pages[0] * BLOCK;
        let mut group = None;
        replay_page(pm, geo, &mut st, base, log.tail, &mut group)?;
        if group.is_some() {
            return Err("group open at the tail".into());
        }
        Ok(st.pages.keys().copied().collect())
    }

    #[test]
    fn a_group_counts_only_through_its_committed_leader() {
        let (pm, geo, space, mut log) = setup();
        let entries = vec![write(&geo, 0), write(&geo, 5), write(&geo, 9)];
        let r = log.reserve(&pm, &space, 9, &entries).unwrap();
        let word = write_reserved(&pm, &r, &entries);
        // Followers are marked, the leader is not: nothing counts, nothing is read.
        assert_eq!(replay(&pm, &geo, &log), Ok(vec![]));
        // Even a torn follower body is skipped unread without its leader.
        pm.zero(r.offsets[1] + 8, 56);
        assert_eq!(replay(&pm, &geo, &log), Ok(vec![]));
        let entries2 = vec![write(&geo, 0), write(&geo, 5), write(&geo, 9)];
        let r2 = log.reserve(&pm, &space, 9, &entries2).unwrap();
        let w2 = write_reserved(&pm, &r2, &entries2);
        mark_reserved(&pm, &r2, w2);
        // The second group is committed; the first (unmarked) is still skipped.
        assert_eq!(replay(&pm, &geo, &log), Ok(vec![0, 5, 9]));
        // A committed leader whose follower is missing is corruption, not a skip.
        mark_reserved(&pm, &r, word);
        let e = replay(&pm, &geo, &log).unwrap_err();
        assert!(e.contains("checksum"), "{e}");
    }

    #[test]
    fn an_unmarked_slot_below_the_tail_is_skipped() {
        let (pm, geo, space, mut log) = setup();
        let a = [write(&geo, 1)];
        let b = [write(&geo, 2)];
        let ra = log.reserve(&pm, &space, 9, &a).unwrap();
        let rb = log.reserve(&pm, &space, 9, &b).unwrap();
        // B finishes first and moves the tail past A's slot, still being written.
        write_reserved(&pm, &ra, &a);
        let wb = write_reserved(&pm, &rb, &b);
        mark_reserved(&pm, &rb, wb);
        assert!(log.complete(&pm, geo.inode_off(9), &rb));
        assert_eq!(replay(&pm, &geo, &log), Ok(vec![2]));
        // A completes later: the tail stays (B's is later in the log).
        assert!(!log.complete(&pm, geo.inode_off(9), &ra));
        assert_eq!(log.durable, rb.end);
        assert_eq!(log.inflight, 0);
    }
}
