//! Linearizability of recorded per-flow histories (spec §6.3).
//!
//! A flow is linearizable iff some order S of its inputs (a) replays the
//! app's pure reference step to every recorded output, (b) respects real
//! time (O_x before I_y ⇒ x before y), and (c) may leave out, or place
//! anywhere after their input, inputs that produced no output.
//!
//! - [`check_a`] — Checker A: the generic Wing–Gong search of
//!   [`inca_verify::linearizability::check`] over RedPlane's [`Op`]s.
//!   Exponential in the worst case, so it has a node budget and answers
//!   [`Verdict::Inconclusive`] when it runs out; fine for ≤ ~200 ops.
//! - [`check_b`] — Checker B: the O(n log n) witness checker. It builds S
//!   from the store's committed log and the versions the outputs observed,
//!   replays it, and checks real time with a sweep.
//! - [`oracles`] — the app oracles (Sync-Counter counts, mapping stability).
//!
//! Both checkers are generic over [`Spec`] (`inca_verify`'s sequential
//! specification; Checker B also needs [`DecodeState`]); [`AppSpec`]
//! adapts an app's byte-level [`crate::apps::SpecModel`].

pub mod oracles;

use std::collections::BTreeMap;

use inca_verify::linearizability::Operation;
pub use inca_verify::linearizability::{Spec, Verdict};

/// A [`Spec`] that can tell the state a committed store value encodes
/// (used by Checker B for durable writes whose output was lost).
pub trait DecodeState: Spec {
    /// The state `value` encodes, if the model can tell.
    fn decode(&self, _value: &[u8]) -> Option<Self::State> {
        None
    }
}

/// An app's byte-level reference model as a [`Spec`]: state = the flow's
/// value bytes, input = the frame, output = the packets from IPv4 on.
pub struct AppSpec<'a, A: crate::apps::SpecModel + ?Sized> {
    /// The app.
    pub app: &'a A,
    /// The value the store initialises the key with (`store_init`).
    pub initial: Vec<u8>,
}

impl<A: crate::apps::SpecModel + ?Sized> Spec for AppSpec<'_, A> {
    type State = Vec<u8>;
    type Input = Vec<u8>;
    type Output = Vec<Vec<u8>>;

    fn init(&self) -> Vec<u8> {
        self.initial.clone()
    }

    fn step(&self, state: &Vec<u8>, input: &Vec<u8>) -> (Vec<Vec<u8>>, Vec<u8>) {
        let (out, next) = self.app.spec_step(state, input);
        (out, next)
    }

    fn effect_class(&self, input: &Vec<u8>) -> Option<u64> {
        self.app.spec_effect_class(input)
    }
}

impl<A: crate::apps::SpecModel + ?Sized> DecodeState for AppSpec<'_, A> {
    fn decode(&self, value: &[u8]) -> Option<Vec<u8>> {
        Some(value.to_vec())
    }
}

/// A state version: (fence, seq) as tagged on outputs and in the store's
/// committed log. Ordered lexicographically, which is the commit order as
/// long as seqs do not wrap within one history [our choice: histories of a
/// campaign run stay far below 2^15 writes per key].
pub type Version = (u16, u16);

/// Whether an input writes the flow's state (the app's `classify`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Reads the state.
    Read,
    /// Writes the state.
    Write,
}

/// One operation of a flow's history.
#[derive(Clone, Debug)]
pub struct Op<I, O> {
    /// Packet identity (for reports).
    pub id: u64,
    /// Input time, ns.
    pub t_in: u64,
    /// The input.
    pub input: I,
    /// Read or write.
    pub kind: Kind,
    /// The released output: time, what was released, and the version it
    /// observed (for a write, the version it created). `None`: lost.
    pub output: Option<(u64, O, Version)>,
    /// For a write, the version the switch issued it under, when recorded
    /// (known even when its output was lost).
    pub issued: Option<Version>,
}

impl<I, O> Operation for Op<I, O> {
    type Input = I;
    type Output = O;
    fn id(&self) -> u64 {
        self.id
    }
    fn invoked(&self) -> u64 {
        self.t_in
    }
    fn input(&self) -> &I {
        &self.input
    }
    fn response(&self) -> Option<(u64, &O)> {
        self.output.as_ref().map(|(t, o, _)| (*t, o))
    }
}

/// One committed store update of the flow's key.
#[derive(Clone, Debug)]
pub struct Commit {
    /// Version after the update.
    pub version: Version,
    /// Value after the update.
    pub value: Vec<u8>,
    /// Commit time, ns.
    pub time: u64,
    /// True for a grant (fence advance, value unchanged), false for a write.
    pub grant: bool,
}

/// Default node budget of Checker A.
pub const A_BUDGET: usize = inca_verify::linearizability::BUDGET;

/// Checker A: Wing–Gong search with memoisation on (linearised set, state)
/// ([`inca_verify::linearizability::check`]).
///
/// An op can go next iff no other pending op with an output returned before
/// it was invoked. Ops with an output must all be linearised and reproduce
/// it; ops without one may be linearised (any output) or left out.
pub fn check_a<M: Spec>(m: &M, ops: &[Op<M::Input, M::Output>], budget: usize) -> Verdict {
    inca_verify::linearizability::check(m, ops, budget)
}

/// Checker A window by window ([`inca_verify::windowed`]): the same
/// verdicts as [`check_a`], cut where the flow is quiescent, with `budget`
/// search nodes per window — so a long flow costs its windows, not its
/// length. What campaigns run on every flow.
pub fn check_a_windowed<M: Spec>(
    m: &M,
    ops: &[Op<M::Input, M::Output>],
    budget: usize,
) -> inca_verify::windowed::Windowed {
    inca_verify::windowed::check_windowed(m, ops, budget, inca_verify::windowed::MAX_FRONTIER)
}

/// Checker B: the witness checker of §6.3, steps 1–5.
///
/// `log` is the store's committed log for the key (writes and grants), in
/// any order; it is sorted by version. Writes are matched to log entries by
/// the version their output was tagged with; a durable write whose output
/// was lost is replayed from the log's value (needs [`DecodeState::decode`], else
/// the answer is [`Verdict::Inconclusive`]). A released write missing from
/// the log is durable only if a later write of the same grant committed
/// before the release (the store acks a superseded write unapplied, §5.6).
pub fn check_b<M: DecodeState>(m: &M, ops: &[Op<M::Input, M::Output>], log: &[Commit]) -> Verdict {
    // 1. Durable writes in version order.
    let mut writes: Vec<&Commit> = log.iter().filter(|c| !c.grant).collect();
    // A write the store acked without applying it (spec §5.6: fence < s ≤
    // last_seq, "older than a newer full value") is durable through the
    // newer value of the same grant, which includes its effect; the store
    // acks it only once that value committed. Such a released write takes
    // its own place in the order, with no value of its own.
    // A write whose output was lost but whose issued version is known is
    // placed the same way (a later commit of its grant, at any time).
    let subsumed: Vec<Commit> = ops
        .iter()
        .filter(|op| op.kind == Kind::Write)
        .filter_map(|op| match (&op.output, op.issued) {
            (Some((t, _, v)), _) => Some((*t, *v)),
            (None, Some(v)) => Some((u64::MAX, v)),
            (None, None) => None,
        })
        .filter(|(_, v)| !writes.iter().any(|c| c.version == *v))
        .filter(|(t, v)| {
            writes
                .iter()
                .any(|c| c.version.0 == v.0 && c.version.1 > v.1 && c.time <= *t)
        })
        .map(|(t, v)| Commit {
            version: v,
            value: Vec::new(),
            time: t,
            grant: false,
        })
        .collect();
    writes.extend(subsumed.iter());
    writes.sort_by_key(|c| c.version);
    writes.dedup_by_key(|c| c.version);
    let pos_of: BTreeMap<Version, usize> = writes
        .iter()
        .enumerate()
        .map(|(i, c)| (c.version, i))
        .collect();
    // Which op wrote each durable version.
    let mut writer: Vec<Option<usize>> = vec![None; writes.len()];
    // Reads placed after write position p (p = -1 before any write).
    let mut reads: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for (i, op) in ops.iter().enumerate() {
        let Some((_, _, v)) = &op.output else {
            continue; // 3. no output: may be left out
        };
        match op.kind {
            Kind::Write => match pos_of.get(v) {
                Some(&p) => {
                    if let Some(other) = writer[p] {
                        return Verdict::Violation {
                            reason: format!("two writes released outputs for version {v:?}"),
                            ops: vec![ops[other].id, op.id],
                        };
                    }
                    writer[p] = Some(i);
                }
                None => {
                    // 3. assert: a write that never became durable released nothing.
                    return Verdict::Violation {
                        reason: format!(
                            "output released for write version {v:?}, which the store never committed"
                        ),
                        ops: vec![op.id],
                    };
                }
            },
            Kind::Read => {
                // 2. after the last durable write at or below the version.
                let p = writes.partition_point(|c| c.version <= *v) as i64 - 1;
                reads.entry(p).or_default().push(i);
            }
        }
    }
    // Writes whose output was lost but whose version is known write their
    // version if it is durable (replayed, output unchecked).
    for (i, op) in ops.iter().enumerate() {
        if let (Kind::Write, None, Some(v)) = (op.kind, &op.output, op.issued) {
            if let Some(&p) = pos_of.get(&v) {
                writer[p].get_or_insert(i);
            }
        }
    }
    for r in reads.values_mut() {
        r.sort_by_key(|&i| (ops[i].t_in, i));
    }
    // 4. Replay along S, recording each op's position in S.
    let mut pos: Vec<Option<usize>> = vec![None; ops.len()];
    let mut at = 0usize;
    let mut state = m.init();
    let replay_reads = |state: &M::State,
                        p: i64,
                        at: &mut usize,
                        pos: &mut Vec<Option<usize>>|
     -> Result<(), Verdict> {
        for &i in reads.get(&p).map(|v| v.as_slice()).unwrap_or(&[]) {
            let (out, _) = m.step(state, &ops[i].input);
            let rec = &ops[i].output.as_ref().expect("reads here have outputs").1;
            if out != *rec {
                return Err(Verdict::Violation {
                    reason: format!(
                        "read {} observed version position {p} but its output {rec:?} differs from \
                         the reference {out:?}",
                        ops[i].id
                    ),
                    ops: vec![ops[i].id],
                });
            }
            pos[i] = Some(*at);
            *at += 1;
        }
        Ok(())
    };
    if let Err(v) = replay_reads(&state, -1, &mut at, &mut pos) {
        return v;
    }
    for (p, c) in writes.iter().enumerate() {
        match writer[p] {
            Some(i) => {
                let (out, next) = m.step(&state, &ops[i].input);
                let Some((_, rec, _)) = &ops[i].output else {
                    // Output lost: replay only.
                    state = next;
                    pos[i] = Some(at);
                    at += 1;
                    if let Err(v) = replay_reads(&state, p as i64, &mut at, &mut pos) {
                        return v;
                    }
                    continue;
                };
                if out != *rec {
                    return Verdict::Violation {
                        reason: format!(
                            "write {} at version {:?}: output {rec:?} differs from the reference {out:?}",
                            ops[i].id, c.version
                        ),
                        ops: vec![ops[i].id],
                    };
                }
                state = next;
                pos[i] = Some(at);
                at += 1;
            }
            None => match m.decode(&c.value) {
                Some(s) => state = s,
                None => {
                    return Verdict::Inconclusive(format!(
                    "durable write {:?} has no recorded output and the model cannot decode values",
                    c.version
                ))
                }
            },
        }
        if let Err(v) = replay_reads(&state, p as i64, &mut at, &mut pos) {
            return v;
        }
    }
    // 5. Real time: sweep inputs in time order; every op must come after
    // all ops whose outputs left before its input.
    let mut events: Vec<(u64, u8, usize)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        if pos[i].is_none() {
            continue;
        }
        events.push((op.t_in, 1, i));
        if let Some((t_out, _, _)) = &op.output {
            events.push((*t_out, 0, i));
        }
    }
    // Outputs strictly before an input count; at equal times the input
    // goes first (the order is then not forced).
    events.sort_by_key(|&(t, kind, i)| (t, std::cmp::Reverse(kind), i));
    let mut max_done: Option<(usize, usize)> = None; // (position, op)
    for (_, kind, i) in events {
        let p = pos[i].expect("placed");
        if kind == 0 {
            if max_done.is_none_or(|(mp, _)| p > mp) {
                max_done = Some((p, i));
            }
        } else if let Some((mp, j)) = max_done {
            if p < mp {
                return Verdict::Violation {
                    reason: format!(
                        "real-time order: op {}'s output left before op {} arrived, but the state \
                         versions put {} first",
                        ops[j].id, ops[i].id, ops[i].id
                    ),
                    ops: vec![ops[j].id, ops[i].id],
                };
            }
        }
    }
    Verdict::Linearizable
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A counter flow: a write increments and outputs the new count, a read
    /// outputs the count (Sync-Counter / KV in miniature).
    struct Counter;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum In {
        Inc,
        Get,
    }

    impl Spec for Counter {
        type State = u32;
        type Input = In;
        type Output = u32;
        fn init(&self) -> u32 {
            0
        }
        fn step(&self, s: &u32, i: &In) -> (u32, u32) {
            match i {
                In::Inc => (s + 1, s + 1),
                In::Get => (*s, *s),
            }
        }
    }

    impl DecodeState for Counter {
        fn decode(&self, v: &[u8]) -> Option<u32> {
            Some(u32::from_be_bytes(v.try_into().ok()?))
        }
    }

    type H = Vec<Op<In, u32>>;

    fn w(id: u64, t_in: u64, out: Option<(u64, u32, Version)>) -> Op<In, u32> {
        Op {
            id,
            t_in,
            input: In::Inc,
            kind: Kind::Write,
            output: out,
            issued: None,
        }
    }
    fn r(id: u64, t_in: u64, out: Option<(u64, u32, Version)>) -> Op<In, u32> {
        Op {
            id,
            t_in,
            input: In::Get,
            kind: Kind::Read,
            output: out,
            issued: None,
        }
    }
    fn c(version: Version, count: u32, time: u64) -> Commit {
        Commit {
            version,
            value: count.to_be_bytes().to_vec(),
            time,
            grant: false,
        }
    }
    fn g(version: Version, time: u64) -> Commit {
        Commit {
            version,
            value: vec![],
            time,
            grant: true,
        }
    }

    fn both(h: &H, log: &[Commit]) -> (Verdict, Verdict) {
        (check_a(&Counter, h, A_BUDGET), check_b(&Counter, h, log))
    }

    #[test]
    fn a_clean_history_with_a_failover_is_linearizable() {
        // Switch 1 writes twice; a read overlaps; failover to switch 2
        // (grant fence 4096) which reads the durable state and writes on.
        let h = vec![
            w(1, 0, Some((10, 1, (0, 1)))),
            w(2, 20, Some((30, 2, (0, 2)))),
            r(3, 25, Some((26, 1, (0, 1)))), // observed before write 2 committed
            w(4, 40, None),                  // lost output, but durable
            r(5, 100, Some((101, 3, (4096, 4096)))),
            w(6, 110, Some((120, 4, (4096, 4097)))),
        ];
        let log = [
            c((0, 1), 1, 5),
            c((0, 2), 2, 28),
            c((0, 3), 3, 45),
            g((4096, 4096), 90),
            c((4096, 4097), 4, 115),
        ];
        let (a, b) = both(&h, &log);
        assert_eq!(a, Verdict::Linearizable);
        assert_eq!(b, Verdict::Linearizable);
    }

    #[test]
    fn stale_read_after_failover_is_rejected_by_both() {
        // Write 2's output left at 30; after failover switch 2 serves a read
        // from the version of write 1.
        let h = vec![
            w(1, 0, Some((10, 1, (0, 1)))),
            w(2, 20, Some((30, 2, (0, 2)))),
            r(3, 100, Some((101, 1, (0, 1)))),
        ];
        let log = [c((0, 1), 1, 5), c((0, 2), 2, 28), g((4096, 4096), 90)];
        let (a, b) = both(&h, &log);
        assert!(a.is_violation(), "{a:?}");
        assert!(b.is_violation(), "{b:?}");
    }

    #[test]
    fn output_of_a_write_that_never_became_durable_is_rejected_by_both() {
        // Write 2 released count 2 but never committed; the new owner
        // continues from count 1 and releases 2 again.
        let h = vec![
            w(1, 0, Some((10, 1, (0, 1)))),
            w(2, 20, Some((30, 2, (0, 2)))),
            w(3, 100, Some((110, 2, (4096, 4097)))),
        ];
        let log = [
            c((0, 1), 1, 5),
            g((4096, 4096), 90),
            c((4096, 4097), 2, 105),
        ];
        let (a, b) = both(&h, &log);
        assert!(a.is_violation(), "{a:?}");
        match b {
            Verdict::Violation { ops, .. } => assert_eq!(ops, vec![2]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn two_owners_interleaving_is_rejected_by_both() {
        // Switches 1 and 2 both believe they own the flow and count from 0.
        let h = vec![
            w(1, 0, Some((10, 1, (0, 1)))),
            w(2, 20, Some((30, 1, (4096, 4097)))),
            w(3, 40, Some((50, 2, (0, 2)))),
            w(4, 60, Some((70, 2, (4096, 4098)))),
        ];
        let log = [
            c((0, 1), 1, 5),
            g((4096, 4096), 15),
            c((4096, 4097), 1, 25),
            c((0, 2), 2, 45), // a store without fencing accepted it
            c((4096, 4098), 2, 65),
        ];
        let (a, b) = both(&h, &log);
        assert!(a.is_violation(), "{a:?}");
        assert!(b.is_violation(), "{b:?}");
    }

    #[test]
    fn concurrent_ops_may_linearize_in_either_order() {
        // Two overlapping writes whose outputs came back in the opposite
        // order of their inputs.
        let h = vec![
            w(1, 0, Some((50, 2, (0, 2)))),
            w(2, 10, Some((40, 1, (0, 1)))),
        ];
        let log = [c((0, 1), 1, 20), c((0, 2), 2, 30)];
        let (a, b) = both(&h, &log);
        assert_eq!(a, Verdict::Linearizable);
        assert_eq!(b, Verdict::Linearizable);
    }

    #[test]
    fn checker_a_budget_is_reported() {
        let h: H = (0..20)
            .map(|i| w(i, 0, Some((100, (i + 1) as u32, (0, i as u16 + 1)))))
            .collect();
        assert!(matches!(check_a(&Counter, &h, 3), Verdict::Inconclusive(_)));
        assert_eq!(check_a(&Counter, &h, A_BUDGET), Verdict::Linearizable);
    }

    /// A random linearizable history: ops linearize at 100·i; inputs and
    /// outputs get random slack around that point; some outputs are lost
    /// (the writes stay durable).
    fn history(kinds: &[bool], slack: &[(u64, u64, bool)]) -> (H, Vec<Commit>) {
        let mut h = Vec::new();
        let mut log = Vec::new();
        let mut count = 0u32;
        for (i, (&is_write, &(before, after, lost))) in kinds.iter().zip(slack).enumerate() {
            let lin = 1_000 + 100 * i as u64;
            let (t_in, t_out) = (lin - before, lin + after);
            let input = if is_write { In::Inc } else { In::Get };
            if is_write {
                count += 1;
                log.push(c((0, count as u16), count, lin));
            }
            let out = (!lost).then_some((t_out, count, (0, count as u16)));
            let kind = if is_write { Kind::Write } else { Kind::Read };
            h.push(Op {
                id: i as u64,
                t_in,
                input,
                kind,
                output: out,
                issued: None,
            });
        }
        (h, log)
    }

    fn arb() -> impl Strategy<Value = (Vec<bool>, Vec<(u64, u64, bool)>)> {
        (1usize..24).prop_flat_map(|n| {
            (
                prop::collection::vec(any::<bool>(), n),
                prop::collection::vec((0u64..250, 0u64..250, prop::bool::weighted(0.2)), n),
            )
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn random_linearizable_histories_pass_both((kinds, slack) in arb()) {
            let (h, log) = history(&kinds, &slack);
            prop_assert_eq!(check_a(&Counter, &h, A_BUDGET), Verdict::Linearizable);
            prop_assert_eq!(check_b(&Counter, &h, &log), Verdict::Linearizable);
        }

        #[test]
        fn impossible_counts_fail_both((kinds, slack) in arb(), pick in any::<prop::sample::Index>()) {
            let (mut h, log) = history(&kinds, &slack);
            let with_out: Vec<usize> = (0..h.len()).filter(|&i| h[i].output.is_some()).collect();
            prop_assume!(!with_out.is_empty());
            let i = with_out[pick.index(with_out.len())];
            let writes = kinds.iter().filter(|&&k| k).count() as u32;
            // More than every write together could count.
            h[i].output.as_mut().unwrap().1 = writes + 1;
            prop_assert!(check_a(&Counter, &h, A_BUDGET).is_violation());
            prop_assert!(check_b(&Counter, &h, &log).is_violation());
        }

        #[test]
        fn swapped_outputs_of_ordered_writes_fail_both((kinds, slack) in arb()) {
            let (mut h, log) = history(&kinds, &slack);
            // Two writes, the first's output strictly before the second's input.
            let ws: Vec<usize> = (0..h.len())
                .filter(|&i| h[i].kind == Kind::Write && h[i].output.is_some())
                .collect();
            let pair = ws.iter().flat_map(|&x| ws.iter().map(move |&y| (x, y))).find(|&(x, y)| {
                h[x].output.as_ref().unwrap().0 < h[y].t_in
            });
            prop_assume!(pair.is_some());
            let (x, y) = pair.unwrap();
            let cx = h[x].output.as_ref().unwrap().1;
            let cy = h[y].output.as_ref().unwrap().1;
            h[x].output.as_mut().unwrap().1 = cy;
            h[y].output.as_mut().unwrap().1 = cx;
            prop_assert!(check_a(&Counter, &h, A_BUDGET).is_violation());
            prop_assert!(check_b(&Counter, &h, &log).is_violation());
        }
    }
}
