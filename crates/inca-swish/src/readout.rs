//! Reading a sketch out of a switch two ways (specs/swish.md §8.2
//! experiment 1, the paper's Fig. 1 / §3): through the control plane, as a
//! central controller would, and by a packet-generator walk in the data
//! plane, as SwiSh's replication does.
//!
//! The program `swish_readout` holds `rows` register arrays of `columns`
//! 32-bit cells (the SDW collection's shape). At start it reads them all
//! once, by the `mode` parameter:
//!
//! - `cp` — one control-plane register read per row, each costing the
//!   profile's `register_op + register_per_entry × columns` (tofino: 50 µs
//!   plus 2.58 µs per entry, docs/calibration.md), serially on the control
//!   channel;
//! - `dp` — the control plane injects a trigger packet that recirculates
//!   and fires generator stream 0 (one batch per [`BATCH`] columns); each
//!   generated packet reads column `batch_id × BATCH + packet_id` of every
//!   row, one access per array, writes the words into its payload and
//!   leaves on `out_port` (a collector).
//!
//! It reports `readout_ns` (from the control plane's first operation to the
//! last cell read: the last register result, or the last generated
//! packet's ingress) and `cells_read`, so a sweep plots one against the
//! other; nothing in it knows what either mode should cost.

use inca_apps::params::{ParamError, Params};
use inca_switch::pktgen::{StreamConfig, Trigger};
use inca_switch::{
    AccessError, ArrayDecl, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress,
    Nanos, PacketCtx, PacketKind, PacketOutDest, ParseError, PortId, Program, ProgramReport,
    RegisterHandle,
};

/// Columns per generator batch (a batch's packet id is 16 bits).
pub const BATCH: u32 = 32_768;
/// The program's name.
pub const PROGRAM: &str = "swish_readout";
/// Its parameters.
pub const PARAMS: &[&str] = &["rows", "columns", "mode", "out_port"];
/// Generated frame: Ethernet + IPv4 + UDP headers, then 4 bytes of column
/// and 4 per row (at most 3 rows: 12 bytes, the SDW packet's payload).
const PAYLOAD_AT: usize = 14 + 20 + 8;
/// First bytes of the trigger packet, matched by the recirculation trigger
/// (a locally administered destination MAC no host uses) [our choice].
const TRIGGER_MAC: [u8; 6] = [0x02, 0x53, 0x57, 0xFF, 0xFF, 0x01];

/// How the sketch is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Control-plane register reads.
    ControlPlane,
    /// A generator walk in the data plane.
    DataPlane,
}

/// The readout program (see the module docs).
#[derive(Debug, Clone)]
pub struct SketchReadout {
    rows: u32,
    columns: u32,
    mode: Mode,
    out_port: PortId,
    arrays: Vec<RegisterHandle<u32>>,
    started: Option<Nanos>,
    finished: Option<Nanos>,
    reads_pending: usize,
    cells_read: u64,
}

impl SketchReadout {
    /// `rows` (1–3) arrays of `columns` cells, read by `mode`, generated
    /// packets to `out_port`.
    pub fn new(rows: u32, columns: u32, mode: Mode, out_port: PortId) -> Self {
        SketchReadout {
            rows: rows.clamp(1, 3),
            columns: columns.max(1),
            mode,
            out_port,
            arrays: Vec::new(),
            started: None,
            finished: None,
            reads_pending: 0,
            cells_read: 0,
        }
    }

    /// From named parameters: `rows` (1–3, default 3), `columns` (1–2^20,
    /// default 65,536), `mode` (`cp` or `dp`, default `dp`), `out_port`
    /// (default 1).
    pub fn from_params(p: &Params) -> Result<Self, ParamError> {
        p.check_known(PROGRAM, PARAMS)?;
        let mode = match p.text("mode").unwrap_or("dp") {
            "cp" => Mode::ControlPlane,
            "dp" => Mode::DataPlane,
            other => {
                return Err(ParamError::Value {
                    name: "mode".into(),
                    reason: format!("`{other}`: expected `cp` or `dp`"),
                })
            }
        };
        Ok(SketchReadout::new(
            p.number("rows", 3, 1, 3)? as u32,
            p.number("columns", 65_536, 1, 1 << 20)? as u32,
            mode,
            p.number("out_port", 1, 0, 255)? as PortId,
        ))
    }

    /// Time from the first operation to the last cell read, once done.
    pub fn readout_ns(&self) -> Option<Nanos> {
        Some(self.finished? - self.started?)
    }

    /// Cells read so far.
    pub fn cells_read(&self) -> u64 {
        self.cells_read
    }

    fn template(&self) -> Vec<u8> {
        let mut f = vec![0u8; PAYLOAD_AT + 16];
        f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0C]);
        f[6..12].copy_from_slice(&TRIGGER_MAC);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f
    }

    fn batches(&self) -> u32 {
        self.columns.div_ceil(BATCH)
    }
}

impl Program for SketchReadout {
    type Meta = ();
    type Digest = ();

    fn name(&self) -> &str {
        PROGRAM
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        self.arrays.clear();
        for r in 0..self.rows {
            self.arrays.push(d.register(ArrayDecl::new(
                &format!("sketch_row{r}"),
                self.columns as usize,
            ))?);
        }
        Ok(())
    }

    fn parse(&self, _: Gress, _: &[u8], _: &mut ()) -> Result<(), ParseError> {
        Ok(())
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<(), ()>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        match pkt.kind() {
            // The trigger goes round once; its recirculated pass fires the
            // walk's batch.
            PacketKind::FromCpu => pkt.recirculate(),
            PacketKind::Generated {
                stream: 0,
                batch_id,
                packet_id,
            } => {
                let col = u32::from(batch_id) * BATCH + u32::from(packet_id);
                if col >= self.columns || pkt.len() < PAYLOAD_AT + 16 {
                    pkt.drop_packet();
                    return Ok(());
                }
                let mut words = [0u32; 3];
                for (r, &a) in self.arrays.iter().enumerate() {
                    words[r] = dp.register(a, u64::from(col), |v| *v)?;
                }
                let h = pkt.header_mut();
                h[PAYLOAD_AT..PAYLOAD_AT + 4].copy_from_slice(&col.to_be_bytes());
                for (r, w) in words.iter().enumerate() {
                    let at = PAYLOAD_AT + 4 + 4 * r;
                    h[at..at + 4].copy_from_slice(&w.to_be_bytes());
                }
                self.cells_read += u64::from(self.rows);
                if self.cells_read == u64::from(self.rows) * u64::from(self.columns) {
                    self.finished = Some(pkt.ingress_time());
                }
                pkt.forward(self.out_port);
            }
            _ => pkt.drop_packet(),
        }
        Ok(())
    }

    fn control(&mut self, event: ControlEvent<()>, cp: &mut ControlPlane<'_>) {
        match event {
            ControlEvent::Start => {
                self.started = Some(cp.now());
                self.finished = None;
                self.cells_read = 0;
                match self.mode {
                    Mode::ControlPlane => {
                        for &a in &self.arrays {
                            cp.register_read(a, 0, u64::from(self.columns));
                        }
                        self.reads_pending = self.arrays.len();
                    }
                    Mode::DataPlane => {
                        let template = self.template();
                        cp.packet_generator(
                            0,
                            Some(StreamConfig {
                                trigger: Trigger::Recirculation {
                                    value: TRIGGER_MAC.to_vec(),
                                    mask: vec![0xFF; 6],
                                },
                                template: template.clone(),
                                batch_size: self.columns.min(BATCH) as u16,
                            }),
                        );
                        // The trigger's destination MAC is the match value.
                        let mut trigger = template;
                        trigger[..6].copy_from_slice(&TRIGGER_MAC);
                        for _ in 0..self.batches() {
                            cp.packet_out(trigger.clone(), PacketOutDest::Ingress(0));
                        }
                    }
                }
            }
            ControlEvent::RegisterValues { values, .. } => {
                self.cells_read += values.len() as u64;
                self.reads_pending = self.reads_pending.saturating_sub(1);
                if self.reads_pending == 0 {
                    self.finished = Some(cp.now());
                }
            }
            _ => {}
        }
    }

    fn report(&self) -> ProgramReport {
        let mut counters = vec![("cells_read".to_string(), self.cells_read)];
        if let Some(ns) = self.readout_ns() {
            counters.push(("readout_ns".to_string(), ns));
        }
        ProgramReport {
            counters,
            series: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inca_switch::harness::Harness;
    use inca_switch::{Profile, Switch};

    fn run(mode: Mode, columns: u32) -> (Nanos, u64, usize) {
        let program = SketchReadout::new(3, columns, mode, 1);
        let sw = Switch::new(Profile::tofino(), program).unwrap();
        let mut h = Harness::new(sw, 1);
        h.advance_to(2_000_000_000);
        let sent = h.take().len();
        let p = h.device.program();
        (p.readout_ns().expect("finished"), p.cells_read(), sent)
    }

    #[test]
    fn both_modes_read_every_cell_and_the_walk_is_faster() {
        for columns in [1, 100, 40_000] {
            let (cp_ns, cp_cells, cp_sent) = run(Mode::ControlPlane, columns);
            let (dp_ns, dp_cells, dp_sent) = run(Mode::DataPlane, columns);
            println!("columns {columns}: cp {cp_ns} ns, dp {dp_ns} ns");
            assert_eq!(cp_cells, 3 * u64::from(columns));
            assert_eq!(dp_cells, 3 * u64::from(columns));
            assert_eq!(cp_sent, 0);
            assert_eq!(dp_sent, columns as usize, "one packet per column");
            assert!(dp_ns < cp_ns, "columns {columns}: dp {dp_ns} vs cp {cp_ns}");
        }
    }
}
