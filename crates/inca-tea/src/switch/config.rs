//! TEA switch configuration (spec §3, §5, model inputs) and the
//! configuration checks of spec §5.9 (the DRAM layout itself is H5's
//! [`crate::table::layout`]).

use std::net::Ipv4Addr;

use inca_switch::{Nanos, PortId};
use inca_wire::MacAddr;

use crate::table::layout::Layout;
pub use crate::table::layout::{MAX_FRAME, PMTU, SCRATCH_BYTES, SHIM_BYTES};

/// Headers in front of a READ RESPONSE ONLY payload: Eth, IPv4, UDP, BTH, AETH.
pub const RESPONSE_HEADERS: usize = 14 + 20 + 8 + 12 + 4;
/// Headers in front of a WRITE/READ payload: Eth, IPv4, UDP, BTH, RETH.
pub const REQUEST_HEADERS: usize = 14 + 20 + 8 + 12 + 16;

/// One DRAM server as the switch knows it before it says HELLO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// The switch port it is attached to.
    pub port: PortId,
    /// Its NIC's MAC.
    pub mac: MacAddr,
    /// Its NIC's IPv4 address.
    pub ip: Ipv4Addr,
}

/// What a TEA switch is built with. Every field is a model input; the
/// defaults are the spec's.
#[derive(Debug, Clone)]
pub struct TeaConfig {
    /// NF key bytes (K).
    pub key_len: usize,
    /// NF value bytes (V).
    pub value_len: usize,
    /// Cells per bucket (C, default 2).
    pub cells: usize,
    /// log2 of the bucket count n.
    pub log2_buckets: u32,
    /// Stash capacity (default 32768).
    pub stash_cap: usize,
    /// Cache capacity (default 1024); 0 turns the cache off.
    pub cache_cap: usize,
    /// Flow-control limit per QP (MAX_OUT, default 16).
    pub max_out: u16,
    /// Leak-recovery age of the outstanding count (default 50 µs).
    pub t_stale: Nanos,
    /// Sketch estimate from which a key is reported hot (default 256).
    pub t_hot: u16,
    /// READ requests carry the packet as a trailer (default true).
    pub read_req_trailer: bool,
    /// The switch's RDMA MAC.
    pub switch_mac: MacAddr,
    /// The switch's RDMA IP.
    pub switch_ip: Ipv4Addr,
    /// The DRAM servers, in server-id order.
    pub servers: Vec<ServerSpec>,
    /// Replication factor R (1 or 2).
    pub replication: u8,
    /// QPs per (server, role), a power of two (default 1).
    pub qps_per_server: u16,
    /// Mutation-shield grace period (default 100 µs).
    pub t_grace: Nanos,
    /// Sketch epoch (default 100 ms).
    pub t_epoch: Nanos,
    /// Stash-drain period (default 10 ms).
    pub t_drain: Nanos,
    /// Watchdog period (default 1 ms) and the silence that trips it (200 µs).
    pub t_watchdog: Nanos,
    /// Silence on a QP with outstanding reads that the watchdog acts on.
    pub t_watchdog_silence: Nanos,
    /// Heartbeat period (default 100 ms); 3 missed = server down.
    pub t_heartbeat: Nanos,
    /// Agent request retransmission timeout (default 200 µs) [our choice].
    pub t_agent_retx: Nanos,
    /// Server-facing link rate, bits/s (meters: PIR = rate, CIR = 0.9 rate).
    pub server_link_bps: u64,
    /// Switch parse depth (bytes), checked against the response layout.
    pub parse_depth: usize,
    /// Server link MTU (9000), checked against the largest request.
    pub server_mtu: usize,
    /// The NIC's max_dest_rd_atomic (16).
    pub max_rd_atomic: u16,
    /// Displacement tries per insert (MAX_TRIES, default 500).
    pub max_tries: u32,
    /// Test hook: the order in which inserts emit their steps (only
    /// `Shielded` is correct; the campaign shows the others fail).
    #[doc(hidden)]
    pub insert_order: crate::table::InsertOrder,
}

impl TeaConfig {
    /// Spec defaults for an NF with `key_len`-byte keys and
    /// `value_len`-byte values over `servers`, with 2^`log2_buckets` buckets.
    pub fn new(
        key_len: usize,
        value_len: usize,
        log2_buckets: u32,
        servers: Vec<ServerSpec>,
    ) -> Self {
        TeaConfig {
            key_len,
            value_len,
            cells: 2,
            log2_buckets,
            stash_cap: 32_768,
            cache_cap: 1024,
            max_out: 16,
            t_stale: 50_000,
            t_hot: 256,
            read_req_trailer: true,
            switch_mac: [0x02, 0, 0, 0, 0x0a, 0xfe],
            switch_ip: Ipv4Addr::new(10, 0, 0, 254),
            servers,
            replication: 2,
            qps_per_server: 1,
            t_grace: 100_000,
            t_epoch: 100_000_000,
            t_drain: 10_000_000,
            t_watchdog: 1_000_000,
            t_watchdog_silence: 200_000,
            t_heartbeat: 100_000_000,
            t_agent_retx: 200_000,
            server_link_bps: 40_000_000_000,
            parse_depth: 512,
            server_mtu: 9000,
            max_rd_atomic: 16,
            max_tries: 500,
            insert_order: crate::table::InsertOrder::Shielded,
        }
    }

    /// The table layout (spec §3.2, H5's [`Layout`]).
    pub fn layout(&self) -> Result<Layout, String> {
        Layout::new(self.key_len, self.value_len, self.cells, self.log2_buckets)
            .map_err(|e| e.to_string())
    }

    /// The spec §5.9 checks, plus the structural ones this model needs.
    /// `nf_header_depth` is the NF's parse depth.
    pub fn validate(&self, nf_header_depth: usize) -> Result<(), String> {
        if self.key_len == 0 || self.value_len == 0 {
            return Err("key and value must be at least one byte".into());
        }
        if self.cells == 0 || self.cells > 8 {
            return Err(format!("cells per bucket {} must be 1..=8", self.cells));
        }
        if self.log2_buckets == 0 || self.log2_buckets > 31 {
            return Err(format!("log2_buckets {} must be 1..=31", self.log2_buckets));
        }
        let g = self.layout()?;
        if g.kv_len() + SHIM_BYTES + MAX_FRAME > PMTU {
            return Err(format!(
                "KV_LEN {} + 8 + 1522 exceeds the PMTU {PMTU}: responses would not be single packets",
                g.kv_len()
            ));
        }
        if RESPONSE_HEADERS + g.kv_len() + SHIM_BYTES + nf_header_depth > self.parse_depth {
            return Err(format!(
                "58 + KV_LEN {} + 8 + NF header depth {} exceeds the parse depth {}",
                g.kv_len(),
                nf_header_depth,
                self.parse_depth
            ));
        }
        let largest = REQUEST_HEADERS + SHIM_BYTES + MAX_FRAME + 3 + 4;
        if largest > self.server_mtu + 14 {
            return Err(format!(
                "the largest request ({largest} B) exceeds the server link MTU {}",
                self.server_mtu
            ));
        }
        if self.servers.is_empty() {
            return Err("TEA needs at least one DRAM server".into());
        }
        if self.servers.len() > 64 {
            return Err("at most 64 DRAM servers".into());
        }
        if !(1..=2).contains(&self.replication) {
            return Err(format!("replication {} must be 1 or 2", self.replication));
        }
        if self.replication == 2 && self.servers.len() < 2 {
            return Err("replication 2 needs at least two servers".into());
        }
        if !self.qps_per_server.is_power_of_two() || self.qps_per_server > 64 {
            return Err(format!(
                "qps_per_server {} must be a power of two up to 64 (the data plane cannot take a modulo)",
                self.qps_per_server
            ));
        }
        if self.max_out > self.max_rd_atomic {
            return Err(format!(
                "MAX_OUT {} exceeds the NIC's max_dest_rd_atomic {}",
                self.max_out, self.max_rd_atomic
            ));
        }
        if (self.servers.len() as u64) > (1u64 << self.log2_buckets) {
            return Err("more servers than buckets".into());
        }
        Ok(())
    }

    /// Number of QP indexes: (server, role) pairs times Q.
    pub fn qp_count(&self) -> usize {
        self.servers.len() * 2 * usize::from(self.qps_per_server)
    }

    /// First QP index of server `sid` in `role` (0 primary, 1 secondary).
    pub fn qp_base(&self, sid: usize, role: u8) -> u16 {
        ((sid * 2 + usize::from(role)) * usize::from(self.qps_per_server)) as u16
    }

    /// The (server, role) a QP index belongs to.
    pub fn qp_owner(&self, qp: u16) -> (usize, u8) {
        let per = usize::from(self.qps_per_server);
        let pair = usize::from(qp) / per;
        (pair / 2, (pair % 2) as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_test_vector_t4() {
        assert_eq!(
            inca_switch::hash::crc64(b"123456789"),
            0x995D_C9BB_DF19_39FA
        );
    }

    #[test]
    fn validation_rejects_bad_configs() {
        let s = |p| ServerSpec {
            port: p,
            mac: [2, 0, 0, 0, 0, p as u8],
            ip: Ipv4Addr::new(10, 0, 0, p as u8),
        };
        let mut c = TeaConfig::new(13, 6, 10, vec![s(1), s(2)]);
        assert!(c.validate(54).is_ok());
        c.qps_per_server = 3;
        assert!(c.validate(54).is_err());
        c.qps_per_server = 1;
        c.max_out = 17;
        assert!(c.validate(54).is_err());
        let big = TeaConfig::new(37, 400, 10, vec![s(1), s(2)]);
        assert!(
            big.validate(54).is_err(),
            "KV_LEN too large for the parse depth"
        );
    }
}
