//! `echo`: the responder of `request` clients. It answers every UDP probe to
//! its port (and, with `tcp`, every generated TCP segment carrying one) with
//! the same payload, ends swapped, so the probe's transmit time is the
//! request's.

use inca_switch::device::Nanos;
use inca_wire::build_udp_frame;

use super::{report_tx, Arrival, HostInfo, Workload};
use crate::metrics::NodeReport;
use crate::nodes::encap::{Shape, L4};
use crate::nodes::host::schema::EchoConfig;
use crate::nodes::host::WorkloadStats;

/// An `echo` workload.
#[derive(Debug)]
pub(crate) struct EchoWorkload {
    port: u16,
    /// Also answer TCP segments carrying a probe.
    tcp: bool,
}

/// Builds an `echo` workload.
pub(crate) fn build_echo(c: &EchoConfig) -> Box<dyn Workload> {
    Box::new(EchoWorkload {
        port: c.port,
        tcp: c.tcp,
    })
}

impl Workload for EchoWorkload {
    fn reply_udp(&mut self, host: &HostInfo, _now: Nanos, d: &Arrival<'_>) -> Option<Vec<u8>> {
        if d.dport != self.port || d.probe.is_none() {
            return None;
        }
        // Any destination address is answered: links are point to point,
        // and a load balancer may have delivered a virtual address.
        let ep = host.endpoints(d.dst, d.src);
        build_udp_frame(&ep, d.dport, d.sport, d.payload, true).ok()
    }

    fn reply_tcp(&mut self, host: &HostInfo, _now: Nanos, d: &Arrival<'_>) -> Option<Vec<u8>> {
        if !self.tcp || d.dport != self.port {
            return None;
        }
        let shape = Shape {
            l4: L4::Tcp(0x18),
            ..Shape::default()
        };
        let ep = host.endpoints(d.dst, d.src);
        shape.build(&ep, d.dst, d.dport, d.src, d.sport, d.payload)
    }

    fn report(&self, name: &str, stats: &WorkloadStats, r: &mut NodeReport) {
        report_tx(name, stats, r);
    }
}
