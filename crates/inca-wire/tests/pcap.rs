//! Capture files through the public API: pcap written by us, pcapng written
//! by pcap-file's own writer, both read back by `read_capture`.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::Duration;

use inca_wire::*;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::blocks::simple_packet::SimplePacketBlock;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;

fn tmp(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("inca-wire-{}-{name}", std::process::id()))
}

#[test]
fn pcap_file_roundtrip() {
    let path = tmp("rt.pcap");
    let frames: Vec<(u64, Vec<u8>)> = vec![
        (1, vec![1; 60]),
        (1_700_000_000_123_456_789, vec![2; 1514]),
        (u64::from(u32::MAX) * 1_000_000_000, vec![]),
    ];
    let mut w = PcapWriter::create(&path).unwrap();
    for (t, f) in &frames {
        w.write(*t, f).unwrap();
    }
    w.finish().unwrap();
    assert_eq!(read_capture(&path).unwrap(), frames);
    std::fs::remove_file(path).ok();
}

fn epb(iface: u32, raw_ts: u64, data: &[u8]) -> EnhancedPacketBlock<'_> {
    EnhancedPacketBlock {
        interface_id: iface,
        // pcap-file writes the Duration's nanosecond count as the raw 64-bit
        // timestamp, whatever the interface's unit.
        timestamp: Duration::from_nanos(raw_ts),
        original_len: data.len() as u32,
        data: Cow::Borrowed(data),
        options: vec![],
    }
}

#[test]
fn pcapng_read() {
    let path = tmp("rt.pcapng");
    let f1 = vec![0xAA; 64];
    let f2 = vec![0xBB; 70];
    let f3 = vec![0xCC; 42];
    {
        let file = std::fs::File::create(&path).unwrap();
        let mut w = PcapNgWriter::new(file).unwrap();
        // Interface 0: no if_tsresol, so microseconds.
        w.write_pcapng_block(InterfaceDescriptionBlock::new(DataLink::ETHERNET, 0))
            .unwrap();
        // Interface 1: nanoseconds.
        let mut ns = InterfaceDescriptionBlock::new(DataLink::ETHERNET, 0);
        ns.options.push(InterfaceDescriptionOption::IfTsResol(9));
        w.write_pcapng_block(ns).unwrap();
        w.write_pcapng_block(epb(0, 1_500_000, &f1)).unwrap();
        w.write_pcapng_block(epb(1, 1_700_000_000_000_000_123, &f2))
            .unwrap();
        w.write_pcapng_block(SimplePacketBlock {
            original_len: f3.len() as u32,
            data: Cow::Borrowed(&f3),
        })
        .unwrap();
    }
    let got = read_capture(&path).unwrap();
    assert_eq!(
        got,
        vec![
            (1_500_000_000, f1),
            (1_700_000_000_000_000_123, f2),
            (0, f3)
        ]
    );

    // Truncating the file anywhere inside a block is an error, not a panic.
    let bytes = std::fs::read(&path).unwrap();
    for cut in 1..bytes.len() {
        let r = read_capture_bytes(&bytes[..cut]);
        assert!(
            r.is_err() || r.as_ref().is_ok_and(|v| v.len() < 3),
            "cut at {cut}: {r:?}"
        );
    }
    std::fs::remove_file(path).ok();
}

#[test]
fn pcapng_non_ethernet_is_an_error() {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock::new(DataLink::RAW, 0))
        .unwrap();
    w.write_pcapng_block(epb(0, 1, &[0x45; 20])).unwrap();
    assert!(matches!(
        read_capture_bytes(&w.into_inner()),
        Err(PcapError::UnsupportedLinkType(_))
    ));
}

#[test]
fn corrupt_pcap_is_an_error() {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    w.write(5, &[1, 2, 3]).unwrap();
    let mut bytes = w.finish().unwrap();
    assert_eq!(
        read_capture_bytes(&bytes).unwrap(),
        vec![(5, vec![1, 2, 3])]
    );
    // Declare a captured length far beyond the file.
    bytes[24 + 8..24 + 12].copy_from_slice(&0x00FF_FFFFu32.to_le_bytes());
    assert!(read_capture_bytes(&bytes).is_err());
    bytes.truncate(30);
    assert!(matches!(
        read_capture_bytes(&bytes),
        Err(PcapError::Truncated)
    ));
    assert!(matches!(
        read_capture(tmp("does-not-exist")),
        Err(PcapError::Io(_))
    ));
}

#[test]
fn truncated_frames_keep_the_headers() {
    let path = std::env::temp_dir().join(format!("inca-trunc-{}.pcap", std::process::id()));
    let frame: Vec<u8> = (0..1500u32).map(|i| i as u8).collect();
    let mut w = inca_wire::PcapWriter::create(&path).unwrap();
    w.write_truncated(5, &frame, 64).unwrap();
    w.write_truncated(6, &frame[..40], 64).unwrap();
    w.finish().unwrap();
    let got = inca_wire::read_capture(&path).unwrap();
    assert_eq!(got[0], (5, frame[..64].to_vec()));
    assert_eq!(got[1], (6, frame[..40].to_vec()));
    let _ = std::fs::remove_file(path);
}
