//! Changes to a running workload, delivered to its host as a control
//! message: the simulator's way of shifting a workload's popularity or
//! bursting it mid-run (the `workload_shift` and `workload_storm` kinds of
//! [`crate::random_faults`]).
//!
//! - **Shift**: a Zipf workload's ranking moves on, as one more period of
//!   its `rotate_every` would: the flows that were hot turn cold and others
//!   take their place (ExoPlane's spec §6 "Zipf workload shifts").
//! - **Storm**: the workload sends at `factor` times its rate and picks its
//!   flows uniformly, so every one of them is hot at once — for a system
//!   that promotes hot flows, a promotion (and eviction) storm.
//! - **Calm**: the storm ends; back to the configured rate and popularity.
//!
//! A message is [`WORKLOAD_CONTROL`] with the body `op` 8 ‖ `factor` 32
//! (big-endian; storms only, else 0) ‖ the workload's name (UTF-8). A host
//! counts what it applied (`workload_controls`) and what it could not (an
//! unknown workload, a shift of a workload without Zipf, a malformed
//! body: `control_ignored`).

use inca_switch::device::ControlMessage;

/// The control-message kind of a workload change ("WL" 0x574c).
pub const WORKLOAD_CONTROL: u32 = 0x574c_0001;

/// Longest workload name a message carries.
const MAX_NAME: usize = 256;

/// What a workload is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadChange {
    /// Move the popularity ranking on (Zipf workloads).
    Shift,
    /// Send `factor` times faster, every flow equally popular.
    Storm {
        /// Rate multiple (at least 1).
        factor: u32,
    },
    /// End a storm.
    Calm,
}

impl WorkloadChange {
    /// The message telling workload `name` to change.
    pub fn message(self, name: &str) -> ControlMessage {
        let (op, factor) = match self {
            WorkloadChange::Shift => (1u8, 0u32),
            WorkloadChange::Storm { factor } => (2, factor),
            WorkloadChange::Calm => (3, 0),
        };
        let mut body = Vec::with_capacity(5 + name.len());
        body.push(op);
        body.extend_from_slice(&factor.to_be_bytes());
        body.extend_from_slice(name.as_bytes());
        ControlMessage {
            kind: WORKLOAD_CONTROL,
            body,
        }
    }

    /// The change and workload name a message carries; `None` if it is not
    /// one or is malformed.
    pub fn parse(m: &ControlMessage) -> Option<(WorkloadChange, &str)> {
        if m.kind != WORKLOAD_CONTROL || m.body.len() < 6 || m.body.len() > 5 + MAX_NAME {
            return None;
        }
        let factor = u32::from_be_bytes(m.body[1..5].try_into().ok()?);
        let change = match m.body[0] {
            1 => WorkloadChange::Shift,
            2 if factor >= 1 => WorkloadChange::Storm { factor },
            3 => WorkloadChange::Calm,
            _ => return None,
        };
        Some((change, std::str::from_utf8(&m.body[5..]).ok()?))
    }

    /// Its name in fault tallies and schedules.
    pub fn label(self) -> &'static str {
        match self {
            WorkloadChange::Shift => "workload_shift",
            WorkloadChange::Storm { .. } => "workload_storm",
            WorkloadChange::Calm => "workload_calm",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_garbage_is_refused() {
        for c in [
            WorkloadChange::Shift,
            WorkloadChange::Storm { factor: 16 },
            WorkloadChange::Calm,
        ] {
            let m = c.message("nat-hot");
            assert_eq!(WorkloadChange::parse(&m), Some((c, "nat-hot")));
        }
        let mut m = WorkloadChange::Shift.message("x");
        m.body[0] = 9;
        assert_eq!(WorkloadChange::parse(&m), None);
        let m = WorkloadChange::Storm { factor: 0 }.message("x");
        assert_eq!(WorkloadChange::parse(&m), None, "a storm of factor 0");
        for body in [vec![], vec![1, 0, 0, 0, 0], vec![1, 0, 0, 0, 0, 0xff]] {
            let m = ControlMessage {
                kind: WORKLOAD_CONTROL,
                body,
            };
            assert_eq!(WorkloadChange::parse(&m), None);
        }
    }
}
