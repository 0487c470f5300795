//! L2/L3 forwarding: the baseline switch program.
//!
//! IPv4 packets are routed: `ipv4_lpm` maps the destination address to a
//! next-hop id, `nexthop` maps that to an egress port and the MAC addresses
//! to write, and the TTL is decremented (with an incremental checksum
//! update; TTL 1 is dropped). Other frames are bridged by destination MAC
//! through `dmac`. Sizes are parameters: `macs`, `routes`, `nexthops`.

use inca_switch::objects::Handle;
use inca_switch::{
    AccessError, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress, MatchKind,
    MatchSpec, PacketCtx, ParseError, PortId, Program, TableDecl, TableHandle,
};
use inca_wire::checksum;

use crate::headers::{parse_ingress_only, Parsed};
use crate::params::{ParamError, Params};

/// What a next hop does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextHop {
    /// Egress port.
    pub port: PortId,
    /// Destination MAC to write.
    pub dst_mac: [u8; 6],
    /// Source MAC to write.
    pub src_mac: [u8; 6],
}

/// A static route or MAC entry the control plane installs at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// Bridge frames for `mac` to `port`.
    Mac {
        /// The MAC.
        mac: [u8; 6],
        /// The port.
        port: PortId,
    },
    /// Route `prefix/len` to next hop `id`.
    Route {
        /// The prefix.
        prefix: [u8; 4],
        /// Its length in bits.
        len: u16,
        /// The next hop.
        nexthop: u16,
    },
    /// Define next hop `id`.
    NextHop {
        /// Its id.
        id: u16,
        /// What it does.
        hop: NextHop,
    },
}

/// The L2/L3 forwarding program. See the module documentation.
#[derive(Debug, Clone)]
pub struct L2L3 {
    macs: usize,
    routes: usize,
    nexthops: usize,
    /// Entries installed when the switch starts.
    pub entries: Vec<Entry>,
    dmac: Option<TableHandle<PortId>>,
    lpm: Option<TableHandle<u16>>,
    nexthop: Option<TableHandle<NextHop>>,
    is_ipv4: Option<Handle>,
}

impl L2L3 {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &["macs", "routes", "nexthops"];

    /// A program with these table sizes and no entries.
    pub fn new(macs: usize, routes: usize, nexthops: usize) -> Self {
        L2L3 {
            macs,
            routes,
            nexthops,
            entries: Vec::new(),
            dmac: None,
            lpm: None,
            nexthop: None,
            is_ipv4: None,
        }
    }

    /// A program sized from parameters (defaults: 4,096 MACs, 16,384 routes,
    /// 1,024 next hops).
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("l2l3", Self::PARAMS)?;
        Ok(L2L3::new(
            p.count("macs", 4096, 1 << 32)? as usize,
            p.count("routes", 16_384, 1 << 32)? as usize,
            p.count("nexthops", 1024, 65_536)? as usize,
        ))
    }

    fn route(
        &self,
        pkt: &mut PacketCtx<Parsed, ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let (Some(lpm), Some(nh)) = (self.lpm, self.nexthop) else {
            return Ok(());
        };
        let p = pkt.meta;
        if p.ttl <= 1 {
            return Ok(()); // dropped: no destination
        }
        let Some(id) = dp.lookup(lpm, &p.dst)? else {
            return Ok(());
        };
        let Some(hop) = dp.lookup(nh, &id.to_be_bytes())? else {
            return Ok(());
        };
        let l3 = usize::from(p.l3);
        let h = pkt.header_mut();
        h[0..6].copy_from_slice(&hop.dst_mac);
        h[6..12].copy_from_slice(&hop.src_mac);
        // TTL is the high byte of the 16-bit word at offset 8.
        let ttl_word = u16::from_be_bytes([h[l3 + 8], h[l3 + 9]]);
        let new_word = ttl_word - 0x100;
        h[l3 + 8] = p.ttl - 1;
        let old_sum = u16::from_be_bytes([h[l3 + 10], h[l3 + 11]]);
        let new_sum = checksum::update_u16(old_sum, ttl_word, new_word);
        h[l3 + 10..l3 + 12].copy_from_slice(&new_sum.to_be_bytes());
        pkt.forward(hop.port);
        Ok(())
    }
}

impl Program for L2L3 {
    type Meta = Parsed;
    type Digest = ();

    fn name(&self) -> &str {
        "l2l3"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let is_ipv4 = d.gateway("is_ipv4", Gress::Ingress, &[])?;
        self.dmac = Some(d.table(
            TableDecl::new("dmac", MatchKind::Exact, 6, 16, self.macs).after(&[is_ipv4.id()]),
        )?);
        let lpm = d.table(
            TableDecl::new("ipv4_lpm", MatchKind::Lpm, 4, 16, self.routes).after(&[is_ipv4.id()]),
        )?;
        self.nexthop = Some(
            d.table(
                TableDecl::new("nexthop", MatchKind::Exact, 2, 16 + 96, self.nexthops)
                    .after(&[lpm.id()])
                    .vliw(3),
            )?,
        );
        self.lpm = Some(lpm);
        self.is_ipv4 = Some(is_ipv4);
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
        if pkt.meta.ipv4 {
            return self.route(pkt, dp);
        }
        if let Some(dmac) = self.dmac {
            if let Some(port) = dp.lookup(dmac, &pkt.meta.dst_mac)? {
                pkt.forward(port);
            }
        }
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        if let ControlEvent::Start = event {
            let (Some(dmac), Some(lpm), Some(nh)) = (self.dmac, self.lpm, self.nexthop) else {
                return;
            };
            for e in &self.entries {
                match e {
                    Entry::Mac { mac, port } => {
                        cp.table_add(dmac, MatchSpec::Exact(mac.to_vec().into()), *port);
                    }
                    Entry::Route {
                        prefix,
                        len,
                        nexthop,
                    } => {
                        let spec = MatchSpec::Lpm {
                            value: prefix.to_vec().into(),
                            prefix_len: *len,
                        };
                        cp.table_add(lpm, spec, *nexthop);
                    }
                    Entry::NextHop { id, hop } => {
                        cp.table_add(nh, MatchSpec::Exact(id.to_be_bytes().to_vec().into()), *hop);
                    }
                }
            }
        }
    }
}
