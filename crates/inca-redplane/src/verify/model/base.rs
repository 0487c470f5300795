//! The base lease model: the TLA+ machine of [TH] App. C as described in
//! spec §6.1 — one flow, N switches, a store serving a FIFO request queue,
//! a lease timer and a packet source, over reliable FIFO channels.
//!
//! Properties: AtLeastOneAliveSwitch, SingleOwnerInvariant (state
//! invariants), WriteResponseSeq (assertion on the response transition) and
//! Liveness ("a switch with a pending request eventually becomes the owner")
//! under weak fairness of the store, the timer, deliveries and switch steps.
//!
//! A switch is *active* from taking a packet until that packet's write is
//! answered (through the lease request and grant, if it had no lease); the
//! timer runs only while the owner is inactive, so an owner keeps its lease
//! while it has work in hand.
//!
//! Modelling choices where §6.1 is silent [our choice]:
//! - A failed switch loses its queued packets but keeps its pending query
//!   until the store's answer reaches it and is dropped; it may recover only
//!   then ("recovers, clearing its pending query"). Recovery before the
//!   answer would let a stale renew re-take an expired lease, which the
//!   reliable-channel model excludes.
//! - Failing and recovering, and packet injection, are not fair: a switch
//!   may stay down forever and the source may stop early.

use super::{Liveness, Model, Step};

/// Most switches the fixed-size state holds.
pub const MAX_SWITCHES: usize = 3;

/// Base model parameters (spec §6.1: 3 switches, TOTAL_PKTS = 4,
/// LEASE_PERIOD = 2 ticks).
#[derive(Clone, Copy, Debug)]
pub struct BaseConfig {
    /// Number of switches, 1..=3.
    pub switches: usize,
    /// Packets the source injects over the whole run.
    pub total_pkts: u8,
    /// Lease length in timer ticks.
    pub lease_period: u8,
    /// Mutant for the liveness checker's own test: the timer is not fair,
    /// so an owner's lease may never run out.
    pub unfair_timer: bool,
}

impl Default for BaseConfig {
    fn default() -> Self {
        BaseConfig {
            switches: 3,
            total_pkts: 4,
            lease_period: 2,
            unfair_timer: false,
        }
    }
}

/// A request in the store's FIFO queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Req {
    /// Lease request from a switch.
    New(u8),
    /// Renew-write from a switch with its sequence number.
    Renew(u8, u8),
}

/// The store's answer on a switch's channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resp {
    /// Lease granted; carries the store's last seq.
    Grant(u8),
    /// Write acknowledged; carries the store's last seq (the write's).
    Ack(u8),
}

/// One switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Sw {
    /// Up (not failed).
    pub up: bool,
    /// Working on a packet (from taking it until its write is answered).
    pub active: bool,
    /// Packets queued at the switch.
    pub pkts: u8,
    /// Local write sequence number.
    pub seq: u8,
    /// Remaining lease in ticks (the TLA+ `lease[s]`).
    pub lease: u8,
    /// The answer on its way back, if any.
    pub resp: Option<Resp>,
}

/// A global state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The switches (only the first `switches` are used).
    pub sw: [Sw; MAX_SWITCHES],
    /// The store's FIFO (each switch has at most one outstanding request).
    pub queue: Vec<Req>,
    /// The lease owner.
    pub owner: Option<u8>,
    /// The store's last seq.
    pub store_seq: u8,
    /// Packets the source has yet to inject.
    pub remaining: u8,
}

/// An action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    /// The source hands a packet to switch i.
    Inject(u8),
    /// Switch i takes its next packet: lease request, or renew-write.
    Work(u8),
    /// The store serves the head of its queue.
    Serve,
    /// The answer reaches switch i.
    Deliver(u8),
    /// One tick of the owner's lease timer.
    Tick,
    /// Switch i fails.
    Fail(u8),
    /// Switch i recovers.
    Recover(u8),
}

/// The base model.
#[derive(Clone, Copy, Debug)]
pub struct BaseModel {
    /// Parameters.
    pub cfg: BaseConfig,
}

impl BaseModel {
    /// A model with the given parameters (switches clamped to 1..=3).
    pub fn new(mut cfg: BaseConfig) -> Self {
        cfg.switches = cfg.switches.clamp(1, MAX_SWITCHES);
        BaseModel { cfg }
    }

    fn n(&self) -> usize {
        self.cfg.switches
    }
}

impl Model for BaseModel {
    type State = State;
    type Label = Act;

    fn init(&self) -> Vec<State> {
        let mut sw = [Sw::default(); MAX_SWITCHES];
        for s in sw.iter_mut().take(self.n()) {
            s.up = true;
        }
        vec![State {
            sw,
            queue: Vec::new(),
            owner: None,
            store_seq: 0,
            remaining: self.cfg.total_pkts,
        }]
    }

    fn next(&self, s: &State, out: &mut Vec<Step<State, Act>>) {
        let n = self.n();
        let push = |out: &mut Vec<Step<State, Act>>, label, next| {
            out.push(Step {
                label,
                next,
                violation: None,
            })
        };
        for i in 0..n {
            let me = s.sw[i];
            let iu = i as u8;
            if s.remaining > 0 && me.up {
                let mut t = s.clone();
                t.remaining -= 1;
                t.sw[i].pkts += 1;
                push(out, Act::Inject(iu), t);
            }
            if me.up && !me.active && me.pkts > 0 {
                let mut t = s.clone();
                t.sw[i].active = true;
                t.sw[i].pkts -= 1;
                if me.lease == 0 {
                    t.queue.push(Req::New(iu));
                } else {
                    t.sw[i].seq += 1;
                    t.queue.push(Req::Renew(iu, t.sw[i].seq));
                }
                push(out, Act::Work(iu), t);
            }
            if let Some(r) = me.resp {
                let mut t = s.clone();
                t.sw[i].resp = None;
                let mut violation = None;
                match r {
                    // Adopt the store's seq, then write for the packet.
                    Resp::Grant(q) if me.up => {
                        t.sw[i].seq = q + 1;
                        t.queue.push(Req::Renew(iu, q + 1));
                    }
                    Resp::Ack(q) if me.up => {
                        t.sw[i].active = false;
                        if me.seq != q {
                            violation = Some(format!(
                                "WriteResponseSeq: switch {i} has seq {} but the store answered {q}",
                                me.seq
                            ));
                        }
                    }
                    // A down switch drops the answer; its query is over.
                    _ => t.sw[i].active = false,
                }
                out.push(Step {
                    label: Act::Deliver(iu),
                    next: t,
                    violation,
                });
            }
            if me.up && (0..n).any(|j| j != i && s.sw[j].up) {
                let mut t = s.clone();
                t.sw[i].up = false;
                t.sw[i].pkts = 0;
                push(out, Act::Fail(iu), t);
            }
            if !me.up && !me.active {
                let mut t = s.clone();
                t.sw[i].up = true;
                push(out, Act::Recover(iu), t);
            }
        }
        if let Some(&head) = s.queue.first() {
            let mut t = s.clone();
            t.queue.remove(0);
            match head {
                Req::New(i) => {
                    if s.owner.is_some() {
                        // BUFFERING: back into the queue until the lease expires.
                        t.queue.push(head);
                    } else {
                        t.owner = Some(i);
                        t.sw[i as usize].lease = self.cfg.lease_period;
                        t.sw[i as usize].resp = Some(Resp::Grant(s.store_seq));
                    }
                }
                Req::Renew(i, q) => {
                    t.store_seq = q;
                    t.owner = Some(i);
                    t.sw[i as usize].lease = self.cfg.lease_period;
                    t.sw[i as usize].resp = Some(Resp::Ack(q));
                }
            }
            push(out, Act::Serve, t);
        }
        if let Some(o) = s.owner {
            let o = o as usize;
            if !s.sw[o].active && s.sw[o].lease > 0 {
                let mut t = s.clone();
                t.sw[o].lease -= 1;
                if t.sw[o].lease == 0 {
                    t.owner = None;
                }
                push(out, Act::Tick, t);
            }
        }
    }

    fn invariants(&self, s: &State) -> Vec<String> {
        let mut bad = Vec::new();
        if !s.sw[..self.n()].iter().any(|w| w.up) {
            bad.push("AtLeastOneAliveSwitch: every switch is down".to_string());
        }
        for (i, w) in s.sw[..self.n()].iter().enumerate() {
            if Some(i as u8) != s.owner && w.lease != 0 {
                bad.push(format!(
                    "SingleOwnerInvariant: switch {i} holds lease {} but the owner is {:?}",
                    w.lease, s.owner
                ));
            }
        }
        bad
    }
}

impl Liveness for BaseModel {
    fn fair_classes(&self) -> usize {
        2 + 2 * MAX_SWITCHES
    }

    fn fair_class(&self, l: &Act) -> Option<usize> {
        match *l {
            Act::Serve => Some(0),
            Act::Tick if !self.cfg.unfair_timer => Some(1),
            Act::Deliver(i) => Some(2 + i as usize),
            Act::Work(i) => Some(2 + MAX_SWITCHES + i as usize),
            _ => None,
        }
    }

    fn obligations(&self) -> usize {
        self.n()
    }

    fn waiting(&self, i: usize, s: &State) -> bool {
        s.queue.contains(&Req::New(i as u8)) && s.owner != Some(i as u8)
    }

    fn obligation_name(&self, i: usize) -> String {
        format!("Liveness: switch {i}'s lease request is never granted")
    }
}
