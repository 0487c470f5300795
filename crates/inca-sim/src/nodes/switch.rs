//! A programmable switch (or smart NIC, or server data path) as a simulator
//! node: the `inca_switch::Switch` device with its counters reported.

use std::any::Any;

use inca_switch::device::Nanos;
use inca_switch::{Program, Switch};

use crate::engine::Node;
use crate::metrics::NodeReport;

impl<P: Program> Node for Switch<P> {
    fn kind(&self) -> &'static str {
        "switch"
    }

    fn report(&self, _now: Nanos) -> NodeReport {
        let s = self.stats();
        let mut r = NodeReport::default();
        let mut c = |k: &str, v: u64| {
            r.counters.insert(k.to_string(), v);
        };
        c("rx_packets", s.ports.iter().map(|p| p.rx_packets).sum());
        c("tx_packets", s.ports.iter().map(|p| p.tx_packets).sum());
        c("tm_drops", s.ports.iter().map(|p| p.tm_drops).sum());
        c("parse_drops", s.parse_drops);
        c("program_drops", s.program_drops);
        c("violation_drops", s.violation_drops);
        c("bad_port_drops", s.bad_port_drops);
        c("feature_drops", s.feature_drops);
        c("punts", s.punts);
        c("digests", s.digests);
        c("recirculations", s.recirculations);
        c("generated", s.generated);
        c("cp_ops", s.cp_ops);
        c("cp_op_failures", s.cp_op_failures);
        c("cpu_events", s.cpu_events);
        c("cpu_queue_drops", s.cpu_queue_drops);
        c("punt_drops", s.punt_drops);
        c("violations", self.violations().len() as u64);
        r.notes.push(format!(
            "program {} on profile {}",
            self.program().name(),
            self.profile().name
        ));
        r
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
