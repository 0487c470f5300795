//! The RedPlane L4 load balancer (spec §7, [TH] §5.5 (3)): connections to
//! the virtual service (VIP, port) keyed by the client (IP, port) in both
//! directions, with the chosen backend (IP, port) as value. Inbound packets
//! get the backend as destination; replies from the backend network get the
//! VIP as source.
//!
//! [our choice] Every packet is a read: the backend is picked by the
//! store's `store_init` (round-robin per shard) when the connection's first
//! packet asks for its lease, and never changes after. The backend
//! translations are a match-action table the control plane installs.
//!
//! The VIP test, the client key (`client_end`) and the rewrites are
//! [`inca_apps::core::lb`]'s; this adapter keeps the connections in the
//! replicated values and a match-action table.

use std::collections::BTreeSet;

use inca_apps::core::lb as core;
use inca_apps::core::{Endpoint, Prefix};
use inca_apps::headers::Parsed;
use inca_apps::params::{ParamError, Params};
use inca_switch::objects::ObjectId;
use inca_switch::{
    AccessError, ControlPlane, DataPlane, Declare, DeclareError, MatchKind, MatchSpec, PacketCtx,
    TableDecl, TableHandle,
};

use super::{from_l3, spec_parse, SpecModel};
use crate::switch::{Access, Bytes, Out, RedPlaneApp, RpDigest, RpMeta, Verdict};

/// The load balancer. See the module documentation.
#[derive(Debug, Clone)]
pub struct RpLb {
    /// The virtual service.
    pub vip: ([u8; 4], u16),
    /// The backend network.
    pub backends: ([u8; 4], u8),
    table: Option<TableHandle<[u8; 6]>>,
    installed: BTreeSet<Bytes>,
}

impl RpLb {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &["vip", "vport", "backend_net", "backend_len"];

    /// A load balancer for `vip` over backends in `backends`.
    pub fn new(vip: ([u8; 4], u16), backends: ([u8; 4], u8)) -> Self {
        RpLb {
            vip,
            backends,
            table: None,
            installed: BTreeSet::new(),
        }
    }

    /// From parameters.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        Ok(RpLb::new(
            (
                p.ipv4("vip", [203, 0, 113, 10])?,
                p.number("vport", 80, 1, 65_535)? as u16,
            ),
            (
                p.ipv4("backend_net", [10, 1, 0, 0])?,
                p.number("backend_len", 16, 0, 32)? as u8,
            ),
        ))
    }

    fn vip(&self) -> Endpoint {
        Endpoint::new(self.vip.0, self.vip.1)
    }

    fn inbound(&self, p: &Parsed) -> bool {
        core::to_vip(p, self.vip())
    }

    fn is_backend_source(&self, p: &Parsed) -> bool {
        Prefix::new(self.backends.0, self.backends.1).contains(p.src)
    }

    fn key_of(&self, p: &Parsed) -> Option<[u8; 6]> {
        if !p.ipv4 || !p.has_ports {
            return None;
        }
        let inbound = self.inbound(p);
        (inbound || self.is_backend_source(p)).then(|| core::client_end(p, inbound).to_bytes())
    }

    /// The NF logic: rewrite with backend `value`; the address to route
    /// on, or None (no backend: drop).
    pub fn translate(&self, h: &mut [u8], p: &Parsed, value: &[u8]) -> Option<[u8; 4]> {
        if value.len() != 6 {
            return None;
        }
        let backend = Endpoint::from_bytes(value).filter(|e| !e.is_unset())?;
        if self.inbound(p) {
            core::to_backend(h, p, backend);
            Some(backend.ip)
        } else {
            core::from_backend(h, p, self.vip());
            Some(p.dst)
        }
    }
}

impl RedPlaneApp for RpLb {
    fn name(&self) -> &str {
        "redplane_lb"
    }
    fn key_bytes(&self) -> usize {
        6
    }
    fn value_bytes(&self) -> usize {
        6
    }
    fn declare(
        &mut self,
        d: &mut Declare,
        after: &[ObjectId],
        slots: usize,
    ) -> Result<(), DeclareError> {
        self.table = Some(
            d.table(
                TableDecl::new("lb_conn", MatchKind::Exact, 6, 48, slots)
                    .after(after)
                    .vliw(4),
            )?,
        );
        Ok(())
    }
    fn key(&self, p: &Parsed, _header: &[u8]) -> Option<Bytes> {
        self.key_of(p).map(|k| Bytes::new(&k))
    }
    fn classify(&self, _p: &Parsed, _header: &[u8]) -> Access {
        Access::Read
    }
    fn process(
        &mut self,
        pkt: &mut PacketCtx<RpMeta, RpDigest>,
        dp: &mut DataPlane<'_>,
        _slot: u32,
        _key: &Bytes,
        _access: Access,
    ) -> Result<Verdict, AccessError> {
        let p = pkt.meta.p;
        let (Some(t), Some(key)) = (self.table, self.key_of(&p)) else {
            return Ok(Verdict {
                out: Out::Drop,
                value_after: None,
            });
        };
        let out = match dp.lookup(t, &key)? {
            Some(v) => self
                .translate(pkt.header_mut(), &p, &v)
                .map_or(Out::Drop, Out::RouteTo),
            None => Out::Drop,
        };
        Ok(Verdict {
            out,
            value_after: None,
        })
    }
    fn install(&mut self, cp: &mut ControlPlane<'_>, key: &Bytes, value: &Bytes, _slot: u32) {
        let Some(t) = self.table else {
            return;
        };
        let spec = MatchSpec::Exact(key.as_slice().to_vec().into());
        let Ok(v) = <[u8; 6]>::try_from(value.as_slice()) else {
            return;
        };
        match (self.installed.contains(key), v == [0; 6]) {
            (true, true) => {
                cp.table_delete(t, spec);
                self.installed.remove(key);
            }
            (true, false) => {
                cp.table_modify(t, spec, v);
            }
            (false, false) => {
                cp.table_add(t, spec, v);
                self.installed.insert(*key);
            }
            (false, true) => {}
        }
    }
    fn uninstall(&mut self, cp: &mut ControlPlane<'_>, key: &Bytes, _slot: u32) {
        if let (Some(t), true) = (self.table, self.installed.remove(key)) {
            cp.table_delete(t, MatchSpec::Exact(key.as_slice().to_vec().into()));
        }
    }
}

impl SpecModel for RpLb {
    fn spec_key(&self, input: &[u8]) -> Option<Vec<u8>> {
        spec_parse(input)
            .and_then(|p| self.key_of(&p))
            .map(|k| k.to_vec())
    }
    fn spec_step(&self, state: &[u8], input: &[u8]) -> (Vec<Vec<u8>>, Vec<u8>) {
        let Some(p) = spec_parse(input) else {
            return (Vec::new(), state.to_vec());
        };
        let mut f = input.to_vec();
        let out = match self.translate(&mut f, &p, state) {
            Some(_) => vec![from_l3(&f, &p)],
            None => Vec::new(),
        };
        (out, state.to_vec())
    }
}
