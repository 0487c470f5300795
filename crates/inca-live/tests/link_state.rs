//! Link state reaches the device: the runner polls its ports' links and
//! hands changes over as `Input::LinkState`; an AF_PACKET port reads its
//! interface's operstate (root only; skipped with a reason otherwise).

use std::io;
use std::os::fd::RawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use inca_live::packet::{interface_link_up, PacketPort};
use inca_live::port::{Port, PortStats};
use inca_live::runner::{Runner, RunnerConfig};
use inca_switch::device::{Device, DeviceRng, Input, Nanos, Output};

/// A port with no frames whose link the test flips.
struct FakePort {
    up: Arc<AtomicBool>,
    fd: std::net::UdpSocket,
}

impl Port for FakePort {
    fn recv_batch(&mut self, _out: &mut Vec<Vec<u8>>, _max: usize) -> io::Result<usize> {
        Ok(0)
    }
    fn send_batch(&mut self, frames: &mut Vec<Vec<u8>>) -> io::Result<()> {
        frames.clear();
        Ok(())
    }
    fn fd(&self) -> RawFd {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }
    fn stats(&self) -> PortStats {
        PortStats::default()
    }
    fn describe(&self) -> String {
        "fake".into()
    }
    fn link_up(&self) -> Option<bool> {
        Some(self.up.load(Ordering::Relaxed))
    }
}

/// Records the link-state inputs it gets.
struct Recorder(Arc<Mutex<Vec<(u16, bool)>>>);

impl Device for Recorder {
    fn handle(&mut self, _now: Nanos, input: Input, _rng: &mut DeviceRng, _out: &mut Vec<Output>) {
        if let Input::LinkState { port, up } = input {
            self.0.lock().unwrap().push((port, up));
        }
    }
    fn restart(&mut self, _now: Nanos, _rng: &mut DeviceRng, _out: &mut Vec<Output>) {}
}

fn wait_for(mut cond: impl FnMut() -> bool, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    cond()
}

#[test]
fn the_runner_reports_link_changes_once_each() {
    let up = Arc::new(AtomicBool::new(true));
    let port = FakePort {
        up: up.clone(),
        fd: std::net::UdpSocket::bind("127.0.0.1:0").unwrap(),
    };
    // A second port that cannot tell (None): never reported.
    let other = inca_live::udp::UdpPort::bind(
        "127.0.0.1:0".parse().unwrap(),
        "127.0.0.1:9".parse().unwrap(),
    )
    .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let ports: Vec<Box<dyn Port>> = vec![Box::new(other), Box::new(port)];
    let stop = Arc::new(AtomicBool::new(false));
    let (stop2, seen2) = (stop.clone(), seen.clone());
    let config = RunnerConfig {
        link_poll: 1_000_000,
        ..RunnerConfig::default()
    };
    let handle = std::thread::spawn(move || {
        let mut r = Runner::new(Recorder(seen2), ports, 1, config);
        r.run(&stop2).unwrap();
        r.stats()
    });
    let count = |n: usize| {
        let s = seen.clone();
        move || s.lock().unwrap().len() >= n
    };
    std::thread::sleep(Duration::from_millis(30));
    assert!(seen.lock().unwrap().is_empty(), "links start up: no news");
    up.store(false, Ordering::Relaxed);
    assert!(wait_for(count(1), Duration::from_secs(2)), "down seen");
    std::thread::sleep(Duration::from_millis(30));
    up.store(true, Ordering::Relaxed);
    assert!(wait_for(count(2), Duration::from_secs(2)), "up seen");
    std::thread::sleep(Duration::from_millis(30));
    stop.store(true, Ordering::Relaxed);
    let stats = handle.join().unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![(1, false), (1, true)]);
    assert_eq!(stats.link_changes, 2);
}

#[test]
fn a_missing_interface_is_down() {
    assert!(!interface_link_up("no-such-if-xyz"));
}

fn ip(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

/// A veth pair, deleted when dropped (also when the test fails).
struct Veth(String, String);

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.0]);
    }
}

#[test]
fn a_packet_port_sees_its_veth_peer_go_down_and_up() {
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: not root (veth pairs and AF_PACKET need CAP_NET_ADMIN/CAP_NET_RAW)");
        return;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        eprintln!("skipped: the `ip` command (iproute2) is missing");
        return;
    }
    let pid = std::process::id();
    let v = Veth(format!("ils{pid}a"), format!("ils{pid}b"));
    ip(&["link", "add", &v.0, "type", "veth", "peer", "name", &v.1]).unwrap();
    ip(&["link", "set", &v.0, "up"]).unwrap();
    ip(&["link", "set", &v.1, "up"]).unwrap();
    let port = PacketPort::open(&v.0).unwrap();
    let up = || port.link_up() == Some(true);
    assert!(wait_for(up, Duration::from_secs(3)), "both ends up");
    // The peer going down takes our carrier (operstate lowerlayerdown).
    ip(&["link", "set", &v.1, "down"]).unwrap();
    assert!(
        wait_for(|| port.link_up() == Some(false), Duration::from_secs(3)),
        "peer down seen"
    );
    ip(&["link", "set", &v.1, "up"]).unwrap();
    assert!(wait_for(up, Duration::from_secs(3)), "peer up again seen");
    // Our own end down is down too.
    ip(&["link", "set", &v.0, "down"]).unwrap();
    assert!(
        wait_for(|| port.link_up() == Some(false), Duration::from_secs(3)),
        "own end down seen"
    );
}
