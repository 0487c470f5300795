//! Helpers the live testbed tests share: whether they can run here, and
//! what a command printed.

use std::process::{Command, Output};

// Not every test file brings a testbed up.
#[allow(dead_code)]
pub mod testbed;

/// Why the live testbed tests cannot run here, if they cannot: they need
/// root (network namespaces) and the named tools.
pub fn missing(tools: &[&str]) -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2).map(str::to_string));
    if euid.as_deref() != Some("0") {
        return Some("not root (network namespaces need it)".into());
    }
    for t in tools {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !found {
            return Some(format!("{t} is not installed"));
        }
    }
    None
}

/// Returns from the calling test, saying why on stderr, unless it can run
/// (root and every named tool).
#[macro_export]
macro_rules! skip_unless {
    ($($tool:expr),*) => {
        if let Some(why) = common::missing(&[$($tool),*]) {
            // Straight to stderr: the test harness captures eprintln!.
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                format!("skipping a live testbed test: {why}\n").as_bytes(),
            );
            return;
        }
    };
}

/// A command's stdout and stderr, as text.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
