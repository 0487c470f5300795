//! E1, forwarding capacity (spec §8.2, the paper's Fig. 5a): the NULL app
//! on the testbed, 1,024 uniform flows of one frame size at the
//! generator's maximum (25 Mpps or the 40 Gbps line, whichever is lower),
//! through Ideal (`flight = 0`: no packet visits a server), CLIP with one
//! server or with two (every packet a request). The figure: frames the
//! sink received per second in a window after a warm-up, beside what the
//! generator offered.
//!
//! Parameters: `servers` (0 = Ideal, 1, 2), `size` (the frame in bytes
//! with FCS, as the spec counts it: 64-1518; the simulator's frames carry
//! no FCS, so `size - 4`, and at least 66 to hold the generator's probe),
//! `flows` (1,024), `max_mpps` (25), `setup_us` (2,000: traffic starts
//! once the switch driver has installed its static set-up over the
//! control channel, about 1 ms of 20 µs writes), `warmup_us` (200),
//! `window_us` (2,000).
//!
//! Reports under `result`: `offered_pps` and `delivered_pps` (frames per
//! second in the window), `delivered_l2_mbps` (frames with FCS, Mbit/s),
//! `generator_pps` (the rate asked of the generator), `frame_bytes`,
//! `server_drops` (receive-ring and buffer drops on the testbed's servers).

use std::sync::Arc;

use inca_apps::params::Params;
use inca_system::{BuiltinExperiment, ExperimentRun, System};

use super::rig::{counters, generator_pps, Testbed};
use super::{number, param_err};

/// The experiment's name.
pub const NAME: &str = "clip-forwarding";
const PARAMS: &[&str] = &[
    "servers",
    "size",
    "flows",
    "max_mpps",
    "setup_us",
    "warmup_us",
    "window_us",
];

/// E1, running `run` (which hands [`run`] the CLIP system).
pub fn experiment(run: fn(&Params, u64) -> Result<ExperimentRun, String>) -> BuiltinExperiment {
    BuiltinExperiment {
        name: NAME,
        about: "CLIP §8.2 E1: NULL app, 1,024 uniform flows of `size` bytes at the generator's max (25 Mpps or line rate) through Ideal (servers=0) or CLIP with 1 or 2 servers; frames per second delivered in a window after a warm-up",
        params: PARAMS,
        run,
    }
}

/// The switch's parameters for `servers` (0: Ideal).
fn switch_params(servers: u64) -> String {
    let (group, flight) = match servers {
        0 => ("1", 0),
        1 => ("1", 1),
        _ => ("1,2", 1),
    };
    format!(
        "clip.params={{ servers = \"1:2,2:3\", group = \"{group}\", route_port = 1, flight = {flight} }}"
    )
}

/// One run with `p` and `seed`, CLIP's devices built by `clip`.
pub fn run(p: &Params, seed: u64, clip: Arc<dyn System>) -> Result<ExperimentRun, String> {
    p.check_known(NAME, PARAMS).map_err(param_err)?;
    let servers = p.number("servers", 2, 0, 2).map_err(param_err)?;
    let size = p.number("size", 64, 64, 9_000).map_err(param_err)?;
    let flows = p.number("flows", 1_024, 1, 1 << 20).map_err(param_err)?;
    let max_pps = number(p, "max_mpps", 25.0, 0.001, 1_000.0)? * 1e6;
    let setup = p
        .number("setup_us", 2_000, 0, 10_000_000)
        .map_err(param_err)?
        * 1_000;
    let warmup = p
        .number("warmup_us", 200, 1, 10_000_000)
        .map_err(param_err)?
        * 1_000;
    let window = p
        .number("window_us", 2_000, 1, 10_000_000)
        .map_err(param_err)?
        * 1_000;
    // The simulator's frame is the spec's without its FCS, raised to fit
    // the generator's probe (66 B).
    let frame = (size - 4).max(inca_sim::nodes::host::MIN_PROBE_FRAME as u64);
    let pps = generator_pps(frame, max_pps as u64);
    let (start, end) = (setup, setup + warmup + window);
    let set = vec![
        switch_params(servers),
        format!("gen.workload.load.pps={pps}"),
        format!("gen.workload.load.size={frame}"),
        format!("gen.workload.load.flows={flows}"),
        format!("gen.workload.load.start=\"{start}ns\""),
        format!("gen.workload.load.stop=\"{end}ns\""),
        format!("duration=\"{end}ns\""),
    ];
    let mut tb = Testbed::build(&set, seed, clip)?;
    tb.run_until(start + warmup);
    let a = tb.snapshot()?;
    tb.run_until(end);
    let b = tb.snapshot()?;
    let per_s = |n: u64| n * 1_000_000_000 / window;
    let delivered = b.received - a.received;
    // L2 bits: the frames as received plus their FCS.
    let l2_bits = (b.received_bytes - a.received_bytes + 4 * delivered) * 8;
    let run = tb.run_report();
    let server_drops: u64 = run
        .nodes
        .iter()
        .filter(|(_, kind, _)| *kind == "server")
        .map(|(_, _, r)| {
            let c = |k: &str| r.counters.get(k).copied().unwrap_or(0);
            c("rx_ring_drops") + c("rx_buffer_drops")
        })
        .sum();
    let result = counters(&[
        ("servers", servers),
        ("size", size),
        ("frame_bytes", frame),
        ("generator_pps", pps),
        ("offered_pps", per_s(b.sent - a.sent)),
        ("delivered_pps", per_s(delivered)),
        ("delivered_l2_mbps", l2_bits * 1_000 / window),
        ("server_drops", server_drops),
    ]);
    let mut run = run.with_result("result", result);
    let label = if servers == 0 {
        "Ideal".to_string()
    } else {
        format!("CLIP, {servers} server(s)")
    };
    run.highlights.push(format!(
        "{label}, {size} B: offered {:.2} Mpps, delivered {:.2} Mpps ({:.2} Gbit/s L2) over {} us",
        per_s(b.sent - a.sent) as f64 / 1e6,
        per_s(delivered) as f64 / 1e6,
        l2_bits as f64 / window as f64,
        window / 1_000
    ));
    Ok(run)
}
