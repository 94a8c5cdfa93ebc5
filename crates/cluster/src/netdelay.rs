//! A TCP proxy that delays every byte by a fixed one-way time in each direction:
//! the benchmarks' stand-in for a network with a round trip (`--rtt`). The
//! issue asked for `tc netem` between network namespaces; this machine's kernel is
//! built without `sch_netem` (CONFIG_NET_SCH_NETEM is not set, so `tc qdisc add
//! ... netem` answers "Specified qdisc kind is unknown"), so the delay is added in
//! user space, on loopback. Each direction of a connection has a reader thread that
//! stamps what it reads with its due time and a writer thread that sleeps until
//! then (timer slack set to 1 ns) and forwards it in order; bandwidth is not
//! limited. A sleep overshoots by the scheduler's wake-up latency, so the measured
//! round trip is somewhat above the one asked for (docs/BENCHMARKS.md gives both).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A running delay proxy.
pub struct DelayProxy {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn precise_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Forwards `src` to `dst`, each chunk `delay` after it was read.
fn pump(mut src: TcpStream, dst: TcpStream, delay: Duration) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let writer = std::thread::spawn(move || {
        precise_timers();
        let mut dst = dst;
        while let Ok((due, bytes)) = rx.recv() {
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if dst.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = dst.shutdown(Shutdown::Write);
    });
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match src.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if tx
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .is_err()
                {
                    break;
                }
            }
        }
    }
    drop(tx);
    let _ = writer.join();
}

impl DelayProxy {
    /// Listens on `listen` (port 0: any) and forwards each connection to
    /// `target`, delaying each direction by `one_way`.
    pub fn start(
        listen: SocketAddr,
        target: SocketAddr,
        one_way: Duration,
    ) -> std::io::Result<DelayProxy> {
        let l = TcpListener::bind(listen)?;
        let addr = l.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let thread = std::thread::Builder::new()
            .name("mnemofs-delay".into())
            .spawn(move || {
                for c in l.incoming() {
                    if st.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(client) = c else { continue };
                    let Ok(server) = TcpStream::connect(target) else {
                        continue;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                        continue;
                    };
                    std::thread::spawn(move || pump(client, server, one_way));
                    std::thread::spawn(move || pump(s2, c2, one_way));
                }
            })?;
        Ok(DelayProxy {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_arrive_whole_and_in_order() {
        let echo = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = echo.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = echo.accept().unwrap();
            let mut b = [0u8; 4096];
            loop {
                match s.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => s.write_all(&b[..n]).unwrap(),
                }
            }
        });
        let p = DelayProxy::start(
            "127.0.0.1:0".parse().unwrap(),
            target,
            Duration::from_millis(5),
        )
        .unwrap();
        let mut c = TcpStream::connect(p.addr()).unwrap();
        c.set_nodelay(true).unwrap();
        let msg: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        // (Only contents and order are checked: the delay is a timing, which the
        // benchmark measures and reports, `bench cluster`'s `rtt_us`.)
        c.write_all(&msg).unwrap();
        let mut got = vec![0u8; msg.len()];
        c.read_exact(&mut got).unwrap();
        assert_eq!(got, msg);
    }
}
