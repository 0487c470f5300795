//! TEA stateful firewall (spec §7): only packets from the external side
//! (`outside_port`) are looked up, keyed by their 5-tuple (K = 13, V = 1,
//! the connection state). Found → forwarded inside; absent → dropped.
//! Internal packets are forwarded out without a lookup; an internal TCP SYN
//! raises a digest and the control plane inserts the reverse 5-tuple, which
//! the stash makes visible at once.
//!
//! Sides, keys and what opens a connection are
//! [`inca_apps::core::firewall`]'s (`Orientation::AsSentFromOutside`,
//! `Opening::TcpSyn`); this adapter keeps the connections in TEA's table.

use inca_apps::core::firewall::{self as core, Opening, Orientation, Side};
use inca_apps::headers::Parsed;
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
        core::conn_key(p, Side::Inside, Orientation::AsSentFromOutside).to_vec()
    }

    fn side(&self, port: PortId) -> Side {
        Side::by_port(port, self.outside_port)
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
        let side = self.side(port);
        (side == Side::Outside && hdrs.has_ports)
            .then(|| core::conn_key(hdrs, side, Orientation::AsSentFromOutside).to_vec())
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
        if self.side(md.ingress_port) == Side::Inside && hdrs.ipv4 {
            Verdict::Forward(self.outside_port)
        } else {
            Verdict::Drop
        }
    }
    fn learn(&self, hdrs: &Parsed, port: PortId) -> Option<(Vec<u8>, Vec<u8>)> {
        Opening::TcpSyn
            .opens(hdrs, self.side(port))
            .then(|| (Self::reverse_key(hdrs), vec![STATE_ESTABLISHED]))
    }
}
