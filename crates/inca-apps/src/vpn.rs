//! VPN gateway: VXLAN tunnels between the outside and the servers, with a
//! per-tenant mapping of tunnel ids.
//!
//! Traffic of a tenant's virtual machines reaches the gateway from the
//! outside in a VXLAN tunnel with an *external* VNI. The gateway maps
//! ⟨external VNI, VM address (inner destination)⟩ to the server that hosts the
//! VM and the VNI used inside the data centre (*internal* VNI), rewrites the
//! outer headers and forwards. The reverse direction maps ⟨internal VNI, VM
//! address (inner source)⟩ back to the remote tunnel endpoint and the external
//! VNI. The inner frame is never touched.
//!
//! # Header layout parsed (byte offsets for an untagged outer frame and a
//! 20-byte outer IPv4 header; a tag adds 4, IPv4 options add theirs)
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 14 | outer Ethernet (EtherType 0x0800) |
//! | 14 | 20 | outer IPv4 (protocol 17): checksum at 24, source at 26, destination at 30 |
//! | 34 | 8 | outer UDP: destination port 4789 at 36, checksum at 40 |
//! | 42 | 8 | VXLAN: flags at 42 (the I bit, 0x08, must be set), 3 reserved, VNI at 46..49 (24 bits), 1 reserved |
//! | 50 | 14 | inner Ethernet (EtherType 0x0800; an 802.1Q tag adds 4) |
//! | 64 | 20 | inner IPv4: source at 76, destination at 80 |
//!
//! # What a packet does
//!
//! - From `outside_port`: look up `vpn_in` with key ⟨external VNI (3 bytes),
//!   inner destination (4 bytes)⟩. A hit writes outer source = `local`,
//!   outer destination = the server, VNI = the internal VNI, updates the
//!   outer IPv4 checksum incrementally (RFC 1624), sets the UDP checksum to 0
//!   (allowed for VXLAN over IPv4, and the only choice for a switch, which
//!   never sees the whole inner frame) and forwards to the entry's port.
//! - From any other port: look up `vpn_out` with ⟨internal VNI, inner
//!   source⟩; a hit writes outer source = `local`, outer destination = the
//!   remote tunnel endpoint, VNI = the external VNI, and forwards.
//! - A miss, a non-VXLAN packet or a VXLAN packet without the I flag is
//!   dropped (counted by the switch as a program drop); a frame whose headers
//!   are malformed or cut short by the parse window is a parse drop.
//!
//! MAC addresses and the outer TTL are left as they are: next-hop MAC
//! rewriting is L2/L3 forwarding's job ([`crate::l2l3`]).
//!
//! # Control plane
//!
//! Mappings are installed by the control plane: at start, every
//! [`Mapping`] in [`VpnGateway::mappings`] (built with
//! [`VpnGateway::with_mapping`], or `demo` synthetic ones from parameters,
//! see [`VpnGateway::demo_mapping`]); at run time, by a
//! [`ControlMessage`](inca_switch::device::ControlMessage) of kind
//! [`MSG_ADD_MAPPING`] or [`MSG_DEL_MAPPING`] whose body is [`Mapping::encode`]:
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 4 | external VNI (big-endian, top byte 0) |
//! | 4 | 4 | VM address |
//! | 8 | 4 | server address |
//! | 12 | 4 | internal VNI (big-endian, top byte 0) |
//! | 16 | 4 | remote tunnel endpoint address |
//! | 20 | 2 | port toward the server |
//!
//! One mapping is one entry in each table. Both tables hold `flows` entries.
//!
//! Admitting VMs ([`VpnGateway::admitting`]): an outbound packet with no
//! `vpn_out` entry goes to the control plane instead of being dropped,
//! which installs the mapping of its VM (inner source) — server = the
//! packet's outer source, internal VNI = its VNI, external VNI = the same
//! number, remote endpoint = the admitting one, port = where it came in —
//! and sends the packet back through the pipeline [our choice: ExoPlane §8
//! E6 needs the VPN's flows set up by its control logic, the way a NAT
//! sets up its flows].
//! Parameters: `flows` (default 65,536), `outside_port` (default 0), `local`
//! (the gateway's tunnel address, default 192.0.2.1), `demo` (synthetic
//! mappings installed at start, default 0).
//!
//! The parser and the re-tunnelling rewrite are [`crate::core::vpn`]'s;
//! this program keeps the mappings in its two tables.

use std::collections::BTreeMap;

use inca_switch::{
    AccessError, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress, MatchKind,
    MatchSpec, PacketCtx, PacketOutDest, ParseError, PortId, Program, TableDecl, TableHandle,
};

use crate::core::vpn::{retunnel, TunnelKey};
use crate::counters::{attach_params, CounterBlock};
use crate::params::{ParamError, Params};

pub use crate::core::vpn::{parse_vxlan, VpnMeta, VXLAN_FLAG_I, VXLAN_LEN, VXLAN_PORT};

/// Control message kind: add (or replace) a mapping; body [`Mapping::encode`].
pub const MSG_ADD_MAPPING: u32 = 0x5650_0001;
/// Control message kind: delete a mapping; body [`Mapping::encode`] (only the
/// VNIs and the VM address matter).
pub const MSG_DEL_MAPPING: u32 = 0x5650_0002;

/// One VM's tunnel mapping: both directions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    /// The VNI the outside uses (24 bits).
    pub ext_vni: u32,
    /// The VM's address (inner destination inbound, inner source outbound).
    pub vm: [u8; 4],
    /// The server hosting the VM.
    pub server: [u8; 4],
    /// The VNI inside (24 bits).
    pub int_vni: u32,
    /// The remote tunnel endpoint on the outside.
    pub remote: [u8; 4],
    /// The port toward the server.
    pub port: PortId,
}

impl Mapping {
    /// The 22-byte message body (see the module documentation).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(22);
        b.extend_from_slice(&self.ext_vni.to_be_bytes());
        b.extend_from_slice(&self.vm);
        b.extend_from_slice(&self.server);
        b.extend_from_slice(&self.int_vni.to_be_bytes());
        b.extend_from_slice(&self.remote);
        b.extend_from_slice(&self.port.to_be_bytes());
        b
    }

    /// Decodes a message body; None if it is not 22 bytes or a VNI does not
    /// fit 24 bits.
    pub fn decode(b: &[u8]) -> Option<Mapping> {
        let b: &[u8; 22] = b.try_into().ok()?;
        let ip = |o: usize| [b[o], b[o + 1], b[o + 2], b[o + 3]];
        let m = Mapping {
            ext_vni: u32::from_be_bytes(ip(0)),
            vm: ip(4),
            server: ip(8),
            int_vni: u32::from_be_bytes(ip(12)),
            remote: ip(16),
            port: u16::from_be_bytes([b[20], b[21]]),
        };
        (m.ext_vni < 1 << 24 && m.int_vni < 1 << 24).then_some(m)
    }

    fn in_key(&self) -> [u8; 7] {
        key(self.ext_vni, self.vm)
    }

    fn out_key(&self) -> [u8; 7] {
        key(self.int_vni, self.vm)
    }
}

/// A table key: VNI (3 bytes) then address.
fn key(vni: u32, ip: [u8; 4]) -> [u8; 7] {
    TunnelKey::new(vni, ip).to_bytes()
}

/// What a hit does: the outer destination, the VNI and the egress port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunnel {
    /// New outer destination address.
    pub dst: [u8; 4],
    /// New VNI.
    pub vni: u32,
    /// Egress port.
    pub port: PortId,
}

/// The VPN gateway program. See the module documentation.
#[derive(Debug, Clone)]
pub struct VpnGateway {
    flows: usize,
    outside_port: PortId,
    local: [u8; 4],
    /// Mappings installed when the switch starts.
    pub mappings: Vec<Mapping>,
    vpn_in: Option<TableHandle<Tunnel>>,
    vpn_out: Option<TableHandle<Tunnel>>,
    /// Per-source (inner source address) and per-tenant (VNI) counters, if
    /// attached: (sources, tenants) to declare, then the block.
    counters: Option<(usize, usize)>,
    block: Option<CounterBlock>,
    /// Control-plane state: the mappings installed, by inbound key.
    installed: BTreeMap<[u8; 7], Mapping>,
    /// Control-plane state: the inbound key of each outbound key in use.
    out_keys: BTreeMap<[u8; 7], [u8; 7]>,
    /// Mappings refused (table full, bad message, key already used by the
    /// other direction of another mapping).
    pub refused: u64,
    /// The remote endpoint of mappings made for new VMs (None: an unknown
    /// VM's packets are dropped).
    admit: Option<[u8; 4]>,
}

/// Punt reason of an admitting gateway's new VM.
pub const REASON_NEW_VM: u16 = 1;

impl VpnGateway {
    /// The attached per-source and per-tenant counters (`counters` > 0),
    /// once the program is loaded; read them with [`CounterBlock::source`]
    /// and [`CounterBlock::tenant`].
    pub fn counters(&self) -> Option<&CounterBlock> {
        self.block.as_ref()
    }

    /// The outside port (packets arriving there use `vpn_in`).
    pub fn outside_port(&self) -> PortId {
        self.outside_port
    }

    /// Parameter names.
    pub const PARAMS: &'static [&'static str] = &[
        "flows",
        "outside_port",
        "local",
        "demo",
        "counters",
        "tenants",
    ];

    /// A gateway with `flows` mappings per table, the outside on
    /// `outside_port`, tunnel address `local`, and no mappings.
    pub fn new(flows: usize, outside_port: PortId, local: [u8; 4]) -> Self {
        VpnGateway {
            flows,
            outside_port,
            local,
            mappings: Vec::new(),
            vpn_in: None,
            vpn_out: None,
            counters: None,
            block: None,
            installed: BTreeMap::new(),
            out_keys: BTreeMap::new(),
            refused: 0,
            admit: None,
        }
    }

    /// A gateway that maps a new VM on its first outbound packet, its
    /// tunnel going to `remote` (see the module documentation).
    pub fn admitting(mut self, remote: [u8; 4]) -> Self {
        self.admit = Some(remote);
        self
    }

    /// An admitting gateway's new VM: map it, then send the packet back
    /// through the pipeline (after the writes: the channel is FIFO).
    fn admit_vm(&mut self, port: PortId, frame: Vec<u8>, cp: &mut ControlPlane<'_>) {
        let Some(remote) = self.admit else { return };
        if port == self.outside_port {
            return;
        }
        let Some(m) = parse_vxlan(&frame).ok().filter(|m| m.vxlan) else {
            return;
        };
        let mapping = Mapping {
            ext_vni: m.vni,
            vm: m.inner_src,
            server: m.outer.src,
            int_vni: m.vni,
            remote,
            port,
        };
        self.install(mapping, cp);
        cp.packet_out(frame, PacketOutDest::Ingress(port));
    }

    /// Adds a mapping installed at start.
    pub fn with_mapping(mut self, m: Mapping) -> Self {
        self.mappings.push(m);
        self
    }

    /// Synthetic mapping `i` (the `demo` parameter): external VNI 100, VM
    /// 10.0.0.0 + i + 1, server 172.16.0.0 + i % 250 + 1, internal VNI
    /// 5000 + i, remote endpoint 203.0.113.1, toward port 1.
    pub fn demo_mapping(i: u32) -> Mapping {
        let add = |base: [u8; 4], n: u32| u32::from_be_bytes(base).wrapping_add(n).to_be_bytes();
        Mapping {
            ext_vni: 100,
            vm: add([10, 0, 0, 0], i + 1),
            server: add([172, 16, 0, 0], i % 250 + 1),
            int_vni: (5000 + i) & 0xff_ffff,
            remote: [203, 0, 113, 1],
            port: 1,
        }
    }

    /// A gateway sized from parameters.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("vpn", Self::PARAMS)?;
        let flows = p.count("flows", 65_536, 1 << 32)? as usize;
        let outside = p.number("outside_port", 0, 0, 511)? as PortId;
        let local = p.ipv4("local", [192, 0, 2, 1])?;
        let demo = p.number("demo", 0, 0, 1 << 24)? as u32;
        let mut g = VpnGateway::new(flows, outside, local);
        g.mappings = (0..demo).map(Self::demo_mapping).collect();
        g.counters = attach_params(p)?;
        Ok(g)
    }

    /// Number of mappings the control plane has installed.
    pub fn installed(&self) -> usize {
        self.installed.len()
    }

    /// The inbound and outbound tables (for tests).
    pub fn tables(&self) -> Option<(TableHandle<Tunnel>, TableHandle<Tunnel>)> {
        Some((self.vpn_in?, self.vpn_out?))
    }

    fn install(&mut self, m: Mapping, cp: &mut ControlPlane<'_>) {
        let (Some(vin), Some(vout)) = (self.vpn_in, self.vpn_out) else {
            return;
        };
        let inbound = Tunnel {
            dst: m.server,
            vni: m.int_vni,
            port: m.port,
        };
        let outbound = Tunnel {
            dst: m.remote,
            vni: m.ext_vni,
            port: self.outside_port,
        };
        let in_key = MatchSpec::Exact(m.in_key().to_vec().into());
        let out_key = MatchSpec::Exact(m.out_key().to_vec().into());
        match self.installed.get(&m.in_key()).copied() {
            Some(old) if old.int_vni == m.int_vni => {
                cp.table_modify(vin, in_key, inbound);
                cp.table_modify(vout, out_key, outbound);
            }
            Some(old) => {
                // The internal VNI changed: the outbound key moves.
                if self.out_keys.contains_key(&m.out_key()) {
                    self.refused += 1;
                    return;
                }
                cp.table_modify(vin, in_key, inbound);
                cp.table_delete(vout, MatchSpec::Exact(old.out_key().to_vec().into()));
                cp.table_add(vout, out_key, outbound);
                self.out_keys.remove(&old.out_key());
            }
            None => {
                if self.installed.len() >= self.flows || self.out_keys.contains_key(&m.out_key()) {
                    self.refused += 1;
                    return;
                }
                cp.table_add(vin, in_key, inbound);
                cp.table_add(vout, out_key, outbound);
            }
        }
        self.installed.insert(m.in_key(), m);
        self.out_keys.insert(m.out_key(), m.in_key());
    }

    fn remove(&mut self, m: Mapping, cp: &mut ControlPlane<'_>) {
        let (Some(vin), Some(vout)) = (self.vpn_in, self.vpn_out) else {
            return;
        };
        if let Some(old) = self.installed.remove(&m.in_key()) {
            self.out_keys.remove(&old.out_key());
            cp.table_delete(vin, MatchSpec::Exact(old.in_key().to_vec().into()));
            cp.table_delete(vout, MatchSpec::Exact(old.out_key().to_vec().into()));
        }
    }
}

impl Program for VpnGateway {
    type Meta = VpnMeta;
    type Digest = ();

    fn name(&self) -> &str {
        "vpn"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        let direction = d.gateway("direction", Gress::Ingress, &[])?;
        // Action data: address (32) + VNI (24) + egress port (9); the
        // actions set two addresses, the VNI, the checksum and the port.
        let inbound = TableDecl::new("vpn_in", MatchKind::Exact, 7, 65, self.flows)
            .after(&[direction.id()])
            .vliw(5);
        let outbound = TableDecl::new("vpn_out", MatchKind::Exact, 7, 65, self.flows)
            .after(&[direction.id()])
            .vliw(5);
        self.vpn_in = Some(d.table(inbound)?);
        self.vpn_out = Some(d.table(outbound)?);
        if let Some((sources, tenants)) = self.counters {
            self.block = Some(CounterBlock::declare(
                d,
                "vpn",
                sources,
                tenants,
                &[direction.id()],
            )?);
        }
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut VpnMeta) -> Result<(), ParseError> {
        if gress == Gress::Ingress {
            *meta = parse_vxlan(header)?;
        }
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<VpnMeta, ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let (Some(vin), Some(vout)) = (self.vpn_in, self.vpn_out) else {
            return Ok(());
        };
        let m = pkt.meta;
        if !m.vxlan {
            return Ok(()); // not a tunnel packet: dropped
        }
        if let Some(block) = self.block {
            block.count_fields(dp, u64::from(m.vni), Some(m.inner_src), pkt.len() as u64)?;
        }
        let hit = if pkt.ingress_port() == self.outside_port {
            dp.lookup(vin, &key(m.vni, m.inner_dst))?
        } else {
            dp.lookup(vout, &key(m.vni, m.inner_src))?
        };
        if let Some(t) = hit {
            // The parser checked the window holds the VXLAN header.
            if retunnel(pkt.header_mut(), &m, self.local, t.dst, t.vni) {
                pkt.forward(t.port);
            }
        } else if self.admit.is_some() && pkt.ingress_port() != self.outside_port {
            pkt.to_cpu(REASON_NEW_VM);
        }
        Ok(())
    }

    /// Tunnel packets both ways for the first mappings (the first demo
    /// mapping's addresses when there are none).
    fn check_hints(&self) -> inca_switch::CheckHints {
        use crate::fixtures::vxlan_frame;
        let mut maps: Vec<Mapping> = self.mappings.iter().take(3).cloned().collect();
        if maps.is_empty() {
            maps.push(Self::demo_mapping(0));
        }
        let mut samples = Vec::new();
        for m in maps {
            let outside = [198, 51, 100, 7];
            let inbound = vxlan_frame(m.remote, self.local, m.ext_vni, outside, m.vm);
            let outbound = vxlan_frame(m.server, self.local, m.int_vni, m.vm, outside);
            samples.push((self.outside_port, inbound));
            samples.push((m.port, outbound));
        }
        inca_switch::CheckHints {
            samples,
            known: Vec::new(),
        }
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        match event {
            ControlEvent::Start => {
                self.installed.clear();
                self.out_keys.clear();
                for m in self.mappings.clone() {
                    self.install(m, cp);
                }
            }
            ControlEvent::Message(msg) if msg.kind == MSG_ADD_MAPPING => {
                match Mapping::decode(&msg.body) {
                    Some(m) => self.install(m, cp),
                    None => self.refused += 1,
                }
            }
            ControlEvent::PacketIn {
                port,
                reason: REASON_NEW_VM,
                frame,
            } => self.admit_vm(port, frame, cp),
            ControlEvent::Message(msg) if msg.kind == MSG_DEL_MAPPING => {
                match Mapping::decode(&msg.body) {
                    Some(m) => self.remove(m, cp),
                    None => self.refused += 1,
                }
            }
            _ => {}
        }
    }
}
