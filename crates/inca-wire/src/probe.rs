//! The probe header: what inca's traffic generators put at the start of
//! every UDP (and generated TCP) payload so a receiver can tell which flow
//! and which packet it got and when it was sent.
//!
//! It is a wire format shared by the simulator's hosts (which write and
//! measure it) and by systems that identify packets by it (RedPlane's
//! linearizability history, say), so it lives here, below both.

/// First four bytes of a [`Probe`] ("INCA").
pub const PROBE_MAGIC: u32 = 0x494e_4341;

/// Length of a [`Probe`] header.
pub const PROBE_LEN: usize = 24;

/// The header at the start of every generated UDP payload (24 bytes, big
/// endian): magic `"INCA"` (4), flow index (4), sequence number (8), transmit
/// time in ns (8). A receiver computes one-way latency as its time minus the
/// transmit time (virtual time is global in the simulator).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// Flow index within the generator (the workload index for requests).
    pub flow: u32,
    /// Sequence number within the generator.
    pub seq: u64,
    /// When the packet left the host, ns.
    pub tx_time: u64,
}

impl Probe {
    /// Writes the header into the first [`PROBE_LEN`] bytes of `buf`;
    /// `false` (and nothing written) if `buf` is shorter.
    pub fn write(&self, buf: &mut [u8]) -> bool {
        let Some(b) = buf.get_mut(..PROBE_LEN) else {
            return false;
        };
        b[0..4].copy_from_slice(&PROBE_MAGIC.to_be_bytes());
        b[4..8].copy_from_slice(&self.flow.to_be_bytes());
        b[8..16].copy_from_slice(&self.seq.to_be_bytes());
        b[16..24].copy_from_slice(&self.tx_time.to_be_bytes());
        true
    }

    /// Reads the header at the start of a UDP payload, if it is one.
    pub fn parse(payload: &[u8]) -> Option<Probe> {
        let b = payload.get(..PROBE_LEN)?;
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| (u64::from(u32_at(i)) << 32) | u64::from(u32_at(i + 4));
        (u32_at(0) == PROBE_MAGIC).then(|| Probe {
            flow: u32_at(4),
            seq: u64_at(8),
            tx_time: u64_at(16),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_round_trips_and_rejects_other_payloads() {
        let p = Probe {
            flow: 7,
            seq: 1 << 40,
            tx_time: 123_456_789,
        };
        let mut b = [0u8; 30];
        assert!(p.write(&mut b));
        assert_eq!(Probe::parse(&b), Some(p));
        assert_eq!(Probe::parse(&b[..23]), None);
        b[0] ^= 1;
        assert_eq!(Probe::parse(&b), None);
        assert!(!p.write(&mut [0u8; 10]));
    }
}
