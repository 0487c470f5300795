//! One core's flow records (spec §3.2, §5.3 step 3): when each flow was
//! first and last seen, the group version it was assigned to, how the
//! switch last chose this server, and whether its entry now lives in the
//! switch. Bounded; expiry and the controller's FLOW_QUERY read it.
//!
//! The table is a hash map; nothing leaves it in the map's order (expiry
//! and queries sort by flow key), so runs are deterministic.

use hashbrown::HashMap;
use inca_switch::device::Nanos;
use inca_wire::clip::shim::Sel;

use crate::flow::FlowKey;

/// What a server knows of one flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowRecord {
    /// The group version of the request that created the record (0 when
    /// the switch chose the server by a pin or a hint).
    pub assigned_ver: u16,
    /// When the first request arrived.
    pub first_seen: Nanos,
    /// When the latest request arrived.
    pub last_seen: Nanos,
    /// How the switch chose this server for the latest request.
    pub last_sel: Sel,
    /// The flow's entry is in the switch (ENTRY_OFFLOADED): the server no
    /// longer sees its packets, so the record never expires here.
    pub offloaded: bool,
}

/// A live flow as FLOW_QUERY_REPLY carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct FlowInfo {
    /// The flow.
    pub flow: FlowKey,
    /// When its first request arrived.
    pub first_seen: Nanos,
    /// When its latest request arrived.
    pub last_seen: Nanos,
    /// Its entry is in the switch.
    pub offloaded: bool,
}

/// What a request did to the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// A new flow: a record was created.
    New,
    /// A known flow. `mismatch`: the switch chose a group slot
    /// (PREV/CUR) whose version is not the one the flow was assigned —
    /// the flow moved between groups (an affinity violation).
    Known {
        /// The version differs.
        mismatch: bool,
    },
    /// A new flow, but the table is full: no record.
    Overflow,
}

/// One core's flow records. See the module documentation.
#[derive(Debug, Clone)]
pub struct FlowTable {
    records: HashMap<FlowKey, FlowRecord>,
    capacity: usize,
}

impl FlowTable {
    /// An empty table of at most `capacity` records.
    pub fn new(capacity: usize) -> Self {
        FlowTable {
            records: HashMap::new(),
            capacity,
        }
    }

    /// Records a request of `flow` at `now`, chosen by `sel` with group
    /// version `grp_ver` (§5.3 step 3).
    pub fn see(&mut self, flow: FlowKey, sel: Sel, grp_ver: u16, now: Nanos) -> Seen {
        if let Some(r) = self.records.get_mut(&flow) {
            r.last_seen = r.last_seen.max(now);
            r.last_sel = sel;
            return Seen::Known {
                mismatch: sel.is_group() && grp_ver != r.assigned_ver,
            };
        }
        if self.records.len() >= self.capacity {
            return Seen::Overflow;
        }
        let assigned_ver = if sel.is_group() { grp_ver } else { 0 };
        self.records.insert(
            flow,
            FlowRecord {
                assigned_ver,
                first_seen: now,
                last_seen: now,
                last_sel: sel,
                offloaded: false,
            },
        );
        Seen::New
    }

    /// The record of `flow`.
    pub fn get(&self, flow: &FlowKey) -> Option<&FlowRecord> {
        self.records.get(flow)
    }

    /// Marks `flow` offloaded; false if it has no record.
    pub fn set_offloaded(&mut self, flow: &FlowKey) -> bool {
        match self.records.get_mut(flow) {
            Some(r) => {
                r.offloaded = true;
                true
            }
            None => false,
        }
    }

    /// Drops the record of `flow`.
    pub fn remove(&mut self, flow: &FlowKey) -> Option<FlowRecord> {
        self.records.remove(flow)
    }

    /// Removes every record idle for `t_exp` or more at `now` that is not
    /// offloaded, appending the flows to `out` (in no particular order:
    /// the caller sorts).
    pub fn expire(&mut self, now: Nanos, t_exp: Nanos, out: &mut Vec<FlowKey>) {
        self.records.retain(|k, r| {
            let dead = !r.offloaded && now.saturating_sub(r.last_seen) >= t_exp;
            if dead {
                out.push(*k);
            }
            !dead
        });
    }

    /// Whether a record counts as live at `now`: offloaded (its idle time
    /// is the switch's to judge), or idle for less than `t_exp`.
    fn live(r: &FlowRecord, now: Nanos, t_exp: Nanos) -> bool {
        r.offloaded || now.saturating_sub(r.last_seen) < t_exp
    }

    /// Appends to `out` the live flows assigned to group version
    /// `grp_ver` (unsorted).
    pub fn query(&self, grp_ver: u16, now: Nanos, t_exp: Nanos, out: &mut Vec<FlowInfo>) {
        out.extend(
            self.records
                .iter()
                .filter(|(_, r)| r.assigned_ver == grp_ver && Self::live(r, now, t_exp))
                .map(|(k, r)| FlowInfo {
                    flow: *k,
                    first_seen: r.first_seen,
                    last_seen: r.last_seen,
                    offloaded: r.offloaded,
                }),
        );
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// No record held.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Forgets every record.
    pub fn clear(&mut self) {
        self.records.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u16) -> FlowKey {
        FlowKey::new(0, 6, [10, 0, 0, 1], [10, 0, 0, 2], n, 80)
    }

    #[test]
    fn records_are_created_updated_and_bounded() {
        let mut t = FlowTable::new(2);
        assert_eq!(t.see(key(1), Sel::Cur, 3, 100), Seen::New);
        assert_eq!(
            t.see(key(1), Sel::Prev, 3, 200),
            Seen::Known { mismatch: false }
        );
        let r = *t.get(&key(1)).unwrap();
        assert_eq!((r.assigned_ver, r.first_seen, r.last_seen), (3, 100, 200));
        assert_eq!(r.last_sel, Sel::Prev);
        // A pinned flow is assigned version 0; a pin never mismatches.
        assert_eq!(t.see(key(2), Sel::PinTable, 9, 300), Seen::New);
        assert_eq!(t.get(&key(2)).unwrap().assigned_ver, 0);
        assert_eq!(
            t.see(key(2), Sel::PinCache, 0, 310),
            Seen::Known { mismatch: false }
        );
        assert_eq!(t.see(key(3), Sel::Cur, 3, 400), Seen::Overflow);
        assert_eq!(t.len(), 2);
        // The version moved under a group selection: a mismatch.
        assert_eq!(
            t.see(key(1), Sel::Cur, 4, 500),
            Seen::Known { mismatch: true }
        );
        assert_eq!(t.get(&key(1)).unwrap().assigned_ver, 3);
    }

    #[test]
    fn expiry_spares_offloaded_and_recent_flows() {
        let mut t = FlowTable::new(10);
        for n in 0..4 {
            t.see(key(n), Sel::Cur, 1, u64::from(n) * 10);
        }
        assert!(t.set_offloaded(&key(0)));
        assert!(!t.set_offloaded(&key(9)));
        let mut out = Vec::new();
        // At 1020 with T_exp 1000: flows last seen at 0, 10, 20 are idle
        // long enough; flow 0 is offloaded.
        t.expire(1_020, 1_000, &mut out);
        out.sort();
        assert_eq!(out, vec![key(1), key(2)]);
        assert_eq!(t.len(), 2);
        let mut q = Vec::new();
        t.query(1, 5_000, 1_000, &mut q);
        assert_eq!(q.len(), 1, "only the offloaded flow is live at 5000");
        assert!(q[0].offloaded);
        q.clear();
        t.query(1, 1_020, 1_000, &mut q);
        q.sort();
        assert_eq!(
            q.iter().map(|i| i.flow).collect::<Vec<_>>(),
            [key(0), key(3)]
        );
        q.clear();
        t.query(2, 1_020, 1_000, &mut q);
        assert!(q.is_empty());
    }
}
