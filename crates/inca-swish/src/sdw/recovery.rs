//! SDW recovery and join (specs/swish.md §5.6) by the controller, driven
//! from the rig. Recovery: after fail-stop of replicas F, pause the survivors, bring a lagging
//! one up to wmax, merge R_r(wmax) with every survivor's R_s-source into
//! M, install M as the next R_r, drop F from the groups and masks, and
//! restart everyone in wmax+1 with START. The steps are
//! [`super::recovery_plan::Recovery`]'s; this is their driver over control
//! messages.
//!
//! The controller's RPCs (§4.5) are control messages to each switch's CPU
//! ([`super::program::MSG_READ`] and friends), serial across switches
//! (§5.6, SwiSh §9.2), each paying half the controller RTT (100 µs,
//! spec §8.1) each way on top of the profile's register-operation cost.

use inca_sim::engine::Fault;
use inca_switch::device::ControlMessage;
use inca_switch::Nanos;

use super::program::{MSG_MEMBERS, MSG_PAUSE, MSG_READ, MSG_START, MSG_VALUES, MSG_WRITE};
use super::recovery_plan::{Call, Op, Recovery};
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

    /// One operation of the recovery as a control message.
    fn run(&mut self, call: Call) -> Result<Vec<u64>, String> {
        let i = call.replica;
        match call.op {
            Op::Pause => self.call(i, MSG_PAUSE, vec![1], false),
            Op::Read { arr, first, count } => self.read(i, arr, first, count),
            Op::Write { arr, first, vals } => self.write(i, arr, first, &vals).map(|_| Vec::new()),
            Op::Failed(rids) => {
                let body = rids.iter().flat_map(|r| r.to_be_bytes()).collect();
                self.call(i, MSG_MEMBERS, body, false)
            }
            Op::Start(win) => self.call(i, MSG_START, win.to_be_bytes().to_vec(), false),
        }
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
    let base = rig.base.clone();
    let plan = Recovery::new(n, failed, base.rows, base.cols, base.merge, broken);
    drive(rig, plan)
}

/// Runs §5.6 "Join" now: replica `joiner` (0-based, one of `failed`, the
/// replicas declared failed so far; restarted with empty state) joins the
/// others. `broken` installs it without M, for showing D2/D3 catch it.
pub fn join(
    rig: &mut Rig,
    failed: &[usize],
    joiner: usize,
    broken: bool,
) -> Result<RecoveryReport, String> {
    let n = rig.replicas.len();
    let base = rig.base.clone();
    let plan = Recovery::join(n, failed, joiner, base.rows, base.cols, base.merge, broken);
    drive(rig, plan)
}

/// Runs `plan`'s batches as control messages, one call at a time.
fn drive(rig: &mut Rig, mut plan: Recovery) -> Result<RecoveryReport, String> {
    let started = rig.sim.now();
    let mut c = Ctl { rig, tag: 0 };
    let mut answers: Vec<Vec<u64>> = Vec::new();
    while let Some(batch) = plan.next(&answers)? {
        answers = Vec::with_capacity(batch.len());
        for call in batch {
            answers.push(c.run(call)?);
        }
    }
    Ok(RecoveryReport {
        wmax: plan.wmax(),
        lagging: plan.lagging().to_vec(),
        started,
        resumed: c.rig.sim.now(),
    })
}
