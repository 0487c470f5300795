//! The switch program API: what a program supplies and what it sees of a
//! packet.
//!
//! A program declares its objects ([`Program::declare`]), parses the first
//! bytes of each packet ([`Program::parse`]), runs ingress and egress logic
//! over a [`PacketCtx`] and the [`DataPlane`] (its objects, under the
//! hardware's access rules), and handles control-plane events
//! ([`Program::control`]) through a [`ControlPlane`] whose writes take effect
//! after the modelled latency. The same program loads onto any profile.

pub use crate::control::ControlEvent;
use crate::control::ControlPlane;
use crate::device::{Nanos, PortId};
pub use crate::intrinsic::PacketKind;
use crate::objects::{AccessError, DataPlane, Declare, DeclareError};
use crate::placement::Gress;

/// Extra bytes `PacketCtx::insert_header` reserves: a RoCE pad (at most 3)
/// and the 4-byte ICRC that `append_roce_icrc` may add next.
const ICRC_TRAILER_ROOM: usize = 8;

/// A program could not parse a packet: the switch counts it and drops it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("parse error: {0}")]
pub struct ParseError(pub &'static str);

impl From<inca_wire::WireError> for ParseError {
    fn from(_: inca_wire::WireError) -> Self {
        ParseError("malformed header")
    }
}

/// A switch program. See the module documentation.
///
/// `Clone` is how a crash is modelled: the switch keeps the program as it
/// was loaded and restarts from a copy of it, so control-plane software state
/// is lost along with the data-plane state.
pub trait Program: Clone + 'static {
    /// Per-packet metadata: parsed header fields and values carried from
    /// ingress to egress (bridged metadata). A fresh default at arrival.
    type Meta: Default + Clone;
    /// What the data plane sends the control plane in a digest.
    type Digest: Clone + std::fmt::Debug;

    /// The program's name, for reports.
    fn name(&self) -> &str;

    /// Declares the program's objects and keeps their handles.
    fn declare(&mut self, decl: &mut Declare) -> Result<(), DeclareError>;

    /// Parses the first bytes of a packet (at most the profile's parse depth)
    /// into `meta`. Runs before ingress and again before egress (Tofino has
    /// an egress parser too). An error drops the packet and is counted.
    fn parse(&self, gress: Gress, header: &[u8], meta: &mut Self::Meta) -> Result<(), ParseError>;

    /// Ingress logic. Set the packet's destination with
    /// [`PacketCtx::forward`] and friends; a packet left without one is
    /// dropped. An error drops the packet and is recorded as a violation.
    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<Self::Meta, Self::Digest>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError>;

    /// Egress logic, run when the packet leaves its queue.
    fn egress(
        &mut self,
        _pkt: &mut PacketCtx<Self::Meta, Self::Digest>,
        _dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        Ok(())
    }

    /// Handles a control-plane event.
    fn control(&mut self, _event: ControlEvent<Self::Digest>, _cp: &mut ControlPlane<'_>) {}

    /// Measurements the program keeps beyond the switch's own counters
    /// (a simulator node appends them to its report). Default: none.
    fn report(&self) -> ProgramReport {
        ProgramReport::default()
    }

    /// What the load-time check ([`crate::loadcheck`]) should know beyond
    /// its generic packets: frames that reach this program's deeper parser
    /// branches, and findings accepted with a reason. Default: nothing.
    fn check_hints(&self) -> CheckHints {
        CheckHints::default()
    }
}

/// A program's hints for the load-time check ([`Program::check_hints`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckHints {
    /// Frames to exercise besides the generic ones: (ingress port, frame).
    pub samples: Vec<(PortId, Vec<u8>)>,
    /// Findings known and accepted (still reported, not refused).
    pub known: Vec<KnownViolation>,
}

/// A finding of the load-time check that a program accepts, with why (a
/// spec deviation, a fix pending elsewhere).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownViolation {
    /// The object the finding is about (the one reached twice, or the
    /// dependent one), as declared (a composite prefixes its block's name).
    pub object: String,
    /// Why it is accepted.
    pub reason: String,
}

impl KnownViolation {
    /// A known violation about `object`, accepted because of `reason`.
    pub fn new(object: &str, reason: &str) -> Self {
        KnownViolation {
            object: object.to_string(),
            reason: reason.to_string(),
        }
    }
}

/// Extra counters and time series a program reports ([`Program::report`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgramReport {
    /// Named counters.
    pub counters: Vec<(String, u64)>,
    /// Named time series.
    pub series: Vec<(String, ProgramSeries)>,
}

/// One value per time bin from time 0 (a count, or the largest value seen).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgramSeries {
    /// Width of a bin, ns.
    pub bin: Nanos,
    /// One value per bin.
    pub values: Vec<u64>,
}

/// What the program decided to do with a packet in ingress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// Drop it (the default).
    Drop,
    /// Queue it for this egress port.
    Port(PortId),
    /// Replicate it to a multicast group.
    Multicast(u16),
    /// Punt it to the control plane with a reason code.
    Cpu(u16),
    /// Send it around for another ingress pass.
    Recirculate,
    /// Send it back to the start of ingress (once).
    Resubmit,
}

/// A packet as the program sees it in one pipeline pass.
pub struct PacketCtx<M, D> {
    pub(crate) frame: Vec<u8>,
    pub(crate) parse_depth: usize,
    /// The program's metadata for this packet.
    pub meta: M,
    pub(crate) ingress_port: PortId,
    pub(crate) ingress_time: Nanos,
    pub(crate) kind: PacketKind,
    pub(crate) destination: Destination,
    pub(crate) mirror: Option<u16>,
    /// Set by [`PacketCtx::mirror_loop`]: a mirror copy may mirror again.
    pub(crate) mirror_loop: bool,
    pub(crate) digest: Option<D>,
    pub(crate) egress: EgressMeta,
}

/// Intrinsic metadata only egress sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EgressMeta {
    /// The port the packet leaves on.
    pub port: PortId,
    /// Bytes in the port's queue when the packet was enqueued (before it).
    pub enq_queue_bytes: u64,
    /// Time the packet spent in the queue.
    pub queue_delay: Nanos,
    /// Replica id of a multicast copy (0 for unicast).
    pub rid: u16,
}

impl<M, D> PacketCtx<M, D> {
    pub(crate) fn new(
        frame: Vec<u8>,
        parse_depth: usize,
        meta: M,
        port: PortId,
        now: Nanos,
        kind: PacketKind,
    ) -> Self {
        PacketCtx {
            frame,
            parse_depth,
            meta,
            ingress_port: port,
            ingress_time: now,
            kind,
            destination: Destination::Drop,
            mirror: None,
            mirror_loop: false,
            digest: None,
            egress: EgressMeta::default(),
        }
    }

    /// The header window: the first bytes of the frame, at most the parse
    /// depth. Logic cannot see the payload beyond it.
    pub fn header(&self) -> &[u8] {
        let n = self.frame.len().min(self.parse_depth);
        &self.frame[..n]
    }

    /// The header window, writable (what the deparser emits).
    pub fn header_mut(&mut self) -> &mut [u8] {
        let n = self.frame.len().min(self.parse_depth);
        &mut self.frame[..n]
    }

    /// Length of the whole frame in bytes.
    pub fn len(&self) -> usize {
        self.frame.len()
    }

    /// True for an empty frame.
    pub fn is_empty(&self) -> bool {
        self.frame.is_empty()
    }

    /// Inserts `bytes` at offset `at` of the header window (encapsulation).
    /// Returns false if `at` is beyond the window.
    pub fn insert_header(&mut self, at: usize, bytes: &[u8]) -> bool {
        if at > self.frame.len().min(self.parse_depth) {
            return false;
        }
        // Grow, move the tail up, copy the header in: two memmoves. (A
        // `splice` with a byte iterator cost TEA's lookup path 12% of its
        // instructions; docs/performance.md.) The room reserved includes a
        // RoCE pad and ICRC, the trailer an encapsulated frame often gets
        // next, so one allocation serves both.
        let (old, n) = (self.frame.len(), bytes.len());
        self.frame.reserve(n + ICRC_TRAILER_ROOM);
        self.frame.resize(old + n, 0);
        self.frame.copy_within(at..old, at + n);
        self.frame[at..at + n].copy_from_slice(bytes);
        true
    }

    /// Removes `len` bytes at offset `at` of the header window
    /// (decapsulation). Returns false if the range is beyond the window.
    pub fn remove_header(&mut self, at: usize, len: usize) -> bool {
        let end = at.saturating_add(len);
        if end > self.frame.len().min(self.parse_depth) {
            return false;
        }
        self.frame.drain(at..end);
        true
    }

    /// Deparser: cuts the frame to at most `len` bytes (drops a trailer such
    /// as a RoCE pad and ICRC, or a payload the program does not emit).
    pub fn truncate(&mut self, len: usize) {
        self.frame.truncate(len);
    }

    /// The deparser's RoCE-ICRC extern (TEA spec §9.6): appends `pad` zero
    /// bytes and the ICRC of the RoCEv2 packet the frame now holds (IPv4
    /// lengths must already count both). A real Tofino cannot CRC a payload;
    /// this models the capability the TEA spec assumes. Returns false (frame
    /// unchanged apart from the pad) if the frame is not IPv4/UDP/RoCEv2.
    pub fn append_roce_icrc(&mut self, pad: usize) -> bool {
        self.frame.resize(self.frame.len() + pad, 0);
        let len = self.frame.len();
        self.frame.extend_from_slice(&[0; 4]);
        if inca_wire::icrc::fill_frame_icrc(&mut self.frame).is_err() {
            self.frame.truncate(len);
            return false;
        }
        true
    }

    /// The port the packet arrived on.
    pub fn ingress_port(&self) -> PortId {
        self.ingress_port
    }

    /// When the packet entered this pipeline (ingress timestamp).
    pub fn ingress_time(&self) -> Nanos {
        self.ingress_time
    }

    /// Where the packet came from.
    pub fn kind(&self) -> PacketKind {
        self.kind
    }

    /// Egress intrinsic metadata (meaningful in egress only).
    pub fn egress_meta(&self) -> EgressMeta {
        self.egress
    }

    /// The destination set so far.
    pub fn destination(&self) -> Destination {
        self.destination
    }

    /// Sends the packet to egress port `port`.
    pub fn forward(&mut self, port: PortId) {
        self.destination = Destination::Port(port);
    }

    /// Replicates the packet to multicast group `group`.
    pub fn multicast(&mut self, group: u16) {
        self.destination = Destination::Multicast(group);
    }

    /// Drops the packet.
    pub fn drop_packet(&mut self) {
        self.destination = Destination::Drop;
    }

    /// Punts the packet to the control plane with reason code `reason`.
    pub fn to_cpu(&mut self, reason: u16) {
        self.destination = Destination::Cpu(reason);
    }

    /// Sends the packet around for another ingress pass.
    pub fn recirculate(&mut self) {
        self.destination = Destination::Recirculate;
    }

    /// Sends the packet back to the start of ingress. Allowed once per
    /// packet; a second resubmit drops it. Unlike Tofino, which resubmits the
    /// original packet, this model keeps header changes made in the
    /// resubmitting pass; programs carry what they need in metadata.
    pub fn resubmit(&mut self) {
        self.destination = Destination::Resubmit;
    }

    /// Mirrors a copy of the packet through mirror session `session` (in
    /// ingress: a copy of the packet as ingress leaves it; in egress: as
    /// egress leaves it). The session decides the port and truncation.
    pub fn mirror(&mut self, session: u16) {
        self.mirror = Some(session);
    }

    /// Like [`PacketCtx::mirror`], but also allowed on a mirror copy in
    /// egress: an egress-to-egress mirror loop, as RedPlane's retransmission
    /// loop uses on Tofino. The program bounds the loop itself (it stops
    /// re-mirroring once the copy is acknowledged or has given up).
    pub fn mirror_loop(&mut self, session: u16) {
        self.mirror = Some(session);
        self.mirror_loop = true;
    }

    /// Sends a digest to the control plane (one per packet pass; a later
    /// call replaces an earlier one, as on Tofino one digest type fires).
    pub fn digest(&mut self, d: D) {
        self.digest = Some(d);
    }

    /// Runs a pass of a program this one wraps on this packet, with the
    /// inner program's metadata and digest types: `f` gets a view with the
    /// frame and every decision so far; the frame and the decisions come
    /// back after, and the inner digest (if any) is returned. With
    /// `ingress_port`, the inner program sees that port as the one the
    /// packet arrived on (ExoPlane's device program runs an app as if on
    /// the switch port the shim names). For a program that wraps others
    /// (ExoPlane's runtime around its apps' composite).
    pub fn nest<M2, D2, R>(
        &mut self,
        meta: &mut M2,
        ingress_port: Option<PortId>,
        f: impl FnOnce(&mut PacketCtx<M2, D2>) -> R,
    ) -> (R, Option<D2>)
    where
        M2: Default,
    {
        let mut inner = self.retype::<M2, D2>(std::mem::take(meta));
        if let Some(p) = ingress_port {
            inner.ingress_port = p;
        }
        let r = f(&mut inner);
        let (m, d) = self.absorb(inner);
        *meta = m;
        (r, d)
    }

    /// A copy of this packet, for running one pass again (the load-time
    /// check).
    pub(crate) fn duplicate(&self) -> Self
    where
        M: Clone,
        D: Clone,
    {
        PacketCtx {
            frame: self.frame.clone(),
            parse_depth: self.parse_depth,
            meta: self.meta.clone(),
            ingress_port: self.ingress_port,
            ingress_time: self.ingress_time,
            kind: self.kind,
            destination: self.destination,
            mirror: self.mirror,
            mirror_loop: self.mirror_loop,
            digest: self.digest.clone(),
            egress: self.egress,
        }
    }

    /// The whole frame, for the switch's own use.
    pub(crate) fn into_frame(self) -> Vec<u8> {
        self.frame
    }

    /// The same packet with other metadata and digest types, for running a
    /// block of a composite: the frame moves into the result (this context
    /// keeps an empty one until [`PacketCtx::absorb`]), everything else is
    /// copied, and no digest is pending.
    pub(crate) fn retype<M2, D2>(&mut self, meta: M2) -> PacketCtx<M2, D2> {
        PacketCtx {
            frame: std::mem::take(&mut self.frame),
            parse_depth: self.parse_depth,
            meta,
            ingress_port: self.ingress_port,
            ingress_time: self.ingress_time,
            kind: self.kind,
            destination: self.destination,
            mirror: self.mirror,
            mirror_loop: self.mirror_loop,
            digest: None,
            egress: self.egress,
        }
    }

    /// Takes back what a block did to a [`PacketCtx::retype`]d packet: the
    /// frame and the decisions; returns the block's metadata and digest.
    pub(crate) fn absorb<M2, D2>(&mut self, inner: PacketCtx<M2, D2>) -> (M2, Option<D2>) {
        self.frame = inner.frame;
        self.destination = inner.destination;
        self.mirror = inner.mirror;
        self.mirror_loop = inner.mirror_loop;
        (inner.meta, inner.digest)
    }
}

#[cfg(test)]
mod insert_header_tests {
    use super::*;

    fn ctx(frame: Vec<u8>, depth: usize) -> PacketCtx<(), ()> {
        PacketCtx::new(frame, depth, (), 0, 0, PacketKind::Normal)
    }

    #[test]
    fn insert_moves_the_tail_and_respects_the_window() {
        let mut p = ctx((0..10).collect(), 6);
        assert!(p.insert_header(4, &[0xa, 0xb, 0xc]));
        assert_eq!(p.frame, [0, 1, 2, 3, 0xa, 0xb, 0xc, 4, 5, 6, 7, 8, 9]);
        assert!(p.insert_header(0, &[0xe]));
        assert_eq!(p.frame[..3], [0xe, 0, 1]);
        assert_eq!(p.len(), 14);
        // Beyond the header window: refused, frame unchanged.
        assert!(!p.insert_header(7, &[1]));
        assert_eq!(p.len(), 14);
        // At the end of a frame shorter than the window: an append.
        let mut q = ctx(vec![1, 2], 64);
        assert!(q.insert_header(2, &[3]));
        assert!(q.insert_header(1, &[]));
        assert_eq!(q.frame, [1, 2, 3]);
    }
}
