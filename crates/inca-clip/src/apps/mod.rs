//! The apps of spec §7, one module each, with both halves side by side:
//! the switch half ([`SwitchApp`](crate::app::SwitchApp)) and the server
//! half ([`RemoteHandler`](crate::app::RemoteHandler)), each in its own
//! section of the file.
//!
//! - [`null`] — NULL (app 1): no params; the handler answers at once
//!   (microbenchmarks, Fig. 5).
//! - [`mfwd`] — MFWD (app 2): a mirrored forwarding table, FlowKey →
//!   nexthop (Fig. 6, Fig. 7).
//! - [`snat`] — SNAT (app 3): source NAT whose translations servers
//!   allocate from their pool slices (Table I, Fig. 8).
//! - [`trd`] — TRD (app 4): TCP retransmission detection per connection
//!   (VXLAN inner headers), register indices allocated by servers.
//!
//! - [`table`] — a switch table keyed by flow key.
//!
//! Params are bit-packed MSB first in declaration order (§4.2); every
//! field of these apps is a whole number of bytes, so that is big-endian
//! fields back to back from offset 0, the rest of the region zero (TRD
//! packs with inca-wire's `pack`, which gives the same bytes).

pub mod mfwd;
pub mod null;
pub mod snat;
pub mod table;
pub mod trd;

use crate::flow::{FlowKey, FLOW_KEY_LEN};

/// The request's `flow: FlowKey` field at offset 0 of a params region;
/// None if the region is not exactly `p` bytes (malformed input).
pub(crate) fn request_flow(params: &[u8], p: usize) -> Option<FlowKey> {
    if params.len() != p {
        return None;
    }
    let k: [u8; FLOW_KEY_LEN] = params.get(..FLOW_KEY_LEN)?.try_into().ok()?;
    Some(FlowKey(k))
}

/// Writes `fields` back to back from offset 0 of `params` and zeroes the
/// rest (the response list and its padding). Nothing is written past the
/// region.
pub(crate) fn write_response(params: &mut [u8], fields: &[&[u8]]) {
    params.fill(0);
    let mut at = 0;
    for f in fields {
        let n = f.len().min(params.len().saturating_sub(at));
        params[at..at + n].copy_from_slice(&f[..n]);
        at += n;
    }
}
