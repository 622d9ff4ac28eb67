//! The connection threads: one per CPU (or `TOKIO_WORKER_THREADS`), each
//! running a current-thread tokio runtime. The listener hands every accepted
//! connection to one of them in turn, and the connection lives there until it
//! closes: its socket, its request futures, its timers and the upstream
//! connections it opens all stay on one thread (a thread reuses only the
//! upstream connections it opened). Each keeps a timer armed a second ahead
//! ([`anchored`]), so registering a call's deadline never wakes its own
//! driver through the eventfd.
//!
//! On tokio's multi-thread runtime a connection's task moved between workers
//! with whichever one its socket's wake reached, and its state (request
//! futures of several KiB, read buffers) moved between the cores' caches with
//! it. Measured at c=32 on two cores (BENCHMARKS.md), Junction spent 26.9 µs
//! of CPU per `tools/call` on two workers and 21.7 µs on one; on two of
//! these threads about 21.5 µs, and 48–53k calls/s where it served 41k.
//!
//! Everything else stays on the main runtime: accepting, the catalog's
//! background refreshes, reloads, the fleet bus, stdio upstreams. What a
//! request spawns (an HTTP/2 connection's streams, an upstream pool's reaper)
//! runs on its connection's thread. A request that blocked its thread would
//! stall that thread's other connections, where the multi-thread runtime
//! would have moved them; nothing on the request path blocks.

use std::io;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// How many connection threads (`junction_upstream::home::threads`: one per
/// CPU, or `TOKIO_WORKER_THREADS`); the upstream pools keep as many idle
/// stacks.
pub(crate) fn count() -> usize {
    junction_upstream::home::threads()
}

/// The running connection threads. Dropping this ends them: each thread's
/// runtime then drops whatever is still on it (the listener drops it once
/// connections have finished or the shutdown grace ran out).
pub(crate) struct Workers {
    handles: Vec<Handle>,
    _stops: Vec<oneshot::Sender<()>>,
}

impl Workers {
    /// Starts `n` threads (at least one), numbered 1..=n for
    /// [`junction_upstream::home`], so each keeps its own idle upstream
    /// connections.
    pub(crate) fn start(n: usize) -> io::Result<Workers> {
        let n = n.max(1);
        let mut handles = Vec::with_capacity(n);
        let mut stops = Vec::with_capacity(n);
        for i in 1..=n {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let (stop, stopped) = oneshot::channel::<()>();
            handles.push(runtime.handle().clone());
            std::thread::Builder::new()
                .name(format!("junction-conn-{i}"))
                .spawn(move || {
                    junction_upstream::home::set(i);
                    // Ends when `Workers` drops its sender.
                    runtime.block_on(anchored(stopped));
                })?;
            stops.push(stop);
        }
        Ok(Workers {
            handles,
            _stops: stops,
        })
    }

    /// No threads of its own: connections run on the current runtime (when
    /// the threads could not be started).
    pub(crate) fn here() -> Workers {
        Workers {
            handles: vec![Handle::current()],
            _stops: Vec::new(),
        }
    }

    /// The thread whose turn `turn` is (round robin).
    pub(crate) fn get(&self, turn: usize) -> &Handle {
        &self.handles[turn % self.handles.len()]
    }
}

/// How far ahead a connection thread's timer driver always has a wake of its
/// own: below the shortest deadline a request registers (an upstream call's
/// `timeout`, a body's read timeout), as long as those are at least this long.
const ANCHOR: Duration = Duration::from_secs(1);

/// Waits for `stopped`, keeping a timer armed at most [`ANCHOR`] ahead.
///
/// tokio's timer driver writes its eventfd whenever a timer is registered
/// earlier than the driver's next planned wake, even from the driver's own
/// thread. Without this, a thread whose only timers were its connections'
/// idle clocks (two minutes) paid that system call for the first upstream
/// call after every sleep: 0.19 `write`s per proxied call at c=32. A deadline
/// later than the anchor never moves the wake forward, so it costs none; the
/// anchor costs one timer wake a second.
async fn anchored(stopped: oneshot::Receiver<()>) {
    tokio::pin!(stopped);
    let anchor = tokio::time::sleep(ANCHOR);
    tokio::pin!(anchor);
    loop {
        tokio::select! {
            biased;
            _ = &mut stopped => return,
            () = &mut anchor => anchor.as_mut().reset(tokio::time::Instant::now() + ANCHOR),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_connection_thread_runs_its_tasks_and_knows_its_number() {
        let workers = Workers::start(2).expect("threads");
        let on = |turn| {
            let (tx, rx) = std::sync::mpsc::channel();
            workers.get(turn).spawn(async move {
                let name = std::thread::current().name().map(str::to_owned);
                let _ = tx.send((name, junction_upstream::home::current()));
            });
            rx.recv_timeout(std::time::Duration::from_secs(5))
                .expect("the task ran")
        };
        assert_eq!(on(0), (Some("junction-conn-1".to_owned()), 1));
        assert_eq!(on(1), (Some("junction-conn-2".to_owned()), 2));
        assert_eq!(on(2), (Some("junction-conn-1".to_owned()), 1), "in turn");
    }

    #[test]
    fn dropping_the_workers_ends_their_threads() {
        let workers = Workers::start(1).expect("threads");
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        // A task that never ends on its own, holding the sender.
        workers.get(0).spawn(async move {
            let _tx = tx;
            std::future::pending::<()>().await;
        });
        drop(workers);
        // The runtime dropped the task, and with it the sender.
        assert_eq!(
            rx.recv_timeout(std::time::Duration::from_secs(5)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected)
        );
    }
}
