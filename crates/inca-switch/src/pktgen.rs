//! The packet generator: streams of packets made inside the switch.
//!
//! A Tofino-class switch has a few generator streams. Each is triggered by a
//! periodic timer, by a port going down, or by a recirculated packet that
//! matches a value/mask, and each trigger emits a batch of packets built from
//! a template. The packets enter ingress from the generator port, one
//! serialisation time apart at the port rate, carrying
//! `{stream, batch_id, packet_id}` in their intrinsic metadata
//! ([`crate::PacketKind::Generated`]).

use crate::device::{Nanos, PortId};

/// What fires a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// Every `period` nanoseconds, from when the stream is configured.
    Timer {
        /// The period.
        period: Nanos,
    },
    /// When `port` goes down.
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

/// A configured stream and the epoch that invalidates its old events when it
/// is reconfigured.
#[derive(Debug, Clone)]
pub(crate) struct Stream {
    pub config: StreamConfig,
    pub epoch: u32,
    pub next_batch: u16,
}

/// All streams of one switch.
#[derive(Debug, Default)]
pub(crate) struct PacketGenerator {
    pub streams: Vec<Option<Stream>>,
    epoch: u32,
}

impl PacketGenerator {
    pub fn new(streams: u8) -> Self {
        PacketGenerator {
            streams: vec![None; usize::from(streams)],
            epoch: 0,
        }
    }

    /// Sets or clears stream `id`; returns the new epoch, or an error if the
    /// device has no such stream.
    pub fn configure(&mut self, id: u8, config: Option<StreamConfig>) -> Result<u32, String> {
        let n = self.streams.len();
        let slot = self.streams.get_mut(usize::from(id)).ok_or_else(|| {
            format!("packet-generator stream {id} does not exist: this device has {n}")
        })?;
        if let Some(c) = &config {
            if c.batch_size == 0 {
                return Err("a packet-generator batch needs at least one packet".into());
            }
        }
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

    /// Streams triggered by `port` going down.
    pub fn port_down_streams(&self, port: PortId) -> Vec<(u8, u32)> {
        self.matching(|t| matches!(t, Trigger::PortDown { port: p } if *p == port))
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limited_streams_and_epochs() {
        let mut g = PacketGenerator::new(2);
        let cfg = StreamConfig {
            trigger: Trigger::PortDown { port: 3 },
            template: vec![0; 60],
            batch_size: 1,
        };
        let e1 = g.configure(0, Some(cfg.clone())).unwrap();
        assert!(g.configure(2, Some(cfg.clone())).is_err());
        assert_eq!(g.port_down_streams(3), vec![(0, e1)]);
        assert!(g.port_down_streams(4).is_empty());
        let e2 = g.configure(0, Some(cfg)).unwrap();
        assert!(g.current(0, e1).is_none(), "old events are stale");
        assert!(g.current(0, e2).is_some());
    }

    #[test]
    fn recirculation_trigger_matches_under_mask() {
        let mut g = PacketGenerator::new(1);
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
}
