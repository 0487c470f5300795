//! The control plane of [`BoundedSwitch`]: collecting SNAPSHOT_RESTORE
//! entries punted by the data plane, installing a restored partition (both
//! copies of every entry, the commit record, then the lease last), the ε
//! action, and start-up (static entries, the loop's mirror session, the
//! snapshot generator stream).

use std::collections::VecDeque;

use inca_switch::pktgen::{StreamConfig, Trigger};
use inca_switch::register::Pair;
use inca_switch::tm::MirrorSession;
use inca_switch::{ControlPlane, PacketOutDest};
use inca_wire::redplane::{self as rpw, Ack};

use super::apps::BoundedApp;
use super::config::{lease_units, units_after, EpsilonAction};
use super::observer::SnapEvent;
use super::program::*;

impl<A: BoundedApp> BoundedSwitch<A> {
    pub(super) fn restore_entry(&mut self, frame: &[u8], cp: &mut ControlPlane<'_>) {
        let (Some(endb), Some(ip)) = (frame.get(6..12), frame.get(14..)) else {
            self.stats.malformed += 1;
            return;
        };
        let punted = u16::from_be_bytes([endb[0], endb[1]]);
        let end = u32::from_be_bytes([endb[2], endb[3], endb[4], endb[5]]);
        let Some((udp_payload, _)) = udp_payload_of_ipv4(ip) else {
            self.stats.malformed += 1;
            return;
        };
        let Ok(ack) = Ack::new_checked(udp_payload, self.app.key_len(), self.app.value_len())
        else {
            self.stats.malformed += 1;
            return;
        };
        let Some((pkey, j)) = self.app.decode_key(ack.key()) else {
            self.stats.malformed += 1;
            return;
        };
        let n = self.n();
        let rows = self.app.rows();
        let (Some(slot), true) = (self.app.slot_of(pkey), usize::from(j) < n) else {
            self.stats.malformed += 1;
            return;
        };
        let epoch = ack.seq();
        let piggy = ack.piggyback().to_vec();
        let vals: Vec<u32> = ack
            .value()
            .chunks_exact(4)
            .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let s = usize::from(slot);
        if !piggy.is_empty() {
            if self.waiting.len() >= MAX_WAITING {
                self.stats.waiting_drops += 1;
            } else {
                self.waiting.push_back((pkey, piggy));
            }
        }
        let grant = &mut self.grants[s];
        match grant {
            // Until the install is confirmed in effect, everything is a
            // duplicate of the acquisition being installed.
            Grant::Installing { .. } => {
                self.stats.restore_ignored += 1;
                return;
            }
            // Punted before the lease was in effect: an answer to a
            // LEASE_NEW of the same acquisition. After it, the data plane
            // passes a restore only once the lease has lapsed.
            Grant::Installed { since } if !rpw::serial_lt(*since, punted) => {
                self.stats.restore_ignored += 1;
                return;
            }
            Grant::Installed { .. } => *grant = Grant::Idle,
            _ => {}
        }
        if let Grant::Collecting { epoch: e0, .. } = grant {
            if *e0 != epoch {
                if rpw::serial_lt(*e0, epoch) {
                    *grant = Grant::Idle;
                } else {
                    self.stats.restore_ignored += 1;
                    return;
                }
            }
        }
        if matches!(grant, Grant::Idle) {
            *grant = Grant::Collecting {
                epoch,
                got: vec![false; n],
                remaining: n,
                values: vec![0; rows * n],
                end,
            };
        }
        let Grant::Collecting {
            got,
            remaining,
            values,
            end: e,
            ..
        } = grant
        else {
            return;
        };
        // The freshest request's lease is the longest the store granted.
        if units_after(end, *e) {
            *e = end;
        }
        let jj = usize::from(j);
        if !got[jj] {
            got[jj] = true;
            *remaining -= 1;
            for r in 0..rows {
                values[r * n + jj] = vals.get(r).copied().unwrap_or(0);
            }
        }
        if *remaining > 0 {
            return;
        }
        let (values, end) = (std::mem::take(values), *e);
        // An answer to a request the store deferred carries that request's
        // old send time, so its lease may end before the install would take
        // effect. Install only with a quarter of a lease left; otherwise wait
        // for the answer to a fresher LEASE_NEW [our choice].
        let margin = lease_units(cp.now() + self.cfg.lease_period / 4);
        if !units_after(end, margin) {
            self.stats.short_lease_restores += 1;
            self.grants[s] = Grant::Idle;
            return;
        }
        self.install(slot, pkey, epoch, values, end, cp);
    }

    /// Writes both copies of every entry, then the commit record, then the
    /// lease last (§5.9 "Ownership"), then re-injects the waiting packets.
    pub(super) fn install(
        &mut self,
        slot: u16,
        pkey: u16,
        epoch: u16,
        values: Vec<u32>,
        end: u32,
        cp: &mut ControlPlane<'_>,
    ) {
        let now = cp.now();
        let n = self.n();
        let base = u64::from(slot) * n as u64;
        for (r, row) in self.rows.iter().enumerate() {
            for j in 0..n {
                row.restore(cp, base + j as u64, values[r * n + j]);
            }
        }
        if let Some(h) = self.part_commit {
            let c = Pair {
                lo: COMMITTED | u32::from(epoch),
                hi: commit_units(now),
            };
            cp.register_write(h, u64::from(slot), c);
        }
        if let Some(h) = self.eg_committed {
            cp.register_write(h, u64::from(slot), epoch);
        }
        if let Some(h) = self.part_lease {
            let l = Pair {
                lo: end,
                hi: ARMED | u32::from(epoch),
            };
            cp.register_write(h, u64::from(slot), l);
        }
        // Reading the lease back after the writes (one FIFO channel) tells
        // when they have all taken effect.
        let confirm = self
            .part_lease
            .map_or(0, |h| cp.register_read(h, u64::from(slot), 1));
        self.grants[usize::from(slot)] = Grant::Installing { confirm };
        self.fired[usize::from(slot)] = false;
        self.stats.restores += 1;
        if let Some(t) = &mut self.truth {
            for r in 0..t.rows.len() {
                let b = usize::from(slot) * n;
                t.rows[r][b..b + n].copy_from_slice(&values[r * n..r * n + n]);
            }
        }
        self.record(SnapEvent::Restored {
            switch: self.cfg.switch_ip,
            partition: pkey,
            epoch,
            at: now,
            values,
        });
        let mut keep = VecDeque::new();
        while let Some((k, ip)) = self.waiting.pop_front() {
            if k != pkey {
                keep.push_back((k, ip));
                continue;
            }
            let frame = self.reinject_frame(k, &ip);
            cp.packet_out(frame, PacketOutDest::Ingress(self.cfg.in_port));
        }
        self.waiting = keep;
    }

    /// An IPv4 packet back in an Ethernet frame, tagged with its partition's
    /// VLAN when it has one.
    pub(super) fn reinject_frame(&self, vlan: u16, ip: &[u8]) -> Vec<u8> {
        let mut f = Vec::with_capacity(ip.len() + 18);
        f.extend_from_slice(&self.cfg.switch_mac);
        f.extend_from_slice(&self.cfg.switch_mac);
        if vlan != 0 {
            f.extend_from_slice(&0x8100u16.to_be_bytes());
            f.extend_from_slice(&(vlan & 0x0fff).to_be_bytes());
        }
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        f.extend_from_slice(ip);
        f
    }

    pub(super) fn epsilon(&mut self, slot: u16, cp: &mut ControlPlane<'_>) {
        let s = usize::from(slot);
        if s >= self.fired.len() || self.fired[s] {
            return;
        }
        self.fired[s] = true;
        self.stats.epsilon_fired += 1;
        let pkey = self.app.partition_key(slot);
        let action = self.cfg.action;
        self.record(SnapEvent::Epsilon {
            switch: self.cfg.switch_ip,
            partition: pkey,
            at: cp.now(),
            action,
        });
        let mut body = Vec::with_capacity(5);
        body.extend_from_slice(&slot.to_be_bytes());
        body.extend_from_slice(&pkey.to_be_bytes());
        body.push(action as u8);
        cp.send(inca_switch::device::ControlMessage {
            kind: MSG_EPSILON,
            body,
        });
        let Some(h) = self.part_lease else {
            return;
        };
        match action {
            EpsilonAction::Alarm => {}
            EpsilonAction::DropPartition => {
                cp.register_write(h, u64::from(slot), Pair::default());
                self.grants[s] = Grant::Idle;
            }
            EpsilonAction::DeclareFailed => {
                cp.register_write(
                    h,
                    u64::from(slot),
                    Pair {
                        lo: 0,
                        hi: WITHDRAWN,
                    },
                );
                self.grants[s] = Grant::Idle;
                cp.send(inca_switch::device::ControlMessage {
                    kind: MSG_WITHDRAW,
                    body: pkey.to_be_bytes().to_vec(),
                });
            }
        }
    }

    pub(super) fn start(&mut self, cp: &mut ControlPlane<'_>) {
        self.app.start(cp);
        let hdr = 14 + 20 + 8 + rpw::FIXED_LEN + self.app.key_len() + self.app.value_len();
        cp.mirror_session(
            self.cfg.mirror_session,
            MirrorSession {
                port: self.cfg.store_port,
                truncate: Some(hdr),
            },
        );
        let template = self.template();
        match self.plan.clone() {
            Ok(plan) => {
                cp.packet_generator(
                    self.cfg.pktgen_stream,
                    Some(StreamConfig {
                        trigger: Trigger::Timer {
                            period: self.cfg.t_snap,
                        },
                        template,
                        batch_size: plan.batch,
                    }),
                );
            }
            Err(e) => self.config_error = Some(e),
        }
    }
}

/// The UDP payload of an IPv4 packet (bounded by the UDP length) and its
/// Identification.
pub(super) fn udp_payload_of_ipv4(ip: &[u8]) -> Option<(&[u8], u16)> {
    let pkt = inca_wire::Ipv4Packet::new_checked(ip).ok()?;
    let ident = pkt.ident();
    let hl = pkt.header_len();
    let total = usize::from(pkt.total_len()).min(ip.len());
    let udp = ip.get(hl..total)?;
    let len = usize::from(u16::from_be_bytes([*udp.get(4)?, *udp.get(5)?]));
    Some((udp.get(8..len.min(udp.len()))?, ident))
}
