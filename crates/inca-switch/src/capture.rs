//! Running control logic without a switch: capture the writes it issues.
//!
//! A program's control handler normally acts through a [`ControlPlane`]
//! whose operations take effect on the switch after their latency.
//! [`capture_control`] runs a handler against a control plane that only
//! records: every operation comes back as a [`CapturedOp`] with a
//! description ([`ControlWrite`]: which table or register, which entry, what
//! value) instead of being applied. ExoPlane's device daemon needs exactly
//! this ("run the app's control logic, collect its writes") to mirror an
//! app's control-plane state onto another device; a captured set can also be
//! [replayed](Captured::replay) onto a live control plane unchanged.
//!
//! Describing a write costs a clone of its key and action data, so the
//! switch turns descriptions on only while capturing.

pub use crate::control::ControlWrite;
use crate::control::{ControlPlane, IssuedOp, Op, Requests};
use crate::device::{ControlMessage, DeviceRng, Nanos};
use crate::profile::ControlPlaneTiming;
use crate::program::{ControlEvent, Program};

/// One operation a handler issued, described and held back.
pub struct CapturedOp {
    /// The request id the handler was given.
    pub request: u64,
    /// What it does.
    pub write: ControlWrite,
    op: Op,
    latency: Nanos,
    rate_limited: bool,
}

impl std::fmt::Debug for CapturedOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CapturedOp({}, {:?})", self.request, self.write)
    }
}

/// Everything one handler run asked for.
#[derive(Debug, Default)]
pub struct Captured {
    /// Its operations, in issue order.
    pub ops: Vec<CapturedOp>,
    /// Timers it set: `(at, token)`.
    pub timers: Vec<(Nanos, u64)>,
    /// Messages it sent out of the switch.
    pub messages: Vec<ControlMessage>,
}

impl Captured {
    /// The table and register writes alone (reads, packet-outs and
    /// configuration left out).
    pub fn writes(&self) -> impl Iterator<Item = &ControlWrite> {
        self.ops.iter().map(|o| &o.write).filter(|w| {
            matches!(
                w,
                ControlWrite::TableAdd { .. }
                    | ControlWrite::TableModify { .. }
                    | ControlWrite::TableDelete { .. }
                    | ControlWrite::RegisterWrite { .. }
                    | ControlWrite::RegisterWriteRange { .. }
                    | ControlWrite::RegisterClear { .. }
            )
        })
    }

    /// Issues the captured operations on `cp` (a switch whose program
    /// declared the same objects), in order, returning their new request
    /// ids. Timers and messages are not replayed.
    pub fn replay(self, cp: &mut ControlPlane<'_>) -> Vec<u64> {
        self.ops
            .into_iter()
            .map(|c| {
                *cp.next_request += 1;
                let request = *cp.next_request | cp.request_tag;
                cp.requests.ops.push(IssuedOp {
                    request,
                    op: c.op,
                    latency: c.latency,
                    rate_limited: c.rate_limited,
                });
                request
            })
            .collect()
    }
}

/// Runs `program`'s control handler for `event` at time `now` and returns
/// what it asked for instead of applying it. The program must have declared
/// its objects (its handles are what the writes name). Random choices the
/// handler makes draw from `rng` (the device RNG of whoever runs the logic).
pub fn capture_control<P: Program>(
    program: &mut P,
    event: ControlEvent<P::Digest>,
    now: Nanos,
    timing: &ControlPlaneTiming,
    rng: &mut DeviceRng,
) -> Captured {
    let mut requests = Requests {
        capture: true,
        ..Requests::default()
    };
    let mut next_request = 0;
    let mut cp = ControlPlane {
        now,
        timing,
        requests: &mut requests,
        next_request: &mut next_request,
        request_tag: 0,
        rng,
    };
    program.control(event, &mut cp);
    let mut described = std::mem::take(&mut requests.described)
        .into_iter()
        .peekable();
    let ops = requests
        .ops
        .into_iter()
        .filter_map(|issued| {
            let write = match ControlWrite::of_op(&issued.op) {
                Some(w) => w,
                // Object writes were described when issued, in issue order.
                None => match described.next_if(|(r, _)| *r == issued.request) {
                    Some((_, w)) => w,
                    None => {
                        // Every object write describes itself when capturing.
                        debug_assert!(false, "undescribed object write {}", issued.request);
                        return None;
                    }
                },
            };
            Some(CapturedOp {
                request: issued.request,
                write,
                op: issued.op,
                latency: issued.latency,
                rate_limited: issued.rate_limited,
            })
        })
        .collect();
    Captured {
        ops,
        timers: requests.timers,
        messages: requests.messages,
    }
}
