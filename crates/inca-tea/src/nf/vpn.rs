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

use inca_apps::headers::Parsed;
use inca_apps::vpn::parse_vxlan;
use inca_switch::PortId;
use inca_wire::checksum;

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
    let mut k = vni.to_be_bytes().to_vec();
    k.extend_from_slice(&vm);
    k
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
        m.vxlan.then(|| vpn_key(m.vni, m.inner_dst))
    }
    fn on_found(&self, h: &mut [u8], _p: &Parsed, value: &[u8], _md: &LookupMd) -> Verdict {
        let (Ok(m), Some(v)) = (parse_vxlan(h), value.get(..8)) else {
            return Verdict::Drop;
        };
        let (l3, l4, vx) = (
            usize::from(m.outer.l3),
            usize::from(m.outer.l4),
            usize::from(m.vxlan_off),
        );
        if h.len() < vx + 8 {
            return Verdict::Drop;
        }
        let rd32 = |h: &[u8], o: usize| u32::from_be_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
        let server = [v[0], v[1], v[2], v[3]];
        let mut sum = u16::from_be_bytes([h[l3 + 10], h[l3 + 11]]);
        sum = checksum::update_u32(sum, rd32(h, l3 + 12), u32::from_be_bytes(self.local));
        sum = checksum::update_u32(sum, rd32(h, l3 + 16), u32::from_be_bytes(server));
        h[l3 + 12..l3 + 16].copy_from_slice(&self.local);
        h[l3 + 16..l3 + 20].copy_from_slice(&server);
        h[l3 + 10..l3 + 12].copy_from_slice(&sum.to_be_bytes());
        h[l4 + 6..l4 + 8].copy_from_slice(&[0, 0]);
        h[vx + 4..vx + 7].copy_from_slice(&v[5..8]);
        Verdict::Forward(self.inside_port)
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
