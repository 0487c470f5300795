//! Known-answer tests: RoCEv2 frames from docs/specs test vectors (T1 is a
//! capture from a real RoCE NIC) and an independent bit-by-bit ICRC modelled
//! on the Linux rxe driver's procedure.

use std::net::Ipv4Addr;

use inca_wire::icrc::stored_icrc;
use inca_wire::*;

/// T1: a CNP captured from a real RoCE NIC; its ICRC is `82 fd 00 2a`.
const T1: &str = "e41d2dab2bc27cfe90643b32080045c2003c718c4000401191610a0011010a001201000012b7002800008100ffff40000118000000000000000000000000000000000000000082fd002a";
/// T2: TEA READ REQUEST in strict mode.
const T2: &str = "020000000a01020000000afe08004568003c000040004011254b0a0000fe0a000001c00112b7002800000c00ffff000001238000001000007f000000000000001234000001006eab05b2";
/// T3: TEA WRITE ONLY with a 6-byte payload and 2 pad bytes.
const T3: &str = "020000000a01020000000afe08004568004400004000401125430a0000fe0a000001c00112b7003000000a20ffff000001230000000f00007f00000000e0000012340000000601020304050600008abb1574";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Raw reflected CRC-32 register update, no pre/post inversion (as Linux
/// `crc32_le`), written independently of the `crc` crate.
fn crc32_le(mut reg: u32, data: &[u8]) -> u32 {
    for &b in data {
        reg ^= u32::from(b);
        for _ in 0..8 {
            reg = if reg & 1 != 0 {
                (reg >> 1) ^ 0xEDB8_8320
            } else {
                reg >> 1
            };
        }
    }
    reg
}

/// rxe's method: seed the register with the state after eight 0xFF bytes
/// (0xDEBB20E3), OR ones into the masked fields of a header copy, invert at the end.
fn rxe_style_icrc(frame: &[u8]) -> u32 {
    assert_eq!(crc32_le(0xFFFF_FFFF, &[0xFF; 8]), 0xDEBB_20E3);
    let ip = &frame[14..];
    let ihl = usize::from(ip[0] & 0x0F) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let mut hdr = ip[..ihl + 8 + 12].to_vec();
    hdr[1] = 0xFF;
    hdr[8] = 0xFF;
    hdr[10..12].copy_from_slice(&[0xFF, 0xFF]);
    hdr[ihl + 6..ihl + 8].copy_from_slice(&[0xFF, 0xFF]);
    // rxe: bth->qpn |= ~BTH_QPN_MASK, i.e. the byte before the 24-bit QPN.
    hdr[ihl + 8 + 4] = 0xFF;
    let reg = crc32_le(0xDEBB_20E3, &hdr);
    !crc32_le(reg, &ip[ihl + 8 + 12..total - 4])
}

#[test]
fn t1_real_capture_icrc() {
    let f = hex(T1);
    let want = u32::from_le_bytes([0x82, 0xfd, 0x00, 0x2a]);
    assert_eq!(compute_frame_icrc(&f).unwrap(), want);
    assert_eq!(rxe_style_icrc(&f), want);
    verify_frame_icrc(&f).unwrap();
    assert_eq!(stored_icrc(&f[14..]).unwrap(), want);
}

#[test]
fn t2_t3_icrc_and_independent_check() {
    for (v, tail) in [
        (T2, [0x6e, 0xab, 0x05, 0xb2]),
        (T3, [0x8a, 0xbb, 0x15, 0x74]),
    ] {
        let f = hex(v);
        let c = compute_frame_icrc(&f).unwrap();
        assert_eq!(c.to_le_bytes(), tail);
        assert_eq!(rxe_style_icrc(&f), c);
    }
}

#[test]
fn masked_fields_do_not_change_icrc_others_do() {
    let f = hex(T3);
    let base = compute_frame_icrc(&f).unwrap();
    // TOS, TTL, IP checksum, UDP checksum, BTH resv8a.
    for off in [15, 22, 24, 25, 40, 41, 46] {
        let mut g = f.clone();
        g[off] ^= 0x5A;
        assert_eq!(
            compute_frame_icrc(&g).unwrap(),
            base,
            "byte {off} should be masked"
        );
    }
    // Ethernet addresses are outside the ICRC too.
    let mut g = f.clone();
    g[0] ^= 1;
    assert_eq!(compute_frame_icrc(&g).unwrap(), base);
    // Everything else in IP/UDP/BTH/RETH/payload is covered.
    for off in (14..f.len() - 4).filter(|o| ![15, 22, 24, 25, 40, 41, 46].contains(o)) {
        let mut g = f.clone();
        g[off] ^= 0x01;
        let r = compute_frame_icrc(&g);
        assert!(r != Ok(base), "byte {off} should be covered");
    }
    let mut g = f.clone();
    let n = g.len();
    g[n - 1] ^= 1;
    assert_eq!(verify_frame_icrc(&g), Err(WireError::BadChecksum));
}

#[test]
fn vlan_tag_does_not_change_icrc() {
    let f = hex(T2);
    let mut tagged = f[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x60, 0x0A]);
    tagged.extend_from_slice(&f[12..]);
    assert_eq!(
        compute_frame_icrc(&tagged).unwrap(),
        compute_frame_icrc(&f).unwrap()
    );
    verify_frame_icrc(&tagged).unwrap();
}

fn tea_endpoints() -> Endpoints {
    let mut ep = Endpoints::new(
        [0x02, 0, 0, 0, 0x0a, 0xfe],
        Ipv4Addr::new(10, 0, 0, 254),
        [0x02, 0, 0, 0, 0x0a, 0x01],
        Ipv4Addr::new(10, 0, 0, 1),
    );
    ep.tos = 0x68;
    ep
}

#[test]
fn builder_reproduces_t2_and_t3_byte_for_byte() {
    let b = RoceFrameBuilder::new(tea_endpoints(), 0xC001, 0x000123);
    let t2 = b
        .read_request(
            0x10,
            RethRepr {
                virtual_addr: 0x0000_7f00_0000_0000,
                rkey: 0x1234,
                dma_len: 256,
            },
            &[],
        )
        .unwrap();
    assert_eq!(t2, hex(T2));
    let t3 = b
        .write_only(
            0x0F,
            false,
            RethRepr {
                virtual_addr: 0x0000_7f00_0000_00e0,
                rkey: 0x1234,
                dma_len: 6,
            },
            &[1, 2, 3, 4, 5, 6],
        )
        .unwrap();
    assert_eq!(t3, hex(T3));
}

#[test]
fn parse_t3_fields() {
    let f = hex(T3);
    let eth = EthernetFrame::new_checked(&f[..]).unwrap();
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert!(ip.verify_checksum());
    let udp = UdpDatagram::new_checked(ip.payload()).unwrap();
    assert_eq!(udp.dst_port(), ROCEV2_UDP_PORT);
    let p = RocePacket::new_checked(udp.payload()).unwrap();
    let r = RoceRepr::parse(&p).unwrap();
    assert_eq!(r.bth.opcode, Opcode::RdmaWriteOnly);
    assert_eq!(r.bth.dest_qp, 0x123);
    assert_eq!(r.bth.psn, 0x0F);
    assert_eq!(r.bth.pad_count, 2);
    assert_eq!(r.reth.unwrap().virtual_addr, 0x7f00000000e0);
    assert_eq!(r.payload, &[1, 2, 3, 4, 5, 6]);
    assert_eq!(p.pad(), &[0, 0]);
    assert_eq!(r.icrc, compute_frame_icrc(&f).unwrap());
}

#[test]
fn udp_checksum_option_keeps_icrc_valid() {
    let b = RoceFrameBuilder::new(tea_endpoints(), 0xC001, 7).with_udp_checksum(true);
    let f = b
        .read_response(
            ReadResponsePart::Only,
            3,
            Some(AethRepr {
                syndrome: 0x1F,
                msn: 9,
            }),
            b"hello",
        )
        .unwrap();
    verify_frame_icrc(&f).unwrap();
    let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
    let udp = UdpDatagram::new_checked(ip.payload()).unwrap();
    assert_ne!(udp.checksum(), 0);
    assert!(udp.verify_checksum(ip.src_addr(), ip.dst_addr()));
}

#[test]
fn builder_rejects_mismatched_extension_headers() {
    let b = RoceFrameBuilder::new(tea_endpoints(), 1, 2);
    let aeth = AethRepr {
        syndrome: 0x1F,
        msn: 0,
    };
    assert!(b
        .read_response(ReadResponsePart::Middle, 0, Some(aeth), &[])
        .is_err());
    assert!(b
        .read_response(ReadResponsePart::Only, 0, None, &[])
        .is_err());
    assert!(matches!(
        RoceFrameBuilder::new(tea_endpoints(), 1, 1 << 24).ack(0, aeth),
        Err(WireError::OutOfRange(_))
    ));
}

#[test]
fn tcp_frame_known_checksum() {
    // SYN 10.0.0.1:40000 -> 10.0.0.2:80, seq 1, window 65535, MSS option.
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::new(10, 0, 0, 1),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(10, 0, 0, 2),
    );
    let tcp = TcpRepr {
        src_port: 40000,
        dst_port: 80,
        seq: 1,
        ack: 0,
        flags: TcpFlags::SYN,
        window: 65535,
        urgent: 0,
        options: &[2, 4, 0x05, 0xb4],
        payload: &[],
    };
    let f = build_tcp_frame(&ep, &tcp).unwrap();
    let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
    assert!(ip.verify_checksum());
    let seg = TcpSegment::new_checked(ip.payload()).unwrap();
    // Checksum worked by hand: pseudo 0a00+0001+0a00+0002+0006+0018,
    // header 9c40+0050+0000+0001+0000+0000+6002+ffff+0000+0204+05b4.
    assert_eq!(seg.checksum(), 0xe792);
    assert_eq!(seg.options(), &[2, 4, 0x05, 0xb4]);
    assert_eq!(
        TcpRepr::parse(&seg, ip.src_addr(), ip.dst_addr()).unwrap(),
        tcp
    );
}

#[test]
fn nat_rewrite_with_incremental_update() {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::new(192, 168, 1, 10),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(8, 8, 8, 8),
    );
    let mut f = build_udp_frame(&ep, 5353, 53, b"query", true).unwrap();
    let new_src = Ipv4Addr::new(203, 0, 113, 7);
    let old = u32::from(ep.src_ip);
    let mut ip = Ipv4Packet::new_checked(&mut f[14..]).unwrap();
    let ipc = checksum::update_u32(ip.checksum(), old, u32::from(new_src));
    ip.set_src_addr(new_src);
    ip.set_checksum(ipc);
    assert!(ip.verify_checksum());
    let hl = ip.header_len();
    let mut udp = UdpDatagram::new_checked(&mut f[14 + hl..]).unwrap();
    let uc = checksum::update_u32(udp.checksum(), old, u32::from(new_src));
    udp.set_checksum(uc);
    assert!(udp.verify_checksum(new_src, ep.dst_ip));
}
