//! The caller's address for the `client_ip` rate-limit key (DESIGN §4.4).
//!
//! It is the TCP peer, unless the peer is a proxy the operator trusts
//! (`server.trusted_proxies`): then it is the address that proxy received the
//! request from, read from `X-Forwarded-For`. Each proxy appends the address
//! it saw, so the list is read from the right: every trusted hop is skipped,
//! and the first address that is not trusted is the caller. What lies left of
//! it was written by the caller and is not believed, so a client cannot buy a
//! fresh bucket by sending the header itself. Without trusted proxies the
//! header is never read.

use std::net::{IpAddr, SocketAddr};

use http::header::{HeaderMap, HeaderName};
use ipnet::IpNet;

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// The client's address: `peer` if it is not in `trusted`, otherwise the
/// rightmost address of `X-Forwarded-For` (all its fields, in order) that is
/// not in `trusted`. An entry that is not an address ends the walk at the
/// nearest hop already checked, as does a list of trusted hops only (the
/// leftmost of them): a malformed header never gives a caller an address of
/// its choosing.
pub fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    let mut nearest = peer.to_canonical();
    if !is_trusted(&nearest) {
        return nearest;
    }
    for field in headers.get_all(X_FORWARDED_FOR).iter().rev() {
        let Ok(list) = field.to_str() else {
            return nearest;
        };
        for entry in list.rsplit(',') {
            let Some(ip) = parse_entry(entry.trim()) else {
                return nearest;
            };
            if !is_trusted(&ip) {
                return ip;
            }
            nearest = ip;
        }
    }
    nearest
}

/// `192.0.2.7`, `2001:db8::1`, and the forms some proxies write with a port
/// (`192.0.2.7:4711`, `[2001:db8::1]:4711`) or brackets (`[2001:db8::1]`).
fn parse_entry(entry: &str) -> Option<IpAddr> {
    let ip = entry
        .parse::<IpAddr>()
        .or_else(|_| entry.parse::<SocketAddr>().map(|a| a.ip()))
        .or_else(|_| {
            entry
                .strip_prefix('[')
                .and_then(|e| e.strip_suffix(']'))
                .unwrap_or("")
                .parse::<IpAddr>()
        })
        .ok()?;
    Some(ip.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or(IpAddr::from([0, 0, 0, 0]))
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().filter_map(|s| s.parse().ok()).collect()
    }

    fn with_xff(fields: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for f in fields {
            if let Ok(v) = f.parse() {
                h.append(X_FORWARDED_FOR, v);
            }
        }
        h
    }

    const LB: &str = "10.0.0.5";

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_sends() {
        let h = with_xff(&["198.51.100.1"]);
        assert_eq!(client_ip(ip("192.0.2.9"), &h, &[]), ip("192.0.2.9"));
        let trusted = nets(&["10.0.0.0/8"]);
        assert_eq!(client_ip(ip("192.0.2.9"), &h, &trusted), ip("192.0.2.9"));
    }

    #[test]
    fn a_trusted_peer_hands_over_to_the_rightmost_untrusted_address() {
        let trusted = nets(&["10.0.0.0/8", "fd00::/8"]);
        let cases: &[(&[&str], &str)] = &[
            // One proxy: the address it saw.
            (&["198.51.100.1"], "198.51.100.1"),
            // A client writing its own header: the proxy appended the real
            // address, and what the client wrote is ignored.
            (&["203.0.113.66, 198.51.100.1"], "198.51.100.1"),
            // Two trusted hops, then the caller.
            (&["198.51.100.1, 10.1.1.1"], "198.51.100.1"),
            // The same, as two header fields (read in order).
            (&["203.0.113.66", "198.51.100.1, 10.1.1.1"], "198.51.100.1"),
            (&["198.51.100.1", "10.1.1.1"], "198.51.100.1"),
            // Only trusted hops: the farthest of them.
            (&["10.2.2.2, 10.1.1.1"], "10.2.2.2"),
            // No header: the proxy itself.
            (&[], LB),
            // Ports, brackets, IPv6, v4-mapped addresses.
            (&["198.51.100.1:4711"], "198.51.100.1"),
            (&["[2001:db8::1]:4711"], "2001:db8::1"),
            (&["[2001:db8::1]"], "2001:db8::1"),
            (&["2001:db8::1, fd00::3"], "2001:db8::1"),
            (&["::ffff:198.51.100.1"], "198.51.100.1"),
            // Garbage stops the walk at the nearest hop already checked: it
            // never yields an address the caller picked.
            (&["198.51.100.1, unknown"], LB),
            (&["198.51.100.1, 10.1.1.1, "], LB),
            (&["unknown, 10.1.1.1"], "10.1.1.1"),
            (&["198.51.100.1,,10.1.1.1"], "10.1.1.1"),
        ];
        for (fields, want) in cases {
            let got = client_ip(ip(LB), &with_xff(fields), &trusted);
            assert_eq!(got, ip(want), "{fields:?}");
        }
    }

    #[test]
    fn a_v4_peer_on_a_dual_stack_socket_matches_v4_blocks() {
        let trusted = nets(&["10.0.0.0/8"]);
        let h = with_xff(&["198.51.100.1"]);
        assert_eq!(
            client_ip(ip("::ffff:10.0.0.5"), &h, &trusted),
            ip("198.51.100.1")
        );
    }
}
