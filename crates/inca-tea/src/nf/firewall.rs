//! TEA stateful firewall (spec §7): only packets from the external side
//! (`outside_port`) are looked up, keyed by their 5-tuple (K = 13, V = 1,
//! the connection state). Found → forwarded inside; absent → dropped.
//! Internal packets are forwarded out without a lookup; an internal TCP SYN
//! raises a digest and the control plane inserts the reverse 5-tuple, which
//! the stash makes visible at once.

use inca_apps::headers::{Parsed, PROTO_TCP};
use inca_switch::PortId;

use crate::switch::{LookupMd, TeaNf, Verdict};

/// Connection state stored for an allowed connection.
pub const STATE_ESTABLISHED: u8 = 1;

/// The TEA firewall.
#[derive(Debug, Clone)]
pub struct TeaFirewall {
    /// Port toward the outside.
    pub outside_port: PortId,
    /// Port toward the inside.
    pub inside_port: PortId,
}

impl TeaFirewall {
    /// A firewall between `inside_port` and `outside_port`.
    pub fn new(outside_port: PortId, inside_port: PortId) -> Self {
        TeaFirewall {
            outside_port,
            inside_port,
        }
    }

    /// The key of the reply direction of an inside flow.
    pub fn reverse_key(p: &Parsed) -> Vec<u8> {
        Parsed {
            src: p.dst,
            dst: p.src,
            sport: p.dport,
            dport: p.sport,
            ..*p
        }
        .five_tuple()
        .to_vec()
    }
}

impl TeaNf for TeaFirewall {
    fn name(&self) -> &str {
        "firewall"
    }
    fn key_len(&self) -> usize {
        13
    }
    fn value_len(&self) -> usize {
        1
    }
    fn header_depth(&self) -> usize {
        18 + 60 + 20
    }
    fn key(&self, _header: &[u8], hdrs: &Parsed, port: PortId) -> Option<Vec<u8>> {
        (port == self.outside_port && hdrs.has_ports).then(|| hdrs.five_tuple().to_vec())
    }
    fn on_found(&self, _h: &mut [u8], _p: &Parsed, value: &[u8], _md: &LookupMd) -> Verdict {
        if value.first() == Some(&STATE_ESTABLISHED) {
            Verdict::Forward(self.inside_port)
        } else {
            Verdict::Drop
        }
    }
    fn on_remote_miss(&self, _h: &mut [u8], _p: &Parsed, _md: &LookupMd) -> Verdict {
        Verdict::Drop
    }
    fn on_bypass(&self, _h: &mut [u8], hdrs: &Parsed, md: &LookupMd) -> Verdict {
        if md.ingress_port != self.outside_port && hdrs.ipv4 {
            Verdict::Forward(self.outside_port)
        } else {
            Verdict::Drop
        }
    }
    fn learn(&self, hdrs: &Parsed, port: PortId) -> Option<(Vec<u8>, Vec<u8>)> {
        let syn = hdrs.tcp_flags & 0x12 == 0x02;
        (port != self.outside_port && hdrs.has_ports && hdrs.proto == PROTO_TCP && syn)
            .then(|| (Self::reverse_key(hdrs), vec![STATE_ESTABLISHED]))
    }
}
