//! The CLI as a thin client of a running daemon (`--daemon SOCKET`): the
//! same result and exit status as a direct run, and a direct run whenever
//! the daemon is missing or serves something else.
//!
//! Which of the two served a call is seen from outside through the
//! environment: a variable with a secret-looking name set only for the CLI
//! is scrubbed (and listed in `env_scrubbed`) when the CLI runs the call
//! itself, and absent from the daemon's environment when it forwards.

mod serve_common;

use std::process::Command;

use serde_json::Value;
use serve_common::*;

const MARK: &str = "THIN_CLIENT_TEST_TOKEN";

struct Out {
    code: i32,
    result: Value,
}

fn cli(fx: &Fixture, policy: &std::path::Path, extra: &[&str], command: &[&str]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .arg("--policy")
        .arg(policy)
        .arg("--root")
        .arg(&fx.root)
        .args(extra)
        .args(command)
        .env(MARK, "x")
        .env_remove("AGENT_EXEC_DAEMON")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    Out {
        code: out.status.code().unwrap_or(-1),
        result: serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("{e}: {stdout:?} {:?}", out.stderr)),
    }
}

fn scrubbed_here(r: &Value) -> bool {
    r["env_scrubbed"]
        .as_array()
        .is_some_and(|a| a.iter().any(|v| v == MARK))
}

/// The result without what differs between any two runs (ids, timing)
/// and between two supervisors' environments. A call that needs approval
/// is held out of band by the daemon (its state directory issues an
/// `approval_id`, and the message says how to approve) where a one-shot
/// run without `--state` can only refuse: the decision, rule, risk and
/// status still match.
fn comparable(r: &Value) -> Value {
    let mut r = r.clone();
    let approval = r["error_type"] == "APPROVAL_REQUIRED";
    let o = r.as_object_mut().unwrap();
    for key in ["call_id", "duration_ms", "env_scrubbed"] {
        o.remove(key);
    }
    if approval {
        for key in ["approval_id", "approval_expires_at", "message"] {
            o.remove(key);
        }
    }
    r
}

#[test]
fn a_forwarded_call_answers_as_a_direct_run_would() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let socket = fx.socket.to_str().unwrap();
    let cases: [&[&str]; 4] = [
        &["--", "echo", "hello"],
        &["--shell", "echo one; echo two >&2"],
        &["--shell", "cat /etc/shadow"],
        &["--shell", "rm -f x"],
    ];
    for case in cases {
        let direct = cli(&fx, &fx.policy, &[], case);
        let thin = cli(&fx, &fx.policy, &["--daemon", socket], case);
        // A refusal runs nothing, so no environment is made to tell.
        if direct.result["policy_decision"] == "allow" {
            assert!(scrubbed_here(&direct.result), "{:?}", direct.result);
            assert!(
                !scrubbed_here(&thin.result),
                "the daemon served it: {:?}",
                thin.result
            );
        }
        if direct.result["error_type"] == "APPROVAL_REQUIRED" {
            assert!(
                direct.result["approval_id"].is_null(),
                "{:?}",
                direct.result
            );
            assert!(thin.result["approval_id"].is_string(), "{:?}", thin.result);
        }
        assert_eq!(thin.code, direct.code, "{case:?}");
        assert_eq!(
            comparable(&thin.result),
            comparable(&direct.result),
            "{case:?}"
        );
    }
}

#[test]
fn a_missing_or_other_daemon_means_a_direct_run() {
    let fx = Fixture::new(&policy(""));
    let echo = ["--", "echo", "hi"];
    // No daemon at all.
    let missing = fx.run_dir.join("nobody-listens.sock");
    let r = cli(
        &fx,
        &fx.policy,
        &["--daemon", missing.to_str().unwrap()],
        &echo,
    );
    assert_eq!(r.code, 0, "{:?}", r.result);
    assert!(scrubbed_here(&r.result), "{:?}", r.result);
    assert_eq!(r.result["stdout"], "hi\n");

    // A daemon serving another policy (one rule more): the CLI's policy
    // file hashes differently, so the call is not forwarded.
    let other = Fixture::new(&policy("description = \"another\""));
    let _d = other.start(&[]);
    let socket = other.socket.to_str().unwrap();
    let r = cli(&fx, &fx.policy, &["--daemon", socket], &echo);
    assert_eq!(r.code, 0, "{:?}", r.result);
    assert!(scrubbed_here(&r.result), "{:?}", r.result);

    // The same policy text, but the daemon's root is another directory.
    let same_policy_elsewhere = fx.dir.path().join("same.toml");
    std::fs::copy(&other.policy, &same_policy_elsewhere).unwrap();
    let r = cli(&fx, &same_policy_elsewhere, &["--daemon", socket], &echo);
    assert!(scrubbed_here(&r.result), "{:?}", r.result);

    // Control: the daemon's own policy and root are forwarded.
    let r = cli(&other, &other.policy, &["--daemon", socket], &echo);
    assert!(!scrubbed_here(&r.result), "{:?}", r.result);
    assert_eq!(r.result["stdout"], "hi\n");
}

#[test]
fn the_trace_says_when_a_configured_daemon_was_not_used() {
    let fx = Fixture::new(&policy(""));
    let trace = fx.dir.path().join("t.jsonl");
    let missing = fx.run_dir.join("gone.sock");
    let r = cli(
        &fx,
        &fx.policy,
        &[
            "--daemon",
            missing.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ],
        &["--", "echo", "hi"],
    );
    assert_eq!(r.code, 0);
    let text = std::fs::read_to_string(&trace).unwrap();
    let result_line: Value = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["event"] == "tool_result")
        .unwrap();
    let via = result_line["via"].as_str().unwrap();
    assert!(via.starts_with("direct: "), "{via}");
    // Without a daemon configured, nothing is said.
    let plain = fx.dir.path().join("plain.jsonl");
    cli(
        &fx,
        &fx.policy,
        &["--trace", plain.to_str().unwrap()],
        &["--", "echo", "hi"],
    );
    let text = std::fs::read_to_string(&plain).unwrap();
    assert!(!text.contains("\"via\""), "{text}");
}
