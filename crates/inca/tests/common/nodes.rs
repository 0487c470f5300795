//! `inca node` processes for the live tests that run several of them on
//! loopback (node_tea, node_swish): free addresses, and the processes,
//! each with its configuration and log in one folder. Included with
//! `#[path = "common/nodes.rs"] mod nodes;`.

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A free loopback UDP address (bound, read, released).
pub fn free_udp() -> SocketAddr {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// A free loopback TCP address (bound, read, released).
pub fn free_tcp() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// The node processes, killed on drop; their folder (configurations and
/// logs) is removed then, or kept for inspection if the test failed.
pub struct Nodes {
    children: Vec<(String, Child)>,
    dir: PathBuf,
}

impl Nodes {
    /// No processes yet; configurations and logs go to `dir`.
    pub fn new(dir: PathBuf) -> Nodes {
        Nodes {
            children: Vec::new(),
            dir,
        }
    }

    /// Starts `inca node` named `name` with configuration `config`.
    pub fn start(&mut self, name: &str, config: &str) {
        let path = self.dir.join(format!("{name}.toml"));
        std::fs::write(&path, config).unwrap();
        let log = std::fs::File::create(self.dir.join(format!("{name}.log"))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_inca"))
            .args(["node", "--config", path.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.children.push((name.to_string(), child));
    }

    /// Kills node `name` (a fail-stop); it may be started again.
    #[allow(dead_code)]
    pub fn kill(&mut self, name: &str) {
        let k = self.children.iter().position(|(n, _)| n == name).unwrap();
        let (_, mut c) = self.children.remove(k);
        c.kill().unwrap();
        c.wait().unwrap();
    }

    /// Stops every node (SIGTERM: captures are closed) and checks they
    /// exited cleanly.
    #[allow(dead_code)]
    pub fn stop(&mut self) {
        for (_, c) in &self.children {
            // SAFETY: kill(2) with the pid of our own child and a signal.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        for (name, mut c) in self.children.drain(..) {
            let status = c.wait().unwrap();
            let log =
                std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default();
            assert!(
                status.success(),
                "node {name} exited with {status:?}:\n{log}"
            );
        }
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            eprintln!("left {} for inspection", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
