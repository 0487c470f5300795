//! Reloading a server that kept its DRAM (issue 8, `tea-lookup-faults`
//! seeds 183, 282, 319, 742, 957): a server cut off by a link or partition
//! outage misses the table writes made meanwhile, and comes back with its
//! old memory. Its reload must make every row equal to the mirror, the rows
//! the mirror emptied included; skipping all-zero rows (right only for a
//! freshly registered region) left deleted entries readable.

use std::net::Ipv4Addr;

use inca_apps::headers::parse;
use inca_sim::engine::Fault;
use inca_tea::rig::{Probe, Rig, RigConfig};
use inca_tea::switch::{delete_message, LookupPath, LookupRecord};
use inca_wire::{build_udp_frame, Endpoints};

const MS: u64 = 1_000_000;
const VALUE: [u8; 6] = [198, 51, 100, 7, 0x1f, 0x90];

/// Outside flow 9.0.5.1:1005 → 198.51.100.1:5000: the NAT's ext→int
/// direction, so an absent key is a miss and nothing else (no slow path).
fn frame() -> Vec<u8> {
    let ep = Endpoints::new(
        [2, 0, 0, 0, 1, 1],
        Ipv4Addr::new(9, 0, 5, 1),
        [2, 0, 0, 0, 1, 2],
        Ipv4Addr::new(198, 51, 100, 1),
    );
    build_udp_frame(&ep, 1005, 5000, b"reload", true).unwrap()
}

fn key() -> Vec<u8> {
    parse(&frame()).unwrap().five_tuple().to_vec()
}

/// Sends the flow at `at` and returns the one lookup it made.
fn lookup(rig: &mut Rig, at: u64) -> LookupRecord {
    rig.observer.drain();
    rig.send(at, rig.outside, frame());
    rig.run_until(at + MS);
    let (lookups, _) = rig.observer.drain();
    assert_eq!(lookups.len(), 1, "one lookup judged: {lookups:?}");
    lookups[0].clone()
}

#[test]
fn a_server_back_from_a_link_outage_does_not_serve_an_entry_deleted_meanwhile() {
    let cfg = RigConfig {
        preload: vec![(key(), VALUE.to_vec())],
        // No cache: every lookup reads DRAM.
        cache_cap: 0,
        ..RigConfig::default()
    };
    let mut rig = Rig::nat(&cfg, Probe::default(), Probe::default()).unwrap();
    assert!(rig.run_until_ready(20 * MS), "TEA never got ready");
    let t0 = rig.sim.now();
    let before = lookup(&mut rig, t0);
    assert_eq!(before.value.as_deref(), Some(&VALUE[..]), "{before:?}");

    // Server 1 is cut off; the delete is written to server 0 only.
    let (l0, l1) = (rig.server_links[0], rig.server_links[1]);
    let t1 = rig.sim.now();
    rig.sim.schedule(t1, Fault::LinkDown(l1));
    rig.control(t1 + MS, delete_message(&key()));
    rig.run_until(t1 + 2 * MS);
    assert_eq!(rig.tea().pending_ops(), 0, "the delete is done");
    assert_eq!(rig.tea().pending_commits(), 0, "the delete is committed");

    // Server 1 comes back with its memory and is reloaded ...
    let recoveries = rig.tea().cp_stats().recoveries;
    rig.sim.schedule(t1 + 2 * MS, Fault::LinkUp(l1));
    rig.run_until(t1 + 12 * MS);
    assert_eq!(
        rig.tea().cp_stats().recoveries,
        recoveries + 1,
        "server 1 recovered"
    );

    // ... and then serves every range alone.
    let t2 = rig.sim.now();
    rig.sim.schedule(t2, Fault::LinkDown(l0));
    let after = lookup(&mut rig, t2 + MS);
    assert_eq!(after.path, LookupPath::Dram, "{after:?}");
    assert_eq!(
        after.value, None,
        "server 1 still holds the deleted entry: {after:?}"
    );
}
