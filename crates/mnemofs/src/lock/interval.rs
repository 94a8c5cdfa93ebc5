//! pNOVA's interval-tree range lock: every request (held or waiting) is a node of an
//! augmented interval tree (key: start, then arrival order; augmentation: the largest
//! end in the subtree) under one mutex. A request counts the earlier requests that
//! overlap it and conflict with it (any pair but two readers) and sleeps until that
//! count drops to zero; a release decrements the count of every later conflicting
//! overlapping request. Requests are served in arrival order among conflicting ones,
//! so no writer starves.
//!
//! The tree is a treap (random priorities) in an arena; overlap queries prune
//! subtrees whose largest end lies at or before the query's start.

use parking_lot::{Condvar, Mutex};

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node {
    start: u64,
    end: u64,
    id: u64,
    write: bool,
    blockers: u32,
    max_end: u64,
    prio: u32,
    left: u32,
    right: u32,
}

#[derive(Default)]
struct Tree {
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: u32,
    next_id: u64,
    rng: u64,
    len: usize,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            root: NIL,
            rng: 0x2545_f491_4f6c_dd1d,
            ..Default::default()
        }
    }

    fn key(&self, n: u32) -> (u64, u64) {
        let x = &self.nodes[n as usize];
        (x.start, x.id)
    }

    fn update(&mut self, n: u32) {
        if n == NIL {
            return;
        }
        let (l, r, e) = {
            let x = &self.nodes[n as usize];
            (x.left, x.right, x.end)
        };
        let mut m = e;
        if l != NIL {
            m = m.max(self.nodes[l as usize].max_end);
        }
        if r != NIL {
            m = m.max(self.nodes[r as usize].max_end);
        }
        self.nodes[n as usize].max_end = m;
    }

    /// Splits `t` into keys < `key` and keys >= `key`.
    fn split(&mut self, t: u32, key: (u64, u64)) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        if self.key(t) < key {
            let r = self.nodes[t as usize].right;
            let (a, b) = self.split(r, key);
            self.nodes[t as usize].right = a;
            self.update(t);
            (t, b)
        } else {
            let l = self.nodes[t as usize].left;
            let (a, b) = self.split(l, key);
            self.nodes[t as usize].left = b;
            self.update(t);
            (a, t)
        }
    }

    /// Joins two treaps whose keys are ordered (all of `a` before all of `b`).
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
            let r = self.nodes[a as usize].right;
            let m = self.merge(r, b);
            self.nodes[a as usize].right = m;
            self.update(a);
            a
        } else {
            let l = self.nodes[b as usize].left;
            let m = self.merge(a, l);
            self.nodes[b as usize].left = m;
            self.update(b);
            b
        }
    }

    fn rand(&mut self) -> u32 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 32) as u32
    }

    /// Every node overlapping `[start, end)`.
    fn overlapping(&self, start: u64, end: u64, out: &mut Vec<u32>) {
        let mut stack = vec![self.root];
        while let Some(n) = stack.pop() {
            if n == NIL {
                continue;
            }
            let x = &self.nodes[n as usize];
            if x.max_end <= start {
                continue;
            }
            if x.start < end && start < x.end {
                out.push(n);
            }
            stack.push(x.left);
            if x.start < end {
                stack.push(x.right);
            }
        }
    }

    /// Inserts a request; returns its id and how many earlier requests block it.
    fn insert(&mut self, start: u64, end: u64, write: bool) -> (u64, u32, u32) {
        let mut over = Vec::new();
        self.overlapping(start, end, &mut over);
        let blockers = over
            .iter()
            .filter(|&&n| write || self.nodes[n as usize].write)
            .count() as u32;
        let id = self.next_id;
        self.next_id += 1;
        let prio = self.rand();
        let node = Node {
            start,
            end,
            id,
            write,
            blockers,
            max_end: end,
            prio,
            left: NIL,
            right: NIL,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        let (a, b) = self.split(self.root, (start, id));
        let m = self.merge(a, idx);
        self.root = self.merge(m, b);
        self.len += 1;
        (id, idx, blockers)
    }

    /// Removes request `idx`; unblocks the later conflicting requests it held up.
    fn remove(&mut self, idx: u32) {
        let x = self.nodes[idx as usize];
        let mut over = Vec::new();
        self.overlapping(x.start, x.end, &mut over);
        for n in over {
            let y = &mut self.nodes[n as usize];
            if y.id > x.id && (x.write || y.write) {
                y.blockers -= 1;
            }
        }
        let (a, b) = self.split(self.root, (x.start, x.id));
        let (_m, c) = self.split(b, (x.start, x.id + 1));
        self.root = self.merge(a, c);
        self.free.push(idx);
        self.len -= 1;
    }
}

/// The lock of one file.
pub(crate) struct IntervalLock {
    tree: Mutex<Tree>,
    cv: Condvar,
}

impl Default for IntervalLock {
    fn default() -> Self {
        IntervalLock {
            tree: Mutex::new(Tree::new()),
            cv: Condvar::new(),
        }
    }
}

impl IntervalLock {
    /// Locks `[start, end)` (shared unless `write`); returns the ticket to unlock with.
    pub fn lock(&self, start: u64, end: u64, write: bool) -> u32 {
        let end = end.max(start.saturating_add(1));
        let mut t = crate::contention::take(&self.tree);
        let (_id, idx, blockers) = t.insert(start, end, write);
        if blockers > 0 {
            while t.nodes[idx as usize].blockers > 0 {
                self.cv.wait(&mut t);
            }
        }
        idx
    }

    pub fn unlock(&self, ticket: u32) {
        let mut t = crate::contention::take(&self.tree);
        t.remove(ticket);
        drop(t);
        self.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn treap_queries_match_a_linear_scan() {
        let mut t = Tree::new();
        let mut live: Vec<(u32, u64, u64)> = Vec::new();
        let mut x = 12345u64;
        for i in 0..2000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if i % 3 == 2 && !live.is_empty() {
                let k = (x >> 33) as usize % live.len();
                let (idx, _, _) = live.swap_remove(k);
                t.remove(idx);
            } else {
                let s = (x >> 40) % 1000;
                let e = s + 1 + (x >> 20) % 50;
                let (_, idx, _) = t.insert(s, e, false);
                live.push((idx, s, e));
            }
            let (qs, qe) = ((x >> 10) % 1000, (x >> 10) % 1000 + 30);
            let mut got = Vec::new();
            t.overlapping(qs, qe, &mut got);
            got.sort_unstable();
            let mut want: Vec<u32> = live
                .iter()
                .filter(|(_, s, e)| *s < qe && qs < *e)
                .map(|x| x.0)
                .collect();
            want.sort_unstable();
            assert_eq!(got, want);
        }
    }
}
