//! Where log lines go: a buffer that request threads append to, and a thread
//! of its own that writes it to stderr every `FLUSH_EVERY`, or sooner once
//! `FLUSH_AT` bytes are waiting.
//!
//! With an access line per request, writing each line as it is logged costs
//! a write(2) per request on a worker, and a stderr reader that falls behind
//! (a full pipe) would stall the workers. A writer thread fed per line (as
//! `tracing-appender` does) still wakes once per line when the load is light:
//! measured at concurrency 1 that was ~16 µs more CPU per proxied call, and
//! its 128k-slot queue 4 MiB of idle RSS. Here a line is a lock and a copy;
//! the writer wakes ten times a second, or when a burst fills `FLUSH_AT`, and
//! writes everything waiting in one call. Past `CAP` bytes waiting (stderr
//! stuck), lines are dropped, counted, and reported once it moves again.
//! Lines reach stderr up to `FLUSH_EVERY` late; a normal exit writes out
//! everything (`LogGuard`). The audit log (`audit`) runs a buffer and thread
//! of the same kind into its file, with a dropped count of its own (`Kind`).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

const FLUSH_EVERY: Duration = Duration::from_millis(100);
const FLUSH_AT: usize = 256 * 1024;
const CAP: usize = 8 * 1024 * 1024;
/// How long an exit waits for the writer to write out what is waiting: a
/// stderr nobody reads must not keep the process from ending.
const EXIT_WAIT: Duration = Duration::from_secs(2);

/// Lines dropped since the process started (`junction_log_lines_dropped_total`).
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Log lines dropped so far because stderr did not keep up.
pub fn dropped_lines() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// The shared buffer; cloning it is one reference count.
#[derive(Clone)]
pub struct LogBuffer(Arc<Shared>);

struct Shared {
    state: Mutex<State>,
    /// Wakes the writer (closed, or `FLUSH_AT` reached) and whoever waits
    /// for it to finish (`done`).
    wake: Condvar,
    /// What the buffer carries: its dropped count and its warning.
    kind: &'static Kind,
}

/// One kind of line a buffer carries: the log's lines (stderr), or the
/// audit log's (`audit`), each with its own dropped count.
pub(crate) struct Kind {
    pub dropped: &'static AtomicU64,
    /// The writer thread's name.
    pub thread: &'static str,
    /// The warning once lines were dropped.
    pub warning: &'static str,
}

/// The log's lines, to stderr.
static LOG: Kind = Kind {
    dropped: &DROPPED,
    thread: "junction-log",
    warning: "log lines dropped: stderr did not keep up",
};

#[derive(Default)]
struct State {
    waiting: Vec<u8>,
    closed: bool,
    /// The writer has written out everything and returned.
    done: bool,
}

impl Shared {
    /// The state, even if a thread panicked while holding it (the buffer is
    /// bytes: the worst a panic leaves is a partial line).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl LogBuffer {
    fn new(kind: &'static Kind) -> LogBuffer {
        LogBuffer(Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            kind,
        }))
    }

    /// Queues one whole line (or a few), or drops it when `CAP` bytes wait.
    pub fn append(&self, lines: &[u8]) {
        let mut state = self.0.lock();
        let len = state.waiting.len();
        if len + lines.len() > CAP {
            self.0.kind.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        state.waiting.extend_from_slice(lines);
        if len < FLUSH_AT && len + lines.len() >= FLUSH_AT {
            self.0.wake.notify_all();
        }
    }
}

/// `tracing-subscriber` writes each formatted event with one `write_all`.
impl Write for &LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.append(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogBuffer {
    type Writer = &'a LogBuffer;

    fn make_writer(&'a self) -> &'a LogBuffer {
        self
    }
}

/// Keeps the writer thread; dropping it writes out what is waiting and stops
/// the thread, waiting for it at most `EXIT_WAIT`. Hold it until the process
/// is done logging.
#[must_use = "dropping the guard stops the log writer"]
pub struct LogGuard {
    buffer: Option<LogBuffer>,
    thread: Option<JoinHandle<()>>,
}

impl LogGuard {
    pub(crate) fn none() -> LogGuard {
        LogGuard {
            buffer: None,
            thread: None,
        }
    }
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        let Some(buffer) = self.buffer.take() else {
            return;
        };
        let mut state = buffer.0.lock();
        state.closed = true;
        buffer.0.wake.notify_all();
        let deadline = std::time::Instant::now() + EXIT_WAIT;
        while !state.done {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                // Stuck writing: leave the thread to the process's exit.
                return;
            }
            state = match buffer.0.wake.wait_timeout(state, left) {
                Ok((state, _)) => state,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        drop(state);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A buffer and its writer thread writing log lines to `out`.
pub(crate) fn start<W: Write + Send + 'static>(out: W) -> std::io::Result<(LogBuffer, LogGuard)> {
    start_kind(out, &LOG)
}

/// A buffer and its writer thread writing lines of `kind` to `out`.
pub(crate) fn start_kind<W: Write + Send + 'static>(
    out: W,
    kind: &'static Kind,
) -> std::io::Result<(LogBuffer, LogGuard)> {
    let buffer = LogBuffer::new(kind);
    let shared = buffer.0.clone();
    let thread = std::thread::Builder::new()
        .name(kind.thread.into())
        .spawn(move || write_out(&shared, out))?;
    let guard = LogGuard {
        buffer: Some(buffer.clone()),
        thread: Some(thread),
    };
    Ok((buffer, guard))
}

fn write_out<W: Write>(shared: &Shared, mut out: W) {
    let mut batch = Vec::new();
    let dropped = || shared.kind.dropped.load(Ordering::Relaxed);
    // Drops already reported in a warning.
    let mut reported = dropped();
    loop {
        let closed = {
            let mut state = shared.lock();
            if !state.closed && state.waiting.len() < FLUSH_AT {
                state = match shared.wake.wait_timeout(state, FLUSH_EVERY) {
                    Ok((state, _)) => state,
                    Err(poisoned) => poisoned.into_inner().0,
                };
            }
            std::mem::swap(&mut state.waiting, &mut batch);
            state.closed
        };
        if !batch.is_empty() {
            let _ = out.write_all(&batch).and_then(|()| out.flush());
            batch.clear();
            // A burst's buffer is not kept for the quiet that follows.
            if batch.capacity() > 4 * FLUSH_AT {
                batch = Vec::new();
            }
        }
        let total = dropped();
        if total > reported {
            // Logged like any line, so it has the configured format; it goes
            // out with the next (log) batch.
            let dropped = total - reported;
            reported = total;
            tracing::warn!(dropped, "{}", shared.kind.warning);
        }
        if closed {
            shared.lock().done = true;
            shared.wake.notify_all();
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer the test can read, that can be held stuck.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let mut out = self.0.lock().unwrap_or_else(|e| e.into_inner());
            out.extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn text(sink: &Sink) -> String {
        String::from_utf8_lossy(&sink.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }

    #[test]
    fn lines_come_out_in_order_within_the_flush_interval_and_all_of_them_on_exit() {
        let sink = Sink::default();
        let Ok((buffer, guard)) = start(sink.clone()) else {
            panic!("writer thread");
        };
        buffer.append(b"one\n");
        buffer.append(b"two\n");
        let mut waited = Duration::ZERO;
        // The two may go out in one batch or in two.
        while text(&sink).lines().count() < 2 && waited < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
            waited += Duration::from_millis(10);
        }
        assert_eq!(text(&sink), "one\ntwo\n");
        for i in 0..1000 {
            buffer.append(format!("line {i}\n").as_bytes());
        }
        drop(guard);
        let all = text(&sink);
        assert_eq!(all.lines().count(), 1002);
        assert!(all.ends_with("line 999\n"));
    }

    #[test]
    fn a_stuck_writer_costs_lines_not_memory_or_a_blocked_caller() {
        let sink = Sink::default();
        let stuck = sink.0.lock().unwrap_or_else(|e| e.into_inner());
        let Ok((buffer, guard)) = start(sink.clone()) else {
            panic!("writer thread");
        };
        // The writer takes the first batch and blocks writing it; everything
        // after piles up to CAP, then is dropped and counted.
        let line = [b'x'; 1023];
        let line = [&line[..], b"\n"].concat();
        let before = dropped_lines();
        for _ in 0..(3 * CAP / line.len()) {
            buffer.append(&line);
        }
        assert!(buffer.0.lock().waiting.len() <= CAP);
        assert!(dropped_lines() > before);
        drop(stuck);
        drop(guard);
        assert!(text(&sink).len() <= 2 * CAP);
    }

    #[test]
    fn an_exit_does_not_wait_forever_for_a_stderr_nobody_reads() {
        let sink = Sink::default();
        let stuck = sink.0.lock().unwrap_or_else(|e| e.into_inner());
        let Ok((buffer, guard)) = start(sink.clone()) else {
            panic!("writer thread");
        };
        buffer.append(&[b'x'; FLUSH_AT]);
        // The writer is now blocked on the sink; the guard's drop must still
        // return (bounded by EXIT_WAIT), which a thread reports here.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(guard);
            let _ = tx.send(());
        });
        let returned = rx.recv_timeout(Duration::from_secs(30)).is_ok();
        drop(stuck);
        assert!(returned, "dropping the guard hung on a stuck writer");
    }
}
