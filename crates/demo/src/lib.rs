//! junction-demo: two tiny MCP servers over stdio that ship with Junction so the
//! default `gateway.yaml` works out of the box.
//!
//! - `weather` speaks only the modern era (2026-07-28: per-request `_meta`,
//!   `server/discover`, MRTR via `confirm_reset`).
//! - `notes` speaks only the handshake era (2025-11-25 and older: `initialize`,
//!   progress notifications from `countdown`).
//!
//! They implement the protocol from the spec, never from Junction's own crates, so
//! they stay independent test doubles. stdout carries only JSON-RPC lines; logs go
//! to stderr. They must never panic on bad input.

mod notes;
mod rpc;
mod weather;

use std::fmt;
use std::io::{self, BufRead, Write};
use std::str::FromStr;

/// Which demo server to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DemoKind {
    /// Modern-only (2026-07-28) server with `forecast`, `add`, `confirm_reset`.
    Weather,
    /// Handshake-era (2025-11-25) server with `add_note`, `list_notes`, `countdown`.
    Notes,
}

/// The name given to `DemoKind::from_str` was neither "weather" nor "notes".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownDemo(pub String);

impl fmt::Display for UnknownDemo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown demo server {:?} (expected \"weather\" or \"notes\")",
            self.0
        )
    }
}

impl std::error::Error for UnknownDemo {}

impl FromStr for DemoKind {
    type Err = UnknownDemo;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "weather" => Ok(DemoKind::Weather),
            "notes" => Ok(DemoKind::Notes),
            other => Err(UnknownDemo(other.to_string())),
        }
    }
}

impl fmt::Display for DemoKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DemoKind::Weather => "weather",
            DemoKind::Notes => "notes",
        })
    }
}

/// Per-process state of one demo server. Weather keeps nothing between requests
/// (modern servers are stateless); notes keeps its handshake flag and the notes.
#[derive(Debug)]
pub struct DemoState {
    kind: DemoKind,
    notes: notes::NotesState,
}

impl DemoState {
    pub fn new(kind: DemoKind) -> Self {
        DemoState {
            kind,
            notes: notes::NotesState::default(),
        }
    }

    pub fn kind(&self) -> DemoKind {
        self.kind
    }
}

/// Handle one input line; returns the lines to write to stdout, in order
/// (notifications such as progress come before the response they belong to).
pub fn handle_line(state: &mut DemoState, line: &str) -> Vec<String> {
    let msg = rpc::parse(line);
    match state.kind {
        DemoKind::Weather => weather::handle(msg),
        DemoKind::Notes => notes::handle(&mut state.notes, msg),
    }
}

/// Serve newline-delimited JSON-RPC on stdin/stdout until EOF.
pub fn run_stdio(kind: DemoKind) -> io::Result<()> {
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut state = DemoState::new(kind);
    eprintln!("junction-demo {kind}: serving MCP on stdio");
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if input.read_until(b'\n', &mut buf)? == 0 {
            eprintln!("junction-demo {kind}: stdin closed, exiting");
            return Ok(());
        }
        // Invalid UTF-8 becomes a parse error reply rather than ending the process.
        let line = String::from_utf8_lossy(&buf);
        if line.trim().is_empty() {
            continue;
        }
        for reply in handle_line(&mut state, &line) {
            out.write_all(reply.as_bytes())?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
    }
}
