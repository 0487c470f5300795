//! A server's addresses: who it is on the wire and where its frames go.

use std::net::Ipv4Addr;

use inca_wire::MacAddr;

/// The addresses of a server with one uplink: its own MAC and IPv4, and the
/// MAC of the next hop every frame it sends is addressed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerAddr {
    /// This server's IPv4 address.
    pub ip: Ipv4Addr,
    /// This server's MAC.
    pub mac: MacAddr,
    /// The next hop's MAC (a gateway or the switch on the server's link).
    pub gateway_mac: MacAddr,
}

impl ServerAddr {
    /// Whether a datagram to `dst` is for this server.
    pub fn owns(&self, dst: Ipv4Addr) -> bool {
        dst == self.ip
    }
}
