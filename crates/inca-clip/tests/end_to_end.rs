//! The switch and two CLIP servers together on the test fabric (SNAT):
//! every packet of a flow gets one translation, no two flows share one,
//! each flow's requests land on one server, and nothing loops.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use inca_apps::params::Params;
use inca_clip::apps::snat::{SnatHandler, SnatSwitch, POOL_PORTS};
use inca_clip::params::{build, Built};
use inca_clip::server::{ClipRuntime, RuntimeConfig};
use inca_clip::FlowKey;
use inca_server::{MultiCoreServer, PortMacs, ServerConfig};
use inca_switch::fabric::{Fabric, Wire};
use inca_switch::{Profile, Switch};
use inca_wire::{build_tcp_frame, Endpoints, TcpFlags, TcpRepr};

const SEED: u64 = 0xC11C_0E2E;

type Server = MultiCoreServer<ClipRuntime<SnatHandler>>;

fn packet(flow: u16, seq: u32) -> Vec<u8> {
    let ep = Endpoints::new(
        [2; 6],
        Ipv4Addr::new(10, 0, (flow >> 8) as u8, flow as u8),
        [4; 6],
        Ipv4Addr::new(192, 0, 2, 9),
    );
    // The flow's number rides in the payload, so it is known after the
    // translation replaced the inside address and port.
    let payload = flow.to_be_bytes();
    let tcp = TcpRepr {
        src_port: 30_000 + flow,
        dst_port: 443,
        seq,
        ack: 0,
        flags: TcpFlags(0x18),
        window: 1024,
        urgent: 0,
        options: &[],
        payload: &payload,
    };
    build_tcp_frame(&ep, &tcp).unwrap()
}

fn server(id: u8, lo: u32, hi: u32) -> Server {
    let mut rt = ClipRuntime::new(
        RuntimeConfig {
            server_id: id,
            ..RuntimeConfig::default()
        },
        4,
        SnatHandler::new(65_536),
    )
    .unwrap();
    rt.pool_assign(POOL_PORTS, [198, 51, 100, id], lo, hi);
    let macs = PortMacs {
        mac: [2, 0, 0, 0, 7, id],
        neighbour: [2, 0, 0, 0, 8, id],
    };
    MultiCoreServer::new(
        ServerConfig {
            cores: 4,
            ..ServerConfig::default()
        },
        vec![macs],
        rt,
    )
    .unwrap()
}

#[test]
fn snat_through_two_servers_keeps_every_flow_on_one_translation() {
    println!("seed {SEED:#x}");
    let mut p = Params::default();
    p.set("servers", "1:2,2:3").set("route_port", 1);
    let Some(Ok(Built::Snat(prog))) = build("clip_snat", &p) else {
        panic!("clip_snat builds");
    };
    let prog: inca_clip::switch::ClipSwitch<SnatSwitch> = *prog;
    let mut fab: Fabric = Fabric::new(SEED);
    let sw = fab.add_any(Switch::new(Profile::tofino(), prog).unwrap());
    let s1 = fab.add_any(server(1, 2000, 2999));
    let s2 = fab.add_any(server(2, 3000, 3999));
    fab.connect((sw, 2), (s1, 0), Wire::with_latency(10))
        .unwrap();
    fab.connect((sw, 3), (s2, 0), Wire::with_latency(10))
        .unwrap();
    fab.tap(sw, 1).unwrap();
    fab.start_all();
    fab.run_until(5_000_000);
    const FLOWS: u16 = 60;
    let mut t = 5_000_000;
    for round in 0..10u32 {
        for f in 0..FLOWS {
            fab.inject(t, sw, 0, packet(f, round));
            t += 2_000;
        }
    }
    fab.run_until(t + 10_000_000);
    let out = fab.take_tapped();
    assert_eq!(
        out.len(),
        usize::from(FLOWS) * 10,
        "every packet delivered once"
    );
    for s in &out {
        assert!(
            inca_wire::clip::shim::shim_of(&s.frame).unwrap().is_none(),
            "no shim leaves a network port"
        );
    }
    // Each server holds the flows it translated; none holds another's.
    let r1: &Server = fab.get(s1).unwrap();
    let r2: &Server = fab.get(s2).unwrap();
    let mut publics = BTreeSet::new();
    let mut on = [0usize; 2];
    for f in 0..FLOWS {
        let p = inca_apps::headers::parse(&packet(f, 0)).unwrap();
        let key = FlowKey::of_parsed(&p, 0);
        let a = r1.nf().handler().lookup(&key);
        let b = r2.nf().handler().lookup(&key);
        assert!(
            a.is_some() != b.is_some(),
            "flow {f} on exactly one server: {a:?} {b:?}"
        );
        let public = a.or(b).unwrap();
        on[usize::from(b.is_some())] += 1;
        assert!(
            publics.insert((public.ip, public.port)),
            "flow {f}: {public:?} handed out twice"
        );
    }
    assert!(on[0] > 10 && on[1] > 10, "both servers used: {on:?}");
    // Every delivered packet carries one of the handed-out translations,
    // and each translation appears exactly 10 times (one per round).
    let mut seen: BTreeMap<([u8; 4], u16), u32> = BTreeMap::new();
    for s in &out {
        let p = inca_apps::headers::parse(&s.frame).unwrap();
        *seen.entry((p.src, p.sport)).or_default() += 1;
        assert!(inca_wire::Ipv4Packet::new_checked(&s.frame[14..])
            .unwrap()
            .verify_checksum());
    }
    assert_eq!(seen.len(), usize::from(FLOWS));
    assert!(seen.values().all(|&n| n == 10), "{seen:?}");
    assert!(seen.keys().all(|k| publics.contains(k)));
    let sw_dev: &Switch<inca_clip::switch::ClipSwitch<SnatSwitch>> = fab.get(sw).unwrap();
    let st = sw_dev.program().stats;
    assert_eq!(
        (st.invalid_drop, st.no_server_drop, st.status_drop),
        (0, 0, 0),
        "{st:?}"
    );
    assert_eq!(st.flight, st.response);
}

/// Property 13 with the controller: SNAT entries servers create are
/// promoted into the switch table (§5.5) and the group changes twice
/// mid-run; every packet of a flow keeps one translation and no two flows
/// share one, on either path.
#[test]
fn snat_keeps_translations_across_promotion_and_transitions() {
    use inca_clip::controller::{ControllerConfig, Policy, Promotion};
    use inca_clip::server::ClipServer;
    use inca_clip::switch::scalability::ScaleSizes;
    use inca_clip::switch::{ClipSwitch, Command, Driver, DriverConfig, ServerLink};
    println!("seed {SEED:#x}");
    let mut l = inca_apps::l2l3::L2L3::new(4, 4, 4);
    l.entries = vec![
        inca_apps::l2l3::Entry::NextHop {
            id: 1,
            hop: inca_apps::l2l3::NextHop {
                port: 1,
                dst_mac: [1; 6],
                src_mac: [2; 6],
            },
        },
        inca_apps::l2l3::Entry::Route {
            prefix: [0; 4],
            len: 0,
            nexthop: 1,
        },
    ];
    let dcfg = DriverConfig {
        servers: vec![ServerLink { id: 1, port: 2 }, ServerLink { id: 2, port: 3 }],
        initial_group: vec![1],
        ..DriverConfig::default()
    };
    let ccfg = ControllerConfig {
        promotion: Promotion {
            policy: Policy::Sketch,
            t_report_ns: 50_000_000,
            n_top: 8,
            capacity: 16,
            ..Promotion::default()
        },
        ..ControllerConfig::default()
    };
    let prog = ClipSwitch::with_controller(
        SnatSwitch::new(16),
        l,
        ScaleSizes::default(),
        Driver::new(dcfg),
        Some(ccfg),
    );
    let mut fab: Fabric = Fabric::new(SEED);
    let sw = fab.add_any(Switch::new(Profile::tofino(), prog).unwrap());
    for (id, lo, hi) in [(1u8, 2000u32, 2999u32), (2, 3000, 3999)] {
        let mut nf = ClipServer::new(
            RuntimeConfig {
                server_id: id,
                ..RuntimeConfig::default()
            },
            2,
            SnatHandler::new(4096),
        )
        .unwrap();
        nf.runtime_mut()
            .pool_assign(POOL_PORTS, [198, 51, 100, id], lo, hi);
        let macs = PortMacs {
            mac: [2, 0, 0, 0, 7, id],
            neighbour: [2, 0, 0, 0, 8, id],
        };
        let n = fab.add_any(
            MultiCoreServer::new(
                ServerConfig {
                    cores: 2,
                    ..ServerConfig::default()
                },
                vec![macs],
                nf,
            )
            .unwrap(),
        );
        fab.connect((sw, 1 + u16::from(id)), (n, 0), Wire::with_latency(1_000))
            .unwrap();
    }
    fab.tap(sw, 1).unwrap();
    fab.start_all();
    const FLOWS: u16 = 80;
    let mut t = 5_000_000;
    let mut sent = 0u64;
    for round in 0..60u32 {
        if round == 20 {
            fab.control(t, sw, Command::Transition(vec![2]).message());
        }
        if round == 40 {
            fab.control(t, sw, Command::Transition(vec![1, 2]).message());
        }
        for f in 0..FLOWS {
            // Flows 0..10 are heavy (every round), the rest every 4th.
            if f < 10 || round % 4 == u32::from(f % 4) {
                fab.inject(t, sw, 0, packet(f, round));
                sent += 1;
            }
            t += 20_000;
        }
    }
    fab.run_until(t + 100_000_000);
    let out = fab.take_tapped();
    assert_eq!(out.len() as u64, sent, "every packet delivered");
    let mut by_flow: BTreeMap<u16, BTreeSet<([u8; 4], u16)>> = BTreeMap::new();
    for s in &out {
        let p = inca_apps::headers::parse(&s.frame).unwrap();
        let at = usize::from(p.l4) + 20;
        let flow = u16::from_be_bytes([s.frame[at], s.frame[at + 1]]);
        by_flow.entry(flow).or_default().insert((p.src, p.sport));
    }
    let sw_dev: &Switch<inca_clip::switch::ClipSwitch<SnatSwitch>> = fab.get(sw).unwrap();
    let prog = sw_dev.program();
    let c = prog.controller.as_ref().unwrap();
    println!("switch {:?}; controller {:?}", prog.stats, c.counters());
    assert!(c.promotion_stats().promoted > 0, "entries were promoted");
    assert_eq!(c.stats.transitions, 2);
    assert!(prog.stats.fast > 0 && prog.stats.flight > 0);
    assert_eq!(by_flow.len(), usize::from(FLOWS));
    let mut seen = BTreeSet::new();
    for (f, ts) in &by_flow {
        assert_eq!(ts.len(), 1, "flow {f}: one translation, not {ts:?}");
        assert!(
            seen.insert(*ts.iter().next().unwrap()),
            "flow {f} shares its translation"
        );
    }
}
