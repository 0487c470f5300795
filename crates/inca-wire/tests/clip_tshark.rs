//! The CLIP Lua dissector (contrib/wireshark/clip.lua) decodes what the
//! spec describes. Every CLIP byte here is laid out by hand from
//! specs/clip.md §4 (the §4.2 common-header table, the §4.3 params, the
//! §4.5 header and payload table), not by `inca_wire::clip`, so the script
//! is checked against the spec itself: requests and responses with and
//! without an 802.1Q tag (NULL, MFWD, TRD and SNAT, with their params),
//! a DROP response and a malformed shim; and CLIP-CTL datagrams
//! (REGISTER, TOPN_REPORT, FLOW_QUERY_REPLY, MIRROR_INSERT, a bare ack,
//! POOL_ASSIGN, and a TOPN_REPORT whose count overruns its payload). Only
//! the EtherType is inca's (0xC11C, the spec's 0x88B5 being taken). Skips
//! (with the reason) when tshark is not installed or INCA_SKIP_TSHARK=1.
//! A second test, which needs no tshark, checks that `inca_wire::clip`
//! reads and writes these same bytes.

mod dissect;

use std::net::Ipv4Addr;

use inca_wire::builder::{build_tcp_frame, build_udp_frame, Endpoints};
use inca_wire::{TcpFlags, TcpRepr};

const SW: [u8; 6] = [2, 0, 0, 0, 0, 1];
const SRV: [u8; 6] = [2, 0, 0, 0, 0, 3];
/// inca's CLIP EtherType (docs/wire.md "CLIP").
const CLIP_ETHERTYPE: [u8; 2] = [0xC1, 0x1C];

/// The §4.2 common header, field by field.
struct Common {
    kind: u8,
    flags: u8,
    load_type: u16,
    app_id: u8,
    hdr_words: u8,
    parsed_len: u16,
    server_id: u8,
    sel: u8,
    status: u8,
    grp_ver: u16,
    cms_est: u32,
}

impl Common {
    fn bytes(&self) -> Vec<u8> {
        let mut b = vec![1 << 4 | self.kind, self.flags];
        b.extend_from_slice(&self.load_type.to_be_bytes());
        b.push(self.app_id);
        b.push(self.hdr_words);
        b.extend_from_slice(&self.parsed_len.to_be_bytes());
        b.push(self.server_id);
        b.push(self.sel << 5 | self.status << 3);
        b.extend_from_slice(&self.grp_ver.to_be_bytes());
        b.extend_from_slice(&self.cms_est.to_be_bytes());
        assert_eq!(b.len(), 16);
        b
    }
}

/// Ethernet (with an optional 802.1Q tag) ‖ EtherType 0xC11C ‖ common
/// header ‖ params ‖ the original L3 packet.
fn shim_frame(vlan: Option<u16>, common: &Common, params: &[u8], l3: &[u8]) -> Vec<u8> {
    let mut f = SRV.to_vec();
    f.extend_from_slice(&SW);
    if let Some(vid) = vlan {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&vid.to_be_bytes());
    }
    f.extend_from_slice(&CLIP_ETHERTYPE);
    f.extend_from_slice(&common.bytes());
    f.extend_from_slice(params);
    f.extend_from_slice(l3);
    f
}

/// A FlowKey (§4.1): ctx 24 ‖ proto 8 ‖ src_ip ‖ dst_ip ‖ src_port ‖ dst_port.
fn flow_key(ctx: u32, proto: u8, src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let mut k = ctx.to_be_bytes()[1..].to_vec();
    k.push(proto);
    k.extend_from_slice(&src);
    k.extend_from_slice(&dst);
    k.extend_from_slice(&sport.to_be_bytes());
    k.extend_from_slice(&dport.to_be_bytes());
    assert_eq!(k.len(), 16);
    k
}

/// A CLIP-CTL datagram (§4.5): the 12-byte header then `payload`.
fn ctl(ty: u8, txn_id: u32, sender: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0xC1, 0x1C, 1, ty];
    b.extend_from_slice(&txn_id.to_be_bytes());
    b.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    b.push(sender);
    b.push(flags);
    b.extend_from_slice(payload);
    b
}

fn udp(to_controller: bool, payload: &[u8]) -> Vec<u8> {
    let server = Endpoints::new(
        SRV,
        Ipv4Addr::new(10, 0, 9, 3),
        SW,
        Ipv4Addr::new(10, 0, 9, 1),
    );
    let (ep, sport, dport) = if to_controller {
        (server, 47101, 47100)
    } else {
        (server.reversed(), 47100, 47101)
    };
    build_udp_frame(&ep, sport, dport, payload, true).unwrap()
}

/// The frames the dissector is run on, each laid out from the spec: eight
/// shimmed frames (see the comments), then seven CLIP-CTL datagrams in
/// UDP; and the hand-laid params and flows the assertions refer to.
struct Frames {
    frames: Vec<Vec<u8>>,
    mfwd_res: Vec<u8>,
    snat_flow: Vec<u8>,
}

fn build() -> Frames {
    let host = Endpoints::new(
        SW,
        Ipv4Addr::new(10, 0, 0, 5),
        SRV,
        Ipv4Addr::new(8, 8, 8, 8),
    );
    let udp_l3 = build_udp_frame(&host, 12345, 40001, b"query", true).unwrap()[14..].to_vec();
    // The TRD request's segment, and the next one for the response (the
    // same segment twice would be a TCP retransmission to tshark).
    let tcp_l3 = |seq: u32| {
        build_tcp_frame(
            &host,
            &TcpRepr {
                src_port: 40000,
                dst_port: 80,
                seq,
                ack: 1,
                flags: TcpFlags::ACK | TcpFlags::PSH,
                window: 65535,
                urgent: 0,
                options: &[],
                payload: &[0x55; 100],
            },
        )
        .unwrap()[14..]
            .to_vec()
    };
    let base = |kind, app_id, hdr_words| Common {
        kind,
        flags: 0,
        load_type: 0x0800,
        app_id,
        hdr_words,
        parsed_len: 28,
        server_id: 2,
        sel: 3,
        status: 0,
        grp_ver: 5,
        cms_est: 0,
    };
    // MFWD response (§4.3): nexthop_id 16, hit 8, zero padding to P = 16.
    let mut mfwd_res = 258u16.to_be_bytes().to_vec();
    mfwd_res.push(1);
    mfwd_res.resize(16, 0);
    // TRD request: flow 128, tcp_flags 8, seq 32, seq_end 32, payload_len
    // 16 = 27 bytes, padded to P = 28.
    let trd_flow = flow_key(0, 6, [10, 0, 0, 5], [8, 8, 8, 8], 40000, 80);
    let mut trd_req = trd_flow.clone();
    trd_req.push(0x18);
    trd_req.extend_from_slice(&1000u32.to_be_bytes());
    trd_req.extend_from_slice(&1100u32.to_be_bytes());
    trd_req.extend_from_slice(&100u16.to_be_bytes());
    trd_req.push(0);
    assert_eq!(trd_req.len(), 28);
    // TRD response: idx 16, op 8, retx 8, init_end 32, seq_end 32.
    let mut trd_res = 77u16.to_be_bytes().to_vec();
    trd_res.extend_from_slice(&[2, 1]);
    trd_res.extend_from_slice(&5000u32.to_be_bytes());
    trd_res.extend_from_slice(&6000u32.to_be_bytes());
    trd_res.resize(28, 0);
    // SNAT request: flow; response: pub_ip 32, pub_port 16.
    let snat_flow = flow_key(0, 17, [10, 0, 0, 5], [8, 8, 8, 8], 12345, 40001);
    let mut snat_res = vec![198, 51, 100, 1];
    snat_res.extend_from_slice(&40000u16.to_be_bytes());
    snat_res.resize(16, 0);

    let mut frames = vec![
        // 0: NULL request, untagged, CMS_VALID | REC.
        shim_frame(
            None,
            &Common {
                flags: 0xA0,
                cms_est: 77,
                ..base(1, 1, 4)
            },
            &[],
            &udp_l3,
        ),
        // 1: MFWD response behind VLAN 7, pinned.
        shim_frame(
            Some(7),
            &Common {
                sel: 0,
                grp_ver: 0,
                ..base(2, 2, 8)
            },
            &mfwd_res,
            &udp_l3,
        ),
        // 2: TRD request behind VLAN 100.
        shim_frame(
            Some(100),
            &Common {
                parsed_len: 40,
                cms_est: 3,
                flags: 0x80,
                ..base(1, 4, 11)
            },
            &trd_req,
            &tcp_l3(1000),
        ),
        // 3: TRD response, untagged, previous group, HINTED.
        shim_frame(
            None,
            &Common {
                parsed_len: 40,
                sel: 2,
                flags: 0x40,
                ..base(2, 4, 11)
            },
            &trd_res,
            &tcp_l3(1100),
        ),
        // 4: SNAT request with its flow, untagged.
        shim_frame(None, &base(1, 3, 8), &snat_flow, &udp_l3),
        // 5: SNAT response behind VLAN 9.
        shim_frame(Some(9), &base(2, 3, 8), &snat_res, &udp_l3),
        // 6: SNAT response with status DROP: no response fields.
        shim_frame(
            None,
            &Common {
                status: 1,
                ..base(2, 3, 8)
            },
            &snat_res,
            &udp_l3,
        ),
        // 7: hdr_words 3 (< 16 bytes): malformed.
        shim_frame(None, &base(1, 1, 3), &[], &udp_l3),
    ];
    // 8: REGISTER, server 3 → controller.
    let mut register = vec![3, 8];
    register.extend_from_slice(&SRV);
    register.extend_from_slice(&17u16.to_be_bytes());
    frames.push(udp(true, &ctl(0x01, 7, 3, 0, &register)));
    // 9: TOPN_REPORT (a REPLY): period 41, two (flow, est).
    let mut topn = 41u32.to_be_bytes().to_vec();
    topn.extend_from_slice(&2u16.to_be_bytes());
    topn.extend_from_slice(&snat_flow);
    topn.extend_from_slice(&900u32.to_be_bytes());
    topn.extend_from_slice(&trd_flow);
    topn.extend_from_slice(&17u32.to_be_bytes());
    frames.push(udp(true, &ctl(0x21, 8, 3, 0x01, &topn)));
    // 10: FLOW_QUERY_REPLY (REPLY | MORE): two flows.
    let mut fq = 2u16.to_be_bytes().to_vec();
    for (flow, first, last, off) in [(&snat_flow, 10u64, 20u64, 1u8), (&trd_flow, 11, 30, 0)] {
        fq.extend_from_slice(flow);
        fq.extend_from_slice(&first.to_be_bytes());
        fq.extend_from_slice(&last.to_be_bytes());
        fq.push(off);
    }
    frames.push(udp(true, &ctl(0x31, 9, 3, 0x03, &fq)));
    // 11: MIRROR_INSERT, controller → server: table 1, two entries
    // (key_len, key, action_id, data_len, data).
    let mut mi = vec![1];
    mi.extend_from_slice(&2u16.to_be_bytes());
    mi.extend_from_slice(&[4, 10, 0, 0, 5, 1, 2, 0, 7]);
    mi.extend_from_slice(&[3, 0xBB, 0xBB, 0xBB, 2, 1, 0xCC]);
    frames.push(udp(false, &ctl(0x10, 10, 0, 0, &mi)));
    // 12: the server's bare ack of it: REPLY, type 0x10, empty payload.
    frames.push(udp(true, &ctl(0x10, 10, 3, 0x01, &[])));
    // 13: POOL_ASSIGN: SNAT ports 1024..2047 on 198.51.100.1.
    let mut pool = vec![3, 1, 198, 51, 100, 1];
    pool.extend_from_slice(&1024u32.to_be_bytes());
    pool.extend_from_slice(&2047u32.to_be_bytes());
    frames.push(udp(false, &ctl(0x40, 11, 0, 0, &pool)));
    // 14: TOPN_REPORT whose count (3) overruns its payload (one item).
    let mut short = topn[..4].to_vec();
    short.extend_from_slice(&3u16.to_be_bytes());
    short.extend_from_slice(&topn[6..26]);
    frames.push(udp(true, &ctl(0x21, 12, 3, 0, &short)));

    Frames {
        frames,
        mfwd_res,
        snat_flow,
    }
}

#[test]
fn tshark_dissects_clip_with_the_lua_script() {
    let Frames {
        frames,
        mfwd_res,
        snat_flow,
    } = build();
    let fields = [
        "vlan.id",
        "clipshim.kind",
        "clipshim.flags.cms_valid",
        "clipshim.flags.hinted",
        "clipshim.flags.rec",
        "clipshim.load_type",
        "clipshim.app_id",
        "clipshim.hdr_words",
        "clipshim.parsed_len",
        "clipshim.server_id",
        "clipshim.sel",
        "clipshim.status",
        "clipshim.grp_ver",
        "clipshim.cms_est",
        "clipshim.params",
        "clipshim.flow.ctx",
        "clipshim.flow.proto",
        "clipshim.flow.src_ip",
        "clipshim.flow.dst_ip",
        "clipshim.flow.src_port",
        "clipshim.flow.dst_port",
        "clipshim.mfwd.nexthop_id",
        "clipshim.mfwd.hit",
        "clipshim.snat.pub_ip",
        "clipshim.snat.pub_port",
        "clipshim.trd.tcp_flags",
        "clipshim.trd.seq",
        "clipshim.trd.seq_end",
        "clipshim.trd.payload_len",
        "clipshim.trd.idx",
        "clipshim.trd.op",
        "clipshim.trd.retx",
        "clipshim.trd.init_end",
        "udp.dstport",
        "tcp.dstport",
        "clipctl.type",
        "clipctl.txn_id",
        "clipctl.length",
        "clipctl.sender",
        "clipctl.flags.reply",
        "clipctl.flags.more",
        "clipctl.server_id",
        "clipctl.n_cores",
        "clipctl.mac",
        "clipctl.switch_port",
        "clipctl.period_id",
        "clipctl.count",
        "clipctl.est",
        "clipctl.first_seen",
        "clipctl.last_seen",
        "clipctl.offloaded",
        "clipctl.table_id",
        "clipctl.key",
        "clipctl.action_id",
        "clipctl.data",
        "clipctl.app_id",
        "clipctl.pool_kind",
        "clipctl.base_ip",
        "clipctl.lo",
        "clipctl.hi",
        "_ws.expert.message",
        "_ws.col.Info",
    ];
    let Some(rows) = dissect::dissect("clip.lua", &frames, &fields) else {
        return;
    };
    assert_eq!(rows.len(), frames.len(), "{rows:#?}");
    let col = |row: usize, name: &str| -> &str {
        let i = fields.iter().position(|f| *f == name).unwrap();
        rows[row][i].as_str()
    };
    let cols =
        |row: usize, names: &[&str]| -> Vec<&str> { names.iter().map(|n| col(row, n)).collect() };
    let dump = format!("{rows:#?}");

    // 0: every common-header field, then the UDP packet after the shim.
    assert_eq!(
        cols(
            0,
            &[
                "vlan.id",
                "clipshim.kind",
                "clipshim.flags.cms_valid",
                "clipshim.flags.hinted",
                "clipshim.flags.rec",
                "clipshim.load_type",
                "clipshim.app_id",
                "clipshim.hdr_words",
                "clipshim.parsed_len",
                "clipshim.server_id",
                "clipshim.sel",
                "clipshim.status",
                "clipshim.grp_ver",
                "clipshim.cms_est",
                "clipshim.params",
                "udp.dstport",
            ]
        ),
        ["", "1", "1", "0", "1", "0x0800", "1", "4", "28", "2", "3", "0", "5", "77", "", "40001"],
        "{dump}"
    );
    // 1: MFWD response behind a tag.
    assert_eq!(
        cols(
            1,
            &[
                "vlan.id",
                "clipshim.kind",
                "clipshim.app_id",
                "clipshim.hdr_words",
                "clipshim.sel",
                "clipshim.grp_ver",
                "clipshim.mfwd.nexthop_id",
                "clipshim.mfwd.hit",
                "clipshim.flow.src_ip",
                "udp.dstport",
            ]
        ),
        ["7", "2", "2", "8", "0", "0", "258", "1", "", "40001"],
        "{dump}"
    );
    assert_eq!(col(1, "clipshim.params"), hex(&mfwd_res), "{dump}");
    // 2: TRD request: its FlowKey and fields, then the TCP segment.
    assert_eq!(
        cols(
            2,
            &[
                "vlan.id",
                "clipshim.kind",
                "clipshim.flags.cms_valid",
                "clipshim.app_id",
                "clipshim.hdr_words",
                "clipshim.parsed_len",
                "clipshim.flow.ctx",
                "clipshim.flow.proto",
                "clipshim.flow.src_ip",
                "clipshim.flow.dst_ip",
                "clipshim.flow.src_port",
                "clipshim.flow.dst_port",
                "clipshim.trd.tcp_flags",
                "clipshim.trd.seq",
                "clipshim.trd.seq_end",
                "clipshim.trd.payload_len",
                "clipshim.trd.idx",
                "tcp.dstport",
            ]
        ),
        [
            "100", "1", "1", "4", "11", "40", "0", "6", "10.0.0.5", "8.8.8.8", "40000", "80",
            "0x18", "1000", "1100", "100", "", "80"
        ],
        "{dump}"
    );
    // 3: TRD response: response fields only.
    assert_eq!(
        cols(
            3,
            &[
                "vlan.id",
                "clipshim.kind",
                "clipshim.flags.hinted",
                "clipshim.sel",
                "clipshim.status",
                "clipshim.trd.idx",
                "clipshim.trd.op",
                "clipshim.trd.retx",
                "clipshim.trd.init_end",
                "clipshim.trd.seq_end",
                "clipshim.trd.seq",
                "clipshim.flow.src_ip",
                "tcp.dstport",
            ]
        ),
        ["", "2", "1", "2", "0", "77", "2", "1", "5000", "6000", "", "", "80"],
        "{dump}"
    );
    // 4: SNAT request with params: the flow.
    assert_eq!(
        cols(
            4,
            &[
                "clipshim.kind",
                "clipshim.app_id",
                "clipshim.hdr_words",
                "clipshim.flow.proto",
                "clipshim.flow.src_ip",
                "clipshim.flow.dst_ip",
                "clipshim.flow.src_port",
                "clipshim.flow.dst_port",
                "clipshim.snat.pub_ip",
                "udp.dstport",
            ]
        ),
        ["1", "3", "8", "17", "10.0.0.5", "8.8.8.8", "12345", "40001", "", "40001"],
        "{dump}"
    );
    assert_eq!(col(4, "clipshim.params"), hex(&snat_flow), "{dump}");
    // 5: SNAT response behind VLAN 9.
    assert_eq!(
        cols(
            5,
            &[
                "vlan.id",
                "clipshim.kind",
                "clipshim.snat.pub_ip",
                "clipshim.snat.pub_port",
                "clipshim.flow.src_ip",
                "udp.dstport",
            ]
        ),
        ["9", "2", "198.51.100.1", "40000", "", "40001"],
        "{dump}"
    );
    // 6: DROP: the status, and no response fields.
    assert_eq!(
        cols(
            6,
            &["clipshim.status", "clipshim.snat.pub_ip", "udp.dstport"]
        ),
        ["1", "", "40001"],
        "{dump}"
    );
    // 7: hdr_words 3 is flagged, and nothing is handed on.
    assert_eq!(col(7, "clipshim.hdr_words"), "3", "{dump}");
    assert!(
        col(7, "_ws.expert.message").contains("hdr_words below 4"),
        "{dump}"
    );
    assert_eq!(col(7, "udp.dstport"), "", "{dump}");
    for row in 0..7 {
        assert_eq!(col(row, "_ws.expert.message"), "", "row {row}: {dump}");
    }

    // 8: REGISTER.
    assert_eq!(
        cols(
            8,
            &[
                "clipctl.type",
                "clipctl.txn_id",
                "clipctl.length",
                "clipctl.sender",
                "clipctl.flags.reply",
                "clipctl.server_id",
                "clipctl.n_cores",
                "clipctl.mac",
                "clipctl.switch_port",
            ]
        ),
        [
            "0x01",
            "7",
            "10",
            "3",
            "0",
            "3",
            "8",
            "02:00:00:00:00:03",
            "17"
        ],
        "{dump}"
    );
    // 9: TOPN_REPORT.
    assert_eq!(
        cols(
            9,
            &[
                "clipctl.type",
                "clipctl.flags.reply",
                "clipctl.period_id",
                "clipctl.count",
                "clipctl.est",
                "clipshim.flow.src_port",
                "clipshim.flow.proto",
            ]
        ),
        ["0x21", "1", "41", "2", "900,17", "12345,40000", "17,6"],
        "{dump}"
    );
    // 10: FLOW_QUERY_REPLY with REPLY and MORE.
    assert_eq!(
        cols(
            10,
            &[
                "clipctl.type",
                "clipctl.flags.reply",
                "clipctl.flags.more",
                "clipctl.count",
                "clipctl.first_seen",
                "clipctl.last_seen",
                "clipctl.offloaded",
                "clipshim.flow.dst_port",
            ]
        ),
        ["0x31", "1", "1", "2", "10,11", "20,30", "1,0", "40001,80"],
        "{dump}"
    );
    // 11: MIRROR_INSERT's entries.
    assert_eq!(
        cols(
            11,
            &[
                "clipctl.type",
                "clipctl.sender",
                "clipctl.table_id",
                "clipctl.count",
                "clipctl.key",
                "clipctl.action_id",
                "clipctl.data",
            ]
        ),
        ["0x10", "0", "1", "2", "0a000005,bbbbbb", "1,2", "0007,cc"],
        "{dump}"
    );
    // 12: the bare ack.
    assert_eq!(
        cols(
            12,
            &["clipctl.type", "clipctl.length", "clipctl.flags.reply"]
        ),
        ["0x10", "0", "1"],
        "{dump}"
    );
    assert!(
        col(12, "_ws.col.Info").contains("ACK of MIRROR_INSERT"),
        "{dump}"
    );
    // 13: POOL_ASSIGN.
    assert_eq!(
        cols(
            13,
            &[
                "clipctl.type",
                "clipctl.app_id",
                "clipctl.pool_kind",
                "clipctl.base_ip",
                "clipctl.lo",
                "clipctl.hi",
            ]
        ),
        ["0x40", "3", "1", "198.51.100.1", "1024", "2047"],
        "{dump}"
    );
    for row in 8..14 {
        assert_eq!(col(row, "_ws.expert.message"), "", "row {row}: {dump}");
    }
    // 14: a count that overruns the payload is flagged.
    assert_eq!(col(14, "clipctl.count"), "3", "{dump}");
    assert!(
        col(14, "_ws.expert.message").contains("Malformed CLIP-CTL"),
        "{dump}"
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The hand-laid bytes are what `inca_wire::clip` reads and writes: each
/// shimmed frame's header parses to the fields laid out, pops to the
/// original packet and pushes back to the same bytes; each well-formed
/// CLIP-CTL datagram decodes and re-encodes to itself, and the malformed
/// one is refused. (The dissector test above checks the script against the
/// spec; this checks the code against the same bytes.)
#[test]
fn the_hand_laid_bytes_are_what_inca_wire_clip_codes() {
    use inca_wire::clip::ctl::CtlMessage;
    use inca_wire::clip::shim::{self, Kind, Sel, Status};
    let Frames { frames, .. } = build();
    let expect = [
        (Kind::Request, 1, 4, Sel::Cur, Status::Ok),
        (Kind::Response, 2, 8, Sel::PinTable, Status::Ok),
        (Kind::Request, 4, 11, Sel::Cur, Status::Ok),
        (Kind::Response, 4, 11, Sel::Prev, Status::Ok),
        (Kind::Request, 3, 8, Sel::Cur, Status::Ok),
        (Kind::Response, 3, 8, Sel::Cur, Status::Ok),
        (Kind::Response, 3, 8, Sel::Cur, Status::Drop),
    ];
    for (i, (kind, app_id, hdr_words, sel, status)) in expect.into_iter().enumerate() {
        let f = &frames[i];
        let (_, r) = shim::shim_of(f).unwrap().unwrap();
        assert_eq!(
            (r.kind, r.app_id, r.hdr_words, r.sel, r.status, r.load_type),
            (kind, app_id, hdr_words, sel, status, 0x0800),
            "frame {i}"
        );
        let mut g = f.clone();
        let (popped, params) = shim::pop(&mut g).unwrap();
        assert_eq!(popped, r);
        assert_eq!(params.len(), usize::from(hdr_words) * 4 - 16);
        let mut h = g.clone();
        shim::push(&mut h, r, &params).unwrap();
        assert_eq!(&h, f, "frame {i}");
    }
    let mut bad = frames[7].clone();
    assert!(shim::pop(&mut bad).is_err());
    for (i, f) in frames.iter().enumerate().skip(8) {
        let payload = inca_wire::parse_udp_frame(f).unwrap().payload;
        match CtlMessage::decode(payload) {
            Ok(m) => {
                assert!(i < 14, "frame {i} is malformed");
                assert_eq!(m.encode(), payload, "frame {i}");
            }
            Err(e) => assert_eq!(i, 14, "frame {i}: {e}"),
        }
    }
}
