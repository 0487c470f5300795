//! The per-hop telemetry stack: time stamps devices append to a probe frame
//! so its receiver can split the one-way latency into hops.
//!
//! It sits in the UDP payload right after the [`Probe`](crate::Probe)
//! header (big endian):
//!
//! ```text
//! header (8):  magic "ITLM" (4) | count (1) | reserved (1) | overflow (2)
//! record (16): device (4) | point (1: 1 ingress, 2 egress) | reserved (3) | time ns (8)
//! ```
//!
//! `count` records follow the header, oldest first. A device that finds the
//! stack at its depth limit does not append; it adds one to `overflow`
//! (saturating) instead, so the receiver knows stamps are missing. A probe
//! without the stack gets one (header and first record) from the first
//! device that stamps it. [`push_stamp`] does that on a whole frame and
//! fixes the IPv4 total length and header checksum and the UDP length and
//! checksum (a zero UDP checksum, "none", stays zero).
//!
//! [`TelemetryStack`] is the checked view, smoltcp style: `new_checked`
//! refuses a buffer too short for the header or for the records it
//! declares.

use crate::error::{Result, WireError};
use crate::ethernet::{ethertype, EthernetFrame};
use crate::ipv4::{protocol, Ipv4Packet};
use crate::probe::{PROBE_LEN, PROBE_MAGIC};
use crate::udp::UdpDatagram;

/// First four bytes of the stack ("ITLM").
pub const TELEMETRY_MAGIC: u32 = 0x4954_4c4d;
/// Length of the stack header.
pub const TELEMETRY_HEADER_LEN: usize = 8;
/// Length of one record.
pub const STAMP_LEN: usize = 16;

/// Where on a device a stamp was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StampPoint {
    /// When the frame arrived at the device.
    Ingress,
    /// When the device put the frame on its outgoing link.
    Egress,
}

impl StampPoint {
    fn code(self) -> u8 {
        match self {
            StampPoint::Ingress => 1,
            StampPoint::Egress => 2,
        }
    }

    fn from_code(c: u8) -> Option<StampPoint> {
        match c {
            1 => Some(StampPoint::Ingress),
            2 => Some(StampPoint::Egress),
            _ => None,
        }
    }

    /// `in` or `out`, for names.
    pub fn as_str(self) -> &'static str {
        match self {
            StampPoint::Ingress => "in",
            StampPoint::Egress => "out",
        }
    }
}

/// One record of the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The device (the simulator's node index).
    pub device: u32,
    /// Ingress or egress.
    pub point: StampPoint,
    /// When, ns.
    pub time: u64,
}

impl Stamp {
    /// Writes the record into the first [`STAMP_LEN`] bytes of `buf`
    /// ([`WireError::BufferTooSmall`] if shorter).
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let b = buf.get_mut(..STAMP_LEN).ok_or(WireError::BufferTooSmall)?;
        b[0..4].copy_from_slice(&self.device.to_be_bytes());
        b[4] = self.point.code();
        b[5..8].fill(0);
        b[8..16].copy_from_slice(&self.time.to_be_bytes());
        Ok(())
    }

    fn parse(b: &[u8]) -> Result<Stamp> {
        let b = b.get(..STAMP_LEN).ok_or(WireError::Truncated)?;
        let point = StampPoint::from_code(b[4]).ok_or(WireError::Malformed("stamp point"))?;
        let mut time = [0u8; 8];
        time.copy_from_slice(&b[8..16]);
        Ok(Stamp {
            device: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            point,
            time: u64::from_be_bytes(time),
        })
    }
}

/// A read view of the stack at the start of a buffer (the bytes after the
/// probe). See the module documentation.
#[derive(Debug, Clone, Copy)]
pub struct TelemetryStack<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TelemetryStack<T> {
    /// Wraps `buffer` without checking it; accessors may panic on a short
    /// one. Use [`TelemetryStack::new_checked`] for bytes off the wire.
    pub fn new_unchecked(buffer: T) -> Self {
        TelemetryStack { buffer }
    }

    /// Wraps `buffer` if it starts with a stack whose records all fit:
    /// [`WireError::Unsupported`] without the magic, [`WireError::Truncated`]
    /// when it is shorter than the header or the declared records,
    /// [`WireError::Malformed`] when a record's point is neither ingress
    /// nor egress.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        let h = b.get(..TELEMETRY_HEADER_LEN).ok_or(WireError::Truncated)?;
        if u32::from_be_bytes([h[0], h[1], h[2], h[3]]) != TELEMETRY_MAGIC {
            return Err(WireError::Unsupported("no telemetry stack"));
        }
        let s = TelemetryStack { buffer };
        if s.buffer.as_ref().len() < s.total_len() {
            return Err(WireError::Truncated);
        }
        for i in 0..usize::from(s.count()) {
            Stamp::parse(&s.buffer.as_ref()[s.record_at(i)..])?;
        }
        Ok(s)
    }

    /// Number of records.
    pub fn count(&self) -> u8 {
        self.buffer.as_ref()[4]
    }

    /// Stamps devices could not append because the stack was full.
    pub fn overflow(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[6], b[7]])
    }

    /// Bytes the stack takes: header and records.
    pub fn total_len(&self) -> usize {
        TELEMETRY_HEADER_LEN + usize::from(self.count()) * STAMP_LEN
    }

    fn record_at(&self, i: usize) -> usize {
        TELEMETRY_HEADER_LEN + i * STAMP_LEN
    }

    /// Record `i` (oldest first), `None` past the end.
    pub fn stamp(&self, i: usize) -> Option<Stamp> {
        if i >= usize::from(self.count()) {
            return None;
        }
        Stamp::parse(self.buffer.as_ref().get(self.record_at(i)..)?).ok()
    }

    /// The records, oldest first.
    pub fn stamps(&self) -> impl Iterator<Item = Stamp> + '_ {
        (0..usize::from(self.count())).filter_map(|i| self.stamp(i))
    }
}

/// What [`push_stamp`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// The record was appended (the frame grew by this many bytes).
    Appended(usize),
    /// The stack was at its depth limit: `overflow` was counted instead.
    Overflow,
}

/// Appends `stamp` to the telemetry stack of probe frame `frame`, creating
/// the stack if the probe has none; at most `max_depth` records (then the
/// stack's `overflow` counts it). Fixes the IPv4 total length and header
/// checksum, and the UDP length and checksum. Errors leave the frame as it
/// was: [`WireError::Unsupported`] for a frame that is not an unfragmented
/// IPv4/UDP probe, [`WireError::BadChecksum`] for a bad IPv4 header
/// checksum, [`WireError::Truncated`] / [`WireError::Malformed`] for
/// lengths that do not fit, [`WireError::OutOfRange`] when the frame would
/// outgrow the IPv4 length field.
pub fn push_stamp(frame: &mut Vec<u8>, stamp: Stamp, max_depth: u8) -> Result<Pushed> {
    let l3 = {
        let eth = EthernetFrame::new_checked(&frame[..])?;
        if eth.ethertype() != ethertype::IPV4 {
            return Err(WireError::Unsupported("not IPv4"));
        }
        eth.header_len()
    };
    let (l4, ip_len) = {
        let ip = Ipv4Packet::new_checked(&frame[l3..])?;
        if ip.protocol() != protocol::UDP {
            return Err(WireError::Unsupported("not UDP"));
        }
        if ip.more_frags() || ip.frag_offset() != 0 {
            return Err(WireError::Unsupported("IPv4 fragment"));
        }
        if !ip.verify_checksum() {
            return Err(WireError::BadChecksum);
        }
        (l3 + ip.header_len(), usize::from(ip.total_len()))
    };
    let ip_end = l3 + ip_len;
    let udp_len = {
        let datagram = frame
            .get(l4..ip_end)
            .ok_or(WireError::Malformed("IPv4 total length"))?;
        let udp = UdpDatagram::new_checked(datagram)?;
        let len = usize::from(udp.len());
        if len > datagram.len() {
            return Err(WireError::Malformed("UDP length"));
        }
        let payload = &datagram[8..len];
        if payload.len() < PROBE_LEN
            || u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) != PROBE_MAGIC
        {
            return Err(WireError::Unsupported("not a probe"));
        }
        len
    };
    let at = l4 + 8 + PROBE_LEN;
    let udp_end = l4 + udp_len;
    // Whatever follows a probe without a stack (padding, data) stays, after
    // the stack; a stack that is there must be whole.
    let after = &frame[at..udp_end];
    let existing = if after.get(..4) == Some(&TELEMETRY_MAGIC.to_be_bytes()[..]) {
        let s = TelemetryStack::new_checked(after)?;
        Some((s.count(), s.total_len()))
    } else {
        None
    };
    let mut record = [0u8; STAMP_LEN];
    stamp.emit(&mut record)?;
    let (insert_at, bytes): (usize, Vec<u8>) = match existing {
        Some((count, _)) if count >= max_depth => {
            let o = at + 6;
            let v = u16::from_be_bytes([frame[o], frame[o + 1]]).saturating_add(1);
            frame[o..o + 2].copy_from_slice(&v.to_be_bytes());
            fix_udp_checksum(frame, l3, l4)?;
            return Ok(Pushed::Overflow);
        }
        Some((_, len)) => (at + len, record.to_vec()),
        None if max_depth == 0 => {
            // No room even for one record: a stack that says so.
            let mut h = [0u8; TELEMETRY_HEADER_LEN];
            h[0..4].copy_from_slice(&TELEMETRY_MAGIC.to_be_bytes());
            h[6..8].copy_from_slice(&1u16.to_be_bytes());
            (at, h.to_vec())
        }
        None => {
            let mut v = TELEMETRY_MAGIC.to_be_bytes().to_vec();
            v.extend_from_slice(&[0, 0, 0, 0]);
            v.extend_from_slice(&record);
            (at, v)
        }
    };
    let grow = bytes.len();
    let new_ip_len =
        u16::try_from(ip_len + grow).map_err(|_| WireError::OutOfRange("IPv4 total length"))?;
    let new_udp_len =
        u16::try_from(udp_len + grow).map_err(|_| WireError::OutOfRange("UDP length"))?;
    frame.splice(insert_at..insert_at, bytes);
    if existing.is_some() || max_depth > 0 {
        frame[at + 4] += 1; // count
    }
    {
        let mut ip = Ipv4Packet::new_unchecked(&mut frame[l3..]);
        ip.set_total_len(new_ip_len);
        ip.fill_checksum();
    }
    UdpDatagram::new_unchecked(&mut frame[l4..]).set_len(new_udp_len);
    fix_udp_checksum(frame, l3, l4)?;
    Ok(if max_depth == 0 {
        Pushed::Overflow
    } else {
        Pushed::Appended(grow)
    })
}

/// Recomputes the UDP checksum of the datagram at `l4` unless it is 0.
fn fix_udp_checksum(frame: &mut [u8], l3: usize, l4: usize) -> Result<()> {
    let (src, dst) = {
        let ip = Ipv4Packet::new_checked(&frame[l3..])?;
        (ip.src_addr(), ip.dst_addr())
    };
    let mut udp = UdpDatagram::new_checked(&mut frame[l4..])?;
    if udp.checksum() != 0 {
        udp.set_checksum(0);
        udp.fill_checksum(src, dst);
    }
    Ok(())
}

/// The telemetry stack of a UDP payload that starts with a probe, if it
/// has one.
pub fn stack_of(payload: &[u8]) -> Option<TelemetryStack<&[u8]>> {
    TelemetryStack::new_checked(payload.get(PROBE_LEN..)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{build_udp_frame, Endpoints};
    use crate::probe::Probe;
    use crate::udp_frame::parse_udp_frame;
    use std::net::Ipv4Addr;

    fn udp(payload: &[u8], checksum: bool) -> Vec<u8> {
        let ep = Endpoints::new(
            [2, 0, 0, 0, 0, 1],
            Ipv4Addr::new(10, 0, 0, 1),
            [2, 0, 0, 0, 0, 2],
            Ipv4Addr::new(10, 0, 0, 2),
        );
        build_udp_frame(&ep, 1000, 9, payload, checksum).unwrap()
    }

    fn probe_frame(pad: usize) -> Vec<u8> {
        let mut payload = vec![0xAB; PROBE_LEN + pad];
        Probe {
            flow: 3,
            seq: 9,
            tx_time: 1_000,
        }
        .write(&mut payload);
        udp(&payload, false)
    }

    fn stamp(device: u32, point: StampPoint, time: u64) -> Stamp {
        Stamp {
            device,
            point,
            time,
        }
    }

    #[test]
    fn stamps_are_appended_in_order_and_lengths_and_checksums_follow() {
        let mut f = probe_frame(40);
        let before = f.len();
        let pad = parse_udp_frame(&f).unwrap().payload[PROBE_LEN..].to_vec();
        let stamps = [
            stamp(1, StampPoint::Ingress, 1_500),
            stamp(1, StampPoint::Egress, 2_000),
            stamp(7, StampPoint::Ingress, 3_000),
        ];
        for s in stamps {
            assert!(matches!(push_stamp(&mut f, s, 8), Ok(Pushed::Appended(_))));
        }
        assert_eq!(f.len(), before + TELEMETRY_HEADER_LEN + 3 * STAMP_LEN);
        // The checked parser accepts it: IPv4 checksum and lengths agree.
        let u = parse_udp_frame(&f).unwrap();
        assert_eq!(Probe::parse(u.payload).unwrap().seq, 9);
        let st = stack_of(u.payload).unwrap();
        assert_eq!(st.count(), 3);
        assert_eq!(st.overflow(), 0);
        assert_eq!(st.stamps().collect::<Vec<_>>(), stamps);
        // What followed the probe is still there, after the stack.
        assert_eq!(&u.payload[PROBE_LEN + st.total_len()..], &pad[..]);
    }

    #[test]
    fn a_nonzero_udp_checksum_is_recomputed() {
        let mut f = probe_frame(10);
        let l4 = 14 + 20;
        let (src, dst) = {
            let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
            (ip.src_addr(), ip.dst_addr())
        };
        UdpDatagram::new_unchecked(&mut f[l4..]).fill_checksum(src, dst);
        push_stamp(&mut f, stamp(2, StampPoint::Ingress, 5), 4).unwrap();
        let udp = UdpDatagram::new_checked(&f[l4..]).unwrap();
        assert_ne!(udp.checksum(), 0);
        assert!(udp.verify_checksum(src, dst));
    }

    #[test]
    fn a_full_stack_counts_overflow_and_does_not_grow() {
        let mut f = probe_frame(0);
        for t in 0..2 {
            push_stamp(&mut f, stamp(1, StampPoint::Ingress, t), 2).unwrap();
        }
        let len = f.len();
        assert_eq!(
            push_stamp(&mut f, stamp(1, StampPoint::Egress, 9), 2),
            Ok(Pushed::Overflow)
        );
        assert_eq!(
            push_stamp(&mut f, stamp(1, StampPoint::Egress, 9), 2),
            Ok(Pushed::Overflow)
        );
        assert_eq!(f.len(), len);
        let u = parse_udp_frame(&f).unwrap();
        let st = stack_of(u.payload).unwrap();
        assert_eq!((st.count(), st.overflow()), (2, 2));
        // Depth 0: a stack with no records that counts the miss.
        let mut g = probe_frame(0);
        assert_eq!(
            push_stamp(&mut g, stamp(1, StampPoint::Egress, 9), 0),
            Ok(Pushed::Overflow)
        );
        let u = parse_udp_frame(&g).unwrap();
        let st = stack_of(u.payload).unwrap();
        assert_eq!((st.count(), st.overflow()), (0, 1));
    }

    #[test]
    fn frames_that_are_not_probes_are_refused_unchanged() {
        let plain = udp(&[0u8; 40], false);
        let mut f = plain.clone();
        let s = stamp(1, StampPoint::Ingress, 1);
        assert!(matches!(
            push_stamp(&mut f, s, 8),
            Err(WireError::Unsupported(_))
        ));
        assert_eq!(f, plain);
        // Every truncation of a probe frame is refused without a panic.
        let probe = probe_frame(4);
        for n in 0..probe.len() {
            let mut g = probe[..n].to_vec();
            assert!(push_stamp(&mut g, s, 8).is_err(), "cut at {n}");
            assert_eq!(g, &probe[..n]);
        }
        // A bad IPv4 checksum too.
        let mut g = probe.clone();
        g[14 + 10] ^= 0xff;
        assert_eq!(push_stamp(&mut g, s, 8), Err(WireError::BadChecksum));
    }

    #[test]
    fn the_checked_view_refuses_short_and_inconsistent_stacks() {
        let mut b = [0u8; TELEMETRY_HEADER_LEN + STAMP_LEN];
        b[0..4].copy_from_slice(&TELEMETRY_MAGIC.to_be_bytes());
        b[4] = 1;
        stamp(4, StampPoint::Egress, 77).emit(&mut b[8..]).unwrap();
        assert_eq!(
            TelemetryStack::new_checked(&b[..])
                .unwrap()
                .stamp(0)
                .unwrap()
                .time,
            77
        );
        assert_eq!(
            TelemetryStack::new_checked(&b[..20]).unwrap_err(),
            WireError::Truncated
        );
        b[4] = 2;
        assert_eq!(
            TelemetryStack::new_checked(&b[..]).unwrap_err(),
            WireError::Truncated
        );
        b[4] = 1;
        b[12] = 9;
        assert!(matches!(
            TelemetryStack::new_checked(&b[..]),
            Err(WireError::Malformed(_))
        ));
        b[0] = 0;
        assert!(matches!(
            TelemetryStack::new_checked(&b[..]),
            Err(WireError::Unsupported(_))
        ));
        assert_eq!(
            TelemetryStack::new_checked(&b[..3]).unwrap_err(),
            WireError::Truncated
        );
    }
}
