//! Strict and lenient replay through the library API, and the story.

use agent_exec::policy::{Decision, RiskLevel, Verdict};
use agent_exec::result::{ErrorType, ToolResult};
use agent_exec::trace::unrecorded_result;
use agent_exec::trace::{
    ReplayAnswer, ReplayMode, Replayer, TraceError, TraceHeader, TraceOptions, Tracer, args_hash,
    story,
};
use serde_json::json;

const POLICY: &str = "1111111111111111111111111111111111111111111111111111111111111111";
const SCHEMA: &str = "2222222222222222222222222222222222222222222222222222222222222222";

fn header() -> TraceHeader {
    TraceHeader {
        policy_name: "p".into(),
        policy_sha256: POLICY.into(),
        tool_schema_sha256: SCHEMA.into(),
        landlock_abi: 7,
    }
}

fn ran(call_id: &str, stdout: &str) -> ToolResult {
    let mut r = ToolResult::success(call_id);
    r.exit_code = Some(0);
    r.duration_ms = 2;
    r.stdout = stdout.into();
    r.stdout_bytes = stdout.len() as u64;
    r
}

/// Records: `date` twice (different outputs), `ls` once, interleaved.
fn record(dir: &std::path::Path, record_full: bool) -> std::path::PathBuf {
    let path = dir.join("rec.jsonl");
    let t = Tracer::create(
        &path,
        header(),
        TraceOptions {
            record_full,
            ..Default::default()
        },
    )
    .unwrap();
    let calls = [
        ("c1", "date", "Mon\n"),
        ("c2", "ls", "a b\n"),
        ("c3", "date", "Tue\n"),
    ];
    for (id, cmd, out) in calls {
        t.tool_call(id, None, "run_shell", &json!({ "command": cmd }), 0);
        t.tool_result(id, &ran(id, out));
    }
    path
}

fn key(cmd: &str) -> String {
    args_hash(&json!({ "command": cmd }))
}

#[test]
fn strict_replay_serves_each_key_in_recorded_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = record(dir.path(), true);
    let rp = Replayer::load(&path, ReplayMode::Strict, POLICY, SCHEMA).unwrap();
    // Interleaving differs from the recording; per-key order still holds.
    let ReplayAnswer::Recorded(a) = rp.answer("run_shell", &key("date")) else {
        panic!()
    };
    let ReplayAnswer::Recorded(b) = rp.answer("run_shell", &key("date")) else {
        panic!()
    };
    assert_eq!((a.stdout.as_str(), b.stdout.as_str()), ("Mon\n", "Tue\n"));
    assert_eq!(a.call_id, "c1");
    let s = rp.summary();
    assert_eq!((s.served, s.misses, s.recorded_calls), (2, 0, 3));
    assert_eq!(s.unconsumed.len(), 1, "ls was not asked again: {s}");
    assert!(!s.complete());
    let ReplayAnswer::Recorded(c) = rp.answer("run_shell", &key("ls")) else {
        panic!()
    };
    assert_eq!(
        c,
        ran("c2", "a b\n"),
        "recorded result comes back unchanged"
    );
    assert!(rp.summary().complete());
    // A fourth `date` was never recorded.
    assert_eq!(
        rp.answer("run_shell", &key("date")),
        ReplayAnswer::Unrecorded
    );
    assert_eq!(
        rp.answer("run_shell", &key("rm -rf x")),
        ReplayAnswer::Unrecorded
    );
    let s = rp.summary();
    assert_eq!(s.misses, 2);
    assert!(!s.complete());
    let u = unrecorded_result("c9", "run_shell", &key("date"));
    assert_eq!(u.error_type, Some(ErrorType::UnrecordedCall));
    assert_eq!(u.exit_code, None);
}

#[test]
fn strict_replay_refuses_other_policy_or_schema_naming_both_hashes() {
    let dir = tempfile::tempdir().unwrap();
    let path = record(dir.path(), true);
    let other = "9".repeat(64);
    let err = Replayer::load(&path, ReplayMode::Strict, &other, SCHEMA)
        .err()
        .unwrap();
    let msg = err.to_string();
    assert!(matches!(err, TraceError::HashMismatch { .. }));
    assert!(msg.contains(POLICY) && msg.contains(&other), "{msg}");
    let err = Replayer::load(&path, ReplayMode::Strict, POLICY, &other)
        .err()
        .unwrap();
    assert!(err.to_string().contains("tool schema"), "{err}");
    // Lenient accepts the drift.
    assert!(Replayer::load(&path, ReplayMode::Lenient, &other, &other).is_ok());
}

#[test]
fn a_trace_without_record_full_cannot_be_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let path = record(dir.path(), false);
    let err = Replayer::load(&path, ReplayMode::Lenient, POLICY, SCHEMA)
        .err()
        .unwrap();
    assert!(matches!(err, TraceError::NotRecorded { .. }));
    assert!(err.to_string().contains("record_full"), "{err}");
    let missing = Replayer::load(
        &dir.path().join("none.jsonl"),
        ReplayMode::Strict,
        POLICY,
        SCHEMA,
    );
    assert!(matches!(missing, Err(TraceError::Io { .. })));
}

#[test]
fn story_tells_calls_decisions_and_results_with_optional_colour() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let t = Tracer::create(&path, header(), TraceOptions::default()).unwrap();
    t.tool_call(
        "c1",
        Some("sess"),
        "run_shell",
        &json!({"command": "sudo rm -rf /"}),
        10_000,
    );
    let d = Decision {
        verdict: Verdict::Deny,
        rule: "no-sudo".into(),
        risk: RiskLevel::Critical,
        reason: "sudo escalates privileges".into(),
        token: Some("sudo".into()),
        read_only: false,
        needs_shell: false,
        needs_key: false,
        injected: Vec::new(),
        suggestion: None,
    };
    t.policy_decision("c1", &d, false, None);
    t.tool_result(
        "c1",
        &ToolResult::refusal("c1", ErrorType::PermissionDenied, "denied by no-sudo"),
    );
    drop(t);
    // A line cut short by a crash is shown, not fatal.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"{\"event\":\"tool_ca");
    std::fs::write(&path, bytes).unwrap();

    let mut plain = Vec::new();
    story(&path, &mut plain, false).unwrap();
    let plain = String::from_utf8(plain).unwrap();
    for needle in [
        "#1",
        "sudo rm -rf /",
        "denied",
        "no-sudo",
        "sudo escalates privileges",
        "PERMISSION_DENIED",
        "not run",
        "line 5",
        "truncated",
    ] {
        assert!(plain.contains(needle), "{needle:?} missing from:\n{plain}");
    }
    assert!(!plain.contains('\x1b'), "plain story has escape codes");
    let mut coloured = Vec::new();
    story(&path, &mut coloured, true).unwrap();
    assert!(String::from_utf8(coloured).unwrap().contains("\x1b[31m"));
}
