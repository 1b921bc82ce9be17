//! Which local addresses the connections come from (`--source-addrs`): past one address's
//! ephemeral ports.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};

use super::{Plan, CONNS_PER_SOURCE, MAX_SOURCE_ADDRS};
use crate::error::Error;

/// Which local addresses the connections come from (`--source-addrs`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SourceAddrs {
    /// The kernel picks (the route's address): one address's ephemeral ports in all.
    #[default]
    Kernel,
    /// A loopback target: 127.0.0.1, 127.0.0.2, … as many as the connections need (the
    /// whole 127/8 is local); the IPv6 loopback has only ::1.
    Auto,
    /// These local addresses, taken in turn by each new connection.
    List(Vec<IpAddr>),
}

impl SourceAddrs {
    /// Parses `auto` or a comma-separated list of IP addresses.
    pub fn parse(s: &str) -> Result<SourceAddrs, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("auto") {
            return Ok(SourceAddrs::Auto);
        }
        let mut ips = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            let ip: IpAddr = part.parse().map_err(|_| {
                format!("{part:?} is not an IP address: give auto or a list like 10.0.0.2,10.0.0.3")
            })?;
            if !ips.contains(&ip) {
                ips.push(ip);
            }
        }
        if ips.len() > MAX_SOURCE_ADDRS {
            return Err(format!(
                "{} addresses given; at most {MAX_SOURCE_ADDRS}",
                ips.len()
            ));
        }
        Ok(SourceAddrs::List(ips))
    }
}

impl Plan {
    /// The local addresses connections are bound to before they connect (none: the kernel
    /// picks). An error when `auto` cannot pick them or a named one is not this host's.
    pub fn source_ips(&self) -> Result<Vec<IpAddr>, Error> {
        let invalid = |m: String| Err(Error::InvalidPlan(m));
        let target = self.addr.ip();
        match &self.source_addrs {
            SourceAddrs::Kernel => Ok(Vec::new()),
            SourceAddrs::Auto => {
                let needed = self.all_connections().div_ceil(CONNS_PER_SOURCE).max(1);
                match target {
                    IpAddr::V4(v4) if v4.is_loopback() => {
                        if needed > MAX_SOURCE_ADDRS {
                            return invalid(format!("--source-addrs auto would need {needed} addresses for -c {}; at most {MAX_SOURCE_ADDRS}", self.connections));
                        }
                        let base = u32::from(Ipv4Addr::new(127, 0, 0, 1));
                        Ok((0..needed as u32)
                            .map(|k| IpAddr::V4(Ipv4Addr::from(base + k)))
                            .collect())
                    }
                    IpAddr::V6(v6) if v6.is_loopback() => {
                        if needed > 1 {
                            return invalid(format!(
                                "--source-addrs auto: the IPv6 loopback has one address (::1), enough for about {CONNS_PER_SOURCE} connections, not -c {}; target 127.0.0.1 instead (all of 127/8 is local)",
                                self.connections
                            ));
                        }
                        Ok(vec![target])
                    }
                    _ => invalid(format!(
                        "--source-addrs auto picks addresses only for a loopback target; for {target} name this host's addresses (--source-addrs 10.0.0.2,10.0.0.3)"
                    )),
                }
            }
            SourceAddrs::List(ips) => {
                if ips.is_empty() {
                    return invalid("--source-addrs names no address".into());
                }
                for ip in ips {
                    if ip.is_ipv4() != target.is_ipv4() {
                        return invalid(format!(
                            "source address {ip} is not of the target's family ({target}) (--source-addrs)"
                        ));
                    }
                    // Binding port 0 fails with EADDRNOTAVAIL for an address this host does
                    // not have.
                    if let Err(e) = UdpSocket::bind(SocketAddr::new(*ip, 0)) {
                        return invalid(format!(
                            "source address {ip} is not an address of this host ({e}); `ip addr` lists them (--source-addrs)"
                        ));
                    }
                }
                Ok(ips.clone())
            }
        }
    }
}
