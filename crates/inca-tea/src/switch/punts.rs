//! The NF slow path's pending keys: packets punted for a key whose insert
//! is already queued or running wait here instead of queueing the NF's
//! inserts again, and go back to ingress together with the packet that
//! started the insert, once its entry is in effect.
//!
//! Without this, every packet of a new flow that arrives before its
//! entries are installed re-runs the NF's slow path, so a burst of new
//! flows fills the operation queue with duplicate inserts (each one a full
//! control-plane plan) and the flows' packets are dropped behind them.
//!
//! [our choice] At most [`MAX_PER_KEY`] packets wait per key and
//! [`MAX_WAITING`] in all; a packet beyond either bound is dropped and
//! counted.

use std::collections::BTreeMap;

use inca_switch::PortId;

/// Most packets waiting for one key (besides the one that started it).
pub const MAX_PER_KEY: usize = 64;
/// Most packets waiting in all.
pub const MAX_WAITING: usize = 4096;

/// A punted packet and the port it came in on.
pub(crate) type Punted = (Vec<u8>, PortId);

/// Keys with an insert pending, and the packets waiting for them.
#[derive(Debug, Clone, Default)]
pub(crate) struct PendingPunts {
    keys: BTreeMap<Vec<u8>, Vec<Punted>>,
    waiting: usize,
    /// Packets queued behind a pending insert.
    pub queued: u64,
    /// Packets dropped because a bound was reached.
    pub dropped: u64,
    /// Most packets ever waiting at once.
    pub waiting_max: u64,
}

impl PendingPunts {
    /// True if an insert of `key` is pending.
    pub(crate) fn is_pending(&self, key: &[u8]) -> bool {
        self.keys.contains_key(key)
    }

    /// Marks `key` pending (its insert was just queued).
    pub(crate) fn open(&mut self, key: Vec<u8>) {
        self.keys.entry(key).or_default();
    }

    /// Queues `p` behind the pending insert of `key`; false (and counted)
    /// if a bound is reached or the key is not pending.
    pub(crate) fn wait(&mut self, key: &[u8], p: Punted) -> bool {
        let Some(q) = self.keys.get_mut(key) else {
            return false;
        };
        if q.len() >= MAX_PER_KEY || self.waiting >= MAX_WAITING {
            self.dropped += 1;
            return false;
        }
        q.push(p);
        self.waiting += 1;
        self.waiting_max = self.waiting_max.max(self.waiting as u64);
        self.queued += 1;
        true
    }

    /// Ends the pending state of `key`: the packets that waited for it, in
    /// arrival order.
    pub(crate) fn release(&mut self, key: &[u8]) -> Vec<Punted> {
        let q = self.keys.remove(key).unwrap_or_default();
        self.waiting -= q.len();
        q
    }

    /// Packets waiting now.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_only_behind_a_pending_key_and_within_bounds() {
        let mut p = PendingPunts::default();
        assert!(!p.wait(b"k", (vec![1], 0)), "nothing pending");
        p.open(b"k".to_vec());
        for i in 0..MAX_PER_KEY {
            assert!(p.wait(b"k", (vec![i as u8], 0)));
        }
        assert!(!p.wait(b"k", (vec![0], 0)));
        assert_eq!((p.queued, p.dropped, p.waiting()), (64, 1, 64));
        let out = p.release(b"k");
        assert_eq!(out.len(), MAX_PER_KEY);
        assert_eq!(out[1].0, vec![1]);
        assert!(!p.is_pending(b"k"));
        assert_eq!(p.waiting(), 0);
    }

    #[test]
    fn the_total_bound_holds_across_keys() {
        let mut p = PendingPunts::default();
        let mut ok = 0;
        for k in 0..200u32 {
            p.open(k.to_be_bytes().to_vec());
            for _ in 0..MAX_PER_KEY {
                ok += usize::from(p.wait(&k.to_be_bytes(), (vec![], 0)));
            }
        }
        assert_eq!(ok, MAX_WAITING);
        assert_eq!(p.waiting(), MAX_WAITING);
    }
}
