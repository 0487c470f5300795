//! The packet counters through the switch model with real frames: exact
//! per-flow, per-source and per-tenant counts for a known packet sequence
//! (hash collisions accounted for when the arrays are small), the control
//! plane's read of the flow counters, the counter block embedded in both
//! apps, other profiles, random bytes and the resource check.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use inca_apps::counters::{FlowCounter, MonitorPath, TenantCounters, MSG_READ};
use inca_apps::params::Params;
use inca_switch::device::{ControlMessage, MILLIS};
use inca_switch::harness::Harness;
use inca_switch::{check, Profile, Switch};
use inca_wire::ethernet::VlanTag;
use inca_wire::{build_udp_frame, Endpoints};
use proptest::prelude::*;

const SEED: u64 = 17;

/// Packet `n` of the known sequence: (vlan, src, 5-tuple, frame).
fn packet(n: u32) -> (u16, [u8; 4], [u8; 13], Vec<u8>) {
    let vlan = [0u16, 10, 20, 4095][(n % 4) as usize];
    let src = [10, 0, 0, (n % 7) as u8 + 1];
    let dst = [192, 0, 2, (n % 3) as u8 + 1];
    let sport = 5000 + (n % 11) as u16;
    let mut ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::from(src),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::from(dst),
    );
    if vlan != 0 {
        ep.vlan = Some(VlanTag {
            pcp: 0,
            dei: false,
            vid: vlan,
        });
    }
    let payload = vec![0u8; (n % 50) as usize];
    let frame = build_udp_frame(&ep, sport, 80, &payload, true).unwrap();
    let mut k = [0u8; 13];
    k[0..4].copy_from_slice(&src);
    k[4..8].copy_from_slice(&dst);
    k[8] = 17;
    k[9..11].copy_from_slice(&sport.to_be_bytes());
    k[11..13].copy_from_slice(&80u16.to_be_bytes());
    (vlan, src, k, frame)
}

#[test]
fn flow_counts_are_exact_per_entry_with_collisions_accounted_for() {
    for flows in [16usize, 65_536] {
        let fc = FlowCounter::new(flows, 4, 16, MonitorPath::default());
        let mut h = Harness::new(Switch::new(Profile::tofino(), fc).unwrap(), SEED);
        let mut by_flow: BTreeMap<[u8; 13], u32> = BTreeMap::new();
        let mut by_src: BTreeMap<[u8; 4], (u64, u64)> = BTreeMap::new();
        let mut by_vlan: BTreeMap<u16, (u64, u64)> = BTreeMap::new();
        let n = 2000u32;
        for i in 0..n {
            let (vlan, src, key, frame) = packet(i);
            *by_flow.entry(key).or_insert(0) += 1;
            let len = frame.len() as u64;
            let e = by_src.entry(src).or_default();
            *e = (e.0 + 1, e.1 + len);
            let e = by_vlan.entry(vlan).or_default();
            *e = (e.0 + 1, e.1 + len);
            h.send(u64::from(i) * 100, 0, frame);
        }
        h.advance_to(10 * MILLIS);
        assert_eq!(h.take().len(), n as usize);
        let fc = h.device.program();
        let objects = h.device.objects();
        // Expected per entry: the sum over the flows that hash to it.
        let mut per_entry: BTreeMap<u64, u32> = BTreeMap::new();
        for (k, c) in &by_flow {
            *per_entry.entry(fc.flow_index(k)).or_insert(0) += c;
        }
        for k in by_flow.keys() {
            assert_eq!(
                fc.flow_count(objects, k),
                Some(per_entry[&fc.flow_index(k)]),
                "flows {flows}"
            );
        }
        let collisions = by_flow.len() - per_entry.len();
        println!(
            "flows {flows}: {} flows in {} entries",
            by_flow.len(),
            per_entry.len()
        );
        if flows == 65_536 {
            assert_eq!(
                collisions, 0,
                "231 flows in 65,536 entries do not collide here"
            );
            for (k, c) in &by_flow {
                assert_eq!(fc.flow_count(objects, k), Some(*c));
            }
        } else {
            assert!(collisions > 0);
        }
        // The embedded block: 4 source entries (7 sources share them), 16
        // tenant entries (VLAN 4095 shares entry 15 with nobody here).
        let block = fc.block().unwrap();
        let mut src_entries: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        for (s, (p, b)) in &by_src {
            let e = src_entries.entry(block.source_index(*s)).or_default();
            *e = (e.0 + p, e.1 + b);
        }
        for s in by_src.keys() {
            assert_eq!(
                block.source(objects, *s).unwrap(),
                src_entries[&block.source_index(*s)]
            );
        }
        for (v, c) in &by_vlan {
            assert_eq!(block.tenant(objects, *v).unwrap(), *c, "vlan {v}");
        }
    }
}

#[test]
fn the_control_plane_reads_the_flow_counters_after_the_latency() {
    let fc = FlowCounter::new(1024, 16, 16, MonitorPath::default());
    let mut h = Harness::new(Switch::new(Profile::tofino(), fc).unwrap(), SEED);
    let (_, _, key, frame) = packet(3);
    for i in 0..10 {
        h.send(i * 100, 0, frame.clone());
    }
    h.control(
        MILLIS,
        ControlMessage {
            kind: MSG_READ,
            body: vec![],
        },
    );
    let cp = Profile::tofino().control_plane;
    let latency = cp.register_op + cp.register_per_entry * 1024;
    h.advance_to(MILLIS + latency - 1);
    assert!(
        h.device.program().last_read.is_none(),
        "not before the latency"
    );
    h.advance_to(MILLIS + latency + cp.cpu_per_event);
    let fc = h.device.program();
    let (at, values) = fc.last_read.as_ref().unwrap();
    assert!(*at >= MILLIS + latency);
    assert_eq!(values.len(), 1024);
    assert_eq!(values[fc.flow_index(&key) as usize], 10);
    assert_eq!(values.iter().map(|&v| u64::from(v)).sum::<u64>(), 10);
}

#[test]
fn tenant_counters_count_sources_and_tenants_and_non_ip_frames() {
    let tc = TenantCounters::new(8, 4096, MonitorPath::default());
    let mut h = Harness::new(Switch::new(Profile::tofino(), tc).unwrap(), SEED);
    let mut by_vlan: BTreeMap<u16, (u64, u64)> = BTreeMap::new();
    let mut by_src: BTreeMap<[u8; 4], (u64, u64)> = BTreeMap::new();
    for i in 0..500u32 {
        let (vlan, src, _, frame) = packet(i);
        let len = frame.len() as u64;
        let e = by_vlan.entry(vlan).or_default();
        *e = (e.0 + 1, e.1 + len);
        let e = by_src.entry(src).or_default();
        *e = (e.0 + 1, e.1 + len);
        h.send(u64::from(i) * 100, 1, frame);
    }
    // A non-IPv4 frame counts for its tenant (untagged: VLAN 0) only.
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0; 28]);
    let e = by_vlan.entry(0).or_default();
    *e = (e.0 + 1, e.1 + arp.len() as u64);
    h.send(60_000, 1, arp);
    h.advance_to(10 * MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 501);
    assert!(
        out.iter().all(|t| t.port == 0),
        "from out_port back to in_port"
    );
    let tc = h.device.program();
    let block = tc.block().unwrap();
    let objects = h.device.objects();
    for (v, c) in &by_vlan {
        assert_eq!(block.tenant(objects, *v).unwrap(), *c);
    }
    let mut entries: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for (s, (p, b)) in &by_src {
        let e = entries.entry(block.source_index(*s)).or_default();
        *e = (e.0 + p, e.1 + b);
    }
    for s in by_src.keys() {
        assert_eq!(
            block.source(objects, *s).unwrap(),
            entries[&block.source_index(*s)]
        );
    }
    assert_eq!(block.tenant(objects, 7).unwrap(), (0, 0));
}

#[test]
fn both_load_on_a_smartnic_and_a_server() {
    for profile in [Profile::smartnic(), Profile::server()] {
        let name = profile.name.clone();
        let fc = FlowCounter::from_params(&Params::default()).unwrap();
        let mut h = Harness::new(Switch::new(profile.clone(), fc).unwrap(), SEED);
        let (_, _, key, frame) = packet(1);
        for i in 0..5 {
            h.send(i * 10_000, 0, frame.clone());
        }
        h.advance_to(100 * MILLIS);
        assert_eq!(h.take().len(), 5, "{name}");
        let fc = h.device.program();
        assert_eq!(fc.flow_count(h.device.objects(), &key), Some(5), "{name}");
        let tc = TenantCounters::from_params(&Params::default()).unwrap();
        assert!(Switch::new(profile, tc).is_ok(), "{name}");
    }
}

#[test]
fn parameters_are_checked() {
    assert!(FlowCounter::from_params(&Params::parse(["flows=1000"]).unwrap()).is_err());
    assert!(
        FlowCounter::from_params(&Params::parse(["flows=1024", "out_port=3"]).unwrap()).is_ok()
    );
    assert!(TenantCounters::from_params(&Params::parse(["tenants=5000"]).unwrap()).is_err());
    assert!(TenantCounters::from_params(&Params::parse(["sources=8"]).unwrap()).is_err());
}

#[test]
fn resource_check_finds_the_largest_arrays() {
    let tofino = Profile::tofino();
    let mut flows = 65_536;
    let fits = |flows: usize| {
        let mut fc = FlowCounter::new(flows, 4096, 4096, MonitorPath::default());
        check(&tofino, &mut fc)
    };
    while fits(flows * 2).is_ok() {
        flows *= 2;
    }
    println!(
        "flow_counter: largest {flows} flows\n{}",
        fits(flows).unwrap()
    );
    println!("{}", fits(flows * 2).unwrap_err());
    assert_eq!(flows, 131_072);
    let mut sources = 65_536;
    let fits = |s: usize| {
        let mut tc = TenantCounters::new(s, 4096, MonitorPath::default());
        check(&tofino, &mut tc)
    };
    while fits(sources * 2).is_ok() {
        sources *= 2;
    }
    println!(
        "tenant_counters: largest {sources} sources\n{}",
        fits(sources).unwrap()
    );
    println!("{}", fits(sources * 2).unwrap_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn random_frames_never_panic_and_are_all_counted(
        frames in proptest::collection::vec((0u16..32, proptest::collection::vec(any::<u8>(), 0..600)), 1..60)
    ) {
        let fc = FlowCounter::new(64, 8, 16, MonitorPath::default());
        let mut h = Harness::new(Switch::new(Profile::tofino(), fc).unwrap(), SEED);
        let tc = TenantCounters::new(8, 16, MonitorPath::default());
        let mut h2 = Harness::new(Switch::new(Profile::tofino(), tc).unwrap(), SEED);
        for (i, (port, f)) in frames.iter().enumerate() {
            h.send(i as u64 * 100, *port, f.clone());
            h2.send(i as u64 * 100, *port, f.clone());
        }
        h.advance_to(100 * MILLIS);
        h2.advance_to(100 * MILLIS);
        for s in [h.device.stats(), h2.device.stats()] {
            prop_assert_eq!(s.fates(), frames.len() as u64, "{:?}", s);
            prop_assert_eq!(s.violation_drops, 0);
        }
        // Every frame that parsed was counted once per tenant.
        let parsed = frames.len() as u64 - h2.device.stats().parse_drops;
        let block = h2.device.program().block().unwrap();
        let counted: u64 = (0..16).map(|v| block.tenant(h2.device.objects(), v).unwrap().0).sum();
        prop_assert_eq!(counted, parsed);
    }
}
