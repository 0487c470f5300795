//! SDW on the tofino profile: what placement says of the spec's 3 × 64K
//! collection (and what fits if it does not), and D10 — the load-time
//! check finds no register reached twice on any path and no access that
//! contradicts the §5.5 stage order the program declares.

use inca_apps::params::Params;
use inca_swish::sdw::program::SdwProgram;
use inca_switch::loadcheck::{load_check, LoadCheckOptions};
use inca_switch::{check, Profile};

fn program(args: &[&str]) -> SdwProgram {
    SdwProgram::from_params(&Params::parse(args.iter().copied()).unwrap()).unwrap()
}

fn fits(rows: u32, cols: u32, dedup: &str) -> Result<u32, String> {
    let r = format!("rows={rows}");
    let c = format!("cols={cols}");
    let d = format!("dedup={dedup}");
    let mut p = program(&[&r, &c, &d]);
    check(&Profile::tofino(), &mut p)
        .map(|pl| {
            pl.objects
                .iter()
                .filter_map(|o| match o.location {
                    inca_switch::placement::Location::Stages { last, .. } => Some(last),
                    _ => None,
                })
                .max()
                .unwrap_or(0)
                + 1
        })
        .map_err(|e| e.to_string())
}

/// The issue asks whether 3 rows × 64K columns fit before experiments.
/// Prints the answer and the largest power-of-two C that fits per row
/// count; asserts what the report states (docs/architecture.md, SDW).
#[test]
fn placement_at_3_rows_by_64k() {
    for dedup in ["bitmap", "counter"] {
        match fits(3, 65_536, dedup) {
            Ok(stages) => println!("3 x 64K ({dedup}): fits in {stages} stages"),
            Err(e) => println!("3 x 64K ({dedup}): does not fit: {e}"),
        }
        for rows in 1..=3 {
            let best = (0..=16)
                .rev()
                .map(|k| 1u32 << k)
                .find(|&c| fits(rows, c, dedup).is_ok());
            println!("{rows} row(s) ({dedup}): largest power-of-two C that fits = {best:?}");
        }
    }
    assert!(fits(3, 4_096, "counter").is_ok(), "3 x 4K must fit");
}

/// D10: the load-time check exercises every packet type (the program's
/// samples: DATA, ACK, READY for two windows, app updates and queries,
/// ADVANCE, START) and the generated streams, and finds nothing.
#[test]
fn d10_load_check_finds_no_double_access_or_order_violation() {
    for args in [
        &["cols=64", "dedup=bitmap"][..],
        &["cols=64", "dedup=counter"],
        &["cols=16", "replicas=40", "dedup=counter"],
    ] {
        let p = program(args);
        let report = load_check(&Profile::tofino(), p, LoadCheckOptions { seed: 7 }).unwrap();
        println!("{args:?}: {report}");
        assert!(report.skipped.is_none());
        assert!(report.passes > 0 && report.accesses > 0);
        assert!(report.passed(), "{report}");
        assert!(report.known.is_empty());
    }
}

/// D10, static half: placed on the tofino profile, the registers sit in
/// stages that follow §5.5's global order.
#[test]
fn d10_stages_follow_the_global_order() {
    for dedup in ["bitmap", "counter"] {
        let d = format!("dedup={dedup}");
        let mut p = program(&["cols=1024", "replicas=40", "dedup=counter"][..]);
        if dedup == "bitmap" {
            p = program(&["cols=1024", &d]);
        }
        let pl = check(&Profile::tofino(), &mut p).unwrap();
        let stage = |name: &str| {
            pl.objects
                .iter()
                .find(|o| o.name == name)
                .map(|o| match o.location {
                    inca_switch::placement::Location::Stages { first, .. } => first,
                    _ => panic!("{name} not in stages"),
                })
        };
        let dedup_obj = if dedup == "bitmap" {
            "sdw_recv_cols"
        } else {
            "sdw_next_col"
        };
        let mut order = vec!["sdw_winreg", "sdw_flagsR", "sdw_ready_cnt"];
        let mut filter = vec!["sdw_winreg", dedup_obj];
        if dedup == "counter" {
            filter.push("sdw_flagsA");
            order.push("sdw_flagsA");
        }
        for chain in [order, filter] {
            let mut chain = chain;
            chain.extend([
                "sdw_TQ0",
                "sdw_Q0",
                "sdw_TP0",
                "sdw_P0",
                "sdw_status",
                "sdw_send_state",
                "sdw_retx_mask",
            ]);
            let stages: Vec<u32> = chain
                .iter()
                .map(|n| stage(n).unwrap_or_else(|| panic!("{n} missing")))
                .collect();
            println!("{dedup}: {chain:?} in stages {stages:?}");
            assert!(
                stages.windows(2).all(|w| w[0] < w[1]),
                "{chain:?} {stages:?}"
            );
        }
    }
}
