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

use std::collections::BTreeMap;

use inca_apps::headers::{rewrite_end, End, Parsed};
use inca_switch::PortId;

use crate::switch::{LookupMd, PuntAction, TeaNf, Verdict};

/// Punt reason of a new inside flow.
pub const REASON_NEW_FLOW: u16 = 1;
/// Public ports per public address (1024..=65535).
pub const PORTS_PER_ADDRESS: u32 = 65_536 - 1024;

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
    allocated: BTreeMap<[u8; 13], ([u8; 4], u16)>,
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
            allocated: BTreeMap::new(),
            refused: 0,
        }
    }

    /// Flows allocated by the slow path.
    pub fn allocated(&self) -> usize {
        self.allocated.len()
    }

    /// The public endpoint of flow number `n`.
    pub fn public_endpoint(&self, n: u64) -> ([u8; 4], u16) {
        let base = u32::from_be_bytes(self.public_base);
        let ip = base
            .wrapping_add((n / u64::from(PORTS_PER_ADDRESS)) as u32)
            .to_be_bytes();
        (ip, (1024 + n % u64::from(PORTS_PER_ADDRESS)) as u16)
    }

    /// The two entries of an inside flow `p` mapped to `(ip, port)`:
    /// (inside key, public endpoint) and (reply key, inside endpoint).
    pub fn entries(p: &Parsed, ip: [u8; 4], port: u16) -> [(Vec<u8>, Vec<u8>); 2] {
        let reply = Parsed {
            src: p.dst,
            dst: ip,
            sport: p.dport,
            dport: port,
            ..*p
        };
        [
            (p.five_tuple().to_vec(), value(ip, port)),
            (reply.five_tuple().to_vec(), value(p.src, p.sport)),
        ]
    }
}

fn value(ip: [u8; 4], port: u16) -> Vec<u8> {
    let mut v = ip.to_vec();
    v.extend_from_slice(&port.to_be_bytes());
    v
}

fn endpoint(v: &[u8]) -> Option<([u8; 4], u16)> {
    let v = v.get(..6)?;
    Some(([v[0], v[1], v[2], v[3]], u16::from_be_bytes([v[4], v[5]])))
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
    fn key(&self, _header: &[u8], hdrs: &Parsed, _port: PortId) -> Option<Vec<u8>> {
        let p = hdrs.icmp_echo_as_ports();
        p.has_ports.then(|| p.five_tuple().to_vec())
    }
    fn on_found(&self, header: &mut [u8], hdrs: &Parsed, value: &[u8], md: &LookupMd) -> Verdict {
        let Some((ip, port)) = endpoint(value) else {
            return Verdict::Drop;
        };
        let p = hdrs.icmp_echo_as_ports();
        if md.ingress_port == self.outside_port {
            rewrite_end(header, &p, End::Destination, ip, port);
            Verdict::Forward(self.inside_port)
        } else {
            rewrite_end(header, &p, End::Source, ip, port);
            Verdict::Forward(self.outside_port)
        }
    }
    fn on_remote_miss(&self, _header: &mut [u8], _hdrs: &Parsed, md: &LookupMd) -> Verdict {
        if md.ingress_port == self.outside_port {
            Verdict::Drop
        } else {
            Verdict::ToCpu(REASON_NEW_FLOW)
        }
    }
    fn on_punt(&mut self, _frame: &[u8], hdrs: &Parsed, port: PortId, reason: u16) -> PuntAction {
        if reason != REASON_NEW_FLOW || port == self.outside_port {
            return PuntAction::default();
        }
        let p = hdrs.icmp_echo_as_ports();
        if !p.has_ports {
            return PuntAction::default();
        }
        let key = p.five_tuple();
        let (ip, pport) = match self.allocated.get(&key) {
            Some(&e) => e,
            None => {
                let n = self.allocated.len() as u64;
                if n >= self.max_flows {
                    self.refused += 1;
                    return PuntAction::default();
                }
                let e = self.public_endpoint(n);
                self.allocated.insert(key, e);
                e
            }
        };
        PuntAction {
            inserts: Self::entries(&p, ip, pport).to_vec(),
            reinject: true,
        }
    }
}
