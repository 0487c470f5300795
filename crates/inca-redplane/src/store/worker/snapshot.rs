//! The store side of bounded-inconsistency snapshots (specs/redplane.md §5.9):
//! staging SNAPSHOT entries per epoch, the all-or-nothing commit through the
//! chain, SNAPSHOT_ACK per entry.

use super::*;

#[derive(Debug, Clone, Default)]
pub(super) struct Stage {
    pub(super) values: Vec<Option<Vec<u8>>>,
    pub(super) count: usize,
    /// Set once the epoch has gone down the chain: the id that commits it.
    pub(super) commit_id: Option<u32>,
    /// SNAPSHOT_ACKs waiting for the epoch to be complete (head only).
    pub(super) waiters: Vec<(Nanos, Vec<u8>)>,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Partition {
    pub(super) committed_epoch: Option<u16>,
    pub(super) committed: Vec<Vec<u8>>,
    /// Entries received from switches, by epoch (head only).
    pub(super) incoming: BTreeMap<u16, Stage>,
    /// Entries applied from the chain (every replica), by epoch.
    pub(super) applied: BTreeMap<u16, Stage>,
}

impl Worker {
    pub(super) fn snapshot(
        &mut self,
        env: &mut Env<'_>,
        from: Ipv4Addr,
        ident: u16,
        req: &RequestRepr<'_>,
    ) {
        let (Some(layout), Some((lk, idx))) =
            (self.app.snapshot_layout(), self.app.partition_of(req.key))
        else {
            env.stats.malformed += 1;
            return;
        };
        // Snapshot entries renew the partition's lease; only its owner's count
        // [our choice: a non-owner's entries are rejected, never staged].
        match self.records.get_mut(&lk) {
            Some(rec) if rec.owner == Some(from) => rec.expiry = env.now + env.lease_period,
            _ => return self.reject(env, from, ident, req),
        }
        let e = req.seq;
        let ack = AckRepr {
            ack_type: AckType::Snapshot,
            seq: e,
            key: req.key,
            value: &[],
            piggyback: &[],
        };
        let part = self.partitions.entry(lk.clone()).or_default();
        if let Some(c) = part.committed_epoch {
            if c == e {
                return self.reply(env, from, ident, ack, None);
            }
            if serial_lt(e, c) {
                env.stats.snapshot_stale += 1;
                return;
            }
        }
        if !part.incoming.contains_key(&e) && part.incoming.len() >= MAX_STAGED_EPOCHS {
            // Keep the newest epochs: drop the oldest staged one.
            let oldest = part
                .incoming
                .keys()
                .copied()
                .find(|&a| part.incoming.keys().all(|&b| serial_le(a, b)));
            if let Some(o) = oldest {
                part.incoming.remove(&o);
                env.stats.snapshot_epochs_dropped += 1;
            }
        }
        let stage = part.incoming.entry(e).or_insert_with(|| Stage {
            values: vec![None; layout.entries],
            ..Stage::default()
        });
        if let Some(id) = stage.commit_id {
            // Already going down the chain: ack when it commits.
            return self.reply(env, from, ident, ack, Some(id));
        }
        let Some(slot) = stage.values.get_mut(idx) else {
            env.stats.malformed += 1;
            return;
        };
        if slot.is_none() {
            stage.count += 1;
        }
        *slot = Some(req.value.to_vec());
        let complete = stage.count == layout.entries;
        // The ack waits for the commit; the commit id is known only when the
        // epoch is complete, so it waits beside the stage until then.
        let payload = ack.to_vec().unwrap_or_default();
        let ep = rp_endpoints(env.addr.mac, env.addr.ip, env.addr.gateway_mac, from, ident);
        if let Ok(f) = build_rp_frame(&ep, self.port, rp::SWITCH_PORT, &payload) {
            env.stats.tx_snapshot_ack += 1;
            stage_waiters(&mut self.partitions, &lk, e).push((env.done, f));
        }
        if complete {
            let Some(st) = self
                .partitions
                .get_mut(&lk)
                .and_then(|p| p.incoming.get_mut(&e))
            else {
                return;
            };
            let values: Vec<Vec<u8>> = st
                .values
                .iter()
                .map(|v| v.clone().unwrap_or_default())
                .collect();
            let waiters = std::mem::take(&mut st.waiters);
            let mut last = 0;
            for (i, value) in values.iter().enumerate() {
                let ek = self.app.entry_key(&lk, i);
                last = self.mutate_snap(env, &ek, &lk, i, e, value, i + 1 == values.len());
            }
            // Without a chain the epoch has committed (and its stage is gone).
            if let Some(st) = self
                .partitions
                .get_mut(&lk)
                .and_then(|p| p.incoming.get_mut(&e))
            {
                st.commit_id = Some(last);
            }
            for (t, f) in waiters {
                if let Some((t, f)) = self.chain.hold(Some(last), (t, f)) {
                    env.tx.push((t.max(env.done), f));
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn mutate_snap(
        &mut self,
        env: &mut Env<'_>,
        ek: &[u8],
        lk: &[u8],
        idx: usize,
        epoch: u16,
        value: &[u8],
        commit: bool,
    ) -> u32 {
        let id = self.chain.next_id();
        self.stage_applied(lk, idx, epoch, value);
        let entry = LogEntry {
            key: ek.to_vec(),
            seq: epoch,
            fence: 0,
            owner: None,
            value: value.to_vec(),
            kind: LogKind::Snap { epoch, commit },
        };
        self.order(env, id, entry, |_| {
            ChainSnapRepr {
                epoch,
                key: ek,
                value,
                commit,
                update_id: id,
            }
            .to_vec()
        });
        id
    }

    pub(super) fn stage_applied(&mut self, lk: &[u8], idx: usize, epoch: u16, value: &[u8]) {
        let n = self.app.snapshot_layout().map_or(0, |l| l.entries);
        let part = self.partitions.entry(lk.to_vec()).or_default();
        if !part.applied.contains_key(&epoch) && part.applied.len() >= MAX_STAGED_EPOCHS {
            let oldest = part
                .applied
                .keys()
                .copied()
                .find(|&a| part.applied.keys().all(|&b| serial_le(a, b)));
            if let Some(o) = oldest {
                part.applied.remove(&o);
            }
        }
        let st = part.applied.entry(epoch).or_insert_with(|| Stage {
            values: vec![None; n],
            ..Stage::default()
        });
        if let Some(slot) = st.values.get_mut(idx) {
            if slot.is_none() {
                st.count += 1;
            }
            *slot = Some(value.to_vec());
        }
    }

    /// The commit marker of `epoch` committed at this node: the staged
    /// entries become the partition's committed snapshot, all or nothing.
    pub(super) fn commit_snapshot(
        &mut self,
        env: &mut Env<'_>,
        entry_key: &[u8],
        epoch: u16,
        report: bool,
    ) {
        let Some((lk, _)) = self.app.partition_of(entry_key) else {
            return;
        };
        let Some(part) = self.partitions.get_mut(&lk) else {
            return;
        };
        let complete = part
            .applied
            .get(&epoch)
            .is_some_and(|s| s.count == s.values.len());
        if !complete {
            env.stats.snapshot_incomplete_commit += 1;
            return;
        }
        if let Some(st) = part.applied.remove(&epoch) {
            part.committed = st
                .values
                .into_iter()
                .map(Option::unwrap_or_default)
                .collect();
            part.committed_epoch = Some(epoch);
        }
        part.applied.retain(|&k, _| serial_lt(epoch, k));
        part.incoming.retain(|&k, _| serial_lt(epoch, k));
        env.stats.snapshots_committed += 1;
        if report {
            if let Some(obs) = env.observer.as_mut() {
                obs.snapshot_committed(self.number, &lk, epoch, env.now);
            }
        }
    }
}

pub(super) fn stage_waiters<'a>(
    parts: &'a mut BTreeMap<Vec<u8>, Partition>,
    lk: &[u8],
    epoch: u16,
) -> &'a mut Vec<(Nanos, Vec<u8>)> {
    // Waiters live beside the stage, keyed by (partition, epoch).
    let p = parts.entry(lk.to_vec()).or_default();
    let st = p.incoming.entry(epoch).or_default();
    &mut st.waiters
}
