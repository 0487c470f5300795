//! MFWD (spec §7.3): memory-only forwarding keyed by flow key → next-hop
//! id, `mirrored` and `promotable`. The switch table caches the heavy
//! flows' entries; a miss asks a server, whose mirrored table has them all.
//!
//! Request `flow` (128 bits); response `nexthop_id:16, hit:8`. The next
//! hop id is written into the IPv4 Identification field (checksum updated
//! incrementally) [our choice: an observable effect that routing does not
//! overwrite, so fast and slow paths can be compared byte for byte];
//! routing then proceeds as usual.

use inca_apps::headers::Parsed;
use inca_switch::{AccessError, ControlPlane, DataPlane, Declare, DeclareError};
use inca_wire::checksum;

use crate::app::{params_len, Entry, PostPath, PreOutcome, SwitchApp};
use crate::apps::table::FlowTable;
use crate::flow::FlowKey;

/// MFWD's app id.
pub const APP_ID: u8 = 2;
/// Its params length: request 128 bits, response 24.
pub const P: usize = params_len(128, 24);
/// Default switch-table capacity K (1,024, E3 [our choice]).
pub const SWITCH_ENTRIES: usize = 1024;
/// The action id of a forwarding entry.
pub const ACTION_NEXTHOP: u8 = 1;

/// The entry of `flow` → `nh` (table 0).
pub fn entry(flow: &FlowKey, nh: u16) -> Entry {
    Entry {
        table: 0,
        key: flow.0.to_vec(),
        action: ACTION_NEXTHOP,
        data: nh.to_be_bytes().to_vec(),
    }
}

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
        P
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
