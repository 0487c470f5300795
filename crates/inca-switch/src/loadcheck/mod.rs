//! The load-time check: what `inca check` runs after placement to refuse a
//! program whose data plane breaks the pipeline's rules on some path.
//!
//! The data plane is Rust code, so no proof is possible; the check
//! exercises it instead. It loads the program on a switch of the profile
//! with a [`Prober`](crate::probe::Prober) attached, starts its control
//! plane (so its start-up entries and default parameters are in), and
//! sends, in [`ROUNDS`] rounds [`round_gap`] apart (time for digests to
//! become table entries): the systematic packet set of [`packets`], random
//! packets from the seed, the program's own samples
//! ([`crate::Program::check_hints`]), and from the second round on the
//! replies to what it transmitted in the round before. Every pass that
//! results — ingress, egress, recirculated, resubmitted, generated,
//! mirrored — is analysed as [`crate::probe`] describes: double accesses,
//! dependencies missing and dependencies that contradict the data flow.
//!
//! What it cannot see: paths no packet of the set takes (a protocol the
//! program parses and the set lacks, table contents only a peer's messages
//! install, state reached after long runs), and data flow a perturbation
//! does not reveal (a branch taken for one value in billions). A clean
//! report is evidence, not proof; a finding is a real path, with the packet
//! that takes it.
//!
//! Not checked [our choice]: CPU data paths (`features.cpu_data_path`: the
//! rules are lifted there) and programs whose state needs more than
//! [`MAX_STATE_BYTES`] of DRAM (the check builds the storage). On
//! run-to-completion devices dependencies do not order anything (one
//! stage), so only double accesses count.

pub mod packets;

use std::fmt;

use crate::device::Nanos;
use crate::harness::Harness;
use crate::placement::Location;
use crate::probe::{Finding, FindingKind};
use crate::profile::Profile;
use crate::program::Program;
use crate::switch::{check, LoadError, Switch};

/// Rounds of packets [our choice: the second sees entries installed from
/// the first's digests, the third the replies to the second's].
pub const ROUNDS: usize = 3;
/// Virtual time between rounds, at least [our choice]; more if the
/// profile's control plane needs it (see [`round_gap`]).
pub const MIN_ROUND_GAP: Nanos = 20_000_000;

/// Time between rounds on `profile`: ten times a digest's way to a table
/// entry (digest latency, one CPU event, one table write), so installs of
/// one round are in for the next [our choice], capped at 100 ms.
pub fn round_gap(profile: &Profile) -> Nanos {
    let cp = &profile.control_plane;
    let install = cp.digest_latency + cp.cpu_per_event + cp.table_write;
    (10 * install).clamp(MIN_ROUND_GAP, 100_000_000)
}
/// Virtual time between packets of a round [our choice].
pub const PACKET_GAP: Nanos = 2_000;
/// Step of virtual time between looks at the analysis budget.
const ADVANCE_STEP: Nanos = 100_000;
/// Random packets per round.
pub const RANDOM_PACKETS: usize = 64;
/// Replies sent per round, at most.
pub const MAX_REPLIES: usize = 512;
/// Programs with more DRAM state than this are not exercised.
pub const MAX_STATE_BYTES: u64 = 1 << 30;

/// Options of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadCheckOptions {
    /// Seed of the random packets and the switch's RNG.
    pub seed: u64,
}

impl Default for LoadCheckOptions {
    fn default() -> Self {
        LoadCheckOptions { seed: 1 }
    }
}

/// What the load-time check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadCheckReport {
    /// The program.
    pub program: String,
    /// Why it was not exercised, if it was not.
    pub skipped: Option<String>,
    /// The seed used.
    pub seed: u64,
    /// Packets sent in.
    pub packets: u64,
    /// Passes analysed, accesses in them, perturbed re-runs.
    pub passes: u64,
    /// Accesses in the analysed passes.
    pub accesses: u64,
    /// Perturbed re-runs.
    pub reruns: u64,
    /// Perturbed re-runs in which the program panicked (not evidence).
    pub panicked: u64,
    /// Passes past the analysis budget, run without analysis.
    pub unanalysed: u64,
    /// Findings that refuse the program.
    pub findings: Vec<Finding>,
    /// Findings the program declares known, with its reason.
    pub known: Vec<(Finding, String)>,
}

impl LoadCheckReport {
    /// No finding refuses the program.
    pub fn passed(&self) -> bool {
        self.findings.is_empty()
    }
}

impl fmt::Display for LoadCheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(why) = &self.skipped {
            return writeln!(f, "load-time check of {}: skipped ({why})", self.program);
        }
        writeln!(
            f,
            "load-time check of {} (seed {}): {} packets, {} passes, {} accesses, {} perturbed re-runs ({} panicked): {}",
            self.program,
            self.seed,
            self.packets,
            self.passes,
            self.accesses,
            self.reruns,
            self.panicked,
            match (self.findings.len(), self.known.len()) {
                (0, 0) => "no findings".to_string(),
                (0, k) => format!("{k} known violation(s), accepted"),
                (n, k) => format!("{n} finding(s), {k} known"),
            }
        )?;
        if self.unanalysed > 0 {
            writeln!(
                f,
                "  ({} later passes ran unanalysed, over the budget of {})",
                self.unanalysed,
                crate::probe::MAX_ANALYSED_PASSES
            )?;
        }
        for x in &self.findings {
            writeln!(f, "  error: {x}")?;
        }
        for (x, why) in &self.known {
            writeln!(f, "  known violation ({why}): {x}")?;
        }
        Ok(())
    }
}

/// Runs the load-time check of `program` on `profile` (see the module
/// documentation). A program that does not load is a [`LoadError`].
pub fn load_check<P: Program>(
    profile: &Profile,
    program: P,
    opts: LoadCheckOptions,
) -> Result<LoadCheckReport, LoadError> {
    let mut report = LoadCheckReport {
        program: program.name().to_string(),
        seed: opts.seed,
        ..LoadCheckReport::default()
    };
    let placement = check(profile, &mut program.clone())?;
    let dram: u64 = placement
        .objects
        .iter()
        .map(|o| match o.location {
            Location::Dram { bytes } => bytes,
            Location::Stages { .. } => 0,
        })
        .sum();
    if profile.features.cpu_data_path {
        report.skipped = Some("a CPU data path has no access rules".into());
        return Ok(report);
    }
    if dram > MAX_STATE_BYTES {
        report.skipped = Some(format!("{dram} B of DRAM state is over the check's limit"));
        return Ok(report);
    }
    let hints = program.check_hints();
    let mut switch = Switch::new(profile.clone(), program)?;
    switch.attach_prober();
    let mut h = Harness::new(switch, opts.seed);
    let ports = profile.data_path.ports.min(packets::PORTS);
    let mut base = packets::systematic(ports);
    base.extend(hints.samples.iter().cloned());
    let gap = round_gap(profile);
    let mut t = gap;
    // Time moves in steps so the check stops soon after the analysis budget
    // is spent (a retransmission loop can make passes at line rate).
    let spent = |h: &Harness<Switch<P>>| h.device.prober().is_none_or(|p| p.unanalysed > 0);
    let advance = |h: &mut Harness<Switch<P>>, to: Nanos| {
        while h.now() < to && !spent(h) {
            h.advance_to((h.now() + ADVANCE_STEP).min(to));
        }
    };
    advance(&mut h, t);
    let mut replies: Vec<(u16, Vec<u8>)> = Vec::new();
    for round in 0..ROUNDS {
        if spent(&h) {
            break;
        }
        let seed = opts.seed.wrapping_add(round as u64);
        let random = packets::random(seed, RANDOM_PACKETS, ports);
        let round_packets = base.iter().chain(&random).chain(&replies).cloned();
        let round_packets: Vec<_> = round_packets.collect();
        h.take();
        for (port, frame) in round_packets {
            if spent(&h) {
                break;
            }
            t += PACKET_GAP;
            h.send(t, port, frame);
            report.packets += 1;
        }
        t += gap;
        advance(&mut h, t);
        replies = h
            .take()
            .into_iter()
            .filter(|x| x.port < profile.data_path.ports)
            .filter_map(|x| packets::reply(&x.frame).map(|f| (x.port, f)))
            .take(MAX_REPLIES)
            .collect();
    }
    let Some(prober) = h.device.prober() else {
        return Ok(report);
    };
    report.passes = prober.passes;
    report.accesses = prober.accesses;
    report.reruns = prober.reruns;
    report.panicked = prober.panicked;
    report.unanalysed = prober.unanalysed;
    for f in prober.findings() {
        let ordering = matches!(
            f.kind,
            FindingKind::DependencyMissing { .. } | FindingKind::DependencyContradicted { .. }
        );
        if ordering && profile.run_to_completion {
            continue;
        }
        match hints.known.iter().find(|k| k.object == f.object) {
            Some(k) => report.known.push((f.clone(), k.reason.clone())),
            None => report.findings.push(f.clone()),
        }
    }
    Ok(report)
}
