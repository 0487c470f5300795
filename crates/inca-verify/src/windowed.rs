//! Linearizability checked window by window, so that a long history costs
//! the sum of its windows' searches instead of one search over all of it.
//!
//! A **window** ends where the history is quiescent: every operation with a
//! response that was invoked so far has responded before the next one is
//! invoked. Real time then orders every answered operation of a window
//! before every operation of the next, so a witness order of the whole
//! history is a witness order of each window in turn, each starting from
//! where the previous one left off — but "where" is a set: the search of a
//! window records every **frontier** it can end in, a spec state together
//! with the operations that never responded and were not placed (they may
//! still take effect later, and are candidates in every later window).
//! The next window starts from each frontier.
//!
//! Four reductions keep the search and that set small without changing
//! the answer: unanswered ops whose inputs share an effect class
//! ([`Spec::effect_class`]) are interchangeable, so only the earliest
//! unplaced one of a class is tried and frontiers count them by class; an answered op that may go next, explains its output and
//! leaves the state as it is (a read) is placed at once, without branching
//! (a partial-order reduction); a lost op is not placed where it would
//! leave the state as it is (it stays carried, which allows strictly more
//! later); and of two frontiers with one state, the one carrying a subset
//! of the other's lost ops is dropped.
//!
//! This is exact: [`check_windowed`] answers as [`crate::linearizability::check`]
//! does on every history both decide (a property test below compares them),
//! and stops with [`Verdict::Inconclusive`] when a window's search runs out
//! of its node budget or the frontiers of one cut exceed `max_frontier`
//! (histories with many lost writes can make them multiply).

use std::collections::{HashMap, HashSet};

use crate::linearizability::{Operation, Spec, Verdict};

/// Where a window may end: a spec state and the lost ops (global indices)
/// not placed.
type Frontier<S> = (S, Vec<usize>);

/// A default bound on the frontiers kept at one cut.
pub const MAX_FRONTIER: usize = 4_096;

fn has(set: &[u64], i: usize) -> bool {
    set[i / 64] >> (i % 64) & 1 == 1
}

fn put(set: &mut [u64], i: usize) {
    set[i / 64] |= 1 << (i % 64);
}

/// What [`check_windowed`] found, with how much of the history it judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Windowed {
    /// The verdict over the whole history.
    pub verdict: Verdict,
    /// Windows searched (up to the first that failed or gave up).
    pub windows: usize,
    /// The largest window, in operations.
    pub largest: usize,
}

/// Splits `ops` (indices in invocation order) into windows: a new window
/// starts at an op invoked after every answered op before it responded.
fn windows<P: Operation>(ops: &[P], order: &[usize]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut reach: Option<u64> = None;
    for &i in order {
        let starts = match reach {
            None => true,
            Some(r) => ops[i].invoked() > r,
        };
        if starts {
            out.push(Vec::new());
            reach = None;
        }
        if let Some((t, _)) = ops[i].response() {
            reach = Some(reach.map_or(t, |r| r.max(t)));
        }
        if let Some(w) = out.last_mut() {
            w.push(i);
        }
    }
    out
}

/// Checks `ops` against `m` window by window (see the module docs), with
/// at most `budget` search nodes per window and `max_frontier` frontiers
/// per cut.
pub fn check_windowed<M, P>(m: &M, ops: &[P], budget: usize, max_frontier: usize) -> Windowed
where
    M: Spec,
    P: Operation<Input = M::Input, Output = M::Output>,
{
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_key(|&i| (ops[i].invoked(), i));
    let parts = windows(ops, &order);
    let mut report = Windowed {
        verdict: Verdict::Linearizable,
        windows: 0,
        largest: 0,
    };
    // A frontier: the state, and the lost ops (global indices) not placed.
    let mut frontiers: Vec<Frontier<M::State>> = vec![(m.init(), Vec::new())];
    for part in parts {
        report.windows += 1;
        report.largest = report.largest.max(part.len());
        match search_window(m, ops, &part, &frontiers, budget, max_frontier) {
            Ok(next) => frontiers = next,
            Err(v) => {
                report.verdict = v;
                return report;
            }
        }
    }
    report
}

/// Searches one window from every frontier; the frontiers it can end in.
fn search_window<M, P>(
    m: &M,
    ops: &[P],
    part: &[usize],
    from: &[Frontier<M::State>],
    budget: usize,
    max_frontier: usize,
) -> Result<Vec<Frontier<M::State>>, Verdict>
where
    M: Spec,
    P: Operation<Input = M::Input, Output = M::Output>,
{
    // Local ops: every carried lost op of any frontier, then the window's.
    let mut local: Vec<usize> = Vec::new();
    for (_, lost) in from {
        for &g in lost {
            if !local.contains(&g) {
                local.push(g);
            }
        }
    }
    local.sort_by_key(|&g| (ops[g].invoked(), g));
    local.extend_from_slice(part);
    // Unanswered ops of one effect class are interchangeable: local order
    // is invocation order, and whenever a later one may go an earlier one
    // may too (and still may wherever the later one would have gone), so
    // only the first unplaced one of a class is tried. Frontiers compare
    // carried ops by class counts.
    let class: Vec<Option<u64>> = local
        .iter()
        .map(|&g| {
            ops[g]
                .response()
                .is_none()
                .then(|| m.effect_class(ops[g].input()))
                .flatten()
        })
        .collect();
    let n = local.len();
    let words = n.div_ceil(64).max(1);
    let must: Vec<usize> = (0..n)
        .filter(|&l| ops[local[l]].response().is_some())
        .collect();
    let mut seen: HashSet<(Vec<u64>, M::State)> = HashSet::new();
    let mut ends: HashMap<(M::State, Vec<Slot>), Vec<usize>> = HashMap::new();
    let mut nodes = 0usize;
    let mut deepest: (usize, Vec<u64>) = (0, vec![0u64; words]);
    for (state, lost) in from {
        // Lost ops this frontier already placed (or never carried) are used.
        let mut set = vec![0u64; words];
        for (l, g) in local.iter().enumerate().take(n - part.len()) {
            if !lost.contains(g) {
                put(&mut set, l);
            }
        }
        let mut stack = vec![(set, state.clone())];
        while let Some((set, state)) = stack.pop() {
            if must.iter().all(|&l| has(&set, l)) {
                let carried: Vec<usize> = (0..n)
                    .filter(|&l| !has(&set, l))
                    .map(|l| local[l])
                    .collect();
                let key = slots(m, ops, &carried);
                ends.entry((state, key)).or_insert(carried);
                if ends.len() > max_frontier {
                    return Err(Verdict::Inconclusive(format!(
                        "more than {max_frontier} frontiers at one cut"
                    )));
                }
                continue;
            }
            if !seen.insert((set.clone(), state.clone())) {
                continue;
            }
            nodes += 1;
            if nodes > budget {
                return Err(Verdict::Inconclusive(format!(
                    "a window's linearizability search ran out of its {budget}-node budget"
                )));
            }
            let count: usize = set.iter().map(|w| w.count_ones() as usize).sum();
            if count > deepest.0 {
                deepest = (count, set.clone());
            }
            let horizon = (0..n)
                .filter(|&l| !has(&set, l))
                .filter_map(|l| ops[local[l]].response().map(|(t, _)| t))
                .min()
                .unwrap_or(u64::MAX);
            // An answered op that may go now, leaves the state as it is and
            // explains its output goes first, alone: any order that places
            // it later can move it here (nothing it must follow is pending,
            // moving it earlier only helps what must follow it, and the
            // states of the others do not change).
            let forced = (0..n).find(|&l| {
                let op = &ops[local[l]];
                !has(&set, l)
                    && op.invoked() <= horizon
                    && op.response().is_some_and(|(_, rec)| {
                        let (out, next) = m.step(&state, op.input());
                        *rec == out && next == state
                    })
            });
            if let Some(l) = forced {
                let mut s2 = set.clone();
                put(&mut s2, l);
                stack.push((s2, state));
                continue;
            }
            for l in (0..n).rev() {
                let op = &ops[local[l]];
                if has(&set, l) || op.invoked() > horizon {
                    continue;
                }
                if class[l].is_some() && (0..l).any(|k| !has(&set, k) && class[k] == class[l]) {
                    continue;
                }
                let (out, next) = m.step(&state, op.input());
                match op.response() {
                    Some((_, rec)) if *rec != out => continue,
                    Some(_) => {}
                    // A lost op that would not change the state here is
                    // better left carried: placing it only narrows what
                    // later windows may do with it.
                    None if next == state => continue,
                    None => {}
                }
                let mut s2 = set.clone();
                put(&mut s2, l);
                stack.push((s2, next));
            }
        }
    }
    if ends.is_empty() {
        let stuck: Vec<u64> = must
            .iter()
            .filter(|&&l| !has(&deepest.1, l))
            .map(|&l| ops[local[l]].id())
            .collect();
        return Err(Verdict::Violation {
            reason: format!(
                "no linearization of the window of {} ops: at best {} placed; these outputs could never be explained",
                part.len(),
                deepest.0
            ),
            ops: stuck,
        });
    }
    Ok(undominated(ends))
}

/// A carried op as frontiers compare them: its effect class, or itself.
type Slot = (bool, u64);

/// The sorted slots of carried ops `carried` (global indices).
fn slots<M: Spec, P: Operation<Input = M::Input>>(
    m: &M,
    ops: &[P],
    carried: &[usize],
) -> Vec<Slot> {
    let mut v: Vec<Slot> = carried
        .iter()
        .map(|&g| match m.effect_class(ops[g].input()) {
            Some(c) => (true, c),
            None => (false, g as u64),
        })
        .collect();
    v.sort_unstable();
    v
}

/// Whether sorted multiset `a` is strictly inside sorted multiset `b`.
fn strictly_inside(a: &[Slot], b: &[Slot]) -> bool {
    if a.len() >= b.len() {
        return false;
    }
    let mut j = 0;
    for x in a {
        while j < b.len() && b[j] < *x {
            j += 1;
        }
        if j == b.len() || b[j] != *x {
            return false;
        }
        j += 1;
    }
    true
}

/// Drops every frontier whose carried ops are strictly inside another's
/// with the same state: whatever it allows, the other allows too.
fn undominated<S: Eq + std::hash::Hash + Clone>(
    ends: HashMap<(S, Vec<Slot>), Vec<usize>>,
) -> Vec<Frontier<S>> {
    type Keyed<S> = ((S, Vec<Slot>), Vec<usize>);
    let all: Vec<Keyed<S>> = ends.into_iter().collect();
    all.iter()
        .filter(|((s, k), _)| {
            !all.iter()
                .any(|((s2, k2), _)| s2 == s && strictly_inside(k, k2))
        })
        .map(|((s, _), carried)| (s.clone(), carried.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linearizability::{check, Call, BUDGET};
    use proptest::prelude::*;

    /// A counter: `Some(d)` adds d and returns the new value; `None` reads.
    struct Counter;

    impl Spec for Counter {
        type State = u32;
        type Input = Option<u32>;
        type Output = u32;
        fn init(&self) -> u32 {
            0
        }
        fn step(&self, s: &u32, op: &Option<u32>) -> (u32, u32) {
            let n = s + op.unwrap_or(0);
            (n, n)
        }
        /// Adds of one amount take every state alike.
        fn effect_class(&self, op: &Option<u32>) -> Option<u64> {
            Some(u64::from(op.unwrap_or(0)))
        }
    }

    type Op = Call<Option<u32>, u32>;

    fn op(id: u64, invoked: u64, done: Option<(u64, u32)>, add: Option<u32>) -> Op {
        Call {
            id,
            invoked,
            input: add,
            response: done,
        }
    }

    #[test]
    fn quiescent_points_cut_windows() {
        // Two overlapping adds, a gap, a read, a gap, two more.
        let h = vec![
            op(1, 0, Some((10, 1)), Some(1)),
            op(2, 5, Some((12, 3)), Some(2)),
            op(3, 20, Some((25, 3)), None),
            op(4, 30, Some((40, 7)), Some(4)),
            op(5, 35, Some((45, 12)), Some(5)),
        ];
        let w = check_windowed(&Counter, &h, BUDGET, MAX_FRONTIER);
        assert_eq!(w.verdict, Verdict::Linearizable);
        assert_eq!((w.windows, w.largest), (3, 2));
    }

    #[test]
    fn a_lost_add_carries_across_windows_until_seen() {
        let lost = op(1, 0, None, Some(5));
        let seen_late = vec![
            lost.clone(),
            op(2, 10, Some((20, 0)), None),
            op(3, 30, Some((40, 5)), None),
        ];
        assert!(check_windowed(&Counter, &seen_late, BUDGET, MAX_FRONTIER)
            .verdict
            .is_ok());
        let unseen = vec![
            lost,
            op(2, 10, Some((20, 5)), None),
            op(3, 30, Some((40, 0)), None),
        ];
        let w = check_windowed(&Counter, &unseen, BUDGET, MAX_FRONTIER);
        assert!(w.verdict.is_violation(), "{w:?}");
    }

    proptest! {
        /// On random counter histories (overlapping, some responses lost,
        /// some corrupted) the windowed check, with its effect classes,
        /// answers as the whole-history search does.
        #[test]
        fn agrees_with_the_whole_history_search(
            spec in proptest::collection::vec(
                (any::<bool>(), 1u32..3, 0u64..40, 0u64..40, 0u8..6), 1..14),
        ) {
            let mut state = 0u32;
            let mut h: Vec<Op> = Vec::new();
            for (i, (is_add, d, early, late, fate)) in spec.iter().enumerate() {
                let at = i as u64 * 30;
                let input = is_add.then_some(*d);
                let (out, next) = Counter.step(&state, &input);
                state = next;
                let response = match fate {
                    0 => None,
                    1 => Some((at + late, out + 1)),
                    _ => Some((at + late, out)),
                };
                h.push(op(i as u64, at.saturating_sub(*early), response, input));
            }
            let whole = check(&Counter, &h, BUDGET);
            let windowed = check_windowed(&Counter, &h, BUDGET, MAX_FRONTIER).verdict;
            prop_assert_eq!(whole.is_ok(), windowed.is_ok(), "{:?} vs {:?}", whole, windowed);
            prop_assert_eq!(whole.is_violation(), windowed.is_violation());
        }
    }
}
