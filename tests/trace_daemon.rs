//! A daemon killed mid-call leaves an orphan tool_call in the session's
//! trace, and the audit reports it.

mod serve_common;

use std::process::Command;

use serde_json::{Value, json};
use serve_common::{Fixture, marker_seconds, pids_with, policy, wait_until};

#[test]
fn a_killed_daemon_leaves_an_orphan_call_that_audit_reports() {
    let fx = Fixture::new(&policy(""));
    let mut daemon = fx.start(&[]);
    let mut client = fx.connect();
    let done = client.call(&json!({"id": 1, "tool": "run_shell", "session": "s1",
                                    "args": {"command": "echo before"}}));
    assert_eq!(done["ok"], true, "{done}");

    let marker = marker_seconds();
    client.send(&json!({"id": 2, "tool": "run_shell", "session": "s1",
                        "args": {"command": format!("sleep {marker}")}}));
    // The call is in flight once its command runs.
    wait_until("the sleep to start", || !pids_with(&marker).is_empty());
    daemon.signal(nix::sys::signal::Signal::SIGKILL);
    daemon.wait();

    let trace = fx.state.join("traces/s1.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(["audit", "--json"])
        .arg(&trace)
        .output()
        .unwrap();
    // The sleep may outlive a SIGKILLed supervisor; it is ours to end.
    for pid in pids_with(&marker) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert_eq!(report["calls"], 2, "{report}");
    assert_eq!(report["results"], 1, "{report}");
    let issues = report["issues"].as_array().unwrap();
    assert_eq!(issues.len(), 1, "{report}");
    assert_eq!(issues[0]["kind"], "orphan_call");
}
