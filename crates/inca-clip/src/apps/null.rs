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
