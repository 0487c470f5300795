//! E3, flow-selection efficiency (spec §8.2, the paper's Fig. 6): MFWD on
//! the testbed, two 8-core servers; F = 4,096 flows, each packet's flow
//! drawn from Zipf(α), 64-byte packets at the generator's maximum (25 Mpps);
//! every flow's entry preinstalled in both servers' mirrored tables
//! through the controller (MIRROR_INSERT, so it knows them for
//! promotion); the switch's MFWD table (K = 1,024) starts empty. Schemes
//! (`scheme`): `baseline` (no promotion: every packet a request), `random`
//! (each round N_top known entries at random) and `sketch` (each round the
//! servers' top-N_top by the CMS estimates), §5.5. The figure: frames the
//! sink received per second in a window after a warm-up of several
//! promotion rounds.
//!
//! The generator's flows are its 4,096 source ports 10,000-14,095 (from
//! 10.0.0.1 to 10.0.1.1:9): drawn in a seeded random order, so which port
//! is which Zipf rank is the generator's, and the set is known to install.
//!
//! Parameters: `scheme`, `zipf` (1.0), `flows` (4,096), `entries` (K,
//! 1,024), `size` (64, with FCS; frames of at least 66 B without),
//! `max_mpps` (25), `cores` (8 a server), `t_report_ms` (250), `n_top`
//! (256), `setup_ms` (300: the entries go out one every 70 µs from 1 ms,
//! traffic starts after; simulated time without traffic is cheap), `warmup_ms` (1,000), `measure_ms` (250),
//! `slowdown` (1; k > 1 divides the offered rate and multiplies every
//! server cost by k: the same loads in k times fewer packets, for quick
//! runs), `compare` (1: a random or sketch run also reports the baseline's
//! throughput for the same parameters and seed, run once a process).
//!
//! Reports under `result`: `offered_pps`, `delivered_pps`,
//! `delivered_l2_mbps` (in the window), `generator_pps`, `baseline_pps`
//! and `improvement_permille` (delivered over the baseline's, ×1000),
//! `server_drops` (receive rings and buffers), `server_requests` (frames
//! the servers received in the whole run), `switch_fast` (packets the
//! switch forwarded alone), `promoted` (entries in the switch table at the
//! end), `mirror_hits`, `mirror_misses` (server lookups), `mirror_entries`
//! (both servers' mirrored entries at the end), `rounds`, `reordered`
//! (probes the sink got after a later one of their flow, the whole run:
//! spec §9 item 9, a promotion lets fast-path packets overtake the
//! flow's slow-path ones in flight).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use inca_apps::params::Params;
use inca_sim::engine::Fault;
use inca_system::{BuiltinExperiment, ExperimentRun, System};

use super::rig::{counters, generator_pps, rates, server_slowdown, sum_counter, Testbed};
use super::{number, param_err};
use crate::apps::mfwd::MfwdHandler;
use crate::flow::FlowKey;
use crate::switch::Command;

/// The experiment's name.
pub const NAME: &str = "clip-flow-selection";
const PARAMS: &[&str] = &[
    "scheme",
    "zipf",
    "flows",
    "entries",
    "size",
    "max_mpps",
    "cores",
    "t_report_ms",
    "n_top",
    "setup_ms",
    "warmup_ms",
    "measure_ms",
    "slowdown",
    "compare",
];
/// The schemes, as `promotion` names them.
pub const SCHEMES: [&str; 3] = ["baseline", "random", "sketch"];
/// The generator's first source port; flow i is port `FIRST_PORT + i`.
pub const FIRST_PORT: u16 = 10_000;
/// Spacing of the MIRROR_INSERT commands: the command and each server's
/// reply cost the switch CPU 20 µs each (the tofino profile's
/// `cpu_per_event`; the two datagrams out 5 µs each on the serial
/// channel), so an entry takes about 60 µs of it; spaced wider, nothing
/// queues (a backlog would outlast the controller's 50 ms retransmission
/// and still be going when traffic starts).
const MIRROR_GAP_NS: u64 = 70_000;

/// E3, running `run` (which hands [`run`] the CLIP system).
pub fn experiment(run: fn(&Params, u64) -> Result<ExperimentRun, String>) -> BuiltinExperiment {
    BuiltinExperiment {
        name: NAME,
        about: "CLIP §8.2 E3 (Fig. 6): MFWD, 4,096 Zipf(zipf) flows of 64 B at 25 Mpps over two 8-core servers, all entries mirrored, a 1,024-entry switch table filled by no promotion (scheme=baseline), random picks (random) or the CMS top-N (sketch); delivered rate after a warm-up and its ratio to the baseline's",
        params: PARAMS,
        run,
    }
}

/// The key of the generator's flow on source port `port`.
pub fn flow_key(port: u16) -> FlowKey {
    FlowKey::new(
        0,
        inca_apps::headers::PROTO_UDP,
        [10, 0, 0, 1],
        [10, 0, 1, 1],
        port,
        9,
    )
}

/// What one run measured.
struct Measured {
    run: ExperimentRun,
    generator_pps: u64,
    offered_pps: u64,
    delivered_pps: u64,
    delivered_l2_mbps: u64,
}

/// A baseline's throughput, computed once.
type Cell = Arc<OnceLock<Result<u64, String>>>;
/// Baseline cells by parameters and seed.
type Memo = Mutex<HashMap<String, Cell>>;
/// Baseline throughputs computed in this process (a sweep's random and
/// sketch runs share their baseline's).
static BASELINES: OnceLock<Memo> = OnceLock::new();

/// The memo cell of the baseline for `p` (its scheme aside) and `seed`,
/// and the baseline's parameters.
fn baseline_cell(p: &Params, seed: u64) -> Result<(Cell, Params), String> {
    let mut b = Params::default();
    for (k, v) in p
        .entries()
        .filter(|(k, _)| *k != "scheme" && *k != "compare")
    {
        b.set(k, v);
    }
    b.set("scheme", "baseline");
    let mut key: Vec<String> = b.entries().map(|(k, v)| format!("{k}={v}")).collect();
    key.sort();
    let key = format!("{seed}:{}", key.join(","));
    let memo = BASELINES.get_or_init(Default::default);
    let mut m = memo
        .lock()
        .map_err(|_| "the baseline memo is poisoned".to_string())?;
    Ok((m.entry(key).or_default().clone(), b))
}

/// One run with `p` and `seed`, CLIP's devices built by `clip`.
pub fn run(p: &Params, seed: u64, clip: Arc<dyn System>) -> Result<ExperimentRun, String> {
    p.check_known(NAME, PARAMS).map_err(param_err)?;
    let scheme = p.text("scheme").unwrap_or("sketch");
    let compare = p.number("compare", 1, 0, 1).map_err(param_err)? == 1;
    let zipf = number(p, "zipf", 1.0, 0.0, 10.0)?;
    let m = measure(p, seed, clip.clone())?;
    let base = match (scheme, compare) {
        ("baseline", _) => {
            // Remembered for the sweep's other schemes.
            let (cell, _) = baseline_cell(p, seed)?;
            let _ = cell.set(Ok(m.delivered_pps));
            m.delivered_pps
        }
        (_, true) => {
            let (cell, b) = baseline_cell(p, seed)?;
            cell.get_or_init(|| measure(&b, seed, clip.clone()).map(|m| m.delivered_pps))
                .clone()?
        }
        (_, false) => 0,
    };
    let improvement = (m.delivered_pps * 1_000).checked_div(base).unwrap_or(0);
    let run = &m.run;
    let switch = |k: &str| sum_counter(run, "switch", k);
    let server = |k: &str| sum_counter(run, "server", k);
    let result = counters(&[
        ("generator_pps", m.generator_pps),
        ("offered_pps", m.offered_pps),
        ("delivered_pps", m.delivered_pps),
        ("delivered_l2_mbps", m.delivered_l2_mbps),
        ("baseline_pps", base),
        ("improvement_permille", improvement),
        (
            "server_drops",
            server("rx_ring_drops") + server("rx_buffer_drops"),
        ),
        ("server_requests", server("rx_frames")),
        ("switch_fast", switch("clip_fast")),
        ("promoted", switch("promo_installed")),
        ("reordered", sum_counter(run, "host", "rx_reordered")),
        ("rounds", switch("promo_rounds")),
        ("mirror_hits", server("nf_app_hits")),
        ("mirror_misses", server("nf_app_misses")),
        ("mirror_entries", server("nf_app_entries")),
    ]);
    let line = format!(
        "{scheme}, Zipf {zipf}: offered {:.2} Mpps, delivered {:.2} Mpps ({:.3}x baseline), {} entries promoted",
        m.offered_pps as f64 / 1e6,
        m.delivered_pps as f64 / 1e6,
        improvement as f64 / 1e3,
        switch("promo_installed"),
    );
    let mut out = m.run.with_result("result", result);
    out.highlights.push(line);
    Ok(out)
}

/// Builds, preinstalls and runs the testbed for `p`; the window's rates.
fn measure(p: &Params, seed: u64, clip: Arc<dyn System>) -> Result<Measured, String> {
    let scheme = p.text("scheme").unwrap_or("sketch");
    let promotion = match scheme {
        "baseline" => "off",
        "random" => "random",
        "sketch" => "sketch",
        other => {
            return Err(format!(
                "scheme: {other:?} is not one of {}",
                SCHEMES.join(", ")
            ))
        }
    };
    let zipf = number(p, "zipf", 1.0, 0.0, 10.0)?;
    let flows = p.number("flows", 4_096, 1, 50_000).map_err(param_err)?;
    let entries = p.number("entries", 1_024, 1, 1 << 20).map_err(param_err)?;
    let size = p.number("size", 64, 64, 9_000).map_err(param_err)?;
    let max_pps = number(p, "max_mpps", 25.0, 0.001, 1_000.0)? * 1e6;
    let cores = p.number("cores", 8, 1, 256).map_err(param_err)?;
    let t_report = p.number("t_report_ms", 250, 1, 60_000).map_err(param_err)?;
    let n_top = p.number("n_top", 256, 1, 65_535).map_err(param_err)?;
    let ms = |name: &str, default: u64, min: u64| {
        p.number(name, default, min, 3_600_000)
            .map(|v| v * 1_000_000)
            .map_err(param_err)
    };
    let setup = ms("setup_ms", 300, 1)?;
    let warmup = ms("warmup_ms", 1_000, 1)?;
    let measure = ms("measure_ms", 250, 1)?;
    let slowdown = p.number("slowdown", 1, 1, 1_000).map_err(param_err)?;
    // The entries go out one every 70 µs from 1 ms (after the driver's
    // static set-up); traffic may start only once they are out.
    let installed_by = 1_000_000 + flows * MIRROR_GAP_NS;
    if setup <= installed_by {
        return Err(format!(
            "setup_ms: {} ms is too short to install {flows} entries (one every 70 us from 1 ms)",
            setup / 1_000_000
        ));
    }
    let frame = (size - 4).max(inca_sim::nodes::host::MIN_PROBE_FRAME as u64);
    let gen_pps = generator_pps(frame, max_pps as u64);
    let pps = (gen_pps / slowdown).max(1);
    let (start, stop) = (setup, setup + warmup + measure);
    let last_port = u64::from(FIRST_PORT) + flows - 1;
    let mut set = vec![
        "clip.program=\"clip_mfwd\"".to_string(),
        format!(
            "clip.params={{ servers = \"1:2,2:3\", group = \"1,2\", route_port = 1, promotion = \"{promotion}\", entries = {entries}, t_report_ms = {t_report}, n_top = {n_top} }}"
        ),
        format!("clip1.params={{ app = \"mfwd\", server_id = 1, cores = {cores} }}"),
        format!("clip2.params={{ app = \"mfwd\", server_id = 2, cores = {cores} }}"),
        format!("gen.workload.load.pps={pps}"),
        format!("gen.workload.load.size={frame}"),
        format!("gen.workload.load.flows={flows}"),
        format!("gen.workload.load.src_ports=[{FIRST_PORT}, {last_port}]"),
        format!("gen.workload.load.zipf={zipf}"),
        format!("gen.workload.load.start=\"{start}ns\""),
        format!("gen.workload.load.stop=\"{stop}ns\""),
        format!("duration=\"{stop}ns\""),
    ];
    set.extend(server_slowdown(slowdown));
    let mut tb = Testbed::build(&set, seed, clip)?;
    let sw = tb
        .sim
        .node_id("clip")
        .ok_or("the testbed has no switch \"clip\"")?;
    for i in 0..flows {
        let key = flow_key(FIRST_PORT + i as u16);
        let cmd = Command::Mirror(MfwdHandler::entry(key, 1));
        tb.sim.schedule(
            1_000_000 + i * MIRROR_GAP_NS,
            Fault::Message(sw, cmd.message()),
        );
    }
    tb.run_until(start + warmup);
    let a = tb.snapshot()?;
    tb.run_until(stop);
    let b = tb.snapshot()?;
    let r = rates(&a, &b);
    Ok(Measured {
        run: tb.run_report(),
        generator_pps: pps,
        offered_pps: r.offered_pps,
        delivered_pps: r.delivered_pps,
        delivered_l2_mbps: r.delivered_l2_mbps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::ClipSystem;

    fn run_with(items: &[&str]) -> Result<ExperimentRun, String> {
        let p = Params::parse(items.iter().copied()).unwrap();
        run(&p, 1, Arc::new(ClipSystem))
    }

    #[test]
    fn the_preinstalled_keys_are_the_generator_s_flows() {
        let ep = inca_wire::Endpoints::new(
            [2; 6],
            std::net::Ipv4Addr::new(10, 0, 0, 1),
            [4; 6],
            std::net::Ipv4Addr::new(10, 0, 1, 1),
        );
        let frame = inca_wire::build_udp_frame(&ep, FIRST_PORT + 7, 9, &[0; 40], true).unwrap();
        let parsed = inca_apps::headers::parse(&frame).unwrap();
        assert_eq!(FlowKey::of_parsed(&parsed, 0), flow_key(FIRST_PORT + 7));
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        for (items, name) in [
            (vec!["scheme=bogus"], "scheme"),
            (vec!["zipf=-1"], "zipf"),
            (vec!["flows=60000"], "flows"),
            (vec!["setup_ms=100"], "setup_ms"),
            (vec!["compare=2"], "compare"),
            (vec!["bogus=1"], "bogus"),
        ] {
            let e = run_with(&items).err().unwrap();
            assert!(e.contains(name), "{items:?}: {e}");
        }
    }
}
