//! Receive Side Scaling: which receive queue (and so which core) a frame
//! goes to.
//!
//! The NIC hashes the IPv4 4-tuple of TCP and UDP packets (addresses only
//! for other IPv4 packets and for fragments after the first) with the
//! Toeplitz hash ([`inca_wire::toeplitz`]) and looks the low bits of the
//! hash up in an indirection table (RETA) whose entries are queue numbers.
//! Frames the NIC cannot hash (not IPv4, or too short) go to queue 0, as
//! Intel's 82599 does (datasheet §7.1.2.8: packets that match no enabled
//! hash type get hash 0, and so RETA entry 0). Both directions of a flow
//! hash differently (the key is not symmetric): a flow and its reply may
//! meet different cores.

use inca_wire::ethernet::ethertype;
use inca_wire::toeplitz;
use inca_wire::{EthernetFrame, Ipv4Packet};
use serde::{Deserialize, Serialize};

/// RETA entries [Intel 82599 datasheet §7.1.2.8.3: a 128-entry
/// redirection table; ConnectX and E810 allow more, 128 is the common
/// floor].
pub const DEFAULT_RETA_SIZE: usize = 128;

/// How a NIC spreads frames over queues.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RssConfig {
    /// The Toeplitz key, 40 bytes (default: Microsoft's verification key,
    /// the default of Intel's drivers and DPDK's testpmd).
    pub key: Vec<u8>,
    /// RETA size, a power of two (default 128).
    pub reta_size: usize,
    /// Hash UDP ports too (default true; NICs offer it as an option, DPDK
    /// applications usually enable it).
    pub udp_ports: bool,
}

impl Default for RssConfig {
    fn default() -> Self {
        RssConfig {
            key: toeplitz::MICROSOFT_KEY.to_vec(),
            reta_size: DEFAULT_RETA_SIZE,
            udp_ports: true,
        }
    }
}

/// Why an RSS configuration is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RssError {
    /// The key is not 40 bytes.
    #[error("rss.key must be 40 bytes, not {0}")]
    KeyLength(usize),
    /// The RETA size is not a power of two in 1..=65536.
    #[error("rss.reta_size must be a power of two from 1 to 65536, not {0}")]
    RetaSize(usize),
    /// No queue to spread over.
    #[error("RSS needs at least one queue")]
    NoQueues,
}

/// A NIC's RSS: key and indirection table.
#[derive(Debug, Clone)]
pub struct Rss {
    key: Vec<u8>,
    reta: Vec<u16>,
    udp_ports: bool,
}

impl Rss {
    /// RSS over `queues` queues, RETA entry `i` = `i mod queues` (the
    /// drivers' default fill).
    pub fn new(config: &RssConfig, queues: usize) -> Result<Self, RssError> {
        if config.key.len() != toeplitz::MICROSOFT_KEY.len() {
            return Err(RssError::KeyLength(config.key.len()));
        }
        let n = config.reta_size;
        if !(1..=65_536).contains(&n) || !n.is_power_of_two() {
            return Err(RssError::RetaSize(n));
        }
        if queues == 0 || queues > usize::from(u16::MAX) {
            return Err(RssError::NoQueues);
        }
        Ok(Rss {
            key: config.key.clone(),
            reta: (0..n).map(|i| (i % queues) as u16).collect(),
            udp_ports: config.udp_ports,
        })
    }

    /// The Toeplitz hash of `frame`, None if the NIC does not hash it.
    pub fn hash(&self, frame: &[u8]) -> Option<u32> {
        let eth = EthernetFrame::new_checked(frame).ok()?;
        if eth.ethertype() != ethertype::IPV4 {
            return None;
        }
        let l3 = &frame[eth.header_len()..];
        let ip = Ipv4Packet::new_checked_header(l3).ok()?;
        let proto = ip.protocol();
        let hashes_ports = proto == 6 || (proto == 17 && self.udp_ports);
        let ports = if hashes_ports && ip.frag_offset() == 0 {
            l3.get(ip.header_len()..ip.header_len() + 4).map(|p| {
                (
                    u16::from_be_bytes([p[0], p[1]]),
                    u16::from_be_bytes([p[2], p[3]]),
                )
            })
        } else {
            None
        };
        let (input, n) =
            toeplitz::ipv4_input(ip.src_addr().octets(), ip.dst_addr().octets(), ports);
        Some(toeplitz::hash(&self.key, &input[..n]))
    }

    /// The queue `frame` goes to.
    pub fn queue(&self, frame: &[u8]) -> usize {
        self.queue_of_hash(self.hash(frame).unwrap_or(0))
    }

    /// The queue of the Toeplitz hash of `input` (at most
    /// [`toeplitz::MAX_INPUT`] bytes are hashed): RSS over fields the NF
    /// names rather than the IPv4 4-tuple.
    pub fn queue_of_input(&self, input: &[u8]) -> usize {
        let n = input.len().min(toeplitz::MAX_INPUT);
        self.queue_of_hash(toeplitz::hash(&self.key, &input[..n]))
    }

    /// The queue RETA gives hash `h`.
    pub fn queue_of_hash(&self, h: u32) -> usize {
        usize::from(self.reta[h as usize & (self.reta.len() - 1)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inca_wire::{build_udp_frame, Endpoints};
    use std::net::Ipv4Addr;

    fn udp(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> Vec<u8> {
        let ep = Endpoints::new([2; 6], Ipv4Addr::from(src), [4; 6], Ipv4Addr::from(dst));
        build_udp_frame(&ep, sport, dport, b"payload", false).unwrap()
    }

    #[test]
    fn frame_hash_matches_the_verification_table() {
        // Row 1 of Microsoft's table, carried in a UDP frame.
        let rss = Rss::new(&RssConfig::default(), 4).unwrap();
        let f = udp([66, 9, 149, 187], 2794, [161, 142, 100, 80], 1766);
        assert_eq!(rss.hash(&f), Some(0x51cc_c178));
        let no_ports = Rss::new(
            &RssConfig {
                udp_ports: false,
                ..RssConfig::default()
            },
            4,
        )
        .unwrap();
        assert_eq!(no_ports.hash(&f), Some(0x323e_8fc2));
        // RETA: 128 entries, i mod 4; the hash's low 7 bits pick one.
        assert_eq!(rss.queue(&f), (0x51cc_c178usize & 127) % 4);
    }

    #[test]
    fn unhashable_frames_go_to_queue_zero_and_config_is_checked() {
        let rss = Rss::new(&RssConfig::default(), 8).unwrap();
        assert_eq!(rss.hash(&[0u8; 10]), None);
        assert_eq!(rss.queue(&[0u8; 60]), 0);
        let bad_key = RssConfig {
            key: vec![1; 39],
            ..RssConfig::default()
        };
        assert_eq!(Rss::new(&bad_key, 2).unwrap_err(), RssError::KeyLength(39));
        let bad_reta = RssConfig {
            reta_size: 100,
            ..RssConfig::default()
        };
        assert_eq!(Rss::new(&bad_reta, 2).unwrap_err(), RssError::RetaSize(100));
        assert_eq!(
            Rss::new(&RssConfig::default(), 0).unwrap_err(),
            RssError::NoQueues
        );
    }
}
