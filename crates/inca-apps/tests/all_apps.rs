//! Every app in the catalog, on every profile: it loads, and random bytes on
//! random ports never panic and are all accounted for.

use inca_apps::catalog::{with_app, AppVisitor, APPS};
use inca_apps::params::Params;
use inca_switch::harness::Harness;
use inca_switch::{Profile, Program, Switch};
use proptest::prelude::*;

struct Fuzz<'a> {
    profile: Profile,
    frames: &'a [(u16, Vec<u8>)],
}

/// (frames received on valid ports, frames on bad ports, outcomes counted).
impl AppVisitor for Fuzz<'_> {
    type Output = Result<(u64, u64, u64), String>;
    fn visit<P: Program>(self, program: P) -> Self::Output {
        let sw = Switch::new(self.profile, program).map_err(|e| e.to_string())?;
        let mut h = Harness::new(sw, 1);
        h.keep_frames = false;
        for (i, (port, frame)) in self.frames.iter().enumerate() {
            h.send(1_000 * i as u64, *port, frame.clone());
        }
        h.advance_to(10_000_000_000);
        let s = h.device.stats();
        let rx: u64 = s.ports.iter().map(|p| p.rx_packets).sum();
        let tm_drops: u64 = s.ports.iter().map(|p| p.tm_drops).sum();
        let outcomes = s.parse_drops
            + s.program_drops
            + s.violation_drops
            + s.punts
            + s.punt_drops
            + s.feature_drops
            + s.no_group_drops
            + s.pass_limit_drops
            + s.input_drops
            + tm_drops
            + h.transmit_count;
        Ok((rx, s.bad_port_drops, outcomes))
    }
}

#[test]
fn every_app_loads_on_every_profile_with_defaults() {
    for (name, _, _) in APPS {
        for profile in [Profile::tofino(), Profile::smartnic(), Profile::server()] {
            let pname = profile.name.clone();
            let r = with_app(
                name,
                &Params::default(),
                Fuzz {
                    profile,
                    frames: &[],
                },
            );
            assert!(matches!(r, Ok(Ok(_))), "{name} on {pname}: {r:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn random_frames_never_panic_and_are_accounted_for(
        frames in proptest::collection::vec((0u16..40, proptest::collection::vec(any::<u8>(), 0..600)), 1..60)
    ) {
        for (name, _, _) in APPS {
            let valid = frames.iter().filter(|(p, _)| *p < 32).count() as u64;
            let (rx, bad, outcomes) = with_app(name, &Params::default(), Fuzz { profile: Profile::tofino(), frames: &frames })
                .unwrap()
                .unwrap();
            prop_assert_eq!(rx, valid, "{}", name);
            prop_assert_eq!(bad, frames.len() as u64 - valid, "{}", name);
            prop_assert!(outcomes >= rx, "{}: {} frames in, {} outcomes", name, rx, outcomes);
        }
    }
}
