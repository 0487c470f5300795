//! The RedPlane ingress block (spec §5.1, §5.2, §5.4, §5.5 "ack in
//! ingress"), in the stage order of §5.10: hash → `shard_map` →
//! `lease_tbl` → `lease_expiry` → `seq_acked` → `seq_issued` →
//! `renew_sent` → app → request build. Each register is touched at most
//! once per pass.

use inca_apps::headers::{parse, PROTO_UDP};
use inca_switch::{AccessError, DataPlane, PacketCtx, PacketKind, ParseError, PortId};
use inca_wire::redplane::{is_store_port, ANNOUNCE_TYPE, SWITCH_PORT};

use super::app::{Access, Bytes, Out, RedPlaneApp, Verdict};
use super::proto::{
    self, ethernet, lease_units, read_ack, seq_distance, seq_max, seq_next, time_gt, Endpoints,
    BUF_READ_ACK, BUF_READ_REQ, ETHERTYPE_IPV4, ETHERTYPE_PUNT, ETHERTYPE_REINJECT,
    LEASE_MIGRATE_ACK, LEASE_NEW_ACK, LEASE_NEW_REQ, LEASE_REJECT, LEASE_RENEW_ACK,
    LEASE_RENEW_REQ, OUTER_LEN, RP_FIXED,
};
use super::{
    Class, Objects, RedPlane, Role, RpDigest, RpMeta, Shard, BOOK_SESSION, REASON_ANNOUNCE,
    REASON_GRANT, RENEW_SESSION,
};

type Pkt = PacketCtx<RpMeta, RpDigest>;

/// The ingress parser: what the packet is to RedPlane (spec §5.1).
pub(crate) fn classify(header: &[u8], meta: &mut RpMeta) -> Result<(), ParseError> {
    if header.len() >= 14 && u16::from_be_bytes([header[12], header[13]]) == ETHERTYPE_REINJECT {
        // The app headers are parsed once the re-inject header is gone.
        meta.class = Class::Reinject;
        return Ok(());
    }
    let p = parse(header)?;
    meta.p = p;
    meta.class = Class::Data;
    if p.ipv4 && p.proto == PROTO_UDP && p.has_ports && p.dport == SWITCH_PORT {
        let first = header.get(usize::from(p.l4) + 8).copied();
        if first == Some(ANNOUNCE_TYPE) {
            meta.class = Class::Announce;
        } else if is_store_port(p.sport) {
            meta.class = Class::Ack;
        }
    }
    Ok(())
}

impl<A: RedPlaneApp> RedPlane<A> {
    pub(crate) fn ingress_block(
        &mut self,
        pkt: &mut Pkt,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let Some(o) = self.obj else {
            return Ok(());
        };
        match pkt.meta.class {
            Class::Other => self.route_out(pkt, dp, &o),
            Class::Announce => {
                pkt.to_cpu(REASON_ANNOUNCE);
                Ok(())
            }
            Class::Ack => self.ack(pkt, dp, &o),
            Class::Reinject => {
                // Strip the re-inject header (EtherType + slot) and rebuild L2.
                if pkt.len() < 18 || !pkt.remove_header(0, 18) {
                    self.stats.malformed += 1;
                    return Ok(());
                }
                let eth = ethernet(self.cfg.next_hop_mac, self.cfg.mac, ETHERTYPE_IPV4);
                pkt.insert_header(0, &eth);
                match parse(pkt.header()) {
                    Ok(p) => pkt.meta.p = p,
                    Err(_) => {
                        self.stats.malformed += 1;
                        return Ok(());
                    }
                }
                let reinjected = pkt.kind() == PacketKind::FromCpu;
                self.data(pkt, dp, &o, reinjected)
            }
            Class::Data => self.data(pkt, dp, &o, false),
        }
    }

    /// Forwards a packet by the static routes (drops it without a route).
    fn route_out(
        &mut self,
        pkt: &mut Pkt,
        dp: &mut DataPlane<'_>,
        o: &Objects,
    ) -> Result<(), AccessError> {
        if let Some(port) = self.route_of(pkt, dp, o)? {
            pkt.forward(port);
        }
        Ok(())
    }

    fn route_of(
        &mut self,
        pkt: &Pkt,
        dp: &mut DataPlane<'_>,
        o: &Objects,
    ) -> Result<Option<PortId>, AccessError> {
        // The output's own headers: the app may have rewritten or
        // decapsulated them.
        let Ok(p) = parse(pkt.header()) else {
            return Ok(None);
        };
        if !p.ipv4 {
            return Ok(None);
        }
        dp.lookup(o.route, &p.dst)
    }

    fn shard_of(
        &mut self,
        key: &Bytes,
        dp: &mut DataPlane<'_>,
        o: &Objects,
    ) -> Result<Option<Shard>, AccessError> {
        let h = match self.app.shard_hash(key) {
            Some(h) => h,
            None => dp.hash(o.hash, key.as_slice())? as u16,
        };
        dp.lookup(o.shard_map, &h.to_be_bytes())
    }

    /// A data packet, linearizable mode (spec §5.2).
    fn data(
        &mut self,
        pkt: &mut Pkt,
        dp: &mut DataPlane<'_>,
        o: &Objects,
        reinjected: bool,
    ) -> Result<(), AccessError> {
        let p = pkt.meta.p;
        let Some(key) = self.app.key(&p, pkt.header()) else {
            return self.route_out(pkt, dp, o);
        };
        let now = dp.now();
        // A re-injected packet was recorded when it first arrived.
        if let (Some(obs), false) = (&self.observer, reinjected) {
            obs.input(now, self.cfg.switch_id, key.as_slice(), pkt.header());
        }
        let now_u = lease_units(now);
        let slot = dp.lookup(o.lease_tbl, key.as_slice())?;
        let lease = match slot {
            Some(s) => {
                let e = dp.register(o.lease_expiry, u64::from(s), |v| *v)?;
                // 0 = revoked, whatever the clock says.
                (e != 0 && time_gt(e, now_u)).then_some((s, e))
            }
            None => None,
        };
        let Some((slot, expiry)) = lease else {
            if reinjected {
                // [our choice] A re-injected packet is not looped back into
                // another lease request.
                self.stats.reinject_drops += 1;
                return Ok(());
            }
            // No valid lease: LEASE_NEW with the whole packet; the app does
            // not run, nothing is mirrored.
            let Some(shard) = self.shard_of(&key, dp, o)? else {
                self.stats.no_shard += 1;
                return Ok(());
            };
            self.stats.lease_new += 1;
            let zero = Bytes::zeroed(self.app.value_bytes());
            self.encapsulate(pkt, &shard, LEASE_NEW_REQ, 0, &key, &zero, true, now);
            return Ok(());
        };
        let access = self.app.classify(&p, pkt.header());
        let input = self.observer.as_ref().map(|_| pkt.header().to_vec());
        if let (Some(obs), Some(frame)) = (&self.observer, &input) {
            // The register holds bits [47:16] of the end: rebuild it in ns
            // from `now` (it lies ahead of now, less than 2^31 units).
            let ahead = u64::from(expiry.wrapping_sub(now_u)) << 16;
            let lease_until = ((now >> 16) << 16) + ahead;
            let run = super::Run {
                switch: self.cfg.switch_id,
                key: key.as_slice(),
                frame,
                reinjected,
                lease_until,
            };
            obs.ran(now, &run);
        }
        let acked = dp.register(o.seq_acked, u64::from(slot), |v| *v)?;
        let max_inflight = self.cfg.max_inflight;
        let (seq, issued) = match access {
            Access::Write => {
                let s = dp.register(o.seq_issued, u64::from(slot), |v| {
                    if seq_distance(*v, acked) < max_inflight {
                        *v = seq_next(*v);
                        Some(*v)
                    } else {
                        None
                    }
                })?;
                match s {
                    Some(s) => (s, s),
                    None => {
                        self.stats.inflight_overflow += 1;
                        return Ok(());
                    }
                }
            }
            Access::Read => (0, dp.register(o.seq_issued, u64::from(slot), |v| *v)?),
        };
        // The gateway before `renew_sent`: only a lease past its renewal
        // point touches the register.
        let threshold = lease_units(
            self.cfg
                .lease_period
                .saturating_sub(self.cfg.renew_interval),
        );
        let renew = if access == Access::Read && expiry.wrapping_sub(now_u) < threshold {
            let retry = lease_units(self.cfg.renew_retry);
            dp.register(o.renew_sent, u64::from(slot), |r| {
                if now_u.wrapping_sub(*r) >= retry {
                    *r = now_u;
                    true
                } else {
                    false
                }
            })?
        } else {
            false
        };
        if let (Some(obs), Some(frame), Access::Write) = (&self.observer, &input, access) {
            obs.issued(
                now,
                self.cfg.switch_id,
                key.as_slice(),
                frame,
                (self.fence_of(slot, seq), seq),
            );
        }
        let verdict: Verdict = self.app.process(pkt, dp, slot, &key, access)?;
        let out = match verdict.out {
            Out::Drop => None,
            Out::Port(port) => Some(port),
            Out::RouteTo(dst) => dp.lookup(o.route, &dst)?,
            Out::Route => self.route_of(pkt, dp, o)?,
        };
        // `shard_map` is needed only for what goes to the store.
        let forward_now = access == Access::Read && (issued == acked || out.is_none());
        let shard = if forward_now && !renew {
            Shard::default()
        } else {
            match self.shard_of(&key, dp, o)? {
                Some(s) => s,
                None => {
                    self.stats.no_shard += 1;
                    pkt.drop_packet();
                    return Ok(());
                }
            }
        };
        pkt.meta.slot = slot;
        if renew {
            pkt.meta.renew = Some(Box::new(super::RenewInfo { key, shard }));
            self.stats.renewals += 1;
            pkt.mirror(RENEW_SESSION + shard.port);
        }
        match access {
            Access::Write => {
                let value = verdict
                    .value_after
                    .unwrap_or_else(|| Bytes::zeroed(self.app.value_bytes()));
                self.stats.writes += 1;
                pkt.meta.role = Role::Write;
                pkt.meta.seq = seq;
                self.encapsulate(
                    pkt,
                    &shard,
                    LEASE_RENEW_REQ,
                    seq,
                    &key,
                    &value,
                    out.is_some(),
                    now,
                );
            }
            Access::Read => {
                let Some(port) = out else {
                    pkt.drop_packet();
                    return Ok(());
                };
                if issued == acked {
                    self.stats.reads_forwarded += 1;
                    self.release(pkt, now, &key, slot, acked);
                    pkt.forward(port);
                } else {
                    // Buffered in the network until write `issued` is durable.
                    self.stats.buf_reads += 1;
                    let zero = Bytes::zeroed(self.app.value_bytes());
                    self.encapsulate(pkt, &shard, BUF_READ_REQ, issued, &key, &zero, true, now);
                }
            }
        }
        Ok(())
    }

    fn release(&self, pkt: &Pkt, now: u64, key: &Bytes, slot: u32, seq: u16) {
        if let Some(obs) = &self.observer {
            let fence = self.fence_of(slot, seq);
            obs.output(
                now,
                self.cfg.switch_id,
                key.as_slice(),
                pkt.header(),
                (fence, seq),
            );
        }
    }

    /// The newest grant base of `slot` at or below `seq`: the grant a write
    /// was issued (or a read acknowledged) under. Sim-only.
    fn fence_of(&self, slot: u32, seq: u16) -> u16 {
        let bases = self.fences.get(&slot);
        bases
            .and_then(|b| b.iter().rev().find(|&&b| !proto::seq_gt(b, seq)))
            .or_else(|| bases.and_then(|b| b.front()))
            .copied()
            .unwrap_or(0)
    }

    /// Turns the packet into a request to `shard`: the outer headers and the
    /// RedPlane header replace its Ethernet header; with `piggyback` the
    /// packet from its IPv4 header on follows, otherwise it is cut off.
    #[allow(clippy::too_many_arguments)]
    fn encapsulate(
        &mut self,
        pkt: &mut Pkt,
        shard: &Shard,
        kind: u8,
        seq: u16,
        key: &Bytes,
        value: &Bytes,
        piggyback: bool,
        now: u64,
    ) {
        let l3 = usize::from(pkt.meta.p.l3);
        let cut = if piggyback { l3 } else { pkt.len() };
        if cut > pkt.header().len() || !pkt.remove_header(0, cut) {
            // [our choice] A write without output whose frame is longer than
            // the parser window cannot be cut down: it is dropped (counted).
            self.stats.malformed += 1;
            pkt.drop_packet();
            return;
        }
        let ep = Endpoints {
            src_mac: self.cfg.mac,
            dst_mac: self.cfg.next_hop_mac,
            src_ip: self.cfg.ip,
            dst_ip: shard.ip,
            src_port: SWITCH_PORT,
            dst_port: shard.udp,
        };
        let piggy_len = pkt.len();
        let mut hdr = [0u8; OUTER_LEN + RP_FIXED + 2 * super::app::MAX_BYTES];
        let n = OUTER_LEN + RP_FIXED + key.as_slice().len() + value.as_slice().len();
        let ip_id = proto::send_stamp(now);
        proto::write_header(
            &mut hdr[..n],
            &ep,
            ip_id,
            kind,
            seq,
            key.as_slice(),
            value.as_slice(),
            piggy_len,
        );
        pkt.insert_header(0, &hdr[..n]);
        pkt.meta.ip_id = ip_id;
        pkt.forward(shard.port);
    }

    /// An ack from the store (spec §5.4, §5.5).
    fn ack(
        &mut self,
        pkt: &mut Pkt,
        dp: &mut DataPlane<'_>,
        o: &Objects,
    ) -> Result<(), AccessError> {
        let (kb, vb) = (self.app.key_bytes(), self.app.value_bytes());
        let l3 = usize::from(pkt.meta.p.l3);
        let Some(ack) = read_ack(pkt.header(), l3, kb, vb) else {
            self.stats.malformed += 1;
            return Ok(());
        };
        let key = Bytes::new(&pkt.header()[ack.key_at..ack.key_at + kb]);
        let now = dp.now();
        // Lease end from the echoed send stamp, in the registers' unit.
        let age = proto::send_stamp(now).wrapping_sub(ack.ip_id);
        let age_ns = u64::from(age) << 16;
        let fresh = age_ns <= self.cfg.max_ack_age;
        // The send time, floored to the stamp's unit (conservative).
        let sent = (now >> 16).saturating_sub(u64::from(age)) << 16;
        let end = lease_units(
            sent.saturating_add(self.cfg.lease_period)
                .saturating_sub(self.cfg.lease_guard),
        );
        if !fresh {
            self.stats.stale_acks += 1;
        }
        match ack.kind {
            LEASE_NEW_ACK | LEASE_MIGRATE_ACK => {
                if !fresh || l3 != 14 {
                    return Ok(());
                }
                // Punt header: the lease end in the low 32 bits of the
                // source MAC field; the ack from its IPv4 header on.
                let mut src = [0u8; 6];
                src[2..6].copy_from_slice(&end.to_be_bytes());
                let eth = ethernet([0xff; 6], src, ETHERTYPE_PUNT);
                pkt.header_mut()[..14].copy_from_slice(&eth);
                pkt.to_cpu(REASON_GRANT);
                Ok(())
            }
            LEASE_RENEW_ACK | BUF_READ_ACK => {
                let Some(slot) = dp.lookup(o.lease_tbl, key.as_slice())? else {
                    return Ok(());
                };
                if fresh {
                    // [our choice] A revoked lease (0: a reject, a give-up,
                    // or a re-grant being installed) is never extended by
                    // an ack; only the control plane validates it again.
                    dp.register(o.lease_expiry, u64::from(slot), |v| {
                        if *v != 0 && time_gt(end, *v) {
                            *v = end;
                        }
                    })?;
                }
                let write_ack = ack.kind == LEASE_RENEW_ACK && ack.seq != 0;
                if write_ack {
                    dp.register(o.seq_acked, u64::from(slot), |v| *v = seq_max(*v, ack.seq))?;
                    // Copy 2: bookkeeping in the store-port egress.
                    if let Some(shard) = self.shard_of(&key, dp, o)? {
                        pkt.meta.slot = slot;
                        pkt.meta.seq = ack.seq;
                        pkt.mirror(BOOK_SESSION + shard.port);
                    }
                }
                match ack.piggy_at {
                    Some(at) => {
                        // Copy 1: the output is released now.
                        pkt.remove_header(0, at);
                        let eth = ethernet(self.cfg.next_hop_mac, self.cfg.mac, ETHERTYPE_IPV4);
                        pkt.insert_header(0, &eth);
                        if let Some(port) = self.route_of(pkt, dp, o)? {
                            self.stats.released += 1;
                            self.release(pkt, now, &key, slot, ack.seq);
                            pkt.forward(port);
                        }
                    }
                    None => pkt.drop_packet(),
                }
                Ok(())
            }
            LEASE_REJECT => {
                self.stats.rejects += 1;
                let Some(slot) = dp.lookup(o.lease_tbl, key.as_slice())? else {
                    return Ok(());
                };
                // A reject of a write at or below `seq_acked` is for a
                // write of an older grant (its base is below the installed
                // one) or a duplicate: it says nothing about the installed
                // lease, so only its loop stops [our choice]. Ending the
                // lease there made every regrant end the next one (the
                // older grant's writes in flight are all rejected), a
                // LEASE_NEW storm whose fences wrapped the 16-bit space.
                let stale = ack.seq != 0
                    && dp.register(o.seq_acked, u64::from(slot), |a| {
                        !proto::seq_gt(ack.seq, *a)
                    })?;
                if !stale {
                    dp.register(o.lease_expiry, u64::from(slot), |v| *v = 0)?;
                    if let Some(obs) = &self.observer {
                        obs.lease_lost(now, self.cfg.switch_id, Some(key.as_slice()));
                    }
                } else {
                    self.stats.stale_rejects += 1;
                }
                if ack.seq != 0 {
                    // Stop the loop for the rejected write.
                    if let Some(shard) = self.shard_of(&key, dp, o)? {
                        pkt.meta.slot = slot;
                        pkt.meta.seq = ack.seq;
                        pkt.mirror(BOOK_SESSION + shard.port);
                    }
                }
                pkt.drop_packet();
                Ok(())
            }
            _ => {
                self.stats.malformed += 1;
                Ok(())
            }
        }
    }
}
