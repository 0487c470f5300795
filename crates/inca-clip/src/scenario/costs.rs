//! What a request costs a CLIP server core beyond its I/O (spec §8.1): the
//! shim handling every request pays, the mirrored-table lookup of MFWD and
//! SNAT, and SNAT's allocation on a miss.
//!
//! The multi-core server charges every frame its I/O cost
//! ([`inca_server::CoreCosts`]); [`PricedRuntime`] wraps the server (the
//! runtime and its CLIP-CTL endpoint, [`ClipServer`]) and reports the rest
//! per frame ([`SoftwareNf::take_extra_cpu_ns`]), priced
//! from what the runtime and the handler counted while serving it (a
//! request validated, a lookup, an allocation). Counting after the fact
//! keeps the runtime and the apps free of any cost model: the same code
//! runs under any prices, and a request that fails validation pays I/O
//! only, as does a control datagram [our choice: CLIP-CTL traffic is a
//! few datagrams per report period, next to millions of requests].

use inca_server::{NfOutput, SoftwareNf};
use inca_switch::device::{Nanos, PortId};
use serde::{Deserialize, Serialize};

use crate::app::RemoteHandler;
use crate::apps::mfwd::MfwdHandler;
use crate::apps::null::NullHandler;
use crate::apps::snat::{SnatHandler, POOL_PORTS};
use crate::server::{ClipRuntime, ClipServer};

use super::PoolParams;

/// Per-request CPU costs beyond I/O, ns. Defaults: CLIP spec §8.1's
/// calibration inputs (marked [our choice] there; no public per-packet
/// measurement was found to replace them, docs/calibration.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClipCosts {
    /// Shim handling per valid request: validation, flow record, top-N
    /// candidate, in-place response (§8.1: 50 ns).
    pub shim_ns: Nanos,
    /// One mirrored hash-table lookup (§8.1: 300 ns).
    pub lookup_ns: Nanos,
    /// One SNAT allocation on a miss (§8.1: 500 ns).
    pub alloc_ns: Nanos,
}

impl Default for ClipCosts {
    fn default() -> Self {
        ClipCosts {
            shim_ns: 50,
            lookup_ns: 300,
            alloc_ns: 500,
        }
    }
}

/// The most any one cost may be [our choice: a millisecond per request is
/// far beyond any software NF; it bounds a typo].
pub const MAX_COST_NS: Nanos = 1_000_000;

impl ClipCosts {
    /// Checks the values; the message names the field.
    pub fn check(&self) -> Result<(), String> {
        for (name, v) in [
            ("shim_ns", self.shim_ns),
            ("lookup_ns", self.lookup_ns),
            ("alloc_ns", self.alloc_ns),
        ] {
            if v > MAX_COST_NS {
                return Err(format!(
                    "clip_costs.{name} must be at most {MAX_COST_NS}, not {v}"
                ));
            }
        }
        Ok(())
    }
}

/// What a handler did so far, as the cost model counts it (cumulative).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Mirrored-table lookups.
    pub lookups: u64,
    /// Allocations from a pool slice.
    pub allocations: u64,
}

/// A handler whose work the cost model can count.
pub trait CountedWork: RemoteHandler {
    /// Its work so far.
    fn work(&self) -> Work;
}

impl CountedWork for NullHandler {
    /// NULL answers at once: no work beyond the shim.
    fn work(&self) -> Work {
        Work::default()
    }
}

impl CountedWork for MfwdHandler {
    /// One lookup per well-formed request, hit or miss.
    fn work(&self) -> Work {
        let s = self.stats();
        Work {
            lookups: s.hits + s.misses,
            allocations: 0,
        }
    }
}

impl CountedWork for SnatHandler {
    /// One lookup per well-formed request; an allocation per translation
    /// handed out (a miss refused for want of a pool, a port or room pays
    /// the lookup only).
    fn work(&self) -> Work {
        let s = self.stats();
        Work {
            lookups: s.hits + s.allocated + s.no_pool + s.exhausted + s.table_full,
            allocations: s.allocated,
        }
    }
}

/// The server, priced. See the module documentation.
#[derive(Debug)]
pub struct PricedRuntime<H: CountedWork> {
    server: ClipServer<H>,
    costs: ClipCosts,
    /// Requests and work counted before the frame being served.
    seen: (u64, Work),
    /// CPU time owed for the last frame, not yet reported.
    pending: Nanos,
    /// All CPU time reported beyond I/O.
    extra_total: Nanos,
    /// The pool slice of the static set-up, assigned again after a
    /// restart (see [`super`]).
    pool: Option<PoolParams>,
}

impl<H: CountedWork> PricedRuntime<H> {
    /// `server` priced at `costs`.
    pub fn new(server: ClipServer<H>, costs: ClipCosts) -> Self {
        let mut p = PricedRuntime {
            server,
            costs,
            seen: (0, Work::default()),
            pending: 0,
            extra_total: 0,
            pool: None,
        };
        p.seen = p.counts();
        p
    }

    /// Assigns `pool` again whenever the server restarts (the static
    /// set-up standing in for the controller's POOL_ASSIGN).
    pub fn with_pool(mut self, pool: Option<PoolParams>) -> Self {
        self.pool = pool;
        self
    }

    /// The runtime.
    pub fn runtime(&self) -> &ClipRuntime<H> {
        self.server.runtime()
    }

    /// The runtime, for the control API.
    pub fn runtime_mut(&mut self) -> &mut ClipRuntime<H> {
        self.server.runtime_mut()
    }

    /// The server (runtime and control endpoint).
    pub fn server(&self) -> &ClipServer<H> {
        &self.server
    }

    /// The prices.
    pub fn costs(&self) -> &ClipCosts {
        &self.costs
    }

    fn counts(&self) -> (u64, Work) {
        let rt = self.server.runtime();
        (rt.stats().requests, rt.handler().work())
    }

    /// Prices what happened since the last count.
    fn charge(&mut self) {
        let (requests, work) = self.counts();
        let (r0, w0) = self.seen;
        let c = &self.costs;
        let ns = requests.saturating_sub(r0) * c.shim_ns
            + work.lookups.saturating_sub(w0.lookups) * c.lookup_ns
            + work.allocations.saturating_sub(w0.allocations) * c.alloc_ns;
        self.pending = self.pending.saturating_add(ns);
        self.extra_total = self.extra_total.saturating_add(ns);
        self.seen = (requests, work);
    }
}

impl<H: CountedWork> SoftwareNf for PricedRuntime<H> {
    fn name(&self) -> &str {
        self.server.name()
    }

    fn process(&mut self, core: usize, port: PortId, frame: Vec<u8>, out: &mut Vec<NfOutput>) {
        self.server.process(core, port, frame, out);
        self.charge();
    }

    fn process_at(
        &mut self,
        now: Nanos,
        core: usize,
        port: PortId,
        frame: Vec<u8>,
        out: &mut Vec<NfOutput>,
    ) {
        self.server.process_at(now, core, port, frame, out);
        self.charge();
    }

    fn take_extra_cpu_ns(&mut self) -> Nanos {
        std::mem::take(&mut self.pending)
    }

    fn housekeeping_interval(&self) -> Option<Nanos> {
        self.server.housekeeping_interval()
    }

    fn housekeeping(&mut self, now: Nanos, out: &mut Vec<NfOutput>) {
        self.server.housekeeping(now, out);
    }

    fn rss_input(&self, frame: &[u8]) -> Option<Vec<u8>> {
        self.server.rss_input(frame)
    }

    /// The server's counters and `cpu_extra_ns`, the CPU time charged
    /// beyond I/O.
    fn counters(&self) -> Vec<(String, u64)> {
        let mut v = self.server.counters();
        v.push(("cpu_extra_ns".into(), self.extra_total));
        v
    }

    fn reset(&mut self) {
        SoftwareNf::reset(&mut self.server);
        if let Some(p) = self.pool {
            self.server
                .runtime_mut()
                .pool_assign(POOL_PORTS, p.base_ip.octets(), p.lo, p.hi);
        }
        self.pending = 0;
        self.seen = self.counts();
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::apps::snat::{APP_ID, PARAMS_LEN, POOL_PORTS};
    use crate::server::RuntimeConfig;
    use crate::FlowKey;
    use inca_wire::clip::shim::{self, ClipRepr, Kind, Sel, Status};
    use inca_wire::{build_udp_frame, Endpoints};

    /// A SNAT request for 10.0.0.1:5000 → 10.0.1.1:9 (UDP).
    fn request() -> (FlowKey, Vec<u8>) {
        let ep = Endpoints::new(
            [2, 0, 0, 0, 0, 1],
            Ipv4Addr::new(10, 0, 0, 1),
            [2, 0, 0, 0, 0, 2],
            Ipv4Addr::new(10, 0, 1, 1),
        );
        let mut f = build_udp_frame(&ep, 5000, 9, &[0; 18], true).unwrap();
        let flow = FlowKey::new(0, 17, [10, 0, 0, 1], [10, 0, 1, 1], 5000, 9);
        let mut params = vec![0u8; PARAMS_LEN];
        params[..16].copy_from_slice(&flow.0);
        let repr = ClipRepr {
            kind: Kind::Request,
            flags: 0,
            load_type: 0,
            app_id: APP_ID,
            hdr_words: 0,
            parsed_len: 28,
            server_id: 1,
            sel: Sel::Cur,
            status: Status::Ok,
            grp_ver: 1,
            cms_est: 0,
        };
        shim::push(&mut f, repr, &params).unwrap();
        (flow, f)
    }

    #[test]
    fn a_snat_miss_pays_lookup_and_allocation_a_hit_the_lookup_only() {
        let mut rt = ClipServer::new(RuntimeConfig::default(), 1, SnatHandler::new(1024)).unwrap();
        rt.runtime_mut()
            .pool_assign(POOL_PORTS, [198, 51, 100, 1], 1024, 2047);
        let mut p = PricedRuntime::new(rt, ClipCosts::default());
        let (flow, frame) = request();
        let mut out = Vec::new();
        p.process_at(10, 0, 0, frame.clone(), &mut out);
        assert_eq!(out.len(), 1, "{:?}", p.counters());
        assert_eq!(p.take_extra_cpu_ns(), 50 + 300 + 500);
        assert_eq!(p.take_extra_cpu_ns(), 0, "reported once");
        assert!(p.runtime().handler().lookup(&flow).is_some());
        p.process_at(20, 0, 0, frame, &mut out);
        assert_eq!(p.take_extra_cpu_ns(), 50 + 300);
        // Not a request: I/O only.
        p.process_at(30, 0, 0, vec![0u8; 60], &mut out);
        assert_eq!(p.take_extra_cpu_ns(), 0);
        let c: std::collections::BTreeMap<_, _> = p.counters().into_iter().collect();
        assert_eq!(c["cpu_extra_ns"], 850 + 350);
        assert_eq!(c["requests"], 2);
    }

    #[test]
    fn null_pays_the_shim_only() {
        let rt = ClipServer::new(RuntimeConfig::default(), 1, NullHandler::new()).unwrap();
        let p = PricedRuntime::new(rt, ClipCosts::default());
        assert_eq!(p.runtime().handler().work(), Work::default());
        assert_eq!(ClipCosts::default().check(), Ok(()));
        let bad = ClipCosts {
            alloc_ns: MAX_COST_NS + 1,
            ..ClipCosts::default()
        };
        assert!(bad.check().unwrap_err().contains("clip_costs.alloc_ns"));
    }
}
