//! The DRAM server's NIC against every rule of spec §5.3, with handmade
//! frames (the spec's vectors T2 and T3 among them) and hostile input, and
//! its agent's protocol through the whole device.

use std::net::Ipv4Addr;

use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output};
use inca_tea::server::agent_proto::{
    build_datagram, parse_udp, Body, CreateQp, ErrorCode, Message, QpState, Reply, Request,
    WriteEntry, AGENT_UDP_PORT,
};
use inca_tea::server::memory::{Access, FIRST_BASE_VA};
use inca_tea::server::nic::{DropReason, Nic, NicConfig, QPN_BASE};
use inca_tea::server::{DramServer, DramServerConfig};
use inca_wire::roce::syndrome;
use inca_wire::*;
use rand::SeedableRng;

const T2: &str = "020000000a01020000000afe08004568003c000040004011254b0a0000fe0a000001c00112b7002800000c00ffff000001238000001000007f000000000000001234000001006eab05b2";
const T3: &str = "020000000a01020000000afe08004568004400004000401125430a0000fe0a000001c00112b7003000000a20ffff000001230000000f00007f00000000e0000012340000000601020304050600008abb1574";

const SWITCH_MAC: MacAddr = [0x02, 0, 0, 0, 0x0a, 0xfe];
const SERVER_MAC: MacAddr = [0x02, 0, 0, 0, 0x0a, 0x01];
const SWITCH_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 254);
const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// qp_idx 0x23 gives QPN 0x123, the DestQP of T2 and T3.
const QP_IDX: u16 = 0x23;
const QPN: u32 = 0x123;
const SWITCH_QPN: u32 = 0x2301;
const RKEY: u32 = 0x1234;
const REGION_LEN: u64 = 1 << 20;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn to_server() -> Endpoints {
    Endpoints {
        tos: 0x68,
        ..Endpoints::new(SWITCH_MAC, SWITCH_IP, SERVER_MAC, SERVER_IP)
    }
}

fn requester() -> RoceFrameBuilder {
    RoceFrameBuilder::new(to_server(), 0xC001, QPN)
}

fn reth(va: u64, len: u32) -> RethRepr {
    RethRepr {
        virtual_addr: va,
        rkey: RKEY,
        dma_len: len,
    }
}

/// A NIC with one read/write region (base 0x7f0000000000, R_Key 0x1234) and
/// QP 0x123 in RTS expecting `init_psn`.
fn nic_with(cfg: NicConfig, init_psn: u32, pmtu: u16) -> Nic {
    let mut nic = Nic::new(cfg, SERVER_MAC, SERVER_IP, 0, 64 << 30, 0);
    let r = nic
        .memory_mut()
        .register_with_rkey(1, REGION_LEN, Access::READ_WRITE, RKEY)
        .unwrap();
    assert_eq!(r.base_va, FIRST_BASE_VA);
    let (qpn, state) = nic
        .create_qp(&CreateQp {
            qp_idx: QP_IDX,
            remote_qpn: SWITCH_QPN,
            remote_mac: SWITCH_MAC,
            remote_ip: SWITCH_IP,
            init_psn,
            pmtu,
            max_rd_atomic: 16,
        })
        .unwrap();
    assert_eq!((qpn, state), (QPN, QpState::Rts));
    nic
}

fn nic(init_psn: u32) -> Nic {
    nic_with(NicConfig::default(), init_psn, 4096)
}

/// Feeds one frame and returns the frames sent, with their times.
fn feed(nic: &mut Nic, now: Nanos, frame: &[u8]) -> Vec<(Nanos, Vec<u8>)> {
    let mut out = Vec::new();
    nic.handle_roce(now, frame, &mut out);
    out.into_iter()
        .map(|o| match o {
            Output::Transmit { at, frame, .. } => (at, frame),
            other => panic!("NIC output {other:?}"),
        })
        .collect()
}

/// A parsed response: (opcode, DestQP, PSN, AETH, payload).
#[derive(Debug, PartialEq, Eq)]
struct Resp {
    op: Opcode,
    dest_qp: u32,
    psn: u32,
    aeth: Option<(u8, u32)>,
    payload: Vec<u8>,
}

fn parse(frame: &[u8]) -> Resp {
    verify_frame_icrc(frame).expect("NIC frames carry a correct ICRC");
    let d = parse_udp(frame).expect("UDP");
    assert_eq!((d.src_ip, d.dst_ip), (SERVER_IP, SWITCH_IP));
    assert_eq!((d.src_mac, d.dst_mac), (SERVER_MAC, SWITCH_MAC));
    assert_eq!(d.dst_port, ROCEV2_UDP_PORT);
    let p = RocePacket::new_checked(d.payload).unwrap();
    let r = RoceRepr::parse(&p).unwrap();
    Resp {
        op: r.bth.opcode,
        dest_qp: r.bth.dest_qp,
        psn: r.bth.psn,
        aeth: r.aeth.map(|a| (a.syndrome, a.msn)),
        payload: r.payload.to_vec(),
    }
}

fn read_mem(nic: &Nic, va: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0; len];
    nic.memory().read(va, &mut b);
    b
}

/// A snapshot of the whole region, to show a request left it untouched.
fn region_bytes(nic: &Nic) -> Vec<u8> {
    read_mem(nic, FIRST_BASE_VA, REGION_LEN as usize)
}

fn drops(nic: &Nic, r: DropReason) -> u64 {
    nic.stats().drops.get(&r).copied().unwrap_or(0)
}

fn write_frame(psn: u32, va: u64, data: &[u8]) -> Vec<u8> {
    requester()
        .write_only(psn, false, reth(va, data.len() as u32), data)
        .unwrap()
}

fn read_frame(psn: u32, va: u64, len: u32) -> Vec<u8> {
    requester().read_request(psn, reth(va, len), &[]).unwrap()
}

/// Re-computes IPv4 checksum and ICRC after a test edited a frame.
fn refresh(frame: &mut [u8]) {
    let mut ip = Ipv4Packet::new_unchecked(&mut frame[14..34]);
    ip.fill_checksum();
    fill_frame_icrc(frame).unwrap();
}

fn assert_broken(nic: &mut Nic, out: &[(Nanos, Vec<u8>)], code: u8, psn: u32) {
    assert_eq!(out.len(), 1, "exactly one NAK");
    let r = parse(&out[0].1);
    assert_eq!(r.op, Opcode::Acknowledge);
    assert_eq!(r.psn, psn);
    assert_eq!(r.aeth.unwrap().0, code);
    assert_eq!(r.dest_qp, SWITCH_QPN);
    assert_eq!(nic.qp_status(QP_IDX, 0).unwrap().state, QpState::Error);
}

// ---------------------------------------------------------------- vectors

#[test]
fn t3_write_then_t2_read_returns_the_written_bytes_as_one_response() {
    let mut nic = nic(0x0F);
    let out = feed(&mut nic, 1_000, &hex(T3));
    assert!(out.is_empty(), "T3 has AckReq = 0: no ACK");
    assert_eq!(read_mem(&nic, 0x7f00_0000_00e0, 6), [1, 2, 3, 4, 5, 6]);

    let out = feed(&mut nic, 2_000, &hex(T2));
    assert_eq!(out.len(), 1);
    let r = parse(&out[0].1);
    assert_eq!(r.op, Opcode::RdmaReadResponseOnly);
    assert_eq!(r.dest_qp, SWITCH_QPN);
    assert_eq!(r.psn, 0x10);
    assert_eq!(r.aeth, Some((0x1F, 2)), "MSN counts the WRITE and the READ");
    let mut want = vec![0u8; 256];
    want[0xe0..0xe6].copy_from_slice(&[1, 2, 3, 4, 5, 6]);
    assert_eq!(r.payload, want);

    // Byte for byte what an independent builder makes of the same response:
    // the request's UDP source port, TOS 0x68, the QP's remote endpoint.
    let reference = RoceFrameBuilder::new(to_server().reversed(), 0xC001, SWITCH_QPN)
        .read_response(
            ReadResponsePart::Only,
            0x10,
            Some(AethRepr {
                syndrome: 0x1F,
                msn: 2,
            }),
            &want,
        )
        .unwrap();
    assert_eq!(out[0].1, reference);
    let s = nic.qp_status(QP_IDX, 2_000).unwrap();
    assert_eq!((s.epsn, s.msn), (0x11, 2));
}

#[test]
fn a_read_response_leaves_after_rx_dma_and_tx() {
    let mut nic = nic(0);
    let out = feed(&mut nic, 10_000, &read_frame(0, FIRST_BASE_VA, 65));
    // 350 RX + 450 DMA + 65 B at 6.5 GB/s (10 ns) + 200 TX.
    assert_eq!(out[0].0, 10_000 + 350 + 450 + 10 + 200);
    // The port sends in time order even when a later answer is quicker.
    let out2 = feed(&mut nic, 10_000, &read_frame(1, FIRST_BASE_VA, 0));
    assert!(out2[0].0 >= out[0].0);
}

// ---------------------------------------------------------------- rule 1

#[test]
fn rule1_a_qp_not_in_rtr_or_rts_drops_silently() {
    let mut nic = nic(0);
    // Break the QP with an invalid request, then send a good one.
    let bad = requester()
        .write_only(0, false, reth(FIRST_BASE_VA, 5), b"1234")
        .unwrap();
    assert_eq!(feed(&mut nic, 0, &bad).len(), 1);
    let before = region_bytes(&nic);
    let out = feed(&mut nic, 100, &write_frame(0, FIRST_BASE_VA, b"abcd"));
    assert!(out.is_empty());
    assert_eq!(drops(&nic, DropReason::QpNotReady), 1);
    assert_eq!(region_bytes(&nic), before);
    assert!(feed(&mut nic, 200, &read_frame(0, FIRST_BASE_VA, 4)).is_empty());

    // RESET_QP revives it with a new PSN and switch QPN.
    nic.reset_qp(QP_IDX, 100, 0x2302).unwrap();
    let out = feed(&mut nic, 300, &read_frame(100, FIRST_BASE_VA, 4));
    let r = parse(&out[0].1);
    assert_eq!(
        (r.op, r.dest_qp, r.psn),
        (Opcode::RdmaReadResponseOnly, 0x2302, 100)
    );
}

#[test]
fn unknown_qpn_is_dropped() {
    let mut nic = nic(0);
    let f = RoceFrameBuilder::new(to_server(), 0xC001, QPN + 1)
        .read_request(0, reth(FIRST_BASE_VA, 4), &[])
        .unwrap();
    assert!(feed(&mut nic, 0, &f).is_empty());
    assert_eq!(drops(&nic, DropReason::UnknownQp), 1);
}

// ---------------------------------------------------------------- rule 2

#[test]
fn rule2_bad_icrc_drops_silently_and_changes_nothing() {
    let mut nic = nic(0);
    let mut f = write_frame(0, FIRST_BASE_VA, b"evil");
    let n = f.len();
    f[n - 1] ^= 0x01;
    assert!(feed(&mut nic, 0, &f).is_empty());
    assert_eq!(drops(&nic, DropReason::BadIcrc), 1);
    assert_eq!(read_mem(&nic, FIRST_BASE_VA, 4), [0; 4]);
    // A payload bit flip is caught too, and the ePSN has not moved.
    let mut f = write_frame(0, FIRST_BASE_VA, b"evil");
    f[60] ^= 0x80;
    assert!(feed(&mut nic, 0, &f).is_empty());
    assert_eq!(nic.qp_status(QP_IDX, 0).unwrap().epsn, 0);
    assert_eq!(region_bytes(&nic), vec![0; REGION_LEN as usize]);

    // With the check off (a switch that sends zero ICRCs), it is accepted.
    let cfg = NicConfig {
        verify_icrc: false,
        ..NicConfig::default()
    };
    let mut lax = nic_with(cfg, 0, 4096);
    let mut f = write_frame(0, FIRST_BASE_VA, b"okay");
    let n = f.len();
    f[n - 4..].fill(0);
    assert!(feed(&mut lax, 0, &f).is_empty());
    assert_eq!(read_mem(&lax, FIRST_BASE_VA, 4), *b"okay");
}

// ---------------------------------------------------------------- rule 3

#[test]
fn rule3_a_psn_gap_gets_one_nak_until_the_expected_psn_arrives() {
    let mut nic = nic(10);
    let out = feed(&mut nic, 0, &write_frame(12, FIRST_BASE_VA, b"late"));
    assert_eq!(out.len(), 1);
    let r = parse(&out[0].1);
    assert_eq!(r.op, Opcode::Acknowledge);
    assert_eq!(r.aeth.unwrap().0, syndrome::NAK_PSN_SEQ_ERROR);
    assert_eq!(r.psn, 10, "the NAK carries ePSN");
    assert!(feed(&mut nic, 10, &read_frame(13, FIRST_BASE_VA, 4)).is_empty());
    assert_eq!(drops(&nic, DropReason::OutOfSequence), 2);
    assert_eq!(read_mem(&nic, FIRST_BASE_VA, 4), [0; 4]);
    assert!(nic.qp_status(QP_IDX, 10).unwrap().nak_seq_sent);

    // The expected PSN clears the flag; the next gap is NAKed again.
    let out = feed(&mut nic, 20, &write_frame(10, FIRST_BASE_VA, b"good"));
    assert!(out.is_empty());
    assert_eq!(read_mem(&nic, FIRST_BASE_VA, 4), *b"good");
    let out = feed(&mut nic, 30, &write_frame(20, FIRST_BASE_VA, b"gap!"));
    assert_eq!(parse(&out[0].1).psn, 11);
    assert_eq!(nic.stats().naks.get(&syndrome::NAK_PSN_SEQ_ERROR), Some(&2));
    assert_eq!(nic.qp_status(QP_IDX, 30).unwrap().state, QpState::Rts);
}

#[test]
fn rule3_psn_arithmetic_wraps_at_24_bits() {
    let mut nic = nic(0xFF_FFFF);
    assert!(feed(&mut nic, 0, &write_frame(0xFF_FFFF, FIRST_BASE_VA, b"wrap")).is_empty());
    let out = feed(&mut nic, 10, &read_frame(0, FIRST_BASE_VA, 4));
    assert_eq!(parse(&out[0].1).payload, b"wrap");
    assert_eq!(nic.qp_status(QP_IDX, 10).unwrap().epsn, 1);
    // 0xFFFFFF is now 2 behind: a duplicate, not a future PSN.
    let out = feed(
        &mut nic,
        20,
        &write_frame(0xFF_FFFF, FIRST_BASE_VA, b"xxxx"),
    );
    let r = parse(&out[0].1);
    assert_eq!((r.op, r.psn), (Opcode::Acknowledge, 0));
}

#[test]
fn rule3_duplicate_write_is_acked_not_executed() {
    let mut nic = nic(0);
    assert!(feed(&mut nic, 0, &write_frame(0, FIRST_BASE_VA, b"one!")).is_empty());
    assert!(feed(&mut nic, 0, &write_frame(1, FIRST_BASE_VA, b"two!")).is_empty());
    // A stale copy of PSN 0 with other bytes must not land.
    let out = feed(&mut nic, 10, &write_frame(0, FIRST_BASE_VA, b"old!"));
    assert_eq!(out.len(), 1);
    let r = parse(&out[0].1);
    assert_eq!(r.op, Opcode::Acknowledge);
    assert_eq!(r.aeth.unwrap().0, syndrome::ACK_CREDITS_INVALID);
    assert_eq!(r.psn, 1, "ePSN - 1");
    assert_eq!(read_mem(&nic, FIRST_BASE_VA, 4), *b"two!");
    assert_eq!(nic.stats().duplicate_writes, 1);
    assert_eq!(nic.qp_status(QP_IDX, 10).unwrap().epsn, 2);
}

#[test]
fn rule3_duplicate_read_is_executed_again_with_its_own_psn() {
    let mut nic = nic(5);
    assert!(feed(&mut nic, 0, &write_frame(5, FIRST_BASE_VA, b"v1v1")).is_empty());
    let first = feed(&mut nic, 10, &read_frame(6, FIRST_BASE_VA, 4));
    assert_eq!(parse(&first[0].1).psn, 6);
    assert!(feed(&mut nic, 20, &write_frame(7, FIRST_BASE_VA, b"v2v2")).is_empty());
    let again = feed(&mut nic, 30, &read_frame(6, FIRST_BASE_VA, 4));
    let r = parse(&again[0].1);
    assert_eq!((r.op, r.psn), (Opcode::RdmaReadResponseOnly, 6));
    assert_eq!(r.payload, b"v2v2", "re-executed, so it sees memory now");
    let s = nic.qp_status(QP_IDX, 30).unwrap();
    assert_eq!(
        (s.epsn, s.msn),
        (8, 3),
        "a duplicate moves neither ePSN nor MSN"
    );
    assert_eq!(nic.stats().duplicate_reads, 1);
}

// ---------------------------------------------------------------- rule 4

#[test]
fn rule4_write_length_mismatch_naks_invalid_and_breaks_the_qp() {
    let mut nic = nic(3);
    let f = requester()
        .write_only(3, false, reth(FIRST_BASE_VA, 8), b"1234")
        .unwrap();
    let out = feed(&mut nic, 0, &f);
    assert_broken(&mut nic, &out, syndrome::NAK_INVALID_REQUEST, 3);
    assert_eq!(region_bytes(&nic), vec![0; REGION_LEN as usize]);
    assert_eq!(nic.stats().qp_errors, 1);
}

#[test]
fn rule4_read_trailer_is_tolerated_only_in_trailer_mode() {
    let trailer = [0xA5u8, 2, 0, 7, 0, 0, 0, 1, 0xde, 0xad, 0xbe];
    let f = requester()
        .read_request(0, reth(FIRST_BASE_VA, 80 + 8 + 3), &trailer)
        .unwrap();
    let mut nic1 = nic(0);
    let out = feed(&mut nic1, 0, &f);
    let r = parse(&out[0].1);
    assert_eq!(r.op, Opcode::RdmaReadResponseOnly);
    assert_eq!(r.payload.len(), 91);

    let strict = NicConfig {
        accept_read_trailer: false,
        ..NicConfig::default()
    };
    let mut nic2 = nic_with(strict, 0, 4096);
    let out = feed(&mut nic2, 0, &f);
    assert_broken(&mut nic2, &out, syndrome::NAK_INVALID_REQUEST, 0);
}

#[test]
fn rule4_truncated_extension_header_with_a_valid_icrc_is_an_invalid_request() {
    // A WRITE ONLY whose RETH is cut to 8 bytes, re-checksummed by a hostile
    // sender so that it passes the ICRC.
    let mut f = write_frame(0, FIRST_BASE_VA, &[]);
    let bth_at = 14 + 20 + 8;
    let icrc = f.split_off(bth_at + 12 + 8);
    let _ = icrc;
    f.extend_from_slice(&[0; 4]);
    let udp_len = (f.len() - 14 - 20) as u16;
    f[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&udp_len.to_be_bytes());
    let ip_len = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    refresh(&mut f);
    let mut nic = nic(0);
    let out = feed(&mut nic, 0, &f);
    assert_broken(&mut nic, &out, syndrome::NAK_INVALID_REQUEST, 0);
}

#[test]
fn rule4_unsupported_opcode_is_an_invalid_request() {
    // SEND ONLY (0x04) with a valid ICRC: this responder does not take it.
    let mut f = write_frame(0, FIRST_BASE_VA, b"data");
    f[14 + 20 + 8] = 0x04;
    refresh(&mut f);
    let mut nic = nic(0);
    let out = feed(&mut nic, 0, &f);
    assert_broken(&mut nic, &out, syndrome::NAK_INVALID_REQUEST, 0);
}

#[test]
fn responses_and_acks_sent_to_the_responder_are_ignored() {
    let mut nic = nic(0);
    let ack = requester()
        .ack(
            0,
            AethRepr {
                syndrome: 0x1F,
                msn: 0,
            },
        )
        .unwrap();
    assert!(feed(&mut nic, 0, &ack).is_empty());
    assert_eq!(drops(&nic, DropReason::NotARequest), 1);
    assert_eq!(nic.qp_status(QP_IDX, 0).unwrap().state, QpState::Rts);
}

// ------------------------------------------- multi-packet WRITE and READ

#[test]
fn write_first_middle_last_then_a_multi_packet_read() {
    let mut nic = nic_with(NicConfig::default(), 0, 256);
    let data: Vec<u8> = (0..700u32).map(|i| (i * 7 + 1) as u8).collect();
    let va = FIRST_BASE_VA + 1000;
    let b = requester();
    let first = b
        .build(
            Opcode::RdmaWriteFirst,
            0,
            false,
            Some(reth(va, 700)),
            None,
            &data[..256],
        )
        .unwrap();
    let middle = b
        .build(
            Opcode::RdmaWriteMiddle,
            1,
            false,
            None,
            None,
            &data[256..512],
        )
        .unwrap();
    let last = b
        .build(Opcode::RdmaWriteLast, 2, true, None, None, &data[512..])
        .unwrap();
    assert!(feed(&mut nic, 0, &first).is_empty());
    assert!(feed(&mut nic, 0, &middle).is_empty());
    let out = feed(&mut nic, 0, &last);
    let r = parse(&out[0].1);
    assert_eq!(
        (r.op, r.psn, r.aeth),
        (Opcode::Acknowledge, 2, Some((0x1F, 1)))
    );
    assert_eq!(read_mem(&nic, va, 700), data);

    let out = feed(&mut nic, 100, &read_frame(3, va, 700));
    let parts: Vec<Resp> = out.iter().map(|(_, f)| parse(f)).collect();
    let ops: Vec<Opcode> = parts.iter().map(|r| r.op).collect();
    assert_eq!(
        ops,
        [
            Opcode::RdmaReadResponseFirst,
            Opcode::RdmaReadResponseMiddle,
            Opcode::RdmaReadResponseLast
        ]
    );
    assert_eq!(parts.iter().map(|r| r.psn).collect::<Vec<_>>(), [3, 4, 5]);
    assert_eq!(parts[0].aeth, Some((0x1F, 2)));
    assert_eq!(parts[1].aeth, None);
    assert_eq!(parts[2].aeth, Some((0x1F, 2)));
    let joined: Vec<u8> = parts.iter().flat_map(|r| r.payload.clone()).collect();
    assert_eq!(joined, data);
    assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
    // A READ consumes one PSN per response packet.
    assert_eq!(nic.qp_status(QP_IDX, 100).unwrap().epsn, 6);
    let out = feed(&mut nic, 200, &read_frame(6, va, 1));
    assert_eq!(parse(&out[0].1).payload, [data[0]]);
}

#[test]
fn write_middle_without_first_is_an_opcode_sequence_error() {
    let mut nic = nic_with(NicConfig::default(), 0, 256);
    let middle = requester()
        .build(Opcode::RdmaWriteMiddle, 0, false, None, None, &[1; 256])
        .unwrap();
    let out = feed(&mut nic, 0, &middle);
    assert_broken(&mut nic, &out, syndrome::NAK_INVALID_REQUEST, 0);
    assert_eq!(region_bytes(&nic), vec![0; REGION_LEN as usize]);
}

#[test]
fn write_only_over_pmtu_is_a_length_error() {
    let mut nic = nic_with(NicConfig::default(), 0, 256);
    let out = feed(&mut nic, 0, &write_frame(0, FIRST_BASE_VA, &[9; 300]));
    assert_broken(&mut nic, &out, syndrome::NAK_INVALID_REQUEST, 0);
    assert_eq!(region_bytes(&nic), vec![0; REGION_LEN as usize]);
}

// ---------------------------------------------------------------- rule 5

#[test]
fn rule5_the_seventeenth_outstanding_read_breaks_the_qp() {
    let mut nic = nic(0);
    for psn in 0..16 {
        let out = feed(&mut nic, 1_000, &read_frame(psn, FIRST_BASE_VA, 80));
        assert_eq!(parse(&out[0].1).op, Opcode::RdmaReadResponseOnly);
    }
    assert_eq!(nic.qp_status(QP_IDX, 1_000).unwrap().rd_inflight, 16);
    let out = feed(&mut nic, 1_000, &read_frame(16, FIRST_BASE_VA, 80));
    assert_broken(&mut nic, &out, syndrome::NAK_INVALID_REQUEST, 16);
    assert_eq!(nic.stats().rd_inflight_max, 16);
}

#[test]
fn rule5_reads_that_have_left_no_longer_count() {
    let mut nic = nic(0);
    // One READ every 100 ns for 100 µs: at most a dozen are ever in flight.
    for psn in 0..1000 {
        let out = feed(
            &mut nic,
            1_000 + u64::from(psn) * 100,
            &read_frame(psn, FIRST_BASE_VA, 80),
        );
        assert_eq!(
            parse(&out[0].1).op,
            Opcode::RdmaReadResponseOnly,
            "psn {psn}"
        );
    }
    assert!(nic.stats().rd_inflight_max < 16);
    assert_eq!(nic.stats().qp_errors, 0);
}

// ---------------------------------------------------------------- rule 6

#[test]
fn rule6_access_errors_nak_0x62_and_leave_memory_untouched() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "wrong rkey",
            requester()
                .write_only(
                    0,
                    false,
                    RethRepr {
                        virtual_addr: FIRST_BASE_VA,
                        rkey: 0x4321,
                        dma_len: 4,
                    },
                    b"evil",
                )
                .unwrap(),
        ),
        (
            "below the region",
            write_frame(0, FIRST_BASE_VA - 2, b"evil"),
        ),
        (
            "past the end",
            write_frame(0, FIRST_BASE_VA + REGION_LEN - 3, b"evil"),
        ),
        (
            "read past the end",
            read_frame(0, FIRST_BASE_VA + 8, REGION_LEN as u32),
        ),
        ("read at VA overflow", read_frame(0, u64::MAX - 1, 4)),
    ];
    for (what, f) in cases {
        let mut nic = nic(0);
        let out = feed(&mut nic, 0, &f);
        assert_eq!(out.len(), 1, "{what}");
        assert_broken(&mut nic, &out, syndrome::NAK_REMOTE_ACCESS, 0);
        assert_eq!(region_bytes(&nic), vec![0; REGION_LEN as usize], "{what}");
    }
}

#[test]
fn rule6_missing_rights_and_zero_length_requests() {
    let mut nic = nic(0);
    let ro = nic
        .memory_mut()
        .register_with_rkey(
            2,
            4096,
            Access {
                remote_read: true,
                remote_write: false,
            },
            0x5555,
        )
        .unwrap();
    let w = requester()
        .write_only(
            0,
            false,
            RethRepr {
                virtual_addr: ro.base_va,
                rkey: 0x5555,
                dma_len: 4,
            },
            b"nope",
        )
        .unwrap();
    let out = feed(&mut nic, 0, &w);
    assert_broken(&mut nic, &out, syndrome::NAK_REMOTE_ACCESS, 0);
    assert_eq!(read_mem(&nic, ro.base_va, 4), [0; 4]);

    // Length 0 skips the access check, whatever the key.
    let mut nic = nic_with(NicConfig::default(), 0, 4096);
    let z = requester()
        .read_request(
            0,
            RethRepr {
                virtual_addr: 0,
                rkey: 0xBAD,
                dma_len: 0,
            },
            &[],
        )
        .unwrap();
    let out = feed(&mut nic, 0, &z);
    let r = parse(&out[0].1);
    assert_eq!((r.op, r.payload.len()), (Opcode::RdmaReadResponseOnly, 0));
}

// ---------------------------------------------------------------- hostile

#[test]
fn truncated_and_garbage_frames_are_counted_never_answered() {
    let mut nic = nic(0x0F);
    let t3 = hex(T3);
    for cut in 0..t3.len() {
        let out = feed(&mut nic, 0, &t3[..cut]);
        assert!(out.is_empty(), "cut at {cut}");
    }
    assert_eq!(region_bytes(&nic), vec![0; REGION_LEN as usize]);
    assert_eq!(nic.qp_status(QP_IDX, 0).unwrap().state, QpState::Rts);
    assert_eq!(nic.qp_status(QP_IDX, 0).unwrap().epsn, 0x0F);
    let counted: u64 = nic.stats().drops.values().sum();
    assert_eq!(counted, t3.len() as u64);

    // Random bytes behind valid Ethernet/IPv4/UDP-4791 headers.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    for _ in 0..2000 {
        use rand::Rng;
        let len = rng.gen_range(0..200);
        let junk: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        let f = build_udp_frame(&to_server(), 0xC001, ROCEV2_UDP_PORT, &junk, false).unwrap();
        let _ = feed(&mut nic, 0, &f);
    }
    // The ICRC stops all of it before any effect.
    assert_eq!(region_bytes(&nic), vec![0; REGION_LEN as usize]);
    assert_eq!(nic.stats().qp_errors, 0);
    // And the QP still works.
    assert!(feed(&mut nic, 10, &hex(T3)).is_empty());
    assert_eq!(read_mem(&nic, 0x7f00_0000_00e0, 6), [1, 2, 3, 4, 5, 6]);
}

#[test]
fn the_packet_engine_backlog_is_bounded() {
    let mut nic = nic(0);
    // 34 Mpps is ~29 ns a packet; 10_000 packets at one instant overflow
    // the 105 µs backlog.
    let mut sent = 0;
    for psn in 0..10_000u32 {
        let f = write_frame(psn & 0xFF_FFFF, FIRST_BASE_VA, b"fill");
        feed(&mut nic, 0, &f);
        sent += 1;
    }
    let overflow = drops(&nic, DropReason::RxOverflow);
    assert!(overflow > 0 && overflow < sent);
}

// ---------------------------------------------------------------- agent

struct Bench {
    server: DramServer,
    rng: DeviceRng,
}

impl Bench {
    fn new() -> (Bench, Vec<Output>) {
        let mut server = DramServer::new(DramServerConfig::default()).unwrap();
        let mut out = Vec::new();
        let mut rng = DeviceRng::seed_from_u64(1);
        server.start(0, &mut rng, &mut out);
        (Bench { server, rng }, out)
    }

    fn input(&mut self, now: Nanos, frame: Vec<u8>) -> Vec<Output> {
        let mut out = Vec::new();
        self.server.handle(
            now,
            Input::Frame { port: 0, frame },
            &mut self.rng,
            &mut out,
        );
        out
    }

    /// Sends a request from the control plane (port 40000) and returns the
    /// reply's raw bytes and decoded message.
    fn call(&mut self, now: Nanos, req_id: u32, r: Request) -> (Vec<u8>, Message) {
        let ep = Endpoints::new(SWITCH_MAC, SWITCH_IP, SERVER_MAC, SERVER_IP);
        let f = build_datagram(&ep, 40000, AGENT_UDP_PORT, &Message::request(req_id, r)).unwrap();
        let out = self.input(now, f);
        assert_eq!(out.len(), 1, "one reply");
        let Output::Transmit { frame, .. } = &out[0] else {
            panic!("{out:?}")
        };
        let d = parse_udp(frame).unwrap();
        assert_eq!(
            (d.dst_ip, d.dst_port, d.src_port),
            (SWITCH_IP, 40000, AGENT_UDP_PORT)
        );
        let m = Message::decode(d.payload).unwrap();
        assert_eq!(m.req_id, req_id);
        (d.payload.to_vec(), m)
    }
}

fn reply(m: Message) -> Reply {
    match m.body {
        Body::Reply(r) => r,
        other => panic!("{other:?}"),
    }
}

#[test]
fn agent_announces_itself_and_retries_hello_until_acked() {
    let (mut b, out) = Bench::new();
    let hello = out
        .iter()
        .find_map(|o| match o {
            Output::Transmit { frame, .. } => Some(frame.clone()),
            _ => None,
        })
        .unwrap();
    let d = parse_udp(&hello).unwrap();
    assert_eq!((d.dst_ip, d.dst_port), (SWITCH_IP, AGENT_UDP_PORT));
    let m = Message::decode(d.payload).unwrap();
    let Body::Request(Request::Hello(h)) = m.body else {
        panic!("{m:?}")
    };
    assert_eq!(
        (h.ip, h.mac, h.max_rd_atomic, h.pmtu),
        (SERVER_IP, SERVER_MAC, 16, 4096)
    );
    assert_eq!(h.dram_offered, 64 << 30);
    assert!(out.iter().any(|o| matches!(o, Output::Timer { .. })));

    // The timer retransmits; a HelloOk with the right id stops it.
    let mut out = Vec::new();
    b.server
        .handle(1_000_000, Input::Timer { token: 1 }, &mut b.rng, &mut out);
    assert_eq!(b.server.agent().stats().hellos_sent, 2);
    let ep = Endpoints::new(SWITCH_MAC, SWITCH_IP, SERVER_MAC, SERVER_IP);
    let ok = build_datagram(
        &ep,
        AGENT_UDP_PORT,
        AGENT_UDP_PORT,
        &Message::reply(m.req_id, Reply::HelloOk),
    )
    .unwrap();
    assert!(b.input(1_100_000, ok).is_empty());
    let mut out = Vec::new();
    b.server
        .handle(3_000_000, Input::Timer { token: 1 }, &mut b.rng, &mut out);
    assert!(out.is_empty());
    assert!(b.server.agent().stats().hello_acked);
}

#[test]
fn agent_sets_up_a_qp_that_the_nic_then_serves() {
    let (mut b, _) = Bench::new();
    let (_, m) = b.call(
        10,
        1,
        Request::AllocRegion {
            region_id: 4,
            bytes: 1 << 30,
        },
    );
    let Reply::Region { base_va, rkey } = reply(m) else {
        panic!()
    };
    let (_, m) = b.call(
        20,
        2,
        Request::CreateQp(CreateQp {
            qp_idx: 7,
            remote_qpn: 0x0701,
            remote_mac: SWITCH_MAC,
            remote_ip: SWITCH_IP,
            init_psn: 100,
            pmtu: 4096,
            max_rd_atomic: 16,
        }),
    );
    assert_eq!(
        reply(m),
        Reply::QpCreated {
            qpn: QPN_BASE + 7,
            state: QpState::Rts
        }
    );
    // A cell at the end of the region: flags 0x80, key, value.
    let cell = [0x80, 1, 2, 3, 4, 5, 6, 7];
    let off = (1 << 30) - 8;
    let (_, m) = b.call(
        30,
        3,
        Request::WriteBatch(vec![WriteEntry {
            region: 4,
            offset: off,
            data: cell.to_vec(),
        }]),
    );
    assert_eq!(reply(m), Reply::WriteDone(None));
    let (_, m) = b.call(
        40,
        4,
        Request::ReadMem {
            region: 4,
            offset: off,
            len: 8,
        },
    );
    assert_eq!(reply(m), Reply::Mem(cell.to_vec()));

    // The switch's READ of that cell sees the agent's write.
    let rq = RoceFrameBuilder::new(to_server(), 0xC007, QPN_BASE + 7)
        .read_request(
            100,
            RethRepr {
                virtual_addr: base_va + off,
                rkey,
                dma_len: 8,
            },
            &[],
        )
        .unwrap();
    let out = b.input(1_000, rq);
    let Output::Transmit { frame, .. } = &out[0] else {
        panic!()
    };
    let r = parse(frame);
    assert_eq!(
        (r.dest_qp, r.psn, r.payload.as_slice()),
        (0x0701, 100, &cell[..])
    );

    let (_, m) = b.call(3_000, 5, Request::QpStatus { qp_idx: 7 });
    assert_eq!(
        reply(m),
        Reply::QpStatus {
            state: QpState::Rts,
            epsn: 101,
            rd_inflight: 0
        }
    );
    let (_, m) = b.call(
        3_100,
        6,
        Request::ResetQp {
            qp_idx: 7,
            init_psn: 5000,
            remote_qpn: 0x0702,
        },
    );
    assert_eq!(
        reply(m),
        Reply::QpReset {
            qpn: QPN_BASE + 7,
            state: QpState::Rts
        }
    );
    let (_, m) = b.call(3_200, 7, Request::Heartbeat);
    assert_eq!(reply(m), Reply::HeartbeatOk);

    // Errors are replies too.
    let (_, m) = b.call(3_300, 8, Request::QpStatus { qp_idx: 99 });
    assert_eq!(reply(m), Reply::Error(ErrorCode::UnknownQp));
    let (_, m) = b.call(
        3_400,
        9,
        Request::ReadMem {
            region: 4,
            offset: 1 << 30,
            len: 1,
        },
    );
    assert_eq!(reply(m), Reply::Error(ErrorCode::OutOfBounds));
    let (_, m) = b.call(
        3_500,
        10,
        Request::AllocRegion {
            region_id: 5,
            bytes: 64 << 30,
        },
    );
    assert_eq!(reply(m), Reply::Error(ErrorCode::NoMemory));
    let (_, m) = b.call(
        3_600,
        11,
        Request::WriteBatch(vec![
            WriteEntry {
                region: 4,
                offset: 0,
                data: vec![0x80, 9],
            },
            WriteEntry {
                region: 9,
                offset: 0,
                data: vec![1],
            },
        ]),
    );
    assert_eq!(reply(m), Reply::WriteDone(Some(ErrorCode::UnknownRegion)));
    let (_, m) = b.call(
        3_700,
        12,
        Request::ReadMem {
            region: 4,
            offset: 0,
            len: 2,
        },
    );
    assert_eq!(
        reply(m),
        Reply::Mem(vec![0, 0]),
        "a failed batch applies nothing"
    );
}

#[test]
fn agent_retransmissions_get_the_first_reply_and_run_once() {
    let (mut b, _) = Bench::new();
    let (_, m) = b.call(
        0,
        1,
        Request::AllocRegion {
            region_id: 1,
            bytes: 4096,
        },
    );
    assert!(matches!(reply(m), Reply::Region { .. }));
    let batch = |v: u8| {
        Request::WriteBatch(vec![WriteEntry {
            region: 1,
            offset: 0,
            data: vec![0x80, v],
        }])
    };
    let (first, _) = b.call(10, 20, batch(1));
    let (_, _) = b.call(20, 21, batch(2));
    // The control plane's timer fires and it resends request 20.
    let (again, _) = b.call(30, 20, batch(1));
    assert_eq!(again, first, "same reply bytes");
    let (_, m) = b.call(
        40,
        22,
        Request::ReadMem {
            region: 1,
            offset: 0,
            len: 2,
        },
    );
    assert_eq!(reply(m), Reply::Mem(vec![0x80, 2]), "not executed twice");
    assert_eq!(b.server.agent().stats().retransmitted, 1);
    assert_eq!(b.server.agent().stats().requests.get(&0x04), Some(&2));
}

#[test]
fn agent_rejects_garbage_with_an_error_or_silence() {
    let (mut b, _) = Bench::new();
    let ep = Endpoints::new(SWITCH_MAC, SWITCH_IP, SERVER_MAC, SERVER_IP);
    // A readable header with an unknown type: ERROR BadRequest.
    let f = build_udp_frame(
        &ep,
        40000,
        AGENT_UDP_PORT,
        &[0, 0, 0, 5, 0x7E, 0, 0, 0, 9],
        true,
    )
    .unwrap();
    let out = b.input(0, f);
    let Output::Transmit { frame, .. } = &out[0] else {
        panic!()
    };
    let m = Message::decode(parse_udp(frame).unwrap().payload).unwrap();
    assert_eq!(m, Message::reply(9, Reply::Error(ErrorCode::BadRequest)));
    // Short junk: silence.
    let f = build_udp_frame(&ep, 40000, AGENT_UDP_PORT, &[1, 2, 3], true).unwrap();
    assert!(b.input(0, f).is_empty());
    // Something else entirely.
    let f = build_udp_frame(&ep, 40000, 53, &[1, 2, 3], true).unwrap();
    assert!(b.input(0, f).is_empty());
    assert_eq!(b.server.stats().not_for_server, 1);
    assert_eq!(b.server.agent().stats().malformed, 2);
}

#[test]
fn a_crash_loses_dram_and_qps_and_the_agent_says_hello_again() {
    let (mut b, _) = Bench::new();
    let (_, m) = b.call(
        0,
        1,
        Request::AllocRegion {
            region_id: 1,
            bytes: 4096,
        },
    );
    let Reply::Region { base_va, rkey } = reply(m) else {
        panic!()
    };
    b.call(
        0,
        2,
        Request::CreateQp(CreateQp {
            qp_idx: 0,
            remote_qpn: 1,
            remote_mac: SWITCH_MAC,
            remote_ip: SWITCH_IP,
            init_psn: 0,
            pmtu: 4096,
            max_rd_atomic: 16,
        }),
    );
    b.call(
        0,
        3,
        Request::WriteBatch(vec![WriteEntry {
            region: 1,
            offset: 0,
            data: vec![0x80, 42],
        }]),
    );
    let mut out = Vec::new();
    b.server.restart(1_000, &mut b.rng, &mut out);
    let hello = out
        .iter()
        .find_map(|o| match o {
            Output::Transmit { frame, .. } => Message::decode(parse_udp(frame)?.payload).ok(),
            _ => None,
        })
        .unwrap();
    assert!(matches!(hello.body, Body::Request(Request::Hello(_))));
    assert_ne!(hello.req_id, 0, "a new incarnation's HELLO has a new id");
    assert_eq!(b.server.nic().memory().used(), 0);
    let rq = RoceFrameBuilder::new(to_server(), 0xC000, QPN_BASE)
        .read_request(
            0,
            RethRepr {
                virtual_addr: base_va,
                rkey,
                dma_len: 2,
            },
            &[],
        )
        .unwrap();
    assert!(b.input(2_000, rq).is_empty());
    assert_eq!(
        b.server.nic().stats().drops.get(&DropReason::UnknownQp),
        Some(&1)
    );
    // Re-allocating gives a different key, so stale requests cannot land.
    let (_, m) = b.call(
        3_000,
        1,
        Request::AllocRegion {
            region_id: 1,
            bytes: 4096,
        },
    );
    let Reply::Region { rkey: rkey2, .. } = reply(m) else {
        panic!()
    };
    assert_ne!(rkey2, rkey);
    let (_, m) = b.call(
        3_000,
        4,
        Request::ReadMem {
            region: 1,
            offset: 0,
            len: 2,
        },
    );
    assert_eq!(reply(m), Reply::Mem(vec![0, 0]));
}

#[test]
fn config_defaults_and_validation() {
    let c = DramServerConfig::default();
    assert_eq!(c.dram_offered, 64 << 30);
    assert_eq!((c.max_dest_rd_atomic, c.pmtu), (16, 4096));
    assert!(c.verify_icrc && c.accept_read_trailer && !c.ack_every_write);
    let json = serde_json::json!({"ip": "10.0.0.9", "mac": [2,0,0,0,10,9], "pmtu": 1024});
    let c: DramServerConfig = serde_json::from_value(json).unwrap();
    assert_eq!(
        (c.ip, c.pmtu, c.rx_ns),
        (Ipv4Addr::new(10, 0, 0, 9), 1024, 350)
    );
    let bad = serde_json::from_value::<DramServerConfig>(serde_json::json!({"pmtux": 1}));
    assert!(bad.is_err(), "unknown fields are rejected");
    let e = DramServer::new(DramServerConfig {
        pmtu: 9000,
        ..DramServerConfig::default()
    })
    .unwrap_err();
    assert_eq!(e.field, "pmtu");
}

// ---------------------------------------------------------------- tshark

/// `None` (after saying why) when tshark is not installed or the run asked
/// to skip it.
fn tshark() -> Option<&'static str> {
    if std::env::var("INCA_SKIP_TSHARK").as_deref() == Ok("1") {
        println!("skipped: INCA_SKIP_TSHARK=1, tshark cross-check not run");
        return None;
    }
    match std::process::Command::new("tshark").arg("-v").output() {
        Ok(o) if o.status.success() => Some("tshark"),
        _ => {
            println!("skipped: tshark is not installed, RoCE decode cross-check not run");
            None
        }
    }
}

#[test]
fn tshark_decodes_every_nic_response_as_roce_without_warnings() {
    // Every kind of frame the NIC sends: READ RESPONSE ONLY, FIRST/MIDDLE/
    // LAST, ACK, and NAKs 0x60, 0x61, 0x62, all captured with the requests.
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let mut run = |nic: &mut Nic, now: Nanos, f: Vec<u8>| {
        let out = feed(nic, now, &f);
        frames.push(f);
        frames.extend(out.into_iter().map(|(_, r)| r));
    };
    let mut a = nic_with(NicConfig::default(), 0x0F, 256);
    run(&mut a, 0, hex(T3));
    run(&mut a, 10, hex(T2));
    run(&mut a, 20, read_frame(0x11, FIRST_BASE_VA, 600));
    let acked = requester()
        .write_only(0x14, true, reth(FIRST_BASE_VA, 3), b"ack")
        .unwrap();
    run(&mut a, 30, acked);
    run(&mut a, 40, write_frame(0x20, FIRST_BASE_VA, b"gap"));
    let trailer = requester()
        .read_request(0x15, reth(FIRST_BASE_VA, 91), &[0xA5; 11])
        .unwrap();
    run(&mut a, 50, trailer);
    run(
        &mut a,
        60,
        write_frame(0x16, FIRST_BASE_VA + REGION_LEN, b"far"),
    );
    let mut b = nic(0);
    let short = requester()
        .write_only(0, false, reth(FIRST_BASE_VA, 8), b"1234")
        .unwrap();
    run(&mut b, 0, short);
    let responses = frames
        .iter()
        .filter(|f| parse_udp(f).unwrap().src_ip == SERVER_IP)
        .count();
    assert_eq!(responses, 9, "one of each response kind");

    let Some(bin) = tshark() else { return };
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("inca-tea-nic-{}.pcap", std::process::id()));
    let mut w = PcapWriter::create(&path).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write(1_700_000_000_000_000_000 + i as u64 * 1_000, f)
            .unwrap();
    }
    w.finish().unwrap();
    let lua =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../inca-wire/tests/icrc_check.lua");
    let fields = std::process::Command::new(bin)
        .arg("-n")
        .arg("-r")
        .arg(&path)
        .args(["-X", &format!("lua_script:{}", lua.display())])
        .args(["-o", "ip.check_checksum:TRUE"])
        .args(["-T", "fields", "-E", "separator=\t", "-E", "occurrence=f"])
        .args(["-e", "frame.protocols", "-e", "infiniband.bth.opcode"])
        .args(["-e", "inca_icrc.status", "-e", "ip.checksum.status"])
        .args(["-e", "_ws.malformed", "-e", "_ws.expert.severity"])
        .output()
        .expect("run tshark");
    let stderr = String::from_utf8_lossy(&fields.stderr);
    assert!(fields.status.success(), "tshark failed: {stderr}");
    assert!(!stderr.contains("Lua: Error"), "{stderr}");
    let text = String::from_utf8(fields.stdout).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), frames.len());
    let mut opcodes = std::collections::BTreeSet::new();
    for (i, row) in rows.iter().enumerate() {
        assert!(
            row[0].contains("eth:ethertype:ip:udp:infiniband"),
            "frame {i}: {row:?}"
        );
        assert_eq!(row[2], "good", "frame {i}: ICRC per tshark");
        assert_eq!(row[3], "1", "frame {i}: IPv4 checksum per tshark");
        assert_eq!(row.get(4).copied().unwrap_or(""), "", "frame {i} malformed");
        opcodes.insert(row[1].to_string());
    }
    for op in ["10", "12", "13", "14", "15", "16", "17"] {
        assert!(opcodes.contains(op), "opcode {op} missing: {opcodes:?}");
    }
    let verbose = std::process::Command::new(bin)
        .arg("-n")
        .arg("-r")
        .arg(&path)
        .arg("-V")
        .output()
        .unwrap();
    let v = String::from_utf8_lossy(&verbose.stdout);
    assert!(
        !v.contains("Malformed"),
        "tshark reports a malformed packet"
    );
    for s in [
        "RDMA READ response Only (16)",
        "RDMA READ response First (13)",
        "RDMA READ response Middle (14)",
        "RDMA READ response Last (15)",
        "Acknowledge (17)",
    ] {
        assert!(v.contains(s), "tshark -V does not mention {s}");
    }
    std::fs::remove_file(path).ok();
}

// ---------------------------------------------------------------- fuzz

/// Re-derives the UDP and IPv4 lengths after the RoCE part changed size.
fn fix_lengths(f: &mut [u8]) {
    let udp_len = (f.len() - 34) as u16;
    f[38..40].copy_from_slice(&udp_len.to_be_bytes());
    let ip_len = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
}

#[test]
fn mutated_requests_past_the_icrc_never_panic_and_keep_the_invariants() {
    use rand::Rng;
    let seed = 0x7EA_u64;
    println!("seed {seed}");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    // With the ICRC check off, mutations reach every later rule.
    let cfg = NicConfig {
        verify_icrc: false,
        ..NicConfig::default()
    };
    let mut nic = nic_with(cfg, 0, 256);
    let b = requester();
    let mut now = 0;
    for round in 0..20_000u32 {
        now += rng.gen_range(0..400);
        let epsn = nic.qp_status(QP_IDX, now).unwrap().epsn;
        let psn = if rng.gen_bool(0.8) {
            epsn
        } else {
            rng.gen::<u32>() & 0xFF_FFFF
        };
        let va = match rng.gen_range(0..6) {
            0 => rng.gen(),
            1 => u64::MAX - rng.gen_range(0..512),
            _ => FIRST_BASE_VA + rng.gen_range(0..REGION_LEN + 64),
        };
        let len = rng.gen_range(0..1200u32);
        let data: Vec<u8> = (0..rng.gen_range(0..300)).map(|_| rng.gen()).collect();
        let op = [0x06u8, 0x07, 0x08, 0x0A, 0x0C, 0x10, 0x11, 0x04, 0x81][rng.gen_range(0..9)];
        let mut f = match op {
            0x06 => b.build(
                Opcode::RdmaWriteFirst,
                psn,
                false,
                Some(reth(va, len)),
                None,
                &[7; 256],
            ),
            0x07 => b.build(Opcode::RdmaWriteMiddle, psn, false, None, None, &[7; 256]),
            0x08 => b.build(Opcode::RdmaWriteLast, psn, true, None, None, &data),
            0x0A => b.write_only(psn, rng.gen(), reth(va, data.len() as u32), &data),
            _ => b.read_request(psn, reth(va, len), &data),
        }
        .unwrap();
        if op == 0x04 || op == 0x10 || op == 0x11 || op == 0x81 {
            f[42] = op;
        }
        // Flip some bytes after the UDP header, sometimes cut the end.
        for _ in 0..rng.gen_range(0..3) {
            let i = rng.gen_range(42..f.len());
            f[i] ^= 1 << rng.gen_range(0..8);
        }
        if rng.gen_bool(0.2) {
            let keep = rng.gen_range(42..=f.len());
            f.truncate(keep);
            fix_lengths(&mut f);
        }
        for (_, r) in feed(&mut nic, now, &f) {
            verify_frame_icrc(&r).expect("every frame sent has a good ICRC");
            let d = parse_udp(&r).unwrap();
            assert!(RocePacket::new_checked(d.payload).is_ok(), "round {round}");
        }
        let s = nic.qp_status(QP_IDX, now).unwrap();
        assert!(s.rd_inflight <= 16, "round {round}");
        if s.state == QpState::Error {
            nic.reset_qp(QP_IDX, rng.gen::<u32>() & 0xFF_FFFF, SWITCH_QPN)
                .unwrap();
        } else {
            assert_eq!(s.state, QpState::Rts);
        }
    }
    let st = nic.stats();
    assert!(st.qp_errors > 100 && st.read_response_packets > 100 && st.bytes_written > 0);
    assert!(st.rd_inflight_max <= 16);
}

#[test]
fn responses_take_each_request_s_udp_source_port() {
    let mut nic = nic(0);
    for (psn, sport) in [(0, 0xC001u16), (1, 0xC0FF), (2, 0xC001)] {
        let f = RoceFrameBuilder::new(to_server(), sport, QPN)
            .read_request(psn, reth(FIRST_BASE_VA, 4), &[])
            .unwrap();
        let out = feed(&mut nic, u64::from(psn) * 100, &f);
        let d = parse_udp(&out[0].1).unwrap();
        assert_eq!((d.src_port, d.dst_port), (sport, ROCEV2_UDP_PORT));
        assert_eq!(parse(&out[0].1).psn, psn);
    }
}
