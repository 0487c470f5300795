//! SwiSh's built-in campaigns run through `inca campaign` (the binary, as a
//! user runs them): each of `swish-sro`, `swish-sdw`, `swish-sdw-recovery`, `swish-sdw-join`
//! and `swish-ewo` passes two seeds and says what it judged. The protocols'
//! own tests run more seeds and show the broken variants caught.

use std::process::Command;

#[test]
fn swish_campaigns_run_and_judge() {
    for (name, judged) in [
        ("swish-sro", "sro S1: operations"),
        ("swish-sdw", "sdw: D2 queries"),
        ("swish-sdw-recovery", "sdw: D9 recoveries"),
        ("swish-sdw-join", "sdw: joins"),
        ("swish-ewo", "ewo: E2 cells compared"),
    ] {
        println!("campaign {name}, seeds 1-2");
        let out = Command::new(env!("CARGO_BIN_EXE_inca"))
            .args(["campaign", name, "--seeds", "2"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("no violations"), "{name}: {text}");
        let line = text
            .lines()
            .find(|l| l.contains(judged))
            .unwrap_or_else(|| panic!("{name}: no `{judged}` line: {text}"));
        let n: u64 = line.rsplit(':').next().unwrap().trim().parse().unwrap();
        assert!(n > 0, "{name}: {line}");
    }
}
