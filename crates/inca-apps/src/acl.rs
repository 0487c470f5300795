//! An access-control list: 5-tuple ternary rules, each permitting or
//! denying, first match wins.
//!
//! The rules live in one ternary table, `acl_rules`, keyed by the IPv4
//! 5-tuple (source, destination, protocol, source port, destination port;
//! ports are 0 for packets without TCP/UDP ports, so a rule that names a
//! port matches only TCP/UDP). The control plane installs them at start,
//! earlier rules at higher priority. A permitted packet goes out of
//! `out_port`; a denied one is dropped. A packet no rule matches, and any
//! packet that is not IPv4, gets the `default` action. The counter array
//! `acl_hits` counts packets and bytes per rule (index = the rule's
//! position), the last entry counting packets decided by the default.
//!
//! Per tenant (`per_tenant=1`, ExoPlane's per-tenant ACL, specs/exoplane.md
//! §7): the rules are exact entries of `acl_map` keyed by the 802.1Q VID
//! and the 5-tuple ([`crate::core::nat::tenant_key`], 15 bytes), written by
//! the control plane one flow at a time, and the counter array
//! `acl_tenant_drops` (one cell per VID, 4,096) counts each tenant's denied
//! packets and bytes; there is no per-rule counter. A rule in `rules` must
//! then name every field exactly (`vid`, `src` and `dst` as /32, `proto`,
//! `sport`, `dport`).
//!
//! Admitting new flows (per tenant only, [`Acl::admitting`]): a packet with
//! no entry goes to the control plane instead of getting the default,
//! which installs the admission verdict for its (VID, 5-tuple) and sends
//! the packet back through the pipeline — an administrator's policy
//! materialised one exact entry per flow, the way a NAT sets up its
//! flows [our choice: ExoPlane §8 E6 needs the ACL's flows to have
//! entries, so they are served, and promotable, like the NAT's].
//!
//! Parameters: `rules` (see below; default none), `default` (`permit` or
//! `deny`, default `permit`), `out_port` (default 1), `size` (table
//! entries, default 1,024), `per_tenant` (0 or 1, default 0).
//!
//! Rule syntax, rules separated by `;`:
//! `permit|deny [field=value[,field=value...]]` with fields `src` and
//! `dst` (`A.B.C.D[/len]`), `proto` (a number, or `tcp`/`udp`/`icmp`),
//! `sport` and `dport` (a number), and per tenant `vid` (0..=4095). A field left out matches anything; a
//! rule with no fields matches every IPv4 packet. Example:
//! `deny dst=10.9.0.0/16,proto=udp,dport=53; permit src=10.0.0.0/8`.

use inca_switch::{
    AccessError, ArrayDecl, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress,
    Handle, MatchKind, MatchSpec, PacketCtx, PacketOutDest, ParseError, PortId, Program, TableDecl,
    TableHandle,
};

use crate::core::nat::{tenant_key, TENANT_KEY_LEN};
use crate::headers::{parse_ingress_only, Parsed, PROTO_ICMP, PROTO_TCP, PROTO_UDP};
use crate::params::{ParamError, Params};

/// Bytes of the 5-tuple key.
const KEY_BYTES: usize = 13;
/// Cells of the per-tenant drop counter: one per 12-bit VID.
pub const TENANT_CELLS: usize = 4096;

/// What a rule does with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Forward it.
    Permit,
    /// Drop it.
    Deny,
}

/// One ACL rule: a 5-tuple value/mask and a verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclRule {
    /// What to do with a match.
    pub verdict: Verdict,
    /// Source prefix.
    pub src: Option<([u8; 4], u8)>,
    /// Destination prefix.
    pub dst: Option<([u8; 4], u8)>,
    /// IP protocol.
    pub proto: Option<u8>,
    /// Source port.
    pub sport: Option<u16>,
    /// Destination port.
    pub dport: Option<u16>,
    /// Tenant (802.1Q VID), per-tenant ACLs only.
    pub vid: Option<u16>,
}

impl AclRule {
    /// Whether the rule matches a packet's 5-tuple key (what the table does;
    /// for tests and the control plane's own checks).
    pub fn matches(&self, key: &[u8; KEY_BYTES]) -> bool {
        let MatchSpec::Ternary { value, mask, .. } = self.spec(0) else {
            return false;
        };
        key.iter()
            .zip(value.iter().zip(mask.iter()))
            .all(|(k, (v, m))| k & m == v & m)
    }

    /// The per-tenant exact key (VID ‖ 5-tuple) if the rule names every
    /// field exactly.
    pub fn exact_key(&self) -> Option<[u8; TENANT_KEY_LEN]> {
        let ((src, 32), (dst, 32)) = (self.src?, self.dst?) else {
            return None;
        };
        let p = Parsed {
            src,
            dst,
            proto: self.proto?,
            sport: self.sport?,
            dport: self.dport?,
            ..Parsed::default()
        };
        Some(tenant_key(self.vid?, &p.five_tuple()))
    }

    /// The table entry, at `priority`.
    pub fn spec(&self, priority: u32) -> MatchSpec {
        let mut value = [0u8; KEY_BYTES];
        let mut mask = [0u8; KEY_BYTES];
        let mut prefix = |at: usize, p: Option<([u8; 4], u8)>| {
            if let Some((ip, len)) = p {
                let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
                value[at..at + 4].copy_from_slice(&ip);
                mask[at..at + 4].copy_from_slice(&m.to_be_bytes());
            }
        };
        prefix(0, self.src);
        prefix(4, self.dst);
        if let Some(p) = self.proto {
            value[8] = p;
            mask[8] = 0xff;
        }
        for (at, port) in [(9, self.sport), (11, self.dport)] {
            if let Some(p) = port {
                value[at..at + 2].copy_from_slice(&p.to_be_bytes());
                mask[at..at + 2].fill(0xff);
            }
        }
        MatchSpec::Ternary {
            value: value.into(),
            mask: mask.into(),
            priority,
        }
    }

    /// Reads rules separated by `;` (the module documentation's syntax);
    /// `param` names the parameter in errors.
    pub fn parse_list(param: &str, text: &str) -> Result<Vec<AclRule>, ParamError> {
        text.split(';')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(|r| Self::parse_one(param, r))
            .collect()
    }

    fn parse_one(param: &str, rule: &str) -> Result<AclRule, ParamError> {
        let err = |why: String| ParamError::Value {
            name: param.to_string(),
            reason: format!("rule {rule:?}: {why}"),
        };
        let (verdict, fields) = rule.split_once(' ').unwrap_or((rule, ""));
        let verdict = match verdict {
            "permit" => Verdict::Permit,
            "deny" => Verdict::Deny,
            v => return Err(err(format!("{v:?} is not permit or deny"))),
        };
        let mut r = AclRule {
            verdict,
            src: None,
            dst: None,
            proto: None,
            sport: None,
            dport: None,
            vid: None,
        };
        for f in fields.split(',').map(str::trim).filter(|f| !f.is_empty()) {
            let (k, v) = f
                .split_once('=')
                .ok_or_else(|| err(format!("{f:?} is not field=value")))?;
            let (k, v) = (k.trim(), v.trim());
            let bad = || err(format!("bad {k} {v:?}"));
            match k {
                "src" | "dst" => {
                    let (ip, len) = v.split_once('/').unwrap_or((v, "32"));
                    let ip: std::net::Ipv4Addr = ip.parse().map_err(|_| bad())?;
                    let len: u8 = len.parse().map_err(|_| bad())?;
                    if len > 32 {
                        return Err(bad());
                    }
                    let p = Some((ip.octets(), len));
                    if k == "src" {
                        r.src = p;
                    } else {
                        r.dst = p;
                    }
                }
                "proto" => {
                    r.proto = Some(match v {
                        "tcp" => PROTO_TCP,
                        "udp" => PROTO_UDP,
                        "icmp" => PROTO_ICMP,
                        n => n.parse().map_err(|_| bad())?,
                    })
                }
                "sport" => r.sport = Some(v.parse().map_err(|_| bad())?),
                "dport" => r.dport = Some(v.parse().map_err(|_| bad())?),
                "vid" => match v.parse() {
                    Ok(vid) if vid < TENANT_CELLS as u16 => r.vid = Some(vid),
                    _ => return Err(bad()),
                },
                _ => {
                    return Err(err(format!(
                        "unknown field {k:?} (src, dst, proto, sport, dport, vid)"
                    )))
                }
            }
        }
        Ok(r)
    }
}

/// The table's action data: the rule's index and its verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AclAction {
    /// Position of the rule (its counter).
    pub rule: u16,
    /// What to do.
    pub verdict: Verdict,
}

/// The ACL program. See the module documentation.
#[derive(Debug, Clone)]
pub struct Acl {
    rules: Vec<AclRule>,
    default: Verdict,
    out_port: PortId,
    size: usize,
    per_tenant: bool,
    /// Per tenant: the verdict installed for a new flow's first packet
    /// (None: the default applies to packets with no entry).
    admit: Option<Verdict>,
    table: Option<TableHandle<AclAction>>,
    hits: Option<Handle>,
    drops: Option<Handle>,
    /// Rules the switch refused to install.
    pub install_failures: u64,
}

impl Acl {
    /// Parameter names.
    pub const PARAMS: &'static [&'static str] =
        &["rules", "default", "out_port", "size", "per_tenant"];

    /// An ACL with `rules` (first match wins), `default` for the rest, and
    /// permitted packets sent out of `out_port`; the table holds `size`
    /// rules.
    pub fn new(rules: Vec<AclRule>, default: Verdict, out_port: PortId, size: usize) -> Self {
        Acl {
            rules,
            default,
            out_port,
            size,
            per_tenant: false,
            admit: None,
            table: None,
            hits: None,
            drops: None,
            install_failures: 0,
        }
    }

    /// A per-tenant ACL with no start-up rules: its entries come from the
    /// control plane; `default` applies to packets with none.
    pub fn tenant(default: Verdict, out_port: PortId, size: usize) -> Self {
        Acl {
            per_tenant: true,
            ..Acl::new(Vec::new(), default, out_port, size)
        }
    }

    /// A per-tenant ACL whose new flows (packets with no entry) go to the
    /// control plane, which installs `verdict` for them (see the module
    /// documentation); the default then never applies.
    pub fn admitting(mut self, verdict: Verdict) -> Self {
        self.admit = Some(verdict);
        self
    }

    /// The per-tenant variant: exact (VID ‖ 5-tuple) entries and a drop
    /// counter per VID (see the module documentation). Rules must name
    /// every field exactly; the first that does not is returned.
    pub fn per_tenant(mut self) -> Result<Self, AclRule> {
        if let Some(r) = self.rules.iter().find(|r| r.exact_key().is_none()) {
            return Err(r.clone());
        }
        self.per_tenant = true;
        Ok(self)
    }

    /// The per-tenant drop counter (after loading a per-tenant ACL).
    pub fn tenant_drops(&self) -> Option<Handle> {
        self.drops
    }

    /// An ACL from parameters.
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known("acl", Self::PARAMS)?;
        let rules = AclRule::parse_list("rules", p.text("rules").unwrap_or(""))?;
        let default = match p.text("default").unwrap_or("permit") {
            "permit" => Verdict::Permit,
            "deny" => Verdict::Deny,
            v => {
                return Err(ParamError::Value {
                    name: "default".into(),
                    reason: format!("{v:?} is not permit or deny"),
                })
            }
        };
        let out = p.number("out_port", 1, 0, 511)? as PortId;
        let size = p.count("size", 1024, 1 << 20)? as usize;
        if rules.len() > size {
            return Err(ParamError::Value {
                name: "rules".into(),
                reason: format!("{} rules but the table holds {size}", rules.len()),
            });
        }
        let acl = Acl::new(rules, default, out, size);
        if p.number("per_tenant", 0, 0, 1)? == 0 {
            if acl.rules.iter().any(|r| r.vid.is_some()) {
                return Err(ParamError::Value {
                    name: "rules".into(),
                    reason: "vid only with per_tenant=1".into(),
                });
            }
            return Ok(acl);
        }
        acl.per_tenant().map_err(|r| ParamError::Value {
            name: "rules".into(),
            reason: format!(
                "per tenant, a rule names vid, src/32, dst/32, proto, sport and dport: {r:?}"
            ),
        })
    }

    /// The counter array's handle (after loading).
    pub fn hits(&self) -> Option<Handle> {
        self.hits
    }

    /// The rules, in priority order.
    pub fn rules(&self) -> &[AclRule] {
        &self.rules
    }
}

impl Acl {
    /// Per-tenant ingress: the exact entry of (VID, 5-tuple), else the
    /// default; a denied packet counts in its VID's cell.
    fn tenant_ingress(
        &mut self,
        pkt: &mut PacketCtx<Parsed, ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let (Some(table), Some(drops)) = (self.table, self.drops) else {
            return Ok(());
        };
        let p = pkt.meta;
        let hit = if p.ipv4 {
            dp.lookup(table, &tenant_key(p.vlan, &tuple_of(&p)))?
        } else {
            None
        };
        if hit.is_none() && p.ipv4 && self.admit.is_some() {
            pkt.to_cpu(REASON_NEW_FLOW);
            return Ok(());
        }
        match hit.map_or(self.default, |a| a.verdict) {
            Verdict::Permit => pkt.forward(self.out_port),
            Verdict::Deny => {
                dp.count(drops, u64::from(p.vlan), pkt.len() as u64)?;
                pkt.drop_packet();
            }
        }
        Ok(())
    }

    /// Per tenant, admitting: a new flow's first packet — install its
    /// verdict, then send the packet back through the pipeline (after the
    /// write: the control channel is FIFO).
    fn admit(&mut self, port: PortId, frame: Vec<u8>, cp: &mut ControlPlane<'_>) {
        let (Some(table), Some(verdict)) = (self.table, self.admit) else {
            return;
        };
        let Some(p) = crate::headers::parse(&frame).ok().filter(|p| p.ipv4) else {
            return;
        };
        let key = tenant_key(p.vlan, &tuple_of(&p));
        cp.table_add(
            table,
            MatchSpec::Exact(key.to_vec().into()),
            AclAction { rule: 0, verdict },
        );
        cp.packet_out(frame, PacketOutDest::Ingress(port));
    }
}

/// Punt reason of an admitting ACL's new flow.
pub const REASON_NEW_FLOW: u16 = 1;

/// The 5-tuple an ACL matches: ports 0 for packets without TCP/UDP ports.
pub fn tuple_of(p: &Parsed) -> [u8; KEY_BYTES] {
    if p.has_ports {
        p.five_tuple()
    } else {
        Parsed {
            sport: 0,
            dport: 0,
            ..*p
        }
        .five_tuple()
    }
}

impl Program for Acl {
    type Meta = Parsed;
    type Digest = ();

    fn name(&self) -> &str {
        "acl"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        if self.per_tenant {
            // Action data: the verdict (the rule index field stays 0).
            let table = d.table(TableDecl::new(
                "acl_map",
                MatchKind::Exact,
                TENANT_KEY_LEN,
                1,
                self.size,
            ))?;
            let drops =
                d.counter(ArrayDecl::new("acl_tenant_drops", TENANT_CELLS).after(&[table.id()]))?;
            self.table = Some(table);
            self.drops = Some(drops);
            return Ok(());
        }
        // Action data: rule index 16 b and the verdict 1 b.
        let table = d.table(TableDecl::new(
            "acl_rules",
            MatchKind::Ternary,
            KEY_BYTES,
            17,
            self.size,
        ))?;
        let hits =
            d.counter(ArrayDecl::new("acl_hits", self.rules.len() + 1).after(&[table.id()]))?;
        self.table = Some(table);
        self.hits = Some(hits);
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
        if self.per_tenant {
            return self.tenant_ingress(pkt, dp);
        }
        let (Some(table), Some(hits)) = (self.table, self.hits) else {
            return Ok(());
        };
        let p = pkt.meta;
        let hit = if p.ipv4 {
            dp.lookup(table, &tuple_of(&p))?
        } else {
            None
        };
        let (index, verdict) = match hit {
            Some(a) => (u64::from(a.rule), a.verdict),
            None => (self.rules.len() as u64, self.default),
        };
        dp.count(hits, index, pkt.len() as u64)?;
        match verdict {
            Verdict::Permit => pkt.forward(self.out_port),
            Verdict::Deny => pkt.drop_packet(),
        }
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        let Some(table) = self.table else { return };
        match event {
            ControlEvent::Start => {
                let n = self.rules.len() as u32;
                for (i, r) in self.rules.iter().enumerate() {
                    let action = AclAction {
                        rule: if self.per_tenant { 0 } else { i as u16 },
                        verdict: r.verdict,
                    };
                    let spec = match r.exact_key().filter(|_| self.per_tenant) {
                        Some(k) => MatchSpec::Exact(k.to_vec().into()),
                        None => r.spec(n - i as u32),
                    };
                    cp.table_add(table, spec, action);
                }
            }
            ControlEvent::OpFailed { .. } => self.install_failures += 1,
            ControlEvent::PacketIn {
                port,
                reason: REASON_NEW_FLOW,
                frame,
            } if self.per_tenant => self.admit(port, frame, cp),
            _ => {}
        }
    }

    fn report(&self) -> inca_switch::ProgramReport {
        inca_switch::ProgramReport {
            counters: vec![("acl_install_failures".into(), self.install_failures)],
            series: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inca_switch::harness::Harness;
    use inca_switch::{Profile, Switch};
    use inca_wire::{build_udp_frame, Endpoints};
    use std::net::Ipv4Addr;

    fn udp(dst: [u8; 4], dport: u16) -> Vec<u8> {
        let ep = Endpoints::new(
            [2, 0, 0, 0, 0, 1],
            Ipv4Addr::new(10, 0, 0, 5),
            [2, 0, 0, 0, 0, 2],
            Ipv4Addr::from(dst),
        );
        build_udp_frame(&ep, 4000, dport, &[1, 2, 3], true).unwrap()
    }

    #[test]
    fn rules_parse_and_bad_ones_name_the_parameter() {
        let r = AclRule::parse_list("rules", "deny dst=10.9.0.0/16,proto=udp,dport=53; permit")
            .unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].dst, Some(([10, 9, 0, 0], 16)));
        assert_eq!(r[0].proto, Some(PROTO_UDP));
        assert_eq!(r[1].verdict, Verdict::Permit);
        for bad in ["allow", "deny dst=10.0.0.0/40", "deny port=1", "deny sport"] {
            let e = AclRule::parse_list("rules", bad).unwrap_err().to_string();
            assert!(e.contains("rules"), "{e}");
        }
    }

    #[test]
    fn per_tenant_entries_are_exact_and_denies_count_per_vid() {
        let rule = "deny vid=7,src=10.0.0.5,dst=10.9.9.9,proto=udp,sport=4000,dport=53";
        let p = Params::parse([
            &format!("rules={rule}")[..],
            "default=permit",
            "per_tenant=1",
            "out_port=3",
        ])
        .unwrap();
        let acl = Acl::from_params(&p).unwrap();
        let mut h = Harness::new(Switch::new(Profile::tofino(), acl).unwrap(), 1);
        h.advance_to(1_000_000_000);
        let tagged = |vid: u16| {
            let mut f = udp([10, 9, 9, 9], 53);
            // An 802.1Q tag after the MACs.
            let mut tag = vec![0x81, 0x00];
            tag.extend_from_slice(&vid.to_be_bytes());
            f.splice(12..12, tag);
            f
        };
        h.send(1_000_000_000, 0, tagged(7)); // the entry: deny
        h.send(1_000_001_000, 0, tagged(7));
        h.send(1_000_002_000, 0, tagged(8)); // other tenant: default
        h.send(1_000_003_000, 0, udp([10, 9, 9, 9], 53)); // untagged: VID 0
        h.advance_to(2_000_000_000);
        assert_eq!(h.take().len(), 2);
        let sw = &h.device;
        let drops = sw.program().tenant_drops().unwrap();
        let count = |i| sw.objects().counter_read(drops, i).unwrap().0;
        assert_eq!([count(7), count(8), count(0)], [2, 0, 0]);
        // Per tenant, every field is exact; without it, no vid.
        for (bad, per) in [("deny vid=7,src=10.0.0.0/8", "1"), (rule, "0")] {
            let p =
                Params::parse([&format!("rules={bad}")[..], &format!("per_tenant={per}")]).unwrap();
            let e = Acl::from_params(&p).unwrap_err().to_string();
            assert!(e.contains("rules"), "{e}");
        }
        let e = AclRule::parse_list("rules", "deny vid=4096").unwrap_err();
        assert!(e.to_string().contains("vid"), "{e}");
    }

    #[test]
    fn an_admitting_acl_installs_a_new_flows_verdict_and_passes_its_packets() {
        let acl = Acl::tenant(Verdict::Deny, 3, 16).admitting(Verdict::Permit);
        let mut h = Harness::new(Switch::new(Profile::tofino(), acl).unwrap(), 1);
        h.advance_to(1_000_000_000);
        // The first packet goes through the control plane and comes back,
        // the later ones hit the entry it installed.
        for i in 0..3 {
            h.send(1_000_000_000 + i * 1_000_000, 0, udp([10, 9, 9, 9], 53));
        }
        h.send(1_010_000_000, 0, udp([10, 9, 9, 8], 53)); // a second flow
        h.advance_to(2_000_000_000);
        let out = h.take();
        assert_eq!(out.len(), 4, "{out:?}");
        let sw = &h.device;
        let table = sw.program().table.unwrap();
        assert_eq!(sw.objects().table_len(table.id()), 2);
        let drops = sw.program().tenant_drops().unwrap();
        assert_eq!(sw.objects().counter_read(drops, 0).unwrap().0, 0);
    }

    #[test]
    fn first_match_wins_default_applies_and_hits_are_counted() {
        let p = Params::parse([
            "rules=permit dst=10.9.9.9,dport=53; deny dst=10.9.0.0/16; deny proto=tcp",
            "default=permit",
            "out_port=3",
        ])
        .unwrap();
        let acl = Acl::from_params(&p).unwrap();
        let mut h = Harness::new(Switch::new(Profile::tofino(), acl).unwrap(), 1);
        h.advance_to(1_000_000_000);
        h.send(1_000_000_000, 0, udp([10, 9, 9, 9], 53)); // rule 0: permit
        h.send(1_000_001_000, 0, udp([10, 9, 9, 9], 54)); // rule 1: deny
        h.send(1_000_002_000, 0, udp([10, 8, 0, 1], 54)); // default: permit
        h.advance_to(2_000_000_000);
        let out = h.take();
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|t| t.port == 3));
        let sw = &h.device;
        let hits = sw.program().hits().unwrap();
        let count = |i| sw.objects().counter_read(hits, i).unwrap().0;
        assert_eq!([count(0), count(1), count(2), count(3)], [1, 1, 0, 1]);
    }
}
