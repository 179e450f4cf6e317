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

const FULL: &str = env!("CARGO_BIN_EXE_agent-exec");
const SMALL: &str = env!("CARGO_BIN_EXE_agent-exec-client");

/// What one process printed and its exit status.
#[derive(Debug)]
struct Printed {
    code: i32,
    stdout: String,
    stderr: String,
}

/// `bin`'s run form for `fx`'s root under `policy`.
fn run_form(
    bin: &str,
    fx: &Fixture,
    policy: &std::path::Path,
    extra: &[&str],
    command: &[&str],
) -> Command {
    let mut cmd = Command::new(bin);
    cmd.arg("--policy")
        .arg(policy)
        .arg("--root")
        .arg(&fx.root)
        .args(extra)
        .args(command)
        .env(MARK, "x")
        .env_remove("AGENT_EXEC_DAEMON");
    cmd
}

fn printed(
    bin: &str,
    fx: &Fixture,
    policy: &std::path::Path,
    extra: &[&str],
    command: &[&str],
) -> Printed {
    let out = run_form(bin, fx, policy, extra, command).output().unwrap();
    Printed {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn cli_of(
    bin: &str,
    fx: &Fixture,
    policy: &std::path::Path,
    extra: &[&str],
    command: &[&str],
) -> Out {
    let p = printed(bin, fx, policy, extra, command);
    Out {
        code: p.code,
        result: serde_json::from_str(p.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {p:?}")),
    }
}

fn cli(fx: &Fixture, policy: &std::path::Path, extra: &[&str], command: &[&str]) -> Out {
    cli_of(FULL, fx, policy, extra, command)
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

/// The cases the daemon serves, as both front ends are given them.
const SERVED: [&[&str]; 5] = [
    &["--", "echo", "hello"],
    &["--shell", "echo one; echo two >&2; exit 3"],
    &["--shell", "cat /etc/shadow"],
    &["--shell", "rm -f x"],
    &["--timeout-ms", "100", "--shell", "sleep 5"],
];

#[test]
fn the_small_client_answers_as_agent_exec_does() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let socket = fx.socket.to_str().unwrap();
    for case in SERVED {
        let full = cli_of(FULL, &fx, &fx.policy, &["--daemon", socket], case);
        let small = cli_of(SMALL, &fx, &fx.policy, &["--daemon", socket], case);
        if small.result["policy_decision"] == "allow" {
            assert!(
                !scrubbed_here(&small.result),
                "the daemon served it: {:?}",
                small.result
            );
        }
        assert_eq!(small.code, full.code, "{case:?}");
        assert_eq!(
            comparable(&small.result),
            comparable(&full.result),
            "{case:?}"
        );
    }
    // For a person too: the same bytes on both streams, and the same
    // status (a refusal's summary carries no timing).
    let human = ["--daemon", socket, "--format", "human"];
    let denied = ["--shell", "cat /etc/shadow"];
    let full = printed(FULL, &fx, &fx.policy, &human, &denied);
    let small = printed(SMALL, &fx, &fx.policy, &human, &denied);
    assert_eq!(full.code, 126, "{full:?}");
    assert!(full.stderr.contains("PERMISSION_DENIED"), "{full:?}");
    assert_eq!(
        (small.code, &small.stdout, &small.stderr),
        (full.code, &full.stdout, &full.stderr)
    );
}

#[test]
fn the_small_client_hands_everything_else_to_agent_exec() {
    let fx = Fixture::new(&policy(""));
    let echo = ["--", "echo", "hi"];
    // No daemon: agent-exec runs it, and says nothing of a daemon.
    let r = cli_of(SMALL, &fx, &fx.policy, &[], &echo);
    assert_eq!(r.code, 0, "{:?}", r.result);
    assert!(scrubbed_here(&r.result), "{:?}", r.result);
    assert_eq!(r.result["stdout"], "hi\n");

    // A daemon that does not answer: agent-exec tries it too, runs the
    // call and its trace says why the daemon was not used.
    let trace = fx.dir.path().join("t.jsonl");
    let gone = fx.run_dir.join("gone.sock");
    let r = cli_of(
        SMALL,
        &fx,
        &fx.policy,
        &[
            "--daemon",
            gone.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ],
        &echo,
    );
    assert_eq!(r.code, 0, "{:?}", r.result);
    assert!(scrubbed_here(&r.result), "{:?}", r.result);
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(text.contains("\"via\":\"direct: "), "{text}");

    // A daemon for another policy: not forwarded, run by agent-exec.
    let other = Fixture::new(&policy("description = \"another\""));
    let _d = other.start(&[]);
    let socket = other.socket.to_str().unwrap();
    let r = cli_of(SMALL, &fx, &fx.policy, &["--daemon", socket], &echo);
    assert!(scrubbed_here(&r.result), "{:?}", r.result);
    // Control: its own policy and root are forwarded.
    let r = cli_of(SMALL, &other, &other.policy, &["--daemon", socket], &echo);
    assert!(!scrubbed_here(&r.result), "{:?}", r.result);

    // What only agent-exec reads: the same bytes and status from both.
    let same = |args: &[&str]| {
        let run = |bin: &str| {
            let out = Command::new(bin)
                .args(args)
                .env_remove("AGENT_EXEC_DAEMON")
                .output()
                .unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        };
        let (full, small) = (run(FULL), run(SMALL));
        assert_eq!(small, full, "{args:?}");
        full
    };
    let policy = fx.policy.to_str().unwrap();
    let version = same(&["--version"]);
    assert!(version.1.starts_with("agent-exec "), "{version:?}");
    let usage = same(&["--policy", policy, "--shell", "ls", "--", "ls"]);
    assert_eq!(usage.0, Some(125), "{usage:?}");
    let check = same(&["check", "--policy", policy, "--shell", "cat /etc/shadow"]);
    assert!(check.1.contains("\"deny\""), "{check:?}");
}

/// The small client starts without std's runtime start
/// (`agent_exec_sandbox::run_main`), which ignored SIGPIPE; its entry must
/// still ignore it, or a reader that went away (an agent host that gave up
/// on the call) would see the client killed by a signal instead of the
/// command's exit status.
#[test]
fn a_reader_that_went_away_costs_the_small_client_its_output_not_its_status() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let socket = fx.socket.to_str().unwrap();
    for (command, status) in [("exit 0", 0), ("exit 3", 3)] {
        // Forwarded, so the client prints the result itself (handed to
        // `agent-exec`, std's start would ignore SIGPIPE for it).
        let mut child = run_form(
            SMALL,
            &fx,
            &fx.policy,
            &["--daemon", socket],
            &["--shell", command],
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
        // The read end closes before the result can be written.
        drop(child.stdout.take());
        let got = child.wait().unwrap();
        assert_eq!(got.signal(), None, "{command}: {got:?}");
        assert_eq!(got.code(), Some(status), "{command}");
    }
}

#[test]
fn the_small_client_alone_refuses_and_runs_nothing() {
    // Without agent-exec beside it, a call it cannot forward is refused:
    // nothing runs.
    let fx = Fixture::new(&policy(""));
    let lonely = fx.dir.path().join("lonely");
    std::fs::create_dir(&lonely).unwrap();
    let copy = lonely.join("agent-exec-client");
    std::fs::copy(SMALL, &copy).unwrap();
    let witness = fx.root.join("witness");
    let r = cli_of(
        copy.to_str().unwrap(),
        &fx,
        &fx.policy,
        &[],
        &["--shell", "touch witness"],
    );
    assert_eq!(r.code, 125, "{:?}", r.result);
    assert_eq!(r.result["error_type"], "INTERNAL_ERROR", "{:?}", r.result);
    let message = r.result["message"].as_str().unwrap();
    assert!(message.contains("agent-exec"), "{message}");
    assert!(!witness.exists());
}

/// A daemon that says it serves `fx`'s policy and root, takes one run
/// request and hangs up without an answer (as one that dies mid-call).
/// Returns the request it took.
fn daemon_that_dies_mid_call(
    fx: &Fixture,
    socket: &std::path::Path,
) -> std::thread::JoinHandle<String> {
    use sha2::{Digest, Sha256};
    use std::io::{BufRead, BufReader, Write};
    let listener = std::os::unix::net::UnixListener::bind(socket).unwrap();
    let sha = hex::encode(Sha256::digest(std::fs::read(&fx.policy).unwrap()));
    let root = fx.root.canonicalize().unwrap();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut writer = stream;
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(line.contains("describe"), "{line}");
        let served = serde_json::json!({
            "policy": {"sha256": sha},
            "root": root,
            "version": env!("CARGO_PKG_VERSION"),
            "replay": false,
        });
        let answer = agent_exec::ToolResult::description("d", &served);
        let mut bytes = serde_json::to_vec(&answer).unwrap();
        bytes.push(b'\n');
        writer.write_all(&bytes).unwrap();
        let mut run = String::new();
        reader.read_line(&mut run).unwrap();
        run
    })
}

#[test]
fn a_call_the_daemon_took_and_never_answered_is_not_run_again() {
    for bin in [FULL, SMALL] {
        let fx = Fixture::new(&policy(""));
        let socket = fx.run_dir.join("dies.sock");
        let daemon = daemon_that_dies_mid_call(&fx, &socket);
        let r = cli_of(
            bin,
            &fx,
            &fx.policy,
            &["--daemon", socket.to_str().unwrap()],
            &["--shell", "touch witness"],
        );
        let taken = daemon.join().unwrap();
        assert!(taken.contains("touch witness"), "{taken}");
        assert_eq!(r.code, 125, "{bin}: {:?}", r.result);
        assert_eq!(r.result["error_type"], "INTERNAL_ERROR", "{:?}", r.result);
        let message = r.result["message"].as_str().unwrap();
        assert!(message.contains("not run again"), "{message}");
        assert!(
            !fx.root.join("witness").exists(),
            "{bin}: the call was run a second time"
        );
    }
}
