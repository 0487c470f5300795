//! RedPlane versions of the apps of spec §7, each a [`RedPlaneApp`] with its
//! pure single-switch reference behaviour ([`SpecModel`]) for the
//! linearizability checkers.
//!
//! The NF logic of each app is one pure function over the packet bytes and
//! the flow's value; the data-plane `process` and `spec_step` both call it,
//! so the reference and the switch cannot drift apart. That function is
//! built from the NF's core in `inca_apps::core` (shared with the plain apps
//! and TEA's NFs); what stays here is RedPlane's: keys and values as
//! replicated bytes, where the state lives on the switch, and the variants
//! the spec picks (endpoint keys, direction from addresses).
//!
//! [our choice] Apps decide direction from addresses, not from the ingress
//! port: a packet re-injected by the control plane after a grant arrives
//! from the CPU port.

pub mod epc;
pub mod firewall;
pub mod kv;
pub mod lb;
pub mod nat;
pub mod sync_counter;

use inca_apps::headers::{parse, Parsed};

pub use crate::switch::RedPlaneApp;

/// The single-switch reference behaviour of an app, per flow.
///
/// The state is the flow's value (V bytes, as replicated). `input` is an
/// Ethernet frame as it entered the RedPlane ingress; outputs are packets
/// **from their IPv4 header on** [our choice: a released output gets a
/// rebuilt L2 header, so L2 is not part of the behaviour].
pub trait SpecModel {
    /// The flow's key, if the app handles this frame.
    fn spec_key(&self, input: &[u8]) -> Option<Vec<u8>>;
    /// One step: the outputs and the next state.
    fn spec_step(&self, state: &[u8], input: &[u8]) -> (Vec<Vec<u8>>, Vec<u8>);
    /// Inputs that take every state to the same next state may share a
    /// class ([`inca_verify::linearizability::Spec::effect_class`]); `None`
    /// (the default): a class of its own.
    fn spec_effect_class(&self, input: &[u8]) -> Option<u64> {
        let _ = input;
        None
    }
}

/// Parses an input frame for a spec model (None: not IPv4).
pub(crate) fn spec_parse(input: &[u8]) -> Option<Parsed> {
    parse(input).ok().filter(|p| p.ipv4)
}

/// The packet from its IPv4 header on.
pub(crate) fn from_l3(frame: &[u8], p: &Parsed) -> Vec<u8> {
    frame.get(usize::from(p.l3)..).unwrap_or(&[]).to_vec()
}
