//! The cross-device runtime invariants of spec §6.2 that need a global
//! view, as a [`Monitor`] fed with timestamped [`Event`]s (from the history
//! recorder and the switch/store observer hooks) during or after a
//! simulated run. The campaign runner calls [`Monitor::violations`] after
//! every run.
//!
//! Checked here:
//! - 1 lease nesting: a switch that sees a valid lease at t has the store
//!   head's owner = itself and head expiry ≥ t;
//! - 2 no two switches run app logic for one key under valid leases at once;
//! - 3 durability before release: an output with version (f, s) leaves only
//!   after the tail committed last_seq ≥ s under fence f;
//! - 8 no stale read: no output is computed from a version older than the
//!   store's committed version when the switch got its current lease;
//! - 9 NAT: no two live mappings share a public (IP, port), and each port
//!   lies in its allocating shard's range;
//! - 10 snapshot exactness and 11 staleness (bounded mode).
//!
//! Each violation carries the flow key, the time and a minimal excerpt: the
//! last [`EXCERPT`] events of that key. Memory is bounded: per-key state is
//! O(switches + fences), excerpts are ring buffers, and at most
//! [`MAX_VIOLATIONS`] violations are kept (the rest are counted).
//!
//! Versions are ordered by the store's commit order, not by comparing
//! fences [our choice]: each fence a key commits (a grant, or the record's
//! creation) opens an *era*, and a version (f, s) ranks as (era of f, s),
//! with seqs compared in RFC 1982 serial arithmetic within an era (§5.6).
//! Fences advance by FENCE_GAP per grant and wrap the 16-bit space after
//! 16 grants, so serial comparison of fences alone misorders a key that
//! was re-granted 8 or more times in one run.

use std::collections::{BTreeMap, VecDeque};

/// Events kept per key for violation excerpts.
pub const EXCERPT: usize = 12;
/// Violations kept in full; later ones are only counted.
pub const MAX_VIOLATIONS: usize = 256;

/// `a < b` in RFC 1982 serial arithmetic modulo 2^16.
pub fn serial_lt(a: u16, b: u16) -> bool {
    a != b && b.wrapping_sub(a) < 0x8000
}

/// A (fence, seq) version; fences order first.
pub type Version = (u16, u16);

/// Something that happened, with its time (ns).
#[derive(Clone, Debug)]
pub enum Event {
    /// Switch `switch` ran the app for `key` holding a lease it considers
    /// valid until `until`.
    LeaseUsed {
        time: u64,
        switch: u32,
        key: Vec<u8>,
        until: u64,
    },
    /// Switch `switch` no longer holds `key` (reject, give-up, crash of the
    /// switch: `key` = None means every key).
    LeaseLost {
        time: u64,
        switch: u32,
        key: Option<Vec<u8>>,
    },
    /// The store head's lease record for `key` changed.
    StoreLease {
        time: u64,
        key: Vec<u8>,
        owner: Option<u32>,
        expiry: u64,
    },
    /// The chain's tail committed `key` at this version.
    Commit {
        time: u64,
        key: Vec<u8>,
        version: Version,
    },
    /// The store granted `owner` a lease with base = fence.
    Grant {
        time: u64,
        key: Vec<u8>,
        owner: u32,
        base: u16,
    },
    /// An output left switch `switch`; it was computed at `computed_at`
    /// from state `version` (for a write, the version it created).
    Release {
        time: u64,
        switch: u32,
        key: Vec<u8>,
        version: Version,
        computed_at: u64,
    },
    /// A NAT mapping became live (`live`) or was removed; `range` is the
    /// allocating shard's public port range, inclusive.
    NatMapping {
        time: u64,
        key: Vec<u8>,
        public: ([u8; 4], u16),
        range: (u16, u16),
        live: bool,
    },
    /// A snapshot partition was restored; `truth` is the ground-truth array
    /// at the instant packet 0 of the committed epoch was processed.
    SnapshotRestore {
        time: u64,
        partition: Vec<u8>,
        epoch: u16,
        restored: Vec<u32>,
        truth: Vec<u32>,
    },
    /// Staleness of a restore after a failure (6.2.11).
    Staleness {
        time: u64,
        partition: Vec<u8>,
        failure: u64,
        flip: u64,
        epsilon: u64,
        t_snap: u64,
        action_fired: bool,
    },
}

impl Event {
    fn time(&self) -> u64 {
        match self {
            Event::LeaseUsed { time, .. }
            | Event::LeaseLost { time, .. }
            | Event::StoreLease { time, .. }
            | Event::Commit { time, .. }
            | Event::Grant { time, .. }
            | Event::Release { time, .. }
            | Event::NatMapping { time, .. }
            | Event::SnapshotRestore { time, .. }
            | Event::Staleness { time, .. } => *time,
        }
    }

    fn key(&self) -> Option<&[u8]> {
        match self {
            Event::LeaseUsed { key, .. }
            | Event::StoreLease { key, .. }
            | Event::Commit { key, .. }
            | Event::Grant { key, .. }
            | Event::Release { key, .. }
            | Event::NatMapping { key, .. } => Some(key),
            Event::LeaseLost { key, .. } => key.as_deref(),
            Event::SnapshotRestore { partition, .. } | Event::Staleness { partition, .. } => {
                Some(partition)
            }
        }
    }
}

/// A broken invariant.
#[derive(Clone, Debug)]
pub struct Violation {
    /// Spec §6.2 item number.
    pub invariant: u8,
    /// The flow (or partition) key.
    pub key: Vec<u8>,
    /// When.
    pub time: u64,
    /// What.
    pub detail: String,
    /// The last events of this key, oldest first.
    pub excerpt: Vec<String>,
}

/// A version's place in a key's commit order: (era, seq).
type Rank = (u32, u16);

fn rank_lt(a: Rank, b: Rank) -> bool {
    if a.0 != b.0 {
        a.0 < b.0
    } else {
        serial_lt(a.1, b.1)
    }
}

#[derive(Clone, Debug, Default)]
struct KeyState {
    /// Head's view: owner and expiry.
    store: Option<(Option<u32>, u64)>,
    /// Lease each switch believes it holds: switch → until.
    held: BTreeMap<u32, u64>,
    /// The era each fence value opened last, and the current fence.
    eras: BTreeMap<u16, u32>,
    fence: Option<u16>,
    /// Highest committed seq per era.
    committed: BTreeMap<u32, u16>,
    /// Rank of the latest committed write (grant fences change no state).
    latest_write: Option<Rank>,
    /// Per switch: grant times and the latest write committed then.
    grants: BTreeMap<u32, Vec<(u64, Option<Rank>)>>,
    recent: VecDeque<String>,
}

impl KeyState {
    /// The era of fence `f`, opening a new one if `f` is not the current
    /// fence.
    fn era(&mut self, f: u16) -> u32 {
        if self.fence != Some(f) {
            let next = self.eras.values().max().map_or(1, |e| e + 1);
            self.eras.insert(f, next);
            self.fence = Some(f);
        }
        self.eras[&f]
    }

    fn rank(&self, v: Version) -> Option<Rank> {
        self.eras.get(&v.0).map(|&e| (e, v.1))
    }
}

/// The runtime invariant monitor.
#[derive(Clone, Debug, Default)]
pub struct Monitor {
    keys: BTreeMap<Vec<u8>, KeyState>,
    /// Live NAT mappings: public → key.
    nat: BTreeMap<([u8; 4], u16), Vec<u8>>,
    violations: Vec<Violation>,
    dropped: u64,
    events: u64,
}

impl Monitor {
    /// An empty monitor.
    pub fn new() -> Self {
        Monitor::default()
    }

    fn report(&mut self, invariant: u8, key: &[u8], time: u64, detail: String) {
        if self.violations.len() >= MAX_VIOLATIONS {
            self.dropped += 1;
            return;
        }
        let excerpt = self
            .keys
            .get(key)
            .map(|k| k.recent.iter().cloned().collect())
            .unwrap_or_default();
        self.violations.push(Violation {
            invariant,
            key: key.to_vec(),
            time,
            detail,
            excerpt,
        });
    }

    /// Feeds one event. Events must come in time order per key.
    pub fn observe(&mut self, e: Event) {
        self.events += 1;
        if let Some(k) = e.key() {
            let ks = self.keys.entry(k.to_vec()).or_default();
            if ks.recent.len() == EXCERPT {
                ks.recent.pop_front();
            }
            ks.recent.push_back(format!("{e:?}"));
        }
        let t = e.time();
        match e {
            Event::LeaseUsed {
                switch, key, until, ..
            } => {
                let ks = self.keys.entry(key.clone()).or_default();
                let store = ks.store;
                let rival = ks
                    .held
                    .iter()
                    .find(|&(&s, &u)| s != switch && u > t)
                    .map(|(&s, &u)| (s, u));
                ks.held.insert(switch, until);
                match store {
                    Some((Some(o), exp)) if o == switch && exp >= t => {}
                    other => self.report(
                        1,
                        &key,
                        t,
                        format!("switch {switch} used a lease the store head does not back: head (owner, expiry) = {other:?}"),
                    ),
                }
                if let Some((s, u)) = rival {
                    self.report(
                        2,
                        &key,
                        t,
                        format!("switches {s} (lease until {u}) and {switch} both run the app with valid leases"),
                    );
                }
            }
            Event::LeaseLost { switch, key, .. } => match key {
                Some(k) => {
                    if let Some(ks) = self.keys.get_mut(&k) {
                        ks.held.remove(&switch);
                    }
                }
                None => {
                    for ks in self.keys.values_mut() {
                        ks.held.remove(&switch);
                    }
                }
            },
            Event::StoreLease {
                key, owner, expiry, ..
            } => {
                self.keys.entry(key).or_default().store = Some((owner, expiry));
            }
            Event::Commit { key, version, .. } => {
                let ks = self.keys.entry(key).or_default();
                let era = ks.era(version.0);
                let e = ks.committed.entry(era).or_insert(version.1);
                if serial_lt(*e, version.1) {
                    *e = version.1;
                }
                // seq == fence: a grant's fence (or the new record), which
                // changes no state; a write always has seq > fence.
                if version.0 != version.1 {
                    ks.latest_write = Some((era, version.1));
                }
            }
            Event::Grant {
                key, owner, base, ..
            } => {
                let ks = self.keys.entry(key).or_default();
                ks.era(base);
                // [our choice] The version "committed when the switch got
                // its lease" is the latest committed *write*: the grant's
                // own fence changes no state, and ranking outputs against
                // it flagged reads of the unchanged state by a switch that
                // had not yet installed a re-grant it had asked for.
                let at = ks.latest_write;
                ks.grants.entry(owner).or_default().push((t, at));
            }
            Event::Release {
                switch,
                key,
                version,
                computed_at,
                ..
            } => {
                let ks = self.keys.entry(key.clone()).or_default();
                let rank = ks.rank(version);
                let committed = rank.and_then(|r| ks.committed.get(&r.0).copied());
                let durable = committed.is_some_and(|s| !serial_lt(s, version.1));
                let at_grant = ks
                    .grants
                    .get(&switch)
                    .and_then(|g| g.iter().rev().find(|(gt, _)| *gt <= computed_at))
                    .and_then(|&(_, v)| v);
                if !durable {
                    let c = committed;
                    self.report(
                        3,
                        &key,
                        t,
                        format!(
                            "switch {switch} released an output of version {version:?}, but the tail \
                             has committed only seq {c:?} under fence {}",
                            version.0
                        ),
                    );
                }
                if let (Some(g), Some(r)) = (at_grant, rank) {
                    if rank_lt(r, g) {
                        self.report(
                            8,
                            &key,
                            t,
                            format!(
                                "switch {switch} computed an output at {computed_at} from version {version:?}, \
                                 older than the write (era, seq) = {g:?} committed when it got its lease"
                            ),
                        );
                    }
                }
            }
            Event::NatMapping {
                key,
                public,
                range,
                live,
                ..
            } => {
                if !live {
                    if self.nat.get(&public) == Some(&key) {
                        self.nat.remove(&public);
                    }
                    return;
                }
                if public.1 < range.0 || public.1 > range.1 {
                    self.report(
                        9,
                        &key,
                        t,
                        format!(
                            "public port {} outside its shard's range {range:?}",
                            public.1
                        ),
                    );
                }
                match self.nat.get(&public) {
                    Some(other) if *other != key => {
                        let other = other.clone();
                        self.report(
                            9,
                            &key,
                            t,
                            format!("public {public:?} already mapped for key {other:?}"),
                        );
                    }
                    _ => {
                        self.nat.insert(public, key);
                    }
                }
            }
            Event::SnapshotRestore {
                partition,
                epoch,
                restored,
                truth,
                ..
            } => {
                if restored != truth {
                    let first = restored.iter().zip(&truth).position(|(a, b)| a != b);
                    self.report(
                        10,
                        &partition,
                        t,
                        format!(
                            "epoch {epoch} restored differs from the ground truth (first index {first:?}, \
                             lengths {} vs {})",
                            restored.len(),
                            truth.len()
                        ),
                    );
                }
            }
            Event::Staleness {
                partition,
                failure,
                flip,
                epsilon,
                t_snap,
                action_fired,
                ..
            } => {
                if !action_fired && flip.saturating_add(epsilon).saturating_add(t_snap) < failure {
                    self.report(
                        11,
                        &partition,
                        t,
                        format!(
                            "restored state flipped at {flip}, more than ε + T_snap = {} before the \
                             failure at {failure}, and the ε action did not fire",
                            epsilon + t_snap
                        ),
                    );
                }
            }
        }
    }

    /// The violations found so far (at most [`MAX_VIOLATIONS`]).
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Violations found beyond [`MAX_VIOLATIONS`].
    pub fn dropped_violations(&self) -> u64 {
        self.dropped
    }

    /// Events observed.
    pub fn events(&self) -> u64 {
        self.events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k() -> Vec<u8> {
        b"flow".to_vec()
    }

    #[test]
    fn serial_comparison_wraps() {
        assert!(serial_lt(1, 2));
        assert!(serial_lt(65535, 1));
        assert!(!serial_lt(1, 65535));
        assert!(!serial_lt(7, 7));
    }

    #[test]
    fn a_clean_failover_passes() {
        let mut m = Monitor::new();
        m.observe(Event::StoreLease {
            time: 0,
            key: k(),
            owner: Some(1),
            expiry: 1000,
        });
        m.observe(Event::Grant {
            time: 0,
            key: k(),
            owner: 1,
            base: 0,
        });
        m.observe(Event::Commit {
            time: 0,
            key: k(),
            version: (0, 0),
        });
        m.observe(Event::LeaseUsed {
            time: 10,
            switch: 1,
            key: k(),
            until: 900,
        });
        m.observe(Event::Commit {
            time: 20,
            key: k(),
            version: (0, 1),
        });
        m.observe(Event::Release {
            time: 21,
            switch: 1,
            key: k(),
            version: (0, 1),
            computed_at: 10,
        });
        m.observe(Event::LeaseLost {
            time: 500,
            switch: 1,
            key: None,
        });
        m.observe(Event::StoreLease {
            time: 1100,
            key: k(),
            owner: Some(2),
            expiry: 2100,
        });
        m.observe(Event::Commit {
            time: 1100,
            key: k(),
            version: (4097, 4097),
        });
        m.observe(Event::Grant {
            time: 1100,
            key: k(),
            owner: 2,
            base: 4097,
        });
        m.observe(Event::LeaseUsed {
            time: 1200,
            switch: 2,
            key: k(),
            until: 2000,
        });
        m.observe(Event::Release {
            time: 1201,
            switch: 2,
            key: k(),
            version: (4097, 4097),
            computed_at: 1200,
        });
        assert!(m.violations().is_empty(), "{:?}", m.violations());
    }

    fn commit(m: &mut Monitor, time: u64, version: Version) {
        m.observe(Event::Commit {
            time,
            key: k(),
            version,
        });
    }

    fn grant(m: &mut Monitor, time: u64, owner: u32, base: u16) {
        commit(m, time, (base, base));
        m.observe(Event::Grant {
            time,
            key: k(),
            owner,
            base,
        });
    }

    fn release(m: &mut Monitor, time: u64, version: Version, computed_at: u64) {
        m.observe(Event::Release {
            time,
            switch: 1,
            key: k(),
            version,
            computed_at,
        });
    }

    /// Campaign seed 6: the store fenced its owner again (a repeated
    /// LEASE_NEW) while the switch still read the unchanged state under
    /// the previous grant; the fence changes no state, so such a read is
    /// not stale. An output older than a committed write still is.
    #[test]
    fn a_fence_alone_does_not_make_a_read_stale() {
        let mut m = Monitor::new();
        grant(&mut m, 0, 1, 0);
        commit(&mut m, 10, (0, 1));
        commit(&mut m, 20, (0, 2));
        grant(&mut m, 30, 1, 4098);
        release(&mut m, 40, (0, 2), 35);
        assert!(m.violations().is_empty(), "{:?}", m.violations());
        release(&mut m, 50, (0, 1), 45);
        let got: Vec<u8> = m.violations().iter().map(|v| v.invariant).collect();
        assert_eq!(got, vec![8]);
    }

    /// Campaign seeds 32 and 107: 16 grants of FENCE_GAP = 4096 bring a
    /// key's fence back to the same 16-bit value. Versions rank by the
    /// order the store committed their fences, so an output under the
    /// reused fence is judged against that fence's latest era (where seq
    /// 50 was never committed), not the first one (where seq 100 was).
    #[test]
    fn versions_rank_by_commit_order_across_fence_wraparound() {
        let mut m = Monitor::new();
        grant(&mut m, 0, 1, 0);
        commit(&mut m, 10, (0, 100));
        let mut t = 100;
        for g in 1..=16u16 {
            let base = g.wrapping_mul(4096);
            grant(&mut m, t, 1, base);
            if g < 16 {
                commit(&mut m, t + 10, (base, base + 1));
                release(&mut m, t + 20, (base, base + 1), t + 5);
            }
            t += 100;
        }
        assert!(m.violations().is_empty(), "{:?}", m.violations());
        release(&mut m, t, (0, 50), t - 10);
        let got: Vec<u8> = m.violations().iter().map(|v| v.invariant).collect();
        assert_eq!(got, vec![3]);
    }

    #[test]
    fn each_broken_invariant_is_reported_with_an_excerpt() {
        let mut m = Monitor::new();
        m.observe(Event::StoreLease {
            time: 0,
            key: k(),
            owner: Some(1),
            expiry: 1000,
        });
        m.observe(Event::Commit {
            time: 0,
            key: k(),
            version: (0, 1),
        });
        m.observe(Event::Grant {
            time: 0,
            key: k(),
            owner: 1,
            base: 0,
        });
        m.observe(Event::LeaseUsed {
            time: 10,
            switch: 1,
            key: k(),
            until: 900,
        });
        // 1 and 2: switch 2 runs with a lease the head gives to switch 1.
        m.observe(Event::LeaseUsed {
            time: 20,
            switch: 2,
            key: k(),
            until: 800,
        });
        // 3: released before the tail committed seq 2.
        m.observe(Event::Release {
            time: 30,
            switch: 1,
            key: k(),
            version: (0, 2),
            computed_at: 10,
        });
        // 8: computed from (0, 0) although (0, 1) was committed at the grant.
        m.observe(Event::Release {
            time: 31,
            switch: 1,
            key: k(),
            version: (0, 0),
            computed_at: 10,
        });
        // 9: duplicate public endpoint, and a port outside the range.
        let public = ([1, 2, 3, 4], 5000);
        m.observe(Event::NatMapping {
            time: 40,
            key: b"a".to_vec(),
            public,
            range: (4096, 8191),
            live: true,
        });
        m.observe(Event::NatMapping {
            time: 41,
            key: b"b".to_vec(),
            public,
            range: (4096, 8191),
            live: true,
        });
        m.observe(Event::NatMapping {
            time: 42,
            key: b"c".to_vec(),
            public: ([1, 2, 3, 4], 9000),
            range: (4096, 8191),
            live: true,
        });
        // 10 and 11.
        m.observe(Event::SnapshotRestore {
            time: 50,
            partition: b"p".to_vec(),
            epoch: 3,
            restored: vec![1, 2],
            truth: vec![1, 3],
        });
        m.observe(Event::Staleness {
            time: 60,
            partition: b"p".to_vec(),
            failure: 10_000,
            flip: 1_000,
            epsilon: 3_000,
            t_snap: 1_000,
            action_fired: false,
        });
        m.observe(Event::Staleness {
            time: 61,
            partition: b"p".to_vec(),
            failure: 10_000,
            flip: 1_000,
            epsilon: 3_000,
            t_snap: 1_000,
            action_fired: true,
        });
        let got: Vec<u8> = m.violations().iter().map(|v| v.invariant).collect();
        assert_eq!(got, vec![1, 2, 3, 8, 9, 9, 10, 11]);
        let v = &m.violations()[1];
        assert_eq!(v.key, k());
        assert_eq!(v.time, 20);
        assert!(v.excerpt.last().unwrap().contains("LeaseUsed"));
        assert!(v.excerpt.len() <= EXCERPT);
    }
}
