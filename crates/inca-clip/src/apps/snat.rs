//! State-heavy SNAT (spec §7.1): `nat_table` on the switch (flow key →
//! public address and port, 1,024 entries, far below the flow count), a
//! mirrored copy on every server, translations allocated by the server
//! that first sees a flow. Both paths rewrite the source address and port
//! with inca-apps' NAT core (RFC 1624 incremental checksums).
//!
//! Request `flow` (128 bits); response `pub_ip:32, pub_port:16`.

use inca_apps::core::nat::{self as core, Direction};
use inca_apps::core::Endpoint;
use inca_apps::headers::Parsed;
use inca_switch::{AccessError, ControlPlane, DataPlane, Declare, DeclareError};

use crate::app::{params_len, Entry, PostPath, PreOutcome, SwitchApp};
use crate::apps::table::FlowTable;
use crate::flow::FlowKey;

/// SNAT's app id.
pub const APP_ID: u8 = 3;
/// Its params length: request 128 bits, response 48.
pub const P: usize = params_len(128, 48);
/// Default switch-table capacity (1,024 [our choice, §7.1]).
pub const SWITCH_ENTRIES: usize = 1024;
/// The action id of a translation entry.
pub const ACTION_TRANSLATE: u8 = 1;

/// The entry of `flow` → `public` (table 0).
pub fn entry(flow: &FlowKey, public: Endpoint) -> Entry {
    let mut data = public.ip.to_vec();
    data.extend_from_slice(&public.port.to_be_bytes());
    Entry {
        table: 0,
        key: flow.0.to_vec(),
        action: ACTION_TRANSLATE,
        data,
    }
}

/// The switch half.
#[derive(Debug, Clone)]
pub struct SnatSwitch {
    table: FlowTable<6>,
}

impl SnatSwitch {
    /// With a switch table of `capacity` entries.
    pub fn new(capacity: usize) -> Self {
        SnatSwitch {
            table: FlowTable::new("nat_table", capacity),
        }
    }
}

impl SwitchApp for SnatSwitch {
    fn app_id(&self) -> u8 {
        APP_ID
    }

    fn name(&self) -> &'static str {
        "snat"
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
        // TCP and UDP only; anything else is forwarded untouched.
        if core::flow(p).is_none() || p.icmp_echo.is_some() {
            return Ok(PreOutcome::default());
        }
        let key = self.flow_key(p, header);
        match self.table.lookup(dp, &key.0)? {
            Some(t) => {
                res[..6].copy_from_slice(&t);
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
        let Some(r) = res.filter(|r| r.len() >= 6) else {
            return Ok(());
        };
        if !p.has_ports {
            return Ok(());
        }
        let to = Endpoint::new([r[0], r[1], r[2], r[3]], u16::from_be_bytes([r[4], r[5]]));
        core::translate(header, p, Direction::Outbound, to);
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
