//! The RedPlane stateful firewall (spec §7, [TH] §5.5 (2)): TCP connections
//! keyed by the internal (IP, port) — the source of outbound packets, the
//! destination of inbound ones — with a state byte (0 none, 1 SYN out,
//! 2 established) and 5 pad bytes. Outbound packets always pass; inbound
//! packets pass only for a connection with state ≥ 1.
//!
//! [our choice] Writes, decided from headers alone: an outbound SYN (state
//! becomes at least 1) and an outbound pure ACK without payload (the
//! handshake's third packet; state 1 becomes 2). Every other packet reads.
//! Non-TCP traffic bypasses the firewall (routed unchanged).
//!
//! Sides, keys and the handshake state are [`inca_apps::core::firewall`]'s
//! (`Side::by_prefix`, `inside_end`, `handshake_step`); this adapter keeps
//! the state byte in a register and the replicated value.

use inca_apps::core::firewall::{self as core, Side};
use inca_apps::core::Prefix;
use inca_apps::headers::{Parsed, PROTO_TCP};
use inca_apps::params::{ParamError, Params};
use inca_switch::objects::ObjectId;
use inca_switch::{
    AccessError, ArrayDecl, ControlPlane, DataPlane, Declare, DeclareError, PacketCtx,
    RegisterHandle,
};

use super::{from_l3, spec_parse, SpecModel};
use crate::switch::{Access, Bytes, Out, RedPlaneApp, RpDigest, RpMeta, Verdict};

/// The firewall. See the module documentation.
#[derive(Debug, Clone)]
pub struct RpFirewall {
    /// The protected network.
    pub internal: ([u8; 4], u8),
    state: Option<RegisterHandle<u8>>,
}

impl RpFirewall {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &["internal_net", "internal_len"];

    /// A firewall protecting `net/len`.
    pub fn new(net: [u8; 4], len: u8) -> Self {
        RpFirewall {
            internal: (net, len),
            state: None,
        }
    }

    /// From parameters.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        Ok(RpFirewall::new(
            p.ipv4("internal_net", [10, 0, 0, 0])?,
            p.number("internal_len", 8, 0, 32)? as u8,
        ))
    }

    fn prefix(&self) -> Prefix {
        Prefix::new(self.internal.0, self.internal.1)
    }

    /// The side of a packet: inside if its source is protected (so a
    /// packet between two protected hosts is outbound).
    fn side(&self, p: &Parsed) -> Side {
        if self.prefix().contains(p.src) {
            Side::Inside
        } else {
            Side::Outside
        }
    }

    fn key_of(&self, p: &Parsed) -> Option<[u8; 6]> {
        if !p.ipv4 || p.proto != PROTO_TCP || !p.has_ports {
            return None;
        }
        let side = Side::by_prefix(p, self.prefix())?;
        Some(core::inside_end(p, side).to_bytes())
    }

    fn access(&self, p: &Parsed, h: &[u8]) -> Access {
        if self.side(p) == Side::Inside && core::handshake_writes(p, h) {
            Access::Write
        } else {
            Access::Read
        }
    }

    /// The NF logic: (passes, next state).
    pub fn step(&self, state: u8, p: &Parsed, access: Access) -> (bool, u8) {
        core::handshake_step(state, self.side(p), access == Access::Write, p.tcp_flags)
    }
}

impl RedPlaneApp for RpFirewall {
    fn name(&self) -> &str {
        "redplane_firewall"
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
        self.state = Some(d.register::<u8>(ArrayDecl::new("fw_state", slots).after(after))?);
        Ok(())
    }
    fn key(&self, p: &Parsed, _header: &[u8]) -> Option<Bytes> {
        self.key_of(p).map(|k| Bytes::new(&k))
    }
    fn classify(&self, p: &Parsed, header: &[u8]) -> Access {
        self.access(p, header)
    }
    fn process(
        &mut self,
        pkt: &mut PacketCtx<RpMeta, RpDigest>,
        dp: &mut DataPlane<'_>,
        slot: u32,
        _key: &Bytes,
        access: Access,
    ) -> Result<Verdict, AccessError> {
        let Some(reg) = self.state else {
            return Ok(Verdict {
                out: Out::Drop,
                value_after: None,
            });
        };
        let p = pkt.meta.p;
        let (pass, next) = dp.register(reg, u64::from(slot), |v| {
            let (pass, next) = self.step(*v, &p, access);
            if access == Access::Write {
                *v = next;
            }
            (pass, next)
        })?;
        let mut value = [0u8; 6];
        value[0] = next;
        Ok(Verdict {
            out: if pass { Out::RouteTo(p.dst) } else { Out::Drop },
            value_after: (access == Access::Write).then(|| Bytes::new(&value)),
        })
    }
    fn install(&mut self, cp: &mut ControlPlane<'_>, _key: &Bytes, value: &Bytes, slot: u32) {
        if let Some(reg) = self.state {
            cp.register_write(
                reg,
                u64::from(slot),
                value.as_slice().first().copied().unwrap_or(0),
            );
        }
    }
}

impl SpecModel for RpFirewall {
    fn spec_key(&self, input: &[u8]) -> Option<Vec<u8>> {
        spec_parse(input)
            .and_then(|p| self.key_of(&p))
            .map(|k| k.to_vec())
    }
    fn spec_step(&self, state: &[u8], input: &[u8]) -> (Vec<Vec<u8>>, Vec<u8>) {
        let Some(p) = spec_parse(input) else {
            return (Vec::new(), state.to_vec());
        };
        let s = state.first().copied().unwrap_or(0);
        let (pass, next) = self.step(s, &p, self.access(&p, input));
        let mut v = vec![0u8; 6];
        v[0] = next;
        let out = if pass {
            vec![from_l3(input, &p)]
        } else {
            Vec::new()
        };
        (out, v)
    }
}
