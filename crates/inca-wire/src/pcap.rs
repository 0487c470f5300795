//! Capture files: classic pcap out (LINKTYPE_ETHERNET, nanosecond
//! timestamps), pcap or pcapng in, via the `pcap-file` crate.
//!
//! Reading parses the whole file from memory so that a corrupt length field
//! yields an error instead of an unbounded read.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapParser};
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{DataLink, TsResolution};

/// Largest frame a capture may hold (also the snaplen we write).
pub const SNAPLEN: u32 = 262_144;

/// Why a capture could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    /// Opening, reading or writing the file failed.
    #[error("capture I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The first four bytes are neither a pcap nor a pcapng magic number.
    #[error("not a pcap or pcapng file (first bytes {0:02x?})")]
    UnknownFormat(Vec<u8>),
    /// The file ends in the middle of a header, record or block.
    #[error("capture file is truncated")]
    Truncated,
    /// A record or block is inconsistent.
    #[error("corrupt capture: {0}")]
    Corrupt(String),
    /// Frames are not Ethernet.
    #[error("unsupported link type {0:?} (only Ethernet)")]
    UnsupportedLinkType(DataLink),
    /// Classic pcap holds 32-bit seconds; this timestamp is later than 2106.
    #[error("timestamp {0} ns does not fit classic pcap's 32-bit seconds")]
    TimestampOutOfRange(u64),
    /// A frame to write is longer than [`SNAPLEN`].
    #[error("frame of {0} bytes exceeds the snap length")]
    FrameTooLong(usize),
}

impl From<pcap_file::PcapError> for PcapError {
    fn from(e: pcap_file::PcapError) -> Self {
        match e {
            pcap_file::PcapError::IncompleteBuffer => PcapError::Truncated,
            pcap_file::PcapError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
                PcapError::Truncated
            }
            pcap_file::PcapError::IoError(io) => PcapError::Io(io),
            other => PcapError::Corrupt(other.to_string()),
        }
    }
}

/// A classic pcap writer with nanosecond timestamps.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    inner: pcap_file::pcap::PcapWriter<W>,
}

impl PcapWriter<BufWriter<File>> {
    /// Creates (truncates) `path` and writes the file header.
    pub fn create(path: impl AsRef<Path>) -> Result<Self, PcapError> {
        PcapWriter::new(BufWriter::new(File::create(path)?))
    }
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header to `writer`.
    pub fn new(writer: W) -> Result<Self, PcapError> {
        let header = PcapHeader {
            snaplen: SNAPLEN,
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            ..PcapHeader::default()
        };
        Ok(PcapWriter {
            inner: pcap_file::pcap::PcapWriter::with_header(writer, header)?,
        })
    }

    /// Appends one frame (without FCS) stamped `ts_ns` nanoseconds after the epoch.
    pub fn write(&mut self, ts_ns: u64, frame: &[u8]) -> Result<(), PcapError> {
        if frame.len() > SNAPLEN as usize {
            return Err(PcapError::FrameTooLong(frame.len()));
        }
        if ts_ns / 1_000_000_000 > u64::from(u32::MAX) {
            return Err(PcapError::TimestampOutOfRange(ts_ns));
        }
        let pkt = PcapPacket::new(Duration::from_nanos(ts_ns), frame.len() as u32, frame);
        self.inner.write_packet(&pkt)?;
        Ok(())
    }

    /// Appends the first `snaplen` bytes of a frame, recording its full
    /// length (as capture tools do with a snap length: the headers, not the
    /// payload).
    pub fn write_truncated(
        &mut self,
        ts_ns: u64,
        frame: &[u8],
        snaplen: usize,
    ) -> Result<(), PcapError> {
        if frame.len() > SNAPLEN as usize {
            return Err(PcapError::FrameTooLong(frame.len()));
        }
        if ts_ns / 1_000_000_000 > u64::from(u32::MAX) {
            return Err(PcapError::TimestampOutOfRange(ts_ns));
        }
        let kept = &frame[..frame.len().min(snaplen)];
        let pkt = PcapPacket::new(Duration::from_nanos(ts_ns), frame.len() as u32, kept);
        self.inner.write_packet(&pkt)?;
        Ok(())
    }

    /// Flushes and returns the underlying writer; dropping a buffered writer
    /// would swallow a late I/O error.
    pub fn finish(self) -> Result<W, PcapError> {
        let mut w = self.inner.into_writer();
        w.flush()?;
        Ok(w)
    }
}

/// Reads every frame of a pcap or pcapng file as `(timestamp ns, bytes)`.
pub fn read_capture(path: impl AsRef<Path>) -> Result<Vec<(u64, Vec<u8>)>, PcapError> {
    read_capture_bytes(&std::fs::read(path)?)
}

/// [`read_capture`] over a file already in memory; the format is chosen by
/// the magic number.
pub fn read_capture_bytes(data: &[u8]) -> Result<Vec<(u64, Vec<u8>)>, PcapError> {
    let magic: [u8; 4] = match data.get(..4) {
        Some(m) => [m[0], m[1], m[2], m[3]],
        None => return Err(PcapError::Truncated),
    };
    match u32::from_be_bytes(magic) {
        0xA1B2_C3D4 | 0xD4C3_B2A1 | 0xA1B2_3C4D | 0x4D3C_B2A1 => read_pcap(data),
        0x0A0D_0D0A => read_pcapng(data),
        _ => Err(PcapError::UnknownFormat(magic.to_vec())),
    }
}

fn read_pcap(data: &[u8]) -> Result<Vec<(u64, Vec<u8>)>, PcapError> {
    let (mut rest, parser) = PcapParser::new(data)?;
    if parser.header().datalink != DataLink::ETHERNET {
        return Err(PcapError::UnsupportedLinkType(parser.header().datalink));
    }
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (r, pkt) = parser.next_packet(rest)?;
        out.push((
            saturating_ns(pkt.timestamp.as_nanos()),
            pkt.data.into_owned(),
        ));
        rest = r;
    }
    Ok(out)
}

fn saturating_ns(ns: u128) -> u64 {
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// Converts a raw pcapng timestamp in interface units to nanoseconds.
/// `if_tsresol` is a power of ten when bit 7 is clear, of two when set;
/// absent means microseconds (pcapng spec §4.2).
fn pcapng_ns(raw: u64, tsresol: Option<u8>, offset_s: u64) -> Result<u64, PcapError> {
    let r = tsresol.unwrap_or(6);
    let raw = u128::from(raw);
    let ns = if r & 0x80 == 0 {
        let units = 10u128
            .checked_pow(u32::from(r))
            .ok_or_else(|| PcapError::Corrupt(format!("if_tsresol 10^-{r} out of range")))?;
        raw * 1_000_000_000 / units
    } else {
        let e = u32::from(r & 0x7F);
        if e >= 64 {
            return Err(PcapError::Corrupt(format!(
                "if_tsresol 2^-{e} out of range"
            )));
        }
        (raw * 1_000_000_000) >> e
    };
    Ok(saturating_ns(ns + u128::from(offset_s) * 1_000_000_000))
}

fn read_pcapng(data: &[u8]) -> Result<Vec<(u64, Vec<u8>)>, PcapError> {
    let (mut rest, mut parser) = PcapNgParser::new(data)?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (r, block) = parser.next_block(rest)?;
        rest = r;
        let (iface_id, raw_ts, frame) = match block {
            Block::EnhancedPacket(epb) => {
                // pcap-file stores the raw 64-bit count in a Duration as if it
                // were nanoseconds; the interface says what the unit really is.
                let raw = u64::try_from(epb.timestamp.as_nanos()).unwrap_or(u64::MAX);
                (epb.interface_id, raw, epb.data.into_owned())
            }
            Block::SimplePacket(spb) => {
                // An SPB has no captured length: its data runs to the block's
                // 4-byte padding, and the original length says where it ends.
                let n = (spb.original_len as usize).min(spb.data.len());
                (0, 0, spb.data[..n].to_vec())
            }
            Block::Packet(pb) => (
                u32::from(pb.interface_id),
                pb.timestamp,
                pb.data.into_owned(),
            ),
            _ => continue,
        };
        let iface = parser.interfaces().get(iface_id as usize).ok_or_else(|| {
            PcapError::Corrupt(format!("packet names missing interface {iface_id}"))
        })?;
        if iface.linktype != DataLink::ETHERNET {
            return Err(PcapError::UnsupportedLinkType(iface.linktype));
        }
        let mut tsresol = None;
        let mut offset_s = 0;
        for opt in &iface.options {
            match opt {
                InterfaceDescriptionOption::IfTsResol(r) => tsresol = Some(*r),
                InterfaceDescriptionOption::IfTsOffset(o) => offset_s = *o,
                _ => {}
            }
        }
        out.push((pcapng_ns(raw_ts, tsresol, offset_s)?, frame));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsresol_conversion() {
        assert_eq!(pcapng_ns(5, None, 0).unwrap(), 5_000);
        assert_eq!(pcapng_ns(5, Some(9), 0).unwrap(), 5);
        assert_eq!(pcapng_ns(3, Some(0), 1).unwrap(), 4_000_000_000);
        assert_eq!(
            pcapng_ns(1 << 10, Some(0x80 | 10), 0).unwrap(),
            1_000_000_000
        );
        assert!(pcapng_ns(1, Some(120), 0).is_err());
    }

    #[test]
    fn unknown_magic_is_an_error() {
        assert!(matches!(
            read_capture_bytes(b"hello world"),
            Err(PcapError::UnknownFormat(_))
        ));
        assert!(matches!(
            read_capture_bytes(b"ab"),
            Err(PcapError::Truncated)
        ));
    }
}
