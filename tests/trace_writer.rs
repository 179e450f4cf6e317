//! The trace writer through the library API: line format, privacy,
//! rotation, per-session files, concurrency.

use std::sync::Arc;

use agent_exec::policy::{Decision, RiskLevel, Verdict};
use agent_exec::result::ToolResult;
use agent_exec::trace::{Event, parse_trace};
use agent_exec::trace::{
    TraceDir, TraceHeader, TraceOptions, Tracer, args_hash, read_trace, segment_files,
};
use serde_json::json;

fn header() -> TraceHeader {
    TraceHeader {
        policy_name: "test".into(),
        policy_sha256: "a".repeat(64),
        tool_schema_sha256: "b".repeat(64),
        landlock_abi: 7,
    }
}

fn allow() -> Decision {
    Decision {
        verdict: Verdict::Allow,
        rule: "read-tools".into(),
        risk: RiskLevel::Low,
        reason: "ls only reads".into(),
        token: None,
        read_only: true,
        needs_shell: false,
        needs_key: false,
        injected: Vec::new(),
        suggestion: None,
    }
}

fn ran(call_id: &str, stdout: &str) -> ToolResult {
    let mut r = ToolResult::success(call_id);
    r.exit_code = Some(0);
    r.duration_ms = 3;
    r.stdout = stdout.into();
    r.stdout_bytes = stdout.len() as u64;
    r
}

#[test]
fn writes_header_and_one_line_per_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let t = Tracer::create(&path, header(), TraceOptions::default()).unwrap();
    let args = json!({"command": "ls -la"});
    t.tool_call("c1", Some("s1"), "run_shell", &args, 5000);
    t.policy_decision("c1", &allow(), false, None);
    t.tool_result("c1", &ran("c1", "file\n"));

    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(text.ends_with('\n'));
    let trace = read_trace(&path).unwrap();
    assert!(trace.problems.is_empty(), "{:?}", trace.problems);
    let Event::Header(h) = &trace.events[0].1 else {
        panic!("no header first: {text}")
    };
    assert_eq!(h.policy_name, "test");
    assert_eq!(h.landlock_abi, 7);
    assert_eq!(h.agent_exec_version, env!("CARGO_PKG_VERSION"));
    assert!(!h.host_kernel.is_empty() && h.start_time.ends_with('Z'));
    let Event::Call(c) = &trace.events[1].1 else {
        panic!("{text}")
    };
    assert_eq!(
        (c.call_id.as_str(), c.tool.as_str(), c.deadline_ms),
        ("c1", "run_shell", 5000)
    );
    assert_eq!(c.args_hash, args_hash(&args));
    assert_eq!(c.session.as_deref(), Some("s1"));
    assert_eq!(c.args_preview, "ls -la");
    assert!(c.args.is_none(), "args stored without record_full");
    let Event::Result(r) = &trace.events[3].1 else {
        panic!("{text}")
    };
    assert_eq!(
        (r.status.as_str(), r.exit_code, r.stdout_bytes),
        ("ok", Some(0), 5)
    );
    assert!(r.result.is_none(), "full result stored without record_full");
    // OpenTelemetry GenAI names on the wire.
    assert!(
        text.contains("\"gen_ai.tool.name\":\"run_shell\"")
            && text.contains("\"gen_ai.tool.call.id\":\"c1\"")
    );
    assert!(text.contains("\"gen_ai.operation.name\":\"execute_tool\""));
    assert!(
        !text.contains("file\\n"),
        "stdout stored without record_full: {text}"
    );
}

#[test]
fn record_full_stores_arguments_and_results() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let t = Tracer::create(
        &path,
        header(),
        TraceOptions {
            record_full: true,
            ..Default::default()
        },
    )
    .unwrap();
    t.tool_call(
        "c1",
        None,
        "run_shell",
        &json!({"command": "echo hi", "cwd": "src"}),
        0,
    );
    t.tool_result("c1", &ran("c1", "hi\n"));
    let trace = read_trace(&path).unwrap();
    let Event::Call(c) = &trace.events[1].1 else {
        panic!()
    };
    assert_eq!(c.args, Some(json!({"command": "echo hi", "cwd": "src"})));
    assert_eq!(
        c.run_id,
        t.run_id(),
        "a call without session gets the writer's run id"
    );
    let Event::Result(r) = &trace.events[2].1 else {
        panic!()
    };
    assert_eq!(r.result.as_ref().unwrap().stdout, "hi\n");
}

#[test]
fn secrets_never_reach_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let env_secret = "envSecretValue-9f8e7d6c";
    // Set before the tracer exists: the redactor snapshots the environment.
    unsafe { std::env::set_var("TRACE_TEST_DEPLOY_TOKEN", env_secret) };
    let planted = [
        "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB",
        "AKIAIOSFODNN7EXAMPLE",
        "sk-proj-Qw3rTy9uIoPaSdFgHjKlZxCvBnM1234",
        "hunter2hunter2",
    ];
    for record_full in [false, true] {
        let t = Tracer::create(
            &path,
            header(),
            TraceOptions {
                record_full,
                ..Default::default()
            },
        )
        .unwrap();
        let cmd = format!(
            "curl -H 'Authorization: Bearer {}' https://x && AWS_ACCESS_KEY_ID={} OPENAI_API_KEY={} mysql --password {} && echo {env_secret}",
            planted[0], planted[1], planted[2], planted[3]
        );
        t.tool_call("c1", None, "run_shell", &json!({ "command": cmd }), 0);
        let mut d = allow();
        d.reason = format!("token {} is fine", planted[0]);
        d.token = Some(planted[1].into());
        t.policy_decision("c1", &d, false, None);
        let mut r = ran("c1", &format!("leaked {env_secret} and {}\n", planted[2]));
        r.stderr = format!("password={}", planted[3]);
        r.message = format!("ran with {}", planted[0]);
        t.tool_result("c1", &r);
    }
    let text = std::fs::read_to_string(&path).unwrap();
    for s in planted.iter().chain([&env_secret]) {
        assert!(!text.contains(s), "{s} leaked into the trace:\n{text}");
    }
    assert!(text.contains("[REDACTED]"));
}

#[test]
fn rotates_by_size_with_a_header_per_segment() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let t = Tracer::create(
        &path,
        header(),
        TraceOptions {
            rotate_bytes: Some(2_000),
            ..Default::default()
        },
    )
    .unwrap();
    for i in 0..30 {
        let id = format!("c{i}");
        t.tool_call(
            &id,
            None,
            "run_shell",
            &json!({"command": format!("echo {i}")}),
            0,
        );
        t.tool_result(&id, &ran(&id, ""));
    }
    let files = segment_files(&path);
    assert!(files.len() >= 3, "{files:?}");
    assert!(files[1].ends_with("t.1.jsonl"));
    let mut calls = 0;
    for f in &files {
        assert!(
            std::fs::metadata(f).unwrap().len() <= 2_000 + 600,
            "{f:?} too big"
        );
        let tr = read_trace(f).unwrap();
        assert!(tr.problems.is_empty());
        assert!(
            matches!(tr.events[0].1, Event::Header(_)),
            "{f:?} lacks a header"
        );
        calls += tr
            .events
            .iter()
            .filter(|(_, e)| matches!(e, Event::Call(_)))
            .count();
    }
    assert_eq!(calls, 30, "no event lost across rotation");
    assert_eq!(t.current_path(), *files.last().unwrap());
}

#[test]
fn concurrent_writers_never_interleave_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let t = Arc::new(
        Tracer::create(
            &path,
            header(),
            TraceOptions {
                record_full: true,
                ..Default::default()
            },
        )
        .unwrap(),
    );
    let big = "x".repeat(20_000);
    let handles: Vec<_> = (0..4)
        .map(|n| {
            let t = Arc::clone(&t);
            let big = big.clone();
            std::thread::spawn(move || {
                for i in 0..25 {
                    let id = format!("t{n}-{i}");
                    t.tool_call(&id, None, "run_shell", &json!({"command": "cat big"}), 0);
                    t.tool_result(&id, &ran(&id, &big));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let trace = parse_trace(&std::fs::read(&path).unwrap());
    assert!(trace.problems.is_empty(), "{:?}", &trace.problems[..1]);
    assert_eq!(trace.events.len(), 1 + 4 * 25 * 2);
    assert_eq!(t.write_errors(), 0);
}

#[test]
fn trace_dir_gives_one_file_per_session_and_contains_hostile_names() {
    let dir = tempfile::tempdir().unwrap();
    let td = TraceDir::open(
        &dir.path().join("traces"),
        header(),
        TraceOptions::default(),
    )
    .unwrap();
    let a = td.for_session("alpha").unwrap();
    let a2 = td.for_session("alpha").unwrap();
    assert!(Arc::ptr_eq(&a, &a2));
    let evil = td.for_session("../../escape").unwrap();
    a.tool_call(
        "c1",
        Some("alpha"),
        "run_shell",
        &json!({"command": "ls"}),
        0,
    );
    evil.tool_call(
        "c2",
        Some("../../escape"),
        "run_shell",
        &json!({"command": "ls"}),
        0,
    );
    assert!(dir.path().join("traces/alpha.jsonl").exists());
    assert!(
        !dir.path().join("escape.jsonl").exists()
            && !dir.path().join("traces/../escape.jsonl").exists()
    );
    let names: Vec<String> = std::fs::read_dir(dir.path().join("traces"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("session-")), "{names:?}");
}
