//! `agent-exec doctor`: the layer report comes from a real probe run, so a
//! layer the sandbox is told is missing shows up as not applied.

use std::process::{Command, Output};

fn doctor(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agent-exec"));
    cmd.arg("doctor").args(args).env_remove("GITHUB_ACTIONS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn layers(out: &Output) -> Vec<(String, bool)> {
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["name"].as_str().unwrap().to_string(),
                l["applied"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[test]
fn the_report_names_every_layer_and_the_host_facts() {
    let out = doctor(&["--json"], &[]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["landlock_abi"].as_u64().unwrap(),
        u64::from(agent_exec::sandbox::landlock_abi())
    );
    assert!(!v["kernel"].as_str().unwrap().is_empty());
    assert!(!v["cgroup"]["membership"].as_array().unwrap().is_empty());
    let names: Vec<String> = layers(&out).into_iter().map(|(n, _)| n).collect();
    for want in [
        "landlock",
        "seccomp",
        "cgroup",
        "cgroup_memory",
        "mount_namespace",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
    }
    // Seccomp needs nothing but a Linux kernel: the probe always gets it.
    assert!(layers(&out).contains(&("seccomp".into(), true)));
    // Whether a cgroup mount favours dynamic changes is read from the
    // mount table, and a host whose runs join v1 hierarchies without it is
    // told what the wait costs and how to remove it.
    let mounted = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(" - cgroup ") || l.contains(" - cgroup2 "))
        .any(|l| {
            l.rsplit(' ')
                .next()
                .is_some_and(|o| o.split(',').any(|o| o == "favordynmods"))
        });
    assert_eq!(v["cgroup"]["favordynmods"], mounted, "{v:#}");
    let limited_by_v1 = v["cgroup"]["layout"] != "v2"
        && layers(&out)
            .iter()
            .any(|(n, applied)| *applied && (n == "cgroup_pids" || n == "cgroup_memory"));
    let warned = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap_or_default().contains("favordynmods"));
    assert_eq!(warned, limited_by_v1 && !mounted, "{v:#}");
}

#[test]
fn a_layer_the_kernel_does_not_give_is_reported_and_can_be_required() {
    let env = [("AGENT_EXEC_TEST_MISSING_LAYERS", "cgroup_memory")];
    let out = doctor(&["--json"], &env);
    assert!(out.status.success(), "{out:?}");
    assert!(layers(&out).contains(&("cgroup_memory".into(), false)));

    let out = doctor(&["--require", "seccomp,cgroup_memory"], &env);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cgroup_memory"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("cgroup_memory    NOT APPLIED"));

    let out = doctor(&["--require", "seccomp"], &env);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn in_github_actions_a_missing_layer_is_an_annotation() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agent-exec"));
    let out = cmd
        .args(["doctor"])
        .env("GITHUB_ACTIONS", "true")
        .env("AGENT_EXEC_TEST_MISSING_LAYERS", "cgroup_pids")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l
                .starts_with("::warning title=agent-exec sandbox layer not applied::cgroup_pids:")),
        "{text}"
    );
}

#[test]
fn an_unknown_layer_name_is_a_usage_error() {
    let out = doctor(&["--require", "landlok"], &[]);
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("landlok"));
}

#[test]
fn a_strict_policy_missing_a_required_layer_reports_why_the_probe_did_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("p.toml");
    std::fs::write(
        &policy,
        "name = \"strict\"\ndefault = \"deny\"\n[sandbox]\nenforcement = \"strict\"\n\
         [[rule]]\nid = \"t\"\naction = \"allow\"\nprograms = [\"true\"]\nrisk = \"low\"\nreason = \"probe\"\n",
    )
    .unwrap();
    let p = policy.to_str().unwrap();
    let out = doctor(
        &["--json", "--policy", p],
        &[("AGENT_EXEC_TEST_MISSING_LAYERS", "seccomp")],
    );
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let e = v["probe_error"].as_str().unwrap();
    assert!(
        e.contains("SANDBOX_UNAVAILABLE") && e.contains("seccomp"),
        "{e}"
    );
    assert!(layers(&out).iter().all(|(_, applied)| !applied));
}
