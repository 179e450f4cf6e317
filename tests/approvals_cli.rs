//! Approvals through the one-shot CLI: the same service, so the same
//! approval ids, given back with `--approval-id`.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const POLICY: &str = r#"
name = "cli-approvals"
default = "deny"

[[rule]]
id = "rm"
action = "require_approval"
risk = "high"
reason = "deletes files"
program = "rm"
"#;

fn agent_exec(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agent-exec"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

/// A temporary project with the policy, a root the child may write, and
/// a file to remove.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.toml"), POLICY).unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("x"), "x").unwrap();
    if nix::unistd::geteuid().is_root() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        for p in [root.clone(), root.join("x")] {
            nix::unistd::chown(&p, Some(65534.into()), Some(65534.into())).unwrap();
        }
    }
    dir
}

#[test]
fn a_one_shot_run_gets_an_approval_id_and_runs_under_it_once() {
    let dir = project();
    let base = [
        "--policy",
        "policy.toml",
        "--root",
        "root",
        "--state",
        "state",
    ];
    let first = agent_exec(&[&base[..], &["--", "rm", "x"]].concat(), dir.path());
    assert_eq!(first.status.code(), Some(126));
    let r = json(&first);
    assert_eq!(r["error_type"], "APPROVAL_REQUIRED", "{r}");
    let id = r["approval_id"].as_str().unwrap().to_string();

    let ok = agent_exec(&["approve", "--state", "state", &id], dir.path());
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );

    let with_id = [&base[..], &["--approval-id", &id, "--", "rm", "x"]].concat();
    let ran = agent_exec(&with_id, dir.path());
    assert_eq!(ran.status.code(), Some(0), "{}", json(&ran));
    assert!(!dir.path().join("root/x").exists());
    let again = json(&agent_exec(&with_id, dir.path()));
    assert_eq!(again["error_type"], "APPROVAL_USED", "{again}");
}

#[test]
fn a_state_directory_inside_the_root_is_refused() {
    let dir = project();
    let out = agent_exec(
        &[
            "--policy",
            "policy.toml",
            "--root",
            "root",
            "--state",
            "root/state",
            "--",
            "rm",
            "x",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(125), "{}", json(&out));
    assert!(
        json(&out)["message"]
            .as_str()
            .unwrap()
            .contains("inside the project root")
    );
    assert!(dir.path().join("root/x").exists());
}
