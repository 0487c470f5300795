//! MFWD, mirrored forwarding (spec §7.3, §4.3, app 2): a forwarding table
//! keyed by flow, FlowKey → `nexthop_id`, `mirrored` (every server holds
//! it) and `promotable` (heavy flows' entries are cached in the switch).
//!
//! Params (P = 16): request `flow: FlowKey` (128 bits); response
//! `nexthop_id: 16, hit: 8`.

// ---------------------------------------------------------------------------
// Server half
// ---------------------------------------------------------------------------

use hashbrown::HashMap;

use super::{request_flow, write_response};
use crate::app::{Entry, HandlerCtx, HandlerStatus, RemoteHandler};
use crate::flow::{FlowKey, FLOW_KEY_LEN};

/// MFWD's `app_id`.
pub const APP_ID: u8 = 2;
/// MFWD's params region: max(128, 16 + 8) bits, rounded up to words.
pub const PARAMS_LEN: usize = crate::app::params_len(128, 16 + 8);
/// The forwarding table's id.
pub const TABLE_FWD: u8 = 0;
/// The action of its entries, `set_nexthop(nexthop_id)`; data is the
/// 2-byte `nexthop_id`.
pub const ACTION_SET_NEXTHOP: u8 = 1;
/// The mirrored table's default capacity (§3.2: 1,048,576 entries).
pub const DEFAULT_CAPACITY: usize = 1_048_576;

/// What the MFWD handler did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MfwdStats {
    /// Lookups that hit.
    pub hits: u64,
    /// Lookups that missed (answered NO_RESULT).
    pub misses: u64,
    /// Requests whose params are not MFWD's (answered DROP).
    pub malformed: u64,
    /// Entries installed (new or replaced).
    pub installed: u64,
    /// Entries refused: malformed, another table, or the table full.
    pub refused: u64,
    /// Entries deleted.
    pub deleted: u64,
}

/// MFWD's remote handler: the mirrored forwarding table. See the module
/// documentation.
#[derive(Debug, Clone)]
pub struct MfwdHandler {
    table: HashMap<FlowKey, u16>,
    capacity: usize,
    stats: MfwdStats,
}

impl Default for MfwdHandler {
    fn default() -> Self {
        MfwdHandler::new(DEFAULT_CAPACITY)
    }
}

impl MfwdHandler {
    /// A handler whose mirrored table holds at most `capacity` entries.
    pub fn new(capacity: usize) -> Self {
        MfwdHandler {
            table: HashMap::new(),
            capacity,
            stats: MfwdStats::default(),
        }
    }

    /// The entry installing `nexthop` for `flow` (what MIRROR_INSERT
    /// carries).
    pub fn entry(flow: FlowKey, nexthop: u16) -> Entry {
        Entry {
            table: TABLE_FWD,
            key: flow.0.to_vec(),
            action: ACTION_SET_NEXTHOP,
            data: nexthop.to_be_bytes().to_vec(),
        }
    }

    /// The nexthop of `flow`, if the table has it.
    pub fn lookup(&self, flow: &FlowKey) -> Option<u16> {
        self.table.get(flow).copied()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// No entry held.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The counters.
    pub fn stats(&self) -> &MfwdStats {
        &self.stats
    }
}

/// The response: `nexthop_id` then `hit`.
fn respond(params: &mut [u8], nexthop: u16, hit: bool) {
    write_response(params, &[&nexthop.to_be_bytes(), &[u8::from(hit)]]);
}

impl RemoteHandler for MfwdHandler {
    fn app_id(&self) -> u8 {
        APP_ID
    }

    fn params_len(&self) -> usize {
        PARAMS_LEN
    }

    /// A hit answers OK with the nexthop and `hit = 1`; a miss answers
    /// NO_RESULT with `nexthop_id = 0, hit = 0` [our choice: the switch's
    /// post-processing then forwards by its regular routes, as if the
    /// flow had no entry anywhere].
    fn handle(&mut self, _ctx: &mut HandlerCtx<'_>, params: &mut [u8]) -> HandlerStatus {
        let Some(flow) = request_flow(params, PARAMS_LEN) else {
            self.stats.malformed += 1;
            return HandlerStatus::Drop;
        };
        match self.table.get(&flow) {
            Some(&nh) => {
                self.stats.hits += 1;
                respond(params, nh, true);
                HandlerStatus::Ok
            }
            None => {
                self.stats.misses += 1;
                respond(params, 0, false);
                HandlerStatus::NoResult
            }
        }
    }

    fn mirror_insert(&mut self, entry: Entry) {
        let key: Option<[u8; FLOW_KEY_LEN]> = entry.key.as_slice().try_into().ok();
        let data: Option<[u8; 2]> = entry.data.as_slice().try_into().ok();
        let (Some(key), Some(data), TABLE_FWD) = (key, data, entry.table) else {
            self.stats.refused += 1;
            return;
        };
        let flow = FlowKey(key);
        if !self.table.contains_key(&flow) && self.table.len() >= self.capacity {
            self.stats.refused += 1;
            return;
        }
        self.table.insert(flow, u16::from_be_bytes(data));
        self.stats.installed += 1;
    }

    fn mirror_delete(&mut self, table: u8, key: &[u8]) {
        let Ok(key) = <[u8; FLOW_KEY_LEN]>::try_from(key) else {
            return;
        };
        if table == TABLE_FWD && self.table.remove(&FlowKey(key)).is_some() {
            self.stats.deleted += 1;
        }
    }

    /// The switch copy aged out: the server keeps its copy [our choice:
    /// MFWD entries are the controller's replicated routes, holding no
    /// resource; only MIRROR_DELETE removes them].
    fn expire(&mut self, _table: u8, _key: &[u8]) {}

    /// A crash loses the mirrored table (the controller installs it again
    /// when the server registers).
    fn reset(&mut self) {
        self.table.clear();
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let s = self.stats;
        vec![
            ("hits".into(), s.hits),
            ("misses".into(), s.misses),
            ("malformed".into(), s.malformed),
            ("installed".into(), s.installed),
            ("refused".into(), s.refused),
            ("deleted".into(), s.deleted),
            ("entries".into(), self.table.len() as u64),
        ]
    }
}

#[cfg(test)]
mod server_tests {
    use super::*;

    fn key(n: u16) -> FlowKey {
        FlowKey::new(0, 6, [10, 0, 0, 1], [10, 0, 0, 2], n, 80)
    }

    fn call(h: &mut MfwdHandler, params: &mut [u8]) -> HandlerStatus {
        let mut created = Vec::new();
        let mut ctx = HandlerCtx {
            now: 0,
            server_id: 1,
            core: 0,
            flow: key(0),
            payload: &[],
            created: &mut created,
        };
        let s = h.handle(&mut ctx, params);
        assert!(created.is_empty(), "MFWD creates nothing");
        s
    }

    #[test]
    fn hit_and_miss() {
        assert_eq!(PARAMS_LEN, 16);
        let mut h = MfwdHandler::default();
        h.mirror_insert(MfwdHandler::entry(key(1), 0x0A0B));
        let mut p = key(1).0;
        assert_eq!(call(&mut h, &mut p), HandlerStatus::Ok);
        assert_eq!(p, [0x0A, 0x0B, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let mut p = key(2).0;
        assert_eq!(call(&mut h, &mut p), HandlerStatus::NoResult);
        assert_eq!(p, [0; 16]);
        assert_eq!((h.stats().hits, h.stats().misses), (1, 1));
        // Replace, delete.
        h.mirror_insert(MfwdHandler::entry(key(1), 7));
        assert_eq!(h.lookup(&key(1)), Some(7));
        h.expire(TABLE_FWD, &key(1).0);
        assert_eq!(h.lookup(&key(1)), Some(7), "expiry keeps routes");
        h.mirror_delete(TABLE_FWD, &key(1).0);
        assert!(h.is_empty());
    }

    #[test]
    fn bounds_and_malformed_input() {
        let mut h = MfwdHandler::new(1);
        h.mirror_insert(MfwdHandler::entry(key(1), 1));
        h.mirror_insert(MfwdHandler::entry(key(2), 2));
        h.mirror_insert(Entry {
            data: vec![1, 2, 3],
            ..MfwdHandler::entry(key(3), 0)
        });
        h.mirror_insert(Entry {
            table: 4,
            ..MfwdHandler::entry(key(1), 0)
        });
        h.mirror_insert(MfwdHandler::entry(key(1), 9));
        assert_eq!((h.len(), h.stats().refused), (1, 3));
        assert_eq!(h.lookup(&key(1)), Some(9));
        h.mirror_delete(TABLE_FWD, &[1, 2, 3]);
        for len in [0usize, 4, 15, 17, 32] {
            let mut p = vec![0xFF; len];
            assert_eq!(call(&mut h, &mut p), HandlerStatus::Drop);
            assert_eq!(p, vec![0xFF; len], "a refused request is left alone");
        }
        assert_eq!(h.stats().malformed, 5);
        h.reset();
        assert!(h.is_empty());
    }
}

// ---------------------------------------------------------------------------
// Switch half
// ---------------------------------------------------------------------------

pub use switch_half::*;

mod switch_half {
    //! The switch half: tables, `pre_processing`, `post_processing`.

    use super::*;
    use inca_apps::headers::Parsed;
    use inca_switch::{AccessError, ControlPlane, DataPlane, Declare, DeclareError};
    use inca_wire::checksum;

    use crate::app::{Entry, PostPath, PreOutcome, SwitchApp};
    use crate::apps::table::FlowTable;

    /// Default switch-table capacity K (1,024, E3 [our choice]).
    pub const SWITCH_ENTRIES: usize = 1024;

    /// The switch half.
    #[derive(Debug, Clone)]
    pub struct MfwdSwitch {
        table: FlowTable<2>,
    }

    impl MfwdSwitch {
        /// With a switch table of `capacity` entries.
        pub fn new(capacity: usize) -> Self {
            MfwdSwitch {
                table: FlowTable::new("mfwd", capacity),
            }
        }
    }

    impl SwitchApp for MfwdSwitch {
        fn app_id(&self) -> u8 {
            APP_ID
        }

        fn name(&self) -> &'static str {
            "mfwd"
        }

        fn params_len(&self) -> usize {
            PARAMS_LEN
        }

        fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
            self.table.declare(d)
        }

        fn pre(
            &mut self,
            p: &Parsed,
            header: &[u8],
            dp: &mut DataPlane<'_>,
            req: &mut [u8],
            res: &mut [u8],
        ) -> Result<PreOutcome, AccessError> {
            if !p.ipv4 {
                return Ok(PreOutcome::default());
            }
            let key = self.flow_key(p, header);
            match self.table.lookup(dp, &key.0)? {
                Some(nh) => {
                    res[0..2].copy_from_slice(&nh);
                    res[2] = 1;
                    Ok(PreOutcome {
                        res_set: true,
                        ..PreOutcome::default()
                    })
                }
                None => {
                    req[..16].copy_from_slice(&key.0);
                    Ok(PreOutcome {
                        flight: true,
                        ..PreOutcome::default()
                    })
                }
            }
        }

        fn post(
            &mut self,
            p: &Parsed,
            header: &mut [u8],
            res: Option<&[u8]>,
            _path: PostPath,
            _dp: &mut DataPlane<'_>,
        ) -> Result<(), AccessError> {
            let l3 = usize::from(p.l3);
            let Some(r) = res.filter(|r| r.len() >= 3 && r[2] == 1) else {
                return Ok(());
            };
            if !p.ipv4 || header.len() < l3 + 12 {
                return Ok(());
            }
            let nh = u16::from_be_bytes([r[0], r[1]]);
            let old = u16::from_be_bytes([header[l3 + 4], header[l3 + 5]]);
            header[l3 + 4..l3 + 6].copy_from_slice(&nh.to_be_bytes());
            let sum = u16::from_be_bytes([header[l3 + 10], header[l3 + 11]]);
            let sum = checksum::update_u16(sum, old, nh);
            header[l3 + 10..l3 + 12].copy_from_slice(&sum.to_be_bytes());
            Ok(())
        }

        fn promotable(&self) -> bool {
            true
        }

        fn switch_capacity(&self) -> usize {
            self.table.capacity()
        }

        fn install(&self, cp: &mut ControlPlane<'_>, e: &Entry) -> Option<u64> {
            (e.table == 0).then(|| self.table.install(cp, e)).flatten()
        }

        fn uninstall(&self, cp: &mut ControlPlane<'_>, table: u8, key: &[u8]) -> Option<u64> {
            (table == 0)
                .then(|| self.table.uninstall(cp, key))
                .flatten()
        }

        fn poll(&self, cp: &mut ControlPlane<'_>, table: u8, key: &[u8]) -> Option<u64> {
            (table == 0).then(|| self.table.poll(cp, key)).flatten()
        }
    }
}
