//! The TEA lookup path through the switch model, in process, on one core,
//! next to the plain inca-apps NAT (the SRAM-only baseline):
//!
//! - `tea_nat/sram_hit`: 512 flows whose translations are in the TEA cache;
//!   parse, sketch update (4 register arrays), stash and cache match, NAT
//!   rewrite, traffic manager, egress.
//! - `tea_nat/dram_request`: 512 preloaded flows, cache off; parse, sketch,
//!   SRAM miss, ServerResolver, flow control, MemResolver, PRE replication
//!   and the LookupRequestor building a WRITE ONLY and a READ REQUEST with
//!   ICRC. Responses are not fed back (the request path only), so the
//!   leak timeout `T_STALE` is 0 for the run: flow control admits every
//!   packet (and the meters are set far above the offered load).
//! - `nat/sram_only`: `inca_apps::nat::Nat` with the same flows installed.
//!
//! Throughput is in packets (elements) per second. The TEA switches are
//! first set up against two DRAM servers (H4's `DramServer`) in a test
//! fabric ([`inca_switch::fabric`]), then driven alone by one.

use std::net::Ipv4Addr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use inca_apps::fixtures::installed_nat;
use inca_apps::headers::parse;
use inca_switch::fabric::{Fabric, Wire};
use inca_switch::{Device, Profile, Switch};
use inca_tea::nf::TeaNat;
use inca_tea::rig::{server_ip, server_mac};
use inca_tea::server::{DramServer, DramServerConfig};
use inca_tea::switch::{ServerSpec, TeaConfig, TeaSwitch};
use inca_wire::{build_udp_frame, Endpoints};

const FLOWS: u32 = 512;
const GAP_NS: u64 = 10;
type TeaSw = Switch<TeaSwitch<TeaNat>>;

fn frame(i: u32) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 1, 1],
        Ipv4Addr::new(10, 1, (i >> 8) as u8, i as u8),
        [2, 0, 0, 0, 1, 2],
        Ipv4Addr::new(8, 8, 8, 8),
    );
    build_udp_frame(&ep, 1000 + i as u16, 53, &[0; 18], true).unwrap()
}

fn entries() -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..FLOWS)
        .flat_map(|i| {
            let p = parse(&frame(i)).unwrap();
            TeaNat::entries(&p, [198, 51, 100, 1], 2000 + i as u16).to_vec()
        })
        .collect()
}

/// A TEA NAT switch set up against two DRAM servers (zero-latency wires
/// in a test fabric); `warm` flows are sent once each (with the servers
/// answering) before it is handed back, with the time reached.
fn tea_switch(tweak: impl Fn(&mut TeaConfig), warm: bool) -> (TeaSw, u64) {
    let specs = (0..2)
        .map(|i| ServerSpec {
            port: 2 + i as u16,
            mac: server_mac(i),
            ip: server_ip(i),
        })
        .collect();
    let mut cfg = TeaConfig::new(13, 6, 12, specs);
    tweak(&mut cfg);
    let prog = TeaSwitch::new(TeaNat::new(1, 0, [198, 51, 100, 1], 1 << 20), cfg.clone())
        .unwrap()
        .with_preload(entries());
    let mut f = Fabric::new(1);
    let sw = f.add_any(Switch::new(Profile::tofino(), prog).unwrap());
    for i in 0..2 {
        let c = DramServerConfig {
            server_id: i as u16,
            ip: server_ip(i),
            mac: server_mac(i),
            dram_offered: 1 << 30,
            controller_ip: cfg.switch_ip,
            controller_mac: cfg.switch_mac,
            ..DramServerConfig::default()
        };
        let s = f.add_any(DramServer::new(c).unwrap());
        f.connect((sw, 2 + i as u16), (s, 0), Wire::default())
            .unwrap();
    }
    f.start_all();
    let ready = |f: &Fabric| f.get::<TeaSw>(sw).unwrap().program().is_ready();
    let mut t = 0;
    while !ready(&f) && t < 200_000_000 {
        t += 500;
        f.run_until(t);
    }
    assert!(ready(&f), "TEA switch set up");
    if warm {
        for i in 0..FLOWS {
            t += 5_000;
            f.inject(t, sw, 0, frame(i));
        }
    }
    t = t.max(150_000_000);
    f.run_until(t);
    (f.into_device(sw).unwrap(), t)
}

/// Pushes the flows' frames, `GAP_NS` apart, into port 0 of `sw` (alone
/// in a fabric: what it sends leaves, and its buffers are recycled).
fn run<D: Device>(c: &mut Criterion, group: &str, name: &str, sw: D, now: u64) -> D {
    let mut f = Fabric::new(1);
    let node = f.add(sw);
    f.run_until(now);
    f.set_stream(node, 0, GAP_NS, (0..FLOWS).map(frame).collect());
    const BATCH: u64 = 10_000;
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(BATCH));
    g.bench_function(name, |b| b.iter(|| f.push(BATCH)));
    g.finish();
    f.into_devices().pop().unwrap()
}

fn bench(c: &mut Criterion) {
    // SRAM hits: every flow promoted to the cache on its first packet.
    let (sw, now) = tea_switch(|c| c.t_hot = 1, true);
    let cached = sw.program().cache_entries(sw.objects()).len();
    assert_eq!(cached, FLOWS as usize, "every flow cached before the run");
    let dram_before = sw.program().dp_stats().dram_lookups;
    let sw = run(c, "tea_nat", "sram_hit", sw, now);
    let s = sw.program().dp_stats();
    assert_eq!(
        s.dram_lookups, dram_before,
        "the measured packets all hit SRAM"
    );

    // DRAM requests: cache off, flow control out of the way.
    let (sw, now) = tea_switch(
        |c| {
            c.cache_cap = 0;
            // Every full QP counts as leaked at once, and the meters never
            // turn RED: no packet is refused.
            c.t_stale = 0;
            c.server_link_bps = u64::MAX / 16;
        },
        false,
    );
    let sw = run(c, "tea_nat", "dram_request", sw, now);
    let s = sw.program().dp_stats();
    assert!(s.dram_lookups > 0 && s.sram_hits == 0, "{s:?}");
    assert!(s.drops.iter().sum::<u64>() < s.dram_lookups / 100, "{s:?}");

    // The plain NAT with the same flows installed.
    let templates: Vec<Vec<u8>> = (0..FLOWS).map(frame).collect();
    let (nat, now) = installed_nat(&templates, 0, 1).unwrap();
    let nat = run(c, "nat", "sram_only", nat, now);
    assert_eq!(nat.stats().punts, u64::from(FLOWS));
}

criterion_group!(benches, bench);
criterion_main!(benches);
