//! The RedPlane NAT (spec §7): two keys per connection, the internal
//! (IP, port) for outbound packets and the public (IP, port) for inbound
//! ones, 6 B each, with 6 B values. The translations are match-action
//! tables, so every grant goes through the control plane (`install`). The
//! public port is allocated by the store's `store_init` from the pool of the
//! shard that owns the key, which creates the reverse record at the same
//! time; reverse keys are sharded by public-port range, so one shard owns
//! both records. An unknown reverse key gets 0.0.0.0:0 and is dropped.
//!
//! [our choice] Every packet is a read: the mapping is created by
//! `store_init` when the first outbound packet asks for its lease (that is
//! the paper's "write on the first packet"), and never changes after.
//! The mapping is endpoint-independent (keyed by the internal endpoint).
//!
//! The NAT logic (keys, direction by address, rewrite) is
//! [`inca_apps::core::nat`]'s (`Keying::Endpoint`,
//! `Direction::by_public_address`); this adapter keeps the mappings in the
//! replicated values and the match-action tables.

use std::collections::BTreeSet;

use inca_apps::core::nat::{self as core, Direction, Keying};
use inca_apps::core::Endpoint;
use inca_apps::headers::Parsed;
use inca_apps::params::{ParamError, Params};
use inca_switch::objects::ObjectId;
use inca_switch::{
    AccessError, ControlPlane, DataPlane, Declare, DeclareError, MatchKind, MatchSpec, PacketCtx,
    PortId, TableDecl, TableHandle,
};

use super::{from_l3, spec_parse, SpecModel};
use crate::switch::config::shard_hash_range;
use crate::switch::{Access, Bytes, Out, RedPlaneApp, RpDigest, RpMeta, Verdict};

/// The NAT. See the module documentation.
#[derive(Debug, Clone)]
pub struct RpNat {
    /// The public address; keys with it are reverse keys.
    pub public: [u8; 4],
    /// First public port of the store's pool.
    pub port_base: u16,
    /// Number of public ports, split evenly over the shards.
    pub port_count: u16,
    /// Store shards (for sharding reverse keys by port range).
    pub shards: u32,
    /// The port toward the outside, if fixed (as the plain NAT's
    /// `outside_port`); otherwise translated outbound packets follow the
    /// routes.
    pub outside_port: Option<PortId>,
    fwd: Option<TableHandle<[u8; 6]>>,
    rev: Option<TableHandle<[u8; 6]>>,
    installed: BTreeSet<Bytes>,
}

impl RpNat {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] =
        &["public", "port_base", "port_count", "outside_port"];

    /// A NAT translating to `public`, with the store's pool of `port_count`
    /// ports from `port_base` over `shards` shards.
    pub fn new(public: [u8; 4], port_base: u16, port_count: u16, shards: u32) -> Self {
        RpNat {
            public,
            port_base,
            port_count,
            shards: shards.max(1),
            outside_port: None,
            fwd: None,
            rev: None,
            installed: BTreeSet::new(),
        }
    }

    /// From parameters (`shards` is RedPlane's).
    pub fn from_params(p: &Params, shards: u32) -> Result<Self, ParamError> {
        let mut nat = RpNat::new(
            p.ipv4("public", [198, 51, 100, 1])?,
            p.number("port_base", 1024, 1, 65_535)? as u16,
            p.number("port_count", 64_512, 1, 65_535)? as u16,
            shards,
        );
        // 512 (beyond any port) means "follow the routes".
        let outside = p.number("outside_port", 512, 0, 512)? as PortId;
        nat.outside_port = (outside < 512).then_some(outside);
        Ok(nat)
    }

    fn direction(&self, p: &Parsed) -> Direction {
        Direction::by_public_address(p, self.public)
    }

    fn key_of(&self, p: &Parsed) -> Option<[u8; 6]> {
        if !p.ipv4 {
            return None;
        }
        let p = core::flow(p)?;
        let key = core::key(&p, self.direction(&p), Keying::Endpoint);
        key.as_bytes().try_into().ok()
    }

    /// The NF logic: translate `h` with mapping `value`. Returns the address
    /// to route on, or None (no mapping: drop).
    pub fn translate(&self, h: &mut [u8], p: &Parsed, value: &[u8]) -> Option<[u8; 4]> {
        if value.len() != 6 {
            return None;
        }
        let to = Endpoint::from_bytes(value).filter(|e| !e.is_unset())?;
        let p = p.icmp_echo_as_ports();
        let direction = self.direction(&p);
        core::translate(h, &p, direction, to);
        Some(match direction {
            Direction::Inbound => to.ip,
            Direction::Outbound => p.dst,
        })
    }
}

impl RedPlaneApp for RpNat {
    fn name(&self) -> &str {
        "redplane_nat"
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
        // Action data: address 32 + port 16.
        self.fwd = Some(
            d.table(
                TableDecl::new("nat_fwd", MatchKind::Exact, 6, 48, slots)
                    .after(after)
                    .vliw(4),
            )?,
        );
        self.rev = Some(
            d.table(
                TableDecl::new("nat_rev", MatchKind::Exact, 6, 48, slots)
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

    fn shard_hash(&self, key: &Bytes) -> Option<u16> {
        let k = key.as_slice();
        if k.len() != 6 || k[..4] != self.public {
            return None;
        }
        // The shard whose pool holds this port (the store's split), at the
        // start of that shard's hash range.
        let port = u16::from_be_bytes([k[4], k[5]]);
        let per = (u32::from(self.port_count) / self.shards).max(1);
        let index = (u32::from(port.saturating_sub(self.port_base)) / per).min(self.shards - 1);
        Some(shard_hash_range(index, self.shards).0)
    }

    fn process(
        &mut self,
        pkt: &mut PacketCtx<RpMeta, RpDigest>,
        dp: &mut DataPlane<'_>,
        _slot: u32,
        key: &Bytes,
        _access: Access,
    ) -> Result<Verdict, AccessError> {
        let (Some(fwd), Some(rev)) = (self.fwd, self.rev) else {
            return Ok(Verdict {
                out: Out::Drop,
                value_after: None,
            });
        };
        let p = pkt.meta.p;
        let reverse = self.direction(&p) == Direction::Inbound;
        let table = if reverse { rev } else { fwd };
        let out = match dp.lookup(table, key.as_slice())? {
            Some(v) => match (self.translate(pkt.header_mut(), &p, &v), self.outside_port) {
                (None, _) => Out::Drop,
                (Some(_), Some(port)) if !reverse => Out::Port(port),
                (Some(dst), _) => Out::RouteTo(dst),
            },
            None => Out::Drop,
        };
        Ok(Verdict {
            out,
            value_after: None,
        })
    }

    fn install(&mut self, cp: &mut ControlPlane<'_>, key: &Bytes, value: &Bytes, _slot: u32) {
        let (Some(fwd), Some(rev)) = (self.fwd, self.rev) else {
            return;
        };
        let k = key.as_slice();
        let table = if k.len() == 6 && k[..4] == self.public {
            rev
        } else {
            fwd
        };
        let spec = MatchSpec::Exact(k.to_vec().into());
        let Ok(v) = <[u8; 6]>::try_from(value.as_slice()) else {
            return;
        };
        let zero = v == [0; 6];
        match (self.installed.contains(key), zero) {
            (true, true) => {
                cp.table_delete(table, spec);
                self.installed.remove(key);
            }
            (true, false) => {
                cp.table_modify(table, spec, v);
            }
            (false, false) => {
                cp.table_add(table, spec, v);
                self.installed.insert(*key);
            }
            (false, true) => {}
        }
    }

    fn uninstall(&mut self, cp: &mut ControlPlane<'_>, key: &Bytes, _slot: u32) {
        let (Some(fwd), Some(rev)) = (self.fwd, self.rev) else {
            return;
        };
        if self.installed.remove(key) {
            let k = key.as_slice();
            let table = if k[..4] == self.public { rev } else { fwd };
            cp.table_delete(table, MatchSpec::Exact(k.to_vec().into()));
        }
    }
}

impl SpecModel for RpNat {
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
