//! The history recorder (spec §6.3 Recording): per RedPlane flow (key), the
//! inputs that entered a RedPlane switch (time, packet id, switch, bytes),
//! the outputs released (time, id, switch, bytes, observed version), and
//! the store's committed log and lease grants for the key.
//!
//! Packet identity [our choice]: the simulator's UDP workloads write a
//! probe header into the first 24 payload bytes ([`inca_wire::Probe`]:
//! magic, flow index, sequence number, send time), so an input is
//! identified by (probe flow, probe seq). An output is matched by the same
//! two fields even when its first 4 payload bytes (the probe magic) were
//! rewritten by an app; inca's Sync-Counter stamps its count after the
//! probe, so this leniency is only a safeguard. Packets
//! without a probe (TCP, replayed traces) fall back to (IPv4
//! Identification, FNV-1a of the transport payload after its first 4
//! bytes); such ids can collide, in which case an output is attributed to
//! the earliest unmatched input with that id, and an output no input
//! explains is counted in [`FlowHistory::unmatched_outputs`].
//!
//! Memory is bounded: at most `max_flows` flows and `cap_per_flow` events
//! of each kind per flow; what does not fit is counted, never silently
//! lost, and a flow that overflowed is reported as incomplete (the
//! checkers then skip it rather than report false violations).
//!
//! [`check_recorder`] runs the linearizability checkers over every flow,
//! and [`FlowHistory::monitor_events`] feeds the runtime monitor.
//!
//! [`SharedRecorder`] plugs into the switch's [`crate::switch::Observer`]
//! and the store's [`crate::store::observer::StoreObserver`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use inca_wire::Probe;

use super::linearizability::{
    check_a, check_b, Commit, DecodeState, Kind, Op, Verdict, Version, A_BUDGET,
};

/// How a packet is identified across the switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PacketId {
    /// From the simulator's probe header.
    Probe {
        /// Probe flow index.
        flow: u32,
        /// Probe sequence number.
        seq: u64,
    },
    /// Fallback: IPv4 Identification and a payload digest.
    Digest {
        /// IPv4 Identification.
        ip_id: u16,
        /// FNV-1a of the transport payload from byte 4 on.
        digest: u64,
    },
}

impl PacketId {
    /// A single number for reports.
    pub fn as_u64(&self) -> u64 {
        match *self {
            PacketId::Probe { flow, seq } => (u64::from(flow) << 40) ^ seq,
            PacketId::Digest { ip_id, digest } => digest ^ u64::from(ip_id),
        }
    }
}

/// Where the transport payload starts in an Ethernet frame, if it is
/// IPv4 UDP or TCP.
fn payload(frame: &[u8]) -> Option<(&[u8], u16)> {
    let p = inca_apps::headers::parse(frame).ok()?;
    if !p.ipv4 || !p.has_ports {
        return None;
    }
    let l3 = usize::from(p.l3);
    let l4 = usize::from(p.l4);
    let ip_id = u16::from_be_bytes([*frame.get(l3 + 4)?, *frame.get(l3 + 5)?]);
    let start = match p.proto {
        17 => l4 + 8,
        6 => l4 + usize::from(*frame.get(l4 + 12)? >> 4) * 4,
        _ => return None,
    };
    Some((frame.get(start..)?, ip_id))
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The identity of a frame. `strict` requires the probe magic (inputs);
/// outputs accept a probe whose magic was overwritten.
pub fn packet_id(frame: &[u8], strict: bool) -> Option<PacketId> {
    let (pl, ip_id) = payload(frame)?;
    if let Some(p) = Probe::parse(pl) {
        return Some(PacketId::Probe {
            flow: p.flow,
            seq: p.seq,
        });
    }
    if !strict && pl.len() >= 24 {
        let flow = u32::from_be_bytes([pl[4], pl[5], pl[6], pl[7]]);
        let mut s = [0u8; 8];
        s.copy_from_slice(&pl[8..16]);
        return Some(PacketId::Probe {
            flow,
            seq: u64::from_be_bytes(s),
        });
    }
    Some(PacketId::Digest {
        ip_id,
        digest: fnv1a(pl.get(4..).unwrap_or(&[])),
    })
}

/// A packet entering the RedPlane ingress.
#[derive(Clone, Debug)]
pub struct Input {
    /// Time, ns.
    pub time: u64,
    /// Identity (`None`: not IPv4 UDP/TCP).
    pub id: Option<PacketId>,
    /// Switch id.
    pub switch: u32,
    /// The frame (header window).
    pub bytes: Vec<u8>,
    /// For a write, the version the switch issued it under.
    pub issued: Option<Version>,
    /// When the app ran on it (at arrival, or when re-injected after a
    /// grant); `None`: it never ran (yet).
    pub ran_at: Option<u64>,
    /// The end of the lease it ran under (ns).
    pub lease_until: Option<u64>,
    /// A copy the network made between switch and store (a duplicated
    /// LEASE_NEW or grant ack re-injects the packet once more): a second
    /// input with the original's time, bytes and id [our choice, see
    /// [`Recorder::ran`]].
    pub duplicate: bool,
}

/// A released output.
#[derive(Clone, Debug)]
pub struct Output {
    /// Time, ns.
    pub time: u64,
    /// Identity, read as for inputs.
    pub id: Option<PacketId>,
    /// A probe identity read without the magic (an app may have rewritten
    /// it); tried when `id` matches no input.
    pub alt_id: Option<PacketId>,
    /// Switch id.
    pub switch: u32,
    /// The frame (header window).
    pub bytes: Vec<u8>,
    /// The (fence, seq) it observed.
    pub version: Version,
}

/// A lease grant for the key.
#[derive(Clone, Debug)]
pub struct Grant {
    /// Commit time, ns.
    pub time: u64,
    /// New owner (IPv4 as u32).
    pub owner: u32,
    /// Base = fence.
    pub base: u16,
    /// True for NEW (the key was created), false for MIGRATE.
    pub new: bool,
}

/// Everything recorded for one flow.
#[derive(Clone, Debug, Default)]
pub struct FlowHistory {
    /// Inputs in arrival order.
    pub inputs: Vec<Input>,
    /// Outputs in release order.
    pub outputs: Vec<Output>,
    /// The store's committed log (writes and grant fences).
    pub commits: Vec<Commit>,
    /// Commit owners, parallel to `commits` (IPv4 as u32, 0 = none).
    pub commit_owners: Vec<u32>,
    /// Lease grants.
    pub grants: Vec<Grant>,
    /// Events not stored because the per-flow cap was reached.
    pub overflow: u64,
    /// Outputs no recorded input explains (set by [`FlowHistory::ops`]).
    pub unmatched_outputs: u64,
    /// For each output, the input it was attributed to (set by
    /// [`FlowHistory::ops`]; `None`: unmatched).
    pub attribution: Vec<Option<usize>>,
    /// Leases a switch stopped holding: (time, switch id).
    pub leases_lost: Vec<(u64, u32)>,
    /// The store head's lease record over time: (time, owner IPv4 as u32
    /// or none, expiry).
    pub store_leases: Vec<(u64, Option<u32>, u64)>,
}

impl FlowHistory {
    /// True when nothing was dropped for the cap.
    pub fn complete(&self) -> bool {
        self.overflow == 0
    }

    /// The history as checker operations: each output is attributed to the
    /// earliest input with its id that has not got an output yet (several
    /// outputs of one input are grouped, in release order). `classify`
    /// is the app's read/write decision on the input frame; `out_bytes`
    /// turns a released frame into what the spec model outputs (e.g. the
    /// packet from its IPv4 header on).
    pub fn ops(
        &mut self,
        classify: impl Fn(&[u8]) -> Kind,
        out_bytes: impl Fn(&[u8]) -> Vec<u8>,
    ) -> Vec<Op<Vec<u8>, Vec<Vec<u8>>>> {
        let mut ops: Vec<Op<Vec<u8>, Vec<Vec<u8>>>> = self
            .inputs
            .iter()
            .enumerate()
            .map(|(i, inp)| Op {
                id: inp.id.map_or(i as u64, |d| d.as_u64()),
                t_in: inp.time,
                input: inp.bytes.clone(),
                kind: classify(&inp.bytes),
                output: None,
                issued: inp.issued,
            })
            .collect();
        let mut by_id: BTreeMap<PacketId, Vec<usize>> = BTreeMap::new();
        for (i, inp) in self.inputs.iter().enumerate() {
            if let Some(id) = inp.id {
                by_id.entry(id).or_default().push(i);
            }
        }
        let mut unmatched = 0;
        let mut attribution = Vec::with_capacity(self.outputs.len());
        for out in &self.outputs {
            let found = |id: Option<PacketId>| id.and_then(|id| by_id.get(&id));
            let Some(cands) = found(out.id).or_else(|| found(out.alt_id)) else {
                unmatched += 1;
                attribution.push(None);
                continue;
            };
            // The earliest input at or before the output that has no output
            // yet; else (several outputs of one input) the latest before it.
            // Best: the input the switch issued this very write for (a
            // duplicated packet is two inputs with one id).
            let exact = cands.iter().copied().find(|&i| {
                ops[i].output.is_none()
                    && ops[i].issued == Some(out.version)
                    && ops[i].t_in <= out.time
            });
            // A byte-identical copy of an output already attributed (same
            // version) is the network duplicating the ack that released
            // it, even when the packet's input was duplicated too.
            if exact.is_none() {
                let bytes = out_bytes(&out.bytes);
                let dup = cands.iter().copied().find(|&i| {
                    ops[i]
                        .output
                        .as_ref()
                        .is_some_and(|o| o.2 == out.version && o.1.contains(&bytes))
                });
                if dup.is_some() {
                    attribution.push(dup);
                    continue;
                }
            }
            let fresh = exact.or_else(|| {
                cands.iter().copied().find(|&i| {
                    ops[i].t_in <= out.time
                        && ops[i].output.is_none()
                        && ops[i].issued.is_none_or(|v| v == out.version)
                })
            });
            let fresh = fresh.or_else(|| {
                cands
                    .iter()
                    .copied()
                    .find(|&i| ops[i].t_in <= out.time && ops[i].output.is_none())
            });
            let again = cands.iter().copied().rev().find(|&i| {
                ops[i].t_in <= out.time
                    && ops[i].output.as_ref().is_some_and(|o| o.2 == out.version)
            });
            attribution.push(fresh.or(again));
            match fresh.or(again) {
                Some(i) => {
                    let o = ops[i]
                        .output
                        .get_or_insert((out.time, Vec::new(), out.version));
                    let bytes = out_bytes(&out.bytes);
                    // [our choice] A byte-identical copy with the same
                    // version is the network duplicating a packet (here the
                    // ack that released it), which it may do: one output.
                    if !o.1.contains(&bytes) {
                        o.1.push(bytes);
                    }
                }
                None => unmatched += 1,
            }
        }
        self.unmatched_outputs = unmatched;
        self.attribution = attribution;
        ops
    }
}

impl FlowHistory {
    /// The monitor events this history implies (spec §6.2 items 1, 2, 3
    /// and 8): the head's lease records, tail commits, grants, the switches'
    /// lease uses (each app run) and losses, and releases, in time order. A release's
    /// `computed_at` is when the app ran on its matched input (the output
    /// time when no input matches). `switch_ip` maps a switch id (the switch observer's)
    /// to its RedPlane IPv4 address as u32 (the store's owner id).
    pub fn monitor_events(
        &mut self,
        key: &[u8],
        switch_ip: impl Fn(u32) -> u32,
    ) -> Vec<super::invariants::Event> {
        self.monitor_events_with(key, &[], switch_ip)
    }

    /// [`FlowHistory::monitor_events`] with `lost`: losses of every key's
    /// lease (a switch restart, see [`Recorder::leases_lost_all`]) besides
    /// the flow's own.
    pub fn monitor_events_with(
        &mut self,
        key: &[u8],
        lost: &[(u64, u32)],
        switch_ip: impl Fn(u32) -> u32,
    ) -> Vec<super::invariants::Event> {
        use super::invariants::Event;
        self.ops(|_| Kind::Read, |b| b.to_vec());
        let mut ev: Vec<(u64, u8, Event)> = Vec::new();
        for c in &self.commits {
            let e = Event::Commit {
                time: c.time,
                key: key.to_vec(),
                version: c.version,
            };
            ev.push((c.time, 0, e));
        }
        for g in &self.grants {
            let e = Event::Grant {
                time: g.time,
                key: key.to_vec(),
                owner: g.owner,
                base: g.base,
            };
            ev.push((g.time, 1, e));
        }
        for (n, o) in self.outputs.iter().enumerate() {
            // When the app ran on the input (a re-injected packet runs after
            // its grant, well after it arrived); a copy of an output the
            // network duplicated was computed with the original.
            let computed_at = self
                .attribution
                .get(n)
                .copied()
                .flatten()
                .and_then(|i| self.inputs.get(i))
                .map_or(o.time, |i| i.ran_at.unwrap_or(i.time));
            let e = Event::Release {
                time: o.time,
                switch: switch_ip(o.switch),
                key: key.to_vec(),
                version: o.version,
                computed_at,
            };
            ev.push((o.time, 3, e));
        }
        for &(time, owner, expiry) in &self.store_leases {
            let e = Event::StoreLease {
                time,
                key: key.to_vec(),
                owner,
                expiry,
            };
            ev.push((time, 0, e));
        }
        for &(time, switch) in lost.iter().chain(&self.leases_lost) {
            let e = Event::LeaseLost {
                time,
                switch: switch_ip(switch),
                key: Some(key.to_vec()),
            };
            ev.push((time, 1, e));
        }
        for i in &self.inputs {
            if let (Some(time), Some(until)) = (i.ran_at, i.lease_until) {
                let e = Event::LeaseUsed {
                    time,
                    switch: switch_ip(i.switch),
                    key: key.to_vec(),
                    until,
                };
                ev.push((time, 2, e));
            }
        }
        // Store records, commits and grants before a switch's losses, uses
        // and releases at equal times: a release at the commit's instant
        // is legal.
        ev.sort_by_key(|&(t, rank, _)| (t, rank));
        ev.into_iter().map(|(_, _, e)| e).collect()
    }
}

/// One flow's verdicts from [`check_recorder`].
#[derive(Clone, Debug)]
pub struct FlowVerdict {
    /// The flow key.
    pub key: Vec<u8>,
    /// Operations checked.
    pub ops: usize,
    /// Checker B's verdict.
    pub b: Verdict,
    /// Checker A's verdict, when it was asked for.
    pub a: Option<Verdict>,
    /// Outputs no input explains.
    pub unmatched_outputs: u64,
}

/// Runs Checker B (and Checker A when `with_a`, on flows of at most
/// `a_max_ops` operations) over every complete flow of the recorder; flows
/// that overflowed their cap are reported Inconclusive. `spec` builds the
/// reference model of a key (e.g. an
/// [`super::linearizability::AppSpec`] with the key's
/// `store_init` value); `classify` and `out_bytes` are as in
/// [`FlowHistory::ops`].
pub fn check_recorder<M, F>(
    rec: &mut Recorder,
    spec: F,
    classify: impl Fn(&[u8]) -> Kind,
    out_bytes: impl Fn(&[u8]) -> Vec<u8>,
    with_a: bool,
    a_max_ops: usize,
) -> Vec<FlowVerdict>
where
    M: DecodeState<Input = Vec<u8>, Output = Vec<Vec<u8>>>,
    F: Fn(&[u8]) -> M,
{
    let mut out = Vec::new();
    for (key, flow) in rec.flows_mut().iter_mut() {
        if !flow.complete() {
            out.push(FlowVerdict {
                key: key.clone(),
                ops: flow.inputs.len(),
                b: Verdict::Inconclusive(format!("{} events over the per-flow cap", flow.overflow)),
                a: None,
                unmatched_outputs: 0,
            });
            continue;
        }
        let ops = flow.ops(&classify, &out_bytes);
        let m = spec(key);
        let b = check_b(&m, &ops, &flow.commits);
        let a = (with_a && ops.len() <= a_max_ops).then(|| check_a(&m, &ops, A_BUDGET));
        out.push(FlowVerdict {
            key: key.clone(),
            ops: ops.len(),
            b,
            a,
            unmatched_outputs: flow.unmatched_outputs,
        });
    }
    out
}

/// Counters of the whole recorder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecorderStats {
    /// Inputs recorded.
    pub inputs: u64,
    /// Outputs recorded.
    pub outputs: u64,
    /// Commits recorded.
    pub commits: u64,
    /// Events dropped for the per-flow cap.
    pub overflow: u64,
    /// Events dropped because `max_flows` flows were already tracked.
    pub untracked: u64,
    /// Inputs recorded as network copies of another (see [`Recorder::ran`]).
    pub duplicates: u64,
    /// Commits reported a second time (by a new tail) and ignored.
    pub repeated_commits: u64,
}

/// Records per-flow histories with bounded memory.
#[derive(Clone, Debug)]
pub struct Recorder {
    flows: BTreeMap<Vec<u8>, FlowHistory>,
    lost_all: Vec<(u64, u32)>,
    cap_per_flow: usize,
    max_flows: usize,
    stats: RecorderStats,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new(DEFAULT_CAP_PER_FLOW, DEFAULT_MAX_FLOWS)
    }
}

/// Default events of each kind kept per flow (Checker A handles ~200 ops;
/// Checker B any number) [our choice].
pub const DEFAULT_CAP_PER_FLOW: usize = 4096;
/// Default number of flows tracked [our choice].
pub const DEFAULT_MAX_FLOWS: usize = 65_536;
/// Store lease records kept per flow, as a multiple of the per-flow cap
/// (one per accepted request) [our choice].
pub const STORE_LEASE_FACTOR: usize = 4;

impl Recorder {
    /// A recorder keeping at most `cap_per_flow` events of each kind per
    /// flow and at most `max_flows` flows.
    pub fn new(cap_per_flow: usize, max_flows: usize) -> Self {
        Recorder {
            flows: BTreeMap::new(),
            lost_all: Vec::new(),
            cap_per_flow,
            max_flows,
            stats: RecorderStats::default(),
        }
    }

    fn flow(&mut self, key: &[u8]) -> Option<&mut FlowHistory> {
        if !self.flows.contains_key(key) {
            if self.flows.len() >= self.max_flows {
                self.stats.untracked += 1;
                return None;
            }
            self.flows.insert(key.to_vec(), FlowHistory::default());
        }
        self.flows.get_mut(key)
    }

    /// A data packet entered a RedPlane switch.
    pub fn input(&mut self, time: u64, switch: u32, key: &[u8], frame: &[u8]) {
        let cap = self.cap_per_flow;
        let Some(f) = self.flow(key) else { return };
        if f.inputs.len() >= cap {
            f.overflow += 1;
            self.stats.overflow += 1;
            return;
        }
        f.inputs.push(Input {
            time,
            id: packet_id(frame, true),
            switch,
            bytes: frame.to_vec(),
            issued: None,
            ran_at: None,
            lease_until: None,
            duplicate: false,
        });
        self.stats.inputs += 1;
    }

    /// The app ran on a packet of `key` at `time` (see
    /// [`crate::switch::Observer::ran`]). At arrival it is the input just
    /// recorded; a re-injected packet is the earliest input with its id
    /// that has not run. A re-injected packet whose inputs have all run is
    /// a copy the network made between switch and store: it is recorded
    /// as one more input, right after the one it copies, with its time
    /// [our choice: both copies entered the network at that instant; the
    /// switch runs the app once per copy, as it would for a packet
    /// duplicated before the switch].
    pub fn ran(&mut self, time: u64, run: &crate::switch::Run<'_>) {
        let (switch, key, frame) = (run.switch, run.key, run.frame);
        let id = packet_id(frame, true);
        let until = Some(run.lease_until);
        let cap = self.cap_per_flow;
        let Some(f) = self.flows.get_mut(key) else {
            return;
        };
        let same = |i: &Input| i.switch == switch && i.id == id;
        if !run.reinjected {
            if let Some(i) = f.inputs.iter_mut().rev().find(|i| same(i)) {
                if i.ran_at.is_none() {
                    i.ran_at = Some(time);
                    i.lease_until = until;
                }
            }
            return;
        }
        if let Some(i) = f.inputs.iter_mut().find(|i| same(i) && i.ran_at.is_none()) {
            i.ran_at = Some(time);
            i.lease_until = until;
            return;
        }
        let Some(at) = f.inputs.iter().rposition(same) else {
            return;
        };
        if f.inputs.len() >= cap {
            f.overflow += 1;
            self.stats.overflow += 1;
            return;
        }
        let copy = Input {
            ran_at: Some(time),
            lease_until: until,
            issued: None,
            duplicate: true,
            bytes: frame.to_vec(),
            ..f.inputs[at].clone()
        };
        f.inputs.insert(at + 1, copy);
        self.stats.inputs += 1;
        self.stats.duplicates += 1;
    }

    /// Switch `switch` issued a write at `version` at `time` for the packet
    /// `frame` (recorded as an input before, possibly re-injected since):
    /// tags the input the app just ran on (see [`Recorder::ran`]), else the
    /// latest untagged input with its id.
    pub fn issued(&mut self, time: u64, switch: u32, key: &[u8], frame: &[u8], version: Version) {
        let id = packet_id(frame, true);
        let Some(f) = self.flows.get_mut(key) else {
            return;
        };
        let untagged = |i: &Input| i.switch == switch && i.id == id && i.issued.is_none();
        let at = f
            .inputs
            .iter()
            .rposition(|i| untagged(i) && i.ran_at == Some(time))
            .or_else(|| f.inputs.iter().rposition(untagged));
        if let Some(at) = at {
            f.inputs[at].issued = Some(version);
        }
    }

    /// An output was released.
    pub fn output(&mut self, time: u64, switch: u32, key: &[u8], frame: &[u8], version: Version) {
        let cap = self.cap_per_flow;
        let Some(f) = self.flow(key) else { return };
        if f.outputs.len() >= cap {
            f.overflow += 1;
            self.stats.overflow += 1;
            return;
        }
        f.outputs.push(Output {
            time,
            id: packet_id(frame, true),
            alt_id: packet_id(frame, false).filter(|p| matches!(p, PacketId::Probe { .. })),
            switch,
            bytes: frame.to_vec(),
            version,
        });
        self.stats.outputs += 1;
    }

    /// The store committed a mutation of `key`. A commit with seq == fence
    /// is a grant's fence (or the new record), not a write.
    pub fn commit(
        &mut self,
        time: u64,
        key: &[u8],
        fence: u16,
        seq: u16,
        value: &[u8],
        owner: u32,
    ) {
        let cap = self.cap_per_flow;
        let Some(f) = self.flow(key) else { return };
        // A new tail re-reports what its dead predecessor reported (see
        // crate::store::observer): the same version with the same value.
        // Versions of a key commit in increasing order (§6.2.4), so the
        // scan stops at the first older one: O(1) for a new commit.
        let version = (fence, seq);
        if f.commits
            .iter()
            .rev()
            .take_while(|c| c.version >= version)
            .any(|c| c.version == version && c.value == value)
        {
            self.stats.repeated_commits += 1;
            return;
        }
        if f.commits.len() >= cap {
            f.overflow += 1;
            self.stats.overflow += 1;
            return;
        }
        f.commits.push(Commit {
            version: (fence, seq),
            value: value.to_vec(),
            time,
            grant: seq == fence,
        });
        f.commit_owners.push(owner);
        self.stats.commits += 1;
    }

    /// Switch `switch` stopped holding the lease of `key`, or of every key
    /// (`None`).
    pub fn lease_lost(&mut self, time: u64, switch: u32, key: Option<&[u8]>) {
        let cap = self.cap_per_flow;
        match key {
            None => {
                if self.lost_all.len() < cap {
                    self.lost_all.push((time, switch));
                } else {
                    // Every flow misses it: none can be judged fully.
                    for f in self.flows.values_mut() {
                        f.overflow += 1;
                    }
                    self.stats.overflow += 1;
                }
            }
            Some(key) => {
                let Some(f) = self.flows.get_mut(key) else {
                    return;
                };
                if f.leases_lost.len() >= cap {
                    f.overflow += 1;
                    self.stats.overflow += 1;
                    return;
                }
                f.leases_lost.push((time, switch));
            }
        }
    }

    /// Losses of every key's lease (a switch restart): (time, switch id).
    pub fn leases_lost_all(&self) -> &[(u64, u32)] {
        &self.lost_all
    }

    /// The store head's lease record of `key` changed. Every accepted
    /// request extends it, so a flow keeps up to [`STORE_LEASE_FACTOR`] ×
    /// the per-flow cap of these.
    pub fn store_lease(&mut self, time: u64, key: &[u8], owner: Option<u32>, expiry: u64) {
        let cap = self.cap_per_flow.saturating_mul(STORE_LEASE_FACTOR);
        let Some(f) = self.flow(key) else { return };
        if f.store_leases.len() >= cap {
            f.overflow += 1;
            self.stats.overflow += 1;
            return;
        }
        f.store_leases.push((time, owner, expiry));
    }

    /// The store granted a lease on `key`.
    pub fn grant(&mut self, time: u64, key: &[u8], owner: u32, base: u16, new: bool) {
        let cap = self.cap_per_flow;
        let Some(f) = self.flow(key) else { return };
        if f.grants.len() >= cap {
            f.overflow += 1;
            self.stats.overflow += 1;
            return;
        }
        f.grants.push(Grant {
            time,
            owner,
            base,
            new,
        });
    }

    /// The recorded flows, by key.
    pub fn flows(&self) -> &BTreeMap<Vec<u8>, FlowHistory> {
        &self.flows
    }

    /// Mutable access (for [`FlowHistory::ops`]).
    pub fn flows_mut(&mut self) -> &mut BTreeMap<Vec<u8>, FlowHistory> {
        &mut self.flows
    }

    /// Counters.
    pub fn stats(&self) -> RecorderStats {
        self.stats
    }
}

/// A recorder shared between the switches' and the stores' observer hooks
/// (the switch hook takes `&self` and must be `Send + Sync`).
#[derive(Clone, Debug, Default)]
pub struct SharedRecorder(pub Arc<Mutex<Recorder>>);

impl SharedRecorder {
    /// Wraps a recorder.
    pub fn new(r: Recorder) -> Self {
        SharedRecorder(Arc::new(Mutex::new(r)))
    }

    /// Runs `f` on the recorder (a poisoned lock is recovered: the
    /// recorder holds plain data).
    pub fn with<T>(&self, f: impl FnOnce(&mut Recorder) -> T) -> T {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g)
    }
}

impl crate::switch::Observer for SharedRecorder {
    fn input(&self, at: u64, switch: u32, key: &[u8], frame: &[u8]) {
        self.with(|r| r.input(at, switch, key, frame));
    }

    fn output(&self, at: u64, switch: u32, key: &[u8], frame: &[u8], version: (u16, u16)) {
        self.with(|r| r.output(at, switch, key, frame, version));
    }

    fn issued(&self, at: u64, switch: u32, key: &[u8], frame: &[u8], version: (u16, u16)) {
        self.with(|r| r.issued(at, switch, key, frame, version));
    }

    fn ran(&self, at: u64, run: &crate::switch::Run<'_>) {
        self.with(|r| r.ran(at, run));
    }

    fn lease_lost(&self, at: u64, switch: u32, key: Option<&[u8]>) {
        self.with(|r| r.lease_lost(at, switch, key));
    }
}

impl crate::store::observer::StoreObserver for SharedRecorder {
    fn committed(&mut self, e: &crate::store::observer::CommitEvent<'_>) {
        let owner = e.owner.map_or(0, u32::from);
        self.with(|r| r.commit(e.time, e.key, e.fence, e.seq, e.value, owner));
    }

    fn lease_changed(&mut self, e: &crate::store::observer::LeaseEvent<'_>) {
        let owner = e.owner.map(u32::from);
        self.with(|r| r.store_lease(e.time, e.key, owner, e.expiry));
    }

    fn lease_granted(&mut self, e: &crate::store::observer::GrantEvent<'_>) {
        let new = matches!(e.kind, crate::store::observer::GrantKind::New);
        self.with(|r| r.grant(e.time, e.key, u32::from(e.owner), e.base, new));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet/IPv4/UDP frame with the given payload.
    fn udp(ip_id: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12] = 0x08;
        f[13] = 0x00;
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        let total = (20 + 8 + payload.len()) as u16;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[4..6].copy_from_slice(&ip_id.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        let sum = inca_wire::checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        let udp = &mut f[34..42];
        udp[0..2].copy_from_slice(&1000u16.to_be_bytes());
        udp[2..4].copy_from_slice(&2000u16.to_be_bytes());
        udp[4..6].copy_from_slice(&(8 + payload.len() as u16).to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn probe(flow: u32, seq: u64) -> Vec<u8> {
        let mut b = vec![0u8; 32];
        assert!(Probe {
            flow,
            seq,
            tx_time: 7
        }
        .write(&mut b));
        b
    }

    #[test]
    fn probe_ids_survive_a_stamped_count() {
        let inp = udp(1, &probe(3, 9));
        assert_eq!(
            packet_id(&inp, true),
            Some(PacketId::Probe { flow: 3, seq: 9 })
        );
        let mut stamped = probe(3, 9);
        stamped[0..4].copy_from_slice(&5u32.to_be_bytes());
        let out = udp(1, &stamped);
        assert_eq!(
            packet_id(&out, true),
            Some(PacketId::Digest {
                ip_id: 1,
                digest: fnv1a(&stamped[4..])
            })
        );
        assert_eq!(
            packet_id(&out, false),
            Some(PacketId::Probe { flow: 3, seq: 9 })
        );
        assert_eq!(packet_id(&[0u8; 10], true), None);
    }

    fn run<'a>(key: &'a [u8], frame: &'a [u8], reinjected: bool) -> crate::switch::Run<'a> {
        crate::switch::Run {
            switch: 1,
            key,
            frame,
            reinjected,
            lease_until: 1_000,
        }
    }

    /// Campaign seed 32: the network duplicated the grant ack carrying a
    /// packet, the switch re-injected and ran it twice (two writes, two
    /// outputs). The copy is a second input with the original's time, and
    /// each output is computed when its copy ran.
    #[test]
    fn a_packet_run_twice_is_two_inputs() {
        let mut r = Recorder::default();
        let key = b"k".as_slice();
        let frame = udp(1, &probe(0, 10));
        r.input(10, 1, key, &frame);
        r.ran(20, &run(key, &frame, true));
        r.issued(20, 1, key, &frame, (0, 8));
        r.ran(21, &run(key, &frame, true));
        r.issued(21, 1, key, &frame, (0, 9));
        r.output(40, 1, key, &udp(1, &probe(0, 10)), (0, 8));
        r.output(41, 1, key, &udp(1, &probe(0, 10)), (0, 9));
        assert_eq!(r.stats().duplicates, 1);
        let f = r.flows_mut().get_mut(key).unwrap();
        let ops = f.ops(|_| Kind::Write, |b| b.to_vec());
        assert_eq!(ops.len(), 2);
        let got: Vec<_> = ops
            .iter()
            .map(|o| (o.t_in, o.issued, o.output.as_ref().map(|x| x.2)))
            .collect();
        assert_eq!(
            got,
            vec![
                (10, Some((0, 8)), Some((0, 8))),
                (10, Some((0, 9)), Some((0, 9)))
            ]
        );
        let computed: Vec<u64> = f
            .monitor_events(key, |s| s)
            .into_iter()
            .filter_map(|e| match e {
                crate::verify::invariants::Event::Release { computed_at, .. } => Some(computed_at),
                _ => None,
            })
            .collect();
        assert_eq!(computed, vec![20, 21]);
        // Each run is a lease use (§6.2.1, 6.2.2) until the lease's end.
        let used: Vec<(u64, u64)> = f
            .monitor_events(key, |s| s)
            .into_iter()
            .filter_map(|e| match e {
                crate::verify::invariants::Event::LeaseUsed { time, until, .. } => {
                    Some((time, until))
                }
                _ => None,
            })
            .collect();
        assert_eq!(used, vec![(20, 1_000), (21, 1_000)]);
    }

    #[test]
    fn outputs_are_matched_to_inputs_and_caps_are_counted() {
        let mut r = Recorder::new(2, 1);
        let key = b"k".as_slice();
        r.input(10, 1, key, &udp(1, &probe(0, 1)));
        r.input(20, 1, key, &udp(2, &probe(0, 2)));
        r.input(30, 1, key, &udp(3, &probe(0, 3))); // over the cap
        r.input(30, 1, b"other", &udp(3, &probe(1, 3))); // over max_flows
        r.output(25, 1, key, &udp(2, &probe(0, 2)), (0, 1));
        r.output(26, 1, key, &udp(9, &probe(5, 5)), (0, 1)); // explains nothing
        r.commit(22, key, 0, 1, &[1], 7);
        let s = r.stats();
        assert_eq!((s.inputs, s.outputs, s.overflow, s.untracked), (2, 2, 1, 1));
        let f = r.flows_mut().get_mut(key).unwrap();
        assert!(!f.complete());
        let ops = f.ops(|_| Kind::Write, |b| b.to_vec());
        assert_eq!(ops.len(), 2);
        assert!(ops[0].output.is_none());
        assert!(ops[0].output.is_none());
        // An app overwrote the probe magic of packet 1's output: still matched.
        let mut stamped = probe(0, 1);
        stamped[0..4].copy_from_slice(&[0, 0, 0, 9]);
        f.outputs.push(Output {
            time: 27,
            id: packet_id(&udp(1, &stamped), true),
            alt_id: packet_id(&udp(1, &stamped), false),
            switch: 1,
            bytes: vec![],
            version: (0, 1),
        });
        let ops = f.ops(|_| Kind::Write, |b| b.to_vec());
        assert_eq!(ops[0].output.as_ref().map(|o| o.0), Some(27));
        let o = ops[1].output.as_ref().unwrap();
        assert_eq!((o.0, o.2, o.1.len()), (25, (0, 1), 1));
        assert_eq!(f.unmatched_outputs, 1);
        assert!(!f.commits[0].grant);
    }
}
