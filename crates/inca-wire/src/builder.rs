//! Whole-frame builders: Ethernet + IPv4 + UDP/TCP, and RoCEv2 requests and
//! responses with correct IPv4 checksum, optional UDP checksum and ICRC.

use std::net::Ipv4Addr;

use crate::error::Result;
use crate::ethernet::{ethertype, EthernetRepr, MacAddr, VlanTag};
use crate::icrc;
use crate::ipv4::{protocol, Ipv4Repr};
use crate::roce::{AethRepr, BthRepr, Opcode, RethRepr, RoceRepr, DEFAULT_PKEY, ROCEV2_UDP_PORT};
use crate::tcp::TcpRepr;
use crate::udp::UdpRepr;

/// Layer-2 and layer-3 addressing plus the IPv4 fields a sender chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Endpoints {
    /// Source MAC.
    pub src_mac: MacAddr,
    /// Destination MAC.
    pub dst_mac: MacAddr,
    /// Source IPv4 address.
    pub src_ip: Ipv4Addr,
    /// Destination IPv4 address.
    pub dst_ip: Ipv4Addr,
    /// Optional 802.1Q tag.
    pub vlan: Option<VlanTag>,
    /// TTL (default 64).
    pub ttl: u8,
    /// DSCP << 2 | ECN (default 0).
    pub tos: u8,
    /// IPv4 identification (default 0).
    pub ident: u16,
    /// Don't-fragment (default true, as RoCE NICs send).
    pub dont_frag: bool,
}

impl Endpoints {
    /// Untagged, TTL 64, TOS 0, ID 0, DF set.
    pub fn new(src_mac: MacAddr, src_ip: Ipv4Addr, dst_mac: MacAddr, dst_ip: Ipv4Addr) -> Self {
        Endpoints {
            src_mac,
            dst_mac,
            src_ip,
            dst_ip,
            vlan: None,
            ttl: 64,
            tos: 0,
            ident: 0,
            dont_frag: true,
        }
    }

    /// The same endpoints seen from the other side (for responses).
    pub fn reversed(&self) -> Self {
        Endpoints {
            src_mac: self.dst_mac,
            dst_mac: self.src_mac,
            src_ip: self.dst_ip,
            dst_ip: self.src_ip,
            ..*self
        }
    }
}

/// Builds Ethernet + IPv4 around an L4 segment of `l4_len` bytes written by
/// `fill_l4`; returns the frame.
fn build_ipv4_frame(
    ep: &Endpoints,
    proto: u8,
    l4_len: usize,
    fill_l4: impl FnOnce(&mut [u8]) -> Result<()>,
) -> Result<Vec<u8>> {
    let eth = EthernetRepr {
        dst: ep.dst_mac,
        src: ep.src_mac,
        vlan: ep.vlan,
        ethertype: ethertype::IPV4,
    };
    let ip = Ipv4Repr {
        src: ep.src_ip,
        dst: ep.dst_ip,
        protocol: proto,
        payload_len: l4_len,
        ttl: ep.ttl,
        tos: ep.tos,
        ident: ep.ident,
        dont_frag: ep.dont_frag,
        more_frags: false,
        frag_offset: 0,
    };
    let (eh, ih) = (eth.buffer_len(), ip.buffer_len());
    let mut frame = vec![0u8; eh + ih + l4_len];
    eth.emit(&mut frame)?;
    ip.emit(&mut frame[eh..])?;
    fill_l4(&mut frame[eh + ih..])?;
    Ok(frame)
}

/// An Ethernet/IPv4/UDP frame; the UDP checksum is filled when `udp_checksum`.
pub fn build_udp_frame(
    ep: &Endpoints,
    src_port: u16,
    dst_port: u16,
    payload: &[u8],
    udp_checksum: bool,
) -> Result<Vec<u8>> {
    let udp = UdpRepr { src_port, dst_port };
    build_ipv4_frame(ep, protocol::UDP, udp.buffer_len(payload.len()), |b| {
        udp.emit(b, payload, ep.src_ip, ep.dst_ip, udp_checksum)
    })
}

/// An Ethernet/IPv4/TCP frame with a correct TCP checksum.
pub fn build_tcp_frame(ep: &Endpoints, tcp: &TcpRepr<'_>) -> Result<Vec<u8>> {
    build_ipv4_frame(ep, protocol::TCP, tcp.buffer_len(), |b| {
        tcp.emit(b, ep.src_ip, ep.dst_ip)
    })
}

/// Which READ RESPONSE packet of a multi-packet response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadResponsePart {
    /// FIRST (0x0D), carries an AETH.
    First,
    /// MIDDLE (0x0E), no AETH.
    Middle,
    /// LAST (0x0F), carries an AETH.
    Last,
    /// ONLY (0x10), carries an AETH.
    Only,
}

impl ReadResponsePart {
    /// The BTH opcode.
    pub fn opcode(self) -> Opcode {
        match self {
            ReadResponsePart::First => Opcode::RdmaReadResponseFirst,
            ReadResponsePart::Middle => Opcode::RdmaReadResponseMiddle,
            ReadResponsePart::Last => Opcode::RdmaReadResponseLast,
            ReadResponsePart::Only => Opcode::RdmaReadResponseOnly,
        }
    }
}

/// Emits complete RoCEv2 frames for one queue pair:
/// Ethernet / IPv4 / UDP(dport 4791) / BTH (/ RETH | AETH) / payload / pad / ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoceFrameBuilder {
    /// Addressing and IPv4 fields.
    pub endpoints: Endpoints,
    /// UDP source port (RoCEv2 uses it for ECMP entropy).
    pub src_port: u16,
    /// Destination QP, 24 bits.
    pub dest_qp: u32,
    /// Partition key (default 0xFFFF).
    pub pkey: u16,
    /// Fill the UDP checksum; default false, sending 0 as RoCE NICs do.
    pub udp_checksum: bool,
    /// BTH solicited-event bit.
    pub solicited: bool,
}

impl RoceFrameBuilder {
    /// A builder with P_Key 0xFFFF, no UDP checksum, SE clear.
    pub fn new(endpoints: Endpoints, src_port: u16, dest_qp: u32) -> Self {
        RoceFrameBuilder {
            endpoints,
            src_port,
            dest_qp,
            pkey: DEFAULT_PKEY,
            udp_checksum: false,
            solicited: false,
        }
    }

    /// Chooses whether the UDP checksum is filled.
    pub fn with_udp_checksum(mut self, on: bool) -> Self {
        self.udp_checksum = on;
        self
    }

    /// The general form: any modelled opcode with the extension header it
    /// requires (`Malformed` otherwise). Pad bytes are added so the payload
    /// ends on a 4-byte boundary.
    pub fn build(
        &self,
        opcode: Opcode,
        psn: u32,
        ack_req: bool,
        reth: Option<RethRepr>,
        aeth: Option<AethRepr>,
        payload: &[u8],
    ) -> Result<Vec<u8>> {
        let bth = BthRepr {
            solicited: self.solicited,
            pad_count: RoceRepr::pad_for(payload.len()),
            pkey: self.pkey,
            ack_req,
            ..BthRepr::new(opcode, self.dest_qp, psn)
        };
        let roce = RoceRepr {
            bth,
            reth,
            aeth,
            payload,
            icrc: 0,
        };
        let mut roce_bytes = vec![0u8; roce.buffer_len()];
        roce.emit(&mut roce_bytes)?;
        let mut frame = build_udp_frame(
            &self.endpoints,
            self.src_port,
            ROCEV2_UDP_PORT,
            &roce_bytes,
            false,
        )?;
        // The ICRC masks the UDP checksum, so it can be computed first; the
        // UDP checksum then covers the final ICRC bytes.
        icrc::fill_frame_icrc(&mut frame)?;
        if self.udp_checksum {
            fill_udp_checksum(&mut frame, &self.endpoints)?;
        }
        Ok(frame)
    }

    /// RDMA WRITE ONLY (0x0A) with a RETH; A bit as given.
    pub fn write_only(
        &self,
        psn: u32,
        ack_req: bool,
        reth: RethRepr,
        payload: &[u8],
    ) -> Result<Vec<u8>> {
        self.build(
            Opcode::RdmaWriteOnly,
            psn,
            ack_req,
            Some(reth),
            None,
            payload,
        )
    }

    /// RDMA READ REQUEST (0x0C) with a RETH and A = 1. `trailer` is normally
    /// empty; non-empty only for TEA's trailer mode.
    pub fn read_request(&self, psn: u32, reth: RethRepr, trailer: &[u8]) -> Result<Vec<u8>> {
        self.build(
            Opcode::RdmaReadRequest,
            psn,
            true,
            Some(reth),
            None,
            trailer,
        )
    }

    /// RDMA READ RESPONSE FIRST/MIDDLE/LAST/ONLY. `aeth` must be `Some` except
    /// for MIDDLE, which has none.
    pub fn read_response(
        &self,
        part: ReadResponsePart,
        psn: u32,
        aeth: Option<AethRepr>,
        payload: &[u8],
    ) -> Result<Vec<u8>> {
        self.build(part.opcode(), psn, false, None, aeth, payload)
    }

    /// ACKNOWLEDGE (0x11) with an AETH and no payload.
    pub fn ack(&self, psn: u32, aeth: AethRepr) -> Result<Vec<u8>> {
        self.build(Opcode::Acknowledge, psn, false, None, Some(aeth), &[])
    }
}

fn fill_udp_checksum(frame: &mut [u8], ep: &Endpoints) -> Result<()> {
    let off = crate::ethernet::payload_offset(frame)?;
    let ip_hl = crate::ipv4::Ipv4Packet::new_checked(&frame[off..])?.header_len();
    let mut udp = crate::udp::UdpDatagram::new_checked(&mut frame[off + ip_hl..])?;
    udp.fill_checksum(ep.src_ip, ep.dst_ip);
    Ok(())
}
