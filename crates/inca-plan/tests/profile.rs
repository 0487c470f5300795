//! The profiler: costs come from the placement model and obey the contract
//! the reformulation relies on; shares come from the Zipf popularity.

use inca_apps::params::Params;
use inca_plan::plan::{harmonic, profile, zipf_shares, AppSpec, PlanInputs};
use inca_plan::profile::{flow_manager, Profiler, Scaled, SWITCH_RESOURCES};
use inca_plan::Affinity;
use inca_switch::placement::place;
use inca_switch::resources::Resource;
use inca_switch::Profile;

fn spec(app: &str, flows: u64) -> AppSpec {
    AppSpec {
        name: app.into(),
        app: app.into(),
        params: Params::default(),
        flows,
        weight: None,
        affinity: None,
    }
}

#[test]
fn switch_costs_bound_the_placement_and_never_fall() {
    let inputs = PlanInputs::new(
        vec![
            spec("nat", 2_000_000),
            spec("vpn", 2_000_000),
            spec("acl", 500_000),
            spec("univmon", 1),
        ],
        4,
    );
    let mut profiler = Profiler::default();
    let prof = profile(&inputs, &mut profiler).unwrap();
    let inst = &prof.instance;
    assert_eq!(inst.contract_violation(), None);
    let tofino = Profile::tofino();
    for (a, s) in inst.apps.iter().zip(&prof.scaled) {
        println!(
            "{}: {} quanta, {} fit on the switch",
            a.name,
            a.quanta(),
            a.switch_quantum.len()
        );
        if a.name == "univmon" {
            assert!(!s.scales());
            assert_eq!(a.quanta(), 1);
            assert_eq!(a.affinity, Affinity::High);
            // The sketch's registers are in the base cost.
            assert!(a.switch_base[3] >= 1.0, "{:?}", a.switch_base);
            continue;
        }
        assert_eq!(a.affinity, Affinity::Medium);
        let fit = a.switch_quantum.len();
        assert!(
            fit > 0 && fit < a.quanta(),
            "{}: {fit} of {}",
            a.name,
            a.quanta()
        );
        // One more quantum than the profiler allows does not place.
        let keys = |n: usize| n as u64 * 1024;
        let with_fm = |n: usize| {
            let mut d = s.at(keys(n));
            d.push(flow_manager(&a.name, s.union_key_bits(), keys(n)));
            d
        };
        assert!(place(&tofino, &with_fm(fit)).is_ok());
        assert!(place(&tofino, &with_fm(fit + 1)).is_err());
        // The cumulative model cost bounds the placement's at a few sizes
        // on the sample grid, and is close to it (within 10 % + 24 blocks: the rounding of the first quanta, which the base carries).
        let step = fit.div_ceil(inca_plan::profile::SAMPLES);
        for n in [step, 4 * step, fit] {
            let n = n.min(fit);
            let real = place(&tofino, &with_fm(n)).unwrap().used;
            for (r, res) in SWITCH_RESOURCES.iter().enumerate() {
                let model: f64 =
                    a.switch_base[r] + a.switch_quantum[..n].iter().map(|c| c[r]).sum::<f64>();
                let real = real[*res] as f64;
                assert!(
                    model + 1e-6 >= real,
                    "{} {res:?} at {n}: model {model} < real {real}",
                    a.name
                );
                if *res == Resource::SramBlocks {
                    assert!(
                        model <= real * 1.1 + 24.0,
                        "{} SRAM at {n}: model {model} real {real}",
                        a.name
                    );
                }
            }
        }
        // Devices: linear state, compatible.
        let d = a.device[0].as_ref().expect("compatible with the smart NIC");
        assert!(d.per_quantum[0] > 0.0);
    }
    assert!(profiler.placements > 0);
    // Profiling again hits the cache.
    let before = profiler.placements;
    profile(&inputs, &mut profiler).unwrap();
    assert_eq!(profiler.placements, before);
}

#[test]
fn key_scaled_objects_are_found_from_the_declarations() {
    let s = Scaled::of("nat", "nat", &Params::default(), 1024).unwrap();
    assert!(s.scales());
    let at = s.at(10_000);
    let tables: Vec<u64> = s
        .scaled
        .iter()
        .map(|&(i, _, _)| at[i].kind.entries().unwrap())
        .collect();
    assert!(tables.iter().all(|&e| e >= 10_000), "{tables:?}");
    let u = Scaled::of("univmon", "univmon", &Params::default(), 1024).unwrap();
    assert!(!u.scales());
}

#[test]
fn zipf_shares_sum_to_one_and_fall() {
    for (keys, alpha) in [(10_000u64, 0.99), (1_000_000, 0.9), (10_000_000, 1.0)] {
        let f = zipf_shares(keys, 1024, alpha);
        assert_eq!(f.len() as u64, keys.div_ceil(1024));
        let sum: f64 = f.iter().sum();
        assert!((sum - 1.0).abs() < 1e-9, "{sum}");
        assert!(f.windows(2).all(|w| w[1] <= w[0] + 1e-15));
    }
    // The integral tail agrees with the exact sum.
    let exact: f64 = (1..=200_000u64).map(|k| (k as f64).powf(-0.99)).sum();
    assert!((harmonic(200_000, 0.99) - exact).abs() < 1e-6 * exact);
}

/// Recirculates every packet once, then forwards it to port 1.
#[derive(Clone)]
struct Looper;

impl inca_switch::Program for Looper {
    type Meta = ();
    type Digest = ();
    fn name(&self) -> &str {
        "looper"
    }
    fn declare(
        &mut self,
        _: &mut inca_switch::objects::Declare,
    ) -> Result<(), inca_switch::objects::DeclareError> {
        Ok(())
    }
    fn parse(
        &self,
        _: inca_switch::Gress,
        _: &[u8],
        _: &mut (),
    ) -> Result<(), inca_switch::program::ParseError> {
        Ok(())
    }
    fn ingress(
        &mut self,
        pkt: &mut inca_switch::program::PacketCtx<(), ()>,
        _: &mut inca_switch::objects::DataPlane<'_>,
    ) -> Result<(), inca_switch::objects::AccessError> {
        match pkt.kind() {
            inca_switch::intrinsic::PacketKind::Normal => pkt.recirculate(),
            _ => pkt.forward(1),
        }
        Ok(())
    }
}

#[test]
fn a_program_that_recirculates_is_incompatible_with_the_smart_nic() {
    use inca_plan::profile::probe_program;
    let why = probe_program(Looper, &Profile::smartnic(), 1).expect("the NIC lacks recirculation");
    assert!(why.contains("smartnic"), "{why}");
    assert_eq!(probe_program(Looper, &Profile::tofino(), 1), None);
    // The catalog's apps need nothing the NIC lacks.
    for app in ["nat", "vpn", "acl", "univmon", "firewall"] {
        let mut p = Params::default();
        if let Some(k) = inca_plan::profile::key_param(app) {
            p.set(k, 1024);
        }
        assert_eq!(
            inca_plan::profile::feature_probe(app, &p, &Profile::smartnic(), 1),
            None,
            "{app}"
        );
    }
}
