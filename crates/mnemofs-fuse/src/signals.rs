//! Stop signals (SIGINT, SIGTERM, SIGHUP) without signal handlers: they are blocked
//! in every thread and taken synchronously with `sigtimedwait` by one watcher thread.

use std::io;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::time::Duration;

/// The signals that ask a mounted file system to unmount.
pub const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// A set of signals.
#[derive(Clone, Copy)]
pub struct SigSet(libc::sigset_t);

impl SigSet {
    /// The set of `signals`.
    pub fn new(signals: &[libc::c_int]) -> io::Result<SigSet> {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: sigemptyset initializes the set it is given a valid pointer to.
        if unsafe { libc::sigemptyset(set.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the set was initialized by sigemptyset above.
        let mut set = unsafe { set.assume_init() };
        for &sig in signals {
            // SAFETY: `set` is an initialized sigset_t.
            if unsafe { libc::sigaddset(&mut set, sig) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(SigSet(set))
    }

    /// Waits up to `timeout` for a pending signal of the set (which must be blocked
    /// in the calling thread) and takes it. `None` on timeout or interruption.
    pub fn wait(&self, timeout: Duration) -> Option<libc::c_int> {
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
        };
        // SAFETY: `self.0` and `ts` are valid for the call; a null siginfo is allowed.
        let sig = unsafe { libc::sigtimedwait(&self.0, std::ptr::null_mut(), &ts) };
        (sig > 0).then_some(sig)
    }
}

/// Blocks a set of signals in the calling thread (and so in every thread it spawns
/// afterwards) until dropped. On drop, pending signals of the set are discarded and
/// the previous mask is restored. Not `Send`: the mask is per thread.
pub struct BlockedSignals {
    set: SigSet,
    old: libc::sigset_t,
    _not_send: PhantomData<*const ()>,
}

impl BlockedSignals {
    /// Blocks `signals` in the calling thread until the guard drops.
    pub fn block(signals: &[libc::c_int]) -> io::Result<BlockedSignals> {
        let set = SigSet::new(signals)?;
        let mut old = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: `set.0` is initialized; pthread_sigmask writes the old mask into `old`.
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set.0, old.as_mut_ptr()) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(BlockedSignals {
            set,
            // SAFETY: pthread_sigmask succeeded and wrote the old mask.
            old: unsafe { old.assume_init() },
            _not_send: PhantomData,
        })
    }

    /// The blocked set (for a watcher thread spawned while it is blocked).
    pub fn set(&self) -> SigSet {
        self.set
    }
}

impl Drop for BlockedSignals {
    fn drop(&mut self) {
        while self.set.wait(Duration::ZERO).is_some() {}
        // SAFETY: `self.old` is the mask pthread_sigmask returned in `block`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}

/// Name of a stop signal for messages.
pub fn signal_name(sig: libc::c_int) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_signal_is_taken_by_wait() {
        // SIGUSR2 only: the test harness must not see a stop signal.
        let blocked = BlockedSignals::block(&[libc::SIGUSR2]).unwrap();
        assert_eq!(blocked.set().wait(Duration::ZERO), None);
        // SAFETY: raising a blocked signal in this thread only marks it pending.
        unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGUSR2) };
        assert_eq!(
            blocked.set().wait(Duration::from_millis(100)),
            Some(libc::SIGUSR2)
        );
        // SAFETY: as above.
        unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGUSR2) };
        // Dropping discards the pending one instead of delivering it.
        drop(blocked);
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
    }
}
