//! Point-to-point links over UDP: one Ethernet frame per datagram, between
//! a local socket and one peer address. Unprivileged; works on loopback and
//! across machines. Datagrams from any other address are counted and
//! dropped.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};

use crate::port::{Port, PortStats, MAX_FRAME};

/// A device port carried over UDP. See the module documentation.
pub struct UdpPort {
    socket: UdpSocket,
    peer: SocketAddr,
    buf: Vec<u8>,
    stats: PortStats,
}

impl UdpPort {
    /// Binds `local` and sends to (and accepts only from) `peer`.
    pub fn bind(local: SocketAddr, peer: SocketAddr) -> io::Result<UdpPort> {
        let socket = UdpSocket::bind(local)?;
        socket.set_nonblocking(true)?;
        Ok(UdpPort {
            socket,
            peer,
            buf: vec![0; MAX_FRAME + 1],
            stats: PortStats::default(),
        })
    }

    /// The local address (useful when bound to port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }
}

impl Port for UdpPort {
    fn recv_batch(&mut self, out: &mut Vec<Vec<u8>>, max: usize) -> io::Result<usize> {
        let mut n = 0;
        while n < max {
            match self.socket.recv_from(&mut self.buf) {
                Ok((len, from)) => {
                    // A frame shorter than an Ethernet header, longer than the
                    // largest frame, or from someone else is not ours.
                    if from != self.peer || !(14..=MAX_FRAME).contains(&len) {
                        self.stats.rx_malformed += 1;
                        continue;
                    }
                    out.push(self.buf[..len].to_vec());
                    self.stats.rx_frames += 1;
                    n += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }

    fn send_batch(&mut self, frames: &mut Vec<Vec<u8>>) -> io::Result<()> {
        for f in frames.drain(..) {
            match self.socket.send_to(&f, self.peer) {
                Ok(_) => self.stats.tx_frames += 1,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::ConnectionRefused
                    ) =>
                {
                    self.stats.tx_dropped += 1
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
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
