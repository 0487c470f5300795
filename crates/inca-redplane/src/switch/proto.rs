//! RedPlane message layouts as the switch builds and reads them (spec §4):
//! the outer Ethernet/IPv4/UDP headers, the request and ack headers, the
//! CPU punt and re-inject headers, and RFC 1982 serial arithmetic.
//!
//! [our choice] These are the switch's own encoders, kept byte-compatible
//! with spec §4; the store side has its own (H1's wire module).

use inca_wire::checksum;

/// UDP port of the switch side: source of requests, destination of acks.
pub const SWITCH_UDP_PORT: u16 = 4000;
/// Store worker ports are 8000+w, w in 1..=63 (mask 0xFFC0).
pub const STORE_PORT_BASE: u16 = 8000;
/// Ethernet + IPv4 + UDP bytes in front of a RedPlane header.
pub const OUTER_LEN: usize = 14 + 20 + 8;
/// Request and ack header bytes before the key: type (1) and seq (2).
pub const RP_FIXED: usize = 3;

/// `LEASE_NEW_REQ`.
pub const LEASE_NEW_REQ: u8 = 0x00;
/// `LEASE_RENEW_REQ` (seq 0: bare renewal; seq ≥ 1: a write).
pub const LEASE_RENEW_REQ: u8 = 0x01;
/// `BUF_READ_REQ`.
pub const BUF_READ_REQ: u8 = 0x02;
/// `LEASE_NEW_ACK`.
pub const LEASE_NEW_ACK: u8 = 0x00;
/// `LEASE_RENEW_ACK`.
pub const LEASE_RENEW_ACK: u8 = 0x01;
/// `LEASE_MIGRATE_ACK`.
pub const LEASE_MIGRATE_ACK: u8 = 0x02;
/// `BUF_READ_ACK`.
pub const BUF_READ_ACK: u8 = 0x03;
/// `LEASE_REJECT`.
pub const LEASE_REJECT: u8 = 0x05;

/// EtherType of a CPU punt (spec §4.6).
pub const ETHERTYPE_PUNT: u16 = 0xBF01;
/// EtherType of a re-injected packet (spec §4.6).
pub const ETHERTYPE_REINJECT: u16 = 0xBF02;
/// EtherType IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;

/// RFC 1982 "a is later than b" on 16-bit sequence numbers.
pub fn seq_gt(a: u16, b: u16) -> bool {
    a != b && (a.wrapping_sub(b) as i16) > 0
}

/// The later of two 16-bit sequence numbers (RFC 1982).
pub fn seq_max(a: u16, b: u16) -> u16 {
    if seq_gt(b, a) {
        b
    } else {
        a
    }
}

/// The next write sequence number: 65535 wraps to 1 (0 means "no write").
pub fn seq_next(s: u16) -> u16 {
    if s == u16::MAX {
        1
    } else {
        s + 1
    }
}

/// Number of sequence numbers from `acked` up to `issued`, counting the
/// skipped 0 at the wrap.
pub fn seq_distance(issued: u16, acked: u16) -> u32 {
    if !seq_gt(issued, acked) {
        return 0;
    }
    let d = u32::from(issued.wrapping_sub(acked));
    // Crossing the wrap skips 0.
    if issued < acked {
        d - 1
    } else {
        d
    }
}

/// RFC 1982 "a is later than b" on 32-bit lease times.
pub fn time_gt(a: u32, b: u32) -> bool {
    a != b && (a.wrapping_sub(b) as i32) > 0
}

/// A time in the lease registers' unit: bits [47:16] of the ns clock.
pub fn lease_units(now: u64) -> u32 {
    (now >> 16) as u32
}

/// The request's send timestamp for the IPv4 Identification field: bits
/// [31:16] of the ns clock (spec §4.1).
pub fn send_stamp(now: u64) -> u16 {
    (now >> 16) as u16
}

/// Addresses of a request or ack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoints {
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source IPv4.
    pub src_ip: [u8; 4],
    /// Destination IPv4.
    pub dst_ip: [u8; 4],
    /// Source UDP port.
    pub src_port: u16,
    /// Destination UDP port.
    pub dst_port: u16,
}

/// Writes Ethernet + IPv4 + UDP + RedPlane header (type, seq, key, value)
/// into `buf` (exactly `OUTER_LEN + RP_FIXED + key.len() + value.len()`
/// bytes), for a message whose piggyback is `piggy_len` bytes long.
#[allow(clippy::too_many_arguments)]
pub fn write_header(
    buf: &mut [u8],
    ep: &Endpoints,
    ip_id: u16,
    kind: u8,
    seq: u16,
    key: &[u8],
    value: &[u8],
    piggy_len: usize,
) {
    let rp_len = RP_FIXED + key.len() + value.len();
    debug_assert_eq!(buf.len(), OUTER_LEN + rp_len);
    buf[0..6].copy_from_slice(&ep.dst_mac);
    buf[6..12].copy_from_slice(&ep.src_mac);
    buf[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    let ip_len = (20 + 8 + rp_len + piggy_len).min(usize::from(u16::MAX)) as u16;
    let ip = &mut buf[14..34];
    ip[0] = 0x45;
    ip[1] = 0;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[4..6].copy_from_slice(&ip_id.to_be_bytes());
    ip[6..8].copy_from_slice(&[0, 0]);
    ip[8] = 64;
    ip[9] = 17;
    ip[10..12].copy_from_slice(&[0, 0]);
    ip[12..16].copy_from_slice(&ep.src_ip);
    ip[16..20].copy_from_slice(&ep.dst_ip);
    let sum = checksum::checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let udp = &mut buf[34..42];
    udp[0..2].copy_from_slice(&ep.src_port.to_be_bytes());
    udp[2..4].copy_from_slice(&ep.dst_port.to_be_bytes());
    udp[4..6].copy_from_slice(&(ip_len.saturating_sub(20)).to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]);
    let rp = &mut buf[42..];
    rp[0] = kind;
    rp[1..3].copy_from_slice(&seq.to_be_bytes());
    rp[3..3 + key.len()].copy_from_slice(key);
    rp[3 + key.len()..].copy_from_slice(value);
}

/// Sets the IPv4 total length and UDP length of a message (after
/// truncation) and recomputes the IPv4 header checksum.
pub fn fix_lengths(frame: &mut [u8], total_frame_len: usize) {
    if frame.len() < OUTER_LEN {
        return;
    }
    let ip_len = total_frame_len
        .saturating_sub(14)
        .min(usize::from(u16::MAX)) as u16;
    frame[16..18].copy_from_slice(&ip_len.to_be_bytes());
    frame[24..26].copy_from_slice(&[0, 0]);
    let sum = checksum::checksum(&frame[14..34]);
    frame[24..26].copy_from_slice(&sum.to_be_bytes());
    frame[38..40].copy_from_slice(&ip_len.saturating_sub(20).to_be_bytes());
}

/// A RedPlane ack as the switch reads it from a frame (Ethernet + IPv4
/// without options + UDP + ack header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckView {
    /// `ack_type`.
    pub kind: u8,
    /// `seq`.
    pub seq: u16,
    /// The echoed send stamp (IPv4 Identification).
    pub ip_id: u16,
    /// Offset of the key in the frame.
    pub key_at: usize,
    /// Offset of the value (only meaningful in NEW/MIGRATE acks).
    pub value_at: usize,
    /// Offset of the piggybacked packet, if the ack carries one.
    pub piggy_at: Option<usize>,
    /// Source UDP port (the store worker).
    pub store_udp: u16,
}

/// Reads an ack whose IPv4 header starts at `l3` in `frame`. The value is
/// present only in NEW/MIGRATE acks (spec §4.3); `value_len` is V.
pub fn read_ack(frame: &[u8], l3: usize, key_len: usize, value_len: usize) -> Option<AckView> {
    let ip = frame.get(l3..l3 + 20)?;
    if ip[0] != 0x45 || ip[9] != 17 {
        return None;
    }
    let ip_len = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let ip_id = u16::from_be_bytes([ip[4], ip[5]]);
    let udp = frame.get(l3 + 20..l3 + 28)?;
    let store_udp = u16::from_be_bytes([udp[0], udp[1]]);
    let rp_at = l3 + 28;
    let rp = frame.get(rp_at..rp_at + RP_FIXED + key_len)?;
    let kind = rp[0];
    let seq = u16::from_be_bytes([rp[1], rp[2]]);
    let key_at = rp_at + RP_FIXED;
    let has_value = matches!(kind, LEASE_NEW_ACK | LEASE_MIGRATE_ACK);
    let value_at = key_at + key_len;
    let header_end = if has_value {
        value_at + value_len
    } else {
        value_at
    };
    let end = (l3 + ip_len).min(frame.len());
    if header_end > end {
        return None;
    }
    let piggy_at = (end > header_end).then_some(header_end);
    Some(AckView {
        kind,
        seq,
        ip_id,
        key_at,
        value_at,
        piggy_at,
        store_udp,
    })
}

/// An Ethernet header: `dst`, `src`, EtherType.
pub fn ethernet(dst: [u8; 6], src: [u8; 6], ethertype: u16) -> [u8; 14] {
    let mut e = [0u8; 14];
    e[0..6].copy_from_slice(&dst);
    e[6..12].copy_from_slice(&src);
    e[12..14].copy_from_slice(&ethertype.to_be_bytes());
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_arithmetic_wraps() {
        assert!(seq_gt(1, 65535));
        assert!(!seq_gt(65535, 1));
        assert_eq!(seq_max(65535, 2), 2);
        assert_eq!(seq_next(65535), 1);
        assert_eq!(seq_distance(2, 65534), 3); // 65535, 1, 2
        assert_eq!(seq_distance(5, 5), 0);
        assert_eq!(seq_distance(3, 5), 0);
        assert!(time_gt(1, u32::MAX));
    }

    #[test]
    fn header_round_trips() {
        let ep = Endpoints {
            src_mac: [2; 6],
            dst_mac: [3; 6],
            src_ip: [10, 0, 0, 1],
            dst_ip: [10, 0, 0, 2],
            src_port: 8001,
            dst_port: SWITCH_UDP_PORT,
        };
        let mut f = vec![0u8; OUTER_LEN + RP_FIXED + 6 + 6];
        write_header(&mut f, &ep, 77, LEASE_NEW_ACK, 4096, &[1; 6], &[2; 6], 0);
        let a = read_ack(&f, 14, 6, 6).unwrap();
        assert_eq!((a.kind, a.seq, a.ip_id, a.piggy_at), (0, 4096, 77, None));
        assert_eq!(&f[a.value_at..a.value_at + 6], &[2; 6]);
        assert!(read_ack(&f[..40], 14, 6, 6).is_none());
    }
}
