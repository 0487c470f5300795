//! Per-hop telemetry: probes crossing three routers marked `telemetry =
//! true` come out with one latency histogram per hop whose medians are the
//! configured link and router latencies, and add up to the one-way latency;
//! a bounded stack counts what it could not hold; unmarked devices do not
//! stamp.

use std::collections::BTreeMap;

use inca_sim::engine::Node;
use inca_sim::factory::FactoryError;
use inca_sim::link::WIRE_OVERHEAD_BYTES;
use inca_sim::nodes::host::Host;
use inca_sim::scenario::{Built, Loaded, SwitchFactory};
use inca_switch::control::serialisation;
use inca_switch::Profile;
use inca_wire::telemetry::{STAMP_LEN, TELEMETRY_HEADER_LEN};

struct NoSwitches;
impl SwitchFactory for NoSwitches {
    fn build(
        &self,
        program: &str,
        _: &[(String, String)],
        _: Profile,
    ) -> Result<Box<dyn Node>, FactoryError> {
        Err(FactoryError::Other(format!(
            "no programmable switches here (asked for {program})"
        )))
    }
}

const RATE: u64 = 10_000_000_000;
const SIZE: usize = 200;
/// Router forwarding latencies, ns.
const ROUTER: [u64; 3] = [1_000, 2_000, 3_000];
/// Link propagation delays, ns: h1-r1, r1-r2, r2-r3, r3-h2.
const DELAY: [u64; 4] = [500, 700, 900, 1_100];

fn scenario(marked: [bool; 3], depth: Option<u8>) -> String {
    let mut s = format!(
        "name = \"telemetry\"\nduration = \"2ms\"\n{}\
         [defaults.link]\nrate = \"10Gbps\"\n\n",
        depth.map_or(String::new(), |d| format!("telemetry_depth = {d}\n"))
    );
    for (i, (lat, m)) in ROUTER.iter().zip(marked).enumerate() {
        s += &format!(
            "[[router]]\nname = \"r{}\"\nlatency = \"{lat}ns\"\ntelemetry = {m}\n\n",
            i + 1
        );
    }
    s += "[[host]]\nname = \"h1\"\nip = \"10.0.0.1\"\n\
          [[host.workload]]\nkind = \"udp\"\ndst = \"10.0.0.2:9\"\npps = 200000\n";
    s += &format!("size = {SIZE}\nstart = \"100us\"\n\n");
    s += "[[host]]\nname = \"h2\"\nip = \"10.0.0.2\"\n\n";
    let ends = [
        ("h1:0", "r1:0"),
        ("r1:1", "r2:0"),
        ("r2:1", "r3:0"),
        ("r3:1", "h2:0"),
    ];
    for ((a, b), d) in ends.iter().zip(DELAY) {
        s += &format!("[[link]]\na = \"{a}\"\nb = \"{b}\"\ndelay = \"{d}ns\"\n\n");
    }
    s
}

fn run(marked: [bool; 3], depth: Option<u8>) -> Built {
    let loaded = Loaded::from_str(&scenario(marked, depth), "telemetry.toml", &[]).unwrap();
    println!("seed 1");
    let mut b = loaded.build(&NoSwitches, Some(1), None).unwrap();
    b.sim.run_until(b.duration, |_| {});
    b
}

/// Median of each hop histogram of h2, by name.
fn hops(b: &Built) -> BTreeMap<String, (u64, u64)> {
    let h2 = b.sim.node_id("h2").unwrap();
    b.sim
        .node::<Host>(h2)
        .unwrap()
        .hop_latencies()
        .map(|(n, h)| (n, (h.summary().p50, h.count())))
        .collect()
}

/// Link time of a frame of `len` bytes on link `i`: propagation plus
/// serialisation.
fn link(i: usize, len: usize) -> u64 {
    DELAY[i] + serialisation(len + WIRE_OVERHEAD_BYTES as usize, RATE)
}

/// Histogram medians keep three significant digits.
fn close(got: u64, want: u64) -> bool {
    got.abs_diff(want) <= want / 1000 + 1
}

#[test]
fn per_hop_medians_are_the_configured_latencies_and_add_up() {
    let b = run([true; 3], None);
    let hops = hops(&b);
    println!("{hops:#?}");
    // The frame grows by the stack header and two records per router.
    let len = |routers: usize| {
        SIZE + if routers == 0 {
            0
        } else {
            TELEMETRY_HEADER_LEN + 2 * routers * STAMP_LEN
        }
    };
    let want = [
        ("hop:src>r1.in", link(0, len(0))),
        ("hop:r1.in>r1.out", ROUTER[0]),
        ("hop:r1.out>r2.in", link(1, len(1))),
        ("hop:r2.in>r2.out", ROUTER[1]),
        ("hop:r2.out>r3.in", link(2, len(2))),
        ("hop:r3.in>r3.out", ROUTER[2]),
        ("hop:r3.out>dst", link(3, len(3))),
    ];
    assert_eq!(hops.len(), want.len(), "{hops:?}");
    let h2 = b.sim.node::<Host>(b.sim.node_id("h2").unwrap()).unwrap();
    let e2e = h2.latency().summary();
    assert!(e2e.count > 100, "probes received: {}", e2e.count);
    for (name, v) in want {
        let (median, count) = hops[name];
        assert!(close(median, v), "{name}: median {median}, configured {v}");
        assert_eq!(count, e2e.count, "{name}: one sample per probe");
    }
    let sum: u64 = want.iter().map(|(n, _)| hops[*n].0).sum();
    assert!(
        close(sum, e2e.p50),
        "hops add up to {sum}, one-way median {}",
        e2e.p50
    );
    let configured: u64 = want.iter().map(|(_, v)| v).sum();
    assert!(close(e2e.p50, configured));
    // Probes still in flight at the end were stamped but not received
    // (a probe every 5 µs, about 12 µs on the way).
    let stamps = b.sim.stats().telemetry_stamps;
    assert!(
        (6 * e2e.count..=6 * (e2e.count + 4)).contains(&stamps),
        "{stamps} stamps for {} probes",
        e2e.count
    );
    assert_eq!(b.sim.stats().telemetry_overflows, 0);
    // And the report has them.
    let r = h2.report(0);
    assert!(r.histograms.contains_key("hop:r2.in>r2.out"));
    assert_eq!(r.counters["telemetry.probes"], e2e.count);
}

#[test]
fn a_full_stack_counts_the_stamps_it_drops() {
    let b = run([true; 3], Some(4));
    let hops = hops(&b);
    println!("{hops:#?}");
    // Four records: r1 and r2 in and out; r3's two stamps are counted.
    assert!(hops.contains_key("hop:r2.out>dst"), "{hops:?}");
    assert!(!hops.keys().any(|k| k.contains("r3")), "{hops:?}");
    let n = hops["hop:r2.out>dst"].1;
    let (stamps, over) = (
        b.sim.stats().telemetry_stamps,
        b.sim.stats().telemetry_overflows,
    );
    assert!((4 * n..=4 * (n + 4)).contains(&stamps), "{stamps} for {n}");
    assert!((2 * n..=2 * (n + 4)).contains(&over), "{over} for {n}");
    let h2 = b.sim.node::<Host>(b.sim.node_id("h2").unwrap()).unwrap();
    assert_eq!(h2.report(0).counters["telemetry.overflowed"], n);
    // The hop over r3 spans both links and r3.
    let want = ROUTER[2]
        + link(2, SIZE + TELEMETRY_HEADER_LEN + 4 * STAMP_LEN)
        + link(3, SIZE + TELEMETRY_HEADER_LEN + 4 * STAMP_LEN);
    assert!(close(hops["hop:r2.out>dst"].0, want));
}

#[test]
fn unmarked_devices_do_not_stamp() {
    let b = run([true, false, true], None);
    let hops = hops(&b);
    assert!(hops.contains_key("hop:r1.out>r3.in"), "{hops:?}");
    assert!(!hops.keys().any(|k| k.contains("r2")), "{hops:?}");
    let none = run([false; 3], None);
    assert!(self::hops(&none).is_empty());
    assert_eq!(none.sim.stats().telemetry_stamps, 0);
    let h2 = none
        .sim
        .node::<Host>(none.sim.node_id("h2").unwrap())
        .unwrap();
    assert!(!h2.report(0).counters.contains_key("telemetry.probes"));
}
