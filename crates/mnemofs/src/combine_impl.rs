// The combining queue, over the atomics of the module that includes this file
// (`AtomicPtr`, `AtomicBool`, `pause`, `SPINS`): see combine.rs.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::ops::DerefMut;
use std::sync::atomic::Ordering;

/// Batches a combiner serves (each: every request queued when it looks) before it
/// lets the lock go, so that it does not serve newcomers forever.
const BATCHES: u32 = 4;

/// One waiting request, on its thread's stack while it waits.
struct Node<Req, Res> {
    req: Req,
    /// Written by the combiner before `done`.
    res: UnsafeCell<MaybeUninit<Res>>,
    done: AtomicBool,
    /// The node queued before this one; written by its owner before the node is
    /// published, and by the combiner (which reverses the batch) after.
    next: UnsafeCell<*mut Node<Req, Res>>,
}

/// Requests waiting for a combiner: a stack (push: one compare-and-swap; a
/// combiner takes the whole stack with one swap).
pub(crate) struct Queue<Req, Res> {
    head: AtomicPtr<Node<Req, Res>>,
}

// SAFETY: the queue holds only pointers to nodes whose owners are blocked in
// `run` until a combiner (another thread) has served them; requests and results
// cross threads, so they must be `Send`.
unsafe impl<Req: Send, Res: Send> Send for Queue<Req, Res> {}
// SAFETY: as for `Send`: all shared access goes through the atomic head and each
// node's `done` flag (see `run` and `serve_all`).
unsafe impl<Req: Send, Res: Send> Sync for Queue<Req, Res> {}

impl<Req, Res> Default for Queue<Req, Res> {
    fn default() -> Self {
        Self::new()
    }
}

impl<Req, Res> std::fmt::Debug for Queue<Req, Res> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").finish_non_exhaustive()
    }
}

impl<Req, Res> Queue<Req, Res> {
    pub(crate) fn new() -> Self {
        Queue {
            head: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// Has `req` served under the lock (`try_lock`/`lock` take it): by this thread,
    /// with `serve`, if it gets the lock first (serving every other request queued
    /// with it), else by the thread that holds it. Returns the result of serving it.
    pub(crate) fn run<S: ?Sized, G: DerefMut<Target = S>>(
        &self,
        req: Req,
        try_lock: impl Fn() -> Option<G>,
        lock: impl Fn() -> G,
        mut serve: impl FnMut(&mut S, &Req) -> Res,
    ) -> Res {
        let node = Node {
            req,
            res: UnsafeCell::new(MaybeUninit::uninit()),
            done: AtomicBool::new(false),
            next: UnsafeCell::new(std::ptr::null_mut()),
        };
        let me = &node as *const Node<Req, Res> as *mut Node<Req, Res>;
        let mut cur = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: the node is not published yet: no other thread reads `next`.
            unsafe { *node.next.get() = cur };
            crate::contention::rmw(1);
            // Release: the request (and `next`) are visible to the combiner that
            // takes the stack (its Acquire swap).
            match self
                .head
                .compare_exchange_weak(cur, me, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(x) => cur = x,
            }
        }
        let mut spins = 0u32;
        // Acquire: pairs with the combiner's Release store of `done`, after its
        // write of the result.
        while !node.done.load(Ordering::Acquire) {
            let guard = if let Some(g) = try_lock() {
                crate::contention::lock(false);
                Some(g)
            } else if spins >= SPINS {
                crate::contention::lock(true);
                Some(lock())
            } else {
                None
            };
            if let Some(mut g) = guard {
                // Holding the lock, the node is served: it is on the stack, which
                // this serves, or a combiner took it, and that combiner has let the
                // lock go, so it served it.
                self.serve_all(&mut g, &mut serve);
                break;
            }
            spins += 1;
            pause();
        }
        debug_assert!(node.done.load(Ordering::Acquire));
        // SAFETY: `done` is set (observed with Acquire above, or set by this thread
        // in `serve_all`): the result was written before it, and no other thread
        // touches the node any more.
        unsafe { (*node.res.get()).assume_init_read() }
    }

    /// Serves the queued requests, oldest first (the lock held by the caller).
    fn serve_all<S: ?Sized, G: DerefMut<Target = S>>(
        &self,
        g: &mut G,
        serve: &mut impl FnMut(&mut S, &Req) -> Res,
    ) {
        for _ in 0..BATCHES {
            // (A load first: an empty stack is not worth a locked instruction.)
            if self.head.load(Ordering::Relaxed).is_null() {
                return;
            }
            crate::contention::rmw(1);
            // Acquire: pairs with each pusher's Release compare-and-swap.
            let mut p = self.head.swap(std::ptr::null_mut(), Ordering::Acquire);
            if p.is_null() {
                return;
            }
            // Newest first on the stack: reverse into queue order.
            let mut oldest: *mut Node<Req, Res> = std::ptr::null_mut();
            while !p.is_null() {
                // SAFETY: a node taken from the stack stays valid until its `done`
                // is set (its owner waits for it), and only the combiner, which
                // holds the lock, touches `next` after the push.
                unsafe {
                    let next = *(*p).next.get();
                    *(*p).next.get() = oldest;
                    oldest = p;
                    p = next;
                }
            }
            while !oldest.is_null() {
                // SAFETY: as above; `next` is read before `done` is set, after which
                // the owner may return and its node be gone.
                unsafe {
                    let n = &*oldest;
                    let next = *n.next.get();
                    let r = serve(&mut **g, &n.req);
                    (*n.res.get()).write(r);
                    // Release: the result is visible before `done`.
                    n.done.store(true, Ordering::Release);
                    oldest = next;
                }
            }
        }
    }
}
