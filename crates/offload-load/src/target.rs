//! The server under test, and the rule that keeps runs on this machine.
//!
//! Load generators are easy to point at someone else's server by mistake. A target is
//! therefore loopback-only (127.0.0.0/8 or ::1, including the IPv4-mapped form) unless
//! the caller says `allow_remote` explicitly; the project's own tests never do.

use std::net::SocketAddr;

/// Where requests go: a socket address, and the value of the `Host` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    addr: SocketAddr,
    host: String,
}

impl Target {
    /// A target at `addr`, named `host` in requests (empty: `addr` written out).
    /// Refuses a non-loopback address unless `allow_remote`, and a host that would
    /// break the request head (spaces, control or non-ASCII characters).
    pub fn new(addr: SocketAddr, host: &str, allow_remote: bool) -> Result<Target, String> {
        if !allow_remote && !is_loopback(&addr) {
            return Err(format!(
                "target {addr}: not a loopback address (127.0.0.0/8 or ::1); \
                 load a remote server only on purpose, with allow_remote (--allow-remote)"
            ));
        }
        let host = if host.is_empty() {
            addr.to_string()
        } else {
            host.to_string()
        };
        if let Some(c) = host.chars().find(|c| !c.is_ascii_graphic()) {
            return Err(format!(
                "target host {host:?}: character {c:?} is not allowed in a Host header; \
                 give a host name or an address"
            ));
        }
        Ok(Target { addr, host })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The `Host` header's value.
    pub fn host(&self) -> &str {
        &self.host
    }
}

/// True for 127.0.0.0/8, ::1 and ::ffff:127.x.y.z.
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().to_canonical().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only_unless_allowed() {
        for ok in [
            "127.0.0.1:80",
            "127.9.8.7:1",
            "[::1]:80",
            "[::ffff:127.0.0.1]:80",
        ] {
            assert!(Target::new(ok.parse().unwrap(), "", false).is_ok(), "{ok}");
        }
        for remote in [
            "10.0.0.1:80",
            "192.168.1.1:80",
            "[2001:db8::1]:80",
            "0.0.0.0:80",
        ] {
            let addr = remote.parse().unwrap();
            let err = Target::new(addr, "", false).unwrap_err();
            assert!(err.contains("allow_remote"), "{err}");
            assert!(Target::new(addr, "", true).is_ok());
        }
    }

    #[test]
    fn host_defaults_to_address_and_is_checked() {
        let t = Target::new("127.0.0.1:8080".parse().unwrap(), "", false).unwrap();
        assert_eq!(t.host(), "127.0.0.1:8080");
        let addr = "127.0.0.1:80".parse().unwrap();
        assert!(Target::new(addr, "a b", false).is_err());
        assert!(Target::new(addr, "x\r\nEvil: 1", false).is_err());
    }
}
