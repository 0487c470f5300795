//! SDW recovery (specs/swish.md §5.6) as a transport-neutral state
//! machine: it says which register operations to run on which replica, in
//! batches, and computes the next batch from the answers to the last. The
//! rig's driver ([`super::recovery`]) runs a batch as control messages; the
//! controller device ([`super::controller`]) as §4.5 RPCs on its control
//! sessions. A driver runs a batch's calls in order, one at a time (the
//! spec's serial controller), and hands back one answer per call (empty for
//! an operation that has none).
//!
//! Batches: (1) pause every survivor, read its window; (2) read R_r(wmax)
//! from a replica s at wmax; (3) read each lagging replica's P; (4) give a
//! lagging replica R_r and then window wmax (so its queries never read a
//! half-built R_r), then read every survivor's Q and TQ — after those
//! writes, so an update a lagging replica takes before its window moves
//! is in the source half read; (5) install M, the members, window wmax+1,
//! status 0 and ready counts 0 everywhere; (6) START everyone — only once
//! every survivor is installed.
//!
//! A join (§5.6 "Join") is the same batches with the joining replica among
//! the live ones, and these differences [our choices where the spec is
//! silent]: in batch 1 the joiner is closed — its `ready_from` set to
//! "never" and its update count to the most there is, so it rejects
//! updates and marks queries not ready while it is installed (a restarted
//! replica runs from its own empty state until then); its window is not
//! read (wmax is the old members'); it has no source half to read (empty
//! R_u, §5.6); and in batch 5 it gets, before its window, every TQ tag set
//! to (wmax − 1) and every TP tag to wmax (its Q halves count as empty, its
//! merge half as not begun in wmax + 1), and `ready_from` = wmax + 2 (its
//! queries carry not_ready until its first window completes).

use inca_switch::register::{Pair, RegisterValue};

use super::config::Merge;
use super::program::{
    ep8, ARR_P, ARR_Q, ARR_READY, ARR_READY_FROM, ARR_STATUS, ARR_TP, ARR_TQ, ARR_WINREG,
};
use crate::addr::Rid;

/// One register-level operation of the controller on a replica's CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// PAUSED := 1 (no answer).
    Pause,
    /// Read `count` entries of register `arr` from `first`.
    Read {
        /// Register code (`ARR_*`).
        arr: u8,
        /// First entry.
        first: u32,
        /// Entries.
        count: u32,
    },
    /// Write `vals` into register `arr` from `first` (answered once done).
    Write {
        /// Register code.
        arr: u8,
        /// First entry.
        first: u32,
        /// One per entry.
        vals: Vec<u64>,
    },
    /// The failed members' rids: groups and masks rebuilt without them (no
    /// answer).
    Failed(Vec<Rid>),
    /// Inject START for `window`; clears PAUSED in its pass (no answer).
    Start(u32),
}

impl Op {
    /// Whether the replica answers it.
    pub fn answered(&self) -> bool {
        matches!(self, Op::Read { .. } | Op::Write { .. })
    }
}

/// An operation on replica `replica` (0-based: rid − 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The replica.
    pub replica: usize,
    /// The operation.
    pub op: Op,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Pause,
    Windows,
    Rr,
    Lagging,
    Source,
    Installed,
    Done,
}

/// One recovery (or join), from detection to START.
#[derive(Debug, Clone)]
pub struct Recovery {
    /// Every replica installed: the survivors and a joiner.
    live: Vec<usize>,
    /// The members before: their windows make wmax, their sources M.
    old: Vec<usize>,
    /// The joining replica.
    joiner: Option<usize>,
    /// The members declared failed afterwards.
    failed: Vec<usize>,
    rows: usize,
    cols: u32,
    merge: Merge,
    broken: bool,
    broken_join: bool,
    stage: Stage,
    wins: Vec<u32>,
    wmax: u32,
    lagging: Vec<usize>,
    rr: Vec<Vec<u32>>,
}

fn half(v: u64, w: u32) -> u32 {
    let p = Pair::from_u64(v);
    if w.is_multiple_of(2) {
        p.lo
    } else {
        p.hi
    }
}

fn pair_with(v: u64, w: u32, x: u32) -> u64 {
    let mut p = Pair::from_u64(v);
    if w.is_multiple_of(2) {
        p.lo = x
    } else {
        p.hi = x
    }
    p.to_u64()
}

fn call(replica: usize, op: Op) -> Call {
    Call { replica, op }
}

fn write(replica: usize, arr: u8, vals: Vec<u64>) -> Call {
    call(
        replica,
        Op::Write {
            arr,
            first: 0,
            vals,
        },
    )
}

fn read(replica: usize, arr: u8, cols: u32) -> Call {
    call(
        replica,
        Op::Read {
            arr,
            first: 0,
            count: cols,
        },
    )
}

impl Recovery {
    /// Recovery of `n` replicas after `failed` (0-based) fail-stopped, for
    /// a collection of `rows` × `cols` merged by `merge`. `broken` leaves
    /// the survivors' R_s-source out of M (step 5), for showing D9 catches
    /// it.
    pub fn new(
        n: usize,
        failed: &[usize],
        rows: u8,
        cols: u32,
        merge: Merge,
        broken: bool,
    ) -> Self {
        let live: Vec<usize> = (0..n).filter(|i| !failed.contains(i)).collect();
        Recovery {
            old: live.clone(),
            live,
            joiner: None,
            failed: failed.to_vec(),
            rows: usize::from(rows),
            cols,
            merge,
            broken,
            broken_join: false,
            stage: Stage::Pause,
            wins: Vec::new(),
            wmax: 0,
            lagging: Vec::new(),
            rr: Vec::new(),
        }
    }

    /// The join (§5.6 "Join") of replica `joiner` (0-based, among the
    /// `failed`) to the `n` replicas of which `failed` are declared failed:
    /// steps 1–6 with the joiner among the live ones. `broken` installs
    /// the joiner without M (its R_r stays empty), for showing D2/D3
    /// catch it.
    #[allow(clippy::too_many_arguments)]
    pub fn join(
        n: usize,
        failed: &[usize],
        joiner: usize,
        rows: u8,
        cols: u32,
        merge: Merge,
        broken: bool,
    ) -> Self {
        let mut r = Recovery::new(n, failed, rows, cols, merge, false);
        r.failed.retain(|&i| i != joiner);
        if joiner < n && !r.live.contains(&joiner) {
            r.live.push(joiner);
            r.live.sort_unstable();
            r.joiner = Some(joiner);
        }
        r.broken_join = broken;
        r
    }

    /// The joining replica, if this is a join.
    pub fn joiner(&self) -> Option<usize> {
        self.joiner
    }

    /// The largest survivor window (once read).
    pub fn wmax(&self) -> u32 {
        self.wmax
    }

    /// Survivors that lagged at wmax − 1 (once known).
    pub fn lagging(&self) -> &[usize] {
        &self.lagging
    }

    /// Whether the last batch has been handed out.
    pub fn done(&self) -> bool {
        self.stage == Stage::Done
    }

    fn values(answers: &[Vec<u64>], at: usize, count: usize, who: usize) -> Result<&[u64], String> {
        match answers.get(at) {
            Some(v) if v.len() == count => Ok(v),
            Some(v) => Err(format!(
                "replica {}: a read of {count} entries gave {}",
                who + 1,
                v.len()
            )),
            None => Err("an answer is missing".into()),
        }
    }

    /// The next batch, given the answers to the previous one (one per
    /// call, in order; empty for the first batch); `None` once START has
    /// been handed out.
    pub fn next(&mut self, answers: &[Vec<u64>]) -> Result<Option<Vec<Call>>, String> {
        let cols = self.cols as usize;
        let batch = match self.stage {
            Stage::Pause => {
                if self.old.is_empty() {
                    return Err("no survivor".into());
                }
                self.stage = Stage::Windows;
                let mut b: Vec<Call> = self.live.iter().map(|&i| call(i, Op::Pause)).collect();
                if let Some(j) = self.joiner {
                    // Closed while it is installed: queries not ready,
                    // updates rejected (count at its maximum).
                    b.push(write(j, ARR_READY_FROM, vec![u64::from(u32::MAX)]));
                    b.push(write(
                        j,
                        ARR_WINREG,
                        vec![Pair {
                            lo: 0,
                            hi: u32::MAX,
                        }
                        .to_u64()],
                    ));
                }
                b.extend(self.old.iter().map(|&i| read(i, ARR_WINREG, 1)));
                b
            }
            Stage::Windows => {
                let off = self.live.len() + if self.joiner.is_some() { 2 } else { 0 };
                self.wins = Vec::new();
                for (k, &i) in self.old.iter().enumerate() {
                    let v = Self::values(answers, off + k, 1, i)?;
                    self.wins.push(Pair::from_u64(v[0]).lo);
                }
                let wmax = *self.wins.iter().max().ok_or("no survivor")?;
                self.wmax = wmax;
                for (k, &i) in self.old.iter().enumerate() {
                    let w = self.wins[k];
                    if w == wmax.wrapping_sub(1) {
                        self.lagging.push(i);
                    } else if w != wmax {
                        return Err(format!("replica {} in window {w} with wmax {wmax}", i + 1));
                    }
                }
                let s = self.old[self.wins.iter().position(|&w| w == wmax).unwrap_or(0)];
                self.stage = Stage::Rr;
                (0..self.rows)
                    .map(|r| read(s, ARR_P + r as u8, self.cols))
                    .collect()
            }
            Stage::Rr => {
                let s = self.old[self.wins.iter().position(|&w| w == self.wmax).unwrap_or(0)];
                self.rr = (0..self.rows)
                    .map(|r| {
                        let v = Self::values(answers, r, cols, s)?;
                        Ok(v.iter()
                            .map(|&x| half(x, self.wmax.wrapping_add(1)))
                            .collect())
                    })
                    .collect::<Result<_, String>>()?;
                self.stage = Stage::Lagging;
                self.lagging
                    .iter()
                    .flat_map(|&l| (0..self.rows).map(move |r| (l, r)))
                    .map(|(l, r)| read(l, ARR_P + r as u8, self.cols))
                    .collect()
            }
            Stage::Lagging => {
                let wmax = self.wmax;
                let mut b = Vec::new();
                let mut at = 0;
                for &l in &self.lagging {
                    for r in 0..self.rows {
                        let cur = Self::values(answers, at, cols, l)?;
                        at += 1;
                        let vals = cur
                            .iter()
                            .zip(&self.rr[r])
                            .map(|(&x, &v)| pair_with(x, wmax.wrapping_add(1), v))
                            .collect();
                        b.push(call(
                            l,
                            Op::Write {
                                arr: ARR_P + r as u8,
                                first: 0,
                                vals,
                            },
                        ));
                    }
                    b.push(call(
                        l,
                        Op::Write {
                            arr: ARR_WINREG,
                            first: 0,
                            vals: vec![Pair { lo: wmax, hi: 0 }.to_u64()],
                        },
                    ));
                }
                if !self.broken {
                    for &i in &self.old {
                        for r in 0..self.rows {
                            b.push(read(i, ARR_Q + r as u8, self.cols));
                            b.push(read(i, ARR_TQ + r as u8, self.cols));
                        }
                    }
                }
                self.stage = Stage::Source;
                b
            }
            Stage::Source => {
                // M = R_r(wmax) ⊕ Σ live R_s-source (tag (wmax−1) counts).
                let wmax = self.wmax;
                let src = wmax.wrapping_add(1);
                let want = wmax.wrapping_sub(1).wrapping_add(1) as u8;
                let mut m = self.rr.clone();
                let mut at = self.lagging.len() * (self.rows + 1);
                if !self.broken {
                    for &i in &self.old {
                        for mrow in m.iter_mut() {
                            let q = Self::values(answers, at, cols, i)?;
                            let tq = Self::values(answers, at + 1, cols, i)?;
                            at += 2;
                            for (col, cell) in mrow.iter_mut().enumerate() {
                                let t = tq[col] as u16;
                                let tag = if src.is_multiple_of(2) {
                                    t as u8
                                } else {
                                    (t >> 8) as u8
                                };
                                if tag == want {
                                    *cell = self.merge.apply(*cell, half(q[col], src));
                                }
                            }
                        }
                    }
                }
                let failed: Vec<Rid> = self.failed.iter().map(|&i| i as Rid + 1).collect();
                let next = Pair {
                    lo: wmax.wrapping_add(1),
                    hi: 0,
                }
                .to_u64();
                let mut b = Vec::new();
                for &i in &self.live {
                    let joiner = self.joiner == Some(i);
                    if joiner {
                        // Empty R_u and R_s-source: every TQ tag (wmax−1);
                        // the merge half not begun in wmax + 1: TP tag wmax.
                        let t = u64::from(ep8(wmax.wrapping_sub(1)));
                        for r in 0..self.rows {
                            b.push(write(i, ARR_TQ + r as u8, vec![t << 8 | t; cols]));
                            let tp = u64::from(ep8(wmax));
                            b.push(write(i, ARR_TP + r as u8, vec![tp; cols]));
                        }
                        let ready = u64::from(wmax.wrapping_add(2));
                        b.push(write(i, ARR_READY_FROM, vec![ready]));
                    }
                    for (r, mrow) in m.iter().enumerate() {
                        if joiner && self.broken_join {
                            continue;
                        }
                        let vals = self.rr[r]
                            .iter()
                            .zip(mrow)
                            .map(|(&rv, &mv)| {
                                pair_with(pair_with(0, wmax.wrapping_add(1), rv), wmax, mv)
                            })
                            .collect();
                        b.push(call(
                            i,
                            Op::Write {
                                arr: ARR_P + r as u8,
                                first: 0,
                                vals,
                            },
                        ));
                    }
                    b.push(call(i, Op::Failed(failed.clone())));
                    let w = |arr, vals| {
                        call(
                            i,
                            Op::Write {
                                arr,
                                first: 0,
                                vals,
                            },
                        )
                    };
                    b.push(w(ARR_WINREG, vec![next]));
                    b.push(w(ARR_STATUS, vec![0]));
                    // [our choice, beyond §5.6] READY counts too: a failed
                    // replica already in wmax + 1 may have counted its
                    // READY(wmax + 1) here.
                    b.push(w(ARR_READY, vec![0, 0]));
                }
                self.stage = Stage::Installed;
                b
            }
            Stage::Installed => {
                // START clears PAUSED in the data plane, atomically with
                // the restart.
                self.stage = Stage::Done;
                let win = self.wmax.wrapping_add(1);
                self.live.iter().map(|&i| call(i, Op::Start(win))).collect()
            }
            Stage::Done => return Ok(None),
        };
        Ok(Some(batch))
    }
}
