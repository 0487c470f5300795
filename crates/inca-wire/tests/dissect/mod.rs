//! Running a Lua dissector from contrib/wireshark over frames with tshark,
//! for the dissector tests: write the frames to a pcap, run `tshark -T
//! fields` with the script, and hand back one row of field values per
//! frame (a field seen several times is joined with commas).
//!
//! Skips (`None`, with the reason printed) when tshark is not installed or
//! `INCA_SKIP_TSHARK=1`.

use std::path::Path;
use std::process::Command;

use inca_wire::PcapWriter;

/// One row per frame, one value per requested field ("" when absent).
pub type Rows = Vec<Vec<String>>;

/// Whether tshark can run here; prints why not.
pub fn tshark_available(what: &str) -> bool {
    if std::env::var("INCA_SKIP_TSHARK").as_deref() == Ok("1") {
        println!("skipped: INCA_SKIP_TSHARK=1, {what} not run");
        return false;
    }
    let ok = Command::new("tshark")
        .arg("-v")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        println!("skipped: tshark not found on PATH (apt-get install tshark), {what} not run");
    }
    ok
}

/// Dissects `frames` with `contrib/wireshark/<script>` and returns the
/// `fields` of each (`None`: skipped). Panics on a tshark or Lua error.
pub fn dissect(script: &str, frames: &[Vec<u8>], fields: &[&str]) -> Option<Rows> {
    if !tshark_available(&format!("{script} check")) {
        return None;
    }
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "inca-wire-{}-{}.pcap",
        std::process::id(),
        script.trim_end_matches(".lua")
    ));
    let mut w = PcapWriter::create(&path).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write(1_700_000_000_000_000_000 + i as u64 * 1000, f)
            .unwrap();
    }
    w.finish().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../contrib/wireshark")
        .join(script);
    let mut cmd = Command::new("tshark");
    cmd.arg("-n")
        .arg("-r")
        .arg(&path)
        .args(["-X", &format!("lua_script:{}", script.display())])
        .args(["-T", "fields", "-E", "separator=\t", "-E", "occurrence=a"])
        .args(["-E", "aggregator=,"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !stderr.contains("Lua: Error"),
        "tshark failed: {stderr}"
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let _ = std::fs::remove_file(&path);
    Some(
        text.lines()
            .map(|l| {
                let mut row: Vec<String> = l.split('\t').map(str::to_string).collect();
                row.resize(fields.len(), String::new());
                row
            })
            .collect(),
    )
}
