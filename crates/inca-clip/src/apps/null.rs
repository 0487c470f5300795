//! NULL (spec §7.3, app 1): no params and no tables; the remote handler
//! returns OK at once. It measures the framework itself (E1, E2).

// ---------------------------------------------------------------------------
// Server half
// ---------------------------------------------------------------------------

use crate::app::{HandlerCtx, HandlerStatus, RemoteHandler};

/// NULL's `app_id`.
pub const APP_ID: u8 = 1;
/// NULL's params region: none.
pub const PARAMS_LEN: usize = crate::app::params_len(0, 0);

/// NULL's remote handler: counts requests and answers OK.
#[derive(Debug, Clone, Default)]
pub struct NullHandler {
    requests: u64,
}

impl NullHandler {
    /// A handler.
    pub fn new() -> Self {
        NullHandler::default()
    }
}

impl RemoteHandler for NullHandler {
    fn app_id(&self) -> u8 {
        APP_ID
    }

    fn params_len(&self) -> usize {
        PARAMS_LEN
    }

    fn handle(&mut self, _ctx: &mut HandlerCtx<'_>, _params: &mut [u8]) -> HandlerStatus {
        self.requests += 1;
        HandlerStatus::Ok
    }

    fn reset(&mut self) {}

    fn counters(&self) -> Vec<(String, u64)> {
        vec![("requests".into(), self.requests)]
    }
}

#[cfg(test)]
mod server_tests {
    use super::*;
    use crate::flow::FlowKey;

    #[test]
    fn null_answers_ok_and_touches_nothing() {
        let mut h = NullHandler::new();
        assert_eq!(PARAMS_LEN, 0);
        let mut created = Vec::new();
        let mut ctx = HandlerCtx {
            now: 5,
            server_id: 1,
            core: 0,
            flow: FlowKey::default(),
            payload: &[1, 2, 3],
            created: &mut created,
        };
        let mut params = [7u8; 4];
        assert_eq!(h.handle(&mut ctx, &mut params), HandlerStatus::Ok);
        assert_eq!(h.handle(&mut ctx, &mut []), HandlerStatus::Ok);
        assert_eq!(params, [7; 4]);
        assert!(created.is_empty());
        assert_eq!(h.counters(), vec![("requests".to_string(), 2)]);
    }
}

// ---------------------------------------------------------------------------
// Switch half
// ---------------------------------------------------------------------------

pub use switch_half::*;

mod switch_half {
    //! The switch half: tables, `pre_processing`, `post_processing`.

    use super::*;
    use inca_apps::headers::Parsed;
    use inca_switch::{AccessError, DataPlane, Declare, DeclareError};

    use crate::app::{PostPath, PreOutcome, SwitchApp};

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
}
