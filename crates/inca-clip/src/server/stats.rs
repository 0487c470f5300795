//! The server runtime's counters (spec §5.3), as the node report shows
//! them.

use super::request::Invalid;

/// What the runtime did. Counters survive a crash (they belong to the
/// experiment); gauges (records, candidates held) are read live.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    /// Frames handed to the runtime.
    pub frames: u64,
    /// Valid requests served.
    pub requests: u64,
    /// Responses sent.
    pub responses: u64,
    /// Invalid frames, by reason ([`Invalid::ALL`] order).
    pub invalid: [u64; 7],
    /// Requests naming another server (served anyway).
    pub misdelivered: u64,
    /// Requests whose group version differs from their flow's assigned
    /// one (an affinity violation, §5.3 step 3).
    pub ver_mismatch: u64,
    /// Flow records created.
    pub flows_new: u64,
    /// Flow records expired (idle ≥ T_exp, not offloaded).
    pub flows_expired: u64,
    /// New flows served without a record: the core's table was full.
    pub record_overflow: u64,
    /// Candidates evicted by better ones.
    pub candidate_evictions: u64,
    /// Candidates refused: the core's map was full of better ones.
    pub candidate_refusals: u64,
    /// Handler verdicts: OK, DROP, NO_RESULT.
    pub status_ok: u64,
    /// See `status_ok`.
    pub status_drop: u64,
    /// See `status_ok`.
    pub status_no_result: u64,
    /// Created entries lost: the ENTRY_CREATED queue was full.
    pub created_overflow: u64,
    /// Expired flows not reported: the FLOW_EXPIRED queue was full.
    pub expired_overflow: u64,
    /// Frames on a core the runtime was not built for (a harness bug).
    pub bad_core: u64,
    /// ENTRY_OFFLOADED for a flow without a record.
    pub offload_unknown: u64,
    /// Top-N reports made.
    pub topn_reports: u64,
}

impl RuntimeStats {
    /// Counts an invalid frame.
    pub fn invalid(&mut self, why: Invalid) {
        if let Some(i) = Invalid::ALL.iter().position(|&r| r == why) {
            self.invalid[i] += 1;
        }
    }

    /// Invalid frames of every reason.
    pub fn invalid_total(&self) -> u64 {
        self.invalid.iter().sum()
    }

    /// The counters by name.
    pub fn named(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = vec![
            ("frames".into(), self.frames),
            ("requests".into(), self.requests),
            ("responses".into(), self.responses),
            ("invalid".into(), self.invalid_total()),
        ];
        for (why, n) in Invalid::ALL.iter().zip(self.invalid) {
            v.push((why.counter().into(), n));
        }
        v.extend([
            ("misdelivered".into(), self.misdelivered),
            ("ver_mismatch".into(), self.ver_mismatch),
            ("flows_new".into(), self.flows_new),
            ("flows_expired".into(), self.flows_expired),
            ("record_overflow".into(), self.record_overflow),
            ("candidate_evictions".into(), self.candidate_evictions),
            ("candidate_refusals".into(), self.candidate_refusals),
            ("status_ok".into(), self.status_ok),
            ("status_drop".into(), self.status_drop),
            ("status_no_result".into(), self.status_no_result),
            ("created_overflow".into(), self.created_overflow),
            ("expired_overflow".into(), self.expired_overflow),
            ("bad_core".into(), self.bad_core),
            ("offload_unknown".into(), self.offload_unknown),
            ("topn_reports".into(), self.topn_reports),
        ]);
        v
    }
}
