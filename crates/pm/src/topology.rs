//! NUMA topology: the nodes, each node's CPUs and the node distance matrix (ACPI
//! SLIT values, 10 = local), read from sysfs or given explicitly so that a one-node
//! machine can emulate several nodes. A multi-device volume places one device per
//! node and allocates on the writer's node first, then on the nearest others
//! ([`Topology::by_distance`], the paper's CandidateNode order).
//!
//! Node ids are the kernel's, possibly sparse (`0, 2`); nodes are kept in id order.
//!
//! # From sysfs
//!
//! [`Topology::from_sysfs`] reads `ROOT/devices/system/node/nodeN/cpulist` (a
//! cpulist, e.g. `0-19,40-59`; empty for a CPU-less memory node) and
//! `ROOT/devices/system/node/nodeN/distance` (the distances to every online node, in
//! node order, e.g. `10 21`). Without a `node` directory, or with no `nodeN` in it,
//! the machine is one node `0` holding the CPUs of `ROOT/devices/system/cpu/online`
//! (if that file is missing, the CPUs this process may run on).
//!
//! # Spec grammar ([`Topology::parse`])
//!
//! Leading and trailing whitespace is ignored. A spec is one of:
//!
//! - `N` (decimal digits only, e.g. `4`): `N` nodes numbered `0..N`. The CPUs this
//!   process may run on (its affinity mask, in increasing order) are dealt round
//!   robin: the `i`-th CPU goes to node `i % N`; a node left without one (fewer CPUs
//!   than nodes) gets the `(node % ncpus)`-th CPU, so emulated nodes may share CPUs.
//!   Distance 10 on the diagonal, 21 elsewhere.
//! - Fields `KEY=VALUE`, separated by `;` and/or whitespace (empty fields are
//!   skipped), each key at most once:
//!   - `nodes=N` (required): `N` nodes numbered `0..N`.
//!   - `cpus=LIST/LIST/...`: exactly `N` CPU lists, `/`-separated, node 0 first.
//!     Each is a non-empty kernel cpulist: comma-separated items `C` or `A-B`
//!     (`A <= B`), decimal, CPU ids below 65536; overlaps allowed. CPU ids are not
//!     checked against this machine. Without `cpus=`, CPUs are dealt as for `N`.
//!   - `dist=ROW/ROW/...`: exactly `N` rows, `/`-separated, each `N`
//!     comma-separated decimal integers; row `i` holds the distances from node `i`.
//!     Without `dist=`, 10 on the diagonal and 21 elsewhere.
//!
//!   Example: `nodes=4;cpus=0/1/0/1;dist=10,16,16,22/16,10,22,16/16,22,10,16/22,16,16,10`.
//! - `sysfs:PATH`: [`Topology::from_sysfs`] on the tree rooted at `PATH`, which must
//!   be an existing directory.
//!
//! Every topology, from sysfs or a spec, has 1 to [`MAX_NODES`] nodes, and its
//! distance matrix is square with 10 on the diagonal and every other entry in
//! `11..=254` (the rules the kernel applies to an ACPI SLIT; it need not be
//! symmetric). Anything else is a [`TopologyError`], never a panic.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;

pub use crate::numa::MAX_NODES;

/// CPU ids must be below this (the kernel's largest `NR_CPUS` is 8192).
const CPU_ID_LIMIT: u32 = 1 << 16;
/// Distance from a node to itself.
const LOCAL_DISTANCE: u32 = 10;
/// Distance between emulated nodes when no matrix is given (a typical 2-socket SLIT).
const DEFAULT_REMOTE: u32 = 21;
/// Largest distance (255 means "unreachable" in a SLIT).
const MAX_DISTANCE: u32 = 254;

/// Why a topology could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// A sysfs file or directory could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: io::Error,
    },
    /// A sysfs file holds something unexpected.
    #[error("{}: {reason}", path.display())]
    Sysfs {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The spec is malformed (see the grammar in the module documentation).
    #[error("topology spec: {0}")]
    Spec(String),
    /// The node count is not an integer in `1..=MAX_NODES`.
    #[error("bad node count `{0}`: must be an integer in 1..={MAX_NODES}")]
    NodeCount(String),
    /// A CPU list is malformed.
    #[error("bad CPU list `{list}`: {reason}")]
    CpuList {
        /// The list as given.
        list: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The distance matrix breaks a rule (diagonal 10, other entries 11..=254).
    #[error("distance matrix: {0}")]
    Distance(String),
}

/// NUMA nodes, their CPUs and their distances. See the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Node ids, increasing.
    nodes: Vec<u32>,
    /// CPUs of `nodes[i]`, increasing, no duplicates.
    cpus: Vec<Vec<u32>>,
    /// Row-major `n × n`: `dist[i * n + j]` is the distance from `nodes[i]` to `nodes[j]`.
    dist: Vec<u32>,
}

impl Topology {
    /// Reads the topology of the sysfs tree at `root` (`/sys` for this machine).
    pub fn from_sysfs(root: &Path) -> Result<Topology, TopologyError> {
        let dir = root.join("devices/system/node");
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Self::one_node(root)),
            Err(source) => return Err(TopologyError::Io { path: dir, source }),
        };
        let mut nodes = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| TopologyError::Io {
                path: dir.clone(),
                source,
            })?;
            let name = entry.file_name();
            let id = name
                .to_str()
                .and_then(|n| n.strip_prefix("node"))
                .and_then(parse_u32);
            if let Some(id) = id.filter(|_| entry.path().is_dir()) {
                nodes.push(id);
            }
        }
        if nodes.is_empty() {
            return Ok(Self::one_node(root));
        }
        nodes.sort_unstable();
        let n = check_node_count(nodes.len())?;
        let mut cpus = Vec::with_capacity(n);
        let mut dist = Vec::with_capacity(n * n);
        for &id in &nodes {
            let node_dir = dir.join(format!("node{id}"));
            let path = node_dir.join("cpulist");
            let text = read(&path)?;
            cpus.push(
                parse_cpulist(&text).map_err(|reason| TopologyError::Sysfs { path, reason })?,
            );
            let path = node_dir.join("distance");
            let text = read(&path)?;
            let row: Option<Vec<u32>> = text.split_whitespace().map(parse_u32).collect();
            let reason = match row {
                None => format!("`{}` is not a list of integers", text.trim()),
                Some(row) if row.len() != n => format!("{} distances for {n} nodes", row.len()),
                Some(row) => {
                    dist.extend(row);
                    continue;
                }
            };
            return Err(TopologyError::Sysfs { path, reason });
        }
        Topology::build(nodes, cpus, dist)
    }

    /// Parses a topology spec (the `--topology` flag); the grammar is in the module
    /// documentation.
    pub fn parse(spec: &str) -> Result<Topology, TopologyError> {
        let spec = spec.trim();
        if let Some(path) = spec.strip_prefix("sysfs:") {
            return Self::from_sysfs_spec(Path::new(path));
        }
        if spec.is_empty() {
            return Err(TopologyError::Spec("empty spec".into()));
        }
        if spec.bytes().all(|b| b.is_ascii_digit()) {
            let n = node_count(spec)?;
            return Topology::build(dense_ids(n).collect(), deal_cpus(n), default_distances(n));
        }
        let (mut nodes, mut cpus, mut dist) = (None, None, None);
        let fields = spec.split(|c: char| c == ';' || c.is_whitespace());
        for field in fields.filter(|f| !f.is_empty()) {
            let Some((key, value)) = field.split_once('=') else {
                return Err(TopologyError::Spec(format!(
                    "field `{field}` is not KEY=VALUE"
                )));
            };
            let slot = match key {
                "nodes" => &mut nodes,
                "cpus" => &mut cpus,
                "dist" => &mut dist,
                _ => {
                    return Err(TopologyError::Spec(format!(
                        "unknown key `{key}` (expected nodes, cpus or dist)"
                    )))
                }
            };
            if slot.replace(value).is_some() {
                return Err(TopologyError::Spec(format!("`{key}` given twice")));
            }
        }
        let nodes = nodes.ok_or_else(|| TopologyError::Spec("`nodes=N` is required".into()))?;
        let n = node_count(nodes)?;
        let cpus = match cpus {
            Some(value) => parse_cpu_lists(value, n)?,
            None => deal_cpus(n),
        };
        let dist = match dist {
            Some(value) => parse_rows(value, n)?,
            None => default_distances(n),
        };
        Topology::build(dense_ids(n).collect(), cpus, dist)
    }

    /// The node ids, increasing.
    pub fn nodes(&self) -> &[u32] {
        &self.nodes
    }

    /// How many nodes there are (at least 1).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The CPUs of `node`, increasing; empty for a CPU-less node or an unknown id.
    pub fn cpus_of(&self, node: u32) -> &[u32] {
        self.index(node).map_or(&[], |i| &self.cpus[i])
    }

    /// The first node (in id order) listing `cpu`.
    pub fn node_of_cpu(&self, cpu: u32) -> Option<u32> {
        let mut owners = self.nodes.iter().zip(&self.cpus);
        owners
            .find(|(_, cpus)| cpus.binary_search(&cpu).is_ok())
            .map(|(&node, _)| node)
    }

    /// The distance from node `a` to node `b` (10 when `a == b`); `None` if either
    /// is unknown.
    pub fn distance(&self, a: u32, b: u32) -> Option<u32> {
        let (i, j) = (self.index(a)?, self.index(b)?);
        Some(self.dist[i * self.nodes.len() + j])
    }

    /// Every node, nearest to `from` first (so `from` itself first), ties broken by
    /// node id: the order in which to try devices for a writer on `from`. Empty if
    /// `from` is unknown.
    pub fn by_distance(&self, from: u32) -> Vec<u32> {
        let Some(i) = self.index(from) else {
            return Vec::new();
        };
        let n = self.nodes.len();
        let row = &self.dist[i * n..(i + 1) * n];
        let mut order: Vec<(u32, u32)> = row
            .iter()
            .copied()
            .zip(self.nodes.iter().copied())
            .collect();
        order.sort_unstable();
        order.into_iter().map(|(_, node)| node).collect()
    }

    /// Position of `node` in `nodes`.
    fn index(&self, node: u32) -> Option<usize> {
        self.nodes.iter().position(|&n| n == node)
    }

    /// Checks the node count and the distance matrix; `cpus` and `dist` have one
    /// entry per node and `n × n` entries (the callers build them so).
    fn build(
        nodes: Vec<u32>,
        cpus: Vec<Vec<u32>>,
        dist: Vec<u32>,
    ) -> Result<Topology, TopologyError> {
        let n = check_node_count(nodes.len())?;
        for (k, &d) in dist.iter().enumerate() {
            let (from, to) = (nodes[k / n], nodes[k % n]);
            if from == to && d != LOCAL_DISTANCE {
                return Err(TopologyError::Distance(format!(
                    "node {from} to itself is {d}, must be {LOCAL_DISTANCE}"
                )));
            }
            if from != to && !(LOCAL_DISTANCE + 1..=MAX_DISTANCE).contains(&d) {
                return Err(TopologyError::Distance(format!(
                    "node {from} to node {to} is {d}, must be in {}..={MAX_DISTANCE}",
                    LOCAL_DISTANCE + 1
                )));
            }
        }
        Ok(Topology { nodes, cpus, dist })
    }

    /// One node `0` with the CPUs sysfs lists online under `root`, or else this
    /// process's CPUs.
    fn one_node(root: &Path) -> Topology {
        let online = fs::read_to_string(root.join("devices/system/cpu/online")).ok();
        let cpus = online
            .and_then(|text| parse_cpulist(&text).ok())
            .filter(|cpus| !cpus.is_empty())
            .unwrap_or_else(allowed_cpus);
        Topology {
            nodes: vec![0],
            cpus: vec![cpus],
            dist: vec![LOCAL_DISTANCE],
        }
    }

    /// `sysfs:PATH`: like [`Topology::from_sysfs`], but `PATH` must be a directory
    /// (a typo must not silently give the one-node fallback).
    fn from_sysfs_spec(root: &Path) -> Result<Topology, TopologyError> {
        if root.as_os_str().is_empty() {
            return Err(TopologyError::Spec("`sysfs:` needs a path".into()));
        }
        match fs::metadata(root) {
            Err(source) => Err(TopologyError::Io {
                path: root.into(),
                source,
            }),
            Ok(meta) if !meta.is_dir() => Err(TopologyError::Sysfs {
                path: root.into(),
                reason: "not a directory".into(),
            }),
            Ok(_) => Topology::from_sysfs(root),
        }
    }
}

impl FromStr for Topology {
    type Err = TopologyError;

    fn from_str(spec: &str) -> Result<Topology, TopologyError> {
        Topology::parse(spec)
    }
}

impl fmt::Display for Topology {
    /// One line, e.g. `2 nodes (ids 0,2); cpus 0-3 | 4-7; distances 10,21 / 21,10`
    /// (the ids are shown only when they are not `0..n`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.nodes.len();
        write!(f, "{n} node{}", if n == 1 { "" } else { "s" })?;
        if !self.nodes.iter().copied().eq(dense_ids(n)) {
            write!(f, " (ids {})", join(&self.nodes, ","))?;
        }
        f.write_str("; cpus ")?;
        for (i, cpus) in self.cpus.iter().enumerate() {
            let sep = if i == 0 { "" } else { " | " };
            let list = if cpus.is_empty() {
                "none".into()
            } else {
                format_cpulist(cpus)
            };
            write!(f, "{sep}{list}")?;
        }
        f.write_str("; distances ")?;
        for (i, row) in self.dist.chunks(n).enumerate() {
            let sep = if i == 0 { "" } else { " / " };
            write!(f, "{sep}{}", join(row, ","))?;
        }
        Ok(())
    }
}

/// The NUMA node of the PM device at `path`, from the sysfs tree at `sysfs_root`:
/// `bus/dax/devices/daxX.Y/numa_node` (else `class/dax/daxX.Y/device/numa_node`) for
/// a device-DAX `daxX.Y`, `block/pmemN/device/numa_node` for a pmem block device
/// `pmemN`, `pmemN.M` (its own directory, else region `N`'s `pmemN`, which is on the
/// same node) or a partition `pmemNpK`. The device is named by the file name of
/// `path` after following symlinks, or of `path` itself when it does not resolve.
/// `None` for a regular file (an image, say on `/dev/shm`), any other name, a
/// missing or unreadable `numa_node`, or `-1` (unknown node).
pub fn device_node(path: &Path, sysfs_root: &Path) -> Option<u32> {
    if fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let resolved = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let name = resolved.file_name()?.to_str()?;
    let candidates = if is_dax_name(name) {
        vec![
            sysfs_root
                .join("bus/dax/devices")
                .join(name)
                .join("numa_node"),
            sysfs_root
                .join("class/dax")
                .join(name)
                .join("device/numa_node"),
        ]
    } else {
        let (disk, region) = pmem_disk(name)?;
        [disk, region]
            .iter()
            .map(|dev| sysfs_root.join("block").join(dev).join("device/numa_node"))
            .collect()
    };
    let text = candidates.iter().find_map(|p| fs::read_to_string(p).ok())?;
    // `-1` (no node) fails the u32 parse, as does anything malformed.
    text.trim().parse().ok()
}

/// The CPU the calling thread is running on (it may move at any time unless pinned).
pub fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu takes no arguments and touches no memory of ours.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).ok()
}

/// Restricts the calling thread to `cpus` (`sched_setaffinity`). Fails on an empty
/// list, a CPU id of 65536 or more, or when the kernel refuses (e.g. none of `cpus`
/// is online or allowed to this process).
pub fn pin_to_cpus(cpus: &[u32]) -> io::Result<()> {
    let Some(&max) = cpus.iter().max() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no CPU to pin to",
        ));
    };
    if max >= CPU_ID_LIMIT {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "CPU {max} is beyond the largest supported id {}",
                CPU_ID_LIMIT - 1
            ),
        ));
    }
    let bits = libc::c_ulong::BITS;
    let words = ((max / bits + 1) as usize).max(libc::CPU_SETSIZE as usize / bits as usize);
    let mut mask: Vec<libc::c_ulong> = vec![0; words];
    for &cpu in cpus {
        mask[(cpu / bits) as usize] |= 1 << (cpu % bits);
    }
    let size = std::mem::size_of_val(mask.as_slice());
    // SAFETY: the kernel reads `size` bytes from `mask`, which owns exactly that
    // many initialized bytes, aligned as `cpu_set_t` (an array of `c_ulong`); pid 0
    // is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, size, mask.as_ptr().cast()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The CPUs this process may run on (its affinity mask), increasing; if that cannot
/// be read, `0..available_parallelism`. Never empty.
fn allowed_cpus() -> Vec<u32> {
    let bits = libc::c_ulong::BITS;
    let mut words = libc::CPU_SETSIZE as usize / bits as usize;
    // The mask must cover the kernel's CPU ids (EINVAL otherwise): grow until it does.
    while words * bits as usize <= CPU_ID_LIMIT as usize {
        let mut mask: Vec<libc::c_ulong> = vec![0; words];
        let size = std::mem::size_of_val(mask.as_slice());
        // SAFETY: the kernel writes at most `size` bytes into `mask`, which owns
        // exactly that many bytes, aligned as `cpu_set_t` (an array of `c_ulong`);
        // pid 0 is the calling thread.
        let rc = unsafe { libc::sched_getaffinity(0, size, mask.as_mut_ptr().cast()) };
        if rc == 0 {
            let cpus: Vec<u32> = (0..words as u32 * bits)
                .filter(|&cpu| mask[(cpu / bits) as usize] & (1 << (cpu % bits)) != 0)
                .collect();
            if !cpus.is_empty() {
                return cpus;
            }
            break;
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
            break;
        }
        words *= 2;
    }
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..n as u32).collect()
}

/// `N` nodes' CPU lists: this process's CPUs dealt round robin (see the grammar).
fn deal_cpus(n: usize) -> Vec<Vec<u32>> {
    let cpus = allowed_cpus();
    (0..n)
        .map(|node| {
            let dealt: Vec<u32> = cpus.iter().skip(node).step_by(n).copied().collect();
            if dealt.is_empty() {
                vec![cpus[node % cpus.len()]]
            } else {
                dealt
            }
        })
        .collect()
}

/// 10 on the diagonal, [`DEFAULT_REMOTE`] elsewhere.
fn default_distances(n: usize) -> Vec<u32> {
    (0..n * n)
        .map(|k| {
            if k / n == k % n {
                LOCAL_DISTANCE
            } else {
                DEFAULT_REMOTE
            }
        })
        .collect()
}

/// Node ids `0..n`.
fn dense_ids(n: usize) -> std::ops::Range<u32> {
    0..n as u32
}

/// `cpus=` value: `n` non-empty cpulists separated by `/`.
fn parse_cpu_lists(value: &str, n: usize) -> Result<Vec<Vec<u32>>, TopologyError> {
    let lists: Vec<&str> = value.split('/').collect();
    if lists.len() != n {
        return Err(TopologyError::Spec(format!(
            "cpus: {} CPU lists for {n} nodes",
            lists.len()
        )));
    }
    let mut out = Vec::with_capacity(n);
    for (node, list) in lists.into_iter().enumerate() {
        if list.is_empty() {
            return Err(TopologyError::Spec(format!(
                "cpus: node {node} has an empty CPU list"
            )));
        }
        out.push(
            parse_cpulist(list).map_err(|reason| TopologyError::CpuList {
                list: list.into(),
                reason,
            })?,
        );
    }
    Ok(out)
}

/// `dist=` value: `n` rows separated by `/`, each `n` integers separated by `,`;
/// returned row-major.
fn parse_rows(value: &str, n: usize) -> Result<Vec<u32>, TopologyError> {
    let rows: Vec<&str> = value.split('/').collect();
    if rows.len() != n {
        return Err(TopologyError::Spec(format!(
            "dist: {} rows for {n} nodes",
            rows.len()
        )));
    }
    let mut out = Vec::with_capacity(n * n);
    for (node, row) in rows.into_iter().enumerate() {
        let before = out.len();
        for item in row.split(',') {
            let d = parse_u32(item)
                .ok_or_else(|| TopologyError::Spec(format!("dist: `{item}` is not an integer")))?;
            out.push(d);
        }
        if out.len() - before != n {
            return Err(TopologyError::Spec(format!(
                "dist: row {node} has {} entries for {n} nodes",
                out.len() - before
            )));
        }
    }
    Ok(out)
}

/// A kernel cpulist (`0-3,8`; empty or whitespace for none), increasing and
/// deduplicated; `Err` holds the reason.
fn parse_cpulist(text: &str) -> Result<Vec<u32>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let mut ranges = Vec::new();
    for item in text.split(',') {
        let (lo, hi) = item.split_once('-').unwrap_or((item, item));
        let (Some(lo), Some(hi)) = (parse_u32(lo), parse_u32(hi)) else {
            return Err(format!("`{item}` is not a CPU or a range A-B"));
        };
        if lo > hi {
            return Err(format!("range `{item}` is reversed"));
        }
        if hi >= CPU_ID_LIMIT {
            return Err(format!(
                "CPU {hi} is beyond the largest supported id {}",
                CPU_ID_LIMIT - 1
            ));
        }
        ranges.push((lo, hi));
    }
    // Merge overlapping ranges first, so repeated large ranges cost nothing.
    ranges.sort_unstable();
    let mut cpus = Vec::new();
    for (lo, hi) in ranges {
        let start = cpus.last().map_or(lo, |&last: &u32| lo.max(last + 1));
        if start <= hi {
            cpus.extend(start..=hi);
        }
    }
    Ok(cpus)
}

/// A cpulist in the kernel's form (`0-19,40-59`).
fn format_cpulist(cpus: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        let sep = if out.is_empty() { "" } else { "," };
        if i == j {
            out += &format!("{sep}{}", cpus[i]);
        } else {
            out += &format!("{sep}{}-{}", cpus[i], cpus[j]);
        }
        i = j + 1;
    }
    out
}

/// `items` joined by `sep`.
fn join(items: &[u32], sep: &str) -> String {
    items
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(sep)
}

/// Decimal digits only (no sign, no spaces), fitting a `u32`.
fn parse_u32(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A node count given as text.
fn node_count(text: &str) -> Result<usize, TopologyError> {
    match parse_u32(text) {
        Some(n) if (1..=MAX_NODES as u32).contains(&n) => Ok(n as usize),
        _ => Err(TopologyError::NodeCount(text.into())),
    }
}

/// `n` if it is in `1..=MAX_NODES`.
fn check_node_count(n: usize) -> Result<usize, TopologyError> {
    if (1..=MAX_NODES).contains(&n) {
        Ok(n)
    } else {
        Err(TopologyError::NodeCount(n.to_string()))
    }
}

/// A sysfs file's text.
fn read(path: &Path) -> Result<String, TopologyError> {
    fs::read_to_string(path).map_err(|source| TopologyError::Io {
        path: path.into(),
        source,
    })
}

/// `daxX.Y`.
fn is_dax_name(name: &str) -> bool {
    let Some((region, dev)) = name.strip_prefix("dax").and_then(|r| r.split_once('.')) else {
        return false;
    };
    parse_u32(region).is_some() && parse_u32(dev).is_some()
}

/// For `pmemN`, `pmemN.M` and their partitions `…pK`: the disk's name and its
/// region's first disk `pmemN`.
fn pmem_disk(name: &str) -> Option<(String, String)> {
    let rest = name.strip_prefix("pmem")?;
    let disk = match rest.split_once('p') {
        Some((disk, part)) => parse_u32(part).map(|_| disk)?,
        None => rest,
    };
    let (region, ns) = disk.split_once('.').unwrap_or((disk, "0"));
    parse_u32(region)?;
    parse_u32(ns)?;
    Some((format!("pmem{disk}"), format!("pmem{region}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    /// A sysfs tree with `nodes` (id, cpulist, distance row) under
    /// `devices/system/node`, beside the other entries the kernel puts there.
    fn fake_sysfs(nodes: &[(u32, &str, &str)]) -> TempDir {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("devices/system/node");
        fs::create_dir_all(dir.join("power")).unwrap();
        fs::write(dir.join("uevent"), "").unwrap();
        let ids: Vec<u32> = nodes.iter().map(|n| n.0).collect();
        for file in ["online", "possible", "has_cpu", "has_memory"] {
            fs::write(dir.join(file), format!("{}\n", join(&ids, ","))).unwrap();
        }
        for &(id, cpus, distance) in nodes {
            let node = dir.join(format!("node{id}"));
            fs::create_dir_all(node.join("power")).unwrap();
            fs::write(node.join("cpulist"), format!("{cpus}\n")).unwrap();
            fs::write(node.join("distance"), format!("{distance}\n")).unwrap();
            fs::write(node.join("cpumap"), "ffff\n").unwrap();
        }
        root
    }

    const AMD4: [&str; 4] = ["10 16 16 22", "16 10 22 16", "16 22 10 16", "22 16 16 10"];

    #[test]
    fn intel_two_sockets() {
        let root = fake_sysfs(&[(0, "0-19,40-59", "10 21"), (1, "20-39,60-79", "21 10")]);
        let t = Topology::from_sysfs(root.path()).unwrap();
        assert_eq!(t.nodes(), &[0, 1]);
        assert_eq!(t.node_count(), 2);
        let node0: Vec<u32> = (0..20).chain(40..60).collect();
        assert_eq!(t.cpus_of(0), node0.as_slice());
        assert_eq!(t.cpus_of(1).len(), 40);
        assert_eq!(
            (t.node_of_cpu(45), t.node_of_cpu(25), t.node_of_cpu(79)),
            (Some(0), Some(1), Some(1))
        );
        assert_eq!(t.node_of_cpu(80), None);
        assert_eq!(
            (t.distance(0, 0), t.distance(0, 1), t.distance(1, 0)),
            (Some(10), Some(21), Some(21))
        );
        assert_eq!(t.distance(0, 2), None);
        assert_eq!(t.by_distance(1), vec![1, 0]);
        assert_eq!(
            t.to_string(),
            "2 nodes; cpus 0-19,40-59 | 20-39,60-79; distances 10,21 / 21,10"
        );
    }

    #[test]
    fn intel_four_sockets_full_mesh() {
        let rows = ["10 21 21 21", "21 10 21 21", "21 21 10 21", "21 21 21 10"];
        let root = fake_sysfs(&[
            (0, "0-23", rows[0]),
            (1, "24-47", rows[1]),
            (2, "48-71", rows[2]),
            (3, "72-95", rows[3]),
        ]);
        let t = Topology::from_sysfs(root.path()).unwrap();
        assert_eq!(t.nodes(), &[0, 1, 2, 3]);
        for node in 0..4 {
            let want: Vec<u32> = (node * 24..node * 24 + 24).collect();
            assert_eq!(t.cpus_of(node), want.as_slice());
        }
        assert_eq!(
            (t.node_of_cpu(0), t.node_of_cpu(47), t.node_of_cpu(95)),
            (Some(0), Some(1), Some(3))
        );
        assert_eq!(t.by_distance(0), vec![0, 1, 2, 3]);
        assert_eq!(t.by_distance(2), vec![2, 0, 1, 3]);
        assert_eq!(t.by_distance(3), vec![3, 0, 1, 2]);
    }

    #[test]
    fn amd_four_nodes_unequal_distances() {
        let root = fake_sysfs(&[
            (0, "0-7", AMD4[0]),
            (1, "8-15", AMD4[1]),
            (2, "16-23", AMD4[2]),
            (3, "24-31", AMD4[3]),
        ]);
        let t = Topology::from_sysfs(root.path()).unwrap();
        assert_eq!(t.by_distance(0), vec![0, 1, 2, 3]);
        assert_eq!(t.by_distance(1), vec![1, 0, 3, 2]);
        assert_eq!(t.by_distance(2), vec![2, 0, 3, 1]);
        assert_eq!(t.by_distance(3), vec![3, 1, 2, 0]);
        assert_eq!((t.distance(0, 3), t.distance(1, 2)), (Some(22), Some(22)));
        assert_eq!(t.by_distance(4), Vec::<u32>::new());
    }

    #[test]
    fn sparse_node_ids() {
        let root = fake_sysfs(&[(0, "0-3", "10 21"), (2, "4-7", "21 10")]);
        let t = Topology::from_sysfs(root.path()).unwrap();
        assert_eq!(t.nodes(), &[0, 2]);
        assert_eq!(t.cpus_of(2), &[4, 5, 6, 7]);
        assert!(t.cpus_of(1).is_empty());
        assert_eq!(t.node_of_cpu(5), Some(2));
        assert_eq!(
            (t.distance(0, 2), t.distance(2, 2), t.distance(0, 1)),
            (Some(21), Some(10), None)
        );
        assert_eq!(t.by_distance(2), vec![2, 0]);
        assert_eq!(
            t.to_string(),
            "2 nodes (ids 0,2); cpus 0-3 | 4-7; distances 10,21 / 21,10"
        );
    }

    #[test]
    fn cpu_less_memory_node() {
        // A CXL or kmem-DAX node has memory but no CPUs: its cpulist is empty.
        let root = fake_sysfs(&[(0, "0-3", "10 20"), (1, "", "20 10")]);
        let t = Topology::from_sysfs(root.path()).unwrap();
        assert!(t.cpus_of(1).is_empty());
        assert_eq!(t.by_distance(0), vec![0, 1]);
        assert_eq!(
            t.to_string(),
            "2 nodes; cpus 0-3 | none; distances 10,20 / 20,10"
        );
    }

    #[test]
    fn no_node_directory_is_one_node() {
        let root = tempfile::tempdir().unwrap();
        let cpu = root.path().join("devices/system/cpu");
        fs::create_dir_all(&cpu).unwrap();
        fs::write(cpu.join("online"), "0-3,6\n").unwrap();
        let t = Topology::from_sysfs(root.path()).unwrap();
        assert_eq!(t.nodes(), &[0]);
        assert_eq!(t.cpus_of(0), &[0, 1, 2, 3, 6]);
        assert_eq!(t.distance(0, 0), Some(10));
        assert_eq!(t.by_distance(0), vec![0]);
        assert_eq!(t.to_string(), "1 node; cpus 0-3,6; distances 10");

        // Neither `node` nor `cpu/online`: this process's CPUs.
        let bare = tempfile::tempdir().unwrap();
        let t = Topology::from_sysfs(bare.path()).unwrap();
        assert_eq!(t.nodes(), &[0]);
        assert_eq!(t.cpus_of(0), allowed_cpus().as_slice());

        // A `node` directory without `nodeN` entries.
        fs::create_dir_all(bare.path().join("devices/system/node/power")).unwrap();
        assert_eq!(Topology::from_sysfs(bare.path()).unwrap().node_count(), 1);
    }

    #[test]
    fn real_machine_reads() {
        // A host with more nodes than a volume takes is refused (the engine then
        // runs as on one node); any other host reads.
        let nodes = std::fs::read_dir("/sys/devices/system/node").map_or(0, |d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    let n = e.file_name();
                    let n = n.to_string_lossy();
                    n.strip_prefix("node")
                        .is_some_and(|k| k.parse::<u32>().is_ok())
                })
                .count()
        });
        let t = Topology::from_sysfs(Path::new("/sys"));
        if nodes > MAX_NODES {
            assert!(t.is_err(), "{nodes} nodes");
            return;
        }
        let t = t.unwrap();
        assert!(t.node_count() >= 1);
        let first = t.nodes()[0];
        assert_eq!(t.by_distance(first)[0], first);
    }

    #[test]
    fn malformed_sysfs_is_an_error() {
        let cases: [&[(u32, &str, &str)]; 6] = [
            &[(0, "0-3", "10 21 21"), (1, "4-7", "21 10")], // row too long
            &[(0, "0-3", "10 x"), (1, "4-7", "21 10")],     // not integers
            &[(0, "0-3,a", "10 21"), (1, "4-7", "21 10")],  // bad cpulist
            &[(0, "0-3", "10 10"), (1, "4-7", "10 10")],    // remote = local
            &[(0, "0-3", "12 21"), (1, "4-7", "21 10")],    // diagonal not 10
            &[(0, "0-3", "10 255"), (1, "4-7", "255 10")],  // unreachable
        ];
        for nodes in cases {
            let root = fake_sysfs(nodes);
            let err = Topology::from_sysfs(root.path()).unwrap_err();
            assert!(!err.to_string().contains('\n'), "{err}");
        }
        // Nine nodes are more than a volume takes.
        let row = "10 21 21 21 21 21 21 21 21";
        let nine: Vec<(u32, &str, &str)> = (0..9).map(|id| (id, "0", row)).collect();
        let err = Topology::from_sysfs(fake_sysfs(&nine).path()).unwrap_err();
        assert!(matches!(err, TopologyError::NodeCount(_)), "{err}");
        // A missing distance file.
        let root = fake_sysfs(&[(0, "0-3", "10")]);
        fs::remove_file(root.path().join("devices/system/node/node0/distance")).unwrap();
        let err = Topology::from_sysfs(root.path()).unwrap_err();
        assert!(matches!(err, TopologyError::Io { .. }), "{err}");
    }

    #[test]
    fn parse_node_count_deals_cpus() {
        let cpus = allowed_cpus();
        for n in 1..=MAX_NODES {
            let t = Topology::parse(&n.to_string()).unwrap();
            assert_eq!(t.nodes(), (0..n as u32).collect::<Vec<_>>().as_slice());
            for (i, &cpu) in cpus.iter().enumerate() {
                assert!(t.cpus_of((i % n) as u32).contains(&cpu));
            }
            for node in 0..n as u32 {
                let mine = t.cpus_of(node);
                assert!(!mine.is_empty());
                if node as usize >= cpus.len() {
                    assert_eq!(mine, &[cpus[node as usize % cpus.len()]]);
                }
                assert_eq!(t.distance(node, node), Some(10));
                assert_eq!(
                    t.distance(node, (node + 1) % n as u32),
                    Some(if n == 1 { 10 } else { 21 })
                );
                assert_eq!(t.by_distance(node)[0], node);
            }
        }
        assert_eq!(" 2 ".parse::<Topology>().unwrap().node_count(), 2);
    }

    #[test]
    fn parse_fields() {
        let spec = "nodes=4;cpus=0/1/0/1;dist=10,16,16,22/16,10,22,16/16,22,10,16/22,16,16,10";
        let t = Topology::parse(spec).unwrap();
        assert_eq!(t.nodes(), &[0, 1, 2, 3]);
        assert_eq!((t.cpus_of(0), t.cpus_of(3)), (&[0][..], &[1][..]));
        assert_eq!(t.node_of_cpu(1), Some(1));
        assert_eq!(t.by_distance(0), vec![0, 1, 2, 3]);
        assert_eq!(t.by_distance(1), vec![1, 0, 3, 2]);
        assert_eq!(
            t.to_string(),
            "4 nodes; cpus 0 | 1 | 0 | 1; distances 10,16,16,22 / 16,10,22,16 / 16,22,10,16 / 22,16,16,10"
        );
        // Whitespace separates fields too; order is free; cpulists are normalized.
        let t = Topology::parse(" dist=10,30/30,10  cpus=3,0-1,1/8-9 ;nodes=2; ").unwrap();
        assert_eq!((t.cpus_of(0), t.cpus_of(1)), (&[0, 1, 3][..], &[8, 9][..]));
        assert_eq!(t.distance(1, 0), Some(30));
        // Asymmetric distances are allowed.
        let t = Topology::parse("nodes=2;cpus=0/0;dist=10,20/30,10").unwrap();
        assert_eq!((t.distance(0, 1), t.distance(1, 0)), (Some(20), Some(30)));
        // `nodes` alone deals CPUs and uses the default distances.
        assert_eq!(
            Topology::parse("nodes=3").unwrap(),
            Topology::parse("3").unwrap()
        );
    }

    #[test]
    fn parse_sysfs_path() {
        let root = fake_sysfs(&[
            (0, "0-7", AMD4[0]),
            (1, "8-15", AMD4[1]),
            (2, "16-23", AMD4[2]),
            (3, "24-31", AMD4[3]),
        ]);
        let spec = format!("sysfs:{}", root.path().display());
        let t = Topology::parse(&spec).unwrap();
        assert_eq!(t, Topology::from_sysfs(root.path()).unwrap());
        assert_eq!(t.by_distance(1), vec![1, 0, 3, 2]);
        let missing = format!("sysfs:{}/nope", root.path().display());
        assert!(matches!(
            Topology::parse(&missing),
            Err(TopologyError::Io { .. })
        ));
        let file = format!("sysfs:{}/devices/system/node/online", root.path().display());
        assert!(matches!(
            Topology::parse(&file),
            Err(TopologyError::Sysfs { .. })
        ));
    }

    #[test]
    fn parse_errors() {
        let bad = [
            "",
            "   ",
            "0",
            "9",
            "99999999999999999999",
            "-1",
            "+2",
            "4x",
            "x",
            "nodes",
            "nodes=",
            "nodes=0",
            "nodes=9",
            "nodes=two",
            "nodes=2;nodes=2",
            "=2",
            "nodes=2;=",
            "nodes=2;speed=3",
            "cpus=0/1",
            "nodes=2;cpus=0",
            "nodes=2;cpus=0/1/2",
            "nodes=2;cpus=",
            "nodes=2;cpus=0/",
            "nodes=2;cpus=/0",
            "nodes=2;cpus=0/3-1",
            "nodes=2;cpus=0/a",
            "nodes=2;cpus=0/1,",
            "nodes=2;cpus=0/,1",
            "nodes=2;cpus=0/1--2",
            "nodes=2;cpus=0/1-",
            "nodes=2;cpus=0/-1",
            "nodes=2;cpus=0/65536",
            "nodes=2;cpus=0/0-4294967295",
            "nodes=2;cpus=0/1;cpus=0/1",
            "nodes=2;dist=",
            "nodes=2;dist=10,21",
            "nodes=2;dist=10,21/21",
            "nodes=2;dist=10,21/21,10,21",
            "nodes=2;dist=10,21/21,10/10,21",
            "nodes=2;dist=10,21/21,x",
            "nodes=2;dist=10,21/21,-10",
            "nodes=2;dist=10,21/21,99999999999",
            "nodes=2;dist=11,21/21,10",
            "nodes=2;dist=10,9/21,10",
            "nodes=2;dist=10,10/10,10",
            "nodes=2;dist=10,255/255,10",
            "nodes=1;dist=0",
            "sysfs:",
            "sysfs:/nonexistent/mnemofs/sys",
        ];
        for spec in bad {
            match Topology::parse(spec) {
                Ok(t) => panic!("`{spec}` parsed as {t}"),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(!msg.is_empty() && !msg.contains('\n'), "`{spec}`: {msg}");
                }
            }
        }
    }

    #[test]
    fn mangled_specs_never_panic() {
        let good = [
            "nodes=4;cpus=0/1/0/1;dist=10,16,16,22/16,10,22,16/16,22,10,16/22,16,16,10",
            "nodes=2 cpus=0-3,8/4-7 dist=10,21/21,10",
            "3",
        ];
        let noise = ['0', '1', '9', ',', '/', ';', '=', '-', ' ', 'x', 'é'];
        let mut tried = 0;
        for spec in good {
            let chars: Vec<char> = spec.chars().collect();
            let mut variants = Vec::new();
            for i in 0..=chars.len() {
                variants.push(chars[..i].iter().collect::<String>());
                if i < chars.len() {
                    let mut cut = chars.clone();
                    cut.remove(i);
                    variants.push(cut.iter().collect());
                    for &c in &noise {
                        let mut swapped = chars.clone();
                        swapped[i] = c;
                        variants.push(swapped.iter().collect());
                        let mut inserted = chars.clone();
                        inserted.insert(i, c);
                        variants.push(inserted.iter().collect());
                    }
                }
            }
            for v in variants {
                tried += 1;
                match Topology::parse(&v) {
                    Ok(t) => {
                        assert!((1..=MAX_NODES).contains(&t.node_count()), "`{v}`");
                        for &node in t.nodes() {
                            assert!(!t.cpus_of(node).is_empty(), "`{v}`");
                            assert_eq!(t.by_distance(node)[0], node, "`{v}`");
                        }
                    }
                    Err(e) => assert!(!e.to_string().contains('\n'), "`{v}`: {e}"),
                }
            }
        }
        assert!(tried > 1000);
    }

    #[test]
    fn cpulist_round_trip() {
        for (text, want) in [
            ("0-19,40-59", "0-19,40-59"),
            ("5,3,4,0", "0,3-5"),
            ("0-3,2-6,10", "0-6,10"),
            ("7", "7"),
        ] {
            assert_eq!(format_cpulist(&parse_cpulist(text).unwrap()), want);
        }
        assert_eq!(parse_cpulist(" \n").unwrap(), Vec::<u32>::new());
        assert_eq!(parse_cpulist("0-65535,0-65535").unwrap().len(), 65536);
    }

    /// Writes `value` to `root/rel`, creating directories.
    fn put(root: &Path, rel: &str, value: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, value).unwrap();
    }

    #[test]
    fn device_nodes() {
        let sys = tempfile::tempdir().unwrap();
        let root = sys.path();
        put(root, "block/pmem0/device/numa_node", "0\n");
        put(root, "block/pmem1/device/numa_node", "1\n");
        put(root, "block/pmem2.1/device/numa_node", "2\n");
        put(root, "block/pmem3/device/numa_node", "-1\n");
        put(root, "bus/dax/devices/dax0.0/numa_node", "1\n");
        put(root, "bus/dax/devices/dax2.0/numa_node", "-1\n");
        put(root, "class/dax/dax1.0/device/numa_node", "3\n");
        put(root, "class/dax/dax2.0/device/numa_node", "5\n");
        let dev = |name: &str| device_node(&Path::new("/nonexistent-dev").join(name), root);
        assert_eq!(dev("pmem0"), Some(0));
        assert_eq!(dev("pmem1"), Some(1));
        assert_eq!(dev("pmem1p2"), Some(1)); // a partition: its disk's node
        assert_eq!(dev("pmem2.1"), Some(2)); // its own directory
        assert_eq!(dev("pmem1.1"), Some(1)); // else its region's first disk
        assert_eq!(dev("pmem3"), None); // -1: unknown
        assert_eq!(dev("pmem4"), None); // not in sysfs
        assert_eq!(dev("dax0.0"), Some(1));
        assert_eq!(dev("dax1.0"), Some(3)); // the older class/dax layout
        assert_eq!(dev("dax2.0"), None); // -1 in bus/dax wins over class/dax
        for name in [
            "mnemofs.img",
            "pmem",
            "pmemx",
            "pmem0p",
            "dax0",
            "dax0.x",
            "nvme0n1",
        ] {
            assert_eq!(dev(name), None, "{name}");
        }

        let dir = tempfile::tempdir().unwrap();
        // A regular image file is not a device, whatever its name.
        let image = dir.path().join("pmem0");
        fs::write(&image, "").unwrap();
        assert_eq!(device_node(&image, root), None);
        // A symlink is followed to the device's name (a directory stands in for the
        // device node, which cannot be made without privileges).
        let target = dir.path().join("dax0.0");
        fs::create_dir(&target).unwrap();
        let link = dir.path().join("pm-by-id");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(device_node(&link, root), Some(1));
    }

    #[test]
    fn pinning_moves_the_thread() {
        let cpus = allowed_cpus();
        let last = *cpus.last().unwrap();
        std::thread::spawn(move || {
            pin_to_cpus(&[last]).unwrap();
            assert_eq!(current_cpu(), Some(last));
        })
        .join()
        .unwrap();
        assert!(pin_to_cpus(&[]).is_err());
        assert!(pin_to_cpus(&[CPU_ID_LIMIT]).is_err());
        assert!(current_cpu().is_some());
    }
}
