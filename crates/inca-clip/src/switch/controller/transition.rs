//! `Transition(G_new)` (spec §5.6): the steps, each waiting for the
//! driver's barrier (its writes took effect), a Δ_g timer (packets
//! selected before took their path) or the servers' flow-query replies.
//!
//! ```text
//!  2 rec := 1                          → barrier
//!  3 wait Δ_g
//!  4 Q1 = ∪ FLOW_QUERY(v_p)            → every live server answered
//!  5 push/pin Q1 and overflow digests  → barrier   (pin table full: abort)
//!  6 clear BM[p]                       → barrier
//!  7 wait Δ_g; pin overflow digests    → barrier
//!  8 rec := 0; 9 slot p := G_new, v_c+1; 10 cur := p → barrier
//! 11 wait Δ_g; Q3 = ∪ FLOW_QUERY(v_p); push/pin; clear the pin cache → barrier
//! ```
//!
//! "Push/pin" (step 5): a flow whose entry is promotable and known to the
//! controller goes into the switch table while the table admits it (§5.5
//! step 4) — its packets then stay in the switch and no group is asked
//! again — the rest are pinned to the server that reported them
//! ([`super::ControllerConfig::push`] off: all are pinned).

use std::collections::BTreeMap;

use inca_switch::device::Nanos;
use inca_wire::clip::ctl::{CtlBody, CtlMessage};

use super::{Controller, Out, Slot, TOKEN_DELTA};
use crate::flow::FlowKey;
use crate::switch::Command;

/// A deliberate bug in the transition, for showing that the membership
/// campaign catches it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mutation {
    /// The procedure as specified.
    #[default]
    None,
    /// Flip `cur` to the new group at once, before the previous epoch's
    /// flows are pinned and its filter cleared (the new filter is not
    /// ready): steps 2–8 and 11 skipped.
    FlipFirst,
    /// Skip the post-flip query (step 11's Q3): flows known only to the
    /// pin cache lose it when the cache is cleared.
    NoQ3,
    /// TRD: ack CONN_NEW without installing `conn_idx` (connections never
    /// reach the fast path).
    NoConnInstall,
    /// TRD: answer CONN_RELEASE at once without deleting the entry (the
    /// index is freed while the switch still maps the old connection to
    /// it).
    ReleaseWithoutDelete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    RecOn,
    Wait1,
    Query1,
    Pins1,
    Clear,
    Wait2,
    Pins2,
    Flip,
    Wait3,
    Query3,
    Pins3,
    ClearCache,
}

/// One transition in progress.
#[derive(Debug, Clone)]
pub struct Transition {
    members: Vec<u8>,
    p: u8,
    v_p: u16,
    v_c: u16,
    phase: Phase,
    barrier: u64,
    /// Servers whose query answer is still awaited, and their txn ids.
    waiting: BTreeMap<u32, u8>,
    /// Flows the answers named, with their server.
    found: BTreeMap<FlowKey, u8>,
}

impl Transition {
    /// Starts a transition to `members` (checked by the caller).
    pub(super) fn begin(
        ctl: &mut Controller,
        now: Nanos,
        members: Vec<u8>,
        out: &mut Vec<Out>,
    ) -> Transition {
        let c = ctl.cur;
        let p = 1 - c;
        let mut t = Transition {
            members,
            p,
            v_p: ctl.slots[usize::from(p)].ver,
            v_c: ctl.slots[usize::from(c)].ver,
            phase: Phase::RecOn,
            barrier: 0,
            waiting: BTreeMap::new(),
            found: BTreeMap::new(),
        };
        if ctl.config.mutation == super::Mutation::FlipFirst {
            t.flip(ctl, out);
            return t;
        }
        out.push(Out::Cmd(Command::SetRec(true)));
        t.wait_barrier(ctl, out);
        let _ = now;
        t
    }

    fn wait_barrier(&mut self, ctl: &mut Controller, out: &mut Vec<Out>) {
        let (token, cmd) = ctl.barrier();
        self.barrier = token;
        out.push(cmd);
    }

    fn flip(&mut self, ctl: &mut Controller, out: &mut Vec<Out>) {
        out.push(Out::Cmd(Command::SetRec(false)));
        let ver = self.v_c.wrapping_add(1).max(1);
        out.push(Out::Cmd(Command::SetSlot {
            slot: self.p,
            ver,
            members: self.members.clone(),
        }));
        out.push(Out::Cmd(Command::SetCur(self.p)));
        ctl.slots[usize::from(self.p)] = Slot {
            ver,
            members: self.members.clone(),
        };
        // Back in a group: no longer retired (even if the next tick would
        // see it out of the slots again).
        for m in &self.members {
            if let Some(s) = ctl.servers.get_mut(m) {
                s.retired = None;
            }
        }
        ctl.cur = self.p;
        self.phase = Phase::Flip;
        self.wait_barrier(ctl, out);
    }

    /// Sends the flow queries; true if the transition had to abort.
    fn query(&mut self, ctl: &mut Controller, now: Nanos, out: &mut Vec<Out>) -> bool {
        self.waiting.clear();
        self.found.clear();
        if self.v_p != 0 {
            for s in ctl.live() {
                for txn in ctl.request(now, s, CtlBody::FlowQuery { grp_ver: self.v_p }, out) {
                    self.waiting.insert(txn, s);
                }
            }
        }
        self.after_query(ctl, now, out)
    }

    /// Once every answer is in: pin what was found and the overflow
    /// digests; then wait for the pins to take effect. True if the
    /// transition had to abort (the pin table would overflow).
    fn after_query(&mut self, ctl: &mut Controller, now: Nanos, out: &mut Vec<Out>) -> bool {
        if !self.waiting.is_empty() {
            return false;
        }
        let mut want: Vec<(FlowKey, u8)> = std::mem::take(&mut self.found).into_iter().collect();
        want.append(&mut ctl.overflow);
        if !self.pin(ctl, now, want, out) {
            return true;
        }
        self.phase = if self.phase == Phase::Query1 {
            Phase::Pins1
        } else {
            Phase::Pins3
        };
        self.wait_barrier(ctl, out);
        false
    }

    /// Covers `want` (those neither pinned nor promoted yet): pushes the
    /// promotable ones the switch table admits into it (when `push` is
    /// on), pins the rest (§5.6 step 5). False if the pin table would
    /// overflow (the transition is aborted: `rec := 0`, nothing cleared;
    /// entries pushed stay: their flows no longer use the groups).
    fn pin(
        &mut self,
        ctl: &mut Controller,
        now: Nanos,
        want: Vec<(FlowKey, u8)>,
        out: &mut Vec<Out>,
    ) -> bool {
        let mut new: Vec<(FlowKey, u8)> = Vec::new();
        for (f, s) in want {
            if ctl.pins.contains_key(&f) || ctl.is_promoted(&f) || new.iter().any(|(g, _)| *g == f)
            {
                continue;
            }
            if ctl.servers.get(&s).is_none_or(|st| st.failed) {
                continue;
            }
            new.push((f, s));
        }
        if ctl.config.push && !new.is_empty() {
            let pushed: std::collections::BTreeSet<FlowKey> =
                ctl.push_flows(now, new.clone(), out).into_iter().collect();
            new.retain(|(f, _)| !pushed.contains(f));
        }
        if ctl.pins.len() + new.len() > ctl.config.pin_capacity {
            ctl.stats.pin_full += 1;
            out.push(Out::Cmd(Command::SetRec(false)));
            return false;
        }
        for (f, s) in new {
            ctl.pins.insert(f, s);
            ctl.stats.pins += 1;
            out.push(Out::Cmd(Command::PinAdd { flow: f, server: s }));
        }
        true
    }

    /// The driver's barrier `token` came back; true when the transition
    /// is over.
    pub(super) fn on_barrier(
        &mut self,
        ctl: &mut Controller,
        now: Nanos,
        token: u64,
        out: &mut Vec<Out>,
    ) -> bool {
        if token != self.barrier {
            return false;
        }
        let delta = now + ctl.config.delta_g_ns;
        match self.phase {
            Phase::RecOn => {
                self.phase = Phase::Wait1;
                out.push(Out::Timer(delta, TOKEN_DELTA));
            }
            Phase::Pins1 => {
                out.push(Out::Cmd(Command::ClearBloom(self.p)));
                self.phase = Phase::Clear;
                self.wait_barrier(ctl, out);
            }
            Phase::Clear => {
                self.phase = Phase::Wait2;
                out.push(Out::Timer(delta, TOKEN_DELTA));
            }
            Phase::Pins2 => self.flip(ctl, out),
            Phase::Flip => {
                let slots = [ctl.slots[0].members.clone(), ctl.slots[1].members.clone()];
                ctl.history.push((now, super::Event::Slots(slots)));
                if ctl.config.mutation == super::Mutation::FlipFirst {
                    ctl.stats.transitions += 1;
                    return true;
                }
                self.phase = Phase::Wait3;
                out.push(Out::Timer(delta, TOKEN_DELTA));
            }
            Phase::Pins3 => {
                out.push(Out::Cmd(Command::ClearPinCache));
                self.phase = Phase::ClearCache;
                self.wait_barrier(ctl, out);
            }
            Phase::ClearCache => {
                ctl.stats.transitions += 1;
                return true;
            }
            Phase::Wait1 | Phase::Query1 | Phase::Wait2 | Phase::Wait3 | Phase::Query3 => {}
        }
        false
    }

    /// The Δ_g timer fired; true when the transition is over.
    pub(super) fn on_delta(
        &mut self,
        ctl: &mut Controller,
        now: Nanos,
        out: &mut Vec<Out>,
    ) -> bool {
        match self.phase {
            Phase::Wait1 => {
                self.phase = Phase::Query1;
                self.query(ctl, now, out)
            }
            Phase::Wait2 => {
                let want = std::mem::take(&mut ctl.overflow);
                if !self.pin(ctl, now, want, out) {
                    return true;
                }
                self.phase = Phase::Pins2;
                self.wait_barrier(ctl, out);
                false
            }
            Phase::Wait3 => {
                self.phase = Phase::Query3;
                if ctl.config.mutation == super::Mutation::NoQ3 {
                    self.waiting.clear();
                    self.found.clear();
                    return self.after_query(ctl, now, out);
                }
                self.query(ctl, now, out)
            }
            _ => false,
        }
    }

    fn take_items(
        &mut self,
        sender: u8,
        items: &[inca_wire::clip::ctl::FlowInfo],
        ctl: &mut Controller,
    ) {
        for i in items {
            let f = FlowKey(i.flow);
            match self.found.get(&f) {
                Some(s) if *s != sender => ctl.stats.query_conflicts += 1,
                Some(_) => {}
                None => {
                    self.found.insert(f, sender);
                }
            }
        }
    }

    /// A reply from a server.
    pub(super) fn on_reply(
        &mut self,
        ctl: &mut Controller,
        now: Nanos,
        msg: &CtlMessage,
        out: &mut Vec<Out>,
    ) -> bool {
        if !matches!(self.phase, Phase::Query1 | Phase::Query3) {
            return false;
        }
        let Some(&s) = self.waiting.get(&msg.txn_id) else {
            return false;
        };
        if s != msg.sender {
            return false;
        }
        if let CtlBody::FlowQueryReply { items } = &msg.body {
            self.take_items(s, items, ctl);
        }
        if !msg.more {
            self.waiting.remove(&msg.txn_id);
        }
        self.after_query(ctl, now, out)
    }

    /// A request got no answer after every retry: its server's flows are
    /// treated as gone.
    pub(super) fn on_lost(
        &mut self,
        ctl: &mut Controller,
        now: Nanos,
        _to: u8,
        msg: &CtlMessage,
        out: &mut Vec<Out>,
    ) -> bool {
        if self.waiting.remove(&msg.txn_id).is_none() {
            return false;
        }
        self.after_query(ctl, now, out)
    }

    /// Server `id` failed.
    pub(super) fn on_failure(
        &mut self,
        ctl: &mut Controller,
        now: Nanos,
        id: u8,
        out: &mut Vec<Out>,
    ) -> bool {
        if !matches!(self.phase, Phase::Query1 | Phase::Query3) {
            return false;
        }
        self.waiting.retain(|_, s| *s != id);
        self.found.retain(|_, s| *s != id);
        self.after_query(ctl, now, out)
    }
}
