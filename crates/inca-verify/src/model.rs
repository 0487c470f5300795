//! Explicit-state model checking, in the spirit of TLC.
//!
//! [`check`] enumerates every reachable state of a [`Model`] breadth-first
//! (up to `max_states`, an explicit bound: hitting it marks the report
//! truncated), checks its state invariants and its transition assertions,
//! and returns the shortest counterexample trace when one fails.
//! [`check_liveness`] adds a fairness-constrained lasso search (Tarjan SCCs
//! over the "still waiting" states, keeping only components in which every
//! weakly fair action is either taken or disabled somewhere), which is
//! exact for weak fairness.
//!
//! The models are the systems' (RedPlane's lease protocol in
//! `inca_redplane::verify::model`); the tests here check a toy.

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
    /// Number of weakly fair action classes (at most 64: the search keeps
    /// the classes of a component in one word).
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
    // A model with more classes is a programmer error that would otherwise
    // shift bits out of the word and judge fairness wrongly, silently.
    assert!(
        m.fair_classes() <= 64,
        "a liveness model has at most 64 fair classes, this one {}",
        m.fair_classes()
    );
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Two processes each add one to a shared register. With `atomic`, in
    /// one step; without, as a read into a local then a write of local + 1,
    /// which loses an update when both read before either writes.
    struct Increments {
        atomic: bool,
    }

    /// (program counters, locals, shared register); pc 0 = start, 1 = read
    /// done, 2 = finished.
    type Regs = ([u8; 2], [u8; 2], u8);

    impl Model for Increments {
        type State = Regs;
        type Label = &'static str;

        fn init(&self) -> Vec<Regs> {
            vec![([0, 0], [0, 0], 0)]
        }

        fn next(&self, s: &Regs, out: &mut Vec<Step<Regs, &'static str>>) {
            const READ: [&str; 2] = ["read 0", "read 1"];
            const WRITE: [&str; 2] = ["write 0", "write 1"];
            const ADD: [&str; 2] = ["add 0", "add 1"];
            for p in 0..2 {
                let (mut pc, mut local, mut shared) = *s;
                let label = match (pc[p], self.atomic) {
                    (0, true) => {
                        shared += 1;
                        pc[p] = 2;
                        ADD[p]
                    }
                    (0, false) => {
                        local[p] = shared;
                        pc[p] = 1;
                        READ[p]
                    }
                    (1, _) => {
                        shared = local[p] + 1;
                        pc[p] = 2;
                        WRITE[p]
                    }
                    _ => continue,
                };
                out.push(Step {
                    label,
                    next: (pc, local, shared),
                    violation: None,
                });
            }
        }

        fn invariants(&self, (pc, _, shared): &Regs) -> Vec<String> {
            if *pc == [2, 2] && *shared != 2 {
                vec![format!(
                    "BothCounted: both finished but the register holds {shared}"
                )]
            } else {
                Vec::new()
            }
        }
    }

    #[test]
    fn atomic_increments_hold_over_every_state() {
        let r = check(&Increments { atomic: true }, 1_000);
        assert!(r.counterexample.is_none());
        assert!(!r.truncated);
        // (0,0,0) (2,0,1) (0,2,1) (2,2,2).
        assert_eq!(r.states, 4);
        assert_eq!(r.depth, 2);
    }

    #[test]
    fn a_lost_update_is_found_with_its_shortest_trace() {
        let r = check(&Increments { atomic: false }, 1_000);
        let c = r.counterexample.expect("the lost update is reachable");
        assert!(c.property.starts_with("BothCounted"), "{}", c.property);
        assert_eq!(c.init, ([0, 0], [0, 0], 0));
        // Shortest: both read 0, then both write 1.
        let labels: Vec<&str> = c.steps.iter().map(|(l, _)| *l).collect();
        assert_eq!(labels.len(), 4);
        assert_eq!(
            labels[..2].iter().filter(|l| l.starts_with("read")).count(),
            2
        );
        assert_eq!(c.steps.last().map(|(_, s)| *s), Some(([2, 2], [0, 0], 1)));
        assert!(c.render().contains("violated: BothCounted"));
    }

    #[test]
    fn the_state_bound_truncates_exploration() {
        let r = check(&Increments { atomic: false }, 3);
        assert!(r.truncated);
        assert!(r.states <= 3);
    }

    /// A waiter that needs a flag set; the flag setter may also idle
    /// forever. Weak fairness on `set` is what makes the waiter finish.
    struct Flag {
        fair_set: bool,
    }

    impl Model for Flag {
        type State = bool;
        type Label = &'static str;

        fn init(&self) -> Vec<bool> {
            vec![false]
        }

        fn next(&self, s: &bool, out: &mut Vec<Step<bool, &'static str>>) {
            out.push(Step {
                label: "idle",
                next: *s,
                violation: None,
            });
            if !*s {
                out.push(Step {
                    label: "set",
                    next: true,
                    violation: None,
                });
            }
        }

        fn invariants(&self, _: &bool) -> Vec<String> {
            Vec::new()
        }
    }

    impl Liveness for Flag {
        fn fair_classes(&self) -> usize {
            usize::from(self.fair_set)
        }

        fn fair_class(&self, l: &&'static str) -> Option<usize> {
            (self.fair_set && *l == "set").then_some(0)
        }

        fn obligations(&self) -> usize {
            1
        }

        fn waiting(&self, _: usize, s: &bool) -> bool {
            !*s
        }

        fn obligation_name(&self, _: usize) -> String {
            "FlagEventuallySet".to_string()
        }
    }

    #[test]
    fn weak_fairness_rules_out_idling_forever() {
        let r = check_liveness(&Flag { fair_set: true }, 100);
        assert!(r.counterexample.is_none());
        assert_eq!(r.states, 2);
    }

    #[test]
    fn without_fairness_the_idle_lasso_is_the_counterexample() {
        let r = check_liveness(&Flag { fair_set: false }, 100);
        let c = r.counterexample.expect("idling forever is allowed");
        assert_eq!(c.property, "FlagEventuallySet (fair cycle)");
        assert!(c.cycle.iter().all(|(l, s)| *l == "idle" && !*s));
        assert!(!c.cycle.is_empty());
    }
}
