//! The data-plane paths of [`BoundedSwitch`] (spec §5.9, §5.10): data
//! packets (lease check, LEASE_NEW, the app's update), generator packets
//! (the lazy snapshot, gating, ε check, ack counting, SNAPSHOT_REQ) and
//! acks from the store. The access order of each is listed in
//! [`super::program`].

use inca_switch::register::Pair;
use inca_switch::{AccessError, DataPlane, PacketCtx};
use inca_wire::redplane::{self as rpw, Ack, AckType, ReqType};

use super::apps::BoundedApp;
use super::config::{lease_end, lease_units, send_stamp, units_after};
use super::observer::SnapEvent;
use super::program::*;

impl<A: BoundedApp> BoundedSwitch<A> {
    pub(super) fn data(
        &mut self,
        pkt: &mut PacketCtx<SnapMeta, SnapDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let p = pkt.meta.parsed;
        let out = if pkt.ingress_port() == self.cfg.out_port {
            self.cfg.in_port
        } else {
            self.cfg.out_port
        };
        let Some(pkey) = self.app.packet_partition(&p) else {
            pkt.forward(out);
            return Ok(());
        };
        let Some(slot) = self.app.slot(dp, pkey)? else {
            pkt.forward(out);
            return Ok(());
        };
        let now_u = lease_units(dp.now());
        let stamp = send_stamp(dp.now());
        let (valid, withdrawn, ask) =
            dp.register(reg(self.part_lease)?, u64::from(slot), |l: &mut Pair| {
                let valid = units_after(l.lo, now_u);
                let withdrawn = l.hi & WITHDRAWN != 0;
                // Without a lease, one LEASE_NEW per LEASE_RETRY: the low
                // 16 bits of `hi` hold when the last one left.
                let due =
                    l.hi & REQUESTED == 0 || stamp.wrapping_sub(l.hi as u16) >= LEASE_RETRY_UNITS;
                let ask = !valid && !withdrawn && due;
                if ask {
                    l.hi = (l.hi & WITHDRAWN) | REQUESTED | u32::from(stamp);
                }
                (valid, withdrawn, ask)
            })?;
        if withdrawn {
            self.stats.withdrawn_drops += 1;
            pkt.drop_packet();
            return Ok(());
        }
        if !valid && !ask {
            // A request for the partition is already out: this input is
            // lost (an allowed anomaly, [TH] §5.3.2).
            self.stats.awaiting_lease_drops += 1;
            pkt.drop_packet();
            return Ok(());
        }
        if !valid {
            // §5.2 step 2: ask for the partition, carrying the packet.
            let l3 = usize::from(p.l3);
            let inner: Vec<u8> = pkt.header().get(l3..).unwrap_or(&[]).to_vec();
            let mut key = vec![0u8; self.app.key_len()];
            self.app.encode_key(pkey, 0, &mut key);
            let ident = send_stamp(dp.now());
            let frame = self.request_frame(ReqType::LeaseNew, 0, ident, &key, &[], &inner);
            if Self::replace_frame(pkt, &frame) {
                // Bytes beyond the parse window follow the rebuilt headers
                // unchanged; the lengths must count them.
                let extra = pkt.len() - frame.len();
                if extra > 0 {
                    grow_lengths(pkt.header_mut(), extra);
                }
                self.stats.lease_requests += 1;
                pkt.forward(self.cfg.store_port);
            } else {
                pkt.drop_packet();
            }
            return Ok(());
        }
        let rows = self.app.rows();
        let mut idx = [0u64; 8];
        self.app.indices(dp, &p, &mut idx[..rows])?;
        let base = u64::from(slot) * self.n() as u64;
        let mut counts = [0u32; 8];
        for r in 0..rows {
            counts[r] = self.rows[r].update(dp, base + idx[r], 1)?;
        }
        if let Some(t) = &mut self.truth {
            for r in 0..rows {
                let e = &mut t.rows[r][(base + idx[r]) as usize];
                *e = e.saturating_add(1);
                debug_assert_eq!(*e, counts[r], "lazy array diverged from its reference");
            }
        }
        self.stats.updates += 1;
        if let Some(rep) = self.app.on_update(&p, pkey, &counts[..rows]) {
            pkt.digest(SnapDigest::Report(rep));
        }
        pkt.forward(out);
        Ok(())
    }

    pub(super) fn generated(
        &mut self,
        pkt: &mut PacketCtx<SnapMeta, SnapDigest>,
        dp: &mut DataPlane<'_>,
        packet_id: u16,
    ) -> Result<(), AccessError> {
        pkt.drop_packet();
        let n = self.n();
        let total = n * self.app.partitions();
        let app_ok = pkt
            .header()
            .first()
            .is_some_and(|b| b & 0x7 == self.cfg.app_id & 0x7);
        let k = usize::from(packet_id);
        if !app_ok || k >= total {
            self.stats.generator_errors += 1;
            return Ok(());
        }
        let in_order = dp.register(reg(self.gen_next)?, 0, |next: &mut u16| {
            let ok = *next == packet_id;
            *next = if k + 1 == total { 0 } else { packet_id + 1 };
            ok
        })?;
        if !in_order {
            // A lost or reordered generator packet breaks the lazy
            // precondition for that burst; count it (§9 item 15).
            self.stats.generator_errors += 1;
        }
        let (slot, j) = ((k / n) as u16, (k % n) as u16);
        let flip = k == 0;
        let now = dp.now();
        let rows = self.app.rows();
        let mut value = vec![0u8; 4 * rows];
        for r in 0..rows {
            let v = self.rows[r].snapshot(dp, k as u64, flip)?;
            value[4 * r..4 * r + 4].copy_from_slice(&v.to_be_bytes());
        }
        let cur = dp.register(reg(self.snap_epoch)?, 0, |e: &mut u16| {
            if flip {
                *e = e.wrapping_add(1);
            }
            *e
        })?;
        if flip {
            self.stats.bursts += 1;
            if let Some(t) = &mut self.truth {
                t.at_flip.clone_from(&t.rows);
                t.flip_at = now;
            }
        }
        let now_u = lease_units(now);
        let first = j == 0;
        let send = dp.register(reg(self.part_lease)?, u64::from(slot), |l: &mut Pair| {
            let valid = units_after(l.lo, now_u) && l.hi & WITHDRAWN == 0;
            if l.hi & ARMED != 0 {
                if first {
                    // Next burst's epoch continues the restored one.
                    let restored = l.hi as u16;
                    let offset = restored.wrapping_sub(cur);
                    l.hi = (l.hi & WITHDRAWN) | ALIGNING | u32::from(offset);
                }
                return None;
            }
            let aligned = l.hi & ALIGNING != 0;
            if aligned {
                if !first {
                    return None;
                }
                l.hi &= !ALIGNING;
            }
            valid.then_some((cur.wrapping_add(l.hi as u16), aligned))
        })?;
        let (send, just_aligned) = match send {
            Some((pe, a)) => (Some(pe), a),
            None => (None, false),
        };
        let last = k + 1 == total;
        if first {
            if let Some(pe) = send {
                // The restored snapshot counts as committed from the first
                // burst after it took effect (the control plane cannot know
                // that instant, the data plane can).
                let age =
                    dp.register(reg(self.part_commit)?, u64::from(slot), |c: &mut Pair| {
                        if just_aligned {
                            c.hi = commit_units(now);
                        }
                        commit_units(now).wrapping_sub(c.hi)
                    })?;
                let age_ns = u64::from(age) << COMMIT_UNIT_SHIFT;
                if age_ns > self.cfg.epsilon {
                    pkt.digest(SnapDigest::Stale { slot, age: age_ns });
                }
                if let Some(t) = &self.truth {
                    let base = usize::from(slot) * n;
                    let values = (0..rows)
                        .flat_map(|r| t.at_flip[r][base..base + n].iter().copied())
                        .collect();
                    self.record(SnapEvent::Flip {
                        switch: self.cfg.switch_ip,
                        partition: self.app.partition_key(slot),
                        epoch: pe,
                        flip_at: t.flip_at,
                        values,
                    });
                }
            }
        }
        if flip || last || (first && send.is_some()) {
            let add = u32::from(first && send.is_some());
            let all = dp.register(reg(self.snap_cnt)?, u64::from(cur & 1), |c: &mut Pair| {
                if flip {
                    *c = Pair::default();
                }
                c.lo = c.lo.wrapping_add(add);
                if last {
                    c.lo |= BURST_DONE;
                }
                last && c.hi == c.lo & !BURST_DONE
            })?;
            if all {
                let t = commit_units(now);
                dp.register(reg(self.last_commit_ts)?, 0, |v: &mut u32| *v = t)?;
                self.stats.epoch_commits += 1;
            }
        }
        let Some(pe) = send else {
            return Ok(());
        };
        let mut key = vec![0u8; self.app.key_len()];
        self.app
            .encode_key(self.app.partition_key(slot), j, &mut key);
        let ident = send_stamp(now);
        let frame = self.request_frame(ReqType::Snapshot, pe, ident, &key, &value, &[]);
        if !Self::replace_frame(pkt, &frame) {
            return Ok(());
        }
        pkt.meta.role = Role::SnapReq { slot, epoch: pe };
        self.stats.requests += 1;
        pkt.forward(self.cfg.store_port);
        Ok(())
    }

    pub(super) fn ack(
        &mut self,
        pkt: &mut PacketCtx<SnapMeta, SnapDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        pkt.drop_packet();
        let now = dp.now();
        let parsed = {
            let Ok(info) = rpw::parse_udp_frame(pkt.header()) else {
                self.stats.malformed += 1;
                return Ok(());
            };
            let Ok(ack) = Ack::new_checked(info.payload, self.app.key_len(), self.app.value_len())
            else {
                self.stats.malformed += 1;
                return Ok(());
            };
            let Some((pkey, j)) = self.app.decode_key(ack.key()) else {
                self.stats.malformed += 1;
                return Ok(());
            };
            (ack.ack_type(), ack.seq(), pkey, j, info.ident)
        };
        let (t, seq, pkey, _j, ident) = parsed;
        let Some(slot) = self.app.slot(dp, pkey)? else {
            return Ok(());
        };
        let end = lease_end(&self.cfg, now, ident);
        let now_u = lease_units(now);
        match t {
            AckType::Snapshot => {
                self.stats.acks += 1;
                let offset =
                    dp.register(reg(self.part_lease)?, u64::from(slot), |l: &mut Pair| {
                        // Snapshot acks renew the lease (§5.9 "Ownership"), but
                        // never revive a lapsed one or a withdrawn partition.
                        if let Some(end) = end {
                            if units_after(l.lo, now_u) && units_after(end, l.lo) {
                                l.lo = end;
                            }
                        }
                        l.hi as u16
                    })?;
                let fresh =
                    dp.register(reg(self.part_commit)?, u64::from(slot), |c: &mut Pair| {
                        let newer = c.lo & COMMITTED == 0 || rpw::serial_lt(c.lo as u16, seq);
                        if newer {
                            c.lo = COMMITTED | u32::from(seq);
                            c.hi = commit_units(now);
                        }
                        newer
                    })?;
                let cur = dp.register(reg(self.snap_epoch)?, 0, |e: &mut u16| *e)?;
                let se = seq.wrapping_sub(offset);
                if fresh {
                    self.stats.partition_commits += 1;
                    self.record(SnapEvent::Committed {
                        switch: self.cfg.switch_ip,
                        partition: pkey,
                        epoch: seq,
                        at: now,
                    });
                    if se == cur || se == cur.wrapping_sub(1) {
                        let all =
                            dp.register(reg(self.snap_cnt)?, u64::from(se & 1), |c: &mut Pair| {
                                c.hi = c.hi.wrapping_add(1);
                                c.lo & BURST_DONE != 0 && c.hi == c.lo & !BURST_DONE
                            })?;
                        if all {
                            let t = commit_units(now);
                            dp.register(reg(self.last_commit_ts)?, 0, |v: &mut u32| *v = t)?;
                            self.stats.epoch_commits += 1;
                        }
                    }
                }
                pkt.meta.role = Role::AckCopy { slot, epoch: seq };
                pkt.forward(self.cfg.store_port);
            }
            AckType::SnapshotRestore => {
                let Some(end) = end else {
                    // Too old to trust for a lease (§5.4); the next packet
                    // asks again.
                    self.stats.restore_ignored += 1;
                    return Ok(());
                };
                let take =
                    dp.register(reg(self.part_lease)?, u64::from(slot), |l: &mut Pair| {
                        l.hi & WITHDRAWN == 0 && !units_after(l.lo, now_u)
                    })?;
                if !take {
                    self.stats.restore_ignored += 1;
                    return Ok(());
                }
                // §4.6 punt header: broadcast dst, lease end in the low 32
                // bits of src, EtherType 0xBF01, then the ack from IPv4 on.
                let l3 = usize::from(pkt.meta.parsed.l3);
                let mut hdr = [0u8; 14];
                hdr[..6].copy_from_slice(&[0xff; 6]);
                // The high 16 bits of src carry the punt time (65.536 µs
                // units) so the control plane can tell restores that
                // passed before its install took effect [our choice].
                hdr[6..8].copy_from_slice(&send_stamp(now).to_be_bytes());
                hdr[8..12].copy_from_slice(&end.to_be_bytes());
                hdr[12..14].copy_from_slice(&ETHERTYPE_PUNT.to_be_bytes());
                if pkt.remove_header(0, l3) && pkt.insert_header(0, &hdr) {
                    pkt.to_cpu(PUNT_RESTORE);
                }
            }
            AckType::LeaseReject => {
                self.stats.rejects += 1;
                dp.register(reg(self.part_lease)?, u64::from(slot), |l: &mut Pair| {
                    l.lo = 0;
                })?;
            }
            _ => {
                // Acks of the per-flow protocol do not belong to this
                // program.
                self.stats.malformed += 1;
            }
        }
        Ok(())
    }
}

/// Adds `extra` bytes to the IPv4 total length and UDP length of a frame
/// whose headers start at 0 (untagged), and refreshes the IPv4 checksum.
fn grow_lengths(h: &mut [u8], extra: usize) {
    if h.len() < 42 {
        return;
    }
    let add = |b: &mut [u8]| {
        let v = u16::from_be_bytes([b[0], b[1]]).saturating_add(extra as u16);
        b.copy_from_slice(&v.to_be_bytes());
    };
    add(&mut h[16..18]);
    add(&mut h[38..40]);
    let mut ip = inca_wire::Ipv4Packet::new_unchecked(&mut h[14..34]);
    ip.fill_checksum();
}
