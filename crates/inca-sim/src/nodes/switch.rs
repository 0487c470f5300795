//! A programmable switch (or smart NIC, or server data path) as a simulator
//! node: the `inca_switch::Switch` device with its counters reported.
//!
//! The report has the totals, each port's (`port<N>.rx_packets`,
//! `.tx_packets`, `.tm_drops`), every table's occupancy
//! (`table.<name>.entries` of `.capacity`), the DRAM its placement uses,
//! and the control channel's operations and RPCs. A device on the
//! `smartnic` profile reports as kind `smartnic`.

use std::any::Any;

use inca_switch::device::Nanos;
use inca_switch::{Program, Switch};

use crate::engine::Node;
use crate::metrics::{NodeReport, Series};

impl<P: Program> Node for Switch<P> {
    fn kind(&self) -> &'static str {
        if self.profile().name == "smartnic" {
            "smartnic"
        } else {
            "switch"
        }
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
        c("input_drops", s.input_drops);
        c("pass_limit_drops", s.pass_limit_drops);
        c("no_group_drops", s.no_group_drops);
        c("mirrored", s.mirrored);
        c("cp_rpcs", s.cp_rpcs);
        c("cp_ops_refused", s.cp_ops_refused);
        for (i, p) in s.ports.iter().enumerate() {
            // Ports that saw nothing would only bury the ones that did.
            if p.rx_packets + p.tx_packets + p.tm_drops > 0 {
                c(&format!("port{i}.rx_packets"), p.rx_packets);
                c(&format!("port{i}.tx_packets"), p.tx_packets);
                c(&format!("port{i}.tm_drops"), p.tm_drops);
            }
        }
        for (name, entries, capacity) in self.objects().table_occupancy() {
            c(&format!("table.{name}.entries"), entries as u64);
            c(&format!("table.{name}.capacity"), capacity);
        }
        let placement = self.placement();
        c("dram_used_bytes", placement.dram_used);
        c("dram_bytes", placement.dram_bytes);
        // The program's own measurements; a name the switch already uses
        // keeps the switch's value.
        let extra = self.program().report();
        for (k, v) in extra.counters {
            r.counters.entry(k).or_insert(v);
        }
        for (k, s) in extra.series {
            r.series.entry(k).or_insert_with(|| Series {
                bin: s.bin.max(1),
                values: s.values,
            });
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use inca_switch::objects::{AccessError, DataPlane, Declare, DeclareError};
    use inca_switch::{Gress, PacketCtx, ParseError, Profile, ProgramReport, ProgramSeries};

    /// A program that drops everything and reports fixed measurements, one
    /// of them under a name the switch itself uses.
    #[derive(Clone)]
    struct Reporting;

    impl Program for Reporting {
        type Meta = ();
        type Digest = ();
        fn name(&self) -> &str {
            "reporting"
        }
        fn declare(&mut self, _decl: &mut Declare) -> Result<(), DeclareError> {
            Ok(())
        }
        fn parse(&self, _g: Gress, _h: &[u8], _m: &mut ()) -> Result<(), ParseError> {
            Ok(())
        }
        fn ingress(
            &mut self,
            pkt: &mut PacketCtx<(), ()>,
            _dp: &mut DataPlane<'_>,
        ) -> Result<(), AccessError> {
            pkt.drop_packet();
            Ok(())
        }
        fn report(&self) -> ProgramReport {
            ProgramReport {
                counters: vec![("depth_max".into(), 42), ("punts".into(), 99)],
                series: vec![(
                    "depth".into(),
                    ProgramSeries {
                        bin: 1000,
                        values: vec![1, 2],
                    },
                )],
            }
        }
    }

    #[test]
    fn the_programs_own_measurements_are_appended_to_the_report() {
        let sw = Switch::new(Profile::tofino(), Reporting).unwrap();
        let r = Node::report(&sw, 0);
        assert_eq!(r.counters["depth_max"], 42);
        assert_eq!(r.counters["punts"], 0, "the switch's own counter wins");
        assert_eq!(
            r.series["depth"],
            Series {
                bin: 1000,
                values: vec![1, 2]
            }
        );
    }
}
