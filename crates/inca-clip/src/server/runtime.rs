//! [`ClipRuntime`]: the CLIP server runtime as a [`SoftwareNf`] — the data
//! path of spec §5.3 (validate, flow record, top-N candidate, handler,
//! in-place response) and its housekeeping (created-entry batches every
//! 10 ms, flow expiry every 100 ms). The control API the CLIP-CTL glue
//! calls is in [`super::control`].

use inca_server::multicore::MAX_CORES;
use inca_server::{NfOutput, SoftwareNf};
use inca_switch::device::{Nanos, PortId};
use inca_wire::clip::shim::{Status, FLAG_CMS_VALID, MAX_PARAMS_LEN};

use super::config::RuntimeConfig;
use super::flows::{FlowTable, Seen};
use super::request::{self, original_l3};
use super::stats::RuntimeStats;
use super::topn::{Candidates, Offer};
use crate::app::{Entry, HandlerCtx, HandlerStatus, RemoteHandler};
use crate::flow::FlowKey;

/// Why a runtime cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("CLIP server runtime: {0}")]
pub struct RuntimeError(pub String);

/// One core's state: nothing here is shared between cores (RSS keeps a
/// flow on one core), as a DPDK app keeps it lock-free.
#[derive(Debug, Clone)]
pub(super) struct CoreState {
    pub(super) flows: FlowTable,
    pub(super) candidates: Candidates,
}

/// The CLIP server runtime hosting handler `H`. See the module
/// documentation and [`super`].
#[derive(Debug)]
pub struct ClipRuntime<H: RemoteHandler> {
    pub(super) config: RuntimeConfig,
    pub(super) handler: H,
    pub(super) cores: Vec<CoreState>,
    /// Entries created since the last batch.
    pub(super) created_pending: Vec<Entry>,
    /// Entries of closed batches, for ENTRY_CREATED.
    pub(super) created_ready: Vec<Entry>,
    /// Expired flows, for FLOW_EXPIRED.
    pub(super) expired: Vec<FlowKey>,
    /// When the next expiry sweep is due.
    pub(super) next_expiry: Nanos,
    /// The latest time the runtime was handed.
    pub(super) now: Nanos,
    pub(super) stats: RuntimeStats,
    /// The handler's created entries of one request (reused).
    scratch: Vec<Entry>,
}

impl<H: RemoteHandler> ClipRuntime<H> {
    /// A runtime for `cores` cores running `handler`.
    pub fn new(config: RuntimeConfig, cores: usize, handler: H) -> Result<Self, RuntimeError> {
        config.check().map_err(RuntimeError)?;
        if !(1..=MAX_CORES).contains(&cores) {
            return Err(RuntimeError(format!(
                "cores must be from 1 to {MAX_CORES}, not {cores}"
            )));
        }
        let p = handler.params_len();
        if !p.is_multiple_of(4) || p > MAX_PARAMS_LEN {
            return Err(RuntimeError(format!(
                "app {} has a params region of {p} bytes: it must be a multiple of 4 \
                 and at most {}",
                handler.app_id(),
                MAX_PARAMS_LEN
            )));
        }
        if handler.app_id() == 0 {
            return Err(RuntimeError("app_id 0 is not an app".into()));
        }
        let core = CoreState {
            flows: FlowTable::new(config.flow_records),
            candidates: Candidates::new(config.candidates),
        };
        Ok(ClipRuntime {
            cores: vec![core; cores],
            handler,
            created_pending: Vec::new(),
            created_ready: Vec::new(),
            expired: Vec::new(),
            next_expiry: 0,
            now: 0,
            stats: RuntimeStats::default(),
            scratch: Vec::new(),
            config,
        })
    }

    /// Serves one frame at `now` on `core` (§5.3 steps 2-6); the response
    /// goes onto `out` for the arrival port.
    fn serve(
        &mut self,
        now: Nanos,
        core: usize,
        port: PortId,
        mut frame: Vec<u8>,
        out: &mut Vec<NfOutput>,
    ) {
        self.stats.frames += 1;
        let req = match request::parse(&frame, self.handler.app_id(), self.handler.params_len()) {
            Ok(r) => r,
            Err(why) => {
                self.stats.invalid(why);
                return;
            }
        };
        let Some(state) = self.cores.get_mut(core) else {
            self.stats.bad_core += 1;
            return;
        };
        self.stats.requests += 1;
        let repr = req.repr;
        if repr.server_id != self.config.server_id {
            self.stats.misdelivered += 1;
        }
        let flow = self.handler.flow_key(repr.load_type, &frame[req.l3..]);
        match state.flows.see(flow, repr.sel, repr.grp_ver, now) {
            Seen::New => self.stats.flows_new += 1,
            Seen::Known { mismatch: true } => self.stats.ver_mismatch += 1,
            Seen::Known { mismatch: false } => {}
            Seen::Overflow => self.stats.record_overflow += 1,
        }
        if repr.flags & FLAG_CMS_VALID != 0 {
            match state.candidates.offer(flow, repr.cms_est) {
                Offer::Held => {}
                Offer::Evicted => self.stats.candidate_evictions += 1,
                Offer::Refused => self.stats.candidate_refusals += 1,
            }
        }
        // The params region and the unparsed payload are disjoint parts of
        // the frame: the handler writes one and reads the other.
        let (head, tail) = frame.split_at_mut(req.l3);
        let params = &mut head[req.params.clone()];
        let payload = &tail[req.payload - req.l3..];
        let mut created = std::mem::take(&mut self.scratch);
        let verdict = {
            let mut ctx = HandlerCtx {
                now,
                server_id: self.config.server_id,
                core,
                flow,
                payload,
                created: &mut created,
            };
            self.handler.handle(&mut ctx, params)
        };
        self.queue_created(&mut created);
        self.scratch = created;
        let status = match verdict {
            HandlerStatus::Ok => {
                self.stats.status_ok += 1;
                Status::Ok
            }
            HandlerStatus::Drop => {
                self.stats.status_drop += 1;
                Status::Drop
            }
            HandlerStatus::NoResult => {
                self.stats.status_no_result += 1;
                Status::NoResult
            }
        };
        request::respond(&mut frame, &req, status);
        self.stats.responses += 1;
        out.push((port, frame));
    }

    /// Moves the handler's new entries to the pending batch, within its
    /// bound.
    fn queue_created(&mut self, created: &mut Vec<Entry>) {
        for e in created.drain(..) {
            if self.created_pending.len() + self.created_ready.len() >= self.config.created_queue {
                self.stats.created_overflow += 1;
            } else {
                self.created_pending.push(e);
            }
        }
    }

    /// The periodic work (§5.3 housekeeping): closes the created-entry
    /// batch; when due, expires idle flows that are not offloaded (sorted
    /// by key, each handed to the handler's `flow_expired` and queued for
    /// FLOW_EXPIRED).
    pub fn tick(&mut self, now: Nanos) {
        self.now = self.now.max(now);
        self.created_ready.append(&mut self.created_pending);
        if now < self.next_expiry {
            return;
        }
        self.next_expiry = now.saturating_add(self.config.expiry_interval_ns);
        let mut dead = Vec::new();
        for c in &mut self.cores {
            c.flows.expire(now, self.config.t_exp_ns, &mut dead);
        }
        dead.sort_unstable();
        for flow in dead {
            self.stats.flows_expired += 1;
            self.handler.flow_expired(&flow);
            if self.expired.len() >= self.config.expired_queue {
                self.stats.expired_overflow += 1;
            } else {
                self.expired.push(flow);
            }
        }
    }
}

impl<H: RemoteHandler> SoftwareNf for ClipRuntime<H> {
    fn name(&self) -> &str {
        "clip"
    }

    /// Without a time, the latest time the runtime was handed.
    fn process(&mut self, core: usize, port: PortId, frame: Vec<u8>, out: &mut Vec<NfOutput>) {
        self.serve(self.now, core, port, frame, out);
    }

    fn process_at(
        &mut self,
        now: Nanos,
        core: usize,
        port: PortId,
        frame: Vec<u8>,
        out: &mut Vec<NfOutput>,
    ) {
        self.now = self.now.max(now);
        self.serve(now, core, port, frame, out);
    }

    /// The handler's flow key of the original headers behind the shim;
    /// None (queue 0) for a frame without a well-formed shim.
    fn rss_input(&self, frame: &[u8]) -> Option<Vec<u8>> {
        let (load_type, l3) = original_l3(frame)?;
        Some(self.handler.flow_key(load_type, l3).0.to_vec())
    }

    fn housekeeping_interval(&self) -> Option<Nanos> {
        Some(self.config.batch_interval_ns)
    }

    /// [`ClipRuntime::tick`]; it sends nothing itself (the CLIP-CTL glue
    /// takes the batches and sends them).
    fn housekeeping(&mut self, now: Nanos, _out: &mut Vec<NfOutput>) {
        self.tick(now);
    }

    /// The runtime's counters and gauges, then the handler's (`app_`).
    fn counters(&self) -> Vec<(String, u64)> {
        let mut v = self.stats.named();
        v.push(("flow_records".into(), self.flow_records() as u64));
        v.push(("candidates".into(), self.candidates() as u64));
        v.push((
            "created_queued".into(),
            (self.created_pending.len() + self.created_ready.len()) as u64,
        ));
        v.push(("expired_queued".into(), self.expired.len() as u64));
        for (k, n) in self.handler.counters() {
            v.push((format!("app_{k}"), n));
        }
        v
    }

    fn reset(&mut self) {
        ClipRuntime::reset(self);
    }
}
