//! The apps' composite run inside the runtime program's pass, shared by
//! the switch and device programs: the runtime picks the app in ingress
//! ([`inca_switch::Composite::select`]), and egress runs the same app's
//! egress on the same nested metadata.

use inca_switch::composite::{BlockDigest, CompositeMeta};
use inca_switch::{AccessError, Composite, DataPlane, PacketCtx, Program};

/// Runs the selected app's egress on `pkt` (nothing if ingress selected
/// none): `meta` finds the apps' metadata in the runtime's, and an app
/// digest is wrapped into the runtime's digest type with `wrap`.
pub(crate) fn apps_egress<M, D>(
    apps: &mut Composite,
    pkt: &mut PacketCtx<M, D>,
    dp: &mut DataPlane<'_>,
    meta: fn(&mut M) -> &mut CompositeMeta,
    wrap: fn(BlockDigest) -> D,
) -> Result<(), AccessError> {
    if meta(&mut pkt.meta).app().is_none() {
        return Ok(());
    }
    let mut m = std::mem::take(meta(&mut pkt.meta));
    let (r, digest) = pkt.nest(&mut m, None, |inner| apps.egress(inner, dp));
    *meta(&mut pkt.meta) = m;
    if let Some(d) = digest {
        pkt.digest(wrap(d));
    }
    r
}
