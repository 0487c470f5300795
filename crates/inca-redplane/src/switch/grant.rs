//! The RedPlane control plane (spec §5.3, §3.3, §5.7): static setup
//! (`shard_map`, routes, mirror sessions), lease grants punted from
//! ingress (serial per key, slot free-list, `install`, registers, then
//! `lease_tbl` last, then re-injection of the waiting packets), give-up
//! digests, the idle reaper (the `lease_tbl` idle timeout), and head
//! announcements from the store. All timing is the switch's control-plane
//! model.

use std::collections::BTreeSet;

use inca_switch::tm::MirrorSession;
use inca_switch::{ControlEvent, ControlPlane, MatchSpec, PacketOutDest, PortId};
use inca_wire::redplane::HeadAnnounce;

use super::app::{Bytes, RedPlaneApp};
use super::config::Mutant;
use super::proto::{self, ethernet, read_ack, seq_gt, ETHERTYPE_PUNT, ETHERTYPE_REINJECT};
use super::{
    KeyState, RedPlane, RpDigest, BOOK_SESSION, LOOP_SESSION, REASON_ANNOUNCE, REASON_GRANT,
    RENEW_SESSION, SMALL_COPY,
};

fn shard_spec(lo: u16, hi: u16) -> MatchSpec {
    MatchSpec::Range {
        lo: lo.to_be_bytes().to_vec().into(),
        hi: hi.to_be_bytes().to_vec().into(),
        priority: 0,
    }
}

impl<A: RedPlaneApp> RedPlane<A> {
    pub(crate) fn control_block(
        &mut self,
        event: ControlEvent<RpDigest>,
        cp: &mut ControlPlane<'_>,
    ) {
        let Some(o) = self.obj else {
            return;
        };
        match event {
            ControlEvent::Start => {
                // A (re)start: acks of requests sent before now belong to a
                // previous incarnation (see `grant`).
                self.boot = cp.now();
                if let Some(obs) = &self.observer {
                    obs.lease_lost(cp.now(), self.cfg.switch_id, None);
                }
                for s in &self.cfg.shards {
                    cp.table_add(o.shard_map, shard_spec(s.lo, s.hi), *s);
                }
                for r in &self.cfg.routes {
                    let spec = MatchSpec::Lpm {
                        value: r.net.to_vec().into(),
                        prefix_len: u16::from(r.len),
                    };
                    cp.table_add(o.route, spec, r.port);
                }
                let ports: BTreeSet<PortId> = self.cfg.shards.iter().map(|s| s.port).collect();
                let loop_len = self.request_header_len();
                for p in ports {
                    let session = |truncate| MirrorSession {
                        port: p,
                        truncate: Some(truncate),
                    };
                    cp.mirror_session(LOOP_SESSION + p, session(loop_len));
                    cp.mirror_session(BOOK_SESSION + p, session(SMALL_COPY));
                    cp.mirror_session(RENEW_SESSION + p, session(SMALL_COPY));
                }
            }
            ControlEvent::PacketIn {
                port,
                reason: REASON_GRANT,
                frame,
            } => self.grant(cp, port, &frame),
            ControlEvent::PacketIn {
                reason: REASON_ANNOUNCE,
                frame,
                ..
            } => self.announce(cp, &frame),
            ControlEvent::Digest(RpDigest::GaveUp { slot, .. }) => {
                cp.register_write(o.lease_expiry, u64::from(slot), 0u32);
                if let (Some(obs), Some(key)) = (&self.observer, self.slot_keys.get(&slot)) {
                    obs.lease_lost(cp.now(), self.cfg.switch_id, Some(key.as_slice()));
                }
            }
            ControlEvent::IdleTimeout { table, spec } if table == o.lease_tbl.id() => {
                let MatchSpec::Exact(k) = &spec else {
                    return;
                };
                let key = Bytes::new(k);
                let Some(st) = self.keys.remove(&key) else {
                    return;
                };
                cp.table_delete(o.lease_tbl, spec.clone());
                self.app.uninstall(cp, &key, st.slot);
                self.slot_keys.remove(&st.slot);
                self.fences.remove(&st.slot);
                self.free_slots.push(st.slot);
                self.stats.reaped += 1;
            }
            _ => {}
        }
    }

    /// A NEW/MIGRATE ack punted from ingress (spec §5.3).
    fn grant(&mut self, cp: &mut ControlPlane<'_>, port: PortId, frame: &[u8]) {
        let Some(o) = self.obj else {
            return;
        };
        let (kb, vb) = (self.app.key_bytes(), self.app.value_bytes());
        if frame.len() < 14 || u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE_PUNT {
            self.stats.malformed += 1;
            return;
        }
        // 0 means revoked: a real end that wraps to it is cut one unit short.
        let end = u32::from_be_bytes([frame[8], frame[9], frame[10], frame[11]]).max(1);
        let Some(ack) = read_ack(frame, 14, kb, vb)
            .filter(|a| matches!(a.kind, proto::LEASE_NEW_ACK | proto::LEASE_MIGRATE_ACK))
        else {
            self.stats.malformed += 1;
            return;
        };
        let key = Bytes::new(&frame[ack.key_at..ack.key_at + kb]);
        let value = Bytes::new(&frame[ack.value_at..ack.value_at + vb]);
        let base = ack.seq;
        let now = cp.now();
        // Fix 2 (model checker): a grant answering a request sent before
        // this incarnation booted (a duplicate or delayed ack from before a
        // crash) is ignored: its seqs were used by the previous incarnation.
        // So is one for a request sent in the boot quiet period (see
        // `BOOT_QUIET`: the store may answer it by joining a recent grant).
        // The ack echoes the request's send stamp; `sent` is floored to the
        // stamp's unit, so an ack that might predate the boot is dropped
        // (its packet is lost, the next one asks again).
        let age = proto::send_stamp(now).wrapping_sub(ack.ip_id);
        let sent = ((now >> 16).saturating_sub(u64::from(age))) << 16;
        // [our choice] At the start of a run (boot at time 0) there is no
        // earlier incarnation whose grants could be replayed or joined, so
        // the quiet period applies only to a restart; otherwise every
        // workload's first packets in the first millisecond would be lost.
        if self.boot > 0 && sent < self.boot + super::config::BOOT_QUIET {
            self.stats.pre_boot_acks += 1;
            return;
        }
        let existing = self.keys.get(&key).copied();
        // Fix 1 (model checker; spec §5.3 "add or overwrite" refined): while
        // the key is installed, a grant whose base is not newer than the
        // installed one (a duplicate, or an older ack reordered behind a
        // newer one, at any time after the grant) only re-injects its
        // packet. Installing it would rewind `seq_issued` below seqs
        // already used. The store's bases only grow and a newer base lies
        // above every seq issued under the older one (max_inflight <
        // FENCE_GAP), so comparing with the installed base is the model's
        // "base ≤ seq_issued" test without a register read.
        if let Some(st) = existing.filter(|st| !seq_gt(base, st.base)) {
            self.stats.grants_joined += 1;
            if base == st.base {
                // The store confirmed (joined) the installed grant and
                // extended the lease: so does the switch.
                cp.register_write(o.lease_expiry, u64::from(st.slot), end);
            }
            self.reinject(cp, port, st.slot, frame, ack.piggy_at);
            return;
        }
        let slot = match existing {
            Some(st) => st.slot,
            None => match self.free_slots.pop().or_else(|| {
                (self.next_slot < self.cfg.slots as u32).then(|| {
                    self.next_slot += 1;
                    self.next_slot - 1
                })
            }) {
                Some(s) => s,
                None => {
                    self.stats.slots_exhausted += 1;
                    return;
                }
            },
        };
        self.stats.grants += 1;
        // install adds or overwrites (stale entries may survive a link
        // failure, and a newer grant replaces the app state with the
        // store's: writes under the older base will be fenced), then the
        // registers, then lease_tbl last.
        //
        // A re-grant of an installed key first revokes the lease
        // (`lease_expiry = 0`, which no ack extends: see `ingress::ack`)
        // and validates it again last. The writes below reach the data
        // plane one by one, 20 µs apart; without the revocation, packets
        // of the older grant kept running on the freshly installed value
        // in between, and their increments (issued under the older base,
        // hence fenced and never durable) leaked into the new grant's
        // state: Sync-Counter counted one too many (campaign seed 10).
        let mutant = self.cfg.mutant;
        if existing.is_some() {
            cp.register_write(o.lease_expiry, u64::from(slot), 0u32);
        }
        if mutant == Some(Mutant::NoStateTransfer) {
            self.app
                .install(cp, &key, &Bytes::zeroed(self.app.value_bytes()), slot);
        } else {
            self.app.install(cp, &key, &value, slot);
        }
        if mutant != Some(Mutant::SkipFence) || existing.is_none() {
            self.write_seq_registers(cp, slot, base);
        }
        cp.register_write(o.renew_sent, u64::from(slot), proto::lease_units(now));
        // The lease last of the registers: it makes the others live.
        cp.register_write(o.lease_expiry, u64::from(slot), end);
        let spec = MatchSpec::Exact(key.as_slice().to_vec().into());
        if existing.is_some() {
            cp.table_modify(o.lease_tbl, spec, slot);
        } else {
            cp.table_add(o.lease_tbl, spec, slot);
        }
        self.keys.insert(key, KeyState { slot, base });
        self.slot_keys.insert(slot, key);
        let bases = self.fences.entry(slot).or_default();
        if existing.is_none() {
            bases.clear();
        }
        if bases.len() == super::FENCE_HISTORY {
            bases.pop_front();
        }
        bases.push_back(base);
        self.reinject(cp, port, slot, frame, ack.piggy_at);
    }

    fn write_seq_registers(&mut self, cp: &mut ControlPlane<'_>, slot: u32, base: u16) {
        let Some(o) = self.obj else {
            return;
        };
        let i = u64::from(slot);
        cp.register_write(o.seq_issued, i, base);
        cp.register_write(o.seq_acked, i, base);
        cp.register_write(o.last_acked, i, base);
    }

    /// Sends the waiting packet back into ingress behind the grant's writes
    /// (the control channel is FIFO).
    fn reinject(
        &mut self,
        cp: &mut ControlPlane<'_>,
        port: PortId,
        slot: u32,
        frame: &[u8],
        piggy_at: Option<usize>,
    ) {
        let Some(at) = piggy_at else {
            return;
        };
        let mut f = Vec::with_capacity(18 + frame.len() - at);
        f.extend_from_slice(
            &ethernet(self.cfg.next_hop_mac, self.cfg.mac, ETHERTYPE_REINJECT)[..14],
        );
        f.extend_from_slice(&slot.to_be_bytes());
        f.extend_from_slice(&frame[at..]);
        cp.packet_out(f, PacketOutDest::Ingress(port));
    }

    /// A head announcement: repoint `shard_map` entries (spec §5.7).
    fn announce(&mut self, cp: &mut ControlPlane<'_>, frame: &[u8]) {
        let Some(o) = self.obj else {
            return;
        };
        let Ok(info) = inca_wire::redplane::parse_udp_frame(frame) else {
            self.stats.malformed += 1;
            return;
        };
        let Ok(a) = HeadAnnounce::new_checked(info.payload) else {
            self.stats.malformed += 1;
            return;
        };
        // [our choice] Applied whatever its version: repointing old → new
        // is idempotent, and an old head, once replaced, never returns.
        self.announce_version = self.announce_version.max(a.config_version());
        let (old, new) = (a.old_head().octets(), a.new_head().octets());
        for s in self.cfg.shards.iter_mut().filter(|s| s.ip == old) {
            s.ip = new;
            cp.table_modify(o.shard_map, shard_spec(s.lo, s.hi), *s);
        }
    }
}
