//! `inca check` as a user runs it: exit status, report, errors.

use assert_cmd::Command;

fn inca() -> Command {
    Command::cargo_bin("inca").unwrap()
}

fn run(args: &[&str]) -> (bool, String, String) {
    let out = inca().args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn nat_with_65536_flows_fits_and_prints_the_report() {
    let (ok, out, err) = run(&[
        "check",
        "--profile",
        "tofino",
        "nat",
        "--set",
        "flows=65536",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("fits"), "{out}");
    for needle in [
        "SRAM blocks",
        "TCAM blocks",
        "hash bits",
        "stage",
        "nat_out",
        "nat_in",
        "%",
    ] {
        assert!(out.contains(needle), "report lacks {needle:?}:\n{out}");
    }
}

#[test]
fn nat_with_ten_million_flows_fails_on_sram() {
    let (ok, out, err) = run(&[
        "check",
        "--profile",
        "tofino",
        "nat",
        "--set",
        "flows=10000000",
    ]);
    assert!(!ok, "must exit non-zero:\n{out}");
    assert!(err.contains("does not fit"), "{err}");
    assert!(err.contains("nat_out"), "names the object: {err}");
    assert!(err.contains("SRAM"), "names the resource: {err}");
    assert!(err.contains("short by"), "gives the shortfall: {err}");
}

#[test]
fn the_same_nat_fits_a_smartnic_in_dram() {
    let (ok, out, err) = run(&[
        "check",
        "--profile",
        "smartnic",
        "nat",
        "--set",
        "flows=10000000",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("DRAM"), "{out}");
}

#[test]
fn l2l3_fits_and_profile_overrides_apply() {
    assert!(run(&["check", "l2l3"]).0);
    // With 2 stages the LPM → next-hop dependency chain (3 stages) cannot fit.
    let (ok, _, err) = run(&["check", "l2l3", "--profile-set", "stages=2"]);
    assert!(!ok);
    assert!(err.contains("stages"), "{err}");
}

#[test]
fn json_report_is_machine_readable() {
    let (ok, out, err) = run(&["check", "nat", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v.get("objects").is_some(), "{out}");
}

#[test]
fn bad_input_names_what_is_wrong() {
    let (ok, _, err) = run(&["check", "natt"]);
    assert!(!ok && err.contains("nat") && err.contains("l2l3"), "{err}");
    let (ok, _, err) = run(&["check", "nat", "--set", "flow=5"]);
    assert!(
        !ok && err.contains("\"flow\"") && err.contains("flows"),
        "{err}"
    );
    let (ok, _, err) = run(&["check", "nat", "--set", "flows=many"]);
    assert!(!ok && err.contains("flows"), "{err}");
    let (ok, _, err) = run(&["check", "--profile", "tofin", "nat"]);
    assert!(!ok && err.contains("tofino"), "{err}");
    let (ok, _, err) = run(&["check", "nat", "--profile-set", "stages=lots"]);
    assert!(!ok && err.contains("stages"), "{err}");
}

#[test]
fn list_names_the_programs() {
    let (ok, out, _) = run(&["check", "--list"]);
    assert!(ok);
    assert!(
        out.contains("nat") && out.contains("l2l3") && out.contains("flows"),
        "{out}"
    );
}

#[test]
fn largest_finds_the_limit_and_names_what_runs_out() {
    let (ok, out, err) = run(&["check", "--profile", "tofino", "nat", "--largest", "flows"]);
    assert!(ok, "{err}");
    let n: u64 = out
        .lines()
        .next()
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(out.contains("SRAM"), "{out}");
    // The limit is exact: n fits, n + 1 does not.
    assert!(run(&["check", "nat", "--set", &format!("flows={n}")]).0);
    assert!(!run(&["check", "nat", "--set", &format!("flows={}", n + 1)]).0);
    // A parameter that must be a power of two still reports a resource.
    let (ok, out, _) = run(&["check", "flow_counter", "--largest", "flows"]);
    assert!(ok && out.contains("map-RAM"), "{out}");
}

#[test]
fn system_programs_are_checked_and_listed() {
    let (ok, out, err) = run(&["check", "redplane_nat", "--set", "slots=100000"]);
    assert!(ok, "{err}");
    assert!(out.contains("fits") && out.contains("SRAM blocks"), "{out}");
    let (ok, out, err) = run(&["check", "tea_nat"]);
    assert!(ok, "{err}");
    assert!(out.contains("fits"), "{out}");
    let (ok, out, _) = run(&["check", "--list"]);
    assert!(ok);
    for name in ["redplane_sync_counter", "redplane_hh", "tea_vpn"] {
        assert!(out.contains(name), "--list lacks {name}:\n{out}");
    }
    // A RedPlane parameter that does not exist is an error naming it.
    let (ok, _, err) = run(&["check", "redplane_nat", "--set", "leese_period_us=5"]);
    assert!(!ok);
    assert!(err.contains("leese_period_us"), "{err}");
}

#[test]
fn a_builtin_campaign_runs_and_an_unknown_one_is_named() {
    let (ok, out, err) = run(&[
        "campaign",
        "tea-lookup",
        "--seeds",
        "1",
        "--first-seed",
        "3",
        "-q",
    ]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("1 seeds") && out.contains("no violations"),
        "{out}"
    );
    assert!(out.contains("judged: tea: lookups checked: "), "{out}");
    // Two plain NAT switches: no system checks them, so the campaign
    // judged nothing, and that is a failure, not "no violations".
    let plain = format!(
        "{}/../../experiments/two-switches-load.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let (ok, out, err) = run(&["campaign", &plain, "--seeds", "1", "-q"]);
    assert!(!ok && out.contains("NOTHING JUDGED"), "{out}{err}");
    let (ok, _, err) = run(&["campaign", "no-such-campaign", "--seeds", "1", "-q"]);
    assert!(!ok);
    assert!(
        err.contains("tea-lookup") && err.contains("redplane-snapshot"),
        "{err}"
    );
}

#[test]
fn a_composite_reports_per_app_resources_and_names_the_app_that_does_not_fit() {
    let apps = ["--set", "apps=nat,firewall,univmon,acl"];
    let small = ["--set", "nat.flows=4096", "--set", "firewall.flows=4096"];
    let mut args = vec!["check", "--profile", "tofino", "composite"];
    args.extend(apps);
    args.extend(small);
    let (ok, out, err) = run(&args);
    assert!(ok, "{err}");
    assert!(out.contains("fits"), "{out}");
    // The per-block table: one row per app, and the classifier.
    let rows: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("block "))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    let names: Vec<&str> = rows
        .iter()
        .filter_map(|r| r.split_whitespace().next())
        .collect();
    assert_eq!(
        names,
        ["classifier", "nat", "firewall", "univmon", "acl"],
        "{out}"
    );
    for needle in [
        "nat/nat_out",
        "firewall/fw_conn",
        "univmon/um_l0_row0",
        "acl/acl_rules",
    ] {
        assert!(out.contains(needle), "report lacks {needle:?}:\n{out}");
    }

    let mut args = vec!["check", "--profile", "tofino", "composite"];
    args.extend(apps);
    args.extend([
        "--set",
        "nat.flows=10000000",
        "--set",
        "firewall.flows=4096",
    ]);
    let (ok, out, err) = run(&args);
    assert!(!ok, "must exit non-zero:\n{out}");
    assert!(err.contains("does not fit"), "{err}");
    assert!(
        err.contains("\"nat/nat_out\""),
        "names the app and the object: {err}"
    );
}

#[test]
fn the_acl_and_the_composite_are_listed() {
    let (ok, out, _) = run(&["check", "--list"]);
    assert!(ok);
    assert!(out.contains("acl"), "{out}");
    assert!(out.contains("composite"), "{out}");
}

#[test]
fn the_load_time_check_runs_after_placement() {
    let (ok, out, err) = run(&["check", "nat"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("load-time check of nat (seed 1)") && out.contains("no findings"),
        "{out}"
    );
    let (ok, out, _) = run(&["check", "nat", "--no-load-check"]);
    assert!(ok && !out.contains("load-time check"), "{out}");
    // --json keeps stdout to the resource report.
    let (ok, out, err) = run(&["check", "nat", "--json"]);
    assert!(ok && out.trim_start().starts_with('{'), "{out}");
    assert!(err.contains("load-time check of nat"), "{err}");
}

#[test]
fn a_known_violation_is_reported_and_refuses_only_when_strict() {
    // RedPlane's KV looks its shard map up after the lease stages decided
    // (the program declares it known, with the reason).
    let (ok, out, err) = run(&["check", "redplane_kv"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("known violation (RedPlane looks `rp_shard_map` up last")
            && out.contains("dependency missing: \"rp_shard_map\" depends on"),
        "{out}"
    );
    let (ok, _, err) = run(&["check", "redplane_kv", "--strict"]);
    assert!(!ok);
    assert!(
        err.contains("redplane_kv refused by the load-time check")
            && err.contains("\"rp_shard_map\"")
            && err.contains("path (ingress): rp_lease_tbl → rp_lease_expiry → rp_seq_acked"),
        "{err}"
    );
}

#[test]
fn exoplane_programs_are_listed_checked_and_refused_by_name() {
    let (ok, out, _) = run(&["check", "--list"]);
    assert!(ok);
    for name in ["exoplane_switch", "exoplane_device"] {
        assert!(out.contains(name), "--list lacks {name}:\n{out}");
    }
    // The evaluation's 10,240 flow-manager entries fit a tofino, with the
    // per-app objects namespaced.
    let (ok, out, err) = run(&["check", "--profile", "tofino", "exoplane_switch"]);
    assert!(ok, "{err}");
    assert!(out.contains("fits") && out.contains("exo/fm_nat"), "{out}");
    // The device program is checked on the smart NIC it is meant for.
    let (ok, out, err) = run(&["check", "exoplane_device"]);
    assert!(ok, "{err}");
    assert!(out.contains("fits"), "{out}");
    // A flow manager beyond the switch's SRAM is refused, naming it.
    let (ok, _, err) = run(&[
        "check",
        "--profile",
        "tofino",
        "exoplane_switch",
        "--set",
        "fm=100M",
    ]);
    assert!(!ok);
    assert!(err.contains("fm_"), "{err}");
    // An unknown app is named.
    let (ok, _, err) = run(&["check", "exoplane_switch", "--set", "apps=nat,xyz"]);
    assert!(!ok);
    assert!(err.contains("xyz"), "{err}");
}
