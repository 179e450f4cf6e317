//! `agent-exec policy show` and `agent-exec policy explain`, run as the
//! binary: what they print and the statuses they exit with.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

fn agent_exec() -> Command {
    Command::new(env!("CARGO_BIN_EXE_agent-exec"))
}

fn code_toml() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/code.toml")
}

#[test]
fn show_prints_every_rule_of_a_policy_and_its_overlay() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let overlay = dir.path().join("project.toml");
    std::fs::write(
        &overlay,
        "extends = \"code\"\n[[rule]]\nid = \"tf-plan\"\naction = \"allow\"\nprogram = \"terraform\"\nsubcommands = [\"plan\"]\nrisk = \"medium\"\nreason = \"Plans.\"\n",
    )
    .unwrap();
    let out = agent_exec()
        .args(["policy", "show", "--json"])
        .arg(&overlay)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = v["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.first(), Some(&"read-tools"));
    assert_eq!(ids.last(), Some(&"tf-plan"));
    assert!(ids.contains(&"git-publish"));
    assert_eq!(v["layers"][0][1], 1);

    let text = agent_exec()
        .args(["policy", "show"])
        .arg(code_toml())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("git-config") && text.contains("unless_options"),
        "{text}"
    );
}

#[test]
fn explain_lists_every_finding_and_the_strictest_decides() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let out = agent_exec()
        .args(["policy", "explain", "--json", "--shell"])
        .arg("for f in *.py; do wc -l \"$f\"; done && git frobnicate")
        .arg("--root")
        .arg(root.path())
        .arg(code_toml())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings = v["findings"].as_array().unwrap();
    let rules: Vec<&str> = findings
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert!(
        rules.contains(&"read-tools") && rules.contains(&"default"),
        "{rules:?}"
    );
    assert_eq!(v["decision"]["verdict"], "require_approval");
    assert!(
        v["decision"]["reason"]
            .as_str()
            .unwrap()
            .contains("`git frobnicate`")
    );
    assert!(
        v["decision"]["suggestion"]
            .as_str()
            .unwrap()
            .contains("`git status`")
    );

    let allowed = agent_exec()
        .args(["policy", "explain", "--shell", "(cd src && ls)", "--root"])
        .arg(root.path())
        .arg(code_toml())
        .output()
        .unwrap();
    assert_eq!(allowed.status.code(), Some(0), "{allowed:?}");
    let text = String::from_utf8_lossy(&allowed.stdout);
    assert!(text.contains("decision: allow by `read-tools`"), "{text}");
}
