//! The store's counters (`report()`), including the locally checkable
//! invariants of specs/redplane.md §6.2 (violations must stay 0).

use std::collections::BTreeMap;

macro_rules! stats {
    ($($(#[$m:meta])* $name:ident),* $(,)?) => {
        /// Counters of one store server.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct Stats {
            $($(#[$m])* pub $name: u64,)*
        }

        impl Stats {
            /// Every counter by name, in name order.
            pub fn to_map(&self) -> BTreeMap<String, u64> {
                let mut m = BTreeMap::new();
                $(m.insert(stringify!($name).to_string(), self.$name);)*
                m
            }
        }
    };
}

stats! {
    /// Frames received.
    rx_frames,
    /// Frames that failed to parse (or a RedPlane header that did not fit).
    malformed,
    /// Frames to a UDP port no worker or chain serves.
    unknown_port,
    /// Frames addressed to another IP.
    not_for_me,
    /// Requests from an address not in `allowed_switches` (dropped, no answer).
    from_unknown_switch,
    /// Chain traffic from outside the chain.
    not_member,
    /// Requests at a node that is not the head (answered with HEAD_ANNOUNCE).
    not_head,
    /// Requests dropped at a head that has not heard a quorum of its chain
    /// lately (it may have been replaced; the switch resends).
    no_quorum,
    /// Requests dropped because the worker's queue was full.
    queue_drops,
    /// LEASE_NEW requests.
    rx_lease_new,
    /// Bare LEASE_RENEW (seq 0).
    rx_renew,
    /// LEASE_RENEW writes (seq ≥ 1).
    rx_write,
    /// BUF_READ requests.
    rx_buf_read,
    /// SNAPSHOT requests.
    rx_snapshot,
    /// NEW_ACKs sent.
    tx_new_ack,
    /// MIGRATE_ACKs sent.
    tx_migrate_ack,
    /// RENEW_ACKs sent.
    tx_renew_ack,
    /// BUF_READ_ACKs sent.
    tx_buf_read_ack,
    /// SNAPSHOT_ACKs sent.
    tx_snapshot_ack,
    /// SNAPSHOT_RESTOREs sent.
    tx_snapshot_restore,
    /// LEASE_REJECTs sent.
    tx_reject,
    /// Writes rejected: not the owner, or seq ≤ fence.
    fenced_or_not_owner,
    /// Writes acked without applying (fence < seq ≤ last_seq).
    duplicate_writes,
    /// LEASE_NEW requests deferred behind another owner's lease.
    deferred,
    /// LEASE_NEW dropped: deferred FIFO full.
    deferred_overflow,
    /// Deferred LEASE_NEWs dropped by a node that stopped being head (the
    /// switches resend them to the new head).
    deferred_dropped,
    /// LEASE_NEW from the owner that joined its grant still committing.
    grants_joined,
    /// BUF_READs held.
    held,
    /// Held reads released by a commit.
    held_released,
    /// Held reads dropped at HOLD_TIMEOUT.
    hold_timeouts,
    /// BUF_READs dropped: hold FIFO full.
    held_overflow,
    /// BUF_READs dropped: not the owner, or seq ≤ fence.
    buf_read_dropped,
    /// New keys dropped: record table full.
    record_overflow,
    /// Snapshot entries for an epoch older than the committed one.
    snapshot_stale,
    /// Staged epochs dropped to make room for newer ones.
    snapshot_epochs_dropped,
    /// Snapshot epochs committed.
    snapshots_committed,
    /// A commit marker arrived for an incomplete epoch (ignored).
    snapshot_incomplete_commit,
    /// Updates committed at this node.
    commits,
    /// CHAIN_UPDATE/SNAP sent by the head.
    chain_updates_sent,
    /// Chain updates applied from a predecessor.
    chain_updates_applied,
    /// Chain updates resent (go-back-N).
    chain_resends,
    /// Chain updates already applied (forwarded or re-acked).
    chain_duplicates,
    /// Chain updates that arrived ahead of a gap (kept, bounded, until the
    /// head's resend fills it).
    chain_gaps,
    /// CHAIN_ACKs sent.
    chain_acks_sent,
    /// CHAIN_ACKs that acknowledged nothing new.
    chain_acks_ignored,
    /// Updates ordered while the chain window was full.
    chain_window_full,
    /// Heartbeats sent.
    heartbeats_sent,
    /// Membership changes seen.
    reconfigurations,
    /// Times this node became head.
    became_head,
    /// HEAD_ANNOUNCEs sent to switches.
    announces_sent,
    /// Times this node left its chain while alive (removed, or a failed
    /// transfer) and dropped its state.
    left_chain,
    /// JOINs sent (once per heartbeat while out of the chain).
    join_requests,
    /// Joiners this node admitted as the new tail.
    joins_admitted,
    /// Times this node completed a rejoin (every worker's copy installed).
    rejoins,
    /// Transfers abandoned by this joiner (source left, or stalled).
    syncs_abandoned,
    /// SYNC chunks sent (first sends).
    sync_chunks_sent,
    /// SYNC chunks resent (go-back-N).
    sync_chunks_resent,
    /// SYNC chunks accepted in order.
    sync_chunks_received,
    /// Worker copies installed here.
    syncs_completed,
    /// Worker copies fully acknowledged by their joiner.
    syncs_sent,
    /// §6.2.4 violations seen locally ((fence, last_seq) decreased, or the
    /// value changed without last_seq increasing). Must stay 0.
    invariant_violations,
}
