//! Type erasure for blocks: any [`Program`] as a block of a composite,
//! whatever its metadata and digest types.
//!
//! A composite's metadata holds each running block's own metadata boxed
//! ([`BlockMeta`]), and its digests carry the block's digest boxed with the
//! block's index ([`BlockDigest`]). Around each call the block's typed view
//! of the packet is made from the composite's ([`PacketCtx::retype`]) and
//! folded back after, so the block runs exactly as it would alone.

use std::any::Any;
use std::fmt;

use crate::control::ControlPlane;
use crate::objects::{AccessError, DataPlane, Declare, DeclareError};
use crate::placement::Gress;
use crate::program::{CheckHints, ControlEvent, PacketCtx, ParseError, Program, ProgramReport};

/// A value that can be cloned through a box (a block's metadata).
pub(crate) trait AnyClone: Any {
    fn clone_box(&self) -> Box<dyn AnyClone>;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Clone> AnyClone for T {
    fn clone_box(&self) -> Box<dyn AnyClone> {
        Box::new(self.clone())
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// One block's metadata inside the composite's.
pub struct BlockMeta(pub(crate) Box<dyn AnyClone>);

impl Clone for BlockMeta {
    fn clone(&self) -> Self {
        BlockMeta(self.0.clone_box())
    }
}

/// The composite's metadata: which app a packet belongs to (classified
/// composites) and the metadata of each block that runs on it.
#[derive(Clone, Default)]
pub struct CompositeMeta {
    pub(crate) app: Option<u16>,
    pub(crate) blocks: Vec<(u16, BlockMeta)>,
}

impl CompositeMeta {
    /// The app the classifier chose (None: not classified, or a pipeline).
    pub fn app(&self) -> Option<u16> {
        self.app
    }
}

/// A digest value that can be cloned and printed through a box.
pub(crate) trait AnyDigest: Any + fmt::Debug {
    fn clone_box(&self) -> Box<dyn AnyDigest>;
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
    fn as_any(&self) -> &dyn Any;
}

impl<T: Any + Clone + fmt::Debug> AnyDigest for T {
    fn clone_box(&self) -> Box<dyn AnyDigest> {
        Box::new(self.clone())
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A digest of one block: which block, and its own digest value.
pub struct BlockDigest {
    /// The block's index in the composite.
    pub block: u16,
    pub(crate) value: Box<dyn AnyDigest>,
}

impl BlockDigest {
    /// The block's own digest value, if it is a `T`: for a runtime that
    /// carries a block's digest elsewhere (ExoPlane forwards a switch-served
    /// app's digests to the daemon running its control logic).
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        (*self.value).as_any().downcast_ref()
    }
}

impl Clone for BlockDigest {
    fn clone(&self) -> Self {
        BlockDigest {
            block: self.block,
            value: self.value.clone_box(),
        }
    }
}

impl fmt::Debug for BlockDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlockDigest({}, {:?})", self.block, self.value)
    }
}

/// The composite's view of a block: its program behind dynamic dispatch.
pub(crate) trait ErasedBlock {
    fn name(&self) -> &str;
    fn declare(&mut self, decl: &mut Declare) -> Result<(), DeclareError>;
    fn new_meta(&self) -> BlockMeta;
    fn parse(&self, gress: Gress, header: &[u8], meta: &mut BlockMeta) -> Result<(), ParseError>;
    /// Runs ingress or egress on the composite's packet with the block's
    /// metadata; a digest it sends is tagged with `index`.
    fn run(
        &mut self,
        gress: Gress,
        index: u16,
        pkt: &mut PacketCtx<CompositeMeta, BlockDigest>,
        meta: &mut BlockMeta,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError>;
    /// Handles an event whose digest (if any) is this block's.
    fn control(&mut self, event: ControlEvent<Box<dyn AnyDigest>>, cp: &mut ControlPlane<'_>);
    fn report(&self) -> ProgramReport;
    fn check_hints(&self) -> CheckHints;
    fn clone_box(&self) -> Box<dyn ErasedBlock>;
    fn program(&self) -> &dyn Any;
}

/// A program as a block, under its instance name.
#[derive(Clone)]
pub(crate) struct Typed<P> {
    pub name: String,
    pub program: P,
}

const META_MISMATCH: ParseError = ParseError("composite: block metadata of another type");

impl<P: Program> ErasedBlock for Typed<P>
where
    P::Meta: 'static,
    P::Digest: 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn declare(&mut self, decl: &mut Declare) -> Result<(), DeclareError> {
        self.program.declare(decl)
    }

    fn new_meta(&self) -> BlockMeta {
        BlockMeta(Box::new(P::Meta::default()))
    }

    fn parse(&self, gress: Gress, header: &[u8], meta: &mut BlockMeta) -> Result<(), ParseError> {
        let m = meta
            .0
            .as_any_mut()
            .downcast_mut::<P::Meta>()
            .ok_or(META_MISMATCH)?;
        self.program.parse(gress, header, m)
    }

    fn run(
        &mut self,
        gress: Gress,
        index: u16,
        pkt: &mut PacketCtx<CompositeMeta, BlockDigest>,
        meta: &mut BlockMeta,
        dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        let Some(m) = meta.0.as_any_mut().downcast_mut::<P::Meta>() else {
            return Err(AccessError::WrongHandle);
        };
        let mut inner = pkt.retype::<P::Meta, P::Digest>(std::mem::take(m));
        let r = match gress {
            Gress::Ingress => self.program.ingress(&mut inner, dp),
            Gress::Egress => self.program.egress(&mut inner, dp),
        };
        let (back, digest) = pkt.absorb(inner);
        *m = back;
        if let Some(d) = digest {
            pkt.digest(BlockDigest {
                block: index,
                value: Box::new(d),
            });
        }
        r
    }

    fn control(&mut self, event: ControlEvent<Box<dyn AnyDigest>>, cp: &mut ControlPlane<'_>) {
        let event = match event.split_digest() {
            Ok(e) => e,
            Err(d) => match d.into_any().downcast::<P::Digest>() {
                Ok(d) => ControlEvent::Digest(*d),
                // The composite tags a digest with the block that made it.
                Err(_) => return,
            },
        };
        self.program.control(event, cp)
    }

    fn report(&self) -> ProgramReport {
        self.program.report()
    }

    fn check_hints(&self) -> CheckHints {
        self.program.check_hints()
    }

    fn clone_box(&self) -> Box<dyn ErasedBlock> {
        Box::new(self.clone())
    }

    fn program(&self) -> &dyn Any {
        &self.program
    }
}
