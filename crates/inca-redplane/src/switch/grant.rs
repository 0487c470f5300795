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
        let end = u32::from_be_bytes([frame[8], frame[9], frame[10], frame[11]]);
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
        let existing = self.keys.get(&key).copied();
        // Join an existing grant while it settles, or for a late duplicate
        // (a deferred request answered without a new fence): re-installing
        // then would rewind the sequence registers under writes in flight.
        let join = match existing {
            Some(st) if now < st.settle_until => Some(st),
            Some(st) if ack.kind == proto::LEASE_MIGRATE_ACK && !seq_gt(base, st.base) => Some(st),
            _ => None,
        };
        if let Some(st) = join {
            // Only queue (re-inject) the packet, catching up with a newer
            // fence if the store set one.
            self.stats.grants_joined += 1;
            if seq_gt(base, st.base) {
                self.write_seq_registers(cp, st.slot, base, end);
                self.keys.insert(key, KeyState { base, ..st });
                self.fences.insert(st.slot, base);
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
        // failure), then the registers, then lease_tbl last.
        self.app.install(cp, &key, &value, slot);
        self.write_seq_registers(cp, slot, base, end);
        cp.register_write(o.renew_sent, u64::from(slot), proto::lease_units(now));
        let spec = MatchSpec::Exact(key.as_slice().to_vec().into());
        if existing.is_some() {
            cp.table_modify(o.lease_tbl, spec, slot);
        } else {
            cp.table_add(o.lease_tbl, spec, slot);
        }
        self.keys.insert(
            key,
            KeyState {
                slot,
                base,
                settle_until: now + self.cfg.grant_settle,
            },
        );
        self.slot_keys.insert(slot, key);
        self.fences.insert(slot, base);
        self.reinject(cp, port, slot, frame, ack.piggy_at);
    }

    fn write_seq_registers(&mut self, cp: &mut ControlPlane<'_>, slot: u32, base: u16, end: u32) {
        let Some(o) = self.obj else {
            return;
        };
        let i = u64::from(slot);
        cp.register_write(o.seq_issued, i, base);
        cp.register_write(o.seq_acked, i, base);
        cp.register_write(o.last_acked, i, base);
        cp.register_write(o.lease_expiry, i, end);
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
