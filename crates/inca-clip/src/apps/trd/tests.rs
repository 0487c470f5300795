//! The TRD handler on its own (§7.2 remote_handler): allocation, shadow
//! judgement, duplicate SYNs, release after T_release and the delete ack,
//! exhaustion, malformed input.

use super::segment::{FIN, RST, SYN};
use super::*;

const ACK: u8 = 0x10;
const S: Nanos = 1_000_000_000;

fn key(n: u16) -> FlowKey {
    FlowKey::new(77, 6, [10, 0, 0, 1], [10, 0, 0, 2], n, 80)
}

/// What one request got.
struct Got {
    status: HandlerStatus,
    res: TrdRes,
    created: Vec<Entry>,
}

fn call(h: &mut TrdHandler, now: Nanos, flow: FlowKey, flags: u8, seq: u32, len: u16) -> Got {
    let extra = u32::from(flags & SYN != 0) + u32::from(flags & FIN != 0);
    let req = TrdReq {
        flow,
        tcp_flags: flags,
        seq,
        seq_end: seq.wrapping_add(u32::from(len)).wrapping_add(extra),
        payload_len: len,
    };
    let mut p = [0u8; PARAMS_LEN];
    assert!(req.write(&mut p));
    let mut created = Vec::new();
    let mut ctx = HandlerCtx {
        now,
        server_id: 1,
        core: 0,
        flow,
        payload: &[],
        created: &mut created,
    };
    let status = h.handle(&mut ctx, &mut p);
    Got {
        status,
        res: TrdRes::read(&p).unwrap(),
        created,
    }
}

fn handler(lo: u32, hi: u32) -> TrdHandler {
    let mut h = TrdHandler::default();
    h.pool_assign(POOL_INDICES, [0; 4], lo, hi);
    h
}

#[test]
fn syn_allocates_inits_and_data_is_judged_against_the_shadow_end() {
    let mut h = handler(100, 103);
    let g = call(&mut h, 0, key(1), SYN, 1000, 0);
    assert_eq!(g.status, HandlerStatus::Ok);
    assert_eq!(
        g.res,
        TrdRes {
            idx: 100,
            op: Op::Init,
            retx: false,
            init_end: 1001,
            seq_end: 1001
        }
    );
    assert_eq!(g.created, vec![TrdHandler::entry(key(1), 100)]);
    assert_eq!(TrdHandler::conn_new_of(&g.created[0]), Some((key(1), 100)));
    // In order: MAX_UPDATE, never flagged.
    for (seq, len) in [(1001, 100), (1101, 100), (1201, 0), (1201, 50)] {
        let g = call(&mut h, 1, key(1), ACK, seq, len);
        assert_eq!(
            (g.res.idx, g.res.op, g.res.retx),
            (100, Op::MaxUpdate, false)
        );
        assert_eq!(g.res.seq_end, seq + u32::from(len));
        assert!(g.created.is_empty());
    }
    // At or below the end: a retransmission; a pure ACK never is.
    let g = call(&mut h, 2, key(1), ACK, 1101, 100);
    assert_eq!((g.res.op, g.res.retx), (Op::MaxUpdate, true));
    assert!(!call(&mut h, 2, key(1), ACK, 1001, 0).res.retx);
    // A duplicate SYN: retx, registers left alone.
    let g = call(&mut h, 3, key(1), SYN, 1000, 0);
    assert_eq!((g.res.idx, g.res.op, g.res.retx), (100, Op::None, true));
    let c = h.conn(&key(1)).unwrap();
    assert_eq!((c.end, c.flagged, c.software), (1251, 2, 0));
    assert_eq!((h.stats().dup_syn, h.stats().retx_flagged), (1, 2));
    // The reverse direction is its own connection.
    let back = FlowKey::new(77, 6, [10, 0, 0, 2], [10, 0, 0, 1], 80, 1);
    assert_eq!(call(&mut h, 4, back, SYN | ACK, 9, 0).res.idx, 101);
}

#[test]
fn a_first_packet_without_syn_allocates_at_its_own_end() {
    let mut h = handler(0, 9);
    let g = call(&mut h, 0, key(2), ACK, 5000, 200);
    assert_eq!((g.res.idx, g.res.op, g.res.init_end), (0, Op::Init, 5200));
    assert!(!g.res.retx, "nothing before it is known");
    assert!(call(&mut h, 0, key(2), ACK, 5000, 200).res.retx);
    // A SYN arriving late (reordered) is below the end: a duplicate.
    assert!(call(&mut h, 0, key(2), SYN, 4999, 0).res.retx);
    // An RST of an unknown key opens nothing.
    let g = call(&mut h, 0, key(3), RST, 1, 0);
    assert_eq!((g.res.idx, g.res.op), (NO_IDX, Op::None));
    assert!(h.conn(&key(3)).is_none());
    assert_eq!(h.stats().untracked, 1);
}

#[test]
fn fin_releases_after_t_release_and_the_index_waits_for_the_ack() {
    let mut h = handler(7, 7);
    call(&mut h, 0, key(1), SYN, 0, 0);
    call(&mut h, S, key(1), ACK, 1, 10);
    let g = call(&mut h, S, key(1), FIN | ACK, 11, 0);
    assert_eq!((g.res.op, g.res.seq_end), (Op::MaxUpdate, 12));
    let due = S + T_RELEASE_NS;
    assert_eq!(h.conn(&key(1)).unwrap().state, ConnState::Closing { due });
    // A retransmitted FIN is judged and does not move the release.
    assert!(call(&mut h, S + 5, key(1), FIN | ACK, 11, 0).res.retx);
    assert_eq!(h.conn(&key(1)).unwrap().state, ConnState::Closing { due });
    assert!(h.take_conn_release(due - 1).is_empty());
    // The only index is held: a new connection is software-only.
    let g = call(&mut h, due - 1, key(2), SYN, 0, 0);
    assert_eq!((g.res.idx, g.res.op), (NO_IDX, Op::None));
    assert!(g.created.is_empty());
    assert_eq!(h.stats().exhausted, 1);
    assert!(!call(&mut h, due - 1, key(2), ACK, 0, 0).res.retx);
    let g = call(&mut h, due - 1, key(2), SYN, 0, 0);
    assert_eq!((g.res.idx, g.res.retx), (NO_IDX, true));
    assert_eq!(h.conn(&key(2)).unwrap().software, 1);

    assert_eq!(h.take_conn_release(due), vec![(key(1), 7)]);
    assert!(h.take_conn_release(due + S).is_empty(), "released once");
    assert_eq!(h.conn(&key(1)).unwrap().state, ConnState::Releasing);
    // Releasing: judged here, no register.
    let g = call(&mut h, due + 1, key(1), ACK, 1, 10);
    assert_eq!((g.res.idx, g.res.op, g.res.retx), (NO_IDX, Op::None, true));
    assert_eq!(h.conn(&key(1)).unwrap().software, 1);
    // Not freed before the ack.
    assert_eq!(call(&mut h, due + 2, key(3), SYN, 0, 0).res.idx, NO_IDX);
    assert!(!h.release_acked(8));
    assert!(h.release_acked(7));
    assert!(!h.release_acked(7), "one ack frees once");
    assert!(h.conn(&key(1)).is_none());
    assert_eq!(h.stats().ack_unknown, 2);
    let g = call(&mut h, due + 3, key(4), SYN, 0, 0);
    assert_eq!((g.res.idx, g.created.len()), (7, 1), "reused after the ack");
    // Software-only connections are forgotten when due.
    call(&mut h, due + 3, key(2), FIN, 1, 0);
    assert!(h.take_conn_release(due + 3 + T_RELEASE_NS).is_empty());
    assert!(h.conn(&key(2)).is_none());
    assert_eq!(h.stats().forgotten, 1);
}

#[test]
fn a_new_isn_on_a_closing_key_reopens_the_same_index() {
    let mut h = handler(1, 4).with_t_release(10);
    call(&mut h, 0, key(1), SYN, 500, 0);
    call(&mut h, 1, key(1), RST, 501, 0);
    assert_eq!(
        h.conn(&key(1)).unwrap().state,
        ConnState::Closing { due: 11 }
    );
    let g = call(&mut h, 5, key(1), SYN, 90, 0);
    assert_eq!((g.res.idx, g.res.op, g.res.init_end), (1, Op::Init, 91));
    assert!(!g.res.retx && g.created.is_empty());
    assert_eq!(h.conn(&key(1)).unwrap().state, ConnState::Open);
    assert!(h.take_conn_release(100).is_empty(), "the release is off");
    assert!(
        !call(&mut h, 6, key(1), ACK, 91, 5).res.retx,
        "lower numbers are new"
    );
    assert!(call(&mut h, 6, key(1), SYN, 90, 0).res.retx);
    assert_eq!(h.stats().reopened, 1);
}

#[test]
fn expiry_frees_and_runtime_idleness_releases_through_the_switch() {
    let mut h = handler(1, 2);
    call(&mut h, 0, key(1), SYN, 0, 0);
    call(&mut h, 0, key(2), SYN, 0, 0);
    // The switch entry aged out: gone at once.
    h.expire(TABLE_CONN_IDX, &key(1).0);
    assert!(h.conn(&key(1)).is_none());
    assert_eq!(h.indices(), vec![(2, key(2))]);
    h.expire(TABLE_CONN_IDX, &[1, 2]);
    h.expire(5, &key(2).0);
    // Idle in the runtime but never confirmed offloaded: release now.
    h.flow_expired(&key(2));
    assert_eq!(h.take_conn_release(0), vec![(key(2), 2)]);
    h.flow_expired(&key(2));
    assert!(h.take_conn_release(0).is_empty());
    assert!(h.release_acked(2));
    // A software-only connection is simply forgotten.
    let mut h = TrdHandler::default();
    assert_eq!(call(&mut h, 0, key(9), SYN, 0, 0).res.idx, NO_IDX);
    assert_eq!(h.stats().no_pool, 1);
    h.flow_expired(&key(9));
    assert!(h.is_empty());
}

#[test]
fn bounds_and_malformed_input() {
    let mut h = TrdHandler::new(2);
    for (kind, lo, hi) in [(1, 0, 10), (2, 5, 4), (2, 0, 0xFFFF)] {
        h.pool_assign(kind, [0; 4], lo, hi);
    }
    assert_eq!(h.stats().pool_refused, 3);
    h.pool_assign(POOL_INDICES, [0; 4], 0, 0xFFFE);
    h.pool_assign(POOL_INDICES, [0; 4], 0, 0xFFFE);
    assert_eq!(
        h.stats().pool_assigned,
        1,
        "the same slice again is a no-op"
    );
    call(&mut h, 0, key(1), SYN, 0, 0);
    call(&mut h, 0, key(2), SYN, 0, 0);
    let g = call(&mut h, 0, key(3), SYN, 0, 0);
    assert_eq!((g.res.idx, h.stats().table_full), (NO_IDX, 1));
    assert!(h.conn(&key(3)).is_none());
    // A new slice keeps live indices in use.
    h.pool_assign(POOL_INDICES, [0; 4], 0, 3);
    h.expire(TABLE_CONN_IDX, &key(1).0);
    assert_eq!(call(&mut h, 0, key(4), SYN, 0, 0).res.idx, 0);
    assert_eq!(call(&mut h, 0, key(5), SYN, 0, 0).res.idx, NO_IDX, "full");
    for len in [0usize, 16, 27, 29] {
        let mut p = vec![0xAB; len];
        let mut created = Vec::new();
        let mut ctx = HandlerCtx {
            now: 0,
            server_id: 1,
            core: 0,
            flow: key(0),
            payload: &[],
            created: &mut created,
        };
        assert_eq!(h.handle(&mut ctx, &mut p), HandlerStatus::Drop);
        assert_eq!(p, vec![0xAB; len], "a refused request is left alone");
    }
    assert_eq!(h.stats().malformed, 4);
    h.reset();
    assert!(h.is_empty() && h.indices().is_empty());
    assert_eq!(call(&mut h, 0, key(1), SYN, 0, 0).res.idx, NO_IDX);
}

#[test]
fn the_server_key_is_the_switch_key() {
    let h = TrdHandler::default();
    let inner = inca_wire::build_tcp_frame(
        &inca_wire::Endpoints::new(
            [1; 6],
            std::net::Ipv4Addr::new(10, 1, 1, 1),
            [2; 6],
            std::net::Ipv4Addr::new(10, 2, 2, 2),
        ),
        &inca_wire::TcpRepr {
            src_port: 40_000,
            dst_port: 22,
            seq: 1,
            ack: 0,
            flags: inca_wire::TcpFlags(0x10),
            window: 1,
            urgent: 0,
            options: &[],
            payload: b"x",
        },
    )
    .unwrap();
    let want = FlowKey::new(0, 6, [10, 1, 1, 1], [10, 2, 2, 2], 40_000, 22);
    assert_eq!(h.flow_key(0x0800, &inner[14..]), want);
    let udp = inca_apps::fixtures::vxlan_frame([1; 4], [2; 4], 5, [3; 4], [4; 4]);
    assert_eq!(
        h.flow_key(0x0800, &udp[14..]),
        FlowKey::of_l3(0x0800, &udp[14..]),
        "not a segment: the default key"
    );
    assert_eq!(h.flow_key(0x86DD, &[0; 40]), FlowKey::default());
}
