//! The control plane draws from the switch's device RNG (through
//! `ControlPlane::rng`), which a crash does not rewind: a restarted TEA
//! switch sets its queue pairs up with fresh initial PSNs, not its first
//! boot's again (which a server still holding the old QPs could confuse with
//! the old incarnation's packets).

use inca_sim::engine::Fault;
use inca_switch::device::MILLIS;
use inca_tea::rig::{Probe, Rig, RigConfig};
use inca_tea::server::agent_proto::{parse_udp, Body, Message, Request};

/// Initial PSNs of every CREATE_QP / RESET_QP the switch sent to server 0,
/// in order, read from a capture of its link.
fn psns_sent(capture: &std::path::Path) -> Vec<u32> {
    let frames = inca_wire::read_capture(capture).unwrap();
    let mut psns = Vec::new();
    for (_, f) in frames {
        let Some(d) = parse_udp(&f) else { continue };
        let Ok(m) = Message::decode(d.payload) else {
            continue;
        };
        match m.body {
            Body::Request(Request::CreateQp(c)) => psns.push(c.init_psn),
            Body::Request(Request::ResetQp { init_psn, .. }) => psns.push(init_psn),
            _ => {}
        }
    }
    psns
}

#[test]
fn a_restarted_switch_does_not_repeat_its_first_boots_psns() {
    let cfg = RigConfig::default();
    let mut rig = Rig::nat(&cfg, Probe::default(), Probe::default()).unwrap();
    let dir = std::env::temp_dir().join(format!("inca-tea-restart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("s0.pcap");
    rig.sim.capture(rig.server_links[0], &pcap).unwrap();
    assert!(rig.run_until_ready(50 * MILLIS), "first boot gets ready");
    let t = rig.sim.now();
    // The whole rack power-cycles: the servers say HELLO again and the
    // switch sets every QP up anew.
    let nodes: Vec<_> = std::iter::once(rig.switch)
        .chain(rig.servers.iter().copied())
        .collect();
    for &n in &nodes {
        rig.sim.schedule(t + MILLIS, Fault::Crash(n));
        rig.sim.schedule(t + 2 * MILLIS, Fault::Restart(n));
    }
    rig.run_until(t + 3 * MILLIS);
    assert!(
        rig.run_until_ready(t + 100 * MILLIS),
        "the restart gets ready"
    );
    rig.sim.finish_captures().unwrap();
    let psns = psns_sent(&pcap);
    let _ = std::fs::remove_dir_all(&dir);
    let half = psns.len() / 2;
    assert!(half > 0 && psns.len() == 2 * half, "two setups: {psns:?}");
    let (first, second) = psns.split_at(half);
    assert_ne!(first, second, "the restart drew fresh PSNs: {psns:?}");
    assert!(psns.iter().all(|&p| p <= 0xFF_FFFF));
}
