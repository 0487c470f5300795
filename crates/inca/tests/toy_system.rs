//! The worked example of docs/architecture.md, "How to add a system": a toy
//! system with one switch program, a run check and a built-in campaign,
//! added to a registry next to the real ones and used the way the commands
//! use systems (listing, `inca check`, a scenario run, a campaign).
//!
//! The program, `toy_counter`, counts packets per ingress port in a
//! register and sends each packet out of the paired port (0 <-> 1, 2 <-> 3,
//! ...). Its one parameter, `ports`, sizes the register. Its workload,
//! `toy_beacon`, sends `count` probes to `dst`, one every `gap_us`: a
//! system's own traffic, built by the host without the host knowing it.

use std::any::Any;
use std::sync::Arc;

use inca_apps::params::Params;
use inca_sim::engine::{Node, Simulation};
use inca_sim::nodes::host::workload::{probe_frame, BuildContext, HostInfo, StepContext, Workload};
use inca_sim::nodes::host::HostError;
use inca_sim::scenario::Loaded;
use inca_switch::device::{DeviceRng, Nanos, MICROS};
use inca_switch::objects::{
    AccessError, ArrayDecl, DataPlane, Declare, DeclareError, RegisterHandle,
};
use inca_switch::placement::{Gress, Placement};
use inca_switch::program::{PacketCtx, ParseError, ProgramReport};
use inca_switch::{PortId, Profile, Program, Switch};
use inca_system::campaign::{Campaign, SeedResult};
use inca_system::{
    BuiltinCampaign, BuiltinExperiment, CampaignError, CheckError, ExperimentRun, Judgement,
    ProgramInfo, Registry, RunCheck, RunMode, System, SystemError, SystemFactory, SystemRun,
    WorkloadRegistration,
};

// --- 1. The program: an ordinary switch program. -------------------------

#[derive(Clone)]
struct ToyCounter {
    ports: u64,
    seen: Option<RegisterHandle<u32>>,
    /// Packets counted (what the register holds, summed; reported).
    packets: u64,
}

impl ToyCounter {
    const PARAMS: &'static [&'static str] = &["ports"];

    fn from_params(p: &Params) -> Result<Self, inca_apps::params::ParamError> {
        p.check_known("toy_counter", Self::PARAMS)?;
        Ok(ToyCounter {
            ports: p.number("ports", 2, 1, 1 << 30)?,
            seen: None,
            packets: 0,
        })
    }
}

impl Program for ToyCounter {
    type Meta = ();
    type Digest = ();

    fn name(&self) -> &str {
        "toy_counter"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        self.seen = Some(d.register(ArrayDecl::new("seen", self.ports as usize))?);
        Ok(())
    }

    fn parse(&self, _: Gress, _: &[u8], _: &mut ()) -> Result<(), ParseError> {
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<(), ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let port = pkt.ingress_port();
        if let Some(seen) = self.seen {
            dp.register(seen, u64::from(port) % self.ports, |v| {
                *v = v.wrapping_add(1)
            })?;
        }
        self.packets += 1;
        pkt.forward((port ^ 1) as PortId);
        Ok(())
    }

    fn report(&self) -> ProgramReport {
        ProgramReport {
            counters: vec![("toy_packets".into(), self.packets)],
            series: Vec::new(),
        }
    }
}

// --- 2. The system: what it offers the commands. ------------------------

struct ToySystem;

impl System for ToySystem {
    fn name(&self) -> &'static str {
        "toy"
    }

    fn programs(&self) -> Vec<ProgramInfo> {
        vec![ProgramInfo {
            name: "toy_counter",
            about: "counts packets per ingress port, forwards to the paired port",
            params: ToyCounter::PARAMS.to_vec(),
        }]
    }

    fn check(
        &self,
        _program: &str,
        params: &Params,
        profile: &Profile,
    ) -> Result<Placement, CheckError> {
        let mut program = ToyCounter::from_params(params)?;
        Ok(inca_switch::check(profile, &mut program)?)
    }

    fn start_run(&self, mode: RunMode) -> Box<dyn SystemRun> {
        Box::new(ToyRun {
            check: (mode == RunMode::Checked).then_some(SawTraffic),
        })
    }

    fn workloads(&self) -> Vec<WorkloadRegistration> {
        vec![WorkloadRegistration {
            kind: "toy_beacon",
            about: "count probes to dst, one every gap_us",
            build: ToyBeacon::build,
        }]
    }

    fn experiments(&self) -> Vec<BuiltinExperiment> {
        vec![BuiltinExperiment {
            name: "toy-beacons",
            about: "the toy scenario with `count` beacons; reports what the switch counted",
            params: &["count"],
            run: toy_beacons,
        }]
    }

    fn campaigns(&self) -> Vec<BuiltinCampaign> {
        vec![BuiltinCampaign {
            name: "toy-parity",
            about: "a scripted check: the toy pairs every port with its neighbour",
            run_seed: toy_seed,
        }]
    }
}

/// One run of `toy-beacons`: the toy scenario driven from a parameter,
/// with a computed report (twice what the switch counted) beside the
/// devices' own.
fn toy_beacons(p: &Params, seed: u64) -> Result<ExperimentRun, String> {
    let count = p.count("count", 50, 1_000).map_err(|e| e.to_string())?;
    let text = SCENARIO.replace("count = 50", &format!("count = {count}"));
    let loaded = Loaded::from_str(&text, "toy.toml", &[]).map_err(|e| e.to_string())?;
    let factory = SystemFactory::new(registry());
    let mut built = loaded
        .build(&factory, Some(seed), None)
        .map_err(|e| e.to_string())?;
    built.sim.run_until(built.duration, |_| {});
    let run = ExperimentRun::from_sim(&built.sim, built.duration);
    let counted = run
        .nodes
        .iter()
        .find(|(n, _, _)| n == "sw")
        .and_then(|(_, _, r)| r.counters.get("toy_packets").copied())
        .unwrap_or(0);
    let mut result = inca_sim::metrics::NodeReport::default();
    result.counters.insert("doubled".into(), 2 * counted);
    Ok(run.with_result("result", result))
}

/// One seed of `toy-parity`: pairing is an involution on the seed's port.
fn toy_seed(seed: u64) -> Result<SeedResult, CampaignError> {
    let port = (seed % 512) as PortId;
    let violations = if (port ^ 1) ^ 1 == port {
        Vec::new()
    } else {
        vec![format!("port {port} is not paired back")]
    };
    Ok(SeedResult {
        seed,
        faults: Vec::new(),
        kinds: Default::default(),
        violations,
        judged: [("toy: ports paired".to_string(), 1)].into(),
        notes: vec![format!("port {port} <-> {}", port ^ 1)],
        events: 0,
    })
}

// --- 2b. Its workload: a host's traffic, built from the scenario table. --

#[derive(Debug)]
struct ToyBeacon {
    dst: std::net::SocketAddrV4,
    count: u64,
    gap: Nanos,
    src_port: u16,
    /// (start of this life, probes sent in it).
    life: Option<(Nanos, u64)>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ToyBeaconConfig {
    #[allow(dead_code)]
    name: Option<String>,
    dst: std::net::SocketAddrV4,
    count: u64,
    gap_us: u64,
}

impl ToyBeacon {
    fn build(
        table: &toml::Table,
        cx: &mut BuildContext<'_>,
    ) -> Result<Box<dyn Workload>, HostError> {
        let c: ToyBeaconConfig = toml::Value::Table(table.clone())
            .try_into()
            .map_err(|e: toml::de::Error| cx.invalid("", e.message().to_string()))?;
        if c.gap_us == 0 {
            return Err(cx.invalid("gap_us", "must be > 0"));
        }
        Ok(Box::new(ToyBeacon {
            dst: c.dst,
            count: c.count,
            gap: c.gap_us * MICROS,
            src_port: cx.default_port(),
            life: None,
        }))
    }
}

impl Workload for ToyBeacon {
    fn begin(&mut self, _host: &HostInfo, anchor: Nanos, _rng: &mut DeviceRng) {
        self.life = Some((anchor, 0));
    }

    fn end(&mut self) {
        self.life = None;
    }

    fn next_at(&self) -> Option<Nanos> {
        let (start, sent) = self.life?;
        (sent < self.count).then_some(start + sent * self.gap)
    }

    fn step(&mut self, cx: &mut StepContext<'_>) -> Option<Vec<u8>> {
        let (_, sent) = self.life.as_mut()?;
        let seq = *sent;
        *sent += 1;
        if !cx.send {
            return None;
        }
        let probe = inca_wire::Probe {
            flow: 0,
            seq,
            tx_time: cx.now,
        };
        let ep = cx.host.endpoints(cx.host.ip, *self.dst.ip());
        probe_frame(&ep, self.src_port, self.dst.port(), 100, probe, cx.scratch)
    }
}

// --- 3. One run: builds the devices, owns the run checks. ---------------

struct ToyRun {
    check: Option<SawTraffic>,
}

impl SystemRun for ToyRun {
    fn build_switch(
        &mut self,
        _program: &str,
        params: &Params,
        profile: Profile,
    ) -> Result<Box<dyn Node>, SystemError> {
        Ok(Box::new(Switch::new(
            profile,
            ToyCounter::from_params(params)?,
        )?))
    }

    fn run_checks(&self) -> Vec<&dyn RunCheck> {
        self.check.iter().map(|c| c as &dyn RunCheck).collect()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The run check: every toy switch of the run saw traffic.
struct SawTraffic;

impl RunCheck for SawTraffic {
    fn judge(&self, sim: &Simulation) -> Judgement {
        let mut j = Judgement::default();
        for (name, _, r) in sim.node_reports() {
            if let Some(&n) = r.counters.get("toy_packets") {
                j.count("toy: switches", 1);
                if n == 0 {
                    j.violations
                        .push(format!("{name}: toy switch saw no packets"));
                }
            }
        }
        j
    }
}

// --- 4. Registering it: one more entry in the list. ---------------------

fn registry() -> Registry {
    let mut systems = inca::systems::all();
    systems.push(Arc::new(ToySystem));
    Registry::new(systems).expect("the toy's names are new")
}

const SCENARIO: &str = r#"
name = "toy"
duration = "20ms"
[defaults.link]
rate = "1Gbps"
delay = "1us"
[[switch]]
name = "sw"
profile = "tofino"
program = "toy_counter"
params = { ports = 4 }
[[host]]
name = "a"
ip = "10.0.0.1"
[[host.workload]]
kind = "toy_beacon"
dst = "10.0.0.2:9"
gap_us = 100
count = 50
[[host]]
name = "b"
ip = "10.0.0.2"
[[link]]
a = "a:0"
b = "sw:0"
[[link]]
a = "sw:1"
b = "b:0"
"#;

#[test]
fn the_toy_is_listed_with_the_real_systems() {
    let listing = inca::systems::list_programs(&registry());
    for name in ["toy_counter", "nat", "redplane_nat", "tea_nat"] {
        assert!(listing.contains(name), "{listing}");
    }
    assert!(listing.contains("(parameters: ports)"), "{listing}");
}

#[test]
fn the_toy_is_checked_and_too_large_a_register_does_not_fit() {
    let r = registry();
    let tofino = Profile::tofino();
    let p = Params::parse(["ports=64"]).unwrap();
    let placement = r.check("toy_counter", &p, &tofino).expect("fits");
    assert!(placement.to_string().contains("seen"), "{placement}");
    let p = Params::parse(["ports=1073741824"]).unwrap();
    assert!(matches!(
        r.check("toy_counter", &p, &tofino),
        Err(CheckError::DoesNotFit(_))
    ));
    let p = Params::parse(["prots=4"]).unwrap();
    assert!(matches!(
        r.check("toy_counter", &p, &tofino),
        Err(CheckError::Param(_))
    ));
    assert!(matches!(
        r.check("toy_nope", &Params::default(), &tofino),
        Err(CheckError::UnknownProgram { .. })
    ));
}

#[test]
fn a_scenario_runs_the_toy_and_its_run_check_judges_it() {
    let loaded = Loaded::from_str(SCENARIO, "toy.toml", &[]).unwrap();
    let factory = SystemFactory::checked(registry());
    let mut built = loaded.build(&factory, Some(1), None).unwrap();
    built.sim.run_until(built.duration, |_| {});
    let reports = built.sim.node_reports();
    let (_, _, sw) = reports.iter().find(|(n, _, _)| n == "sw").unwrap();
    assert_eq!(sw.counters.get("toy_packets"), Some(&50), "{sw:?}");
    assert!(factory.run_checks(&built.sim).is_empty());
    // The same check fails a run in which the toy saw nothing.
    let quiet = SCENARIO.replace("count = 50", "count = 0");
    let loaded = Loaded::from_str(&quiet, "toy.toml", &[]).unwrap();
    let factory = SystemFactory::checked(registry());
    let mut built = loaded.build(&factory, Some(1), None).unwrap();
    built.sim.run_until(built.duration, |_| {});
    assert_eq!(
        factory.run_checks(&built.sim),
        vec!["sw: toy switch saw no packets".to_string()]
    );
}

#[test]
fn the_toy_campaign_runs_through_the_campaign_runner() {
    let campaign = Campaign::open(registry(), std::path::Path::new("toy-parity"), &[], 1).unwrap();
    assert!(campaign.is_builtin());
    let summary = campaign.run(1, 5, 2, &|_| {}).unwrap();
    assert_eq!((summary.seeds, summary.failed), (5, 0));
}

#[test]
fn a_sweep_runs_the_toy_experiment_over_its_parameter() {
    let dir = std::env::temp_dir().join(format!("inca-toy-experiment-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let descriptor = dir.join("beacons.toml");
    std::fs::write(
        &descriptor,
        r#"
experiment = "toy-beacons"
seeds = [3]
[axes]
count = { set = "count", values = [10, 20, 40], numbers = [10, 20, 40] }
[[plot]]
kind = "metric_vs_param"
name = "doubled"
x = "count"
y = { counter = "result/doubled" }
"#,
    )
    .unwrap();
    let opts = |out: &std::path::Path| inca_report::sweep::runner::Options {
        out: Some(out.to_path_buf()),
        jobs: 2,
        quick: false,
        formats: vec!["svg".into()],
        quiet: true,
        factory: Arc::new(|| Box::new(SystemFactory::new(registry()))),
        experiments: Arc::new(inca::systems::RegisteredExperiments(registry())),
    };
    std::env::set_var("INCA_FONT", "none");
    inca_report::sweep::runner::run(&descriptor, &opts(&dir.join("out"))).unwrap();
    let csv = std::fs::read_to_string(dir.join("out/plots/doubled.csv")).unwrap();
    let ys: Vec<f64> = csv
        .lines()
        .skip(1)
        .map(|l| {
            let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
            let y = header.iter().position(|h| *h == "y").unwrap();
            l.split(',').nth(y).unwrap().parse().unwrap()
        })
        .collect();
    assert_eq!(ys, [20.0, 40.0, 80.0], "{csv}");
    // Each run is a results folder like a scenario's.
    assert!(dir.join("out/000-count_10-s3/summary.json").is_file());

    // A parameter the experiment does not take is refused by name, before
    // anything runs.
    let bad = std::fs::read_to_string(&descriptor)
        .unwrap()
        .replace("set = \"count\"", "set = \"cuont\"");
    std::fs::write(&descriptor, bad).unwrap();
    let e = inca_report::sweep::runner::run(&descriptor, &opts(&dir.join("bad")))
        .unwrap_err()
        .to_string();
    assert!(e.contains("cuont"), "{e}");
    assert!(!dir.join("bad/sweep.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
