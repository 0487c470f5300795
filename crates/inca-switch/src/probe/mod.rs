//! The load-time check's per-pass analysis: double accesses and data flow
//! against declared dependencies.
//!
//! A switch with a [`Prober`] attached runs each packet pass three ways
//! before running it for real: once traced ([`crate::trace`]), recording the
//! ordered accesses; then once more per possible perturbation of each
//! access's result (a table hit turned into a miss, another stored register
//! value, another meter colour, another hash output), each run starting
//! from the same state (program cloned, objects restored from the trace's
//! undo log, the same RNG). An object B reached after A *depends on* A when
//! perturbing A's result changes whether B is reached or how (its key, its
//! index, the value its action leaves, the bytes counted, a hash's input).
//! That is data flow as the hardware sees it: B needs A's result, so B must
//! sit in a later stage than A.
//!
//! Findings:
//! - **double access**: one object reached twice in a pass (or from the
//!   wrong pipeline) — the rule [`crate::objects::DataPlane`] enforces at run
//!   time, found before any traffic;
//! - **dependency missing**: B depends on A but is not declared (directly
//!   or transitively) after A, so placement may put B in A's stage or
//!   earlier;
//! - **dependency contradicts data flow**: B depends on A but A is declared
//!   after B — the declaration orders the stages against the data flow.
//!
//! [our choice] An object reached before another that is declared earlier,
//! with no data flow between them, is not a finding: the two are
//! independent and their order in Rust code does not matter to the
//! hardware. Perturbations that cannot occur with the program's real
//! values are still data flow (the program computes B from A), so they
//! count.

mod describe;

use std::collections::{HashMap, HashSet};
use std::fmt;

pub use describe::describe_frame;

use crate::device::{DeviceRng, Nanos};
use crate::objects::{DataPlane, Objects};
use crate::placement::{Gress, ObjectDecl, ObjectKind};
use crate::program::{PacketCtx, Program};
use crate::trace::{Access, PassTrace, Refusal};

/// A pass with the same sequence of objects is perturbed at most this many
/// times [our choice: bounds the check's cost under repetitive traffic; the
/// fingerprints differ between such passes, so a few are worth trying].
pub const PERTURBED_PER_SHAPE: u32 = 4;
/// Passes analysed at most; later passes run unanalysed [our choice: a
/// retransmission loop or a generator stream can make millions].
pub const MAX_ANALYSED_PASSES: u64 = 20_000;

/// How B depends on A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dependence {
    /// Whether B is reached at all changes with A's result.
    Reached,
    /// How B is reached (key, index, value written, bytes, hash input)
    /// changes with A's result.
    Value,
}

impl fmt::Display for Dependence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dependence::Reached => "whether it is reached",
            Dependence::Value => "how it is reached (key, index or value written)",
        })
    }
}

/// What a finding is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FindingKind {
    /// `object` reached twice in one pass.
    DoubleAccess,
    /// `object` reached from the pipeline it was not declared for.
    WrongPipeline,
    /// `object` depends on `source` but is not declared after it.
    DependencyMissing {
        /// The object whose result it needs.
        source: String,
        /// How.
        how: Dependence,
    },
    /// `object` depends on `source`, but `source` is declared after it.
    DependencyContradicted {
        /// The object whose result it needs.
        source: String,
        /// How.
        how: Dependence,
    },
}

/// One finding of the load-time check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The program.
    pub program: String,
    /// What is wrong.
    pub kind: FindingKind,
    /// The object it is about (reached twice; the dependent one).
    pub object: String,
    /// The pipeline of the pass.
    pub gress: Gress,
    /// The objects the pass reached, in order, up to the offending access.
    pub path: Vec<String>,
    /// The packet of the first pass that showed it.
    pub packet: String,
    /// Passes that showed it.
    pub passes: u64,
}

impl Finding {
    /// The block of a composite the object belongs to, if any.
    pub fn block(&self) -> Option<&str> {
        self.object.split_once('/').map(|(b, _)| b)
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = match self.gress {
            Gress::Ingress => "ingress",
            Gress::Egress => "egress",
        };
        write!(f, "{}", self.program)?;
        if let Some(b) = self.block() {
            write!(f, " (block {b})")?;
        }
        let o = &self.object;
        match &self.kind {
            FindingKind::DoubleAccess => {
                write!(f, ": double access: {o:?} is reached twice in one {g} pass")?
            }
            FindingKind::WrongPipeline => {
                write!(f, ": {o:?} is reached from {g}, not its declared pipeline")?
            }
            FindingKind::DependencyMissing { source, how } => write!(
                f,
                ": dependency missing: {o:?} depends on {source:?} ({how} changes with \
                 its result) but is not declared after it, so placement may put it in \
                 the same stage or earlier"
            )?,
            FindingKind::DependencyContradicted { source, how } => write!(
                f,
                ": dependency contradicts data flow: {source:?} is declared after {o:?}, \
                 but {o:?} depends on {source:?} ({how} changes with its result)"
            )?,
        }
        write!(
            f,
            "; path ({g}): {} — {} [{} pass{}]",
            self.path.join(" → "),
            self.packet,
            self.passes,
            if self.passes == 1 { "" } else { "es" }
        )
    }
}

/// What the load-time check has seen so far on one switch.
pub struct Prober {
    program: String,
    names: Vec<String>,
    /// Which objects are hash units.
    hashes: Vec<bool>,
    /// `before[b]` holds every object `b` is declared (transitively) after.
    before: Vec<HashSet<usize>>,
    findings: Vec<Finding>,
    index: HashMap<(u8, usize, usize), usize>,
    shapes: HashMap<(Gress, Vec<usize>), u32>,
    /// Passes analysed.
    pub passes: u64,
    /// Accesses in them (unperturbed runs).
    pub accesses: u64,
    /// Perturbed runs.
    pub reruns: u64,
    /// Perturbed runs in which the program panicked (a value it cannot
    /// handle; the run says nothing about data flow).
    pub panicked: u64,
    /// Passes past [`MAX_ANALYSED_PASSES`], run without analysis.
    pub unanalysed: u64,
}

impl Prober {
    /// A prober for `program` with declarations `decls`.
    pub fn new(program: &str, decls: &[ObjectDecl]) -> Self {
        // Declarations only name earlier objects, so one pass in order
        // closes the relation.
        let mut before: Vec<HashSet<usize>> = Vec::with_capacity(decls.len());
        for d in decls {
            let mut set = HashSet::new();
            for &a in &d.after {
                set.insert(a);
                if let Some(s) = before.get(a) {
                    set.extend(s.iter().copied());
                }
            }
            before.push(set);
        }
        Prober {
            program: program.to_string(),
            names: decls.iter().map(|d| d.name.clone()).collect(),
            hashes: decls
                .iter()
                .map(|d| matches!(d.kind, ObjectKind::Hash { .. }))
                .collect(),
            before,
            findings: Vec::new(),
            index: HashMap::new(),
            shapes: HashMap::new(),
            passes: 0,
            accesses: 0,
            reruns: 0,
            panicked: 0,
            unanalysed: 0,
        }
    }

    /// The findings so far, in the order first seen.
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    fn name(&self, i: usize) -> String {
        self.names.get(i).cloned().unwrap_or_else(|| "?".into())
    }

    fn record(
        &mut self,
        key: (u8, usize, usize),
        kind: FindingKind,
        gress: Gress,
        path: &[Access],
        packet: &dyn Fn() -> String,
    ) {
        if let Some(&i) = self.index.get(&key) {
            self.findings[i].passes += 1;
            return;
        }
        let f = Finding {
            program: self.program.clone(),
            kind,
            object: self.name(key.2),
            gress,
            path: path.iter().map(|a| self.name(a.object)).collect(),
            packet: packet(),
            passes: 1,
        };
        self.index.insert(key, self.findings.len());
        self.findings.push(f);
    }
}

thread_local! {
    /// Set while a perturbed run may panic: the panic hook stays quiet.
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs (once) a panic hook that says nothing for panics of perturbed
/// runs on this thread and defers to the previous hook otherwise.
fn quiet_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(|q| q.get()) {
                previous(info);
            }
        }));
    });
}

/// [`traced_run`] with a perturbation: a perturbed value may drive the
/// program into a panic (an overflow on a value it never holds), which is
/// caught (`None`); the objects are restored either way.
#[allow(clippy::too_many_arguments)]
fn perturbed_run<P: Program>(
    program: &P,
    objects: &mut Objects,
    pkt: &PacketCtx<P::Meta, P::Digest>,
    gress: Gress,
    now: Nanos,
    rng: &DeviceRng,
    perturb: (usize, u8),
) -> Option<Vec<Access>> {
    quiet_hook();
    let violations = objects.violations().len();
    QUIET.with(|q| q.set(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        traced_run(program, objects, pkt, gress, now, rng, Some(perturb))
    }));
    QUIET.with(|q| q.set(false));
    match r {
        Ok(t) => Some(t),
        Err(_) => {
            objects.end_trace(violations);
            None
        }
    }
}

/// Runs one pass of `program` over a copy of `pkt` with a trace attached,
/// perturbing access `perturb`; leaves the objects as they were.
fn traced_run<P: Program>(
    program: &P,
    objects: &mut Objects,
    pkt: &PacketCtx<P::Meta, P::Digest>,
    gress: Gress,
    now: Nanos,
    rng: &DeviceRng,
    perturb: Option<(usize, u8)>,
) -> Vec<Access> {
    let mut program = program.clone();
    let mut pkt = pkt.duplicate();
    let mut rng = rng.clone();
    let violations = objects.violations().len();
    objects.begin_pass(gress);
    objects.trace = Some(Box::new(PassTrace::new(perturb)));
    let mut dp = DataPlane {
        objects,
        now,
        rng: &mut rng,
    };
    // An error ends the pass; the trace holds what it reached.
    let _ = match gress {
        Gress::Ingress => program.ingress(&mut pkt, &mut dp),
        Gress::Egress => program.egress(&mut pkt, &mut dp),
    };
    objects
        .end_trace(violations)
        .map(|t| t.accesses)
        .unwrap_or_default()
}

/// The first access to `object` in `trace` after position `from`.
fn first_after(trace: &[Access], from: usize, object: usize) -> Option<(usize, u64)> {
    trace
        .iter()
        .enumerate()
        .skip(from + 1)
        .find(|(_, a)| a.object == object && a.refused.is_none())
        .map(|(i, a)| (i, a.fingerprint))
}

/// Analyses one pass of `program` over `pkt` (see the module
/// documentation); the objects are left as they were, the caller then runs
/// the pass for real.
#[cold]
#[inline(never)]
pub(crate) fn probe_pass<P: Program>(
    prober: &mut Prober,
    program: &P,
    objects: &mut Objects,
    pkt: &PacketCtx<P::Meta, P::Digest>,
    gress: Gress,
    now: Nanos,
    rng: &DeviceRng,
) {
    if prober.passes >= MAX_ANALYSED_PASSES {
        prober.unanalysed += 1;
        return;
    }
    let base = traced_run(program, objects, pkt, gress, now, rng, None);
    prober.passes += 1;
    prober.accesses += base.len() as u64;
    let packet = || describe_frame(gress, pkt);
    let mut end = base.len();
    for (i, a) in base.iter().enumerate() {
        if let Some(r) = a.refused {
            let (tag, kind) = match r {
                Refusal::Double => (0, FindingKind::DoubleAccess),
                Refusal::WrongGress => (1, FindingKind::WrongPipeline),
            };
            prober.record((tag, a.object, a.object), kind, gress, &base[..=i], &packet);
            end = end.min(i);
        }
    }
    let shape = (gress, base.iter().map(|a| a.object).collect::<Vec<_>>());
    let seen = prober.shapes.entry(shape).or_insert(0);
    if *seen >= PERTURBED_PER_SHAPE {
        return;
    }
    *seen += 1;
    for i in 0..end {
        let a = base[i].object;
        for mode in 0..base[i].modes {
            prober.reruns += 1;
            let Some(alt) = perturbed_run(program, objects, pkt, gress, now, rng, (i, mode)) else {
                prober.panicked += 1;
                continue;
            };
            let later: HashSet<usize> = base[i + 1..]
                .iter()
                .chain(alt.get(i + 1..).unwrap_or(&[]))
                .map(|x| x.object)
                .filter(|&b| b != a)
                .collect();
            let mut later: Vec<usize> = later.into_iter().collect();
            later.sort_unstable();
            for b in later {
                let (x, y) = (first_after(&base, i, b), first_after(&alt, i, b));
                let how = match (x, y) {
                    (Some((_, fx)), Some((_, fy))) if fx == fy => continue,
                    (None, None) => continue,
                    (Some(_), Some(_)) => Dependence::Value,
                    // A hash unit computes whether or not its result is
                    // used: only its input can depend on anything.
                    _ if prober.hashes[b] => continue,
                    _ => Dependence::Reached,
                };
                if prober.before[b].contains(&a) {
                    continue;
                }
                let path = match (x, y) {
                    (Some((j, _)), _) => &base[..=j],
                    (None, Some((j, _))) => &alt[..=j],
                    (None, None) => continue,
                };
                let source = prober.name(a);
                let (tag, kind) = if prober.before[a].contains(&b) {
                    (3, FindingKind::DependencyContradicted { source, how })
                } else {
                    (2, FindingKind::DependencyMissing { source, how })
                };
                prober.record((tag, a, b), kind, gress, path, &packet);
            }
        }
    }
}
