//! Explicit-state model checking of the lease protocol (spec §6.1).
//!
//! A small breadth-first checker over Rust models of the protocol, in the
//! spirit of TLC: [`check`] enumerates every reachable state of a [`Model`],
//! checks its state invariants and its transition assertions, and returns the
//! shortest counterexample trace when one fails. [`check_liveness`] adds a
//! fairness-constrained lasso search (Tarjan SCCs over the "still waiting"
//! states, keeping only components in which every weakly fair action is
//! either taken or disabled somewhere), which is exact for weak fairness.
//!
//! The models themselves live in [`base`] (the TLA+ machine of [TH] App. C,
//! reliable FIFO channels) and [`extended`] (loss, duplication, reordering,
//! fencing, owner-checked renewal, buffered reads, crashes), each with the
//! mutants that must fail (spec §9 items 4 and 5).

pub mod base;
pub mod extended;

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// The Fx hash (as in rustc): the state sets are large and never exposed to
/// untrusted input, so a fast non-cryptographic hash is the right trade.
#[derive(Default)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// A transition of a model: the action's label, the next state, and the
/// assertion it violated on the way, if any (TLA+ `Assert`).
#[derive(Clone, Debug)]
pub struct Step<S, L> {
    /// Which action fired (shown in traces; also the fairness identity).
    pub label: L,
    /// The successor state.
    pub next: S,
    /// A transition assertion that failed, e.g. WriteResponseSeq.
    pub violation: Option<String>,
}

/// A finite-state transition system to check.
pub trait Model {
    /// One global state; must be cheap to clone and hash.
    type State: Clone + Eq + Hash + Debug;
    /// An action label.
    type Label: Clone + Debug;
    /// The initial states.
    fn init(&self) -> Vec<Self::State>;
    /// All enabled transitions out of `s`, appended to `out`.
    fn next(&self, s: &Self::State, out: &mut Vec<Step<Self::State, Self::Label>>);
    /// The state invariants that fail in `s` (empty when all hold).
    fn invariants(&self, s: &Self::State) -> Vec<String>;
}

/// A counterexample: the failed property and the path that reaches it.
#[derive(Clone, Debug)]
pub struct Counterexample<S, L> {
    /// The property that failed, with a short explanation.
    pub property: String,
    /// The initial state.
    pub init: S,
    /// The steps from `init` to the bad state (or into the bad transition).
    pub steps: Vec<(L, S)>,
    /// For liveness: the cycle repeated forever after `steps`.
    pub cycle: Vec<(L, S)>,
}

impl<S: Debug, L: Debug> Counterexample<S, L> {
    /// A human-readable trace, one line per step.
    pub fn render(&self) -> String {
        let mut out = format!("violated: {}\n  init: {:?}\n", self.property, self.init);
        for (i, (l, s)) in self.steps.iter().enumerate() {
            out.push_str(&format!("  {:>3}. {:?}\n       -> {:?}\n", i + 1, l, s));
        }
        if !self.cycle.is_empty() {
            out.push_str("  then forever:\n");
            for (l, s) in &self.cycle {
                out.push_str(&format!("       {:?}\n       -> {:?}\n", l, s));
            }
        }
        out
    }
}

/// What a check explored and found.
#[derive(Clone, Debug)]
pub struct Report<S, L> {
    /// Distinct reachable states.
    pub states: usize,
    /// Transitions examined (including ones to known states).
    pub transitions: usize,
    /// Depth of the BFS (longest shortest path).
    pub depth: usize,
    /// The first violation found (the shortest one, by BFS order).
    pub counterexample: Option<Counterexample<S, L>>,
    /// True when `max_states` cut the exploration short.
    pub truncated: bool,
}

/// The explored state graph, kept for trace reconstruction and liveness.
struct Graph<S, L> {
    states: Vec<S>,
    /// BFS tree: (parent index, label), `None` for initial states.
    parent: Vec<Option<(u32, L)>>,
    /// Full successor lists (only when `keep_edges`).
    edges: Vec<Vec<(u32, L)>>,
}

impl<S: Clone, L: Clone> Graph<S, L> {
    fn path_to(&self, mut i: u32) -> (S, Vec<(L, S)>) {
        let mut rev = Vec::new();
        while let Some((p, l)) = &self.parent[i as usize] {
            rev.push((l.clone(), self.states[i as usize].clone()));
            i = *p;
        }
        rev.reverse();
        (self.states[i as usize].clone(), rev)
    }
}

/// The graph and report of one exploration.
type Explored<M> = (
    Graph<<M as Model>::State, <M as Model>::Label>,
    Report<<M as Model>::State, <M as Model>::Label>,
);

/// Breadth-first exploration; stops at the first violation or at
/// `max_states` (an explicit bound, reported as `truncated`).
fn explore<M: Model>(m: &M, max_states: usize, keep_edges: bool) -> Explored<M> {
    let mut g = Graph {
        states: Vec::new(),
        parent: Vec::new(),
        edges: Vec::new(),
    };
    let mut index: FxMap<M::State, u32> = FxMap::default();
    let mut report = Report {
        states: 0,
        transitions: 0,
        depth: 0,
        counterexample: None,
        truncated: false,
    };
    let mut depth_of: Vec<u32> = Vec::new();
    for s in m.init() {
        if index.contains_key(&s) {
            continue;
        }
        index.insert(s.clone(), g.states.len() as u32);
        g.states.push(s);
        g.parent.push(None);
        depth_of.push(0);
    }
    let mut buf = Vec::new();
    let mut head = 0usize;
    while head < g.states.len() {
        let cur = head as u32;
        head += 1;
        let s = g.states[cur as usize].clone();
        let bad = m.invariants(&s);
        if let Some(p) = bad.into_iter().next() {
            let (init, steps) = g.path_to(cur);
            report.counterexample = Some(Counterexample {
                property: p,
                init,
                steps,
                cycle: vec![],
            });
            break;
        }
        buf.clear();
        m.next(&s, &mut buf);
        let mut succ = Vec::new();
        for st in buf.drain(..) {
            report.transitions += 1;
            if let Some(v) = st.violation {
                let (init, mut steps) = g.path_to(cur);
                steps.push((st.label, st.next));
                report.counterexample = Some(Counterexample {
                    property: v,
                    init,
                    steps,
                    cycle: vec![],
                });
                break;
            }
            let id = match index.get(&st.next) {
                Some(&id) => id,
                None => {
                    if g.states.len() >= max_states {
                        report.truncated = true;
                        continue;
                    }
                    let id = g.states.len() as u32;
                    index.insert(st.next.clone(), id);
                    g.states.push(st.next);
                    g.parent.push(Some((cur, st.label.clone())));
                    let d = depth_of[cur as usize] + 1;
                    report.depth = report.depth.max(d as usize);
                    depth_of.push(d);
                    id
                }
            };
            if keep_edges {
                succ.push((id, st.label));
            }
        }
        if report.counterexample.is_some() {
            break;
        }
        if keep_edges {
            g.edges.push(succ);
        }
    }
    report.states = g.states.len();
    (g, report)
}

/// Checks every invariant and transition assertion of `m` over all states
/// reachable from its initial states (at most `max_states` of them).
pub fn check<M: Model>(m: &M, max_states: usize) -> Report<M::State, M::Label> {
    explore(m, max_states, false).1
}

/// A liveness property "□(waiting ⇒ ◇¬waiting)" under weak fairness.
pub trait Liveness: Model {
    /// Number of weakly fair action classes.
    fn fair_classes(&self) -> usize;
    /// The fair class of an action, if it is weakly fair.
    fn fair_class(&self, l: &Self::Label) -> Option<usize>;
    /// The liveness obligations, by index: `waiting(i, s)` is true while
    /// obligation `i` is still open in `s` (e.g. switch i's request is
    /// pending and switch i is not the owner).
    fn obligations(&self) -> usize;
    /// See [`Liveness::obligations`].
    fn waiting(&self, i: usize, s: &Self::State) -> bool;
    /// The obligation's name, for reports.
    fn obligation_name(&self, i: usize) -> String;
}

/// Checks the safety properties and then, for every obligation, searches for
/// a fair lasso that stays "waiting" forever (or a deadlock while waiting).
pub fn check_liveness<M: Liveness>(m: &M, max_states: usize) -> Report<M::State, M::Label> {
    let (g, mut report) = explore(m, max_states, true);
    if report.counterexample.is_some() || report.truncated {
        return report;
    }
    let n = g.states.len();
    // Which fair classes are enabled in each state.
    let enabled: Vec<u64> = g
        .edges
        .iter()
        .map(|es| {
            es.iter()
                .filter_map(|(_, l)| m.fair_class(l))
                .fold(0u64, |a, c| a | 1 << c)
        })
        .collect();
    for ob in 0..m.obligations() {
        let inside: Vec<bool> = (0..n).map(|i| m.waiting(ob, &g.states[i])).collect();
        // A deadlock while waiting is a violation too (the path just ends).
        if let Some(i) = (0..n).find(|&i| inside[i] && g.edges[i].is_empty()) {
            let (init, steps) = g.path_to(i as u32);
            report.counterexample = Some(Counterexample {
                property: format!("{} (deadlock while waiting)", m.obligation_name(ob)),
                init,
                steps,
                cycle: vec![],
            });
            return report;
        }
        for comp in sccs(&g.edges, &inside) {
            if let Some(cycle) = fair_cycle(m, &g, &comp, &enabled) {
                let (init, steps) = g.path_to(comp[0]);
                report.counterexample = Some(Counterexample {
                    property: format!("{} (fair cycle)", m.obligation_name(ob)),
                    init,
                    steps,
                    cycle,
                });
                return report;
            }
        }
    }
    report
}

/// Strongly connected components of the subgraph induced by `inside`, each
/// with at least one internal edge (iterative Tarjan).
fn sccs<L>(edges: &[Vec<(u32, L)>], inside: &[bool]) -> Vec<Vec<u32>> {
    let n = edges.len();
    const NONE: u32 = u32::MAX;
    let mut idx = vec![NONE; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<u32> = Vec::new();
    let mut out = Vec::new();
    let mut counter = 0u32;
    for root in 0..n {
        if !inside[root] || idx[root] != NONE {
            continue;
        }
        // (node, next edge position)
        let mut call: Vec<(u32, usize)> = vec![(root as u32, 0)];
        idx[root] = counter;
        low[root] = counter;
        counter += 1;
        stack.push(root as u32);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut pos)) = call.last_mut() {
            let vi = v as usize;
            if *pos < edges[vi].len() {
                let w = edges[vi][*pos].0 as usize;
                *pos += 1;
                if !inside[w] {
                    continue;
                }
                if idx[w] == NONE {
                    idx[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w as u32);
                    on_stack[w] = true;
                    call.push((w as u32, 0));
                } else if on_stack[w] {
                    low[vi] = low[vi].min(idx[w]);
                }
            } else {
                call.pop();
                if let Some(&(p, _)) = call.last() {
                    low[p as usize] = low[p as usize].min(low[vi]);
                }
                if low[vi] == idx[vi] {
                    let mut comp = Vec::new();
                    loop {
                        let w = stack.pop().expect("tarjan stack");
                        on_stack[w as usize] = false;
                        comp.push(w);
                        if w == v {
                            break;
                        }
                    }
                    let nontrivial =
                        comp.len() > 1 || edges[vi].iter().any(|(t, _)| *t as usize == vi);
                    if nontrivial {
                        comp.sort_unstable();
                        out.push(comp);
                    }
                }
            }
        }
    }
    out
}

/// If the component admits a weakly fair cycle, returns a walk through it;
/// else `None`. Under weak fairness a
/// component is fair iff every fair class is taken on an internal edge or is
/// disabled in some member state: a tour of the whole component is then fair.
fn fair_cycle<M: Liveness>(
    m: &M,
    g: &Graph<M::State, M::Label>,
    comp: &[u32],
    enabled: &[u64],
) -> Option<Vec<(M::Label, M::State)>> {
    let member = |i: u32| comp.binary_search(&i).is_ok();
    let mut taken = 0u64;
    let mut disabled_somewhere = 0u64;
    let all = if m.fair_classes() >= 64 {
        u64::MAX
    } else {
        (1u64 << m.fair_classes()) - 1
    };
    for &v in comp {
        disabled_somewhere |= all & !enabled[v as usize];
        for (w, l) in &g.edges[v as usize] {
            if member(*w) {
                if let Some(c) = m.fair_class(l) {
                    taken |= 1 << c;
                }
            }
        }
    }
    if (taken | disabled_somewhere) & all != all {
        return None;
    }
    // Witness for the report: from comp[0], walk (shortest paths inside the
    // component) through every member state and back. The verdict above is
    // exact; this walk only illustrates it.
    let start = comp[0];
    let mut cycle = Vec::new();
    let mut at = start;
    let mut targets: Vec<u32> = comp.to_vec();
    targets.push(start);
    for t in targets {
        if t == at && t != start {
            continue;
        }
        if let Some(p) = inner_path(g, &member, at, t) {
            cycle.extend(p);
            at = t;
        }
    }
    Some(cycle)
}

/// Shortest path inside the component from `a` to `b` (at least one step
/// when `a == b`).
fn inner_path<S: Clone, L: Clone>(
    g: &Graph<S, L>,
    member: &dyn Fn(u32) -> bool,
    a: u32,
    b: u32,
) -> Option<Vec<(L, S)>> {
    let mut prev: HashMap<u32, (u32, L)> = HashMap::new();
    let mut q = std::collections::VecDeque::new();
    q.push_back(a);
    while let Some(v) = q.pop_front() {
        for (w, l) in &g.edges[v as usize] {
            if !member(*w) || prev.contains_key(w) {
                continue;
            }
            prev.insert(*w, (v, l.clone()));
            if *w == b {
                let mut rev = Vec::new();
                let mut c = b;
                loop {
                    let (p, l) = prev[&c].clone();
                    rev.push((l, g.states[c as usize].clone()));
                    c = p;
                    if c == a {
                        break;
                    }
                }
                rev.reverse();
                return Some(rev);
            }
            q.push_back(*w);
        }
    }
    None
}

/// One line of [`run_suite`]'s report.
#[derive(Clone, Debug)]
pub struct SuiteLine {
    /// Which model and bounds.
    pub name: String,
    /// Whether a counterexample was expected (a mutant).
    pub expect_violation: bool,
    /// States explored.
    pub states: usize,
    /// The counterexample found, rendered.
    pub counterexample: Option<String>,
    /// Exploration hit the state cap.
    pub truncated: bool,
}

impl SuiteLine {
    /// The outcome is what the line expects.
    pub fn passed(&self) -> bool {
        !self.truncated && self.counterexample.is_some() == self.expect_violation
    }
}

/// State cap of [`run_suite`] (an explicit bound; hitting it fails the line).
pub const SUITE_CAP: usize = 8_000_000;

/// Runs the §6.1 suite: the base model (2 and 3 switches, safety and
/// liveness), the extended model (2 and 3 switches) and every mutant, which
/// must fail. `thorough` uses the larger bounds of [`extended::ExtConfig::
/// thorough`] (a duplication; about 5.3 M states for the largest, with
/// the join rule and boot quiet period; the whole suite about 160 s in a
/// release build) for the CLI; the quick bounds are the
/// ones `cargo test` runs.
pub fn run_suite(thorough: bool) -> Vec<SuiteLine> {
    use base::{BaseConfig, BaseModel};
    use extended::{ExtConfig, ExtModel, Mutant};
    let mut lines = Vec::new();
    for n in [2, 3] {
        let m = BaseModel::new(BaseConfig {
            switches: n,
            ..BaseConfig::default()
        });
        let r = check_liveness(&m, SUITE_CAP);
        lines.push(SuiteLine {
            name: format!("base, {n} switches, {:?}", m.cfg),
            expect_violation: false,
            states: r.states,
            counterexample: r.counterexample.map(|c| c.render()),
            truncated: r.truncated,
        });
    }
    for n in [2, 3] {
        let cfg = if thorough {
            ExtConfig::thorough(n)
        } else {
            ExtConfig::small(n)
        };
        let r = check(&ExtModel::new(cfg), SUITE_CAP);
        lines.push(SuiteLine {
            name: format!("extended, {n} switches, {cfg:?}"),
            expect_violation: false,
            states: r.states,
            counterexample: r.counterexample.map(|c| c.render()),
            truncated: r.truncated,
        });
    }
    for mutant in [
        Mutant::NoOwnerCheck,
        Mutant::NoFence,
        Mutant::NoHeldRecheck,
        Mutant::InstallStaleGrant,
        Mutant::AcceptPreBootAcks,
        Mutant::NoBootQuiet,
    ] {
        let mut cfg = ExtConfig {
            mutant,
            ..ExtConfig::mutant_bounds(mutant)
        };
        if mutant == Mutant::NoHeldRecheck {
            cfg.reads = 0b10;
        }
        let r = check(&ExtModel::new(cfg), SUITE_CAP);
        lines.push(SuiteLine {
            name: format!("mutant {mutant:?}, {cfg:?}"),
            expect_violation: true,
            states: r.states,
            counterexample: r.counterexample.map(|c| c.render()),
            truncated: r.truncated,
        });
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::base::{BaseConfig, BaseModel};
    use super::extended::{ExtConfig, ExtModel, Mutant};
    use super::*;

    const CAP: usize = 2_000_000;

    #[test]
    fn base_model_holds_for_2_and_3_switches() {
        for n in [2, 3] {
            let m = BaseModel::new(BaseConfig {
                switches: n,
                ..BaseConfig::default()
            });
            let r = check_liveness(&m, CAP);
            println!(
                "base, {n} switches: {} states, {} transitions, depth {}",
                r.states, r.transitions, r.depth
            );
            assert!(!r.truncated);
            if let Some(c) = &r.counterexample {
                panic!("{}", c.render());
            }
        }
    }

    #[test]
    fn liveness_search_finds_a_fair_lasso_when_the_timer_is_unfair() {
        let m = BaseModel::new(BaseConfig {
            switches: 2,
            unfair_timer: true,
            ..BaseConfig::default()
        });
        let r = check_liveness(&m, CAP);
        let c = r
            .counterexample
            .expect("an owner that never times out starves the other switch");
        assert!(c.property.starts_with("Liveness"), "{}", c.property);
        assert!(!c.cycle.is_empty());
    }

    #[test]
    fn extended_model_holds_for_2_and_3_switches() {
        for n in [2, 3] {
            let m = ExtModel::new(ExtConfig::small(n));
            let r = check(&m, CAP);
            println!(
                "extended, {n} switches: {} states, {} transitions, depth {}",
                r.states, r.transitions, r.depth
            );
            assert!(!r.truncated);
            if let Some(c) = &r.counterexample {
                panic!("{}", c.render());
            }
        }
    }

    fn mutant_fails(mutant: Mutant, reads: u8, property: &str) {
        let cfg = ExtConfig {
            mutant,
            reads,
            ..ExtConfig::mutant_bounds(mutant)
        };
        let r = check(&ExtModel::new(cfg), CAP);
        let c = r
            .counterexample
            .unwrap_or_else(|| panic!("{mutant:?} must fail ({} states)", r.states));
        println!("{mutant:?}: {} states\n{}", r.states, c.render());
        assert!(
            c.property.starts_with(property),
            "{mutant:?}: {}",
            c.property
        );
    }

    #[test]
    fn renew_without_owner_check_lets_an_ex_owner_steal_the_lease() {
        mutant_fails(Mutant::NoOwnerCheck, 0, "LeaseNesting");
    }

    #[test]
    fn grants_without_fencing_reuse_sequence_numbers() {
        mutant_fails(Mutant::NoFence, 0, "WriteResponseSeq");
    }

    #[test]
    fn held_reads_released_without_recheck_leak_undurable_state() {
        mutant_fails(Mutant::NoHeldRecheck, 0b10, "DurabilityBeforeRelease");
    }

    #[test]
    fn installing_an_overtaken_grant_rewinds_sequence_numbers() {
        // Shortest trace: a second NEW of the owner joins its grant; the
        // joined ack, installed again, rewinds seq_issued under writes
        // already sent, so a new write reuses seq 1 and is acked as the
        // old one's duplicate.
        mutant_fails(Mutant::InstallStaleGrant, 0, "DurabilityBeforeRelease");
    }

    #[test]
    fn a_restart_without_a_quiet_period_joins_the_old_incarnations_grant() {
        mutant_fails(Mutant::NoBootQuiet, 0, "DurabilityBeforeRelease");
    }

    /// The switch's `skip_fence` mutant is not a safety bug: the store's
    /// fence rejects every write it issues below the base (and every read
    /// it buffers behind one), so it only loses liveness. Exhaustive at
    /// these bounds (a write then a read, no crashes: 80 k states); with
    /// crashes it held over all 727 k states of `ExtConfig::small(2)`, and
    /// with a read, three messages and a duplication over the first 6 M
    /// (release build).
    #[test]
    fn a_switch_that_skips_the_fence_stays_safe_behind_the_stores_fence() {
        let cfg = ExtConfig {
            mutant: Mutant::SkipFence,
            reads: 0b10,
            crashes: false,
            ..ExtConfig::small(2)
        };
        let r = check(&ExtModel::new(cfg), CAP);
        println!("SkipFence: {} states", r.states);
        assert!(!r.truncated);
        if let Some(c) = &r.counterexample {
            panic!("{}", c.render());
        }
    }
    #[test]
    fn acks_from_before_a_restart_must_be_ignored() {
        mutant_fails(Mutant::AcceptPreBootAcks, 0, "DurabilityBeforeRelease");
    }
}

#[cfg(test)]
mod thorough {
    /// The CLI's larger bounds; run with
    /// `cargo test --release -p inca-redplane thorough -- --ignored`.
    #[test]
    #[ignore = "minutes and ~2 GB; run in release"]
    fn thorough_suite_passes() {
        for line in super::run_suite(true) {
            println!("{}: {} states", line.name, line.states);
            assert!(line.passed(), "{line:?}");
        }
    }
}
