//! E2 and E11 in quick mode: the shapes spec §8 expects, asserted on the
//! computed data.

use inca_exoplane::experiments::e11::{self, Scenario, Sweeps};
use inca_exoplane::experiments::e2::{self, E2Config};
use inca_exoplane::experiments::e9::E9Config;

#[test]
fn e2_a_few_keys_carry_most_traffic_in_every_epoch_alike() {
    let cfg = E2Config::quick();
    println!("seed {}", cfg.seed);
    let cdfs = e2::run(&cfg).unwrap();
    assert_eq!(cdfs.len(), 2 * cfg.epochs as usize);
    for c in &cdfs {
        // Every CDF rises to the whole traffic, never falls.
        assert!(
            (c.packet_share.last().unwrap() - 1.0).abs() < 1e-12,
            "{c:?}"
        );
        assert!(c.packet_share.windows(2).all(|w| w[0] <= w[1]), "{c:?}");
        assert!(c.byte_share.windows(2).all(|w| w[0] <= w[1]), "{c:?}");
        // Skew: the top 1 % of keys carry many times their share, the
        // top 10 % most of the packets.
        let top1 = e2::share(c, 0.01, false);
        let top10 = e2::share(c, 0.1, false);
        assert!(top1 > 10.0 * 0.01, "{}: top 1 % carries {top1}", c.scenario);
        assert!(top10 > 0.5, "{}: top 10 % carries {top10}", c.scenario);
        assert!(e2::share(c, 0.01, true) > 10.0 * 0.01);
    }
    for s in e2::summarise(&cdfs) {
        // Stable: curves within a few points of each other, and the same
        // keys on top epoch after epoch.
        assert!(s.max_distance < 0.05, "{s:?}");
        assert!(s.min_top1_overlap > 0.7, "{s:?}");
    }
    // The front-end key adds the tenant VLAN, a function of the 5-tuple:
    // the same keys, the same curves.
    let (leaf, fe): (Vec<_>, Vec<_>) = cdfs.iter().partition(|c| c.scenario == "leaf");
    for (a, b) in leaf.iter().zip(&fe) {
        assert_eq!(a.keys, b.keys);
        assert_eq!(a.packet_share, b.packet_share);
    }
}

#[test]
fn e11_memory_and_sync_grow_linearly_and_the_runtime_is_a_small_share() {
    let sw = Sweeps::quick();
    let points = e11::run(&sw, 11).unwrap();
    let (lo, hi) = (sw.entries[0], sw.entries[1]);
    assert_eq!(hi, 2 * lo);
    let at = |s: Scenario, e: u64, d: u8, t: f64| {
        points
            .iter()
            .find(|p| p.scenario == s.name() && p.entries == e && p.devices == d && p.t_c == t)
            .unwrap_or_else(|| panic!("{s:?} {e} {d} {t} missing"))
    };
    let near2 = |r: f64| (1.8..=2.2).contains(&r);
    for s in Scenario::ALL {
        for p in points.iter().filter(|p| p.scenario == s.name()) {
            assert_eq!(p.promoted, p.entries, "every FM slot filled: {p:?}");
            assert!(p.rounds >= 4, "{p:?}");
            // The wire carries the app of every item on top of §5.10's
            // formula (inca's addition, docs/wire.md): exactly 1 B an item.
            assert_eq!(p.traffic.req_frames, p.traffic.resp_frames, "{p:?}");
            assert_eq!(
                p.traffic.bytes() - p.traffic.formula_bytes,
                p.traffic.items,
                "{p:?}"
            );
        }
        let (a, b) = (at(s, lo, 4, 1.0), at(s, hi, 4, 1.0));
        let mem = b.overhead.total() as f64 / a.overhead.total() as f64;
        assert!(near2(mem), "{s:?}: hub memory ×{mem} at 2× entries");
        let map = b.overhead.device_map_bytes() as f64 / a.overhead.device_map_bytes() as f64;
        assert!(near2(map), "{s:?}: device map ×{map}");
        if s == Scenario::FrontEnd {
            // The per-VM NAT keeps no data-plane state: nothing to sync.
            assert_eq!((b.overhead.h_bytes(), b.traffic.bytes()), (0, 0), "{b:?}");
        } else {
            let bw = b.bandwidth_bps() / a.bandwidth_bps();
            assert!(near2(bw), "{s:?}: sync bandwidth ×{bw} at 2× entries");
            // Devices: every entry has a primary and a replica, so one
            // device holds one copy and two hold two: traffic and H double.
            let (d1, d2) = (at(s, hi, 1, 1.0), at(s, hi, 2, 1.0));
            let bw = d2.bandwidth_bps() / d1.bandwidth_bps();
            assert!(near2(bw), "{s:?}: sync bandwidth ×{bw} from 1 to 2 devices");
            let h = d2.overhead.h_bytes() as f64 / d1.overhead.h_bytes() as f64;
            assert!(near2(h), "{s:?}: H ×{h} from 1 to 2 devices");
            // T_c: the same bytes a round, twice the rounds.
            let (t1, t05) = (at(s, hi, 4, 1.0), at(s, hi, 4, 0.5));
            let bw = t05.bandwidth_bps() / t1.bandwidth_bps();
            assert!(near2(bw), "{s:?}: sync bandwidth ×{bw} at half T_c");
        }
        // Switch: at the thesis's 10,240 entries the runtime takes a small
        // share of each resource, and the FM part grows with entries.
        let small = e11::switch_share(s, e11::FM_ENTRIES).unwrap();
        for (name, used, _, total) in &small.resources {
            let pct = 100.0 * *used as f64 / *total as f64;
            assert!(pct < 10.0, "{s:?}: {name} {pct:.1} %");
        }
        // The flow managers' SRAM is affine in entries (a fixed part, then
        // blocks in proportion): each doubling adds twice the last step.
        let sram = |fm: u64| e11::switch_share(s, fm).unwrap().resources[0].2 as f64;
        let (x1, x2, x4) = (
            sram(e11::FM_ENTRIES),
            sram(2 * e11::FM_ENTRIES),
            sram(4 * e11::FM_ENTRIES),
        );
        let step = (x4 - x2) / (x2 - x1);
        assert!(near2(step), "{s:?}: FM SRAM {x1} → {x2} → {x4}");
    }
}

/// E9 (quick: 5 s of traffic): the copies of the firewall's synchronised
/// counters are further apart right after a merge the more unequal the
/// switch's and the NIC's shares of the counting (30 % tail further than
/// 40 %, further than 50 %), and exactly equal two rounds after the traffic
/// stops.
#[test]
fn e9_copies_drift_with_the_unequal_share_and_end_equal() {
    let points = inca_exoplane::experiments::e9::run(&E9Config::quick()).unwrap();
    let summary = inca_exoplane::experiments::e9::summarise(&points);
    println!("{summary:?}");
    let at = |tail: u32| summary.iter().find(|s| s.0 == tail).copied().unwrap();
    let (t30, t40, t50) = (at(30), at(40), at(50));
    assert!(t30.1 > t40.1 && t40.1 > t50.1, "{summary:?}");
    for s in &summary {
        assert_eq!(
            s.2, 0.0,
            "tail {} %: copies still apart after the traffic stopped",
            s.0
        );
    }
    assert!(
        points.iter().all(|p| p.cells == 2),
        "the per-source and per-tenant cells"
    );
}
