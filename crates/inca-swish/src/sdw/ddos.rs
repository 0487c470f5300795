//! The super-spreader / DDoS detector as an SDW application (specs/swish.md
//! §7): the replica's collection is the detector's sketch (3 rows of 32-bit
//! bitsets, Or merge) and every traffic packet runs handler 1 of §5.5 with
//! the detector's update and query:
//!
//! - a sampled packet ([`detector::sampled`]) is an update: bit
//!   hash′_r(dst) into R_u column hash_r(src) of each row (counted against
//!   B like any update);
//! - every packet queries R_r at the same columns; when the popcount of
//!   every row reaches [`detector::block_popcount`] the source is blocked
//!   and the packet dropped, otherwise it leaves on the app's `out_port`.
//!
//! Queries see every replica's updates of windows ≤ w − 2 (Lemma 1), so a
//! source spread over both spines is judged on its whole fan-out.

use inca_switch::{AccessError, DataPlane, PacketCtx};

use super::config::SdwApp;
use super::program::{ep8, half, set_half, SdwMeta, SdwProgram};
use crate::detector;

type Pkt<'a> = PacketCtx<SdwMeta, ()>;

fn tag(t: u16, w: u32) -> u8 {
    if w.is_multiple_of(2) {
        t as u8
    } else {
        (t >> 8) as u8
    }
}

fn set_tag(t: &mut u16, w: u32, v: u8) {
    if w.is_multiple_of(2) {
        *t = (*t & 0xFF00) | u16::from(v)
    } else {
        *t = (*t & 0x00FF) | (u16::from(v) << 8)
    }
}

impl SdwProgram {
    /// Handler 1 for a traffic packet from `src` to `dst`.
    pub(crate) fn on_traffic(
        &mut self,
        pkt: &mut Pkt<'_>,
        dp: &mut DataPlane<'_>,
        src: u32,
        dst: u32,
    ) -> Result<(), AccessError> {
        let SdwApp::Ddos { out_port } = self.cfg.app else {
            self.counters.malformed += 1;
            pkt.drop_packet();
            return Ok(());
        };
        let h = self.handles()?.clone();
        let b = self.cfg.b;
        let upd = detector::sampled(src, dst);
        let (w, ok) = dp.register(h.winreg, 0, |e| {
            let ok = !upd || e.hi < b;
            if upd && ok {
                e.hi = e.hi.wrapping_add(1);
            }
            (e.lo, ok)
        })?;
        let cols = self.cfg.cols;
        let rows = usize::from(self.cfg.rows).min(detector::ROWS);
        let col = |row: usize| u64::from(detector::column(row, src, cols));
        if upd && ok {
            self.counters.ddos_sampled += 1;
            for row in 0..rows {
                let c = col(row);
                let fresh = dp.register(h.tq[row], c, |t| {
                    let f = tag(*t, w) != ep8(w);
                    if f {
                        set_tag(t, w, ep8(w));
                    }
                    f
                })?;
                let v = detector::bit(row, dst);
                dp.register(h.q[row], c, |e| {
                    let cur = if fresh { 0 } else { half(*e, w) };
                    set_half(e, w, cur | v);
                })?;
            }
        } else if upd {
            self.counters.rejected += 1;
        }
        let need = detector::block_popcount();
        let mut blocked = true;
        for row in 0..rows {
            let cell = dp.register(h.p[row], col(row), |e| half(*e, w.wrapping_add(1)))?;
            blocked &= detector::popcount(cell) >= need;
        }
        if blocked {
            self.counters.ddos_blocked += 1;
            pkt.drop_packet();
        } else {
            self.counters.ddos_passed += 1;
            pkt.forward(out_port);
        }
        Ok(())
    }
}
