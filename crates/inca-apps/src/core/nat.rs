//! The NAT core: which flow a packet belongs to, which way it goes, the
//! public endpoint a new flow gets, and the rewrite.
//!
//! The variants the systems need are explicit:
//!
//! - [`Direction::by_port`] (the plain and TEA NATs: one port is the
//!   outside) or [`Direction::by_public_address`] (RedPlane: a packet
//!   re-injected after a grant comes from the CPU port, so the port says
//!   nothing).
//! - [`Keying::FiveTuple`] (the plain and TEA NATs: a mapping per
//!   connection, both directions installed by [`Mapping`]) or
//!   [`Keying::Endpoint`] (RedPlane, spec §7: endpoint-independent, 6-byte
//!   keys, the reverse record created by the store).
//!
//! Allocation ([`Allocator`]) is sequential over a [`Pool`] of public
//! addresses × ports 1024..=65535 and remembers each flow's endpoint, so
//! a flow asked again gets the same one. A per-tenant NAT keys flows by
//! tenant (802.1Q VID) and 5-tuple ([`Allocator::allocate_for`], and
//! [`TenantKey`] for its tables): tenants may reuse inside addresses. An
//! allocator may own one contiguous share of a pool ([`Allocator::sharded`]),
//! so that shards allocating concurrently (ExoPlane's logical devices)
//! never hand out one endpoint twice. RedPlane's store splits its own pool
//! by port range, which is store logic, not NF logic.

use std::collections::BTreeMap;

use inca_switch::PortId;

use super::Endpoint;
use crate::headers::{rewrite_end, End, Parsed};

/// Public ports handed out per public address (1024..=65535).
pub const PORTS_PER_ADDRESS: u32 = 65_536 - 1024;
/// The first public port of every address.
pub const FIRST_PORT: u16 = 1024;

/// The flow view of a packet a NAT translates: TCP, UDP, or ICMP echo with
/// its identifier as the port; None for anything else.
pub fn flow(p: &Parsed) -> Option<Parsed> {
    let p = p.icmp_echo_as_ports();
    p.has_ports.then_some(p)
}

/// Which way a packet crosses the NAT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From inside: the source is translated to the public endpoint.
    Outbound,
    /// From outside: the destination is translated back to the inside one.
    Inbound,
}

impl Direction {
    /// Inbound if the packet arrived on the outside port.
    pub fn by_port(ingress: PortId, outside_port: PortId) -> Self {
        if ingress == outside_port {
            Direction::Inbound
        } else {
            Direction::Outbound
        }
    }

    /// Inbound if the packet is addressed to the public address.
    pub fn by_public_address(p: &Parsed, public: [u8; 4]) -> Self {
        if p.dst == public {
            Direction::Inbound
        } else {
            Direction::Outbound
        }
    }

    /// The end of the packet the NAT rewrites.
    pub fn rewritten_end(self) -> End {
        match self {
            Direction::Outbound => End::Source,
            Direction::Inbound => End::Destination,
        }
    }
}

/// What a translation is keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keying {
    /// The packet's 5-tuple (13 bytes): a reply's key is the reply's own
    /// 5-tuple, so each direction is its own entry.
    FiveTuple,
    /// The NAT's end of the packet (6 bytes): the source of an outbound
    /// packet, the destination (the public endpoint) of an inbound one.
    Endpoint,
}

/// A translation key (see [`Keying`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FlowKey {
    /// src, dst, proto, sport, dport.
    FiveTuple([u8; 13]),
    /// Address and port.
    Endpoint([u8; 6]),
}

impl FlowKey {
    /// The key's bytes, as tables and stores hold them.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            FlowKey::FiveTuple(k) => k,
            FlowKey::Endpoint(k) => k,
        }
    }
}

/// The key of flow packet `p` (from [`flow`]) going `direction`.
pub fn key(p: &Parsed, direction: Direction, keying: Keying) -> FlowKey {
    match (keying, direction) {
        (Keying::FiveTuple, _) => FlowKey::FiveTuple(p.five_tuple()),
        (Keying::Endpoint, Direction::Outbound) => {
            FlowKey::Endpoint(Endpoint::new(p.src, p.sport).to_bytes())
        }
        (Keying::Endpoint, Direction::Inbound) => {
            FlowKey::Endpoint(Endpoint::new(p.dst, p.dport).to_bytes())
        }
    }
}

/// Rewrites flow packet `p` in header window `h` going `direction` to `to`:
/// the source of an outbound packet becomes the public endpoint, the
/// destination of an inbound one the inside endpoint; checksums are updated
/// incrementally ([`rewrite_end`]).
pub fn translate(h: &mut [u8], p: &Parsed, direction: Direction, to: Endpoint) {
    rewrite_end(h, p, direction.rewritten_end(), to.ip, to.port);
}

/// Both directions of a 5-tuple-keyed flow mapped to a public endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    /// The inside flow's 5-tuple.
    pub out_key: [u8; 13],
    /// What outbound packets' source becomes.
    pub public: Endpoint,
    /// The reply's 5-tuple: from the remote end to the public endpoint.
    pub reply_key: [u8; 13],
    /// What replies' destination becomes.
    pub inside: Endpoint,
}

impl Mapping {
    /// The mapping of inside flow packet `p` to `public`.
    pub fn of(p: &Parsed, public: Endpoint) -> Self {
        let reply = Parsed {
            src: p.dst,
            dst: public.ip,
            sport: p.dport,
            dport: public.port,
            ..*p
        };
        Mapping {
            out_key: p.five_tuple(),
            public,
            reply_key: reply.five_tuple(),
            inside: Endpoint::new(p.src, p.sport),
        }
    }
}

/// Public addresses from `base` upwards, each with ports 1024..=65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool {
    /// The first public address.
    pub base: [u8; 4],
}

impl Pool {
    /// The public endpoint of flow number `n`: ports of the first address,
    /// then of the next, and so on.
    pub fn endpoint(&self, n: u64) -> Endpoint {
        let per = u64::from(PORTS_PER_ADDRESS);
        let ip = u32::from_be_bytes(self.base).wrapping_add((n / per) as u32);
        Endpoint::new(ip.to_be_bytes(), FIRST_PORT + (n % per) as u16)
    }
}

/// Bytes of a per-tenant flow key: VID (2, big-endian) then the 5-tuple.
pub const TENANT_KEY_LEN: usize = 15;

/// A per-tenant NAT's table key: the tenant's VID (12 bits in 2 bytes,
/// big-endian) followed by the 5-tuple.
pub fn tenant_key(vid: u16, five_tuple: &[u8; 13]) -> [u8; TENANT_KEY_LEN] {
    let mut k = [0u8; TENANT_KEY_LEN];
    k[..2].copy_from_slice(&vid.to_be_bytes());
    k[2..].copy_from_slice(five_tuple);
    k
}

/// What a NAT's tables are keyed by besides the 5-tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TenantKey {
    /// One address space: the 5-tuple alone (13 bytes).
    None,
    /// One address space per 802.1Q VID: VID ‖ 5-tuple ([`tenant_key`], 15
    /// bytes); the VID is kept on both directions.
    Vid,
}

impl TenantKey {
    /// Table key bytes of a flow whose 5-tuple is `five_tuple`, in tenant
    /// `vid`.
    pub fn key(self, vid: u16, five_tuple: &[u8; 13]) -> Vec<u8> {
        match self {
            TenantKey::None => five_tuple.to_vec(),
            TenantKey::Vid => tenant_key(vid, five_tuple).to_vec(),
        }
    }

    /// [`TenantKey::key`] into `buf`, without allocating (the per-packet
    /// path): the key is the returned prefix of `buf`.
    pub fn key_into<'a>(
        self,
        vid: u16,
        five_tuple: &[u8; 13],
        buf: &'a mut [u8; TENANT_KEY_LEN],
    ) -> &'a [u8] {
        match self {
            TenantKey::None => {
                buf[..13].copy_from_slice(five_tuple);
                &buf[..13]
            }
            TenantKey::Vid => {
                *buf = tenant_key(vid, five_tuple);
                &buf[..]
            }
        }
    }

    /// The tenant a packet with VID `vid` counts in (0 without tenants).
    pub fn tenant(self, vid: u16) -> u16 {
        match self {
            TenantKey::None => 0,
            TenantKey::Vid => vid,
        }
    }

    /// Key width in bytes.
    pub fn key_len(self) -> usize {
        match self {
            TenantKey::None => 13,
            TenantKey::Vid => TENANT_KEY_LEN,
        }
    }
}

/// Sequential allocation of public endpoints to inside flows (tenant and
/// 5-tuple), at most `capacity` of them. Never frees (the NATs keep a
/// mapping for the life of their control plane).
#[derive(Debug, Clone)]
pub struct Allocator {
    pool: Pool,
    /// Flow number of this allocator's first endpoint in `pool`.
    first: u64,
    capacity: u64,
    allocated: BTreeMap<(u16, [u8; 13]), Endpoint>,
}

impl Allocator {
    /// At most `capacity` flows from `pool`.
    pub fn new(pool: Pool, capacity: u64) -> Self {
        Allocator {
            pool,
            first: 0,
            capacity,
            allocated: BTreeMap::new(),
        }
    }

    /// Share `shard` of `shards` of the first `capacity` endpoints of
    /// `pool`: the contiguous flow numbers `[shard·c, (shard+1)·c)` with
    /// `c = capacity / shards`, so allocators of different shards of one
    /// pool never hand out the same endpoint. None if `shard >= shards`.
    pub fn sharded(pool: Pool, shard: u64, shards: u64, capacity: u64) -> Option<Self> {
        if shard >= shards {
            return None;
        }
        let per = capacity / shards;
        Some(Allocator {
            pool,
            first: shard * per,
            capacity: per,
            allocated: BTreeMap::new(),
        })
    }

    /// The public endpoint of inside flow packet `p`: the one it has, or a
    /// new one; None if the pool is exhausted.
    pub fn allocate(&mut self, p: &Parsed) -> Option<Endpoint> {
        self.allocate_for(0, p)
    }

    /// [`Allocator::allocate`] for a flow of tenant `tenant` (two tenants'
    /// flows with one 5-tuple are two flows).
    pub fn allocate_for(&mut self, tenant: u16, p: &Parsed) -> Option<Endpoint> {
        let key = (tenant, p.five_tuple());
        if let Some(&e) = self.allocated.get(&key) {
            return Some(e);
        }
        let n = self.allocated.len() as u64;
        if n >= self.capacity {
            return None;
        }
        let e = self.pool.endpoint(self.first + n);
        self.allocated.insert(key, e);
        Some(e)
    }

    /// Whether 5-tuple `key` has an endpoint.
    pub fn contains(&self, key: &[u8; 13]) -> bool {
        self.contains_for(0, key)
    }

    /// Whether 5-tuple `key` of tenant `tenant` has an endpoint.
    pub fn contains_for(&self, tenant: u16, key: &[u8; 13]) -> bool {
        self.allocated.contains_key(&(tenant, *key))
    }

    /// Flows allocated.
    pub fn len(&self) -> usize {
        self.allocated.len()
    }

    /// No flow allocated yet.
    pub fn is_empty(&self) -> bool {
        self.allocated.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_walks_ports_then_addresses() {
        let pool = Pool {
            base: [198, 51, 100, 1],
        };
        assert_eq!(pool.endpoint(0), Endpoint::new([198, 51, 100, 1], 1024));
        assert_eq!(
            pool.endpoint(u64::from(PORTS_PER_ADDRESS) - 1),
            Endpoint::new([198, 51, 100, 1], 65_535)
        );
        assert_eq!(
            pool.endpoint(u64::from(PORTS_PER_ADDRESS)),
            Endpoint::new([198, 51, 100, 2], 1024)
        );
    }

    #[test]
    fn allocator_keeps_a_flow_and_refuses_beyond_capacity() {
        let mut a = Allocator::new(Pool { base: [1, 2, 3, 4] }, 1);
        let p = Parsed {
            src: [10, 0, 0, 1],
            sport: 5,
            has_ports: true,
            ..Parsed::default()
        };
        let e = a.allocate(&p);
        assert_eq!(e, Some(Endpoint::new([1, 2, 3, 4], 1024)));
        assert_eq!(a.allocate(&p), e);
        assert_eq!(a.allocate(&Parsed { sport: 6, ..p }), None);
        assert_eq!(a.len(), 1);
    }

    #[test]
    fn shards_of_a_pool_are_disjoint_and_tenants_are_separate_flows() {
        let pool = Pool { base: [1, 2, 3, 4] };
        assert!(Allocator::sharded(pool, 4, 4, 100).is_none());
        let mut shards: Vec<Allocator> = (0..4)
            .map(|l| Allocator::sharded(pool, l, 4, 100).unwrap())
            .collect();
        let mut seen = std::collections::BTreeSet::new();
        for sport in 0..30u16 {
            let p = Parsed {
                src: [10, 0, 0, 1],
                sport,
                has_ports: true,
                ..Parsed::default()
            };
            for a in shards.iter_mut() {
                // 25 endpoints per shard: the 26th flow is refused.
                match a.allocate_for(7, &p) {
                    Some(e) => assert!(seen.insert(e), "{e:?} handed out twice"),
                    None => assert!(sport >= 25),
                }
            }
        }
        assert_eq!(seen.len(), 100);
        let mut a = Allocator::new(pool, 10);
        let p = Parsed {
            sport: 5,
            has_ports: true,
            ..Parsed::default()
        };
        let e1 = a.allocate_for(1, &p).unwrap();
        let e2 = a.allocate_for(2, &p).unwrap();
        assert_ne!(e1, e2);
        assert!(a.contains_for(2, &p.five_tuple()) && !a.contains(&p.five_tuple()));
        let k = tenant_key(0x123, &p.five_tuple());
        assert_eq!(&k[..2], &[0x01, 0x23]);
        assert_eq!(TenantKey::Vid.key(0x123, &p.five_tuple()), k.to_vec());
        assert_eq!(TenantKey::None.key(0x123, &p.five_tuple()).len(), 13);
    }

    #[test]
    fn endpoint_keys_follow_the_direction() {
        let p = Parsed {
            src: [10, 0, 0, 1],
            dst: [9, 9, 9, 9],
            sport: 5,
            dport: 7,
            ..Parsed::default()
        };
        let out = key(&p, Direction::Outbound, Keying::Endpoint);
        let inn = key(&p, Direction::Inbound, Keying::Endpoint);
        assert_eq!(out.as_bytes(), &[10, 0, 0, 1, 0, 5]);
        assert_eq!(inn.as_bytes(), &[9, 9, 9, 9, 0, 7]);
        assert_eq!(
            key(&p, Direction::Inbound, Keying::FiveTuple).as_bytes(),
            &p.five_tuple()
        );
    }
}
