//! Run the built `junction` binary as a child process for end-to-end tests.
//! The gateway prints exactly one line `junction listening on 127.0.0.1:PORT`
//! to stdout once it has bound; logs go to stderr, kept in a file so a failing
//! test can show them.

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const READY_PREFIX: &str = "junction listening on ";
const READY_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Gateway {
    pub addr: SocketAddr,
    child: Child,
    dir: tempfile::TempDir,
    stderr_path: PathBuf,
    config_path: PathBuf,
}

/// `<bin> run --config <tempfile>`; waits for the ready line (30 s).
/// Panics with the child's stderr when it does not come.
pub async fn spawn_gateway(bin: &Path, config_yaml: &str) -> Gateway {
    spawn_gateway_with_env(bin, config_yaml, &[]).await
}

/// Like `spawn_gateway`, with extra environment variables for the child
/// (e.g. `JUNCTION_STATE_KEY`, upstream tokens).
pub async fn spawn_gateway_with_env(
    bin: &Path,
    config_yaml: &str,
    env: &[(&str, &str)],
) -> Gateway {
    let dir = tempdir();
    let config_path = dir.path().join("gateway.yaml");
    std::fs::write(&config_path, config_yaml)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", config_path.display()));
    let mut cmd = Command::new(bin);
    cmd.arg("run")
        .arg("--config")
        .arg(&config_path)
        .current_dir(dir.path());
    for (k, v) in env {
        cmd.env(k, v);
    }
    start(cmd, dir, config_path).await
}

/// Any command that prints the ready line (used to test this module, and for
/// running the gateway with unusual arguments). stdout/stderr are taken over.
pub async fn spawn_with_command<S: AsRef<OsStr>>(program: S, args: &[&str]) -> Gateway {
    let dir = tempdir();
    let config_path = dir.path().join("gateway.yaml");
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(dir.path());
    start(cmd, dir, config_path).await
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"))
}

async fn start(mut cmd: Command, dir: tempfile::TempDir, config_path: PathBuf) -> Gateway {
    let stderr_path = dir.path().join("stderr.log");
    let stderr = std::fs::File::create(&stderr_path)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", stderr_path.display()));
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true);
    let mut child = spawn_retrying(&mut cmd).await;
    let Some(stdout) = child.stdout.take() else {
        panic!("child stdout was not captured");
    };
    let mut lines = BufReader::new(stdout).lines();
    let wait_ready = async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(addr) = line.trim().strip_prefix(READY_PREFIX) {
                return addr
                    .parse::<SocketAddr>()
                    .map_err(|e| format!("bad address in {line:?}: {e}"));
            }
        }
        Err("stdout closed before the ready line".to_string())
    };
    let outcome = tokio::time::timeout(READY_TIMEOUT, wait_ready).await;
    let addr = match outcome {
        Ok(Ok(addr)) => addr,
        Ok(Err(why)) => fail(&mut child, &stderr_path, &why).await,
        Err(_) => {
            fail(
                &mut child,
                &stderr_path,
                &format!("no ready line within {READY_TIMEOUT:?}"),
            )
            .await
        }
    };
    // Keep draining stdout so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Gateway {
        addr,
        child,
        dir,
        stderr_path,
        config_path,
    }
}

/// A binary written moments ago can be "text file busy" while another test
/// thread's fork still holds it open for writing; that passes quickly.
async fn spawn_retrying(cmd: &mut Command) -> Child {
    let mut attempts = 0;
    loop {
        match cmd.spawn() {
            Ok(child) => return child,
            Err(e) if e.raw_os_error() == Some(26) && attempts < 20 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("cannot start {cmd:?}: {e}"),
        }
    }
}

async fn fail(child: &mut Child, stderr_path: &Path, why: &str) -> ! {
    let _ = child.start_kill();
    let _ = child.wait().await;
    let stderr = std::fs::read_to_string(stderr_path).unwrap_or_default();
    panic!("gateway did not start: {why}\n--- stderr ---\n{stderr}");
}

/// The value of the first line of a `/metrics` scrape that starts with
/// `line_prefix`.
pub fn metric(scrape: &str, line_prefix: &str) -> Option<f64> {
    scrape
        .lines()
        .find(|l| l.starts_with(line_prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

impl Gateway {
    /// `http://ADDR{path}`, e.g. `gw.url("/mcp")`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The value of the first `/metrics` line starting with `line_prefix`
    /// (a metric name with its labels as Junction renders them, sorted), or
    /// None when no line matches.
    pub async fn metric(&self, line_prefix: &str) -> Option<f64> {
        let scrape = crate::TestClient::modern(&self.url("/metrics"))
            .raw("GET", vec![], vec![])
            .await;
        metric(&String::from_utf8_lossy(&scrape.raw), line_prefix)
    }

    /// Everything the gateway wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// The config file the gateway was started with (rewrite it to test reloads).
    pub fn config_path(&self) -> &Path {
        &self.config_path
    }

    /// The gateway's temp dir (holds the config and stderr.log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The gateway process id (for /proc figures: RSS, open descriptors); None once it exited.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// None while running; the exit status once the child has exited.
    pub fn try_exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Kill the child and wait for it.
    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_the_ready_line_and_keeps_stderr() {
        let gw = spawn_with_command(
            "sh",
            &["-c", "echo booting >&2; echo 'other output'; echo 'junction listening on 127.0.0.1:1234'; sleep 5"],
        )
        .await;
        assert_eq!(gw.addr, "127.0.0.1:1234".parse::<SocketAddr>().unwrap());
        assert_eq!(gw.url("/mcp"), "http://127.0.0.1:1234/mcp");
        assert!(gw.stderr().contains("booting"));
        gw.stop().await;
    }

    #[tokio::test]
    #[should_panic(expected = "config is broken")]
    async fn panics_with_stderr_when_the_child_exits_early() {
        spawn_with_command("sh", &["-c", "echo 'config is broken' >&2; exit 2"]).await;
    }

    #[tokio::test]
    async fn spawn_gateway_passes_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("fake-junction");
        // Prints the ready line only if called as `run --config FILE` with our YAML.
        std::fs::write(&fake, "#!/bin/sh\n[ \"$1\" = run ] && [ \"$2\" = --config ] && grep -q 'listen: x' \"$3\" && echo \"junction listening on 127.0.0.1:$PORT_FOR_TEST\"; sleep 5\n").unwrap();
        let mut perms = std::fs::metadata(&fake).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&fake, perms).unwrap();
        let gw = spawn_gateway_with_env(
            &fake,
            "server:\n  listen: x\n",
            &[("PORT_FOR_TEST", "4321")],
        )
        .await;
        assert_eq!(gw.addr.port(), 4321);
        assert!(std::fs::read_to_string(gw.config_path())
            .unwrap()
            .contains("listen: x"));
        gw.stop().await;
    }
}
