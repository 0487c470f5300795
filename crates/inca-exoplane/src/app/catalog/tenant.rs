//! The front-end scenario's per-tenant apps (§7), tenant = 802.1Q VID:
//! per-tenant NAT (inca-apps' NAT keyed by VID ‖ 5-tuple) and per-tenant
//! ACL with a drop counter (inca-apps' ACL in its exact per-tenant form),
//! and the NAT's new-flow allocation from a per-shard share of its pool
//! ([`NatSetup`], §5.4 "port pools partitioned per logical id").

use inca_apps::acl::{tuple_of, Acl, AclAction, Verdict};
use inca_apps::core::nat::{self as nat_core, Allocator, Pool, TenantKey};
use inca_apps::headers::{parse, Parsed};
use inca_apps::nat::{flow_entries, Nat};
use inca_switch::{ControlPlane, MatchSpec, PortId, TableHandle};

use super::{counter, encode_translate, table, AppProgram};
use crate::app::{Affinity, AppSpec, KeyField, ObjectSpec, VID_FIVE_TUPLE};
use crate::hub::msg::{Write, WriteOp};
use crate::ids::{AppId, LogicalId, ObjId};

/// Per-tenant NAT (§7 `nat_map`): `nat_out` (VID ‖ 5-tuple → public
/// address, port, egress) and `nat_in` (VID ‖ the reply's 5-tuple → inside
/// address, port, ingress), `flows` entries each, outside on
/// `outside_port`. Two tables where §7 names one map: inca-apps' NAT looks
/// replies up by their own 5-tuple. MEDIUM.
pub fn tenant_nat(id: AppId, name: &str, flows: usize, outside_port: PortId) -> AppSpec {
    AppSpec {
        id,
        name: name.to_string(),
        affinity: Affinity::Medium,
        objects: vec![
            table(1, "nat_out", VID_FIVE_TUPLE, 57),
            table(2, "nat_in", VID_FIVE_TUPLE, 57),
        ],
        program: AppProgram::Nat(Nat::new(flows, outside_port, [198, 51, 100, 1]).with_tenants()),
    }
}

/// Per-tenant ACL with drop counter (§7): `acl_map` (VID ‖ 5-tuple →
/// permit/deny, `flows` entries) and `acl_tenant_drops` (VID → denied
/// packets, ADD; §7's `tenant_drops`). Permitted packets leave by
/// `out_port`; a flow without an entry is denied [our choice: the safe
/// default; such a flow misses by design and is never promoted, §9.11].
/// MEDIUM.
pub fn tenant_acl(id: AppId, name: &str, flows: usize, out_port: PortId) -> AppSpec {
    let acl = Acl::tenant(Verdict::Deny, out_port, flows);
    AppSpec {
        id,
        name: name.to_string(),
        affinity: Affinity::Medium,
        objects: vec![
            table(1, "acl_map", VID_FIVE_TUPLE, 1),
            counter(2, "acl_tenant_drops", &[KeyField::Vid]),
        ],
        program: AppProgram::Acl(acl),
    }
}

/// [`tenant_acl`] whose new flows get a permit entry on their first
/// packet (inca-apps' [`Acl::admitting`]): the ACL's control logic — on a
/// device, run by the daemon — writes it like a NAT's setup, so the flow is
/// served and promotable. §8 E6 runs it [our choice]; the default (`deny`
/// without an entry, §9.11) stays [`tenant_acl`]'s.
pub fn tenant_acl_admitting(id: AppId, name: &str, flows: usize, out_port: PortId) -> AppSpec {
    let mut spec = tenant_acl(id, name, flows, out_port);
    if let AppProgram::Acl(acl) = &mut spec.program {
        *acl = acl.clone().admitting(Verdict::Permit);
    }
    spec
}

/// An ACL entry's value bytes: 1 permit, 0 deny.
pub fn encode_verdict(v: Verdict) -> Vec<u8> {
    vec![u8::from(v == Verdict::Permit)]
}

pub(super) fn decode_verdict(v: &[u8]) -> Result<Verdict, &'static str> {
    match v {
        [1] => Ok(Verdict::Permit),
        [0] => Ok(Verdict::Deny),
        _ => Err("an ACL entry is 1 byte, 0 deny or 1 permit"),
    }
}

/// The ACL entry a packet looks up (`acl_map`), as the program keys it.
pub(super) fn acl_needs(objects: &[ObjectSpec], p: &Parsed) -> Vec<(ObjId, Vec<u8>)> {
    if !p.ipv4 {
        return Vec::new();
    }
    let key = nat_core::tenant_key(p.vlan, &tuple_of(p)).to_vec();
    objects
        .iter()
        .find(|o| o.name == "acl_map")
        .map(|o| vec![(o.id, key)])
        .unwrap_or_default()
}

/// Writes `acl_map` entry `key` (value Some) or deletes it.
pub(super) fn acl_install(
    cp: &mut ControlPlane<'_>,
    table: inca_switch::objects::ObjectId,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<u64, &'static str> {
    let h = TableHandle::<AclAction>::of_object(table);
    let spec = MatchSpec::Exact(key.to_vec().into());
    Ok(match value {
        Some(v) => {
            let verdict = decode_verdict(v)?;
            cp.table_add(h, spec, AclAction { rule: 0, verdict })
        }
        None => cp.table_delete(h, spec),
    })
}

/// A NAT app's new-flow logic for one logical device: allocation from
/// that shard's share of the public pool, so shards (and so devices
/// setting up flows at once) never hand out one endpoint twice (§5.4)
/// [our choice: the pool of `flows` endpoints split into `N_L`
/// contiguous shares, inca-apps' [`Allocator::sharded`]]. It gives the
/// writes a daemon sends in WRITE_REQ for a flow's first packet.
#[derive(Debug, Clone)]
pub struct NatSetup {
    allocator: Allocator,
    tenant: TenantKey,
    outside_port: PortId,
    out_obj: ObjId,
    in_obj: ObjId,
}

impl NatSetup {
    /// The setup of NAT app `spec` (per-VM or per-tenant) for logical
    /// device `l` of `n_logical`; None if `spec` is not a NAT or `l` is out
    /// of range.
    pub fn for_shard(spec: &AppSpec, l: LogicalId, n_logical: u8) -> Option<Self> {
        let AppProgram::Nat(nat) = &spec.program else {
            return None;
        };
        let id = |name: &str| spec.objects.iter().find(|o| o.name == name).map(|o| o.id);
        let pool = Pool {
            base: nat.public_base(),
        };
        let capacity = (nat.flows() as u64).min(u64::from(u32::MAX));
        Some(NatSetup {
            allocator: Allocator::sharded(pool, u64::from(l.0), u64::from(n_logical), capacity)?,
            tenant: nat.tenant_key(),
            outside_port: nat.outside_port(),
            out_obj: id("nat_out")?,
            in_obj: id("nat_in")?,
        })
    }

    /// The writes that set up the flow of `frame`, which arrived from
    /// inside on switch port `port`: both directions, INSERT_IF_ABSENT.
    /// None if the frame is no NAT flow, came from outside, or the share
    /// is exhausted. A flow asked again gets the same endpoint.
    pub fn writes(&mut self, frame: &[u8], port: PortId) -> Option<Vec<Write>> {
        if port == self.outside_port {
            return None;
        }
        let p = nat_core::flow(&parse(frame).ok()?)?;
        let tenant = self.tenant.tenant(p.vlan);
        let public = self.allocator.allocate_for(tenant, &p)?;
        let (out_key, out, in_key, back) =
            flow_entries(self.tenant, &p, public, port, self.outside_port);
        let w = |obj, key, t| Write {
            op: WriteOp::InsertIfAbsent,
            obj,
            key,
            value: encode_translate(&t),
        };
        Some(vec![
            w(self.out_obj, out_key, out),
            w(self.in_obj, in_key, back),
        ])
    }
}
