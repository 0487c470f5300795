//! How replicas name and reach each other (specs/swish.md §2, §4): every
//! replica has a replica id (`rid`, u16), its own IPv4 address and MAC, and
//! ordinary L3 forwarding carries replication traffic, so a replica only
//! needs the local port toward each peer.

use std::net::Ipv4Addr;

use inca_switch::PortId;
use inca_wire::builder::{build_udp_frame, Endpoints};
use inca_wire::ethernet::MacAddr;
use inca_wire::swish::{src_port, UDP_PORT};
use inca_wire::WireError;

/// A replica id.
pub type Rid = u16;

/// One replica as its peers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaAddr {
    /// Its replica id.
    pub rid: Rid,
    /// Its IPv4 address (the destination of frames to it).
    pub ip: Ipv4Addr,
    /// Its MAC address.
    pub mac: MacAddr,
    /// The port of the device holding this record that leads to it (for
    /// the replica itself: unused).
    pub port: PortId,
}

impl ReplicaAddr {
    /// The conventional address of replica `rid` [our choice]: 10.47.x.y
    /// with x.y = rid, MAC 02:53:57:00:x:y, reached on `port`.
    pub fn conventional(rid: Rid, port: PortId) -> ReplicaAddr {
        let [hi, lo] = rid.to_be_bytes();
        ReplicaAddr {
            rid,
            ip: Ipv4Addr::new(10, 47, hi, lo),
            mac: [0x02, 0x53, 0x57, 0x00, hi, lo],
            port,
        }
    }
}

/// An Ethernet/IPv4/UDP frame carrying a SwiSh `payload` (common header
/// and body) from `src` to `dst`: destination port 47000, source port
/// 47000 ^ (src rid & 0xFF), UDP checksum none.
pub fn udp_frame(
    src: &ReplicaAddr,
    dst: &ReplicaAddr,
    payload: &[u8],
) -> Result<Vec<u8>, WireError> {
    let ep = Endpoints::new(src.mac, src.ip, dst.mac, dst.ip);
    build_udp_frame(&ep, src_port(src.rid), UDP_PORT, payload, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use inca_wire::parse_udp_frame;

    #[test]
    fn frames_between_replicas_parse_back() {
        let a = ReplicaAddr::conventional(1, 0);
        let b = ReplicaAddr::conventional(0x0203, 1);
        assert_eq!(b.ip, Ipv4Addr::new(10, 47, 2, 3));
        let f = udp_frame(&a, &b, &[0x13, 1, 0, 0, 0, 1, 2, 3]).unwrap();
        let u = parse_udp_frame(&f).unwrap();
        assert_eq!((u.src_ip, u.dst_ip), (a.ip, b.ip));
        assert_eq!((u.src_port, u.dst_port), (47000 ^ 1, 47000));
        assert_eq!(u.payload, &[0x13, 1, 0, 0, 0, 1, 2, 3]);
    }
}
