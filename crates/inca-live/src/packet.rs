//! A device port attached to a Linux network interface with an AF_PACKET
//! raw socket: every frame that arrives on the interface goes to the
//! device, every frame the device sends goes out of the interface as is.
//! This is how a switch process sits between network namespaces (one veth
//! end per port), so real TCP stacks and tools run through it.
//!
//! [`PacketPort::open`] binds a `SOCK_RAW`/`ETH_P_ALL` socket to the
//! interface, non-blocking, in promiscuous mode (`PACKET_MR_PROMISC`
//! membership, dropped by the kernel when the socket closes). It needs
//! CAP_NET_RAW (root); without it `open` says so.
//!
//! A packet socket also sees the frames sent out of its interface by
//! other sockets (the host's own stack, another capture tool injecting;
//! never its own: the kernel does not loop those back). They did not
//! arrive on the link, so the port asks the kernel not to deliver them
//! (`PACKET_IGNORE_OUTGOING`, Linux 4.20) and, whatever the kernel, drops
//! every frame whose `sll_pkttype` is `PACKET_OUTGOING` (not counted: they
//! are not input). Frames longer than [`MAX_FRAME`] (or shorter than an
//! Ethernet header) are counted as `rx_malformed` and dropped; frames are
//! received and sent in batches with `recvmmsg`/`sendmmsg`.
//!
//! The port reports its link state ([`Port::link_up`]) from the
//! interface's operstate in sysfs, so a runner can tell the device when the
//! cable is "pulled" (the peer of a veth set down, the interface deleted).
//!
//! The port sees frames as the kernel hands them over: on a veth whose
//! other end belongs to a local TCP stack, segmentation and checksum
//! offloads must be off (`ethtool -K <if> tx off tso off gso off gro off`)
//! or the port gets unfinished checksums and super-frames far beyond
//! [`MAX_FRAME`] (which it drops).

use std::ffi::CString;
use std::fmt;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;

use crate::port::{Port, PortStats, MAX_FRAME};
use crate::udp::{grow_socket_buffers, set_int_option, MsgBatch};

// From <linux/if_packet.h> (not all exported by the libc crate).
/// `setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, struct packet_mreq)`.
const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
/// Membership type: promiscuous mode.
const PACKET_MR_PROMISC: libc::c_ushort = 1;
/// `setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, int)` (Linux 4.20+).
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// `sll_pkttype` of a frame sent out of the interface (by anyone).
const PACKET_OUTGOING: libc::c_uchar = 4;

/// `struct packet_mreq` from `<linux/if_packet.h>`.
#[repr(C)]
struct PacketMreq {
    mr_ifindex: libc::c_int,
    mr_type: libc::c_ushort,
    mr_alen: libc::c_ushort,
    mr_address: [libc::c_uchar; 8],
}

/// Why [`PacketPort::open`] failed.
#[derive(Debug, thiserror::Error)]
pub enum PacketError {
    /// Not an interface name (empty, 16 bytes or more, or with a NUL).
    #[error("{0:?} is not a valid interface name (1 to 15 bytes, no NUL)")]
    BadName(String),
    /// No interface has this name.
    #[error("no network interface named {0:?}")]
    NoSuchInterface(String),
    /// The process lacks CAP_NET_RAW.
    #[error(
        "opening an AF_PACKET socket on {interface:?} needs CAP_NET_RAW (run as root): {source}"
    )]
    NotPermitted {
        /// The interface.
        interface: String,
        /// What the kernel said.
        source: io::Error,
    },
    /// A system call failed.
    #[error("AF_PACKET port on {interface:?}: {what}: {source}")]
    Io {
        /// The interface.
        interface: String,
        /// Which step failed.
        what: &'static str,
        /// What the kernel said.
        source: io::Error,
    },
}

impl From<PacketError> for io::Error {
    fn from(e: PacketError) -> io::Error {
        let kind = match &e {
            PacketError::BadName(_) => io::ErrorKind::InvalidInput,
            PacketError::NoSuchInterface(_) => io::ErrorKind::NotFound,
            PacketError::NotPermitted { .. } => io::ErrorKind::PermissionDenied,
            PacketError::Io { source, .. } => source.kind(),
        };
        io::Error::new(kind, e)
    }
}

/// A device port on a Linux interface. See the module documentation.
pub struct PacketPort {
    fd: OwnedFd,
    interface: String,
    ifindex: u32,
    rx: MsgBatch,
    tx: MsgBatch,
    stats: PortStats,
    /// Whether the kernel filters outgoing frames for us.
    kernel_ignores_outgoing: bool,
    /// Outgoing frames seen and dropped here (kernels without
    /// `PACKET_IGNORE_OUTGOING`).
    outgoing_skipped: u64,
}

impl fmt::Debug for PacketPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketPort")
            .field("interface", &self.interface)
            .field("ifindex", &self.ifindex)
            .field("fd", &self.fd)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl PacketPort {
    /// Opens a port on the interface `interface` (say `"veth0"`). Needs
    /// CAP_NET_RAW.
    pub fn open(interface: &str) -> Result<PacketPort, PacketError> {
        let bad_name = || PacketError::BadName(interface.to_string());
        if interface.is_empty() || interface.len() >= libc::IFNAMSIZ {
            return Err(bad_name());
        }
        let cname = CString::new(interface).map_err(|_| bad_name())?;
        // SAFETY: `cname` is a live NUL-terminated string; the call only
        // reads it.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(PacketError::NoSuchInterface(interface.to_string()));
        }
        let io_err = |what: &'static str| PacketError::Io {
            interface: interface.to_string(),
            what,
            source: io::Error::last_os_error(),
        };
        // Protocol 0: the socket receives nothing until it is bound to the
        // interface below (else frames of every interface would queue up
        // in between).
        // SAFETY: socket(2) has no memory arguments.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            let source = io::Error::last_os_error();
            return Err(match source.raw_os_error() {
                Some(libc::EPERM | libc::EACCES) => PacketError::NotPermitted {
                    interface: interface.to_string(),
                    source,
                },
                _ => PacketError::Io {
                    interface: interface.to_string(),
                    what: "socket(AF_PACKET, SOCK_RAW)",
                    source,
                },
            });
        }
        // SAFETY: `raw` is a file descriptor just returned by socket(2)
        // and owned by nothing else; OwnedFd closes it on every path.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };

        // SAFETY: all-zero bytes are a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as libc::c_ushort;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex as libc::c_int;
        // SAFETY: `sll` is a live sockaddr_ll and the length passed is its
        // size; bind only reads it.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                ptr::addr_of!(sll).cast(),
                mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io_err("bind to the interface"));
        }

        let mreq = PacketMreq {
            mr_ifindex: ifindex as libc::c_int,
            mr_type: PACKET_MR_PROMISC,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        // SAFETY: `mreq` is a live struct laid out as the kernel's
        // packet_mreq (repr(C)) and the length passed is its size;
        // setsockopt only reads it.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                PACKET_ADD_MEMBERSHIP,
                ptr::addr_of!(mreq).cast(),
                mem::size_of::<PacketMreq>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io_err("promiscuous mode (PACKET_ADD_MEMBERSHIP)"));
        }
        let kernel_ignores_outgoing =
            set_int_option(fd.as_raw_fd(), libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1).is_ok();
        grow_socket_buffers(fd.as_raw_fd());
        Ok(PacketPort {
            fd,
            interface: interface.to_string(),
            ifindex,
            rx: MsgBatch::for_frames(),
            tx: MsgBatch::for_send(None),
            stats: PortStats::default(),
            kernel_ignores_outgoing,
            outgoing_skipped: 0,
        })
    }

    /// The interface name.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// The interface index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Whether the kernel drops outgoing frames before they reach the
    /// socket (`PACKET_IGNORE_OUTGOING`); if not, the port does.
    pub fn kernel_ignores_outgoing(&self) -> bool {
        self.kernel_ignores_outgoing
    }

    /// Outgoing frames the port saw and dropped itself (0 when the kernel
    /// filters them).
    pub fn outgoing_skipped(&self) -> u64 {
        self.outgoing_skipped
    }
}

/// Whether interface `name` has a working link, from its
/// `/sys/class/net/<name>/operstate` (RFC 2863 states): `up` is up, and so
/// is `unknown` (what drivers without carrier reporting, such as loopback or
/// tun, say); `down`, `lowerlayerdown` (a veth whose peer is down),
/// `dormant` and the rest are down, and so is an interface that is gone.
/// [our choice] operstate rather than `carrier`: `carrier` cannot be read
/// while the interface itself is administratively down.
pub fn interface_link_up(name: &str) -> bool {
    let path = std::path::Path::new("/sys/class/net")
        .join(name)
        .join("operstate");
    match std::fs::read_to_string(path) {
        Ok(state) => matches!(state.trim(), "up" | "unknown"),
        Err(_) => false,
    }
}

/// The `sll_pkttype` of a received frame's address, if the kernel wrote a
/// whole `sockaddr_ll`.
fn pkttype(storage: &libc::sockaddr_storage, len: usize) -> Option<libc::c_uchar> {
    if libc::c_int::from(storage.ss_family) != libc::AF_PACKET
        || len < mem::offset_of!(libc::sockaddr_ll, sll_pkttype) + 1
    {
        return None;
    }
    // SAFETY: the family says the storage holds a sockaddr_ll, the kernel
    // wrote at least up to sll_pkttype, sockaddr_storage is large enough
    // and aligned for it, and any bytes are a valid sockaddr_ll.
    let sll = unsafe { &*ptr::addr_of!(*storage).cast::<libc::sockaddr_ll>() };
    Some(sll.sll_pkttype)
}

impl Port for PacketPort {
    fn recv_batch(&mut self, out: &mut Vec<Vec<u8>>, max: usize) -> io::Result<usize> {
        let fd = self.fd.as_raw_fd();
        let mut delivered = 0;
        for _ in 0..max.div_ceil(crate::port::BATCH) {
            let want = (max - delivered).min(crate::port::BATCH);
            if want == 0 {
                break;
            }
            let got = match self.rx.recv(fd, want) {
                Ok(n) => n,
                // The interface went down (or away): the kernel reports it
                // once on the socket. Nothing to read; the device keeps
                // running and frames flow again when the link is back.
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENETDOWN | libc::ENXIO)) => 0,
                Err(e) => return Err(e),
            };
            for i in 0..got {
                let d = self.rx.received(i);
                let (data, truncated) = (d.data, d.truncated);
                if pkttype(d.addr, d.addr_len) == Some(PACKET_OUTGOING) {
                    self.outgoing_skipped += 1;
                    continue;
                }
                if truncated || !(14..=MAX_FRAME).contains(&data.len()) {
                    self.stats.rx_malformed += 1;
                    continue;
                }
                out.push(data.to_vec());
                self.stats.rx_frames += 1;
                delivered += 1;
            }
            if got < want {
                break;
            }
        }
        Ok(delivered)
    }

    fn send_batch(&mut self, frames: &mut Vec<Vec<u8>>) -> io::Result<()> {
        let o = self.tx.send(self.fd.as_raw_fd(), frames, &mut 0);
        frames.clear();
        self.stats.tx_frames += o.sent;
        self.stats.tx_dropped += o.dropped;
        match o.error {
            // The interface vanished or went down: like a cable pulled,
            // frames are lost, the device goes on.
            Some(e) if matches!(e.raw_os_error(), Some(libc::ENODEV)) => Ok(()),
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn describe(&self) -> String {
        format!("af_packet {} (ifindex {})", self.interface, self.ifindex)
    }

    fn link_up(&self) -> Option<bool> {
        Some(interface_link_up(&self.interface))
    }
}
