//! The application model (specs/exoplane.md §5.1): what ExoPlane knows of
//! an app besides its program.
//!
//! An app declares its stateful objects once ([`ObjectSpec`]): kind
//! (control-plane table or data-plane register/counter), key fields, value
//! width and consistency (strong, or bounded with a merge operator). Its
//! union key `UK_p` is the union of every object's key fields
//! ([`AppSpec::union_key`]); a flow is the set of packets with one UK. Its
//! affinity says where it may run (HIGH: only the switch, MEDIUM: popular
//! flows on the switch and the tail on devices, LOW: only devices).
//! [`AppSpec::validate`] enforces "MEDIUM requires mergeable data-plane
//! objects" (spec §5.1, [our choice] as the planner's rule).
//!
//! The app's logic is an existing inca-apps program built on the shared NF
//! cores ([`catalog`]); ExoPlane never rewrites it. What the model adds is
//! what the runtime needs about the program from outside: which entries a
//! packet will look up ([`AppSpec::needs`], for Invariant 1), and how the
//! value bytes of a control-protocol `Entry` become the program's typed
//! action data ([`AppSpec::install`]).

pub mod catalog;

use inca_apps::core::vpn::{parse_vxlan, VpnMeta};
use inca_apps::headers::Parsed;
use inca_apps::netcache::Format;
use inca_switch::composite::Block;
use inca_switch::{ControlPlane, PortId};
pub use inca_wire::exoplane::MergeOp;

use crate::ids::{AppId, ObjId, UnionKey};

/// Where an app may run (§5.9; 2 bits in the switch's `classify` result).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Affinity {
    /// Only on the switch: every packet runs the switch instance.
    High = 0,
    /// Popular flows (flow-manager hits) on the switch, the rest on a device.
    Medium = 1,
    /// Only on devices: every packet goes to its shard's device.
    Low = 2,
}

/// What kind of object, by who may change it (§5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// A match-action table: inserts and deletes only from the control plane.
    Table,
    /// A register array: packets change it.
    Register,
    /// A counter array: packets count in it (a data-plane object whose
    /// packet count merges with ADD).
    Counter,
}

/// How copies of an object are kept consistent (§5.4, §5.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consistency {
    /// Control-plane writes through the hub's sequencer (tables).
    Strong,
    /// Data-plane updates merged every `T_c` with this operator.
    Bounded(MergeOp),
    /// A data-plane object that steers control flow and so cannot be
    /// merged (`mergeable = false`): the app must be HIGH or LOW.
    Unmergeable,
}

/// A header field an object is keyed by, in the order union keys list
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyField {
    /// 802.1Q VLAN id (tenant), 2 bytes (0 when untagged).
    Vid,
    /// IPv4 source, 4 bytes.
    Src,
    /// IPv4 destination, 4 bytes.
    Dst,
    /// IP protocol, 1 byte.
    Proto,
    /// L4 source port, 2 bytes.
    Sport,
    /// L4 destination port, 2 bytes.
    Dport,
    /// VXLAN network identifier, 3 bytes (0 when not VXLAN).
    Vni,
    /// Inner IPv4 source of a VXLAN packet, 4 bytes.
    InnerSrc,
    /// Inner IPv4 destination of a VXLAN packet, 4 bytes.
    InnerDst,
    /// The 128-bit key of a NetCache request or answer (UDP 50000,
    /// [`inca_wire::exoplane::netcache`]), 16 bytes (zeros otherwise).
    CacheKey,
}

impl KeyField {
    /// Whether the field is inside a VXLAN tunnel.
    fn tunnelled(self) -> bool {
        matches!(
            self,
            KeyField::Vni | KeyField::InnerSrc | KeyField::InnerDst
        )
    }

    /// The field's bytes in a packet (absent headers read as zeros, as an
    /// invalid header's fields do in P4).
    fn extend(self, p: &Parsed, vx: &VpnMeta, cache_key: &[u8; 16], out: &mut Vec<u8>) {
        match self {
            KeyField::CacheKey => out.extend_from_slice(cache_key),
            KeyField::Vni => out.extend_from_slice(&vx.vni.to_be_bytes()[1..]),
            KeyField::InnerSrc => out.extend_from_slice(&vx.inner_src),
            KeyField::InnerDst => out.extend_from_slice(&vx.inner_dst),
            KeyField::Vid => out.extend_from_slice(&p.vlan.to_be_bytes()),
            KeyField::Src => out.extend_from_slice(&p.src),
            KeyField::Dst => out.extend_from_slice(&p.dst),
            KeyField::Proto => out.push(p.proto),
            KeyField::Sport => out.extend_from_slice(&p.sport.to_be_bytes()),
            KeyField::Dport => out.extend_from_slice(&p.dport.to_be_bytes()),
        }
    }

    /// Width in bytes.
    pub fn bytes(self) -> usize {
        match self {
            KeyField::Proto => 1,
            KeyField::Vid | KeyField::Sport | KeyField::Dport => 2,
            KeyField::Vni => 3,
            KeyField::Src | KeyField::Dst | KeyField::InnerSrc | KeyField::InnerDst => 4,
            KeyField::CacheKey => 16,
        }
    }
}

/// The key made of `fields` (in that order) of a packet whose outer
/// headers `p` are parsed from `header`: a union key when `fields` is
/// [`AppSpec::union_fields`] (which a data plane computes once, not per
/// packet). Tunnel fields parse the VXLAN headers from `header`.
pub fn key_of(fields: &[KeyField], p: &Parsed, header: &[u8]) -> UnionKey {
    let vx = if fields.iter().any(|f| f.tunnelled()) {
        parse_vxlan(header)
            .ok()
            .filter(|m| m.vxlan)
            .unwrap_or_default()
    } else {
        VpnMeta::default()
    };
    // The NetCache program's own parse, so the key is the one it looks up.
    let cache_key = if fields.contains(&KeyField::CacheKey) {
        Format::Exo
            .parse(header, true)
            .ok()
            .filter(|m| m.is_cache())
            .map_or([0; 16], |m| m.key)
    } else {
        [0; 16]
    };
    let mut out = Vec::with_capacity(fields.iter().map(|f| f.bytes()).sum());
    for f in fields {
        f.extend(p, &vx, &cache_key, &mut out);
    }
    UnionKey(out)
}

/// The 5-tuple fields, for apps keyed by flow.
pub const FIVE_TUPLE: &[KeyField] = &[
    KeyField::Src,
    KeyField::Dst,
    KeyField::Proto,
    KeyField::Sport,
    KeyField::Dport,
];

/// The tenant (VID) and the 5-tuple, for per-tenant apps keyed by flow.
pub const VID_FIVE_TUPLE: &[KeyField] = &[
    KeyField::Vid,
    KeyField::Src,
    KeyField::Dst,
    KeyField::Proto,
    KeyField::Sport,
    KeyField::Dport,
];

/// One stateful object of an app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectSpec {
    /// Its id on the control protocol and in MERGE packets.
    pub id: ObjId,
    /// Its name as the program declares it (the switch prefixes the app's
    /// block name).
    pub name: String,
    /// Table, register or counter.
    pub kind: ObjectKind,
    /// The fields its key is made of.
    pub key: &'static [KeyField],
    /// Width of its value in bits (action data, register entry).
    pub value_bits: u32,
    /// How its copies are kept consistent.
    pub consistency: Consistency,
}

/// An app that cannot be deployed as declared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppError {
    /// A MEDIUM app with a data-plane object that does not merge.
    #[error("app {app}: MEDIUM affinity needs mergeable data-plane objects, but {object} is not (make the app HIGH or LOW)")]
    MediumNeedsMergeable {
        /// The app.
        app: String,
        /// The object.
        object: String,
    },
    /// A table with bounded consistency or a data-plane object with strong.
    #[error("app {app}: object {object}: tables are strongly consistent and data-plane objects bounded or unmergeable")]
    ConsistencyKind {
        /// The app.
        app: String,
        /// The object.
        object: String,
    },
    /// Two objects with one id or one name.
    #[error("app {app}: two objects share id or name {object}")]
    DuplicateObject {
        /// The app.
        app: String,
        /// The object.
        object: String,
    },
    /// A union key longer than the control protocol carries.
    #[error("app {app}: union key of {len} bytes; at most {max}")]
    KeyTooLong {
        /// The app.
        app: String,
        /// Its length.
        len: usize,
        /// The most allowed.
        max: usize,
    },
}

/// A control-protocol write the app's program could not take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstallError {
    /// No object with this id, or not a table.
    #[error("app {app}: no table with object id {obj}")]
    NoSuchTable {
        /// The app.
        app: String,
        /// The id.
        obj: u16,
    },
    /// The value bytes do not decode into the table's action data.
    #[error("app {app}: object {object}: value of {len} bytes does not decode ({why})")]
    BadValue {
        /// The app.
        app: String,
        /// The object.
        object: String,
        /// Its length.
        len: usize,
        /// Why.
        why: &'static str,
    },
}

/// An app as ExoPlane deploys it: id, name, affinity, objects and the
/// program that is its logic.
#[derive(Clone)]
pub struct AppSpec {
    /// The shim's `app_id`.
    pub id: AppId,
    /// Its name (the block name of its instance on each device).
    pub name: String,
    /// Where it may run.
    pub affinity: Affinity,
    /// Its objects, declared once.
    pub objects: Vec<ObjectSpec>,
    /// Its logic.
    pub program: catalog::AppProgram,
}

impl std::fmt::Debug for AppSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppSpec")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("affinity", &self.affinity)
            .field("objects", &self.objects)
            .finish()
    }
}

impl AppSpec {
    /// Checks the declaration: ids and names unique, consistency matching
    /// the kind, MEDIUM only with mergeable data-plane objects, a union key
    /// the control protocol can carry.
    pub fn validate(&self) -> Result<(), AppError> {
        let app = || self.name.clone();
        for (i, o) in self.objects.iter().enumerate() {
            if self.objects[..i]
                .iter()
                .any(|p| p.id == o.id || p.name == o.name)
            {
                return Err(AppError::DuplicateObject {
                    app: app(),
                    object: o.name.clone(),
                });
            }
            let fits = match o.kind {
                ObjectKind::Table => o.consistency == Consistency::Strong,
                ObjectKind::Register | ObjectKind::Counter => o.consistency != Consistency::Strong,
            };
            if !fits {
                return Err(AppError::ConsistencyKind {
                    app: app(),
                    object: o.name.clone(),
                });
            }
            if self.affinity == Affinity::Medium && o.consistency == Consistency::Unmergeable {
                return Err(AppError::MediumNeedsMergeable {
                    app: app(),
                    object: o.name.clone(),
                });
            }
        }
        let len = self.union_fields().iter().map(|f| f.bytes()).sum::<usize>();
        if len > crate::ids::MAX_KEY_LEN {
            return Err(AppError::KeyTooLong {
                app: app(),
                len,
                max: crate::ids::MAX_KEY_LEN,
            });
        }
        Ok(())
    }

    /// The union of every object's key fields, in [`KeyField`] order.
    pub fn union_fields(&self) -> Vec<KeyField> {
        let mut f: Vec<KeyField> = self
            .objects
            .iter()
            .flat_map(|o| o.key.iter().copied())
            .collect();
        f.sort();
        f.dedup();
        f
    }

    /// The union key of a packet (`p` parsed from `header`).
    pub fn union_key(&self, p: &Parsed, header: &[u8]) -> UnionKey {
        key_of(&self.union_fields(), p, header)
    }

    /// The object with id `obj`.
    pub fn object(&self, obj: ObjId) -> Option<&ObjectSpec> {
        self.objects.iter().find(|o| o.id == obj)
    }

    /// The table entries a packet arriving on switch port `port` looks up,
    /// as (object, key bytes the program uses): what Invariant 1 (§6 P1)
    /// requires present when the packet hits the flow manager.
    pub fn needs(&self, p: &Parsed, header: &[u8], port: PortId) -> Vec<(ObjId, Vec<u8>)> {
        self.program.needs(&self.objects, p, header, port)
    }

    /// Installs (or with `value` None deletes) entry `key` of table `obj`
    /// in this app's instance, whose tables `resolve` finds by declared
    /// name: the WRITE_APPLY path of §5.4 on a switch or device. Returns the
    /// control request id.
    pub fn install(
        &self,
        cp: &mut ControlPlane<'_>,
        resolve: &dyn Fn(&str) -> Option<inca_switch::objects::ObjectId>,
        obj: ObjId,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<u64, InstallError> {
        let o = self
            .object(obj)
            .filter(|o| o.kind == ObjectKind::Table)
            .ok_or_else(|| InstallError::NoSuchTable {
                app: self.name.clone(),
                obj: obj.0,
            })?;
        let id = resolve(&o.name).ok_or_else(|| InstallError::NoSuchTable {
            app: self.name.clone(),
            obj: obj.0,
        })?;
        self.program
            .install(cp, resolve, id, o, key, value)
            .map_err(|why| InstallError::BadValue {
                app: self.name.clone(),
                object: o.name.clone(),
                len: value.map_or(0, <[u8]>::len),
                why,
            })
    }

    /// The app's program as a block named after the app.
    pub fn block(&self) -> Block {
        self.program.block(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::catalog;
    use super::*;

    #[test]
    fn union_keys_and_the_medium_rule() {
        let fw = catalog::firewall(AppId(2), "fw", 1024, 0, 256);
        fw.validate().unwrap();
        // conn (5-tuple) ∪ by-source (src) ∪ by-tenant (one cell) = the
        // 5-tuple.
        assert_eq!(fw.union_fields(), FIVE_TUPLE.to_vec());
        let mut bad = fw.clone();
        bad.objects[1].consistency = Consistency::Unmergeable;
        assert!(matches!(
            bad.validate(),
            Err(AppError::MediumNeedsMergeable { .. })
        ));
        bad.affinity = Affinity::High;
        bad.validate().unwrap();
        // inca-apps' SYN proxy keeps steering state in registers: LOW or
        // HIGH only.
        let mut sp = catalog::synproxy(AppId(4), "sp", 1024, 0, 1);
        sp.validate().unwrap();
        sp.affinity = Affinity::Medium;
        assert!(matches!(
            sp.validate(),
            Err(AppError::MediumNeedsMergeable { .. })
        ));
        let mut bad = fw.clone();
        bad.objects[0].consistency = Consistency::Bounded(MergeOp::Add);
        assert!(matches!(
            bad.validate(),
            Err(AppError::ConsistencyKind { .. })
        ));
        // VPN: tables by ⟨VNI, inner address⟩ both ways, counters by VNI
        // and inner source; the union key comes from inside the tunnel.
        let vpn = catalog::vpn(AppId(5), "vpn", 1024, 0, 256);
        vpn.validate().unwrap();
        assert_eq!(
            vpn.union_fields(),
            vec![KeyField::Vni, KeyField::InnerSrc, KeyField::InnerDst]
        );
        let f = inca_apps::fixtures::vxlan_frame(
            [1, 1, 1, 1],
            [2, 2, 2, 2],
            0xABCDE,
            [10, 0, 0, 5],
            [10, 0, 0, 6],
        );
        let p = inca_apps::headers::parse(&f).unwrap();
        assert_eq!(
            vpn.union_key(&p, &f).0,
            vec![0x0A, 0xBC, 0xDE, 10, 0, 0, 5, 10, 0, 0, 6]
        );
        // From the outside port: the inbound table by the inner destination.
        let o = vpn.object(crate::ids::ObjId(1)).unwrap().name.clone();
        assert_eq!(o, "vpn_in");
        assert_eq!(
            vpn.needs(&p, &f, 0),
            vec![(crate::ids::ObjId(1), vec![0x0A, 0xBC, 0xDE, 10, 0, 0, 6])]
        );
        assert_eq!(
            vpn.needs(&p, &f, 3),
            vec![(crate::ids::ObjId(2), vec![0x0A, 0xBC, 0xDE, 10, 0, 0, 5])]
        );
        let um = catalog::univmon(AppId(3), "um", 2, 2, 256);
        um.validate().unwrap();
        assert_eq!(um.objects.len(), 4);
        let p = Parsed {
            ipv4: true,
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            proto: 17,
            sport: 5,
            dport: 6,
            ..Parsed::default()
        };
        assert_eq!(
            um.union_key(&p, &[]).0,
            vec![10, 0, 0, 1, 10, 0, 0, 2, 17, 0, 5, 0, 6]
        );
    }
}
