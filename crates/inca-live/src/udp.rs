//! Point-to-point links over UDP: one Ethernet frame per datagram, between
//! a local socket and one peer address. Unprivileged; works on loopback and
//! across machines.
//!
//! Frames move in batches: one `recvmmsg(2)` takes in up to [`BATCH`]
//! datagrams into buffers allocated once, and one `sendmmsg(2)` sends up
//! to as many frames straight from the device's buffers (no copy).
//! Datagrams from any other address, shorter than an Ethernet header (14
//! bytes) or longer than [`MAX_FRAME`] are counted (`rx_malformed`) and
//! dropped. When the socket will not take more
//! (`EAGAIN`/`ENOBUFS`), the rest of the batch is dropped and counted
//! (`tx_dropped`), as a full NIC queue would; a port never blocks.
//!
//! Where the kernel supports it (Linux 4.18/5.0) a port also uses UDP
//! segmentation offload and receive coalescing ([`UdpPort::set_offload`],
//! on by default): a run of equal-length frames goes down the stack as one
//! `UDP_SEGMENT` message and is split into one datagram per frame at the
//! bottom, and the receiving kernel may hand over several datagrams of one
//! size as one (`UDP_GRO`), which the port splits again. The wire format
//! does not change (one frame per datagram), but the per-datagram cost of
//! the stack is paid once per run: on loopback this is what carries more
//! than a million frames per second. Coalesced datagrams need 64 KiB
//! receive buffers ([`BATCH`] of them, 4 MiB of address space per port,
//! touched only as used).
//!
//! `MsgBatch` — the `mmsghdr` arrays and buffers — is shared with the
//! AF_PACKET port ([`crate::packet`]).

use std::io;
use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::ptr;

use crate::port::{Port, PortStats, BATCH, MAX_FRAME};

/// Length of one receive buffer: one byte more than the largest frame, so
/// that an oversize datagram shows as such even without `MSG_TRUNC`.
const RX_BUF: usize = MAX_FRAME + 1;

/// Socket buffer size a port asks for (send and receive), so that a burst
/// of a few thousand frames does not overflow the queue while the device
/// is busy. The kernel caps it at `net.core.{r,w}mem_max` (unless the
/// process may override that limit, as root can).
pub const SOCKET_BUFFER: usize = 4 << 20;

/// What one batched send did.
#[derive(Debug, Default)]
pub(crate) struct SendOutcome {
    /// Frames the kernel took.
    pub sent: u64,
    /// Frames dropped (queue full, refused, oversize).
    pub dropped: u64,
    /// An error that is not about one frame or a full queue (bad socket,
    /// say); the frames after it were dropped and counted.
    pub error: Option<io::Error>,
}

/// How a failed `sendmmsg` is handled.
enum SendFailure {
    /// Interrupted by a signal: try again.
    Retry,
    /// The queue is full: drop the rest.
    Full,
    /// The first frame of the call was refused (too big for the link, no
    /// route, refused by the peer or a firewall): drop that one, go on.
    OneFrame,
    /// Something is wrong with the socket itself.
    Fatal,
}

fn classify_send_error(e: &io::Error) -> SendFailure {
    match e.raw_os_error() {
        Some(libc::EINTR) => SendFailure::Retry,
        Some(libc::EAGAIN | libc::ENOBUFS) => SendFailure::Full,
        Some(
            libc::ECONNREFUSED
            | libc::EMSGSIZE
            | libc::EINVAL
            | libc::ENETUNREACH
            | libc::EHOSTUNREACH
            | libc::ENETDOWN
            | libc::EHOSTDOWN
            | libc::EPERM
            | libc::EACCES
            | libc::EADDRNOTAVAIL
            | libc::ENXIO,
        ) => SendFailure::OneFrame,
        _ => SendFailure::Fatal,
    }
}

/// `UDP_SEGMENT` and `UDP_GRO` from `<linux/udp.h>` (level `SOL_UDP`).
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;

/// Most datagrams one segmentation-offload send carries (the kernel's
/// `UDP_MAX_SEGMENTS` is 64 on older kernels, 128 on newer).
const GSO_MAX_SEGMENTS: usize = 64;
/// Most payload bytes of one segmentation-offload send (below the 65,507
/// a UDP datagram can carry over IPv4).
const GSO_MAX_BYTES: usize = 65_000;
/// Receive buffer length when the kernel may coalesce datagrams (GRO):
/// the largest coalesced datagram.
const GRO_BUF: usize = 1 << 16;
/// Most iovecs one `sendmmsg` call uses (frames sent in one call).
const TX_IOVS: usize = BATCH * 16;
/// Bytes of control data per message: one cmsghdr and an int, aligned.
const CTRL_WORDS: usize = 4;

/// `CMSG_ALIGN`: rounds up to the alignment of `size_t`.
const fn cmsg_align(n: usize) -> usize {
    (n + mem::size_of::<usize>() - 1) & !(mem::size_of::<usize>() - 1)
}

/// One received datagram, as [`MsgBatch::received`] sees it.
pub(crate) struct Received<'a> {
    /// Its bytes (at most the slot length).
    pub data: &'a [u8],
    /// Longer than the slot: cut.
    pub truncated: bool,
    /// Its source address and the length the kernel wrote.
    pub addr: &'a libc::sockaddr_storage,
    pub addr_len: usize,
    /// With GRO: the kernel coalesced datagrams of this size (the last may
    /// be shorter) into `data`.
    pub segment: Option<usize>,
}

/// Preallocated `mmsghdr`/`iovec`/address/control arrays for
/// `recvmmsg`/`sendmmsg` (and, for receiving, [`BATCH`] buffers).
pub(crate) struct MsgBatch {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    /// Source addresses of received datagrams.
    addrs: Vec<libc::sockaddr_storage>,
    /// Control data (cmsg) of each message, u64 words for alignment.
    ctrl: Vec<[u64; CTRL_WORDS]>,
    /// Destination of every sent datagram (None: the socket's own, as for
    /// a bound packet socket).
    dest: Option<(Box<libc::sockaddr_storage>, libc::socklen_t)>,
    /// Receive buffers, `slot` bytes each (empty for a send-only batch).
    bufs: Vec<u8>,
    slot: usize,
    /// Receive: ask for control data (the GRO segment size).
    want_ctrl: bool,
    /// Send: index of the first frame of each message and its frame count.
    first: Vec<usize>,
    segs: Vec<usize>,
}

// SAFETY: the raw pointers inside `hdrs` and `iovs` are only ever written
// by this type, right before the system call that reads them, and point
// into heap memory the batch owns (`addrs`, `ctrl`, `dest`, `bufs`, `iovs`,
// which move with it and are never resized) or into frames borrowed for
// the duration of one `send` call. No Rust code dereferences them, so
// moving the batch to another thread (with the buffers it owns) is sound.
unsafe impl Send for MsgBatch {}

impl MsgBatch {
    /// A batch for receiving into its own buffers of `slot` bytes
    /// (`MAX_FRAME + 1`, or [`GRO_BUF`] when the kernel may coalesce), with
    /// control data if `want_ctrl`.
    pub(crate) fn for_recv(slot: usize, want_ctrl: bool) -> MsgBatch {
        let mut b = MsgBatch::empty(None, BATCH);
        b.slot = slot.max(1);
        b.bufs = vec![0; BATCH * b.slot];
        b.want_ctrl = want_ctrl;
        b
    }

    /// A batch for receiving plain frames (no coalescing).
    pub(crate) fn for_frames() -> MsgBatch {
        MsgBatch::for_recv(RX_BUF, false)
    }

    /// A batch for sending to `dest` (None: wherever the socket is bound
    /// or connected).
    pub(crate) fn for_send(dest: Option<(libc::sockaddr_storage, libc::socklen_t)>) -> MsgBatch {
        MsgBatch::empty(dest, TX_IOVS)
    }

    fn empty(dest: Option<(libc::sockaddr_storage, libc::socklen_t)>, iovs: usize) -> MsgBatch {
        // SAFETY: mmsghdr, iovec and sockaddr_storage are plain C structs
        // (integers and raw pointers) for which all-zero bytes are a valid
        // value (null pointers, zero lengths).
        let (hdr, iov, addr) = unsafe {
            (
                mem::zeroed::<libc::mmsghdr>(),
                mem::zeroed::<libc::iovec>(),
                mem::zeroed::<libc::sockaddr_storage>(),
            )
        };
        MsgBatch {
            hdrs: vec![hdr; BATCH],
            iovs: vec![iov; iovs.max(BATCH)],
            addrs: vec![addr; BATCH],
            ctrl: vec![[0; CTRL_WORDS]; BATCH],
            dest: dest.map(|(a, l)| (Box::new(a), l)),
            bufs: Vec::new(),
            slot: 0,
            want_ctrl: false,
            first: vec![0; BATCH],
            segs: vec![0; BATCH],
        }
    }

    /// Receives up to `max` (at most [`BATCH`]) datagrams without
    /// blocking; returns how many (0 when none is waiting). Read them with
    /// [`MsgBatch::received`].
    pub(crate) fn recv(&mut self, fd: RawFd, max: usize) -> io::Result<usize> {
        let n = max.min(BATCH).min(self.bufs.len() / self.slot.max(1));
        if n == 0 {
            return Ok(0);
        }
        for (i, buf) in self.bufs.chunks_exact_mut(self.slot).take(n).enumerate() {
            self.iovs[i] = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            let h = &mut self.hdrs[i];
            h.msg_len = 0;
            h.msg_hdr.msg_name = ptr::addr_of_mut!(self.addrs[i]).cast();
            h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_iov = ptr::addr_of_mut!(self.iovs[i]);
            h.msg_hdr.msg_iovlen = 1;
            if self.want_ctrl {
                h.msg_hdr.msg_control = self.ctrl[i].as_mut_ptr().cast();
                h.msg_hdr.msg_controllen = mem::size_of::<[u64; CTRL_WORDS]>() as _;
            } else {
                h.msg_hdr.msg_control = ptr::null_mut();
                h.msg_hdr.msg_controllen = 0;
            }
            h.msg_hdr.msg_flags = 0;
        }
        loop {
            // SAFETY: `hdrs[..n]` are initialised above: each names one
            // iovec (`iovs[i]`) covering `slot` writable bytes of
            // `self.bufs`, an address buffer (`addrs[i]`) of the length in
            // `msg_namelen` and, if any, a control buffer (`ctrl[i]`) of
            // the length in `msg_controllen`; all are owned by `self`,
            // which is exclusively borrowed for the call, and
            // `n <= hdrs.len()`. The timeout pointer may be null (none).
            let r = unsafe {
                libc::recvmmsg(
                    fd,
                    self.hdrs.as_mut_ptr(),
                    n as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    ptr::null_mut(),
                )
            };
            if r >= 0 {
                return Ok((r as usize).min(n));
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(0),
                _ => return Err(e),
            }
        }
    }

    /// Datagram `i` of the last [`MsgBatch::recv`] (`i` below what it
    /// returned; anything else reads as an empty datagram from nowhere).
    pub(crate) fn received(&self, i: usize) -> Received<'_> {
        let (Some(h), Some(addr)) = (self.hdrs.get(i), self.addrs.get(i)) else {
            return Received {
                data: &[],
                truncated: false,
                addr: &self.addrs[0],
                addr_len: 0,
                segment: None,
            };
        };
        let len = (h.msg_len as usize).min(self.slot);
        let start = i * self.slot;
        let data = self.bufs.get(start..start + len).unwrap_or(&[]);
        let truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        let addr_len =
            (h.msg_hdr.msg_namelen as usize).min(mem::size_of::<libc::sockaddr_storage>());
        let mut segment = None;
        if self.want_ctrl {
            // Walk the control messages the kernel wrote into ctrl[i].
            let ctrl = &self.ctrl[i];
            // (msg_controllen is size_t with glibc, socklen_t with musl.)
            #[allow(clippy::unnecessary_cast)]
            let total = (h.msg_hdr.msg_controllen as usize).min(mem::size_of_val(ctrl));
            let base = ctrl.as_ptr().cast::<u8>();
            let hdr_len = cmsg_align(mem::size_of::<libc::cmsghdr>());
            let mut off = 0;
            while off + hdr_len <= total {
                // SAFETY: `off + hdr_len <= total <= size_of(ctrl)`, so the
                // header lies inside `ctrl`, which is live and borrowed;
                // any bytes are a valid cmsghdr; read_unaligned needs no
                // alignment.
                let c = unsafe { ptr::read_unaligned(base.add(off).cast::<libc::cmsghdr>()) };
                let clen = c.cmsg_len as usize;
                if clen < hdr_len || off + clen > total {
                    break;
                }
                if c.cmsg_level == libc::SOL_UDP
                    && c.cmsg_type == UDP_GRO
                    && clen >= hdr_len + mem::size_of::<libc::c_int>()
                {
                    // SAFETY: the int lies inside this cmsg, inside `ctrl`
                    // (checked just above); any bytes are a valid c_int.
                    let v = unsafe {
                        ptr::read_unaligned(base.add(off + hdr_len).cast::<libc::c_int>())
                    };
                    if v > 0 {
                        segment = Some(v as usize);
                    }
                }
                off += cmsg_align(clen);
            }
        }
        Received {
            data,
            truncated,
            addr,
            addr_len,
            segment,
        }
    }

    /// Sends every frame of `frames` (messages in calls of up to
    /// [`BATCH`]), without blocking. Runs of equal-length frames no longer
    /// than `*gso_limit` bytes go as one segmentation-offload message
    /// (`UDP_SEGMENT`), which the kernel splits into one datagram per
    /// frame; if the kernel refuses that, `*gso_limit` is lowered (to 0:
    /// off) and the frames go again. Frames longer than [`MAX_FRAME`] are
    /// dropped; when the socket's queue is full, the rest are dropped.
    pub(crate) fn send(
        &mut self,
        fd: RawFd,
        frames: &[Vec<u8>],
        gso_limit: &mut usize,
    ) -> SendOutcome {
        let mut out = SendOutcome::default();
        let (name, namelen) = match &mut self.dest {
            Some((a, l)) => (ptr::addr_of_mut!(**a).cast::<libc::c_void>(), *l),
            None => (ptr::null_mut(), 0),
        };
        let hdr_len = cmsg_align(mem::size_of::<libc::cmsghdr>());
        let mut pos = 0;
        'batches: while pos < frames.len() {
            // Fill up to BATCH messages, skipping oversize frames.
            let (mut m, mut iov, mut p) = (0, 0, pos);
            while m < BATCH && p < frames.len() {
                let len = frames[p].len();
                if len > MAX_FRAME {
                    out.dropped += 1;
                    p += 1;
                    continue;
                }
                let mut k = 1;
                if len > 0 && len <= *gso_limit {
                    while k < GSO_MAX_SEGMENTS
                        && p + k < frames.len()
                        && frames[p + k].len() == len
                        && (k + 1) * len <= GSO_MAX_BYTES
                    {
                        k += 1;
                    }
                }
                if iov + k > self.iovs.len() {
                    break;
                }
                for (j, f) in frames[p..p + k].iter().enumerate() {
                    self.iovs[iov + j] = libc::iovec {
                        // The kernel only reads through this pointer.
                        iov_base: f.as_ptr() as *mut libc::c_void,
                        iov_len: f.len(),
                    };
                }
                let h = &mut self.hdrs[m];
                h.msg_len = 0;
                h.msg_hdr.msg_name = name;
                h.msg_hdr.msg_namelen = namelen;
                h.msg_hdr.msg_iov = ptr::addr_of_mut!(self.iovs[iov]);
                h.msg_hdr.msg_iovlen = k as _;
                h.msg_hdr.msg_flags = 0;
                if k > 1 {
                    // One cmsg: SOL_UDP / UDP_SEGMENT / u16 segment size.
                    let c = libc::cmsghdr {
                        cmsg_len: (hdr_len + mem::size_of::<u16>()) as _,
                        cmsg_level: libc::SOL_UDP,
                        cmsg_type: UDP_SEGMENT,
                    };
                    let base = self.ctrl[m].as_mut_ptr().cast::<u8>();
                    // SAFETY: ctrl[m] is 32 bytes, u64-aligned, owned and
                    // exclusively borrowed: the header (16 bytes) and the
                    // u16 after it (at hdr_len = 16) fit; write_unaligned
                    // needs no alignment.
                    unsafe {
                        ptr::write_unaligned(base.cast::<libc::cmsghdr>(), c);
                        ptr::write_unaligned(base.add(hdr_len).cast::<u16>(), len as u16);
                    }
                    h.msg_hdr.msg_control = base.cast();
                    h.msg_hdr.msg_controllen = cmsg_align(hdr_len + mem::size_of::<u16>()) as _;
                } else {
                    h.msg_hdr.msg_control = ptr::null_mut();
                    h.msg_hdr.msg_controllen = 0;
                }
                self.first[m] = p;
                self.segs[m] = k;
                m += 1;
                iov += k;
                p += k;
            }
            let mut done = 0;
            while done < m {
                // SAFETY: `hdrs[done..m]` were initialised above; each names
                // iovecs in `self.iovs` that cover frames of `frames`
                // (borrowed for this whole call, so alive), if any a control
                // buffer in `self.ctrl` of the length given, and, if any,
                // the destination address owned by `self.dest` with its
                // length. `m <= BATCH == hdrs.len()`. sendmmsg only reads
                // them and writes `msg_len`.
                let r = unsafe {
                    libc::sendmmsg(
                        fd,
                        self.hdrs.as_mut_ptr().add(done),
                        (m - done) as libc::c_uint,
                        libc::MSG_DONTWAIT,
                    )
                };
                if r > 0 {
                    let r = (r as usize).min(m - done);
                    out.sent += self.segs[done..done + r].iter().sum::<usize>() as u64;
                    done += r;
                    continue;
                }
                let e = if r == 0 {
                    io::Error::from_raw_os_error(libc::EAGAIN)
                } else {
                    io::Error::last_os_error()
                };
                // Segment too large for the path or too many segments
                // (EINVAL, EMSGSIZE): group only shorter frames from now
                // on. No segmentation offload here at all (a device
                // without checksum offload, an old kernel): off.
                let gso_refused = matches!(
                    e.raw_os_error(),
                    Some(
                        libc::EINVAL
                            | libc::EMSGSIZE
                            | libc::EIO
                            | libc::ENOPROTOOPT
                            | libc::EOPNOTSUPP
                    )
                );
                if self.segs[done] > 1 && gso_refused {
                    let len = frames[self.first[done]].len();
                    *gso_limit = if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EMSGSIZE))
                    {
                        (*gso_limit).min(len.saturating_sub(1))
                    } else {
                        0
                    };
                    // Go again from this message's first frame; oversize
                    // frames after it were counted already and will be
                    // again.
                    let from = self.first[done];
                    out.dropped -= frames[from..p]
                        .iter()
                        .filter(|f| f.len() > MAX_FRAME)
                        .count() as u64;
                    pos = from;
                    continue 'batches;
                }
                match classify_send_error(&e) {
                    SendFailure::Retry => continue,
                    SendFailure::OneFrame => {
                        out.dropped += self.segs[done] as u64;
                        done += 1;
                    }
                    kind @ (SendFailure::Full | SendFailure::Fatal) => {
                        out.dropped += self.segs[done..m].iter().sum::<usize>() as u64
                            + (frames.len() - p) as u64;
                        if matches!(kind, SendFailure::Fatal) {
                            out.error = Some(e);
                        }
                        return out;
                    }
                }
            }
            pos = p;
        }
        out
    }
}

/// Sets a socket option with an integer value.
pub(crate) fn set_int_option(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option value is a live c_int and the length passed is
    // its size; setsockopt only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            ptr::addr_of!(value).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `SO_RCVBUFFORCE`/`SO_SNDBUFFORCE` from `<asm-generic/socket.h>`: as
/// `SO_RCVBUF`/`SO_SNDBUF` but past `rmem_max`/`wmem_max` (CAP_NET_ADMIN).
const SO_SNDBUFFORCE: libc::c_int = 32;
const SO_RCVBUFFORCE: libc::c_int = 33;

/// Asks for [`SOCKET_BUFFER`]-byte send and receive buffers, best effort:
/// past the system limit if the process may, else up to it.
pub(crate) fn grow_socket_buffers(fd: RawFd) {
    let size = SOCKET_BUFFER as libc::c_int;
    for (force, plain) in [
        (SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if set_int_option(fd, libc::SOL_SOCKET, force, size).is_err() {
            let _ = set_int_option(fd, libc::SOL_SOCKET, plain, size);
        }
    }
}

/// `addr` as a C socket address.
fn to_sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero bytes are a valid sockaddr_storage.
    let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned at least
            // as strictly as sockaddr_in (that is its purpose), and the
            // pointer comes from a live exclusive borrow.
            unsafe { ptr::write(ptr::addr_of_mut!(storage).cast::<libc::sockaddr_in>(), sin) };
            mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: all-zero bytes are a valid sockaddr_in6.
            let mut sin6: libc::sockaddr_in6 = unsafe { mem::zeroed() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_addr = libc::in6_addr {
                s6_addr: a.ip().octets(),
            };
            sin6.sin6_scope_id = a.scope_id();
            // SAFETY: as above, for sockaddr_in6.
            unsafe {
                ptr::write(
                    ptr::addr_of_mut!(storage).cast::<libc::sockaddr_in6>(),
                    sin6,
                )
            };
            mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// A C socket address of `len` bytes as a Rust one (None: not IP, or too
/// short).
fn from_sockaddr(storage: &libc::sockaddr_storage, len: usize) -> Option<SocketAddr> {
    match libc::c_int::from(storage.ss_family) {
        libc::AF_INET if len >= mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in, the
            // kernel wrote at least that many bytes, and sockaddr_storage
            // is aligned for it; any bytes are a valid sockaddr_in.
            let sin = unsafe { &*ptr::addr_of!(*storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 if len >= mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &*ptr::addr_of!(*storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Same address and port (an IPv4-mapped IPv6 address equals its IPv4
/// address; flow label and scope are not compared).
fn same_peer(a: SocketAddr, b: SocketAddr) -> bool {
    fn canonical(ip: IpAddr) -> IpAddr {
        match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        }
    }
    a.port() == b.port() && canonical(a.ip()) == canonical(b.ip())
}

/// A device port carried over UDP. See the module documentation.
pub struct UdpPort {
    socket: UdpSocket,
    peer: SocketAddr,
    rx: MsgBatch,
    tx: MsgBatch,
    /// Frames up to this length may be sent with segmentation offload
    /// (0: off).
    gso_limit: usize,
    /// Whether the kernel may hand over coalesced datagrams (GRO).
    gro: bool,
    /// Whether `rx` has buffers for coalesced datagrams.
    rx_gro: bool,
    /// Datagrams of the last recvmmsg not yet handed out (a coalesced one
    /// can hold more frames than a caller asks for): how many were
    /// received, which one is next, and the byte offset in it.
    rx_filled: usize,
    rx_next: usize,
    rx_offset: usize,
    stats: PortStats,
}

impl UdpPort {
    /// Binds `local` and sends to (and accepts only from) `peer`.
    pub fn bind(local: SocketAddr, peer: SocketAddr) -> io::Result<UdpPort> {
        UdpPort::from_socket(UdpSocket::bind(local)?, peer)
    }

    /// A port on an already bound socket (made non-blocking here), sending
    /// to and accepting only from `peer`. Useful when both ends' addresses
    /// must be known before either port exists.
    pub fn from_socket(socket: UdpSocket, peer: SocketAddr) -> io::Result<UdpPort> {
        socket.set_nonblocking(true)?;
        grow_socket_buffers(socket.as_raw_fd());
        let mut port = UdpPort {
            socket,
            peer,
            rx: MsgBatch::for_frames(),
            tx: MsgBatch::for_send(Some(to_sockaddr(peer))),
            gso_limit: 0,
            gro: false,
            rx_gro: false,
            rx_filled: 0,
            rx_next: 0,
            rx_offset: 0,
            stats: PortStats::default(),
        };
        port.set_offload(true);
        Ok(port)
    }

    /// Two ports on 127.0.0.1 (ephemeral ports), each the other's peer:
    /// the two ends of one link.
    pub fn loopback_pair() -> io::Result<(UdpPort, UdpPort)> {
        let a = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
        let b = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
        let (aa, ba) = (a.local_addr()?, b.local_addr()?);
        Ok((UdpPort::from_socket(a, ba)?, UdpPort::from_socket(b, aa)?))
    }

    /// Turns UDP segmentation offload (send: a run of equal-length frames
    /// in one `UDP_SEGMENT` message, split by the kernel into one datagram
    /// per frame) and receive coalescing (`UDP_GRO`) on or off, where the
    /// kernel supports them (Linux 4.18 / 5.0); on by default. The wire
    /// format does not change: one frame per datagram either way. Returns
    /// whether each is now on (segmentation, coalescing).
    pub fn set_offload(&mut self, on: bool) -> (bool, bool) {
        let fd = self.socket.as_raw_fd();
        self.gso_limit = if on && set_int_option(fd, libc::SOL_UDP, UDP_SEGMENT, 0).is_ok() {
            MAX_FRAME
        } else {
            0
        };
        let gro = on && set_int_option(fd, libc::SOL_UDP, UDP_GRO, 1).is_ok();
        if !gro {
            let _ = set_int_option(fd, libc::SOL_UDP, UDP_GRO, 0);
        }
        // The receive buffers follow at the next recvmmsg, once frames
        // still pending in the old ones are handed out.
        self.gro = gro;
        (self.gso_limit > 0, self.gro)
    }

    /// The local address (useful when bound to port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// The peer address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// Hands out frames of the datagrams already received, up to `max`
    /// in all in `out`; returns how many it added.
    fn drain_received(&mut self, out: &mut Vec<Vec<u8>>, max: usize) -> usize {
        let mut n = 0;
        while n < max && self.rx_next < self.rx_filled {
            let d = self.rx.received(self.rx_next);
            let len = d.data.len();
            // Each datagram the kernel coalesced is one frame.
            let seg = d.segment.unwrap_or(len).max(1);
            if self.rx_offset == 0 {
                let from_peer =
                    from_sockaddr(d.addr, d.addr_len).is_some_and(|a| same_peer(a, self.peer));
                if !from_peer || d.truncated {
                    self.stats.rx_malformed += len.div_ceil(seg).max(1) as u64;
                    self.rx_next += 1;
                    continue;
                }
            }
            let start = self.rx_offset;
            let end = (start + seg).min(len);
            let frame = d.data.get(start..end).unwrap_or(&[]);
            // A frame shorter than an Ethernet header or longer than the
            // largest frame is not ours.
            if (14..=MAX_FRAME).contains(&frame.len()) {
                out.push(frame.to_vec());
                self.stats.rx_frames += 1;
                n += 1;
            } else {
                self.stats.rx_malformed += 1;
            }
            if end >= len {
                self.rx_next += 1;
                self.rx_offset = 0;
            } else {
                self.rx_offset = end;
            }
        }
        n
    }
}

impl Port for UdpPort {
    fn recv_batch(&mut self, out: &mut Vec<Vec<u8>>, max: usize) -> io::Result<usize> {
        let fd = self.socket.as_raw_fd();
        let mut delivered = self.drain_received(out, max);
        // At most one recvmmsg per BATCH frames asked for, so a flood of
        // bad datagrams cannot keep the caller here.
        for _ in 0..max.div_ceil(BATCH) {
            if delivered >= max {
                break;
            }
            let want = (max - delivered).min(BATCH);
            if self.rx_gro != self.gro {
                self.rx = if self.gro {
                    MsgBatch::for_recv(GRO_BUF, true)
                } else {
                    MsgBatch::for_frames()
                };
                self.rx_gro = self.gro;
            }
            let got = match self.rx.recv(fd, want) {
                Ok(n) => n,
                // An ICMP error queued on the socket: nothing to read.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => 0,
                Err(e) => return Err(e),
            };
            self.rx_filled = got;
            self.rx_next = 0;
            self.rx_offset = 0;
            delivered += self.drain_received(out, max - delivered);
            if got < want {
                break;
            }
        }
        Ok(delivered)
    }

    fn send_batch(&mut self, frames: &mut Vec<Vec<u8>>) -> io::Result<()> {
        let o = self
            .tx
            .send(self.socket.as_raw_fd(), frames, &mut self.gso_limit);
        frames.clear();
        self.stats.tx_frames += o.sent;
        self.stats.tx_dropped += o.dropped;
        match o.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn describe(&self) -> String {
        match self.socket.local_addr() {
            Ok(l) => format!("udp {l} <-> {}", self.peer),
            Err(_) => format!("udp <-> {}", self.peer),
        }
    }
}
