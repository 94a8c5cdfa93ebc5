//! The oracle: an in-memory model of POSIX semantics (as Linux file systems have
//! them), independent of the engine. Crash states are compared with its listings.

use crate::workload::{acl_bytes, flags, flags_suffix, fnv, pattern, xattr_suffix, Op};

/// The access ACL's attribute name.
const ACL_ACCESS: &str = "system.posix_acl_access";

/// The listing suffix of a node's attributes (as `workload::dump_fs` writes it).
fn xattr_list(x: &BTreeMap<String, Vec<u8>>) -> String {
    let v: Vec<String> = x
        .iter()
        .map(|(n, v)| format!("{n}:{:016x}", fnv(v)))
        .collect();
    xattr_suffix(&v)
}
use std::collections::{BTreeMap, HashMap};

#[derive(Clone, Debug)]
enum Node {
    File {
        data: Vec<u8>,
        mode: u32,
        nlink: u32,
        xattrs: BTreeMap<String, Vec<u8>>,
    },
    Dir {
        names: BTreeMap<String, u64>,
        mode: u32,
        xattrs: BTreeMap<String, Vec<u8>>,
    },
    Symlink {
        target: String,
        nlink: u32,
    },
}

/// The model file system.
#[derive(Clone, Debug)]
pub struct Model {
    nodes: HashMap<u64, Node>,
    /// Inode flags of the nodes that have any (a node's number is never reused, so
    /// a removed node's flags go with it).
    flags: HashMap<u64, u32>,
    next: u64,
}

/// The flags that lock an inode itself (Linux's `IS_IMMUTABLE || IS_APPEND`): no
/// change of its attributes, size (but appends, for append-only), names or links.
const LOCKED: u32 = flags::IMMUTABLE | flags::APPEND;

const ROOT: u64 = 0;

impl Default for Model {
    fn default() -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(
            ROOT,
            Node::Dir {
                names: BTreeMap::new(),
                mode: 0o755,
                xattrs: BTreeMap::new(),
            },
        );
        Model {
            nodes,
            flags: HashMap::new(),
            next: 1,
        }
    }
}

impl Model {
    fn names(&self, d: u64) -> Option<&BTreeMap<String, u64>> {
        match self.nodes.get(&d) {
            Some(Node::Dir { names, .. }) => Some(names),
            _ => None,
        }
    }

    fn names_mut(&mut self, d: u64) -> &mut BTreeMap<String, u64> {
        match self.nodes.get_mut(&d) {
            Some(Node::Dir { names, .. }) => names,
            _ => unreachable!("not a directory"),
        }
    }

    /// The inode flags of node `i`.
    fn flags_of(&self, i: u64) -> u32 {
        self.flags.get(&i).copied().unwrap_or(0)
    }

    /// EPERM when node `i` is immutable or append-only (as Linux's VFS refuses a
    /// change of its attributes, size, names and links).
    fn unlocked(&self, i: u64) -> Result<(), i32> {
        if self.flags_of(i) & LOCKED != 0 {
            return Err(libc::EPERM);
        }
        Ok(())
    }

    /// EPERM when directory `d` is immutable (no name added or removed).
    fn dir_writable(&self, d: u64) -> Result<(), i32> {
        if self.flags_of(d) & flags::IMMUTABLE != 0 {
            return Err(libc::EPERM);
        }
        Ok(())
    }

    fn is_dir(&self, i: u64) -> bool {
        matches!(self.nodes.get(&i), Some(Node::Dir { .. }))
    }

    /// (parent directory, last name) of `path`.
    fn parent<'a>(&self, path: &'a str) -> Result<(u64, &'a str), i32> {
        let mut d = ROOT;
        let mut parts: Vec<&str> = path.split('/').collect();
        let last = parts.pop().unwrap_or("");
        for c in parts {
            let names = self.names(d).ok_or(libc::ENOTDIR)?;
            d = *names.get(c).ok_or(libc::ENOENT)?;
            if !self.is_dir(d) {
                return Err(libc::ENOTDIR);
            }
        }
        Ok((d, last))
    }

    fn lookup<'a>(&self, path: &'a str) -> Result<(u64, &'a str, Option<u64>), i32> {
        let (d, n) = self.parent(path)?;
        let c = self.names(d).ok_or(libc::ENOTDIR)?.get(n).copied();
        Ok((d, n, c))
    }

    fn resolve(&self, path: &str) -> Result<u64, i32> {
        self.lookup(path)?.2.ok_or(libc::ENOENT)
    }

    fn add(&mut self, n: Node) -> u64 {
        let id = self.next;
        self.next += 1;
        self.nodes.insert(id, n);
        id
    }

    fn subdirs(&self, d: u64) -> u32 {
        self.names(d)
            .map(|m| m.values().filter(|&&c| self.is_dir(c)).count() as u32)
            .unwrap_or(0)
    }

    /// Is `a` the directory `d` or one of its ancestors?
    fn ancestor(&self, a: u64, d: u64) -> bool {
        if a == d {
            return true;
        }
        self.names(a)
            .map(|m| m.values().any(|&c| self.is_dir(c) && self.ancestor(c, d)))
            .unwrap_or(false)
    }

    fn drop_name(&mut self, i: u64) {
        let gone = match self.nodes.get_mut(&i) {
            Some(Node::File { nlink, .. }) | Some(Node::Symlink { nlink, .. }) => {
                *nlink -= 1;
                *nlink == 0
            }
            Some(Node::Dir { .. }) => true,
            None => false,
        };
        if gone {
            self.nodes.remove(&i);
        }
    }

    fn file(&mut self, path: &str) -> Result<&mut Vec<u8>, i32> {
        let i = self.resolve(path)?;
        match self.nodes.get_mut(&i) {
            Some(Node::File { data, .. }) => Ok(data),
            Some(Node::Dir { .. }) => Err(libc::EISDIR),
            _ => Err(libc::EINVAL),
        }
    }

    /// Applies `op`; `Err(errno)` (and no change) where Linux would fail it.
    pub fn apply(&mut self, op: &Op) -> Result<(), i32> {
        match op {
            Op::Tmpfile {
                dir,
                link,
                len,
                seed,
            } => {
                // Nothing shows until the link, which names the file with its data.
                let d = self.resolve(dir)?;
                if self.names(d).is_none() {
                    return Err(libc::ENOTDIR);
                }
                self.dir_writable(d)?;
                let Some(l) = link else { return Ok(()) };
                let (pd, n, c) = self.lookup(l)?;
                if c.is_some() {
                    return Err(libc::EEXIST);
                }
                self.dir_writable(pd)?;
                let id = self.add(Node::File {
                    data: pattern(*len, *seed, 0),
                    mode: 0o644,
                    nlink: 1,
                    xattrs: BTreeMap::new(),
                });
                self.names_mut(pd).insert(n.to_string(), id);
            }
            Op::Creat(p) | Op::Mkdir(p) => {
                let (d, n, c) = self.lookup(p)?;
                if c.is_some() {
                    return Err(libc::EEXIST);
                }
                self.dir_writable(d)?;
                let node = if matches!(op, Op::Mkdir(_)) {
                    // A directory made in a set-group-ID directory is set-group-ID
                    // too (Linux's `inode_init_owner`; files only take the group).
                    let sgid = match self.nodes.get(&d) {
                        Some(Node::Dir { mode, .. }) => mode & libc::S_ISGID,
                        _ => 0,
                    };
                    Node::Dir {
                        names: BTreeMap::new(),
                        mode: 0o755 | sgid,
                        xattrs: BTreeMap::new(),
                    }
                } else {
                    Node::File {
                        data: Vec::new(),
                        mode: 0o644,
                        nlink: 1,
                        xattrs: BTreeMap::new(),
                    }
                };
                let id = self.add(node);
                self.names_mut(d).insert(n.to_string(), id);
            }
            Op::Write {
                path,
                off,
                len,
                seed,
            } => {
                // A write: neither immutable nor append-only (Linux refuses the open).
                self.unlocked(self.resolve(path)?)?;
                let data = self.file(path)?;
                let end = *off as usize + len;
                if data.len() < end {
                    data.resize(end, 0);
                }
                data[*off as usize..end].copy_from_slice(&pattern(*len, *seed, *off));
            }
            Op::Append { path, len, seed } => {
                if self.flags_of(self.resolve(path)?) & flags::IMMUTABLE != 0 {
                    return Err(libc::EPERM);
                }
                let data = self.file(path)?;
                let at = data.len() as u64;
                data.extend_from_slice(&pattern(*len, *seed, at));
            }
            Op::Truncate(p, size) => {
                self.unlocked(self.resolve(p)?)?;
                let data = self.file(p)?;
                data.resize(*size as usize, 0);
            }
            Op::WriteBack | Op::Resize | Op::Checkpoint => {}
            Op::SetFlags(p, f) => {
                let i = self.resolve(p)?;
                // DIRSYNC is kept on directories only (as ext4 does).
                let f = if self.is_dir(i) {
                    *f
                } else {
                    *f & !flags::DIRSYNC
                };
                if f == 0 {
                    self.flags.remove(&i);
                } else {
                    self.flags.insert(i, f);
                }
            }
            Op::Punch { path, off, len } => {
                // Linux's vfs_fallocate: nothing on an immutable file, and no punch
                // on an append-only one.
                let i = self.resolve(path)?;
                self.unlocked(i)?;
                // fallocate of a symlink: EOPNOTSUPP, as the engine has it.
                if matches!(self.nodes.get(&i), Some(Node::Symlink { .. })) {
                    return Err(libc::EOPNOTSUPP);
                }
                let data = self.file(path)?;
                let end = ((off + len) as usize).min(data.len());
                if (*off as usize) < end {
                    data[*off as usize..end].fill(0);
                }
            }
            Op::SetXattr {
                path,
                name,
                len,
                seed,
            } => {
                let i = self.resolve(path)?;
                self.unlocked(i)?;
                match self.nodes.get_mut(&i) {
                    Some(Node::File { xattrs, .. }) | Some(Node::Dir { xattrs, .. }) => {
                        xattrs.insert(name.clone(), pattern(*len, *seed, 0));
                    }
                    // `user.` names only on files and directories (the workloads set
                    // no other names on symlinks).
                    _ => return Err(libc::EPERM),
                }
            }
            Op::RemoveXattr(p, n) => {
                let i = self.resolve(p)?;
                self.unlocked(i)?;
                match self.nodes.get_mut(&i) {
                    Some(Node::File { xattrs, .. }) | Some(Node::Dir { xattrs, .. }) => {
                        xattrs.remove(n).ok_or(libc::ENODATA)?;
                    }
                    _ => return Err(libc::ENODATA),
                }
            }
            Op::Chmod(p, m) => {
                let i = self.resolve(p)?;
                self.unlocked(i)?;
                match self.nodes.get_mut(&i) {
                    Some(Node::File { mode, xattrs, .. })
                    | Some(Node::Dir { mode, xattrs, .. }) => {
                        *mode = *m;
                        // An access ACL follows the mode: owner, mask, other (POSIX
                        // 1003.1e; entries 0, 3 and 4 of the workloads' ACLs).
                        if let Some(v) = xattrs.get_mut(ACL_ACCESS) {
                            for (entry, shift) in [(0usize, 6u32), (3, 3), (4, 0)] {
                                let at = 4 + 8 * entry + 2;
                                let perm = ((*m >> shift) & 7) as u16;
                                v[at..at + 2].copy_from_slice(&perm.to_le_bytes());
                            }
                        }
                    }
                    _ => {}
                }
            }
            Op::SetAcl { path, uid, perms } => {
                let i = self.resolve(path)?;
                if !matches!(self.nodes.get(&i), Some(Node::Symlink { .. })) {
                    self.unlocked(i)?;
                }
                match self.nodes.get_mut(&i) {
                    Some(Node::File { mode, xattrs, .. })
                    | Some(Node::Dir { mode, xattrs, .. }) => {
                        // The group bits show the mask.
                        let bits = (u32::from(perms[0]) << 6)
                            | (u32::from(perms[3]) << 3)
                            | u32::from(perms[4]);
                        *mode = (*mode & !0o777) | bits;
                        xattrs.insert(ACL_ACCESS.to_string(), acl_bytes(*uid, *perms));
                    }
                    _ => return Err(libc::EOPNOTSUPP),
                }
            }
            Op::Link(a, b) => {
                let src = self.resolve(a)?;
                let (d, n, c) = self.lookup(b)?;
                if c.is_some() {
                    return Err(libc::EEXIST);
                }
                // Linux's vfs_link: no new link to an immutable or append-only inode.
                self.dir_writable(d)?;
                self.unlocked(src)?;
                match self.nodes.get_mut(&src) {
                    Some(Node::File { nlink, .. }) | Some(Node::Symlink { nlink, .. }) => {
                        *nlink += 1
                    }
                    _ => return Err(libc::EPERM),
                }
                self.names_mut(d).insert(n.to_string(), src);
            }
            Op::Unlink(p) => {
                let (d, n, c) = self.lookup(p)?;
                let c = c.ok_or(libc::ENOENT)?;
                if self.is_dir(c) {
                    return Err(libc::EISDIR);
                }
                // Nothing leaves an immutable or append-only directory, and an
                // immutable or append-only inode keeps its names.
                self.unlocked(d)?;
                self.unlocked(c)?;
                self.names_mut(d).remove(n);
                self.drop_name(c);
            }
            Op::Rmdir(p) => {
                let (d, n, c) = self.lookup(p)?;
                let c = c.ok_or(libc::ENOENT)?;
                if self.names(c).is_none() {
                    return Err(libc::ENOTDIR);
                }
                self.unlocked(d)?;
                self.unlocked(c)?;
                if self.names(c).is_some_and(|m| !m.is_empty()) {
                    return Err(libc::ENOTEMPTY);
                }
                self.names_mut(d).remove(n);
                self.nodes.remove(&c);
            }
            Op::Symlink { target, path } => {
                let (d, n, c) = self.lookup(path)?;
                if c.is_some() {
                    return Err(libc::EEXIST);
                }
                self.dir_writable(d)?;
                let id = self.add(Node::Symlink {
                    target: target.clone(),
                    nlink: 1,
                });
                self.names_mut(d).insert(n.to_string(), id);
            }
            Op::Rename {
                from,
                to,
                noreplace,
                exchange,
            } => {
                let (od, on, s) = self.lookup(from)?;
                let (nd, nn, t) = self.lookup(to)?;
                let s = s.ok_or(libc::ENOENT)?;
                if t == Some(s) {
                    return Ok(());
                }
                if *noreplace && t.is_some() {
                    return Err(libc::EEXIST);
                }
                if *exchange && t.is_none() {
                    return Err(libc::ENOENT);
                }
                let (sd, td) = (self.is_dir(s), t.is_some_and(|t| self.is_dir(t)));
                if let (Some(_), false) = (t, exchange) {
                    if sd && !td {
                        return Err(libc::ENOTDIR);
                    }
                    if !sd && td {
                        return Err(libc::EISDIR);
                    }
                }
                if sd && od != nd && self.ancestor(s, nd) {
                    return Err(libc::EINVAL);
                }
                if let (true, Some(t)) = (*exchange && td && od != nd, t) {
                    if self.ancestor(t, od) {
                        return Err(libc::EINVAL);
                    }
                }
                // Linux's may_delete and may_create: the source leaves its
                // directory, a replaced (or exchanged) target leaves its one, and a
                // new name needs a directory that is not immutable.
                self.unlocked(od)?;
                self.unlocked(s)?;
                match t {
                    Some(t) => {
                        self.unlocked(nd)?;
                        self.unlocked(t)?;
                    }
                    None => self.dir_writable(nd)?,
                }
                if let (Some(t), false) = (t, exchange) {
                    if td && self.names(t).is_some_and(|m| !m.is_empty()) {
                        return Err(libc::ENOTEMPTY);
                    }
                }
                if *exchange {
                    let t = t.ok_or(libc::ENOENT)?;
                    self.names_mut(od).insert(on.to_string(), t);
                    self.names_mut(nd).insert(nn.to_string(), s);
                } else {
                    self.names_mut(od).remove(on);
                    self.names_mut(nd).insert(nn.to_string(), s);
                    if let Some(t) = t {
                        self.drop_name(t);
                    }
                }
            }
        }
        Ok(())
    }

    /// The same listing `workload::dump_fs` produces for the engine.
    pub fn dump(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut first = HashMap::new();
        self.walk(ROOT, "", &mut out, &mut first);
        out
    }

    fn walk(&self, d: u64, path: &str, out: &mut Vec<String>, first: &mut HashMap<u64, String>) {
        let (mode, xa) = match self.nodes.get(&d) {
            Some(Node::Dir { mode, xattrs, .. }) => (*mode, xattr_list(xattrs)),
            _ => (0, String::new()),
        };
        out.push(format!(
            "{path}/ dir nlink={} mode={:o}{xa}{}",
            2 + self.subdirs(d),
            mode & 0o7777,
            flags_suffix(self.flags_of(d))
        ));
        let Some(names) = self.names(d) else { return };
        for (name, &c) in names {
            let p = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}/{name}")
            };
            let alias = match first.get(&c) {
                Some(f) => format!(" same-as={f}"),
                None => {
                    first.insert(c, p.clone());
                    String::new()
                }
            };
            match &self.nodes[&c] {
                Node::Dir { .. } => self.walk(c, &p, out, first),
                Node::Symlink { target, nlink } => out.push(format!(
                    "{p} symlink -> {target} nlink={nlink}{alias}{}",
                    flags_suffix(self.flags_of(c))
                )),
                Node::File {
                    data,
                    mode,
                    nlink,
                    xattrs,
                } => out.push(format!(
                    "{p} file size={} nlink={nlink} mode={:o} data={:016x}{alias}{}{}",
                    data.len(),
                    mode & 0o7777,
                    fnv(data),
                    xattr_list(xattrs),
                    flags_suffix(self.flags_of(c))
                )),
            }
        }
    }
}
