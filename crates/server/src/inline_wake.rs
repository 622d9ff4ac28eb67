//! A connection task that wakes itself is polled again in place.
//!
//! hyper's connections hand each request body to the service through a
//! channel that the same task polls: the service asks for the body (waking
//! the dispatcher), the dispatcher sends the bytes it has already read
//! (waking the service). Both wakes land on the task that is running. Tokio
//! treats a task woken during its own poll as a yield: the task goes to the
//! back of the run queue and an idle worker is woken to share the work. At
//! low load that is a futex wake per request, and the other worker then
//! takes over the IO driver, so the upstream's answer is handled on the
//! other thread (strace at concurrency 1, on hyper's HTTP/1 server: one
//! `FUTEX_WAKE` and one `FUTEX_WAIT` per call, the two workers taking turns).
//! Connections now run on current-thread runtimes (`workers`), where there
//! is no other worker to wake, but such a wake still sends the task to the
//! back of its thread's run queue, behind every other connection's.
//!
//! `inline_wakes` gives the inner future a waker that notes a wake arriving
//! while it is being polled and polls it again at once, up to `ROUNDS` times;
//! a wake from anywhere else (the IO driver, another task, a timer) goes to the
//! task as usual. It wraps hyper's HTTP/2 connections. Junction's own
//! HTTP/1.1 connection (`h1`) has no such channel (a request reads its body
//! from the socket itself) and is not wrapped: strace at concurrency 1 counts
//! no futex call per request on it.
//!
//! Such a poll in place is for the connection; the request it is serving
//! usually waits on its upstream meanwhile. `gated` wraps a request's method
//! future so that it is polled only when something it waits on woke it: a
//! poll of the task for another reason (a body channel's wake, the client's
//! socket) returns at once instead of walking the call's futures down to the
//! upstream connection.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// How many times in a row a self-woken future is polled in place before the
/// wake goes to the scheduler (so a future that keeps waking itself still
/// lets other tasks run).
const ROUNDS: usize = 4;

#[derive(Default)]
struct Shared {
    /// Set while the inner future is being polled.
    polling: AtomicBool,
    /// Set by every wake; read after each poll.
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // `woken` before `polling`, and the poller clears `polling` before it
        // reads `woken`: a wake that finds `polling` set is seen by the poller.
        self.woken.store(true, SeqCst);
        if !self.polling.load(SeqCst) {
            self.task.wake();
        }
    }
}

pin_project_lite::pin_project! {
    /// `fut`, polled again in place when it wakes itself while polled.
    /// (A struct, not an `async fn`: an async fn would keep its argument and
    /// the pinned copy side by side, doubling every connection's task.)
    pub(crate) struct InlineWakes<F> {
        #[pin]
        fut: F,
        shared: Arc<Shared>,
        // One waker for the connection's life, so wakers stored by the IO
        // driver and channels compare equal (`will_wake`) from poll to poll.
        waker: Waker,
    }
}

pub(crate) fn inline_wakes<F: Future>(fut: F) -> InlineWakes<F> {
    let shared = Arc::new(Shared::default());
    let waker = Waker::from(shared.clone());
    InlineWakes { fut, shared, waker }
}

impl<F: Future> Future for InlineWakes<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let mut this = self.project();
        let shared = &**this.shared;
        shared.task.register(cx.waker());
        let mut inner = Context::from_waker(this.waker);
        for _ in 0..ROUNDS {
            shared.woken.store(false, SeqCst);
            shared.polling.store(true, SeqCst);
            let polled = this.fut.as_mut().poll(&mut inner);
            shared.polling.store(false, SeqCst);
            if polled.is_ready() || !shared.woken.load(SeqCst) {
                return polled;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

pin_project_lite::pin_project! {
    /// `fut`, polled only when something it waits on woke it (and on its
    /// first poll): a poll of the task for another reason returns at once.
    pub(crate) struct Gated<F> {
        #[pin]
        fut: F,
        // `Shared`, never `polling`: every wake goes to the task, and
        // `woken` says whether the future has anything to do.
        gate: Arc<Shared>,
        waker: Waker,
    }
}

pub(crate) fn gated<F: Future>(fut: F) -> Gated<F> {
    let gate = Arc::new(Shared {
        // The first poll goes through.
        woken: AtomicBool::new(true),
        ..Shared::default()
    });
    let waker = Waker::from(gate.clone());
    Gated { fut, gate, waker }
}

impl<F: Future> Future for Gated<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        this.gate.task.register(cx.waker());
        if !this.gate.woken.swap(false, SeqCst) {
            return Poll::Pending;
        }
        this.fut.poll(&mut Context::from_waker(this.waker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;

    /// Counts its polls, keeps the waker it was given, wakes itself during the
    /// first `self_wakes` polls, and is ready once `ready` is set.
    #[derive(Default)]
    struct Probe {
        polls: AtomicUsize,
        self_wakes: usize,
        ready: AtomicBool,
        waker: Mutex<Option<Waker>>,
    }

    fn probe(p: &Arc<Probe>) -> impl Future<Output = ()> {
        let p = p.clone();
        std::future::poll_fn(move |cx| {
            let n = p.polls.fetch_add(1, SeqCst);
            *p.waker.lock().unwrap() = Some(cx.waker().clone());
            if p.ready.load(SeqCst) {
                return Poll::Ready(());
            }
            if n < p.self_wakes {
                cx.waker().wake_by_ref();
            }
            Poll::Pending
        })
    }

    /// Counts the wakes the outer task receives.
    #[derive(Default)]
    struct Task(AtomicUsize);
    impl Wake for Task {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    type Run = std::pin::Pin<Box<dyn Future<Output = ()>>>;

    fn run(self_wakes: usize) -> (Arc<Probe>, Arc<Task>, Run) {
        let p = Arc::new(Probe {
            self_wakes,
            ..Probe::default()
        });
        let fut = Box::pin(inline_wakes(probe(&p)));
        (p, Arc::new(Task::default()), fut)
    }

    #[test]
    fn a_wake_during_the_poll_is_a_poll_in_place_not_a_task_wake() {
        let (p, task, mut fut) = run(2);
        let waker = Waker::from(task.clone());
        assert!(fut
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        assert_eq!(
            p.polls.load(SeqCst),
            3,
            "two self-wakes: three polls in one"
        );
        assert_eq!(task.0.load(SeqCst), 0, "the task was not woken");
    }

    #[test]
    fn a_future_that_keeps_waking_itself_goes_back_to_the_scheduler() {
        let (p, task, mut fut) = run(usize::MAX);
        let waker = Waker::from(task.clone());
        assert!(fut
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        assert_eq!(p.polls.load(SeqCst), ROUNDS);
        assert_eq!(task.0.load(SeqCst), 1, "yields to the scheduler once");
    }

    #[test]
    fn a_wake_from_outside_the_poll_reaches_the_task() {
        let (p, task, mut fut) = run(0);
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert_eq!(p.polls.load(SeqCst), 1);
        // What the IO driver would do with the waker it was given.
        let stored = p.waker.lock().unwrap().take().unwrap();
        std::thread::spawn(move || stored.wake()).join().unwrap();
        assert_eq!(task.0.load(SeqCst), 1, "the wake reached the task");
        p.ready.store(true, SeqCst);
        assert!(fut.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn a_gated_future_is_polled_only_after_its_own_wake() {
        let p = Arc::new(Probe::default());
        let mut fut = Box::pin(gated(probe(&p)));
        let task = Arc::new(Task::default());
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert_eq!(p.polls.load(SeqCst), 1, "the first poll goes through");
        // The task polled for another reason: the future is not.
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert_eq!(p.polls.load(SeqCst), 1);
        // What it waits on wakes it: the task is woken, the next poll goes through.
        let stored = p.waker.lock().unwrap().take().unwrap();
        stored.wake();
        assert_eq!(task.0.load(SeqCst), 1, "the wake reached the task");
        p.ready.store(true, SeqCst);
        assert!(fut.as_mut().poll(&mut cx).is_ready());
        assert_eq!(p.polls.load(SeqCst), 2);
    }
}
