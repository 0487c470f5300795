//! Linearizability of a recorded history against a sequential
//! specification.
//!
//! A history is linearizable iff some order S of its operations (a)
//! replays the [`Spec`] to every recorded response, (b) respects real time
//! (op x responded before op y was invoked ⇒ x before y in S), and (c) may
//! leave out, or place anywhere after their invocation, operations that
//! never responded (lost, or still pending when the run ended).
//!
//! [`check`] is the Wing–Gong search with memoisation on (linearised set,
//! spec state), as in Knossos and Porcupine. Exponential in the worst case,
//! so it has a node budget and answers [`Verdict::Inconclusive`] when it
//! runs out; fine for a few hundred operations per key. A history is
//! anything that gives its operations through [`Operation`]; [`Call`] is a
//! plain recorded call for systems that need nothing more (one key's reads
//! and writes across several switches, say).

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;

/// A sequential reference model of one object (a key, a flow, a register).
pub trait Spec {
    /// The object's state.
    type State: Clone + Eq + Hash + Debug;
    /// One operation's input.
    type Input: Debug;
    /// What one operation returns.
    type Output: PartialEq + Debug;
    /// The state before any operation.
    fn init(&self) -> Self::State;
    /// One step: the output and the next state.
    fn step(&self, state: &Self::State, input: &Self::Input) -> (Self::Output, Self::State);
    /// Inputs that take every state to the same next state may share a
    /// class (Sync-Counter's packets all add one); the windowed checker then
    /// treats unanswered operations of one class, invoked before a window,
    /// as interchangeable. `None` (the default): a class of its own.
    fn effect_class(&self, input: &Self::Input) -> Option<u64> {
        let _ = input;
        None
    }
}

/// One operation of a recorded history, as the checker sees it.
pub trait Operation {
    /// Its input.
    type Input;
    /// Its output.
    type Output;
    /// Its identity, for reports.
    fn id(&self) -> u64;
    /// When it was invoked, ns.
    fn invoked(&self) -> u64;
    /// What it was invoked with.
    fn input(&self) -> &Self::Input;
    /// When it responded and with what; `None` if it never did.
    fn response(&self) -> Option<(u64, &Self::Output)>;
}

/// A recorded call: the plain [`Operation`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call<I, O> {
    /// Identity, for reports.
    pub id: u64,
    /// Invocation time, ns.
    pub invoked: u64,
    /// The input.
    pub input: I,
    /// Response time and output; `None`: never responded.
    pub response: Option<(u64, O)>,
}

impl<I, O> Operation for Call<I, O> {
    type Input = I;
    type Output = O;
    fn id(&self) -> u64 {
        self.id
    }
    fn invoked(&self) -> u64 {
        self.invoked
    }
    fn input(&self) -> &I {
        &self.input
    }
    fn response(&self) -> Option<(u64, &O)> {
        self.response.as_ref().map(|(t, o)| (*t, o))
    }
}

/// A checker's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A witness order exists.
    Linearizable,
    /// Not linearizable, with the reason and the ids of the ops involved.
    Violation { reason: String, ops: Vec<u64> },
    /// The checker could not decide (budget, or missing information).
    Inconclusive(String),
}

impl Verdict {
    /// True for [`Verdict::Linearizable`].
    pub fn is_ok(&self) -> bool {
        matches!(self, Verdict::Linearizable)
    }

    /// True for [`Verdict::Violation`].
    pub fn is_violation(&self) -> bool {
        matches!(self, Verdict::Violation { .. })
    }
}

/// A default node budget for [`check`].
pub const BUDGET: usize = 2_000_000;

/// The set of operations linearised so far, one bit per operation.
type Placed = Vec<u64>;

fn has(set: &[u64], i: usize) -> bool {
    set[i / 64] >> (i % 64) & 1 == 1
}

/// Wing–Gong search with memoisation on (linearised set, state).
///
/// An op can go next iff no other pending op responded before it was
/// invoked. Ops with a response must all be linearised and reproduce it;
/// ops without one may be linearised (any output) or left out. Explores at
/// most `budget` distinct nodes.
pub fn check<M, P>(m: &M, ops: &[P], budget: usize) -> Verdict
where
    M: Spec,
    P: Operation<Input = M::Input, Output = M::Output>,
{
    let n = ops.len();
    let words = n.div_ceil(64).max(1);
    let must: Vec<usize> = (0..n).filter(|&i| ops[i].response().is_some()).collect();
    if must.is_empty() {
        return Verdict::Linearizable;
    }
    // Candidates in invocation order, so the minimality test is a prefix scan.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (ops[i].invoked(), i));
    let done = |set: &[u64]| must.iter().all(|&i| has(set, i));
    let mut seen: HashSet<(Placed, M::State)> = HashSet::new();
    let mut stack: Vec<(Placed, M::State)> = vec![(vec![0u64; words], m.init())];
    let mut nodes = 0usize;
    let mut deepest: (usize, Placed) = (0, vec![0u64; words]);
    while let Some((set, state)) = stack.pop() {
        if done(&set) {
            return Verdict::Linearizable;
        }
        if !seen.insert((set.clone(), state.clone())) {
            continue;
        }
        nodes += 1;
        if nodes > budget {
            return Verdict::Inconclusive(format!(
                "the linearizability search ran out of its {budget}-node budget"
            ));
        }
        let count: usize = set.iter().map(|w| w.count_ones() as usize).sum();
        if count > deepest.0 {
            deepest = (count, set.clone());
        }
        // The earliest response among pending ops bounds which ops may go next.
        let horizon = (0..n)
            .filter(|&i| !has(&set, i))
            .filter_map(|i| ops[i].response().map(|(t, _)| t))
            .min()
            .unwrap_or(u64::MAX);
        for &c in order.iter().rev() {
            if has(&set, c) || ops[c].invoked() > horizon {
                continue;
            }
            let (out, next) = m.step(&state, ops[c].input());
            if let Some((_, rec)) = ops[c].response() {
                if *rec != out {
                    continue;
                }
            }
            let mut s2 = set.clone();
            s2[c / 64] |= 1 << (c % 64);
            stack.push((s2, next));
        }
    }
    let stuck: Vec<u64> = must
        .iter()
        .filter(|&&i| !has(&deepest.1, i))
        .map(|&i| ops[i].id())
        .collect();
    Verdict::Violation {
        reason: format!(
            "no linearization: at best {} ops placed; these outputs could never be explained",
            deepest.0
        ),
        ops: stuck,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A read/write register.
    struct Register;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum RegOp {
        Write(u32),
        Read,
    }

    impl Spec for Register {
        type State = u32;
        type Input = RegOp;
        /// A write returns nothing (`None`), a read the value.
        type Output = Option<u32>;
        fn init(&self) -> u32 {
            0
        }
        fn step(&self, s: &u32, op: &RegOp) -> (Option<u32>, u32) {
            match op {
                RegOp::Write(v) => (None, *v),
                RegOp::Read => (Some(*s), *s),
            }
        }
    }

    type Reg = Call<RegOp, Option<u32>>;

    fn write(id: u64, invoked: u64, done: Option<u64>, v: u32) -> Reg {
        Call {
            id,
            invoked,
            input: RegOp::Write(v),
            response: done.map(|t| (t, None)),
        }
    }

    fn read(id: u64, invoked: u64, done: u64, v: u32) -> Reg {
        Call {
            id,
            invoked,
            input: RegOp::Read,
            response: Some((done, Some(v))),
        }
    }

    #[test]
    fn sequential_register_history_is_linearizable() {
        let h = vec![
            write(1, 0, Some(10), 5),
            read(2, 20, 30, 5),
            write(3, 40, Some(50), 7),
            read(4, 60, 70, 7),
        ];
        assert_eq!(check(&Register, &h, BUDGET), Verdict::Linearizable);
    }

    #[test]
    fn a_read_concurrent_with_a_write_may_see_either_value() {
        for seen in [0, 5] {
            let h = vec![write(1, 0, Some(100), 5), read(2, 10, 20, seen)];
            assert!(check(&Register, &h, BUDGET).is_ok(), "read {seen}");
        }
    }

    #[test]
    fn a_stale_read_after_a_completed_write_is_rejected() {
        // The write of 5 completed at 10; a read invoked at 20 returns 0.
        let h = vec![write(1, 0, Some(10), 5), read(2, 20, 30, 0)];
        match check(&Register, &h, BUDGET) {
            Verdict::Violation { ops, .. } => assert_eq!(ops, vec![2]),
            v => panic!("stale read accepted: {v:?}"),
        }
    }

    #[test]
    fn reads_that_see_a_value_go_back_in_time_are_rejected() {
        // With the writes sequential (5 then 7), reads seeing 7 and then 5
        // cannot be explained: 5 was overwritten before 7 was read.
        let h = vec![
            write(1, 0, Some(10), 5),
            write(2, 20, Some(30), 7),
            read(3, 25, 40, 7),
            read(4, 50, 60, 5),
        ];
        assert!(check(&Register, &h, BUDGET).is_violation());
        // With the writes concurrent, 7 then 5 is the order 7, 5.
        let h = vec![
            write(1, 0, Some(100), 5),
            write(2, 0, Some(100), 7),
            read(3, 10, 20, 7),
            read(4, 30, 40, 5),
        ];
        assert!(check(&Register, &h, BUDGET).is_ok());
    }

    #[test]
    fn a_write_that_never_responded_may_or_may_not_have_happened() {
        let lost = write(1, 0, None, 5);
        assert!(check(&Register, &[lost.clone(), read(2, 50, 60, 5)], BUDGET).is_ok());
        assert!(check(&Register, &[lost.clone(), read(2, 50, 60, 0)], BUDGET).is_ok());
        // ... but once seen it cannot be unseen.
        let h = vec![lost, read(2, 50, 60, 5), read(3, 70, 80, 0)];
        assert!(check(&Register, &h, BUDGET).is_violation());
    }

    #[test]
    fn the_budget_is_reported() {
        let h: Vec<Reg> = (0..12)
            .map(|i| write(i, 0, Some(1_000), i as u32))
            .chain([read(99, 2_000, 2_001, 1_000)])
            .collect();
        assert!(matches!(check(&Register, &h, 50), Verdict::Inconclusive(_)));
    }

    proptest! {
        /// Any history produced by running the register sequentially, with
        /// invocation times stretched so that ops overlap, is linearizable;
        /// corrupting one read's value to one never written makes it not.
        #[test]
        fn sequential_runs_pass_and_corrupted_reads_fail(
            ops in proptest::collection::vec((any::<bool>(), 1u32..5, 0u64..30), 1..12),
            corrupt in any::<prop::sample::Index>(),
        ) {
            let mut state = 0u32;
            let mut h: Vec<Reg> = Vec::new();
            for (i, (is_write, v, slack)) in ops.iter().enumerate() {
                let at = i as u64 * 100;
                let invoked = at.saturating_sub(*slack);
                let op = if *is_write { RegOp::Write(*v) } else { RegOp::Read };
                let (out, next) = Register.step(&state, &op);
                state = next;
                h.push(Call { id: i as u64, invoked, input: op, response: Some((at + slack, out)) });
            }
            prop_assert!(check(&Register, &h, BUDGET).is_ok());
            let reads: Vec<usize> =
                (0..h.len()).filter(|&i| h[i].input == RegOp::Read).collect();
            if !reads.is_empty() {
                let i = reads[corrupt.index(reads.len())];
                h[i].response = Some((h[i].response.unwrap().0, Some(99)));
                prop_assert!(check(&Register, &h, BUDGET).is_violation());
            }
        }
    }
}
