//! Intrinsic metadata: what the switch tells a program about a packet
//! beyond its bytes (kept apart from the program API so that the traffic
//! manager and the packet generator can name it without depending on
//! programs).

/// Where a packet came from, as intrinsic metadata tells the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketKind {
    /// Arrived on a front-panel port.
    Normal,
    /// Came back from a recirculation; `passes` counts previous passes.
    Recirculated {
        /// How many ingress passes this packet has made before this one.
        passes: u8,
    },
    /// Resubmitted from ingress (at most once).
    Resubmitted,
    /// Made by the packet generator.
    Generated {
        /// The generator stream.
        stream: u8,
        /// Which trigger of that stream (counts from 0).
        batch_id: u16,
        /// Which packet of the batch.
        packet_id: u16,
    },
    /// Injected by the control plane (packet-out into ingress).
    FromCpu,
    /// A mirror copy (egress only).
    Mirrored {
        /// The mirror session.
        session: u16,
    },
}
