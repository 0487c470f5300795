//! TEA VPN gateway (spec §7, following the paper's listing, §9 item 3):
//! packets from the external side arrive in a VXLAN tunnel; the key is
//! ⟨external VNI u32, inner destination (the VM)⟩ (K = 8), the value
//! ⟨server address, internal VNI u32⟩ (V = 8). Found → the outer
//! destination becomes the server, the outer source `local`, the VNI the
//! internal one (IPv4 checksum updated, UDP checksum cleared, as in
//! `inca_apps::vpn`), sent to `inside_port`; absent → dropped.
//!
//! [our choice] The tunnel is re-addressed rather than a second header
//! pushed (the inca-apps VXLAN format), and packets from the inside are
//! forwarded out unchanged.
//!
//! The parser, the key and the re-tunnelling are
//! [`inca_apps::core::vpn`]'s (`TunnelKey::to_wide_bytes`); this adapter
//! keeps the mappings in TEA's table.

use inca_apps::core::vpn::{parse_vxlan, retunnel, TunnelKey};
use inca_apps::headers::Parsed;
use inca_switch::PortId;

use crate::switch::{LookupMd, TeaNf, Verdict};

/// The TEA VPN gateway.
#[derive(Debug, Clone)]
pub struct TeaVpn {
    /// Port toward the outside.
    pub outside_port: PortId,
    /// Port toward the servers.
    pub inside_port: PortId,
    /// The gateway's own tunnel address.
    pub local: [u8; 4],
}

/// The key of ⟨external VNI, VM address⟩.
pub fn vpn_key(vni: u32, vm: [u8; 4]) -> Vec<u8> {
    TunnelKey::new(vni, vm).to_wide_bytes().to_vec()
}

/// The value ⟨server address, internal VNI⟩.
pub fn vpn_value(server: [u8; 4], vni: u32) -> Vec<u8> {
    let mut v = server.to_vec();
    v.extend_from_slice(&vni.to_be_bytes());
    v
}

impl TeaNf for TeaVpn {
    fn name(&self) -> &str {
        "vpn"
    }
    fn key_len(&self) -> usize {
        8
    }
    fn value_len(&self) -> usize {
        8
    }
    fn header_depth(&self) -> usize {
        // Outer Eth + IPv4 + UDP + VXLAN, inner Eth (tagged) + IPv4.
        14 + 20 + 8 + 8 + 18 + 20
    }
    fn key(&self, header: &[u8], _p: &Parsed, port: PortId) -> Option<Vec<u8>> {
        if port != self.outside_port {
            return None;
        }
        let m = parse_vxlan(header).ok()?;
        m.vxlan
            .then(|| TunnelKey::inbound(&m).to_wide_bytes().to_vec())
    }
    fn on_found(&self, h: &mut [u8], _p: &Parsed, value: &[u8], _md: &LookupMd) -> Verdict {
        let (Ok(m), Some(v)) = (parse_vxlan(h), value.get(..8)) else {
            return Verdict::Drop;
        };
        let server = [v[0], v[1], v[2], v[3]];
        let vni = u32::from_be_bytes([v[4], v[5], v[6], v[7]]);
        if retunnel(h, &m, self.local, server, vni) {
            Verdict::Forward(self.inside_port)
        } else {
            Verdict::Drop
        }
    }
    fn on_remote_miss(&self, _h: &mut [u8], _p: &Parsed, _md: &LookupMd) -> Verdict {
        Verdict::Drop
    }
    fn on_bypass(&self, _h: &mut [u8], p: &Parsed, md: &LookupMd) -> Verdict {
        if md.ingress_port != self.outside_port && p.ipv4 {
            Verdict::Forward(self.outside_port)
        } else {
            Verdict::Drop
        }
    }
}
