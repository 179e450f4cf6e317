//! What runs leave behind and what they may reach: the daemon reaps every
//! process a run leaves with it, and refuses connections from its own runs.

mod serve_common;

use std::os::unix::fs::PermissionsExt;

use serde_json::Value;
use serve_common::*;

/// Runs `sh FILE` for scripts written into the root (the policy sees only
/// `sh FILE`; the script is the command's own business).
fn script_policy(extra: &str) -> String {
    policy(&format!(
        "{extra}\n\n[[rule]]\nid = \"sh-script\"\naction = \"allow\"\nrisk = \"low\"\n\
         reason = \"runs a script of the project\"\nprogram = \"sh\"\nread_only = true\n"
    ))
}

#[test]
fn setsid_double_forks_leave_no_zombie_and_later_runs_work() {
    let fx = Fixture::new(&script_policy(""));
    // 50 children that leave the run's session, lose their parent at once
    // (it exits without waiting) and exit by themselves while the run still
    // goes on: dead, re-parented to the daemon, and no longer attributable
    // to the run by session or environment.
    std::fs::write(
        fx.root.join("zombies.sh"),
        "i=0\nwhile [ $i -lt 50 ]; do\n  (setsid sh -c 'sleep 0.2' >/dev/null 2>&1 &)\n  \
         i=$((i+1))\ndone\nsleep 1\necho spawned\n",
    )
    .unwrap();
    let d = fx.start(&[]);
    let mut c = fx.connect();
    for round in 0..3 {
        let r = c.run(&format!("z{round}"), "sh zombies.sh");
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["stdout"], "spawned\n", "{r}");
        // Reaped before the result, or at the latest when they die.
        wait_until("the daemon has no zombie child", || {
            zombie_children(d.pid()).is_empty()
        });
    }
    let after = c.run("after", "echo still-works");
    assert_eq!(after["ok"], true, "{after}");
    assert_eq!(after["stdout"], "still-works\n");
    assert!(
        zombie_children(d.pid()).is_empty(),
        "{:?}",
        zombie_children(d.pid())
    );
}

/// The peer check on its own: Unix sockets are allowed and the run shares
/// the host's mount namespace (`namespaces = "off"`), so the daemon's socket
/// is reachable from inside; with the defaults, seccomp refuses the socket
/// and the run's private `/tmp` hides the path as well.
#[test]
fn a_run_that_reaches_the_socket_is_refused_and_starts_nothing() {
    // The run's uid is allowed, Unix sockets are allowed, and the socket
    // file is open to everyone: only the check of who the peer is stands
    // between a command and a new run of its own.
    let fx = Fixture::new(&policy(
        "[daemon]\nallowed_uids = [0, 65534]\n\n[sandbox]\nunix_sockets = true\nnamespaces = \"off\"\n\n\
         [[rule]]\nid = \"python\"\naction = \"allow\"\nrisk = \"low\"\n\
         reason = \"runs a script of the project\"\nprogram = \"python3\"\nread_only = true\n",
    ));
    let d = fx.start(&[]);
    std::fs::set_permissions(&fx.run_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&fx.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    // It asks for a file to be made and a process to outlive its own run,
    // under a session label of its choosing. The daemon may hang up before
    // the request is written: the refusal is read all the same.
    let marker = marker_seconds();
    let request = serde_json::json!({
        "id": "nested", "tool": "run_shell", "session": "someone-else",
        "idempotency_key": "nested-0001",
        "args": {"command": format!("touch pwned.txt; sleep {marker}")}
    });
    std::fs::write(
        fx.root.join("probe.py"),
        format!(
            "import socket, sys\n\
             s = socket.socket(socket.AF_UNIX)\n\
             s.connect({sock:?})\n\
             try:\n    s.sendall({req:?}.encode() + b'\\n')\n\
             except OSError:\n    pass\n\
             s.settimeout(10)\n\
             print(s.makefile().readline().strip())\n",
            sock = fx.socket.to_str().unwrap(),
            req = request.to_string(),
        ),
    )
    .unwrap();
    let mut c = fx.connect();
    let r = c.run("probe", "python3 probe.py");
    assert_eq!(r["ok"], true, "the probe itself ran: {r}");
    let answer: Value = serde_json::from_str(r["stdout"].as_str().unwrap().trim())
        .unwrap_or_else(|e| panic!("no refusal line ({e}): {r}"));
    assert_eq!(error_type(&answer), "PERMISSION_DENIED", "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.contains("Commands this daemon runs may not call it"),
        "{message}"
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!fx.root.join("pwned.txt").exists(), "the nested call ran");
    assert!(pids_with(&marker).is_empty(), "the nested call ran");
    assert!(
        d.log_text()
            .contains("the peer is one of this daemon's runs")
    );
    // The daemon's own clients are still served.
    assert_eq!(c.run("after", "echo fine")["ok"], true);
}
