//! Property 14 (spec §6, §7.2) with the real controller: the switch runs
//! the CLIP controller on its CPU and the servers their CLIP-CTL
//! endpoints, so indices come from POOL_ASSIGN, `conn_idx` entries from
//! CONN_NEW, deletes from CONN_RELEASE and index frees from the delete's
//! reply or ENTRY_EXPIRED — nothing here stands in for the controller
//! (trd_property.rs has the test-driven variant). The workload is E8's
//! (`inca_clip::experiments::trd`): VXLAN or plain TCP connections with
//! injected retransmissions, reordering and the slow→fast handover, in two
//! waves T_release apart so the second reuses the first's indices.
//!
//! Checked: each injected retransmission (and each late segment of a
//! swapped pair) reported exactly once per connection, none beyond (no
//! false positive across the handover); every connection with an index
//! handed over mid-stream; the `conn_idx` entries' indices unique and held by the very connection the entry names (so an
//! index is reused only after its entry's delete; every 100 µs); CONN_NEW → installed
//! and CONN_RELEASE → deleted → index freed counts equal; nothing left at
//! the end. Each check is shown to fail on a broken controller
//! (`Mutation::NoConnInstall`, `Mutation::ReleaseWithoutDelete`).

use inca_clip::experiments::trd::{drive, workload, Outcome, Rig, Setup};
use inca_clip::switch::controller::Mutation;
use inca_switch::device::Nanos;

const CHECK: Nanos = 100_000;

/// One server with a 48-index slice for 64 connections a wave (16 run
/// software-only), so the slice fixed by the set-up is the one used.
fn one_server(vxlan: bool, seed: u64) -> Setup {
    Setup {
        vxlan,
        conns: 64,
        waves: 2,
        servers: 1,
        slices: vec![(1, 100, 147)],
        r: 4096,
        retx: 0.02,
        reorder: 0.3,
        seed,
        ..Setup::default()
    }
}

/// Runs `s`; the outcome and the rig at the end.
fn run(s: &Setup) -> (Outcome, Rig) {
    let mut rig = Rig::new(s).unwrap();
    let o = drive(&mut rig, s, CHECK);
    (o, rig)
}

/// Property 14's checks on a run; the first that fails.
fn check(s: &Setup, o: &Outcome, rig: &Rig) -> Result<(), String> {
    let waves = workload(s);
    if !o.violations.is_empty() {
        return Err(format!("index invariant: {:?}", o.violations));
    }
    for (w, r) in o.waves.iter().enumerate() {
        let expected: u64 = waves[w].iter().map(|c| c.expected()).sum();
        println!(
            "  wave {w}: {} connections, {} expected, {} reported, {} indexed, {} software-only, {} handovers",
            r.connections, expected, r.reported, r.indexed, r.software_only, r.handovers
        );
        if !r.wrong.is_empty() || r.untracked > 0 {
            return Err(format!(
                "wave {w}: (flow, expected, reported) {:?}",
                r.wrong
            ));
        }
        if (r.false_positives, r.missed, r.reported) != (0, 0, expected) {
            return Err(format!("wave {w}: {r:?}"));
        }
        if r.handovers != r.indexed || r.indexed == 0 {
            return Err(format!(
                "wave {w}: {} of {} indexed connections handed over",
                r.handovers, r.indexed
            ));
        }
    }
    let sw = rig.switch();
    let ctl = sw.program().controller.as_ref().unwrap();
    let cs = ctl.conn_stats();
    let (mut conn_new, mut released, mut allocated, mut freed) = (0, 0, 0, 0);
    for i in 0..rig.servers.len() {
        let srv = rig.server(i).nf();
        let h = srv.runtime().handler();
        let st = *h.stats();
        let es = *srv.stats();
        if !h.is_empty() || (st.ack_unknown, st.malformed, es.conn_release_stale) != (0, 0, 0) {
            return Err(format!("server {i}: {} left, {st:?}, {es:?}", h.len()));
        }
        conn_new += es.conn_new;
        released += es.conn_released;
        allocated += st.allocated;
        freed += st.freed;
    }
    if (conn_new, cs.installed, cs.refused) != (allocated, allocated, 0) {
        return Err(format!(
            "{allocated} indices, {conn_new} CONN_NEW, controller {cs:?}"
        ));
    }
    if (cs.deleted, cs.release_replied, released, freed)
        != (allocated, allocated, allocated, allocated)
    {
        return Err(format!(
            "{allocated} indices, {released} released, {freed} freed, controller {cs:?}"
        ));
    }
    if cs.offloaded != allocated {
        return Err(format!(
            "ENTRY_OFFLOADED for {} of {allocated}",
            cs.offloaded
        ));
    }
    if !rig.conn_idx().is_empty() || !ctl.conns_live().is_empty() {
        return Err(format!("entries left: {:?}", rig.conn_idx()));
    }
    // A slice hands out its indices in turn, so the second wave reuses
    // the first's only where the slice is smaller than the connections.
    let slice: u64 = s
        .slices
        .iter()
        .map(|(_, lo, hi)| u64::from(hi - lo + 1))
        .sum();
    if slice > 0 && slice < (s.conns * s.waves) as u64 && o.reused == 0 {
        return Err("no index reused".into());
    }
    let st = sw.program().stats;
    if st.flight != st.response || (st.invalid_drop, st.status_drop, st.no_server_drop) != (0, 0, 0)
    {
        return Err(format!("switch: {st:?}"));
    }
    if o.delivered != o.packets {
        return Err(format!(
            "{} of {} packets delivered",
            o.delivered, o.packets
        ));
    }
    if sw.program().stats.fast == 0 {
        return Err("no fast-path packet".into());
    }
    println!(
        "  {} packets ({} fast, {} flight); {} CONN_NEW, {} indices reused",
        o.packets, st.fast, st.flight, conn_new, o.reused
    );
    Ok(())
}

#[test]
fn property_14_vxlan_with_the_controller() {
    let seed = 0xE8_0001;
    println!("seed {seed:#x} vxlan");
    let s = one_server(true, seed);
    let (o, rig) = run(&s);
    check(&s, &o, &rig).unwrap();
    assert_eq!(
        (o.waves[0].indexed, o.waves[0].software_only),
        (48, 16),
        "the fixed slice (48) is what the server allocates from"
    );
}

#[test]
fn property_14_plain_tcp_with_the_controller() {
    let s = one_server(false, 0xE8_0003);
    let (o, rig) = run(&s);
    check(&s, &o, &rig).unwrap();
}

#[test]
fn two_servers_get_disjoint_halves_of_r_from_pool_assign() {
    let s = Setup {
        conns: 24,
        seed: 0xE8_0004,
        ..Setup::default()
    };
    let (o, rig) = run(&s);
    check(&s, &o, &rig).unwrap();
    let ctl = rig.switch().program().controller.as_ref().unwrap();
    let slices: Vec<(u8, (u32, u32))> = ctl.conn_slices().iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(slices, vec![(1, (0, 2047)), (2, (2048, 4095))]);
    for i in 0..2 {
        let st = *rig.server(i).nf().runtime().handler().stats();
        assert_eq!((st.pool_assigned, st.no_pool), (1, 0), "server {i}");
        assert!(st.allocated > 0, "server {i} served connections");
    }
}

#[test]
fn an_idle_connection_s_entry_ages_out_and_its_index_is_freed() {
    // One connection without FIN: its entry is never released, so only
    // the switch's idle aging (T_exp = 1 s here) ends it.
    let s = Setup {
        conns: 1,
        waves: 1,
        servers: 1,
        retx: 0.0,
        reorder: 0.0,
        t_exp_ns: 1_000_000_000,
        seed: 7,
        ..Setup::default()
    };
    let mut rig = Rig::new(&s).unwrap();
    let c = &workload(&s)[0][0];
    for &(t, flags, seq, len) in c.sends.iter().filter(|x| x.1 & 0x01 == 0) {
        rig.fab.inject(
            t,
            rig.sw,
            0,
            inca_clip::experiments::trd::frame(&c.flow, flags, seq, len),
        );
    }
    rig.fab.run_until(200_000_000);
    let held = |rig: &Rig| rig.server(0).nf().runtime().handler().indices();
    assert_eq!(held(&rig).len(), 1, "the connection holds an index");
    assert_eq!(rig.conn_idx().len(), 1, "and its entry is installed");
    // Idle from ~80 ms; polled every second, aged at the first poll that
    // reads 1 s or more of idleness.
    rig.fab.run_until(3_500_000_000);
    let ctl = rig.switch().program().controller.as_ref().unwrap();
    let cs = ctl.conn_stats();
    assert_eq!((cs.aged, cs.expired, cs.deleted), (1, 1, 0), "{cs:?}");
    assert!(rig.conn_idx().is_empty());
    assert!(held(&rig).is_empty(), "ENTRY_EXPIRED freed the index");
    let st = *rig.server(0).nf().runtime().handler().stats();
    assert_eq!((st.expired, st.released), (1, 0));
}

#[test]
fn a_controller_that_does_not_install_fails_the_handover_check() {
    let s = Setup {
        mutation: Mutation::NoConnInstall,
        conns: 16,
        slices: vec![(1, 100, 111)],
        ..one_server(true, 0xE8_0005)
    };
    let (o, rig) = run(&s);
    let e = check(&s, &o, &rig).unwrap_err();
    println!("caught: {e}");
    assert!(e.contains("handed over"), "{e}");
    assert_eq!(rig.switch().program().stats.fast, 0);
}

#[test]
fn a_controller_that_frees_before_deleting_fails_the_index_check() {
    let s = Setup {
        mutation: Mutation::ReleaseWithoutDelete,
        conns: 16,
        slices: vec![(1, 100, 111)],
        ..one_server(true, 0xE8_0006)
    };
    let (o, rig) = run(&s);
    let e = check(&s, &o, &rig).unwrap_err();
    println!("caught: {e}");
    assert!(e.contains("index invariant"), "{e}");
}
