//! systemd integration of the daemon: socket activation through
//! `systemd-socket-activate` (the socket is bound by someone else and passed
//! as descriptor 3), and readiness through a stand-in `NOTIFY_SOCKET`.

mod serve_common;

use std::os::unix::net::{UnixDatagram, UnixStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use serve_common::{Client, Fixture, PATIENCE, policy, require_kernel_feature};

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn serve_args(fx: &Fixture) -> Vec<String> {
    vec![
        "serve".into(),
        "--policy".into(),
        fx.policy.display().to_string(),
        "--root".into(),
        fx.root.display().to_string(),
        "--state".into(),
        fx.state.display().to_string(),
    ]
}

/// The next notification, or None once PATIENCE has passed.
fn next_state(rx: &UnixDatagram) -> Option<String> {
    rx.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = [0u8; 4096];
    let n = rx.recv(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[test]
fn a_socket_passed_by_systemd_socket_activate_is_served_and_readiness_is_told() {
    if !require_kernel_feature(
        "systemd-socket-activate (Debian package systemd)",
        have("systemd-socket-activate"),
    ) {
        return;
    }
    let fx = Fixture::new(&policy(""));
    let notify_path = fx.run_dir.join("notify");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    let log = fx.dir.path().join("activate.log");
    let mut activator = Command::new("systemd-socket-activate")
        .arg(format!("--listen={}", fx.socket.display()))
        .arg("--fdname=agent-exec")
        .arg(format!("--setenv=NOTIFY_SOCKET={}", notify_path.display()))
        .arg("--setenv=RUST_LOG=info")
        .arg(env!("CARGO_BIN_EXE_agent-exec"))
        .args(serve_args(&fx))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // The activator binds the socket first; the daemon starts on the first
    // connection.
    let deadline = Instant::now() + PATIENCE;
    let stream = loop {
        if let Ok(s) = UnixStream::connect(&fx.socket) {
            break s;
        }
        assert!(Instant::now() < deadline, "the activator never listened");
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(stream);
    let ready = next_state(&notify).expect("no READY=1 from the daemon");
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");

    // The activation connection above was accepted and dropped; a new one
    // is served by the same daemon on the passed socket.
    let mut c = Client::connect(&fx.socket);
    let d = c.call(&json!({"id": "d", "tool": "describe"}));
    assert_eq!(d["ok"], true, "{d}");
    let r = c.run("r1", "echo activated");
    assert_eq!(r["stdout"], "activated\n", "{r}");
    drop(c);

    // The daemon replaced the activator's process image: its pid gets the
    // signal, and it says STOPPING=1 before it exits cleanly.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(activator.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let stopping = next_state(&notify).expect("no STOPPING=1 from the daemon");
    assert_eq!(stopping, "STOPPING=1");
    let status = activator.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "{status}; log:\n{text}");
    assert!(
        text.contains("passed by the service manager (agent-exec)"),
        "{text}"
    );
    // The socket file is the service manager's: the daemon leaves it.
    assert!(fx.socket.exists());
}

#[test]
fn a_daemon_with_no_socket_and_no_activation_refuses_to_start() {
    let fx = Fixture::new(&policy(""));
    let out = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(serve_args(&fx))
        .env_remove("LISTEN_PID")
        .env_remove("LISTEN_FDS")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no socket"), "{err}");
}

#[test]
fn descriptors_meant_for_another_process_are_not_adopted() {
    let fx = Fixture::new(&policy(""));
    // LISTEN_PID names some other process: the variables are stale, and
    // whatever descriptor 3 is, it is not this daemon's to serve.
    let out = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(serve_args(&fx))
        .env("LISTEN_PID", "1")
        .env("LISTEN_FDS", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no socket"));
}

#[test]
fn a_daemon_bound_by_path_tells_readiness_too() {
    let fx = Fixture::new(&policy(""));
    let notify_path = fx.run_dir.join("notify");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    let mut cmd = fx.command(&[]);
    cmd.env("NOTIFY_SOCKET", &notify_path);
    let log = fx.dir.path().join("daemon.log");
    cmd.stderr(std::fs::File::create(&log).unwrap());
    let mut child = cmd.spawn().unwrap();
    let ready = next_state(&notify).expect("no READY=1");
    assert!(ready.starts_with("READY=1\n"), "{ready:?}");
    // READY=1 comes once the socket accepts.
    let mut c = Client::connect(&fx.socket);
    assert_eq!(c.call(&json!({"id": "d", "tool": "describe"}))["ok"], true);
    drop(c);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(next_state(&notify).as_deref(), Some("STOPPING=1"));
    assert!(child.wait().unwrap().success());
    assert!(!fx.socket.exists(), "a socket bound by path is removed");
}
