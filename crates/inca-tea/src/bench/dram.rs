//! `dram`: the TEA DRAM server's NIC in process: TEA-sized RDMA READ REQUEST →
//! READ RESPONSE ONLY per second on one core, as
//! crates/inca-tea/benches/dram_server.rs; baseline: a copy of the same
//! bytes into a new response-sized frame (what the work costs without the
//! protocol: header checks, QP state, ICRC).
//!
//! A TEA READ (specs/tea.md §4.2, trailer mode) of the IPv4 NAT table:
//! DMALength = KV_LEN 80 + shim 8 + a 60-byte frame, and the request
//! carries the same 68 bytes as its trailer. Requests are 100 ns apart in
//! virtual time, about 12 in flight (under max_dest_rd_atomic); after 1,024
//! PSNs the QP is reset to PSN 0, inside the timed loop (one call per 1,024
//! requests).

use std::hint::black_box;
use std::net::Ipv4Addr;

use anyhow::ensure;
use inca_switch::device::Output;
use inca_wire::{Endpoints, RethRepr, RoceFrameBuilder};

use inca_system::bench::{profiled, timed_rate, Baseline, Ctx, Measured};

use crate::server::agent_proto::CreateQp;
use crate::server::memory::Access;
use crate::server::nic::{Nic, NicConfig, QPN_BASE};

const KV_LEN: u32 = 80;
const TRAILER: usize = 8 + 60;
const RING: u32 = 1024;

/// A NIC with one QP and 4,096 filled rows, the requests of one lap of
/// PSNs, and the rows' base address.
struct Rig {
    nic: Nic,
    frames: Vec<Vec<u8>>,
    base_va: u64,
    out: Vec<Output>,
    now: u64,
    next: usize,
}

/// The NIC every DRAM-server bench reads from: one QP to the switch, 4,096
/// rows of 2,048 bytes filled so reads copy real bytes, and the READ
/// REQUESTs of one lap of PSNs; with the rows' base address. Shared with
/// the criterion bench (`benches/dram_server.rs`).
pub fn read_rig() -> anyhow::Result<(Nic, Vec<Vec<u8>>, u64)> {
    let switch_mac = [0x02, 0, 0, 0, 0x0a, 0xfe];
    let switch_ip = Ipv4Addr::new(10, 0, 0, 254);
    let server_mac = [0x02, 0, 0, 0, 0x0a, 0x01];
    let server_ip = Ipv4Addr::new(10, 0, 0, 1);
    let mut nic = Nic::new(NicConfig::default(), server_mac, server_ip, 0, 64 << 30, 0);
    let rows: u64 = 4096;
    let row_bytes: u64 = 2048;
    let region = nic
        .memory_mut()
        .register(0, rows * row_bytes, Access::READ_WRITE)
        .map_err(|e| anyhow::anyhow!("register: {e:?}"))?;
    // Fill every row's buckets and scratchpad so reads copy real bytes.
    let fill: Vec<u8> = (0..row_bytes).map(|i| i as u8 | 1).collect();
    for r in 0..rows {
        nic.memory_mut().write(
            region.base_va + r * row_bytes,
            &fill[..(KV_LEN as usize + TRAILER)],
        );
    }
    nic.create_qp(&CreateQp {
        qp_idx: 0,
        remote_qpn: 0x0001,
        remote_mac: switch_mac,
        remote_ip: switch_ip,
        init_psn: 0,
        pmtu: 4096,
        max_rd_atomic: 16,
    })
    .map_err(|e| anyhow::anyhow!("create_qp: {e:?}"))?;
    let ep = Endpoints {
        tos: 0x68,
        ..Endpoints::new(switch_mac, switch_ip, server_mac, server_ip)
    };
    let b = RoceFrameBuilder::new(ep, 0xC000, QPN_BASE);
    let trailer = [0x5Au8; TRAILER];
    let mut frames = Vec::new();
    for psn in 0..RING {
        let reth = RethRepr {
            virtual_addr: region.base_va + u64::from(psn * 7 % rows as u32) * row_bytes,
            rkey: region.rkey,
            dma_len: KV_LEN + TRAILER as u32,
        };
        frames.push(
            b.read_request(psn, reth, &trailer)
                .map_err(|e| anyhow::anyhow!("read request: {e:?}"))?,
        );
    }
    Ok((nic, frames, region.base_va))
}

impl Rig {
    fn new() -> anyhow::Result<Rig> {
        let (nic, frames, base_va) = read_rig()?;
        Ok(Rig {
            nic,
            frames,
            base_va,
            out: Vec::with_capacity(4),
            now: 0,
            next: 0,
        })
    }

    /// `n` READs through the NIC; returns the responses sent.
    fn reads(&mut self, n: u64) -> u64 {
        let mut sent = 0;
        for _ in 0..n {
            if self.next == self.frames.len() {
                // A new lap of PSNs: bring the QP back to PSN 0.
                let _ = self.nic.reset_qp(0, 0, 0x0001);
                self.next = 0;
            }
            self.now += 100;
            self.nic
                .handle_roce(self.now, black_box(&self.frames[self.next]), &mut self.out);
            self.next += 1;
            sent += self.out.len() as u64;
            self.out.clear();
        }
        sent
    }

    fn check(&self, reads: u64, sent: u64) -> anyhow::Result<()> {
        let s = self.nic.stats();
        ensure!(s.qp_errors == 0, "the benchmark broke its QP");
        ensure!(sent == reads, "{sent} responses to {reads} READs");
        Ok(())
    }
}

/// The baseline: the same bytes moved with no protocol work: read the
/// request, copy the row out of memory into a new response-sized frame.
fn copies(rig: &Rig, row: &[u8], n: u64) -> u64 {
    let resp_len = 14 + 20 + 8 + 12 + 4 + row.len() + 4;
    for j in 0..n as usize {
        let req = black_box(&rig.frames[j % rig.frames.len()]);
        let mut f = Vec::with_capacity(resp_len);
        f.extend_from_slice(&req[..resp_len - row.len()]);
        f.extend_from_slice(black_box(row));
        black_box(f);
    }
    n
}

/// `dram`: READ responses per second against the copy loop.
pub fn reads(ctx: &Ctx) -> anyhow::Result<Measured> {
    let n = ctx.size(2_000_000, 100_000);
    let mut rig = Rig::new()?;
    let mut row = vec![0u8; KV_LEN as usize + TRAILER];
    rig.nic.memory().read(rig.base_va, &mut row);
    let warm = n / 5;
    let sent = rig.reads(warm);
    rig.check(warm, sent)?;
    copies(&rig, &row, warm);
    let (mut samples, mut base) = (Vec::new(), Vec::new());
    for _ in 0..ctx.runs {
        let mut sent = 0;
        samples.push(timed_rate(|| {
            sent = rig.reads(n);
            n
        }));
        rig.check(n, sent)?;
        base.push(timed_rate(|| copies(&rig, &row, n)));
    }
    Ok(Measured {
        samples,
        baseline: Baseline::Measured {
            what: "a copy of the same bytes into a new frame".into(),
            samples: base,
        },
        notes: vec![format!(
            "{n} READs of 148 bytes per run, each answered with one READ RESPONSE ONLY"
        )],
    })
}

/// `dram --profile-iterations N`.
pub fn profile(n: u64) -> anyhow::Result<String> {
    let mut rig = Rig::new()?;
    rig.reads(10_000);
    let sent = profiled(|| rig.reads(n));
    rig.check(n, sent)?;
    Ok(format!("{n} READs through the DRAM server's NIC"))
}
