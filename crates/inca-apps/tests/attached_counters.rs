//! The per-source and per-tenant counter block attached to other apps, as
//! the ExoPlane scenarios use it: counts are exact, and the apps behave as
//! before.

use std::net::Ipv4Addr;

use inca_apps::firewall::Firewall;
use inca_apps::params::Params;
use inca_switch::harness::Harness;
use inca_switch::{Profile, Switch};
use inca_wire::{build_udp_frame, Endpoints};

fn ep(src: u8) -> Endpoints {
    Endpoints::new(
        [2, 0, 0, 0, 0, src],
        Ipv4Addr::new(10, 0, 0, src),
        [2; 6],
        Ipv4Addr::new(203, 0, 113, 9),
    )
}

#[test]
fn firewall_with_counters_counts_every_packet_by_source_and_tenant() {
    let params = Params::parse(["counters=1024", "tenants=16", "outside_port=0"]).unwrap();
    let fw = Firewall::from_params(&params).unwrap();
    let mut h = Harness::new(Switch::new(Profile::tofino(), fw).unwrap(), 1);
    let mut sent = [0u64; 4];
    let mut t = 0;
    for i in 0..300u64 {
        let src = 1 + (i % 3) as u8;
        let frame = build_udp_frame(&ep(src), 1000 + src as u16, 53, &[0; 40], true).unwrap();
        sent[usize::from(src)] += 1;
        h.send(t, 1, frame);
        t += 10_000;
    }
    h.advance_to(t + 10_000_000);
    let sw = &h.device;
    let block = sw.program().counters().expect("attached");
    // Every ingress pass is counted: each packet once, plus once more for
    // each packet punted while its connection was being installed and sent
    // back into ingress by the control plane.
    let reinjected = sw.program().reinjected;
    assert!(reinjected >= 3, "at least each connection's first packet");
    let mut total = 0;
    for src in 1..=3u8 {
        let (packets, _) = block.source(sw.objects(), [10, 0, 0, src]).unwrap();
        assert!(packets > sent[usize::from(src)], "source {src}: {packets}");
        total += packets;
    }
    assert_eq!(total, 300 + reinjected);
    let (tenant0, _) = block.tenant(sw.objects(), 0).unwrap();
    assert_eq!(tenant0, 300 + reinjected);
    // The firewall still works: all 300 went out.
    assert_eq!(h.transmit_count, 300);
    assert!(sw.violations().is_empty());
}

#[test]
fn attached_counters_cost_resources_and_still_fit() {
    let without = Params::parse(["flows=65536"]).unwrap();
    let with = Params::parse(["flows=65536", "counters=65536", "tenants=4096"]).unwrap();
    let a = inca_apps::catalog::check_app("firewall", &without, &Profile::tofino()).unwrap();
    let b = inca_apps::catalog::check_app("firewall", &with, &Profile::tofino()).unwrap();
    let sram = inca_switch::resources::Resource::SramBlocks;
    assert!(
        b.used[sram] > a.used[sram],
        "{} vs {}",
        b.used[sram],
        a.used[sram]
    );
    assert!(inca_apps::catalog::check_app("vpn", &with, &Profile::tofino()).is_ok());
    assert!(inca_apps::catalog::check_app(
        "firewall",
        &Params::parse(["counters=1000"]).unwrap(),
        &Profile::tofino()
    )
    .is_err());
}
