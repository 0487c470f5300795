//! `inca-wire`: the bytes that cross inca's links.
//!
//! Modelled on smoltcp's `wire` module: each protocol has a zero-copy view
//! `Foo<T: AsRef<[u8]>>` whose `new_checked` validates lengths once so its
//! accessors never panic, setters when `T: AsMut<[u8]>`, and a `FooRepr`
//! with `parse`, `emit` and `buffer_len`. Nothing here panics on malformed
//! input; every failure is a [`WireError`].
//!
//! - [`ethernet`] — Ethernet II with an optional 802.1Q tag, EtherTypes.
//! - [`ipv4`] — IPv4 header, options skipped, header checksum.
//! - [`checksum`] — RFC 1071 Internet checksum, RFC 1624 incremental update.
//! - [`udp`], [`tcp`] — headers with pseudo-header checksums.
//! - [`roce`] — RoCEv2 BTH, RETH, AETH, opcodes, whole-packet view.
//! - [`icrc`] — the RoCEv2 invariant CRC (IBA Annex A17).
//! - [`builder`] — whole frames: UDP, TCP and RoCEv2 WRITE/READ/response/ACK.
//! - [`exoplane`] — ExoPlane shim, merge body and control protocol.
//! - [`redplane`] — RedPlane request/ack/chain messages, serial numbers, frames.
//! - [`swish`] — SwiSh common header and its SRO, EWO and SDW bodies.
//! - [`clip`] — CLIP data-plane shim and params packing, CLIP-CTL control
//!   protocol, pin-overflow digest.
//! - [`udp_frame`] — the one parser of whole Ethernet/IPv4/UDP frames.
//! - [`probe`] — the traffic generators' probe header (flow, sequence, send time).
//! - [`pcap`] — pcap writer, pcap/pcapng reader.
//! - [`pktgen`] — the Tofino packet generator's port-down header.
//! - [`telemetry`] — the per-hop telemetry stack appended after a probe.
//! - [`toeplitz`] — the RSS Toeplitz hash and its IPv4 inputs.
//!
//! Byte-by-byte layouts are in `docs/wire.md`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod builder;
pub mod checksum;
pub mod clip;
mod error;
pub mod ethernet;
pub mod exoplane;
pub mod icrc;
pub mod ipv4;
pub mod pcap;
pub mod pktgen;
pub mod probe;
pub mod redplane;
pub mod roce;
pub mod swish;
pub mod tcp;
pub mod telemetry;
pub mod toeplitz;
pub mod udp;
pub mod udp_frame;

pub use builder::{
    build_tcp_frame, build_udp_frame, Endpoints, ReadResponsePart, RoceFrameBuilder,
};
pub use error::{Result, WireError};
pub use ethernet::{EthernetFrame, EthernetRepr, MacAddr, VlanTag};
pub use icrc::{
    compute_frame_icrc, compute_icrc, fill_frame_icrc, fill_icrc, verify_frame_icrc, verify_icrc,
};
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use pcap::{read_capture, read_capture_bytes, PcapError, PcapWriter};
pub use pktgen::{PortDownHeaderRepr, PORT_DOWN_HEADER_LEN};
pub use probe::{Probe, PROBE_LEN, PROBE_MAGIC};
pub use roce::{
    Aeth, AethRepr, Bth, BthRepr, ExtHeader, Opcode, Reth, RethRepr, RocePacket, RoceRepr,
    ROCEV2_UDP_PORT,
};
pub use tcp::{TcpFlags, TcpRepr, TcpSegment};
pub use telemetry::{push_stamp, Pushed, Stamp, StampPoint, TelemetryStack};
pub use udp::{UdpDatagram, UdpRepr};
pub use udp_frame::{parse_udp_frame, UdpFrame};
