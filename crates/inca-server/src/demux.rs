//! UDP port demultiplexing: which handler a frame to this server goes to.
//!
//! A server binds each UDP destination port it serves to a handler (a
//! worker index, a protocol role, ...). [`PortDemux::dispatch`] parses the
//! frame with inca-wire's one UDP-frame parser and returns the handler with
//! the datagram; everything else is counted and dropped: frames that do not
//! parse, frames addressed to another IP, and ports nobody bound. The reason
//! comes back typed ([`Undeliverable`]) too, for a device that reports its
//! drops under its own counter names.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use inca_wire::{parse_udp_frame, UdpFrame, WireError};

/// Most ports one demultiplexer binds [our choice: far above any server's
/// needs, it keeps a configuration error from growing the map unbounded].
pub const MAX_BOUND_PORTS: usize = 4096;

/// Why a port cannot be bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DemuxError {
    /// Another handler already has the port.
    #[error("UDP port {0} is bound twice")]
    PortTaken(u16),
    /// [`MAX_BOUND_PORTS`] are bound already.
    #[error("more than {MAX_BOUND_PORTS} UDP ports bound")]
    TooManyPorts,
}

/// Why a frame reached no handler.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Undeliverable {
    /// Not a well-formed Ethernet/IPv4/UDP frame.
    #[error("malformed frame: {0}")]
    Malformed(WireError),
    /// Addressed to another IP.
    #[error("frame for {0}, not this server")]
    NotForMe(Ipv4Addr),
    /// To a UDP port no handler is bound to.
    #[error("no handler on UDP port {0}")]
    UnknownPort(u16),
}

/// Frames the demultiplexer saw and dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DemuxStats {
    /// Frames received.
    pub rx_frames: u64,
    /// Frames that are not a well-formed Ethernet/IPv4/UDP frame.
    pub malformed: u64,
    /// Frames addressed to another IP.
    pub not_for_me: u64,
    /// Frames to a UDP port no handler is bound to.
    pub unknown_port: u64,
}

impl DemuxStats {
    /// Every frame dropped here, whatever the reason.
    pub fn dropped(&self) -> u64 {
        self.malformed + self.not_for_me + self.unknown_port
    }
}

/// A map from UDP destination port to handler, for frames to one IP.
#[derive(Debug, Clone)]
pub struct PortDemux<H> {
    ip: Ipv4Addr,
    ports: BTreeMap<u16, H>,
    stats: DemuxStats,
}

impl<H: Copy> PortDemux<H> {
    /// A demultiplexer for frames to `ip`, with no port bound.
    pub fn new(ip: Ipv4Addr) -> Self {
        PortDemux {
            ip,
            ports: BTreeMap::new(),
            stats: DemuxStats::default(),
        }
    }

    /// Sends frames to UDP `port` to `handler`.
    pub fn bind(&mut self, port: u16, handler: H) -> Result<(), DemuxError> {
        if self.ports.contains_key(&port) {
            return Err(DemuxError::PortTaken(port));
        }
        if self.ports.len() >= MAX_BOUND_PORTS {
            return Err(DemuxError::TooManyPorts);
        }
        self.ports.insert(port, handler);
        Ok(())
    }

    /// The handler bound to `port`.
    pub fn handler(&self, port: u16) -> Option<H> {
        self.ports.get(&port).copied()
    }

    /// The IP this demultiplexer accepts frames for.
    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    /// Counters.
    pub fn stats(&self) -> &DemuxStats {
        &self.stats
    }

    /// The handler for `frame` and its datagram, or why there is none
    /// (counted): the frame is malformed, for another IP or to an unbound
    /// port.
    pub fn dispatch<'a>(&mut self, frame: &'a [u8]) -> Result<(H, UdpFrame<'a>), Undeliverable> {
        self.stats.rx_frames += 1;
        let udp = parse_udp_frame(frame).map_err(|e| {
            self.stats.malformed += 1;
            Undeliverable::Malformed(e)
        })?;
        if udp.dst_ip != self.ip {
            self.stats.not_for_me += 1;
            return Err(Undeliverable::NotForMe(udp.dst_ip));
        }
        let Some(h) = self.handler(udp.dst_port) else {
            self.stats.unknown_port += 1;
            return Err(Undeliverable::UnknownPort(udp.dst_port));
        };
        Ok((h, udp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inca_wire::{build_udp_frame, Endpoints};

    const ME: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn frame(dst: Ipv4Addr, dport: u16, payload: &[u8]) -> Vec<u8> {
        let ep = Endpoints::new([2, 0, 0, 0, 0, 1], Ipv4Addr::new(10, 0, 0, 1), [2; 6], dst);
        build_udp_frame(&ep, 5000, dport, payload, false).unwrap()
    }

    #[test]
    fn bound_ports_reach_their_handler() {
        let mut d = PortDemux::new(ME);
        d.bind(8001, 'a').unwrap();
        d.bind(9000, 'b').unwrap();
        let f = frame(ME, 9000, b"hb");
        let (h, udp) = d.dispatch(&f).unwrap();
        assert_eq!((h, udp.payload), ('b', &b"hb"[..]));
        assert_eq!(d.dispatch(&frame(ME, 8001, b"")).unwrap().0, 'a');
        assert_eq!(d.stats().rx_frames, 2);
        assert_eq!(d.stats().dropped(), 0);
    }

    #[test]
    fn unknown_port_other_ip_and_garbage_are_counted_and_dropped() {
        let mut d = PortDemux::new(ME);
        d.bind(8001, 0u8).unwrap();
        let other = Ipv4Addr::new(10, 0, 0, 9);
        assert_eq!(
            d.dispatch(&frame(ME, 8002, b"x")).unwrap_err(),
            Undeliverable::UnknownPort(8002)
        );
        assert_eq!(
            d.dispatch(&frame(other, 8001, b"x")).unwrap_err(),
            Undeliverable::NotForMe(other)
        );
        assert!(matches!(
            d.dispatch(&[0u8; 20]),
            Err(Undeliverable::Malformed(_))
        ));
        let mut bad = frame(ME, 8001, b"x");
        bad[14 + 10] ^= 0xff; // IPv4 header checksum
        assert_eq!(
            d.dispatch(&bad).unwrap_err(),
            Undeliverable::Malformed(WireError::BadChecksum)
        );
        let s = *d.stats();
        assert_eq!(
            (s.rx_frames, s.unknown_port, s.not_for_me, s.malformed),
            (4, 1, 1, 2)
        );
    }

    #[test]
    fn a_port_binds_once_and_the_map_is_bounded() {
        let mut d = PortDemux::new(ME);
        d.bind(7, ()).unwrap();
        assert_eq!(d.bind(7, ()), Err(DemuxError::PortTaken(7)));
        for p in 0..MAX_BOUND_PORTS as u16 {
            let _ = d.bind(1000 + p, ());
        }
        assert_eq!(d.bind(1, ()), Err(DemuxError::TooManyPorts));
    }
}
