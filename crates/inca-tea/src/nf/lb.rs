//! TEA L4 load balancer (spec §7): packets to the VIP are looked up by
//! 5-tuple (K = 13) for their backend ⟨address, port⟩ (V = 6). Found →
//! destination rewritten, sent to `backend_port`; absent → punted, the
//! slow path picks a backend by hash of the 5-tuple, inserts it and
//! re-injects the packet.
//!
//! [our choice] Return traffic is direct (DSR): packets from `backend_port`
//! are forwarded to `client_port` without a lookup.
//!
//! The VIP test, the client key, the backend choice (`Spread::Modulo`) and
//! the rewrite are [`inca_apps::core::lb`]'s; this adapter keeps the
//! connections in TEA's table.

use inca_apps::core::lb::{self as core, Spread};
use inca_apps::core::Endpoint;
use inca_apps::headers::Parsed;
use inca_switch::PortId;

use crate::switch::{LookupMd, PuntAction, TeaNf, Verdict};

/// Punt reason of a new connection.
pub const REASON_NEW_CONN: u16 = 2;

/// The TEA load balancer.
#[derive(Debug, Clone)]
pub struct TeaLb {
    /// The virtual IP.
    pub vip: [u8; 4],
    /// The virtual port.
    pub vip_port: u16,
    /// Backends (address, port).
    pub backends: Vec<([u8; 4], u16)>,
    /// Port toward the clients.
    pub client_port: PortId,
    /// Port toward the backends.
    pub backend_port: PortId,
}

impl TeaLb {
    /// The backend the slow path picks for a 5-tuple key.
    pub fn pick(&self, key: &[u8]) -> Option<([u8; 4], u16)> {
        let slot = Spread::Modulo(self.backends.len()).slot(key)?;
        self.backends.get(slot).copied()
    }

    fn vip(&self) -> Endpoint {
        Endpoint::new(self.vip, self.vip_port)
    }
}

impl TeaNf for TeaLb {
    fn name(&self) -> &str {
        "lb"
    }
    fn key_len(&self) -> usize {
        13
    }
    fn value_len(&self) -> usize {
        6
    }
    fn header_depth(&self) -> usize {
        18 + 60 + 20
    }
    fn key(&self, _header: &[u8], p: &Parsed, _port: PortId) -> Option<Vec<u8>> {
        (p.has_ports && core::to_vip(p, self.vip()))
            .then(|| core::client_key(p, true, self.vip()).to_vec())
    }
    fn on_found(&self, h: &mut [u8], p: &Parsed, value: &[u8], _md: &LookupMd) -> Verdict {
        let Some(backend) = Endpoint::from_bytes(value) else {
            return Verdict::Drop;
        };
        core::to_backend(h, p, backend);
        Verdict::Forward(self.backend_port)
    }
    fn on_remote_miss(&self, _h: &mut [u8], _p: &Parsed, _md: &LookupMd) -> Verdict {
        Verdict::ToCpu(REASON_NEW_CONN)
    }
    fn on_bypass(&self, _h: &mut [u8], _p: &Parsed, md: &LookupMd) -> Verdict {
        if md.ingress_port == self.backend_port {
            Verdict::Forward(self.client_port)
        } else {
            Verdict::Drop
        }
    }
    fn on_punt(&mut self, _frame: &[u8], p: &Parsed, _port: PortId, reason: u16) -> PuntAction {
        let Some(key) = self.key(&[], p, 0) else {
            return PuntAction::default();
        };
        match (reason, self.pick(&key)) {
            (REASON_NEW_CONN, Some((ip, port))) => PuntAction {
                inserts: vec![(key, Endpoint::new(ip, port).to_bytes().to_vec())],
                reinject: true,
            },
            _ => PuntAction::default(),
        }
    }
}
