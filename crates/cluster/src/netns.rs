//! A network namespace joined to the caller's by a veth pair: how the tests and
//! `mnemofs bench cluster --net netns` put the metadata server behind a real
//! network interface instead of loopback (docs/CLUSTER.md, "Across network
//! namespaces"). Made and removed with iproute2's `ip` (needs root). The round
//! trip over the pair is a few tens of microseconds of kernel path; a chosen
//! round trip is added by [`crate::netdelay::DelayProxy`] (this kernel has no
//! `sch_netem`).
//!
//! Each namespace gets a /30 of 198.18.0.0/16 (of the range RFC 2544 sets aside
//! for benchmarks, which no real network uses), the first one from a start picked
//! from the process id and a counter that has no route yet (processes that scan at
//! the same instant could still pick the same one); the root side's address is its
//! `.1`, the namespace's its `.2`. Names carry the process id (`mnemofs-PID-K`;
//! interfaces `mfhPIDkK` and `mfnPIDkK`, within Linux's 15 bytes while K < 10,000).
//! Dropping a [`NetNs`] deletes the namespace, which takes the pair with it; a
//! process killed first leaves both behind (`ip netns del mnemofs-PID-K` removes
//! them; a later process of the same pid deletes a namespace of its name first).

use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Why a namespace could not be made.
#[derive(Debug, thiserror::Error)]
pub enum NetNsError {
    /// Not root, no `ip`, or not allowed to make namespaces (a container without
    /// CAP_SYS_ADMIN): the caller may skip what needed the namespace.
    #[error("network namespaces unavailable: {0}")]
    Unavailable(String),
    /// An `ip` command failed.
    #[error("`ip {cmd}` failed: {msg}")]
    Ip {
        /// Its arguments.
        cmd: String,
        /// What it printed, or why it did not run.
        msg: String,
    },
}

/// Namespaces made by this process so far (for unique names and subnets).
static MADE: AtomicU32 = AtomicU32::new(0);

/// A network namespace with a veth pair to the caller's; deleted on drop.
pub struct NetNs {
    name: String,
    host: Ipv4Addr,
    inner: Ipv4Addr,
}

/// Runs `ip ARGS`: its output, or its error output on failure.
fn ip(args: &[&str]) -> Result<String, NetNsError> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| NetNsError::Ip {
            cmd: args.join(" "),
            msg: e.to_string(),
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(NetNsError::Ip {
            cmd: args.join(" "),
            msg: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// The first address of a /30 of 198.18.0.0/16 that no route covers yet, trying
/// them from the `start`-th (modulo their number) on.
fn free_subnet(start: u32) -> Result<u32, NetNsError> {
    const NETS: u32 = 1 << 14;
    let routes = ip(&["-4", "route", "show", "root", "198.18.0.0/16"])?;
    // Each line starts with the destination: `198.18.X.Y/30 dev ...`.
    let used: Vec<u32> = routes
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|d| d.split('/').next()?.parse::<Ipv4Addr>().ok())
        .map(|a| u32::from(a) & !3)
        .collect();
    let first = u32::from(Ipv4Addr::new(198, 18, 0, 0));
    (0..NETS)
        .map(|i| first + (start.wrapping_add(i) % NETS) * 4)
        .find(|b| !used.contains(b))
        .ok_or_else(|| NetNsError::Ip {
            cmd: "-4 route show root 198.18.0.0/16".into(),
            msg: "every /30 of 198.18.0.0/16 is in use".into(),
        })
}

impl NetNs {
    /// Makes a namespace, a veth pair between it and the caller's namespace, and
    /// brings both ends (and the namespace's loopback) up.
    pub fn create() -> Result<NetNs, NetNsError> {
        // SAFETY: geteuid reads the calling process's effective user id; no memory
        // is involved.
        if unsafe { libc::geteuid() } != 0 {
            return Err(NetNsError::Unavailable("not root".into()));
        }
        let found = Command::new("ip")
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if !found.is_ok_and(|s| s.success()) {
            return Err(NetNsError::Unavailable(
                "no `ip` command (Debian: apt-get install iproute2)".into(),
            ));
        }
        let pid = std::process::id();
        let k = MADE.fetch_add(1, Ordering::Relaxed);
        let base = free_subnet(pid.wrapping_mul(64).wrapping_add(k))?;
        let (host, inner) = (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2));
        let ns = NetNs {
            name: format!("mnemofs-{pid}-{k}"),
            host,
            inner,
        };
        // (Interface names: at most 15 bytes; a pid has at most 7 digits.)
        let (h, n) = (format!("mfh{pid}k{k}"), format!("mfn{pid}k{k}"));
        // One of this name is left over from a killed process that had this pid.
        let _ = ip(&["netns", "del", &ns.name]);
        ip(&["netns", "add", &ns.name]).map_err(|e| match e {
            NetNsError::Ip { msg, .. } if msg.contains("Operation not permitted") => {
                NetNsError::Unavailable(format!("not allowed to make one: {msg}"))
            }
            e => e,
        })?;
        // From here on, a failure deletes the namespace (the drop of `ns`); the host
        // end of the pair goes when its peer's namespace does.
        ip(&["link", "add", &h, "type", "veth", "peer", "name", &n])?;
        let dropped_pair = |e| {
            let _ = ip(&["link", "del", &h]);
            e
        };
        ip(&["link", "set", &n, "netns", &ns.name]).map_err(dropped_pair)?;
        ip(&["addr", "add", &format!("{host}/30"), "dev", &h])?;
        ip(&["link", "set", &h, "up"])?;
        let inside = |args: &[&str]| {
            let mut v = vec!["netns", "exec", ns.name.as_str(), "ip"];
            v.extend_from_slice(args);
            ip(&v)
        };
        inside(&["addr", "add", &format!("{inner}/30"), "dev", &n])?;
        inside(&["link", "set", &n, "up"])?;
        inside(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// For tests: a namespace, or None (having said `skipped` and why) where
    /// namespaces are unavailable; panics on any other failure.
    #[doc(hidden)]
    pub fn or_skip() -> Option<NetNs> {
        match NetNs::create() {
            Ok(ns) => Some(ns),
            Err(NetNsError::Unavailable(why)) => {
                eprintln!("skipped: {why}");
                None
            }
            Err(e) => panic!("{e}"),
        }
    }

    /// The namespace's name (`ip netns exec NAME ...`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The address of the pair's end inside the namespace.
    pub fn addr(&self) -> Ipv4Addr {
        self.inner
    }

    /// The address of the pair's end in the caller's namespace.
    pub fn host_addr(&self) -> Ipv4Addr {
        self.host
    }

    /// A command that runs `program` inside the namespace (`ip netns exec` runs it
    /// in place of itself: the child's pid is the program's).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        // Deleting the namespace destroys its end of the pair, and with it the
        // other end. (A process still inside keeps the namespace alive until it
        // exits; the name is gone at once.)
        let _ = ip(&["netns", "del", &self.name]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(name: &str) -> bool {
        let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.split_whitespace().next() == Some(name))
    }

    /// A TCP connection from this namespace reaches a listener inside the new one
    /// over the pair, and the drop takes the namespace away.
    #[test]
    fn reaches_inside_over_the_pair_and_drop_deletes_it() {
        let Some(ns) = NetNs::or_skip() else {
            return;
        };
        let name = ns.name().to_string();
        assert!(listed(&name));
        // A listener inside: a socket made by a thread that joined the namespace
        // (`ip netns add` keeps it at /run/netns/NAME).
        let file = std::fs::File::open(format!("/run/netns/{name}")).unwrap();
        let addr = std::net::SocketAddr::from((ns.addr(), 4200));
        let listener = std::thread::spawn(move || {
            use std::os::fd::AsRawFd;
            // SAFETY: setns on this thread only, with a namespace file we hold open.
            let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns");
            let l = std::net::TcpListener::bind(addr).unwrap();
            let (mut s, peer) = l.accept().unwrap();
            use std::io::Write;
            s.write_all(b"ok").unwrap();
            peer
        });
        let t0 = std::time::Instant::now();
        let mut s = loop {
            match std::net::TcpStream::connect(addr) {
                Ok(s) => break s,
                Err(e) => {
                    assert!(t0.elapsed().as_secs() < 10, "connect: {e}");
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
        };
        let mut got = String::new();
        use std::io::Read;
        s.read_to_string(&mut got).unwrap();
        assert_eq!(got, "ok");
        // The listener saw the connection come from the pair's other end.
        assert_eq!(listener.join().unwrap().ip(), ns.host_addr());
        drop(ns);
        assert!(!listed(&name));
    }
}
