use super::*;
use proptest::prelude::*;

fn exact(name: &str, key: u32, ad: u32, entries: u64, after: Vec<usize>) -> ObjectDecl {
    ObjectDecl {
        name: name.into(),
        kind: ObjectKind::Table {
            kind: MatchKind::Exact,
            key_bits: key,
            action_data_bits: ad,
            entries,
            idle_timeout: false,
        },
        gress: Gress::Ingress,
        after,
        vliw_slots: 2,
    }
}

fn decl(name: &str, kind: ObjectKind, after: Vec<usize>) -> ObjectDecl {
    ObjectDecl {
        name: name.into(),
        kind,
        gress: Gress::Ingress,
        after,
        vliw_slots: 1,
    }
}

fn ternary(kind: MatchKind, key: u32, ad: u32, entries: u64) -> ObjectKind {
    ObjectKind::Table {
        kind,
        key_bits: key,
        action_data_bits: ad,
        entries,
        idle_timeout: false,
    }
}

fn nat(entries: u64) -> ObjectDecl {
    exact("nat_fwd", 104, 48, entries, vec![])
}

fn check_invariants(p: &Placement, decls: &[ObjectDecl], profile: &Profile) {
    // Per-stage usage is the sum of the objects' allocations, within
    // budget, and totals are the per-stage sums.
    let mut sum = vec![ResourceVec::ZERO; p.stage_usage.len()];
    for o in &p.objects {
        for &(s, v) in &o.stage_use {
            sum[s as usize] += v;
        }
    }
    assert_eq!(sum, p.stage_usage);
    for u in &p.stage_usage {
        assert!(
            u.fits_in(&profile.stage_budget),
            "{u} over {}",
            profile.stage_budget
        );
    }
    assert_eq!(p.used, p.stage_usage.iter().copied().sum::<ResourceVec>());
    for r in Resource::ALL {
        let expect = p.used[r] as f64 / (profile.stage_budget[r] * u64::from(p.stages)) as f64;
        if profile.stage_budget[r] > 0 {
            assert!((p.utilisation(r) - expect).abs() < 1e-12);
        }
    }
    // Each object got all of its memory, and dependencies are respected.
    for (o, d) in p.objects.iter().zip(decls) {
        if let Location::Stages { first, last } = o.location {
            let mem: ResourceVec = o.stage_use.iter().map(|&(_, v)| v.memory_part()).sum();
            assert_eq!(mem, o.demand.memory, "{}", o.name);
            let stages: Vec<u32> = o.stage_use.iter().map(|a| a.0).collect();
            assert_eq!(
                stages,
                (first..=last).collect::<Vec<_>>(),
                "{} not consecutive",
                o.name
            );
            if !p.run_to_completion {
                for &j in &d.after {
                    assert!(
                        p.objects[j].last_stage() < first,
                        "{} vs dep {}",
                        o.name,
                        p.objects[j].name
                    );
                }
            }
        }
    }
}

#[test]
fn demand_formulas() {
    let t = Profile::tofino();
    // NAT: 104 + 48 + 4 = 156 b → 2 words per entry; 65,536 entries →
    // 64 rows (multiple of 4) → 128 blocks; hash 4 × (10 + log2 16).
    let d = nat(65_536).demand(&t);
    assert_eq!(d.memory[Resource::SramBlocks], 128);
    assert_eq!(d.per_stage[Resource::HashBits], 4 * 14);
    assert_eq!(d.per_stage[Resource::ExactXbarBytes], 13);
    assert_eq!(d.per_stage[Resource::LogicalTables], 1);
    assert_eq!(d.per_stage[Resource::VliwSlots], 2);
    assert_eq!(d.bytes, 65_536 * 20);
    // A narrow table: 16 + 8 + 4 = 28 b → 4 per word; 1,000 entries in one block.
    let d = demand(&ternary(MatchKind::Exact, 16, 8, 1_000), &t);
    assert_eq!(d.memory[Resource::SramBlocks], 1);
    assert_eq!(d.per_stage[Resource::HashBits], 10);
    // 5 rows round up to 8.
    let d = demand(&ternary(MatchKind::Exact, 16, 8, 4 * 1024 * 5), &t);
    assert_eq!(d.memory[Resource::SramBlocks], 8);
    // Ternary: ⌈1,000/512⌉ · ⌈32/44⌉ = 2 TCAM blocks; 16 b action data 8/word.
    let d = demand(&ternary(MatchKind::Ternary, 32, 16, 1_000), &t);
    assert_eq!(d.memory[Resource::TcamBlocks], 2);
    assert_eq!(d.memory[Resource::SramBlocks], 1);
    assert_eq!(d.per_stage[Resource::TernaryXbarBytes], 4);
    // Range: key widened ×2 → ⌈64/44⌉ = 2 columns.
    let d = demand(&ternary(MatchKind::Range, 32, 0, 512), &t);
    assert_eq!(d.memory[Resource::TcamBlocks], 2);
    // Register: 65,536 × 32 b = 16 blocks + 1 spare; 16 index bits.
    let d = demand(
        &ObjectKind::Register {
            value_bits: 32,
            entries: 65_536,
        },
        &t,
    );
    assert_eq!(d.memory[Resource::SramBlocks], 17);
    assert_eq!(d.memory[Resource::MapRamBlocks], 17);
    assert_eq!(d.per_stage[Resource::StatefulAlus], 1);
    assert_eq!(d.per_stage[Resource::HashBits], 16);
    assert!(!d.splittable);
    let d = demand(&ObjectKind::Counter { entries: 2048 }, &t);
    assert_eq!(d.memory[Resource::SramBlocks], 2);
    assert_eq!(d.per_stage[Resource::StatefulAlus], 0);
    let d = demand(&ObjectKind::Meter { entries: 4096 }, &t);
    assert_eq!(d.memory[Resource::SramBlocks], 4);
    assert_eq!(d.memory[Resource::MapRamBlocks], 1);
    assert_eq!(d.per_stage[Resource::StatefulAlus], 1);
    assert_eq!(
        demand(&ObjectKind::Hash { output_bits: 32 }, &t).per_stage[Resource::HashBits],
        32
    );
    assert_eq!(
        demand(&ObjectKind::Gateway, &t).per_stage[Resource::Gateways],
        1
    );
    // Idle timeout: 65,536 / 4,096 = 16 map-RAM blocks.
    let mut k = nat(65_536).kind;
    if let ObjectKind::Table { idle_timeout, .. } = &mut k {
        *idle_timeout = true;
    }
    assert_eq!(demand(&k, &t).memory[Resource::MapRamBlocks], 16);
}

#[test]
fn l2_l3_program_fits_tofino() {
    let t = Profile::tofino();
    let decls = vec![
        exact("port_vlan", 16, 12, 4_096, vec![]),
        exact("l2_fwd", 60, 9, 32_768, vec![0]),
        decl("ipv4_lpm", ternary(MatchKind::Lpm, 32, 16, 16_384), vec![0]),
        exact("nexthop", 16, 57, 4_096, vec![2]),
        decl("is_routed", ObjectKind::Gateway, vec![1]),
        decl("ecmp_hash", ObjectKind::Hash { output_bits: 16 }, vec![]),
        decl("port_pkts", ObjectKind::Counter { entries: 512 }, vec![3]),
        decl("acl", ternary(MatchKind::Ternary, 120, 8, 2_048), vec![3]),
    ];
    let p = place(&t, &decls).expect("fits");
    check_invariants(&p, &decls, &t);
    let text = p.to_string();
    assert!(text.contains("SRAM blocks"), "{text}");
    assert!(text.contains("ipv4_lpm"));
    // The LPM table: 32 TCAM blocks, more than a stage's 24, so it spans.
    let lpm = p.object("ipv4_lpm").unwrap();
    assert!(lpm.last_stage() > lpm.first_stage());
    let sram = p.utilisation(Resource::SramBlocks);
    assert!(sram > 0.0 && sram < 1.0);
}

#[test]
fn nat_table_fits_and_ten_million_does_not() {
    let t = Profile::tofino();
    let p = place(&t, &[nat(65_536)]).expect("65,536 entries fit");
    check_invariants(&p, &[nat(65_536)], &t);
    assert_eq!(p.used[Resource::SramBlocks], 128);
    assert_eq!(
        p.objects[0].location,
        Location::Stages { first: 0, last: 1 }
    );
    let e = place(&t, &[nat(10_000_000)]).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("\"nat_fwd\""), "{msg}");
    assert!(msg.contains("SRAM"), "{msg}");
    assert!(msg.contains("short by"), "{msg}");
    match e {
        PlacementError::DoesNotFit(s) => {
            assert_eq!(s.resource, Resource::SramBlocks);
            assert_eq!(s.needed, 19_536);
            assert_eq!(s.free, 960);
            let n = s.max_entries.unwrap();
            assert!(place(&t, &[nat(n)]).is_ok());
            assert!(place(&t, &[nat(n + 1)]).is_err());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn chain_longer_than_stages_fails() {
    let t = Profile::tofino();
    let decls: Vec<ObjectDecl> = (0..13)
        .map(|i| {
            decl(
                &format!("g{i}"),
                ObjectKind::Gateway,
                if i == 0 { vec![] } else { vec![i - 1] },
            )
        })
        .collect();
    let e = place(&t, &decls).unwrap_err();
    assert!(
        matches!(
            e,
            PlacementError::DependencyChainTooLong {
                needed: 13,
                stages: 12,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("g0 → g1"), "{e}");
    assert!(place(&t, &decls[..12]).is_ok());
    // A chain of 11 where one table spans two stages also runs out.
    let mut decls: Vec<ObjectDecl> = vec![nat(65_536)];
    for i in 1..12 {
        decls.push(decl(&format!("g{i}"), ObjectKind::Gateway, vec![i - 1]));
    }
    let e = place(&t, &decls).unwrap_err();
    match &e {
        PlacementError::DependencyChainTooLong { chain, needed, .. } => {
            assert_eq!(chain.first().map(String::as_str), Some("nat_fwd"));
            assert_eq!(chain.len(), 12);
            assert_eq!(*needed, 13);
        }
        other => panic!("{other}"),
    }
}

#[test]
fn register_must_fit_one_stage() {
    let t = Profile::tofino();
    let big = decl(
        "flows",
        ObjectKind::Register {
            value_bits: 32,
            entries: 4 << 20,
        },
        vec![],
    );
    let e = place(&t, &[big]).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(
            e,
            PlacementError::ExceedsStage {
                resource: Resource::SramBlocks,
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("single stage"), "{msg}");
    assert!(msg.contains("\"flows\""), "{msg}");
    if let PlacementError::ExceedsStage {
        max_entries: Some(n),
        ..
    } = e
    {
        let ok = decl(
            "flows",
            ObjectKind::Register {
                value_bits: 32,
                entries: n,
            },
            vec![],
        );
        assert!(place(&t, &[ok]).is_ok());
    } else {
        panic!("no hint");
    }
    // Five registers in one stage exceed the 4 stateful ALUs: the fifth
    // goes to stage 1.
    let decls: Vec<ObjectDecl> = (0..5)
        .map(|i| {
            decl(
                &format!("r{i}"),
                ObjectKind::Register {
                    value_bits: 32,
                    entries: 1024,
                },
                vec![],
            )
        })
        .collect();
    let p = place(&t, &decls).unwrap();
    assert_eq!(p.objects[4].first_stage(), 1);
    check_invariants(&p, &decls, &t);
}

#[test]
fn errors_for_bad_dependencies() {
    let t = Profile::tofino();
    let e = place(&t, &[decl("a", ObjectKind::Gateway, vec![3])]).unwrap_err();
    assert!(matches!(
        e,
        PlacementError::UnknownDependency { index: 3, .. }
    ));
    assert!(e.to_string().contains("\"a\""));
    let e = place(
        &t,
        &[
            decl("a", ObjectKind::Gateway, vec![2]),
            decl("b", ObjectKind::Gateway, vec![0]),
            decl("c", ObjectKind::Gateway, vec![1]),
        ],
    )
    .unwrap_err();
    assert!(matches!(e, PlacementError::Cycle { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains('a') && msg.contains('b') && msg.contains('c'),
        "{msg}"
    );
    let e = place(&t, &[decl("self", ObjectKind::Gateway, vec![0])]).unwrap_err();
    assert_eq!(e.to_string(), "dependency cycle: self → self");
}

#[test]
fn smartnic_spills_to_dram() {
    let s = Profile::smartnic();
    let decls = vec![exact("small", 32, 16, 1_000, vec![]), nat(1_000_000)];
    let p = place(&s, &decls).unwrap();
    check_invariants(&p, &decls, &s);
    assert_eq!(
        p.objects[0].location,
        Location::Stages { first: 0, last: 0 }
    );
    assert_eq!(p.objects[1].location, Location::Dram { bytes: 20_000_000 });
    assert_eq!(p.dram_used, 20_000_000);
    assert!(p.to_string().contains("DRAM"));
    // Too big for DRAM as well.
    let e = place(&s, &[nat(200_000_000)]).unwrap_err();
    assert!(matches!(e, PlacementError::DramExhausted { .. }), "{e}");
    assert!(e.to_string().contains("\"nat_fwd\""));
}

#[test]
fn server_puts_everything_in_dram() {
    let v = Profile::server();
    // 3 × 1 G entries of 20 B = 60 GB ≤ 64 GiB.
    let decls: Vec<ObjectDecl> = (0..3)
        .map(|i| exact(&format!("t{i}"), 104, 48, 1_000_000_000, vec![]))
        .collect();
    let p = place(&v, &decls).unwrap();
    assert!(p
        .objects
        .iter()
        .all(|o| matches!(o.location, Location::Dram { .. })));
    assert!(p.dram_utilisation() > 0.8);
    let mut more = decls.clone();
    more.push(exact("t3", 104, 48, 1_000_000_000, vec![]));
    let e = place(&v, &more).unwrap_err();
    assert!(
        matches!(e, PlacementError::DramExhausted { ref object, .. } if object == "t3"),
        "{e}"
    );
    // A hash unit has no memory and stays "on chip".
    let p = place(
        &v,
        &[decl("h", ObjectKind::Hash { output_bits: 32 }, vec![])],
    )
    .unwrap();
    assert_eq!(
        p.objects[0].location,
        Location::Stages { first: 0, last: 0 }
    );
}

#[test]
fn ternary_needs_the_feature() {
    let mut s = Profile::smartnic();
    s.features.ternary_match = false;
    let e = place(
        &s,
        &[decl("acl", ternary(MatchKind::Range, 16, 8, 100), vec![])],
    )
    .unwrap_err();
    assert!(matches!(e, PlacementError::MissingFeature { .. }));
    assert!(e.to_string().contains("\"acl\""), "{e}");
    assert!(place(&s, &[exact("ok", 16, 8, 100, vec![])]).is_ok());
}

#[test]
fn nat_report_text() {
    let t = Profile::tofino();
    let p = place(&t, &[nat(65_536)]).unwrap();
    let text = p.to_string();
    println!("{text}");
    println!("{}", place(&t, &[nat(10_000_000)]).unwrap_err());
    let sram_line = text.lines().find(|l| l.starts_with("SRAM blocks")).unwrap();
    let cols: Vec<&str> = sram_line.split_whitespace().collect();
    assert_eq!(cols[2..], ["128", "960", "13.3"], "{text}");
    assert!(text.contains("nat_fwd"));
    assert!(text.contains("stages 0–1"));
}

#[test]
fn thousands_separators() {
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(1_000), "1,000");
    assert_eq!(thousands(3_880_000), "3,880,000");
}

fn arb_kind() -> impl Strategy<Value = ObjectKind> {
    prop_oneof![
        (8u32..160, 0u32..96, 1u64..200_000).prop_map(|(k, a, e)| ternary(
            MatchKind::Exact,
            k,
            a,
            e
        )),
        (8u32..128, 0u32..32, 1u64..20_000).prop_map(|(k, a, e)| ternary(
            MatchKind::Ternary,
            k,
            a,
            e
        )),
        (
            prop_oneof![Just(8u32), Just(16), Just(32), Just(64)],
            1u64..300_000
        )
            .prop_map(|(v, e)| ObjectKind::Register {
                value_bits: v,
                entries: e
            }),
        (1u64..50_000).prop_map(|e| ObjectKind::Counter { entries: e }),
        (1u64..50_000).prop_map(|e| ObjectKind::Meter { entries: e }),
        (1u32..64).prop_map(|b| ObjectKind::Hash { output_bits: b }),
        Just(ObjectKind::Gateway),
    ]
}

fn arb_program() -> impl Strategy<Value = Vec<ObjectDecl>> {
    (1usize..14)
        .prop_flat_map(|n| {
            (
                proptest::collection::vec((arb_kind(), any::<bool>(), 0u32..8), n),
                proptest::collection::vec(
                    proptest::collection::vec(any::<prop::sample::Index>(), 0..3),
                    n,
                ),
                Just((0..n).collect::<Vec<usize>>()).prop_shuffle(),
            )
        })
        .prop_map(|(objs, deps, perm)| {
            // Object at position p depends on earlier positions; position
            // p is declared at index perm[p].
            let n = objs.len();
            let mut decls: Vec<Option<ObjectDecl>> = vec![None; n];
            for (p, ((kind, egress, vliw), ds)) in objs.into_iter().zip(deps).enumerate() {
                let mut after: Vec<usize> = if p == 0 {
                    vec![]
                } else {
                    ds.iter().map(|ix| perm[ix.index(p)]).collect()
                };
                after.sort_unstable();
                after.dedup();
                decls[perm[p]] = Some(ObjectDecl {
                    name: format!("o{}", perm[p]),
                    kind,
                    gress: if egress {
                        Gress::Egress
                    } else {
                        Gress::Ingress
                    },
                    after,
                    vliw_slots: vliw,
                });
            }
            decls.into_iter().map(Option::unwrap).collect()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn placements_respect_dependencies_and_budgets(decls in arb_program()) {
        for profile in [Profile::tofino(), Profile::smartnic()] {
            match place(&profile, &decls) {
                Ok(p) => check_invariants(&p, &decls, &profile),
                Err(e) => {
                    let msg = e.to_string();
                    prop_assert!(!msg.is_empty());
                    let structural = matches!(e, PlacementError::Cycle { .. } | PlacementError::UnknownDependency { .. });
                    prop_assert!(!structural, "{}", msg);
                }
            }
        }
    }
}
