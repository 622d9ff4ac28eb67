//! TLS termination on the listener (rustls). Certificates are read when the
//! config is (re)loaded, so a renewed certificate is picked up by a reload.

use std::io::BufReader;
use std::sync::Arc;

use junction_config::TlsConfig;
use tokio_rustls::TlsAcceptor;

pub fn acceptor(cfg: &TlsConfig) -> Result<TlsAcceptor, String> {
    let certs = {
        let f = std::fs::File::open(&cfg.cert_file)
            .map_err(|e| format!("server.tls.cert_file {}: {e}", cfg.cert_file.display()))?;
        rustls_pemfile::certs(&mut BufReader::new(f))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("server.tls.cert_file {}: {e}", cfg.cert_file.display()))?
    };
    if certs.is_empty() {
        return Err(format!(
            "server.tls.cert_file {}: no certificate found",
            cfg.cert_file.display()
        ));
    }
    let key = {
        let f = std::fs::File::open(&cfg.key_file)
            .map_err(|e| format!("server.tls.key_file {}: {e}", cfg.key_file.display()))?;
        rustls_pemfile::private_key(&mut BufReader::new(f))
            .map_err(|e| format!("server.tls.key_file {}: {e}", cfg.key_file.display()))?
            .ok_or_else(|| {
                format!(
                    "server.tls.key_file {}: no private key found",
                    cfg.key_file.display()
                )
            })?
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("server.tls: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("server.tls: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
