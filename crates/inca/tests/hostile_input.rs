//! Hostile and malformed scenario files (issue 8): wrong types, missing
//! fields, unknown devices and programs, impossible links (to an unknown
//! node, to a port the device does not have, twice to one port, to itself),
//! duplicate names, faults naming nothing, broken TOML. For each, `inca run`
//! exits non-zero, the error names the field and the line it is on, and no
//! results folder is left behind (not even the capture a link asked for,
//! though that link is built before the error is found).

use std::path::PathBuf;

use assert_cmd::Command;

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("inca-hostile-{}-{name}", std::process::id()))
}

/// A valid scenario: two hosts through an L2/L3 switch, one link captured,
/// one fault. Every case below breaks one thing in it.
const GOOD: &str = r#"name = "hostile"
duration = "1ms"

[[switch]]
name = "sw"
profile = "tofino"
program = "l2l3"

[[host]]
name = "a"
ip = "10.0.0.1"
[[host.workload]]
kind = "udp"
dst = "10.0.0.2:9"
pps = 1000

[[host]] # b
name = "b"
ip = "10.0.0.2"

[[link]]
name = "a-sw"
a = "a:0"
b = "sw:0"
capture = "a-sw.pcap"

[[link]] # b-sw
name = "b-sw"
a = "b:0"
b = "sw:1"

[[fault]]
at = "500us"
crash = "b"
"#;

/// The 1-based line of the last line of `text` containing `marker`.
fn line_of(text: &str, marker: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .iter()
        .rposition(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("{marker:?} not in the scenario"))
        + 1
}

/// (what, scenario text, what the error must name — the field, or where
/// serde cannot give it, the bad value — and a marker on the line it must
/// name).
fn cases() -> Vec<(&'static str, String, &'static str, &'static str)> {
    let r = |from: &str, to: &str| {
        assert!(GOOD.contains(from), "{from:?}");
        GOOD.replacen(from, to, 1)
    };
    vec![
        (
            "a time that is a boolean",
            r("duration = \"1ms\"", "duration = true"),
            "duration",
            "duration =",
        ),
        (
            "a time without a unit",
            r("duration = \"1ms\"", "duration = \"1 fortnight\""),
            "duration",
            "duration =",
        ),
        (
            "an address that is not one",
            r("ip = \"10.0.0.2\"", "ip = \"10.0.0.256\""),
            "ip",
            "10.0.0.256",
        ),
        // [known] A workload is read whole (serde's internally tagged enum,
        // on `kind`), which loses the field's name and line: the error gives
        // the workload's table and the bad value.
        (
            "a rate of the wrong type",
            r("pps = 1000", "pps = \"lots\""),
            "lots",
            "[[host.workload]]",
        ),
        (
            "a negative rate",
            r("pps = 1000", "pps = -5"),
            "-5",
            "[[host.workload]]",
        ),
        (
            "a host without its address",
            r("name = \"b\"\nip = \"10.0.0.2\"", "name = \"b\""),
            "ip",
            "[[host]] # b",
        ),
        (
            "a link without its far end",
            r("a = \"b:0\"\nb = \"sw:1\"", "a = \"b:0\""),
            "b",
            "[[link]] # b-sw",
        ),
        (
            "an unknown table",
            r("[[switch]]", "[[swich]]"),
            "swich",
            "[[swich]]",
        ),
        (
            "a misspelt field",
            r("program = \"l2l3\"", "program = \"l2l3\"\nprogrm = 1"),
            "progrm",
            "progrm",
        ),
        (
            "an unknown program",
            r("program = \"l2l3\"", "program = \"l2l4\""),
            "program",
            "l2l4",
        ),
        (
            "an unknown profile",
            r("profile = \"tofino\"", "profile = \"tofino9\""),
            "profile",
            "tofino9",
        ),
        (
            "a link to an unknown node",
            r("a = \"b:0\"", "a = \"ghost:0\""),
            "a",
            "ghost:0",
        ),
        (
            "a port that is not a number",
            r("b = \"sw:1\"", "b = \"sw:one\""),
            "b",
            "sw:one",
        ),
        (
            "a port the switch does not have",
            r("b = \"sw:1\"", "b = \"sw:9999\""),
            "link",
            "sw:9999",
        ),
        (
            "a port connected twice",
            r("a = \"b:0\"\nb = \"sw:1\"", "a = \"b:0\"\nb = \"sw:0\""),
            "link",
            "b = \"sw:0\"",
        ),
        (
            "a link from a port to itself",
            r("a = \"b:0\"\nb = \"sw:1\"", "a = \"sw:1\"\nb = \"sw:1\""),
            "link",
            "b = \"sw:1\"",
        ),
        (
            "two hosts with one name",
            format!("{GOOD}\n[[host]]\nname = \"a\"\nip = \"10.0.0.3\"\n"),
            "name",
            "name = \"a\"",
        ),
        (
            "a host named like the switch",
            format!("{GOOD}\n[[host]]\nname = \"sw\"\nip = \"10.0.0.3\"\n"),
            "name",
            "name = \"sw\"",
        ),
        (
            "a server named like a host",
            format!("{GOOD}\n[[server]]\nname = \"b\"\nkind = \"tea_dram\"\nip = \"10.0.0.9\"\n"),
            "name",
            "name = \"b\"",
        ),
        (
            "two links with one name",
            r("name = \"b-sw\"", "name = \"a-sw\""),
            "name",
            "a = \"b:0\"",
        ),
        (
            "a fault on an unknown node",
            r("crash = \"b\"", "crash = \"ghost\""),
            "crash",
            "crash =",
        ),
        (
            "a fault on an unknown link",
            r("crash = \"b\"", "link_down = \"nolink\""),
            "link_down",
            "link_down",
        ),
        (
            "a fault of no kind",
            r("crash = \"b\"", "for = \"1us\""),
            "fault",
            "[[fault]]",
        ),
        (
            "broken TOML",
            r("ip = \"10.0.0.2\"", "ip = \"10.0.0.2"),
            "",
            "ip = \"10.0.0.2",
        ),
    ]
}

#[test]
fn bad_scenarios_fail_naming_field_and_line_and_leave_nothing_behind() {
    // The unbroken scenario runs, so each failure below is the one change.
    let dir = tmp("scenarios");
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.toml");
    std::fs::write(&good, GOOD).unwrap();
    let out = tmp("good-out");
    let o = Command::cargo_bin("inca")
        .unwrap()
        .args([
            "run",
            "-q",
            good.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.join("a-sw.pcap").exists(), "the capture of a good run");
    let _ = std::fs::remove_dir_all(&out);

    let mut failures = Vec::new();
    for (i, (what, text, field, marker)) in cases().into_iter().enumerate() {
        let path = dir.join(format!("bad{i}.toml"));
        std::fs::write(&path, &text).unwrap();
        let out = tmp(&format!("bad{i}-out"));
        let o = Command::cargo_bin("inca")
            .unwrap()
            .args([
                "run",
                "-q",
                path.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let line = line_of(&text, marker);
        let names_line =
            err.contains(&format!("line {line}")) || err.contains(&format!(":{line}:"));
        let mut wrong = Vec::new();
        if o.status.success() {
            wrong.push("it ran".to_string());
        }
        if !err.contains(field) {
            wrong.push(format!("the error does not name {field:?}"));
        }
        if !names_line {
            wrong.push(format!("the error does not give line {line}"));
        }
        if out.exists() {
            wrong.push(format!("{} was left behind", out.display()));
            let _ = std::fs::remove_dir_all(&out);
        }
        if !wrong.is_empty() {
            failures.push(format!("{what}: {}\n    {}", wrong.join("; "), err.trim()));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        failures.is_empty(),
        "{} bad cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
