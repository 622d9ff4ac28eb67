//! The load harness's floor for any proxy: a TCP proxy that copies bytes both
//! ways between each client connection and its own upstream connection, with
//! no HTTP or MCP work at all (run.sh starts it in front of the fast upstream).
//! What it adds over the direct path is what two more loopback hops and two
//! more wake-ups cost on this machine; Junction cannot add less.
//! `null_proxy --listen 127.0.0.1:0 --upstream 127.0.0.1:PORT`; prints
//! `null proxy listening on ADDR` once bound. Same runtime shape as Junction
//! (tokio, one worker per core).

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};

#[path = "args.rs"]
mod args;
use args::arg;

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let listen = arg(&args, "--listen").unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
    let Some(upstream): Option<SocketAddr> = arg(&args, "--upstream") else {
        eprintln!("usage: null_proxy --listen 127.0.0.1:0 --upstream 127.0.0.1:PORT");
        std::process::exit(2);
    };
    if !listen.ip().is_loopback() || !upstream.ip().is_loopback() {
        eprintln!("loopback only");
        std::process::exit(2);
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async move {
            let listener = TcpListener::bind(listen).await?;
            println!("null proxy listening on {}", listener.local_addr()?);
            loop {
                let (mut client, _) = listener.accept().await?;
                tokio::spawn(async move {
                    let Ok(mut up) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = up.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut up).await;
                });
            }
        })
}
