//! The device targets' input format, and its encoder for seed corpora.
//!
//! ```text
//! byte 0        selector: which program / configuration to build
//! then records, up to MAX_EVENTS, each an 8-byte header and a body:
//!   kind u8     low 3 bits: 0..=4 frame, 5 link state, 6 restart, 7 advance time
//!               bit 7 set: deliver the frame as is (else its IPv4, UDP/TCP
//!               checksums and RoCE ICRC are recomputed first)
//!   port u8     the port (any value: ports a device does not have are input too)
//!   dt   u32 LE nanoseconds after the previous record
//!   len  u16 LE body length (cut to what is left); for "link state", the
//!               lowest bit of len is up (1) or down (0) and there is no body
//! ```
//!
//! Decoding never fails: a short tail is ignored. [our choice] Checksums
//! are fixed by default because a random checksum is wrong 65,535 times in
//! 65,536, and a fuzzer that must also guess it never reaches the code behind
//! the check; the raw bit keeps the checks themselves under test.

use inca_wire::ethernet::ethertype;
use inca_wire::{ipv4, EthernetFrame, Ipv4Packet, TcpSegment, UdpDatagram};

/// Most records one input may carry (a "short sequence of frames").
pub const MAX_EVENTS: usize = 64;

/// Bytes of a record header.
pub const RECORD_HEADER: usize = 8;

/// What one record asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A frame arrives.
    Frame(Vec<u8>),
    /// The link on the port goes up or down.
    Link(bool),
    /// The device crashes and restarts.
    Restart,
    /// Time passes (timers fire).
    Advance,
}

/// One record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Port number as given.
    pub port: u8,
    /// Nanoseconds after the previous event.
    pub dt: u32,
    /// What happens.
    pub action: Action,
    /// Deliver a frame without fixing its checksums.
    pub raw: bool,
}

/// Splits `data` into the selector and the events.
pub fn decode(data: &[u8]) -> (u8, Vec<Event>) {
    let Some((&selector, mut rest)) = data.split_first() else {
        return (0, Vec::new());
    };
    let mut events = Vec::new();
    while rest.len() >= RECORD_HEADER && events.len() < MAX_EVENTS {
        let kind = rest[0];
        let port = rest[1];
        let dt = u32::from_le_bytes([rest[2], rest[3], rest[4], rest[5]]);
        let len = usize::from(u16::from_le_bytes([rest[6], rest[7]]));
        rest = &rest[RECORD_HEADER..];
        let raw = kind & 0x80 != 0;
        let action = match kind & 7 {
            0..=4 => {
                let n = len.min(rest.len());
                let mut frame = rest[..n].to_vec();
                rest = &rest[n..];
                if !raw {
                    fix_checksums(&mut frame);
                }
                Action::Frame(frame)
            }
            5 => Action::Link(len & 1 == 1),
            6 => Action::Restart,
            _ => Action::Advance,
        };
        events.push(Event {
            port,
            dt,
            action,
            raw,
        });
    }
    (selector, events)
}

/// Encodes `events` after `selector` (for seed corpora): the inverse of
/// [`decode`] for frames up to 65,535 bytes.
pub fn encode(selector: u8, events: &[Event]) -> Vec<u8> {
    let mut out = vec![selector];
    for e in events {
        let (kind, len, body): (u8, u16, &[u8]) = match &e.action {
            Action::Frame(f) => (0, f.len().min(usize::from(u16::MAX)) as u16, f),
            Action::Link(up) => (5, u16::from(*up), &[]),
            Action::Restart => (6, 0, &[]),
            Action::Advance => (7, 0, &[]),
        };
        out.push(kind | if e.raw { 0x80 } else { 0 });
        out.push(e.port);
        out.extend_from_slice(&e.dt.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&body[..usize::from(len)]);
    }
    out
}

/// A frame event with checksums fixed on delivery.
pub fn frame(port: u8, dt: u32, frame: Vec<u8>) -> Event {
    Event {
        port,
        dt,
        action: Action::Frame(frame),
        raw: false,
    }
}

/// Recomputes the IPv4 header checksum, a UDP checksum that is in use, a
/// TCP checksum and a RoCEv2 ICRC, where the headers parse.
pub fn fix_checksums(frame: &mut [u8]) {
    let Ok(eth) = EthernetFrame::new_checked(&frame[..]) else {
        return;
    };
    if eth.ethertype() != ethertype::IPV4 {
        return;
    }
    let off = eth.header_len();
    let Ok(ip) = Ipv4Packet::new_checked_header(&frame[off..]) else {
        return;
    };
    let (hl, proto, src, dst) = (ip.header_len(), ip.protocol(), ip.src_addr(), ip.dst_addr());
    let end = (off + usize::from(ip.total_len())).min(frame.len());
    let mut ip = Ipv4Packet::new_unchecked(&mut frame[off..]);
    ip.fill_checksum();
    if off + hl > end {
        return;
    }
    let l4 = &mut frame[off + hl..end];
    match proto {
        ipv4::protocol::UDP => {
            let Ok(udp) = UdpDatagram::new_checked(&l4[..]) else {
                return;
            };
            let (dport, ck) = (udp.dst_port(), udp.checksum());
            // The ICRC masks the UDP checksum, so it goes first; the UDP
            // checksum then covers the ICRC bytes.
            if dport == inca_wire::ROCEV2_UDP_PORT {
                let _ = inca_wire::fill_frame_icrc(frame);
            }
            let l4 = &mut frame[off + hl..end];
            if ck != 0 {
                UdpDatagram::new_unchecked(l4).fill_checksum(src, dst);
            }
        }
        ipv4::protocol::TCP if TcpSegment::new_checked(&l4[..]).is_ok() => {
            TcpSegment::new_unchecked(l4).fill_checksum(src, dst);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_then_decode_is_the_identity() {
        let events = vec![
            frame(3, 1000, vec![1, 2, 3]),
            Event {
                port: 1,
                dt: 7,
                action: Action::Link(false),
                raw: false,
            },
            Event {
                port: 0,
                dt: 0,
                action: Action::Restart,
                raw: false,
            },
            Event {
                port: 9,
                dt: 1 << 30,
                action: Action::Frame(vec![9; 40]),
                raw: true,
            },
            Event {
                port: 0,
                dt: 5,
                action: Action::Advance,
                raw: false,
            },
        ];
        assert_eq!(decode(&encode(42, &events)), (42, events));
    }

    #[test]
    fn a_short_tail_is_ignored_and_events_are_capped() {
        assert_eq!(decode(&[]), (0, vec![]));
        assert_eq!(decode(&[1, 0, 0, 0]), (1, vec![]));
        let many = encode(0, &vec![frame(0, 0, vec![]); MAX_EVENTS + 10]);
        assert_eq!(decode(&many).1.len(), MAX_EVENTS);
    }
}
