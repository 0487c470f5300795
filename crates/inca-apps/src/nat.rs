//! Source NAT with an exact-match translation table per direction, for
//! TCP, UDP and ICMP echo (whose identifier plays the port, as in every
//! NAT, so ping works through it).
//!
//! Packets from inside (any port but `outside_port`) look up their 5-tuple in
//! `nat_out`; a hit rewrites the source address and port to the public ones
//! and sends the packet out. A miss is a new flow: the packet goes to the
//! control plane, which allocates a public address and port from the pool,
//! installs both directions (`nat_out`, and `nat_in` keyed by the reply's
//! 5-tuple), and re-injects the packet so the data plane translates it.
//! Packets from outside are translated back through `nat_in`; unsolicited
//! ones (misses) are dropped. Checksums are updated incrementally (RFC 1624),
//! as a switch must: it never sees the payload the L4 checksum covers.
//!
//! The NAT logic (keys, allocation, rewrite) is [`crate::core::nat`]'s;
//! this program keeps its state in the two tables.
//!
//! Per tenant ([`Nat::with_tenants`], `per_tenant=1`): both tables are
//! keyed by the 802.1Q VID and the 5-tuple ([`core::tenant_key`], 15
//! bytes), so tenants may reuse inside addresses; replies come back in the
//! tenant's VLAN. A NAT may own one share of its pool
//! ([`Nat::with_pool_shard`], `pool_shard`/`pool_shards`), so that several
//! allocating at once never hand out one public endpoint twice.
//!
//! Parameters: `flows` (entries per direction, default 65,536),
//! `outside_port` (default 1), `public` (first public address, default
//! 198.51.100.1; each address carries 64,512 ports), `per_tenant` (0 or 1,
//! default 0), `pool_shard` and `pool_shards` (default 0 of 1: the whole
//! pool of `flows` endpoints).

use inca_switch::{
    AccessError, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress, MatchKind,
    MatchSpec, PacketCtx, PacketOutDest, ParseError, PortId, Program, TableDecl, TableHandle,
};

use crate::core::nat::{self as core, Allocator, Direction, Mapping, Pool, TenantKey};
use crate::core::Endpoint;
use crate::headers::{parse, parse_ingress_only, Parsed};
use crate::params::{ParamError, Params};

pub use crate::core::nat::PORTS_PER_ADDRESS;

/// Reason code of a punted new flow.
pub const REASON_NEW_FLOW: u16 = 1;

/// A translation: the address and port to write, and where to send the
/// packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Translate {
    /// New address (source on the way out, destination on the way in).
    pub ip: [u8; 4],
    /// New port.
    pub port: u16,
    /// Egress port.
    pub egress: PortId,
}

impl Translate {
    /// The endpoint written.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint::new(self.ip, self.port)
    }
}

/// Public addresses `flows` endpoints need (at least one).
fn addresses_for(flows: u64) -> u32 {
    let per = u64::from(core::PORTS_PER_ADDRESS);
    u32::try_from(flows.div_ceil(per).max(1)).unwrap_or(u32::MAX)
}

/// The two entries of inside flow packet `p` (arrived on `port`) mapped to
/// `public`: its key and translation out of `outside_port`, the reply's key
/// and translation back to `port` — what the control plane installs for a
/// new flow, wherever it allocated `public`.
pub fn flow_entries(
    tenant: TenantKey,
    p: &Parsed,
    public: Endpoint,
    port: PortId,
    outside_port: PortId,
) -> (Vec<u8>, Translate, Vec<u8>, Translate) {
    let m = Mapping::of(p, public);
    let out = Translate {
        ip: m.public.ip,
        port: m.public.port,
        egress: outside_port,
    };
    let back = Translate {
        ip: m.inside.ip,
        port: m.inside.port,
        egress: port,
    };
    (
        tenant.key(p.vlan, &m.out_key),
        out,
        tenant.key(p.vlan, &m.reply_key),
        back,
    )
}

/// The NAT program. See the module documentation.
#[derive(Debug, Clone)]
pub struct Nat {
    flows: usize,
    outside_port: PortId,
    /// The first public address of the whole pool.
    public_base: [u8; 4],
    /// Public addresses in the whole pool (every part's share).
    public_span: u32,
    tenant: TenantKey,
    nat_out: Option<TableHandle<Translate>>,
    nat_in: Option<TableHandle<Translate>>,
    /// Control-plane state: the public endpoint of every inside 5-tuple.
    allocator: Allocator,
    /// New flows refused because the pool or the table was full.
    pub refused: u64,
}

impl Nat {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &[
        "flows",
        "outside_port",
        "public",
        "per_tenant",
        "pool_shard",
        "pool_shards",
    ];

    /// A NAT for `flows` flows per direction, translating to addresses from
    /// `public_base` upwards, with the outside on `outside_port`.
    pub fn new(flows: usize, outside_port: PortId, public_base: [u8; 4]) -> Self {
        // Flow numbers are 32-bit on the switch's control plane.
        let capacity = (flows as u64).min(u64::from(u32::MAX));
        Nat {
            flows,
            outside_port,
            public_base,
            public_span: addresses_for(capacity),
            tenant: TenantKey::None,
            nat_out: None,
            nat_in: None,
            allocator: Allocator::new(Pool { base: public_base }, capacity),
            refused: 0,
        }
    }

    /// A NAT sized from parameters.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("nat", Self::PARAMS)?;
        let flows = p.count("flows", 65_536, 1 << 32)? as usize;
        let outside = p.number("outside_port", 1, 0, 511)? as PortId;
        let public = p.ipv4("public", [198, 51, 100, 1])?;
        let mut nat = Nat::new(flows, outside, public);
        if p.number("per_tenant", 0, 0, 1)? == 1 {
            nat = nat.with_tenants();
        }
        let shards = p.count("pool_shards", 1, 256)?;
        let shard = p.number("pool_shard", 0, 0, 255)?;
        nat.with_pool_shard(shard, shards)
            .ok_or_else(|| ParamError::Value {
                name: "pool_shard".into(),
                reason: format!("{shard} is not below pool_shards = {shards}"),
            })
    }

    /// The NAT keyed per tenant: VID ‖ 5-tuple in both tables.
    pub fn with_tenants(mut self) -> Self {
        self.tenant = TenantKey::Vid;
        self
    }

    /// The NAT allocating only from share `shard` of `shards` of its pool
    /// of `flows` endpoints ([`Allocator::sharded`]); None if `shard >=
    /// shards`. Flows already allocated are forgotten.
    pub fn with_pool_shard(mut self, shard: u64, shards: u64) -> Option<Self> {
        let capacity = (self.flows as u64).min(u64::from(u32::MAX));
        let pool = Pool {
            base: self.public_base,
        };
        self.allocator = Allocator::sharded(pool, shard, shards, capacity)?;
        Some(self)
    }

    /// The first public address.
    pub fn public_base(&self) -> [u8; 4] {
        self.public_base
    }

    /// Entries per direction (and endpoints in the pool).
    pub fn flows(&self) -> usize {
        self.flows
    }

    /// What the tables are keyed by besides the 5-tuple.
    pub fn tenant_key(&self) -> TenantKey {
        self.tenant
    }

    /// Allocates a public endpoint for the inside flow `p` arriving on
    /// `port`, remembering it: the two entries to install (the flow's key
    /// and its translation out, the reply's key and its translation back),
    /// or None if the pool or the table is full. A flow already allocated
    /// gets the same entries again.
    fn allocate(
        &mut self,
        p: &Parsed,
        port: PortId,
    ) -> Option<(Vec<u8>, Translate, Vec<u8>, Translate)> {
        let tenant = self.tenant.tenant(p.vlan);
        let Some(public) = self.allocator.allocate_for(tenant, p) else {
            self.refused += 1;
            return None;
        };
        Some(flow_entries(
            self.tenant,
            p,
            public,
            port,
            self.outside_port,
        ))
    }

    /// The same NAT whose control plane allocates only from share `part`
    /// of `parts` of the public pool, each share `share` whole addresses
    /// (every partition of one pool must use the same `share`), for several
    /// control planes that must never hand out one endpoint twice
    /// (ExoPlane's daemons: §7's port pool partitioned per shard). Its
    /// tables are unchanged.
    pub fn partitioned(&self, part: u32, parts: u32, share: u32) -> Nat {
        let parts = parts.max(1);
        let per = u64::from(share.max(1)) * u64::from(core::PORTS_PER_ADDRESS);
        let pool = Pool {
            base: self.public_base,
        };
        let mut n = self.clone();
        n.allocator = Allocator::sharded(
            pool,
            u64::from(part.min(parts - 1)),
            u64::from(parts),
            per * u64::from(parts),
        )
        .expect("part is below parts");
        n.public_span = share.max(1).saturating_mul(parts);
        n
    }

    /// Whether `ip` is one of the pool's public addresses (a packet to it
    /// is a reply, translated back by `nat_in`).
    pub fn is_public(&self, ip: [u8; 4]) -> bool {
        let off = u32::from_be_bytes(ip).wrapping_sub(u32::from_be_bytes(self.public_base));
        off < self.public_span
    }

    /// The outside port (packets arriving there are translated back).
    pub fn outside_port(&self) -> PortId {
        self.outside_port
    }

    /// Number of flows the control plane has allocated.
    pub fn allocated(&self) -> usize {
        self.allocator.len()
    }
}

impl Program for Nat {
    type Meta = Parsed;
    type Digest = ();

    fn name(&self) -> &str {
        "nat"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let direction = d.gateway("direction", Gress::Ingress, &[])?;
        // Action data: address (32) + port (16) + egress port (9).
        let key = self.tenant.key_len();
        let out = TableDecl::new("nat_out", MatchKind::Exact, key, 57, self.flows)
            .after(&[direction.id()])
            .vliw(4);
        let inn = TableDecl::new("nat_in", MatchKind::Exact, key, 57, self.flows)
            .after(&[direction.id()])
            .vliw(4);
        self.nat_out = Some(d.table(out)?);
        self.nat_in = Some(d.table(inn)?);
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut Parsed) -> Result<(), ParseError> {
        parse_ingress_only(gress, header, meta)
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<Parsed, ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let (Some(nat_out), Some(nat_in)) = (self.nat_out, self.nat_in) else {
            return Ok(());
        };
        // TCP, UDP, and ICMP echo (its identifier as the port).
        let Some(p) = core::flow(&pkt.meta) else {
            return Ok(()); // anything else: dropped
        };
        let mut buf = [0u8; core::TENANT_KEY_LEN];
        let key = self.tenant.key_into(p.vlan, &p.five_tuple(), &mut buf);
        if Direction::by_port(pkt.ingress_port(), self.outside_port) == Direction::Inbound {
            if let Some(t) = dp.lookup(nat_in, key)? {
                core::translate(pkt.header_mut(), &p, Direction::Inbound, t.endpoint());
                pkt.forward(t.egress);
            }
            return Ok(());
        }
        let t = match dp.lookup(nat_out, key)? {
            Some(t) => t,
            None if dp.can_write_tables() => {
                // A software NAT: allocate and install inline.
                let Some((k, out, reply, back)) = self.allocate(&p, pkt.ingress_port()) else {
                    return Ok(());
                };
                let a = dp.table_insert(nat_out, MatchSpec::Exact(k.into()), out)?;
                let b = dp.table_insert(nat_in, MatchSpec::Exact(reply.into()), back)?;
                if a.is_err() || b.is_err() {
                    self.refused += 1;
                    return Ok(());
                }
                out
            }
            None => {
                pkt.to_cpu(REASON_NEW_FLOW);
                return Ok(());
            }
        };
        core::translate(pkt.header_mut(), &p, Direction::Outbound, t.endpoint());
        pkt.forward(t.egress);
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        let ControlEvent::PacketIn {
            port,
            reason,
            frame,
        } = event
        else {
            return;
        };
        let (Some(nat_out), Some(nat_in)) = (self.nat_out, self.nat_in) else {
            return;
        };
        if reason != REASON_NEW_FLOW || port == self.outside_port {
            return;
        }
        let Some(p) = parse(&frame).ok().and_then(|p| core::flow(&p)) else {
            return;
        };
        let tenant = self.tenant.tenant(p.vlan);
        let fresh = !self.allocator.contains_for(tenant, &p.five_tuple());
        let Some((key, out, reply, back)) = self.allocate(&p, port) else {
            return;
        };
        if fresh {
            cp.table_add(nat_out, MatchSpec::Exact(key.into()), out);
            cp.table_add(nat_in, MatchSpec::Exact(reply.into()), back);
        }
        // After the writes (the channel is FIFO), so the data plane
        // translates it.
        cp.packet_out(frame, PacketOutDest::Ingress(port));
    }
}
