//! TCP endpoints for simulated hosts, built on smoltcp, sans-IO.
//!
//! A [`TcpStack`] is one host's TCP/IP stack. The host that owns it strips and
//! adds Ethernet headers itself, so the stack speaks plain IPv4: it is handed
//! IPv4 packets addressed to the host ([`TcpStack::receive`]) and hands back
//! the IPv4 packets it wants sent ([`TcpStack::poll`]). It never reads a clock
//! or an OS random source; time is the simulator's integer nanoseconds and the
//! only randomness (smoltcp's initial sequence numbers) comes from a seed
//! derived from the host address and [`TcpConfig::seed`]. Same inputs, same
//! packets, bit for bit.
//!
//! Two workloads are built in, the ones experiments need:
//! - [`TcpStack::bulk_send`]: iperf-style, open a connection at a given time and
//!   push a number of bytes (or bytes until the run ends) as fast as TCP allows;
//! - [`TcpStack::sink`]: accept connections on a port and discard the data,
//!   counting it.
//!
//! Each connection is a flow with [`FlowStats`]: when it was established, how it
//! ended ([`Outcome`]: completed, reset by the peer, timed out) and a goodput
//! time series. Connection failures are final: a flow that is reset or times
//! out is never reopened, so an experiment sees exactly when and how a
//! middlebox failure (a NAT losing its state, say) broke it.
//!
//! The payload is a fixed pattern (byte `i` of a stream is `i % 251`); a sink
//! checks it and counts mismatching bytes in [`FlowStats::payload_errors`], so
//! a test can assert that a transfer arrived byte-exact.
//!
//! # Time resolution
//! smoltcp's clock ([`smoltcp::time::Instant`]) has microsecond resolution.
//! The stack hands smoltcp `floor(now / 1000)` µs, and converts the instant
//! smoltcp wants to be polled at back to nanoseconds as `µs * 1000`, which is
//! never earlier than the moment smoltcp's timer actually fires: a driver that
//! polls at [`TcpStack::poll_at`] never polls too early and never spins. The
//! stack's own clock never goes backwards: a call with a `now` earlier than a
//! previous call is treated as happening at that previous time.
//!
//! # Congestion control (a workaround for smoltcp)
//! smoltcp 0.12's congestion controllers (Cubic, Reno) only decide whether a
//! segment may be sent at all; they do not bound the bytes in flight, which
//! smoltcp bounds only by the peer's receive window and the send buffer. A
//! window larger than the path's bandwidth-delay product plus its queue then
//! overflows the bottleneck queue every round trip, smoltcp's go-back-N
//! recovery resends whole windows, its RTT estimator inflates the RTO up to
//! 10 s, and the connection times out. So smoltcp's own controller is switched
//! off and [`TcpStack`] runs the congestion window itself, at the one place it
//! controls: smoltcp can only send what is in the send buffer, so a sender
//! never fills its buffer beyond `cwnd` unacknowledged bytes. The window opens
//! by slow start (from 10 segments) and then by [`Congestion::Cubic`] (RFC 8312
//! with its TCP-friendly region, β = 0.7) or [`Congestion::Reno`] (one segment
//! per window, β = 0.5); it closes once per loss episode. A loss is seen when
//! smoltcp retransmits (the stack watches the sequence numbers of its own
//! outgoing segments), after three duplicate ACKs or the retransmission timeout.
//!
//! # Retransmission timer (a workaround for smoltcp)
//! smoltcp 0.12 arms its retransmission timer when it has sent everything it
//! can, leaves a running timer alone until it expires, and stops it on an ACK
//! only when that ACK covers everything sent. On a continuously busy
//! connection the deadline therefore stays where it was set near the start
//! (about 830 ms after the handshake, from the initial RTT estimate): after an
//! outage the sender waits until then, and in a long healthy transfer the
//! stale deadline expires while ACKs flow and smoltcp resends the whole window
//! (a spurious go-back-N). smoltcp offers no way to restart its timer, so each
//! sender runs an RFC 6298 timer of its own in front of it:
//! - the RTO is `SRTT + 4 RTTVAR` from the stack's own RTT samples (ns, not
//!   ms), at least 10 ms (smoltcp's minimum) and at most 10 s; it starts when
//!   new data goes out with none outstanding, restarts whenever an ACK
//!   acknowledges new data (RFC 6298, 5.3), and doubles on each expiry without
//!   progress (5.5);
//! - when it expires, the stack makes smoltcp retransmit from the oldest
//!   unacknowledged byte by handing it three copies of the peer's last ACK (a
//!   duplicate ACK is exactly that), which starts smoltcp's fast retransmit;
//! - when smoltcp's own stale timer expires first, its go-back-N burst is
//!   dropped inside the stack, as if the wire had lost it: the original
//!   segments are still on their way and will be acknowledged. smoltcp then
//!   rearms its timer afresh. Retransmissions after three duplicate ACKs from
//!   the peer (fast retransmit) always go out.
//!
//! The copies of the ACK would also tell smoltcp that the peer is alive, so for
//! a sender that was handed any, the stack enforces [`TcpConfig::timeout`]
//! itself, from the last packet really heard. Before the first RTT sample
//! there is no RTO of the stack's own, and smoltcp's timer alone decides.
//!
//! Other properties of smoltcp's TCP that show in results:
//! - Loss recovery is go-back-N: everything after the lost segment is sent
//!   again. SACK blocks are sent but the sender does not use them.
//! - The minimum RTO is 10 ms, so a loss that fast retransmit does not repair
//!   costs at least 10 ms.
//! - ACKs go out for at least every second full segment, otherwise after the
//!   delayed-ACK timeout ([`TcpConfig::ack_delay`]).
//! - smoltcp answers a segment of data it already has only with a "challenge
//!   ACK", at most one per second; after an outage that ate the ACKs, the
//!   sender would retransmit into silence until it times out. A receiver
//!   therefore repeats its last ACK for such a segment when it has been silent
//!   for 10 ms (see [`TcpStack::receive`]).
//! - The RTT estimator starts at 300 ms, so a loss in a connection's first
//!   few round trips costs a retransmission timeout of several hundred ms.
//!
//! # Cost
//! Every [`TcpStack::poll`] walks all of the stack's sockets (as smoltcp's own
//! `Interface::poll` does), so a host is meant to carry a handful to a few
//! hundred connections, not hundreds of thousands.

mod window;
use window::Window;

use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;

use inca_switch::device::{Nanos, MICROS, MILLIS, SECONDS};
use serde::{Deserialize, Serialize};
use smoltcp::iface::{Config, Interface, PollResult, SocketHandle, SocketSet};
use smoltcp::phy::{self, ChecksumCapabilities, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{
    HardwareAddress, IpAddress, IpCidr, IpProtocol, Ipv4Packet, Ipv4Repr, TcpControl, TcpPacket,
    TcpRepr,
};

/// Index of a flow in [`TcpStack::flows`].
pub type FlowId = usize;

/// Which congestion controller a sender runs (the stack's own; see "Congestion
/// control" in the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Congestion {
    /// CUBIC (RFC 8312, with its TCP-friendly region); what Linux uses by
    /// default.
    #[default]
    Cubic,
    /// Reno AIMD: one segment more per window, halve on loss.
    Reno,
    /// No congestion control: only the send buffer and the peer's window limit
    /// the sender.
    None,
}

/// Configuration of a [`TcpStack`]. Values out of range are clamped by
/// [`TcpStack::new`] rather than rejected, so a bad scenario value can never
/// make the stack panic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TcpConfig {
    /// IP MTU in bytes (the MSS is this minus 40 bytes of IPv4 and TCP headers).
    /// Default 1500; clamped to 576..=65535.
    pub mss_mtu: usize,
    /// Send buffer of a sending connection, in bytes: the most data that can be
    /// in flight. Default 4 MiB; clamped to 1..=1 GiB.
    pub send_buffer: usize,
    /// Receive buffer of a receiving connection, in bytes: the largest window it
    /// advertises (window scaling is negotiated automatically). Default 4 MiB,
    /// which covers 100 Gbps at a 300 µs RTT; clamped to 1..=1 GiB (the largest
    /// window TCP window scaling can express).
    pub recv_buffer: usize,
    /// Congestion controller. Default [`Congestion::Cubic`].
    pub congestion: Congestion,
    /// Width of one bin of [`FlowStats::goodput`], in ns. Default 10 ms;
    /// clamped to at least 1 µs.
    pub goodput_bin: Nanos,
    /// A connection that hears nothing from its peer for this long (while it
    /// has something to say, or is waiting for the handshake) is aborted and
    /// marked [`Outcome::TimedOut`]. `None` disables it. Default 1 s. Rounded
    /// up to whole microseconds.
    pub timeout: Option<Nanos>,
    /// Delayed-ACK timeout. smoltcp's default is 10 ms; `None` ACKs every
    /// segment at once. Rounded up to whole microseconds.
    pub ack_delay: Option<Nanos>,
    /// Mixed with the host address into the seed of smoltcp's random number
    /// generator (initial sequence numbers). The simulator passes a value
    /// derived from the run seed; two hosts with different addresses get
    /// different sequences even with the same seed.
    pub seed: u64,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss_mtu: 1500,
            send_buffer: 4 << 20,
            recv_buffer: 4 << 20,
            congestion: Congestion::Cubic,
            goodput_bin: 10 * MILLIS,
            timeout: Some(SECONDS),
            ack_delay: Some(10 * MILLIS),
            seed: 0,
        }
    }
}

/// Which end of a connection a flow is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Opened by [`TcpStack::bulk_send`]; pushes data.
    Sender,
    /// Accepted by [`TcpStack::sink`]; discards data.
    Receiver,
}

/// How a flow ended (or that it has not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Not ended yet: waiting to start, listening, connecting or transferring.
    Open,
    /// Sender: every byte was acknowledged. Receiver: the peer closed the
    /// connection (FIN) and every byte before it was delivered.
    Completed,
    /// The peer reset the connection (an RST was received), e.g. because it
    /// lost its state or nothing listens on the port.
    Reset,
    /// Nothing was heard from the peer for [`TcpConfig::timeout`].
    TimedOut,
    /// The connection could not even be opened (port 0, unspecified or
    /// unroutable address).
    Failed,
}

/// Statistics of one flow (one connection, or one listening socket waiting for
/// one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowStats {
    /// This flow's index in [`TcpStack::flows`].
    pub id: FlowId,
    /// Sender or receiver.
    pub role: Role,
    /// Local address and port.
    pub local: (Ipv4Addr, u16),
    /// The peer: known from the start for a sender, from the handshake for a
    /// receiver.
    pub remote: Option<(Ipv4Addr, u16)>,
    /// Sender: when the connection attempt starts. Receiver: 0 (listening
    /// starts when the stack is created).
    pub start: Nanos,
    /// Sender: how many bytes it sends (`None`: until the run ends).
    pub bytes_to_send: Option<u64>,
    /// When the handshake completed, if it did.
    pub established_at: Option<Nanos>,
    /// When the flow's [`Outcome`] stopped being [`Outcome::Open`].
    pub ended_at: Option<Nanos>,
    /// How the flow ended.
    pub outcome: Outcome,
    /// Sender: bytes acknowledged by the peer.
    pub bytes_sent_acked: u64,
    /// Receiver: bytes delivered to the application (in order).
    pub bytes_received: u64,
    /// Sender: the smallest round-trip time measured, in ns (data segment to
    /// its ACK, including any delayed-ACK wait).
    pub min_rtt: Option<Nanos>,
    /// Sender: segments smoltcp sent again (fast retransmit or timeout; with
    /// go-back-N recovery, every segment after a loss counts).
    pub segments_retransmitted: u64,
    /// Receiver: delivered bytes that differ from the sender's pattern (always
    /// 0 between two [`TcpStack`]s unless something corrupted the stream).
    pub payload_errors: u64,
    /// Bytes per [`TcpConfig::goodput_bin`] since time 0: delivered to the
    /// application (receiver) or newly acknowledged (sender). Bin `i` covers
    /// `[i * bin, (i + 1) * bin)`; the vector ends at the last bin with bytes.
    pub goodput: Vec<u64>,
}

/// The largest buffer smoltcp accepts (TCP window scaling tops out at 1 GiB;
/// smoltcp panics above it).
const MAX_BUFFER: usize = 1 << 30;
/// Buffer for the direction a flow does not use (a sender's receive buffer, a
/// receiver's send buffer): they only ever carry the handshake and FIN, so
/// there is no point allocating megabytes per connection for them.
const UNUSED_DIRECTION_BUFFER: usize = 16 * 1024;
/// The most `poll_egress` rounds (each at least one packet) in one
/// [`TcpStack::poll`]: a guard against a smoltcp loop that never settles. A
/// 1 GiB window is ~735 k full segments, so this does not limit a sane run.
const MAX_EGRESS_ROUNDS: usize = 1 << 20;
/// How long a receiver must have been silent before it repeats its last ACK
/// for old data: smoltcp's minimum retransmission timeout.
const REPEAT_ACK_AFTER: Nanos = 10 * MILLIS;
/// Smallest retransmission timeout of a sender's own timer: smoltcp's.
const MIN_RTO: Nanos = 10 * MILLIS;
/// Largest retransmission timeout, backoff included: smoltcp's.
const MAX_RTO: Nanos = 10 * SECONDS;
/// Duplicate ACKs that start smoltcp's fast retransmit.
const DUP_ACK_THRESHOLD: u32 = 3;
/// Period of the payload pattern (a prime, so it never lines up with segment
/// boundaries).
const PATTERN_PERIOD: usize = 251;
/// The payload pattern, long enough to copy from at any phase in one go.
const PATTERN: [u8; 2 * PATTERN_PERIOD] = {
    let mut p = [0u8; 2 * PATTERN_PERIOD];
    let mut i = 0;
    while i < p.len() {
        p[i] = (i % PATTERN_PERIOD) as u8;
        i += 1;
    }
    p
};

/// Writes the pattern for stream offsets `offset..offset + buf.len()`.
fn fill_pattern(offset: u64, buf: &mut [u8]) {
    let mut phase = (offset % PATTERN_PERIOD as u64) as usize;
    for chunk in buf.chunks_mut(PATTERN_PERIOD) {
        chunk.copy_from_slice(&PATTERN[phase..phase + chunk.len()]);
        phase = (phase + chunk.len()) % PATTERN_PERIOD;
    }
}

/// Counts the bytes of `buf` that differ from the pattern at stream offsets
/// `offset..`.
fn pattern_errors(offset: u64, buf: &[u8]) -> u64 {
    let mut phase = (offset % PATTERN_PERIOD as u64) as usize;
    let mut errors = 0u64;
    for chunk in buf.chunks(PATTERN_PERIOD) {
        let expected = &PATTERN[phase..phase + chunk.len()];
        if chunk != expected {
            errors += chunk.iter().zip(expected).filter(|(a, b)| a != b).count() as u64;
        }
        phase = (phase + chunk.len()) % PATTERN_PERIOD;
    }
    errors
}

/// Our nanoseconds to smoltcp's microseconds, rounding down (see the module
/// documentation). Saturates instead of overflowing i64.
fn to_instant(ns: Nanos) -> Instant {
    Instant::from_micros(i64::try_from(ns / 1_000).unwrap_or(i64::MAX))
}

/// smoltcp's microseconds back to nanoseconds (exact; negative means "now").
fn from_instant(instant: Instant) -> Nanos {
    u64::try_from(instant.total_micros())
        .unwrap_or(0)
        .saturating_mul(1_000)
}

/// A duration in ns to smoltcp's µs, rounding up so that a timeout never fires
/// early.
fn to_duration(ns: Nanos) -> Duration {
    Duration::from_micros(ns.div_ceil(1_000))
}

/// SplitMix64 finaliser: spreads the host address over all 64 seed bits.
fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The smoltcp device: two queues the stack fills and drains around each
/// smoltcp call. smoltcp pulls received packets from `rx` and pushes the ones
/// it sends onto `tx`.
struct QueueDevice {
    rx: VecDeque<Vec<u8>>,
    tx: Vec<Vec<u8>>,
    mtu: usize,
}

struct QueueRxToken(Vec<u8>);

struct QueueTxToken<'a>(&'a mut Vec<Vec<u8>>);

impl phy::RxToken for QueueRxToken {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        f(&self.0)
    }
}

impl phy::TxToken for QueueTxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        let mut packet = vec![0u8; len];
        let result = f(&mut packet);
        self.0.push(packet);
        result
    }
}

impl phy::Device for QueueDevice {
    type RxToken<'a> = QueueRxToken;
    type TxToken<'a> = QueueTxToken<'a>;

    fn receive(&mut self, _timestamp: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        let packet = self.rx.pop_front()?;
        Some((QueueRxToken(packet), QueueTxToken(&mut self.tx)))
    }

    fn transmit(&mut self, _timestamp: Instant) -> Option<Self::TxToken<'_>> {
        // Never refuses: how fast packets leave is the host's and the link's
        // business, and a sender never has more than a window outstanding.
        Some(QueueTxToken(&mut self.tx))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ip;
        caps.max_transmission_unit = self.mtu;
        // Default checksum capabilities: verify on receive, compute on send.
        caps
    }
}

/// What the stack keeps per flow besides its public statistics.
struct FlowState {
    /// The smoltcp socket, once there is one (a sender gets it at `start`).
    handle: Option<SocketHandle>,
    /// Sender: remote endpoint to connect to.
    remote: Option<(Ipv4Addr, u16)>,
    /// Sender: bytes written into the send buffer so far.
    enqueued: u64,
    /// We called `close()` (sender: all data queued; receiver: peer's FIN seen).
    closing: bool,
    /// Sender: the congestion window.
    window: Option<Window>,
    /// Receiver: the last pure ACK it sent (its acknowledgement number, the
    /// packet and when), to repeat when old data arrives (see `receive`).
    last_ack: Option<(u32, Vec<u8>, Nanos)>,
    /// Sender: the stack's own retransmission timer.
    rtx: RetransmitTimer,
}

/// A sender's RFC 6298 retransmission timer, run in front of smoltcp's (see
/// "Retransmission timer" in the module documentation).
#[derive(Debug, Clone, Default)]
struct RetransmitTimer {
    /// When the timer expires; `None` while it is not running (nothing
    /// outstanding, or no RTT sample yet).
    deadline: Option<Nanos>,
    /// Expiries since the last ACK of new data: the RTO is doubled this often.
    backoff: u32,
    /// Whether retransmissions may go out in the current `poll`.
    allow: bool,
    /// The last acknowledgement number heard and how many duplicate ACKs of it
    /// followed.
    last_ack_number: Option<u32>,
    dup_acks: u32,
    /// The last packet heard from the peer, if it was a pure ACK: what the
    /// stack replays to make smoltcp retransmit.
    peer_ack: Option<Vec<u8>>,
    /// When the peer was last heard (or the connection attempt started).
    last_heard: Nanos,
    /// Replayed ACKs were handed to smoltcp since the peer was last heard, so
    /// smoltcp's own idle timeout is no longer to be trusted.
    replayed: bool,
    /// The timer expired at the start of the current `poll`.
    expired_now: bool,
    /// A retransmission went out in the current `poll`.
    retransmitted: bool,
    /// The timer expired but smoltcp could not be made to retransmit: until new
    /// data is acknowledged, let every retransmission of smoltcp's own go out
    /// (as without this timer), so that the connection can never stall.
    fallback: bool,
}

/// Why the flows are being looked at: after one received packet (and whether it
/// was an RST), or around a poll. A connection that closes while handling an
/// RST was reset; one that closes in a poll timed out (smoltcp aborts timed-out
/// connections only when it transmits).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cause {
    Ingress { rst: bool },
    Poll,
}

/// One simulated host's TCP/IP stack. See the module documentation.
pub struct TcpStack {
    config: TcpConfig,
    ip: Ipv4Addr,
    iface: Interface,
    device: QueueDevice,
    sockets: SocketSet<'static>,
    flows: Vec<FlowState>,
    stats: Vec<FlowStats>,
    malformed: u64,
    ignored: u64,
    /// Latest time seen; the clock never runs backwards.
    now: Nanos,
    /// Time of the last `poll` if nothing was received since (see `poll_at`).
    settled_at: Option<Nanos>,
    /// Next local port `bulk_send` hands out when asked for port 0.
    next_ephemeral: u16,
    /// Sender flows by (local port, remote address, remote port), to attribute
    /// outgoing segments to their congestion window.
    senders: BTreeMap<(u16, Ipv4Addr, u16), FlowId>,
    /// Established receiver flows, keyed the same way.
    receivers: BTreeMap<(u16, Ipv4Addr, u16), FlowId>,
}

impl std::fmt::Debug for TcpStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpStack")
            .field("ip", &self.ip)
            .field("flows", &self.stats.len())
            .field("malformed", &self.malformed)
            .finish_non_exhaustive()
    }
}

impl TcpStack {
    /// A stack with address `ip/prefix_len` (prefix clamped to 32). Packets to
    /// other subnets are routed to `gateway`; the host sends everything out of
    /// its one port anyway, but smoltcp needs a route to send at all.
    pub fn new(ip: Ipv4Addr, prefix_len: u8, gateway: Ipv4Addr, config: TcpConfig) -> Self {
        let mut config = config;
        config.mss_mtu = config.mss_mtu.clamp(576, 65_535);
        config.send_buffer = config.send_buffer.clamp(1, MAX_BUFFER);
        config.recv_buffer = config.recv_buffer.clamp(1, MAX_BUFFER);
        config.goodput_bin = config.goodput_bin.max(1_000);

        let mut device = QueueDevice {
            rx: VecDeque::new(),
            tx: Vec::new(),
            mtu: config.mss_mtu,
        };
        let mut iface_config = Config::new(HardwareAddress::Ip);
        // Deterministic: a function of the address and the configured seed
        // only, never of the OS.
        iface_config.random_seed = mix64(u64::from(u32::from(ip)) ^ mix64(config.seed));
        let mut iface = Interface::new(iface_config, &mut device, Instant::ZERO);
        iface.update_ip_addrs(|addrs| {
            // Cannot fail: the list is empty and holds at least one address.
            let _ = addrs.push(IpCidr::new(IpAddress::Ipv4(ip), prefix_len.min(32)));
        });
        // Cannot fail: the route table is empty.
        let _ = iface.routes_mut().add_default_ipv4_route(gateway);

        TcpStack {
            config,
            ip,
            iface,
            device,
            sockets: SocketSet::new(Vec::new()),
            flows: Vec::new(),
            stats: Vec::new(),
            malformed: 0,
            ignored: 0,
            now: 0,
            settled_at: None,
            next_ephemeral: 49_152,
            senders: BTreeMap::new(),
            receivers: BTreeMap::new(),
        }
    }

    /// This stack's address.
    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    /// The configuration in use (after clamping).
    pub fn config(&self) -> &TcpConfig {
        &self.config
    }

    /// Opens a connection at time `start` from `local_port` (0: the next free
    /// port from 49152 up) to `remote`, and sends `bytes` (`None`: until the
    /// run ends) as fast as TCP allows, iperf-style. The connection is never
    /// reopened: if it is reset or times out, the flow ends there.
    pub fn bulk_send(
        &mut self,
        start: Nanos,
        local_port: u16,
        remote: (Ipv4Addr, u16),
        bytes: Option<u64>,
    ) -> FlowId {
        let local_port = if local_port == 0 {
            self.ephemeral_port()
        } else {
            local_port
        };
        let id = self.flows.len();
        self.flows.push(FlowState {
            handle: None,
            remote: Some(remote),
            enqueued: 0,
            closing: false,
            last_ack: None,
            rtx: RetransmitTimer {
                last_heard: start,
                ..RetransmitTimer::default()
            },
            window: Some(Window::new(
                self.config.congestion,
                self.config.mss_mtu - 40,
                self.config.send_buffer,
            )),
        });
        self.stats.push(FlowStats {
            id,
            role: Role::Sender,
            local: (self.ip, local_port),
            remote: Some(remote),
            start,
            bytes_to_send: bytes,
            established_at: None,
            ended_at: None,
            outcome: Outcome::Open,
            bytes_sent_acked: 0,
            bytes_received: 0,
            min_rtt: None,
            segments_retransmitted: 0,
            payload_errors: 0,
            goodput: Vec::new(),
        });
        // A poll in the same instant must see the new flow.
        self.settled_at = None;
        id
    }

    /// Accepts connections on `port`: `backlog` listening sockets, one per
    /// expected connection (smoltcp has no accept queue; a connection attempt
    /// beyond them is answered with an RST). Each socket serves one connection
    /// and is not reused afterwards. Received data is checked against the
    /// sender pattern, counted and discarded.
    pub fn sink(&mut self, port: u16, backlog: usize) -> Vec<FlowId> {
        let mut ids = Vec::with_capacity(backlog);
        for _ in 0..backlog {
            let id = self.flows.len();
            let mut socket = self.new_socket(UNUSED_DIRECTION_BUFFER, self.config.recv_buffer);
            let listening = socket.listen(port).is_ok();
            let handle = listening.then(|| self.sockets.add(socket));
            self.flows.push(FlowState {
                handle,
                remote: None,
                enqueued: 0,
                closing: false,
                window: None,
                last_ack: None,
                rtx: RetransmitTimer::default(),
            });
            self.stats.push(FlowStats {
                id,
                role: Role::Receiver,
                local: (self.ip, port),
                remote: None,
                start: 0,
                bytes_to_send: None,
                established_at: None,
                ended_at: (!listening).then_some(self.now),
                outcome: if listening {
                    Outcome::Open
                } else {
                    Outcome::Failed
                },
                bytes_sent_acked: 0,
                bytes_received: 0,
                min_rtt: None,
                segments_retransmitted: 0,
                payload_errors: 0,
                goodput: Vec::new(),
            });
            ids.push(id);
        }
        ids
    }

    /// An IPv4 packet addressed to this host arrived at `now`. It is processed
    /// at once; any answer (an ACK, an RST) is handed out by the next
    /// [`TcpStack::poll`], which [`TcpStack::poll_at`] then asks for at `now`.
    /// Malformed packets (bad header, length or checksum, truncated TCP) are
    /// counted in [`TcpStack::malformed`] and dropped; well-formed packets that
    /// are not TCP for this address are counted in [`TcpStack::ignored`].
    pub fn receive(&mut self, now: Nanos, ipv4_packet: &[u8]) {
        let now = self.advance(now);
        self.settled_at = None;
        let (rst, key, end, occupies, ack, pure_ack) = match classify(self.ip, ipv4_packet) {
            Classified::Malformed => {
                self.malformed += 1;
                return;
            }
            Classified::Ignored => {
                self.ignored += 1;
                return;
            }
            Classified::Tcp {
                rst,
                key,
                end,
                occupies,
                ack,
                pure_ack,
            } => (rst, key, end, occupies, ack, pure_ack),
        };
        if let Some(&id) = self.senders.get(&key) {
            self.heard_by_sender(id, now, ipv4_packet, ack, pure_ack);
        }
        let queued = self.device.tx.len();
        self.device.rx.push_back(ipv4_packet.to_vec());
        let _ =
            self.iface
                .poll_ingress_single(to_instant(now), &mut self.device, &mut self.sockets);
        // Already validated, so smoltcp consumed it; clear anyway so a packet can
        // never be processed twice.
        self.device.rx.clear();
        // A receiver that gets data it already acknowledged must ACK again
        // (RFC 9293, 3.10.7.4): its earlier ACKs were lost, and the sender
        // retransmits until it hears one. smoltcp answers such segments only
        // with a "challenge ACK" limited to one per second, so after an outage
        // that also ate that one, the sender would time out. Repeat the last
        // ACK instead, but only once the receiver has been silent for the
        // minimum RTO: earlier, the duplicate is part of a go-back-N burst
        // that the ACKs already on their way answer, and duplicate ACKs would
        // trigger yet another go-back-N round.
        if occupies && self.device.tx.len() == queued {
            if let Some(&id) = self.receivers.get(&key) {
                if let Some((ack, packet, sent_at)) = &mut self.flows[id].last_ack {
                    if !seq_lt(*ack, end) && now >= *sent_at + REPEAT_ACK_AFTER {
                        self.device.tx.push(packet.clone());
                        *sent_at = now;
                    }
                }
            }
        }
        self.update_flows(now, Cause::Ingress { rst });
    }

    /// Runs the stack at `now` (starts flows that are due, fills send buffers,
    /// drains receive buffers, fires timers) and appends the IPv4 packets it
    /// sends to `out`, in order. A sender's whole window may leave at once:
    /// pacing them onto the wire is the host's and link's job.
    pub fn poll(&mut self, now: Nanos, out: &mut Vec<Vec<u8>>) {
        let now = self.advance(now);
        let instant = to_instant(now);
        self.run_retransmit_timers(now);
        let mut rounds = 0;
        loop {
            self.update_flows(now, Cause::Poll);
            while rounds < MAX_EGRESS_ROUNDS {
                rounds += 1;
                match self
                    .iface
                    .poll_egress(instant, &mut self.device, &mut self.sockets)
                {
                    PollResult::SocketStateChanged => {}
                    PollResult::None => break,
                }
            }
            // Sending can time a connection out (smoltcp checks then), and a
            // flow reaching its end may close its socket, which has a FIN to
            // send: look again until nothing moves.
            let changed = self.update_flows(now, Cause::Poll);
            if !changed || rounds >= MAX_EGRESS_ROUNDS {
                break;
            }
        }
        let sent = std::mem::take(&mut self.device.tx);
        for packet in sent {
            if self.observe_sent(now, &packet) {
                out.push(packet);
            }
        }
        for flow in &mut self.flows {
            let rtx = &mut flow.rtx;
            if rtx.expired_now && !rtx.retransmitted {
                rtx.fallback = true;
            }
            rtx.expired_now = false;
        }
        self.settled_at = Some(now);
    }

    /// When the stack next needs [`TcpStack::poll`]: `now` if it has packets to
    /// hand out, else the earliest of smoltcp's timers (retransmission, delayed
    /// ACK, timeout, TIME-WAIT) and the start of a flow not yet started, in ns
    /// rounded up to the microsecond. `None` if nothing is pending. Never
    /// returns a time at or before the last poll unless something happened
    /// since, so a driver loop always advances.
    pub fn poll_at(&mut self, now: Nanos) -> Option<Nanos> {
        let now = now.max(self.now);
        if !self.device.tx.is_empty() {
            return Some(now);
        }
        let mut next = self
            .iface
            .poll_at(to_instant(now), &self.sockets)
            .map(from_instant);
        for (flow, stats) in self.flows.iter().zip(&self.stats) {
            if stats.outcome != Outcome::Open {
                continue;
            }
            let due = if flow.handle.is_none() {
                Some(stats.start)
            } else {
                // The stack's own retransmission timer and, once smoltcp's
                // idle timeout was fooled by replayed ACKs, the real one.
                let timeout = flow
                    .rtx
                    .replayed
                    .then_some(self.config.timeout)
                    .flatten()
                    .map(|t| flow.rtx.last_heard.saturating_add(t));
                [flow.rtx.deadline, timeout].into_iter().flatten().min()
            };
            if let Some(due) = due {
                next = Some(next.map_or(due, |t| t.min(due)));
            }
        }
        let next = next?.max(now);
        match self.settled_at {
            // smoltcp still says "now" right after a poll at this time that had
            // nothing left to do: poll at its next clock tick instead of
            // letting the driver spin.
            Some(polled) if next <= polled => Some((polled / 1_000 + 1) * 1_000),
            _ => Some(next),
        }
    }

    /// Per-flow statistics, indexed by [`FlowId`].
    pub fn flows(&self) -> &[FlowStats] {
        &self.stats
    }

    /// Packets dropped because they were malformed.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// Well-formed packets dropped because they were not TCP addressed to this
    /// host (including IPv4 fragments, which the stack never produces).
    pub fn ignored(&self) -> u64 {
        self.ignored
    }

    /// Feeds one of our own outgoing segments to its sender's congestion window,
    /// which learns the initial sequence number from the SYN and sees losses as
    /// retransmissions, and to its retransmission timer. Returns whether the
    /// segment goes out: a retransmission by smoltcp's stale timer does not
    /// (see "Retransmission timer" in the module documentation).
    fn observe_sent(&mut self, now: Nanos, packet: &[u8]) -> bool {
        let Ok(ip) = Ipv4Packet::new_checked(packet) else {
            return true;
        };
        let Ok(tcp) = TcpPacket::new_checked(ip.payload()) else {
            return true;
        };
        let key = (tcp.src_port(), ip.dst_addr(), tcp.dst_port());
        if let Some(&id) = self.receivers.get(&key) {
            if tcp.payload().is_empty() && tcp.ack() && !tcp.syn() && !tcp.rst() {
                self.flows[id].last_ack = Some((tcp.ack_number().0 as u32, packet.to_vec(), now));
            }
        }
        let Some(&id) = self.senders.get(&key) else {
            return true;
        };
        let seq_len = tcp.payload().len() + usize::from(tcp.syn()) + usize::from(tcp.fin());
        let seq = tcp.seq_number().0 as u32;
        let open = self.stats[id].outcome == Outcome::Open;
        let flow = &mut self.flows[id];
        let Some(window) = flow.window.as_mut() else {
            return true;
        };
        if open && !flow.rtx.allow && window.is_stale_retransmission(seq, seq_len, tcp.syn()) {
            return false;
        }
        if window.on_sent(now, seq, seq_len, tcp.syn()) {
            self.stats[id].segments_retransmitted += 1;
            flow.rtx.retransmitted = true;
        } else if open && seq_len > 0 && !tcp.syn() && flow.rtx.deadline.is_none() {
            // New data with the timer stopped: start it (RFC 6298, 5.1).
            flow.rtx.deadline = window.rto().map(|rto| now.saturating_add(rto));
        }
        true
    }

    /// A packet from the peer of sender `id` arrived: it is alive, and a pure
    /// ACK may be a duplicate and is the one to replay.
    fn heard_by_sender(
        &mut self,
        id: FlowId,
        now: Nanos,
        packet: &[u8],
        ack: Option<u32>,
        pure_ack: bool,
    ) {
        let flow = &mut self.flows[id];
        let outstanding_below = |ack: u32| {
            flow.window
                .as_ref()
                .and_then(|w| w.high)
                .is_some_and(|high| seq_lt(ack, high))
        };
        let rtx = &mut flow.rtx;
        rtx.last_heard = now;
        rtx.replayed = false;
        if let Some(ack) = ack {
            if pure_ack && rtx.last_ack_number == Some(ack) && outstanding_below(ack) {
                rtx.dup_acks = rtx.dup_acks.saturating_add(1);
            } else if rtx.last_ack_number != Some(ack) {
                rtx.last_ack_number = Some(ack);
                rtx.dup_acks = 0;
            }
        }
        if pure_ack {
            let buf = rtx.peer_ack.get_or_insert_with(Vec::new);
            buf.clear();
            buf.extend_from_slice(packet);
        } else {
            rtx.peer_ack = None;
        }
    }

    /// Runs the senders' own retransmission timers at the start of a poll:
    /// decides whether smoltcp's retransmissions may go out in this poll, and
    /// on expiry makes smoltcp retransmit (and enforces the idle timeout that
    /// the replayed ACKs hide from smoltcp).
    fn run_retransmit_timers(&mut self, now: Nanos) {
        for id in 0..self.flows.len() {
            if self.stats[id].role != Role::Sender {
                continue;
            }
            let open = self.stats[id].outcome == Outcome::Open;
            let flow = &mut self.flows[id];
            let Some(handle) = flow.handle else {
                continue;
            };
            let rtx = &mut flow.rtx;
            if !open {
                rtx.deadline = None;
                rtx.allow = true;
                continue;
            }
            rtx.expired_now = false;
            rtx.retransmitted = false;
            let socket = self.sockets.get_mut::<tcp::Socket>(handle);
            if rtx.replayed {
                if let Some(timeout) = self.config.timeout {
                    if now >= rtx.last_heard.saturating_add(timeout) {
                        // What smoltcp would have done had it not been fooled:
                        // abort, with an RST; `update_sender` sees it closed.
                        socket.abort();
                        rtx.deadline = None;
                        continue;
                    }
                }
            }
            let expired = rtx.deadline.is_some_and(|d| now >= d);
            rtx.allow = rtx.deadline.is_none()
                || expired
                || rtx.fallback
                || rtx.dup_acks >= DUP_ACK_THRESHOLD;
            if !expired {
                continue;
            }
            // Expired: back off (RFC 6298, 5.5 and 5.6) and make smoltcp go back
            // to the oldest unacknowledged byte.
            rtx.backoff = rtx.backoff.saturating_add(1);
            let rto = flow
                .window
                .as_ref()
                .and_then(Window::rto)
                .unwrap_or(MIN_RTO);
            rtx.deadline = Some(now.saturating_add(backed_off(rto, rtx.backoff)));
            rtx.expired_now = true;
            let eligible = matches!(
                socket.state(),
                tcp::State::Established | tcp::State::FinWait1
            );
            let replay = rtx
                .peer_ack
                .as_deref()
                .filter(|_| eligible)
                .and_then(|ack| {
                    // First a copy with another window: smoltcp takes it for a
                    // window update and resets its duplicate count (it may be past
                    // three already, from the peer's own duplicates); then the ACK
                    // itself, which puts the window back; then three duplicates.
                    let variant = with_other_window(ack)?;
                    let mut packets = vec![variant];
                    packets.extend(std::iter::repeat_n(
                        ack.to_vec(),
                        1 + DUP_ACK_THRESHOLD as usize,
                    ));
                    Some(packets)
                });
            if let Some(packets) = replay {
                for packet in packets {
                    self.device.rx.push_back(packet);
                    let _ = self.iface.poll_ingress_single(
                        to_instant(now),
                        &mut self.device,
                        &mut self.sockets,
                    );
                }
                self.device.rx.clear();
                rtx.replayed = true;
            }
        }
    }

    /// Moves the stack's clock to `now` (never backwards) and returns it.
    fn advance(&mut self, now: Nanos) -> Nanos {
        self.now = self.now.max(now);
        self.now
    }

    /// The next local port not used by a flow of this stack.
    fn ephemeral_port(&mut self) -> u16 {
        for _ in 0..=(u16::MAX - 49_152) {
            let port = self.next_ephemeral;
            self.next_ephemeral = if port == u16::MAX { 49_152 } else { port + 1 };
            if !self.stats.iter().any(|s| s.local.1 == port) {
                return port;
            }
        }
        // Every ephemeral port taken: reuse one; smoltcp matches the full
        // 4-tuple, so this still works towards distinct peers.
        self.next_ephemeral
    }

    fn new_socket(&self, send: usize, recv: usize) -> tcp::Socket<'static> {
        let mut socket = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0u8; recv]),
            tcp::SocketBuffer::new(vec![0u8; send]),
        );
        // The stack runs the congestion window itself (module documentation).
        socket.set_congestion_control(tcp::CongestionControl::None);
        socket.set_timeout(self.config.timeout.map(to_duration));
        // Keep-alive stays off (smoltcp's default): a failure must show up only
        // through the peer's RST or the timeout, as the brief for experiments
        // requires.
        socket.set_ack_delay(self.config.ack_delay.map(to_duration));
        socket
    }

    /// Application logic of every flow, after smoltcp ran. Returns whether
    /// anything changed that smoltcp may need to act on.
    fn update_flows(&mut self, now: Nanos, cause: Cause) -> bool {
        let mut changed = false;
        for id in 0..self.flows.len() {
            changed |= match self.stats[id].role {
                Role::Sender => self.update_sender(id, now, cause),
                Role::Receiver => self.update_receiver(id, now, cause),
            };
        }
        changed
    }

    fn update_sender(&mut self, id: FlowId, now: Nanos, cause: Cause) -> bool {
        let bin = self.config.goodput_bin;
        let mut changed = false;
        if self.flows[id].handle.is_none() {
            let stats = &self.stats[id];
            if stats.outcome != Outcome::Open || now < stats.start {
                return false;
            }
            // Time to start: the socket (and its buffers) exist from now on.
            let mut socket = self.new_socket(self.config.send_buffer, UNUSED_DIRECTION_BUFFER);
            let (addr, port) = self.flows[id].remote.unwrap_or((Ipv4Addr::UNSPECIFIED, 0));
            let connected = socket.connect(
                self.iface.context(),
                (IpAddress::Ipv4(addr), port),
                stats.local.1,
            );
            if connected.is_err() {
                let stats = &mut self.stats[id];
                stats.outcome = Outcome::Failed;
                stats.ended_at = Some(now);
                return false;
            }
            self.flows[id].handle = Some(self.sockets.add(socket));
            self.senders.insert((stats.local.1, addr, port), id);
            changed = true;
        }
        let flow = &mut self.flows[id];
        let stats = &mut self.stats[id];
        let Some(handle) = flow.handle else {
            return changed;
        };
        let socket = self.sockets.get_mut::<tcp::Socket>(handle);
        let state = socket.state();
        if stats.outcome != Outcome::Open {
            return changed;
        }

        if state == tcp::State::Closed {
            // Aborted: by an RST from the peer, or by smoltcp's timeout. (A
            // graceful close only reaches Closed after all data was acked, which
            // ended the flow as Completed already; smoltcp clears the send
            // buffer on reset, so bytes are not counted here.)
            stats.outcome = match cause {
                Cause::Ingress { rst: true } => Outcome::Reset,
                _ => Outcome::TimedOut,
            };
            stats.ended_at = Some(now);
            return changed;
        }
        if stats.established_at.is_none()
            && !matches!(state, tcp::State::SynSent | tcp::State::SynReceived)
        {
            stats.established_at = Some(now);
        }

        // Bytes acknowledged since last time = bytes that left the send buffer.
        let acked_total = flow.enqueued - socket.send_queue() as u64;
        let newly_acked = acked_total - stats.bytes_sent_acked;
        if newly_acked > 0 {
            stats.bytes_sent_acked = acked_total;
            add_to_bin(&mut stats.goodput, now, bin, newly_acked);
            if let Some(window) = flow.window.as_mut() {
                window.on_ack(now, acked_total, newly_acked);
                stats.min_rtt = window.min_rtt;
                // New data acknowledged: restart the retransmission timer, or
                // stop it if nothing is outstanding (RFC 6298, 5.2 and 5.3).
                let rtx = &mut flow.rtx;
                rtx.backoff = 0;
                rtx.fallback = false;
                rtx.deadline = if window.outstanding(acked_total) {
                    window.rto().map(|rto| now.saturating_add(rto))
                } else {
                    None
                };
            }
        }

        // Keep the send buffer filled up to the congestion window: smoltcp
        // sends only what is in the buffer, so this bounds the bytes in flight.
        if !flow.closing && socket.may_send() {
            let (limit, mss) = flow
                .window
                .as_ref()
                .map_or((usize::MAX, 1), |w| (w.limit(), w.mss));
            for _ in 0..2 {
                // Twice: the free space of a ring buffer may wrap around.
                let remaining = stats
                    .bytes_to_send
                    .map_or(u64::MAX, |total| total - flow.enqueued);
                let room = limit.saturating_sub(socket.send_queue());
                // Whole segments only (except the tail), so the window never
                // makes smoltcp send runts.
                if remaining == 0 || (room < mss && remaining > room as u64) {
                    break;
                }
                let allowed = usize::try_from(remaining).unwrap_or(usize::MAX).min(room);
                let offset = flow.enqueued;
                let written = socket
                    .send(|buf| {
                        let n = buf.len().min(allowed);
                        fill_pattern(offset, &mut buf[..n]);
                        (n, n)
                    })
                    .unwrap_or(0);
                if written == 0 {
                    break;
                }
                flow.enqueued += written as u64;
                changed = true;
            }
            if stats.bytes_to_send == Some(flow.enqueued) {
                // All data queued: send the FIN right behind it.
                socket.close();
                flow.closing = true;
                changed = true;
            }
        }

        if flow.closing && Some(stats.bytes_sent_acked) == stats.bytes_to_send {
            stats.outcome = Outcome::Completed;
            stats.ended_at = Some(now);
            // The flow is done; the FIN exchange may go on, but a late timeout
            // must not send the peer a stray RST.
            socket.set_timeout(None);
        }
        changed
    }

    fn update_receiver(&mut self, id: FlowId, now: Nanos, cause: Cause) -> bool {
        let bin = self.config.goodput_bin;
        let flow = &mut self.flows[id];
        let stats = &mut self.stats[id];
        let Some(handle) = flow.handle else {
            return false;
        };
        if stats.outcome != Outcome::Open {
            return false;
        }
        let socket = self.sockets.get_mut::<tcp::Socket>(handle);
        let state = socket.state();
        let mut changed = false;

        if state == tcp::State::Closed {
            stats.outcome = match cause {
                Cause::Ingress { rst: true } => Outcome::Reset,
                _ => Outcome::TimedOut,
            };
            stats.ended_at = Some(now);
            return false;
        }
        if matches!(state, tcp::State::Listen | tcp::State::SynReceived) {
            return false;
        }
        if stats.established_at.is_none() {
            stats.established_at = Some(now);
            stats.remote = socket.remote_endpoint().and_then(|ep| match ep.addr {
                IpAddress::Ipv4(addr) => Some((addr, ep.port)),
                #[allow(unreachable_patterns)]
                _ => None,
            });
            if let Some((addr, port)) = stats.remote {
                self.receivers.insert((stats.local.1, addr, port), id);
            }
        }

        // Deliver everything received, checking the pattern.
        let mut delivered = 0u64;
        for _ in 0..2 {
            // Twice: the data in a ring buffer may wrap around.
            let offset = stats.bytes_received + delivered;
            let got = socket
                .recv(|buf| (buf.len(), (buf.len(), pattern_errors(offset, buf))))
                .unwrap_or((0, 0));
            if got.0 == 0 {
                break;
            }
            delivered += got.0 as u64;
            stats.payload_errors += got.1;
        }
        if delivered > 0 {
            stats.bytes_received += delivered;
            add_to_bin(&mut stats.goodput, now, bin, delivered);
            // The window opened: smoltcp may want to tell the peer.
            changed = true;
        }

        // The peer's FIN arrived and everything before it was delivered.
        let fin_received = matches!(
            state,
            tcp::State::CloseWait
                | tcp::State::LastAck
                | tcp::State::Closing
                | tcp::State::TimeWait
        );
        if fin_received && socket.recv_queue() == 0 {
            stats.outcome = Outcome::Completed;
            stats.ended_at = Some(now);
            if !flow.closing {
                socket.close();
                flow.closing = true;
                changed = true;
            }
            socket.set_timeout(None);
        }
        changed
    }
}

/// `a < b` in wrapping 32-bit sequence space.
fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// A copy of an IPv4/TCP packet with another TCP window (checksum fixed), or
/// `None` if it does not parse.
fn with_other_window(packet: &[u8]) -> Option<Vec<u8>> {
    let mut copy = packet.to_vec();
    let ip = Ipv4Packet::new_checked(&copy[..]).ok()?;
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let header = usize::from(ip.header_len());
    let mut tcp = TcpPacket::new_checked(copy.get_mut(header..)?).ok()?;
    tcp.set_window_len(tcp.window_len() ^ 1);
    tcp.fill_checksum(&IpAddress::Ipv4(src), &IpAddress::Ipv4(dst));
    Some(copy)
}

/// `rto` doubled `backoff` times, at most [`MAX_RTO`].
fn backed_off(rto: Nanos, backoff: u32) -> Nanos {
    rto.saturating_mul(1u64 << backoff.min(32)).min(MAX_RTO)
}

/// Adds `bytes` to the goodput bin containing `now`.
fn add_to_bin(series: &mut Vec<u64>, now: Nanos, bin: Nanos, bytes: u64) {
    let index = usize::try_from(now / bin).unwrap_or(usize::MAX);
    if index >= series.len() {
        // One u64 per bin up to now: grows with run length only.
        series.resize(index.saturating_add(1), 0);
    }
    if let Some(slot) = series.get_mut(index) {
        *slot += bytes;
    }
}

/// What a received packet is, decided before smoltcp sees it (smoltcp drops bad
/// packets silently; we want them counted).
enum Classified {
    Malformed,
    Ignored,
    Tcp {
        rst: bool,
        /// (our port, peer address, peer port): the flow key.
        key: (u16, Ipv4Addr, u16),
        /// Sequence number just past the segment (payload and FIN).
        end: u32,
        /// Whether it carries data or a FIN.
        occupies: bool,
        /// Its acknowledgement number, if it has one.
        ack: Option<u32>,
        /// Whether it is a pure ACK: no data, no SYN, FIN or RST.
        pure_ack: bool,
    },
}

fn classify(local: Ipv4Addr, packet: &[u8]) -> Classified {
    let checksums = ChecksumCapabilities::default();
    let Ok(ip) = Ipv4Packet::new_checked(packet) else {
        return Classified::Malformed;
    };
    if ip.version() != 4 || !ip.verify_checksum() {
        return Classified::Malformed;
    }
    if ip.more_frags() || ip.frag_offset() != 0 {
        return Classified::Ignored;
    }
    let Ok(ip_repr) = Ipv4Repr::parse(&ip, &checksums) else {
        return Classified::Malformed;
    };
    if ip_repr.dst_addr != local || ip_repr.next_header != IpProtocol::Tcp {
        return Classified::Ignored;
    }
    let Ok(tcp) = TcpPacket::new_checked(ip.payload()) else {
        return Classified::Malformed;
    };
    let src = IpAddress::Ipv4(ip_repr.src_addr);
    let dst = IpAddress::Ipv4(ip_repr.dst_addr);
    match TcpRepr::parse(&tcp, &src, &dst, &checksums) {
        Ok(repr) => {
            let fin = usize::from(repr.control == TcpControl::Fin);
            let len = repr.payload.len() + fin;
            Classified::Tcp {
                rst: repr.control == TcpControl::Rst,
                key: (repr.dst_port, ip_repr.src_addr, repr.src_port),
                end: (repr.seq_number + len).0 as u32,
                occupies: len > 0 && repr.control != TcpControl::Syn,
                ack: repr.ack_number.map(|a| a.0 as u32),
                pure_ack: repr.ack_number.is_some()
                    && repr.payload.is_empty()
                    && matches!(repr.control, TcpControl::None | TcpControl::Psh),
            }
        }
        Err(_) => Classified::Malformed,
    }
}

#[cfg(test)]
mod tests;
