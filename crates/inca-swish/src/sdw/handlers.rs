//! The SDW ingress handlers (specs/swish.md §5.5, "Packet handlers" 1–7):
//! app update/query, DATA, ACK, READY, ADVANCE, START, the DATA generator
//! stream and the ACK-check timer. Each reaches the registers in the
//! global stage order `winreg → flagsR → ready_cnt → dedup → flagsA →
//! TQ/Q → TP/P → status → send_state → retx_mask`, at most once each.

use inca_switch::register::Pair;
use inca_switch::{AccessError, DataPlane, PacketCtx, PacketKind};
use inca_wire::swish::flags;
use inca_wire::swish::sdw::MsgType;

use super::app::{
    hash_col, AppReply, AppRequest, OP_QUERY, OP_UPDATE, PAYLOAD_AT, ST_OK, ST_REJECTED,
};
use super::config::Dedup;
use super::frames::{self, F_THEN_READY, T_ADVANCE, T_START, T_TIMER, T_TRIGGER};
use super::program::{ep, ep8, half, phase, set_half, Out, Parsed, SdwMeta, SdwProgram};
use super::program::{G_ACK_ADV, G_DATA, G_READY};

type Pkt<'a> = PacketCtx<SdwMeta, ()>;

pub(crate) fn tag(t: u16, w: u32) -> u8 {
    if w.is_multiple_of(2) {
        t as u8
    } else {
        (t >> 8) as u8
    }
}

pub(crate) fn set_tag(t: &mut u16, w: u32, v: u8) {
    if w.is_multiple_of(2) {
        *t = (*t & 0xFF00) | u16::from(v)
    } else {
        *t = (*t & 0x00FF) | (u16::from(v) << 8)
    }
}

/// Status after marking: (was full, is full).
fn full(s: Pair, n: u32, count: bool, mask: u32) -> bool {
    if count {
        s.lo >= n && s.hi >= n
    } else {
        s.lo == mask && s.hi == mask
    }
}

impl SdwProgram {
    /// PAUSED (§5.6 step 1): sync handlers drop everything while the
    /// controller recovers; app updates and queries go on.
    fn paused(
        &self,
        dp: &mut DataPlane<'_>,
        h: &super::program::Handles,
    ) -> Result<bool, AccessError> {
        dp.register(h.paused, 0, |p| *p != 0)
    }

    pub(crate) fn dispatch(
        &mut self,
        pkt: &mut Pkt<'_>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        if let PacketKind::Generated {
            stream, packet_id, ..
        } = pkt.kind()
        {
            if stream == self.cfg.first_stream {
                return self.on_timer(pkt, dp);
            }
            if Some(stream) == self.limiter_stream() {
                return self.on_estimate(pkt, dp, u32::from(packet_id));
            }
            let i = u32::from(stream.wrapping_sub(self.cfg.first_stream + 1));
            let col = i * self.cfg.cols_per_stream() + u32::from(packet_id);
            return self.on_gen_data(pkt, dp, col);
        }
        let internal_ok = matches!(pkt.kind(), PacketKind::Recirculated { .. })
            || pkt.ingress_port() == self.cfg.loop_port + 1
            || pkt.ingress_port() == self.cfg.loop_port;
        match pkt.meta.parsed {
            Parsed::Other => {
                if let Some(user) = self.limiter_user(pkt.header()) {
                    return self.on_user(pkt, dp, user);
                }
                self.counters.malformed += 1;
                pkt.drop_packet();
                Ok(())
            }
            Parsed::App(r) => self.on_app(pkt, dp, r),
            Parsed::Traffic { src, dst } => self.on_traffic(pkt, dp, src, dst),
            Parsed::Sdw {
                ty,
                flags: f,
                src,
                win,
                col,
                ncols,
                vals,
            } => {
                let from = self.cfg.members.iter().position(|m| m.rid == src);
                match (ty, from) {
                    (1, Some(j)) => self.on_data(pkt, dp, j, win, col, ncols, vals),
                    (2, Some(j)) if j != self.me => self.on_ack(pkt, dp, j, win),
                    (3, Some(j)) if j != self.me => self.on_ready(pkt, dp, j, win),
                    (T_ADVANCE, _) if internal_ok => self.on_advance(pkt, dp, win, false),
                    (T_START, _) if pkt.kind() == PacketKind::FromCpu => {
                        self.on_advance(pkt, dp, win, true)
                    }
                    (T_TRIGGER, _) if matches!(pkt.kind(), PacketKind::Recirculated { .. }) => {
                        // The stream fired on this pass's arrival; READY may follow.
                        if f & F_THEN_READY != 0 {
                            self.send_ready(pkt, win);
                        } else {
                            pkt.drop_packet();
                        }
                        Ok(())
                    }
                    _ => {
                        self.counters.malformed += 1;
                        pkt.drop_packet();
                        Ok(())
                    }
                }
            }
        }
    }

    /// Handler 1: an update lands in R_u (lazily reset by its tag), a query
    /// reads R_r; the answer goes back where the request came from.
    fn on_app(
        &mut self,
        pkt: &mut Pkt<'_>,
        dp: &mut DataPlane<'_>,
        r: AppRequest,
    ) -> Result<(), AccessError> {
        let h = self.handles()?.clone();
        let b = self.cfg.b;
        let upd = r.op & OP_UPDATE != 0;
        let (w, ok) = dp.register(h.winreg, 0, |e| {
            let ok = !upd || e.hi < b;
            if upd && ok {
                e.hi = e.hi.wrapping_add(1);
            }
            (e.lo, ok)
        })?;
        let query = r.op & OP_QUERY != 0;
        // §5.6 join: a joined replica's queries are not ready until its
        // first window completes.
        let not_ready = query && dp.register(h.ready_from, 0, |f| w < *f)?;
        let merge = self.cfg.merge;
        let cols = self.cfg.cols;
        let rows = usize::from(self.cfg.rows);
        if upd && ok {
            for row in 0..rows {
                let c = u64::from(hash_col(row, r.key, cols));
                let fresh = dp.register(h.tq[row], c, |t| {
                    let f = tag(*t, w) != ep8(w);
                    if f {
                        set_tag(t, w, ep8(w));
                    }
                    f
                })?;
                dp.register(h.q[row], c, |e| {
                    let cur = if fresh { 0 } else { half(*e, w) };
                    set_half(e, w, merge.apply(cur, r.value));
                })?;
            }
        }
        if !ok {
            self.counters.rejected += 1;
        }
        let mut res = [0u32; 3];
        if query {
            for (row, out) in res.iter_mut().enumerate().take(rows) {
                let c = u64::from(hash_col(row, r.key, cols));
                *out = dp.register(h.p[row], c, |e| half(*e, w.wrapping_add(1)))?;
            }
        }
        if let Some(sn) = self.cfg.snake {
            // Load, not a client: on along the snake, unanswered.
            match sn.next(pkt.ingress_port()) {
                Some(out) => pkt.forward(out),
                None => pkt.drop_packet(),
            }
            return Ok(());
        }
        let reply = AppReply {
            op: r.op,
            status: if ok { ST_OK } else { ST_REJECTED },
            rid: self.cfg.rid as u8,
            req_id: r.req_id,
            key: r.key,
            value: r.value,
            win: w,
            res,
            not_ready,
        };
        let hd = pkt.header_mut();
        if hd.len() < PAYLOAD_AT + super::app::APP_LEN {
            pkt.drop_packet();
            return Ok(());
        }
        reply.write(&mut hd[PAYLOAD_AT..]);
        // Back to the sender: swap MACs, IPs and ports (checksum unchanged).
        for (a, b) in [(0, 6), (26, 30), (34, 36)] {
            let len = b - a;
            let (x, y) = hd.split_at_mut(b);
            x[a..a + len.min(6).min(b - a)].swap_with_slice(&mut y[..len.min(6)]);
        }
        pkt.forward(pkt.ingress_port());
        Ok(())
    }

    /// Handler 2: DATA(w, c, vals) from member `j`.
    #[allow(clippy::too_many_arguments)]
    fn on_data(
        &mut self,
        pkt: &mut Pkt<'_>,
        dp: &mut DataPlane<'_>,
        j: usize,
        w: u32,
        c: u32,
        ncols: u32,
        vals: [u32; 3],
    ) -> Result<(), AccessError> {
        let h = self.handles()?.clone();
        if ncols != self.cfg.cols || c >= ncols {
            self.counters.malformed += 1;
            pkt.drop_packet();
            return Ok(());
        }
        if self.paused(dp, &h)? {
            pkt.drop_packet();
            return Ok(());
        }
        let big_w = dp.register(h.winreg, 0, |e| e.lo)?;
        if w != big_w {
            if w == big_w.wrapping_sub(1) && c == ncols - 1 && j != self.me {
                // The sender missed our ACK: ACK again, merge nothing.
                self.make_ack(pkt, j, w, false);
            } else {
                if w == big_w.wrapping_add(1) {
                    self.counters.early += 1;
                } else if w != big_w.wrapping_sub(1) {
                    self.counters.stale += 1;
                }
                pkt.drop_packet();
            }
            return Ok(());
        }
        let e = ep(big_w);
        let (accepted, complete) = if self.cfg.break_dedup {
            (true, c == ncols - 1)
        } else {
            match self.cfg.dedup {
                Dedup::CounterPerSwitch => {
                    let nc = h.next_col.ok_or(AccessError::WrongHandle)?;
                    let (acc, done, gap) = dp.register(nc, j as u64, |x| {
                        if x.lo != e {
                            *x = Pair { lo: e, hi: 0 };
                        }
                        if c == x.hi {
                            x.hi = x.hi.wrapping_add(1);
                            (true, x.hi == ncols, false)
                        } else {
                            (false, false, c > x.hi)
                        }
                    })?;
                    if !acc {
                        if gap {
                            self.counters.gap += 1;
                        } else {
                            self.counters.dup += 1;
                        }
                    }
                    (acc, done)
                }
                Dedup::BitmapPerColumn => {
                    let cm = h.colmask.ok_or(AccessError::WrongHandle)?;
                    let bit = 1u32 << j;
                    let acc = dp.register(cm, u64::from(c), |x| {
                        if x.lo != e {
                            *x = Pair { lo: e, hi: 0 };
                        }
                        let fresh = x.hi & bit == 0;
                        x.hi |= bit;
                        fresh
                    })?;
                    let mut done = false;
                    if acc {
                        let rc = h.recv_cols.ok_or(AccessError::WrongHandle)?;
                        done = dp.register(rc, j as u64, |x| {
                            if x.lo != e {
                                *x = Pair { lo: e, hi: 0 };
                            }
                            x.hi = x.hi.wrapping_add(1);
                            x.hi == ncols
                        })?;
                    } else {
                        self.counters.dup += 1;
                    }
                    (acc, done)
                }
            }
        };
        let count = self.count_status();
        // flagsA (count mode): whether this completion is new, or whether
        // j was already received (for a re-ACK).
        let mut newly = complete;
        let mut received = false;
        if let Some(fa) = h.flags_a {
            let me = j == self.me;
            (newly, received) = dp.register(fa, j as u64, |x| {
                let was = x.lo == e;
                if complete {
                    x.lo = e;
                    if me {
                        x.hi = e;
                    }
                }
                (complete && !was, was)
            })?;
        }
        if accepted {
            let merge = self.cfg.merge;
            for (row, &v) in vals.iter().enumerate().take(usize::from(self.cfg.rows)) {
                let first = dp.register(h.tp[row], u64::from(c), |t| {
                    let f = *t != ep8(big_w);
                    *t = ep8(big_w);
                    f
                })?;
                dp.register(h.p[row], u64::from(c), |x| {
                    let base = if first {
                        half(*x, big_w.wrapping_add(1))
                    } else {
                        half(*x, big_w)
                    };
                    set_half(x, big_w, merge.apply(base, v));
                })?;
            }
        }
        let n = self.cfg.live_n() as u32;
        let mask = self.cfg.member_mask();
        if complete {
            let bit = 1u32 << (j % 32);
            let me = j == self.me;
            let fire = dp.register(h.status, 0, |s| {
                let was = full(*s, n, count, mask);
                if count {
                    if newly {
                        s.lo = s.lo.wrapping_add(1);
                        if me {
                            s.hi = s.hi.wrapping_add(1);
                        }
                    }
                } else {
                    s.lo |= bit;
                    if me {
                        s.hi |= bit;
                    }
                }
                !was && full(*s, n, count, mask)
            })?;
            if me {
                if fire {
                    self.make_advance(pkt, big_w);
                } else {
                    pkt.drop_packet();
                }
            } else {
                self.make_ack(pkt, j, big_w, fire);
            }
            return Ok(());
        }
        if !accepted && c == ncols - 1 && j != self.me {
            if !count {
                let bit = 1u32 << j;
                received = dp.register(h.status, 0, |s| s.lo & bit != 0)?;
            }
            if received {
                self.make_ack(pkt, j, big_w, false);
                return Ok(());
            }
        }
        pkt.drop_packet();
        Ok(())
    }

    /// Handler 3: ACK(w) from `j`.
    fn on_ack(
        &mut self,
        pkt: &mut Pkt<'_>,
        dp: &mut DataPlane<'_>,
        j: usize,
        w: u32,
    ) -> Result<(), AccessError> {
        let h = self.handles()?.clone();
        if self.paused(dp, &h)? {
            pkt.drop_packet();
            return Ok(());
        }
        let big_w = dp.register(h.winreg, 0, |e| e.lo)?;
        if w != big_w {
            pkt.drop_packet();
            return Ok(());
        }
        self.mark_ack(pkt, dp, j, big_w)
    }

    /// Marks ack(j) in window `w`; the packet becomes ADVANCE(w) if that
    /// completes the window, else it is dropped.
    fn mark_ack(
        &mut self,
        pkt: &mut Pkt<'_>,
        dp: &mut DataPlane<'_>,
        j: usize,
        w: u32,
    ) -> Result<(), AccessError> {
        let h = self.handles()?.clone();
        let count = self.count_status();
        let mut newly = true;
        if let Some(fa) = h.flags_a {
            let e = ep(w);
            newly = dp.register(fa, j as u64, |x| {
                let n = x.hi != e;
                x.hi = e;
                n
            })?;
        }
        let (n, mask, bit) = (
            self.cfg.live_n() as u32,
            self.cfg.member_mask(),
            1u32 << (j % 32),
        );
        let fire = dp.register(h.status, 0, |s| {
            let was = full(*s, n, count, mask);
            if count {
                if newly {
                    s.hi = s.hi.wrapping_add(1);
                }
            } else {
                s.hi |= bit;
            }
            !was && full(*s, n, count, mask)
        })?;
        if fire {
            self.make_advance(pkt, w);
        } else {
            pkt.drop_packet();
        }
        Ok(())
    }

    /// Handler 4: READY(w) from `j`.
    fn on_ready(
        &mut self,
        pkt: &mut Pkt<'_>,
        dp: &mut DataPlane<'_>,
        j: usize,
        w: u32,
    ) -> Result<(), AccessError> {
        let h = self.handles()?.clone();
        if self.paused(dp, &h)? {
            pkt.drop_packet();
            return Ok(());
        }
        let big_w = dp.register(h.winreg, 0, |e| e.lo)?;
        let e = ep(w);
        let fresh = dp.register(h.flags_r, j as u64, |x| {
            let f = inca_wire::swish::sdw::win_lt(*x, e);
            if f {
                *x = e;
            }
            f
        })?;
        if !fresh {
            pkt.drop_packet();
            return Ok(());
        }
        let cnt = dp.register(h.ready_cnt, u64::from(w % 2), |x| {
            if x.lo != e {
                *x = Pair { lo: e, hi: 0 };
            }
            x.hi = x.hi.wrapping_add(1);
            x.hi
        })?;
        let need = (self.cfg.live_n() as u32).saturating_sub(1);
        if w == big_w && cnt == need {
            let now_us = (dp.now() / 1_000) as u32;
            let go = dp.register(h.send_state, 0, |s| {
                if s.lo >> 24 == phase::READY {
                    *s = Pair {
                        lo: (phase::DATA << 24) | (big_w & 0xFF_FFFF),
                        hi: now_us,
                    };
                    true
                } else {
                    false
                }
            })?;
            if go {
                let mm = self.cfg.member_mask();
                dp.register(h.retx_mask, 0, |m| *m = mm)?;
                self.make_trigger(pkt, big_w, false);
                return Ok(());
            }
        } else if w == big_w.wrapping_add(1) {
            // j finished our window, so it has our data: an implicit ACK.
            return self.mark_ack(pkt, dp, j, big_w);
        }
        pkt.drop_packet();
        Ok(())
    }

    /// Handler 5 (and START): the window moves to `w_old + 1` (START: stays
    /// at `w_old`), the sync state resets, READY goes out or DATA starts.
    fn on_advance(
        &mut self,
        pkt: &mut Pkt<'_>,
        dp: &mut DataPlane<'_>,
        w_old: u32,
        start: bool,
    ) -> Result<(), AccessError> {
        let h = self.handles()?.clone();
        if start {
            // START clears PAUSED in the same pass (§5.6 step 6), so no
            // sync packet runs between the two and START cannot reset a
            // window that has already begun [our choice: a separate
            // unpause raced with the peers' first DATA].
            dp.register(h.paused, 0, |p| *p = 0)?;
        } else if self.paused(dp, &h)? {
            pkt.drop_packet();
            return Ok(());
        }
        let ok = dp.register(h.winreg, 0, |e| {
            if start {
                // START enters the window the controller loaded, keeping
                // the updates already counted in it (D8).
                e.lo == w_old
            } else if e.lo == w_old {
                *e = Pair {
                    lo: w_old.wrapping_add(1),
                    hi: 0,
                };
                true
            } else {
                false
            }
        })?;
        if !ok {
            pkt.drop_packet();
            return Ok(());
        }
        let w = if start { w_old } else { w_old.wrapping_add(1) };
        if !start {
            self.log_advance(w, dp.now());
        }
        let need = (self.cfg.live_n() as u32).saturating_sub(1);
        let e = ep(w);
        let ready_now = !self.cfg.ready_phase
            || need == 0
            || dp.register(h.ready_cnt, u64::from(w % 2), |x| x.lo == e && x.hi == need)?;
        dp.register(h.status, 0, |s| *s = Pair::default())?;
        let now_us = (dp.now() / 1_000) as u32;
        // Paced windows (`min_window`) wait in HOLD; the timer ends it.
        let hold = !start && self.cfg.min_window > 0;
        let ph = if hold {
            phase::HOLD
        } else if ready_now {
            phase::DATA
        } else {
            phase::READY
        };
        dp.register(h.send_state, 0, |s| {
            *s = Pair {
                lo: (ph << 24) | (w & 0xFF_FFFF),
                hi: now_us,
            }
        })?;
        if hold {
            pkt.drop_packet();
        } else if ready_now {
            let mm = self.cfg.member_mask();
            dp.register(h.retx_mask, 0, |m| *m = mm)?;
            self.make_trigger(pkt, w, self.cfg.ready_phase);
        } else {
            self.send_ready(pkt, w);
        }
        Ok(())
    }

    /// Handler 6: column `col` of the DATA batch.
    fn on_gen_data(
        &mut self,
        pkt: &mut Pkt<'_>,
        dp: &mut DataPlane<'_>,
        col: u32,
    ) -> Result<(), AccessError> {
        let h = self.handles()?.clone();
        if col >= self.cfg.cols {
            pkt.drop_packet();
            return Ok(());
        }
        if self.paused(dp, &h)? {
            pkt.drop_packet();
            return Ok(());
        }
        let w = dp.register(h.winreg, 0, |e| e.lo)?;
        let src = w.wrapping_add(1);
        let want = ep8(w.wrapping_sub(1));
        let mut vals = [0u32; 3];
        for (row, v) in vals.iter_mut().enumerate().take(usize::from(self.cfg.rows)) {
            let stale = dp.register(h.tq[row], u64::from(col), |t| {
                let s = tag(*t, src) != want;
                if s {
                    // Normalize: what is sent is what stays.
                    set_tag(t, src, want);
                }
                s
            })?;
            *v = dp.register(h.q[row], u64::from(col), |e| {
                if stale {
                    set_half(e, src, 0);
                }
                half(*e, src)
            })?;
        }
        let st = dp.register(h.send_state, 0, |s| s.lo)?;
        let ph = st >> 24;
        if !(ph == phase::DATA || ph == phase::RETX) || st & 0xFF_FFFF != w & 0xFF_FFFF {
            pkt.drop_packet();
            return Ok(());
        }
        let mask = dp.register(h.retx_mask, 0, |m| *m)?;
        let mut f = 0;
        if col == self.cfg.cols - 1 {
            f |= flags::LAST;
        }
        if ph == phase::RETX {
            f |= flags::RETX;
            self.counters.retx += 1;
        }
        let hd = pkt.header_mut();
        frames::set_kind(hd, MsgType::Data as u8, f, w);
        frames::set_data(hd, col, self.cfg.cols, self.cfg.rows, vals);
        pkt.meta.mask = mask;
        pkt.meta.out = Out::Data;
        pkt.multicast(G_DATA);
        Ok(())
    }

    /// Handler 7: the ACK-check timer.
    fn on_timer(&mut self, pkt: &mut Pkt<'_>, dp: &mut DataPlane<'_>) -> Result<(), AccessError> {
        let h = self.handles()?.clone();
        if self.paused(dp, &h)? {
            pkt.drop_packet();
            return Ok(());
        }
        let w = dp.register(h.winreg, 0, |e| e.lo)?;
        let (n, mask, count) = (
            self.cfg.live_n() as u32,
            self.cfg.member_mask(),
            self.count_status(),
        );
        // A paced window leaves HOLD straight into DATA if every peer's
        // READY is already in (as ADVANCE would have).
        let min_us = (self.cfg.min_window / 1_000) as u32;
        let ready_all = if self.cfg.min_window > 0 {
            let (e, need) = (ep(w), n.saturating_sub(1));
            dp.register(h.ready_cnt, u64::from(w % 2), |x| x.lo == e && x.hi == need)?
        } else {
            false
        };
        let s = dp.register(h.status, 0, |s| *s)?;
        let (recv_full, ack_full) = if count {
            (s.lo >= n, s.hi >= n)
        } else {
            (s.lo == mask, s.hi == mask)
        };
        let now_us = (dp.now() / 1_000) as u32;
        let rto_data = (self.cfg.rto_data() / 1_000) as u32;
        let rto_ready = (self.cfg.rto_ready / 1_000).max(1) as u32;
        let ready_phase = self.cfg.ready_phase;
        // 0 nothing, 1 retransmit, 2 READY (again), 3 DATA after HOLD.
        let act = dp.register(h.send_state, 0, |st| {
            let ph = st.lo >> 24;
            let elapsed = now_us.wrapping_sub(st.hi);
            let act = match ph {
                phase::HOLD if elapsed >= min_us && ready_all => {
                    st.lo = (phase::DATA << 24) | (st.lo & 0xFF_FFFF);
                    3
                }
                phase::HOLD if elapsed >= min_us => {
                    st.lo = (phase::READY << 24) | (st.lo & 0xFF_FFFF);
                    2
                }
                phase::DATA | phase::RETX if !ack_full && elapsed >= rto_data => {
                    st.lo = (phase::RETX << 24) | (st.lo & 0xFF_FFFF);
                    1
                }
                phase::DATA | phase::RETX if ready_phase && !recv_full && elapsed >= rto_ready => 2,
                phase::READY if elapsed >= rto_ready => 2,
                _ => 0,
            };
            if act != 0 {
                st.hi = now_us;
            }
            act
        })?;
        match act {
            1 => {
                let m = if count { u32::MAX } else { mask & !s.hi };
                dp.register(h.retx_mask, 0, |x| *x = m)?;
                self.make_trigger(pkt, w, ready_phase && !recv_full);
            }
            2 => self.send_ready(pkt, w),
            3 => {
                dp.register(h.retx_mask, 0, |x| *x = mask)?;
                self.make_trigger(pkt, w, true);
            }
            _ => pkt.drop_packet(),
        }
        let _ = T_TIMER;
        Ok(())
    }

    /// The packet becomes ACK(w) to member `j`; with `advance`, also
    /// ADVANCE(w) to self through the loopback (one multicast).
    fn make_ack(&mut self, pkt: &mut Pkt<'_>, j: usize, w: u32, advance: bool) {
        let (me, to) = (self.cfg.members[self.me], self.cfg.members[j]);
        let hd = pkt.header_mut();
        frames::address(hd, &me, Some(&to));
        frames::set_kind(hd, MsgType::Ack as u8, flags::ACK, w);
        let cols = self.cfg.cols;
        if let Some(b) = hd.get_mut(frames::BODY_AT + 4..frames::BODY_AT + 12) {
            b[..4].copy_from_slice(&(cols - 1).to_be_bytes());
            b[4..].copy_from_slice(&cols.to_be_bytes());
        }
        if advance {
            pkt.meta.out = Out::AckAdvance;
            pkt.multicast(G_ACK_ADV + j as u16);
        } else {
            pkt.meta.out = Out::Plain;
            pkt.forward(to.port);
        }
    }

    /// The packet becomes ADVANCE(w) and recirculates.
    fn make_advance(&mut self, pkt: &mut Pkt<'_>, w: u32) {
        let me = self.cfg.members[self.me];
        let hd = pkt.header_mut();
        frames::address(hd, &me, None);
        frames::set_kind(hd, T_ADVANCE, 0, w);
        pkt.meta.out = Out::Plain;
        pkt.recirculate();
    }

    /// The packet becomes the DATA trigger for `w` and recirculates.
    fn make_trigger(&mut self, pkt: &mut Pkt<'_>, w: u32, then_ready: bool) {
        let me = self.cfg.members[self.me];
        let hd = pkt.header_mut();
        frames::address(hd, &me, None);
        frames::set_kind(hd, T_TRIGGER, if then_ready { F_THEN_READY } else { 0 }, w);
        pkt.meta.out = Out::Plain;
        pkt.recirculate();
    }

    /// The packet becomes READY(w) to every peer.
    fn send_ready(&mut self, pkt: &mut Pkt<'_>, w: u32) {
        let me = self.cfg.members[self.me];
        let hd = pkt.header_mut();
        frames::address(hd, &me, None);
        frames::set_kind(hd, MsgType::Ready as u8, 0, w);
        self.counters.ready_sent += 1;
        pkt.meta.out = Out::Ready;
        pkt.multicast(G_READY);
    }
}
