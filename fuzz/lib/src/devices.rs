//! One fuzz target per device frame handler.
//!
//! Each builds a fresh device from the input's selector byte, drives it with
//! the input's events ([`crate::input`]) through the one-device harness (which
//! itself panics if a device transmits or sets a timer in the past), lets
//! timers run for [`DRAIN`] after the last event, and checks after every
//! event that the state the device bounds stays under its bound:
//!
//! - every device: the heap it holds grows by at most [`HEAP_SLACK`] plus
//!   [`HEAP_PER_INPUT_BYTE`] per input byte (a counting allocator,
//!   [`crate::alloc`]);
//! - a switch: the shared packet buffer within the profile's size, the
//!   recorded data-plane violations within their cap; RedPlane: flows
//!   holding a slot within MAX_FLOWS; TEA: the SRAM cache and stash within
//!   their capacities;
//! - the RedPlane store: records per worker within `max_records`, and the
//!   store's own §6.2.4 invariant counter still 0;
//! - the TEA DRAM server: resident memory within the DRAM offered.

use std::net::Ipv4Addr;

use inca_apps::catalog::{with_app, AppVisitor};
use inca_apps::params::Params;
use inca_redplane::apps::SpecModel;
use inca_redplane::catalog::{with_program, RpVisitor};
use inca_redplane::store::{AppConfig, StoreConfig, StoreServer, WorkerConfig};
use inca_redplane::switch::{RedPlane, RedPlaneApp};
use inca_sim::engine::Node;
use inca_switch::device::{Device, Nanos, PortId};
use inca_switch::harness::Harness;
use inca_switch::objects::MAX_RECORDED_VIOLATIONS;
use inca_switch::{Profile, Program, Switch};
use inca_tea::nf::{TeaFirewall, TeaLb, TeaNat, TeaVpn};
use inca_tea::server::{DramServer, DramServerConfig};
use inca_tea::switch::{TeaNf, TeaSwitch};

use crate::alloc;
use crate::input::{decode, Action, Event};

/// Virtual time the device runs on after the last event, so that what the
/// events started (queues draining, retransmissions, lease timers) happens.
pub const DRAIN: Nanos = 20_000_000;

/// Heap a device may gain over a run regardless of input size (lazily
/// built tables, first growth of its maps).
pub const HEAP_SLACK: usize = 64 << 20;

/// Heap a device may gain per byte of input (a 4 KiB page of DRAM touched
/// by a 64-byte WRITE is the largest legitimate ratio we know of).
pub const HEAP_PER_INPUT_BYTE: usize = 1 << 12;

/// The inca-apps programs. [our choice] Listed here rather than taken from
/// `inca_apps::catalog::APPS`, which names only two of them; the
/// `every_catalog_app_builds` test below fails if a name stops resolving.
pub const APP_NAMES: &[&str] = &[
    "l2l3",
    "nat",
    "firewall",
    "lb",
    "vpn",
    "epc",
    "synproxy",
    "heavy_hitter",
    "univmon",
    "superspreader",
    "flow_counter",
    "tenant_counters",
    "kvstore",
    "netcache",
    "ratelimit",
];

/// Profiles an inca-apps program may run on.
pub const PROFILES: &[&str] = &["tofino", "smartnic", "server"];

/// Longest gap between two events for most devices: an event's `dt` as is
/// (up to 4.3 s), so lease expiry and retransmission give-ups are reached.
pub const MAX_GAP: Nanos = u32::MAX as Nanos;

/// Longest gap between two events for a TEA switch, whose control plane
/// works every few microseconds even when idle (sketch epochs, heartbeats,
/// watchdogs): a second of it is thousands of events, and 64 such gaps
/// make one input take seconds. [our choice] 1 ms.
pub const TEA_MAX_GAP: Nanos = 1_000_000;

/// Feeds `events` to the device in `h` (gaps taken modulo `max_gap + 1`),
/// calling `check` after each one and after the drain.
fn drive<D: Device>(h: &mut Harness<D>, events: &[Event], max_gap: Nanos, check: impl Fn(&D)) {
    h.keep_frames = false;
    let mut t: Nanos = 0;
    for e in events {
        t += Nanos::from(e.dt) % (max_gap + 1);
        let port = PortId::from(e.port);
        match &e.action {
            Action::Frame(f) => h.send(t, port, f.clone()),
            Action::Link(up) => h.link(t, port, *up),
            Action::Restart => h.restart(t),
            Action::Advance => h.advance_to(t),
        }
        // Control messages are the driver's to deliver; nobody does here.
        h.messages.clear();
        check(&h.device);
    }
    h.advance_to(t + DRAIN);
    check(&h.device);
}

/// The heap bound of one run over `data`, given the heap before the device
/// was driven.
fn check_heap(before: usize, data: &[u8]) {
    let grown = alloc::live().saturating_sub(before);
    let bound = HEAP_SLACK + HEAP_PER_INPUT_BYTE * data.len();
    assert!(
        grown <= bound,
        "the device grew its heap by {grown} bytes on {} input bytes",
        data.len()
    );
}

/// The bounds every switch keeps, whatever its program.
pub fn check_switch<P: Program>(s: &Switch<P>) {
    let buffer = s.profile().data_path.buffer_bytes;
    assert!(
        s.buffer_used() <= buffer,
        "buffer {} > {buffer}",
        s.buffer_used()
    );
    assert!(s.violations().len() <= MAX_RECORDED_VIOLATIONS);
}

fn run_switch<P: Program>(
    profile: Profile,
    program: P,
    seed: u8,
    events: &[Event],
    data: &[u8],
    extra: &dyn Fn(&Switch<P>),
) {
    let Ok(sw) = Switch::new(profile, program) else {
        // A program that does not fit this profile: nothing to fuzz.
        return;
    };
    let before = alloc::live();
    let mut h = Harness::new(sw, u64::from(seed));
    drive(&mut h, events, MAX_GAP, |s: &Switch<P>| {
        check_switch(s);
        extra(s);
    });
    check_heap(before, data);
}

/// The switch running an inca-apps program on a profile, both chosen by the
/// selector.
pub fn switch_apps(data: &[u8]) {
    let (sel, events) = decode(data);
    let name = APP_NAMES[usize::from(sel) % APP_NAMES.len()];
    let profile = PROFILES[usize::from(sel) / APP_NAMES.len() % PROFILES.len()];
    struct Run<'a>(&'a str, u8, &'a [Event], &'a [u8]);
    impl AppVisitor for Run<'_> {
        type Output = ();
        fn visit<P: Program>(self, program: P) {
            let profile = Profile::by_name(self.0).expect("a known profile");
            run_switch(profile, program, self.1, self.2, self.3, &|_| {});
        }
    }
    with_app(name, &Params::default(), Run(profile, sel, &events, data))
        .expect("a catalog app builds with its defaults");
}

/// The ExoPlane apps the fuzz programs carry: every app kind the model
/// has, small.
fn exoplane_apps() -> Vec<inca_exoplane::app::AppSpec> {
    use inca_exoplane::app::catalog;
    use inca_exoplane::ids::AppId;
    vec![
        catalog::nat(AppId(1), "nat", 256, 1),
        catalog::univmon(AppId(2), "um", 2, 2, 256),
        catalog::firewall(AppId(3), "fw", 256, 1, 64),
        catalog::synproxy(AppId(4), "sp", 256, 0, 1),
        catalog::vpn(AppId(5), "vpn", 256, 1, 16),
        catalog::tenant_nat(AppId(6), "tnat", 256, 1),
        catalog::tenant_acl(AppId(7), "tacl", 256, 1),
        catalog::netcache(AppId(8), "nc", 64, 1, 0, 256),
    ]
}

/// The ExoPlane switch program (even selector; devices on ports 2 and 3)
/// or device program (odd), with every app kind.
pub fn switch_exoplane(data: &[u8]) {
    use inca_exoplane::device::{DeviceConfig, ExoDevice, QUEUE};
    use inca_exoplane::switch::{ExoSwitch, SwitchApp, SwitchConfig, EVENT_QUEUE};
    use inca_switch::composite::ClassifyRule;
    let (sel, events) = decode(data);
    if sel % 2 == 0 {
        let rules = ClassifyRule::parse_list(
            "um:dport=7777;fw:dport=5353;sp:dport=2222;vpn:dport=4789;tacl:dport=8080;\
             nc:dport=50000;nat:vlan=0;tnat:*",
        )
        .expect("fixed rules parse");
        let apps = exoplane_apps()
            .into_iter()
            .map(|spec| SwitchApp {
                spec,
                fm_entries: 64,
            })
            .collect();
        let p = ExoSwitch::new(SwitchConfig::new(apps, rules, vec![2, 3]))
            .expect("a fixed configuration");
        run_switch(Profile::tofino(), p, sel, &events, data, &|s| {
            let p = s.program();
            for n in [
                p.port_down_events.len(),
                p.merge_acks.len(),
                p.aged.len(),
                p.app_events.len(),
            ] {
                assert!(n <= EVENT_QUEUE, "a hub queue holds {n}");
            }
        });
    } else {
        let apps = exoplane_apps()
            .into_iter()
            .filter(|a| a.affinity != inca_exoplane::app::Affinity::High)
            .collect();
        let mut cfg = DeviceConfig::new(apps);
        cfg.cms_width = 256;
        cfg.theta = 2;
        let p = ExoDevice::new(cfg).expect("a fixed configuration");
        run_switch(Profile::smartnic(), p, sel, &events, data, &|s| {
            let p = s.program();
            for n in [
                p.misses.len(),
                p.reports.len(),
                p.merge_acks.len(),
                p.app_events.len(),
            ] {
                assert!(n <= QUEUE, "a daemon queue holds {n}");
            }
        });
    }
}

/// The RedPlane programs, by name.
pub fn redplane_programs() -> Vec<&'static str> {
    inca_redplane::catalog::PROGRAMS
        .iter()
        .map(|p| p.0)
        .collect()
}

/// The switch running a RedPlane program on a Tofino.
pub fn switch_redplane(data: &[u8]) {
    let (sel, events) = decode(data);
    let names = redplane_programs();
    let name = names[usize::from(sel) % names.len()];
    struct Run<'a>(u8, &'a [Event], &'a [u8]);
    impl RpVisitor for Run<'_> {
        type Output = ();
        fn visit<A: RedPlaneApp + SpecModel>(self, program: RedPlane<A>) {
            let slots = program.config().slots;
            let inflight = program.config().max_inflight as usize;
            run_switch(Profile::tofino(), program, self.0, self.1, self.2, &|s| {
                let p = s.program();
                assert!(
                    p.keys() <= slots,
                    "{} flows hold a slot, MAX_FLOWS {slots}",
                    p.keys()
                );
                assert!(
                    p.loop_copies() <= slots * (inflight + 1),
                    "{} loop copies",
                    p.loop_copies()
                );
            });
        }
    }
    with_program(name, &Params::default(), None, Run(sel, &events, data))
        .expect("a RedPlane program builds with its defaults");
}

/// Parameters of the TEA fuzz switch: a small table, so building one per
/// input is cheap; everything else the catalog's defaults.
pub const TEA_PARAMS: &[&str] = &["entries=4096"];

/// The TEA programs, by name.
pub fn tea_programs() -> Vec<&'static str> {
    inca_tea::catalog::PROGRAMS.iter().map(|p| p.0).collect()
}

fn tea_bounds<N: TeaNf>(s: &Switch<TeaSwitch<N>>) {
    let p = s.program();
    let cfg = p.config();
    let cache = p.cache_entries(s.objects()).len();
    assert!(cache <= cfg.cache_cap, "cache {cache} > {}", cfg.cache_cap);
    let stash = p.stash_entries(s.objects()).len();
    assert!(stash <= cfg.stash_cap, "stash {stash} > {}", cfg.stash_cap);
}

/// Checks a TEA switch built by the catalog as a node, whatever its NF.
fn check_tea_node(n: &dyn Node) {
    let any = n.as_any();
    if let Some(s) = any.downcast_ref::<Switch<TeaSwitch<TeaNat>>>() {
        check_switch(s);
        tea_bounds(s);
    } else if let Some(s) = any.downcast_ref::<Switch<TeaSwitch<TeaFirewall>>>() {
        check_switch(s);
        tea_bounds(s);
    } else if let Some(s) = any.downcast_ref::<Switch<TeaSwitch<TeaLb>>>() {
        check_switch(s);
        tea_bounds(s);
    } else if let Some(s) = any.downcast_ref::<Switch<TeaSwitch<TeaVpn>>>() {
        check_switch(s);
        tea_bounds(s);
    } else {
        panic!("the TEA catalog built a {}", n.kind());
    }
}

/// The switch running a TEA program on a Tofino.
pub fn switch_tea(data: &[u8]) {
    let (sel, events) = decode(data);
    let names = tea_programs();
    let name = names[usize::from(sel) % names.len()];
    let params = Params::parse(TEA_PARAMS.iter().copied()).expect("valid TEA parameters");
    let node =
        inca_tea::catalog::build(name, &params, &Profile::tofino()).expect("a TEA program builds");
    let before = alloc::live();
    let mut h = Harness::new(node, u64::from(sel));
    drive(&mut h, &events, TEA_MAX_GAP, |n| check_tea_node(n.as_ref()));
    check_heap(before, data);
}

/// The RedPlane store's address in the fuzz configurations.
pub const STORE_IP: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);
/// The one switch the "allowlist" configuration admits.
pub const ALLOWED_SWITCH: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);

/// The store configurations the selector picks from: one KV worker; four
/// apps on workers 1–4; the head of a three-node chain; and tight bounds
/// (4 records, a 2-deep queue, one allowed switch) so the fuzzer reaches the
/// overflow paths.
pub fn store_config(sel: u8) -> StoreConfig {
    let w = |worker, app| WorkerConfig {
        worker,
        app,
        shard: 0,
        shards: 1,
    };
    match sel % 4 {
        0 => StoreConfig::new(STORE_IP, vec![w(1, AppConfig::Kv)]),
        1 => StoreConfig::new(
            STORE_IP,
            vec![
                w(1, AppConfig::Kv),
                w(2, AppConfig::Firewall),
                w(3, AppConfig::SyncCounter),
                w(4, AppConfig::Epc),
            ],
        ),
        2 => {
            let mut c = StoreConfig::new(STORE_IP, vec![w(1, AppConfig::Kv)]);
            c.chain = vec![
                STORE_IP,
                Ipv4Addr::new(10, 9, 0, 2),
                Ipv4Addr::new(10, 9, 0, 3),
            ];
            c
        }
        _ => {
            let mut c = StoreConfig::new(STORE_IP, vec![w(1, AppConfig::Kv)]);
            c.max_records = 4;
            c.worker_queue = 2;
            c.allowed_switches = vec![ALLOWED_SWITCH];
            c
        }
    }
}

/// The RedPlane state store server.
pub fn redplane_store(data: &[u8]) {
    let (sel, events) = decode(data);
    let cfg = store_config(sel);
    let max_records = cfg.max_records;
    let workers: Vec<u16> = cfg.workers.iter().map(|w| w.worker).collect();
    let store = StoreServer::new(cfg).expect("a valid store configuration");
    let before = alloc::live();
    let mut h = Harness::new(store, u64::from(sel));
    drive(&mut h, &events, MAX_GAP, |s: &StoreServer| {
        for &w in &workers {
            let n = s.worker(w).map_or(0, |w| w.record_count());
            assert!(
                n <= max_records,
                "worker {w} holds {n} > {max_records} records"
            );
        }
        assert_eq!(s.stats().invariant_violations, 0, "the store broke §6.2.4");
    });
    check_heap(before, data);
}

/// The DRAM server configurations: ICRC checking on or off (off lets the
/// fuzzer past the CRC to the responder's rules), READ trailers tolerated
/// or not.
pub fn dram_config(sel: u8) -> DramServerConfig {
    DramServerConfig {
        verify_icrc: sel & 1 == 0,
        accept_read_trailer: sel & 2 == 0,
        ..DramServerConfig::default()
    }
}

/// The TEA DRAM server: RoCEv2 responder NIC and agent behind one port.
pub fn tea_dram(data: &[u8]) {
    let (sel, events) = decode(data);
    let cfg = dram_config(sel);
    let offered = cfg.dram_offered;
    let server = DramServer::new(cfg).expect("a valid DRAM server configuration");
    let before = alloc::live();
    let mut h = Harness::new(server, u64::from(sel));
    drive(&mut h, &events, MAX_GAP, |s: &DramServer| {
        let mem = s.nic().memory();
        assert!(
            mem.used() <= offered,
            "{} registered > {offered}",
            mem.used()
        );
        assert!(mem.resident_bytes() <= mem.used().max(1) + (1 << 12));
    });
    check_heap(before, data);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{encode, frame};

    #[test]
    fn every_catalog_app_builds() {
        for name in APP_NAMES {
            struct Ok;
            impl AppVisitor for Ok {
                type Output = ();
                fn visit<P: Program>(self, _: P) {}
            }
            with_app(name, &Params::default(), Ok).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn every_target_survives_a_small_input() {
        let f = inca_wire::build_udp_frame(
            &inca_wire::Endpoints::new([2; 6], [10, 0, 0, 1].into(), [4; 6], [10, 0, 0, 2].into()),
            1,
            2,
            b"x",
            true,
        )
        .unwrap();
        for sel in 0..8 {
            let input = encode(
                sel,
                &[frame(0, 10, f.clone()), frame(1, 1_000_000, f.clone())],
            );
            for t in crate::TARGETS {
                crate::run(t, &input);
            }
        }
    }
}
