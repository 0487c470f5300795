//! The EWO data paths one at a time, on a clean local-2 rig with
//! anti-entropy pushed out of the way (T_ae = 1 s): a write reaches the
//! peer through mirror → recirculate → multicast within microseconds; a
//! batched variable only at its next period; anti-entropy alone repairs a
//! replica that missed the update.

use inca_sim::link::{ChannelConfig, LossModel};
use inca_swish::ewo::app::{status, AppOp, Op};
use inca_swish::ewo::config::{Propagation, VarSpec};
use inca_swish::ewo::rig::{Rig, RigConfig, Topology};
use inca_switch::Nanos;
use inca_wire::swish::ewo::MergeKind;

const MS: Nanos = 1_000_000;

fn rig(propagation: Propagation, t_ae: Nanos, link: ChannelConfig) -> RigConfig {
    RigConfig {
        topology: Topology::Local2,
        vars: vec![
            VarSpec {
                var_id: 1,
                kind: MergeKind::Gcnt,
                entries: 4,
                propagation,
            },
            VarSpec {
                var_id: 2,
                kind: MergeKind::Lww,
                entries: 4,
                propagation,
            },
        ],
        t_ae,
        link,
        seed: 11,
        ..RigConfig::default()
    }
}

/// Replica 0 increments entry 2 and writes 77 to LWW entry 1 at 1 ms;
/// replica 1 reads both at `reads`. Returns replica 1's answers.
fn run(cfg: &RigConfig, reads: &[Nanos]) -> Vec<AppOp> {
    println!("seed {}", cfg.seed);
    let writes = vec![
        (MS, AppOp::request(Op::Inc, 1, 2, 5, 1)),
        (MS, AppOp::request(Op::Write, 2, 1, 77, 2)),
    ];
    let reads = reads
        .iter()
        .flat_map(|t| {
            [
                (*t, AppOp::request(Op::Read, 1, 2, 0, 3)),
                (*t, AppOp::request(Op::Read, 2, 1, 0, 4)),
            ]
        })
        .collect();
    let mut rig = Rig::new(cfg, &[writes, reads]).unwrap();
    rig.run_until(5 * MS);
    let w = rig.answers(0);
    assert_eq!(w.len(), 2);
    assert!(w.iter().all(|(_, a)| a.status == status::OK));
    assert_eq!(w[0].1.result, 5, "the writer reads its own increment");
    rig.answers(1).iter().map(|(_, a)| *a).collect()
}

#[test]
fn a_write_reaches_the_peer_within_microseconds() {
    let a = run(
        &rig(Propagation::PerWrite, 1_000 * MS, ChannelConfig::default()),
        &[MS + 5_000],
    );
    assert_eq!((a[0].result, a[1].result), (5, 77), "{a:?}");
    assert_eq!(a[1].result2 & 0xFF, 1, "the version names the writer's rid");
}

#[test]
fn a_batched_write_waits_for_its_period() {
    // The batch stream fires every 1 ms from start-up: one period after
    // the write, the peer has it; just after, it does not yet.
    let a = run(
        &rig(
            Propagation::Periodic(MS),
            1_000 * MS,
            ChannelConfig::default(),
        ),
        &[MS + 5_000, 2 * MS + 200_000],
    );
    assert_eq!((a[0].result, a[1].result), (0, 0), "{a:?}");
    assert_eq!((a[2].result, a[3].result), (5, 77), "{a:?}");
}

#[test]
fn anti_entropy_repairs_a_lost_update() {
    // Every replication frame is lost until 2 ms; anti-entropy runs every
    // 1 ms, so the peer has the values by 3 ms though the update died.
    let lossy = ChannelConfig {
        loss: LossModel::Bernoulli { p: 1.0 },
        ..ChannelConfig::default()
    };
    let cfg = rig(Propagation::PerWrite, MS, lossy);
    let writes = vec![(MS, AppOp::request(Op::Inc, 1, 2, 5, 1))];
    let reads = vec![
        (MS + 900_000, AppOp::request(Op::Read, 1, 2, 0, 2)),
        (4 * MS, AppOp::request(Op::Read, 1, 2, 0, 3)),
    ];
    let mut rig = Rig::new(&cfg, &[writes, reads]).unwrap();
    rig.run_until(2 * MS);
    let links: Vec<_> = (0..rig.sim.link_count())
        .map(|l| inca_sim::engine::LinkId(l as u32))
        .filter(|l| {
            rig.sim
                .link_ends(*l)
                .is_some_and(|e| e[0].1 != 0 || e[1].1 != 0)
        })
        .collect();
    for l in links {
        rig.sim
            .schedule(2 * MS, inca_sim::engine::Fault::SetLoss(l, LossModel::None));
    }
    rig.run_until(5 * MS);
    let a: Vec<u32> = rig.answers(1).iter().map(|(_, a)| a.result).collect();
    assert_eq!(a, vec![0, 5], "lost at first, repaired by anti-entropy");
}
