//! The RoCEv2 invariant CRC (IBA Vol. 1 Annex A17.3.3).
//!
//! The ICRC must survive routers, so every field a router may rewrite is
//! replaced by ones before the CRC is taken. Over IPv4 the covered bytes are,
//! in order:
//!
//! 1. eight 0xFF bytes standing in for the InfiniBand LRH, which RoCEv2 lacks;
//! 2. the IPv4 header (options included) with TOS (byte 1), TTL (byte 8) and
//!    the header checksum (bytes 10..12) set to 0xFF;
//! 3. the UDP header with its checksum (bytes 6..8) set to 0xFF;
//! 4. the BTH with Resv8a (byte 4, the FECN/BECN byte before DestQP) set to 0xFF;
//! 5. everything after the BTH up to, not including, the ICRC (pad included).
//!
//! The CRC is CRC-32 as in the Ethernet FCS (reflected polynomial 0x04C11DB7,
//! init and final XOR 0xFFFFFFFF). Like the FCS it goes on the wire least
//! significant byte first, so the stored value reads back with
//! `u32::from_le_bytes`. The spec's test vector T1, captured from a real RoCE
//! NIC, confirms this order.

use crate::error::{Result, WireError};
use crate::ethernet::{ethertype, EthernetFrame};
use crate::ipv4::{protocol, Ipv4Packet};
use crate::roce::{BTH_LEN, ICRC_LEN};
use crate::udp::{UdpDatagram, HEADER_LEN as UDP_HEADER_LEN};

// The same CRC-32 as `crc::CRC_32_ISO_HDLC`, from crc32fast, which folds
// with carry-less multiplication where the CPU has it: every RDMA packet the
// NIC model receives and sends passes through here (the unit tests pin the
// algorithm against the spec's vectors).
fn crc32() -> crc32fast::Hasher {
    crc32fast::Hasher::new()
}

/// The bytes of the masked LRH.
const MASKED_LRH: [u8; 8] = [0xFF; 8];

/// Where the pieces of a RoCEv2 packet live inside an IPv4 packet.
struct Layout {
    ip_hl: usize,
    /// Offset of the ICRC (end of the covered bytes).
    icrc_at: usize,
}

fn layout(ipv4_packet: &[u8]) -> Result<Layout> {
    let ip = Ipv4Packet::new_checked(ipv4_packet)?;
    if ip.protocol() != protocol::UDP {
        return Err(WireError::Malformed("ICRC: IPv4 payload is not UDP"));
    }
    if ip.more_frags() || ip.frag_offset() != 0 {
        return Err(WireError::Unsupported("ICRC over an IPv4 fragment"));
    }
    let udp = UdpDatagram::new_checked(ip.payload())?;
    if usize::from(udp.len()) < UDP_HEADER_LEN + BTH_LEN + ICRC_LEN {
        return Err(WireError::Truncated);
    }
    let ip_hl = ip.header_len();
    Ok(Layout {
        ip_hl,
        icrc_at: ip_hl + usize::from(udp.len()) - ICRC_LEN,
    })
}

/// Computes the ICRC of a RoCEv2 packet given from its IPv4 header on; the
/// 4 bytes at the end of the UDP payload are the ICRC slot and are not read.
pub fn compute_icrc(ipv4_packet: &[u8]) -> Result<u32> {
    let l = layout(ipv4_packet)?;
    // The masked headers and the start of the rest go through one small
    // stack buffer: a few short CRC updates cost more than their bytes, and
    // a large buffer costs its zeroing.
    let mut buf = [0u8; 128];
    let mut n = 0;
    buf[..MASKED_LRH.len()].copy_from_slice(&MASKED_LRH);
    n += MASKED_LRH.len();

    // IHL is at most 15, so the header fits in 60 bytes.
    let ip_hdr = &mut buf[n..n + l.ip_hl];
    ip_hdr.copy_from_slice(&ipv4_packet[..l.ip_hl]);
    ip_hdr[1] = 0xFF; // TOS: DSCP and ECN change hop by hop
    ip_hdr[8] = 0xFF; // TTL
    ip_hdr[10] = 0xFF; // header checksum follows TTL
    ip_hdr[11] = 0xFF;
    n += l.ip_hl;

    let udp_hdr = &mut buf[n..n + UDP_HEADER_LEN];
    udp_hdr.copy_from_slice(&ipv4_packet[l.ip_hl..l.ip_hl + UDP_HEADER_LEN]);
    udp_hdr[6] = 0xFF; // checksum: may be added or removed in flight
    udp_hdr[7] = 0xFF;
    n += UDP_HEADER_LEN;

    let bth_at = l.ip_hl + UDP_HEADER_LEN;
    let bth = &mut buf[n..n + BTH_LEN];
    bth.copy_from_slice(&ipv4_packet[bth_at..bth_at + BTH_LEN]);
    bth[4] = 0xFF; // Resv8a: FECN/BECN in IBA, variant
    n += BTH_LEN;

    let rest = &ipv4_packet[bth_at + BTH_LEN..l.icrc_at];
    let head = rest.len().min(buf.len() - n);
    buf[n..n + head].copy_from_slice(&rest[..head]);
    n += head;
    let mut digest = crc32();
    digest.update(&buf[..n]);
    digest.update(&rest[head..]);
    Ok(digest.finalize())
}

/// The ICRC stored in a RoCEv2 IPv4 packet.
pub fn stored_icrc(ipv4_packet: &[u8]) -> Result<u32> {
    let l = layout(ipv4_packet)?;
    let b = &ipv4_packet[l.icrc_at..l.icrc_at + ICRC_LEN];
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Computes the ICRC and writes it into its slot; returns the value.
pub fn fill_icrc(ipv4_packet: &mut [u8]) -> Result<u32> {
    let l = layout(ipv4_packet)?;
    let c = compute_icrc(ipv4_packet)?;
    ipv4_packet[l.icrc_at..l.icrc_at + ICRC_LEN].copy_from_slice(&c.to_le_bytes());
    Ok(c)
}

/// `Ok(())` when the stored ICRC is right, `BadChecksum` when not.
pub fn verify_icrc(ipv4_packet: &[u8]) -> Result<()> {
    if compute_icrc(ipv4_packet)? == stored_icrc(ipv4_packet)? {
        Ok(())
    } else {
        Err(WireError::BadChecksum)
    }
}

fn ipv4_range(frame: &[u8]) -> Result<core::ops::Range<usize>> {
    let eth = EthernetFrame::new_checked(frame)?;
    if eth.ethertype() != ethertype::IPV4 {
        return Err(WireError::Unsupported("ICRC: frame is not IPv4"));
    }
    Ok(eth.header_len()..frame.len())
}

/// [`compute_icrc`] for a whole Ethernet frame (tagged or not, no FCS).
pub fn compute_frame_icrc(frame: &[u8]) -> Result<u32> {
    compute_icrc(&frame[ipv4_range(frame)?])
}

/// [`fill_icrc`] for a whole Ethernet frame.
pub fn fill_frame_icrc(frame: &mut [u8]) -> Result<u32> {
    let r = ipv4_range(frame)?;
    fill_icrc(&mut frame[r])
}

/// [`verify_icrc`] for a whole Ethernet frame.
pub fn verify_frame_icrc(frame: &[u8]) -> Result<()> {
    verify_icrc(&frame[ipv4_range(frame)?])
}
