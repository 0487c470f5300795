//! The header a Tofino packet generator puts in front of a port-down
//! packet (`pktgen_port_down_header_t` in TNA's `tofino1_base.p4`).
//!
//! ```text
//! bits: _pad0 3 | pipe_id 2 | app_id 3 | _pad1 15 | port_num 9 | packet_id 16
//! byte:  0 ............................ | 1 ........... 3        | 4 ...... 5
//! ```
//!
//! Six bytes, in front of the stream's template frame. The padding is
//! zero when emitted and ignored when parsed (P4 `@padding` bits carry no
//! meaning). Tofino-1 port numbers are 9 bits wide, application ids 3 and
//! pipe ids 2; an emitter refuses wider values instead of truncating them.

use crate::error::{Result, WireError};

/// Length of the port-down header.
pub const PORT_DOWN_HEADER_LEN: usize = 6;

/// Largest port number the 9-bit `port_num` field holds.
pub const MAX_PORT: u16 = (1 << 9) - 1;
/// Largest application id the 3-bit `app_id` field holds.
pub const MAX_APP_ID: u8 = (1 << 3) - 1;
/// Largest pipe id the 2-bit `pipe_id` field holds.
pub const MAX_PIPE_ID: u8 = (1 << 2) - 1;

/// The fields of a port-down header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortDownHeaderRepr {
    /// The pipe whose generator made the packet.
    pub pipe_id: u8,
    /// The generator application (stream) that fired.
    pub app_id: u8,
    /// The port that went down.
    pub port: u16,
    /// The packet's index within its batch.
    pub packet_id: u16,
}

impl PortDownHeaderRepr {
    /// Reads the header at the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let b = buf
            .get(..PORT_DOWN_HEADER_LEN)
            .ok_or(WireError::Truncated)?;
        Ok(PortDownHeaderRepr {
            pipe_id: (b[0] >> 3) & MAX_PIPE_ID,
            app_id: b[0] & MAX_APP_ID,
            port: u16::from_be_bytes([b[2], b[3]]) & MAX_PORT,
            packet_id: u16::from_be_bytes([b[4], b[5]]),
        })
    }

    /// Writes the header to the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if self.pipe_id > MAX_PIPE_ID {
            return Err(WireError::OutOfRange("pktgen pipe_id (2 bits)"));
        }
        if self.app_id > MAX_APP_ID {
            return Err(WireError::OutOfRange("pktgen app_id (3 bits)"));
        }
        if self.port > MAX_PORT {
            return Err(WireError::OutOfRange("pktgen port_num (9 bits)"));
        }
        let b = buf
            .get_mut(..PORT_DOWN_HEADER_LEN)
            .ok_or(WireError::BufferTooSmall)?;
        b[0] = (self.pipe_id << 3) | self.app_id;
        b[1] = 0;
        b[2..4].copy_from_slice(&self.port.to_be_bytes());
        b[4..6].copy_from_slice(&self.packet_id.to_be_bytes());
        Ok(())
    }

    /// The bytes needed to emit the header.
    pub const fn buffer_len(&self) -> usize {
        PORT_DOWN_HEADER_LEN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_tna() {
        let h = PortDownHeaderRepr {
            pipe_id: 2,
            app_id: 5,
            port: 0x1A3,
            packet_id: 0xBEEF,
        };
        let mut b = [0xFFu8; 7];
        h.emit(&mut b).unwrap();
        // 000 10 101 | 15 zero bits, then 1 1010 0011 | packet id.
        assert_eq!(b, [0b0001_0101, 0x00, 0x01, 0xA3, 0xBE, 0xEF, 0xFF]);
        assert_eq!(PortDownHeaderRepr::parse(&b).unwrap(), h);
        assert_eq!(h.buffer_len(), 6);
    }

    #[test]
    fn padding_is_ignored_and_short_buffers_refused() {
        let b = [0xFF; 6];
        let h = PortDownHeaderRepr::parse(&b).unwrap();
        assert_eq!((h.pipe_id, h.app_id, h.port), (3, 7, 511));
        assert_eq!(
            PortDownHeaderRepr::parse(&b[..5]),
            Err(WireError::Truncated)
        );
        let mut short = [0u8; 5];
        assert_eq!(h.emit(&mut short), Err(WireError::BufferTooSmall));
    }

    #[test]
    fn wide_values_are_refused() {
        let ok = PortDownHeaderRepr {
            pipe_id: 0,
            app_id: 0,
            port: 0,
            packet_id: 0,
        };
        let mut b = [0u8; 6];
        for bad in [
            PortDownHeaderRepr { port: 512, ..ok },
            PortDownHeaderRepr { app_id: 8, ..ok },
            PortDownHeaderRepr { pipe_id: 4, ..ok },
        ] {
            assert!(matches!(bad.emit(&mut b), Err(WireError::OutOfRange(_))));
        }
    }
}
