//! RedPlane versions of the apps of spec §7, each a [`RedPlaneApp`] with its
//! pure single-switch reference behaviour ([`SpecModel`]) for the
//! linearizability checkers.
//!
//! The NF logic of each app is one pure function over the packet bytes and
//! the flow's value; the data-plane `process` and `spec_step` both call it,
//! so the reference and the switch cannot drift apart.
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
use inca_wire::checksum;

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
}

/// Parses an input frame for a spec model (None: not IPv4).
pub(crate) fn spec_parse(input: &[u8]) -> Option<Parsed> {
    parse(input).ok().filter(|p| p.ipv4)
}

/// The packet from its IPv4 header on.
pub(crate) fn from_l3(frame: &[u8], p: &Parsed) -> Vec<u8> {
    frame.get(usize::from(p.l3)..).unwrap_or(&[]).to_vec()
}

/// Writes the 32-bit `new` at `off` in `h` and updates the L4 checksum at
/// `sum_off` incrementally (RFC 1624) word by word, with 16-bit words
/// counted from the L4 header at `l4` (so an odd offset works too). A UDP
/// checksum of 0 (none) stays 0. Returns false if the field is beyond `h`.
pub(crate) fn write_u32_fix_sum(
    h: &mut [u8],
    l4: usize,
    off: usize,
    new: u32,
    sum_off: usize,
    udp: bool,
) -> bool {
    if off < l4 || h.len() < off + 4 || h.len() < sum_off + 2 {
        return false;
    }
    let start = l4 + ((off - l4) & !1);
    let end = start
        + if (off - start).is_multiple_of(2) {
            4
        } else {
            6
        };
    // A last odd byte is summed as if padded with zero (RFC 768).
    let byte = |h: &[u8], i: usize| h.get(i).copied().unwrap_or(0);
    let words = |h: &[u8]| -> Vec<u16> {
        (start..end)
            .step_by(2)
            .map(|i| u16::from_be_bytes([byte(h, i), byte(h, i + 1)]))
            .collect()
    };
    let before = words(h);
    h[off..off + 4].copy_from_slice(&new.to_be_bytes());
    let after = words(h);
    let mut sum = u16::from_be_bytes([h[sum_off], h[sum_off + 1]]);
    if udp && sum == 0 {
        return true;
    }
    for (o, n) in before.into_iter().zip(after) {
        sum = checksum::update_u16(sum, o, n);
    }
    h[sum_off..sum_off + 2].copy_from_slice(&sum.to_be_bytes());
    true
}

/// An (IPv4, port) pair as the 6-byte keys and values of spec §7.
pub fn ip_port(ip: [u8; 4], port: u16) -> [u8; 6] {
    let mut b = [0u8; 6];
    b[..4].copy_from_slice(&ip);
    b[4..].copy_from_slice(&port.to_be_bytes());
    b
}

/// Splits a 6-byte (IPv4, port) pair.
pub fn split_ip_port(b: &[u8]) -> ([u8; 4], u16) {
    let mut ip = [0u8; 4];
    ip.copy_from_slice(&b[..4]);
    (ip, u16::from_be_bytes([b[4], b[5]]))
}
