//! Out-of-band approvals through the daemon's real socket: a
//! `require_approval` call gets an approval id bound to the exact request,
//! a human decides with `agent-exec approve`/`reject`, and the resent
//! request runs once. Everything else is refused with its own error type.

mod serve_common;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use serve_common::{Client, Fixture, error_type, policy, require_kernel_feature, unique};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_agent-exec"))
}

/// A run_shell request; `extra` adds envelope keys (session, approval_id).
fn rm(c: &mut Client, file: &str, extra: Value) -> Value {
    let mut req = json!({
        "id": unique(),
        "tool": "run_shell",
        "idempotency_key": format!("key-{}", unique()),
        "args": {"command": format!("rm {file}")},
    });
    for (k, v) in extra.as_object().unwrap() {
        if k == "cwd" {
            req["args"]["cwd"] = v.clone();
        } else {
            req[k] = v.clone();
        }
    }
    c.call(&req)
}

/// A file in the project the child (`nobody` under a root supervisor)
/// may remove.
fn make_file(fx: &Fixture, rel: &str) {
    let path = fx.root.join(rel);
    std::fs::write(&path, "x").unwrap();
    if nix::unistd::geteuid().is_root() {
        nix::unistd::chown(&path, Some(65534.into()), Some(65534.into())).unwrap();
    }
}

fn approval_id(v: &Value) -> String {
    assert_eq!(error_type(v), "APPROVAL_REQUIRED", "{v}");
    let id = v["approval_id"].as_str().unwrap_or_else(|| panic!("{v}"));
    assert!(v["approval_expires_at"].is_string(), "{v}");
    id.to_string()
}

fn decide(fx: &Fixture, verb: &str, id: &str, extra: &[&str]) -> Output {
    bin()
        .arg(verb)
        .arg("--state")
        .arg(&fx.state)
        .arg(id)
        .args(extra)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn an_approved_request_runs_once() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    make_file(&fx, "x");

    let first = rm(&mut c, "x", json!({}));
    let id = approval_id(&first);
    assert!(first["message"].as_str().unwrap().contains(&id), "{first}");

    // The human sees it, escaped, with its rule, risk, reason and session.
    let listed = bin()
        .arg("approvals")
        .arg("--state")
        .arg(&fx.state)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success(), "{}", text(&listed));
    for part in [
        id.as_str(),
        "command: rm x",
        "rule rm",
        "High risk",
        "deletes files",
        "session: uid",
    ] {
        assert!(shown.contains(part), "{part:?} not in\n{shown}");
    }

    // Not decided yet: nothing runs.
    let early = rm(&mut c, "x", json!({"approval_id": id}));
    assert_eq!(error_type(&early), "APPROVAL_PENDING", "{early}");
    assert!(fx.root.join("x").exists());

    let ok = decide(&fx, "approve", &id, &[]);
    assert!(ok.status.success(), "{}", text(&ok));

    let ran = rm(&mut c, "x", json!({"approval_id": id}));
    assert_eq!(ran["ok"], true, "{ran}");
    assert_eq!(ran["approved"], true, "{ran}");
    assert_eq!(ran["approval_id"], id.as_str(), "{ran}");
    assert!(!fx.root.join("x").exists());

    make_file(&fx, "x");
    let again = rm(&mut c, "x", json!({"approval_id": id}));
    assert_eq!(error_type(&again), "APPROVAL_USED", "{again}");
    assert!(again["suggestion"].as_str().unwrap().contains("once"));
    assert!(fx.root.join("x").exists());

    // A decided approval cannot be decided again.
    let twice = decide(&fx, "reject", &id, &[]);
    assert_eq!(twice.status.code(), Some(126), "{}", text(&twice));
}

#[test]
fn a_different_argument_session_or_cwd_is_refused() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    std::fs::create_dir(fx.root.join("sub")).unwrap();
    for f in ["x", "y", "sub/x"] {
        make_file(&fx, f);
    }
    let id = approval_id(&rm(&mut c, "x", json!({"session": "s1"})));
    let ok = decide(&fx, "approve", &id, &[]);
    assert!(ok.status.success(), "{}", text(&ok));

    let cases = [
        (
            "y",
            json!({"session": "s1", "approval_id": id}),
            "arguments",
        ),
        ("x", json!({"session": "s2", "approval_id": id}), "session"),
        ("x", json!({"approval_id": id}), "session"),
        (
            "x",
            json!({"session": "s1", "cwd": "sub", "approval_id": id}),
            "working directory",
        ),
    ];
    for (file, extra, what) in cases {
        let r = rm(&mut c, file, extra.clone());
        assert_eq!(error_type(&r), "APPROVAL_MISMATCH", "{extra}: {r}");
        assert!(r["message"].as_str().unwrap().contains(what), "{r}");
        assert_eq!(r["recoverable"], true, "{r}");
    }
    for f in ["x", "y", "sub/x"] {
        assert!(fx.root.join(f).exists(), "{f} was removed");
    }
    // A refused use does not spend the approval.
    let ran = rm(&mut c, "x", json!({"session": "s1", "approval_id": id}));
    assert_eq!(ran["ok"], true, "{ran}");
    assert!(!fx.root.join("x").exists());
}

#[test]
fn an_expired_approval_is_refused() {
    let fx = Fixture::new(&policy("[approvals]\nttl_secs = 1\n"));
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    make_file(&fx, "x");
    let id = approval_id(&rm(&mut c, "x", json!({})));
    let ok = decide(&fx, "approve", &id, &[]);
    assert!(ok.status.success(), "{}", text(&ok));
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let late = rm(&mut c, "x", json!({"approval_id": id}));
    assert_eq!(error_type(&late), "APPROVAL_EXPIRED", "{late}");
    assert!(fx.root.join("x").exists());

    // Nor can a lapsed one be approved.
    let id = approval_id(&rm(&mut c, "x", json!({})));
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let too_late = decide(&fx, "approve", &id, &[]);
    assert_eq!(too_late.status.code(), Some(126), "{}", text(&too_late));
    assert!(String::from_utf8_lossy(&too_late.stderr).contains("expired"));
}

#[test]
fn a_rejected_approval_never_runs() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    make_file(&fx, "x");
    let id = approval_id(&rm(&mut c, "x", json!({})));
    let no = decide(&fx, "reject", &id, &[]);
    assert!(no.status.success(), "{}", text(&no));
    let r = rm(&mut c, "x", json!({"approval_id": id}));
    assert_eq!(error_type(&r), "APPROVAL_REJECTED", "{r}");
    assert_eq!(r["recoverable"], false, "{r}");
    assert!(fx.root.join("x").exists());
    let yes = decide(&fx, "approve", &id, &[]);
    assert_eq!(yes.status.code(), Some(126), "{}", text(&yes));
}

#[test]
fn an_unknown_approval_id_is_an_invalid_argument() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    make_file(&fx, "x");
    let r = rm(
        &mut c,
        "x",
        json!({"approval_id": "ap-00000000000000000000000000000000"}),
    );
    assert_eq!(error_type(&r), "INVALID_ARGUMENTS", "{r}");
    let bad = rm(&mut c, "x", json!({"approval_id": "no spaces!"}));
    assert_eq!(error_type(&bad), "INVALID_ARGUMENTS", "{bad}");
    assert!(bad["message"].as_str().unwrap().starts_with("approval_id"));
}

#[test]
fn only_the_policys_approvers_may_decide() {
    // The policy names one approver, and it is not root.
    let fx = Fixture::new(&policy("[approvals]\napprovers = [4242]\n"));
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    make_file(&fx, "x");
    let id = approval_id(&rm(&mut c, "x", json!({})));
    let root = decide(&fx, "approve", &id, &[]);
    assert_eq!(root.status.code(), Some(126), "{}", text(&root));
    assert!(String::from_utf8_lossy(&root.stderr).contains("may not decide"));
    let r = rm(&mut c, "x", json!({"approval_id": id}));
    assert_eq!(error_type(&r), "APPROVAL_PENDING", "{r}");
}

#[test]
fn an_ordinary_uid_cannot_approve() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    make_file(&fx, "x");
    let id = approval_id(&rm(&mut c, "x", json!({})));
    let privileged = nix::unistd::geteuid().is_root();
    if !require_kernel_feature(
        "root, to approve as an ordinary uid with setpriv",
        privileged,
    ) {
        return;
    }
    for verb in ["approve", "reject"] {
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_agent-exec"))
            .arg(verb)
            .arg("--state")
            .arg(&fx.state)
            .arg(&id)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(126), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("uid 65534"),
            "{}",
            text(&out)
        );
    }
    // Still pending: nothing the ordinary uid did counted.
    let r = rm(&mut c, "x", json!({"approval_id": id}));
    assert_eq!(error_type(&r), "APPROVAL_PENDING", "{r}");
    assert!(fx.root.join("x").exists());
    // The state directory is the supervisor's alone.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&fx.state).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "state dir mode {mode:o}");
    let db = std::fs::metadata(fx.state.join("state.db")).unwrap();
    assert_eq!(db.permissions().mode() & 0o077, 0);
}

#[test]
fn a_remembered_approval_lets_the_same_call_run_and_no_other() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    for f in ["x", "y"] {
        make_file(&fx, f);
    }
    let id = approval_id(&rm(&mut c, "x", json!({})));
    let policy = fx.policy.to_str().unwrap().to_string();
    let out = decide(
        &fx,
        "approve",
        &id,
        &["--remember", "--policy", &policy, "--yes"],
    );
    assert!(out.status.success(), "{}", text(&out));
    // The rule was shown before it was saved.
    let shown = String::from_utf8_lossy(&out.stderr);
    assert!(shown.contains("program = \"rm\""), "{shown}");
    assert!(shown.contains("prefix = [\"x\"]"), "{shown}");
    let saved = fx.state.join(agent_exec::approvals::AMENDMENTS_FILE);
    let text_saved = std::fs::read_to_string(&saved).unwrap();
    assert!(text_saved.contains("action = \"allow\""), "{text_saved}");

    // The next identical call runs without asking...
    let ran = rm(&mut c, "x", json!({}));
    assert_eq!(ran["ok"], true, "{ran}");
    assert!(
        ran["matched_rule"]
            .as_str()
            .unwrap()
            .starts_with("approved-"),
        "{ran}"
    );
    assert!(!fx.root.join("x").exists());
    // ...and a different one still asks.
    let other = rm(&mut c, "y", json!({}));
    assert_eq!(error_type(&other), "APPROVAL_REQUIRED", "{other}");
    assert!(fx.root.join("y").exists());

    // The amended policy still validates with the policy's own checks.
    let base = agent_exec::Policy::load(Path::new(&policy)).unwrap();
    base.with_amendments(&text_saved, "amendments").unwrap();

    // `policy show --state` lists the saved rule with the policy's own,
    // and `policy explain --state` decides the remembered call by it.
    let rule_id = ran["matched_rule"].as_str().unwrap();
    let shown = bin()
        .args(["policy", "show", "--json", "--state"])
        .arg(&fx.state)
        .arg(&policy)
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", text(&shown));
    let v: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(v["amendments"], 1, "{v}");
    let ids: Vec<&str> = v["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert!(ids.contains(&rule_id), "{rule_id} not in {ids:?}");
    let plain = bin()
        .args(["policy", "show"])
        .arg(&policy)
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&plain.stdout).contains(rule_id));
}

#[test]
fn remember_refuses_another_policy_and_saves_nothing() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    make_file(&fx, "x");
    let id = approval_id(&rm(&mut c, "x", json!({})));
    let other = fx.dir.path().join("other.toml");
    std::fs::write(&other, policy("# another policy")).unwrap();
    let out = decide(
        &fx,
        "approve",
        &id,
        &["--remember", "--policy", other.to_str().unwrap(), "--yes"],
    );
    assert_eq!(out.status.code(), Some(125), "{}", text(&out));
    assert!(
        !fx.state
            .join(agent_exec::approvals::AMENDMENTS_FILE)
            .exists()
    );
    let r = rm(&mut c, "x", json!({"approval_id": id}));
    assert_eq!(error_type(&r), "APPROVAL_PENDING", "{r}");
}

/// Every trace file under `dir`, recursively.
fn traces(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(traces(&p));
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn audit(files: &[std::path::PathBuf]) -> (i32, Value) {
    // The approval flow resends a call by design; a retry storm is more.
    let out = bin()
        .args(["audit", "--json", "--retry-threshold", "5"])
        .args(files)
        .output()
        .unwrap();
    let report: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    (out.status.code().unwrap_or(-1), report)
}

fn kinds(report: &Value) -> Vec<String> {
    report["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn every_step_is_traced_and_the_audit_checks_them() {
    let fx = Fixture::new(&policy(""));
    let mut d = fx.start(&[]);
    let mut c = fx.connect();
    make_file(&fx, "x");
    let id = approval_id(&rm(&mut c, "x", json!({"session": "s1"})));
    assert!(decide(&fx, "approve", &id, &[]).status.success());
    assert_eq!(
        rm(&mut c, "x", json!({"session": "s1", "approval_id": id}))["ok"],
        true
    );
    let used = rm(&mut c, "x", json!({"session": "s1", "approval_id": id}));
    assert_eq!(error_type(&used), "APPROVAL_USED");
    let rejected = approval_id(&rm(&mut c, "y", json!({"session": "s1"})));
    assert!(decide(&fx, "reject", &rejected, &[]).status.success());
    drop(c);
    d.signal(nix::sys::signal::Signal::SIGTERM);
    d.wait();

    let files = traces(&fx.state.join("traces"));
    let all = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect::<String>();
    let me = nix::unistd::getuid().as_raw();
    let steps: Vec<Value> = all
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["event"] == "approval")
        .collect();
    let actions: Vec<(&str, &str)> = steps
        .iter()
        .map(|v| {
            (
                v["approval_id"].as_str().unwrap(),
                v["action"].as_str().unwrap(),
            )
        })
        .collect();
    for (want_id, action) in [
        (&id, "requested"),
        (&id, "approved"),
        (&id, "used"),
        (&id, "refused"),
        (&rejected, "requested"),
        (&rejected, "rejected"),
    ] {
        assert!(
            actions.contains(&(want_id.as_str(), action)),
            "{action} of {want_id} missing: {actions:?}"
        );
    }
    // Who decided is in the trace.
    let decided = steps.iter().find(|v| v["action"] == "approved").unwrap();
    assert_eq!(decided["uid"], me);

    let (code, report) = audit(&files);
    assert_eq!(code, 0, "{report}");

    // A second use, a run under a rejected approval and a decision no call
    // asked for: each is reported.
    let session_file = files
        .iter()
        .find(|f| f.ends_with("s1.jsonl"))
        .unwrap()
        .clone();
    let text = std::fs::read_to_string(&session_file).unwrap();
    let use_line = text
        .lines()
        .find(|l| l.contains("\"action\":\"used\""))
        .unwrap();
    let forged_use = use_line.replace(&id, &rejected);
    let ghost = use_line
        .replace("\"action\":\"used\"", "\"action\":\"approved\"")
        .replace(&id, "ap-ffffffffffffffffffffffffffffffff");
    std::fs::write(
        &session_file,
        format!("{text}{use_line}\n{forged_use}\n{ghost}\n"),
    )
    .unwrap();
    let (code, report) = audit(&files);
    assert_eq!(code, 1, "{report}");
    let found = kinds(&report);
    for kind in [
        "approval_used_twice",
        "refused_approval_ran",
        "approval_without_call",
    ] {
        assert!(found.iter().any(|k| k == kind), "{kind} not in {report}");
    }
}

#[test]
fn approvals_persist_across_restarts_and_bind_to_the_policy() {
    let fx = Fixture::new(&policy(""));
    let mut d = fx.start(&[]);
    let mut c = fx.connect();
    make_file(&fx, "x");
    let same = approval_id(&rm(&mut c, "x", json!({})));
    let changed = approval_id(&rm(&mut c, "x", json!({"session": "s2"})));
    for id in [&same, &changed] {
        assert!(decide(&fx, "approve", id, &[]).status.success());
    }
    drop(c);
    d.signal(nix::sys::signal::Signal::SIGTERM);
    d.wait();

    // The same policy: the approval survived the restart.
    let mut d = fx.start(&[]);
    let mut c = fx.connect();
    let ran = rm(&mut c, "x", json!({"approval_id": same}));
    assert_eq!(ran["ok"], true, "{ran}");
    drop(c);
    d.signal(nix::sys::signal::Signal::SIGTERM);
    d.wait();

    // Another policy (one more rule): what was approved under the old one
    // does not run under it.
    std::fs::write(
        &fx.policy,
        policy("[[rule]]\nid = \"cat\"\naction = \"allow\"\nrisk = \"low\"\nreason = \"reads\"\nprogram = \"cat\"\nread_only = true\n"),
    )
    .unwrap();
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    make_file(&fx, "x");
    let r = rm(
        &mut c,
        "x",
        json!({"session": "s2", "approval_id": changed}),
    );
    assert_eq!(error_type(&r), "APPROVAL_MISMATCH", "{r}");
    assert!(r["message"].as_str().unwrap().contains("policy"), "{r}");
    assert!(fx.root.join("x").exists());
}
