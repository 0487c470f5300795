//! `seed REPO OUT`: writes a seed corpus for every fuzz target under
//! `OUT/<target>/`, from the captures in the repository (every `*.pcap` and
//! `*.pcapng` under REPO, found by `fuzz/seed-corpus.sh`) and from frames
//! built the way the tests build them: UDP and TCP flows, RoCEv2 WRITEs and
//! READs, RedPlane requests, acks, chain messages and heartbeats, ExoPlane
//! control frames, CLIP shims and CLIP-CTL datagrams, TEA agent messages, and for the DRAM server a whole
//! session (region, QP, WRITE, READ) whose keys and addresses come from
//! running the server itself.
//!
//! Each seed is replayed through its target before it is written, so a
//! seed that already finds something stops the script.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use inca_fuzz::input::{encode, frame, Action, Event};
use inca_tea::server::agent_proto::{
    build_datagram, parse_udp, Body, CreateQp, Hello, Message, Reply, Request, WriteEntry,
    AGENT_UDP_PORT,
};
use inca_tea::server::nic::QPN_BASE;
use inca_tea::server::DramServer;
use inca_wire::redplane::{self as rp, AckRepr, AckType, ReqType, RequestRepr};
use inca_wire::*;

/// Frames kept from each capture in the repository.
const FRAMES_PER_CAPTURE: usize = 32;
/// Bytes kept of each capture file as a pcap seed (a prefix of whole packets
/// is still a valid capture; big seeds slow every later mutation).
const CAPTURE_PREFIX: usize = 8192;

struct Out {
    dir: PathBuf,
    written: usize,
}

impl Out {
    fn put(&mut self, target: &str, bytes: &[u8]) {
        inca_fuzz::run(target, bytes);
        let d = self.dir.join(target);
        std::fs::create_dir_all(&d).expect("create the corpus directory");
        let n = std::fs::read_dir(&d).map(|r| r.count()).unwrap_or(0);
        std::fs::write(d.join(format!("seed-{n:04}")), bytes).expect("write a seed");
        self.written += 1;
    }
}

fn ep(src: [u8; 4], dst: [u8; 4]) -> Endpoints {
    Endpoints::new(
        [2, 0, 0, 0, 0, src[3]],
        src.into(),
        [2, 0, 0, 0, 0, dst[3]],
        dst.into(),
    )
}

/// UDP and TCP frames of a few flows, tagged and untagged.
fn flow_frames() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for (i, (src, dst, sp, dp)) in [
        ([10, 0, 0, 1], [192, 0, 2, 1], 1234u16, 53u16),
        ([10, 1, 1, 1], [10, 9, 0, 1], 5000, 80),
        ([192, 0, 2, 1], [198, 51, 100, 1], 53, 1024),
        ([10, 2, 0, 3], [192, 0, 2, 1], 5000, 5000),
    ]
    .into_iter()
    .enumerate()
    {
        let mut e = ep(src, dst);
        if i == 3 {
            e.vlan = Some(VlanTag {
                pcp: 1,
                dei: false,
                vid: 7,
            });
        }
        v.push(build_udp_frame(&e, sp, dp, b"hello inca", i % 2 == 0).unwrap());
        for (flags, payload) in [
            (TcpFlags::SYN, &b""[..]),
            (
                TcpFlags::ACK | TcpFlags::PSH,
                &b"GET / HTTP/1.0\r\n\r\n"[..],
            ),
            (TcpFlags::FIN | TcpFlags::ACK, &b""[..]),
        ] {
            let t = TcpRepr {
                src_port: sp,
                dst_port: dp,
                seq: 1000,
                ack: 0,
                flags,
                window: 65535,
                urgent: 0,
                options: if flags == TcpFlags::SYN {
                    &[2, 4, 5, 0xb4]
                } else {
                    &[]
                },
                payload,
            };
            v.push(build_tcp_frame(&e, &t).unwrap());
        }
    }
    v
}

/// RoCEv2 requests and responses of every modelled opcode.
fn roce_frames() -> Vec<Vec<u8>> {
    let b = RoceFrameBuilder::new(ep([10, 0, 0, 254], [10, 0, 0, 1]), 0xC001, QPN_BASE + 1);
    let reth = RethRepr {
        virtual_addr: inca_tea::server::memory::FIRST_BASE_VA,
        rkey: 0x1234,
        dma_len: 8,
    };
    let aeth = AethRepr {
        syndrome: 0x1F,
        msn: 1,
    };
    Opcode::ALL
        .iter()
        .map(|&op| {
            let r = (op.ext_header() == ExtHeader::Reth).then_some(reth);
            let a = (op.ext_header() == ExtHeader::Aeth).then_some(aeth);
            b.build(op, 5, true, r, a, &[1, 2, 3, 4, 5, 6, 7, 8])
                .unwrap()
        })
        .collect()
}

const SWITCH: [u8; 4] = [10, 1, 0, 1];

fn rp_request(t: ReqType, seq: u16, key: &[u8], value: &[u8], worker: u16) -> Vec<u8> {
    let e = rp::rp_endpoints(
        [2, 0, 0, 0, 0, 1],
        SWITCH.into(),
        [2, 0, 0, 0, 0x5e, 1],
        inca_fuzz::devices::STORE_IP,
        0x77,
    );
    let piggy = build_udp_frame(&ep([10, 0, 0, 1], [10, 0, 0, 2]), 1, 5000, b"pkt", false).unwrap();
    let r = RequestRepr {
        req_type: t,
        seq,
        key,
        value,
        piggyback: &piggy[14..],
    };
    rp::build_request_frame(&e, 8000 + worker, &r).unwrap()
}

/// RedPlane requests (every type) to the store.
fn store_frames() -> Vec<Vec<u8>> {
    let (k, v) = ([0, 0, 0, 7], [0, 0, 0, 1]);
    let mut f = vec![
        rp_request(ReqType::LeaseNew, 0, &k, &[0; 4], 1),
        rp_request(ReqType::LeaseRenew, 1, &k, &v, 1),
        rp_request(ReqType::LeaseRenew, 0, &k, &[0; 4], 1),
        rp_request(ReqType::BufRead, 1, &k, &[0; 4], 1),
        rp_request(ReqType::Snapshot, 1, &k, &v, 1),
    ];
    // Chain traffic and heartbeats from the next chain member.
    let from = ep([10, 9, 0, 2], [10, 9, 0, 1]);
    let upd = rp::ChainUpdateRepr {
        seq: 1,
        key: &k,
        value: &v,
        fence: 0,
        owner: SWITCH.into(),
        lease_ms_remaining: 1000,
        update_id: 1,
    };
    let chain = rp::chain_port(8001);
    f.push(rp::build_rp_frame(&from, chain, chain, &upd.to_vec()).unwrap());
    f.push(rp::build_rp_frame(&from, chain, chain, &rp::chain_ack_bytes(1)).unwrap());
    let hb = rp::HeartbeatRepr {
        config_version: 1,
        removed: 0,
        flags: 0,
    };
    let port = rp::NODE_CONTROL_PORT;
    f.push(rp::build_rp_frame(&from, port, port, &hb.to_vec()).unwrap());
    f
}

/// RedPlane acks from the store to a switch (what a RedPlane switch reads).
fn ack_frames() -> Vec<Vec<u8>> {
    let e = ep([10, 9, 0, 1], SWITCH);
    [AckType::from_u8(0).unwrap(), AckType::from_u8(2).unwrap()]
        .into_iter()
        .map(|t| {
            let value: &[u8] = if t.carries_value() { &[0; 6] } else { &[] };
            let a = AckRepr {
                ack_type: t,
                seq: 1,
                key: &[10, 0, 0, 1, 0, 80],
                value,
                piggyback: &[],
            };
            rp::build_ack_frame(&e, 8001, &a).unwrap()
        })
        .collect()
}

/// TEA agent messages of every request and reply type.
fn agent_messages() -> Vec<Message> {
    let ip = Ipv4Addr::new(10, 0, 0, 1);
    let reqs = vec![
        Request::Hello(Hello {
            server_id: 0,
            dram_offered: 1 << 30,
            mac: [2, 0, 0, 0, 10, 1],
            ip,
            max_rd_atomic: 16,
            pmtu: 4096,
        }),
        Request::AllocRegion {
            region_id: 4,
            bytes: 1 << 20,
        },
        Request::CreateQp(CreateQp {
            qp_idx: 7,
            remote_qpn: 0x701,
            remote_mac: [2, 0, 0, 0, 0, 0xfe],
            remote_ip: Ipv4Addr::new(10, 0, 0, 254),
            init_psn: 0,
            pmtu: 4096,
            max_rd_atomic: 16,
        }),
        Request::WriteBatch(vec![WriteEntry {
            region: 4,
            offset: 64,
            data: vec![0x80, 1, 2, 3],
        }]),
        Request::ReadMem {
            region: 4,
            offset: 64,
            len: 4,
        },
        Request::ResetQp {
            qp_idx: 7,
            init_psn: 9,
            remote_qpn: 0x702,
        },
        Request::QpStatus { qp_idx: 7 },
        Request::Heartbeat,
    ];
    let mut m: Vec<Message> = reqs
        .into_iter()
        .enumerate()
        .map(|(i, r)| Message::request(i as u32, r))
        .collect();
    m.push(Message::reply(1, Reply::HelloOk));
    m.push(Message::reply(2, Reply::Mem(vec![1, 2, 3])));
    m
}

/// A DRAM server session, learned by running the server: the control
/// plane allocates a region and creates a QP, then RDMA WRITEs and READs it.
fn dram_session(sel: u8) -> Vec<Event> {
    let cfg = inca_fuzz::devices::dram_config(sel);
    let (srv_ip, srv_mac) = (cfg.ip, cfg.mac);
    let cp = Endpoints::new(
        [2, 0, 0, 0, 0, 0xfe],
        Ipv4Addr::new(10, 0, 0, 254),
        srv_mac,
        srv_ip,
    );
    let mut h = inca_switch::harness::Harness::new(DramServer::new(cfg).unwrap(), u64::from(sel));
    let mut events = Vec::new();
    let mut t = 0u64;
    let mut call = |h: &mut inca_switch::harness::Harness<DramServer>,
                    id: u32,
                    r: Request,
                    events: &mut Vec<Event>| {
        let f = build_datagram(&cp, 40000, AGENT_UDP_PORT, &Message::request(id, r)).unwrap();
        t += 10_000;
        h.take();
        h.send(t, 0, f.clone());
        events.push(frame(0, 10_000, f));
        h.advance_to(t + 5_000);
        h.take().into_iter().find_map(|x| {
            let d = parse_udp(&x.frame)?;
            match Message::decode(d.payload).ok()?.body {
                Body::Reply(r) => Some(r),
                _ => None,
            }
        })
    };
    let Some(Reply::Region { base_va, rkey }) = call(
        &mut h,
        1,
        Request::AllocRegion {
            region_id: 4,
            bytes: 1 << 20,
        },
        &mut events,
    ) else {
        panic!("the DRAM server allocates a region");
    };
    let qp = CreateQp {
        qp_idx: 7,
        remote_qpn: 0x701,
        remote_mac: cp.src_mac,
        remote_ip: cp.src_ip,
        init_psn: 0,
        pmtu: 1024,
        max_rd_atomic: 16,
    };
    let Some(Reply::QpCreated { qpn, .. }) = call(&mut h, 2, Request::CreateQp(qp), &mut events)
    else {
        panic!("the DRAM server creates a QP");
    };
    let rdma = RoceFrameBuilder::new(
        Endpoints::new(cp.src_mac, cp.src_ip, srv_mac, srv_ip),
        0xC007,
        qpn,
    );
    let reth = |off: u64, len: u32| RethRepr {
        virtual_addr: base_va + off,
        rkey,
        dma_len: len,
    };
    let f = rdma
        .write_only(0, true, reth(0, 8), &[0x80, 1, 2, 3, 4, 5, 6, 7])
        .unwrap();
    events.push(frame(0, 1_000, f));
    let f = rdma.read_request(1, reth(0, 8), &[]).unwrap();
    events.push(frame(0, 1_000, f));
    let f = rdma
        .build(
            Opcode::RdmaWriteFirst,
            2,
            false,
            Some(reth(4096, 2048)),
            None,
            &[7; 1024],
        )
        .unwrap();
    events.push(frame(0, 1_000, f));
    let f = rdma
        .build(Opcode::RdmaWriteLast, 3, true, None, None, &[8; 1024])
        .unwrap();
    events.push(frame(0, 1_000, f));
    let f = rdma.read_request(4, reth(4096, 2048), &[]).unwrap();
    events.push(frame(0, 1_000, f));
    events.push(Event {
        port: 0,
        dt: 50_000,
        action: Action::Advance,
        raw: false,
    });
    events
}

fn captures(paths: &[PathBuf]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (mut files, mut frames) = (Vec::new(), Vec::new());
    for p in paths {
        let Ok(bytes) = std::fs::read(p) else {
            continue;
        };
        if let Ok(f) = read_capture_bytes(&bytes) {
            frames.extend(f.into_iter().take(FRAMES_PER_CAPTURE).map(|(_, f)| f));
        }
        files.push(bytes[..bytes.len().min(CAPTURE_PREFIX)].to_vec());
    }
    (files, frames)
}

fn pcapng_seeds(frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::{
        InterfaceDescriptionBlock, InterfaceDescriptionOption,
    };
    use pcap_file::pcapng::blocks::simple_packet::SimplePacketBlock;
    let mut out = Vec::new();
    for tsresol in [None, Some(9u8), Some(0x80 | 10)] {
        let mut w = pcap_file::pcapng::PcapNgWriter::new(Vec::new()).unwrap();
        let mut idb = InterfaceDescriptionBlock::new(pcap_file::DataLink::ETHERNET, 0);
        if let Some(r) = tsresol {
            idb.options.push(InterfaceDescriptionOption::IfTsResol(r));
            idb.options.push(InterfaceDescriptionOption::IfTsOffset(1));
        }
        w.write_pcapng_block(idb).unwrap();
        for (i, f) in frames.iter().take(4).enumerate() {
            w.write_pcapng_block(EnhancedPacketBlock {
                interface_id: 0,
                timestamp: std::time::Duration::from_micros(i as u64 * 10),
                original_len: f.len() as u32,
                data: f.clone().into(),
                options: vec![],
            })
            .unwrap();
        }
        if let Some(f) = frames.first() {
            w.write_pcapng_block(SimplePacketBlock {
                original_len: f.len() as u32,
                data: f.clone().into(),
            })
            .unwrap();
        }
        out.push(w.into_inner());
    }
    out
}

/// ExoPlane control frames: each alone (a whole-frame decode), and all of
/// them as one stream after a chunk-size byte (the stream decoder).
fn exoplane_control_seeds() -> Vec<Vec<u8>> {
    use inca_wire::exoplane::control::*;
    let e = Entry {
        obj: 4,
        key: vec![10, 0, 0, 5, 0x30, 0x39],
        val: vec![100, 64, 0, 1],
        version: 41,
    };
    let msgs = [
        Message::Hello {
            pdev: 2,
            caps: 0x15,
            lost_state: false,
        },
        Message::HelloAck {
            round: 1,
            ldevs: vec![LdevRole {
                ldev: 0,
                role: Role::Primary,
            }],
        },
        Message::WriteReq {
            app: 1,
            uk: vec![10, 0, 0, 1],
            writes: vec![Write {
                op: WriteOp::InsertIfAbsent,
                obj: 4,
                key: e.key.clone(),
                val: e.val.clone(),
            }],
        },
        Message::WriteApply {
            app: 1,
            entries: vec![OpEntry {
                op: WriteOp::Upsert,
                entry: e.clone(),
            }],
        },
        Message::WriteAck {
            results: vec![WriteResult {
                status: AckStatus::Ok,
                version: 41,
            }],
        },
        Message::EventFwd {
            app: 1,
            frame: flow_frames().remove(0),
        },
        Message::SyncReq {
            round: 2,
            items: vec![SyncItem {
                app: 1,
                obj: 5,
                key: vec![1, 2],
                snap: 10,
                hist: 9,
            }],
        },
        Message::Dump {
            app: 1,
            entries: vec![OpEntry {
                op: WriteOp::Upsert,
                entry: e,
            }],
            last: true,
        },
        Message::Ping { ts: 250_000_000 },
    ];
    let frames: Vec<Vec<u8>> = msgs
        .into_iter()
        .enumerate()
        .map(|(i, msg)| {
            Frame {
                req_id: i as u64,
                msg,
            }
            .encode()
            .unwrap()
        })
        .collect();
    let mut v = frames.clone();
    for chunk in [0u8, 6, 31] {
        let mut s = vec![chunk];
        s.extend(frames.iter().flatten());
        v.push(s);
    }
    let digest = ReportDigest {
        app_id: 1,
        uk: vec![10, 0, 0, 5],
        estimate: 64,
        bank: 0,
    };
    v.push(digest.encode().unwrap());
    v
}

/// A CLIP request header (specs/clip.md §4.2) for app `app_id`.
fn clip_request(app_id: u8) -> inca_wire::clip::ClipRepr {
    use inca_wire::clip::shim::{ClipRepr, Kind, Sel, Status, FLAG_CMS_VALID};
    ClipRepr {
        kind: Kind::Request,
        flags: FLAG_CMS_VALID,
        load_type: 0,
        app_id,
        hdr_words: 0,
        parsed_len: 40,
        server_id: 1,
        sel: Sel::Cur,
        status: Status::Ok,
        grp_ver: 1,
        cms_est: 3,
    }
}

/// One CLIP-CTL datagram of every type (specs/clip.md §4.5), an ack, and
/// a pin-overflow digest.
fn clip_ctl_seeds() -> Vec<Vec<u8>> {
    use inca_wire::clip::ctl::{CtlBody, CtlMessage, FlowInfo, MirrorEntry, MsgType, PoolKind};
    let flow = |i: u8| [i; 16];
    let entry = MirrorEntry {
        key: vec![10, 0, 0, 1, 0x30, 0x39],
        action_id: 1,
        data: vec![0, 7, 1],
    };
    let bodies = [
        CtlBody::Register {
            server_id: 1,
            n_cores: 8,
            mac: [2, 0, 0, 0, 0, 1],
            switch_port: 4,
        },
        CtlBody::Heartbeat {
            timestamp_ns: 1_000_000,
        },
        CtlBody::MirrorInsert {
            table_id: 1,
            entries: vec![entry.clone(), entry.clone()],
        },
        CtlBody::MirrorDelete {
            table_id: 1,
            keys: vec![vec![1, 2], vec![]],
        },
        CtlBody::EntryCreated {
            table_id: 2,
            entries: vec![entry],
        },
        CtlBody::EntryOffloaded {
            table_id: 2,
            keys: vec![vec![3; 16]],
        },
        CtlBody::EntryExpired {
            table_id: 2,
            keys: vec![vec![4; 16]],
        },
        CtlBody::TopnRequest {
            period_id: 7,
            n: 256,
        },
        CtlBody::TopnReport {
            period_id: 7,
            items: vec![(flow(1), 90), (flow(2), 9)],
        },
        CtlBody::FlowQuery { grp_ver: 1 },
        CtlBody::FlowQueryReply {
            items: vec![FlowInfo {
                flow: flow(3),
                first_seen: 1,
                last_seen: 2,
                offloaded: true,
            }],
        },
        CtlBody::FlowExpired {
            flows: vec![flow(4)],
        },
        CtlBody::PoolAssign {
            app_id: 3,
            kind: PoolKind::SnatPorts,
            base_ip: [198, 51, 100, 1],
            lo: 1024,
            hi: 2047,
        },
        CtlBody::ConnNew {
            flow: flow(5),
            idx: 6,
        },
        CtlBody::ConnRelease {
            flow: flow(5),
            idx: 6,
        },
        CtlBody::Ack {
            of: MsgType::Register,
        },
    ];
    let mut v: Vec<Vec<u8>> = bodies
        .into_iter()
        .enumerate()
        .map(|(i, body)| {
            CtlMessage {
                txn_id: i as u32,
                sender: 1,
                reply: false,
                more: i.is_multiple_of(3),
                body,
            }
            .encode()
        })
        .collect();
    let d = inca_wire::clip::PinOverflow {
        flow: flow(6),
        server_id: 2,
        grp_ver: 1,
    };
    v.push(d.to_bytes().to_vec());
    v
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: seed OUT_DIR CAPTURE...");
        std::process::exit(2);
    }
    let mut out = Out {
        dir: PathBuf::from(&args[1]),
        written: 0,
    };
    let paths: Vec<PathBuf> = args[2..].iter().map(PathBuf::from).collect();
    let (files, captured) = captures(&paths);
    let mut frames = flow_frames();
    frames.extend(roce_frames());
    frames.extend(store_frames());
    frames.extend(ack_frames());
    frames.extend(captured.iter().cloned());

    // Parsers: each frame at the layer the target reads.
    for f in &frames {
        out.put("ethernet", f);
        let mut t = vec![8u8];
        t.extend_from_slice(f);
        out.put("telemetry", &t);
        out.put("exoplane_shim", f);
        let mut shimmed = f.clone();
        let to_dev = inca_wire::exoplane::ShimRepr {
            shim_type: inca_wire::exoplane::ShimType::ToDev,
            failover: false,
            app_id: 1,
            ldev: 0,
            in_port: 2,
            out_port: 0,
            next_type: 0,
        };
        if inca_wire::exoplane::shim::push(&mut shimmed, to_dev).is_ok() {
            out.put("exoplane_shim", &shimmed);
        }
        out.put("clip_shim", f);
        for (app_id, p) in [(1u8, 0usize), (3, 16), (4, 28)] {
            let mut clipped = f.clone();
            let req = clip_request(app_id);
            if inca_wire::clip::shim::push(&mut clipped, req, &vec![0x5A; p]).is_ok() {
                out.put("clip_shim", &clipped);
            }
        }
        out.put("icrc", f);
        out.put("redplane", f);
        let Ok(eth) = EthernetFrame::new_checked(&f[..]) else {
            continue;
        };
        let ip_bytes = eth.payload();
        out.put("ipv4", ip_bytes);
        out.put("icrc", ip_bytes);
        let Ok(ip) = Ipv4Packet::new_checked(ip_bytes) else {
            continue;
        };
        let mut l4 = ip.src_addr().octets().to_vec();
        l4.extend_from_slice(&ip.dst_addr().octets());
        l4.extend_from_slice(ip.payload());
        match ip.protocol() {
            ipv4::protocol::UDP => {
                out.put("udp", &l4);
                if let Ok(u) = UdpDatagram::new_checked(ip.payload()) {
                    if u.dst_port() == ROCEV2_UDP_PORT {
                        out.put("roce", u.payload());
                    }
                    if let Ok(info) = rp::parse_udp_frame(f) {
                        for (k, v) in [(4u8, 4u8), (6, 6), (4, 0)] {
                            let mut m = vec![k, v];
                            m.extend_from_slice(info.payload);
                            out.put("redplane", &m);
                        }
                    }
                }
            }
            ipv4::protocol::TCP => out.put("tcp", &l4),
            _ => {}
        }
    }
    for bytes in &files {
        out.put("pcap", bytes);
    }
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    for f in frames.iter().take(8) {
        w.write(1_000, f).unwrap();
    }
    out.put("pcap", &w.finish().unwrap());
    for s in pcapng_seeds(&frames) {
        out.put("pcapng", &s);
    }
    for (op, value) in [(1u8, 0usize), (2, 16), (3, 128), (4, 5)] {
        let r = inca_wire::exoplane::netcache::NetCacheRepr {
            op: inca_wire::exoplane::netcache::Op::from_u8(op).expect("a known op"),
            seq: u32::from(op) << 20,
            key: [op; 16],
            value: vec![0xC5; value],
        };
        out.put(
            "exoplane_netcache",
            &r.to_bytes().expect("at most 128 bytes"),
        );
    }
    for (ty, win) in [(1u8, 0u32), (2, 7), (3, u32::MAX)] {
        use inca_wire::swish::sdw::{BodyRepr, MsgType};
        let t = MsgType::from_u8(ty).expect("a known SDW type");
        let h = inca_wire::swish::HeaderRepr {
            proto: inca_wire::swish::Proto::Sdw,
            msg_type: ty,
            flags: 0,
            group_id: 1,
            src_rid: 1,
            dst_rid: 2,
        };
        let b = BodyRepr {
            msg_type: t,
            win,
            col: 3,
            ncols: 64,
            coll_id: 1,
            nrows: 3,
            vals: [1, 2, 3],
        };
        let mut m = h.to_bytes().to_vec();
        m.extend(b.to_vec().expect("nrows 3 emits"));
        out.put("swish_sdw", &m);
    }
    for (src_ip, local_est, rid) in [(0x0A01_0000, 502, 1), (0xFFFF_FFFF, 0, 0xFFFF)] {
        let d = inca_wire::swish::ddos::DigestRepr {
            src_ip,
            local_est,
            rid,
        };
        out.put("swish_ddos", &d.to_bytes());
    }
    {
        use inca_wire::swish::ctl::Rpc;
        for r in [
            Rpc::ReadReg {
                tag: 1,
                array: 10,
                start: 0,
                count: 64,
            },
            Rpc::WriteReg {
                tag: 2,
                array: 0,
                start: 0,
                values: vec![1, 2],
            },
            Rpc::SetCfg {
                tag: 3,
                name: 1,
                value: vec![1],
            },
            Rpc::McastSet {
                tag: 4,
                group: 2,
                rids: vec![1, 2],
            },
            Rpc::Inject {
                tag: 5,
                frame: vec![0; 60],
            },
            Rpc::Heartbeat { tag: 6 },
            Rpc::TableAdd {
                tag: 7,
                table: 0,
                key: vec![10, 1, 0, 7],
            },
            Rpc::Values {
                tag: 1,
                values: vec![7; 4],
            },
        ] {
            out.put("swish_ctl", &r.to_vec().expect("small RPCs emit"));
        }
    }
    for s in clip_ctl_seeds() {
        out.put("clip_ctl", &s);
    }
    for s in exoplane_control_seeds() {
        out.put("exoplane_control", &s);
    }
    let cp = ep([10, 0, 0, 254], [10, 0, 0, 1]);
    for m in agent_messages() {
        out.put("tea_agent_proto", &m.encode().unwrap());
        out.put(
            "tea_agent_proto",
            &build_datagram(&cp, 40000, AGENT_UDP_PORT, &m).unwrap(),
        );
    }

    // Devices: a short sequence of frames on the first ports.
    let flows = flow_frames();
    let on_ports = |fs: &[Vec<u8>], ports: u8| -> Vec<Event> {
        fs.iter()
            .enumerate()
            .map(|(i, f)| frame(i as u8 % ports, 1_000, f.clone()))
            .collect()
    };
    let apps = inca_fuzz::devices::APP_NAMES.len() as u8;
    for sel in 0..apps * inca_fuzz::devices::PROFILES.len() as u8 {
        out.put("switch_apps", &encode(sel, &on_ports(&flows, 2)));
    }
    for sel in 0..apps {
        let mut events = on_ports(&captured, 2);
        events.truncate(inca_fuzz::input::MAX_EVENTS);
        out.put("switch_apps", &encode(sel, &events));
    }
    let mut rp_frames = flows.clone();
    rp_frames.extend(ack_frames());
    for sel in 0..inca_fuzz::devices::redplane_programs().len() as u8 {
        out.put("switch_redplane", &encode(sel, &on_ports(&rp_frames, 3)));
    }
    // ExoPlane: plain flows on the switch, and the same flows behind a
    // TO_DEV shim on the device's switch port.
    let to_dev = |app_id: u8| inca_wire::exoplane::ShimRepr {
        shim_type: inca_wire::exoplane::ShimType::ToDev,
        failover: app_id % 2 == 0,
        app_id,
        ldev: 0,
        in_port: 0,
        out_port: 0,
        next_type: 0,
    };
    out.put("switch_exoplane", &encode(0, &on_ports(&flows, 4)));
    let shimmed: Vec<Vec<u8>> = flows
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let mut f = f.clone();
            inca_wire::exoplane::shim::push(&mut f, to_dev(1 + (i % 5) as u8)).ok()?;
            Some(f)
        })
        .collect();
    out.put("switch_exoplane", &encode(1, &on_ports(&shimmed, 1)));
    let hello = agent_messages().remove(0);
    for sel in 0..inca_fuzz::devices::tea_programs().len() as u8 {
        let mut events = vec![frame(
            2,
            1_000,
            build_datagram(
                &ep([10, 0, 0, 1], [10, 0, 0, 254]),
                AGENT_UDP_PORT,
                AGENT_UDP_PORT,
                &hello,
            )
            .unwrap(),
        )];
        events.extend(on_ports(&flows, 2));
        events.extend(on_ports(&roce_frames(), 4));
        out.put("switch_tea", &encode(sel, &events));
    }
    for sel in 0..4 {
        out.put(
            "redplane_store",
            &encode(sel, &on_ports(&store_frames(), 1)),
        );
    }
    for sel in 0..4 {
        out.put("tea_dram", &encode(sel, &dram_session(sel)));
        let mut events = on_ports(&roce_frames(), 1);
        events.truncate(8);
        out.put("tea_dram", &encode(sel, &events));
    }
    eprintln!(
        "wrote {} seeds under {}",
        out.written,
        Path::new(&args[1]).display()
    );
}
