//! TRD's switch half inside the CLIP program (spec §7.2, §5.8): which
//! packets fly, what a request carries, CHECK on the fast path, INIT and
//! MAX_UPDATE on the response path, and the register rule — each array
//! reached at most once per pass, on every path, with no load-time
//! finding about TRD's objects.
//!
//! The prober's findings are checked in full: with server links and
//! entries installed it used to find that every object's reach depends on
//! `server_port` and the modules' on `conn_idx` without a declared order
//! (src/switch/program.rs now declares `server_port` first and gates the
//! modules behind the app's flight decision).

use std::net::Ipv4Addr;

use inca_apps::l2l3::{Entry as L3Entry, NextHop, L2L3};
use inca_apps::params::Params;
use inca_clip::apps::trd::{self, Op, TrdHandler, TrdReq, TrdRes, TrdSwitch, NO_IDX};
use inca_clip::switch::scalability::ScaleSizes;
use inca_clip::switch::{ClipSwitch, Command, Driver, DriverConfig, ServerLink};
use inca_clip::system::ClipSystem;
use inca_clip::FlowKey;
use inca_switch::harness::Harness;
use inca_switch::loadcheck::LoadCheckOptions;
use inca_switch::{Profile, Switch};
use inca_system::System;
use inca_wire::clip::shim::{self, Kind, Status};
use inca_wire::{build_tcp_frame, build_udp_frame, Endpoints, TcpFlags, TcpRepr};

const NET_IN: u16 = 0;
const NET_OUT: u16 = 1;
const SRV: u16 = 2;
const SYN: u8 = 0x02;
const FIN: u8 = 0x01;
const ACK: u8 = 0x10;

type Trd = Harness<Switch<ClipSwitch<TrdSwitch>>>;

fn l3() -> L2L3 {
    let mut l = L2L3::new(64, 64, 16);
    l.entries = vec![
        L3Entry::NextHop {
            id: 1,
            hop: NextHop {
                port: NET_OUT,
                dst_mac: [0xEE; 6],
                src_mac: [0x5A; 6],
            },
        },
        L3Entry::Route {
            prefix: [0, 0, 0, 0],
            len: 0,
            nexthop: 1,
        },
    ];
    l
}

fn switch(conns: u32, probe: bool) -> Trd {
    let cfg = DriverConfig {
        servers: vec![ServerLink { id: 1, port: SRV }],
        initial_group: vec![1],
        ..DriverConfig::default()
    };
    let prog = ClipSwitch::new(
        TrdSwitch::new(conns),
        l3(),
        ScaleSizes::default(),
        Driver::new(cfg),
    );
    let mut sw = Switch::new(Profile::tofino(), prog).unwrap();
    if probe {
        sw.attach_prober();
    }
    let mut h = Harness::new(sw, 0x7D);
    h.advance_to(5_000_000);
    h
}

fn tcp(sport: u16, flags: u8, seq: u32, len: usize) -> Vec<u8> {
    let ep = Endpoints::new(
        [2; 6],
        Ipv4Addr::new(10, 0, 0, 1),
        [4; 6],
        Ipv4Addr::new(10, 0, 0, 2),
    );
    let payload = vec![0x61; len];
    let t = TcpRepr {
        src_port: sport,
        dst_port: 80,
        seq,
        ack: 0,
        flags: TcpFlags(flags),
        window: 1024,
        urgent: 0,
        options: &[],
        payload: &payload,
    };
    build_tcp_frame(&ep, &t).unwrap()
}

fn vxlan(vni: u32, inner: &[u8]) -> Vec<u8> {
    let v = vni.to_be_bytes();
    let mut payload = vec![0x08, 0, 0, 0, v[1], v[2], v[3], 0];
    payload.extend_from_slice(inner);
    let ep = Endpoints::new(
        [6; 6],
        Ipv4Addr::new(192, 0, 2, 1),
        [7; 6],
        Ipv4Addr::new(192, 0, 2, 2),
    );
    build_udp_frame(&ep, 49_152, 4789, &payload, true).unwrap()
}

fn key_of(frame: &[u8]) -> FlowKey {
    trd::segment::of_l3(&frame[14..]).unwrap().flow
}

/// Sends `frame` in at `*t`; what came out.
fn send(h: &mut Trd, t: &mut u64, port: u16, frame: Vec<u8>) -> Vec<(u16, Vec<u8>)> {
    h.send(*t, port, frame);
    *t += 20_000;
    h.advance_to(*t);
    h.take().into_iter().map(|x| (x.port, x.frame)).collect()
}

/// The request's params, and the frame turned into a response carrying
/// `res`.
fn answer(mut frame: Vec<u8>, res: TrdRes) -> (TrdReq, Vec<u8>) {
    let (start, r) = shim::shim_of(&frame).unwrap().unwrap();
    assert_eq!((r.kind, r.app_id), (Kind::Request, trd::APP_ID));
    let p = shim::params_range(&frame).unwrap();
    let req = TrdReq::read(&frame[p.clone()]).unwrap();
    assert!(res.write(&mut frame[p]));
    frame[start] = (1 << 4) | Kind::Response as u8;
    frame[start + 9] = (frame[start + 9] & !0x18) | ((Status::Ok as u8) << 3);
    (req, frame)
}

fn regs(h: &Trd, idx: u64) -> (u32, u32) {
    let (max_end, retx) = h.device.program().app().registers().unwrap();
    let o = h.device.objects();
    (
        o.register_peek(max_end, idx).unwrap(),
        o.register_peek(retx, idx).unwrap(),
    )
}

fn install(h: &mut Trd, t: &mut u64, key: FlowKey, idx: u16) {
    h.control(
        *t,
        Command::AppInstall(TrdHandler::entry(key, idx)).message(),
    );
    *t += 1_000_000;
    h.advance_to(*t);
}

#[test]
fn slow_then_fast_path_updates_and_checks_the_registers() {
    let mut h = switch(1024, true);
    let mut t = 6_000_000;
    // Non-TCP and plain UDP stay local.
    let udp = inca_apps::fixtures::flow_frame(
        inca_apps::fixtures::FlowProto::Udp,
        [1, 1, 1, 1],
        5,
        [2, 2, 2, 2],
        53,
    );
    let out = send(&mut h, &mut t, NET_IN, udp);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, NET_OUT);
    // SYN flies; the request carries the segment.
    let syn = tcp(1, SYN, 1000, 0);
    let key = key_of(&syn);
    let out = send(&mut h, &mut t, NET_IN, syn);
    assert_eq!(out[0].0, SRV);
    let (_, r) = shim::shim_of(&out[0].1).unwrap().unwrap();
    assert_eq!((r.parsed_len, r.params_len()), (40, 28));
    let init = TrdRes {
        idx: 7,
        op: Op::Init,
        retx: false,
        init_end: 1001,
        seq_end: 1001,
    };
    let (req, resp) = answer(out[0].1.clone(), init);
    assert_eq!(
        req,
        TrdReq {
            flow: key,
            tcp_flags: SYN,
            seq: 1000,
            seq_end: 1001,
            payload_len: 0
        }
    );
    let back = send(&mut h, &mut t, SRV, resp);
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].0, NET_OUT);
    assert_eq!(regs(&h, 7), (1001, 0));
    // Data without an entry flies; its MAX_UPDATE keeps the max.
    let out = send(&mut h, &mut t, NET_IN, tcp(1, ACK, 1001, 100));
    assert_eq!(out[0].0, SRV);
    let (req, resp) = answer(
        out[0].1.clone(),
        TrdRes {
            op: Op::MaxUpdate,
            init_end: 0,
            seq_end: 1101,
            ..init
        },
    );
    assert_eq!((req.seq_end, req.payload_len), (1101, 100));
    send(&mut h, &mut t, SRV, resp);
    assert_eq!(regs(&h, 7), (1101, 0));
    // A slow-path retransmission: max stays, the count goes up.
    let (_, resp) = answer(
        send(&mut h, &mut t, NET_IN, tcp(1, ACK, 1001, 100))[0]
            .1
            .clone(),
        TrdRes {
            op: Op::MaxUpdate,
            retx: true,
            seq_end: 1101,
            ..init
        },
    );
    send(&mut h, &mut t, SRV, resp);
    assert_eq!(regs(&h, 7), (1101, 1));
    // With the entry, data is judged on the switch.
    install(&mut h, &mut t, key, 7);
    let fast = |h: &mut Trd, t: &mut u64, seq, len| {
        let out = send(h, t, NET_IN, tcp(1, ACK, seq, len));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, NET_OUT, "fast path");
    };
    fast(&mut h, &mut t, 1101, 50);
    assert_eq!(regs(&h, 7), (1151, 1));
    fast(&mut h, &mut t, 1101, 50);
    assert_eq!(regs(&h, 7), (1151, 2), "CHECK flags it");
    fast(&mut h, &mut t, 1151, 0);
    assert_eq!(regs(&h, 7), (1151, 2), "a pure ACK is not judged");
    // A late slow-path response never lowers the max nor flags.
    let (_, resp) = answer(
        send(&mut h, &mut t, NET_IN, tcp(1, FIN | ACK, 1151, 0))[0]
            .1
            .clone(),
        TrdRes {
            op: Op::MaxUpdate,
            seq_end: 1001,
            ..init
        },
    );
    send(&mut h, &mut t, SRV, resp);
    assert_eq!(regs(&h, 7), (1151, 2));
    // INIT of a reused index resets both cells.
    let (_, resp) = answer(
        send(&mut h, &mut t, NET_IN, tcp(2, SYN, 5, 0))[0].1.clone(),
        TrdRes {
            init_end: 6,
            ..init
        },
    );
    send(&mut h, &mut t, SRV, resp);
    assert_eq!(regs(&h, 7), (6, 0));
    // Indices out of range and NO_IDX touch nothing; nor do bad installs.
    for idx in [NO_IDX, 1024, 5000] {
        let (_, resp) = answer(
            send(&mut h, &mut t, NET_IN, tcp(3, SYN, 5, 0))[0].1.clone(),
            TrdRes {
                idx,
                retx: true,
                ..init
            },
        );
        assert_eq!(send(&mut h, &mut t, SRV, resp)[0].0, NET_OUT);
    }
    install(&mut h, &mut t, key_of(&tcp(4, ACK, 0, 0)), 1024);
    let out = send(&mut h, &mut t, NET_IN, tcp(4, ACK, 0, 10));
    assert_eq!(out[0].0, SRV, "refused entry: still a miss");
    assert_eq!(h.device.program().driver.stats.refused, 1);
    let prober = h.device.prober().unwrap();
    let mine = prober.findings().iter().collect::<Vec<_>>();
    assert!(mine.is_empty(), "{mine:?}");
    assert!(prober.passes > 20, "the passes were analysed");
    assert!(h.device.violations().is_empty());
}

#[test]
fn vxlan_keys_are_inner_and_per_vni() {
    let mut h = switch(16, true);
    let mut t = 6_000_000;
    let inner = tcp(9, ACK, 77, 10);
    let (a, b) = (vxlan(100, &inner), vxlan(200, &inner));
    let (ka, kb) = (key_of(&a), key_of(&b));
    assert_eq!((ka.ctx(), kb.ctx()), (100, 200));
    assert_eq!((ka.src(), ka.sport()), ([10, 0, 0, 1], 9));
    install(&mut h, &mut t, ka, 3);
    // VNI 100 hits, VNI 200 (same inner 5-tuple) misses and flies.
    assert_eq!(send(&mut h, &mut t, NET_IN, a.clone())[0].0, NET_OUT);
    assert_eq!(regs(&h, 3), (87, 0));
    assert_eq!(send(&mut h, &mut t, NET_IN, a)[0].0, NET_OUT);
    assert_eq!(regs(&h, 3), (87, 1));
    let out = send(&mut h, &mut t, NET_IN, b);
    assert_eq!(out[0].0, SRV);
    let (_, r) = shim::shim_of(&out[0].1).unwrap().unwrap();
    assert_eq!(r.parsed_len, 90, "§4.2: through the inner TCP header");
    let (req, _) = answer(
        out[0].1.clone(),
        TrdRes {
            idx: 0,
            op: Op::None,
            retx: false,
            init_end: 0,
            seq_end: 0,
        },
    );
    assert_eq!(req.flow, kb);
    // The server keys the request as the switch did.
    let range = shim::params_range(&out[0].1).unwrap();
    let l3 = &out[0].1[range.end..];
    use inca_clip::RemoteHandler;
    assert_eq!(TrdHandler::default().flow_key(0x0800, l3), kb);
    let mine = h
        .device
        .prober()
        .unwrap()
        .findings()
        .iter()
        .collect::<Vec<_>>();
    assert!(mine.is_empty(), "{mine:?}");
}

#[test]
fn clip_trd_places_and_passes_the_load_time_check() {
    let sys = ClipSystem;
    assert!(sys.programs().iter().any(|p| p.name == "clip_trd"));
    for extra in [vec![], vec![("conns", "4096")]] {
        let mut p = Params::default();
        for (k, v) in &extra {
            p.set(k, v);
        }
        let placed = sys.check("clip_trd", &p, &Profile::tofino()).unwrap();
        assert!(!placed.objects.is_empty());
        let report = sys
            .load_check(
                "clip_trd",
                &p,
                &Profile::tofino(),
                LoadCheckOptions::default(),
            )
            .unwrap();
        println!("{report}");
        assert!(report.passed(), "{report}");
        assert!(report.known.is_empty(), "{report}");
    }
    // With servers, every CLIP program has the framework's findings
    // (below); TRD's objects are in none of them.
    for program in ["clip_null", "clip_trd"] {
        let mut p = Params::default();
        p.set("servers", "1:2,2:3");
        let report = sys
            .load_check(program, &p, &Profile::tofino(), LoadCheckOptions::default())
            .unwrap();
        println!("{program} with servers: {report}");
        let mine = report.findings.iter().collect::<Vec<_>>();
        assert!(mine.is_empty(), "{mine:?}");
    }
    let mut p = Params::default();
    p.set("conns", "65537");
    assert!(sys.check("clip_trd", &p, &Profile::tofino()).is_err());
}
