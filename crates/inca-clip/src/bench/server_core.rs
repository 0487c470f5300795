//! `clip-server-core` and `clip-server-snat` (see [`super`]): requests
//! per second through `ClipRuntime::process_at` on one core — what a
//! server core spends per request in software: validation, the flow
//! record, the top-N candidate, the handler, the in-place response (the
//! NIC, PCIe and the core-cost model of `inca_server` are not involved:
//! this is the Rust code's own cost).
//!
//! Requests are those the switch sends: 1,024 flows of 64-byte TCP frames
//! with the shim (group selection, `CMS_VALID`) and the app's params,
//! taken in turn, 10 ns of virtual time apart. MFWD has every flow in its
//! mirrored table (hits); SNAT's warm-up allocates every flow's
//! translation, so the timed runs are hits. The baseline is the same
//! runtime with the NULL handler (no params): the framework alone, so the
//! ratio shows what the handler adds.
//!
//! [our choice] The driver recycles each response as the next request of
//! its flow, restoring the shim and params from the flow's template (one
//! copy of 16 + P bytes), so no allocation is timed; both sides pay it.

use std::ops::Range;

use inca_apps::fixtures::nat_tcp_flows;
use inca_apps::headers::parse;
use inca_server::{NfOutput, SoftwareNf};
use inca_switch::device::Nanos;
use inca_system::bench::{median, profiled, timed_rate, Baseline, Ctx, Measured};
use inca_wire::clip::shim::{self, ClipRepr, Kind, Sel, Status, COMMON_LEN, FLAG_CMS_VALID};

use crate::app::RemoteHandler;
use crate::apps::mfwd::MfwdHandler;
use crate::apps::null::NullHandler;
use crate::apps::snat::{SnatHandler, POOL_PORTS};
use crate::flow::FlowKey;
use crate::server::{ClipRuntime, RuntimeConfig};

/// Flows.
const FLOWS: u16 = 1024;
/// Virtual time between requests.
const GAP_NS: Nanos = 10;
/// Where the shim starts in an untagged frame.
const SHIM_AT: usize = 14;

/// One runtime on one core fed the flows' requests in turn.
struct Rig<H: RemoteHandler> {
    rt: ClipRuntime<H>,
    templates: Vec<Vec<u8>>,
    frames: Vec<Vec<u8>>,
    /// The shim and params: what a response changes.
    head: Range<usize>,
    out: Vec<NfOutput>,
    now: Nanos,
    next: usize,
    /// Requests that produced no response.
    lost: u64,
}

impl<H: RemoteHandler> Rig<H> {
    /// A rig around `handler`, each flow's params from `params`.
    fn new(handler: H, params: impl Fn(&FlowKey) -> Vec<u8>) -> Result<Self, String> {
        let app_id = handler.app_id();
        let p = handler.params_len();
        let rt =
            ClipRuntime::new(RuntimeConfig::default(), 1, handler).map_err(|e| e.to_string())?;
        let mut templates = Vec::new();
        for (i, mut f) in nat_tcp_flows(FLOWS).into_iter().enumerate() {
            let key = FlowKey::of_parsed(&parse(&f).map_err(|e| format!("{e:?}"))?, 0);
            let repr = ClipRepr {
                kind: Kind::Request,
                flags: FLAG_CMS_VALID,
                load_type: 0,
                app_id,
                hdr_words: 0,
                parsed_len: 40,
                server_id: 1,
                sel: Sel::Cur,
                status: Status::Ok,
                grp_ver: 1,
                cms_est: i as u32,
            };
            shim::push(&mut f, repr, &params(&key)).map_err(|e| e.to_string())?;
            templates.push(f);
        }
        Ok(Rig {
            rt,
            frames: templates.clone(),
            templates,
            head: SHIM_AT..SHIM_AT + COMMON_LEN + p,
            out: Vec::with_capacity(1),
            now: 1_000_000,
            next: 0,
            lost: 0,
        })
    }

    /// Serves `n` requests; returns `n`.
    fn run(&mut self, n: u64) -> u64 {
        for _ in 0..n {
            let k = self.next;
            self.next = (k + 1) % self.frames.len();
            let frame = std::mem::take(&mut self.frames[k]);
            self.rt.process_at(self.now, 0, 0, frame, &mut self.out);
            self.now += GAP_NS;
            match self.out.pop() {
                Some((_, mut f)) if f.len() == self.templates[k].len() => {
                    f[self.head.clone()].copy_from_slice(&self.templates[k][self.head.clone()]);
                    self.frames[k] = f;
                }
                _ => {
                    self.lost += 1;
                    self.frames[k] = self.templates[k].clone();
                }
            }
        }
        n
    }

    /// Every request answered OK.
    fn check(&self, what: &str) -> Result<(), String> {
        let s = self.rt.stats();
        if self.lost != 0 || s.status_ok != s.requests || s.requests != s.frames {
            return Err(format!(
                "{what}: {} frames, {} requests, {} OK, {} without a response",
                s.frames, s.requests, s.status_ok, self.lost
            ));
        }
        Ok(())
    }
}

fn null() -> Result<Rig<NullHandler>, String> {
    Rig::new(NullHandler::new(), |_| Vec::new())
}

fn mfwd_rig() -> Result<Rig<MfwdHandler>, String> {
    let mut h = MfwdHandler::default();
    for f in nat_tcp_flows(FLOWS) {
        let key = FlowKey::of_parsed(&parse(&f).map_err(|e| format!("{e:?}"))?, 0);
        h.mirror_insert(MfwdHandler::entry(key, 7));
    }
    Rig::new(h, |k| k.0.to_vec())
}

fn snat_rig() -> Result<Rig<SnatHandler>, String> {
    let mut h = SnatHandler::default();
    h.pool_assign(POOL_PORTS, [198, 51, 100, 1], 1024, 65_535);
    Rig::new(h, |k| k.0.to_vec())
}

/// Times `rig` against the NULL runtime, `runs` times each.
fn versus<H: RemoteHandler>(
    ctx: &Ctx,
    mut rig: Rig<H>,
    what: &str,
) -> Result<(Measured, Rig<H>), String> {
    let (n, warm) = (ctx.size(2_000_000, 100_000), ctx.size(200_000, 20_000));
    let mut base_rig = null()?;
    rig.run(warm);
    base_rig.run(warm);
    let (mut samples, mut base) = (Vec::new(), Vec::new());
    for _ in 0..ctx.runs.max(1) {
        samples.push(timed_rate(|| rig.run(n)));
        base.push(timed_rate(|| base_rig.run(n)));
    }
    rig.check(what)?;
    base_rig.check("NULL")?;
    let ns = |s: &[f64]| 1e9 / median(s).max(f64::MIN_POSITIVE);
    let notes = vec![format!(
        "{n} requests per run, {FLOWS} flows, 1 core: {:.0} ns/request with {what}, {:.0} ns with NULL",
        ns(&samples),
        ns(&base)
    )];
    let m = Measured {
        samples,
        baseline: Baseline::Measured {
            what: "the same runtime with the NULL handler (the framework alone)".into(),
            samples: base,
        },
        notes,
    };
    Ok((m, rig))
}

/// `clip-server-core`: MFWD.
pub fn mfwd(ctx: &Ctx) -> Result<Measured, String> {
    let (m, rig) = versus(ctx, mfwd_rig()?, "MFWD")?;
    let hits = rig.rt.handler().stats().hits;
    if hits != rig.rt.stats().requests {
        return Err(format!(
            "MFWD: {hits} hits of {} requests",
            rig.rt.stats().requests
        ));
    }
    Ok(m)
}

/// `clip-server-snat`: SNAT.
pub fn snat(ctx: &Ctx) -> Result<Measured, String> {
    let (m, rig) = versus(ctx, snat_rig()?, "SNAT")?;
    let s = rig.rt.handler().stats();
    if s.allocated != u64::from(FLOWS) || s.hits + s.allocated != rig.rt.stats().requests {
        return Err(format!(
            "SNAT: {} allocated, {} hits of {} requests",
            s.allocated,
            s.hits,
            rig.rt.stats().requests
        ));
    }
    Ok(m)
}

/// `clip-server-core --profile-iterations N`.
pub fn profile_mfwd(n: u64) -> Result<String, String> {
    let mut rig = mfwd_rig()?;
    rig.run(10_000);
    profiled(|| rig.run(n));
    rig.check("MFWD")?;
    Ok(format!("{n} MFWD requests through the CLIP server runtime"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows run and their checks hold.
    #[test]
    fn the_rows_run_with_their_checks() {
        let ctx = Ctx {
            runs: 1,
            quick: true,
        };
        for m in [mfwd(&ctx).unwrap(), snat(&ctx).unwrap()] {
            assert!(m.samples[0] > 0.0);
            assert!(m.baseline.median().is_some_and(|b| b > 0.0));
        }
    }

    /// A recycled request is the template again.
    #[test]
    fn recycled_requests_are_the_templates() {
        let mut rig = mfwd_rig().unwrap();
        rig.run(u64::from(FLOWS) * 2);
        assert_eq!(rig.frames, rig.templates);
        assert_eq!(rig.rt.handler().stats().hits, u64::from(FLOWS) * 2);
    }
}
