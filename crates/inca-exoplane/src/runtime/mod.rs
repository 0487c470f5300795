//! What the hub and daemons need from the rest of ExoPlane to run in a
//! switch and smart NICs: each app as [`crate::hub::app::FlowKeys`] and
//! [`crate::daemon::ControlLogic`] ([`logic`]). The drivers themselves are
//! the switch program's hub glue and the device program's daemon glue.

pub mod logic;
