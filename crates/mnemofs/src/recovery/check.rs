//! Step 5 of recovery: directory entries resolved, parents set, link counts checked.

use crate::format::Geometry;
use crate::inode::InodeState;
use crate::types::{FileKind, Ino, ROOT_INO};
use std::collections::HashMap;
/// Resolves directory entries, sets parents, checks link counts.
pub(super) fn check_namespace(
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
            let shown = name.escape_ascii();
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
                    let r = refs.entry(slot.ino).or_insert(0);
                    *r = r.saturating_add(1);
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
                if ino == ROOT_INO && s.nlink == 0 {
                    problems.push("root directory has link count 0".into());
                }
                if s.nlink != 0 && s.nlink != subdirs.saturating_add(2) {
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
            steps = steps.saturating_add(1);
        }
        if cur != ROOT_INO {
            problems.push(format!("directory {ino} is not reachable from the root"));
        }
    }
}
