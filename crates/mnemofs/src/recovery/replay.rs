//! Step 4 of recovery: an inode's log chain, walked from head to tail, each
//! committed entry checked and applied.

use crate::addr::{BlockNo, PmOff};
use crate::bugs::{self, Bug};
use crate::format::{
    get_u64, group_size, parse_commit, verify_entry, CommitState, Entry, Geometry, INO_HEAD_OFF,
    INO_TAIL_OFF, LOG_DATA, LOG_MAGIC, LOG_MAGIC_OFF, LOG_NEXT_OFF, LOG_OWNER_OFF, UNIT,
};
use crate::inode::InodeState;
use crate::types::{FileKind, Ino};
use crate::vol::Vol;
use std::collections::HashSet;
/// Loads one inode: static part, log chain, replay.
pub(super) fn load_inode(
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
    st.generation = crate::format::inode_generation(&slot);
    st.btime = crate::format::inode_btime(&slot);
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
        let base = BlockNo(p).off().get();
        if pm.read_u64(PmOff(base) + LOG_MAGIC_OFF) != LOG_MAGIC {
            return Err(format!(
                "inode {ino}: block {p} in its log chain is not a log page"
            ));
        }
        let owner = pm.read_u64(PmOff(base) + LOG_OWNER_OFF);
        if owner != ino {
            return Err(format!(
                "inode {ino}: log page {p} belongs to inode {owner}"
            ));
        }
        st.log.pages.push(p);
        // `p` is a data block, so the page's offsets are inside the image.
        let page_end = base.saturating_add(LOG_DATA);
        let in_page = tail >= base && tail <= page_end;
        let end = if in_page && !bugs::on(Bug::ReplayUncommitted) {
            tail
        } else {
            page_end
        };
        if !end.saturating_sub(base).is_multiple_of(UNIT) {
            return Err(format!(
                "inode {ino}: log tail {tail:#x} is not entry-aligned"
            ));
        }
        replay_page(pm, geo, &mut st, base, end, &mut group)?;
        if in_page {
            // Zero whatever an uncommitted append left past the tail.
            let rest = page_end.saturating_sub(tail);
            if rest > 0 && !bugs::on(Bug::ReplayUncommitted) {
                let mut buf = vec![0u8; rest as usize];
                pm.read(PmOff(tail), &mut buf);
                if buf.iter().any(|&b| b != 0) {
                    pm.zero(PmOff(tail), rest);
                    pm.flush(PmOff(tail), rest);
                    *tail_fixes = tail_fixes.saturating_add(1);
                }
            }
            break;
        }
        p = pm.read_u64(PmOff(base) + LOG_NEXT_OFF);
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
    // `units` ≤ LOG_DATA / UNIT (`parse_commit`).
    let len = units.saturating_mul(UNIT);
    if pos.saturating_add(len) > end {
        return Err(format!(
            "inode {ino}: log entry at {pos:#x} runs past the tail"
        ));
    }
    let mut body = vec![0u8; len as usize];
    pm.read(PmOff(pos), &mut body);
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
        match parse_commit(pm.read_u64(PmOff(pos))) {
            CommitState::Uncommitted => {
                if group.is_some() {
                    // Followers are persisted (fenced) before their leader's mark.
                    return Err(format!(
                        "inode {ino}: log slot at {pos:#x}: a committed group misses a member"
                    ));
                }
                pos = pos.saturating_add(UNIT);
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
                    pos = pos.saturating_add(units.saturating_mul(UNIT));
                    continue;
                };
                let (e, _) = read_entry(pm, geo, st, pos, end, units, crc)?;
                g.entries.push((pos, e));
                g.left = g.left.saturating_sub(1);
                if g.left == 0 {
                    if let Some(g) = group.take() {
                        for (off, e) in &g.entries {
                            st.apply(*off, e);
                        }
                    }
                }
                pos = pos.saturating_add(units.saturating_mul(UNIT));
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
                        left: n.saturating_sub(1),
                        entries: vec![(pos, e)],
                    });
                } else {
                    st.apply(pos, &e);
                }
                pos = pos.saturating_add(units.saturating_mul(UNIT));
            }
        }
    }
    Ok(())
}

fn validate_entry(geo: &Geometry, st: &InodeState, e: &Entry) -> std::result::Result<(), String> {
    match e {
        Entry::Write { block, npages, .. } => {
            // `Entry::decode` refused zero pages and pages past the largest file.
            if *block != 0 && !geo.is_data_run(*block, *npages as u64) {
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
        Entry::SetAttr { .. } | Entry::Link { .. } | Entry::Xattr { .. } => {}
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // Tests build their own values.
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
            size_after: crate::addr::page_start(pg + 1),
            mtime: Timespec::default(),
        }
    }

    fn replay(pm: &Vol, geo: &Geometry, log: &LogState) -> std::result::Result<Vec<u64>, String> {
        let mut st = InodeState::new(9, FileKind::Regular);
        let base = BlockNo(log.pages[0]).off().get();
        let mut group = None;
        replay_page(pm, geo, &mut st, base, log.tail, &mut group)?;
        if group.is_some() {
            return Err("group open at the tail".into());
        }
        Ok(st.pages.iter().map(|(k, _)| k).collect())
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
        pm.zero(PmOff(r.offsets[1] + 8), 56);
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
