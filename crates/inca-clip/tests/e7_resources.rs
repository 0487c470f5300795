//! E7 (spec §8.2, Table II): each CLIP module's share of a Tofino-class
//! switch, from the placement. The shape the paper reports: every module
//! small; Selecting register (SRAM) dominated with no TCAM; only
//! Forwarding uses TCAM (LPM).

use inca_clip::modules::{placement, shares, table, Module};
use inca_switch::Profile;

#[test]
fn every_module_is_small_and_only_forwarding_uses_tcam() {
    let p = placement(&Profile::tofino()).expect("fits");
    let rows = shares(&p);
    println!("{}", table(&rows));
    let row = |m: Module| rows.iter().find(|r| r.module == m).unwrap();
    for r in &rows {
        for (what, v) in [
            ("crossbar", r.crossbar),
            ("SRAM", r.sram),
            ("TCAM", r.tcam),
            ("VLIW", r.vliw),
            ("hash", r.hash_bits),
        ] {
            assert!(v < 25.0, "{} takes {v:.1} % of {what}", r.module.name());
        }
    }
    let sel = row(Module::Selecting);
    assert_eq!(sel.tcam, 0.0);
    assert!(sel.sram > 0.0 && sel.salu > 0.0, "the sketch is registers");
    assert_eq!(row(Module::Scalability).tcam, 0.0);
    assert!(row(Module::Forwarding).tcam > 0.0, "LPM is TCAM");
}
