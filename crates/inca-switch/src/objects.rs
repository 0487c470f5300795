//! A program's stateful objects, how it declares them, and the data-plane
//! rules for reaching them.
//!
//! A program declares its objects once, at load time, through [`Declare`],
//! and keeps the typed handles it gets back. The switch owns the objects
//! themselves in an [`Objects`] store. In the data plane a program reaches
//! them only through [`DataPlane`], which enforces the hardware's rules:
//!
//! - at most one access to each object per packet pass (a stateful ALU does
//!   one read-modify-write per packet; a table is applied once per pass);
//! - an object declared for one pipeline (ingress or egress) cannot be reached
//!   from the other;
//! - tables are only read: a table is written through the control plane
//!   ([`crate::control::ControlPlane`]), after its latency.
//!
//! On a CPU data path (a profile with `features.cpu_data_path`, the
//! `server` profile) none of this holds — software can touch a structure as
//! often as it likes and write its own tables — so the rules are lifted and
//! [`DataPlane::table_insert`] works; elsewhere it is a violation.
//!
//! A broken rule is an [`AccessError`]: the access fails, the switch drops
//! the packet and records the violation where tests can see it.

use std::any::Any;
use std::marker::PhantomData;

use crate::counter::{CounterArray, IndexError};
use crate::device::{DeviceRng, Nanos};
use crate::hash::{HashAlgorithm, HashUnit};
use crate::meter::{Color, MeterArray, MeterConfig};
use crate::placement::{Gress, ObjectDecl, ObjectKind};
use crate::register::{RegisterArray, RegisterValue};
use crate::table::{MatchKind, MatchSpec, MatchTable, TableConfig, TableError};
use crate::trace::{self, PassTrace, Refusal, Undo};

/// The objects one block of a composite program declared: a contiguous
/// range of ids (the framework routes an object's events, such as idle
/// timeouts, to the block that owns it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockSpan {
    /// The block's instance name (the prefix of its object names).
    pub name: String,
    /// Its objects' ids.
    pub objects: std::ops::Range<u32>,
}

impl BlockSpan {
    /// Whether object `id` is one of this block's.
    pub fn owns(&self, id: ObjectId) -> bool {
        self.objects.contains(&id.0)
    }
}

/// Index of an object in its program's declaration list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(pub(crate) u32);

impl ObjectId {
    /// The position in the declaration list.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

macro_rules! handle {
    ($(#[$doc:meta])* $name:ident < $t:ident >) => {
        $(#[$doc])*
        pub struct $name<$t> {
            id: ObjectId,
            _type: PhantomData<fn() -> $t>,
        }
        impl<$t> $name<$t> {
            /// The object's id, for dependency lists.
            pub fn id(&self) -> ObjectId {
                self.id
            }

            /// A typed handle to an object declared by another program
            /// (found with [`Declare::id_of`]), for a program that wraps
            /// others and writes their objects from its control plane. If
            /// the type is not the object's, every operation through the
            /// handle fails (`WrongHandle`, or an `OpFailed` event) and
            /// changes nothing.
            pub fn of_object(id: ObjectId) -> Self {
                $name {
                    id,
                    _type: PhantomData,
                }
            }
        }
        impl<$t> Clone for $name<$t> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<$t> Copy for $name<$t> {}
        impl<$t> std::fmt::Debug for $name<$t> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({})", stringify!($name), self.id.0)
            }
        }
    };
}

handle!(
    /// A handle to a match-action table whose entries carry action data `A`.
    TableHandle<A>
);
handle!(
    /// A handle to a register array of `T` entries.
    RegisterHandle<T>
);

/// A handle to an object with no type parameter (counters, meters, hash
/// units, gateways).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Handle(ObjectId);

impl Handle {
    /// The object's id, for dependency lists.
    pub fn id(&self) -> ObjectId {
        self.0
    }

    /// A handle to an untyped object declared by another program (see
    /// [`TableHandle::of_object`]).
    pub fn of_object(id: ObjectId) -> Self {
        Handle(id)
    }
}

/// Everything about a table a program declares.
#[derive(Debug, Clone)]
pub struct TableDecl {
    /// Unique name.
    pub name: String,
    /// How it matches.
    pub kind: MatchKind,
    /// Width of the key in bytes.
    pub key_bytes: usize,
    /// Width of the action data in bits (what SRAM is charged for).
    pub action_data_bits: u32,
    /// Maximum number of entries.
    pub size: usize,
    /// Idle timeout, if entries age.
    pub idle_timeout: Option<Nanos>,
    /// Pipeline it is applied in.
    pub gress: Gress,
    /// Objects whose results it needs.
    pub after: Vec<ObjectId>,
    /// VLIW slots of its actions.
    pub vliw_slots: u32,
}

impl TableDecl {
    /// An ingress table with one VLIW slot and no dependencies.
    pub fn new(
        name: &str,
        kind: MatchKind,
        key_bytes: usize,
        action_data_bits: u32,
        size: usize,
    ) -> Self {
        TableDecl {
            name: name.to_string(),
            kind,
            key_bytes,
            action_data_bits,
            size,
            idle_timeout: None,
            gress: Gress::Ingress,
            after: Vec::new(),
            vliw_slots: 1,
        }
    }
    /// Needs the results of `ids`.
    pub fn after(mut self, ids: &[ObjectId]) -> Self {
        self.after.extend_from_slice(ids);
        self
    }
    /// Applied in the egress pipeline.
    pub fn egress(mut self) -> Self {
        self.gress = Gress::Egress;
        self
    }
    /// Entries age out after `t` without a hit (the control plane is told).
    pub fn idle_timeout(mut self, t: Nanos) -> Self {
        self.idle_timeout = Some(t);
        self
    }
    /// Its actions use `n` VLIW slots.
    pub fn vliw(mut self, n: u32) -> Self {
        self.vliw_slots = n;
        self
    }
}

/// Everything about a register array, counter or meter a program declares.
#[derive(Debug, Clone)]
pub struct ArrayDecl {
    /// Unique name.
    pub name: String,
    /// Number of entries.
    pub size: usize,
    /// Pipeline it is used in.
    pub gress: Gress,
    /// Objects whose results it needs (e.g. the hash that computes its index).
    pub after: Vec<ObjectId>,
}

impl ArrayDecl {
    /// An ingress array with no dependencies.
    pub fn new(name: &str, size: usize) -> Self {
        ArrayDecl {
            name: name.to_string(),
            size,
            gress: Gress::Ingress,
            after: Vec::new(),
        }
    }
    /// Needs the results of `ids`.
    pub fn after(mut self, ids: &[ObjectId]) -> Self {
        self.after.extend_from_slice(ids);
        self
    }
    /// Used in the egress pipeline.
    pub fn egress(mut self) -> Self {
        self.gress = Gress::Egress;
        self
    }
}

/// Why a declaration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeclareError {
    /// Two objects with one name.
    #[error("object name {0:?} is declared twice")]
    DuplicateName(String),
    /// A dependency on an object that is not declared (yet).
    #[error("object {name:?} depends on an object that is not declared before it")]
    UnknownDependency {
        /// The declaring object.
        name: String,
    },
    /// A size or width that cannot be built.
    #[error("object {name:?}: {reason}")]
    Invalid {
        /// The declaring object.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// The store-side form of an object: the typed storage behind a trait so the
/// switch can clear, age and inspect objects without knowing their types.
enum Storage {
    Table(Box<dyn ErasedTable>),
    Register(Box<dyn ErasedRegister>),
    Counter(CounterArray),
    Meter(MeterArray),
    Hash(HashUnit),
    Gateway,
}

trait ErasedTable: Any {
    fn clear(&mut self);
    fn contains(&self, key: &[u8]) -> bool;
    fn expire_idle(&mut self, now: Nanos, out: &mut Vec<MatchSpec>);
    fn len(&self) -> usize;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn as_any(&self) -> &dyn Any;
}

impl<A: Clone + 'static> ErasedTable for MatchTable<A> {
    fn clear(&mut self) {
        MatchTable::clear(self)
    }
    fn contains(&self, key: &[u8]) -> bool {
        self.peek(key).is_some()
    }
    fn expire_idle(&mut self, now: Nanos, out: &mut Vec<MatchSpec>) {
        MatchTable::expire_idle(self, now, out)
    }
    fn len(&self) -> usize {
        MatchTable::len(self)
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

trait ErasedRegister: Any {
    fn clear(&mut self);
    fn read_u64(&self, index: u64) -> Result<u64, IndexError>;
    fn write_u64(&mut self, index: u64, value: u64) -> Result<(), IndexError>;
    fn len(&self) -> usize;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: RegisterValue> ErasedRegister for RegisterArray<T> {
    fn clear(&mut self) {
        RegisterArray::clear(self)
    }
    fn read_u64(&self, index: u64) -> Result<u64, IndexError> {
        self.get(index).map(RegisterValue::to_u64)
    }
    fn write_u64(&mut self, index: u64, value: u64) -> Result<(), IndexError> {
        self.execute(index, |v| *v = T::from_u64(value))
    }
    fn len(&self) -> usize {
        RegisterArray::len(self)
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

struct Slot {
    decl: ObjectDecl,
    storage: Storage,
    /// The pass that last accessed this object (0 = never).
    last_pass: u64,
    /// Idle timeout of a table, for the aging sweep.
    idle_timeout: Option<Nanos>,
}

/// Makes an object's storage when the switch is built.
type MakeStorage = Box<dyn FnOnce() -> Storage>;

/// One declaration, its storage not made yet: checking whether a program
/// fits (`inca check`, with sizes in the billions) must not allocate it.
struct Declared {
    decl: ObjectDecl,
    make: MakeStorage,
    idle_timeout: Option<Nanos>,
}

/// Collects a program's declarations. See the module documentation.
///
/// A composite program declares each of its blocks inside
/// [`Declare::in_block`]: the block's object names get the block's name as a
/// prefix (`nat/nat_out`), so two blocks may both declare `flows`, and the
/// resource report can sum what each block uses.
#[derive(Default)]
pub struct Declare {
    slots: Vec<Declared>,
    /// The block being declared: its name and the objects every one of its
    /// objects comes after (the composite's classifier).
    block: Option<(String, Vec<usize>)>,
    blocks: Vec<BlockSpan>,
    /// The objects every object but hash units comes after, inside
    /// [`Declare::gated_by`].
    gate: Vec<usize>,
}

impl Declare {
    /// Declares a block's objects: `declare` runs with every object name
    /// prefixed by `name/`, and every object but hash units placed after
    /// `after` (what decides whether the block runs at all, such as a
    /// classifier table).
    /// Blocks do not nest, and a block name must be non-empty without `/`.
    pub fn in_block<R>(
        &mut self,
        name: &str,
        after: &[ObjectId],
        declare: impl FnOnce(&mut Declare) -> Result<R, DeclareError>,
    ) -> Result<R, DeclareError> {
        if name.is_empty() || name.contains('/') || self.block.is_some() {
            return Err(DeclareError::Invalid {
                name: name.to_string(),
                reason: "a block name is non-empty, has no '/', and blocks do not nest".into(),
            });
        }
        if self.blocks.iter().any(|b| b.name == name) {
            return Err(DeclareError::DuplicateName(name.to_string()));
        }
        let first = self.slots.len() as u32;
        self.block = Some((
            name.to_string(),
            after.iter().map(|id| id.index()).collect(),
        ));
        let r = declare(self);
        self.block = None;
        self.blocks.push(BlockSpan {
            name: name.to_string(),
            objects: first..self.slots.len() as u32,
        });
        r
    }

    /// Declares objects reached only behind `after`'s results: every object
    /// but hash units that `declare` declares (in a block or not) is placed
    /// after `after`, as a block's objects are after its classifier, but
    /// names are left alone. For a program that wraps code it does not own
    /// (a library's tables) and runs it only on some of `after`'s outcomes.
    /// Gates nest: an inner gate adds to the outer one.
    pub fn gated_by<R>(
        &mut self,
        after: &[ObjectId],
        declare: impl FnOnce(&mut Declare) -> Result<R, DeclareError>,
    ) -> Result<R, DeclareError> {
        let outer = self.gate.len();
        for id in after {
            if !self.gate.contains(&id.index()) {
                self.gate.push(id.index());
            }
        }
        let r = declare(self);
        self.gate.truncate(outer);
        r
    }

    /// The objects declared so far in block `name`, in declaration order.
    pub fn block_objects(&self, name: &str) -> Vec<ObjectId> {
        self.blocks
            .iter()
            .filter(|b| b.name == name)
            .flat_map(|b| b.objects.clone())
            .map(ObjectId)
            .collect()
    }

    /// The object declared as `name` (a block's objects as `block/name`),
    /// for a program that wraps others and refers to their objects.
    pub fn id_of(&self, name: &str) -> Option<ObjectId> {
        self.slots
            .iter()
            .position(|s| s.decl.name == name)
            .map(|i| ObjectId(i as u32))
    }

    /// The blocks declared so far, in declaration order.
    pub fn blocks(&self) -> &[BlockSpan] {
        &self.blocks
    }

    fn push(
        &mut self,
        mut decl: ObjectDecl,
        make: impl FnOnce() -> Storage + 'static,
        idle_timeout: Option<Nanos>,
    ) -> Result<ObjectId, DeclareError> {
        // A hash unit only computes over header fields; it runs whether or
        // not the block (or gated code) does, so it need not wait.
        let gated = !matches!(decl.kind, ObjectKind::Hash { .. });
        let block_after = match &self.block {
            Some((block, after)) => {
                decl.name = format!("{block}/{}", decl.name);
                after.as_slice()
            }
            None => &[],
        };
        for &i in block_after.iter().chain(&self.gate).filter(|_| gated) {
            if !decl.after.contains(&i) {
                decl.after.push(i);
            }
        }
        if self.slots.iter().any(|s| s.decl.name == decl.name) {
            return Err(DeclareError::DuplicateName(decl.name));
        }
        if decl.after.iter().any(|&i| i >= self.slots.len()) {
            return Err(DeclareError::UnknownDependency { name: decl.name });
        }
        let id = ObjectId(self.slots.len() as u32);
        self.slots.push(Declared {
            decl,
            make: Box::new(make),
            idle_timeout,
        });
        Ok(id)
    }

    fn decl(
        name: &str,
        kind: ObjectKind,
        gress: Gress,
        after: &[ObjectId],
        vliw_slots: u32,
    ) -> ObjectDecl {
        ObjectDecl {
            name: name.to_string(),
            kind,
            gress,
            after: after.iter().map(|id| id.index()).collect(),
            vliw_slots,
        }
    }

    /// Declares a match-action table with action data of type `A`.
    pub fn table<A: Clone + 'static>(
        &mut self,
        t: TableDecl,
    ) -> Result<TableHandle<A>, DeclareError> {
        if t.key_bytes == 0 || t.size == 0 {
            return Err(DeclareError::Invalid {
                name: t.name,
                reason: "a table needs a key of at least one byte and at least one entry".into(),
            });
        }
        let kind = ObjectKind::Table {
            kind: t.kind,
            key_bits: (t.key_bytes * 8) as u32,
            action_data_bits: t.action_data_bits,
            entries: t.size as u64,
            idle_timeout: t.idle_timeout.is_some(),
        };
        let decl = Self::decl(&t.name, kind, t.gress, &t.after, t.vliw_slots);
        let config = TableConfig {
            name: t.name.clone(),
            kind: t.kind,
            key_bytes: t.key_bytes,
            size: t.size,
            idle_timeout: t.idle_timeout,
        };
        let make = move || Storage::Table(Box::new(MatchTable::<A>::new(config)));
        let id = self.push(decl, make, t.idle_timeout)?;
        Ok(TableHandle {
            id,
            _type: PhantomData,
        })
    }

    /// Declares a register array of `T` entries.
    pub fn register<T: RegisterValue>(
        &mut self,
        a: ArrayDecl,
    ) -> Result<RegisterHandle<T>, DeclareError> {
        let kind = ObjectKind::Register {
            value_bits: T::BITS,
            entries: a.size as u64,
        };
        let decl = Self::decl(&a.name, kind, a.gress, &a.after, 1);
        let id = self.push(
            decl,
            move || Storage::Register(Box::new(RegisterArray::<T>::new(a.size))),
            None,
        )?;
        Ok(RegisterHandle {
            id,
            _type: PhantomData,
        })
    }

    /// Declares a packet-and-byte counter array.
    pub fn counter(&mut self, a: ArrayDecl) -> Result<Handle, DeclareError> {
        let kind = ObjectKind::Counter {
            entries: a.size as u64,
        };
        let decl = Self::decl(&a.name, kind, a.gress, &a.after, 0);
        self.push(
            decl,
            move || Storage::Counter(CounterArray::new(a.size)),
            None,
        )
        .map(Handle)
    }

    /// Declares an RFC 2698 meter array. Meters start unconfigured (they
    /// pass every packet with its pre-colour); the control plane configures
    /// them with [`crate::ControlPlane::meter_configure`].
    pub fn meter(&mut self, a: ArrayDecl) -> Result<Handle, DeclareError> {
        let kind = ObjectKind::Meter {
            entries: a.size as u64,
        };
        let decl = Self::decl(&a.name, kind, a.gress, &a.after, 1);
        self.push(decl, move || Storage::Meter(MeterArray::new(a.size)), None)
            .map(Handle)
    }

    /// Declares a hash unit computing `output_bits` bits with `algorithm`.
    pub fn hash(
        &mut self,
        name: &str,
        algorithm: HashAlgorithm,
        output_bits: u8,
        gress: Gress,
        after: &[ObjectId],
    ) -> Result<Handle, DeclareError> {
        let unit = HashUnit::new(algorithm, output_bits).map_err(|e| DeclareError::Invalid {
            name: name.to_string(),
            reason: e.to_string(),
        })?;
        let kind = ObjectKind::Hash {
            output_bits: u32::from(output_bits),
        };
        let decl = Self::decl(name, kind, gress, after, 0);
        self.push(decl, move || Storage::Hash(unit), None)
            .map(Handle)
    }

    /// Declares a gateway (a condition in the control flow).
    pub fn gateway(
        &mut self,
        name: &str,
        gress: Gress,
        after: &[ObjectId],
    ) -> Result<Handle, DeclareError> {
        let decl = Self::decl(name, ObjectKind::Gateway, gress, after, 0);
        self.push(decl, || Storage::Gateway, None).map(Handle)
    }

    /// The declarations so far, for the resource model.
    pub fn decls(&self) -> Vec<ObjectDecl> {
        self.slots.iter().map(|s| s.decl.clone()).collect()
    }

    /// Turns the declarations into the store the switch runs with.
    pub(crate) fn into_objects(self, cpu: bool) -> Objects {
        let slots = self
            .slots
            .into_iter()
            .map(|d| Slot {
                decl: d.decl,
                storage: (d.make)(),
                last_pass: 0,
                idle_timeout: d.idle_timeout,
            })
            .collect();
        Objects {
            slots,
            pass: 0,
            gress: Gress::Ingress,
            violations: Vec::new(),
            cpu,
            trace: None,
        }
    }
}

/// A data-plane rule broken by a program.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    /// The object was already accessed in this packet pass.
    #[error("object {object:?} accessed twice in one packet pass")]
    DoubleAccess {
        /// The object's name.
        object: String,
    },
    /// The object belongs to the other pipeline.
    #[error("object {object:?} belongs to {declared:?} but was accessed from {accessed:?}")]
    WrongGress {
        /// The object's name.
        object: String,
        /// Where it was declared.
        declared: Gress,
        /// Where the access came from.
        accessed: Gress,
    },
    /// An index beyond the array.
    #[error("object {object:?}: {source}")]
    Index {
        /// The object's name.
        object: String,
        /// The index error.
        source: IndexError,
    },
    /// A handle used with an object of another kind or type (a handle from
    /// another program).
    #[error("handle does not name an object of this kind in this program")]
    WrongHandle,
    /// A table written from the data plane of a device that cannot.
    #[error("table {object:?} written from the data plane; only the control plane writes tables on this device")]
    ReadOnlyTable {
        /// The table's name.
        object: String,
    },
}

/// A data-plane rule violation as the switch records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// When it happened.
    pub at: Nanos,
    /// What was broken.
    pub error: AccessError,
}

/// Bound on recorded violations (each is counted; only the first ones are
/// kept in detail).
pub const MAX_RECORDED_VIOLATIONS: usize = 1024;

/// The switch-side store of a program's objects.
pub struct Objects {
    slots: Vec<Slot>,
    pass: u64,
    gress: Gress,
    violations: Vec<Violation>,
    /// A software data path: the rules are lifted.
    cpu: bool,
    /// The load-time check's trace of the current pass (`None`: not
    /// tracing, the normal case).
    pub(crate) trace: Option<Box<PassTrace>>,
}

impl Objects {
    /// Starts a new packet pass in `gress`: every object may be accessed once
    /// again.
    pub(crate) fn begin_pass(&mut self, gress: Gress) {
        self.pass += 1;
        self.gress = gress;
    }

    /// Violations recorded so far (at most [`MAX_RECORDED_VIOLATIONS`]).
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Ends a traced pass: undoes what it changed (registers, counters,
    /// meters; a table hit's idle state is left) and forgets the violations
    /// it recorded after the first `violations`, so the pass can run again
    /// from the same state.
    pub(crate) fn end_trace(&mut self, violations: usize) -> Option<Box<PassTrace>> {
        let t = self.trace.take()?;
        for u in t.undo.iter().rev() {
            match u {
                Undo::Register(id, i, v) => {
                    if let Some(Storage::Register(r)) =
                        self.slots.get_mut(*id).map(|s| &mut s.storage)
                    {
                        let _ = r.write_u64(*i, *v);
                    }
                }
                Undo::Counter(id, i, v) => {
                    if let Some(Storage::Counter(c)) =
                        self.slots.get_mut(*id).map(|s| &mut s.storage)
                    {
                        c.restore(*i, *v);
                    }
                }
                Undo::Meter(id, i, m) => {
                    if let Some(Storage::Meter(a)) = self.slots.get_mut(*id).map(|s| &mut s.storage)
                    {
                        a.restore(*i, m.clone());
                    }
                }
            }
        }
        self.violations.truncate(violations);
        Some(t)
    }

    /// The declarations, for the resource model.
    pub fn decls(&self) -> Vec<ObjectDecl> {
        self.slots.iter().map(|s| s.decl.clone()).collect()
    }

    /// Loses all state: tables emptied, registers, counters and meters reset.
    pub(crate) fn clear(&mut self) {
        for slot in &mut self.slots {
            match &mut slot.storage {
                Storage::Table(t) => t.clear(),
                Storage::Register(r) => r.clear(),
                Storage::Counter(c) => c.clear(),
                Storage::Meter(m) => *m = MeterArray::new(m.len()),
                Storage::Hash(_) | Storage::Gateway => {}
            }
            slot.last_pass = 0;
        }
    }

    /// The shortest idle timeout of any table (how often to sweep).
    pub(crate) fn min_idle_timeout(&self) -> Option<Nanos> {
        self.slots.iter().filter_map(|s| s.idle_timeout).min()
    }

    /// Runs the idle-timeout sweep: pushes `(table, spec)` for every entry
    /// that has been idle for its table's timeout.
    pub(crate) fn expire_idle(&mut self, now: Nanos, out: &mut Vec<(ObjectId, MatchSpec)>) {
        let mut specs = Vec::new();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if let (Storage::Table(t), Some(_)) = (&mut slot.storage, slot.idle_timeout) {
                specs.clear();
                t.expire_idle(now, &mut specs);
                out.extend(specs.drain(..).map(|s| (ObjectId(i as u32), s)));
            }
        }
    }

    /// Checks the access rules for `id` in the current pass and marks it
    /// accessed.
    fn claim(&mut self, now: Nanos, id: ObjectId) -> Result<&mut Slot, AccessError> {
        let pass = self.pass;
        let gress = self.gress;
        let slot = self
            .slots
            .get_mut(id.index())
            .ok_or(AccessError::WrongHandle)?;
        let err = if self.cpu {
            None
        } else if slot.decl.gress != gress {
            Some(AccessError::WrongGress {
                object: slot.decl.name.clone(),
                declared: slot.decl.gress,
                accessed: gress,
            })
        } else if slot.last_pass == pass {
            Some(AccessError::DoubleAccess {
                object: slot.decl.name.clone(),
            })
        } else {
            None
        };
        if self.trace.is_some() {
            self.trace_claim(id, err.as_ref());
        }
        if let Some(e) = err {
            if self.violations.len() < MAX_RECORDED_VIOLATIONS {
                self.violations.push(Violation {
                    at: now,
                    error: e.clone(),
                });
            }
            return Err(e);
        }
        let slot = &mut self.slots[id.index()];
        slot.last_pass = pass;
        Ok(slot)
    }

    /// Records an access in the load-time check's trace (out of line: see
    /// [`DataPlane::lookup`]).
    #[cold]
    #[inline(never)]
    fn trace_claim(&mut self, id: ObjectId, err: Option<&AccessError>) {
        if let Some(t) = self.trace.as_deref_mut() {
            let refused = err.map(|e| match e {
                AccessError::WrongGress { .. } => Refusal::WrongGress,
                _ => Refusal::Double,
            });
            t.push(id.index(), refused);
        }
    }

    fn index_error(&mut self, now: Nanos, id: ObjectId, source: IndexError) -> AccessError {
        let e = AccessError::Index {
            object: self.slots[id.index()].decl.name.clone(),
            source,
        };
        if self.violations.len() < MAX_RECORDED_VIOLATIONS {
            self.violations.push(Violation {
                at: now,
                error: e.clone(),
            });
        }
        e
    }

    /// The typed table behind `h` (control plane; no access rules).
    pub(crate) fn table_mut<A: Clone + 'static>(
        &mut self,
        h: TableHandle<A>,
    ) -> Option<&mut MatchTable<A>> {
        match &mut self.slots.get_mut(h.id.index())?.storage {
            Storage::Table(t) => t.as_any_mut().downcast_mut::<MatchTable<A>>(),
            _ => None,
        }
    }

    /// The typed table behind `h`, read-only (control plane, tests).
    pub fn table<A: Clone + 'static>(&self, h: TableHandle<A>) -> Option<&MatchTable<A>> {
        match &self.slots.get(h.id.index())?.storage {
            Storage::Table(t) => t.as_any().downcast_ref::<MatchTable<A>>(),
            _ => None,
        }
    }

    /// Reads register entries `first..first+count` as u64 (control plane).
    pub(crate) fn register_read(
        &self,
        id: ObjectId,
        first: u64,
        count: u64,
    ) -> Result<Vec<u64>, AccessError> {
        let slot = self.slots.get(id.index()).ok_or(AccessError::WrongHandle)?;
        let Storage::Register(r) = &slot.storage else {
            return Err(AccessError::WrongHandle);
        };
        (first..first.saturating_add(count))
            .map(|i| {
                r.read_u64(i).map_err(|source| AccessError::Index {
                    object: slot.decl.name.clone(),
                    source,
                })
            })
            .collect()
    }

    /// Writes register entry `index` (control plane).
    pub(crate) fn register_write(
        &mut self,
        id: ObjectId,
        index: u64,
        value: u64,
    ) -> Result<(), AccessError> {
        let slot = self
            .slots
            .get_mut(id.index())
            .ok_or(AccessError::WrongHandle)?;
        let name = &slot.decl.name;
        match &mut slot.storage {
            Storage::Register(r) => {
                r.write_u64(index, value)
                    .map_err(|source| AccessError::Index {
                        object: name.clone(),
                        source,
                    })
            }
            _ => Err(AccessError::WrongHandle),
        }
    }

    /// Clears a whole register array (control plane).
    pub(crate) fn register_clear(&mut self, id: ObjectId) -> Result<u64, AccessError> {
        match &mut self
            .slots
            .get_mut(id.index())
            .ok_or(AccessError::WrongHandle)?
            .storage
        {
            Storage::Register(r) => {
                r.clear();
                Ok(r.len() as u64)
            }
            _ => Err(AccessError::WrongHandle),
        }
    }

    /// Reconfigures meter `index` (control plane).
    pub(crate) fn meter_configure(
        &mut self,
        id: ObjectId,
        index: u64,
        config: MeterConfig,
        now: Nanos,
    ) -> Result<(), String> {
        match &mut self
            .slots
            .get_mut(id.index())
            .ok_or("no such meter")?
            .storage
        {
            Storage::Meter(m) => m.configure(index, config, now).map_err(|e| e.to_string()),
            _ => Err("not a meter".into()),
        }
    }

    /// Reads counter entry `index` as (packets, bytes) (control plane).
    pub fn counter_read(&self, h: Handle, index: u64) -> Result<(u64, u64), AccessError> {
        match &self
            .slots
            .get(h.0.index())
            .ok_or(AccessError::WrongHandle)?
            .storage
        {
            Storage::Counter(c) => c.read(index).map_err(|source| AccessError::Index {
                object: self.slots[h.0.index()].decl.name.clone(),
                source,
            }),
            _ => Err(AccessError::WrongHandle),
        }
    }

    /// Reads a register entry (tests and the control plane's synchronous
    /// view; programs use [`crate::control::ControlPlane::register_read`]).
    pub fn register_peek<T: RegisterValue>(
        &self,
        h: RegisterHandle<T>,
        index: u64,
    ) -> Result<T, AccessError> {
        self.register_read(h.id, index, 1)
            .map(|v| T::from_u64(v[0]))
    }

    /// The object declared as `name` (tests and drivers reading a wrapped
    /// program's objects; see [`Declare::id_of`]).
    pub fn id_of(&self, name: &str) -> Option<ObjectId> {
        self.slots
            .iter()
            .position(|s| s.decl.name == name)
            .map(|i| ObjectId(i as u32))
    }

    /// The name of object `id`.
    pub fn name(&self, id: ObjectId) -> &str {
        self.slots
            .get(id.index())
            .map_or("?", |s| s.decl.name.as_str())
    }

    /// Every table's occupancy, in declaration order: its name, the
    /// entries installed now and the entries declared (its capacity).
    pub fn table_occupancy(&self) -> impl Iterator<Item = (&str, usize, u64)> + '_ {
        self.slots
            .iter()
            .filter_map(|s| match (&s.storage, &s.decl.kind) {
                (Storage::Table(t), ObjectKind::Table { entries, .. }) => {
                    Some((s.decl.name.as_str(), t.len(), *entries))
                }
                _ => None,
            })
    }

    /// Number of entries installed in the table `id` (0 for other objects).
    pub fn table_len(&self, id: ObjectId) -> usize {
        match self.slots.get(id.index()).map(|s| &s.storage) {
            Some(Storage::Table(t)) => t.len(),
            _ => 0,
        }
    }
}

/// The data plane's view of the objects during one packet pass. See the
/// module documentation for the rules it enforces.
pub struct DataPlane<'a> {
    pub(crate) objects: &'a mut Objects,
    pub(crate) now: Nanos,
    pub(crate) rng: &'a mut DeviceRng,
}

impl DataPlane<'_> {
    /// The time of this pass (the packet's arrival at this pipeline).
    pub fn now(&self) -> Nanos {
        self.now
    }

    // Each access has a fast path (no trace: the normal case, every run and
    // benchmark) and a traced one (`*_traced`, the load-time check), kept
    // cold and out of line so the check's bookkeeping does not grow the
    // hot path the packet takes (it cost the NAT fast path ~150
    // instructions a packet when inlined).

    /// Applies a table: the action data of the matching entry, or `None` on a
    /// miss (then the program runs its default action itself).
    #[inline]
    pub fn lookup<A: Clone + 'static>(
        &mut self,
        h: TableHandle<A>,
        key: &[u8],
    ) -> Result<Option<A>, AccessError> {
        if self.objects.trace.is_some() {
            return self.lookup_traced(h, key);
        }
        let now = self.now;
        let slot = self.objects.claim(now, h.id)?;
        match &mut slot.storage {
            Storage::Table(t) => match t.as_any_mut().downcast_mut::<MatchTable<A>>() {
                Some(t) => Ok(t.lookup(key, now).cloned()),
                None => Err(AccessError::WrongHandle),
            },
            _ => Err(AccessError::WrongHandle),
        }
    }

    /// Runs a register action on entry `index` of a register array.
    #[inline]
    pub fn register<T: RegisterValue, R>(
        &mut self,
        h: RegisterHandle<T>,
        index: u64,
        action: impl FnOnce(&mut T) -> R,
    ) -> Result<R, AccessError> {
        if self.objects.trace.is_some() {
            return self.register_traced(h, index, action);
        }
        let now = self.now;
        let slot = self.objects.claim(now, h.id)?;
        let Storage::Register(r) = &mut slot.storage else {
            return Err(AccessError::WrongHandle);
        };
        let Some(r) = r.as_any_mut().downcast_mut::<RegisterArray<T>>() else {
            return Err(AccessError::WrongHandle);
        };
        match r.execute(index, action) {
            Ok(v) => Ok(v),
            Err(e) => Err(self.objects.index_error(now, h.id, e)),
        }
    }

    /// Counts a packet of `bytes` bytes in entry `index` of a counter array.
    #[inline]
    pub fn count(&mut self, h: Handle, index: u64, bytes: u64) -> Result<(), AccessError> {
        if self.objects.trace.is_some() {
            return self.count_traced(h, index, bytes);
        }
        let now = self.now;
        let slot = self.objects.claim(now, h.0)?;
        let Storage::Counter(c) = &mut slot.storage else {
            return Err(AccessError::WrongHandle);
        };
        c.count(index, bytes)
            .map_err(|e| self.objects.index_error(now, h.0, e))
    }

    /// Meters a packet of `bytes` bytes with meter `index`; `pre_color` makes
    /// it colour-aware.
    #[inline]
    pub fn meter(
        &mut self,
        h: Handle,
        index: u64,
        bytes: u64,
        pre_color: Option<Color>,
    ) -> Result<Color, AccessError> {
        if self.objects.trace.is_some() {
            return self.meter_traced(h, index, bytes, pre_color);
        }
        let now = self.now;
        let slot = self.objects.claim(now, h.0)?;
        let Storage::Meter(m) = &mut slot.storage else {
            return Err(AccessError::WrongHandle);
        };
        m.mark(index, now, bytes, pre_color)
            .map_err(|e| self.objects.index_error(now, h.0, e))
    }

    /// Runs a read-modify-write on entry `index` of the register array or
    /// counter array `id`, whatever its entry type: `f` gets the entry as a
    /// u64 (a counter's packet count) and returns the new value, which is
    /// stored truncated to the entry width; returns the stored value. One
    /// access, under the same rules as [`DataPlane::register`]. For a
    /// runtime that folds deltas into objects it did not declare (ExoPlane's
    /// MERGE, spec §5.6 step M) and so has no typed handle. A counter only
    /// grows: `f`'s result minus the old count is added to it.
    pub fn merge_u64(
        &mut self,
        id: ObjectId,
        index: u64,
        f: impl FnOnce(u64) -> u64,
    ) -> Result<u64, AccessError> {
        let now = self.now;
        self.objects.claim(now, id)?;
        let Objects { slots, trace, .. } = &mut *self.objects;
        let slot = slots.get_mut(id.index()).ok_or(AccessError::WrongHandle)?;
        let (result, undo) = match &mut slot.storage {
            Storage::Register(r) => {
                let r = &mut **r;
                let old = r.read_u64(index);
                let res = old.and_then(|old| {
                    r.write_u64(index, f(old))?;
                    r.read_u64(index)
                });
                (res, old.ok().map(|o| Undo::Register(id.index(), index, o)))
            }
            Storage::Counter(c) => {
                let old = c.read(index);
                let res = old.and_then(|(p, _)| c.add_packets(index, f(p).wrapping_sub(p)));
                (res, old.ok().map(|o| Undo::Counter(id.index(), index, o)))
            }
            _ => return Err(AccessError::WrongHandle),
        };
        if let Some(tr) = trace.as_deref_mut() {
            // Traced (the load-time check): undo it after the pass; this
            // access has no perturbation modes of its own.
            if let Some(u) = undo {
                tr.undo.push(u);
            }
            let v = *result.as_ref().unwrap_or(&u64::MAX);
            tr.finish(
                trace::fingerprint(&[&index.to_le_bytes(), &v.to_le_bytes()]),
                0,
            );
        }
        result.map_err(|e| self.objects.index_error(now, id, e))
    }

    /// Whether table `id` holds an entry matching `key`, seen from outside
    /// the pipeline: no access is made or counted and no idle state is
    /// touched. For invariant checks that the model makes about a pass
    /// (ExoPlane's P1: a flow-manager hit finds every entry it needs), never
    /// for packet logic. None: `id` is not a table.
    pub fn oracle_contains(&self, id: ObjectId, key: &[u8]) -> Option<bool> {
        match &self.objects.slots.get(id.index())?.storage {
            Storage::Table(t) => Some(t.contains(key)),
            _ => None,
        }
    }

    /// Computes a hash over `data` with a declared hash unit. Hash units have
    /// no per-packet access limit in this model (a program that needs two
    /// different hashes declares two units, and pays for both in hash bits).
    #[inline]
    pub fn hash(&mut self, h: Handle, data: &[u8]) -> Result<u64, AccessError> {
        if self.objects.trace.is_some() {
            return self.hash_traced(h, data);
        }
        match self.objects.slots.get(h.0.index()).map(|s| &s.storage) {
            Some(Storage::Hash(u)) => Ok(u.hash(data)),
            _ => Err(AccessError::WrongHandle),
        }
    }

    /// Applies a table: the action data of the matching entry, or `None` on a
    /// miss (then the program runs its default action itself).
    #[cold]
    #[inline(never)]
    fn lookup_traced<A: Clone + 'static>(
        &mut self,
        h: TableHandle<A>,
        key: &[u8],
    ) -> Result<Option<A>, AccessError> {
        let now = self.now;
        self.objects.claim(now, h.id)?;
        let Objects { slots, trace, .. } = &mut *self.objects;
        let slot = &mut slots[h.id.index()];
        let Storage::Table(t) = &mut slot.storage else {
            return Err(AccessError::WrongHandle);
        };
        let Some(t) = t.as_any_mut().downcast_mut::<MatchTable<A>>() else {
            return Err(AccessError::WrongHandle);
        };
        let hit = t.lookup(key, now).cloned();
        let Some(tr) = trace.as_deref_mut() else {
            return Ok(hit);
        };
        Ok(
            match tr.finish(trace::fingerprint(&[key]), trace::TABLE_MODES) {
                // Another result the table could have given.
                Some(0) if hit.is_some() => None,
                Some(0) => t.entries().next().map(|(_, a)| a.clone()),
                Some(_) => t.entries().last().map(|(_, a)| a.clone()),
                None => hit,
            },
        )
    }

    /// Runs a register action on entry `index` of a register array.
    #[cold]
    #[inline(never)]
    fn register_traced<T: RegisterValue, R>(
        &mut self,
        h: RegisterHandle<T>,
        index: u64,
        action: impl FnOnce(&mut T) -> R,
    ) -> Result<R, AccessError> {
        let now = self.now;
        self.objects.claim(now, h.id)?;
        let Objects { slots, trace, .. } = &mut *self.objects;
        let slot = &mut slots[h.id.index()];
        let Storage::Register(r) = &mut slot.storage else {
            return Err(AccessError::WrongHandle);
        };
        let Some(r) = r.as_any_mut().downcast_mut::<RegisterArray<T>>() else {
            return Err(AccessError::WrongHandle);
        };
        let Some(tr) = trace.as_deref_mut() else {
            return match r.execute(index, action) {
                Ok(v) => Ok(v),
                Err(e) => Err(self.objects.index_error(now, h.id, e)),
            };
        };
        // Traced: remember the entry, run the action (on another stored
        // value if this access is the one perturbed), fingerprint the index
        // and the value the action leaves.
        let before = r.get(index).ok().map(RegisterValue::to_u64);
        let new = |r: &RegisterArray<T>| r.get(index).map_or(u64::MAX, RegisterValue::to_u64);
        let fp = |v: u64| trace::fingerprint(&[&index.to_le_bytes(), &v.to_le_bytes()]);
        if let Some(b) = before {
            tr.undo.push(Undo::Register(h.id.index(), index, b));
        }
        let result = match tr.perturb {
            Some((at, mode)) if at + 1 == tr.accesses.len() && mode < trace::REGISTER_MODES => {
                let seen = T::from_u64(trace::perturb_register(before.unwrap_or(0), mode));
                let out = r.execute(index, |v| {
                    *v = seen;
                    action(v)
                });
                tr.finish(fp(new(r)), trace::REGISTER_MODES);
                out
            }
            _ => {
                let out = r.execute(index, action);
                tr.finish(fp(new(r)), trace::REGISTER_MODES);
                out
            }
        };
        match result {
            Ok(v) => Ok(v),
            Err(e) => Err(self.objects.index_error(now, h.id, e)),
        }
    }

    /// Counts a packet of `bytes` bytes in entry `index` of a counter array.
    #[cold]
    #[inline(never)]
    fn count_traced(&mut self, h: Handle, index: u64, bytes: u64) -> Result<(), AccessError> {
        let now = self.now;
        self.objects.claim(now, h.0)?;
        let Objects { slots, trace, .. } = &mut *self.objects;
        let slot = &mut slots[h.0.index()];
        let Storage::Counter(c) = &mut slot.storage else {
            return Err(AccessError::WrongHandle);
        };
        if let Some(tr) = trace.as_deref_mut() {
            if let Ok(v) = c.read(index) {
                tr.undo.push(Undo::Counter(h.0.index(), index, v));
            }
            let fp = trace::fingerprint(&[&index.to_le_bytes(), &bytes.to_le_bytes()]);
            tr.finish(fp, 0);
        }
        c.count(index, bytes)
            .map_err(|e| self.objects.index_error(now, h.0, e))
    }

    /// Meters a packet of `bytes` bytes with meter `index`; `pre_color` makes
    /// it colour-aware.
    #[cold]
    #[inline(never)]
    fn meter_traced(
        &mut self,
        h: Handle,
        index: u64,
        bytes: u64,
        pre_color: Option<Color>,
    ) -> Result<Color, AccessError> {
        let now = self.now;
        self.objects.claim(now, h.0)?;
        let Objects { slots, trace, .. } = &mut *self.objects;
        let slot = &mut slots[h.0.index()];
        let Storage::Meter(m) = &mut slot.storage else {
            return Err(AccessError::WrongHandle);
        };
        let mut perturb = None;
        if let Some(tr) = trace.as_deref_mut() {
            if let Ok(before) = m.get(index) {
                tr.undo
                    .push(Undo::Meter(h.0.index(), index, before.cloned()));
            }
            let pre = pre_color.map_or(0u8, |c| c as u8 + 1);
            let fp = trace::fingerprint(&[&index.to_le_bytes(), &bytes.to_le_bytes(), &[pre]]);
            perturb = tr.finish(fp, trace::METER_MODES);
        }
        m.mark(index, now, bytes, pre_color)
            .map(|c| perturb.map_or(c, |mode| trace::perturb_color(c, mode)))
            .map_err(|e| self.objects.index_error(now, h.0, e))
    }

    /// Computes a hash over `data` with a declared hash unit. Hash units have
    /// no per-packet access limit in this model (a program that needs two
    /// different hashes declares two units, and pays for both in hash bits).
    #[cold]
    #[inline(never)]
    fn hash_traced(&mut self, h: Handle, data: &[u8]) -> Result<u64, AccessError> {
        let unit = match self.objects.slots.get(h.0.index()).map(|s| &s.storage) {
            Some(Storage::Hash(u)) => *u,
            _ => return Err(AccessError::WrongHandle),
        };
        let out = unit.hash(data);
        let Some(tr) = self.objects.trace.as_deref_mut() else {
            return Ok(out);
        };
        // Traced like an access, though never refused (no per-pass limit).
        tr.push(h.0.index(), None);
        Ok(
            match tr.finish(trace::fingerprint(&[data]), trace::HASH_MODES) {
                Some(mode) => trace::perturb_hash(out, unit.output_bits(), mode),
                None => out,
            },
        )
    }

    /// Whether this data path may write its own tables (a CPU data path).
    pub fn can_write_tables(&self) -> bool {
        self.objects.cpu
    }

    fn refuse_write(&mut self, id: ObjectId) -> AccessError {
        let e = AccessError::ReadOnlyTable {
            object: self.objects.name(id).to_string(),
        };
        if self.objects.violations.len() < MAX_RECORDED_VIOLATIONS {
            self.objects.violations.push(Violation {
                at: self.now,
                error: e.clone(),
            });
        }
        e
    }

    /// Adds a table entry from the data plane: only on a CPU data path
    /// ([`DataPlane::can_write_tables`]); elsewhere it is a recorded
    /// violation. `Ok(Err(_))` is the table refusing (full, duplicate).
    pub fn table_insert<A: Clone + 'static>(
        &mut self,
        h: TableHandle<A>,
        spec: MatchSpec,
        action: A,
    ) -> Result<Result<(), TableError>, AccessError> {
        if !self.objects.cpu {
            return Err(self.refuse_write(h.id));
        }
        let now = self.now;
        let t = self.objects.table_mut(h).ok_or(AccessError::WrongHandle)?;
        Ok(t.insert(spec, action, now))
    }

    /// Deletes a table entry from the data plane (CPU data path only, as
    /// [`DataPlane::table_insert`]).
    pub fn table_delete<A: Clone + 'static>(
        &mut self,
        h: TableHandle<A>,
        spec: &MatchSpec,
    ) -> Result<Result<(), TableError>, AccessError> {
        if !self.objects.cpu {
            return Err(self.refuse_write(h.id));
        }
        let t = self.objects.table_mut(h).ok_or(AccessError::WrongHandle)?;
        Ok(t.delete(spec).map(|_| ()))
    }

    /// A random number, as the `Random` extern gives (from the device's
    /// seeded RNG, so runs are reproducible).
    pub fn random(&mut self) -> u32 {
        rand::RngCore::next_u32(self.rng)
    }
}
