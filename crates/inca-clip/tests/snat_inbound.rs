//! `clip_snat` as a live NAT needs it, built from its parameters: replies
//! to a server's pool slice are translated back through the slice's owner
//! (`pools`, the inbound direction), routed by `routes` with
//! `next_hop_mac`; and the group changes the `transitions` schedule asks
//! for happen at their times, new flows moving to the new group while old
//! ones keep their server and translation.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use inca_apps::params::Params;
use inca_clip::apps::snat::{SnatHandler, SnatSwitch, POOL_PORTS};
use inca_clip::params::{build, Built};
use inca_clip::server::{ClipServer, RuntimeConfig};
use inca_clip::switch::ClipSwitch;
use inca_server::{MultiCoreServer, PortMacs, ServerConfig};
use inca_switch::fabric::{Fabric, NodeIx, Wire};
use inca_switch::{Profile, Switch};
use inca_wire::{build_tcp_frame, Endpoints, TcpFlags, TcpRepr};

const SEED: u64 = 0xC11C_5AA7;
const PUBLIC: [u8; 4] = [198, 51, 100, 1];
const REMOTE: [u8; 4] = [192, 0, 2, 9];
const HOST_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

type Server = MultiCoreServer<ClipServer<SnatHandler>>;
type Sw = Switch<ClipSwitch<SnatSwitch>>;

fn tcp(src: ([u8; 4], u16), dst: ([u8; 4], u16), seq: u32) -> Vec<u8> {
    let ep = Endpoints::new([2; 6], Ipv4Addr::from(src.0), [4; 6], Ipv4Addr::from(dst.0));
    let tcp = TcpRepr {
        src_port: src.1,
        dst_port: dst.1,
        seq,
        ack: 0,
        flags: TcpFlags(0x18),
        window: 1024,
        urgent: 0,
        options: &[],
        payload: &[1, 2, 3, 4],
    };
    build_tcp_frame(&ep, &tcp).unwrap()
}

/// Flow `f`'s inside endpoint.
fn inside(f: u16) -> ([u8; 4], u16) {
    ([10, 0, (f >> 8) as u8, f as u8], 30_000 + f)
}

/// The switch built from `extra` parameters, and servers 1 and 2 with
/// slices 2000-2999 and 3000-3999 of 198.51.100.1.
fn rig(extra: &[(&str, &str)]) -> (Fabric, NodeIx, [NodeIx; 2]) {
    let mut p = Params::default();
    p.set("servers", "1:2,2:3")
        .set("route_port", 1)
        .set("routes", "10.0.0.0/8@0")
        .set("next_hop_mac", "02:00:00:00:00:01")
        .set("pools", "1:198.51.100.1:2000-2999,2:198.51.100.1:3000-3999");
    for (k, v) in extra {
        p.set(k, v);
    }
    let Some(Ok(Built::Snat(prog))) = build("clip_snat", &p) else {
        panic!("clip_snat builds");
    };
    let mut fab: Fabric = Fabric::new(SEED);
    let sw = fab.add_any(Switch::new(Profile::tofino(), *prog).unwrap());
    let mut servers = [sw; 2];
    for (i, (id, lo, hi)) in [(1u8, 2000u32, 2999u32), (2, 3000, 3999)]
        .into_iter()
        .enumerate()
    {
        let mut nf = ClipServer::new(
            RuntimeConfig {
                server_id: id,
                ..RuntimeConfig::default()
            },
            2,
            SnatHandler::new(4096),
        )
        .unwrap();
        nf.runtime_mut().pool_assign(POOL_PORTS, PUBLIC, lo, hi);
        let macs = PortMacs {
            mac: [2, 0, 0, 0, 7, id],
            neighbour: [2, 0, 0, 0, 8, id],
        };
        let cfg = ServerConfig {
            cores: 2,
            ..ServerConfig::default()
        };
        servers[i] = fab.add_any(MultiCoreServer::new(cfg, vec![macs], nf).unwrap());
        fab.connect(
            (sw, 2 + i as u16),
            (servers[i], 0),
            Wire::with_latency(1_000),
        )
        .unwrap();
    }
    fab.tap(sw, 0).unwrap();
    fab.tap(sw, 1).unwrap();
    fab.start_all();
    (fab, sw, servers)
}

fn parsed(frame: &[u8]) -> inca_apps::headers::Parsed {
    inca_apps::headers::parse(frame).unwrap()
}

#[test]
fn replies_to_a_slice_are_translated_back_through_its_owner() {
    let (mut fab, sw, servers) = rig(&[("group", "1,2")]);
    const FLOWS: u16 = 40;
    let mut t = 5_000_000;
    for f in 0..FLOWS {
        fab.inject(t, sw, 0, tcp(inside(f), (REMOTE, 443), 1));
        t += 10_000;
    }
    fab.run_until(t + 5_000_000);
    // Outbound: each flow leaves port 1 from its server's slice.
    let mut public: Vec<u16> = Vec::new();
    for s in fab.take_tapped() {
        assert_eq!(s.port, 1, "outbound leaves the outside port");
        let p = parsed(&s.frame);
        assert_eq!((p.src, p.dst, p.dport), (PUBLIC, REMOTE, 443));
        assert_eq!(&s.frame[..6], &HOST_MAC, "next_hop_mac");
        public.push(p.sport);
    }
    assert_eq!(public.len(), usize::from(FLOWS));
    let on_2 = public.iter().filter(|p| **p >= 3000).count();
    assert!(on_2 > 5 && on_2 < 35, "both servers translate: {on_2} on 2");
    // Inbound: replies to every public endpoint, plus one to a port no
    // flow holds.
    let mut t = fab.now() + 1_000_000;
    for port in &public {
        fab.inject(t, sw, 1, tcp((REMOTE, 443), (PUBLIC, *port), 7));
        t += 10_000;
    }
    fab.inject(t, sw, 1, tcp((REMOTE, 443), (PUBLIC, 2999), 7));
    fab.run_until(t + 5_000_000);
    let back = fab.take_tapped();
    assert_eq!(
        back.len(),
        usize::from(FLOWS),
        "one reply each, the stray dropped"
    );
    let mut got: Vec<([u8; 4], u16)> = back
        .iter()
        .map(|s| {
            assert_eq!(s.port, 0, "replies leave the inside port");
            assert!(inca_wire::Ipv4Packet::new_checked(&s.frame[14..])
                .unwrap()
                .verify_checksum());
            let p = parsed(&s.frame);
            assert_eq!((p.src, p.sport), (REMOTE, 443));
            (p.dst, p.dport)
        })
        .collect();
    got.sort();
    let mut want: Vec<([u8; 4], u16)> = (0..FLOWS).map(inside).collect();
    want.sort();
    assert_eq!(got, want);
    let s1: &Server = fab.get(servers[0]).unwrap();
    let s2: &Server = fab.get(servers[1]).unwrap();
    let hits = |s: &Server| s.nf().runtime().handler().stats().inbound_hits;
    let misses = |s: &Server| s.nf().runtime().handler().stats().inbound_misses;
    assert_eq!(hits(s1) + hits(s2), u64::from(FLOWS));
    assert_eq!(
        hits(s2) as usize,
        on_2,
        "each reply went to its slice's owner"
    );
    assert_eq!((misses(s1), misses(s2)), (1, 0), "the stray reached 1");
    let st = fab.get::<Sw>(sw).unwrap().program().stats;
    assert_eq!(
        (st.status_drop, st.invalid_drop, st.no_server_drop),
        (1, 0, 0)
    );
}

#[test]
fn scheduled_transitions_scale_out_then_in_keeping_old_flows_on_their_server() {
    let (mut fab, sw, servers) = rig(&[("group", "1"), ("transitions", "20ms:1,2;80ms:2")]);
    // A transition takes over 20 ms (two Δ_g waits before the flip), so
    // the scale-out's flip comes after 40 ms and the scale-in's after
    // 100 ms. Flows 0..10 start before the scale-out, 10..50 between the
    // flips, 50..60 after the second; flows 0..10 send until the end.
    let mut t = 5_000_000;
    let mut sends: Vec<(u64, u16)> = Vec::new();
    for round in 0..130u64 {
        let at = 5_000_000 + round * 1_000_000;
        for f in 0..10 {
            sends.push((at, f));
        }
    }
    for f in 10..50 {
        sends.push((55_000_000 + u64::from(f) * 10_000, f));
    }
    for f in 50..60 {
        sends.push((120_000_000 + u64::from(f) * 10_000, f));
    }
    sends.sort();
    for (at, f) in sends {
        t = t.max(at);
        fab.inject(at, sw, 0, tcp(inside(f), (REMOTE, 443), 1));
    }
    fab.run_until(t + 30_000_000);
    // Flow → the public ports it was seen with.
    let mut seen: BTreeMap<u16, std::collections::BTreeSet<u16>> = BTreeMap::new();
    let s1: &Server = fab.get(servers[0]).unwrap();
    let s2: &Server = fab.get(servers[1]).unwrap();
    let by_public: BTreeMap<u16, u16> = (0..60u16)
        .filter_map(|f| {
            let p = parsed(&tcp(inside(f), (REMOTE, 443), 1));
            let key = inca_clip::FlowKey::of_parsed(&p, 0);
            let e = s1.nf().runtime().handler().lookup(&key).or(s2
                .nf()
                .runtime()
                .handler()
                .lookup(&key))?;
            Some((e.port, f))
        })
        .collect();
    for s in fab.take_tapped() {
        let p = parsed(&s.frame);
        let f = by_public[&p.sport];
        seen.entry(f).or_default().insert(p.sport);
    }
    assert_eq!(seen.len(), 60, "every flow translated");
    assert!(
        seen.values().all(|ports| ports.len() == 1),
        "one translation per flow: {seen:?}"
    );
    let port = |f: u16| *seen[&f].iter().next().unwrap();
    assert!((0..10).all(|f| port(f) < 3000), "old flows stay on 1");
    let mid_on_2 = (10..50).filter(|f| port(*f) >= 3000).count();
    assert!(
        mid_on_2 > 5 && mid_on_2 < 35,
        "scale-out: {mid_on_2} of 40 on 2"
    );
    assert!(
        (50..60).all(|f| port(f) >= 3000),
        "scale-in: new flows on 2"
    );
    let prog = fab.get::<Sw>(sw).unwrap().program();
    let c = prog.controller.as_ref().unwrap();
    assert_eq!((c.stats.scheduled, c.stats.transitions), (2, 2));
    let flips: Vec<u64> = c
        .history()
        .iter()
        .filter(|(_, e)| matches!(e, inca_clip::controller::Event::Slots(_)))
        .map(|(t, _)| *t)
        .skip(1)
        .collect();
    println!("flips at {flips:?} ns");
    assert!(
        flips.len() == 2 && flips[0] > 20_000_000 && flips[0] < 55_000_000,
        "{flips:?}"
    );
    assert!(flips[1] > 80_000_000 && flips[1] < 120_000_000, "{flips:?}");
    let (slots, cur) = c.slots();
    assert_eq!(slots[usize::from(cur)].members, vec![2]);
    assert!(c.pins().values().all(|s| *s == 1), "old flows pinned to 1");
    let st = prog.stats;
    assert_eq!(
        (st.invalid_drop, st.no_server_drop, st.status_drop),
        (0, 0, 0)
    );
}

#[test]
fn bad_live_parameters_are_named() {
    for (k, v) in [
        ("routes", "10.0.0.0/33@0"),
        ("routes", "10.0.0.0/8"),
        ("next_hop_mac", "02:00:00:00:00"),
        ("pools", "3:198.51.100.1:1-2"),
        ("pools", "1:198.51.100.1:5-2"),
        ("pools", "1:198.51.100.1:1-10,2:198.51.100.1:10-20"),
        ("pools", "1:x:1-2"),
        ("transitions", "1s"),
        ("transitions", "1s:9"),
        ("transitions", "soon:1"),
        ("fail_after_ms", "-1"),
    ] {
        let mut p = Params::default();
        p.set("servers", "1:2,2:3").set(k, v);
        let e = build("clip_snat", &p).unwrap().err();
        assert!(
            e.as_ref().is_some_and(|e| e.to_string().contains(k)),
            "{k} = {v:?}: {e:?}"
        );
    }
    let mut p = Params::default();
    p.set("servers", "1:2").set("pools", "1:198.51.100.1:1-2");
    assert!(build("clip_null", &p).unwrap().is_err(), "pools are SNAT's");
}
