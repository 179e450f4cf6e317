//! Traces written by the real binary: audit finds a retry storm, strict
//! replay serves recorded results without running anything, and secrets
//! never reach a trace file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_agent-exec");

fn policy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/code.toml")
}

/// A project root the sandboxed child can write: as root, the child runs as
/// `nobody` unless the root belongs to someone else.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    if nix::unistd::geteuid().is_root() {
        std::os::unix::fs::chown(dir.path(), Some(65_534), Some(65_534)).unwrap();
    }
    dir
}

fn run(root: &Path, extra: &[&str], shell: &str, envs: &[(&str, &str)]) -> (Output, Value) {
    let mut c = Command::new(BIN);
    c.arg("--policy")
        .arg(policy())
        .arg("--root")
        .arg(root)
        .args(extra)
        .arg("--shell")
        .arg(shell);
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let json: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "not a JSON ToolResult ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, json)
}

fn strip_ids(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("call_id");
        o.remove("id");
    }
    v
}

#[test]
fn audit_finds_a_retry_storm_in_a_real_trace() {
    let root = project();
    let traces = tempfile::tempdir().unwrap();
    let trace = traces.path().join("t.jsonl");
    let t = trace.to_str().unwrap();
    for _ in 0..3 {
        run(root.path(), &["--trace", t], "cat missing-file.txt", &[]);
    }
    run(root.path(), &["--trace", t], "ls", &[]);

    let ok = Command::new(BIN)
        .args(["audit", "--retry-threshold", "4", t])
        .output()
        .unwrap();
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );

    let out = Command::new(BIN)
        .args(["audit", "--json", t])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let issues = report["issues"].as_array().unwrap();
    assert_eq!(issues.len(), 1, "{report}");
    assert_eq!(issues[0]["kind"], "retry_storm");
    assert_eq!(report["calls"], 4);
    assert_eq!(report["results"], 4);

    let story = Command::new(BIN).args(["replay", t]).output().unwrap();
    let story = String::from_utf8_lossy(&story.stdout);
    assert!(
        story.contains("cat missing-file.txt") && story.contains("#4"),
        "{story}"
    );
    assert!(!story.contains('\x1b'), "colour when not on a terminal");
}

#[test]
fn strict_replay_answers_from_the_recording_and_runs_nothing() {
    let root = project();
    let traces = tempfile::tempdir().unwrap();
    let rec = traces.path().join("rec.jsonl");
    let rec_s = rec.to_str().unwrap();
    let counter = root.path().join("counter");
    let cmd = "echo x >> counter && wc -l counter";

    let (_, first) = run(root.path(), &["--record", rec_s], cmd, &[]);
    let (_, second) = run(root.path(), &["--record", rec_s], cmd, &[]);
    assert_eq!(first["ok"], true, "{first}");
    assert!(second["stdout"].as_str().unwrap().contains('2'), "{second}");
    assert_eq!(
        std::fs::read_to_string(&counter).unwrap().lines().count(),
        2
    );

    let replay = ["--replay", rec_s, "--replay-mode", "strict"];
    let (_, r1) = run(root.path(), &replay, cmd, &[]);
    assert_eq!(
        strip_ids(r1),
        strip_ids(first.clone()),
        "first replayed call gets the first recorded result"
    );
    // Each invocation of the CLI is its own replay session, so it starts the
    // key's sequence again.
    assert_eq!(
        std::fs::read_to_string(&counter).unwrap().lines().count(),
        2,
        "replay ran the command"
    );

    let (out, extra) = run(root.path(), &replay, "echo y >> counter", &[]);
    assert_eq!(extra["error_type"], "UNRECORDED_CALL", "{extra}");
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(&counter).unwrap(),
        "x\nx\n",
        "an unrecorded call ran"
    );

    // A plain trace (hashes only) is refused for replay with a clear message.
    let plain = traces.path().join("plain.jsonl");
    run(
        root.path(),
        &["--trace", plain.to_str().unwrap()],
        "ls",
        &[],
    );
    let out = Command::new(BIN)
        .arg("--policy")
        .arg(policy())
        .arg("--root")
        .arg(root.path())
        .args([
            "--replay",
            plain.to_str().unwrap(),
            "--replay-mode",
            "strict",
            "--shell",
            "ls",
        ])
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("record_full"), "{all}");
}

#[test]
fn secrets_in_the_environment_and_arguments_never_reach_a_trace() {
    let root = project();
    let traces = tempfile::tempdir().unwrap();
    let env_secret = "env-Secret-Value-7c1d9e2f";
    let arg_secrets = [
        "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2",
        "AKIAIOSFODNN7EXAMPLE",
        "sk-proj-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2",
    ];
    let envs = [
        ("DEPLOY_API_TOKEN", env_secret),
        (
            "AWS_SECRET_ACCESS_KEY",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ),
    ];
    let cmd = format!(
        "echo {} {} OPENAI_API_KEY={} {env_secret}",
        arg_secrets[0], arg_secrets[1], arg_secrets[2]
    );
    let trace = traces.path().join("t.jsonl");
    let rec = traces.path().join("r.jsonl");
    let (_, result) = run(
        root.path(),
        &["--trace", trace.to_str().unwrap()],
        &cmd,
        &envs,
    );
    assert_eq!(
        result["ok"], true,
        "the command must run for the test to mean anything: {result}"
    );
    run(
        root.path(),
        &["--record", rec.to_str().unwrap()],
        &cmd,
        &envs,
    );
    run(
        root.path(),
        &["--record", rec.to_str().unwrap()],
        "cat /etc/shadow",
        &envs,
    );
    for file in [&trace, &rec] {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(text.lines().count() >= 4, "{text}");
        for s in arg_secrets.iter().chain([&env_secret, &envs[1].1]) {
            assert!(
                !text.contains(s),
                "{s} found in {}:\n{text}",
                file.display()
            );
        }
    }
}

#[test]
fn lenient_replay_runs_reads_but_writes_only_when_allowed() {
    let root = project();
    let traces = tempfile::tempdir().unwrap();
    let rec = traces.path().join("rec.jsonl");
    let rec_s = rec.to_str().unwrap();
    std::fs::write(root.path().join("seen.txt"), "visible\n").unwrap();
    run(root.path(), &["--record", rec_s], "ls", &[]);
    let counter = root.path().join("counter");

    let lenient = ["--replay", rec_s, "--replay-mode", "lenient"];
    let (_, read) = run(root.path(), &lenient, "cat seen.txt", &[]);
    assert_eq!(read["ok"], true, "{read}");
    assert_eq!(
        read["stdout"], "visible\n",
        "an unrecorded read-only call runs for real"
    );

    let (_, write) = run(root.path(), &lenient, "echo y >> counter", &[]);
    assert_eq!(write["error_type"], "UNRECORDED_CALL", "{write}");
    assert!(
        !counter.exists(),
        "a mutating call ran without --allow-live-writes"
    );

    let live = [
        "--replay",
        rec_s,
        "--replay-mode",
        "lenient",
        "--allow-live-writes",
    ];
    let (_, written) = run(root.path(), &live, "echo y >> counter", &[]);
    assert_eq!(written["ok"], true, "{written}");
    assert_eq!(std::fs::read_to_string(&counter).unwrap(), "y\n");
}

#[test]
fn audit_reports_a_trace_cut_mid_line_by_line_number() {
    let root = project();
    let traces = tempfile::tempdir().unwrap();
    let trace = traces.path().join("t.jsonl");
    let t = trace.to_str().unwrap();
    run(root.path(), &["--trace", t], "ls", &[]);
    let clean = Command::new(BIN).args(["audit", t]).output().unwrap();
    assert_eq!(
        clean.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&clean.stdout)
    );

    // Simulate a crash while the result line was being written.
    let bytes = std::fs::read(&trace).unwrap();
    std::fs::write(&trace, &bytes[..bytes.len() - 20]).unwrap();
    let lines = bytes.iter().filter(|&&b| b == b'\n').count();
    let out = Command::new(BIN)
        .args(["audit", "--json", t])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let kinds: Vec<(&str, u64)> = report["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["kind"].as_str().unwrap(), i["line"].as_u64().unwrap_or(0)))
        .collect();
    assert!(
        kinds.contains(&("truncated_line", lines as u64)),
        "{report}"
    );
    assert!(kinds.iter().any(|(k, _)| *k == "orphan_call"), "{report}");
}
