//! The per-user rate limiter through the switch model with real frames,
//! checked packet by packet against the RFC 2698 meter it runs on: a user
//! within its rate, a user at twice its rate, independent users, yellow
//! marking, reconfiguration after the control-plane latency, learning of
//! new users, other profiles and the resource check.

use std::net::Ipv4Addr;

use inca_apps::ratelimit::{Rate, RateLimiter, MSG_SET_USER};
use inca_switch::device::{ControlMessage, Nanos, MICROS, MILLIS};
use inca_switch::harness::{Harness, Transmitted};
use inca_switch::meter::{Color, Meter};
use inca_switch::{check, Profile, Switch};
use inca_wire::{build_udp_frame, Endpoints, EthernetFrame, Ipv4Packet};

const SEED: u64 = 3;
const USERS: u16 = 0;
const UPLINK: u16 = 1;
/// Frame length of the test traffic.
const LEN: usize = 1000;

fn ep(host: u8) -> Endpoints {
    Endpoints::new(
        [2, 0, 0, 0, 0, host],
        Ipv4Addr::new(10, 0, 0, host),
        [2, 0, 0, 0, 0, 0xfe],
        Ipv4Addr::new(192, 0, 2, 1),
    )
}

fn ip(host: u8) -> [u8; 4] {
    [10, 0, 0, host]
}

/// A `LEN`-byte UDP frame from `host`.
fn packet(host: u8) -> Vec<u8> {
    let f = build_udp_frame(&ep(host), 1000, 2000, &[0u8; LEN - 42], true).unwrap();
    assert_eq!(f.len(), LEN);
    f
}

/// 100 MB/s (800 Mb/s), 3,000-byte bucket.
fn rate() -> Rate {
    Rate {
        rate_bps: 800_000_000,
        burst: 3_000,
        peak_bps: 0,
    }
}

fn limiter(profile: Profile, flows: usize) -> Harness<Switch<RateLimiter>> {
    println!("seed {SEED}");
    let rl = RateLimiter::new(flows, rate(), UPLINK, USERS);
    Harness::new(Switch::new(profile, rl).unwrap(), SEED)
}

fn set_user(h: &mut Harness<Switch<RateLimiter>>, at: Nanos, host: u8, r: Rate) {
    h.control(
        at,
        ControlMessage {
            kind: MSG_SET_USER,
            body: r.message(ip(host)),
        },
    );
}

/// Sends `LEN`-byte frames from each `(host, gap)` every `gap` ns from
/// `start` (plus a per-host phase) until `end`; returns the send times per
/// host, merged in time order.
fn stream(
    h: &mut Harness<Switch<RateLimiter>>,
    flows: &[(u8, Nanos)],
    start: Nanos,
    end: Nanos,
) -> Vec<(Nanos, u8)> {
    let mut sends = Vec::new();
    for (i, &(host, gap)) in flows.iter().enumerate() {
        let mut t = start + 1_234 + i as u64 * 777;
        while t < end {
            sends.push((t, host));
            t += gap;
        }
    }
    sends.sort();
    for &(t, host) in &sends {
        h.send(t, USERS, packet(host));
    }
    sends
}

/// Source host of a forwarded frame.
fn host_of(t: &Transmitted) -> u8 {
    let eth = EthernetFrame::new_checked(&t.frame[..]).unwrap();
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert!(ip.verify_checksum());
    ip.src_addr().octets()[3]
}

/// The colours an RFC 2698 meter with `r` (full at time 0) gives frames
/// at `times`.
fn expected(r: Rate, times: &[Nanos]) -> Vec<Color> {
    let mut m = Meter::new(r.meter_config(), 0).unwrap();
    times.iter().map(|&t| m.mark(t, LEN as u64, None)).collect()
}

fn passed(out: &[Transmitted], host: u8) -> usize {
    out.iter()
        .filter(|t| t.port == UPLINK && host_of(t) == host)
        .count()
}

#[test]
fn a_user_within_its_rate_passes_everything() {
    let mut h = limiter(Profile::tofino(), 64);
    set_user(&mut h, 0, 1, rate());
    h.advance_to(MILLIS);
    // 1,000 B every 11 µs: 91 MB/s against 100 MB/s.
    let sends = stream(&mut h, &[(1, 11 * MICROS)], MILLIS, 50 * MILLIS);
    h.advance_to(51 * MILLIS);
    assert_eq!(passed(&h.take(), 1), sends.len());
    assert_eq!(h.device.stats().program_drops, 0);
}

#[test]
fn a_user_at_twice_its_rate_loses_about_half_exactly_as_the_meter_says() {
    let mut h = limiter(Profile::tofino(), 64);
    set_user(&mut h, 0, 1, rate());
    h.advance_to(MILLIS);
    // 1,000 B every 5 µs: 200 MB/s, twice the rate, for 100 ms.
    let sends = stream(&mut h, &[(1, 5 * MICROS)], MILLIS, 101 * MILLIS);
    h.advance_to(102 * MILLIS);
    let out = h.take();
    let times: Vec<_> = sends.iter().map(|s| s.0).collect();
    let colours = expected(rate(), &times);
    let want = colours.iter().filter(|&&c| c != Color::Red).count();
    // Packet by packet: the forwarded ones are exactly the non-red ones.
    let fwd: Vec<_> = out.iter().map(|t| t.at - 450).collect();
    let want_times: Vec<_> = times
        .iter()
        .zip(&colours)
        .filter(|(_, &c)| c != Color::Red)
        .map(|(&t, _)| t)
        .collect();
    assert_eq!(fwd, want_times);
    let frac = want as f64 / sends.len() as f64;
    println!("{want} of {} passed ({frac:.4})", sends.len());
    assert!((0.49..0.52).contains(&frac), "about half: {frac}");
    assert_eq!(
        h.device.stats().program_drops as usize,
        sends.len() - want,
        "the red ones are dropped"
    );
}

#[test]
fn two_users_are_independent() {
    let mut h = limiter(Profile::tofino(), 64);
    set_user(&mut h, 0, 1, rate());
    set_user(&mut h, 0, 2, rate());
    h.advance_to(MILLIS);
    // User 1 at twice its rate, user 2 at 80 % of it.
    let sends = stream(&mut h, &[(1, 5 * MICROS), (2, 12_500)], MILLIS, 51 * MILLIS);
    h.advance_to(52 * MILLIS);
    let out = h.take();
    let of = |host| {
        sends
            .iter()
            .filter(|s| s.1 == host)
            .map(|s| s.0)
            .collect::<Vec<_>>()
    };
    let (t1, t2) = (of(1), of(2));
    let want1 = expected(rate(), &t1)
        .iter()
        .filter(|&&c| c != Color::Red)
        .count();
    assert_eq!(passed(&out, 1), want1);
    assert!(want1 < t1.len() * 52 / 100);
    assert_eq!(passed(&out, 2), t2.len(), "user 2 is untouched by user 1");
    let p = h.device.program();
    assert_ne!(p.user_of(ip(1)), p.user_of(ip(2)));
}

#[test]
fn yellow_packets_are_marked_not_dropped() {
    let mut h = limiter(Profile::tofino(), 64);
    let r = Rate {
        peak_bps: 2 * rate().rate_bps,
        ..rate()
    };
    set_user(&mut h, 0, 1, r);
    h.advance_to(MILLIS);
    // 150 MB/s: above the committed rate, below the peak.
    let sends = stream(&mut h, &[(1, 6_667)], MILLIS, 21 * MILLIS);
    h.advance_to(22 * MILLIS);
    let out = h.take();
    assert_eq!(out.len(), sends.len(), "none red");
    let times: Vec<_> = sends.iter().map(|s| s.0).collect();
    let colours = expected(r, &times);
    let mut yellow = 0;
    for (t, c) in out.iter().zip(&colours) {
        let eth = EthernetFrame::new_checked(&t.frame[..]).unwrap();
        let ipp = Ipv4Packet::new_checked(eth.payload()).unwrap();
        assert!(ipp.verify_checksum(), "checksum updated with the DSCP");
        let dscp = eth.payload()[1] >> 2;
        match c {
            Color::Yellow => {
                yellow += 1;
                assert_eq!(dscp, 10, "AF11");
            }
            _ => assert_eq!(dscp, 0),
        }
    }
    assert!(yellow > sends.len() / 4, "{yellow} yellow");
}

#[test]
fn a_new_rate_takes_effect_after_the_control_plane_latency() {
    let mut h = limiter(Profile::tofino(), 64);
    let timing = Profile::tofino().control_plane;
    set_user(&mut h, 0, 1, rate());
    h.advance_to(MILLIS);
    // Twice the rate throughout; at 10 ms the rate is raised to 4×.
    let sends = stream(&mut h, &[(1, 5 * MICROS)], MILLIS, 10 * MILLIS);
    let faster = Rate {
        rate_bps: 4 * rate().rate_bps,
        ..rate()
    };
    set_user(&mut h, 10 * MILLIS, 1, faster);
    let later = stream(&mut h, &[(1, 5 * MICROS)], 10 * MILLIS, 20 * MILLIS);
    h.advance_to(21 * MILLIS);
    let out = h.take();
    // The handler runs at once; its meter write leaves after its CPU time
    // and takes a register operation.
    let effective = 10 * MILLIS + timing.cpu_per_event + timing.register_op;
    let mut old = Meter::new(rate().meter_config(), 0).unwrap();
    let mut new = Meter::new(faster.meter_config(), effective).unwrap();
    let mut want = Vec::new();
    for &(t, _) in sends.iter().chain(&later) {
        assert_ne!(t, effective);
        let m = if t < effective { &mut old } else { &mut new };
        if m.mark(t, LEN as u64, None) != Color::Red {
            want.push(t);
        }
    }
    let got: Vec<_> = out.iter().map(|t| t.at - 450).collect();
    assert_eq!(got, want);
    assert!(
        later.iter().any(|s| s.0 < effective && !got.contains(&s.0)),
        "the old rate still applies within the latency"
    );
    assert!(
        later
            .iter()
            .filter(|s| s.0 > effective)
            .all(|s| got.contains(&s.0)),
        "everything passes at the new rate"
    );
}

#[test]
fn unknown_sources_are_learned_once_with_the_default_rate() {
    let mut h = limiter(Profile::tofino(), 64);
    // Host 9 was never configured: its first packets share the default
    // meter; one digest installs it.
    let sends = stream(&mut h, &[(9, 20 * MICROS)], 0, 5 * MILLIS);
    h.advance_to(6 * MILLIS);
    let s = h.device.stats();
    assert_eq!(s.digests, 1, "reported once");
    assert_eq!(h.device.program().user_of(ip(9)), Some(0));
    assert_eq!(
        passed(&h.take(), 9),
        sends.len(),
        "50 MB/s is within 100 MB/s"
    );
    // Now at twice the default rate, on its own meter.
    let sends = stream(&mut h, &[(9, 5 * MICROS)], 6 * MILLIS, 26 * MILLIS);
    h.advance_to(27 * MILLIS);
    let n = passed(&h.take(), 9);
    assert!(
        n < sends.len() * 52 / 100 && n > sends.len() * 48 / 100,
        "{n}"
    );
    assert_eq!(h.device.stats().digests, 1);
}

#[test]
fn a_full_table_keeps_new_users_on_the_shared_meter() {
    let mut h = limiter(Profile::tofino(), 1);
    stream(&mut h, &[(1, 100 * MICROS), (2, 100 * MICROS)], 0, MILLIS);
    h.advance_to(2 * MILLIS);
    let p = h.device.program();
    assert_eq!(p.users(), 1);
    // Refused at least once (again if the two sources share an entry of
    // the reported-source filter).
    assert!(p.refused >= 1);
    assert_eq!(h.take().len(), 20, "both well within the rate");
}

#[test]
fn the_reverse_direction_is_not_policed_and_non_ip_is_dropped() {
    let mut h = limiter(Profile::tofino(), 4);
    set_user(&mut h, 0, 1, rate());
    h.advance_to(MILLIS);
    // 100 back-to-back frames from the uplink (far above any rate).
    for i in 0..100 {
        h.send(MILLIS + i, UPLINK, packet(1));
    }
    let mut arp = packet(1);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    h.send(2 * MILLIS, USERS, arp);
    h.send(2 * MILLIS, USERS, vec![1, 2, 3]);
    h.advance_to(3 * MILLIS);
    let out = h.take();
    assert_eq!(out.len(), 100);
    assert!(out.iter().all(|t| t.port == USERS));
    let s = h.device.stats();
    assert_eq!((s.program_drops, s.parse_drops), (1, 1));
}

#[test]
fn loads_on_a_smartnic_and_a_server() {
    for profile in [Profile::smartnic(), Profile::server()] {
        let name = profile.name.clone();
        let mut h = limiter(profile, 64);
        set_user(&mut h, 0, 1, rate());
        h.advance_to(100 * MILLIS);
        assert_eq!(h.device.program().user_of(ip(1)), Some(0), "{name}");
        // Twice the rate for 20 ms.
        let sends = stream(&mut h, &[(1, 5 * MICROS)], 100 * MILLIS, 120 * MILLIS);
        h.advance_to(130 * MILLIS);
        let n = passed(&h.take(), 1);
        assert!(
            n < sends.len() * 53 / 100 && n > sends.len() * 47 / 100,
            "{name}: {n} of {}",
            sends.len()
        );
        assert!(h.device.violations().is_empty(), "{name}");
    }
}

/// The largest number of users that loads on `profile` (binary search).
fn largest_fit(profile: &Profile) -> usize {
    let (mut lo, mut hi) = (1usize, 1 << 20);
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if check(profile, &mut RateLimiter::new(mid, rate(), UPLINK, USERS)).is_ok() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

#[test]
fn resource_check_fits_65536_users_and_names_what_runs_out() {
    let tofino = Profile::tofino();
    let report = check(
        &tofino,
        &mut RateLimiter::new(65_536, rate(), UPLINK, USERS),
    )
    .unwrap();
    println!("{report}");
    let max = largest_fit(&tofino);
    println!("largest ratelimit on tofino: {max} users");
    assert!(max >= 65_536);
    let err = check(
        &tofino,
        &mut RateLimiter::new(max + 1, rate(), UPLINK, USERS),
    )
    .unwrap_err()
    .to_string();
    println!("{err}");
    assert!(err.contains("rl_meter"), "names the object: {err}");
    assert!(
        err.contains("SRAM"),
        "the meter's SRAM runs out first: {err}"
    );
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    fn frame() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..600),
            (
                0u8..6,
                proptest::collection::vec((0usize..60, any::<u8>()), 0..3),
                0usize..1000
            )
                .prop_map(|(host, flips, cut)| {
                    let mut f = packet(host);
                    for (i, b) in flips {
                        f[i] = b;
                    }
                    f.truncate(cut.max(1));
                    f
                }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn random_frames_never_panic_and_are_all_counted(
            frames in proptest::collection::vec((0u64..5_000, 0u16..40, frame()), 1..80)
        ) {
            let mut h = limiter(Profile::tofino(), 2);
            let mut t = 0;
            for (gap, port, f) in &frames {
                t += gap;
                h.send(t, *port, f.clone());
            }
            h.advance_to(t + 100 * MILLIS);
            let s = h.device.stats();
            prop_assert_eq!(s.fates(), frames.len() as u64, "stats {:?}", s);
            prop_assert!(h.device.violations().is_empty());
        }
    }
}
