//! The classifier of a multi-app composite: which app a packet belongs to.
//!
//! As in ExoPlane (spec §3.1, §5.2), one ternary table `classify` matches
//! (ingress port 16 b, VLAN id 12 b in 16, IPv4 destination 32 b, L4
//! destination port 16 b) and gives an app. Its entries come from rules
//! given as parameters and are installed by the composite's control plane at
//! start; earlier rules win over later ones.
//!
//! Rule syntax (rules separated by `;`):
//! `app:field=value[,field=value...]` or `app:*` (every packet), where the
//! fields are `port=N` (ingress port), `vlan=N` (802.1Q VLAN id; 0 means
//! untagged), `dst=A.B.C.D[/len]` (IPv4 destination prefix) and `dport=N`
//! (TCP or UDP destination port). A field left out matches anything.

use std::net::Ipv4Addr;
use std::str::FromStr;

use crate::device::PortId;
use crate::table::MatchSpec;

/// Bytes of the classifier key: port 2, VLAN 2, IPv4 destination 4, L4
/// destination port 2.
pub const CLASSIFY_KEY_BYTES: usize = 10;
/// Entries of the `classify` table (ExoPlane spec §3.1: 256).
pub const CLASSIFY_ENTRIES: usize = 256;

/// A classifier rule that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClassifyRuleError {
    /// Not `app:matches`.
    #[error("classifier rule {0:?}: expected app:field=value[,field=value] or app:*")]
    Syntax(String),
    /// A field this classifier does not match on.
    #[error("classifier rule {rule:?}: unknown field {field:?} (fields: port, vlan, dst, dport)")]
    UnknownField {
        /// The rule.
        rule: String,
        /// The field.
        field: String,
    },
    /// A value out of range or malformed.
    #[error("classifier rule {rule:?}: bad value for {field}: {value:?}")]
    Value {
        /// The rule.
        rule: String,
        /// The field.
        field: String,
        /// The value.
        value: String,
    },
}

/// One classifier rule: packets matching every given field belong to `app`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassifyRule {
    /// The app (block instance name).
    pub app: String,
    /// Ingress port.
    pub port: Option<PortId>,
    /// VLAN id (0: untagged).
    pub vlan: Option<u16>,
    /// IPv4 destination prefix and its length.
    pub dst: Option<([u8; 4], u8)>,
    /// TCP/UDP destination port.
    pub dport: Option<u16>,
}

impl ClassifyRule {
    /// A rule matching every packet, for `app`.
    pub fn any(app: &str) -> Self {
        ClassifyRule {
            app: app.to_string(),
            port: None,
            vlan: None,
            dst: None,
            dport: None,
        }
    }

    /// The table entry, with `priority` (larger wins).
    pub fn spec(&self, priority: u32) -> MatchSpec {
        let mut value = [0u8; CLASSIFY_KEY_BYTES];
        let mut mask = [0u8; CLASSIFY_KEY_BYTES];
        if let Some(p) = self.port {
            value[0..2].copy_from_slice(&p.to_be_bytes());
            mask[0..2].fill(0xff);
        }
        if let Some(v) = self.vlan {
            value[2..4].copy_from_slice(&v.to_be_bytes());
            mask[2..4].copy_from_slice(&0x0fffu16.to_be_bytes());
        }
        if let Some((ip, len)) = self.dst {
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            value[4..8].copy_from_slice(&ip);
            mask[4..8].copy_from_slice(&m.to_be_bytes());
        }
        if let Some(d) = self.dport {
            value[8..10].copy_from_slice(&d.to_be_bytes());
            mask[8..10].fill(0xff);
        }
        MatchSpec::Ternary {
            value: value.into(),
            mask: mask.into(),
            priority,
        }
    }

    /// Reads rules separated by `;` (empty items are skipped).
    pub fn parse_list(text: &str) -> Result<Vec<ClassifyRule>, ClassifyRuleError> {
        text.split(';')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::parse)
            .collect()
    }
}

impl FromStr for ClassifyRule {
    type Err = ClassifyRuleError;

    fn from_str(rule: &str) -> Result<Self, Self::Err> {
        let (app, matches) = rule
            .split_once(':')
            .ok_or_else(|| ClassifyRuleError::Syntax(rule.to_string()))?;
        let app = app.trim();
        if app.is_empty() {
            return Err(ClassifyRuleError::Syntax(rule.to_string()));
        }
        let mut r = ClassifyRule::any(app);
        let matches = matches.trim();
        if matches == "*" {
            return Ok(r);
        }
        for m in matches.split(',') {
            let (field, value) = m
                .split_once('=')
                .ok_or_else(|| ClassifyRuleError::Syntax(rule.to_string()))?;
            let (field, value) = (field.trim(), value.trim());
            let bad = || ClassifyRuleError::Value {
                rule: rule.to_string(),
                field: field.to_string(),
                value: value.to_string(),
            };
            match field {
                "port" => r.port = Some(value.parse().map_err(|_| bad())?),
                "vlan" => {
                    let v: u16 = value.parse().map_err(|_| bad())?;
                    if v > 0x0fff {
                        return Err(bad());
                    }
                    r.vlan = Some(v);
                }
                "dst" => {
                    let (ip, len) = value.split_once('/').unwrap_or((value, "32"));
                    let ip: Ipv4Addr = ip.parse().map_err(|_| bad())?;
                    let len: u8 = len.parse().map_err(|_| bad())?;
                    if len > 32 {
                        return Err(bad());
                    }
                    r.dst = Some((ip.octets(), len));
                }
                "dport" => r.dport = Some(value.parse().map_err(|_| bad())?),
                _ => {
                    return Err(ClassifyRuleError::UnknownField {
                        rule: rule.to_string(),
                        field: field.to_string(),
                    })
                }
            }
        }
        Ok(r)
    }
}

/// The classifier key of a packet that arrived on `port` with header
/// window `header`: fields a packet does not have (no VLAN tag, not IPv4,
/// not TCP/UDP, or beyond the window) are zero.
pub fn classify_key(port: PortId, header: &[u8]) -> [u8; CLASSIFY_KEY_BYTES] {
    let mut key = [0u8; CLASSIFY_KEY_BYTES];
    key[0..2].copy_from_slice(&port.to_be_bytes());
    let be16 = |at: usize| {
        header
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    let Some(mut ethertype) = be16(12) else {
        return key;
    };
    let mut l3 = 14;
    if ethertype == 0x8100 {
        let (Some(tci), Some(inner)) = (be16(14), be16(16)) else {
            return key;
        };
        key[2..4].copy_from_slice(&(tci & 0x0fff).to_be_bytes());
        ethertype = inner;
        l3 = 18;
    }
    if ethertype != 0x0800 {
        return key;
    }
    let Some(ip) = header.get(l3..l3 + 20) else {
        return key;
    };
    key[4..8].copy_from_slice(&ip[16..20]);
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let first_fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff == 0;
    if matches!(ip[9], 6 | 17) && first_fragment && ihl >= 20 {
        if let Some(dport) = be16(l3 + ihl + 2) {
            key[8..10].copy_from_slice(&dport.to_be_bytes());
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_and_reject() {
        let rules =
            ClassifyRule::parse_list("nat:port=1; fw:dst=10.1.0.0/16,dport=53;acl:*").unwrap();
        assert_eq!(rules.len(), 3);
        assert_eq!(rules[0].port, Some(1));
        assert_eq!(rules[1].dst, Some(([10, 1, 0, 0], 16)));
        assert_eq!(rules[1].dport, Some(53));
        assert_eq!(rules[2], ClassifyRule::any("acl"));
        assert!(matches!(
            "nat".parse::<ClassifyRule>(),
            Err(ClassifyRuleError::Syntax(_))
        ));
        assert!(matches!(
            "nat:proto=6".parse::<ClassifyRule>(),
            Err(ClassifyRuleError::UnknownField { .. })
        ));
        assert!("nat:vlan=5000".parse::<ClassifyRule>().is_err());
        assert!("nat:dst=10.0.0.0/33".parse::<ClassifyRule>().is_err());
        assert!("nat:port=x".parse::<ClassifyRule>().is_err());
    }

    #[test]
    fn key_reads_vlan_dst_and_dport_and_zeroes_what_is_missing() {
        // Tagged IPv4/UDP to 10.1.2.3:53 on port 7.
        let mut f = vec![0u8; 18 + 20 + 8];
        f[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        f[14..16].copy_from_slice(&0x2005u16.to_be_bytes());
        f[16..18].copy_from_slice(&0x0800u16.to_be_bytes());
        f[18] = 0x45;
        f[18 + 9] = 17;
        f[18 + 16..18 + 20].copy_from_slice(&[10, 1, 2, 3]);
        f[38 + 2..38 + 4].copy_from_slice(&53u16.to_be_bytes());
        let k = classify_key(7, &f);
        assert_eq!(k, [0, 7, 0, 5, 10, 1, 2, 3, 0, 53]);
        // The same cut short before the ports: the port field is zero.
        assert_eq!(classify_key(7, &f[..40]), [0, 7, 0, 5, 10, 1, 2, 3, 0, 0]);
        // Not IPv4, and a runt.
        assert_eq!(classify_key(1, &[0u8; 14]), [0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(classify_key(1, &[0u8; 3]), [0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn spec_masks_only_given_fields() {
        let r: ClassifyRule = "a:dst=10.1.0.0/16,vlan=5".parse().unwrap();
        let MatchSpec::Ternary { value, mask, .. } = r.spec(9) else {
            panic!("ternary")
        };
        assert_eq!(&mask[..], &[0, 0, 0x0f, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        assert_eq!(&value[..], &[0, 0, 0, 5, 10, 1, 0, 0, 0, 0]);
        let MatchSpec::Ternary { mask, .. } = ClassifyRule::any("b").spec(0) else {
            panic!("ternary")
        };
        assert!(mask.iter().all(|&b| b == 0));
    }
}
