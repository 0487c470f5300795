//! A sender's congestion window (see "Congestion control" in the module
//! documentation of [`super`]): slow start, then CUBIC (RFC 8312) or Reno.

use super::*;

/// CUBIC's multiplicative decrease (RFC 8312).
pub(super) const CUBIC_BETA: f64 = 0.7;
/// CUBIC's scaling constant, in segments per second cubed (RFC 8312).
pub(super) const CUBIC_C: f64 = 0.4;
/// Additive increase of CUBIC's TCP-friendly estimate, in segments per window,
/// so that it matches Reno's average rate (RFC 8312, section 4.2).
pub(super) const CUBIC_ALPHA: f64 = 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA);
/// Initial window, in segments (RFC 6928, as Linux).
pub(super) const INITIAL_WINDOW_SEGMENTS: f64 = 10.0;

/// A sender's congestion window, in bytes (see "Congestion control" in the
/// module documentation). Floating point is fine here: the simulator runs one
/// binary, and IEEE arithmetic is deterministic.
#[derive(Debug, Clone)]
pub(super) struct Window {
    pub(super) algorithm: Congestion,
    /// Segment size assumed for growth: the MTU minus 40 bytes of headers.
    pub(super) mss: usize,
    pub(super) cwnd: f64,
    pub(super) ssthresh: f64,
    /// Never larger than the send buffer (it could not be used).
    pub(super) max: f64,
    /// CUBIC: window before the last reduction.
    pub(super) w_max: f64,
    /// CUBIC: the TCP-friendly (Reno-rate) estimate.
    pub(super) w_est: f64,
    /// CUBIC: when the current congestion-avoidance epoch began.
    pub(super) epoch: Nanos,
    /// The connection's initial sequence number, from our SYN.
    pub(super) isn: Option<u32>,
    /// End (in sequence space) of the highest segment sent so far.
    pub(super) high: Option<u32>,
    /// In a loss episode until the cumulative ACK passes this sequence number;
    /// the window shrinks once per episode, however many segments go again.
    pub(super) recover: Option<u32>,
    /// The segment being timed for an RTT sample: (end sequence number, when
    /// sent). One at a time, as TCP does; dropped on retransmission (Karn).
    pub(super) probe: Option<(u32, Nanos)>,
    /// Smallest RTT seen, in ns (smoltcp only knows milliseconds).
    pub(super) min_rtt: Option<Nanos>,
    /// RTT samples so far.
    pub(super) samples: u32,
    /// Smoothed RTT and its variation (RFC 6298), in ns, once sampled.
    pub(super) srtt: Option<Nanos>,
    pub(super) rttvar: Nanos,
}

impl Window {
    pub(super) fn new(algorithm: Congestion, mss: usize, send_buffer: usize) -> Self {
        let max = send_buffer as f64;
        let cwnd = (INITIAL_WINDOW_SEGMENTS * mss as f64).min(max);
        Window {
            algorithm,
            mss,
            cwnd,
            ssthresh: f64::INFINITY,
            max,
            w_max: cwnd,
            w_est: cwnd,
            epoch: 0,
            isn: None,
            high: None,
            recover: None,
            probe: None,
            min_rtt: None,
            samples: 0,
            srtt: None,
            rttvar: 0,
        }
    }

    /// The retransmission timeout (RFC 6298, 2.3, with smoltcp's bounds), once
    /// there is an RTT sample.
    pub(super) fn rto(&self) -> Option<Nanos> {
        self.srtt.map(|srtt| {
            srtt.saturating_add(self.rttvar.saturating_mul(4))
                .clamp(MIN_RTO, MAX_RTO)
        })
    }

    /// Whether bytes are outstanding beyond the first `acked_total` data bytes
    /// (data or FIN sent and not acknowledged).
    pub(super) fn outstanding(&self, acked_total: u64) -> bool {
        match (self.isn, self.high) {
            (Some(isn), Some(high)) => {
                seq_lt(isn.wrapping_add(1).wrapping_add(acked_total as u32), high)
            }
            _ => false,
        }
    }

    /// Whether a segment about to be sent lies wholly below the highest
    /// sequence number sent: a retransmission that adds nothing new.
    pub(super) fn is_stale_retransmission(&self, seq: u32, len: usize, syn: bool) -> bool {
        let Some(high) = self.high else {
            return false;
        };
        !syn && len > 0 && seq_lt(seq, high) && !seq_lt(high, seq.wrapping_add(len as u32))
    }

    /// The most unacknowledged bytes the sender may have in its buffer.
    pub(super) fn limit(&self) -> usize {
        match self.algorithm {
            Congestion::None => usize::MAX,
            // At least two segments, so fast retransmit has a chance.
            _ => (self.cwnd as usize).max(2 * self.mss),
        }
    }

    /// `newly` more bytes were acknowledged, `acked_total` in all.
    pub(super) fn on_ack(&mut self, now: Nanos, acked_total: u64, newly: u64) {
        let Some(isn) = self.isn else {
            return;
        };
        // Data starts one after the SYN; sequence numbers wrap at 2^32.
        let ack = isn.wrapping_add(1).wrapping_add(acked_total as u32);
        if let Some((end, sent)) = self.probe {
            if !seq_lt(ack, end) {
                self.probe = None;
                self.on_rtt_sample(now, now.saturating_sub(sent));
            }
        }
        if let Some(recover) = self.recover {
            if seq_lt(ack, recover) {
                // Still repairing the loss: hold the window.
                return;
            }
            self.recover = None;
        }
        let newly = newly as f64;
        let mss = self.mss as f64;
        match self.algorithm {
            Congestion::None => return,
            _ if self.cwnd < self.ssthresh => self.cwnd += newly,
            Congestion::Reno => self.cwnd += mss * newly / self.cwnd,
            Congestion::Cubic => {
                let t = now.saturating_sub(self.epoch) as f64 / 1e9;
                let w_max = self.w_max / mss;
                let k = (w_max * (1.0 - CUBIC_BETA) / CUBIC_C).cbrt();
                let target = (CUBIC_C * (t - k).powi(3) + w_max) * mss;
                if target > self.cwnd {
                    self.cwnd += (target - self.cwnd) * newly / self.cwnd;
                }
                self.w_est += CUBIC_ALPHA * mss * newly / self.cwnd;
                self.cwnd = self.cwnd.max(self.w_est);
            }
        }
        self.cwnd = self.cwnd.min(self.max);
    }

    /// Slow start ends when the RTT rises clearly above the smallest seen: the
    /// bottleneck queue is filling (the idea of HyStart's delay increase, with
    /// thresholds for data-centre RTTs: 1/8 of the minimum, at least 16 µs,
    /// at most 1 ms). Without this, doubling the window overshoots the queue
    /// by up to a window, and smoltcp's go-back-N recovery cannot repair that
    /// many holes without a retransmission timeout (hundreds of ms).
    pub(super) fn on_rtt_sample(&mut self, now: Nanos, rtt: Nanos) {
        self.samples = self.samples.saturating_add(1);
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                // Wide arithmetic: samples are differences of u64 times.
                let var = (3 * u128::from(self.rttvar) + u128::from(srtt.abs_diff(rtt))) / 4;
                let smooth = (7 * u128::from(srtt) + u128::from(rtt)) / 8;
                self.rttvar = u64::try_from(var).unwrap_or(u64::MAX);
                self.srtt = Some(u64::try_from(smooth).unwrap_or(u64::MAX));
            }
        }
        let min = self.min_rtt.map_or(rtt, |m| m.min(rtt));
        self.min_rtt = Some(min);
        let threshold = (min / 8).clamp(16 * MICROS, MILLIS);
        if self.cwnd < self.ssthresh && self.samples >= 3 && rtt > min + threshold {
            self.ssthresh = self.cwnd;
            self.w_max = self.cwnd;
            self.w_est = self.cwnd;
            self.epoch = now;
        }
    }

    /// We sent a segment starting at `seq` and occupying `len` sequence numbers
    /// (payload plus SYN and FIN). Returns whether it was a retransmission.
    pub(super) fn on_sent(&mut self, now: Nanos, seq: u32, len: usize, syn: bool) -> bool {
        if syn {
            self.isn = Some(seq);
            self.high = Some(seq.wrapping_add(1));
            return false;
        }
        if len == 0 {
            return false;
        }
        let end = seq.wrapping_add(len as u32);
        let Some(high) = self.high else {
            self.high = Some(end);
            return false;
        };
        if seq_lt(high, end) {
            self.high = Some(end);
        }
        if !seq_lt(seq, high) {
            if self.probe.is_none() {
                self.probe = Some((end, now));
            }
            return false;
        }
        self.probe = None;
        if self.recover.is_none() {
            self.on_loss(now);
            self.recover = Some(high);
        }
        true
    }

    /// Multiplicative decrease, once per loss episode.
    pub(super) fn on_loss(&mut self, now: Nanos) {
        let beta = match self.algorithm {
            Congestion::None => return,
            Congestion::Reno => 0.5,
            Congestion::Cubic => CUBIC_BETA,
        };
        self.w_max = self.cwnd;
        self.cwnd = (self.cwnd * beta).max(2.0 * self.mss as f64);
        self.ssthresh = self.cwnd;
        self.w_est = self.cwnd;
        self.epoch = now;
    }
}
