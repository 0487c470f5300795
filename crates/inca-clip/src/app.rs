//! The programming abstraction (spec §5.1): what an app declares, once,
//! for all three places it runs.
//!
//! An app is two halves that share its parameter lists:
//!
//! - [`SwitchApp`]: `pre_processing` and `post_processing`, switch code
//!   over the app's own tables and registers, plus the control-plane side
//!   of its `promotable` table (the controller copies entries into it).
//! - [`RemoteHandler`]: `remote_handler`, ordinary Rust on a server core,
//!   with the app's mirrored tables and its share of resource pools.
//!
//! The framework (the switch program of [`crate::switch`] and the server
//! runtime of [`crate::server`]) generates everything between them: the
//! packet-type control flow, the shim, server selection, counting, mirrored
//! tables and promotion. `Req` and `Res` are fixed-size byte strings,
//! bit-packed in declaration order (§4.2); the params region is
//! `P = roundup4(max(bytes(req), bytes(res)))` bytes and the response
//! overwrites it from offset 0, so a request and its response have the
//! same length.

use inca_apps::headers::Parsed;
use inca_switch::device::Nanos;
use inca_switch::{AccessError, ControlPlane, DataPlane, Declare, DeclareError, ObjectId};

use crate::flow::FlowKey;

/// The params region's length for request and response lists of these
/// sizes in bits: `roundup4(max(ceil(req/8), ceil(res/8)))`.
pub const fn params_len(req_bits: usize, res_bits: usize) -> usize {
    let req = req_bits.div_ceil(8);
    let res = res_bits.div_ceil(8);
    let m = if req > res { req } else { res };
    m.div_ceil(4) * 4
}

/// Which pass `post_processing` runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostPath {
    /// The original packet never left the switch (`flight` was false).
    Fast,
    /// The server's response came back.
    Response,
}

/// What `pre_processing` decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PreOutcome {
    /// Send the packet to a server.
    pub flight: bool,
    /// `res` was filled locally (a table hit): `post_processing` gets it on
    /// the fast path.
    pub res_set: bool,
    /// The server chosen by the app (SNAT's inbound direction), if any.
    pub hint: Option<u8>,
}

/// A handler's verdict (the shim's `status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandlerStatus {
    /// `res` holds the result.
    Ok,
    /// Drop the packet.
    Drop,
    /// No result: `post_processing` runs without one.
    NoResult,
}

/// One entry of a mirrored table, as the controller and servers exchange
/// it (CLIP-CTL MIRROR_INSERT, ENTRY_CREATED).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The app table (0: the app's first `mirrored` table).
    pub table: u8,
    /// The match key.
    pub key: Vec<u8>,
    /// The action.
    pub action: u8,
    /// The action data.
    pub data: Vec<u8>,
}

/// The switch half of an app. See the module documentation.
pub trait SwitchApp: Clone + std::fmt::Debug + 'static {
    /// Its `app_id` on the wire (1..=255).
    fn app_id(&self) -> u8;

    /// Its name.
    fn name(&self) -> &'static str;

    /// The params region's length `P` (a multiple of 4).
    fn params_len(&self) -> usize;

    /// Declares its tables and registers (inside the CLIP program's
    /// namespace `app/`).
    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError>;

    /// The objects whose results decide `pre_processing`'s `flight`
    /// (after declaration): the CLIP modules, which run only on a flight,
    /// are placed after them. None (the default) means all of the app's
    /// objects; an app whose state updates do not decide the flight names
    /// the lookups that do, so the modules need not wait for its updates.
    fn flight_deciders(&self) -> Option<Vec<ObjectId>> {
        None
    }

    /// The flow key of a packet (default: the outer IPv4 5-tuple).
    fn flow_key(&self, p: &Parsed, header: &[u8]) -> FlowKey {
        let _ = header;
        FlowKey::of_parsed(p, 0)
    }

    /// Bytes of the original L3 payload the switch parser extracted
    /// (`parsed_len`, §4.2).
    fn parsed_len(&self, p: &Parsed) -> u16 {
        if !p.ipv4 {
            return 0;
        }
        let l4 = if p.l4 != 0 { p.l4 } else { p.l3 + 20 };
        let l4_len = if p.proto == inca_apps::headers::PROTO_TCP {
            20
        } else if p.has_ports {
            8
        } else {
            0
        };
        l4 - p.l3 + l4_len
    }

    /// `pre_processing` on an original packet: fills `req` (and `res` on a
    /// local hit). `header` is the packet's header window.
    fn pre(
        &mut self,
        p: &Parsed,
        header: &[u8],
        dp: &mut DataPlane<'_>,
        req: &mut [u8],
        res: &mut [u8],
    ) -> Result<PreOutcome, AccessError>;

    /// `post_processing`: `res` is the result (None when the handler gave
    /// none, or on the fast path when `pre` set none). It may rewrite the
    /// header window; forwarding follows.
    fn post(
        &mut self,
        p: &Parsed,
        header: &mut [u8],
        res: Option<&[u8]>,
        path: PostPath,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError>;

    /// The switch (re)started: installs the app's static entries (SNAT's
    /// pool owners). Default: none.
    fn start(&self, cp: &mut ControlPlane<'_>) {
        let _ = cp;
    }

    /// Whether the app has a promotable table (the controller caches heavy
    /// flows' entries in it).
    fn promotable(&self) -> bool {
        false
    }

    /// The promotable table's capacity.
    fn switch_capacity(&self) -> usize {
        0
    }

    /// Installs `entry` into the switch copy of its table; returns the
    /// request id, None if the app has no such table or the entry is
    /// malformed.
    fn install(&self, cp: &mut ControlPlane<'_>, entry: &Entry) -> Option<u64> {
        let _ = (cp, entry);
        None
    }

    /// Deletes the entry with `key` from the switch copy of `table`.
    fn uninstall(&self, cp: &mut ControlPlane<'_>, table: u8, key: &[u8]) -> Option<u64> {
        let _ = (cp, table, key);
        None
    }

    /// Reads the activity (hit flag, idle time) of the switch entry with
    /// `key` (idle-time polling).
    fn poll(&self, cp: &mut ControlPlane<'_>, table: u8, key: &[u8]) -> Option<u64> {
        let _ = (cp, table, key);
        None
    }
}

/// What a handler may use besides its request.
pub struct HandlerCtx<'a> {
    /// The time.
    pub now: Nanos,
    /// This server's id.
    pub server_id: u8,
    /// The core running the handler.
    pub core: usize,
    /// The flow's key.
    pub flow: FlowKey,
    /// The payload from `parsed_len` on (what the switch did not parse).
    pub payload: &'a [u8],
    /// Entries the handler created; the runtime reports them to the
    /// controller (ENTRY_CREATED, batched).
    pub created: &'a mut Vec<Entry>,
}

/// The server half of an app. See the module documentation.
pub trait RemoteHandler: std::fmt::Debug + 'static {
    /// Its `app_id` (the switch half's).
    fn app_id(&self) -> u8;

    /// The params region's length `P` (the switch half's).
    fn params_len(&self) -> usize;

    /// The flow key of a request whose original packet has EtherType
    /// `load_type` and starts its L3 header at `l3` (the bytes behind the
    /// shim and params). It must equal the switch half's
    /// [`SwitchApp::flow_key`] of the original packet: the server runtime
    /// keys its RSS and flow records with it. Default: the outer IPv4
    /// 5-tuple ([`FlowKey::of_l3`]); TRD overrides it with the inner
    /// headers.
    fn flow_key(&self, load_type: u16, l3: &[u8]) -> FlowKey {
        FlowKey::of_l3(load_type, l3)
    }

    /// `remote_handler`: reads the request from `params`, writes the
    /// result over it from offset 0. Malformed input is the handler's to
    /// refuse ([`HandlerStatus::Drop`]), never a panic.
    fn handle(&mut self, ctx: &mut HandlerCtx<'_>, params: &mut [u8]) -> HandlerStatus;

    /// The controller installs `entry` in a mirrored table (replicated on
    /// every server).
    fn mirror_insert(&mut self, entry: Entry) {
        let _ = entry;
    }

    /// The controller deletes an entry of a mirrored table.
    fn mirror_delete(&mut self, table: u8, key: &[u8]) {
        let _ = (table, key);
    }

    /// The switch copy of the flow's entry expired (ENTRY_EXPIRED): free
    /// what the flow holds.
    fn expire(&mut self, table: u8, key: &[u8]) {
        let _ = (table, key);
    }

    /// The controller assigned this server a pool slice (POOL_ASSIGN):
    /// `kind` 1 = SNAT ports, 2 = TRD indices; `base_ip` and `lo..=hi`.
    fn pool_assign(&mut self, kind: u8, base_ip: [u8; 4], lo: u32, hi: u32) {
        let _ = (kind, base_ip, lo, hi);
    }

    /// A flow's server state expired (idle ≥ T_exp, not offloaded): free
    /// what it holds.
    fn flow_expired(&mut self, flow: &FlowKey) {
        let _ = flow;
    }

    /// The CONN_NEW a created entry stands for (TRD's `conn_idx`: the
    /// controller pushes it into the switch at once), or None: the entry
    /// is reported in ENTRY_CREATED (promotable, the sketch decides).
    fn conn_new_of(&self, entry: &Entry) -> Option<(FlowKey, u16)> {
        let _ = entry;
        None
    }

    /// CONN_RELEASE at `now`: the connections whose index is to be freed
    /// once the controller deleted their switch entry.
    fn take_conn_release(&mut self, now: Nanos) -> Vec<(FlowKey, u16)> {
        let _ = now;
        Vec::new()
    }

    /// The reply to CONN_RELEASE of `idx` (the switch's delete is done):
    /// free it. False if `idx` was not being released.
    fn release_acked(&mut self, idx: u16) -> bool {
        let _ = idx;
        false
    }

    /// The server crashed: volatile state is lost.
    fn reset(&mut self);

    /// Counters for the node report.
    fn counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_lengths_are_the_spec_s() {
        assert_eq!(params_len(0, 0), 0);
        assert_eq!(params_len(128, 16 + 8), 16); // MFWD
        assert_eq!(params_len(128, 32 + 16), 16); // SNAT
        assert_eq!(params_len(128 + 8 + 32 + 32 + 16, 16 + 8 + 8 + 32 + 32), 28);
        // TRD
    }
}
