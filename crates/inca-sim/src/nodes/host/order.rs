//! Arrival order: how many probes a receiving host gets after a later
//! packet of the same flow (reordering, spec'd for CLIP's promotions in
//! specs/clip.md §9 item 9, and seen wherever paths change under a flow).
//!
//! A generator numbers its packets in sending order (the probe's `seq`),
//! so within one flow a probe whose `seq` is below the highest already
//! received arrived out of order. A flow is (source address, source port,
//! destination port, the probe's flow index): what one generator's flow
//! keeps from end to end, NAT included, since a translation is fixed per
//! flow. [our choice] Each such late probe counts once (`rx_reordered`);
//! one whose `seq` equals the highest is a duplicate (`rx_duplicate`). At
//! most [`MAX_ORDER_FLOWS`] flows are followed; probes of flows beyond
//! that are counted as `rx_order_untracked` and not judged.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use crate::metrics::NodeReport;

/// Most flows one host follows [our choice: a sink of CLIP's E3–E6 sees
/// 16,384; 65,536 entries of about 40 B each is a few MB at most].
pub const MAX_ORDER_FLOWS: usize = 65_536;

/// A flow as the receiver tells it apart.
type FlowId = (Ipv4Addr, u16, u16, u32);

/// Per-flow highest sequence numbers and the counters they give.
#[derive(Debug, Default)]
pub(crate) struct Order {
    highest: HashMap<FlowId, u64>,
    reordered: u64,
    duplicate: u64,
    untracked: u64,
}

impl Order {
    /// Takes a probe `seq` of flow (`src`, `sport`, `dport`, `flow`).
    pub fn record(&mut self, src: Ipv4Addr, sport: u16, dport: u16, flow: u32, seq: u64) {
        let id = (src, sport, dport, flow);
        if let Some(top) = self.highest.get_mut(&id) {
            match seq.cmp(top) {
                std::cmp::Ordering::Less => self.reordered += 1,
                std::cmp::Ordering::Equal => self.duplicate += 1,
                std::cmp::Ordering::Greater => *top = seq,
            }
        } else if self.highest.len() < MAX_ORDER_FLOWS {
            self.highest.insert(id, seq);
        } else {
            self.untracked += 1;
        }
    }

    /// Adds the counters to `r`.
    pub fn report(&self, r: &mut NodeReport) {
        r.counters.insert("rx_reordered".into(), self.reordered);
        r.counters.insert("rx_duplicate".into(), self.duplicate);
        r.counters
            .insert("rx_order_untracked".into(), self.untracked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

    #[test]
    fn a_late_probe_counts_once_per_flow_and_flows_are_apart() {
        let mut o = Order::default();
        for seq in [1, 3, 2, 4, 4] {
            o.record(A, 1000, 7, 0, seq);
        }
        // Flow 1 interleaved with flow 0: its own order only.
        for seq in [5, 6] {
            o.record(A, 1001, 7, 1, seq);
        }
        let mut r = NodeReport::default();
        o.report(&mut r);
        assert_eq!(r.counters["rx_reordered"], 1);
        assert_eq!(r.counters["rx_duplicate"], 1);
        assert_eq!(r.counters["rx_order_untracked"], 0);
    }

    #[test]
    fn flows_beyond_the_limit_are_counted_not_judged() {
        let mut o = Order::default();
        for f in 0..MAX_ORDER_FLOWS as u32 + 2 {
            o.record(A, 1, 2, f, 10);
        }
        o.record(A, 1, 2, MAX_ORDER_FLOWS as u32 + 1, 1);
        let mut r = NodeReport::default();
        o.report(&mut r);
        assert_eq!(r.counters["rx_order_untracked"], 3);
        assert_eq!(r.counters["rx_reordered"], 0);
    }
}
