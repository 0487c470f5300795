//! Control sessions live: real TCP between `inca node` processes.
//!
//! Each node with sessions listens on one address (`session_listen`). A
//! session names its id and the peer node's listen address; of its two
//! ends, the one whose listen address is smaller dials and the other
//! accepts [our choice: a rule both ends compute alike, so no role needs
//! configuring]. The dialer opens the connection with a hello frame naming
//! the session; the acceptor matches it to its own declaration of that id.
//!
//! On the connection every message is one frame: a big-endian u32 length,
//! then the body (at most [`SESSION_MESSAGE_LIMIT`] bytes). The device hears
//! [`SessionEvent::Up`] when the connection is established (dialer: once
//! connected; acceptor: once the hello arrives), its peer's messages in
//! order, and [`SessionEvent::Reset`] when the connection drops (end of
//! stream, an error, a malformed frame, or the peer replacing it): both ends
//! see their own connection drop, so a reset is visible at both. `lost`
//! counts the messages still in this end's user-space send buffer; what the
//! kernel had accepted but the peer never read cannot be known here. The
//! dialer reconnects with exponential backoff (100 ms doubling to 5 s
//! [our choice]).
//!
//! Sockets are non-blocking and polled by the runner; a connection attempt
//! runs on a short-lived thread (std has no non-blocking connect) and hands
//! the connected stream back over a channel.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::mpsc;
use std::time::Duration;

use inca_switch::device::{
    Nanos, Refusal, SessionEvent, SessionId, MILLIS, SECONDS, SESSION_MESSAGE_LIMIT,
};

/// First bytes of a hello frame's body, then the session id (big-endian).
pub const HELLO_MAGIC: &[u8; 4] = b"INCS";
/// First reconnect delay; it doubles up to [`BACKOFF_MAX`].
pub const BACKOFF_FIRST: Nanos = 100 * MILLIS;
/// Longest reconnect delay.
pub const BACKOFF_MAX: Nanos = 5 * SECONDS;
/// Bound on a session's user-space send buffer, bytes (as the simulator's
/// default: Linux's `tcp_wmem` maximum, 4 MiB).
pub const SEND_BUFFER: usize = 4 << 20;
/// Bound on accepted connections waiting for their hello.
pub const PENDING_LIMIT: usize = 64;
/// How long an accepted connection may take to say hello.
pub const HELLO_TIMEOUT: Nanos = 5 * SECONDS;
/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// One session as a node declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionDecl {
    /// The id both ends use.
    pub id: SessionId,
    /// The peer node's session listen address.
    pub peer: SocketAddr,
}

/// What the sessions of a node counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Messages sent (accepted into a send buffer).
    pub messages_sent: u64,
    /// Messages received and handed to the device.
    pub messages_received: u64,
    /// Messages refused.
    pub refused: u64,
    /// Times a session came up.
    pub ups: u64,
    /// Resets (connections dropped).
    pub resets: u64,
    /// Messages lost with resets (still in the send buffer).
    pub messages_lost: u64,
    /// Connection attempts that failed.
    pub connect_failures: u64,
    /// Accepted connections dropped: bad or unknown hello, too many
    /// waiting, or no hello in time.
    pub rejected: u64,
    /// Connections dropped for a malformed frame (length over the limit).
    pub malformed: u64,
}

/// An established connection.
struct Conn {
    stream: TcpStream,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    /// Bytes of `wbuf` already written.
    written: usize,
    /// End offsets in `wbuf` of the messages in it.
    ends: VecDeque<usize>,
}

impl Conn {
    fn new(stream: TcpStream) -> io::Result<Conn> {
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            rbuf: Vec::new(),
            wbuf: Vec::new(),
            written: 0,
            ends: VecDeque::new(),
        })
    }

    fn queue(&mut self, body: &[u8]) {
        self.wbuf
            .extend_from_slice(&(body.len() as u32).to_be_bytes());
        self.wbuf.extend_from_slice(body);
        self.ends.push_back(self.wbuf.len());
    }

    /// Writes what the socket takes. Err: the connection is broken.
    fn flush(&mut self) -> io::Result<()> {
        while self.written < self.wbuf.len() {
            match self.stream.write(&self.wbuf[self.written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        while self.ends.front().is_some_and(|&e| e <= self.written) {
            self.ends.pop_front();
        }
        if self.written == self.wbuf.len() {
            self.wbuf.clear();
            self.ends.clear();
            self.written = 0;
        }
        Ok(())
    }

    /// Reads what is there. Ok(false): end of stream.
    fn fill(&mut self) -> io::Result<bool> {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Ok(false),
                Ok(n) => self.rbuf.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The next whole frame's body, if one is in. Err: over the limit.
    fn frame(&mut self) -> Result<Option<Vec<u8>>, ()> {
        let Some(head) = self.rbuf.get(..4) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        if len > SESSION_MESSAGE_LIMIT {
            return Err(());
        }
        if self.rbuf.len() < 4 + len {
            return Ok(None);
        }
        let body = self.rbuf[4..4 + len].to_vec();
        self.rbuf.drain(..4 + len);
        Ok(Some(body))
    }

    fn unsent_messages(&self) -> u64 {
        self.ends.len() as u64
    }
}

enum State {
    /// Waiting to dial at this time (dialer) or for the peer (acceptor).
    Down {
        retry_at: Nanos,
    },
    /// A connection attempt is under way.
    Dialing,
    Up(Box<Conn>),
}

struct Session {
    decl: SessionDecl,
    dial: bool,
    state: State,
    backoff: Nanos,
}

/// A connection accepted, waiting for its hello.
struct Pending {
    conn: Conn,
    since: Nanos,
}

/// The sessions of one node. See the module documentation.
pub struct LiveSessions {
    listener: TcpListener,
    sessions: Vec<Session>,
    pending: Vec<Pending>,
    dialed: mpsc::Receiver<(usize, io::Result<TcpStream>)>,
    dial_tx: mpsc::Sender<(usize, io::Result<TcpStream>)>,
    stats: SessionStats,
}

impl LiveSessions {
    /// Listens on `listen` for the sessions `decls` (ids distinct).
    pub fn bind(listen: SocketAddr, decls: &[SessionDecl]) -> io::Result<LiveSessions> {
        let listener = TcpListener::bind(listen)?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let (dial_tx, dialed) = mpsc::channel();
        Ok(LiveSessions {
            listener,
            sessions: decls
                .iter()
                .map(|&decl| Session {
                    decl,
                    dial: local < decl.peer,
                    state: State::Down { retry_at: 0 },
                    backoff: BACKOFF_FIRST,
                })
                .collect(),
            pending: Vec::new(),
            dialed,
            dial_tx,
            stats: SessionStats::default(),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Counters.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    /// Whether session `id` is up.
    pub fn is_up(&self, id: SessionId) -> bool {
        self.sessions
            .iter()
            .any(|s| s.decl.id == id && matches!(s.state, State::Up(_)))
    }

    /// Descriptors to wait on (listener, connections).
    pub fn fds(&self) -> Vec<RawFd> {
        let mut v = vec![self.listener.as_raw_fd()];
        v.extend(self.pending.iter().map(|p| p.conn.stream.as_raw_fd()));
        for s in &self.sessions {
            if let State::Up(c) = &s.state {
                v.push(c.stream.as_raw_fd());
            }
        }
        v
    }

    /// Whether bytes wait to be written or a connection is being made (the
    /// runner should not sleep long).
    pub fn busy(&self) -> bool {
        self.sessions.iter().any(|s| match &s.state {
            State::Up(c) => c.written < c.wbuf.len(),
            State::Dialing => true,
            State::Down { .. } => false,
        })
    }

    /// When a dialer next tries to connect, if one is waiting.
    pub fn next_due(&self) -> Option<Nanos> {
        self.sessions
            .iter()
            .filter(|s| s.dial)
            .filter_map(|s| match s.state {
                State::Down { retry_at } => Some(retry_at),
                _ => None,
            })
            .min()
    }

    /// Sends `body` on session `id`, or says why not.
    pub fn send(&mut self, id: SessionId, body: &[u8]) -> Result<(), Refusal> {
        let result = match self.sessions.iter_mut().find(|s| s.decl.id == id) {
            None => Err(Refusal::Unknown),
            Some(s) => match &mut s.state {
                State::Up(c) => {
                    if body.len() > SESSION_MESSAGE_LIMIT {
                        Err(Refusal::TooLarge)
                    } else if c.wbuf.len() - c.written + 4 + body.len() > SEND_BUFFER {
                        Err(Refusal::BufferFull)
                    } else {
                        c.queue(body);
                        Ok(())
                    }
                }
                _ => Err(Refusal::Down),
            },
        };
        match result {
            Ok(()) => self.stats.messages_sent += 1,
            Err(_) => self.stats.refused += 1,
        }
        result
    }

    /// Does all the I/O that is ready at `now`; the events for the device
    /// go onto `events`.
    pub fn poll(&mut self, now: Nanos, events: &mut Vec<SessionEvent>) {
        self.accept(now);
        self.hellos(now, events);
        while let Ok((i, result)) = self.dialed.try_recv() {
            let Some(s) = self.sessions.get_mut(i) else {
                continue;
            };
            match result.and_then(Conn::new) {
                Ok(mut conn) => {
                    let mut hello = HELLO_MAGIC.to_vec();
                    hello.extend_from_slice(&s.decl.id.0.to_be_bytes());
                    conn.queue(&hello);
                    conn.ends.clear(); // the hello is not a device message
                    s.state = State::Up(Box::new(conn));
                    s.backoff = BACKOFF_FIRST;
                    self.stats.ups += 1;
                    events.push(SessionEvent::Up { session: s.decl.id });
                }
                Err(_) => {
                    self.stats.connect_failures += 1;
                    s.state = State::Down {
                        retry_at: now + s.backoff,
                    };
                    s.backoff = (s.backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
        for i in 0..self.sessions.len() {
            self.poll_session(now, i, events);
        }
    }

    fn accept(&mut self, now: Nanos) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if self.pending.len() >= PENDING_LIMIT {
                        self.stats.rejected += 1;
                        continue; // dropped: closes it
                    }
                    match Conn::new(stream) {
                        Ok(conn) => self.pending.push(Pending { conn, since: now }),
                        Err(_) => self.stats.rejected += 1,
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return, // WouldBlock, or a transient accept error
            }
        }
    }

    /// Accepted connections that said hello become their session's.
    fn hellos(&mut self, now: Nanos, events: &mut Vec<SessionEvent>) {
        let mut i = 0;
        while i < self.pending.len() {
            let p = &mut self.pending[i];
            let alive = p.conn.fill().unwrap_or(false);
            let hello = p.conn.frame();
            let target = match hello {
                Ok(Some(body)) => {
                    let id = (body.len() == 8 && &body[..4] == HELLO_MAGIC).then(|| {
                        SessionId(u32::from_be_bytes([body[4], body[5], body[6], body[7]]))
                    });
                    Some(id.and_then(|id| {
                        self.sessions
                            .iter()
                            .position(|s| s.decl.id == id && !s.dial)
                    }))
                }
                Ok(None) if alive && now < p.since + HELLO_TIMEOUT => None,
                _ => Some(None),
            };
            let Some(target) = target else {
                i += 1;
                continue;
            };
            let p = self.pending.swap_remove(i);
            let Some(s) = target else {
                self.stats.rejected += 1;
                continue;
            };
            // A new connection replaces a live one (the peer saw it drop
            // first): the old one is reset here too.
            if matches!(self.sessions[s].state, State::Up(_)) {
                self.reset(s, events);
            }
            let s = &mut self.sessions[s];
            s.state = State::Up(Box::new(p.conn));
            self.stats.ups += 1;
            events.push(SessionEvent::Up { session: s.decl.id });
        }
    }

    fn poll_session(&mut self, now: Nanos, i: usize, events: &mut Vec<SessionEvent>) {
        let s = &mut self.sessions[i];
        match &mut s.state {
            State::Down { retry_at } if s.dial && *retry_at <= now => {
                s.state = State::Dialing;
                let (peer, tx) = (s.decl.peer, self.dial_tx.clone());
                std::thread::spawn(move || {
                    let _ = tx.send((i, TcpStream::connect_timeout(&peer, CONNECT_TIMEOUT)));
                });
            }
            State::Up(conn) => {
                let id = s.decl.id;
                let mut broken = conn.flush().is_err();
                if !broken {
                    broken = !conn.fill().unwrap_or(false);
                }
                // Frames that arrived before an end of stream still count.
                loop {
                    match conn.frame() {
                        Ok(Some(body)) => {
                            self.stats.messages_received += 1;
                            events.push(SessionEvent::Message { session: id, body });
                        }
                        Ok(None) => break,
                        Err(()) => {
                            self.stats.malformed += 1;
                            broken = true;
                            break;
                        }
                    }
                }
                if broken {
                    self.reset(i, events);
                    let s = &mut self.sessions[i];
                    s.state = State::Down {
                        retry_at: now + s.backoff,
                    };
                }
            }
            _ => {}
        }
    }

    /// Drops session `i`'s connection and tells the device.
    fn reset(&mut self, i: usize, events: &mut Vec<SessionEvent>) {
        let s = &mut self.sessions[i];
        let State::Up(conn) = std::mem::replace(&mut s.state, State::Down { retry_at: 0 }) else {
            return;
        };
        let lost = conn.unsent_messages();
        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
        self.stats.resets += 1;
        self.stats.messages_lost += lost;
        events.push(SessionEvent::Reset {
            session: s.decl.id,
            lost,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn poll_until(
        nodes: &mut [&mut LiveSessions],
        start: Instant,
        mut done: impl FnMut(&[Vec<SessionEvent>]) -> bool,
    ) -> Vec<Vec<SessionEvent>> {
        let mut got = vec![Vec::new(); nodes.len()];
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(&got) {
            assert!(Instant::now() < deadline, "timed out: {got:?}");
            for (n, g) in nodes.iter_mut().zip(&mut got) {
                n.poll(start.elapsed().as_nanos() as Nanos, g);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        got
    }

    #[test]
    fn two_ends_connect_exchange_in_order_and_both_see_a_drop() {
        let a_addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        // Bind both first to learn the ports, then declare the sessions.
        let la = TcpListener::bind(a_addr).unwrap();
        let lb = TcpListener::bind(a_addr).unwrap();
        let (pa, pb) = (la.local_addr().unwrap(), lb.local_addr().unwrap());
        drop((la, lb));
        let id = SessionId(9);
        let mut a = LiveSessions::bind(pa, &[SessionDecl { id, peer: pb }]).unwrap();
        let mut b = LiveSessions::bind(pb, &[SessionDecl { id, peer: pa }]).unwrap();
        let start = Instant::now();
        let up = |g: &[Vec<SessionEvent>]| {
            g.iter()
                .all(|e| e.iter().any(|e| matches!(e, SessionEvent::Up { .. })))
        };
        poll_until(&mut [&mut a, &mut b], start, up);
        assert_eq!(a.send(SessionId(1), b"x"), Err(Refusal::Unknown));
        for i in 0..100u32 {
            a.send(id, &i.to_be_bytes()).unwrap();
        }
        let got = poll_until(&mut [&mut a, &mut b], start, |g| g[1].len() == 100);
        let want: Vec<SessionEvent> = (0..100u32)
            .map(|i| SessionEvent::Message {
                session: id,
                body: i.to_be_bytes().to_vec(),
            })
            .collect();
        assert_eq!(got[1], want);
        // A drop at a is a reset at both ends, then they reconnect.
        a.reset(0, &mut Vec::new());
        let got = poll_until(&mut [&mut a, &mut b], start, |g| {
            g[1].iter().any(|e| matches!(e, SessionEvent::Reset { .. }))
                && g.iter()
                    .all(|e| e.iter().any(|e| matches!(e, SessionEvent::Up { .. })))
        });
        assert!(got[1]
            .iter()
            .any(|e| matches!(e, SessionEvent::Reset { .. })));
        assert!(a.is_up(id) || b.is_up(id));
    }
}
