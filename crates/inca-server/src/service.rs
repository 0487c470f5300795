//! A service-time queue: one FIFO server (a store worker, a CPU core, a
//! NIC's packet engine) that takes a given time per request.
//!
//! Requests are served in arrival order: one arriving at `now` starts when
//! the server is free (`max(now, busy_until)`) and is done a service time
//! later. The queue does not hold the requests themselves (a sans-IO device
//! applies the request at once and delays only its outputs to `done`); it
//! holds the backlog, the time already promised to earlier requests, and
//! refuses a request, counted, when that backlog reaches its bound.

use inca_switch::device::Nanos;

/// How much backlog a [`ServiceQueue`] accepts before it drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueBound {
    /// At most this many requests admitted and not finished (the one in
    /// service included), counted as the backlog in units of the arriving
    /// request's service time. A zero-time request always finds the backlog
    /// at 0 requests, so only `Requests(0)` refuses it.
    Requests(usize),
    /// At most this long a wait before service starts.
    Backlog(Nanos),
}

/// When an admitted request is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted {
    /// Service starts.
    pub start: Nanos,
    /// Service ends (the request's outputs may leave).
    pub done: Nanos,
}

/// The queue's bound refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("service queue full")]
pub struct QueueFull;

/// What a [`ServiceQueue`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServiceStats {
    /// Requests admitted.
    pub admitted: u64,
    /// Requests refused because the backlog was at its bound.
    pub dropped: u64,
    /// Service time of the admitted requests, summed.
    pub busy_ns: u64,
}

/// One FIFO server with a bounded backlog. See the module documentation.
#[derive(Debug, Clone)]
pub struct ServiceQueue {
    bound: QueueBound,
    busy_until: Nanos,
    stats: ServiceStats,
}

impl ServiceQueue {
    /// An idle server.
    pub fn new(bound: QueueBound) -> Self {
        ServiceQueue {
            bound,
            busy_until: 0,
            stats: ServiceStats::default(),
        }
    }

    /// Admits a request arriving at `now` that takes `service`, or refuses
    /// it (counted) when the backlog is at the bound.
    pub fn admit(&mut self, now: Nanos, service: Nanos) -> Result<Admitted, QueueFull> {
        let start = self.busy_until.max(now);
        let backlog = start - now;
        let full = match self.bound {
            QueueBound::Requests(n) => backlog.checked_div(service).unwrap_or(0) >= n as u64,
            QueueBound::Backlog(limit) => backlog > limit,
        };
        if full {
            self.stats.dropped += 1;
            return Err(QueueFull);
        }
        self.busy_until = start + service;
        self.stats.admitted += 1;
        self.stats.busy_ns += service;
        Ok(Admitted {
            start,
            done: self.busy_until,
        })
    }

    /// When the server finishes the work it has admitted.
    pub fn busy_until(&self) -> Nanos {
        self.busy_until
    }

    /// How long a request arriving at `now` waits before service.
    pub fn backlog(&self, now: Nanos) -> Nanos {
        self.busy_until.saturating_sub(now)
    }

    /// The bound.
    pub fn bound(&self) -> QueueBound {
        self.bound
    }

    /// Counters.
    pub fn stats(&self) -> &ServiceStats {
        &self.stats
    }

    /// A crash: the admitted work is lost and the server is idle. The
    /// counters survive (they are what the device reports).
    pub fn reset(&mut self) {
        self.busy_until = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_served_in_order_back_to_back() {
        let mut q = ServiceQueue::new(QueueBound::Requests(8));
        let a = q.admit(100, 10).unwrap();
        let b = q.admit(100, 10).unwrap();
        let c = q.admit(105, 10).unwrap();
        assert_eq!((a.start, a.done), (100, 110));
        assert_eq!((b.start, b.done), (110, 120));
        assert_eq!((c.start, c.done), (120, 130));
        assert_eq!(q.backlog(105), 25);
        // Idle again: the next one starts on arrival.
        let d = q.admit(500, 10).unwrap();
        assert_eq!((d.start, d.done), (500, 510));
        assert_eq!(q.stats().busy_ns, 40);
        assert_eq!(q.stats().admitted, 4);
    }

    #[test]
    fn request_bound_drops_and_counts_the_overflow() {
        let mut q = ServiceQueue::new(QueueBound::Requests(2));
        // One in service, one waiting: the third is refused.
        for _ in 0..2 {
            q.admit(0, 10).unwrap();
        }
        assert_eq!(q.admit(0, 10), Err(QueueFull));
        assert_eq!(q.admit(0, 10), Err(QueueFull));
        assert_eq!(q.stats().dropped, 2);
        assert_eq!(q.busy_until(), 20, "a refused request takes no time");
        // Once one is served there is room again.
        assert_eq!(q.admit(10, 10).unwrap().done, 30);
        assert_eq!(q.stats().admitted, 3);
    }

    #[test]
    fn backlog_bound_is_a_wait_in_time() {
        let mut q = ServiceQueue::new(QueueBound::Backlog(20));
        for _ in 0..3 {
            q.admit(0, 10).unwrap(); // waits 0, 10, 20
        }
        assert_eq!(q.admit(0, 10), Err(QueueFull)); // would wait 30
        assert_eq!(q.stats().dropped, 1);
    }

    #[test]
    fn zero_service_time_never_queues() {
        let mut q = ServiceQueue::new(QueueBound::Requests(1));
        for _ in 0..100 {
            assert_eq!(q.admit(7, 0).unwrap().done, 7);
        }
        assert_eq!(q.stats().dropped, 0);
        let mut closed = ServiceQueue::new(QueueBound::Requests(0));
        assert_eq!(closed.admit(7, 0), Err(QueueFull));
    }

    #[test]
    fn reset_idles_the_server_but_keeps_counters() {
        let mut q = ServiceQueue::new(QueueBound::Requests(1));
        q.admit(0, 100).unwrap();
        assert!(q.admit(0, 100).is_err());
        q.reset();
        assert_eq!(q.admit(0, 100).unwrap().start, 0);
        assert_eq!(q.stats().dropped, 1);
        assert_eq!(q.stats().admitted, 2);
    }
}
