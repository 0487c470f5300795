//! The REPORT digest a device's data plane sends its daemon (§4.5) [our
//! choice of layout in the spec]: one popular union key and its count-min
//! estimate, from which the daemon builds a PROMOTE_REPORT (§5.5).
//!
//! ```text
//! app_id 8 | uk_len 8 | uk (uk_len bytes) | estimate 32 | bank 8
//! ```
//!
//! `bank` is the count-min bank the estimate was read from (banks are
//! swapped and cleared each period).

use super::codec::{Reader, Writer};
use super::ControlError;

/// One REPORT digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReportDigest {
    /// Application id.
    pub app_id: u8,
    /// Union key (≤ 255 bytes).
    pub uk: Vec<u8>,
    /// Count-min estimate.
    pub estimate: u32,
    /// Count-min bank.
    pub bank: u8,
}

impl ReportDigest {
    /// Decodes a digest; every byte must be used.
    pub fn decode(bytes: &[u8]) -> Result<Self, ControlError> {
        let mut r = Reader::new(bytes);
        let d = ReportDigest {
            app_id: r.u8("app_id")?,
            uk: r.key("uk")?,
            estimate: r.u32("estimate")?,
            bank: r.u8("bank")?,
        };
        r.finish()?;
        Ok(d)
    }

    /// The digest bytes; refuses a union key over 255 bytes.
    pub fn encode(&self) -> Result<Vec<u8>, ControlError> {
        let mut w = Writer::default();
        w.u8(self.app_id);
        w.key("uk", &self.uk)?;
        w.u32(self.estimate);
        w.u8(self.bank);
        Ok(w.buf)
    }
}
