//! The fast upstream of the load harness as a process (run.sh starts it):
//! `upstream [--listen 127.0.0.1:0] [--tools N] [--ttl-ms MS] [--threads N]`.
//! Prints `fast upstream listening on ADDR` once bound, then serves until killed.
//! Built as a `harness = false` bench target so it needs no package of its own.

use std::net::SocketAddr;

use junction_testkit::fast::{serve, FastOptions};

#[path = "args.rs"]
mod args;
use args::arg;

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let listen: SocketAddr =
        arg(&args, "--listen").unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
    if !listen.ip().is_loopback() {
        eprintln!("refusing to listen on {listen}: loopback only");
        std::process::exit(2);
    }
    let mut options = FastOptions::default();
    if let Some(n) = arg(&args, "--tools") {
        options.tools = n;
    }
    if let Some(t) = arg(&args, "--ttl-ms") {
        options.ttl_ms = t;
    }
    let threads: usize = arg(&args, "--threads").unwrap_or(2);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let up = serve(listen, options).await?;
        println!("fast upstream listening on {}", up.addr);
        std::future::pending::<()>().await;
        Ok(())
    })
}
