//! The packet generator: streams of packets made inside the switch.
//!
//! A Tofino-class switch has a few generator streams. Each is triggered by a
//! periodic timer, by a port going down, or by a recirculated packet that
//! matches a value/mask, and each trigger emits a batch of packets built from
//! a template. The packets enter ingress from the generator port, one
//! serialisation time apart at the port rate, carrying
//! `{stream, batch_id, packet_id}` in their intrinsic metadata
//! ([`crate::PacketKind::Generated`]).
//!
//! The port-down trigger behaves as Tofino's does:
//! - it fires the profile's `data_path.port_down_detection` after the link
//!   goes down (the MAC's fault detection), and only if the port is still
//!   down then: a flap shorter than the detection time is not seen [our
//!   choice];
//! - each generated packet is the stream's template with the 6-byte
//!   `pktgen_port_down_header_t` in front ([`inca_wire::pktgen`]: the
//!   stream as `app_id`, pipe 0, the port, the packet's index in its batch);
//! - a port that fired is latched: it fires no stream again until the
//!   control plane clears it ([`crate::ControlPlane::pktgen_clear_port_down`],
//!   Tofino's `bf_pktgen_clear_port_down`). The latch is per port, as on
//!   the chip, and a restart clears it.
//!
//! Timer and recirculation streams emit the bare template (the model has
//! no timer or recirculation pktgen header).

use inca_wire::pktgen::{PortDownHeaderRepr, MAX_PORT, PORT_DOWN_HEADER_LEN};

use crate::device::{Nanos, PortId};

/// What fires a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// Every `period` nanoseconds, from when the stream is configured.
    Timer {
        /// The period.
        period: Nanos,
    },
    /// When `port` goes down (after the profile's detection time; once
    /// until the control plane clears the port, see the module docs).
    PortDown {
        /// The port watched.
        port: PortId,
    },
    /// When a recirculated packet's first bytes match `value` under `mask`.
    Recirculation {
        /// Value to match.
        value: Vec<u8>,
        /// Mask applied to the packet and the value.
        mask: Vec<u8>,
    },
}

/// One stream's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamConfig {
    /// What fires it.
    pub trigger: Trigger,
    /// The frame every generated packet starts as.
    pub template: Vec<u8>,
    /// Packets per trigger (at least 1).
    pub batch_size: u16,
}

/// A packet-generator request the device refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PktGenError {
    /// The stream number is beyond the device's streams.
    #[error("packet-generator stream {stream} does not exist: this device has {streams}")]
    NoSuchStream {
        /// The stream asked for.
        stream: u8,
        /// How many the device has.
        streams: usize,
    },
    /// A batch of zero packets.
    #[error("a packet-generator batch needs at least one packet")]
    EmptyBatch,
    /// A port-down trigger or clear names a port the device does not have
    /// (or one the 9-bit header field cannot carry).
    #[error("port {port} cannot trigger the packet generator: this device has ports 0..{ports}")]
    NoSuchPort {
        /// The port asked for.
        port: PortId,
        /// How many ports the device has.
        ports: usize,
    },
}

/// A configured stream and the epoch that invalidates its old events when it
/// is reconfigured.
#[derive(Debug, Clone)]
pub(crate) struct Stream {
    pub config: StreamConfig,
    pub epoch: u32,
    pub next_batch: u16,
}

impl Stream {
    /// Packet `packet_id` of a batch of stream `id`: the template, behind
    /// the port-down header for a port-down stream.
    pub fn frame(&self, id: u8, packet_id: u16) -> Vec<u8> {
        let Trigger::PortDown { port } = self.config.trigger else {
            return self.config.template.clone();
        };
        let header = PortDownHeaderRepr {
            pipe_id: 0,
            app_id: id,
            port,
            packet_id,
        };
        let mut frame = vec![0; PORT_DOWN_HEADER_LEN + self.config.template.len()];
        // `configure` admits only streams and ports the header can carry.
        if header.emit(&mut frame).is_err() {
            debug_assert!(false, "unchecked port-down stream {id} for port {port}");
        }
        frame[PORT_DOWN_HEADER_LEN..].copy_from_slice(&self.config.template);
        frame
    }
}

/// All streams of one switch.
#[derive(Debug, Default)]
pub(crate) struct PacketGenerator {
    pub streams: Vec<Option<Stream>>,
    epoch: u32,
    /// Ports whose port-down event fired and has not been cleared.
    latched: Vec<bool>,
}

impl PacketGenerator {
    pub fn new(streams: u8, ports: u16) -> Self {
        PacketGenerator {
            streams: vec![None; usize::from(streams)],
            epoch: 0,
            latched: vec![false; usize::from(ports)],
        }
    }

    fn check_port(&self, port: PortId) -> Result<usize, PktGenError> {
        let i = usize::from(port);
        if i < self.latched.len() && port <= MAX_PORT {
            Ok(i)
        } else {
            Err(PktGenError::NoSuchPort {
                port,
                ports: self.latched.len(),
            })
        }
    }

    /// Sets or clears stream `id`; returns the new epoch, or why the device
    /// refuses it.
    pub fn configure(&mut self, id: u8, config: Option<StreamConfig>) -> Result<u32, PktGenError> {
        if let Some(c) = &config {
            if c.batch_size == 0 {
                return Err(PktGenError::EmptyBatch);
            }
            if let Trigger::PortDown { port } = c.trigger {
                self.check_port(port)?;
            }
        }
        let streams = self.streams.len();
        let slot = self
            .streams
            .get_mut(usize::from(id))
            .ok_or(PktGenError::NoSuchStream {
                stream: id,
                streams,
            })?;
        self.epoch = self.epoch.wrapping_add(1);
        *slot = config.map(|config| Stream {
            config,
            epoch: self.epoch,
            next_batch: 0,
        });
        Ok(self.epoch)
    }

    /// The stream `id` if it is still at `epoch`.
    pub fn current(&mut self, id: u8, epoch: u32) -> Option<&mut Stream> {
        self.streams
            .get_mut(usize::from(id))?
            .as_mut()
            .filter(|s| s.epoch == epoch)
    }

    /// The streams to fire now that `port`'s down state has been
    /// detected: those watching it, unless the port is latched from an
    /// earlier event; latches it if any fire.
    pub fn port_down_detected(&mut self, port: PortId) -> Vec<(u8, u32)> {
        let Ok(i) = self.check_port(port) else {
            return Vec::new();
        };
        if self.latched[i] {
            return Vec::new();
        }
        let fired = self.matching(|t| matches!(t, Trigger::PortDown { port: p } if *p == port));
        self.latched[i] = !fired.is_empty();
        fired
    }

    /// Re-arms `port`'s port-down trigger (the control plane's clear).
    pub fn clear_port_down(&mut self, port: PortId) -> Result<(), PktGenError> {
        let i = self.check_port(port)?;
        self.latched[i] = false;
        Ok(())
    }

    /// Streams triggered by a recirculated packet starting with `header`.
    pub fn recirculation_streams(&self, header: &[u8]) -> Vec<(u8, u32)> {
        self.matching(|t| match t {
            Trigger::Recirculation { value, mask } => {
                value.len() <= header.len()
                    && value
                        .iter()
                        .zip(mask)
                        .zip(header)
                        .all(|((v, m), h)| v & m == h & m)
            }
            _ => false,
        })
    }

    fn matching(&self, f: impl Fn(&Trigger) -> bool) -> Vec<(u8, u32)> {
        self.streams
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.as_ref()
                    .filter(|s| f(&s.config.trigger))
                    .map(|s| (i as u8, s.epoch))
            })
            .collect()
    }

    /// Forgets every stream (crash).
    pub fn clear(&mut self) {
        for s in &mut self.streams {
            *s = None;
        }
        self.latched.fill(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limited_streams_and_epochs() {
        let mut g = PacketGenerator::new(2, 8);
        let cfg = StreamConfig {
            trigger: Trigger::PortDown { port: 3 },
            template: vec![0; 60],
            batch_size: 1,
        };
        let e1 = g.configure(0, Some(cfg.clone())).unwrap();
        assert_eq!(
            g.configure(2, Some(cfg.clone())),
            Err(PktGenError::NoSuchStream {
                stream: 2,
                streams: 2
            })
        );
        assert_eq!(g.port_down_detected(3), vec![(0, e1)]);
        assert!(g.port_down_detected(4).is_empty());
        let e2 = g.configure(0, Some(cfg)).unwrap();
        assert!(g.current(0, e1).is_none(), "old events are stale");
        assert!(g.current(0, e2).is_some());
    }

    #[test]
    fn recirculation_trigger_matches_under_mask() {
        let mut g = PacketGenerator::new(1, 8);
        g.configure(
            0,
            Some(StreamConfig {
                trigger: Trigger::Recirculation {
                    value: vec![0xab, 0x10],
                    mask: vec![0xff, 0xf0],
                },
                template: vec![],
                batch_size: 1,
            }),
        )
        .unwrap();
        assert_eq!(g.recirculation_streams(&[0xab, 0x1f, 0]).len(), 1);
        assert!(g.recirculation_streams(&[0xab, 0x2f]).is_empty());
        assert!(g.recirculation_streams(&[0xab]).is_empty());
    }

    #[test]
    fn a_port_fires_once_until_cleared() {
        let mut g = PacketGenerator::new(2, 8);
        let on = |port| StreamConfig {
            trigger: Trigger::PortDown { port },
            template: vec![0xAB; 4],
            batch_size: 1,
        };
        let e0 = g.configure(0, Some(on(3))).unwrap();
        let e1 = g.configure(1, Some(on(3))).unwrap();
        assert_eq!(g.port_down_detected(3), vec![(0, e0), (1, e1)]);
        assert!(g.port_down_detected(3).is_empty(), "latched");
        // A port nobody watches does not latch.
        assert!(g.port_down_detected(5).is_empty());
        g.clear_port_down(3).unwrap();
        assert_eq!(g.port_down_detected(3).len(), 2);
        g.clear();
        assert!(g.port_down_detected(3).is_empty(), "no streams after clear");
        assert_eq!(
            g.clear_port_down(8),
            Err(PktGenError::NoSuchPort { port: 8, ports: 8 })
        );
        assert!(matches!(
            g.configure(0, Some(on(9))),
            Err(PktGenError::NoSuchPort { port: 9, .. })
        ));
        assert_eq!(
            g.configure(
                0,
                Some(StreamConfig {
                    batch_size: 0,
                    ..on(1)
                })
            ),
            Err(PktGenError::EmptyBatch)
        );
    }

    #[test]
    fn port_down_frames_carry_the_header() {
        let mut g = PacketGenerator::new(4, 32);
        let cfg = StreamConfig {
            trigger: Trigger::PortDown { port: 17 },
            template: vec![0xAB; 4],
            batch_size: 2,
        };
        let e = g.configure(3, Some(cfg)).unwrap();
        let s = g.current(3, e).unwrap();
        assert_eq!(
            s.frame(3, 1),
            [0x03, 0, 0, 17, 0, 1, 0xAB, 0xAB, 0xAB, 0xAB]
        );
        let timer = Stream {
            config: StreamConfig {
                trigger: Trigger::Timer { period: 1 },
                template: vec![1, 2],
                batch_size: 1,
            },
            epoch: 0,
            next_batch: 0,
        };
        assert_eq!(timer.frame(0, 0), [1, 2]);
    }
}
