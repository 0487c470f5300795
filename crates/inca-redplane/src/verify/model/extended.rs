//! The extended lease model (spec §6.1 "extended model", §5.2–5.6): the
//! protocol inca actually runs, over a network that loses, duplicates and
//! reorders messages, with switch crashes.
//!
//! What is modelled:
//! - Switches keep `lease` (ticks), `seq_issued`, `seq_acked` (which also
//!   stands for the egress `last_acked`), the app value, and the
//!   retransmission loop of unacked writes. Every packet without a lease
//!   sends its own LEASE_NEW carrying it; a grant installs base, value and
//!   lease and re-injects the packet. Writes send RENEW(seq, full value)
//!   carrying the output; reads go out at once when nothing is outstanding,
//!   else as BUF_READ. Bare renewals, header-only retransmissions and
//!   giving up (lease := 0) may happen at any time.
//! - The lease a switch takes from an ack counts from the request's send
//!   time (`rem` = ticks of lease left, decremented in flight), so it ends no
//!   later than the store's (§5.4, §9 item 7). Retransmissions are sent with
//!   `rem` = 0 [our choice: more conservative than keeping the first send
//!   time].
//! - The store follows §5.6: NEW is deferred while another owner's lease
//!   lives (the message waits in the network), otherwise granted with fence
//!   = last_seq + FENCE_GAP; renewals are owner-checked; writes at or below
//!   the fence are rejected; duplicates are acked only after a newer value
//!   of the same grant; BUF_READs are held until last_seq ≥ s, re-checking
//!   owner and fence at release.
//! - The switch control plane compares a grant ack's base with the
//!   installed grant's (switch/grant.rs): an older base only re-injects the
//!   packet [our choice; §5.3 says "add or overwrite", which this model
//!   shows unsafe under reordering: see [`Mutant::InstallStaleGrant`]]; the
//!   same base (a joined grant) validates the lease again and re-injects;
//!   a newer base is installed, in one step (the real control plane revokes
//!   the lease first and validates it last, so no packet sees a
//!   half-installed grant). Installs and joins set the lease; acks extend
//!   it, except once a reject or a give-up revoked it.
//! - A restarted switch ignores acks whose echoed send time predates its
//!   boot [our choice; without it a duplicated grant ack re-hands a
//!   restarted switch seqs it already used: [`Mutant::AcceptPreBootAcks`]],
//!   and grants answering requests sent in its boot quiet period, which
//!   ends once nothing its previous incarnation sent is left in the
//!   network (BOOT_QUIET exceeds the packet lifetime) [without it the join
//!   rule hands the restarted switch the grant its previous incarnation's
//!   writes are still in flight under: [`Mutant::NoBootQuiet`]].
//! - The join rule (store/worker.rs): a NEW from the owner whose lease is
//!   live and under whose grant no write has reached the store (last_seq
//!   == fence) joins the grant (same base and ghost grant id, lease
//!   extended, no new fence); every other granted NEW applies a new fence.
//!   A deferred NEW stays in the network and meets the same rule when it is
//!   delivered again (the store answers the new owner's other deferred
//!   requests at the grant itself: the model's later delivery is one of
//!   the orders it explores).
//!
//! Ghost state for the properties: the app value is the set of packets whose
//! writes it includes (so "durable" is set inclusion), each grant has an id,
//! and the store remembers which grant wrote its last value.
//!
//! Properties: SingleOwnerInvariant (2; no two live switches with a valid
//! lease), lease nesting (6.2.1; a valid switch lease implies store owner
//! and a store lease at least as long), WriteResponseSeq (3; a write is
//! acked only when the store's last write came from the same grant) and
//! durability before release (6.2.3; every released output observed only
//! writes the store's committed value includes).
//!
//! Bounds [our choice]: the network holds at most `max_net` messages (a send
//! into a full network is a loss), `dup_budget` duplications per run, and the
//! store grants at most `max_grants` leases (later NEWs are dropped) — the
//! analogue of a TLC state constraint.

use super::{Model, Step};

/// Most switches the fixed-size state holds.
pub const MAX_SWITCHES: usize = 3;

/// Which protocol safeguard to remove (spec §9), to show the checker finds
/// the resulting bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutant {
    /// The protocol as specified.
    None,
    /// §9 item 4: renew sets owner := requester without checking (TLA+).
    NoOwnerCheck,
    /// §9 item 5: no fence; a grant continues from last_seq.
    NoFence,
    /// Held BUF_READs are released once last_seq ≥ s without re-checking
    /// owner and fence (the hold of §5.6 read literally).
    NoHeldRecheck,
    /// The switch control plane installs every grant ack (§5.3 read
    /// literally), including an older one that a newer grant overtook.
    InstallStaleGrant,
    /// A restarted switch accepts acks to requests it sent before its
    /// crash (a duplicated grant ack then hands it seqs it already used).
    AcceptPreBootAcks,
    /// A restarted switch accepts grants at once (no BOOT_QUIET): the store
    /// may join it to the grant its previous incarnation wrote under, whose
    /// writes are still in flight.
    NoBootQuiet,
    /// The switch's `skip_fence` mutant (switch/config.rs): a grant for an
    /// installed key loads the value and lease but keeps the sequence
    /// registers instead of adopting the store's base.
    SkipFence,
}

/// Extended model parameters.
#[derive(Clone, Copy, Debug)]
pub struct ExtConfig {
    /// Number of switches, 1..=3.
    pub switches: usize,
    /// Packets the source injects (at most 8).
    pub total_pkts: u8,
    /// Bit i set: packet i is a read (else a write).
    pub reads: u8,
    /// Lease length in ticks.
    pub lease_period: u8,
    /// Messages the network holds at once.
    pub max_net: usize,
    /// Duplications allowed per run.
    pub dup_budget: u8,
    /// Leases the store grants per run.
    pub max_grants: u8,
    /// Whether switches may crash (losing all state) and restart.
    pub crashes: bool,
    /// Safeguard removed, if any.
    pub mutant: Mutant,
}

impl ExtConfig {
    /// The bounds `cargo test` uses (a few seconds in a debug build): two
    /// writes, 2 messages in flight, no duplication, 2 grants; crashes with
    /// 2 switches only.
    pub fn small(switches: usize) -> Self {
        ExtConfig {
            switches,
            total_pkts: 2,
            reads: 0,
            lease_period: 2,
            max_net: 2,
            dup_budget: 0,
            max_grants: 2,
            crashes: switches <= 2,
            mutant: Mutant::None,
        }
    }

    /// Larger bounds for the CLI (release build): one duplication; crashes
    /// with 2 switches only, as in [`ExtConfig::small`] (3 switches with
    /// crashes and a duplication are estimated above 10 M states).
    /// Measured with the join rule: 5.2 M states (2 switches) and 5.3 M (3
    /// switches), clean.
    pub fn thorough(switches: usize) -> Self {
        ExtConfig {
            dup_budget: 1,
            ..ExtConfig::small(switches)
        }
    }

    /// The smallest bounds (2 switches) under which each mutant's bug is
    /// reachable: a held read needs a third message in flight and a second
    /// grant (from a duplicated NEW), a stale ack after a restart a
    /// duplicated grant.
    pub fn mutant_bounds(mutant: Mutant) -> Self {
        let small = ExtConfig {
            mutant,
            ..ExtConfig::small(2)
        };
        match mutant {
            Mutant::NoHeldRecheck => ExtConfig {
                max_net: 3,
                dup_budget: 1,
                ..small
            },
            Mutant::AcceptPreBootAcks => ExtConfig {
                dup_budget: 1,
                ..small
            },
            _ => small,
        }
    }

    /// FENCE_GAP scaled to the model: more than the writes one grant can
    /// issue, as 4096 > MAX_INFLIGHT in the real protocol.
    fn fence_gap(&self) -> u8 {
        self.total_pkts + 1
    }
}

/// When a request was sent, relative to its switch's boots (the ack echoes
/// it): the switch knows, because the ack echoes the send time (IPv4
/// Identification, §4.1) and the switch knows its boot time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tag {
    /// Sent by the switch's current incarnation after its quiet period.
    Cur,
    /// Sent in the current incarnation's boot quiet period
    /// (`switch::config::BOOT_QUIET`): its grant is ignored.
    Quiet,
    /// Sent before the switch's latest crash: its ack is ignored.
    Old,
}

/// A message in flight. `rem` is the lease the sender may still take from
/// it; `tag` says which incarnation of its switch sent it (or the request
/// an ack echoes). `grant` and `obs` are ghost fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Msg {
    /// LEASE_NEW_REQ carrying packet `pkt`.
    New { sw: u8, pkt: u8, rem: u8, tag: Tag },
    /// LEASE_RENEW_REQ; seq 0 is a bare renewal, else a write of `value`.
    Renew {
        sw: u8,
        seq: u8,
        value: u8,
        pkt: Option<u8>,
        grant: u8,
        rem: u8,
        tag: Tag,
    },
    /// BUF_READ_REQ for a read that observed `obs` while `seq` was issued.
    BufRead {
        sw: u8,
        seq: u8,
        pkt: u8,
        obs: u8,
        rem: u8,
        tag: Tag,
    },
    /// LEASE_NEW_ACK / LEASE_MIGRATE_ACK.
    Grant {
        sw: u8,
        base: u8,
        value: u8,
        pkt: u8,
        rem: u8,
        grant: u8,
        tag: Tag,
    },
    /// LEASE_RENEW_ACK, releasing `pkt`'s output (which observed `obs`).
    RenewAck {
        sw: u8,
        seq: u8,
        pkt: Option<u8>,
        obs: u8,
        rem: u8,
        tag: Tag,
    },
    /// BUF_READ_ACK.
    BufReadAck {
        sw: u8,
        pkt: u8,
        obs: u8,
        rem: u8,
        tag: Tag,
    },
    /// LEASE_REJECT.
    Reject { sw: u8, seq: u8, tag: Tag },
}

impl Msg {
    fn is_request(&self) -> bool {
        matches!(
            self,
            Msg::New { .. } | Msg::Renew { .. } | Msg::BufRead { .. }
        )
    }

    fn age(&mut self) {
        match self {
            Msg::New { rem, .. }
            | Msg::Renew { rem, .. }
            | Msg::BufRead { rem, .. }
            | Msg::Grant { rem, .. }
            | Msg::RenewAck { rem, .. }
            | Msg::BufReadAck { rem, .. } => *rem = rem.saturating_sub(1),
            Msg::Reject { .. } => {}
        }
    }

    /// The switch this message comes from or goes to.
    fn switch(&self) -> u8 {
        match *self {
            Msg::New { sw, .. }
            | Msg::Renew { sw, .. }
            | Msg::BufRead { sw, .. }
            | Msg::Grant { sw, .. }
            | Msg::RenewAck { sw, .. }
            | Msg::BufReadAck { sw, .. }
            | Msg::Reject { sw, .. } => sw,
        }
    }

    fn tag(&self) -> Tag {
        match *self {
            Msg::New { tag, .. }
            | Msg::Renew { tag, .. }
            | Msg::BufRead { tag, .. }
            | Msg::Grant { tag, .. }
            | Msg::RenewAck { tag, .. }
            | Msg::BufReadAck { tag, .. }
            | Msg::Reject { tag, .. } => tag,
        }
    }

    fn set_old(&mut self) {
        match self {
            Msg::New { tag, .. }
            | Msg::Renew { tag, .. }
            | Msg::BufRead { tag, .. }
            | Msg::Grant { tag, .. }
            | Msg::RenewAck { tag, .. }
            | Msg::BufReadAck { tag, .. }
            | Msg::Reject { tag, .. } => *tag = Tag::Old,
        }
    }
}

/// One switch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Sw {
    /// Up (not crashed).
    pub up: bool,
    /// `lease_tbl` holds the key (a grant was installed since the last crash).
    pub installed: bool,
    /// Remaining lease, ticks.
    pub lease: u8,
    /// `seq_issued`.
    pub issued: u8,
    /// `seq_acked` / `last_acked`.
    pub acked: u8,
    /// The app value (ghost: set of packets included).
    pub value: u8,
    /// Ghost: the grant installed.
    pub grant: u8,
    /// Packets waiting at the switch (bit i = packet i), served lowest first.
    pub queue: u8,
    /// The loop: unacked writes (seq, value).
    pub unacked: Vec<(u8, u8)>,
    /// The installed grant's base (the control plane's `KeyState::base`).
    pub base: u8,
    /// `lease_expiry` = 0: revoked by a reject or a give-up. Acks do not
    /// extend a revoked lease; only an installed or joined grant does.
    pub revoked: bool,
    /// In the boot quiet period after a restart: grants answering requests
    /// sent now are ignored.
    pub quiet: bool,
}

impl Sw {
    /// The tag of a request this switch sends now.
    fn send_tag(&self) -> Tag {
        if self.quiet {
            Tag::Quiet
        } else {
            Tag::Cur
        }
    }
}

/// A held BUF_READ at the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Held {
    sw: u8,
    seq: u8,
    pkt: u8,
    obs: u8,
    rem: u8,
    tag: Tag,
}

/// The state store (one key; the chain is abstracted as atomic commit).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Store {
    /// The key has a record.
    pub exists: bool,
    /// Lease owner.
    pub owner: Option<u8>,
    /// Remaining store lease, ticks.
    pub lease: u8,
    /// Last applied write seq.
    pub last_seq: u8,
    /// Writes with seq ≤ fence are rejected.
    pub fence: u8,
    /// The committed value (ghost: set of packets included).
    pub value: u8,
    /// Grants so far (ghost id of the latest).
    pub grants: u8,
    /// Ghost: the grant whose write set `value`.
    pub writer: u8,
    /// Held reads (at most 2).
    pub held: Vec<Held>,
}

/// A global state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// Switches.
    pub sw: [Sw; MAX_SWITCHES],
    /// The store.
    pub store: Store,
    /// Messages in flight (sorted: a multiset).
    pub net: Vec<Msg>,
    /// Packets injected so far.
    pub injected: u8,
    /// Duplications left.
    pub dups_left: u8,
}

/// An action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Act {
    /// The source hands the next packet to switch i.
    Inject(u8),
    /// Switch i processes its oldest waiting packet.
    Work(u8),
    /// Switch i sends a bare renewal.
    Renewal(u8),
    /// Switch i's loop retransmits the write with this seq.
    Retransmit(u8, u8),
    /// Switch i's loop gives up (MAX_RETX): lease := 0.
    GiveUp(u8),
    /// Switch i crashes, losing all state.
    Crash(u8),
    /// Switch i restarts, empty.
    Restart(u8),
    /// Switch i's boot quiet period ends.
    QuietEnds(u8),
    /// A message arrives.
    Deliver(Msg),
    /// A message is lost.
    Lose(Msg),
    /// A message is duplicated.
    Duplicate(Msg),
    /// One tick of every clock.
    Tick,
}

/// The extended model.
#[derive(Clone, Copy, Debug)]
pub struct ExtModel {
    /// Parameters.
    pub cfg: ExtConfig,
}

fn bits(m: u8) -> String {
    let v: Vec<String> = (0..8)
        .filter(|i| m >> i & 1 == 1)
        .map(|i| i.to_string())
        .collect();
    format!("{{{}}}", v.join(","))
}

impl ExtModel {
    /// A model with the given parameters (switches clamped to 1..=3,
    /// packets to 1..=7).
    pub fn new(mut cfg: ExtConfig) -> Self {
        cfg.switches = cfg.switches.clamp(1, MAX_SWITCHES);
        cfg.total_pkts = cfg.total_pkts.clamp(1, 7);
        ExtModel { cfg }
    }

    fn n(&self) -> usize {
        self.cfg.switches
    }

    fn send(&self, t: &mut State, m: Msg) {
        // A full network loses the message.
        if t.net.len() < self.cfg.max_net {
            let at = t.net.partition_point(|x| *x < m);
            t.net.insert(at, m);
        }
    }

    fn take(t: &mut State, m: &Msg) {
        if let Ok(i) = t.net.binary_search(m) {
            t.net.remove(i);
        }
    }

    /// An output leaves the switch: every write it observed must be in the
    /// store's committed value (6.2.3).
    fn release(t: &State, sw: u8, pkt: u8, obs: u8) -> Option<String> {
        (obs & !t.store.value != 0).then(|| {
            format!(
                "DurabilityBeforeRelease: switch {sw} released packet {pkt}'s output, which observed \
                 writes {}, but the store's committed value holds only {}",
                bits(obs),
                bits(t.store.value)
            )
        })
    }

    /// Releases or drops held reads after a store change.
    fn scan_held(&self, t: &mut State) {
        let held = std::mem::take(&mut t.store.held);
        for h in held {
            let stale = t.store.owner != Some(h.sw) || h.seq <= t.store.fence;
            if stale && self.cfg.mutant != Mutant::NoHeldRecheck {
                continue;
            }
            if t.store.last_seq >= h.seq {
                let m = Msg::BufReadAck {
                    sw: h.sw,
                    pkt: h.pkt,
                    obs: h.obs,
                    rem: h.rem,
                    tag: h.tag,
                };
                self.send(t, m);
            } else {
                t.store.held.push(h);
            }
        }
    }

    /// The store handles a request; `None` when it is deferred (stays in
    /// the network).
    fn store_recv(&self, s: &State, m: Msg) -> Option<(State, Option<String>)> {
        let p = self.cfg.lease_period;
        let mut t = s.clone();
        Self::take(&mut t, &m);
        let mut violation = None;
        let st = &s.store;
        match m {
            Msg::New { sw, pkt, rem, tag } => {
                if !st.exists {
                    t.store = Store {
                        exists: true,
                        owner: Some(sw),
                        lease: p,
                        grants: 1,
                        writer: 1,
                        ..Store::default()
                    };
                    let g = Msg::Grant {
                        sw,
                        base: 0,
                        value: 0,
                        pkt,
                        rem,
                        grant: 1,
                        tag,
                    };
                    self.send(&mut t, g);
                } else if st.owner == Some(sw) && st.lease > 0 && st.last_seq == st.fence {
                    // The join rule (store/worker.rs): a repeated NEW from
                    // the owner, before any write under its grant reached
                    // the store, joins the grant: same fence and base, same
                    // grant (ghost id), lease extended. Not a new grant, so
                    // it does not count against `max_grants`.
                    t.store.lease = p;
                    let g = Msg::Grant {
                        sw,
                        base: st.last_seq,
                        value: st.value,
                        pkt,
                        rem,
                        grant: st.grants,
                        tag,
                    };
                    self.send(&mut t, g);
                } else if st.owner.is_none() || st.lease == 0 || st.owner == Some(sw) {
                    if st.grants >= self.cfg.max_grants {
                        return Some((t, None)); // exploration bound: dropped
                    }
                    if self.cfg.mutant != Mutant::NoFence {
                        t.store.fence = st.last_seq + self.cfg.fence_gap();
                        t.store.last_seq = t.store.fence;
                    }
                    t.store.owner = Some(sw);
                    t.store.lease = p;
                    t.store.grants += 1;
                    let g = Msg::Grant {
                        sw,
                        base: t.store.last_seq,
                        value: st.value,
                        pkt,
                        rem,
                        grant: t.store.grants,
                        tag,
                    };
                    self.send(&mut t, g);
                    self.scan_held(&mut t);
                } else {
                    return None; // deferred until the other lease expires
                }
            }
            Msg::Renew {
                sw,
                seq,
                value,
                pkt,
                grant,
                rem,
                tag,
            } => {
                if self.cfg.mutant == Mutant::NoOwnerCheck {
                    t.store.owner = Some(sw);
                }
                let owner_ok = t.store.owner == Some(sw);
                if seq == 0 {
                    if owner_ok {
                        t.store.lease = p;
                        self.send(
                            &mut t,
                            Msg::RenewAck {
                                sw,
                                seq: 0,
                                pkt: None,
                                obs: 0,
                                rem,
                                tag,
                            },
                        );
                    } else {
                        self.send(&mut t, Msg::Reject { sw, seq: 0, tag });
                    }
                } else if !owner_ok || seq <= st.fence {
                    self.send(&mut t, Msg::Reject { sw, seq, tag });
                } else {
                    t.store.lease = p;
                    if seq > st.last_seq {
                        t.store.value = value;
                        t.store.last_seq = seq;
                        t.store.writer = grant;
                    } else if t.store.writer != grant {
                        violation = Some(format!(
                            "WriteResponseSeq: write seq {seq} of grant {grant} acked as a duplicate, \
                             but the store's last write (seq {}) came from grant {}",
                            st.last_seq, st.writer
                        ));
                    }
                    self.send(
                        &mut t,
                        Msg::RenewAck {
                            sw,
                            seq,
                            pkt,
                            obs: value,
                            rem,
                            tag,
                        },
                    );
                    self.scan_held(&mut t);
                }
            }
            Msg::BufRead {
                sw,
                seq,
                pkt,
                obs,
                rem,
                tag,
            } => {
                if st.owner != Some(sw) || seq <= st.fence {
                    // dropped
                } else {
                    t.store.lease = p;
                    if st.last_seq >= seq {
                        self.send(
                            &mut t,
                            Msg::BufReadAck {
                                sw,
                                pkt,
                                obs,
                                rem,
                                tag,
                            },
                        );
                    } else if t.store.held.len() < 2 {
                        t.store.held.push(Held {
                            sw,
                            seq,
                            pkt,
                            obs,
                            rem,
                            tag,
                        });
                    }
                }
            }
            _ => unreachable!("store_recv called with an ack"),
        }
        Some((t, violation))
    }

    /// A switch handles an ack.
    fn switch_recv(&self, s: &State, m: Msg) -> (State, Option<String>) {
        let mut t = s.clone();
        Self::take(&mut t, &m);
        let (i, up) = match m {
            Msg::Grant { sw, .. }
            | Msg::RenewAck { sw, .. }
            | Msg::BufReadAck { sw, .. }
            | Msg::Reject { sw, .. } => (sw as usize, s.sw[sw as usize].up),
            _ => unreachable!("switch_recv called with a request"),
        };
        // Down, or an ack to a request sent before the switch's last boot
        // (the echoed send time predates it): ignored.
        if !up || (m.tag() != Tag::Cur && self.cfg.mutant != Mutant::AcceptPreBootAcks) {
            return (t, None);
        }
        let mut violation = None;
        let w = &mut t.sw[i];
        match m {
            Msg::Grant {
                base,
                value,
                pkt,
                rem,
                grant,
                ..
            } => {
                // The control plane compares the ack's base with the
                // installed grant's (switch/grant.rs): an older base is an
                // ack overtaken by a newer grant (installing it would rewind
                // seq_issued and reuse seqs), so it only re-injects; the
                // same base is the store joining the installed grant, which
                // validates the lease again; a newer base is installed. An
                // install is one step here: the real control plane revokes
                // the lease before its writes and validates it last, so no
                // packet runs on a half-installed grant.
                let older = w.installed && base < w.base;
                let joined = w.installed && base == w.base;
                if self.cfg.mutant == Mutant::InstallStaleGrant || !(older || joined) {
                    let keep_seqs = self.cfg.mutant == Mutant::SkipFence && w.installed;
                    if !keep_seqs {
                        w.issued = base;
                        w.acked = base;
                        w.unacked.retain(|&(q, _)| q > base);
                    }
                    w.installed = true;
                    w.base = base;
                    w.value = value;
                    w.grant = grant;
                    w.lease = rem;
                    w.revoked = false;
                } else if joined {
                    w.lease = rem;
                    w.revoked = false;
                }
                // Re-injected; dropped if the lease is invalid again.
                if w.lease > 0 {
                    w.queue |= 1 << pkt;
                }
            }
            Msg::RenewAck {
                sw,
                seq,
                pkt,
                obs,
                rem,
                ..
            } => {
                if w.installed {
                    if !w.revoked {
                        w.lease = w.lease.max(rem);
                    }
                    if seq != 0 {
                        w.acked = w.acked.max(seq);
                        let a = w.acked;
                        w.unacked.retain(|&(q, _)| q > a);
                    }
                }
                if let Some(p) = pkt {
                    violation = Self::release(&t, sw, p, obs);
                }
            }
            Msg::BufReadAck {
                sw, pkt, obs, rem, ..
            } => {
                if w.installed && !w.revoked {
                    w.lease = w.lease.max(rem);
                }
                violation = Self::release(&t, sw, pkt, obs);
            }
            Msg::Reject { seq, .. } if w.installed => {
                // A reject of a write at or below seq_acked is for an older
                // grant's write or a duplicate: only its loop stops.
                if seq == 0 || seq > w.acked {
                    w.lease = 0;
                    w.revoked = true;
                }
                w.unacked.retain(|&(q, _)| q != seq);
            }
            _ => {}
        }
        (t, violation)
    }
}

impl Model for ExtModel {
    type State = State;
    type Label = Act;

    fn init(&self) -> Vec<State> {
        let mut sw: [Sw; MAX_SWITCHES] = Default::default();
        for w in sw.iter_mut().take(self.n()) {
            w.up = true;
        }
        vec![State {
            sw,
            store: Store::default(),
            net: Vec::new(),
            injected: 0,
            dups_left: self.cfg.dup_budget,
        }]
    }

    fn next(&self, s: &State, out: &mut Vec<Step<State, Act>>) {
        let n = self.n();
        let p = self.cfg.lease_period;
        let ok = |label, next| Step {
            label,
            next,
            violation: None,
        };
        for i in 0..n {
            let w = &s.sw[i];
            let iu = i as u8;
            if !w.up {
                if self.cfg.crashes {
                    let mut t = s.clone();
                    t.sw[i].up = true;
                    t.sw[i].quiet = self.cfg.mutant != Mutant::NoBootQuiet;
                    out.push(ok(Act::Restart(iu), t));
                }
                continue;
            }
            // BOOT_QUIET is longer than any packet lives: it ends once
            // nothing the previous incarnation sent is left.
            if w.quiet
                && !s
                    .net
                    .iter()
                    .any(|m| m.switch() == iu && m.tag() == Tag::Old)
                && !s.store.held.iter().any(|h| h.sw == iu && h.tag == Tag::Old)
            {
                let mut t = s.clone();
                t.sw[i].quiet = false;
                out.push(ok(Act::QuietEnds(iu), t));
            }
            if s.injected < self.cfg.total_pkts {
                let mut t = s.clone();
                t.sw[i].queue |= 1 << s.injected;
                t.injected += 1;
                out.push(ok(Act::Inject(iu), t));
            }
            if w.queue != 0 {
                let pkt = w.queue.trailing_zeros() as u8;
                let mut t = s.clone();
                t.sw[i].queue &= !(1 << pkt);
                let mut violation = None;
                if !w.installed || w.lease == 0 {
                    self.send(
                        &mut t,
                        Msg::New {
                            sw: iu,
                            pkt,
                            rem: p,
                            tag: w.send_tag(),
                        },
                    );
                } else if self.cfg.reads >> pkt & 1 == 1 {
                    if w.issued == w.acked {
                        violation = Self::release(&t, iu, pkt, w.value);
                    } else {
                        let m = Msg::BufRead {
                            sw: iu,
                            seq: w.issued,
                            pkt,
                            obs: w.value,
                            rem: p,
                            tag: w.send_tag(),
                        };
                        self.send(&mut t, m);
                    }
                } else {
                    let tw = &mut t.sw[i];
                    tw.issued += 1;
                    tw.value |= 1 << pkt;
                    tw.unacked.push((tw.issued, tw.value));
                    let m = Msg::Renew {
                        sw: iu,
                        seq: tw.issued,
                        value: tw.value,
                        pkt: Some(pkt),
                        grant: tw.grant,
                        rem: p,
                        tag: w.send_tag(),
                    };
                    self.send(&mut t, m);
                }
                out.push(Step {
                    label: Act::Work(iu),
                    next: t,
                    violation,
                });
            }
            // Bare renewals once some lease has run down (the real switch
            // waits for RENEW_INTERVAL), one in flight at a time.
            if w.installed
                && w.lease > 0
                && w.lease < p
                && !s
                    .net
                    .iter()
                    .any(|m| matches!(m, Msg::Renew { sw, seq: 0, .. } if *sw == iu))
            {
                let mut t = s.clone();
                let m = Msg::Renew {
                    sw: iu,
                    seq: 0,
                    value: 0,
                    pkt: None,
                    grant: w.grant,
                    rem: p,
                    tag: w.send_tag(),
                };
                self.send(&mut t, m);
                out.push(ok(Act::Renewal(iu), t));
            }
            for &(seq, value) in &w.unacked {
                let m = Msg::Renew {
                    sw: iu,
                    seq,
                    value,
                    pkt: None,
                    grant: w.grant,
                    rem: 0,
                    tag: w.send_tag(),
                };
                if s.net
                    .iter()
                    .any(|x| matches!(x, Msg::Renew { sw, seq: q, .. } if *sw == iu && *q == seq))
                {
                    continue;
                }
                let mut t = s.clone();
                self.send(&mut t, m);
                out.push(ok(Act::Retransmit(iu, seq), t));
            }
            if !w.unacked.is_empty() {
                let mut t = s.clone();
                t.sw[i].unacked.clear();
                t.sw[i].lease = 0;
                t.sw[i].revoked = true;
                out.push(ok(Act::GiveUp(iu), t));
            }
            if self.cfg.crashes && (0..n).any(|j| j != i && s.sw[j].up) {
                let mut t = s.clone();
                t.sw[i] = Sw::default();
                for m in t.net.iter_mut().filter(|m| m.switch() == iu) {
                    m.set_old();
                }
                t.net.sort_unstable();
                for h in t.store.held.iter_mut().filter(|h| h.sw == iu) {
                    h.tag = Tag::Old;
                }
                out.push(ok(Act::Crash(iu), t));
            }
        }
        let mut prev: Option<&Msg> = None;
        for m in &s.net {
            if prev == Some(m) {
                continue; // identical copies give identical successors
            }
            prev = Some(m);
            if m.is_request() {
                if let Some((t, violation)) = self.store_recv(s, *m) {
                    out.push(Step {
                        label: Act::Deliver(*m),
                        next: t,
                        violation,
                    });
                }
            } else {
                let (t, violation) = self.switch_recv(s, *m);
                out.push(Step {
                    label: Act::Deliver(*m),
                    next: t,
                    violation,
                });
            }
            let mut t = s.clone();
            Self::take(&mut t, m);
            out.push(ok(Act::Lose(*m), t));
            if s.dups_left > 0 && s.net.len() < self.cfg.max_net {
                let mut t = s.clone();
                t.dups_left -= 1;
                self.send(&mut t, *m);
                out.push(ok(Act::Duplicate(*m), t));
            }
        }
        // Time passes (only when it changes something).
        let mut t = s.clone();
        for w in t.sw.iter_mut() {
            w.lease = w.lease.saturating_sub(1);
        }
        t.store.lease = t.store.lease.saturating_sub(1);
        for m in t.net.iter_mut() {
            m.age();
        }
        t.net.sort_unstable();
        for h in t.store.held.iter_mut() {
            h.rem = h.rem.saturating_sub(1);
        }
        if t != *s {
            out.push(ok(Act::Tick, t));
        }
    }

    fn invariants(&self, s: &State) -> Vec<String> {
        let mut bad = Vec::new();
        let live: Vec<usize> = (0..self.n())
            .filter(|&i| s.sw[i].up && s.sw[i].installed && s.sw[i].lease > 0)
            .collect();
        if !s.sw[..self.n()].iter().any(|w| w.up) {
            bad.push("AtLeastOneAliveSwitch: every switch is down".to_string());
        }
        if live.len() > 1 {
            bad.push(format!(
                "SingleOwnerInvariant: switches {live:?} all hold a valid lease"
            ));
        }
        for &i in &live {
            if s.store.owner != Some(i as u8) || s.store.lease < s.sw[i].lease {
                bad.push(format!(
                    "LeaseNesting: switch {i} holds lease {} but the store has owner {:?} with lease {}",
                    s.sw[i].lease, s.store.owner, s.store.lease
                ));
            }
        }
        bad
    }
}
