//! The audit log: one JSON object per line for each `tools/call`,
//! `prompts/get` and `resources/read`, in a stream of its own (a file, or
//! stderr), for security teams. Off unless
//! `audit.enabled`; [`install`]ed once at start.
//!
//! A line is rendered by hand on the request's side ([`AuditLine`], with
//! arguments and results already cut down by [`redact`]) and handed to a
//! buffer that a thread of its own writes out, the log's kind of writer
//! (`writer`): a request never waits for the disk. Past the buffer's bound
//! (8 MiB waiting), or when a write fails, lines are dropped and counted
//! (`junction_audit_lines_dropped_total`). [`reopen`] (SIGHUP) has the
//! writer open the file again before its next write, for log rotation.
//! With `stderr` the lines join the log's own buffer, so no line of either
//! is split by the other (and a drop there counts as a log line's). The
//! line's shape is in `line`, redaction in `redact`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::SystemTime;

use crate::writer::{self, Kind};
use crate::{LogBuffer, LogGuard};

mod line;
mod redact;

pub use line::{AuditLine, JsonRpcId, Method};
pub use redact::{redact, redact_result, REDACTED};

/// Where audit lines go, once [`install`]ed.
static AUDIT: OnceLock<AuditLog> = OnceLock::new();
/// The log's buffer (`init_logging`), for `stderr`.
static LOG_BUFFER: OnceLock<LogBuffer> = OnceLock::new();
/// Audit lines dropped since the process started.
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Set by [`reopen`]; the writer opens the file again before its next write.
static REOPEN: AtomicBool = AtomicBool::new(false);

static AUDIT_LINES: Kind = Kind {
    dropped: &DROPPED,
    thread: "junction-audit",
    warning: "audit lines dropped: the audit file did not keep up",
};

/// The audit log of this process, if one was installed: one atomic load,
/// the whole cost of a call while auditing is off.
#[inline]
pub fn audit_log() -> Option<&'static AuditLog> {
    AUDIT.get()
}

/// Audit lines dropped so far (`junction_audit_lines_dropped_total`).
pub fn dropped_lines() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Has the writer open the audit file again before its next write (after
/// a log rotation moved it away). No effect on `stderr`.
pub fn reopen() {
    REOPEN.store(true, Ordering::Relaxed);
}

pub(crate) fn log_buffer(buffer: LogBuffer) {
    let _ = LOG_BUFFER.set(buffer);
}

/// Where the audit log goes.
#[derive(Clone, Copy, Debug)]
pub enum AuditTarget<'a> {
    /// With the log lines (after `init_logging`).
    Stderr,
    /// Appended to this file, created (mode 0600) if missing.
    File(&'a Path),
}

/// Starts the audit log, once per process (later calls change nothing).
/// The file is opened here, so a path that cannot be written fails the
/// start. Hold the guard until the process is done: dropping it writes out
/// what is waiting.
pub fn install(target: AuditTarget<'_>) -> std::io::Result<LogGuard> {
    if AUDIT.get().is_some() {
        return Ok(LogGuard::none());
    }
    let (writer, guard) = match target {
        AuditTarget::Stderr => match LOG_BUFFER.get() {
            Some(buffer) => (buffer.clone(), LogGuard::none()),
            None => writer::start_kind(std::io::stderr(), &AUDIT_LINES)?,
        },
        AuditTarget::File(path) => writer::start_kind(AuditFile::open(path)?, &AUDIT_LINES)?,
    };
    let _ = AUDIT.set(AuditLog { writer });
    Ok(guard)
}

/// The buffer audit lines are queued in.
pub struct AuditLog {
    writer: LogBuffer,
}

impl AuditLog {
    /// Queues one line (dropped and counted when the writer is stuck).
    pub fn write(&self, line: &AuditLine<'_>) {
        self.writer.append(&line::render(line, SystemTime::now()));
    }
}

/// The audit file, appended to; opened again at the first write after
/// [`reopen`]. A failed write drops its lines (counted) instead of failing
/// the writer.
struct AuditFile {
    path: PathBuf,
    file: File,
}

impl AuditFile {
    fn open(path: &Path) -> std::io::Result<AuditFile> {
        Ok(AuditFile {
            path: path.to_owned(),
            file: open_append(path)?,
        })
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

impl Write for AuditFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if REOPEN.swap(false, Ordering::Relaxed) {
            match open_append(&self.path) {
                Ok(file) => self.file = file,
                Err(e) => tracing::warn!(path = %self.path.display(), error = %e,
                    "cannot reopen the audit file; still writing to the one open"),
            }
        }
        match self.file.write(buf) {
            Err(e) if e.kind() != std::io::ErrorKind::Interrupted => {
                let lines = buf.iter().filter(|b| **b == b'\n').count().max(1);
                DROPPED.fetch_add(lines as u64, Ordering::Relaxed);
                Ok(buf.len())
            }
            written => written,
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_audit_file_is_appended_to_and_opened_again_when_asked() {
        let dir = std::env::temp_dir().join(format!("junction-audit-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("audit.jsonl");
        let _ = std::fs::remove_file(&path);
        std::fs::write(&path, b"earlier\n").unwrap_or_default();
        let Ok(mut file) = AuditFile::open(&path) else {
            panic!("open {}", path.display());
        };
        assert!(file.write_all(b"one\n").is_ok());
        let rotated = dir.join("audit.jsonl.1");
        assert!(std::fs::rename(&path, &rotated).is_ok());
        reopen();
        assert!(file.write_all(b"two\n").is_ok());
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        assert_eq!(read(&rotated), "earlier\none\n");
        assert_eq!(read(&path), "two\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).map(|m| m.permissions().mode() & 0o777);
            assert_eq!(mode.ok(), Some(0o600));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
