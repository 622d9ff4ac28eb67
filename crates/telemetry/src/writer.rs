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
//! writes everything waiting, one call per shard that has lines.
//!
//! The buffer is split in shards, one per thread that logs (up to one per
//! CPU and one more; threads past that share): a connection thread appends
//! to a lock and a `Vec` no other thread writes between flushes, instead of
//! every thread's line moving one shared lock's cache line between the
//! cores (one shared buffer cost ~1.5 µs of CPU per proxied call on 2
//! cores). A thread's lines come out in the order it wrote them; the lines
//! different threads wrote within one flush interval come out grouped by
//! thread, each with its own timestamp.
//!
//! Past `CAP` bytes waiting (stderr stuck; each shard holds its share),
//! lines are dropped, counted, and reported once it moves again. Lines reach
//! stderr up to `FLUSH_EVERY` late; a normal exit writes out everything
//! (`LogGuard`). The audit log (`audit`) runs a buffer and thread of the same
//! kind into its file, with a dropped count of its own (`Kind`).

use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

const FLUSH_EVERY: Duration = Duration::from_millis(100);
const FLUSH_AT: usize = 256 * 1024;
const CAP: usize = 8 * 1024 * 1024;
/// The most shards a buffer keeps, whatever the CPU count.
const MAX_SHARDS: usize = 32;
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
    /// Where each thread's lines wait ([`shard_of_this_thread`]).
    shards: Box<[Shard]>,
    /// Bytes one shard holds at most.
    shard_cap: usize,
    control: Mutex<Control>,
    /// Wakes the writer (closed, or a shard reached `FLUSH_AT`) and whoever
    /// waits for it to finish (`done`).
    wake: Condvar,
    /// What the buffer carries: its dropped count and its warning.
    kind: &'static Kind,
}

/// One thread's waiting lines, on cache lines of their own.
#[repr(align(128))]
#[derive(Default)]
struct Shard(Mutex<Vec<u8>>);

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
struct Control {
    /// A shard reached `FLUSH_AT`: write out now, not at the next tick.
    full: bool,
    closed: bool,
    /// The writer has written out everything and returned.
    done: bool,
}

/// Locks `m` even if a thread panicked while holding it (the buffer is
/// bytes: the worst a panic leaves is a partial line).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// This thread's shard number, given out in the order threads first log.
fn shard_of_this_thread() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    SHARD.with(|s| *s)
}

impl Shared {
    fn control(&self) -> MutexGuard<'_, Control> {
        lock(&self.control)
    }

    fn shard(&self) -> &Mutex<Vec<u8>> {
        let i = shard_of_this_thread() % self.shards.len();
        // `i` is below the length: the index cannot miss.
        &self.shards[i].0
    }
}

impl LogBuffer {
    fn new(kind: &'static Kind) -> LogBuffer {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let shards = (cpus + 1).min(MAX_SHARDS);
        LogBuffer(Arc::new(Shared {
            shards: (0..shards).map(|_| Shard::default()).collect(),
            shard_cap: (CAP / shards).max(2 * FLUSH_AT),
            control: Mutex::new(Control::default()),
            wake: Condvar::new(),
            kind,
        }))
    }

    /// Queues one whole line (or a few), or drops it when this thread's
    /// share of `CAP` is waiting.
    pub fn append(&self, lines: &[u8]) {
        self.append_with(|out| out.extend_from_slice(lines));
    }

    /// Queues the line(s) `write` adds to the end of this thread's waiting
    /// bytes (rendered in place, no buffer of their own), or drops them when
    /// this thread's share of `CAP` is waiting.
    pub fn append_with(&self, write: impl FnOnce(&mut Vec<u8>)) {
        let shared = &*self.0;
        let mut waiting = lock(shared.shard());
        let len = waiting.len();
        write(&mut waiting);
        if waiting.len() > shared.shard_cap {
            waiting.truncate(len);
            shared.kind.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if len < FLUSH_AT && waiting.len() >= FLUSH_AT {
            drop(waiting);
            shared.control().full = true;
            shared.wake.notify_all();
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
        let mut control = buffer.0.control();
        control.closed = true;
        buffer.0.wake.notify_all();
        let deadline = std::time::Instant::now() + EXIT_WAIT;
        while !control.done {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                // Stuck writing: leave the thread to the process's exit.
                return;
            }
            control = match buffer.0.wake.wait_timeout(control, left) {
                Ok((control, _)) => control,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        drop(control);
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
    // One spare buffer per shard, swapped in as the shard's bytes are taken
    // out: the shard's lock is held for a swap, and neither side reallocates
    // in the steady state.
    let mut spares: Vec<Vec<u8>> = shared.shards.iter().map(|_| Vec::new()).collect();
    let dropped = || shared.kind.dropped.load(Ordering::Relaxed);
    // Drops already reported in a warning.
    let mut reported = dropped();
    loop {
        let closed = {
            let mut control = shared.control();
            if !control.closed && !control.full {
                control = match shared.wake.wait_timeout(control, FLUSH_EVERY) {
                    Ok((control, _)) => control,
                    Err(poisoned) => poisoned.into_inner().0,
                };
            }
            control.full = false;
            control.closed
        };
        for (shard, batch) in shared.shards.iter().zip(spares.iter_mut()) {
            std::mem::swap(&mut *lock(&shard.0), batch);
            if batch.is_empty() {
                continue;
            }
            let _ = out.write_all(batch).and_then(|()| out.flush());
            batch.clear();
            // A burst's buffer is not kept for the quiet that follows.
            if batch.capacity() > 4 * FLUSH_AT {
                *batch = Vec::new();
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
            shared.control().done = true;
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
    fn every_threads_lines_come_out_whole_and_in_its_order() {
        let sink = Sink::default();
        let Ok((buffer, guard)) = start(sink.clone()) else {
            panic!("writer thread");
        };
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let buffer = buffer.clone();
                std::thread::spawn(move || {
                    for i in 0..500 {
                        buffer.append(format!("t{t} {i}\n").as_bytes());
                    }
                })
            })
            .collect();
        for t in threads {
            let _ = t.join();
        }
        drop(guard);
        let all = text(&sink);
        assert_eq!(all.lines().count(), 2000);
        for t in 0..4 {
            let mine: Vec<usize> = all
                .lines()
                .filter_map(|l| l.strip_prefix(&format!("t{t} ")))
                .filter_map(|n| n.parse().ok())
                .collect();
            assert_eq!(mine, (0..500).collect::<Vec<_>>(), "thread {t}");
        }
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
        let waiting: usize = buffer.0.shards.iter().map(|s| lock(&s.0).len()).sum();
        assert!(waiting <= CAP);
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
