//! A daemon run by an ordinary user (simulated with `setpriv`): its runs
//! cannot reach its own socket, even under a policy that opts into Unix
//! sockets. Where the host allows unprivileged user namespaces the run's
//! private `/tmp` hides the socket's path; with `namespaces = "off"` the
//! path is reachable, and the daemon's check of who the peer is refuses
//! the call. Either way nothing the nested request asked for happens.

mod serve_common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use serve_common::*;

const ORDINARY: u32 = 47012;

/// A directory owned by `ORDINARY` with `mode`, made in `parent`.
fn owned_dir(parent: &str, prefix: &str, mode: u32) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(parent)
        .unwrap();
    nix::unistd::chown(d.path(), Some(ORDINARY.into()), Some(ORDINARY.into())).unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    d
}

struct UserDaemon {
    child: std::process::Child,
    socket: PathBuf,
    log: PathBuf,
}

impl UserDaemon {
    /// `agent-exec serve` as `ORDINARY`, its socket in a directory of its
    /// own under `/tmp` (where an ordinary user's daemon keeps it when it
    /// has no runtime directory), its project root in `/var/tmp`.
    fn start(sockets: &Path, root: &Path, policy: &Path) -> UserDaemon {
        let socket = sockets.join("agent-exec.sock");
        let log = sockets.join("daemon.log");
        let child = Command::new("setpriv")
            .arg(format!("--reuid={ORDINARY}"))
            .arg(format!("--regid={ORDINARY}"))
            .arg("--clear-groups")
            .arg(env!("CARGO_BIN_EXE_agent-exec"))
            .arg("serve")
            .arg("--policy")
            .arg(policy)
            .arg("--root")
            .arg(root)
            .arg("--socket")
            .arg(&socket)
            .arg("--state")
            .arg(sockets.join("state"))
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + PATIENCE;
        let mut child = child;
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the daemon exited: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            assert!(
                Instant::now() < deadline,
                "the daemon did not start: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        UserDaemon { child, socket, log }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for UserDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn probe(socket: &Path, request: &Value) -> String {
    format!(
        "import socket\n\
         s = socket.socket(socket.AF_UNIX)\n\
         try:\n    s.connect({sock:?})\n\
         except OSError as e:\n    print('connect errno', e.errno); raise SystemExit(0)\n\
         try:\n    s.sendall({req:?}.encode() + b'\\n')\n\
         except OSError:\n    pass\n\
         s.settimeout(10)\n\
         print('answer', s.makefile().readline().strip())\n",
        sock = socket.to_str().unwrap(),
        req = request.to_string(),
    )
}

#[test]
fn an_ordinary_users_daemon_is_out_of_its_own_runs_reach() {
    if !require_kernel_feature(
        "root and setpriv (util-linux), to run the daemon as an ordinary user",
        nix::unistd::geteuid().is_root() && Path::new("/usr/bin/setpriv").exists(),
    ) {
        return;
    }
    for namespaces in ["auto", "off"] {
        let sockets = owned_dir("/tmp", "ae-user-daemon-", 0o700);
        let root = owned_dir("/var/tmp", "ae-user-daemon-root-", 0o755);
        let policy_file = sockets.path().join("policy.toml");
        std::fs::write(
            &policy_file,
            policy(&format!(
                "[daemon]\nallowed_uids = [0, {ORDINARY}]\n\n\
                 [sandbox]\nunix_sockets = true\nnamespaces = \"{namespaces}\"\n\n\
                 [sandbox.require]\ncgroup = \"best_effort\"\n\n\
                 [[rule]]\nid = \"python\"\naction = \"allow\"\nrisk = \"low\"\n\
                 reason = \"runs a script of the project\"\nprogram = \"python3\"\nread_only = true\n"
            )),
        )
        .unwrap();
        std::fs::set_permissions(&policy_file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let d = UserDaemon::start(sockets.path(), root.path(), &policy_file);
        let marker = marker_seconds();
        let request = serde_json::json!({
            "id": "nested", "tool": "run_shell", "session": "someone-else",
            "args": {"command": format!("touch pwned.txt; sleep {marker}")}
        });
        let script = root.path().join("probe.py");
        std::fs::write(&script, probe(&d.socket, &request)).unwrap();
        nix::unistd::chown(&script, Some(ORDINARY.into()), Some(ORDINARY.into())).unwrap();
        let mut c = Client::connect(&d.socket);
        let r = c.run("probe", "python3 probe.py");
        assert_eq!(r["ok"], true, "{namespaces}: the probe itself ran: {r}");
        let out = r["stdout"].as_str().unwrap_or_default();
        let limits = r["sandbox"]["limits"].to_string();
        if namespaces == "auto" {
            if !limits.contains("user_namespace") {
                require_kernel_feature(
                    "unprivileged user namespaces, for an ordinary user's daemon",
                    false,
                );
            } else {
                // The path is not there in the run's own /tmp.
                assert_eq!(out.trim(), "connect errno 2", "{r}");
            }
        } else {
            // Reachable: the peer check is what refuses it.
            let answer: Value = serde_json::from_str(
                out.strip_prefix("answer ")
                    .unwrap_or_else(|| panic!("{r}"))
                    .trim(),
            )
            .unwrap();
            assert_eq!(error_type(&answer), "PERMISSION_DENIED", "{answer}");
            assert!(
                d.log_text()
                    .contains("the peer is one of this daemon's runs"),
                "{}",
                d.log_text()
            );
        }
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !root.path().join("pwned.txt").exists(),
            "the nested call ran"
        );
        assert!(pids_with(&marker).is_empty(), "the nested call ran");
        // The daemon's own client is still served.
        assert_eq!(c.run("after", "echo fine")["ok"], true);
    }
}
