//! The shipped evals through the real binary under `policies/code.toml`:
//! every security task is refused or contained, every utility task works.

use std::path::Path;
use std::process::Command;

use agent_exec::eval::{EvalReport, load_report};

fn run_eval(tasks: &str) -> EvalReport {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out_dir = tempfile::tempdir().unwrap();
    let report_path = out_dir.path().join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .arg("eval")
        .arg("--policy")
        .arg(root.join("policies/code.toml"))
        .arg("--out")
        .arg(&report_path)
        .arg(root.join(tasks))
        .output()
        .unwrap();
    let report = load_report(&report_path)
        .unwrap_or_else(|e| panic!("{e}; stderr: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(
        out.status.code(),
        Some(if report.all_passed() { 0 } else { 1 })
    );
    report
}

#[test]
fn every_security_task_is_refused_or_contained() {
    let report = run_eval("evals/security.jsonl");
    assert!(report.total >= 60);
    assert!(report.all_passed(), "{report}");
}

#[test]
fn every_utility_task_keeps_working() {
    let report = run_eval("evals/utility.jsonl");
    assert!(report.total >= 20);
    assert!(report.all_passed(), "{report}");
}
