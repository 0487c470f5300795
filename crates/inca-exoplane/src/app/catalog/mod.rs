//! The apps ExoPlane deploys, each an inca-apps program (built on the
//! shared NF cores) with its objects declared for the runtime.
//!
//! Every §7 app is declared:
//!
//! - front-end scenario: the per-tenant VPN gateway with `tenant_pkts`
//!   ([`vpn`], MEDIUM; tenant = VNI, as inca-apps' gateway re-tunnels
//!   VXLAN), per-tenant NAT ([`tenant_nat`], MEDIUM) and per-tenant ACL
//!   with a drop counter ([`tenant_acl`], MEDIUM), tenant = 802.1Q VID, and
//!   UnivMon ([`univmon`], HIGH);
//! - leaf scenario: per-VM NAT ([`nat`], MEDIUM), per-VM stateful
//!   firewall with a per-source packet counter ([`firewall`], MEDIUM), the
//!   SYN proxy ([`synproxy`], LOW: inca-apps' proxy keeps its handshake
//!   state in registers that steer control flow, where §7 has a
//!   control-plane `seq_map`, so it cannot merge and the model refuses it
//!   as MEDIUM) and NetCache ([`netcache()`], HIGH; keyed by the 128-bit
//!   key in the UDP payload).
//!
//! A NAT's new flows allocate from a per-logical-device share of its
//! public pool ([`NatSetup`]).
//!
//! [our choice] Data-plane counters of inca-apps are indexed by a hash of
//! their key (per-source counters: CRC-32 of the address), not through a
//! control-plane key→slot table as §3.1 describes (the per-tenant ACL's
//! drop counter by the VID itself, one cell per VID); their entries are
//! therefore always "present", and a MERGE names that index as its slot.
//! NetCache's registers are indexed by the slot its control-plane index
//! gives the key, as §3.1 describes.

mod netcache;
mod tenant;

pub use netcache::{encode_slot, netcache, VALUE_BYTES};
pub use tenant::{encode_verdict, tenant_acl, tenant_acl_admitting, tenant_nat, NatSetup};

use inca_apps::acl::Acl;
use inca_apps::core::firewall as fw_core;
use inca_apps::core::nat as nat_core;
use inca_apps::core::vpn as vpn_core;
use inca_apps::counters::MonitorPath;
use inca_apps::firewall::Firewall;
use inca_apps::headers::Parsed;
use inca_apps::nat::{Nat, Translate};
use inca_apps::netcache::NetCache;
use inca_apps::params::Params;
use inca_apps::synproxy::SynProxy;
use inca_apps::univmon::UnivMon;
use inca_apps::vpn::{Tunnel, VpnGateway};
use inca_switch::composite::Block;
use inca_switch::objects::ObjectId;
use inca_switch::{ControlPlane, MatchSpec, PortId, TableHandle};

use super::{
    Affinity, AppSpec, Consistency, KeyField, MergeOp, ObjectKind, ObjectSpec, FIVE_TUPLE,
};
use crate::ids::{AppId, ObjId};

/// An app's logic: one of the inca-apps programs, configured.
#[derive(Clone)]
pub enum AppProgram {
    /// Source NAT (`inca_apps::nat`).
    Nat(Nat),
    /// Stateful firewall with per-source counters (`inca_apps::firewall`).
    Firewall(Firewall),
    /// UnivMon sketch (`inca_apps::univmon`).
    UnivMon(UnivMon),
    /// SYN proxy (`inca_apps::synproxy`).
    SynProxy(SynProxy),
    /// VPN gateway (`inca_apps::vpn`).
    Vpn(VpnGateway),
    /// Access-control list (`inca_apps::acl`), per tenant.
    Acl(Acl),
    /// In-network cache (`inca_apps::netcache`).
    NetCache(NetCache),
}

/// A data-plane counter keyed by `key`, merged with ADD.
fn counter(id: u16, name: &str, key: &'static [KeyField]) -> ObjectSpec {
    ObjectSpec {
        id: ObjId(id),
        name: name.to_string(),
        kind: ObjectKind::Counter,
        key,
        value_bits: 32,
        consistency: Consistency::Bounded(MergeOp::Add),
    }
}

/// Per-tenant VPN gateway with counters (§7, as inca-apps builds it: VXLAN
/// re-tunnelling): `vpn_in` (⟨VNI, inner destination⟩ → server, internal
/// VNI, port) for packets from `outside_port`, `vpn_out` (⟨VNI, inner
/// source⟩ → remote endpoint, external VNI, port) for the rest, `flows`
/// entries each; `vpn_by_tenant` (by VNI, `tenants` cells: §7's
/// `tenant_pkts`) and `vpn_by_source` (by inner source) count packets,
/// ADD. MEDIUM.
pub fn vpn(id: AppId, name: &str, flows: usize, outside_port: PortId, tenants: usize) -> AppSpec {
    let mut p = Params::default();
    p.set("flows", flows)
        .set("outside_port", outside_port)
        .set("counters", 1024)
        .set("tenants", tenants);
    let g = VpnGateway::from_params(&p)
        .unwrap_or_else(|_| VpnGateway::new(flows, outside_port, [192, 0, 2, 1]));
    AppSpec {
        id,
        name: name.to_string(),
        affinity: Affinity::Medium,
        objects: vec![
            table(1, "vpn_in", &[KeyField::Vni, KeyField::InnerDst], 65),
            table(2, "vpn_out", &[KeyField::Vni, KeyField::InnerSrc], 65),
            counter(3, "vpn_by_tenant", &[KeyField::Vni]),
            counter(4, "vpn_by_source", &[KeyField::InnerSrc]),
        ],
        program: AppProgram::Vpn(g),
    }
}

/// [`vpn`] mapping each new VM on its first outbound packet (inca-apps'
/// [`VpnGateway::admitting`], tunnels to 203.0.113.1 [our choice]): its
/// control logic — on a device, run by the daemon — writes the mapping like
/// a NAT's setup. §8 E6 runs it.
pub fn vpn_admitting(
    id: AppId,
    name: &str,
    flows: usize,
    outside_port: PortId,
    tenants: usize,
) -> AppSpec {
    let mut spec = vpn(id, name, flows, outside_port, tenants);
    if let AppProgram::Vpn(g) = &mut spec.program {
        *g = g.clone().admitting([203, 0, 113, 1]);
    }
    spec
}

/// A control-plane table keyed by `key`.
fn table(id: u16, name: &str, key: &'static [KeyField], value_bits: u32) -> ObjectSpec {
    ObjectSpec {
        id: ObjId(id),
        name: name.to_string(),
        kind: ObjectKind::Table,
        key,
        value_bits,
        consistency: Consistency::Strong,
    }
}

/// Per-VM NAT (§7): `nat_out` (5-tuple → public address, port, egress)
/// and `nat_in` (the reply's 5-tuple → inside address, port, ingress),
/// `flows` entries each, outside on switch port `outside_port`. MEDIUM.
pub fn nat(id: AppId, name: &str, flows: usize, outside_port: PortId) -> AppSpec {
    AppSpec {
        id,
        name: name.to_string(),
        affinity: Affinity::Medium,
        objects: vec![
            table(1, "nat_out", FIVE_TUPLE, 57),
            table(2, "nat_in", FIVE_TUPLE, 57),
        ],
        program: AppProgram::Nat(Nat::new(flows, outside_port, [198, 51, 100, 1])),
    }
}

/// Per-VM stateful firewall with per-source counter (§7): `fw_conn`
/// (5-tuple → inside port) and `fw_by_source` (source address → packets,
/// ADD), `flows` connections and `sources` counters, outside on switch
/// port `outside_port`. MEDIUM.
pub fn firewall(
    id: AppId,
    name: &str,
    flows: usize,
    outside_port: PortId,
    sources: usize,
) -> AppSpec {
    let mut p = Params::default();
    p.set("flows", flows)
        .set("outside_port", outside_port)
        .set("counters", sources)
        .set("tenants", 1);
    // The parameters are in range by construction; fall back to a firewall
    // without counters only if inca-apps ever tightens them.
    let fw = Firewall::from_params(&p)
        .unwrap_or_else(|_| Firewall::new(flows, outside_port, 60_000_000_000));
    AppSpec {
        id,
        name: name.to_string(),
        affinity: Affinity::Medium,
        objects: vec![
            table(1, "fw_conn", FIVE_TUPLE, 16),
            counter(2, "fw_by_source", &[KeyField::Src]),
            // One tenant cell (the firewall's tenants are not used here).
            counter(3, "fw_by_tenant", &[]),
        ],
        program: AppProgram::Firewall(fw),
    }
}

/// UnivMon (§7): `levels × rows` count-min rows of `flows` 32-bit
/// counters (ADD), object id `level · rows + row`. HIGH. inca-apps keys
/// its sketch by the 5-tuple (the spec's UnivMon keys by source address).
pub fn univmon(id: AppId, name: &str, levels: usize, rows: usize, flows: usize) -> AppSpec {
    let u = UnivMon::new(levels, rows, flows, 1_000, 0, MonitorPath::default());
    let mut objects = Vec::new();
    for j in 0..levels {
        for r in 0..rows {
            objects.push(ObjectSpec {
                id: ObjId((j * rows + r) as u16),
                name: format!("um_l{j}_row{r}"),
                kind: ObjectKind::Register,
                key: FIVE_TUPLE,
                value_bits: 32,
                consistency: Consistency::Bounded(MergeOp::Add),
            });
        }
    }
    AppSpec {
        id,
        name: name.to_string(),
        affinity: Affinity::High,
        objects,
        program: AppProgram::UnivMon(u),
    }
}

/// SYN proxy (§7's per-VM SYN proxy, as inca-apps builds it): `syn_flow`
/// and `syn_offset`, registers indexed by a hash of the 5-tuple whose
/// values steer the proxy's logic (unmergeable), `flows` slots each,
/// clients on `outside_port`, servers behind `server_port`. LOW: the whole
/// app runs on devices.
pub fn synproxy(
    id: AppId,
    name: &str,
    flows: usize,
    outside_port: PortId,
    server_port: PortId,
) -> AppSpec {
    let reg = |id: u16, name: &str| ObjectSpec {
        id: ObjId(id),
        name: name.to_string(),
        kind: ObjectKind::Register,
        key: FIVE_TUPLE,
        value_bits: 32,
        consistency: Consistency::Unmergeable,
    };
    AppSpec {
        id,
        name: name.to_string(),
        affinity: Affinity::Low,
        objects: vec![reg(1, "syn_flow"), reg(2, "syn_offset")],
        program: AppProgram::SynProxy(SynProxy::new(flows, outside_port, server_port, 0x5EC2_E7A1)),
    }
}

/// A NAT translation's value bytes: address 4 ‖ port 2 ‖ egress port 2.
fn decode_translate(v: &[u8]) -> Result<Translate, &'static str> {
    let v: &[u8; 8] = v.try_into().map_err(|_| "a NAT entry is 8 bytes")?;
    Ok(Translate {
        ip: [v[0], v[1], v[2], v[3]],
        port: u16::from_be_bytes([v[4], v[5]]),
        egress: u16::from_be_bytes([v[6], v[7]]),
    })
}

/// A VPN tunnel's value bytes: destination 4 ‖ VNI 4 (24 bits used) ‖
/// egress port 2.
fn decode_tunnel(v: &[u8]) -> Result<Tunnel, &'static str> {
    let v: &[u8; 10] = v.try_into().map_err(|_| "a VPN entry is 10 bytes")?;
    Ok(Tunnel {
        dst: [v[0], v[1], v[2], v[3]],
        vni: u32::from_be_bytes([v[4], v[5], v[6], v[7]]) & 0x00FF_FFFF,
        port: u16::from_be_bytes([v[8], v[9]]),
    })
}

/// A VPN tunnel's value bytes ([`AppSpec::install`]'s input).
pub fn encode_tunnel(t: &Tunnel) -> Vec<u8> {
    let mut v = t.dst.to_vec();
    v.extend_from_slice(&t.vni.to_be_bytes());
    v.extend_from_slice(&t.port.to_be_bytes());
    v
}

/// A NAT translation's value bytes ([`AppSpec::install`]'s input).
pub fn encode_translate(t: &Translate) -> Vec<u8> {
    let mut v = t.ip.to_vec();
    v.extend_from_slice(&t.port.to_be_bytes());
    v.extend_from_slice(&t.egress.to_be_bytes());
    v
}

fn exact(key: &[u8]) -> MatchSpec {
    MatchSpec::Exact(key.to_vec().into())
}

impl AppProgram {
    /// The program as block `name`.
    pub fn block(&self, name: &str) -> Block {
        match self {
            AppProgram::Nat(p) => Block::new(name, p.clone()),
            AppProgram::Firewall(p) => Block::new(name, p.clone()),
            AppProgram::UnivMon(p) => Block::new(name, p.clone()),
            AppProgram::SynProxy(p) => Block::new(name, p.clone()),
            AppProgram::Vpn(p) => Block::new(name, p.clone()),
            AppProgram::Acl(p) => Block::new(name, p.clone()),
            AppProgram::NetCache(p) => Block::new(name, p.clone()),
        }
    }

    /// See [`AppSpec::needs`]: the keys each program's ingress looks up,
    /// computed with the same NF core functions it uses.
    pub(super) fn needs(
        &self,
        objects: &[ObjectSpec],
        p: &Parsed,
        header: &[u8],
        port: PortId,
    ) -> Vec<(ObjId, Vec<u8>)> {
        let id = |name: &str| objects.iter().find(|o| o.name == name).map(|o| o.id);
        match self {
            AppProgram::Nat(nat) => {
                let Some(f) = nat_core::flow(p) else {
                    return Vec::new();
                };
                let key = nat.tenant_key().key(f.vlan, &f.five_tuple());
                let table = match nat_core::Direction::by_port(port, nat.outside_port()) {
                    nat_core::Direction::Inbound => "nat_in",
                    nat_core::Direction::Outbound => "nat_out",
                };
                id(table).map(|o| vec![(o, key)]).unwrap_or_default()
            }
            AppProgram::Firewall(fw) => {
                if !p.has_ports {
                    return Vec::new();
                }
                let side = fw_core::Side::by_port(port, fw.outside_port());
                let key = fw_core::conn_key(p, side, fw_core::Orientation::AsSentFromInside);
                id("fw_conn")
                    .map(|o| vec![(o, key.to_vec())])
                    .unwrap_or_default()
            }
            AppProgram::Vpn(g) => {
                let Some(m) = vpn_core::parse_vxlan(header).ok().filter(|m| m.vxlan) else {
                    return Vec::new();
                };
                let (table, key) = if port == g.outside_port() {
                    ("vpn_in", vpn_core::TunnelKey::inbound(&m))
                } else {
                    ("vpn_out", vpn_core::TunnelKey::outbound(&m))
                };
                id(table)
                    .map(|o| vec![(o, key.to_bytes().to_vec())])
                    .unwrap_or_default()
            }
            AppProgram::Acl(_) => tenant::acl_needs(objects, p),
            AppProgram::NetCache(_) => netcache::needs(objects, header),
            // Registers only: nothing a table must hold.
            AppProgram::UnivMon(_) | AppProgram::SynProxy(_) => Vec::new(),
        }
    }

    /// The value bytes of a table write the program's control handler
    /// issued (the inverse of [`AppSpec::install`]'s decoding), for the
    /// daemon's WRITE_REQ; None for a write that is not a table add of
    /// this program.
    pub fn encode_value(
        &self,
        o: &ObjectSpec,
        w: &inca_switch::capture::ControlWrite,
    ) -> Option<Vec<u8>> {
        match (self, o.name.as_str()) {
            (AppProgram::Nat(_), "nat_out" | "nat_in") => {
                w.action::<Translate>().map(encode_translate)
            }
            (AppProgram::Firewall(_), "fw_conn") => {
                w.action::<PortId>().map(|p| p.to_be_bytes().to_vec())
            }
            (AppProgram::Vpn(_), "vpn_in" | "vpn_out") => w.action::<Tunnel>().map(encode_tunnel),
            (AppProgram::Acl(_), "acl_map") => w
                .action::<inca_apps::acl::AclAction>()
                .map(|a| encode_verdict(a.verdict)),
            _ => None,
        }
    }

    /// The bytes of a digest the program sent (its own digest type, as the
    /// runtime carries it to the daemon running its control logic,
    /// [`crate::runtime::event`]); None for a program whose digests the
    /// runtime cannot carry. Of the catalog's MEDIUM apps only the firewall
    /// sends digests: the 13-byte connection key of a RST.
    pub fn digest_bytes(&self, d: &inca_switch::composite::BlockDigest) -> Option<Vec<u8>> {
        match self {
            AppProgram::Firewall(_) => d.downcast_ref::<[u8; 13]>().map(|k| k.to_vec()),
            _ => None,
        }
    }

    /// See [`AppSpec::install`].
    pub(super) fn install(
        &self,
        cp: &mut ControlPlane<'_>,
        resolve: &dyn Fn(&str) -> Option<ObjectId>,
        table: ObjectId,
        o: &ObjectSpec,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<u64, &'static str> {
        match (self, o.name.as_str()) {
            (AppProgram::Nat(_), "nat_out" | "nat_in") => {
                let h = TableHandle::<Translate>::of_object(table);
                Ok(match value {
                    Some(v) => cp.table_add(h, exact(key), decode_translate(v)?),
                    None => cp.table_delete(h, exact(key)),
                })
            }
            (AppProgram::Firewall(_), "fw_conn") => {
                let h = TableHandle::<PortId>::of_object(table);
                Ok(match value {
                    Some(v) => {
                        let v: [u8; 2] = v.try_into().map_err(|_| "a connection is 2 bytes")?;
                        cp.table_add(h, exact(key), u16::from_be_bytes(v))
                    }
                    None => cp.table_delete(h, exact(key)),
                })
            }
            (AppProgram::Vpn(_), "vpn_in" | "vpn_out") => {
                let h = TableHandle::<Tunnel>::of_object(table);
                Ok(match value {
                    Some(v) => cp.table_add(h, exact(key), decode_tunnel(v)?),
                    None => cp.table_delete(h, exact(key)),
                })
            }
            (AppProgram::Acl(_), "acl_map") => tenant::acl_install(cp, table, key, value),
            (AppProgram::NetCache(nc), "nc_cache") => {
                netcache::install(nc, cp, resolve, table, key, value)
            }
            _ => Err("not a table of this program"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_bytes_round_trip_and_bad_lengths_are_refused() {
        let t = Translate {
            ip: [198, 51, 100, 9],
            port: 4242,
            egress: 7,
        };
        assert_eq!(decode_translate(&encode_translate(&t)), Ok(t));
        assert!(decode_translate(&[0; 7]).is_err());
        let v = Tunnel {
            dst: [1, 2, 3, 4],
            vni: 0xABCDE,
            port: 3,
        };
        assert_eq!(decode_tunnel(&encode_tunnel(&v)), Ok(v));
        use inca_apps::acl::Verdict;
        for v in [Verdict::Permit, Verdict::Deny] {
            assert_eq!(tenant::decode_verdict(&encode_verdict(v)), Ok(v));
        }
        assert!(tenant::decode_verdict(&[2]).is_err());
        assert!(tenant::decode_verdict(&[]).is_err());
        assert_eq!(encode_slot(0x0102_0304), vec![1, 2, 3, 4]);
    }
}
