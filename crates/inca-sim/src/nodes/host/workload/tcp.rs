//! `tcp` and `tcp_sink`: bulk TCP transfers through the host's one TCP
//! stack ([`crate::tcp::TcpStack`]), which the host owns and polls; these
//! workloads only open their connections in it at the start of each life.

use std::net::SocketAddrV4;

use inca_switch::device::Nanos;
use inca_switch::units;

use super::{BuildContext, Workload};
use crate::metrics::NodeReport;
use crate::nodes::host::schema::{
    invalid, parse_time_field, HostError, TcpSendConfig, TcpSinkConfig, MAX_BACKLOG,
};
use crate::nodes::host::WorkloadStats;
use crate::tcp::{FlowId, TcpStack};

/// A `tcp` workload: one bulk sender.
#[derive(Debug)]
pub(crate) struct TcpSend {
    dst: SocketAddrV4,
    bytes: Option<u64>,
    start: Nanos,
    src_port: u16,
}

/// Builds a `tcp` workload.
pub(crate) fn build_tcp(
    c: &TcpSendConfig,
    cx: &BuildContext<'_>,
) -> Result<Box<dyn Workload>, HostError> {
    let field = cx.field.as_str();
    let dst = c
        .dst
        .ok_or_else(|| invalid(&format!("{field}.dst"), "missing (ip:port)"))?;
    let bytes = match &c.bytes {
        Some(q) => Some(q.parse(units::parse_size).ok_or_else(|| {
            invalid(
                &format!("{field}.bytes"),
                format!("invalid size {q}: write e.g. 1GB, 64MiB"),
            )
        })?),
        None => None,
    };
    let start = match &c.start {
        Some(q) => parse_time_field(q, &format!("{field}.start"))?,
        None => 0,
    };
    Ok(Box::new(TcpSend {
        dst,
        bytes,
        start,
        src_port: c.src_port.unwrap_or(0),
    }))
}

impl Workload for TcpSend {
    fn uses_tcp(&self) -> bool {
        true
    }

    fn open_tcp(&mut self, stack: &mut TcpStack, anchor: Nanos) -> Vec<FlowId> {
        vec![stack.bulk_send(
            self.start.max(anchor),
            self.src_port,
            (*self.dst.ip(), self.dst.port()),
            self.bytes,
        )]
    }

    // Its counters are the stack's: the host reports `{name}.bytes`.
    fn report(&self, _name: &str, _stats: &WorkloadStats, _r: &mut NodeReport) {}
}

/// A `tcp_sink` workload: listening sockets that discard what they get.
#[derive(Debug)]
pub(crate) struct TcpSink {
    port: u16,
    backlog: usize,
}

/// Builds a `tcp_sink` workload.
pub(crate) fn build_tcp_sink(
    c: &TcpSinkConfig,
    cx: &BuildContext<'_>,
) -> Result<Box<dyn Workload>, HostError> {
    let field = cx.field.as_str();
    let backlog = c.backlog.unwrap_or(1);
    if backlog == 0 || backlog > MAX_BACKLOG {
        return Err(invalid(
            &format!("{field}.backlog"),
            format!("{backlog} is outside 1..={MAX_BACKLOG}"),
        ));
    }
    if c.port == 0 {
        return Err(invalid(&format!("{field}.port"), "must be > 0"));
    }
    Ok(Box::new(TcpSink {
        port: c.port,
        backlog,
    }))
}

impl Workload for TcpSink {
    fn uses_tcp(&self) -> bool {
        true
    }

    fn open_tcp(&mut self, stack: &mut TcpStack, _anchor: Nanos) -> Vec<FlowId> {
        stack.sink(self.port, self.backlog)
    }

    fn report(&self, _name: &str, _stats: &WorkloadStats, _r: &mut NodeReport) {}
}
