//! Hostile frames for the switch running every inca-apps program (issue 8):
//! random bytes and mutated valid frames, on any port (the switch's and
//! ports it does not have), at random times, with links flapping. Each
//! program must not panic, must give every frame it received a fate (a
//! counted drop, a punt or a transmission), and must keep its packet buffer
//! within the profile's size.
//!
//! The long-running version of this is the `switch_apps` cargo-fuzz target
//! (fuzz/README.md); this is its bounded form for `cargo test`.

use std::net::Ipv4Addr;

use inca_apps::catalog::{with_app, AppVisitor, APPS};
use inca_apps::params::Params;
use inca_switch::device::Nanos;
use inca_switch::harness::Harness;
use inca_switch::{Profile, Program, Switch};
use inca_wire::{build_tcp_frame, build_udp_frame, Endpoints, TcpFlags, TcpRepr, VlanTag};
use proptest::prelude::*;

/// Every program of the catalog, listed here as well as in `APPS` (the
/// descriptions) so that a program `with_app` resolves but `APPS` forgets is
/// still tested; the union is tested.
const KNOWN: &[&str] = &[
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

fn programs() -> Vec<&'static str> {
    let mut v: Vec<&str> = KNOWN.to_vec();
    v.extend(APPS.iter().map(|a| a.0));
    v.sort_unstable();
    v.dedup();
    v
}

/// What a switch did with the events of one case.
#[derive(Debug)]
struct Outcome {
    /// Frames received on ports the profile has.
    rx: u64,
    /// Frames on ports it does not have (counted as such).
    bad_port: u64,
    /// Fates: drops of every kind, punts, transmissions.
    fates: u64,
}

/// One event: a frame on a port after `dt`, or a link state change.
#[derive(Debug, Clone)]
enum Ev {
    Frame(u16, Nanos, Vec<u8>),
    Link(u16, bool),
}

struct Drive<'a> {
    profile: Profile,
    events: &'a [Ev],
}

impl AppVisitor for Drive<'_> {
    type Output = Result<Outcome, String>;
    fn visit<P: Program>(self, program: P) -> Self::Output {
        let buffer = self.profile.data_path.buffer_bytes;
        let sw = Switch::new(self.profile, program).map_err(|e| e.to_string())?;
        let mut h = Harness::new(sw, 7);
        h.keep_frames = false;
        let mut t = 0;
        for e in self.events {
            match e {
                Ev::Frame(port, dt, f) => {
                    t += dt;
                    h.send(t, *port, f.clone());
                }
                Ev::Link(port, up) => h.link(t, *port, *up),
            }
            if h.device.buffer_used() > buffer {
                return Err(format!("buffer {} > {buffer}", h.device.buffer_used()));
            }
        }
        // Long enough for every queue to drain and every CPU event to run.
        h.advance_to(t + 10_000_000_000);
        let s = h.device.stats();
        Ok(Outcome {
            rx: s.ports.iter().map(|p| p.rx_packets).sum(),
            bad_port: s.bad_port_drops,
            fates: s.fates() - s.bad_port_drops,
        })
    }
}

fn run(name: &str, profile: Profile, events: &[Ev]) -> Result<Outcome, TestCaseError> {
    let pname = profile.name.clone();
    with_app(name, &Params::default(), Drive { profile, events })
        .map_err(|e| TestCaseError::fail(format!("{name}: {e}")))?
        .map_err(|e| TestCaseError::fail(format!("{name} on {pname}: {e}")))
}

fn check(name: &str, profile: Profile, events: &[Ev]) -> Result<(), TestCaseError> {
    let ports = profile.data_path.ports;
    let frames: Vec<u16> = events
        .iter()
        .filter_map(|e| match e {
            Ev::Frame(p, _, _) => Some(*p),
            Ev::Link(..) => None,
        })
        .collect();
    let valid = frames.iter().filter(|&&p| p < ports).count() as u64;
    let o = run(name, profile, events)?;
    prop_assert_eq!(o.rx, valid, "{}", name);
    prop_assert_eq!(o.bad_port, frames.len() as u64 - valid, "{}", name);
    // Copies (multicast, mirror, generated packets) add fates; no received
    // frame goes without one.
    prop_assert!(
        o.fates >= o.rx,
        "{}: {} frames in, {} fates",
        name,
        o.rx,
        o.fates
    );
    Ok(())
}

/// Valid frames the programs act on: UDP and TCP of a few flows, one
/// tagged, to and from the addresses their defaults use.
fn valid_frames() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let pairs = [
        ([10, 0, 0, 1], [192, 0, 2, 1], 1234, 53),
        ([192, 0, 2, 1], [198, 51, 100, 1], 53, 1024),
        ([10, 1, 1, 1], [10, 9, 0, 1], 5000, 80),
        ([10, 2, 0, 3], [10, 0, 0, 2], 5000, 5000),
    ];
    for (i, (s, d, sp, dp)) in pairs.into_iter().enumerate() {
        let mut ep = Endpoints::new(
            [2, 0, 0, 0, 0, 1],
            Ipv4Addr::from(s),
            [2, 0, 0, 0, 0, 2],
            Ipv4Addr::from(d),
        );
        if i == 3 {
            ep.vlan = Some(VlanTag {
                pcp: 0,
                dei: false,
                vid: 10,
            });
        }
        v.push(build_udp_frame(&ep, sp, dp, b"hostile?", true).unwrap());
        let t = TcpRepr {
            src_port: sp,
            dst_port: dp,
            seq: 1,
            ack: 0,
            flags: TcpFlags::SYN,
            window: 1024,
            urgent: 0,
            options: &[],
            payload: &[],
        };
        v.push(build_tcp_frame(&ep, &t).unwrap());
    }
    v
}

fn profile(i: usize) -> Profile {
    [Profile::tofino(), Profile::smartnic(), Profile::server()][i % 3].clone()
}

#[test]
fn every_tested_name_is_a_catalog_program() {
    struct Nothing;
    impl AppVisitor for Nothing {
        type Output = ();
        fn visit<P: Program>(self, _: P) {}
    }
    for name in programs() {
        assert!(
            with_app(name, &Params::default(), Nothing).is_ok(),
            "{name} is not in the catalog"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_bytes_on_any_port_never_panic_and_every_frame_has_a_fate(
        prof in 0usize..3,
        events in proptest::collection::vec(
            prop_oneof![
                8 => (0u16..80, 0u64..2_000_000, proptest::collection::vec(any::<u8>(), 0..300))
                    .prop_map(|(p, dt, f)| Ev::Frame(p, dt, f)),
                1 => (0u16..80, any::<bool>()).prop_map(|(p, up)| Ev::Link(p, up)),
            ],
            1..24,
        )
    ) {
        for name in programs() {
            check(name, profile(prof), &events)?;
        }
    }

    #[test]
    fn mutated_valid_frames_never_panic_and_every_frame_has_a_fate(
        prof in 0usize..3,
        picks in proptest::collection::vec(
            (0usize..8, 0u16..4, proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4), 0usize..20),
            1..16,
        )
    ) {
        let base = valid_frames();
        let events: Vec<Ev> = picks
            .iter()
            .map(|(i, port, edits, cut)| {
                let mut f = base[i % base.len()].clone();
                for &(at, v) in edits {
                    let n = f.len();
                    f[at % n] = v;
                }
                f.truncate(f.len().saturating_sub(*cut));
                Ev::Frame(*port, 1_000, f)
            })
            .collect();
        for name in programs() {
            check(name, profile(prof), &events)?;
        }
    }
}
