//! The CLIP server runtime on a whole multi-core server (NIC, PCIe, RSS,
//! eight cores), driven through its `Device` interface: every request of a
//! flow is served by one core (RSS on the flow key behind the shim), the
//! cores share the flows evenly, every request is answered in place on its
//! arrival port, and the runtime's housekeeping runs on the server's
//! agenda.

use std::net::Ipv4Addr;

use inca_clip::apps::mfwd::{self, MfwdHandler};
use inca_clip::server::{ClipRuntime, RuntimeConfig};
use inca_clip::{FlowKey, RemoteHandler};
use inca_server::{MultiCoreServer, PortMacs, ServerConfig};
use inca_switch::harness::Harness;
use inca_wire::clip::shim::{self, ClipRepr, Kind, Sel, Status, FLAG_CMS_VALID};
use inca_wire::{build_tcp_frame, Endpoints, TcpFlags, TcpRepr};

const SEED: u64 = 0xC11C;
const CORES: usize = 8;
const FLOWS: u16 = 400;
const ROUNDS: u64 = 10;

fn flow(i: u16) -> (Ipv4Addr, u16) {
    (
        Ipv4Addr::new(10, 0, (i / 100) as u8, (i % 100) as u8 + 1),
        1024 + i,
    )
}

fn key(i: u16) -> FlowKey {
    let (src, sport) = flow(i);
    FlowKey::new(0, 6, src.octets(), [10, 9, 0, 1], sport, 443)
}

/// Flow `i`'s request: an original TCP frame with MFWD's shim (params =
/// the flow key), chosen through the current group, version 1.
fn request(i: u16, est: u32) -> Vec<u8> {
    let (src, sport) = flow(i);
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        src,
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(10, 9, 0, 1),
    );
    let payload = [0u8; 22];
    let t = TcpRepr {
        src_port: sport,
        dst_port: 443,
        seq: 1,
        ack: 1,
        flags: TcpFlags::ACK,
        window: 100,
        urgent: 0,
        options: &[],
        payload: &payload,
    };
    let mut f = build_tcp_frame(&ep, &t).unwrap();
    let repr = ClipRepr {
        kind: Kind::Request,
        flags: FLAG_CMS_VALID,
        load_type: 0,
        app_id: mfwd::APP_ID,
        hdr_words: 0,
        parsed_len: 40,
        server_id: 1,
        sel: Sel::Cur,
        status: Status::Ok,
        grp_ver: 1,
        cms_est: est,
    };
    shim::push(&mut f, repr, &key(i).0).unwrap();
    f
}

#[test]
fn each_flow_stays_on_one_core_and_cores_are_balanced() {
    println!("seed {SEED}");
    let mut handler = MfwdHandler::default();
    // Half the flows have a route in the mirrored table.
    for i in (0..FLOWS).step_by(2) {
        handler.mirror_insert(MfwdHandler::entry(key(i), 100 + i));
    }
    let runtime = ClipRuntime::new(RuntimeConfig::default(), CORES, handler).unwrap();
    let port = |i: u8| PortMacs {
        mac: [2, 0, 0, 0, 9, i],
        neighbour: [2, 0, 0, 0, 8, i],
    };
    let server = MultiCoreServer::new(
        ServerConfig {
            cores: CORES,
            ..ServerConfig::default()
        },
        vec![port(0), port(1)],
        runtime,
    )
    .unwrap();
    let mut h = Harness::new(server, SEED);
    // Round-robin over the flows, one request every 2 us on port 0 (a
    // lightly loaded server: 500 kpps over 8 cores), and a few on port 1.
    let mut t = 1_000u64;
    for round in 0..ROUNDS {
        for i in 0..FLOWS {
            let f = request(i, (round + 1) as u32);
            let port = u8::from(i.is_multiple_of(50));
            h.send(t, port.into(), f);
            t += 2_000;
        }
    }
    h.advance_to(t + 1_000_000);
    let total = u64::from(FLOWS) * ROUNDS;

    // Every request was answered in place, on its arrival port, with the
    // request's length; hits carry the route.
    assert_eq!(h.transmitted.len() as u64, total);
    let mut hits = 0;
    for tx in &h.transmitted {
        let (_, r) = shim::shim_of(&tx.frame).unwrap().unwrap();
        assert_eq!(r.kind, Kind::Response);
        let params = &tx.frame[shim::params_range(&tx.frame).unwrap()];
        let mut original = tx.frame.clone();
        shim::pop(&mut original).unwrap();
        let sport = inca_apps::headers::parse(&original).unwrap().sport;
        let i = sport - 1024;
        assert_eq!(tx.port, u16::from(i.is_multiple_of(50)), "the arrival port");
        assert_eq!(tx.frame.len(), request(i, 1).len());
        if params[2] == 1 {
            assert_eq!(r.status, Status::Ok);
            assert_eq!(u16::from_be_bytes([params[0], params[1]]), 100 + i);
            assert!(i.is_multiple_of(2));
            hits += 1;
        } else {
            assert_eq!(r.status, Status::NoResult);
        }
    }
    assert_eq!(hits, total / 2);

    // One core per flow, and that core's packet count includes all of the
    // flow's requests.
    let rt = h.device.nf();
    let mut flows_per_core = [0u64; CORES];
    for i in 0..FLOWS {
        let cores = rt.cores_of(&key(i));
        assert_eq!(cores.len(), 1, "flow {i} on cores {cores:?}");
        flows_per_core[cores[0]] += 1;
    }
    let stats = h.device.core_stats();
    for (c, s) in stats.iter().enumerate() {
        assert_eq!(s.packets, flows_per_core[c] * ROUNDS, "core {c}");
    }
    // Balance: each core's share of FLOWS flows is Binomial(FLOWS, 1/8):
    // mean 50, sigma sqrt(400 * 1/8 * 7/8) = 6.6; every core within 3
    // sigma (30..70).
    let mean = f64::from(FLOWS) / CORES as f64;
    let sigma = (f64::from(FLOWS) / CORES as f64 * (1.0 - 1.0 / CORES as f64)).sqrt();
    println!("flows per core {flows_per_core:?} (mean {mean}, sigma {sigma:.1})");
    for (c, &n) in flows_per_core.iter().enumerate() {
        assert!(
            (n as f64 - mean).abs() <= 3.0 * sigma,
            "core {c} has {n} flows"
        );
    }
    let c = h.device.counters();
    assert_eq!(c["nf_requests"], total);
    assert_eq!(c["nf_responses"], total);
    assert_eq!(c["nf_invalid"], 0);
    assert_eq!(c["nf_ver_mismatch"], 0);
    assert_eq!(c["nf_flow_records"], u64::from(FLOWS));
    assert_eq!(c["rx_ring_drops"] + c["rx_buffer_drops"], 0);
    // Candidates: each core keeps its flows' highest estimate.
    let top = h.device.nf_mut().topn_report(5);
    assert_eq!(top.len(), 5);
    assert!(top.iter().all(|&(_, e)| e == ROUNDS as u32));
    assert!(top.windows(2).all(|w| w[0].0 < w[1].0), "ties by key");
}

#[test]
fn housekeeping_expires_idle_flows_on_the_server_s_agenda() {
    println!("seed {SEED}");
    let config = RuntimeConfig {
        t_exp_ns: 50_000_000,
        ..RuntimeConfig::default()
    };
    let runtime = ClipRuntime::new(config, 2, MfwdHandler::default()).unwrap();
    let server = MultiCoreServer::new(
        ServerConfig {
            cores: 2,
            ..ServerConfig::default()
        },
        vec![PortMacs {
            mac: [2; 6],
            neighbour: [4; 6],
        }],
        runtime,
    )
    .unwrap();
    let mut h = Harness::new(server, SEED);
    for i in 0..10 {
        h.send(1_000 + u64::from(i) * 1_000, 0, request(i, 1));
    }
    h.device.nf_mut().mark_offloaded(&key(3));
    // Flows idle from ~0 expire at the first 100 ms sweep after 50 ms
    // idle: the one at 10 ms finds them fresh, the one at 110 ms not.
    h.advance_to(105_000_000);
    assert_eq!(h.device.nf().flow_records(), 10);
    h.advance_to(115_000_000);
    assert_eq!(h.device.nf().flow_records(), 1, "the offloaded flow stays");
    let expired = h.device.nf_mut().take_expired_flows();
    let mut want: Vec<FlowKey> = (0..10).filter(|&i| i != 3).map(key).collect();
    want.sort();
    assert_eq!(expired, want);
    assert_eq!(h.device.counters()["nf_flows_expired"], 9);
}
