//! NUMA nodes of threads, and distances between nodes (DESIGN.md §6).
//!
//! A device ([`Pm`](crate::Pm)) sits on one node ([`Pm::set_node`](crate::Pm::set_node));
//! a thread runs on one. The latency profile charges an access by the distance
//! between the two ([`PmProfile::remote`](crate::PmProfile::remote)), and the counters
//! attribute every byte stored to the pair (thread node, device node).
//!
//! - **A thread's node** ([`thread_node`]): the thread's override
//!   ([`set_thread_node`]; benchmark threads are placed on emulated nodes this way),
//!   else the node of the CPU it runs on, from the process-wide CPU→node map
//!   ([`set_cpu_nodes`], read with `sched_getcpu`), else node 0.
//! - **Distances** ([`node_distance`]): a process-wide matrix in ACPI SLIT units
//!   (10 = local), installed with [`set_node_distances`]; by default 10 on the
//!   diagonal and 21 elsewhere (a two-socket machine's remote socket).
//!
//! Node numbers are below [`MAX_NODES`]; larger ones are **rejected** (a panic for a
//! single node number the program chose, an error for a map or matrix, which come
//! from the machine), never clamped: clamping would silently merge two nodes.
//!
//! **Cost.** The node is needed on every counted PM store and on every access of a
//! profiled region, so the thread's node is cached in a thread-local:
//! - [`thread_node`] (called by every fence, profiled or not, and by every read of a
//!   profiled region) returns the cached node and recomputes it (one `sched_getcpu`,
//!   a vDSO call or an `rseq` field read, and a read lock of the map) every
//!   [`NODE_REFRESH_EVERY`] calls, and at its first call after [`set_cpu_nodes`] (a
//!   generation number, one relaxed atomic load). Distances are not cached: each
//!   remote charge loads its matrix entry (one relaxed atomic load).
//! - The counters read the cached node only (one thread-local load): the bytes a
//!   thread stores count at its node as of its last fence or profiled read.
//! - [`set_thread_node`] updates the cache at once.
//!
//! So a thread that migrates to another node, or a map installed while threads run,
//! is seen at most [`NODE_REFRESH_EVERY`] fences or profiled reads late (at the next
//! one for a new map). With an override, or without a map, nothing is recomputed:
//! the attribution is exact.

use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::RwLock;

/// Most NUMA nodes modeled: nodes are numbered `0..MAX_NODES`.
pub const MAX_NODES: usize = 8;

/// ACPI SLIT distance of a node to itself.
pub const LOCAL_DISTANCE: u32 = 10;

/// Default distance between two different nodes (SLIT's usual value for the other
/// socket of a two-socket machine).
pub const DEFAULT_REMOTE_DISTANCE: u32 = 21;

/// Calls of [`thread_node`] between two reads of the CPU the thread runs on.
pub const NODE_REFRESH_EVERY: u32 = 256;

/// A node map or distance matrix that cannot be installed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NumaError {
    /// A node number is not below [`MAX_NODES`].
    #[error("NUMA node {node} is not below the {max} nodes modeled")]
    NodeOutOfRange {
        /// The node.
        node: u32,
        /// [`MAX_NODES`].
        max: usize,
    },
    /// The distance matrix has more rows than [`MAX_NODES`], or a row is not as long
    /// as the matrix has rows.
    #[error("distance matrix is not square with at most {max} nodes: row {row} has {len} entries of {rows}")]
    NotSquare {
        /// The row at fault.
        row: usize,
        /// Its length.
        len: usize,
        /// Rows of the matrix.
        rows: usize,
        /// [`MAX_NODES`].
        max: usize,
    },
    /// A distance is invalid: the diagonal must be [`LOCAL_DISTANCE`], every other
    /// entry between it and 254 (SLIT's 255 means "unreachable").
    #[error("distance {distance} from node {from} to node {to} is invalid")]
    BadDistance {
        /// Row.
        from: u32,
        /// Column.
        to: u32,
        /// The value.
        distance: u32,
    },
}

/// Bumped whenever the CPU map changes: a thread whose cached node carries an older
/// generation recomputes it at its next [`thread_node`].
static GENERATION: CachePadded<AtomicU32> = CachePadded::new(AtomicU32::new(1));

/// Whether a CPU→node map is installed (saves the lock and the syscall without one).
static HAVE_CPU_MAP: AtomicBool = AtomicBool::new(false);

/// CPU id → node.
static CPU_NODES: RwLock<Vec<u32>> = RwLock::new(Vec::new());

/// `DISTANCES[from * MAX_NODES + to]`.
static DISTANCES: [AtomicU32; MAX_NODES * MAX_NODES] = {
    let mut d = [const { AtomicU32::new(DEFAULT_REMOTE_DISTANCE) }; MAX_NODES * MAX_NODES];
    let mut i = 0;
    while i < MAX_NODES {
        d[i * MAX_NODES + i] = AtomicU32::new(LOCAL_DISTANCE);
        i += 1;
    }
    d
};

/// No override.
const NONE: u32 = u32::MAX;

/// The calling thread's node, cached.
struct NodeCache {
    /// The node last computed.
    node: Cell<u32>,
    /// Calls left before it is recomputed.
    left: Cell<u32>,
    /// [`GENERATION`] when it was computed (0: never).
    generation: Cell<u32>,
    /// The override, or [`NONE`].
    forced: Cell<u32>,
}

thread_local! {
    static CACHE: NodeCache = const {
        NodeCache {
            node: Cell::new(0),
            left: Cell::new(0),
            generation: Cell::new(0),
            forced: Cell::new(NONE),
        }
    };
}

/// The NUMA node of the calling thread: its override ([`set_thread_node`]), else the
/// node of its CPU in the map ([`set_cpu_nodes`]; a CPU the map does not cover is
/// node 0), else 0. Cached: see the module documentation.
#[inline]
pub fn thread_node() -> u32 {
    CACHE.with(|c| {
        let left = c.left.get();
        if left != 0 && c.generation.get() == GENERATION.load(Ordering::Relaxed) {
            c.left.set(left - 1);
            c.node.get()
        } else {
            refresh(c)
        }
    })
}

/// The calling thread's node as last computed by [`thread_node`] or
/// [`set_thread_node`] (computed now if never): for the counters' hot path, which
/// must not pay for the generation check and the countdown.
#[inline]
pub(crate) fn cached_thread_node() -> u32 {
    CACHE.with(|c| {
        if c.generation.get() != 0 {
            c.node.get()
        } else {
            refresh(c)
        }
    })
}

#[cold]
#[inline(never)]
fn refresh(c: &NodeCache) -> u32 {
    let generation = GENERATION.load(Ordering::Acquire);
    let forced = c.forced.get();
    let (node, left) = if forced != NONE {
        (forced, u32::MAX)
    } else if HAVE_CPU_MAP.load(Ordering::Acquire) {
        // SAFETY: sched_getcpu takes no arguments and only returns a number.
        let cpu = unsafe { libc::sched_getcpu() };
        let map = CPU_NODES.read().unwrap_or_else(|e| e.into_inner());
        (node_of_cpu(&map, cpu), NODE_REFRESH_EVERY)
    } else {
        (0, u32::MAX)
    };
    c.node.set(node);
    c.generation.set(generation);
    c.left.set(left - 1);
    node
}

/// The node of `cpu` in `map` (0 for a CPU the map does not cover, or -1: unknown).
fn node_of_cpu(map: &[u32], cpu: libc::c_int) -> u32 {
    usize::try_from(cpu)
        .ok()
        .and_then(|i| map.get(i).copied())
        .unwrap_or(0)
}

/// Places the calling thread on `node` for the cost model and the counters
/// (`Some`), or returns it to the node of its CPU (`None`). Takes effect at once.
///
/// # Panics
/// If `node` is not below [`MAX_NODES`].
pub fn set_thread_node(node: Option<u32>) {
    if let Some(n) = node {
        assert!(
            (n as usize) < MAX_NODES,
            "NUMA node {n} is not below the {MAX_NODES} nodes modeled"
        );
    }
    CACHE.with(|c| {
        c.forced.set(node.unwrap_or(NONE));
        refresh(c);
    });
}

/// The calling thread's override, if any ([`set_thread_node`]).
pub fn thread_node_override() -> Option<u32> {
    CACHE.with(|c| Some(c.forced.get()).filter(|&n| n != NONE))
}

/// Installs the process-wide CPU→node map (index = CPU id, as `sched_getcpu`
/// returns it); an empty map removes it (every thread without an override is then on
/// node 0). A thread sees it at its next [`thread_node`] (its next fence or profiled
/// read).
pub fn set_cpu_nodes(map: Vec<u32>) -> Result<(), NumaError> {
    if let Some(&node) = map.iter().find(|&&n| n as usize >= MAX_NODES) {
        return Err(NumaError::NodeOutOfRange {
            node,
            max: MAX_NODES,
        });
    }
    let have = !map.is_empty();
    *CPU_NODES.write().unwrap_or_else(|e| e.into_inner()) = map;
    HAVE_CPU_MAP.store(have, Ordering::Release);
    GENERATION.fetch_add(1, Ordering::AcqRel);
    Ok(())
}

/// Installs the process-wide distance matrix: `matrix[from][to]` in SLIT units, for
/// nodes `0..matrix.len()` (at most [`MAX_NODES`]); pairs outside it take the
/// default (10 on the diagonal, 21 elsewhere). An empty matrix restores the default.
/// Meant for start-up: an access racing with it may see a mix of old and new entries.
pub fn set_node_distances(matrix: Vec<Vec<u32>>) -> Result<(), NumaError> {
    let rows = matrix.len();
    for (row, r) in matrix.iter().enumerate() {
        if rows > MAX_NODES || r.len() != rows {
            return Err(NumaError::NotSquare {
                row,
                len: r.len(),
                rows,
                max: MAX_NODES,
            });
        }
        for (to, &distance) in r.iter().enumerate() {
            let ok = if row == to {
                distance == LOCAL_DISTANCE
            } else {
                (LOCAL_DISTANCE..=254).contains(&distance)
            };
            if !ok {
                return Err(NumaError::BadDistance {
                    from: row as u32,
                    to: to as u32,
                    distance,
                });
            }
        }
    }
    for from in 0..MAX_NODES {
        for to in 0..MAX_NODES {
            let d = match matrix.get(from).and_then(|r| r.get(to)) {
                Some(&d) => d,
                None if from == to => LOCAL_DISTANCE,
                None => DEFAULT_REMOTE_DISTANCE,
            };
            DISTANCES[from * MAX_NODES + to].store(d, Ordering::Relaxed);
        }
    }
    Ok(())
}

/// The distance from node `from` (a thread's) to node `to` (a device's), in SLIT
/// units.
///
/// # Panics
/// If either node is not below [`MAX_NODES`].
#[inline]
pub fn node_distance(from: u32, to: u32) -> u32 {
    assert!(
        (from as usize) < MAX_NODES && (to as usize) < MAX_NODES,
        "NUMA nodes {from}, {to}: not below the {MAX_NODES} nodes modeled"
    );
    DISTANCES[from as usize * MAX_NODES + to as usize].load(Ordering::Relaxed)
}

/// Serializes the tests (of any module) that install a process-wide map or matrix,
/// or depend on one.
#[cfg(test)]
pub(crate) static TEST_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;

    fn lock() -> std::sync::MutexGuard<'static, ()> {
        TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn override_wins_and_is_per_thread() {
        std::thread::spawn(|| {
            assert_eq!(thread_node_override(), None);
            set_thread_node(Some(3));
            assert_eq!(thread_node(), 3);
            assert_eq!(thread_node_override(), Some(3));
            // Another thread is not moved.
            let other = std::thread::spawn(|| (thread_node_override(), thread_node()))
                .join()
                .unwrap();
            assert_eq!(other.0, None);
            set_thread_node(Some(5));
            assert_eq!(thread_node(), 5);
            set_thread_node(None);
            assert_eq!(thread_node_override(), None);
        })
        .join()
        .unwrap();
    }

    #[test]
    #[should_panic(expected = "not below")]
    fn node_out_of_range_is_rejected() {
        set_thread_node(Some(MAX_NODES as u32));
    }

    #[test]
    fn cpu_map_lookup() {
        let map = [0, 0, 1, 1, 7];
        assert_eq!(node_of_cpu(&map, 0), 0);
        assert_eq!(node_of_cpu(&map, 2), 1);
        assert_eq!(node_of_cpu(&map, 4), 7);
        // Not covered, or unknown (sched_getcpu failed): node 0.
        assert_eq!(node_of_cpu(&map, 5), 0);
        assert_eq!(node_of_cpu(&map, -1), 0);
        assert_eq!(node_of_cpu(&[], 3), 0);
    }

    #[test]
    fn cpu_map_is_validated_and_used() {
        let _g = lock();
        assert_eq!(
            set_cpu_nodes(vec![0, 8]),
            Err(NumaError::NodeOutOfRange { node: 8, max: 8 })
        );
        // Every CPU on node 1 (tests that depend on their thread's node hold
        // `TEST_LOCK` too, so none runs meanwhile).
        set_cpu_nodes(vec![1; 4096]).unwrap();
        let seen = std::thread::spawn(|| {
            let from_map = thread_node();
            // The override beats the map, and dropping it returns to the map.
            set_thread_node(Some(2));
            let forced = thread_node();
            set_thread_node(None);
            let back = thread_node();
            // A new map: the counters' cached node follows at the next
            // `thread_node` (which every fence calls), not before.
            set_cpu_nodes(vec![4; 4096]).unwrap();
            let stale = cached_thread_node();
            let mut pm = crate::Pm::anonymous(1 << 16).unwrap();
            pm.set_node(6);
            pm.store_u64(0, 1);
            // Fence: orders the store above before the next one; here it matters
            // as the point where the thread's node is recomputed.
            pm.fence();
            pm.store_u64(64, 2);
            let c = pm.counters();
            (
                from_map,
                forced,
                back,
                stale,
                cached_thread_node(),
                c.node_bytes_written(1, 6),
                c.node_bytes_written(4, 6),
            )
        })
        .join()
        .unwrap();
        // Removing the map returns every thread to node 0 at its next access.
        set_cpu_nodes(Vec::new()).unwrap();
        assert_eq!(seen, (1, 2, 1, 1, 4, 8, 8));
        assert_eq!(thread_node(), 0);
    }

    #[test]
    fn distances_default_install_and_validate() {
        let _g = lock();
        assert_eq!(node_distance(0, 0), LOCAL_DISTANCE);
        assert_eq!(node_distance(7, 7), LOCAL_DISTANCE);
        assert_eq!(node_distance(0, 1), DEFAULT_REMOTE_DISTANCE);
        assert_eq!(node_distance(6, 2), DEFAULT_REMOTE_DISTANCE);

        // A four-socket machine with two hops between 0 and 3.
        let m = vec![
            vec![10, 21, 21, 31],
            vec![21, 10, 31, 21],
            vec![21, 31, 10, 21],
            vec![31, 21, 21, 10],
        ];
        set_node_distances(m).unwrap();
        assert_eq!(node_distance(0, 3), 31);
        assert_eq!(node_distance(3, 0), 31);
        assert_eq!(node_distance(1, 3), 21);
        assert_eq!(node_distance(2, 2), 10);
        // Outside the matrix: the default.
        assert_eq!(node_distance(5, 0), DEFAULT_REMOTE_DISTANCE);
        assert_eq!(node_distance(5, 5), LOCAL_DISTANCE);

        assert!(matches!(
            set_node_distances(vec![vec![10, 21], vec![21]]),
            Err(NumaError::NotSquare { row: 1, .. })
        ));
        assert!(matches!(
            set_node_distances(vec![vec![10; 9]; 9]),
            Err(NumaError::NotSquare { rows: 9, .. })
        ));
        assert_eq!(
            set_node_distances(vec![vec![10, 21], vec![21, 11]]),
            Err(NumaError::BadDistance {
                from: 1,
                to: 1,
                distance: 11
            })
        );
        assert_eq!(
            set_node_distances(vec![vec![10, 255], vec![21, 10]]),
            Err(NumaError::BadDistance {
                from: 0,
                to: 1,
                distance: 255
            })
        );
        // A rejected matrix changed nothing.
        assert_eq!(node_distance(0, 3), 31);

        set_node_distances(Vec::new()).unwrap();
        assert_eq!(node_distance(0, 3), DEFAULT_REMOTE_DISTANCE);
    }

    #[test]
    #[should_panic(expected = "not below")]
    fn distance_of_an_unmodeled_node_panics() {
        node_distance(0, MAX_NODES as u32);
    }
}
