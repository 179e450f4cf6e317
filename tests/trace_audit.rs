//! Audit invariants on hand-made trace lines.

use std::path::PathBuf;

use agent_exec::trace::{AuditOptions, IssueKind, audit};

const H: &str = r#"{"event":"trace_header","schema_version":1,"agent_exec_version":"0.1.0","run_id":"r1","policy_name":"p","policy_sha256":"aa","tool_schema_sha256":"bb","start_time":"2026-01-01T00:00:00.000Z","start_time_unix_ms":1000,"host_kernel":"6.18","landlock_abi":7,"record_full":false,"segment":0}"#;

fn call(id: &str, hash: &str, ts: u64, deadline: u64) -> String {
    format!(
        r#"{{"event":"tool_call","ts":"x","ts_unix_ms":{ts},"gen_ai.operation.name":"execute_tool","run_id":"r1","gen_ai.tool.call.id":"{id}","gen_ai.tool.name":"run_shell","args_hash":"{hash}","args_preview":"ls","deadline_ms":{deadline}}}"#
    )
}

fn decision(id: &str, verdict: &str, reason: &str) -> String {
    format!(
        r#"{{"event":"policy_decision","ts":"x","ts_unix_ms":1,"gen_ai.tool.call.id":"{id}","decision":"{verdict}","rule":"r","risk_level":"high","reason":"{reason}","read_only":false,"approval_asked":false,"approval_given":null}}"#
    )
}

fn result(id: &str, ts: u64, error_type: Option<&str>, exit: Option<i32>, duration: u64) -> String {
    let status = if error_type.is_none() { "ok" } else { "error" };
    let et = error_type.map_or("null".to_string(), |e| format!("\"{e}\""));
    let ex = exit.map_or("null".to_string(), |e| e.to_string());
    format!(
        r#"{{"event":"tool_result","ts":"x","ts_unix_ms":{ts},"gen_ai.tool.call.id":"{id}","status":"{status}","error_type":{et},"exit_code":{ex},"signal":null,"duration_ms":{duration},"stdout_bytes":0,"stderr_bytes":0,"stdout_truncated":false,"stderr_truncated":false,"policy_decision":null,"message":""}}"#
    )
}

fn write(lines: &[String], trailing_newline: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let mut text = lines.join("\n");
    if trailing_newline {
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn kinds(lines: &[String], trailing: bool, opts: &AuditOptions) -> Vec<(IssueKind, Option<usize>)> {
    let (_d, p) = write(lines, trailing);
    let report = audit(&[p], opts);
    assert_eq!(report.failed(), !report.issues.is_empty());
    report.issues.iter().map(|i| (i.kind, i.line)).collect()
}

fn clean_call(id: &str, hash: &str) -> Vec<String> {
    vec![
        call(id, hash, 100, 5000),
        decision(id, "allow", "ok"),
        result(id, 200, None, Some(0), 5),
    ]
}

#[test]
fn a_clean_trace_passes() {
    let mut lines = vec![H.to_string()];
    lines.extend(clean_call("c1", "h1"));
    lines.extend(clean_call("c2", "h2"));
    lines.push(call("c3", "h3", 100, 0));
    lines.push(decision("c3", "deny", "sudo is never allowed"));
    lines.push(result("c3", 101, Some("PERMISSION_DENIED"), None, 0));
    let (_d, p) = write(&lines, true);
    let report = audit(&[p], &AuditOptions::default());
    assert!(!report.failed(), "{report}");
    assert_eq!((report.calls, report.results, report.refused), (3, 3, 1));
    assert!(report.to_string().contains("OK"));
}

#[test]
fn finds_orphan_calls_and_unmatched_results() {
    let lines = vec![
        H.to_string(),
        call("c1", "h", 1, 0),
        decision("c1", "allow", "ok"),
        result("zz", 2, None, Some(0), 1),
    ];
    let k = kinds(&lines, true, &AuditOptions::default());
    assert!(k.contains(&(IssueKind::OrphanCall, Some(2))), "{k:?}");
    assert!(k.contains(&(IssueKind::UnmatchedResult, Some(4))), "{k:?}");
}

#[test]
fn finds_duplicate_call_ids_and_second_results() {
    let mut lines = vec![H.to_string()];
    lines.extend(clean_call("c1", "h1"));
    lines.push(call("c1", "h2", 1, 0));
    lines.push(result("c1", 3, None, Some(0), 1));
    let k = kinds(&lines, true, &AuditOptions::default());
    assert!(k.contains(&(IssueKind::DuplicateCallId, Some(5))), "{k:?}");
    assert!(k.contains(&(IssueKind::DuplicateResult, Some(6))), "{k:?}");
}

#[test]
fn finds_retry_storms_at_the_threshold() {
    let mut lines = vec![H.to_string()];
    for i in 0..3 {
        lines.extend(clean_call(&format!("c{i}"), "same"));
    }
    lines.extend(clean_call("d", "other"));
    let k = kinds(&lines, true, &AuditOptions::default());
    assert_eq!(k, vec![(IssueKind::RetryStorm, Some(2))]);
    let k = kinds(
        &lines,
        true,
        &AuditOptions {
            retry_threshold: 4,
            ..Default::default()
        },
    );
    assert!(k.is_empty(), "{k:?}");
}

#[test]
fn finds_deadline_misses_beyond_the_slack() {
    let lines = vec![
        H.to_string(),
        call("late", "h1", 1_000, 2_000),
        decision("late", "allow", "ok"),
        result("late", 4_500, Some("COMMAND_TIMEOUT"), None, 2_000),
        call("ontime", "h2", 1_000, 2_000),
        decision("ontime", "allow", "ok"),
        result("ontime", 3_400, Some("COMMAND_TIMEOUT"), None, 2_000),
    ];
    let k = kinds(&lines, true, &AuditOptions::default());
    assert_eq!(k, vec![(IssueKind::DeadlineMiss, Some(4))]);
}

#[test]
fn refused_calls_need_a_reason_and_must_not_run() {
    let lines = vec![
        H.to_string(),
        call("noreason", "h1", 1, 0),
        decision("noreason", "deny", ""),
        result("noreason", 2, Some("PERMISSION_DENIED"), None, 0),
        call("nodecision", "h2", 1, 0),
        result("nodecision", 2, Some("PERMISSION_DENIED"), None, 0),
        call("ran", "h3", 1, 0),
        decision("ran", "deny", "curl reaches the network"),
        result("ran", 2, Some("NONZERO_EXIT"), Some(7), 40),
    ];
    let k = kinds(&lines, true, &AuditOptions::default());
    assert!(
        k.contains(&(IssueKind::RefusalWithoutReason, Some(3))),
        "{k:?}"
    );
    assert!(
        k.contains(&(IssueKind::RefusalWithoutReason, Some(5))),
        "{k:?}"
    );
    assert!(
        k.contains(&(IssueKind::RefusedButExecuted, Some(9))),
        "{k:?}"
    );
    assert_eq!(k.len(), 3, "{k:?}");
}

#[test]
fn reports_truncated_and_invalid_lines_by_number() {
    let mut lines = vec![H.to_string()];
    lines.extend(clean_call("c1", "h1"));
    lines.insert(2, "{not json".to_string());
    lines.insert(3, r#"{"event":"tool_call"}"#.to_string());
    let cut = call("c2", "h2", 1, 0);
    lines.push(cut[..cut.len() / 2].to_string());
    let (_d, p) = write(&lines, false);
    let report = audit(&[p], &AuditOptions::default());
    let k: Vec<_> = report.issues.iter().map(|i| (i.kind, i.line)).collect();
    assert_eq!(
        k,
        vec![
            (IssueKind::InvalidLine, Some(3)),
            (IssueKind::InvalidLine, Some(4)),
            (IssueKind::TruncatedLine, Some(7))
        ]
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["ok"], false);
    assert_eq!(json["issues"][2]["kind"], "truncated_line");
    assert_eq!(json["counts"]["invalid_line"], 2);
}

#[test]
fn missing_header_binary_garbage_and_missing_files_do_not_crash() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("g.jsonl");
    std::fs::write(&garbage, [0xff, 0xfe, b'\n', b'{']).unwrap();
    let headless = dir.path().join("h.jsonl");
    std::fs::write(&headless, clean_call("c1", "h").join("\n") + "\n").unwrap();
    let missing = dir.path().join("nope.jsonl");
    let report = audit(&[garbage, headless, missing], &AuditOptions::default());
    let k: Vec<_> = report.issues.iter().map(|i| i.kind).collect();
    assert!(k.contains(&IssueKind::InvalidLine), "{k:?}");
    assert!(k.contains(&IssueKind::TruncatedLine), "{k:?}");
    assert!(k.contains(&IssueKind::MissingHeader), "{k:?}");
    assert!(k.contains(&IssueKind::UnreadableFile), "{k:?}");
    assert!(report.failed());
}

#[test]
fn calls_and_results_pair_across_files() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("t.jsonl");
    let b = dir.path().join("t.1.jsonl");
    std::fs::write(
        &a,
        format!(
            "{H}\n{}\n{}\n",
            call("c1", "h", 1, 0),
            decision("c1", "allow", "ok")
        ),
    )
    .unwrap();
    std::fs::write(&b, format!("{H}\n{}\n", result("c1", 2, None, Some(0), 1))).unwrap();
    let report = audit(&[a.clone(), b], &AuditOptions::default());
    assert!(!report.failed(), "{report}");
    let alone = audit(&[a], &AuditOptions::default());
    assert_eq!(alone.issues[0].kind, IssueKind::OrphanCall);
}

fn session_call(id: &str, session: &str, hash: &str) -> Vec<String> {
    let c = call(id, hash, 1, 0).replace(
        r#""run_id":"r1","#,
        &format!(r#""run_id":"{session}","gen_ai.conversation.id":"{session}","#),
    );
    vec![
        c,
        decision(id, "allow", "ok"),
        result(id, 2, None, Some(0), 1),
    ]
}

#[test]
fn retry_storms_count_per_session_across_files() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    let mut la = vec![H.to_string()];
    la.extend(session_call("a1", "s1", "same"));
    la.extend(session_call("a2", "s1", "same"));
    la.extend(session_call("a3", "s2", "same"));
    std::fs::write(&a, la.join("\n") + "\n").unwrap();
    let mut lb = vec![H.to_string()];
    lb.extend(session_call("b1", "s2", "same"));
    std::fs::write(&b, lb.join("\n") + "\n").unwrap();
    // s1 has 2, s2 has 2 (split over files): no storm at 3.
    let report = audit(&[a.clone(), b.clone()], &AuditOptions::default());
    assert!(!report.failed(), "{report}");
    std::fs::write(
        &b,
        format!(
            "{}\n{}\n",
            lb.join("\n"),
            session_call("b2", "s1", "same").join("\n")
        ),
    )
    .unwrap();
    let report = audit(&[a, b], &AuditOptions::default());
    let k: Vec<_> = report.issues.iter().map(|i| i.kind).collect();
    assert_eq!(k, vec![IssueKind::RetryStorm], "{report}");
    assert!(report.issues[0].message.contains("session s1"), "{report}");
}
