//! Captures: a port wrapper that writes every frame it receives and sends to
//! a pcap file (time stamps from the wall clock, nanosecond resolution), so
//! tshark can open what a live device saw on each port. Frames are cut to a
//! snap length ([`DEFAULT_SNAPLEN`] bytes: every header, not the payload),
//! as capture tools do: a few seconds of a TCP transfer would otherwise
//! write hundreds of megabytes.

use std::fs::File;
use std::io::{self, BufWriter};
use std::os::fd::RawFd;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use inca_wire::PcapWriter;

use crate::port::{Port, PortStats};

/// Bytes of each frame kept by default.
pub const DEFAULT_SNAPLEN: usize = 256;

/// A port whose traffic is captured. See the module documentation.
pub struct CapturePort {
    inner: Box<dyn Port>,
    snaplen: usize,
    writer: Option<PcapWriter<BufWriter<File>>>,
    /// Frames not captured because writing failed (the capture stops).
    pub failed: u64,
}

impl CapturePort {
    /// Captures `inner`'s frames into a new pcap at `path`.
    pub fn new(inner: Box<dyn Port>, path: &Path) -> io::Result<CapturePort> {
        let writer = PcapWriter::create(path).map_err(|e| io::Error::other(e.to_string()))?;
        Ok(CapturePort {
            inner,
            snaplen: DEFAULT_SNAPLEN,
            writer: Some(writer),
            failed: 0,
        })
    }

    /// Keeps up to `snaplen` bytes of each frame (`usize::MAX`: whole
    /// frames).
    pub fn with_snaplen(mut self, snaplen: usize) -> Self {
        self.snaplen = snaplen.max(14);
        self
    }

    fn record(&mut self, frames: &[Vec<u8>]) {
        let Some(w) = &mut self.writer else {
            return;
        };
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        for f in frames {
            if w.write_truncated(ts, f, self.snaplen).is_err() {
                self.failed += 1;
                self.writer = None;
                return;
            }
        }
    }

    /// Flushes and closes the capture.
    pub fn finish(&mut self) -> io::Result<()> {
        if let Some(w) = self.writer.take() {
            w.finish().map_err(|e| io::Error::other(e.to_string()))?;
        }
        Ok(())
    }
}

impl Port for CapturePort {
    fn recv_batch(&mut self, out: &mut Vec<Vec<u8>>, max: usize) -> io::Result<usize> {
        let before = out.len();
        let n = self.inner.recv_batch(out, max)?;
        let got: Vec<Vec<u8>> = out[before..].to_vec();
        self.record(&got);
        Ok(n)
    }

    fn send_batch(&mut self, frames: &mut Vec<Vec<u8>>) -> io::Result<()> {
        let copy = frames.clone();
        self.record(&copy);
        self.inner.send_batch(frames)
    }

    fn fd(&self) -> RawFd {
        self.inner.fd()
    }

    fn stats(&self) -> PortStats {
        self.inner.stats()
    }

    fn describe(&self) -> String {
        format!("{} (captured)", self.inner.describe())
    }

    fn link_up(&self) -> Option<bool> {
        self.inner.link_up()
    }
}

impl Drop for CapturePort {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}
