//! The pull baseline of the rate limiter (specs/swish.md §7): no state is
//! shared between switches; every T_ctrl the controller reads each
//! switch's local per-user counters over RPC, computes per-switch limits
//! `L × local / Σ local` from the deltas, and writes them back.
//!
//! - [`PullProgram`] — the switch: `rl_local[u]` (+1 per packet),
//!   `rl_limit[u]` (tokens per period, the controller's), `rl_quota[u]`
//!   (the bucket); a generator stream refills `quota := limit` every
//!   period. It starts with an equal split, L / spines [our choice].
//! - [`PullController`] — the controller as a sans-IO device, one control
//!   session per switch.
//!
//! RPC [our choice, the §4.5 framing `{op:u8, len:u32, body}`]:
//! [`OP_READ`] (no body) is answered with [`OP_READ`] and the counters
//! (u32 each); [`OP_WRITE`] carries one u32 limit per user and is not
//! answered. The switch CPU pays the profile's register costs: one read of
//! `users` entries, then one write per entry (the model's control plane
//! writes an entry per operation: 40 × 52.6 µs on the tofino profile).
//! The session's one-way latency is half the spec's controller RPC RTT
//! (100 µs, §8.1).

use std::any::Any;

use inca_sim::engine::Node;
use inca_sim::metrics::NodeReport;
use inca_switch::device::{Device, DeviceRng, Input, Output, SessionEvent, SessionId};
use inca_switch::pktgen::{StreamConfig, Trigger};
use inca_switch::{
    AccessError, ArrayDecl, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress,
    Nanos, PacketCtx, PacketKind, ParseError, Program, ProgramReport, RegisterHandle,
};

use inca_wire::swish::ctl::Rpc;

use super::{take, LimiterStats, UserLimit};

/// READ_REG array: the local counters.
pub const ARR_LOCAL: u8 = 0;
/// WRITE_REG array: the limits.
pub const ARR_LIMIT: u8 = 1;
/// The controller's RPC round trip (spec §8.1, [our choice] there).
pub const RPC_RTT: Nanos = 100_000;
/// T_ctrl, the spec's [our choice] (§7): 1 s.
pub const T_CTRL: Nanos = 1_000_000_000;
/// Reads in flight at a switch, at most (more are refused).
pub const PENDING_MAX: usize = 16;

/// An RPC's bytes (the session's §4.5 framing, `inca_wire::swish::ctl`).
fn frame(rpc: Rpc) -> Vec<u8> {
    rpc.to_vec()
        .expect("the limiter's RPCs are a few hundred bytes")
}

#[derive(Debug, Clone, Copy)]
struct Regs {
    local: RegisterHandle<u32>,
    limit: RegisterHandle<u32>,
    quota: RegisterHandle<u32>,
}

/// A switch of the pull baseline.
#[derive(Debug, Clone)]
pub struct PullProgram {
    limit: UserLimit,
    /// Tokens per period it starts with, per user.
    initial: u32,
    regs: Option<Regs>,
    /// Reads in flight: (request, the controller's tag, session).
    pending: Vec<(u64, u32, SessionId)>,
    stats: LimiterStats,
    /// RPCs that were malformed or over [`PENDING_MAX`].
    pub bad_rpc: u64,
}

impl PullProgram {
    /// A switch limiting `limit`'s users, one of `spines` switches.
    pub fn new(limit: UserLimit, spines: u32) -> Result<Self, String> {
        limit.validate()?;
        if spines == 0 {
            return Err("pull: at least one switch".into());
        }
        Ok(PullProgram {
            limit,
            initial: (limit.per_period() / u64::from(spines)) as u32,
            regs: None,
            pending: Vec::new(),
            stats: LimiterStats::default(),
            bad_rpc: 0,
        })
    }

    /// What it counted.
    pub fn stats(&self) -> LimiterStats {
        self.stats
    }

    fn rpc(&mut self, session: SessionId, body: &[u8], cp: &mut ControlPlane<'_>) {
        let Some(r) = self.regs else { return };
        let users = self.limit.users;
        match Rpc::parse(body) {
            Ok(Rpc::ReadReg {
                tag,
                array: ARR_LOCAL,
                start: 0,
                count,
            }) if count == users && self.pending.len() < PENDING_MAX => {
                let req = cp.register_read(r.local, 0, u64::from(users));
                self.pending.push((req, tag, session));
            }
            Ok(Rpc::WriteReg {
                tag,
                array: ARR_LIMIT,
                start: 0,
                values,
            }) if values.len() == users as usize => {
                for (i, v) in values.into_iter().enumerate() {
                    cp.register_write(r.limit, i as u64, v as u32);
                }
                let done = Rpc::Values {
                    tag,
                    values: Vec::new(),
                };
                cp.session_send(session, frame(done));
            }
            _ => self.bad_rpc += 1,
        }
    }
}

impl Program for PullProgram {
    type Meta = ();
    type Digest = ();

    fn name(&self) -> &str {
        "swish_rl_pull"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let m = self.limit.users as usize;
        let local = d.register(ArrayDecl::new("rl_local", m))?;
        let limit = d.register(ArrayDecl::new("rl_limit", m))?;
        let quota = d.register(ArrayDecl::new("rl_quota", m).after(&[limit.id()]))?;
        self.regs = Some(Regs {
            local,
            limit,
            quota,
        });
        Ok(())
    }

    fn parse(&self, _g: Gress, _header: &[u8], _meta: &mut ()) -> Result<(), ParseError> {
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<(), ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        pkt.drop_packet();
        let Some(r) = self.regs else { return Ok(()) };
        if let PacketKind::Generated { packet_id, .. } = pkt.kind() {
            // The refill: quota := limit.
            let i = u64::from(packet_id);
            if u32::from(packet_id) < self.limit.users {
                let tokens = dp.register(r.limit, i, |l| *l)?;
                dp.register(r.quota, i, |q| *q = tokens)?;
                self.stats.estimates += 1;
            }
            return Ok(());
        }
        let Some(u) = self.limit.user_of(pkt.header()) else {
            return Ok(());
        };
        let i = u64::from(u);
        dp.register(r.local, i, |x| *x = x.wrapping_add(1))?;
        if dp.register(r.quota, i, take)? {
            self.stats.passed += 1;
            pkt.forward(self.limit.out_port);
        } else {
            self.stats.dropped += 1;
        }
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        match event {
            ControlEvent::Start => {
                self.pending.clear();
                if let Some(r) = self.regs {
                    for i in 0..u64::from(self.limit.users) {
                        cp.register_write(r.limit, i, self.initial);
                    }
                }
                cp.packet_generator(
                    0,
                    Some(StreamConfig {
                        trigger: Trigger::Timer {
                            period: self.limit.period,
                        },
                        template: vec![0; 64],
                        batch_size: self.limit.users as u16,
                    }),
                );
            }
            ControlEvent::Session(SessionEvent::Message { session, body }) => {
                self.rpc(session, &body, cp)
            }
            ControlEvent::RegisterValues { request, values } => {
                if let Some(k) = self.pending.iter().position(|p| p.0 == request) {
                    let (_, tag, session) = self.pending.swap_remove(k);
                    let values = values.iter().map(|v| u64::from(*v as u32)).collect();
                    cp.session_send(session, frame(Rpc::Values { tag, values }));
                }
            }
            _ => {}
        }
    }

    fn report(&self) -> ProgramReport {
        ProgramReport {
            counters: vec![
                ("rl_passed".into(), self.stats.passed),
                ("rl_dropped".into(), self.stats.dropped),
                ("rl_refills".into(), self.stats.estimates),
                ("rl_bad_rpc".into(), self.bad_rpc),
            ],
            series: Vec::new(),
        }
    }
}

/// The pull controller: every `t_ctrl` it reads every switch's counters,
/// and once all have answered writes each its limits.
#[derive(Debug, Clone)]
pub struct PullController {
    sessions: Vec<SessionId>,
    up: Vec<bool>,
    t_ctrl: Nanos,
    users: usize,
    /// L × period: the tokens per period the switches share.
    full: u64,
    prev: Vec<Vec<u32>>,
    got: Vec<Option<Vec<u32>>>,
    /// Cycles started.
    pub cycles: u64,
    /// Cycles completed (limits written).
    pub written: u64,
    /// Cycles skipped because the previous one had not completed or a
    /// session was down.
    pub skipped: u64,
    /// Answers that did not parse.
    pub bad: u64,
}

impl PullController {
    /// A controller for the switches behind `sessions` (in order).
    pub fn new(sessions: Vec<SessionId>, t_ctrl: Nanos, limit: &UserLimit) -> Self {
        let n = sessions.len();
        let users = limit.users as usize;
        PullController {
            up: vec![false; n],
            sessions,
            t_ctrl: t_ctrl.max(1),
            users,
            full: limit.per_period(),
            prev: vec![vec![0; users]; n],
            got: vec![None; n],
            cycles: 0,
            written: 0,
            skipped: 0,
            bad: 0,
        }
    }

    /// Per-switch limits from the counter deltas: L·period × d_s / Σ d,
    /// exact (the controller's CPU divides); an equal split while a user
    /// is idle everywhere.
    fn limits(&mut self, now_counts: &[Vec<u32>]) -> Vec<Vec<u32>> {
        let n = now_counts.len() as u64;
        let mut out = vec![vec![0u32; self.users]; now_counts.len()];
        for u in 0..self.users {
            let d: Vec<u64> = (0..now_counts.len())
                .map(|s| u64::from(now_counts[s][u].wrapping_sub(self.prev[s][u])))
                .collect();
            let sum: u64 = d.iter().sum();
            for s in 0..now_counts.len() {
                let l = self.full.saturating_mul(d[s]).checked_div(sum);
                out[s][u] = l.unwrap_or(self.full / n).min(u64::from(u32::MAX)) as u32;
            }
        }
        self.prev = now_counts.to_vec();
        out
    }
}

impl Device for PullController {
    fn start(&mut self, now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        out.push(Output::Timer {
            at: now + self.t_ctrl,
            token: 0,
        });
    }

    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        match input {
            Input::Timer { .. } => {
                out.push(Output::Timer {
                    at: now + self.t_ctrl,
                    token: 0,
                });
                let busy = self.got.iter().any(|g| g.is_some()) || self.cycles > self.written;
                if busy || self.up.iter().any(|u| !u) {
                    self.skipped += 1;
                    return;
                }
                self.cycles += 1;
                for &session in &self.sessions {
                    let read = Rpc::ReadReg {
                        tag: self.cycles as u32,
                        array: ARR_LOCAL,
                        start: 0,
                        count: self.users as u32,
                    };
                    out.push(Output::Session {
                        at: now,
                        session,
                        body: frame(read),
                    });
                }
            }
            Input::Session(ev) => {
                let Some(s) = self.sessions.iter().position(|&x| x == ev.session()) else {
                    return;
                };
                match ev {
                    SessionEvent::Up { .. } => self.up[s] = true,
                    SessionEvent::Reset { .. } => {
                        // A lost answer would stall the cycle: start over.
                        self.up[s] = false;
                        self.got = vec![None; self.sessions.len()];
                        self.written = self.cycles;
                    }
                    SessionEvent::Message { body, .. } => match Rpc::parse(&body) {
                        // A write's answer: the limits are in.
                        Ok(Rpc::Values { values, .. }) if values.is_empty() => {}
                        Ok(Rpc::Values { values, .. }) if values.len() == self.users => {
                            let w = values.into_iter().map(|v| v as u32).collect();
                            self.got[s] = Some(w);
                            if self.got.iter().all(|g| g.is_some()) {
                                let counts: Vec<Vec<u32>> =
                                    self.got.iter_mut().filter_map(|g| g.take()).collect();
                                let limits = self.limits(&counts);
                                for (k, l) in limits.iter().enumerate() {
                                    let write = Rpc::WriteReg {
                                        tag: self.cycles as u32,
                                        array: ARR_LIMIT,
                                        start: 0,
                                        values: l.iter().map(|v| u64::from(*v)).collect(),
                                    };
                                    out.push(Output::Session {
                                        at: now,
                                        session: self.sessions[k],
                                        body: frame(write),
                                    });
                                }
                                self.written += 1;
                            }
                        }
                        _ => self.bad += 1,
                    },
                    SessionEvent::Refused { .. } => self.bad += 1,
                }
            }
            _ => {}
        }
    }

    fn restart(&mut self, now: Nanos, rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.got = vec![None; self.sessions.len()];
        self.written = self.cycles;
        self.start(now, rng, out);
    }
}

impl Node for PullController {
    fn kind(&self) -> &'static str {
        "controller"
    }
    fn report(&self, _now: Nanos) -> NodeReport {
        let mut r = NodeReport::default();
        for (k, v) in [
            ("cycles", self.cycles),
            ("written", self.written),
            ("skipped", self.skipped),
            ("bad", self.bad),
        ] {
            r.counters.insert(k.into(), v);
        }
        r
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpc_frames_round_trip_and_refuse_garbage() {
        let write = Rpc::WriteReg {
            tag: 1,
            array: ARR_LIMIT,
            start: 0,
            values: vec![7, 256],
        };
        let f = frame(write.clone());
        assert_eq!(Rpc::parse(&f), Ok(write));
        assert!(Rpc::parse(&f[..7]).is_err());
        assert!(Rpc::parse(&[]).is_err());
    }

    #[test]
    fn limits_follow_the_deltas() {
        let l = UserLimit {
            users: 2,
            ..UserLimit::new([10, 0, 0, 0].into(), 1)
        };
        let mut c = PullController::new(vec![SessionId(1), SessionId(2)], 1_000, &l);
        let lim = c.limits(&[vec![900, 0], vec![100, 0]]);
        assert_eq!(lim, vec![vec![1_800, 1_000], vec![200, 1_000]]);
    }
}
