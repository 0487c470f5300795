//! The developer-facing data-plane API of spec §5.11: what a network
//! function supplies to run on TEA ([`TeaNf`]) and what it sees of a lookup
//! ([`LookupMd`]).
//!
//! Rust cannot size arrays by a trait's associated constants on stable, so
//! keys and values are byte slices whose lengths the NF declares
//! ([`TeaNf::key_len`], [`TeaNf::value_len`]) and the switch checks.

use inca_apps::headers::Parsed;
use inca_switch::PortId;

/// Why TEA dropped a packet (the drop counter's index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DropReason {
    /// No replica of the key's range is usable.
    NoServer = 0,
    /// The QP already has MAX_OUT reads outstanding.
    FcReject = 1,
    /// The NF dropped it.
    Nf = 2,
    /// A response for an unknown or stale QP incarnation.
    StaleQp = 3,
    /// A duplicate READ response.
    DupResponse = 4,
    /// A malformed RDMA packet (bad lengths, multi-packet responses).
    Malformed = 5,
    /// An ACK (nothing to do).
    Ack = 6,
    /// A NAK (reported to the CPU).
    Nak = 7,
    /// A packet re-injected by the CPU missed SRAM (loop freedom: it does
    /// not get a second DRAM lookup).
    ReinjectMiss = 8,
    /// No range or memory entry for the bucket (not set up yet).
    NoRoute = 9,
    /// A READ response arrived `T_GRACE` or more after its lookup's SRAM
    /// check, for a lookup that was already redone once (see
    /// `TeaSwitch::response`).
    LateResponse = 10,
}

/// Number of drop reasons (size of the drop counter).
pub const DROP_REASONS: usize = 11;

/// Lookup metadata the NF sees (spec §5.11).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LookupMd {
    /// The key was found (SRAM or DRAM).
    pub found: bool,
    /// A DRAM lookup came back without the key: it is absent.
    pub remote_miss: bool,
    /// This pass is the response pass of a DRAM lookup.
    pub from_response: bool,
    /// The value found (empty if none).
    pub value: Vec<u8>,
    /// The key's bucket.
    pub bucket: u32,
    /// Its range.
    pub range: u16,
    /// The replica used (0 primary, 1 secondary).
    pub replica: u8,
    /// The QP used.
    pub qp: u16,
    /// Why the packet is dropped, if it is.
    pub drop_reason: Option<DropReason>,
    /// The port the original packet arrived on (restored from the shim on a
    /// response pass).
    pub ingress_port: PortId,
}

/// What the NF does with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send it out of this port.
    Forward(PortId),
    /// Drop it.
    Drop,
    /// Punt it to the NF's slow path with this reason code.
    ToCpu(u16),
}

/// What the NF's slow path wants after a punted packet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PuntAction {
    /// Entries to insert (key, value), in order; the first must be the
    /// punted packet's own key (the packet is re-injected once it is in the
    /// stash).
    pub inserts: Vec<(Vec<u8>, Vec<u8>)>,
    /// Send the packet back into ingress once the inserts are visible.
    pub reinject: bool,
}

/// A network function running on TEA. See the module documentation.
pub trait TeaNf: Clone + 'static {
    /// Name for reports.
    fn name(&self) -> &str;
    /// Key bytes (K).
    fn key_len(&self) -> usize;
    /// Value bytes (V).
    fn value_len(&self) -> usize;
    /// Bytes of the original packet the NF parses (for the §5.9 check).
    fn header_depth(&self) -> usize;
    /// The key of a packet, or `None` if it bypasses TEA. `header` is the
    /// packet's header window (the parked frame's, on a response pass).
    fn key(&self, header: &[u8], hdrs: &Parsed, ingress_port: PortId) -> Option<Vec<u8>>;
    /// A packet whose key was found: rewrite its headers (`header`) and
    /// decide.
    fn on_found(&self, header: &mut [u8], hdrs: &Parsed, value: &[u8], md: &LookupMd) -> Verdict;
    /// A packet whose key is absent (after its one DRAM lookup). Must not
    /// ask for another lookup.
    fn on_remote_miss(&self, header: &mut [u8], hdrs: &Parsed, md: &LookupMd) -> Verdict;
    /// A packet without a key.
    fn on_bypass(&self, _header: &mut [u8], _hdrs: &Parsed, _md: &LookupMd) -> Verdict {
        Verdict::Drop
    }
    /// An entry a bypassing packet asks the control plane to insert (the
    /// firewall's reverse 5-tuple on an internal SYN), sent as a digest.
    fn learn(&self, _hdrs: &Parsed, _ingress_port: PortId) -> Option<(Vec<u8>, Vec<u8>)> {
        None
    }
    /// The slow path for a punted packet (`frame` as it was punted).
    fn on_punt(
        &mut self,
        _frame: &[u8],
        _hdrs: &Parsed,
        _port: PortId,
        _reason: u16,
    ) -> PuntAction {
        PuntAction::default()
    }
}
