//! State transfer to a replica that rejoins its chain (specs/redplane.md
//! §5.7, chain recovery) [our choice for the mechanism and the messages]:
//! the tail that admits a restarted member as the new tail copies its whole
//! worker state to it, as of one update id (the session), in SYNC chunks
//! over the worker's chain port. The transfer is go-back-N with a window of
//! [`SYNC_WINDOW`] chunks: the joiner accepts chunks in order and answers
//! each with SYNC_ACK (the next chunk it needs); the sender resends from
//! the last acknowledged chunk after `chain_rto` without progress. Updates
//! newer than the session reach the joiner the ordinary way (forwarded by
//! its predecessor, resent by the head); it keeps them aside, bounded,
//! until the last chunk arrives, then installs the copy, applies them in id
//! order and from then on acknowledges as the tail. Nothing is committed on
//! the joiner's behalf before that, so a transfer that fails (the joiner or
//! its source dies) loses no committed write.
//!
//! The transfer's windowing and ordering are `inca_chain::transfer`'s
//! ([`Transfer`], [`Intake`]); the chunk format and the items are RedPlane's.
//!
//! Messages (UDP chain port 9000+w → 9000+w, big-endian):
//! - SYNC (0x14): type 1 | session 4 | chunk 4 | flags 1 (bit 0 last) |
//!   count 2 | count items. Item tag 0, a record: key K | value V |
//!   last_seq 2 | fence 2 | owner 4 | lease_ms_remaining 4 | committed_seq 2.
//!   Tag 1 (committed) / 2 (staged), a snapshot entry: epoch 2 | entry key K |
//!   value V.
//! - SYNC_ACK (0x15): type 1 | session 4 | next chunk 4.

use inca_chain::transfer::{Acked, Intake, Offer, Transfer};

use super::*;

/// SYNC chunk type byte.
pub const SYNC_TYPE: u8 = 0x14;
/// SYNC_ACK type byte.
pub const SYNC_ACK_TYPE: u8 = 0x15;
/// Chunks in flight per transfer.
pub const SYNC_WINDOW: u32 = 64;
/// Item bytes per chunk, at most (keeps chunks within a 1500-byte MTU).
const CHUNK_BUDGET: usize = 1400;
/// SYNC header length.
const SYNC_HEADER: usize = 12;

const TAG_RECORD: u8 = 0;
const TAG_COMMITTED: u8 = 1;
const TAG_STAGED: u8 = 2;

/// A transfer being received by a joiner: where it stands (`inca_chain`'s
/// [`Intake`]) and the items so far.
#[derive(Debug, Clone, Default)]
pub(super) struct SyncIn {
    intake: Intake,
    records: Vec<(Vec<u8>, Record)>,
    snaps: Vec<(u8, u16, Vec<u8>, Vec<u8>)>,
}

impl Worker {
    /// Whether this worker is waiting for (or receiving) a state transfer.
    pub fn syncing(&self) -> bool {
        self.sync_in.is_some()
    }

    /// Whether this worker is sending a state transfer.
    pub fn sending_sync(&self) -> bool {
        self.sync_out.is_some()
    }

    /// Drops all state and waits for a transfer (this node is out of its
    /// chain and will ask to rejoin).
    pub fn await_sync(&mut self) {
        self.reset();
        self.sync_in = Some(SyncIn::default());
        // Updates newer than the copy are kept by the chain until it is
        // installed.
        self.chain.await_state();
    }

    /// Stops sending a transfer (its receiver left the chain).
    pub fn cancel_sync_out(&mut self) {
        self.sync_out = None;
    }

    fn encode_items(&self, now: Nanos) -> Vec<Vec<u8>> {
        let mut items = Vec::new();
        let remaining_ms = |exp: Nanos| (exp.saturating_sub(now) / MILLIS) as u32;
        let mut keys: Vec<&Vec<u8>> = self.records.keys().collect();
        keys.sort();
        for k in keys {
            let r = &self.records[k];
            let mut b = Vec::with_capacity(1 + self.k + self.v + 14);
            b.push(TAG_RECORD);
            b.extend_from_slice(k);
            let mut v = r.value.clone();
            v.resize(self.v, 0);
            b.extend_from_slice(&v);
            b.extend_from_slice(&r.last_seq.to_be_bytes());
            b.extend_from_slice(&r.fence.to_be_bytes());
            b.extend_from_slice(&r.owner.unwrap_or(Ipv4Addr::UNSPECIFIED).octets());
            // The remaining lease, relative to the moment of the copy; the
            // expiry itself is local time, which the joiner does not share.
            b.extend_from_slice(&remaining_ms(r.expiry).to_be_bytes());
            b.extend_from_slice(&r.committed_seq.to_be_bytes());
            items.push(b);
        }
        for (lk, p) in &self.partitions {
            let snap = |tag: u8, epoch: u16, i: usize, value: &[u8]| {
                let mut b = vec![tag];
                b.extend_from_slice(&epoch.to_be_bytes());
                b.extend_from_slice(&self.app.entry_key(lk, i));
                let mut v = value.to_vec();
                v.resize(self.v, 0);
                b.extend_from_slice(&v);
                b
            };
            if let Some(e) = p.committed_epoch {
                for (i, value) in p.committed.iter().enumerate() {
                    items.push(snap(TAG_COMMITTED, e, i, value));
                }
            }
            for (&e, st) in &p.applied {
                for (i, value) in st.values.iter().enumerate() {
                    if let Some(value) = value {
                        items.push(snap(TAG_STAGED, e, i, value));
                    }
                }
            }
        }
        items
    }

    /// Starts copying this worker's state, as of its last applied update,
    /// to `to` (the joiner just admitted behind this node).
    pub fn start_sync_out(&mut self, env: &mut Env<'_>, to: Ipv4Addr) {
        let session = self.chain.applied();
        // Items packed greedily into bodies of at most CHUNK_BUDGET bytes
        // (one item per body if it is larger); at least one, maybe empty.
        let mut bodies: Vec<(u16, Vec<u8>)> = vec![(0, Vec::new())];
        for item in self.encode_items(env.now) {
            let need_new = bodies.last().is_some_and(|(c, b)| {
                *c > 0 && (b.len() + item.len() > CHUNK_BUDGET || *c == u16::MAX)
            });
            if need_new {
                bodies.push((0, Vec::new()));
            }
            if let Some((c, b)) = bodies.last_mut() {
                *c += 1;
                b.extend_from_slice(&item);
            }
        }
        let total = bodies.len();
        let chunks: Vec<Vec<u8>> = bodies
            .into_iter()
            .enumerate()
            .map(|(i, (count, body))| {
                let mut c = Vec::with_capacity(SYNC_HEADER + body.len());
                c.push(SYNC_TYPE);
                c.extend_from_slice(&session.to_be_bytes());
                c.extend_from_slice(&(i as u32).to_be_bytes());
                c.push(u8::from(i + 1 == total));
                c.extend_from_slice(&count.to_be_bytes());
                c.extend_from_slice(&body);
                c
            })
            .collect();
        self.sync_out = Some(Transfer::new(to, session, chunks, env.now, SYNC_WINDOW));
        self.send_sync_window(env);
    }

    fn send_sync_window(&mut self, env: &mut Env<'_>) {
        let port = chain_port(self.port);
        let Some(s) = &mut self.sync_out else { return };
        let to = s.to();
        for c in s.due() {
            env.frame(env.done, to, 0, port, port, c);
            env.stats.sync_chunks_sent += 1;
        }
    }

    /// The sender's timer: go back to the last acknowledged chunk.
    pub(super) fn sync_out_wake(&mut self, env: &mut Env<'_>, rto: Nanos) {
        let Some(s) = &mut self.sync_out else { return };
        if let Some(back) = s.wake(env.now, rto) {
            env.stats.sync_chunks_resent += u64::from(back);
            self.send_sync_window(env);
        }
    }

    pub(super) fn sync_deadline(&self, rto: Nanos) -> Option<Nanos> {
        self.sync_out.as_ref().map(|s| s.deadline(rto))
    }

    /// SYNC_ACK from the joiner.
    pub fn sync_ack(&mut self, env: &mut Env<'_>, from: Ipv4Addr, payload: &[u8]) {
        let Some((session, next)) = parse_sync_ack(payload) else {
            env.stats.malformed += 1;
            return;
        };
        let Some(s) = &mut self.sync_out else { return };
        match s.on_ack(from, session, next, env.now) {
            Acked::Ignored => {}
            Acked::Done => {
                env.stats.syncs_sent += 1;
                self.sync_out = None;
            }
            Acked::More => self.send_sync_window(env),
        }
    }

    fn send_sync_ack(&self, env: &mut Env<'_>, to: Ipv4Addr, session: u32, next: u32) {
        let port = chain_port(self.port);
        let mut b = vec![SYNC_ACK_TYPE];
        b.extend_from_slice(&session.to_be_bytes());
        b.extend_from_slice(&next.to_be_bytes());
        env.frame(env.done, to, 0, port, port, &b);
    }

    /// A SYNC chunk from this node's predecessor. Returns whether the
    /// transfer completed (the worker now serves as a replica).
    pub fn sync_chunk(
        &mut self,
        env: &mut Env<'_>,
        from: Ipv4Addr,
        payload: &[u8],
        is_tail: bool,
    ) -> bool {
        if payload.len() < SYNC_HEADER {
            env.stats.malformed += 1;
            return false;
        }
        let be32 = |o: usize| {
            u32::from_be_bytes([payload[o], payload[o + 1], payload[o + 2], payload[o + 3]])
        };
        let (session, chunk, last) = (be32(1), be32(5), payload[9] & 1 != 0);
        let count = u16::from_be_bytes([payload[10], payload[11]]);
        let Some(st) = &mut self.sync_in else {
            // Installed already: the sender missed the final ack.
            if self.synced_session == Some(session) {
                self.send_sync_ack(env, from, session, chunk + 1);
            }
            return false;
        };
        match st.intake.offer(session, chunk) {
            Offer::Drop => return false,
            Offer::Resend { next } => {
                self.send_sync_ack(env, from, session, next);
                return false;
            }
            Offer::Take { restart } => {
                if restart {
                    // A new copy: the items of an earlier one are void.
                    st.records.clear();
                    st.snaps.clear();
                }
            }
        }
        let Some((records, snaps)) =
            parse_items(&payload[SYNC_HEADER..], count, self.k, self.v, env.now)
        else {
            env.stats.malformed += 1;
            return false;
        };
        let Some(st) = &mut self.sync_in else {
            return false;
        };
        st.records.extend(records);
        st.snaps.extend(snaps);
        let next = st.intake.took();
        env.stats.sync_chunks_received += 1;
        self.send_sync_ack(env, from, session, next);
        if last {
            self.install(env, session, is_tail);
            return true;
        }
        false
    }

    fn install(&mut self, env: &mut Env<'_>, session: u32, is_tail: bool) {
        let Some(st) = self.sync_in.take() else {
            return;
        };
        self.records.clear();
        self.partitions.clear();
        let mut records = st.records;
        records.sort_by(|a, b| a.0.cmp(&b.0));
        for (k, mut r) in records {
            r.last_update = session;
            self.app.on_apply(&k, &r.value);
            self.records.insert(k, r);
        }
        let n = self.app.snapshot_layout().map_or(0, |l| l.entries);
        for (tag, epoch, ek, value) in st.snaps {
            let Some((lk, idx)) = self.app.partition_of(&ek) else {
                continue;
            };
            if tag == TAG_COMMITTED {
                let p = self.partitions.entry(lk).or_default();
                if p.committed.len() < n {
                    p.committed.resize(n, vec![0; self.v]);
                }
                if let Some(slot) = p.committed.get_mut(idx) {
                    *slot = value;
                }
                p.committed_epoch = Some(epoch);
            } else {
                self.stage_applied(&lk, idx, epoch, &value);
            }
        }
        self.synced_session = Some(session);
        env.stats.syncs_completed += 1;
        // The chain continues from the session: the updates kept meanwhile
        // are applied in id order, and the tail acknowledges.
        let mut x = ChainEnv::new(env, self.port);
        ChainNode::install(self, &mut x, session, is_tail);
    }
}

/// Parses SYNC_ACK: (session, next chunk).
pub(super) fn parse_sync_ack(b: &[u8]) -> Option<(u32, u32)> {
    if b.len() < 9 || b[0] != SYNC_ACK_TYPE {
        return None;
    }
    let s = u32::from_be_bytes([b[1], b[2], b[3], b[4]]);
    let n = u32::from_be_bytes([b[5], b[6], b[7], b[8]]);
    Some((s, n))
}

type Snap = (u8, u16, Vec<u8>, Vec<u8>);
/// Records and snapshot entries parsed from one chunk.
type Items = (Vec<(Vec<u8>, Record)>, Vec<Snap>);

/// Parses `count` items; `None` if any is malformed or bytes are left over.
fn parse_items(mut b: &[u8], count: u16, k: usize, v: usize, now: Nanos) -> Option<Items> {
    let mut records = Vec::new();
    let mut snaps = Vec::new();
    for _ in 0..count {
        let (&tag, rest) = b.split_first()?;
        match tag {
            TAG_RECORD => {
                let need = k + v + 14;
                let item = rest.get(..need)?;
                let u16_at = |o: usize| u16::from_be_bytes([item[o], item[o + 1]]);
                let o = k + v;
                let owner = Ipv4Addr::new(item[o + 4], item[o + 5], item[o + 6], item[o + 7]);
                let lease_ms =
                    u32::from_be_bytes([item[o + 8], item[o + 9], item[o + 10], item[o + 11]]);
                records.push((
                    item[..k].to_vec(),
                    Record {
                        value: item[k..k + v].to_vec(),
                        last_seq: u16_at(o),
                        fence: u16_at(o + 2),
                        owner: (!owner.is_unspecified()).then_some(owner),
                        expiry: now + u64::from(lease_ms) * MILLIS,
                        committed_seq: u16_at(o + 12),
                        ..Record::default()
                    },
                ));
                b = &rest[need..];
            }
            TAG_COMMITTED | TAG_STAGED => {
                let need = 2 + k + v;
                let item = rest.get(..need)?;
                let epoch = u16::from_be_bytes([item[0], item[1]]);
                snaps.push((tag, epoch, item[2..2 + k].to_vec(), item[2 + k..].to_vec()));
                b = &rest[need..];
            }
            _ => return None,
        }
    }
    b.is_empty().then_some((records, snaps))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_chunks_and_acks_are_refused_without_panicking() {
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let (k, v) = (4, 4);
        let mut accepted = 0;
        for n in 0..5000usize {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 80) as usize;
            let mut b: Vec<u8> = (0..len).map(|i| (x >> (i % 56)) as u8).collect();
            if n % 3 == 0 && !b.is_empty() {
                b[0] = TAG_RECORD;
            }
            if parse_items(&b, (x >> 8) as u16 % 4, k, v, 0).is_some() {
                accepted += 1;
            }
            let _ = parse_sync_ack(&b);
        }
        // A well-formed record is accepted, with trailing bytes refused.
        let mut rec = vec![TAG_RECORD];
        rec.extend_from_slice(&[
            1, 2, 3, 4, 9, 9, 9, 9, 0, 5, 0, 3, 10, 1, 0, 1, 0, 0, 0, 2, 0, 5,
        ]);
        let (r, s) = parse_items(&rec, 1, k, v, 0).expect("valid record");
        assert_eq!((r.len(), s.len()), (1, 0));
        assert_eq!(r[0].1.last_seq, 5);
        assert_eq!(r[0].1.owner, Some(Ipv4Addr::new(10, 1, 0, 1)));
        assert_eq!(r[0].1.expiry, 2 * MILLIS);
        rec.push(0);
        assert!(parse_items(&rec, 1, k, v, 0).is_none());
        assert!(accepted < 5000);
    }
}
