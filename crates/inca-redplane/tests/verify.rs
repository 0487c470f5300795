//! End to end through the verification path with a real app: a Sync-Counter
//! history across a failover is recorded by the history recorder, turned
//! into checker operations, and judged by Checker A, Checker B (with the
//! app's own reference `spec_step`) and the Sync-Counter oracle; a stale
//! restart after the failover must be caught by all three.

use inca_redplane::apps::sync_counter::SyncCounter;
use inca_redplane::apps::SpecModel;
use inca_redplane::verify::history::{check_recorder, Recorder};
use inca_redplane::verify::invariants::Monitor;
use inca_redplane::verify::linearizability::oracles::sync_counter;
use inca_redplane::verify::linearizability::{check_a, check_b, AppSpec, Kind, Verdict, A_BUDGET};
use inca_wire::Probe;

/// Ethernet/IPv4/UDP with a probe payload of 32 bytes (UDP checksum 0).
fn frame(seq: u64) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8 + 32];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let total = (20 + 8 + 32) as u16;
    {
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 1, 1]);
    }
    let sum = inca_wire::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f[34..36].copy_from_slice(&4000u16.to_be_bytes());
    f[36..38].copy_from_slice(&5000u16.to_be_bytes());
    f[38..40].copy_from_slice(&40u16.to_be_bytes());
    assert!(Probe {
        flow: 0,
        seq,
        tx_time: 0
    }
    .write(&mut f[42..]));
    f
}

/// The released frame for `input` after the count became `count`: the
/// app's own output (from IPv4 on) behind the input's Ethernet header.
fn released(app: &SyncCounter, input: &[u8], count: u32) -> Vec<u8> {
    let (outs, _) = app.spec_step(&(count - 1).to_be_bytes(), input);
    let mut f = input[..14].to_vec();
    f.extend_from_slice(&outs[0]);
    f
}

/// Switch 1 counts packets 1–3 (packet 3's output is lost, its write is
/// durable), the store grants switch 2 with fence 4099, switch 2 counts
/// packets 4–5 starting from `restart` (3 is correct).
fn run(restart: u32) -> Recorder {
    let app = SyncCounter::new();
    let mut r = Recorder::default();
    let key = app.spec_key(&frame(1)).expect("a UDP five-tuple");
    r.commit(0, &key, 0, 0, &[0; 4], 1);
    r.grant(0, &key, 1, 0, true);
    for (i, seq) in (1..=3u64).enumerate() {
        let t = 100 * (i as u64 + 1);
        let count = seq as u32;
        r.input(t, 1, &key, &frame(seq));
        r.commit(t + 10, &key, 0, seq as u16, &count.to_be_bytes(), 1);
        if seq != 3 {
            r.output(
                t + 20,
                1,
                &key,
                &released(&app, &frame(seq), count),
                (0, seq as u16),
            );
        }
    }
    r.commit(2_000, &key, 4099, 4099, &3u32.to_be_bytes(), 2);
    r.grant(2_000, &key, 2, 4099, false);
    for (i, seq) in (4..=5u64).enumerate() {
        let t = 3_000 + 100 * i as u64;
        let count = restart + 1 + i as u32;
        let version = (4099, 4100 + i as u16);
        r.input(t, 2, &key, &frame(seq));
        r.commit(t + 10, &key, version.0, version.1, &count.to_be_bytes(), 2);
        r.output(
            t + 20,
            2,
            &key,
            &released(&app, &frame(seq), count),
            version,
        );
    }
    r
}

fn judge(restart: u32) -> (Verdict, Verdict, bool) {
    let app = SyncCounter::new();
    let mut r = run(restart);
    let (_, flow) = r.flows_mut().iter_mut().next().expect("one flow");
    assert!(flow.complete());
    let from_l3 = |f: &[u8]| f[14..].to_vec();
    let ops = flow.ops(|_| Kind::Write, from_l3);
    assert_eq!(flow.unmatched_outputs, 0);
    assert_eq!(ops.len(), 5);
    let spec = AppSpec {
        app: &app,
        initial: vec![0; 4],
    };
    let a = check_a(&spec, &ops, A_BUDGET);
    let b = check_b(&spec, &ops, &flow.commits);
    let inputs: Vec<u64> = flow.inputs.iter().map(|i| i.time).collect();
    let outs: Vec<_> = ops
        .iter()
        .filter_map(|o| {
            let (t_out, bytes, _) = o.output.as_ref()?;
            let at = 20 + 8 + 24; // IPv4 + UDP + probe
            let c = u32::from_be_bytes(bytes[0][at..at + 4].try_into().ok()?);
            Some((o.id, o.t_in, *t_out, c))
        })
        .collect();
    (a, b, sync_counter(&inputs, &outs).is_ok())
}

#[test]
fn a_sync_counter_failover_history_is_linearizable() {
    let (a, b, oracle) = judge(3);
    assert_eq!(a, Verdict::Linearizable);
    assert_eq!(b, Verdict::Linearizable);
    assert!(oracle);
}

#[test]
fn a_stale_restart_after_failover_is_caught_by_every_checker() {
    let (a, b, oracle) = judge(1);
    assert!(a.is_violation(), "{a:?}");
    assert!(b.is_violation(), "{b:?}");
    assert!(!oracle);
}

#[test]
fn check_recorder_and_the_monitor_see_the_same_run() {
    let app = SyncCounter::new();
    let spec = |_: &[u8]| AppSpec {
        app: &app,
        initial: vec![0; 4],
    };
    let from_l3 = |f: &[u8]| f[14..].to_vec();
    for (restart, ok) in [(3, true), (1, false)] {
        let mut r = run(restart);
        let v = check_recorder(&mut r, spec, |_| Kind::Write, from_l3, true, 200);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].b.is_ok(), ok, "{:?}", v[0]);
        assert_eq!(v[0].a.as_ref().map(Verdict::is_ok), Some(ok));
    }
    // The monitor: clean as recorded; a release moved before its commit
    // breaks durability before release (6.2.3).
    let mut r = run(3);
    let (key, flow) = r.flows_mut().iter_mut().next().expect("one flow");
    let key = key.clone();
    let mut m = Monitor::new();
    for e in flow.monitor_events(&key, |s| s) {
        m.observe(e);
    }
    assert!(m.violations().is_empty(), "{:?}", m.violations());
    let w2 = flow
        .commits
        .iter()
        .position(|c| c.version == (0, 2))
        .expect("write 2");
    flow.commits[w2].time = 10_000;
    let mut m = Monitor::new();
    for e in flow.monitor_events(&key, |s| s) {
        m.observe(e);
    }
    let v: Vec<u8> = m.violations().iter().map(|v| v.invariant).collect();
    assert_eq!(v, vec![3], "{:?}", m.violations());
}
