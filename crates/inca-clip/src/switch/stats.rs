//! The switch's per-packet-type counters (§3.1).

/// What the CLIP program did with packets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwitchStats {
    /// Original packets finished in the switch.
    pub fast: u64,
    /// Original packets sent to a server.
    pub flight: u64,
    /// Responses finished.
    pub response: u64,
    /// CLIP frames refused (not from a server port, not a response, not
    /// this app, malformed) and non-CTL frames from server ports.
    pub invalid_drop: u64,
    /// Responses whose handler said DROP.
    pub status_drop: u64,
    /// Flight packets with no server to go to.
    pub no_server_drop: u64,
    /// Pairs record mode could not cache (a digest went up instead).
    pub pin_cache_overflow: u64,
    /// CLIP-CTL datagrams from servers punted to the controller.
    pub ctl_in: u64,
}

impl SwitchStats {
    /// Named counters for reports.
    pub fn counters(&self) -> Vec<(String, u64)> {
        [
            ("clip_fast", self.fast),
            ("clip_flight", self.flight),
            ("clip_response", self.response),
            ("clip_invalid_drop", self.invalid_drop),
            ("clip_status_drop", self.status_drop),
            ("clip_no_server_drop", self.no_server_drop),
            ("clip_pin_cache_overflow", self.pin_cache_overflow),
            ("clip_ctl_in", self.ctl_in),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect()
    }
}
