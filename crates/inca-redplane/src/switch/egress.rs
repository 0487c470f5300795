//! The RedPlane egress block of the store-facing port (spec §5.5): the
//! first pass of a write starts its retransmission loop (egress-to-egress
//! mirror, truncated to the request header); loop copies resend after RTO
//! and give up after MAX_RETX; bookkeeping copies advance `last_acked`;
//! renewal clones are rebuilt into bare LEASE_RENEW requests. `last_acked`
//! is touched once per pass. Requests and loop copies record the queue
//! depth they met (spec §8 item 8), and write requests may be dropped to
//! emulate request loss (`request_drop_permille`).

use inca_switch::{AccessError, DataPlane, PacketCtx, PacketKind};
use inca_wire::redplane::SWITCH_PORT;

use super::app::RedPlaneApp;
use super::proto::{self, seq_gt, seq_max, Endpoints, LEASE_RENEW_REQ};
use super::{RedPlane, Role, RpDigest, RpMeta, BOOK_SESSION, LOOP_SESSION, RENEW_SESSION};

type Pkt = PacketCtx<RpMeta, RpDigest>;

/// Which kind of mirror session `session` is.
fn session_kind(session: u16) -> u16 {
    session & 0xF000
}

impl<A: RedPlaneApp> RedPlane<A> {
    pub(crate) fn egress_block(
        &mut self,
        pkt: &mut Pkt,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let Some(o) = self.obj else {
            return Ok(());
        };
        let port = pkt.egress_meta().port;
        let now = dp.now();
        match pkt.kind() {
            PacketKind::Mirrored { session } if session_kind(session) == LOOP_SESSION => {
                let (slot, seq, tx_ts, retx) =
                    (pkt.meta.slot, pkt.meta.seq, pkt.meta.tx_ts, pkt.meta.retx);
                self.occupancy
                    .record(now, pkt.egress_meta().enq_queue_bytes);
                let last = dp.register(o.last_acked, u64::from(slot), |v| *v)?;
                pkt.drop_packet();
                if !seq_gt(seq, last) {
                    // Acked (or rejected, or fenced by a newer grant).
                    self.loop_live.remove(&(slot, seq));
                    return Ok(());
                }
                if now.saturating_sub(tx_ts) < self.cfg.rto {
                    pkt.mirror_loop(session);
                    return Ok(());
                }
                if retx >= self.cfg.max_retx {
                    // Give up; the control plane ends the lease. Safe: every
                    // read after this write went out as BUF_READ.
                    self.loop_live.remove(&(slot, seq));
                    self.stats.gave_up += 1;
                    pkt.digest(RpDigest::GaveUp { slot, seq });
                    return Ok(());
                }
                // Resend the header-only request (its output is lost).
                let len = pkt.len();
                proto::fix_lengths(pkt.header_mut(), len);
                self.stats.retransmits += 1;
                pkt.forward(port);
                pkt.meta.tx_ts = now;
                pkt.meta.retx = retx + 1;
                pkt.mirror_loop(session);
                self.emulate_request_loss(pkt, dp);
            }
            PacketKind::Mirrored { session } if session_kind(session) == BOOK_SESSION => {
                let (slot, seq) = (pkt.meta.slot, pkt.meta.seq);
                dp.register(o.last_acked, u64::from(slot), |v| *v = seq_max(*v, seq))?;
                pkt.drop_packet();
            }
            PacketKind::Mirrored { session } if session_kind(session) == RENEW_SESSION => {
                self.build_renewal(pkt, now);
            }
            PacketKind::Mirrored { .. } => {}
            _ if pkt.meta.role == Role::Write => {
                // First pass: the full request goes out; a truncated copy
                // enters the loop.
                let key = (pkt.meta.slot, pkt.meta.seq);
                if !self.loop_live.insert(key) {
                    // Spec §6.2.7: one loop copy per unacked write.
                    self.stats.invariant_violations += 1;
                    debug_assert!(false, "two loop copies for one write");
                }
                self.occupancy
                    .record(now, pkt.egress_meta().enq_queue_bytes);
                pkt.meta.tx_ts = now;
                pkt.meta.retx = 0;
                pkt.mirror_loop(LOOP_SESSION + port);
                self.emulate_request_loss(pkt, dp);
            }
            _ => {}
        }
        Ok(())
    }

    /// Spec §8 item 8: request loss emulated at the switch. The request is
    /// dropped after its loop copy was asked for, so the loop retransmits it
    /// after RTO as it would a request lost on the wire.
    fn emulate_request_loss(&mut self, pkt: &mut Pkt, dp: &mut DataPlane<'_>) {
        let p = u32::from(self.cfg.request_drop_permille);
        if p > 0 && dp.random() % 1000 < p {
            self.stats.requests_dropped += 1;
            pkt.drop_packet();
        }
    }

    /// Rebuilds a renewal clone (a truncated copy of a data packet) into a
    /// bare LEASE_RENEW_REQ(seq 0) for the flow's shard.
    fn build_renewal(&mut self, pkt: &mut Pkt, now: u64) {
        let len = pkt.len();
        if len > pkt.header().len() || !pkt.remove_header(0, len) {
            pkt.drop_packet();
            return;
        }
        let Some(info) = pkt.meta.renew.take() else {
            pkt.drop_packet();
            return;
        };
        let ep = Endpoints {
            src_mac: self.cfg.mac,
            dst_mac: self.cfg.next_hop_mac,
            src_ip: self.cfg.ip,
            dst_ip: info.shard.ip,
            src_port: SWITCH_PORT,
            dst_port: info.shard.udp,
        };
        let n = self.request_header_len();
        let mut hdr = vec![0u8; n];
        let zero = super::Bytes::zeroed(self.app.value_bytes());
        proto::write_header(
            &mut hdr,
            &ep,
            proto::send_stamp(now),
            LEASE_RENEW_REQ,
            0,
            info.key.as_slice(),
            zero.as_slice(),
            0,
        );
        pkt.insert_header(0, &hdr);
    }
}
