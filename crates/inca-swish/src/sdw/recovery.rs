//! SDW recovery (specs/swish.md §5.6) by the controller, driven from the
//! rig: after fail-stop of replicas F, pause the survivors, bring a lagging
//! one up to wmax, merge R_r(wmax) with every survivor's R_s-source into
//! M, install M as the next R_r, drop F from the groups and masks, and
//! restart everyone in wmax+1 with START.
//!
//! The controller's RPCs (§4.5) are control messages to each switch's CPU
//! ([`super::program::MSG_READ`] and friends), serial across switches
//! (§5.6, SwiSh §9.2), each paying half the controller RTT (100 µs,
//! spec §8.1) each way on top of the profile's register-operation cost.

use inca_sim::engine::Fault;
use inca_switch::device::ControlMessage;
use inca_switch::register::{Pair, RegisterValue};
use inca_switch::Nanos;

use super::program::{
    ARR_P, ARR_Q, ARR_READY, ARR_STATUS, ARR_TQ, ARR_WINREG, MSG_MEMBERS, MSG_PAUSE, MSG_READ,
    MSG_START, MSG_VALUES, MSG_WRITE,
};
use super::rig::Rig;

/// Controller RPC round trip (spec §8.1, [our choice] there).
pub const RPC_RTT: Nanos = 100_000;
/// Failure detection delay T_detect (spec §5.1, model input).
pub const T_DETECT: Nanos = 1_000_000;
/// How long the controller waits for one answer before giving up: above
/// the longest operation it issues (a read of one 64K-cell row costs
/// 50 µs + 2.58 µs × 65,536 ≈ 169 ms, spec §8.1; 100 ms timed out in E10).
pub const RPC_TIMEOUT: Nanos = 10_000_000_000;

/// What a recovery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The largest survivor window when paused.
    pub wmax: u32,
    /// Survivors that lagged at wmax − 1.
    pub lagging: Vec<usize>,
    /// When the controller started (detection).
    pub started: Nanos,
    /// When the last START was sent.
    pub resumed: Nanos,
}

struct Ctl<'a> {
    rig: &'a mut Rig,
    tag: u32,
}

impl Ctl<'_> {
    /// Sends one RPC to replica `i` and waits for its answer.
    fn call(
        &mut self,
        i: usize,
        kind: u32,
        body: Vec<u8>,
        answer: bool,
    ) -> Result<Vec<u64>, String> {
        let node = self.rig.replicas[i];
        let now = self.rig.sim.now();
        let seen = self.rig.sim.messages.len();
        self.rig.sim.schedule(
            now + RPC_RTT / 2,
            Fault::Message(node, ControlMessage { kind, body }),
        );
        if !answer {
            self.rig.sim.run_until(now + RPC_RTT / 2, |_| {});
            return Ok(Vec::new());
        }
        let tag = self.tag;
        let deadline = now + RPC_TIMEOUT;
        let mut t = now;
        while t < deadline {
            t += 10_000;
            self.rig.sim.run_until(t, |_| {});
            let hit = self.rig.sim.messages[seen..].iter().find(|(_, n, m)| {
                *n == node
                    && m.kind == MSG_VALUES
                    && m.body.get(..4) == Some(&tag.to_be_bytes()[..])
            });
            if let Some((at, _, m)) = hit {
                let vals = m.body[4..]
                    .chunks_exact(8)
                    .map(|c| u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                    .collect();
                let back = at + RPC_RTT / 2;
                self.rig.sim.run_until(back.max(t), |_| {});
                return Ok(vals);
            }
        }
        Err(format!(
            "replica {} did not answer RPC {kind:#x} tag {tag}",
            i + 1
        ))
    }

    fn read(&mut self, i: usize, arr: u8, first: u32, count: u32) -> Result<Vec<u64>, String> {
        self.tag += 1;
        let mut b = self.tag.to_be_bytes().to_vec();
        b.push(arr);
        b.extend_from_slice(&first.to_be_bytes());
        b.extend_from_slice(&count.to_be_bytes());
        let v = self.call(i, MSG_READ, b, true)?;
        if v.len() != count as usize {
            return Err(format!(
                "replica {}: read of array {arr} gave {} values",
                i + 1,
                v.len()
            ));
        }
        Ok(v)
    }

    fn write(&mut self, i: usize, arr: u8, first: u32, vals: &[u64]) -> Result<(), String> {
        self.tag += 1;
        let mut b = self.tag.to_be_bytes().to_vec();
        b.push(arr);
        b.extend_from_slice(&first.to_be_bytes());
        for v in vals {
            b.extend_from_slice(&v.to_be_bytes());
        }
        self.call(i, MSG_WRITE, b, true).map(|_| ())
    }
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

/// Runs §5.6 steps 1–6 now on the survivors (every replica not in
/// `failed`, 0-based).
pub fn recover(rig: &mut Rig, failed: &[usize]) -> Result<RecoveryReport, String> {
    recover_with(rig, failed, false)
}

/// [`recover`], or with `broken` a deliberately wrong one that leaves the
/// survivors' R_s-source out of M (step 5), for showing D9 catches it.
pub fn recover_with(
    rig: &mut Rig,
    failed: &[usize],
    broken: bool,
) -> Result<RecoveryReport, String> {
    let n = rig.replicas.len();
    let live: Vec<usize> = (0..n).filter(|i| !failed.contains(i)).collect();
    let base = rig.base.clone();
    let (rows, cols) = (usize::from(base.rows), base.cols);
    let merge = base.merge;
    let mut report = RecoveryReport {
        started: rig.sim.now(),
        ..RecoveryReport::default()
    };
    let mut c = Ctl { rig, tag: 0 };
    // 1. Pause, read every window.
    let mut wins = Vec::new();
    for &i in &live {
        c.call(i, MSG_PAUSE, vec![1], false)?;
    }
    for &i in &live {
        wins.push(Pair::from_u64(c.read(i, ARR_WINREG, 0, 1)?[0]).lo);
    }
    let wmax = *wins.iter().max().ok_or("no survivor")?;
    report.wmax = wmax;
    // 2. R_r(wmax) from a replica at wmax.
    let s = live[wins.iter().position(|&w| w == wmax).unwrap_or(0)];
    let mut rr: Vec<Vec<u32>> = Vec::new();
    for r in 0..rows {
        let v = c.read(s, ARR_P + r as u8, 0, cols)?;
        rr.push(v.iter().map(|&x| half(x, wmax.wrapping_add(1))).collect());
    }
    // 3. Lagging replicas: R_r into their P half (wmax+1) mod 2, then the
    //    window (so their queries never read a half-built R_r).
    for (k, &i) in live.iter().enumerate() {
        if wins[k] == wmax {
            continue;
        }
        if wins[k] != wmax.wrapping_sub(1) {
            return Err(format!(
                "replica {} in window {} with wmax {wmax}",
                i + 1,
                wins[k]
            ));
        }
        report.lagging.push(i);
        for (r, rrow) in rr.iter().enumerate() {
            let cur = c.read(i, ARR_P + r as u8, 0, cols)?;
            let new: Vec<u64> = cur
                .iter()
                .zip(rrow)
                .map(|(&x, &v)| pair_with(x, wmax.wrapping_add(1), v))
                .collect();
            c.write(i, ARR_P + r as u8, 0, &new)?;
        }
        c.write(i, ARR_WINREG, 0, &[Pair { lo: wmax, hi: 0 }.to_u64()])?;
    }
    // 4–5. M = R_r(wmax) ⊕ Σ live R_s-source (tag (wmax−1) counts).
    let src = wmax.wrapping_add(1);
    let want = wmax.wrapping_sub(1).wrapping_add(1) as u8;
    let mut m = rr.clone();
    for &i in live.iter().filter(|_| !broken) {
        for (r, mrow) in m.iter_mut().enumerate() {
            let q = c.read(i, ARR_Q + r as u8, 0, cols)?;
            let tq = c.read(i, ARR_TQ + r as u8, 0, cols)?;
            for (col, cell) in mrow.iter_mut().enumerate() {
                let t = tq[col] as u16;
                let tag = if src.is_multiple_of(2) {
                    t as u8
                } else {
                    (t >> 8) as u8
                };
                if tag == want {
                    *cell = merge.apply(*cell, half(q[col], src));
                }
            }
        }
    }
    // 6. Every survivor: M into P half wmax mod 2 (R_r of wmax+1), the
    //    members, window wmax+1, status 0, unpause, START.
    let failed_rids: Vec<u8> = failed
        .iter()
        .flat_map(|&i| (i as u16 + 1).to_be_bytes())
        .collect();
    for &i in &live {
        for (r, mrow) in m.iter().enumerate() {
            let vals: Vec<u64> = rr[r]
                .iter()
                .zip(mrow)
                .map(|(&rv, &mv)| pair_with(pair_with(0, wmax.wrapping_add(1), rv), wmax, mv))
                .collect();
            c.write(i, ARR_P + r as u8, 0, &vals)?;
        }
        c.call(i, MSG_MEMBERS, failed_rids.clone(), false)?;
        c.write(
            i,
            ARR_WINREG,
            0,
            &[Pair {
                lo: wmax.wrapping_add(1),
                hi: 0,
            }
            .to_u64()],
        )?;
        c.write(i, ARR_STATUS, 0, &[0])?;
        // [our choice, beyond §5.6] READY counts too: a failed replica
        // already in wmax + 1 may have counted its READY(wmax + 1) here.
        c.write(i, ARR_READY, 0, &[0, 0])?;
    }
    // START clears PAUSED in the data plane, atomically with the restart.
    for &i in &live {
        c.call(
            i,
            MSG_START,
            wmax.wrapping_add(1).to_be_bytes().to_vec(),
            false,
        )?;
    }
    report.resumed = c.rig.sim.now();
    Ok(report)
}
