//! `inca run` as a user runs it: determinism, the quickstart's story, and
//! scenario errors that name the field and the line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod inca_run;
use inca_run::{inca_run, repo, tmp};

/// Every file of a results folder, as bytes, except the wall-clock time in
/// the summary (the one thing that may differ between identical runs).
fn results(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            let mut bytes = std::fs::read(&p).unwrap();
            if rel == "summary.json" {
                let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                v["wall_seconds"] = serde_json::Value::Null;
                bytes = serde_json::to_vec(&v).unwrap();
            }
            files.insert(rel, bytes);
        }
    }
    files
}

fn fingerprint(files: &BTreeMap<String, Vec<u8>>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    files.hash(&mut h);
    h.finish()
}

/// The quickstart at a tenth of its link rate and cut short, so a debug
/// build runs it in seconds; the story is the same.
fn quick(seed: &str, out: &Path) -> (bool, String, String) {
    let scenario = repo().join("experiments/quickstart.toml");
    inca_run(&[
        scenario.to_str().unwrap(),
        "--seed",
        seed,
        "--out",
        out.to_str().unwrap(),
        "--set",
        "defaults.link.rate=1Gbps",
        "--set",
        "duration=700ms",
    ])
}

#[test]
fn same_scenario_and_seed_give_identical_results() {
    let (a, b, c) = (tmp("a"), tmp("b"), tmp("c"));
    println!("seed 7");
    assert!(quick("7", &a).0);
    assert!(quick("7", &b).0);
    let (ra, rb) = (results(&a), results(&b));
    assert!(
        ra.contains_key("nodes.json") && ra.contains_key("links.json"),
        "{:?}",
        ra.keys()
    );
    assert!(ra.keys().any(|k| k.starts_with("series/")));
    assert_eq!(
        fingerprint(&ra),
        fingerprint(&rb),
        "two runs with seed 7 differ"
    );
    println!("seed 8");
    assert!(quick("8", &c).0);
    assert_ne!(
        fingerprint(&ra),
        fingerprint(&results(&c)),
        "another seed should change the run (ECMP hashing)"
    );
    for d in [a, b, c] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn quickstart_shows_connections_breaking_when_the_nat_fails() {
    let out = tmp("story");
    let (ok, stdout, stderr) = quick("1", &out);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("agg1 crashed"), "{stdout}");
    // With seed 1, ECMP puts c3 and c4 on agg1 and c1 and c2 on agg2.
    for c in ["c3", "c4"] {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{c}:")))
            .unwrap_or_default();
        assert!(
            line.contains("reset"),
            "{c} should be reset after agg1 fails: {line}\n{stdout}"
        );
    }
    for c in ["c1", "c2"] {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{c}:")))
            .unwrap_or_default();
        assert!(
            line.contains("open"),
            "{c} goes through agg2 and survives: {line}\n{stdout}"
        );
    }
    let _ = std::fs::remove_dir_all(out);
}

fn write_scenario(name: &str, text: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("inca-run-test-{}-{name}.toml", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

const GOOD: &str = r#"name = "pair"
duration = "1ms"

[[host]]
name = "a"
ip = "10.0.0.1"
[[host.workload]]
kind = "udp"
dst = "10.0.0.2:9"
pps = 1000

[[host]]
name = "b"
ip = "10.0.0.2"

[[link]]
a = "a:0"
b = "b:0"
"#;

#[test]
fn scenario_errors_name_the_field_and_the_line() {
    let cases = [
        (
            GOOD.replace("duration = \"1ms\"", "duration = \"1 fortnight\""),
            "duration",
            2,
        ),
        (GOOD.replace("b = \"b:0\"", "b = \"bb:0\""), "b", 18),
        (GOOD.replace("a = \"a:0\"", "a = \"a:zero\""), "a", 17),
        // Workloads are told apart by `kind`, and serde reads such a table
        // whole, so the error points at the workload's table (line 7), not
        // at the field's own line.
        (
            GOOD.replace("pps = 1000", "pps = 1000\nbogus = 1"),
            "bogus",
            7,
        ),
        (
            GOOD.replace("name = \"pair\"", "name = \"pair\"\nsede = 3"),
            "sede",
            2,
        ),
    ];
    for (i, (text, field, line)) in cases.iter().enumerate() {
        let path = write_scenario(&format!("bad{i}"), text);
        let (ok, _, err) = inca_run(&[
            path.to_str().unwrap(),
            "--out",
            tmp("bad").to_str().unwrap(),
        ]);
        assert!(!ok, "case {i} should fail");
        assert!(
            err.contains(field),
            "case {i}: error does not name {field:?}: {err}"
        );
        assert!(
            err.contains(&format!("line {line}")) || err.contains(&format!(":{line}:")),
            "case {i}: error does not give line {line}: {err}"
        );
        let _ = std::fs::remove_file(path);
    }
}

#[test]
fn a_small_scenario_runs_and_set_overrides_apply() {
    let path = write_scenario("good", GOOD);
    let out = tmp("good");
    let (ok, stdout, err) = inca_run(&[
        path.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--set",
        "a-b.delay=5us",
    ]);
    assert!(ok, "{err}");
    assert!(stdout.contains("pair"), "{stdout}");
    let links: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("links.json")).unwrap()).unwrap();
    assert_eq!(links[0]["config"]["delay"], 5000, "{links}");
    let (ok, _, err) = inca_run(&[path.to_str().unwrap(), "--set", "nosuch.delay=5us"]);
    assert!(!ok && err.contains("nosuch"), "{err}");
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_dir_all(out);
}
