//! A real `redis-server` on 127.0.0.1 for the tests of what replicas share
//! (rate limits, the fleet bus): started on a free port (or a given one, to
//! bring it back after an outage), no persistence, killed when dropped;
//! with a password (`AUTH`) as the Helm chart's own Redis has one.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct RedisServer {
    child: Child,
    pub port: u16,
    password: Option<String>,
}

impl RedisServer {
    /// On a free port.
    pub fn start() -> RedisServer {
        RedisServer::on(crate::free_port())
    }

    /// On a free port, refusing clients that do not `AUTH` with `password`.
    pub fn with_password(password: &str) -> RedisServer {
        RedisServer::spawn(crate::free_port(), Some(password))
    }

    /// On `port` (a restart after [`RedisServer::stop`]).
    pub fn on(port: u16) -> RedisServer {
        RedisServer::spawn(port, None)
    }

    fn spawn(port: u16, password: Option<&str>) -> RedisServer {
        let mut command = Command::new("redis-server");
        command
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"]);
        if let Some(password) = password {
            command.args(["--requirepass", password]);
        }
        let child = command
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is not installed: run scripts/redis.sh");
        let mut server = RedisServer {
            child,
            port,
            password: password.map(str::to_owned),
        };
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        server.stop();
        panic!("redis-server did not start on port {port}");
    }

    /// The URL a client connects with (the password in it, if any).
    pub fn url(&self) -> String {
        match &self.password {
            None => format!("redis://127.0.0.1:{}", self.port),
            Some(p) => format!("redis://:{p}@127.0.0.1:{}", self.port),
        }
    }

    /// Kills the server (an outage); the port can be reused with `on`.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
