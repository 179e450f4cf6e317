//! The daemon's wire protocol end to end, through the real binary: tools,
//! verdicts, malformed input, out-of-order answers, other clients.

mod serve_common;

use serde_json::json;
use serve_common::*;

#[test]
fn describe_answers_the_tool_schema_policy_and_limits() {
    use sha2::Digest;
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    let r = c.call(&json!({"id": "d1", "tool": "describe"}));
    assert_eq!(r["id"], "d1");
    assert_eq!(r["ok"], true);
    let d: serde_json::Value = serde_json::from_str(r["stdout"].as_str().unwrap()).unwrap();
    assert_eq!(d["tool"]["name"], "run_shell");
    assert_eq!(d["tool"]["parameters"]["required"], json!(["command"]));
    // The schema a model is given and the validator agree on the arguments.
    let mut props: Vec<&str> = d["tool"]["parameters"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    props.sort_unstable();
    assert_eq!(
        props,
        ["command", "cwd", "output_chars", "stdin", "timeout_ms"]
    );
    assert_eq!(d["policy"]["name"], "serve-test");
    let file_hash = hex::encode(sha2::Sha256::digest(std::fs::read(&fx.policy).unwrap()));
    assert_eq!(d["policy"]["sha256"], file_hash.as_str());
    assert!(d["limits"]["max_timeout_ms"].as_u64().is_some(), "{d}");
}

#[test]
fn allowed_denied_and_approval_required_end_to_end() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let mut c = fx.connect();

    let ok = c.run("a", "echo canary-allowed");
    assert_eq!(ok["ok"], true, "{ok}");
    assert_eq!(ok["id"], "a");
    assert_eq!(ok["policy_decision"], "allow");
    assert!(ok["stdout"].as_str().unwrap().contains("canary-allowed"));
    assert!(ok["call_id"].as_str().is_some_and(|s| !s.is_empty()));

    // Denied by default: the file it would create must not appear.
    let denied = c.run("b", "cp /etc/hostname stolen.txt");
    assert_eq!(error_type(&denied), "PERMISSION_DENIED", "{denied}");
    assert_eq!(denied["policy_decision"], "deny");
    assert!(!fx.root.join("stolen.txt").exists());

    // Approval required: nothing is removed.
    std::fs::write(fx.root.join("keep.txt"), "x").unwrap();
    let held = c.call(
        &json!({"id": "c", "tool": "run_shell", "idempotency_key": "rm-keep-0001",
                              "args": {"command": "rm keep.txt"}}),
    );
    assert_eq!(error_type(&held), "APPROVAL_REQUIRED", "{held}");
    assert_eq!(held["approval_required"], true);
    assert!(fx.root.join("keep.txt").exists());
}

#[test]
fn every_malformed_input_gets_its_error_and_the_connection_keeps_working() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    let cases: Vec<(&str, Option<serde_json::Value>, &str)> = vec![
        ("this is not json", None, "request"),
        ("[1,2,3]", None, "request"),
        (
            r#"{"id":1,"tool":"run_shell","args":{"command":"echo x","timeout_ms":"5"}}"#,
            Some(json!(1)),
            "args.timeout_ms",
        ),
        (
            r#"{"id":2,"tool":"run_shell","args":{"command":"echo x","bogus":1}}"#,
            Some(json!(2)),
            "args.bogus",
        ),
        (
            r#"{"id":3,"tool":"run_shell","args":{"command":"echo x"},"extra":true}"#,
            Some(json!(3)),
            "extra",
        ),
        (
            r#"{"id":4,"tool":"launch_missiles","args":{}}"#,
            Some(json!(4)),
            "tool",
        ),
        (
            r#"{"id":5,"tool":"run_shell","args":{}}"#,
            Some(json!(5)),
            "args.command",
        ),
        (
            r#"{"id":6,"args":{"command":"echo x"}}"#,
            Some(json!(6)),
            "tool",
        ),
        (
            r#"{"id":"k","tool":"run_shell","idempotency_key":"short","args":{"command":"echo x"}}"#,
            Some(json!("k")),
            "idempotency_key",
        ),
        (
            r#"{"id":7,"tool":"run_shell","args":{"command":42}}"#,
            Some(json!(7)),
            "args.command",
        ),
        (r#"{"id":{"x":1},"tool":"describe"}"#, None, "id"),
    ];
    for (line, id, field) in &cases {
        c.send_raw(format!("{line}\n").as_bytes());
        let r = c.recv();
        assert_eq!(error_type(&r), "INVALID_ARGUMENTS", "{line} -> {r}");
        assert!(
            r["message"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{field}:")),
            "{line} -> {r}"
        );
        assert_eq!(r.get("id"), id.as_ref(), "{line} -> {r}");
        assert_eq!(r["recoverable"], true);
    }
    let after = c.run("after", "echo still-alive");
    assert_eq!(after["ok"], true, "{after}");
    assert!(after["stdout"].as_str().unwrap().contains("still-alive"));
}

#[test]
fn a_line_over_the_limit_is_answered_and_the_connection_closed() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    assert_eq!(c.run("before", "echo fine")["ok"], true);
    // Over the 1 MiB line limit: refused, and the daemon hangs up rather
    // than hold or skip whatever else comes.
    let huge = format!(
        r#"{{"id":8,"tool":"run_shell","args":{{"command":"echo {}"}}}}"#,
        "a".repeat(1 << 20)
    );
    c.send_raw_lossy(format!("{huge}\n").as_bytes());
    let r = c.recv();
    assert_eq!(error_type(&r), "INVALID_ARGUMENTS", "{}", r["message"]);
    assert!(r["message"].as_str().unwrap().starts_with("request:"));
    assert!(r.get("id").is_none(), "{r}");
    assert!(c.recv_or_closed().is_none(), "the connection stayed open");
    // Nothing of the line ran, and the next connection is served.
    let after = fx.connect().run("after", "echo still-alive");
    assert_eq!(after["ok"], true, "{after}");
}

#[test]
fn answers_come_out_of_order_matched_by_id() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    let marker = marker_seconds();
    c.send(
        &json!({"id": "slow", "tool": "run_shell", "args": {"command": format!("sleep {marker}")}}),
    );
    wait_until("the slow command runs", || !pids_with(&marker).is_empty());
    c.send(&json!({"id": "fast", "tool": "run_shell", "args": {"command": "echo quick"}}));
    let first = c.recv();
    assert_eq!(first["id"], "fast", "{first}");
    assert_eq!(first["ok"], true);
    // The slow one is still running: the fast answer did not wait for it.
    assert!(!pids_with(&marker).is_empty());
    drop(c);
    wait_until("the slow command is killed with its client", || {
        pids_with(&marker).is_empty()
    });
}

#[test]
fn socat_drives_the_same_protocol() {
    if !have("socat") {
        eprintln!(
            "SKIPPED socat_drives_the_same_protocol: socat is not installed (CI installs it)"
        );
        assert!(
            std::env::var_os("CI").is_none(),
            "socat must be installed in CI"
        );
        return;
    }
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let input = concat!(
        r#"{"id":1,"tool":"describe"}"#,
        "\n",
        r#"{"id":2,"tool":"run_shell","args":{"command":"echo via-socat"}}"#,
        "\n",
        "garbage\n",
    );
    let mut child = std::process::Command::new("socat")
        .args([
            "-t",
            "30",
            "-",
            &format!("UNIX-CONNECT:{}", fx.socket.display()),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let answers: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), 3, "{text}");
    answers.iter().for_each(assert_valid_result);
    let by_id = |id: i64| answers.iter().find(|a| a["id"] == id).cloned();
    assert_eq!(by_id(1).unwrap()["ok"], true);
    let run = by_id(2).unwrap();
    assert!(
        run["stdout"].as_str().unwrap().contains("via-socat"),
        "{run}"
    );
    assert!(
        answers
            .iter()
            .any(|a| a.get("id").is_none() && error_type(a) == "INVALID_ARGUMENTS")
    );
}

#[test]
fn python_reference_client_drives_a_session() {
    if !require_kernel_feature("python3", have("python3")) {
        return;
    }
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let client = concat!(env!("CARGO_MANIFEST_DIR"), "/integration/client.py");
    let out = std::process::Command::new("python3")
        .arg(client)
        .arg("--socket")
        .arg(&fx.socket)
        .arg("--self-test")
        .arg("--key-prefix")
        .arg(unique())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("self-test passed"), "{stdout}");
    // The session's mutating step really ran, once.
    assert!(fx.root.join("made-by-client.txt").exists());
}

#[test]
fn a_request_with_a_duplicate_key_is_refused_and_runs_nothing() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    // The last `tool` would win with serde_json's default: a `describe`
    // that runs a command.
    for (line, field) in [
        (
            r#"{"id":1,"tool":"describe","tool":"run_shell","idempotency_key":"dup-key-0001","args":{"command":"touch dup-a.txt"}}"#,
            "tool",
        ),
        (
            r#"{"id":2,"tool":"run_shell","idempotency_key":"dup-key-0002","args":{"command":"echo harmless","command":"touch dup-b.txt"}}"#,
            "args.command",
        ),
    ] {
        c.send_raw(format!("{line}\n").as_bytes());
        let r = c.recv();
        assert_eq!(error_type(&r), "INVALID_ARGUMENTS", "{line} -> {r}");
        let message = r["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{field}: duplicate key")),
            "{message}"
        );
    }
    assert!(!fx.root.join("dup-a.txt").exists());
    assert!(!fx.root.join("dup-b.txt").exists());
    // The connection goes on.
    assert_eq!(c.run("after", "echo fine")["ok"], true);
}
