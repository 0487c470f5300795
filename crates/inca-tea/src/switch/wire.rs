//! Byte formats the TEA switch emits and reads (spec §4.2, §4.3): the RoCEv2
//! request headers the LookupRequestor prepends, the TEA shim, the fields the
//! parser extension reads from responses, the packet generator's port-down
//! packet, and the digests sent to the CPU.

use std::net::Ipv4Addr;

use inca_switch::PortId;
use inca_wire::pktgen::{PortDownHeaderRepr, PORT_DOWN_HEADER_LEN};
use inca_wire::MacAddr;

use super::config::{REQUEST_HEADERS, SHIM_BYTES};

/// The shim's magic byte.
pub const SHIM_MAGIC: u8 = 0xA5;
/// Shim flag: the secondary replica was used.
pub const SHIM_REPLICA: u8 = 0x01;
/// Shim flag: the READ carried the packet as a trailer.
pub const SHIM_TRAILER: u8 = 0x02;
/// Shim flag [our choice]: this lookup is the redo of one whose READ
/// response came back too late to be used (at most one redo per packet).
pub const SHIM_REDO: u8 = 0x04;
/// DSCP 26 << 2, ECN 0 (spec §4.1).
pub const ROCE_TOS: u8 = 0x68;
/// UDP port of the agent protocol (spec §4.3, carried in UDP here).
pub const AGENT_PORT: u16 = 7470;
/// EtherType of the packet generator's port-down packets.
pub const PORT_DOWN_ETHERTYPE: u16 = 0x9001;
/// RDMA WRITE ONLY.
pub const OP_WRITE_ONLY: u8 = 0x0A;
/// RDMA READ REQUEST.
pub const OP_READ_REQUEST: u8 = 0x0C;
/// READ RESPONSE ONLY.
pub const OP_READ_RESPONSE_ONLY: u8 = 0x10;
/// ACKNOWLEDGE.
pub const OP_ACK: u8 = 0x11;

/// The TEA shim (spec §4.2): first 8 bytes of a scratchpad.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shim {
    /// Flags ([`SHIM_REPLICA`], [`SHIM_TRAILER`], [`SHIM_REDO`]).
    pub flags: u8,
    /// The port the packet arrived on.
    pub orig_port: PortId,
    /// Switch time of the request, ns mod 2^32.
    pub issue_ts: u32,
}

impl Shim {
    /// The 8 wire bytes.
    pub fn bytes(&self) -> [u8; SHIM_BYTES] {
        let mut b = [0u8; SHIM_BYTES];
        b[0] = SHIM_MAGIC;
        b[1] = self.flags;
        b[2..4].copy_from_slice(&self.orig_port.to_be_bytes());
        b[4..8].copy_from_slice(&self.issue_ts.to_be_bytes());
        b
    }

    /// Reads a shim; `None` without the magic byte.
    pub fn parse(b: &[u8]) -> Option<Shim> {
        let b = b.get(..SHIM_BYTES)?;
        (b[0] == SHIM_MAGIC).then(|| Shim {
            flags: b[1],
            orig_port: u16::from_be_bytes([b[2], b[3]]),
            issue_ts: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        })
    }
}

/// Everything that varies between two TEA requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Switch RDMA MAC / IP.
    pub src_mac: MacAddr,
    /// Switch RDMA IP.
    pub src_ip: Ipv4Addr,
    /// Server MAC.
    pub dst_mac: MacAddr,
    /// Server IP.
    pub dst_ip: Ipv4Addr,
    /// UDP source port (0xC000 | qp_idx).
    pub sport: u16,
    /// Server QPN.
    pub dest_qp: u32,
    /// OpCode.
    pub opcode: u8,
    /// AckReq bit.
    pub ack_req: bool,
    /// PSN (24 bits).
    pub psn: u32,
    /// PadCnt.
    pub pad: u8,
    /// RETH virtual address.
    pub va: u64,
    /// RETH R_Key.
    pub rkey: u32,
    /// RETH DMA length.
    pub dma_len: u32,
    /// Payload bytes after the RETH, pad included (not the ICRC).
    pub payload_len: usize,
}

impl Request {
    /// Eth / IPv4 / UDP / BTH / RETH (74 bytes), IPv4 checksum filled, UDP
    /// checksum 0; the ICRC is appended later by the deparser extern.
    pub fn headers(&self) -> [u8; REQUEST_HEADERS] {
        let mut h = [0u8; REQUEST_HEADERS];
        h[0..6].copy_from_slice(&self.dst_mac);
        h[6..12].copy_from_slice(&self.src_mac);
        h[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip_len = (20 + 8 + 12 + 16 + self.payload_len + 4) as u16;
        let ip = &mut h[14..34];
        ip[0] = 0x45;
        ip[1] = ROCE_TOS;
        ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
        ip[6] = 0x40; // DF
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&self.src_ip.octets());
        ip[16..20].copy_from_slice(&self.dst_ip.octets());
        let sum = inca_wire::checksum::checksum(ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        let udp = &mut h[34..42];
        udp[0..2].copy_from_slice(&self.sport.to_be_bytes());
        udp[2..4].copy_from_slice(&inca_wire::roce::ROCEV2_UDP_PORT.to_be_bytes());
        udp[4..6].copy_from_slice(&(ip_len - 20).to_be_bytes());
        let bth = &mut h[42..54];
        bth[0] = self.opcode;
        bth[1] = (self.pad & 3) << 4;
        bth[2..4].copy_from_slice(&0xFFFFu16.to_be_bytes());
        bth[5..8].copy_from_slice(&(self.dest_qp & 0xFF_FFFF).to_be_bytes()[1..]);
        bth[8] = if self.ack_req { 0x80 } else { 0 };
        bth[9..12].copy_from_slice(&(self.psn & 0xFF_FFFF).to_be_bytes()[1..]);
        let reth = &mut h[54..70];
        reth[0..8].copy_from_slice(&self.va.to_be_bytes());
        reth[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        reth[12..16].copy_from_slice(&self.dma_len.to_be_bytes());
        h
    }
}

/// The RoCE fields of an incoming RDMA packet addressed to the switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RdmaIn {
    /// OpCode.
    pub opcode: u8,
    /// DestQP (the switch's pseudo QPN).
    pub dest_qp: u32,
    /// PSN.
    pub psn: u32,
    /// PadCnt.
    pub pad: u8,
    /// UDP length.
    pub udp_len: u16,
    /// AETH syndrome, if the opcode carries one.
    pub syndrome: u8,
}

impl RdmaIn {
    /// Reads BTH (+AETH) at `at` (the UDP payload) of `h`; `None` if short.
    pub fn parse(h: &[u8], udp_at: usize) -> Option<RdmaIn> {
        let udp = h.get(udp_at..udp_at + 8)?;
        let bth = h.get(udp_at + 8..udp_at + 20)?;
        let opcode = bth[0];
        let syndrome = match opcode {
            0x0D | 0x0F | 0x10 | 0x11 => *h.get(udp_at + 20)?,
            _ => 0,
        };
        Some(RdmaIn {
            opcode,
            dest_qp: u32::from_be_bytes([0, bth[5], bth[6], bth[7]]),
            psn: u32::from_be_bytes([0, bth[9], bth[10], bth[11]]),
            pad: (bth[1] >> 4) & 3,
            udp_len: u16::from_be_bytes([udp[4], udp[5]]),
            syndrome,
        })
    }
}

/// The frame the packet generator emits when `port` goes down (60 bytes).
pub fn port_down_template(switch_mac: MacAddr, port: PortId) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&switch_mac);
    f[6..12].copy_from_slice(&switch_mac);
    f[12..14].copy_from_slice(&PORT_DOWN_ETHERTYPE.to_be_bytes());
    f[14] = 1; // app_id
    f[16..18].copy_from_slice(&port.to_be_bytes());
    f
}

/// The port a generated port-down packet names: the switch puts Tofino's
/// port-down header ([`inca_wire::pktgen`]) in front of the template, and
/// the packet counts only if the template behind it is TEA's and names the
/// same port (so no other frame is taken for one).
pub fn port_down_port(frame: &[u8]) -> Option<PortId> {
    let h = PortDownHeaderRepr::parse(frame).ok()?;
    let t = frame.get(PORT_DOWN_HEADER_LEN + 12..PORT_DOWN_HEADER_LEN + 18)?;
    let ours = u16::from_be_bytes([t[0], t[1]]) == PORT_DOWN_ETHERTYPE
        && t[2] == 1
        && u16::from_be_bytes([t[4], t[5]]) == h.port;
    ours.then_some(h.port)
}

/// What the data plane tells the TEA control plane (spec §4.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TeaDigest {
    /// A hot key: `key | est u16 | bucket u32`.
    HotKey {
        /// The key.
        key: Vec<u8>,
        /// Its sketch estimate.
        est: u16,
        /// Its bucket.
        bucket: u32,
    },
    /// A NAK report: `qp_idx u16 | syndrome u8 | psn u24 | ts u32`.
    Nak {
        /// The QP.
        qp: u16,
        /// The AETH syndrome.
        syndrome: u8,
        /// The PSN the NAK carried.
        psn: u32,
        /// Switch time, ns mod 2^32.
        ts: u32,
    },
    /// A response opcode TEA never asks for (multi-packet READ).
    BadOpcode {
        /// The QP.
        qp: u16,
        /// The opcode.
        opcode: u8,
    },
    /// An entry a bypassing packet asks the NF's control plane to insert.
    Learn {
        /// Key.
        key: Vec<u8>,
        /// Value.
        value: Vec<u8>,
    },
}

impl TeaDigest {
    /// The spec §4.3 byte form of a hot-key or NAK digest (others: empty).
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            TeaDigest::HotKey { key, est, bucket } => {
                let mut b = key.clone();
                b.extend_from_slice(&est.to_be_bytes());
                b.extend_from_slice(&bucket.to_be_bytes());
                b
            }
            TeaDigest::Nak {
                qp,
                syndrome,
                psn,
                ts,
            } => {
                let mut b = qp.to_be_bytes().to_vec();
                b.push(*syndrome);
                b.extend_from_slice(&psn.to_be_bytes()[1..]);
                b.extend_from_slice(&ts.to_be_bytes());
                b
            }
            _ => Vec::new(),
        }
    }
}

/// True if `a` is newer than `b` in 24-bit serial arithmetic.
pub fn psn_newer(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b) & 0xFF_FFFF;
    d != 0 && d < (1 << 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn base() -> Request {
        Request {
            src_mac: [2, 0, 0, 0, 0x0a, 0xfe],
            src_ip: Ipv4Addr::new(10, 0, 0, 254),
            dst_mac: [2, 0, 0, 0, 0x0a, 1],
            dst_ip: Ipv4Addr::new(10, 0, 0, 1),
            sport: 0xC001,
            dest_qp: 0x123,
            opcode: OP_READ_REQUEST,
            ack_req: true,
            psn: 0x10,
            pad: 0,
            va: 0x0000_7f00_0000_0000,
            rkey: 0x1234,
            dma_len: 256,
            payload_len: 0,
        }
    }

    #[test]
    fn t2_strict_read_matches_the_spec_vector() {
        let mut f = base().headers().to_vec();
        f.extend_from_slice(&[0; 4]);
        inca_wire::icrc::fill_frame_icrc(&mut f).unwrap();
        assert_eq!(f, hex("020000000a01020000000afe08004568003c000040004011254b0a0000fe0a000001c00112b7002800000c00ffff000001238000001000007f000000000000001234000001006eab05b2"));
    }

    #[test]
    fn t3_write_only_matches_the_spec_vector() {
        let r = Request {
            opcode: OP_WRITE_ONLY,
            ack_req: false,
            psn: 0x0F,
            pad: 2,
            va: 0x0000_7f00_0000_00e0,
            dma_len: 6,
            payload_len: 8,
            ..base()
        };
        let mut f = r.headers().to_vec();
        f.extend_from_slice(&[1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0]);
        inca_wire::icrc::fill_frame_icrc(&mut f).unwrap();
        assert_eq!(f, hex("020000000a01020000000afe08004568004400004000401125430a0000fe0a000001c00112b7003000000a20ffff000001230000000f00007f00000000e0000012340000000601020304050600008abb1574"));
    }

    #[test]
    fn shim_round_trips_and_serial_compare() {
        let s = Shim {
            flags: 3,
            orig_port: 7,
            issue_ts: 0xdead_beef,
        };
        assert_eq!(Shim::parse(&s.bytes()), Some(s));
        assert_eq!(Shim::parse(&[0; 8]), None);
        assert!(psn_newer(1, 0));
        assert!(psn_newer(0, 0xFF_FFFF));
        assert!(!psn_newer(5, 5));
        assert!(!psn_newer(0xFF_FFFF, 0));
    }
}
