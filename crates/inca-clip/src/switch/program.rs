//! The generated switch program (spec §5.2): one ingress pass per packet,
//! for an original packet or a server's response.
//!
//! ```text
//! CLIP EtherType  → RESPONSE: from a server port, kind RESPONSE, version 1,
//!                   this app → status DROP drops; else the shim is removed,
//!                   post_processing(res), forward_regular.
//! server port     → a CLIP-CTL datagram for the controller goes to the
//!                   CPU; anything else is dropped (servers only emit
//!                   responses).
//! ORIGINAL        → pre_processing; not flight → post_processing (FAST),
//!                   forward_regular; flight → count (CMS), select_server,
//!                   push the shim, out to the server's port.
//! ```
//!
//! A response never runs `pre_processing` and never acquires `flight`, and
//! `forward_regular` never resolves to a server port, so no packet loops
//! between the switch and its servers.

use inca_apps::headers::{self, Parsed};
use inca_switch::{
    AccessError, ControlEvent, ControlPlane, DataPlane, Declare, DeclareError, Gress, PacketCtx,
    ParseError, Program, ProgramReport,
};
use inca_wire::clip::shim::{self, ClipRepr, Kind, Sel, Status, COMMON_LEN};
use inca_wire::clip::ETHERTYPE;

use crate::app::{PostPath, SwitchApp};
use crate::flow::FlowKey;
use crate::switch::controller::{Controller, ControllerConfig, Out};
use crate::switch::driver::{Command, Driver, MSG_COMMAND};
use crate::switch::forwarding::Forwarding;
use crate::switch::scalability::{Scalability, ScaleSizes};
use crate::switch::selection::Selection;
use crate::switch::stats::SwitchStats;

/// Punt reason of a CLIP-CTL datagram from a server.
pub const REASON_CTL: u16 = 1;
/// Longest params region an app may declare.
pub const MAX_PARAMS: usize = 64;

/// What the parser found.
#[derive(Debug, Clone, Default)]
pub struct ClipMeta {
    /// The original headers (of an original packet; of a response, filled
    /// after the shim is removed).
    pub p: Parsed,
    /// A CLIP header: its offset and fields.
    pub shim: Option<(u16, ClipRepr)>,
    /// The CLIP EtherType over bytes that are not a valid header.
    pub bad_shim: bool,
}

/// Pin-overflow digest (§4.4): record mode could not cache this pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinOverflow {
    /// The flow.
    pub flow: FlowKey,
    /// The server it was sent to.
    pub server: u8,
    /// The slot version used.
    pub grp_ver: u16,
}

/// The CLIP switch program over app `A`. See the module documentation.
#[derive(Debug, Clone)]
pub struct ClipSwitch<A: SwitchApp> {
    app: A,
    sizes: ScaleSizes,
    pin_idle_timeout: u64,
    fwd: Option<Forwarding>,
    l2l3: inca_apps::l2l3::L2L3,
    selection: Option<Selection>,
    scale: Option<Scalability>,
    /// The control-plane side: the switch driver.
    pub driver: Driver,
    /// The controller, when it runs on the switch CPU.
    pub controller: Option<Controller>,
    /// Per-packet-type counters.
    pub stats: SwitchStats,
}

impl<A: SwitchApp> ClipSwitch<A> {
    /// The program over `app`, routing regular traffic with `l2l3`, driven
    /// by `driver`.
    pub fn new(app: A, l2l3: inca_apps::l2l3::L2L3, sizes: ScaleSizes, driver: Driver) -> Self {
        Self::with_controller(app, l2l3, sizes, driver, None)
    }

    /// The program with a controller on the switch CPU (None: driven from
    /// outside by commands).
    pub fn with_controller(
        app: A,
        l2l3: inca_apps::l2l3::L2L3,
        sizes: ScaleSizes,
        driver: Driver,
        controller: Option<ControllerConfig>,
    ) -> Self {
        let controller = controller
            .filter(|c| c.enabled)
            .map(|c| Controller::new(c, driver.config()));
        assert!(app.params_len() <= MAX_PARAMS && app.params_len().is_multiple_of(4));
        ClipSwitch {
            app,
            sizes,
            pin_idle_timeout: driver.config().pin_idle_ns(),
            fwd: None,
            l2l3,
            selection: None,
            scale: None,
            driver,
            controller,
            stats: SwitchStats::default(),
        }
    }

    /// The app.
    pub fn app(&self) -> &A {
        &self.app
    }

    /// The forwarding module (after declaration).
    pub fn forwarding(&self) -> Option<&Forwarding> {
        self.fwd.as_ref()
    }

    /// The scalability module (after declaration).
    pub fn scalability(&self) -> Option<&Scalability> {
        self.scale.as_ref()
    }

    /// The selection module (after declaration).
    pub fn selection(&self) -> Option<&Selection> {
        self.selection.as_ref()
    }

    fn response(
        &mut self,
        pkt: &mut PacketCtx<ClipMeta, PinOverflow>,
        dp: &mut DataPlane<'_>,
        from_server: bool,
    ) -> Result<(), AccessError> {
        let p_len = self.app.params_len();
        let Some((start, repr)) = pkt.meta.shim.filter(|_| !pkt.meta.bad_shim) else {
            self.stats.invalid_drop += 1;
            return Ok(());
        };
        if !from_server
            || repr.kind != Kind::Response
            || repr.app_id != self.app.app_id()
            || repr.params_len() != p_len
        {
            self.stats.invalid_drop += 1;
            return Ok(());
        }
        if repr.status == Status::Drop {
            self.stats.status_drop += 1;
            return Ok(());
        }
        let start = usize::from(start);
        let mut res = [0u8; MAX_PARAMS];
        match pkt
            .header()
            .get(start + COMMON_LEN..start + COMMON_LEN + p_len)
        {
            Some(r) => res[..p_len].copy_from_slice(r),
            None => {
                self.stats.invalid_drop += 1;
                return Ok(());
            }
        }
        // Restore the EtherType and remove the shim (setInvalid).
        pkt.header_mut()[start - 2..start].copy_from_slice(&repr.load_type.to_be_bytes());
        if !pkt.remove_header(start, COMMON_LEN + p_len) {
            self.stats.invalid_drop += 1;
            return Ok(());
        }
        // The original headers sit behind the shim; the parser extracted
        // them at their shifted offsets, which is what parsing the window
        // again without the shim gives.
        let mut p = headers::parse(pkt.header()).unwrap_or_default();
        let res = (repr.status == Status::Ok).then_some(&res[..p_len]);
        self.app
            .post(&p, pkt.header_mut(), res, PostPath::Response, dp)?;
        routed_dst(&mut p, pkt.header());
        if let Some(fwd) = self.fwd.as_mut() {
            fwd.regular(pkt, p, dp)?;
        }
        self.stats.response += 1;
        Ok(())
    }

    fn original(
        &mut self,
        pkt: &mut PacketCtx<ClipMeta, PinOverflow>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let p = pkt.meta.p;
        let p_len = self.app.params_len();
        let mut req = [0u8; MAX_PARAMS];
        let mut res = [0u8; MAX_PARAMS];
        let out = self
            .app
            .pre(&p, pkt.header(), dp, &mut req[..p_len], &mut res[..p_len])?;
        let (Some(fwd), Some(selection), Some(scale)) = (
            self.fwd.as_mut(),
            self.selection.as_ref(),
            self.scale.as_ref(),
        ) else {
            return Ok(());
        };
        if !out.flight {
            let res = out.res_set.then_some(&res[..p_len]);
            self.app
                .post(&p, pkt.header_mut(), res, PostPath::Fast, dp)?;
            let mut p = p;
            routed_dst(&mut p, pkt.header());
            fwd.regular(pkt, p, dp)?;
            self.stats.fast += 1;
            return Ok(());
        }
        let key = self.app.flow_key(&p, pkt.header());
        let fh_a = fwd.fh_a(dp, &key.0)?;
        let est = selection.count(dp, &key.0)?;
        let Some(chosen) = scale.select(dp, fwd, &key.0, fh_a, out.hint)? else {
            self.stats.no_server_drop += 1;
            return Ok(());
        };
        let Some(port) = fwd.server_port(dp, chosen.server)? else {
            self.stats.no_server_drop += 1;
            return Ok(());
        };
        if chosen.overflow {
            pkt.digest(PinOverflow {
                flow: key,
                server: chosen.server,
                grp_ver: chosen.grp_ver,
            });
            self.stats.pin_cache_overflow += 1;
        }
        let Ok(at) = shim::ethertype_offset(pkt.header()) else {
            self.stats.invalid_drop += 1;
            return Ok(());
        };
        let h = pkt.header();
        let load_type = u16::from_be_bytes([h[at], h[at + 1]]);
        let mut flags = shim::FLAG_CMS_VALID;
        if chosen.sel == Sel::Hint {
            flags |= shim::FLAG_HINTED;
        }
        if chosen.rec {
            flags |= shim::FLAG_REC;
        }
        let repr = ClipRepr {
            kind: Kind::Request,
            flags,
            load_type,
            app_id: self.app.app_id(),
            hdr_words: ((COMMON_LEN + p_len) / 4) as u8,
            parsed_len: self.app.parsed_len(&p),
            server_id: chosen.server,
            sel: chosen.sel,
            status: Status::Ok,
            grp_ver: chosen.grp_ver,
            cms_est: est,
        };
        let mut bytes = [0u8; COMMON_LEN + MAX_PARAMS];
        bytes[..COMMON_LEN].copy_from_slice(&repr.to_bytes());
        bytes[COMMON_LEN..COMMON_LEN + p_len].copy_from_slice(&req[..p_len]);
        if !pkt.insert_header(at + 2, &bytes[..COMMON_LEN + p_len]) {
            self.stats.invalid_drop += 1;
            return Ok(());
        }
        pkt.header_mut()[at..at + 2].copy_from_slice(&ETHERTYPE.to_be_bytes());
        pkt.forward(port);
        self.stats.flight += 1;
        Ok(())
    }
}

/// Forwarding routes on the destination `post_processing` left (SNAT's
/// inbound direction rewrites it): the IPv4 destination is read again
/// from the header.
fn routed_dst(p: &mut Parsed, header: &[u8]) {
    let at = usize::from(p.l3) + 16;
    if let (true, Some(d)) = (p.ipv4, header.get(at..at + 4)) {
        p.dst.copy_from_slice(d);
    }
}

impl<A: SwitchApp> Program for ClipSwitch<A> {
    type Meta = ClipMeta;
    type Digest = PinOverflow;

    fn name(&self) -> &str {
        "clip"
    }

    fn declare(&mut self, d: &mut Declare) -> Result<(), DeclareError> {
        // `server_port` comes first: whether a pass is a response or an
        // original decides everything else it reaches. The app is a block
        // of its own behind it; the CLIP modules run only when
        // `pre_processing` asks for a flight (and regular forwarding after
        // `post_processing`), so they are gated by the app's objects. The
        // modules interleave in stage order (forwarding's group tables sit
        // between the filters that pick a slot and the pin cache that
        // records the member), so they share one namespace; `module_of`
        // maps an object to its module.
        let server_port = Forwarding::declare_server_port(d)?;
        d.in_block("app", &[server_port.id()], |d| self.app.declare(d))?;
        let mut gate = self
            .app
            .flight_deciders()
            .unwrap_or_else(|| d.block_objects("app"));
        gate.push(server_port.id());
        let (fwd, scale) = d.gated_by(&gate, |d| {
            let mut fwd = Forwarding::declare(d, self.l2l3.clone(), server_port)?;
            let fh_a = fwd.fh_a;
            self.selection = Some(Selection::declare(d)?);
            let scale =
                Scalability::declare(d, self.sizes, fh_a, self.pin_idle_timeout, |d, after| {
                    fwd.declare_slots(d, after)
                })?;
            fwd.declare_servers(d, &[scale.pin_cache[0].id(), scale.pin_cache[1].id()])?;
            Ok((fwd, scale))
        })?;
        self.scale = Some(scale);
        self.fwd = Some(fwd);
        Ok(())
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut ClipMeta) -> Result<(), ParseError> {
        if gress == Gress::Egress {
            return Ok(());
        }
        let at = shim::ethertype_offset(header).map_err(|_| ParseError("short Ethernet frame"))?;
        if u16::from_be_bytes([header[at], header[at + 1]]) == ETHERTYPE {
            match shim::shim_of(header) {
                Ok(Some((start, repr))) => meta.shim = Some((start as u16, repr)),
                _ => meta.bad_shim = true,
            }
            return Ok(());
        }
        headers::parse_into(header, &mut meta.p)
    }

    fn ingress(
        &mut self,
        pkt: &mut PacketCtx<ClipMeta, PinOverflow>,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let Some(fwd) = self.fwd.as_ref() else {
            return Ok(());
        };
        let from_server = fwd.server_of_port(dp, pkt.ingress_port())?.is_some();
        if pkt.meta.shim.is_some() || pkt.meta.bad_shim {
            return self.response(pkt, dp, from_server);
        }
        if from_server {
            let p = pkt.meta.p;
            if p.ipv4
                && p.proto == headers::PROTO_UDP
                && p.dport == inca_wire::clip::ctl::CONTROLLER_PORT
            {
                pkt.to_cpu(REASON_CTL);
                self.stats.ctl_in += 1;
            } else {
                self.stats.invalid_drop += 1;
            }
            return Ok(());
        }
        self.original(pkt, dp)
    }

    fn control(&mut self, event: ControlEvent<PinOverflow>, cp: &mut ControlPlane<'_>) {
        let now = cp.now();
        if let (ControlEvent::Start, Some(fwd)) = (&event, self.fwd.as_mut()) {
            fwd.l2l3.control(ControlEvent::Start, cp);
        }
        let (Some(fwd), Some(selection), Some(scale)) = (
            self.fwd.as_ref(),
            self.selection.as_ref(),
            self.scale.as_ref(),
        ) else {
            return;
        };
        let mut outs = Vec::new();
        let mut reports = Vec::new();
        match (&event, self.controller.as_mut()) {
            (ControlEvent::Timer { token }, Some(c)) => outs = c.on_timer(now, *token),
            (ControlEvent::Message(m), Some(c)) if m.kind == MSG_COMMAND => {
                match Command::decode(&m.body) {
                    Some(Command::Transition(members)) => outs = c.transition(now, members),
                    Some(Command::Mirror(e)) => outs = c.mirror(now, e),
                    _ => self.driver.handle(
                        event,
                        cp,
                        &mut reports,
                        &self.app,
                        fwd,
                        selection,
                        scale,
                    ),
                }
            }
            _ => {
                let start = matches!(event, ControlEvent::Start);
                self.driver
                    .handle(event, cp, &mut reports, &self.app, fwd, selection, scale);
                if let (true, Some(c)) = (start, self.controller.as_mut()) {
                    outs = c.start(now, self.driver.config());
                }
            }
        }
        for r in reports {
            match self.controller.as_mut() {
                Some(c) => outs.extend(c.on_report(now, r)),
                None => Driver::up(cp, &r),
            }
        }
        for o in outs {
            match o {
                Out::Cmd(c) => self.driver.execute(c, cp, &self.app, fwd, selection, scale),
                Out::Timer(at, token) => cp.set_timer(at, token),
            }
        }
    }

    fn report(&self) -> ProgramReport {
        let mut counters = self.stats.counters();
        counters.extend(self.driver.counters());
        if let Some(c) = &self.controller {
            counters.extend(c.counters());
        }
        ProgramReport {
            counters,
            series: Vec::new(),
        }
    }
}
