//! An app as the hub and daemons see it ([`FlowKeys`], [`ControlLogic`]),
//! made from its [`AppSpec`] and its inca-apps program — the app's own
//! control logic, run, not rewritten.
//!
//! - Objects: each table is a strongly consistent hub object; each
//!   mergeable data-plane counter or register a synchronised one (32-bit
//!   packet counts, the spec's merge operator).
//! - Object keys: a table's key is the union key projected onto its key
//!   fields. [our choice] A data-plane counter of inca-apps is indexed by a
//!   hash of its key, so two keys can share a cell; the hub's entry is
//!   therefore the *cell* (its key is the 4-byte big-endian index), which is
//!   what the switch and devices actually store and merge, so a merge never
//!   mixes two entries' histories.
//! - Direction: a flow is the packets of one union key, one direction. A
//!   NAT's reply flow (addressed to the public address) looks up `nat_in`,
//!   the rest `nat_out`; a firewall's and VPN's inside-to-outside flows are
//!   the ones whose table keys are a projection of their union key, so only
//!   those are promotable (their reverse flows are served by devices, §9
//!   pitfall 11 in spirit) [our choice].
//! - New flows: the daemon hands the app's MISS to [`ControlLogic::
//!   writes_for`], which runs the app program's own control handler on it
//!   with [`inca_switch::capture`] and turns the table writes it issued into
//!   INSERT_IF_ABSENT / DELETE writes, plus the creation of every counter
//!   cell the flow touches (so a promotion finds them all, Invariant 1).
//!   A punted frame carries the app's own punt reason in the PUNT shim's
//!   `out_port` (the device program puts it there).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use inca_apps::core::nat::FIRST_PORT;
use inca_apps::nat::{Nat, PORTS_PER_ADDRESS, REASON_NEW_FLOW};

use inca_switch::capture::{capture_control, Captured, ControlWrite};
use inca_switch::device::DeviceRng;
use inca_switch::objects::ObjectId;
use inca_switch::placement::ObjectKind as PlacedKind;
use inca_switch::{ControlEvent, Declare, MatchSpec, PortId, Profile, Program};
use inca_wire::exoplane::{shim, ShimType};

use crate::app::{catalog::AppProgram, AppSpec, Consistency, KeyField, ObjectKind as AppKind};
use crate::daemon::ControlLogic;
use crate::hub::app::{FlowKeys, ObjectDecl, ObjectKind};
use crate::hub::msg::{Write, WriteOp};
use crate::ids::{AppId, ObjId, UnionKey};
use crate::runtime::event::{self, EventKind};

/// Public addresses of each device's share of a NAT's pool [our choice:
/// 16 addresses of 64,512 ports, a million flows per device; the hub and
/// every daemon must agree, so it does not depend on a program's size].
pub const NAT_SHARE: u32 = 16;

/// Bytes of a counter cell's key (its index, big-endian).
pub const CELL_KEY_LEN: usize = 4;

/// The index of a counter cell from its hub key.
pub fn cell_index(key: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(key.try_into().ok()?))
}

/// An app program run standalone so its control handler can be captured.
trait Captures {
    fn punt(&mut self, port: PortId, reason: u16, frame: Vec<u8>, rng: &mut DeviceRng) -> Captured;
    /// Runs the handler on a digest of the program's, from its bytes
    /// ([`crate::app::catalog::AppProgram::digest_bytes`]); None if the
    /// program sends none or the bytes are not one.
    fn digest(&mut self, _bytes: &[u8], _rng: &mut DeviceRng) -> Option<Captured> {
        None
    }
    /// The device was given (`value` Some) or lost entry `key` of table
    /// `table` ([`ControlLogic::observe`]).
    fn observe(&mut self, _table: &str, _key: &[u8], _value: Option<&[u8]>) {}
    /// Public endpoints a NAT's control plane has handed out (None: not a
    /// NAT).
    fn allocated(&self) -> Option<usize> {
        None
    }
}

fn punt_into<P: Program>(
    p: &mut P,
    port: PortId,
    reason: u16,
    frame: Vec<u8>,
    rng: &mut DeviceRng,
) -> Captured {
    let timing = Profile::smartnic().control_plane;
    let event = ControlEvent::PacketIn {
        port,
        reason,
        frame,
    };
    capture_control(p, event, 0, &timing, rng)
}

struct Standalone<P: Program>(P);

impl<P: Program> Captures for Standalone<P> {
    fn punt(&mut self, port: PortId, reason: u16, frame: Vec<u8>, rng: &mut DeviceRng) -> Captured {
        punt_into(&mut self.0, port, reason, frame, rng)
    }
}

/// A firewall run standalone: its RST digests are handled, and its
/// record of connections follows the entries the device is given, so a
/// RST is acted on by whichever daemon it reaches (the one that set the
/// connection up, its replica after a failover, a rebuilt daemon, or the
/// daemon of the reverse flow's shard for a RST from outside).
struct FirewallStandalone(inca_apps::firewall::Firewall);

impl Captures for FirewallStandalone {
    fn punt(&mut self, port: PortId, reason: u16, frame: Vec<u8>, rng: &mut DeviceRng) -> Captured {
        punt_into(&mut self.0, port, reason, frame, rng)
    }

    fn digest(&mut self, bytes: &[u8], rng: &mut DeviceRng) -> Option<Captured> {
        let key = <[u8; 13]>::try_from(bytes).ok()?;
        let timing = Profile::smartnic().control_plane;
        Some(capture_control(
            &mut self.0,
            ControlEvent::Digest(key),
            0,
            &timing,
            rng,
        ))
    }

    fn observe(&mut self, table: &str, key: &[u8], value: Option<&[u8]>) {
        let Ok(key) = <[u8; 13]>::try_from(key) else {
            return;
        };
        if table != "fw_conn" {
            return;
        }
        match value.and_then(|v| <[u8; 2]>::try_from(v).ok()) {
            Some(port) => {
                self.0.adopt(key, u16::from_be_bytes(port));
            }
            None => {
                self.0.forget(&key);
            }
        }
    }
}

/// A NAT run standalone: its allocator's progress is visible.
struct NatStandalone(Nat);

impl Captures for NatStandalone {
    fn punt(&mut self, port: PortId, reason: u16, frame: Vec<u8>, rng: &mut DeviceRng) -> Captured {
        punt_into(&mut self.0, port, reason, frame, rng)
    }

    fn allocated(&self) -> Option<usize> {
        Some(self.0.allocated())
    }
}

/// What a daemon's NAT share already handed out, learnt from the entries
/// its device is given (a DUMP, WRITE_APPLYs), shared between the
/// daemon's driver, which sees them, and the app's control logic.
///
/// Why: a NAT allocates public endpoints sequentially from its daemon's
/// share of the pool and never frees them; a daemon that lost its state
/// (a restarted smart NIC, §5.8 recovery) starts its allocator afresh and
/// would hand out endpoints its earlier life gave to flows that still
/// exist. The hub answers the new flow's INSERT_IF_ABSENT of the reply
/// key with EXISTS (which a setup takes as success), so the new flow's
/// replies would be translated to the old flow's inside endpoint. [our
/// choice] The allocator is advanced past every endpoint of the share an
/// entry uses before it allocates again (found live: a new connection
/// through a rejoined NIC got the SYN-ACK of an old one's port).
#[derive(Debug)]
pub struct NatReserved {
    /// The `nat_in` object: its keys are reply 5-tuples whose destination
    /// is the public endpoint.
    nat_in: ObjId,
    /// The share's first and one-past-last public address.
    base: u32,
    end: u32,
    /// Endpoints of the share the allocator must not hand out again: the
    /// allocator's count must reach this before it allocates.
    floor: AtomicU64,
}

impl NatReserved {
    /// Notes an entry the device holds (object `obj`, `key`).
    pub fn observe(&self, obj: ObjId, key: &[u8]) {
        if obj != self.nat_in || key.len() != 13 {
            return;
        }
        let ip = u32::from_be_bytes([key[4], key[5], key[6], key[7]]);
        let port = u16::from_be_bytes([key[11], key[12]]);
        if !(self.base..self.end).contains(&ip) || port < FIRST_PORT {
            return;
        }
        let index =
            u64::from(ip - self.base) * u64::from(PORTS_PER_ADDRESS) + u64::from(port - FIRST_PORT);
        self.floor.fetch_max(index + 1, Ordering::Relaxed);
    }

    /// The allocator count below which nothing may be handed out.
    pub fn floor(&self) -> u64 {
        self.floor.load(Ordering::Relaxed)
    }
}

/// A frame of a flow no host sends (class E addresses), the `i`th, for
/// advancing a NAT's allocator.
fn burn_frame(i: u32) -> Option<Vec<u8>> {
    let [a, b, c, d] = i.to_be_bytes();
    let ep = inca_wire::Endpoints::new(
        [2, 0, 0, 0, 0, 0xee],
        std::net::Ipv4Addr::new(240, a, b, c),
        [2, 0, 0, 0, 0, 0xef],
        std::net::Ipv4Addr::new(240, 255, 255, 254),
    );
    inca_wire::build_udp_frame(&ep, 1024 + u16::from(d), 9, &[], true).ok()
}

/// A NAT's inside port for synthetic frames (any port but the outside).
fn inside_port(n: &Nat) -> PortId {
    if n.outside_port() == 0 {
        1
    } else {
        0
    }
}

/// The app's objects as the hub knows them, with what the runtime needs
/// to find each in a data plane.
#[derive(Clone, Debug)]
struct RuntimeObject {
    decl: ObjectDecl,
    name: String,
    key: &'static [KeyField],
    /// Cells of a counter (0 for a table).
    cells: u64,
}

/// One app for the hub and daemons. See the module documentation.
pub struct AppLogic {
    spec: AppSpec,
    decls: Vec<ObjectDecl>,
    objects: Vec<RuntimeObject>,
    /// Each union-key field's offset in the union key.
    offsets: Vec<(KeyField, usize)>,
    /// The standalone program's table ids → object ids.
    tables: HashMap<ObjectId, ObjId>,
    program: RefCell<Box<dyn Captures>>,
    /// A NAT's whole public pool (replies are addressed to it).
    public: Option<inca_apps::nat::Nat>,
    /// A NAT's endpoints already in use in its share ([`NatReserved`]).
    reserved: Option<Arc<NatReserved>>,
    /// Synthetic flows run to advance the NAT's allocator.
    burned: Cell<u32>,
    rng: RefCell<DeviceRng>,
}

/// A clone of `p` declared on `d` (so the writes its control handler
/// issues name `d`'s object ids), ready for capture.
fn declared<P: Program + Clone>(p: &P, d: &mut Declare) -> Result<Box<dyn Captures>, String> {
    let mut p = p.clone();
    p.declare(d).map_err(|e| e.to_string())?;
    Ok(Box::new(Standalone(p)))
}

/// The app's program for device `pdev` of `n_devices`, declared on `d`:
/// a NAT allocates from its own share of the public pool.
fn standalone(
    p: &AppProgram,
    pdev: u8,
    n_devices: u8,
    d: &mut Declare,
) -> Result<Box<dyn Captures>, String> {
    match p {
        AppProgram::Nat(n) => {
            let mut p = n.partitioned(u32::from(pdev), u32::from(n_devices), NAT_SHARE);
            p.declare(d).map_err(|e| e.to_string())?;
            Ok(Box::new(NatStandalone(p)))
        }
        AppProgram::Firewall(p) => {
            let mut p = p.clone();
            p.declare(d).map_err(|e| e.to_string())?;
            Ok(Box::new(FirewallStandalone(p)))
        }
        AppProgram::UnivMon(p) => declared(p, d),
        AppProgram::SynProxy(p) => declared(p, d),
        AppProgram::Vpn(p) => declared(p, d),
        AppProgram::Acl(p) => declared(p, d),
        AppProgram::NetCache(p) => declared(p, d),
    }
}

impl AppLogic {
    /// The app `spec` as the daemon of device `pdev` of `n_devices` runs
    /// it (and the hub, which never runs its control logic), tables of
    /// `table_capacity` entries on the switch, the capture instance's
    /// random choices drawn from `seed`.
    pub fn new(
        spec: &AppSpec,
        table_capacity: u32,
        pdev: u8,
        n_devices: u8,
        seed: u64,
    ) -> Result<AppLogic, String> {
        let mut d = Declare::default();
        let program = standalone(&spec.program, pdev, n_devices, &mut d)?;
        let public = match &spec.program {
            AppProgram::Nat(n) => Some(n.partitioned(0, u32::from(n_devices), NAT_SHARE)),
            _ => None,
        };
        let reserved = match &spec.program {
            AppProgram::Nat(n) => {
                // The device's share: NAT_SHARE whole addresses from the
                // pool's base (Nat::partitioned).
                let base = u32::from_be_bytes(n.public_base())
                    .wrapping_add(u32::from(pdev).wrapping_mul(NAT_SHARE));
                let end = base.wrapping_add(NAT_SHARE);
                let nat_in = spec.objects.iter().find(|o| o.name == "nat_in");
                nat_in.map(|o| {
                    Arc::new(NatReserved {
                        nat_in: o.id,
                        base,
                        end,
                        floor: AtomicU64::new(0),
                    })
                })
            }
            _ => None,
        };
        let placed = d.decls();
        let mut objects = Vec::new();
        let mut tables = HashMap::new();
        for o in &spec.objects {
            let id = d.id_of(&o.name);
            let cells =
                id.and_then(|id| placed.get(id.index()))
                    .map_or(0, |p| match p.kind {
                        PlacedKind::Counter { entries, .. }
                        | PlacedKind::Register { entries, .. } => entries,
                        _ => 0,
                    });
            let kind = match (o.kind, o.consistency) {
                (AppKind::Table, _) => ObjectKind::Table,
                (_, Consistency::Bounded(op)) => ObjectKind::Register { width: 4, op },
                // Unmergeable state never leaves its device (LOW or HIGH).
                (_, _) => continue,
            };
            if kind == ObjectKind::Table {
                if let Some(id) = id {
                    tables.insert(id, o.id);
                }
            }
            let switch_capacity = match kind {
                ObjectKind::Table => table_capacity,
                ObjectKind::Register { .. } => u32::try_from(cells).unwrap_or(u32::MAX),
            };
            objects.push(RuntimeObject {
                decl: ObjectDecl {
                    obj: o.id,
                    kind,
                    switch_capacity,
                },
                name: o.name.clone(),
                key: o.key,
                cells,
            });
        }
        let mut offsets = Vec::new();
        let mut at = 0;
        for f in spec.union_fields() {
            offsets.push((f, at));
            at += f.bytes();
        }
        Ok(AppLogic {
            decls: objects.iter().map(|o| o.decl.clone()).collect(),
            spec: spec.clone(),
            objects,
            offsets,
            tables,
            program: RefCell::new(program),
            public,
            reserved,
            burned: Cell::new(1),
            rng: RefCell::new(inca_switch::device::device_rng(seed, u64::from(spec.id.0))),
        })
    }

    /// A NAT's record of the endpoints of its share in use, for the
    /// daemon's driver to feed with the entries its device is given.
    pub fn reserved(&self) -> Option<Arc<NatReserved>> {
        self.reserved.clone()
    }

    /// Runs synthetic flows through a NAT's control logic until its
    /// allocator has passed every endpoint of its share an entry uses.
    fn skip_reserved(&self) {
        let Some(r) = &self.reserved else { return };
        let mut program = self.program.borrow_mut();
        let mut rng = self.rng.borrow_mut();
        let port = match &self.spec.program {
            AppProgram::Nat(n) => inside_port(n),
            _ => return,
        };
        while let Some(n) = program.allocated() {
            if n as u64 >= r.floor() {
                return;
            }
            let i = self.burned.get();
            self.burned.set(i.wrapping_add(1));
            let Some(frame) = burn_frame(i) else { return };
            program.punt(port, REASON_NEW_FLOW, frame, &mut rng);
            if program.allocated() == Some(n) {
                return; // the pool is exhausted
            }
        }
    }

    /// The app's spec.
    pub fn spec(&self) -> &AppSpec {
        &self.spec
    }

    fn field<'a>(&self, uk: &'a UnionKey, f: KeyField) -> Option<&'a [u8]> {
        let &(_, at) = self.offsets.iter().find(|(g, _)| *g == f)?;
        uk.0.get(at..at + f.bytes())
    }

    fn project(&self, uk: &UnionKey, fields: &[KeyField]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        for &f in fields {
            out.extend_from_slice(self.field(uk, f)?);
        }
        Some(out)
    }

    /// Whether flow `uk` looks up table `name` (see the module
    /// documentation on direction).
    fn looks_up(&self, uk: &UnionKey, name: &str) -> bool {
        match &self.spec.program {
            AppProgram::Nat(_) => {
                let dst = self
                    .field(uk, KeyField::Dst)
                    .and_then(|d| <[u8; 4]>::try_from(d).ok());
                let inbound = match (&self.public, dst) {
                    (Some(n), Some(d)) => n.is_public(d),
                    _ => false,
                };
                (name == "nat_in") == inbound
            }
            AppProgram::Vpn(_) => name == "vpn_out",
            _ => true,
        }
    }

    /// The cell of counter `o` a packet of `uk` counts in.
    fn cell(&self, o: &RuntimeObject, uk: &UnionKey) -> Option<Vec<u8>> {
        let cells = o.cells.max(1);
        let index = match o.key {
            [] => 0,
            [KeyField::Src] | [KeyField::InnerSrc] => {
                inca_apps::core::counter::index(self.field(uk, o.key[0])?, cells as usize)
            }
            fields => {
                let v = self.project(uk, fields)?;
                v.iter().fold(0u64, |a, b| (a << 8) | u64::from(*b)) % cells
            }
        };
        Some((index as u32).to_be_bytes().to_vec())
    }

    /// The object id of a table of the standalone program.
    fn table_obj(&self, id: ObjectId) -> Option<ObjId> {
        self.tables.get(&id).copied()
    }
}

impl FlowKeys for AppLogic {
    fn app(&self) -> AppId {
        self.spec.id
    }

    fn objects(&self) -> &[ObjectDecl] {
        &self.decls
    }

    fn object_key(&self, obj: ObjId, uk: &UnionKey) -> Option<Vec<u8>> {
        let o = self.objects.iter().find(|o| o.decl.obj == obj)?;
        match o.decl.kind {
            ObjectKind::Table => {
                if !self.looks_up(uk, &o.name) {
                    return None;
                }
                self.project(uk, o.key)
            }
            ObjectKind::Register { .. } => self.cell(o, uk),
        }
    }

    /// A table keyed by the whole union key is looked up by the flow whose
    /// key it is; a firewall connection also by its reverse (inbound
    /// packets of the connection).
    fn entry_flows(&self, obj: ObjId, key: &[u8]) -> Vec<UnionKey> {
        let Some(o) = self.objects.iter().find(|o| o.decl.obj == obj) else {
            return Vec::new();
        };
        let whole_key = o.key.len() == self.offsets.len()
            && o.key.iter().zip(&self.offsets).all(|(k, (f, _))| k == f);
        if o.decl.kind != ObjectKind::Table || !whole_key {
            return Vec::new();
        }
        let mut flows = vec![UnionKey(key.to_vec())];
        if matches!(self.spec.program, AppProgram::Firewall(_)) && key.len() == 13 {
            // src 4 ‖ dst 4 ‖ proto 1 ‖ sport 2 ‖ dport 2, reversed.
            let mut r = Vec::with_capacity(13);
            r.extend_from_slice(&key[4..8]);
            r.extend_from_slice(&key[0..4]);
            r.push(key[8]);
            r.extend_from_slice(&key[11..13]);
            r.extend_from_slice(&key[9..11]);
            flows.push(UnionKey(r));
        }
        flows
    }
}

impl ControlLogic for AppLogic {
    fn writes_for(&self, uk: &UnionKey, frame: &[u8]) -> Vec<Write> {
        let Ok(Some((at, s))) = shim::shim_of(frame) else {
            return Vec::new();
        };
        if s.shim_type != ShimType::Punt {
            return Vec::new();
        }
        let _ = at;
        let mut inner = frame.to_vec();
        if shim::pop(&mut inner).is_err() {
            return Vec::new();
        }
        self.skip_reserved();
        let captured = {
            let mut rng = self.rng.borrow_mut();
            self.program
                .borrow_mut()
                .punt(s.in_port, s.out_port, inner, &mut rng)
        };
        self.writes_of(uk, &captured)
    }

    fn writes_for_event(&self, uk: &UnionKey, event: &[u8]) -> Vec<Write> {
        let Some(ev) = event::decode(event) else {
            return Vec::new();
        };
        if ev.app_id != self.spec.id.0 {
            return Vec::new();
        }
        let captured = {
            let mut rng = self.rng.borrow_mut();
            let mut program = self.program.borrow_mut();
            match ev.kind {
                EventKind::Punt(reason) => {
                    Some(program.punt(ev.in_port, reason, ev.frame, &mut rng))
                }
                EventKind::Digest(d) => program.digest(&d, &mut rng),
            }
        };
        captured.map_or_else(Vec::new, |c| self.writes_of(uk, &c))
    }

    fn observe(&self, obj: ObjId, key: &[u8], value: Option<&[u8]>) {
        let Some(o) = self.objects.iter().find(|o| o.decl.obj == obj) else {
            return;
        };
        if o.decl.kind == ObjectKind::Table {
            self.program.borrow_mut().observe(&o.name, key, value);
        }
    }
}

impl AppLogic {
    /// The hub writes of the table writes a captured handler run issued:
    /// adds become INSERT_IF_ABSENT, deletes DELETE; a flow that gains an
    /// entry also creates every counter cell it touches.
    fn writes_of(&self, uk: &UnionKey, captured: &Captured) -> Vec<Write> {
        let mut writes = Vec::new();
        for w in captured.writes() {
            let (table, spec, delete) = match w {
                ControlWrite::TableAdd { table, spec, .. }
                | ControlWrite::TableModify { table, spec, .. } => (*table, spec, false),
                ControlWrite::TableDelete { table, spec } => (*table, spec, true),
                _ => continue,
            };
            let (Some(obj), MatchSpec::Exact(key)) = (self.table_obj(table), spec) else {
                continue;
            };
            let Some(o) = self.spec.object(obj) else {
                continue;
            };
            let value = if delete {
                Vec::new()
            } else {
                match self.spec.program.encode_value(o, w) {
                    Some(v) => v,
                    None => continue,
                }
            };
            writes.push(Write {
                op: if delete {
                    WriteOp::Delete
                } else {
                    WriteOp::InsertIfAbsent
                },
                obj,
                key: key.to_vec(),
                value,
            });
        }
        if writes.iter().all(|w| w.op == WriteOp::Delete) {
            return writes;
        }
        for o in &self.objects {
            if let ObjectKind::Register { .. } = o.decl.kind {
                if let Some(key) = self.cell(o, uk) {
                    writes.push(Write {
                        op: WriteOp::InsertIfAbsent,
                        obj: o.decl.obj,
                        key,
                        value: Vec::new(),
                    });
                }
            }
        }
        writes
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use inca_wire::exoplane::ShimRepr;
    use inca_wire::{build_udp_frame, Endpoints};

    use super::*;
    use crate::app::catalog;

    fn udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let ep = Endpoints::new(
            [2, 0, 0, 0, 0, 1],
            Ipv4Addr::from(src),
            [2, 0, 0, 0, 0, 2],
            Ipv4Addr::from(dst),
        );
        build_udp_frame(&ep, sport, dport, &[0xAB; 16], true).unwrap()
    }

    /// `frame` as a device punts it: a PUNT shim naming the switch port it
    /// came in on and the app's own reason.
    fn punted(mut frame: Vec<u8>, app: u8, in_port: u16, reason: u16) -> Vec<u8> {
        let s = ShimRepr {
            shim_type: ShimType::Punt,
            failover: false,
            app_id: app,
            ldev: 0,
            in_port,
            out_port: reason,
            next_type: 0,
        };
        shim::push(&mut frame, s).unwrap();
        frame
    }

    fn key(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let mut k = src.to_vec();
        k.extend_from_slice(&dst);
        k.push(17);
        k.extend_from_slice(&sport.to_be_bytes());
        k.extend_from_slice(&dport.to_be_bytes());
        k
    }

    #[test]
    fn a_nat_miss_becomes_both_directions_entries_from_the_nats_own_logic() {
        let spec = catalog::nat(AppId(1), "nat", 1024, 1);
        let logic = AppLogic::new(&spec, 64, 1, 2, 7).unwrap();
        let out = key([10, 0, 0, 1], [203, 0, 113, 9], 4000, 80);
        let frame = punted(udp([10, 0, 0, 1], [203, 0, 113, 9], 4000, 80), 1, 3, 1);
        let writes = logic.writes_for(&UnionKey(out.clone()), &frame);
        assert_eq!(writes.len(), 2, "{writes:?}");
        assert!(writes.iter().all(|w| w.op == WriteOp::InsertIfAbsent));
        assert_eq!((writes[0].obj, &writes[0].key), (ObjId(1), &out));
        // Device 1 of 2 allocates from the second share of the pool: the
        // public address after the first share's.
        let public = [
            writes[0].value[0],
            writes[0].value[1],
            writes[0].value[2],
            writes[0].value[3],
        ];
        assert_eq!(public, [198, 51, 100, 1 + NAT_SHARE as u8]);
        let reply = UnionKey(writes[1].key.clone());
        assert_eq!(&reply.0[4..8], &public);
        // Each direction looks up its own table, and the reply's shard
        // holds the entry its key names.
        assert_eq!(
            logic.object_key(ObjId(1), &UnionKey(out.clone())),
            Some(out.clone())
        );
        assert_eq!(logic.object_key(ObjId(2), &UnionKey(out.clone())), None);
        assert_eq!(logic.object_key(ObjId(2), &reply), Some(reply.0.clone()));
        assert_eq!(logic.object_key(ObjId(1), &reply), None);
        assert_eq!(logic.entry_flows(ObjId(2), &reply.0), vec![reply.clone()]);
        // A packet from the outside raises nothing to write.
        let inbound = punted(udp([203, 0, 113, 9], public, 80, 1024), 1, 1, 1);
        assert!(logic.writes_for(&reply, &inbound).is_empty());
    }

    #[test]
    fn a_rebuilt_nat_daemon_never_hands_out_an_endpoint_its_entries_use() {
        let spec = catalog::nat(AppId(1), "nat", 1024, 1);
        // Device 1 of 2 in its first life: two flows, endpoints 1024, 1025
        // of its share's address.
        let first = AppLogic::new(&spec, 64, 1, 2, 7).unwrap();
        let setup = |logic: &AppLogic, sport: u16| {
            let out = key([10, 0, 0, 1], [203, 0, 113, 9], sport, 80);
            let frame = punted(udp([10, 0, 0, 1], [203, 0, 113, 9], sport, 80), 1, 3, 1);
            let w = logic.writes_for(&UnionKey(out), &frame);
            assert_eq!(w.len(), 2, "{w:?}");
            w[1].clone()
        };
        let old: Vec<Write> = [4000, 4001].iter().map(|&p| setup(&first, p)).collect();
        let port = |w: &Write| u16::from_be_bytes([w.key[11], w.key[12]]);
        assert_eq!((port(&old[0]), port(&old[1])), (1024, 1025));
        // Restarted: a fresh allocator would start at 1024 again, and the
        // hub would answer the reply key with EXISTS. Once the DUMP shows
        // the old entries, it goes on after them.
        let rebuilt = AppLogic::new(&spec, 64, 1, 2, 7).unwrap();
        let r = rebuilt.reserved().expect("a NAT keeps its reservations");
        for w in &old {
            r.observe(w.obj, &w.key);
        }
        // Entries of the other share, of other objects, do not count.
        let other = AppLogic::new(&spec, 64, 0, 2, 7).unwrap();
        let theirs = setup(&other, 4002);
        r.observe(theirs.obj, &theirs.key);
        r.observe(ObjId(1), &old[1].key);
        assert_eq!(r.floor(), 2);
        let new = setup(&rebuilt, 5000);
        assert_eq!(&new.key[4..8], &old[0].key[4..8]);
        assert_eq!(port(&new), 1026);
    }

    fn tcp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, flags: u8) -> Vec<u8> {
        let ep = Endpoints::new(
            [2, 0, 0, 0, 0, 1],
            Ipv4Addr::from(src),
            [2, 0, 0, 0, 0, 2],
            Ipv4Addr::from(dst),
        );
        let t = inca_wire::TcpRepr {
            src_port: sport,
            dst_port: dport,
            seq: 1,
            ack: 0,
            flags: inca_wire::TcpFlags(flags),
            window: 1024,
            urgent: 0,
            options: &[],
            payload: &[],
        };
        inca_wire::build_tcp_frame(&ep, &t).unwrap()
    }

    #[test]
    fn a_firewall_rst_event_deletes_the_connection_wherever_the_daemon_learnt_it() {
        use crate::runtime::event::{encode, EventKind};
        let spec = catalog::firewall(AppId(2), "fw", 1024, 1, 4096);
        let (inside, remote) = ([10, 0, 0, 1], [203, 0, 113, 9]);
        let mut k = inside.to_vec();
        k.extend_from_slice(&remote);
        k.push(6);
        k.extend_from_slice(&4000u16.to_be_bytes());
        k.extend_from_slice(&80u16.to_be_bytes());
        let uk = UnionKey(k.clone());
        let rst = tcp(inside, remote, 4000, 80, 0x04);
        let event = encode(2, 0, 3, &rst, &EventKind::Digest(k.clone())).unwrap();
        // The daemon that set the connection up knows it: its RST event
        // becomes a DELETE of the connection (no counter cells).
        let setter = AppLogic::new(&spec, 64, 0, 2, 7).unwrap();
        let syn = punted(tcp(inside, remote, 4000, 80, 0x02), 2, 3, 1);
        let setup = setter.writes_for(&uk, &syn);
        assert_eq!(setup[0].op, WriteOp::InsertIfAbsent, "{setup:?}");
        let del = setter.writes_for_event(&uk, &event);
        assert_eq!(del.len(), 1, "{del:?}");
        assert_eq!(
            (del[0].op, del[0].obj, &del[0].key),
            (WriteOp::Delete, ObjId(1), &k)
        );
        // Once deleted it is forgotten: a second RST writes nothing.
        assert!(setter.writes_for_event(&uk, &event).is_empty());
        // Another daemon (the replica, the reverse flow's shard) acts on it
        // only once it has been given the entry, and not after it lost it.
        let other = AppLogic::new(&spec, 64, 1, 2, 7).unwrap();
        assert!(other.writes_for_event(&uk, &event).is_empty());
        other.observe(ObjId(1), &k, Some(&3u16.to_be_bytes()));
        assert_eq!(other.writes_for_event(&uk, &event).len(), 1);
        other.observe(ObjId(1), &k, Some(&3u16.to_be_bytes()));
        other.observe(ObjId(1), &k, None);
        assert!(other.writes_for_event(&uk, &event).is_empty());
        // Events of another app, or not events at all, write nothing.
        other.observe(ObjId(1), &k, Some(&3u16.to_be_bytes()));
        let foreign = encode(3, 0, 3, &rst, &EventKind::Digest(k.clone())).unwrap();
        assert!(other.writes_for_event(&uk, &foreign).is_empty());
        assert!(other.writes_for_event(&uk, &rst).is_empty());
        let short = encode(2, 0, 3, &rst, &EventKind::Digest(vec![1, 2])).unwrap();
        assert!(other.writes_for_event(&uk, &short).is_empty());
    }

    #[test]
    fn a_firewall_connection_brings_its_counter_cells_and_both_directions() {
        let spec = catalog::firewall(AppId(2), "fw", 1024, 1, 4096);
        let logic = AppLogic::new(&spec, 64, 0, 2, 7).unwrap();
        let k = key([10, 0, 0, 1], [203, 0, 113, 9], 4000, 5353);
        let frame = punted(udp([10, 0, 0, 1], [203, 0, 113, 9], 4000, 5353), 2, 3, 1);
        let writes = logic.writes_for(&UnionKey(k.clone()), &frame);
        let objs: Vec<u16> = writes.iter().map(|w| w.obj.0).collect();
        assert_eq!(objs, vec![1, 2, 3], "{writes:?}");
        assert_eq!(writes[0].value, 3u16.to_be_bytes().to_vec());
        // The per-source cell is the one the data plane counts in.
        let cell = inca_apps::core::counter::index(&[10, 0, 0, 1], 4096) as u32;
        assert_eq!(writes[1].key, cell.to_be_bytes().to_vec());
        assert_eq!(writes[2].key, vec![0; 4]);
        let rev = key([203, 0, 113, 9], [10, 0, 0, 1], 5353, 4000);
        assert_eq!(
            logic.entry_flows(ObjId(1), &k),
            vec![UnionKey(k.clone()), UnionKey(rev)]
        );
        assert_eq!(
            logic.object_key(ObjId(2), &UnionKey(k)),
            Some(cell.to_be_bytes().to_vec())
        );
    }
}
