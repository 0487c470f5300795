//! The §7 apps added to the catalog last — per-tenant NAT, per-tenant ACL
//! with its drop counter, NetCache — in the ExoPlane switch and device
//! programs on the test fabric (as tests/data_planes.rs): one tofino, two
//! smart NICs, hosts on switch ports 0 (inside, NetCache's clients) and 1
//! (outside, NetCache's server). Entries are written by hand
//! (`manual::write`, the WRITE_APPLY path through `AppSpec::install`).
//!
//! Apps: per-tenant NAT (id 1, MEDIUM, everything else), per-tenant ACL
//! (id 2, MEDIUM, destination port 8080), NetCache (id 3, HIGH, UDP
//! 50000).

use std::net::Ipv4Addr;

use inca_apps::acl::Verdict;
use inca_apps::nat::Translate;
use inca_apps::netcache::NetCache;
use inca_exoplane::app::catalog::{self, encode_slot, encode_translate, encode_verdict, NatSetup};
use inca_exoplane::app::{AppSpec, KeyField};
use inca_exoplane::device::{DeviceConfig, ExoDevice};
use inca_exoplane::ids::{AppId, LogicalId};
use inca_exoplane::manual;
use inca_exoplane::switch::{ExoSwitch, SwitchApp, SwitchConfig};
use inca_switch::composite::ClassifyRule;
use inca_switch::fabric::{Fabric, NodeIx, Wire};
use inca_switch::{Handle, Profile, Switch};
use inca_wire::exoplane::netcache::{NetCacheRepr, Op, PORT as NC_PORT};
use inca_wire::exoplane::{MergeOp, MergeRepr};
use inca_wire::{build_udp_frame, Endpoints, UdpDatagram, VlanTag};

const TNAT: u8 = 1;
const TACL: u8 = 2;
const NC: u8 = 3;
const INSIDE: u16 = 0;
const OUTSIDE: u16 = 1;
const DEV_PORTS: [u16; 2] = [2, 3];
const US: u64 = 1_000;

fn apps(flows: usize) -> Vec<AppSpec> {
    vec![
        catalog::tenant_nat(AppId(TNAT), "tnat", flows, OUTSIDE),
        catalog::tenant_acl(AppId(TACL), "tacl", flows, OUTSIDE),
        catalog::netcache(AppId(NC), "nc", 64, OUTSIDE, INSIDE, 1024),
    ]
}

struct Rack {
    f: Fabric,
    sw: NodeIx,
    devs: [NodeIx; 2],
}

fn rack(seed: u64) -> Rack {
    println!("seed {seed}");
    let rules = ClassifyRule::parse_list("nc:dport=50000;tacl:dport=8080;tnat:*").unwrap();
    let sw_apps = apps(1024)
        .into_iter()
        .map(|spec| SwitchApp {
            fm_entries: 256,
            spec,
        })
        .collect();
    let sw_prog = ExoSwitch::new(SwitchConfig::new(sw_apps, rules, DEV_PORTS.to_vec())).unwrap();
    // Only the tail apps run on devices.
    let dev_apps: Vec<AppSpec> = apps(4096).into_iter().filter(|a| a.id.0 != NC).collect();
    let mut f = Fabric::new(seed);
    let sw = f.add_any(Switch::new(Profile::tofino(), sw_prog).unwrap());
    let mut devs = [sw; 2];
    for (i, d) in devs.iter_mut().enumerate() {
        let mut cfg = DeviceConfig::new(dev_apps.clone());
        cfg.cms_width = 1024;
        let prog = ExoDevice::new(cfg).unwrap();
        *d = f.add_any(Switch::new(Profile::smartnic(), prog).unwrap());
        f.connect((sw, DEV_PORTS[i]), (*d, 0), Wire::with_latency(500))
            .unwrap();
    }
    f.keep_egress(true);
    f.start_all();
    f.run_until(50_000 * US);
    Rack { f, sw, devs }
}

fn sw(r: &Rack) -> &Switch<ExoSwitch> {
    r.f.get::<Switch<ExoSwitch>>(r.sw).unwrap()
}

fn dev(r: &Rack, i: usize) -> &Switch<ExoDevice> {
    r.f.get::<Switch<ExoDevice>>(r.devs[i]).unwrap()
}

fn settle(r: &mut Rack, us: u64) {
    let t = r.f.now() + us * US;
    r.f.run_until(t);
}

fn send(r: &mut Rack, port: u16, frame: &[u8], gap_us: u64) {
    let t = r.f.now();
    r.f.inject(t, r.sw, port, frame.to_vec());
    settle(r, gap_us);
}

fn write(r: &mut Rack, node: NodeIx, app: u8, obj: u16, key: &[u8], value: Option<&[u8]>) {
    let t = r.f.now();
    r.f.control(t, node, manual::write(app, obj, key, value).unwrap());
}

fn out_on(r: &mut Rack, port: u16) -> Vec<Vec<u8>> {
    r.f.take_egress()
        .into_iter()
        .filter(|s| s.node == r.sw && s.port == port)
        .map(|s| s.frame)
        .collect()
}

fn inside(vid: u16) -> Endpoints {
    let mut ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::new(10, 0, 0, 1),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(203, 0, 113, 9),
    );
    ep.vlan = Some(VlanTag {
        pcp: 0,
        dei: false,
        vid,
    });
    ep
}

/// A tenant's UDP flow (VLAN-tagged: the UDP header starts at 38).
fn flow(vid: u16, sport: u16, dport: u16) -> Vec<u8> {
    build_udp_frame(&inside(vid), sport, dport, &[0xAB; 32], true).unwrap()
}

/// Union key (VID ‖ 5-tuple) of `flow(vid, sport, dport)`.
fn uk(vid: u16, sport: u16, dport: u16) -> Vec<u8> {
    let mut k = vid.to_be_bytes().to_vec();
    k.extend_from_slice(&[10, 0, 0, 1, 203, 0, 113, 9, 17]);
    k.extend_from_slice(&sport.to_be_bytes());
    k.extend_from_slice(&dport.to_be_bytes());
    k
}

fn sport_of(frame: &[u8]) -> u16 {
    u16::from_be_bytes([frame[38], frame[39]])
}

fn counter(s: &Switch<impl inca_switch::Program>, name: &str, i: u64) -> u64 {
    let id = s.objects().id_of(name).unwrap();
    s.objects()
        .counter_read(Handle::of_object(id), i)
        .unwrap()
        .0
}

#[test]
fn a_tenant_nat_flow_translates_alike_on_a_device_and_on_the_switch() {
    let mut r = rack(31);
    let t = encode_translate(&Translate {
        ip: [198, 51, 100, 7],
        port: 61_000,
        egress: OUTSIDE,
    });
    let key = uk(10, 4000, 80);
    for d in r.devs {
        write(&mut r, d, TNAT, 1, &key, Some(&t));
    }
    settle(&mut r, 30_000);
    for _ in 0..3 {
        send(&mut r, INSIDE, &flow(10, 4000, 80), 20);
    }
    let on_device = out_on(&mut r, OUTSIDE);
    assert_eq!(on_device.len(), 3);
    assert_eq!(sw(&r).program().counters().from_dev, 3);
    // Tenant 20's identical 5-tuple is another flow: a MISS on its device.
    send(&mut r, INSIDE, &flow(20, 4000, 80), 20);
    settle(&mut r, 2_000);
    assert!(out_on(&mut r, OUTSIDE).is_empty());
    let misses: u64 = (0..2).map(|i| dev(&r, i).program().counters().misses).sum();
    assert_eq!(misses, 1);
    // Promote: the entry on the switch, then the FM entry (two-phase).
    // needs() names exactly that entry (P1 holds: no violation below).
    let spec = &apps(16)[0];
    let p = inca_apps::headers::parse(&flow(10, 4000, 80)).unwrap();
    let needs = spec.needs(&p, &flow(10, 4000, 80), INSIDE);
    assert_eq!(needs, vec![(inca_exoplane::ids::ObjId(1), key.clone())]);
    assert_eq!(spec.union_key(&p, &[]).0, key);
    let sw_node = r.sw;
    write(&mut r, sw_node, TNAT, 1, &key, Some(&t));
    settle(&mut r, 100);
    let t0 = r.f.now();
    r.f.control(t0, sw_node, manual::fm(TNAT, Some(0), &key).unwrap());
    settle(&mut r, 100);
    for _ in 0..3 {
        send(&mut r, INSIDE, &flow(10, 4000, 80), 20);
    }
    let on_switch = out_on(&mut r, OUTSIDE);
    assert_eq!(sw(&r).program().counters().fm_hits, 3);
    assert_eq!(on_switch.len(), 3);
    assert_eq!(on_switch[0], on_device[0], "the same code in both places");
    assert_eq!(sport_of(&on_switch[0]), 61_000);
    assert!(sw(&r).violations().is_empty(), "{:?}", sw(&r).violations());
}

#[test]
fn a_tenant_acl_flow_promoted_without_its_entry_breaks_invariant_1() {
    let mut r = rack(32);
    let t = r.f.now();
    r.f.control(
        t,
        r.sw,
        manual::fm(TACL, Some(1), &uk(10, 4100, 8080)).unwrap(),
    );
    settle(&mut r, 100);
    send(&mut r, INSIDE, &flow(10, 4100, 8080), 5);
    settle(&mut r, 100);
    // Counted and described (a campaign fails the seed: crate::checks).
    let p = r.f.get::<Switch<ExoSwitch>>(r.sw).unwrap().program();
    assert!(p.counters().p1_violations >= 1);
    assert!(p.p1_notes()[0].contains("P1"), "{:?}", p.p1_notes());
}

#[test]
fn tenant_acl_permits_denies_and_counts_drops_per_tenant_on_device_and_switch() {
    let mut r = rack(33);
    let (permit, deny) = (uk(10, 5000, 8080), uk(10, 5001, 8080));
    let sw_node = r.sw;
    for node in [r.devs[0], r.devs[1], sw_node] {
        write(
            &mut r,
            node,
            TACL,
            1,
            &permit,
            Some(&encode_verdict(Verdict::Permit)),
        );
        write(
            &mut r,
            node,
            TACL,
            1,
            &deny,
            Some(&encode_verdict(Verdict::Deny)),
        );
    }
    settle(&mut r, 30_000);
    // On devices: FM misses.
    send(&mut r, INSIDE, &flow(10, 5000, 8080), 20);
    send(&mut r, INSIDE, &flow(10, 5001, 8080), 20);
    send(&mut r, INSIDE, &flow(11, 5002, 8080), 20); // no entry: denied
    settle(&mut r, 100);
    assert_eq!(out_on(&mut r, OUTSIDE).len(), 1);
    let dev_drops = |r: &Rack, vid| -> u64 {
        (0..2)
            .map(|i| counter(dev(r, i), "tacl/acl_tenant_drops", vid))
            .sum()
    };
    assert_eq!((dev_drops(&r, 10), dev_drops(&r, 11)), (1, 1));
    // Promote both flows (entries already on the switch).
    let t = r.f.now();
    r.f.control(t, sw_node, manual::fm(TACL, Some(2), &permit).unwrap());
    r.f.control(t, sw_node, manual::fm(TACL, Some(3), &deny).unwrap());
    settle(&mut r, 100);
    for _ in 0..2 {
        send(&mut r, INSIDE, &flow(10, 5000, 8080), 20);
        send(&mut r, INSIDE, &flow(10, 5001, 8080), 20);
    }
    settle(&mut r, 100);
    assert_eq!(out_on(&mut r, OUTSIDE).len(), 2);
    assert_eq!(sw(&r).program().counters().fm_hits, 4);
    assert_eq!(counter(sw(&r), "tacl/acl_tenant_drops", 10), 2);
    // The drop counter merges by VID (ADD), as the hub's rounds do.
    let m = MergeRepr {
        obj_id: 2,
        op: MergeOp::Add,
        width: 32,
        slot: 10,
        round: 1,
        delta: 5,
    };
    let t = r.f.now();
    r.f.control(t, sw_node, manual::merge(TACL, &m).unwrap());
    settle(&mut r, 1_000);
    assert_eq!(counter(sw(&r), "tacl/acl_tenant_drops", 10), 7);
    assert!(sw(&r).violations().is_empty(), "{:?}", sw(&r).violations());
    // A value that is not a verdict is refused, not installed.
    let before = sw(&r).program().counters().write_refused;
    write(&mut r, sw_node, TACL, 1, &permit, Some(&[7]));
    settle(&mut r, 100);
    assert_eq!(sw(&r).program().counters().write_refused, before + 1);
}

/// A NetCache datagram from a client (or, with `reply`, the server).
fn nc(op: Op, key: u8, value: Vec<u8>, reply: bool) -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 0, 1],
        Ipv4Addr::new(10, 0, 0, 1),
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(10, 0, 1, 1),
    );
    let ep = if reply { ep.reversed() } else { ep };
    let r = NetCacheRepr {
        op,
        seq: 5,
        key: [key; 16],
        value,
    };
    build_udp_frame(&ep, NC_PORT, NC_PORT, &r.to_bytes().unwrap(), true).unwrap()
}

fn nc_payload(frame: &[u8]) -> NetCacheRepr {
    let udp = UdpDatagram::new_checked(&frame[34..]).unwrap();
    NetCacheRepr::parse(udp.payload()).unwrap()
}

#[test]
fn netcache_serves_hits_on_the_switch_once_its_index_entry_is_written() {
    let mut r = rack(34);
    let value: Vec<u8> = (0..128u8).collect();
    // Uncached: reads go to the server, never to a device (HIGH), and the
    // hot key waits for the index owner.
    for _ in 0..130 {
        send(&mut r, INSIDE, &nc(Op::Read, 9, vec![0; 128], false), 1);
    }
    settle(&mut r, 5_000);
    assert_eq!(out_on(&mut r, OUTSIDE).len(), 130);
    let c = sw(&r).program().counters().clone();
    assert_eq!((c.high, c.to_dev), (130, 0));
    let cache = sw(&r).program().apps().block::<NetCache>("nc").unwrap();
    assert_eq!(cache.hot_keys().len(), 1, "the 128th read reported it");
    assert_eq!(cache.hot_keys()[0].key(), &[9; 16]);
    // The index entry (key → slot 3), then the server's reply fills it.
    let sw_node = r.sw;
    write(&mut r, sw_node, NC, 1, &[9; 16], Some(&encode_slot(3)));
    settle(&mut r, 100);
    send(&mut r, OUTSIDE, &nc(Op::Reply, 9, value.clone(), true), 20);
    assert_eq!(
        out_on(&mut r, INSIDE).len(),
        1,
        "the reply reaches the client"
    );
    send(&mut r, INSIDE, &nc(Op::Read, 9, vec![0; 128], false), 20);
    let back = out_on(&mut r, INSIDE);
    assert_eq!(back.len(), 1, "answered by the switch");
    assert!(out_on(&mut r, OUTSIDE).is_empty());
    let a = nc_payload(&back[0]);
    assert_eq!(
        (a.op, a.seq, a.key, a.value),
        (Op::Reply, 5, [9; 16], value)
    );
    // A WRITE invalidates: the next READ goes to the server.
    send(&mut r, INSIDE, &nc(Op::Write, 9, vec![1; 128], false), 20);
    send(&mut r, INSIDE, &nc(Op::Read, 9, vec![0; 128], false), 20);
    assert_eq!(out_on(&mut r, OUTSIDE).len(), 2);
    // A slot beyond the cache, or a short key, is refused.
    let before = sw(&r).program().counters().write_refused;
    write(&mut r, sw_node, NC, 1, &[8; 16], Some(&encode_slot(64)));
    write(&mut r, sw_node, NC, 1, &[8; 8], Some(&encode_slot(1)));
    settle(&mut r, 100);
    assert_eq!(sw(&r).program().counters().write_refused, before + 2);
    assert!(sw(&r).violations().is_empty(), "{:?}", sw(&r).violations());
}

#[test]
fn the_catalog_declares_the_new_apps_as_their_programs_do() {
    let specs = apps(1024);
    for a in &specs {
        a.validate().unwrap();
    }
    assert_eq!(
        specs[0].union_fields(),
        inca_exoplane::app::VID_FIVE_TUPLE.to_vec()
    );
    assert_eq!(
        specs[1].union_fields(),
        inca_exoplane::app::VID_FIVE_TUPLE.to_vec()
    );
    assert_eq!(specs[2].union_fields(), vec![KeyField::CacheKey]);
    // NetCache's registers do not merge: MEDIUM is refused.
    let mut mid = specs[2].clone();
    mid.affinity = inca_exoplane::app::Affinity::Medium;
    assert!(mid.validate().is_err());
    // Every declared object is an object of the loaded switch program.
    let r = rack(35);
    for a in &specs {
        for o in &a.objects {
            let name = format!("{}/{}", a.name, o.name);
            assert!(sw(&r).objects().id_of(&name).is_some(), "{name}");
        }
    }
    // NetCache's key in the union key: its packets, and zeros for others.
    let f = nc(Op::Read, 4, vec![0; 16], false);
    let p = inca_apps::headers::parse(&f).unwrap();
    assert_eq!(specs[2].union_key(&p, &f).0, vec![4; 16]);
    assert_eq!(
        specs[2].needs(&p, &f, INSIDE),
        vec![(inca_exoplane::ids::ObjId(1), vec![4; 16])]
    );
    let g = flow(3, 1, 2);
    let q = inca_apps::headers::parse(&g).unwrap();
    assert_eq!(specs[2].union_key(&q, &g).0, vec![0; 16]);
    assert!(specs[2].needs(&q, &g, INSIDE).is_empty());
}

#[test]
fn nat_shards_allocate_disjoint_endpoints_and_their_writes_set_a_flow_up() {
    let spec = catalog::tenant_nat(AppId(TNAT), "tnat", 1024, OUTSIDE);
    assert!(NatSetup::for_shard(&spec, LogicalId(2), 2).is_none());
    let acl = catalog::tenant_acl(AppId(TACL), "tacl", 16, OUTSIDE);
    assert!(NatSetup::for_shard(&acl, LogicalId(0), 2).is_none());
    let mut shards: Vec<NatSetup> = (0..2)
        .map(|l| NatSetup::for_shard(&spec, LogicalId(l), 2).unwrap())
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    for sport in 0..200u16 {
        for (l, s) in shards.iter_mut().enumerate() {
            // Each shard sees different flows; tenants reuse 5-tuples.
            let f = flow(10 + l as u16, 1000 + sport, 80);
            let w = s.writes(&f, INSIDE).unwrap();
            assert_eq!(w.len(), 2);
            assert_eq!(w[0].key, uk(10 + l as u16, 1000 + sport, 80));
            // The public endpoint (address 4 ‖ port 2) is the shard's own.
            assert!(seen.insert(w[0].value[..6].to_vec()), "{:?}", w[0].value);
            assert_eq!(s.writes(&f, INSIDE).unwrap()[0].value, w[0].value);
        }
    }
    // From outside: no setup.
    assert!(shards[0].writes(&flow(10, 1, 2), OUTSIDE).is_none());
    // The writes, applied on a device, set the flow up both ways.
    let mut r = rack(36);
    let f = flow(10, 7000, 53);
    let ws = shards[0].writes(&f, INSIDE).unwrap();
    for d in r.devs {
        for w in &ws {
            write(&mut r, d, TNAT, w.obj.0, &w.key, Some(&w.value));
        }
    }
    settle(&mut r, 30_000);
    send(&mut r, INSIDE, &f, 20);
    let out = out_on(&mut r, OUTSIDE);
    assert_eq!(out.len(), 1);
    let public = u16::from_be_bytes([ws[0].value[4], ws[0].value[5]]);
    assert_eq!(sport_of(&out[0]), public);
    // The reply, in the tenant's VLAN, to the public endpoint: back inside.
    let mut back = inside(10).reversed();
    back.dst_ip = Ipv4Addr::new(
        ws[0].value[0],
        ws[0].value[1],
        ws[0].value[2],
        ws[0].value[3],
    );
    let reply = build_udp_frame(&back, 53, public, b"r", true).unwrap();
    send(&mut r, OUTSIDE, &reply, 20);
    let inn = out_on(&mut r, INSIDE);
    assert_eq!(inn.len(), 1);
    assert_eq!(u16::from_be_bytes([inn[0][40], inn[0][41]]), 7000);
}

#[test]
fn the_load_time_check_passes_both_programs_with_the_new_apps() {
    use inca_switch::loadcheck::{load_check, LoadCheckOptions};
    let opts = LoadCheckOptions { seed: 7 };
    println!("seed {}", opts.seed);
    let rules = ClassifyRule::parse_list("nc:dport=50000;tacl:dport=8080;tnat:*").unwrap();
    let sw_apps = apps(256)
        .into_iter()
        .map(|spec| SwitchApp {
            fm_entries: 64,
            spec,
        })
        .collect();
    let sw_prog = ExoSwitch::new(SwitchConfig::new(sw_apps, rules, DEV_PORTS.to_vec())).unwrap();
    let r = load_check(&Profile::tofino(), sw_prog, opts).unwrap();
    println!("{r}");
    assert!(r.passed() && r.passes > 0, "{r}");
    let mut cfg = DeviceConfig::new(apps(256).into_iter().filter(|a| a.id.0 != NC).collect());
    cfg.cms_width = 1024;
    let r = load_check(&Profile::smartnic(), ExoDevice::new(cfg).unwrap(), opts).unwrap();
    println!("{r}");
    assert!(r.passed() && r.passes > 0, "{r}");
}

#[test]
fn every_catalog_apps_declared_widths_are_its_programs() {
    use inca_exoplane::app::ObjectKind;
    // Each catalog app alone on a switch (the SYN proxy, LOW, on a device):
    // every declared object is the program's, with its key and value width.
    let all = vec![
        catalog::nat(AppId(1), "nat", 1024, OUTSIDE),
        catalog::firewall(AppId(1), "fw", 1024, OUTSIDE, 256),
        catalog::univmon(AppId(1), "um", 2, 2, 256),
        catalog::vpn(AppId(1), "vpn", 1024, OUTSIDE, 256),
        catalog::tenant_nat(AppId(1), "tnat", 1024, OUTSIDE),
        catalog::tenant_acl(AppId(1), "tacl", 1024, OUTSIDE),
        catalog::netcache(AppId(1), "nc", 1000, OUTSIDE, INSIDE, 1024),
        catalog::synproxy(AppId(1), "sp", 1024, INSIDE, OUTSIDE),
    ];
    for spec in all {
        let rules = ClassifyRule::parse_list(&format!("{}:*", spec.name)).unwrap();
        let placed = if spec.affinity == inca_exoplane::app::Affinity::Low {
            let mut d = ExoDevice::new(DeviceConfig::new(vec![spec.clone()])).unwrap();
            inca_switch::check(&Profile::smartnic(), &mut d).unwrap()
        } else {
            let apps = vec![SwitchApp {
                spec: spec.clone(),
                fm_entries: 64,
            }];
            let mut s = ExoSwitch::new(SwitchConfig::new(apps, rules, vec![2])).unwrap();
            inca_switch::check(&Profile::tofino(), &mut s).unwrap()
        };
        for o in &spec.objects {
            let name = format!("{}/{}", spec.name, o.name);
            let p = placed
                .objects
                .iter()
                .find(|p| p.name == name)
                .unwrap_or_else(|| panic!("{name} is not an object of the program"));
            let key_bits: usize = o.key.iter().map(|f| f.bytes() * 8).sum();
            let ok = match o.kind {
                ObjectKind::Table => p
                    .kind
                    .contains(&format!("{key_bits} b key, {} b data", o.value_bits)),
                ObjectKind::Register => p.kind.ends_with(&format!("× {} b", o.value_bits)),
                ObjectKind::Counter => p.kind.starts_with("counter"),
            };
            assert!(ok, "{name}: declared {:?}, the program has {:?}", o, p.kind);
        }
    }
}
