//! The redis baseline of the store benchmark: a redis-server of our own on
//! a free loopback port (no persistence), measured with redis-benchmark.
//! Both are found on PATH (scripts/setup.sh installs them from Debian's
//! redis-server and redis-tools); when either is missing the caller
//! reports the baseline as missing with the reason.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// `program` on PATH, if there.
pub fn find(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// A redis-server we started; stopped (killed) when dropped.
pub struct Server {
    child: Child,
    port: u16,
    benchmark: PathBuf,
}

impl Server {
    /// Starts redis-server on a free port of 127.0.0.1 and waits (up to 5
    /// s) until it accepts connections.
    pub fn start() -> anyhow::Result<Server> {
        let server =
            find("redis-server").context("redis-server not installed (scripts/setup.sh)")?;
        let benchmark =
            find("redis-benchmark").context("redis-benchmark not installed (scripts/setup.sh)")?;
        // A free port: bind one, note it, let it go. Another process could
        // take it in between; then the server fails to start and says so.
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        let child = Command::new(&server)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", server.display()))?;
        let mut s = Server {
            child,
            port,
            benchmark,
        };
        let start = Instant::now();
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            if let Some(status) = s.child.try_wait()? {
                bail!("redis-server exited at start ({status})");
            }
            if start.elapsed() > Duration::from_secs(5) {
                bail!("redis-server did not accept connections on port {port} within 5 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(s)
    }

    /// `redis-benchmark -t set` with `clients` connections, pipelining
    /// `pipeline`, values of `size` bytes over `keys` random keys, `n`
    /// requests; returns its requests per second.
    pub fn benchmark_set(
        &mut self,
        clients: usize,
        pipeline: usize,
        size: usize,
        keys: u32,
        n: u64,
    ) -> anyhow::Result<f64> {
        let out = Command::new(&self.benchmark)
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-t", "set", "-q", "--csv"])
            .args(["-c", &clients.to_string(), "-P", &pipeline.to_string()])
            .args(["-d", &size.to_string(), "-r", &keys.to_string()])
            .args(["-n", &n.to_string()])
            .stdin(Stdio::null())
            .output()
            .context("running redis-benchmark")?;
        if !out.status.success() {
            bail!(
                "redis-benchmark failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        parse_csv_rps(&String::from_utf8_lossy(&out.stdout))
            .context("redis-benchmark printed no SET rate")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The rate of the `"SET"` line of redis-benchmark's `--csv` output
/// (`"SET","1112347.12",...`; older versions print `"SET","1112347.12"`).
pub fn parse_csv_rps(text: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let mut f = l.split(',').map(|c| c.trim().trim_matches('"'));
        if f.next()? != "SET" {
            return None;
        }
        f.next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_csv_forms() {
        let new = "\"test\",\"rps\",\"avg_latency_ms\"\n\"SET\",\"1112347.12\",\"0.213\"\n";
        assert_eq!(parse_csv_rps(new), Some(1112347.12));
        assert_eq!(parse_csv_rps("\"SET\",\"5.5\"\n"), Some(5.5));
        assert_eq!(parse_csv_rps("\"GET\",\"5.5\"\n"), None);
        assert_eq!(parse_csv_rps("garbage"), None);
    }
}
