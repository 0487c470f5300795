//! Packet counters: a per-flow counter that writes state on every packet,
//! per-source and per-tenant counters, and the two building blocks other
//! monitoring apps reuse.
//!
//! - [`CounterBlock`] is a reusable block of counter arrays — packets and
//!   bytes per source IPv4 address (indexed by a CRC-32 hash of the address,
//!   so sources may share an entry when the array is small) and per tenant
//!   (indexed by the 802.1Q VLAN id, modulo the number of tenant entries).
//!   A program embeds one by calling [`CounterBlock::declare`] in its
//!   `declare` and [`CounterBlock::count`] in its ingress; it costs two
//!   counter arrays and one hash unit and touches each array once per
//!   packet. Both [`FlowCounter`] and [`TenantCounters`] embed one.
//! - [`MonitorPath`] is how a monitor forwards: frames arriving on
//!   `out_port` go to `in_port`, every other frame goes to `out_port`
//!   (defaults 0 ↔ 1), so a monitor can sit on a simulated path.
//!
//! [`FlowCounter`] (`flow_counter`) keeps a 32-bit packet count per flow in
//! a register array indexed by a CRC-32 hash of the 5-tuple (flows that
//! hash alike share an entry; the flow key, the entry and the wrapping
//! count are [`crate::core::counter`]'s, shared with RedPlane's
//! Async-Counter): every packet does a read-modify-write, the
//! worst case for state replication. The control plane reads the whole
//! array on request (a [`MSG_READ`] control message), with the register-read
//! latency of the profile.
//!
//! [`TenantCounters`] (`tenant_counters`) is the counter block on its own.
//! The switch control plane of this model has no counter-read operation, so
//! counters are read through the switch's object store
//! ([`inca_switch::Switch::objects`]) with [`CounterBlock::source`] and
//! [`CounterBlock::tenant`], as a driver reading counters over the switch's
//! management API would.
//!
//! Non-IPv4 frames are forwarded and counted per tenant only; frames the
//! parser refuses are counted and dropped by the switch.

use inca_switch::hash::HashAlgorithm;
use inca_switch::objects::Objects;
use inca_switch::{
    AccessError, ArrayDecl, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress,
    Handle, Nanos, PacketCtx, ParseError, PortId, Program, RegisterHandle,
};

use crate::core::counter::{self, Overflow};
use crate::headers::{parse_ingress_only, Parsed};
use crate::params::{ParamError, Params};

/// Control message kind that asks [`FlowCounter`] to read its counters.
pub const MSG_READ: u32 = 1;

/// How a monitor forwards. See the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MonitorPath {
    /// Where frames arriving on `out_port` go.
    pub in_port: PortId,
    /// Where every other frame goes.
    pub out_port: PortId,
}

impl Default for MonitorPath {
    fn default() -> Self {
        MonitorPath {
            in_port: 0,
            out_port: 1,
        }
    }
}

impl MonitorPath {
    /// Its parameter names.
    pub const PARAMS: [&'static str; 2] = ["in_port", "out_port"];

    /// From parameters `in_port` (default 0) and `out_port` (default 1).
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        Ok(MonitorPath {
            in_port: p.number("in_port", 0, 0, 511)? as PortId,
            out_port: p.number("out_port", 1, 0, 511)? as PortId,
        })
    }

    /// The egress port of a frame that arrived on `ingress`.
    pub fn egress(&self, ingress: PortId) -> PortId {
        if ingress == self.out_port {
            self.in_port
        } else {
            self.out_port
        }
    }
}

/// A whole number parameter that must be a power of two (sketch and counter
/// indices are hash bits, as on a switch).
pub(crate) fn pow2_param(
    p: &Params,
    name: &str,
    default: u64,
    max: u64,
) -> Result<usize, ParamError> {
    let v = p.count(name, default, max)?;
    if !v.is_power_of_two() {
        return Err(ParamError::Value {
            name: name.to_string(),
            reason: format!("{v} is not a power of two (indices are hash bits)"),
        });
    }
    Ok(v as usize)
}

/// Bits of a hash that indexes `n` entries (at least 1: a hash unit has at
/// least one output bit).
pub(crate) fn index_bits(n: usize) -> u8 {
    (n.max(2).next_power_of_two().trailing_zeros() as u8).max(1)
}

/// The parameters that attach a [`CounterBlock`] to another app:
/// `counters` (by-source entries, a power of two; 0 or absent = no block)
/// and `tenants` (by-tenant entries, default 256). Returns (sources,
/// tenants) when a block is wanted.
pub fn attach_params(
    p: &crate::params::Params,
) -> Result<Option<(usize, usize)>, crate::params::ParamError> {
    let sources = p.number("counters", 0, 0, 1 << 24)? as usize;
    if sources == 0 {
        return Ok(None);
    }
    if !sources.is_power_of_two() {
        return Err(crate::params::ParamError::Value {
            name: "counters".into(),
            reason: format!("{sources} is not a power of two (indices are hash bits)"),
        });
    }
    let tenants = p.count("tenants", 256, 1 << 20)? as usize;
    Ok(Some((sources, tenants)))
}

/// Packet and byte counters per source address and per tenant. See the
/// module documentation.
#[derive(Debug, Clone, Copy)]
pub struct CounterBlock {
    sources: usize,
    tenants: usize,
    src_hash: Handle,
    by_source: Handle,
    by_tenant: Handle,
}

impl CounterBlock {
    /// Declares the block's objects, named `{prefix}_src_hash`,
    /// `{prefix}_by_source` (`sources` entries, a power of two) and
    /// `{prefix}_by_tenant` (`tenants` entries), in ingress, after `after`.
    pub fn declare(
        d: &mut Declare,
        prefix: &str,
        sources: usize,
        tenants: usize,
        after: &[inca_switch::ObjectId],
    ) -> Result<CounterBlock, DeclareError> {
        if !sources.is_power_of_two() || tenants == 0 {
            return Err(DeclareError::Invalid {
                name: format!("{prefix}_by_source"),
                reason: "sources must be a power of two and tenants at least 1".into(),
            });
        }
        let src_hash = d.hash(
            &format!("{prefix}_src_hash"),
            HashAlgorithm::Crc32,
            index_bits(sources),
            Gress::Ingress,
            &[],
        )?;
        let mut deps = after.to_vec();
        deps.push(src_hash.id());
        let by_source =
            d.counter(ArrayDecl::new(&format!("{prefix}_by_source"), sources).after(&deps))?;
        let by_tenant =
            d.counter(ArrayDecl::new(&format!("{prefix}_by_tenant"), tenants).after(after))?;
        Ok(CounterBlock {
            sources,
            tenants,
            src_hash,
            by_source,
            by_tenant,
        })
    }

    /// The by-source entry of address `src`.
    pub fn source_index(&self, src: [u8; 4]) -> u64 {
        counter::index(&src, self.sources)
    }

    /// The by-tenant entry of VLAN `vlan`.
    pub fn tenant_index(&self, vlan: u16) -> u64 {
        u64::from(vlan) % self.tenants as u64
    }

    /// Counts the packet: per tenant always, per source for IPv4.
    pub fn count<D>(
        &self,
        dp: &mut DataPlane<'_>,
        pkt: &PacketCtx<Parsed, D>,
    ) -> Result<(), AccessError> {
        let p = &pkt.meta;
        let src = p.ipv4.then_some(p.src);
        self.count_fields(dp, u64::from(p.vlan), src, pkt.len() as u64)
    }

    /// Counts a packet of `bytes` for tenant `tenant` (reduced modulo the
    /// table), and for source `src` if given: for apps whose metadata is not
    /// [`Parsed`] (a VPN counts by inner source and VNI, say).
    pub fn count_fields(
        &self,
        dp: &mut DataPlane<'_>,
        tenant: u64,
        src: Option<[u8; 4]>,
        bytes: u64,
    ) -> Result<(), AccessError> {
        dp.count(self.by_tenant, tenant % self.tenants as u64, bytes)?;
        if let Some(src) = src {
            let i = dp.hash(self.src_hash, &src)? & (self.sources as u64 - 1);
            dp.count(self.by_source, i, bytes)?;
        }
        Ok(())
    }

    /// (packets, bytes) counted for source `src` (every source sharing its
    /// entry included).
    pub fn source(&self, objects: &Objects, src: [u8; 4]) -> Result<(u64, u64), AccessError> {
        objects.counter_read(self.by_source, self.source_index(src))
    }

    /// (packets, bytes) counted for tenant `vlan`.
    pub fn tenant(&self, objects: &Objects, vlan: u16) -> Result<(u64, u64), AccessError> {
        objects.counter_read(self.by_tenant, self.tenant_index(vlan))
    }

    /// Number of by-source entries.
    pub fn sources(&self) -> usize {
        self.sources
    }

    /// Number of by-tenant entries.
    pub fn tenants(&self) -> usize {
        self.tenants
    }
}

/// Per-flow packet counter. See the module documentation.
#[derive(Debug, Clone)]
pub struct FlowCounter {
    flows: usize,
    sources: usize,
    tenants: usize,
    path: MonitorPath,
    flow_hash: Option<Handle>,
    counts: Option<RegisterHandle<u32>>,
    block: Option<CounterBlock>,
    /// The last read of the whole array: when it arrived and the values.
    pub last_read: Option<(Nanos, Vec<u32>)>,
    pending_read: Option<u64>,
}

impl FlowCounter {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] =
        &["flows", "sources", "tenants", "in_port", "out_port"];

    /// A counter of `flows` entries (a power of two) with a counter block
    /// of `sources` × `tenants` entries, forwarding along `path`.
    pub fn new(flows: usize, sources: usize, tenants: usize, path: MonitorPath) -> Self {
        FlowCounter {
            flows,
            sources,
            tenants,
            path,
            flow_hash: None,
            counts: None,
            block: None,
            last_read: None,
            pending_read: None,
        }
    }

    /// From parameters: `flows` (counter entries, power of two, default
    /// 65,536), `sources` (per-source entries, default 4,096), `tenants`
    /// (per-VLAN entries, default 4,096), `in_port`, `out_port`.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("flow_counter", Self::PARAMS)?;
        Ok(FlowCounter::new(
            pow2_param(p, "flows", 65_536, 1 << 30)?,
            pow2_param(p, "sources", 4096, 1 << 30)?,
            p.count("tenants", 4096, 4096)? as usize,
            MonitorPath::from_params(p)?,
        ))
    }

    /// The entry flow `five_tuple` counts in.
    pub fn flow_index(&self, five_tuple: &[u8; 13]) -> u64 {
        counter::index(five_tuple, self.flows)
    }

    /// The packet count of the entry of `five_tuple`, read from the store.
    pub fn flow_count(&self, objects: &Objects, five_tuple: &[u8; 13]) -> Option<u32> {
        objects
            .register_peek(self.counts?, self.flow_index(five_tuple))
            .ok()
    }

    /// The embedded counter block (after the program is declared).
    pub fn block(&self) -> Option<&CounterBlock> {
        self.block.as_ref()
    }

    /// Number of flow entries.
    pub fn flows(&self) -> usize {
        self.flows
    }
}

impl Program for FlowCounter {
    type Meta = Parsed;
    type Digest = ();

    fn name(&self) -> &str {
        "flow_counter"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let h = d.hash(
            "flow_hash",
            HashAlgorithm::Crc32,
            index_bits(self.flows),
            Gress::Ingress,
            &[],
        )?;
        self.counts =
            Some(d.register::<u32>(ArrayDecl::new("flow_counts", self.flows).after(&[h.id()]))?);
        self.flow_hash = Some(h);
        self.block = Some(CounterBlock::declare(
            d,
            "flow_counter",
            self.sources,
            self.tenants,
            &[],
        )?);
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
        pkt.forward(self.path.egress(pkt.ingress_port()));
        if let Some(b) = &self.block {
            b.count(dp, pkt)?;
        }
        let (Some(h), Some(reg)) = (self.flow_hash, self.counts) else {
            return Ok(());
        };
        if let Some(key) = counter::flow_key(&pkt.meta) {
            let i = dp.hash(h, &key)? & (self.flows as u64 - 1);
            dp.register(reg, i, |v| counter::add(v, 1, Overflow::Wrap))?;
        }
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        match event {
            ControlEvent::Message(m) if m.kind == MSG_READ => {
                if let (Some(reg), None) = (self.counts, self.pending_read) {
                    self.pending_read = Some(cp.register_read(reg, 0, self.flows as u64));
                }
            }
            ControlEvent::RegisterValues { request, values }
                if self.pending_read == Some(request) =>
            {
                self.pending_read = None;
                self.last_read = Some((cp.now(), values.into_iter().map(|v| v as u32).collect()));
            }
            ControlEvent::OpFailed { request, .. } if self.pending_read == Some(request) => {
                self.pending_read = None;
            }
            _ => {}
        }
    }
}

/// Per-source and per-tenant packet and byte counters. See the module
/// documentation.
#[derive(Debug, Clone)]
pub struct TenantCounters {
    sources: usize,
    tenants: usize,
    path: MonitorPath,
    block: Option<CounterBlock>,
}

impl TenantCounters {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &["flows", "tenants", "in_port", "out_port"];

    /// Counters for `sources` source entries (a power of two) and `tenants`
    /// VLAN entries, forwarding along `path`.
    pub fn new(sources: usize, tenants: usize, path: MonitorPath) -> Self {
        TenantCounters {
            sources,
            tenants,
            path,
            block: None,
        }
    }

    /// From parameters: `flows` (per-source entries, power of two, default
    /// 65,536), `tenants` (per-VLAN entries, default 4,096: one per VLAN
    /// id), `in_port`, `out_port`.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("tenant_counters", Self::PARAMS)?;
        Ok(TenantCounters::new(
            pow2_param(p, "flows", 65_536, 1 << 30)?,
            p.count("tenants", 4096, 4096)? as usize,
            MonitorPath::from_params(p)?,
        ))
    }

    /// The counter block (after the program is declared).
    pub fn block(&self) -> Option<&CounterBlock> {
        self.block.as_ref()
    }
}

impl Program for TenantCounters {
    type Meta = Parsed;
    type Digest = ();

    fn name(&self) -> &str {
        "tenant_counters"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        self.block = Some(CounterBlock::declare(
            d,
            "tenant",
            self.sources,
            self.tenants,
            &[],
        )?);
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
        pkt.forward(self.path.egress(pkt.ingress_port()));
        if let Some(b) = &self.block {
            b.count(dp, pkt)?;
        }
        Ok(())
    }
}
