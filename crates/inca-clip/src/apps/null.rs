//! NULL (spec §7.3): the microbenchmark app. The handler returns at once;
//! no params. `flight` is a parameter: always (CLIP) or never (Ideal).

use inca_apps::headers::Parsed;
use inca_switch::{AccessError, DataPlane, Declare, DeclareError};

use crate::app::{PostPath, PreOutcome, SwitchApp};

/// NULL's app id.
pub const APP_ID: u8 = 1;

/// The switch half.
#[derive(Debug, Clone)]
pub struct NullSwitch {
    /// Send every packet to a server (CLIP) or none (Ideal).
    pub flight: bool,
}

impl SwitchApp for NullSwitch {
    fn app_id(&self) -> u8 {
        APP_ID
    }

    fn name(&self) -> &'static str {
        "null"
    }

    fn params_len(&self) -> usize {
        0
    }

    fn declare(&mut self, _d: &mut Declare) -> Result<(), DeclareError> {
        Ok(())
    }

    fn pre(
        &mut self,
        _p: &Parsed,
        _header: &[u8],
        _dp: &mut DataPlane<'_>,
        _req: &mut [u8],
        _res: &mut [u8],
    ) -> Result<PreOutcome, AccessError> {
        Ok(PreOutcome {
            flight: self.flight,
            ..PreOutcome::default()
        })
    }

    fn post(
        &mut self,
        _p: &Parsed,
        _header: &mut [u8],
        _res: Option<&[u8]>,
        _path: PostPath,
        _dp: &mut DataPlane<'_>,
    ) -> Result<(), AccessError> {
        Ok(())
    }
}
