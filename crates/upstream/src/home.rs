//! Which connection thread the current thread is, for state kept per thread
//! so a request finds what its own thread made: the upstream pool keeps one
//! idle stack per thread, since a socket is registered with the reactor of
//! the runtime that opened it and wakes that runtime's thread.
//!
//! The server numbers its connection threads from 1 ([`set`]); every other
//! thread (the main runtime's) is 0.

use std::cell::Cell;

thread_local! {
    static HOME: Cell<usize> = const { Cell::new(0) };
}

/// This thread's number: 0 unless [`set`] said otherwise.
pub fn current() -> usize {
    HOME.with(Cell::get)
}

/// Numbers this thread (a connection thread: 1, 2, …).
pub fn set(n: usize) {
    HOME.with(|h| h.set(n));
}

/// How many connection threads the server starts: `TOKIO_WORKER_THREADS`
/// when set to a positive number (the knob operators already had for tokio's
/// own pool), else one per CPU the process may use (the cgroup's CPU quota
/// counts, as for tokio's worker count).
pub fn threads() -> usize {
    threads_from(std::env::var("TOKIO_WORKER_THREADS").ok().as_deref())
}

fn threads_from(env: Option<&str>) -> usize {
    env.and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// How many per-thread stacks to keep: one per connection thread, and one for
/// every other thread. Threads numbered past that share stacks
/// (`current() % stacks()`).
pub fn stacks() -> usize {
    threads() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_count_follows_tokio_worker_threads_when_it_is_a_number() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(threads_from(Some("3")), 3);
        assert_eq!(threads_from(Some(" 1 ")), 1);
        assert_eq!(threads_from(None), cpus);
        assert_eq!(threads_from(Some("0")), cpus);
        assert_eq!(threads_from(Some("many")), cpus);
    }
}
