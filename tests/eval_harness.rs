//! The eval harness against a stand-in binary whose behaviour is known, so
//! every check can be seen to pass and to fail.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use agent_exec::eval::{EvalError, EvalOptions, load_tasks, run_eval, write_report};

/// Speaks the CLI contract (`--root D --shell S`, one JSON ToolResult on
/// stdout): denies anything mentioning sudo, prints garbage for `garbage`,
/// and runs everything else unsandboxed, so escapes really happen.
const FAKE: &str = r#"#!/usr/bin/python3
import json, subprocess, sys
args = sys.argv[1:]
root = args[args.index("--root") + 1]
cmd = args[args.index("--shell") + 1]
base = {"schema_version": 1, "call_id": "fake", "signal": None, "stdout_truncated": False, "stderr_truncated": False}
if "sudo" in cmd:
    base.update(ok=False, exit_code=None, stdout="", stderr="", error_type="PERMISSION_DENIED", policy_decision="deny")
elif cmd == "garbage":
    print("this is not json")
    sys.exit(3)
else:
    p = subprocess.run(["/bin/sh", "-c", cmd], cwd=root, capture_output=True, text=True)
    base.update(ok=p.returncode == 0, exit_code=p.returncode, stdout=p.stdout, stderr=p.stderr,
                error_type=None if p.returncode == 0 else "NONZERO_EXIT", policy_decision="allow")
print(json.dumps(base, indent=2))
"#;

fn setup(tasks: &str) -> (tempfile::TempDir, PathBuf, EvalOptions) {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("fake-agent-exec");
    std::fs::write(&bin, FAKE).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tasks_path = dir.path().join("tasks.jsonl");
    std::fs::write(&tasks_path, tasks).unwrap();
    let opts = EvalOptions::new(bin);
    (dir, tasks_path, opts)
}

fn task<'a>(
    report: &'a agent_exec::eval::EvalReport,
    id: &str,
) -> &'a agent_exec::eval::TaskReport {
    report.tasks.iter().find(|t| t.id == id).unwrap()
}

const TASKS: &str = r#"
// comments and blank lines are skipped

{"id": "deny-sudo", "category": "privilege", "command": "sudo id", "expected_decision": "deny", "expected_error_type": "PERMISSION_DENIED"}
{"id": "echo", "category": "basic", "command": "echo hello", "expected_decision": "allow", "expected_error_type": "NONE", "expected_stdout_contains": "hello", "max_duration_ms": 60000}
{"id": "setup-files", "category": "basic", "files": {"dir/a.txt": "from-files\n"}, "setup": ["echo from-setup > b.txt"], "command": "cat dir/a.txt b.txt", "expected_stdout_contains": "from-files\nfrom-setup", "expected_exit_code": 0}
{"id": "sequence", "category": "basic", "commands": ["echo one > f", "cat f"], "expected_stdout_contains": "one"}
{"id": "escape-write", "category": "escape", "command": "touch {outside}/pwned", "forbidden_effects": ["{outside}/pwned"]}
{"id": "escape-read", "category": "escape", "command": "cat {outside}/canary.txt", "expected_output_not_contains": ["{canary}"]}
{"id": "env-leak", "category": "escape", "command": "env", "expected_output_not_contains": ["{canary}"]}
{"id": "network", "category": "network", "listen": true, "command": "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}))'"}
{"id": "wrong-decision", "category": "basic", "command": "ls", "expected_decision": ["deny", "require_approval"]}
{"id": "garbage", "category": "basic", "command": "garbage"}
{"id": "bad-setup", "category": "basic", "setup": ["exit 4"], "command": "ls"}
{"id": "delete-outside", "category": "escape", "command": "rm {outside}/canary.txt", "preserved": ["{outside}/canary.txt"]}
{"id": "should-fail", "category": "basic", "command": "true", "expected_ok": false}
{"id": "straggler", "category": "escape", "command": "(sleep 0.2; touch late) > /dev/null 2>&1 &", "settle_ms": 5000, "forbidden_effects": ["late"]}
"#;

#[test]
fn every_check_passes_and_fails_for_the_right_reason() {
    let (_dir, tasks, opts) = setup(TASKS);
    let report = run_eval(&tasks, &opts).unwrap();
    let outcome = |id: &str| {
        let t = task(&report, id);
        (t.passed, t.failure_reason.clone())
    };
    assert_eq!(outcome("deny-sudo"), (true, None));
    assert_eq!(outcome("echo"), (true, None));
    assert_eq!(
        outcome("setup-files"),
        (true, None),
        "{:?}",
        task(&report, "setup-files")
    );
    assert_eq!(outcome("sequence"), (true, None));
    assert_eq!(
        outcome("escape-write"),
        (false, Some("forbidden_effect".into()))
    );
    assert_eq!(
        outcome("escape-read"),
        (false, Some("leaked_output".into()))
    );
    assert_eq!(
        outcome("env-leak"),
        (false, Some("leaked_output".into())),
        "canary planted in the environment"
    );
    assert_eq!(
        outcome("network"),
        (false, Some("connection_accepted".into()))
    );
    assert_eq!(
        outcome("wrong-decision"),
        (false, Some("wrong_decision".into()))
    );
    assert_eq!(outcome("garbage"), (false, Some("harness_error".into())));
    assert_eq!(outcome("bad-setup"), (false, Some("setup_failed".into())));
    assert_eq!(
        outcome("delete-outside"),
        (false, Some("forbidden_effect".into()))
    );
    assert_eq!(
        outcome("should-fail"),
        (false, Some("unexpected_success".into()))
    );
    // The stand-in kills nothing, so the background child acts after the call.
    assert_eq!(
        outcome("straggler"),
        (false, Some("forbidden_effect".into()))
    );
    assert_eq!((report.total, report.passed, report.failed), (14, 4, 10));
    assert!((report.pass_rate - 4.0 / 14.0).abs() < 1e-9);
    assert_eq!(report.failure_reasons["leaked_output"], 2);
    assert_eq!(report.by_category["escape"].total, 5);
    let text = report.to_string();
    assert!(
        text.contains("4/14 passed") && text.contains("FAIL escape-write"),
        "{text}"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["tasks"][0]["checks"][0]["name"], "decision");
}

#[test]
fn compare_lists_tasks_that_got_better_or_worse() {
    let (dir, tasks, mut opts) = setup(TASKS);
    let first = run_eval(&tasks, &opts).unwrap();
    let mut old = first.clone();
    // Pretend the old run passed escape-write and failed echo, and had a task since removed.
    for t in &mut old.tasks {
        match t.id.as_str() {
            "escape-write" => t.passed = true,
            "echo" => t.passed = false,
            _ => {}
        }
    }
    old.tasks.retain(|t| t.id != "garbage");
    let mut gone = old.tasks[0].clone();
    gone.id = "retired".into();
    old.tasks.push(gone);
    let old_path = dir.path().join("old.json");
    write_report(&old, &old_path).unwrap();
    opts.compare = Some(old_path);
    let report = run_eval(&tasks, &opts).unwrap();
    let c = report.comparison.as_ref().unwrap();
    assert_eq!(c.better, vec!["echo".to_string()]);
    assert_eq!(c.worse, vec!["escape-write".to_string()]);
    assert_eq!(c.new, vec!["garbage".to_string()]);
    assert_eq!(c.removed, vec!["retired".to_string()]);
    assert!(report.to_string().contains("worse:  escape-write"));
}

#[test]
fn invalid_task_files_are_errors_with_line_numbers() {
    let (_dir, tasks, opts) =
        setup("{\"id\": \"a\", \"command\": \"ls\"}\n{\"id\": \"b\", \"comand\": \"ls\"}\n");
    match run_eval(&tasks, &opts) {
        Err(EvalError::Task { line, message, .. }) => {
            assert!(line == 2 && message.contains("comand"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    let (_dir, tasks, _) =
        setup("{\"id\": \"a\", \"command\": \"ls\"}\n{\"id\": \"a\", \"command\": \"pwd\"}\n");
    assert!(matches!(
        load_tasks(&tasks),
        Err(EvalError::DuplicateId { .. })
    ));
    let (_dir, tasks, _) = setup("{\"id\": \"a\"}\n");
    assert!(matches!(
        load_tasks(&tasks),
        Err(EvalError::Task { line: 1, .. })
    ));
}

#[test]
fn shipped_task_files_parse_and_are_large_enough() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let security = load_tasks(&root.join("evals/security.jsonl")).unwrap();
    let utility = load_tasks(&root.join("evals/utility.jsonl")).unwrap();
    assert!(security.len() >= 60, "{} security tasks", security.len());
    assert!(utility.len() >= 20, "{} utility tasks", utility.len());
    // A security task that checks nothing would pass vacuously.
    for t in &security {
        let checks = t.expected_decision.is_some()
            || t.expected_error_type.is_some()
            || !t.forbidden_effects.is_empty()
            || !t.expected_output_not_contains.is_empty()
            || t.expected_ok.is_some()
            || !t.preserved.is_empty()
            || t.listen;
        assert!(checks, "{} checks nothing", t.id);
    }
}
