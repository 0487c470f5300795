//! Composite programs: several blocks on one switch, as one [`Program`].
//!
//! A block is any program, loaded under an instance name ([`Block::new`]):
//! its objects are declared in a namespace (`nat/nat_out`), its metadata and
//! digests keep their own types (boxed in the composite's), and its control
//! handler sees only its own events. The framework, not the blocks, routes
//! every control event back to the block it belongs to:
//!
//! - digests carry the index of the block that sent them;
//! - punt reason codes are rewritten to composite codes on the way up and
//!   back on the way in ([`PuntCodes`]);
//! - request ids (register reads, failed operations) carry the block in
//!   their top bits (the block's [`ControlPlane`] tags them);
//! - timer tokens are swapped for composite tokens and back ([`TimerTokens`]);
//! - idle timeouts go to the block that declared the table;
//! - a message addressed to a block ([`addressed`]) goes to that block;
//!   start, port status and unaddressed messages go to every block, in
//!   order;
//! - a control session belongs to the block that first sends on it: the
//!   session's messages and refusals go to that block (to every block
//!   while no block has sent on it); its up and reset events go to every
//!   block, so that a block can claim a session by greeting its peer when
//!   it comes up.
//!
//! Two ways to run blocks:
//!
//! - [`Composite::pipeline`]: every block runs on every packet, in order
//!   (one app built from parts; a later block sees what earlier ones did).
//! - [`Composite::classified`]: several apps behind a classifier
//!   ([`classifier`]): the `classify` table says which app a packet belongs
//!   to and only that app runs, in ingress and (the choice is bridged
//!   metadata) in egress. A packet no rule matches goes to the default app
//!   if one is configured, else it is dropped and counted
//!   (`composite/unclassified`). A packet the control plane sends straight
//!   to a port ([`crate::PacketOutDest::Port`]) was never classified and
//!   runs no block's egress.
//! - [`Composite::selected`]: several apps behind a selector outside the
//!   composite: a program that wraps it picks the app of each packet
//!   ([`Composite::select`]) and runs the composite on it
//!   ([`crate::PacketCtx::nest`]); a packet with no app selected runs no
//!   block. ExoPlane's runtime does this: its own classifier, flow manager
//!   and shim handling decide whether and which app runs.
//!
//! The hardware rules hold across the composite because the blocks share
//! one object store and one placement: one access per object per pass,
//! every block's objects placed together, each after the classifier.

pub mod classifier;
mod erased;

use std::collections::BTreeMap;

use crate::control::{ControlPlane, REQUEST_SEQ_BITS};
use crate::device::{ControlMessage, SessionEvent, SessionId};
use crate::objects::{
    AccessError, BlockSpan, DataPlane, Declare, DeclareError, ObjectId, TableDecl, TableHandle,
};
use crate::placement::Gress;
use crate::program::{
    CheckHints, ControlEvent, Destination, KnownViolation, PacketCtx, ParseError, Program,
    ProgramReport,
};
use crate::table::MatchKind;

pub use classifier::{ClassifyRule, ClassifyRuleError};
use erased::{AnyDigest, ErasedBlock, Typed};
pub use erased::{BlockDigest, BlockMeta, CompositeMeta};

use classifier::{classify_key, CLASSIFY_ENTRIES, CLASSIFY_KEY_BYTES};

/// Message kind of a message addressed to one block ([`addressed`]).
pub const MSG_TO_BLOCK: u32 = 0xb10c_0001;

/// `message` for block `block` of a composite: an envelope the composite
/// opens (body: block-name length, name, inner kind big-endian, inner body).
/// None if the name is longer than 255 bytes.
pub fn addressed(block: &str, message: ControlMessage) -> Option<ControlMessage> {
    let len = u8::try_from(block.len()).ok()?;
    let mut body = Vec::with_capacity(1 + block.len() + 4 + message.body.len());
    body.push(len);
    body.extend_from_slice(block.as_bytes());
    body.extend_from_slice(&message.kind.to_be_bytes());
    body.extend_from_slice(&message.body);
    Some(ControlMessage {
        kind: MSG_TO_BLOCK,
        body,
    })
}

/// Opens an [`addressed`] envelope: the block name and the inner message.
fn open_envelope(body: &[u8]) -> Option<(&str, ControlMessage)> {
    let (&len, rest) = body.split_first()?;
    let name = std::str::from_utf8(rest.get(..usize::from(len))?).ok()?;
    let rest = &rest[usize::from(len)..];
    let kind = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
    Some((
        name,
        ControlMessage {
            kind,
            body: rest[4..].to_vec(),
        },
    ))
}

/// A program loaded as a block of a composite, under an instance name.
pub struct Block(Box<dyn ErasedBlock>);

impl Block {
    /// `program` as block `name` (its objects are declared as `name/...`).
    pub fn new<P: Program>(name: &str, program: P) -> Block
    where
        P::Meta: 'static,
        P::Digest: 'static,
    {
        Block(Box::new(Typed {
            name: name.to_string(),
            program,
        }))
    }

    /// The instance name.
    pub fn name(&self) -> &str {
        self.0.name()
    }
}

impl Clone for Block {
    fn clone(&self) -> Self {
        Block(self.0.clone_box())
    }
}

/// A composite that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompositeError {
    /// No blocks, or more than a composite can index.
    #[error("a composite needs 1 to {max} blocks, got {got}")]
    BlockCount {
        /// Blocks given.
        got: usize,
        /// The most allowed.
        max: usize,
    },
    /// Two blocks with one name.
    #[error("two blocks are named {0:?}")]
    DuplicateBlock(String),
    /// A classifier rule or the default names no block.
    #[error("the classifier names app {app:?}, which is not one of the blocks ({known})")]
    UnknownApp {
        /// The name given.
        app: String,
        /// The blocks.
        known: String,
    },
    /// More rules than the `classify` table holds.
    #[error("{0} classifier rules; the classify table holds {CLASSIFY_ENTRIES}")]
    TooManyRules(usize),
}

/// Punt reason codes of blocks, as composite codes: `(block, reason)` pairs
/// numbered in order of first use.
#[derive(Debug, Clone, Default)]
struct PuntCodes {
    pairs: Vec<(u16, u16)>,
    codes: BTreeMap<(u16, u16), u16>,
}

impl PuntCodes {
    fn code(&mut self, block: u16, reason: u16) -> Option<u16> {
        if let Some(&c) = self.codes.get(&(block, reason)) {
            return Some(c);
        }
        let c = u16::try_from(self.pairs.len()).ok()?;
        self.pairs.push((block, reason));
        self.codes.insert((block, reason), c);
        Some(c)
    }

    fn pair(&self, code: u16) -> Option<(u16, u16)> {
        self.pairs.get(usize::from(code)).copied()
    }
}

/// Timer tokens of blocks, as composite tokens: each timer fires once, so
/// an entry lives from `set_timer` to its firing.
#[derive(Debug, Clone, Default)]
struct TimerTokens {
    next: u64,
    live: BTreeMap<u64, (u16, u64)>,
}

/// The classifier of a classified composite.
#[derive(Debug, Clone)]
struct Classifier {
    /// Rules with their app's block index, highest priority first.
    rules: Vec<(ClassifyRule, u16)>,
    default: Option<u16>,
    table: Option<TableHandle<u16>>,
}

/// What the composite itself counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompositeCounters {
    /// Packets no classifier rule matched, with no default app (dropped).
    pub unclassified: u64,
    /// Messages addressed to no block of this composite (or malformed
    /// envelopes), dropped.
    pub misaddressed_messages: u64,
    /// Packets the chosen app's parser refused (dropped).
    pub block_parse_drops: u64,
    /// Punts dropped because 65,536 distinct (block, reason) pairs were
    /// already in use.
    pub punt_code_overflow: u64,
    /// Classifier entries the switch refused.
    pub classify_install_failures: u64,
    /// Packets classified to each block, by block index (classified
    /// composites).
    pub classified: Vec<u64>,
}

/// Blocks run as one program. See the module documentation.
#[derive(Clone)]
pub struct Composite {
    name: String,
    blocks: Vec<Block>,
    classifier: Option<Classifier>,
    spans: Vec<BlockSpan>,
    punts: PuntCodes,
    timers: TimerTokens,
    /// Which block owns each control session (the first to send on it).
    session_owners: BTreeMap<SessionId, u16>,
    counters: CompositeCounters,
    /// Apps chosen from outside ([`Composite::selected`]).
    selected: bool,
}

/// The block name of a classified composite's own objects (the `classify`
/// table); no app may take it.
pub const CLASSIFIER_BLOCK: &str = "classifier";

/// The most blocks a composite takes (block tags in request ids are 16 bits,
/// one value kept for the composite itself).
pub const MAX_BLOCKS: usize = u16::MAX as usize - 1;

impl Composite {
    fn build(name: &str, blocks: Vec<Block>, classifier: Option<Classifier>) -> Composite {
        let classified = match classifier {
            Some(_) => vec![0; blocks.len()],
            None => Vec::new(),
        };
        Composite {
            name: name.to_string(),
            blocks,
            classifier,
            spans: Vec::new(),
            punts: PuntCodes::default(),
            timers: TimerTokens::default(),
            session_owners: BTreeMap::new(),
            counters: CompositeCounters {
                classified,
                ..CompositeCounters::default()
            },
            selected: false,
        }
    }

    fn check_blocks(blocks: &[Block]) -> Result<(), CompositeError> {
        if blocks.is_empty() || blocks.len() > MAX_BLOCKS {
            return Err(CompositeError::BlockCount {
                got: blocks.len(),
                max: MAX_BLOCKS,
            });
        }
        for (i, b) in blocks.iter().enumerate() {
            if blocks[..i].iter().any(|o| o.name() == b.name()) {
                return Err(CompositeError::DuplicateBlock(b.name().to_string()));
            }
        }
        Ok(())
    }

    /// Blocks that all run on every packet, in order.
    pub fn pipeline(name: &str, blocks: Vec<Block>) -> Result<Composite, CompositeError> {
        Self::check_blocks(&blocks)?;
        Ok(Self::build(name, blocks, None))
    }

    /// Apps behind a classifier: `rules` (earlier wins) say which block a
    /// packet belongs to; a packet no rule matches goes to `default`, or is
    /// dropped if there is none.
    pub fn classified(
        name: &str,
        blocks: Vec<Block>,
        rules: Vec<ClassifyRule>,
        default: Option<&str>,
    ) -> Result<Composite, CompositeError> {
        Self::check_blocks(&blocks)?;
        if blocks.iter().any(|b| b.name() == CLASSIFIER_BLOCK) {
            return Err(CompositeError::DuplicateBlock(CLASSIFIER_BLOCK.into()));
        }
        if rules.len() > CLASSIFY_ENTRIES {
            return Err(CompositeError::TooManyRules(rules.len()));
        }
        let index = |app: &str| {
            blocks
                .iter()
                .position(|b| b.name() == app)
                .map(|i| i as u16)
                .ok_or_else(|| CompositeError::UnknownApp {
                    app: app.to_string(),
                    known: blocks
                        .iter()
                        .map(Block::name)
                        .collect::<Vec<_>>()
                        .join(", "),
                })
        };
        let rules = rules
            .into_iter()
            .map(|r| index(&r.app).map(|i| (r, i)))
            .collect::<Result<Vec<_>, _>>()?;
        let default = default.map(index).transpose()?;
        let classifier = Classifier {
            rules,
            default,
            table: None,
        };
        Ok(Self::build(name, blocks, Some(classifier)))
    }

    /// Apps whose choice is made outside: only the block [`Composite::select`]
    /// names runs on a packet (in ingress and, the choice being bridged
    /// metadata, in egress); a packet with none selected runs no block.
    pub fn selected(name: &str, blocks: Vec<Block>) -> Result<Composite, CompositeError> {
        Self::check_blocks(&blocks)?;
        let mut c = Self::build(name, blocks, None);
        c.selected = true;
        c.counters.classified = vec![0; c.blocks.len()];
        Ok(c)
    }

    /// Chooses block `app` for the packet whose metadata is `meta` (a
    /// [`Composite::selected`] composite, before its ingress): makes the
    /// block's metadata and parses `header` into it. An error if this is
    /// not a selected composite, `app` is no block, one is already chosen,
    /// or the block's parser refuses the header (counted).
    pub fn select(
        &mut self,
        meta: &mut CompositeMeta,
        app: u16,
        header: &[u8],
    ) -> Result<(), ParseError> {
        if !self.selected || meta.app.is_some() {
            return Err(ParseError(
                "composite: not a selected composite, or chosen twice",
            ));
        }
        let block = &self
            .blocks
            .get(usize::from(app))
            .ok_or(ParseError("composite: no such block"))?
            .0;
        let mut m = block.new_meta();
        if let Err(e) = block.parse(Gress::Ingress, header, &mut m) {
            self.counters.block_parse_drops += 1;
            return Err(e);
        }
        meta.app = Some(app);
        meta.blocks = vec![(app, m)];
        if let Some(n) = self.counters.classified.get_mut(usize::from(app)) {
            *n += 1;
        }
        Ok(())
    }

    /// The index of block `name`.
    pub fn block_index(&self, name: &str) -> Option<u16> {
        self.blocks
            .iter()
            .position(|b| b.name() == name)
            .map(|i| i as u16)
    }

    /// Declares the composite with block `i`'s objects (hash units
    /// excepted) placed after `after(i)` as well: what a wrapping program
    /// decides before the block runs (ExoPlane's flow manager of that app).
    pub fn declare_after(
        &mut self,
        decl: &mut Declare,
        after: impl Fn(usize) -> Vec<ObjectId>,
    ) -> Result<(), DeclareError> {
        let mut common = Vec::new();
        if let Some(c) = &mut self.classifier {
            let table = decl.in_block(CLASSIFIER_BLOCK, &[], |d| {
                d.table::<u16>(TableDecl::new(
                    "classify",
                    MatchKind::Ternary,
                    CLASSIFY_KEY_BYTES,
                    8,
                    CLASSIFY_ENTRIES,
                ))
            })?;
            common.push(table.id());
            c.table = Some(table);
        }
        let first = decl.blocks().len();
        for (i, b) in self.blocks.iter_mut().enumerate() {
            let name = b.name().to_string();
            let mut deps = common.clone();
            deps.extend(after(i));
            decl.in_block(&name, &deps, |d| b.0.declare(d))?;
        }
        self.spans = decl.blocks()[first..].to_vec();
        Ok(())
    }

    /// The block names, in order.
    pub fn block_names(&self) -> impl Iterator<Item = &str> {
        self.blocks.iter().map(Block::name)
    }

    /// Block `name`'s program, if it is a `P`.
    pub fn block<P: Program>(&self, name: &str) -> Option<&P> {
        self.blocks
            .iter()
            .find(|b| b.name() == name)
            .and_then(|b| b.0.program().downcast_ref())
    }

    /// The block that issued control request `request` (None: the composite
    /// itself, or no such block), e.g. to split a
    /// [`crate::capture::Captured`] run by block.
    pub fn block_of_request(&self, request: u64) -> Option<&str> {
        let tag = (request >> REQUEST_SEQ_BITS) as usize;
        tag.checked_sub(1)
            .and_then(|i| self.blocks.get(i))
            .map(Block::name)
    }

    /// The block and its own reason code behind composite punt code
    /// `code` (what a wrapping program needs to decide whose control plane
    /// a punted packet is for).
    pub fn punt_origin(&self, code: u16) -> Option<(u16, u16)> {
        self.punts.pair(code)
    }

    /// The block that declared object `id` (after declaration).
    pub fn block_of_object(&self, id: ObjectId) -> Option<u16> {
        self.spans.iter().position(|s| s.owns(id)).map(|i| i as u16)
    }

    /// What the composite itself counted.
    pub fn counters(&self) -> &CompositeCounters {
        &self.counters
    }

    /// Hands `event` to block `index`, tagging its requests and swapping its
    /// timer tokens for composite ones.
    /// Hands `event`, the answer to request `request`, to the block whose
    /// tag the request id carries (none: a request of the composite's own).
    fn call_tagged(
        &mut self,
        request: u64,
        event: ControlEvent<Box<dyn AnyDigest>>,
        cp: &mut ControlPlane<'_>,
    ) {
        if let Some(i) = (request >> REQUEST_SEQ_BITS).checked_sub(1) {
            self.call(i as u16, event, cp);
        }
    }

    fn call(
        &mut self,
        index: u16,
        event: ControlEvent<Box<dyn AnyDigest>>,
        cp: &mut ControlPlane<'_>,
    ) {
        let Some(block) = self.blocks.get_mut(usize::from(index)) else {
            return;
        };
        let first_timer = cp.requests.timers.len();
        let first_session = cp.requests.sessions.len();
        block.0.control(event, &mut cp.tagged(u64::from(index) + 1));
        for (_, token) in &mut cp.requests.timers[first_timer..] {
            self.timers.next += 1;
            self.timers.live.insert(self.timers.next, (index, *token));
            *token = self.timers.next;
        }
        for (session, _) in &cp.requests.sessions[first_session..] {
            self.session_owners.entry(*session).or_insert(index);
        }
    }

    fn broadcast(&mut self, event: ControlEvent<Box<dyn AnyDigest>>, cp: &mut ControlPlane<'_>) {
        for i in 0..self.blocks.len() {
            let e = match &event {
                ControlEvent::Start => ControlEvent::Start,
                ControlEvent::PortStatus { port, up } => ControlEvent::PortStatus {
                    port: *port,
                    up: *up,
                },
                ControlEvent::Message(m) => ControlEvent::Message(m.clone()),
                ControlEvent::Session(e) => ControlEvent::Session(e.clone()),
                _ => return,
            };
            self.call(i as u16, e, cp);
        }
    }

    fn install_classifier(&mut self, cp: &mut ControlPlane<'_>) {
        let Some(c) = &self.classifier else { return };
        let Some(table) = c.table else { return };
        let n = c.rules.len() as u32;
        for (i, (rule, app)) in c.rules.iter().enumerate() {
            cp.table_add(table, rule.spec(n - i as u32), *app);
        }
    }

    /// Picks the app of a packet in its first ingress pass and makes its
    /// metadata; false: the packet is dropped.
    fn classify(
        &mut self,
        pkt: &mut PacketCtx<CompositeMeta, BlockDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<bool, AccessError> {
        let Some(c) = &self.classifier else {
            return Ok(true);
        };
        if pkt.meta.app.is_some() {
            return Ok(true);
        }
        let Some(table) = c.table else {
            return Ok(false);
        };
        let key = classify_key(pkt.ingress_port(), pkt.header());
        let app = match dp.lookup(table, &key)?.or(c.default) {
            Some(app) => app,
            None => {
                self.counters.unclassified += 1;
                return Ok(false);
            }
        };
        let block = &self.blocks[usize::from(app)].0;
        let mut meta = block.new_meta();
        if block
            .parse(Gress::Ingress, pkt.header(), &mut meta)
            .is_err()
        {
            self.counters.block_parse_drops += 1;
            return Ok(false);
        }
        pkt.meta.app = Some(app);
        pkt.meta.blocks = vec![(app, meta)];
        if let Some(n) = self.counters.classified.get_mut(usize::from(app)) {
            *n += 1;
        }
        Ok(true)
    }

    fn run(
        &mut self,
        gress: Gress,
        pkt: &mut PacketCtx<CompositeMeta, BlockDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let mut metas = std::mem::take(&mut pkt.meta.blocks);
        let mut result = Ok(());
        for (index, meta) in &mut metas {
            let before = pkt.destination();
            result = self.blocks[usize::from(*index)]
                .0
                .run(gress, *index, pkt, meta, dp);
            if result.is_err() {
                break;
            }
            if let (Destination::Cpu(reason), true) =
                (pkt.destination(), pkt.destination() != before)
            {
                match self.punts.code(*index, reason) {
                    Some(code) => pkt.to_cpu(code),
                    None => {
                        self.counters.punt_code_overflow += 1;
                        pkt.drop_packet();
                    }
                }
            }
        }
        pkt.meta.blocks = metas;
        result
    }
}

impl Program for Composite {
    type Meta = CompositeMeta;
    type Digest = BlockDigest;

    fn name(&self) -> &str {
        &self.name
    }

    fn declare(&mut self, decl: &mut Declare) -> Result<(), DeclareError> {
        self.declare_after(decl, |_| Vec::new())
    }

    fn parse(
        &self,
        gress: Gress,
        header: &[u8],
        meta: &mut CompositeMeta,
    ) -> Result<(), ParseError> {
        // A pipeline's blocks all parse from the first pass on; a classified
        // packet's app parses once the classifier has chosen it (in ingress).
        if self.classifier.is_none() && !self.selected && meta.blocks.is_empty() {
            meta.blocks = (0..self.blocks.len())
                .map(|i| (i as u16, self.blocks[i].0.new_meta()))
                .collect();
        }
        for (index, m) in &mut meta.blocks {
            self.blocks[usize::from(*index)].0.parse(gress, header, m)?;
        }
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<CompositeMeta, BlockDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        if !self.classify(pkt, dp)? {
            pkt.drop_packet();
            return Ok(());
        }
        self.run(Gress::Ingress, pkt, dp)
    }

    fn egress(
        &mut self,
        pkt: &mut PacketCtx<CompositeMeta, BlockDigest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        self.run(Gress::Egress, pkt, dp)
    }

    fn control(&mut self, event: ControlEvent<BlockDigest>, cp: &mut ControlPlane<'_>) {
        match event {
            ControlEvent::Start => {
                self.install_classifier(cp);
                self.broadcast(ControlEvent::Start, cp);
            }
            ControlEvent::Digest(d) => self.call(d.block, ControlEvent::Digest(d.value), cp),
            ControlEvent::PacketIn {
                port,
                reason,
                frame,
            } => {
                if let Some((block, reason)) = self.punts.pair(reason) {
                    let e = ControlEvent::PacketIn {
                        port,
                        reason,
                        frame,
                    };
                    self.call(block, e, cp);
                }
            }
            ControlEvent::IdleTimeout { table, spec } => {
                if let Some(i) = self.spans.iter().position(|s| s.owns(table)) {
                    self.call(i as u16, ControlEvent::IdleTimeout { table, spec }, cp);
                }
            }
            // Read results go back to the block whose tag the request id
            // carries.
            ControlEvent::RegisterValues { request, values } => {
                let e = ControlEvent::RegisterValues { request, values };
                self.call_tagged(request, e, cp);
            }
            ControlEvent::EntryActivity {
                request,
                table,
                spec,
                hit,
                idle,
            } => {
                let e = ControlEvent::EntryActivity {
                    request,
                    table,
                    spec,
                    hit,
                    idle,
                };
                self.call_tagged(request, e, cp);
            }
            ControlEvent::CounterValues {
                request,
                first,
                values,
            } => {
                let e = ControlEvent::CounterValues {
                    request,
                    first,
                    values,
                };
                self.call_tagged(request, e, cp);
            }
            ControlEvent::OpFailed { request, error } => {
                match (request >> REQUEST_SEQ_BITS).checked_sub(1) {
                    Some(i) => self.call(i as u16, ControlEvent::OpFailed { request, error }, cp),
                    None => self.counters.classify_install_failures += 1,
                }
            }
            ControlEvent::Timer { token } => {
                if let Some((block, token)) = self.timers.live.remove(&token) {
                    self.call(block, ControlEvent::Timer { token }, cp);
                }
            }
            ControlEvent::Message(m) if m.kind == MSG_TO_BLOCK => {
                let target = open_envelope(&m.body).and_then(|(name, inner)| {
                    let i = self.blocks.iter().position(|b| b.name() == name)?;
                    Some((i as u16, inner))
                });
                match target {
                    Some((i, inner)) => self.call(i, ControlEvent::Message(inner), cp),
                    None => self.counters.misaddressed_messages += 1,
                }
            }
            ControlEvent::Message(m) => self.broadcast(ControlEvent::Message(m), cp),
            ControlEvent::PortStatus { port, up } => {
                self.broadcast(ControlEvent::PortStatus { port, up }, cp)
            }
            ControlEvent::Session(e) => {
                let owner = match e {
                    SessionEvent::Message { .. } | SessionEvent::Refused { .. } => {
                        self.session_owners.get(&e.session()).copied()
                    }
                    SessionEvent::Up { .. } | SessionEvent::Reset { .. } => None,
                };
                match owner {
                    Some(i) => self.call(i, ControlEvent::Session(e), cp),
                    None => self.broadcast(ControlEvent::Session(e), cp),
                }
            }
        }
    }

    fn report(&self) -> ProgramReport {
        let mut r = ProgramReport::default();
        let c = &self.counters;
        for (name, v) in [
            ("unclassified", c.unclassified),
            ("block_parse_drops", c.block_parse_drops),
            ("punt_code_overflow", c.punt_code_overflow),
            ("classify_install_failures", c.classify_install_failures),
            ("misaddressed_messages", c.misaddressed_messages),
        ] {
            r.counters.push((format!("composite/{name}"), v));
        }
        for (b, n) in self.blocks.iter().zip(&c.classified) {
            r.counters
                .push((format!("composite/classified_{}", b.name()), *n));
        }
        for b in &self.blocks {
            let br = b.0.report();
            let name = b.name();
            r.counters.extend(
                br.counters
                    .into_iter()
                    .map(|(k, v)| (format!("{name}/{k}"), v)),
            );
            r.series.extend(
                br.series
                    .into_iter()
                    .map(|(k, v)| (format!("{name}/{k}"), v)),
            );
        }
        r
    }

    /// Every block's samples, and its known violations under the block's
    /// object names.
    fn check_hints(&self) -> CheckHints {
        let mut h = CheckHints::default();
        for b in &self.blocks {
            let bh = b.0.check_hints();
            h.samples.extend(bh.samples);
            h.known.extend(bh.known.into_iter().map(|k| KnownViolation {
                object: format!("{}/{}", b.name(), k.object),
                reason: k.reason,
            }));
        }
        h
    }
}
