//! The TEA DRAM server (spec §2, §3.4): a RoCEv2 RC responder NIC model
//! ([`nic`]) over registered DRAM ([`memory`]), and the server agent
//! ([`agent`]) that the switch control plane drives with the protocol in
//! [`agent_proto`]. [`DramServer`] puts them behind one port as a sans-IO
//! [`Device`] and a simulator [`Node`] of kind `"tea-dram"`.
//!
//! Frames to UDP port 4791 go to the NIC (which parses and counts its own
//! drops), frames to the agent's UDP port to the agent through an
//! [`inca_server::PortDemux`]; anything else is counted and dropped. A crash loses DRAM, QPs
//! and the agent's memory of replies (§5.7); the restarted agent sends HELLO
//! again, and R_Keys from before the crash no longer match.

pub mod agent;
pub mod agent_proto;
pub mod memory;
pub mod nic;

use std::any::Any;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use inca_server::PortDemux;
use inca_sim::engine::Node;
use inca_sim::metrics::NodeReport;
use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output};
use inca_wire::MacAddr;
use serde::{Deserialize, Serialize};

pub use agent::{Agent, AgentConfig, AgentStats};
pub use agent_proto::AGENT_UDP_PORT;
pub use nic::{DropReason, Nic, NicConfig, NicStats, QpSnapshot};

/// A DRAM server as a scenario's `[[server]] kind = "tea_dram"` table or
/// `inca node` describes it. Every field has a default (spec §3.4, §8.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DramServerConfig {
    /// Server id announced in HELLO.
    pub server_id: u16,
    /// The NIC's IPv4 address.
    pub ip: Ipv4Addr,
    /// The NIC's MAC.
    pub mac: MacAddr,
    /// DRAM offered to TEA, bytes (64 GiB).
    pub dram_offered: u64,
    /// The switch control plane's IP, where HELLO goes.
    pub controller_ip: Ipv4Addr,
    /// The switch's MAC on this server's link.
    pub controller_mac: MacAddr,
    /// NIC responder RX time, ns (350).
    pub rx_ns: u64,
    /// NIC DMA fixed time, ns (450).
    pub dma_base_ns: u64,
    /// NIC DMA rate, bytes/s (6.5 GB/s).
    pub dma_bytes_per_sec: u64,
    /// NIC TX time, ns (200).
    pub tx_ns: u64,
    /// NIC raw packet rate (34 Mpps).
    pub max_pps: u64,
    /// NIC backlog bound, ns (see [`NicConfig::max_backlog_ns`]).
    pub max_backlog_ns: u64,
    /// Outstanding READs per QP before the QP breaks (16).
    pub max_dest_rd_atomic: u8,
    /// Largest PMTU (4096).
    pub pmtu: u16,
    /// Drop packets with a bad ICRC (true).
    pub verify_icrc: bool,
    /// Tolerate a payload on READ requests (true, TEA's trailer mode).
    pub accept_read_trailer: bool,
    /// ACK every WRITE (false).
    pub ack_every_write: bool,
    /// Most QPs (1024).
    pub max_qps: usize,
    /// Longest RDMA message, bytes (1 MiB).
    pub max_message_bytes: u32,
    /// Agent reply delay, ns (1 µs).
    pub agent_service_ns: u64,
    /// First HELLO retransmission interval, ns (1 ms).
    pub hello_retry_ns: u64,
}

impl Default for DramServerConfig {
    fn default() -> Self {
        let n = NicConfig::default();
        let a = AgentConfig::default();
        DramServerConfig {
            server_id: 0,
            ip: Ipv4Addr::new(10, 0, 0, 1),
            mac: [0x02, 0, 0, 0, 0x0a, 0x01],
            dram_offered: a.dram_offered,
            controller_ip: a.controller_ip,
            controller_mac: a.controller_mac,
            rx_ns: n.rx_ns,
            dma_base_ns: n.dma_base_ns,
            dma_bytes_per_sec: n.dma_bytes_per_sec,
            tx_ns: n.tx_ns,
            max_pps: n.max_pps,
            max_backlog_ns: n.max_backlog_ns,
            max_dest_rd_atomic: n.max_dest_rd_atomic,
            pmtu: n.pmtu,
            verify_icrc: n.verify_icrc,
            accept_read_trailer: n.accept_read_trailer,
            ack_every_write: n.ack_every_write,
            max_qps: n.max_qps,
            max_message_bytes: n.max_message_bytes,
            agent_service_ns: a.service_ns,
            hello_retry_ns: a.hello_retry_ns,
        }
    }
}

/// Why a [`DramServerConfig`] is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tea_dram server: {field}: {reason}")]
pub struct ConfigError {
    /// The offending field.
    pub field: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

impl DramServerConfig {
    /// Checks the values a NIC cannot run with.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |field, reason: &str| {
            Err(ConfigError {
                field,
                reason: reason.to_string(),
            })
        };
        if !nic::VALID_PMTUS.contains(&self.pmtu) {
            return err("pmtu", "must be 256, 512, 1024, 2048 or 4096");
        }
        if self.max_dest_rd_atomic == 0 {
            return err("max_dest_rd_atomic", "must be at least 1");
        }
        if self.max_pps == 0 {
            return err("max_pps", "must be positive");
        }
        if self.dma_bytes_per_sec == 0 {
            return err("dma_bytes_per_sec", "must be positive");
        }
        if self.max_qps == 0 || self.max_qps > 0x1_0000 {
            return err("max_qps", "must be between 1 and 65536");
        }
        if self.max_message_bytes == 0 || self.max_message_bytes > 1 << 31 {
            return err("max_message_bytes", "must be between 1 and 2^31");
        }
        Ok(())
    }

    /// The NIC part.
    pub fn nic_config(&self) -> NicConfig {
        NicConfig {
            rx_ns: self.rx_ns,
            dma_base_ns: self.dma_base_ns,
            dma_bytes_per_sec: self.dma_bytes_per_sec,
            tx_ns: self.tx_ns,
            max_pps: self.max_pps,
            max_backlog_ns: self.max_backlog_ns,
            max_dest_rd_atomic: self.max_dest_rd_atomic,
            pmtu: self.pmtu,
            verify_icrc: self.verify_icrc,
            accept_read_trailer: self.accept_read_trailer,
            ack_every_write: self.ack_every_write,
            max_qps: self.max_qps,
            max_message_bytes: self.max_message_bytes,
            ..NicConfig::default()
        }
    }

    /// The agent part.
    pub fn agent_config(&self) -> AgentConfig {
        AgentConfig {
            server_id: self.server_id,
            dram_offered: self.dram_offered,
            controller_ip: self.controller_ip,
            controller_mac: self.controller_mac,
            service_ns: self.agent_service_ns,
            hello_retry_ns: self.hello_retry_ns,
            ..AgentConfig::default()
        }
    }
}

/// Frames the server itself dropped before the NIC or the agent saw them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Frames that were neither RoCE nor agent traffic for this server.
    pub not_for_server: u64,
    /// Control messages (the server takes none).
    pub control_ignored: u64,
    /// Crashes survived.
    pub restarts: u64,
}

/// A TEA DRAM server: NIC + agent behind port 0.
#[derive(Debug, Clone)]
pub struct DramServer {
    cfg: DramServerConfig,
    /// The UDP ports served outside the NIC: the agent's.
    demux: PortDemux<()>,
    boot: u32,
    nic: Nic,
    agent: Agent,
    stats: ServerStats,
}

impl DramServer {
    /// A server that has not booted yet (the driver calls [`Device::start`]).
    pub fn new(cfg: DramServerConfig) -> Result<DramServer, ConfigError> {
        cfg.validate()?;
        let nic = Self::make_nic(&cfg, 0);
        let agent = Agent::new(cfg.agent_config(), 0);
        let mut demux = PortDemux::new(cfg.ip);
        demux.bind(AGENT_UDP_PORT, ()).map_err(|e| ConfigError {
            field: "agent port",
            reason: e.to_string(),
        })?;
        Ok(DramServer {
            cfg,
            demux,
            boot: 0,
            nic,
            agent,
            stats: ServerStats::default(),
        })
    }

    fn make_nic(cfg: &DramServerConfig, boot: u32) -> Nic {
        Nic::new(cfg.nic_config(), cfg.mac, cfg.ip, 0, cfg.dram_offered, boot)
    }

    /// Its configuration.
    pub fn config(&self) -> &DramServerConfig {
        &self.cfg
    }

    /// The NIC, for tests and experiments.
    pub fn nic(&self) -> &Nic {
        &self.nic
    }

    /// The NIC, mutable (tests inspect QPs through it).
    pub fn nic_mut(&mut self) -> &mut Nic {
        &mut self.nic
    }

    /// The agent.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// The server's own counters.
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// Every counter, with stable names.
    pub fn counters(&self) -> BTreeMap<String, u64> {
        let mut c = self.nic.stats().counters();
        let a = self.agent.stats();
        for (&t, &n) in &a.requests {
            c.insert(format!("agent_requests_{t:#04x}"), n);
        }
        c.insert("agent_retransmitted".into(), a.retransmitted);
        c.insert("agent_failed".into(), a.failed);
        c.insert("agent_malformed".into(), a.malformed);
        c.insert("agent_hellos_sent".into(), a.hellos_sent);
        c.insert("agent_hello_acked".into(), u64::from(a.hello_acked));
        c.insert("agent_cell_writes".into(), a.writes);
        c.insert("server_not_for_server".into(), self.stats.not_for_server);
        c.insert("server_control_ignored".into(), self.stats.control_ignored);
        c.insert("server_restarts".into(), self.stats.restarts);
        c.insert("dram_registered_bytes".into(), self.nic.memory().used());
        c.insert(
            "dram_resident_bytes".into(),
            self.nic.memory().resident_bytes(),
        );
        c
    }

    fn on_frame(&mut self, now: Nanos, frame: &[u8], out: &mut Vec<Output>) {
        if Nic::is_roce(frame) {
            self.nic.handle_roce(now, frame, out);
            return;
        }
        match self.demux.dispatch(frame) {
            Ok(((), d)) => self.agent.handle_datagram(now, &d, &mut self.nic, out),
            Err(_) => self.stats.not_for_server += 1,
        }
    }
}

impl Device for DramServer {
    fn start(&mut self, now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        self.agent.start(now, &mut self.nic, out);
    }

    fn handle(&mut self, now: Nanos, input: Input, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        match input {
            Input::Frame { frame, .. } => self.on_frame(now, &frame, out),
            Input::Timer { token } => self.agent.on_timer(now, token, &mut self.nic, out),
            Input::Control(_) | Input::Session(_) => self.stats.control_ignored += 1,
            Input::LinkState { .. } => {}
        }
    }

    fn restart(&mut self, now: Nanos, _rng: &mut DeviceRng, out: &mut Vec<Output>) {
        // The boot counter survives, as a machine's does on disk: it keeps
        // R_Keys and HELLO ids of different incarnations apart.
        self.boot = self.boot.wrapping_add(1);
        self.stats.restarts += 1;
        self.nic = Self::make_nic(&self.cfg, self.boot);
        self.agent = Agent::new(self.cfg.agent_config(), self.boot);
        self.agent.start(now, &mut self.nic, out);
    }
}

impl Node for DramServer {
    fn kind(&self) -> &'static str {
        "tea-dram"
    }

    fn report(&self, _now: Nanos) -> NodeReport {
        NodeReport {
            counters: self.counters(),
            ..NodeReport::default()
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
