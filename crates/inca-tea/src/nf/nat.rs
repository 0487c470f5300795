//! TEA NAT (spec §7): source NAT whose translations live in one TEA virtual
//! table keyed by the packet's 5-tuple (IPv4, K = 13) with value ⟨address,
//! port⟩ (V = 6). Both directions are entries: the inside 5-tuple maps to
//! the public endpoint, the reply's 5-tuple back to the inside endpoint.
//!
//! - From inside (any port but `outside_port`): found → rewrite the source,
//!   send out of `outside_port`; remote miss → punt; the slow path allocates
//!   a public endpoint, inserts both directions and re-injects the packet.
//! - From outside: found → rewrite the destination, send to `inside_port`;
//!   remote miss → drop.
//!
//! [our choice] ext→int packets all go to one `inside_port` (the value holds
//! only the endpoint, as the spec's 6-byte value does).
//!
//! The NAT logic (keys, direction, allocation, rewrite) is
//! [`inca_apps::core::nat`]'s; this adapter keeps the state in TEA's table.

use inca_apps::core::nat::{self as core, Allocator, Direction, Keying, Mapping, Pool};
use inca_apps::core::Endpoint;
use inca_apps::headers::Parsed;
use inca_switch::PortId;

use crate::switch::{LookupMd, PuntAction, TeaNf, Verdict};

pub use inca_apps::core::nat::PORTS_PER_ADDRESS;

/// Punt reason of a new inside flow.
pub const REASON_NEW_FLOW: u16 = 1;

/// The TEA NAT.
#[derive(Debug, Clone)]
pub struct TeaNat {
    /// Port toward the outside.
    pub outside_port: PortId,
    /// Port toward the inside.
    pub inside_port: PortId,
    /// First public address.
    pub public_base: [u8; 4],
    /// Most flows the allocator hands out.
    pub max_flows: u64,
    allocator: Allocator,
    /// Flows refused because the pool was exhausted.
    pub refused: u64,
}

impl TeaNat {
    /// A NAT translating to addresses from `public_base`.
    pub fn new(
        outside_port: PortId,
        inside_port: PortId,
        public_base: [u8; 4],
        max_flows: u64,
    ) -> Self {
        TeaNat {
            outside_port,
            inside_port,
            public_base,
            max_flows,
            allocator: Allocator::new(Pool { base: public_base }, max_flows),
            refused: 0,
        }
    }

    /// Flows allocated by the slow path.
    pub fn allocated(&self) -> usize {
        self.allocator.len()
    }

    /// The public endpoint of flow number `n`.
    pub fn public_endpoint(&self, n: u64) -> ([u8; 4], u16) {
        let e = Pool {
            base: self.public_base,
        }
        .endpoint(n);
        (e.ip, e.port)
    }

    /// The two entries of an inside flow `p` mapped to `(ip, port)`:
    /// (inside key, public endpoint) and (reply key, inside endpoint).
    pub fn entries(p: &Parsed, ip: [u8; 4], port: u16) -> [(Vec<u8>, Vec<u8>); 2] {
        let m = Mapping::of(p, Endpoint::new(ip, port));
        [
            (m.out_key.to_vec(), m.public.to_bytes().to_vec()),
            (m.reply_key.to_vec(), m.inside.to_bytes().to_vec()),
        ]
    }
}

impl TeaNf for TeaNat {
    fn name(&self) -> &str {
        "nat"
    }
    fn key_len(&self) -> usize {
        13
    }
    fn value_len(&self) -> usize {
        6
    }
    fn header_depth(&self) -> usize {
        // Ethernet + VLAN + IPv4 (with options) + TCP.
        18 + 60 + 20
    }
    fn key(&self, _header: &[u8], hdrs: &Parsed, port: PortId) -> Option<Vec<u8>> {
        let p = core::flow(hdrs)?;
        let direction = Direction::by_port(port, self.outside_port);
        Some(
            core::key(&p, direction, Keying::FiveTuple)
                .as_bytes()
                .to_vec(),
        )
    }
    fn on_found(&self, header: &mut [u8], hdrs: &Parsed, value: &[u8], md: &LookupMd) -> Verdict {
        let Some(to) = Endpoint::from_bytes(value) else {
            return Verdict::Drop;
        };
        let p = hdrs.icmp_echo_as_ports();
        let direction = Direction::by_port(md.ingress_port, self.outside_port);
        core::translate(header, &p, direction, to);
        match direction {
            Direction::Inbound => Verdict::Forward(self.inside_port),
            Direction::Outbound => Verdict::Forward(self.outside_port),
        }
    }
    fn on_remote_miss(&self, _header: &mut [u8], _hdrs: &Parsed, md: &LookupMd) -> Verdict {
        match Direction::by_port(md.ingress_port, self.outside_port) {
            Direction::Inbound => Verdict::Drop,
            Direction::Outbound => Verdict::ToCpu(REASON_NEW_FLOW),
        }
    }
    fn on_punt(&mut self, _frame: &[u8], hdrs: &Parsed, port: PortId, reason: u16) -> PuntAction {
        if reason != REASON_NEW_FLOW || port == self.outside_port {
            return PuntAction::default();
        }
        let Some(p) = core::flow(hdrs) else {
            return PuntAction::default();
        };
        let Some(public) = self.allocator.allocate(&p) else {
            self.refused += 1;
            return PuntAction::default();
        };
        PuntAction {
            inserts: Self::entries(&p, public.ip, public.port).to_vec(),
            reinject: true,
        }
    }
}
