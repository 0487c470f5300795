//! Builds the apps of `inca-apps` as simulator switches: the simulator
//! knows devices, not apps, so whoever runs a scenario supplies this.

use inca_apps::catalog::{with_app, AppVisitor};
use inca_apps::params::Params;
use inca_sim::engine::Node;
use inca_sim::scenario::SwitchFactory;
use inca_switch::{Profile, Program, Switch};

/// The apps of `inca-apps` as simulator switches.
pub struct AppFactory;

impl SwitchFactory for AppFactory {
    fn build(
        &self,
        program: &str,
        params: &[(String, String)],
        profile: Profile,
    ) -> Result<Box<dyn Node>, String> {
        struct Build(Profile);
        impl AppVisitor for Build {
            type Output = Result<Box<dyn Node>, String>;
            fn visit<P: Program>(self, program: P) -> Self::Output {
                Switch::new(self.0, program)
                    .map(|s| Box::new(s) as Box<dyn Node>)
                    .map_err(|e| e.to_string())
            }
        }
        let pairs: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let params = Params::parse(pairs.iter().map(String::as_str)).map_err(|e| e.to_string())?;
        with_app(program, &params, Build(profile)).map_err(|e| e.to_string())?
    }
}
