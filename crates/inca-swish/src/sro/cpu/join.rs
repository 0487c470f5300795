//! Joining at the tail (specs/swish.md §5.2, SwiSh §6.4): the controller
//! attaches a spare replica J as the shadow successor of the tail T
//! (message [`SHADOW`]). T snapshots its table at s_snap = T.applied and
//! streams every entry as SNAP_WRITE(seq = s_snap, req_id = 1, 2, …), then
//! an end marker (flag LAST, req_id 0, no key or value) [our choice, so that
//! J learns s_snap even from an empty table]; from then on T forwards every write it
//! applies to J. J starts at applied = s_snap (`inca_chain`'s `install`),
//! applies live writes in seq order and answers with a cumulative
//! SHADOW_ACK [our choice], applies a snapshot entry only if its key is
//! absent (a live write, seq > s_snap, is newer: the spec's `key_seq[k] <
//! s_snap` test, which insert-if-absent makes the same) and acknowledges
//! every one with SNAP_ACK. T retransmits whatever is unacknowledged every
//! T_sro; J's acknowledgements gate nothing. Until the handover J tunnels
//! every read to the tail and originates no writes (its misses are
//! tunnelled too). Once J has acknowledged the whole snapshot and every
//! write T applied ([`super::Cpu::shadow_done`], which the controller
//! polls), the controller makes J the tail; T's writes J had not
//! acknowledged then go into T's chain log, so they reach J as its
//! predecessor's resends, and J takes over the acks (`take_over_tail`).

use std::collections::BTreeMap;

use inca_chain::ChainNode;
use inca_switch::device::ControlMessage;
use inca_switch::{ControlPlane, MatchSpec};
use inca_wire::swish::sro::{MsgType, NatKey, NatValue};
use inca_wire::swish::{flags, HeaderRepr};

use super::{decode, message, Cpu, Entry};
use crate::addr::Rid;
use crate::sro::facts::Fact;
use crate::sro::program::{reverse_key, translate_out, Objects, SroConfig};
use inca_apps::core::Endpoint;
use inca_apps::nat::Translate;

/// Control message kind: shadow the joiner (body: its rid, u16 BE).
pub const SHADOW: u32 = 0x5352_4F02;

/// The tail's side of a join.
#[derive(Debug, Clone)]
pub(super) struct Shadow {
    j: Rid,
    s_snap: u32,
    snap: BTreeMap<u32, (NatKey, NatValue)>,
    marker_acked: bool,
    live: BTreeMap<u32, Vec<u8>>,
    acked_live: u32,
}

impl Shadow {
    pub(super) fn done(&self, applied: u32) -> bool {
        self.snap.is_empty() && self.marker_acked && self.acked_live >= applied
    }
}

/// The joiner's progress.
#[derive(Debug, Clone, Default)]
pub(super) struct Joiner {
    s_snap: Option<u32>,
}

fn empty(origin: Rid, req: u32) -> Entry {
    Entry {
        origin,
        req,
        key: NatKey {
            ip: [0; 4],
            port: 0,
            proto: 0,
        },
        value: NatValue {
            ip: [0; 4],
            port: 0,
        },
        noop: false,
    }
}

impl Cpu {
    fn send_to_rid(
        &mut self,
        cfg: &SroConfig,
        objs: &Objects,
        to: Rid,
        bytes: &[u8],
        cp: &mut ControlPlane<'_>,
    ) {
        let (mut io, _) = self.io(cfg, objs, cp);
        if let Some(p) = io.peer(to) {
            io.send_to(p, bytes);
        }
    }

    /// T: the controller attached joiner `m.body` as shadow successor.
    pub(super) fn start_shadow(
        &mut self,
        cfg: &SroConfig,
        objs: &Objects,
        m: &ControlMessage,
        cp: &mut ControlPlane<'_>,
    ) {
        let (Some(&[hi, lo]), true) = (m.body.first_chunk::<2>(), self.is_tail(cfg.me.rid)) else {
            self.counters.malformed += 1;
            return;
        };
        let j = u16::from_be_bytes([hi, lo]);
        let s_snap = self.node.applied();
        let snap: BTreeMap<u32, (NatKey, NatValue)> = self
            .node
            .table
            .iter()
            .enumerate()
            .map(|(i, (k, v))| (i as u32 + 1, (*k, *v)))
            .collect();
        self.shadow = Some(Shadow {
            j,
            s_snap,
            snap,
            marker_acked: false,
            live: BTreeMap::new(),
            acked_live: s_snap,
        });
        self.node.capture = true;
        self.node.captured.clear();
        self.shadow_retransmit(cfg, objs, cp);
    }

    /// T: (re)sends every unacknowledged snapshot entry, the marker and
    /// live write.
    pub(super) fn shadow_retransmit(
        &mut self,
        cfg: &SroConfig,
        objs: &Objects,
        cp: &mut ControlPlane<'_>,
    ) {
        let Some(s) = self.shadow.clone() else { return };
        let me = cfg.me.rid;
        for (idx, (key, value)) in &s.snap {
            let e = Entry {
                origin: me,
                req: *idx,
                key: *key,
                value: *value,
                noop: false,
            };
            let b = message(cfg, MsgType::SnapWrite, flags::SNAPSHOT, s.s_snap, &e);
            self.send_to_rid(cfg, objs, s.j, &b, cp);
        }
        if !s.marker_acked {
            let mut b = message(
                cfg,
                MsgType::SnapWrite,
                flags::SNAPSHOT | flags::LAST,
                s.s_snap,
                &empty(me, 0),
            );
            // The marker has no key or value.
            b.truncate(inca_wire::swish::HEADER_LEN + 16);
            b[inca_wire::swish::HEADER_LEN + 12] = 0;
            b[inca_wire::swish::HEADER_LEN + 13] = 0;
            self.send_to_rid(cfg, objs, s.j, &b, cp);
        }
        for b in s.live.values() {
            self.send_to_rid(cfg, objs, s.j, b, cp);
        }
    }

    /// T: forwards the writes applied in this event to the joiner.
    pub(super) fn shadow_forward(
        &mut self,
        cfg: &SroConfig,
        objs: &Objects,
        cp: &mut ControlPlane<'_>,
    ) {
        if self.node.captured.is_empty() {
            return;
        }
        let captured = std::mem::take(&mut self.node.captured);
        let Some(j) = self.shadow.as_ref().map(|s| s.j) else {
            return;
        };
        for (seq, b) in captured {
            if let Some(s) = &mut self.shadow {
                if s.live.len() < cfg.max_log {
                    s.live.insert(seq, b.clone());
                } else {
                    self.counters.refused += 1;
                }
            }
            self.send_to_rid(cfg, objs, j, &b, cp);
        }
    }

    /// T: a SNAP_ACK or SHADOW_ACK from the joiner.
    pub(super) fn shadow_ack(&mut self, h: &HeaderRepr, seq: u32, e: &Entry) {
        let Some(s) = &mut self.shadow else { return };
        if h.src_rid != s.j {
            return;
        }
        if h.msg_type == MsgType::ShadowAck as u8 {
            s.acked_live = s.acked_live.max(seq);
            s.live.retain(|&q, _| q > seq);
        } else if e.req == 0 {
            s.marker_acked = true;
        } else {
            s.snap.remove(&e.req);
        }
    }

    /// T, made a middle by the handover: the live writes J has not
    /// acknowledged go into the chain log (sent to J, its successor now).
    pub(super) fn hand_over(&mut self, cfg: &SroConfig, objs: &Objects, cp: &mut ControlPlane<'_>) {
        self.node.capture = false;
        self.node.captured.clear();
        let Some(s) = self.shadow.take() else { return };
        let (mut io, node) = self.io(cfg, objs, cp);
        for (seq, b) in s.live {
            if let Some((_, _, e)) = decode(&b) {
                node.append(&mut io, seq, e, b);
            }
        }
    }

    /// J: a SNAP_WRITE (an entry, or the end marker).
    pub(super) fn joiner_snapshot(
        &mut self,
        cfg: &SroConfig,
        objs: &Objects,
        h: &HeaderRepr,
        seq: u32,
        e: &Entry,
        cp: &mut ControlPlane<'_>,
    ) {
        let Some(jn) = &mut self.joiner else { return };
        let s_snap = *jn.s_snap.get_or_insert(seq);
        if seq != s_snap {
            self.counters.malformed += 1;
            return;
        }
        if self.node.applied() < s_snap {
            // The state copy starts at s_snap.
            let (mut io, node) = self.io(cfg, objs, cp);
            node.replica.await_state();
            node.install(&mut io, s_snap, false);
            cfg.facts.record(Fact::Snapshot {
                t: cp.now(),
                rid: cfg.me.rid,
                seq: s_snap,
            });
        }
        if h.flags & flags::LAST == 0 && !self.node.table.contains_key(&e.key) {
            let out = translate_out(Endpoint::new(e.value.ip, e.value.port), cfg.outside_port);
            let back = Translate {
                ip: e.key.ip,
                port: e.key.port,
                egress: cfg.inside_port,
            };
            let rk = reverse_key(e.value.ip, e.value.port, e.key.proto);
            cp.table_add(
                objs.nat_out,
                MatchSpec::Exact(e.key.to_bytes().to_vec().into()),
                out,
            );
            cp.table_add(
                objs.nat_in,
                MatchSpec::Exact(rk.to_bytes().to_vec().into()),
                back,
            );
            self.node.table.insert(e.key, e.value);
        }
        let ack = message(cfg, MsgType::SnapAck, 0, seq, &empty(e.origin, e.req));
        self.send_to_rid(cfg, objs, h.src_rid, &ack, cp);
    }

    /// J: a live write from T, applied in order once the copy has started.
    pub(super) fn joiner_write(
        &mut self,
        cfg: &SroConfig,
        objs: &Objects,
        from: Rid,
        payload: &[u8],
        cp: &mut ControlPlane<'_>,
    ) {
        if self.joiner.as_ref().is_none_or(|j| j.s_snap.is_none()) {
            // Before the copy's start is known: T will send it again.
            self.counters.chain_gaps += 1;
            return;
        }
        let (mut io, node) = self.io(cfg, objs, cp);
        node.receive_update(&mut io, payload, false);
        let applied = node.applied();
        let ack = message(cfg, MsgType::ShadowAck, 0, applied, &empty(cfg.me.rid, 0));
        self.send_to_rid(cfg, objs, from, &ack, cp);
    }
}
