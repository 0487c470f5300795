//! READ responses that come back `T_GRACE` or more after their lookup's
//! SRAM check (a paused DRAM server holds the READ) are never used: the
//! switch discards the cells and redoes the lookup from the SRAM check, once
//! (spec §5.4: the mutation shield covers only lookups in flight for less
//! than `T_GRACE`).

use std::net::Ipv4Addr;

use inca_apps::headers::parse;
use inca_sim::engine::Fault;
use inca_tea::nf::TeaNat;
use inca_tea::rig::{Probe, Rig, RigConfig};
use inca_tea::switch::{update_message, DropReason, LookupPath};
use inca_wire::{build_udp_frame, Endpoints};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const PUBLIC: [u8; 4] = [198, 51, 100, 1];

/// Inside flow 7: 10.1.0.7:1007 → 8.8.8.8:53, mapped to PUBLIC:2007.
fn flow() -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 1, 1],
        Ipv4Addr::new(10, 1, 0, 7),
        [2, 0, 0, 0, 1, 2],
        Ipv4Addr::new(8, 8, 8, 8),
    );
    build_udp_frame(&ep, 1007, 53, b"late", true).unwrap()
}

fn ready() -> Rig {
    let p = parse(&flow()).unwrap();
    let cfg = RigConfig {
        preload: TeaNat::entries(&p, PUBLIC, 2007).to_vec(),
        // No cache: the flow must go to DRAM.
        cache_cap: 0,
        ..RigConfig::default()
    };
    let mut rig = Rig::nat(&cfg, Probe::default(), Probe::default()).unwrap();
    assert!(rig.run_until_ready(20 * MS), "TEA never got ready");
    rig
}

fn pause_servers(rig: &mut Rig, at: u64, duration: u64) {
    for s in rig.servers.clone() {
        rig.sim.schedule(at, Fault::Pause { node: s, duration });
    }
}

#[test]
fn a_reply_older_than_t_grace_is_not_used_and_the_lookup_is_redone() {
    let mut rig = ready();
    let grace = rig.tea().config().t_grace;
    let key = parse(&flow()).unwrap().five_tuple().to_vec();
    let t0 = rig.sim.now();
    // The lookup's READ reaches the servers while they are paused for far
    // longer than T_GRACE ...
    pause_servers(&mut rig, t0, 10 * grace);
    rig.send(t0 + US, rig.inside, flow());
    // ... and meanwhile the mapping changes: the new value is in the stash
    // (and goes to DRAM once the servers answer again).
    rig.control(
        t0 + 20 * US,
        update_message(&key, &[198, 51, 100, 9, 0, 77]),
    );
    rig.run_until(t0 + 10 * grace + 2 * MS);
    assert_eq!(rig.tea().pending_ops(), 0);
    let out = &rig.probe(rig.outside).received;
    assert_eq!(out.len(), 1, "the packet leaves exactly once");
    let p = parse(&out[0].1).unwrap();
    assert_eq!(
        (p.src, p.sport),
        ([198, 51, 100, 9], 77),
        "the value after the update, not the late reply's"
    );
    let (lookups, _) = rig.observer.drain();
    assert_eq!(lookups.len(), 1, "{lookups:?}");
    for l in &lookups {
        assert!(
            l.path == LookupPath::Sram || l.at - l.checked_at < grace,
            "a reply older than T_GRACE was used: {l:?}"
        );
        assert!(l.checked_at >= t0 + 10 * grace, "checked again: {l:?}");
    }
    let s = rig.tea().dp_stats();
    assert_eq!((s.late_responses, s.redone), (1, 1), "{s:?}");
}

#[test]
fn a_redo_whose_reply_is_late_again_is_dropped() {
    let mut rig = ready();
    let grace = rig.tea().config().t_grace;
    let t0 = rig.sim.now();
    let first = 10 * grace;
    pause_servers(&mut rig, t0, first);
    rig.send(t0 + US, rig.inside, flow());
    // The servers answer the held READ the moment they resume; a second
    // pause 1 ns later holds the redo's READ too.
    pause_servers(&mut rig, t0 + first + 1, 10 * grace);
    rig.run_until(t0 + 30 * grace + 2 * MS);
    let s = rig.tea().dp_stats();
    assert_eq!((s.late_responses, s.redone), (2, 1), "{s:?}");
    assert_eq!(s.drops[DropReason::LateResponse as usize], 1, "{s:?}");
    assert!(rig.probe(rig.outside).received.is_empty());
    let (lookups, _) = rig.observer.drain();
    assert!(lookups.is_empty(), "no reply used: {lookups:?}");
}

#[test]
fn a_reply_within_t_grace_is_used_as_before() {
    let mut rig = ready();
    let grace = rig.tea().config().t_grace;
    let t0 = rig.sim.now();
    pause_servers(&mut rig, t0, grace / 2);
    rig.send(t0 + US, rig.inside, flow());
    rig.run_until(t0 + 2 * MS);
    let s = rig.tea().dp_stats();
    assert_eq!((s.late_responses, s.redone), (0, 0), "{s:?}");
    let (lookups, _) = rig.observer.drain();
    assert_eq!(lookups.len(), 1);
    assert_eq!(lookups[0].path, LookupPath::Dram);
    assert!(lookups[0].at - lookups[0].checked_at >= grace / 2 - 2 * US);
    let p = parse(&rig.probe(rig.outside).received[0].1).unwrap();
    assert_eq!((p.src, p.sport), (PUBLIC, 2007));
}
