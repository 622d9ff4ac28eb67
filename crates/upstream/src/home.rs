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

/// How many per-thread stacks to keep: one per connection thread the server
/// starts by default (one per CPU), and one for every other thread. More
/// threads share stacks (`current() % stacks()`).
pub fn stacks() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()) + 1
}
