//! A reference model of SDW's abstract protocol (specs/swish.md §5.4; SwiSh
//! App. A, Algorithm 1) with the §9 errata fixed, as a plain type: tests
//! drive several replicas with random delivery orders and check the
//! windows' visibility (D2) and snapshots (D3) against it.
//!
//! Errata fixed here: START broadcasts the (empty) window −1 delta so the
//! protocol begins; a message is merged only when w′ = win, an older one is
//! re-acknowledged and not merged; a sender already in `rcvs` is not merged
//! twice (Algorithm 1 silently assumes exactly-once channels); the buffered
//! message's sender is the one added to `rcvs`. Cells merge by wrapping Sum.

use std::collections::BTreeSet;

/// A message between replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg {
    /// The sender's delta of the window before `win`.
    Obj {
        /// Sender.
        from: usize,
        /// Window.
        win: u64,
        /// The delta.
        obj: Vec<u32>,
    },
    /// The receiver of `win`'s object acknowledges it.
    Ack {
        /// Sender of the ack.
        from: usize,
        /// Window.
        win: u64,
    },
}

/// One replica of Algorithm 1.
#[derive(Debug, Clone)]
pub struct Replica {
    id: usize,
    n: usize,
    objs: [Vec<u32>; 3],
    /// The current window.
    pub win: u64,
    count: u32,
    b: u32,
    rcvs: BTreeSet<usize>,
    acks: BTreeSet<usize>,
    buf: Vec<Msg>,
    /// Windows advanced so far (check: one per window).
    pub advances: u64,
}

impl Replica {
    /// Replica `id` of `n`, with `cols` cells and at most `b` updates per
    /// window (`u32::MAX`: unbounded).
    pub fn new(id: usize, n: usize, cols: usize, b: u32) -> Self {
        Replica {
            id,
            n,
            objs: [vec![0; cols], vec![0; cols], vec![0; cols]],
            win: 0,
            count: 0,
            b,
            rcvs: BTreeSet::from([id]),
            acks: BTreeSet::from([id]),
            buf: Vec::new(),
            advances: 0,
        }
    }

    /// START (§5.5 [our choice]): broadcast the empty delta of window −1
    /// as window 0's object. Returns (destination, message) pairs.
    pub fn start(&mut self) -> Vec<(usize, Msg)> {
        self.broadcast()
    }

    fn broadcast(&self) -> Vec<(usize, Msg)> {
        let obj = self.objs[((self.win + 2) % 3) as usize].clone();
        (0..self.n)
            .filter(|&j| j != self.id)
            .map(|j| {
                (
                    j,
                    Msg::Obj {
                        from: self.id,
                        win: self.win,
                        obj: obj.clone(),
                    },
                )
            })
            .collect()
    }

    /// Update(v) of cell `col`: false once `b` updates landed this window.
    pub fn update(&mut self, col: usize, v: u32) -> bool {
        if self.count == self.b {
            return false;
        }
        let o = &mut self.objs[(self.win % 3) as usize];
        o[col] = o[col].wrapping_add(v);
        self.count += 1;
        true
    }

    /// Query(): the query object.
    pub fn query(&self) -> &[u32] {
        &self.objs[((self.win + 1) % 3) as usize]
    }

    /// Handles a message; returns what to send.
    pub fn handle(&mut self, m: Msg) -> Vec<(usize, Msg)> {
        let mut out = Vec::new();
        self.handle_into(m, &mut out);
        out
    }

    fn handle_into(&mut self, m: Msg, out: &mut Vec<(usize, Msg)>) {
        match m {
            Msg::Obj { from, win, obj } => {
                if win > self.win {
                    self.buf.push(Msg::Obj { from, win, obj });
                    return;
                }
                // An older window's object (erratum) or a duplicate: ack
                // again, merge nothing.
                if win == self.win && self.rcvs.insert(from) {
                    let s = &mut self.objs[((self.win + 2) % 3) as usize];
                    for (c, v) in s.iter_mut().zip(&obj) {
                        *c = c.wrapping_add(*v);
                    }
                }
                out.push((from, Msg::Ack { from: self.id, win }));
                self.check_done(out);
            }
            Msg::Ack { from, win } => {
                if win == self.win {
                    self.acks.insert(from);
                    self.check_done(out);
                }
            }
        }
    }

    fn check_done(&mut self, out: &mut Vec<(usize, Msg)>) {
        if self.rcvs.len() < self.n || self.acks.len() < self.n {
            return;
        }
        self.count = 0;
        self.win += 1;
        self.advances += 1;
        let w = self.win;
        let old = std::mem::take(&mut self.objs[(w % 3) as usize]);
        let q = &mut self.objs[((w + 1) % 3) as usize];
        for (c, v) in q.iter_mut().zip(&old) {
            *c = c.wrapping_add(*v);
        }
        self.objs[(w % 3) as usize] = vec![0; old.len()];
        out.extend(self.broadcast());
        self.rcvs = BTreeSet::from([self.id]);
        self.acks = BTreeSet::from([self.id]);
        for m in std::mem::take(&mut self.buf) {
            self.handle_into(m, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Random runs: updates at random replicas between random deliveries,
    /// duplicates and stale messages included; every query must show
    /// exactly the updates of windows ≤ w − 2 (D2) and two replicas in one
    /// window the same object (D3).
    #[test]
    fn random_orders_give_exact_windows() {
        for seed in 0..200u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let n = rng.gen_range(2..5);
            let cols = 4;
            let mut reps: Vec<Replica> = (0..n).map(|i| Replica::new(i, n, cols, 3)).collect();
            let mut net: Vec<(usize, Msg)> = Vec::new();
            for r in reps.iter_mut() {
                net.extend(r.start());
            }
            // (window, col, value) of accepted updates.
            let mut accepted: Vec<(u64, usize, u32)> = Vec::new();
            let mut snapshots: std::collections::BTreeMap<u64, Vec<u32>> = Default::default();
            for _ in 0..2_000 {
                if rng.gen_bool(0.3) || net.is_empty() {
                    let i = rng.gen_range(0..n);
                    let (c, v) = (rng.gen_range(0..cols), rng.gen_range(1..100));
                    let w = reps[i].win;
                    if reps[i].update(c, v) {
                        accepted.push((w, c, v));
                    }
                    let q = reps[i].query().to_vec();
                    let mut want = vec![0u32; cols];
                    for &(uw, uc, uv) in &accepted {
                        if uw + 2 <= w {
                            want[uc] = want[uc].wrapping_add(uv);
                        }
                    }
                    assert_eq!(q, want, "seed {seed}: D2 at replica {i} window {w}");
                    let s = snapshots.entry(w).or_insert_with(|| q.clone());
                    assert_eq!(*s, q, "seed {seed}: D3 in window {w}");
                    continue;
                }
                let k = rng.gen_range(0..net.len());
                let (to, m) = net.swap_remove(k);
                if rng.gen_bool(0.05) {
                    net.push((to, m.clone())); // a duplicate
                }
                net.extend(reps[to].handle(m));
            }
            let wins: Vec<u64> = reps.iter().map(|r| r.win).collect();
            let (lo, hi) = (wins.iter().min().unwrap(), wins.iter().max().unwrap());
            assert!(hi - lo <= 1, "seed {seed}: D1 {wins:?}");
            assert!(*lo >= 3, "seed {seed}: windows advance {wins:?}");
            for r in &reps {
                assert_eq!(r.advances, r.win);
            }
        }
    }
}
