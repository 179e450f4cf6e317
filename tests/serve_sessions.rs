//! Sessions are keyed on what the daemon knows, not on what the client
//! says: the peer's uid (from the kernel) plus the client's label. Another
//! uid cannot replay a key to read a stored result, rotating labels
//! neither exhausts the daemon's descriptors nor escapes the budget.

mod serve_common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;

use serde_json::{Value, json};
use serve_common::*;

/// A mutating script whose output changes every time it really runs.
fn counter_policy(extra: &str) -> String {
    policy(&format!(
        "{extra}\n\n[[rule]]\nid = \"sh-script\"\naction = \"allow\"\nrisk = \"low\"\n\
         reason = \"runs a script of the project\"\nprogram = \"sh\"\n"
    ))
}

/// Sends one request line as uid/gid 65534 and returns the answer line.
fn call_as_nobody(fx: &Fixture, request: &Value) -> Value {
    let out = std::process::Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(
            "import socket, sys\n\
             s = socket.socket(socket.AF_UNIX)\n\
             s.connect(sys.argv[1])\n\
             s.sendall(sys.argv[2].encode() + b'\\n')\n\
             s.settimeout(30)\n\
             print(s.makefile().readline().strip())\n",
        )
        .arg(&fx.socket)
        .arg(request.to_string())
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "no answer as uid 65534 ({e}): {text}{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn another_uid_cannot_get_a_stored_result_by_reusing_its_key() {
    if !require_kernel_feature(
        "root (to act as a second uid)",
        nix::unistd::geteuid().is_root(),
    ) {
        return;
    }
    let fx = Fixture::new(&counter_policy("[daemon]\nallowed_uids = [0, 65534]\n"));
    std::fs::write(
        fx.root.join("count.sh"),
        "echo run >> runs.txt\necho \"run number $(wc -l < runs.txt)\"\n",
    )
    .unwrap();
    let _d = fx.start(&[]);
    std::fs::set_permissions(&fx.run_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&fx.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let request = |id: &str| {
        json!({"id": id, "tool": "run_shell", "session": "shared-label",
               "idempotency_key": "the-same-key-01", "args": {"command": "sh count.sh"}})
    };
    let mut c = fx.connect();
    let first = c.call(&request("root-1"));
    assert_eq!(first["ok"], true, "{first}");
    assert_eq!(first["stdout"], "run number 1\n");
    // The owner's retry is answered from the store.
    let again = c.call(&request("root-2"));
    assert_eq!(again["duplicate"], true, "{again}");
    assert_eq!(again["stdout"], "run number 1\n");

    // Same label, same key, same command, another uid: not the stored
    // result. Its call is its own and runs.
    let theirs = call_as_nobody(&fx, &request("nobody-1"));
    assert_ne!(theirs["duplicate"], true, "{theirs}");
    assert_ne!(theirs["call_id"], first["call_id"], "{theirs}");
    assert_eq!(theirs["stdout"], "run number 2\n", "{theirs}");
    // Its own retry is a duplicate of its own result, not of the owner's.
    let theirs_again = call_as_nobody(&fx, &request("nobody-2"));
    assert_eq!(theirs_again["duplicate"], true, "{theirs_again}");
    assert_eq!(theirs_again["call_id"], theirs["call_id"]);
    // Their trace is kept apart from the owner's.
    assert!(fx.state.join("traces/shared-label.jsonl").exists());
    assert!(
        fx.state
            .join("traces/uid-65534/shared-label.jsonl")
            .exists()
    );
}

#[test]
fn rotating_session_labels_keeps_the_daemons_descriptors_bounded() {
    let fx = Fixture::new(&policy(""));
    let d = fx.start(&[]);
    let mut c = fx.connect();
    // Refused by the policy: traced, but nothing is spawned, so the calls
    // are quick.
    let call = |c: &mut Client, label: &str| {
        let r = c.call(&json!({"id": label, "tool": "run_shell", "session": label,
                               "args": {"command": "cat notes.txt"}}));
        assert_eq!(error_type(&r), "PERMISSION_DENIED", "{r}");
    };
    call(&mut c, "warm-up");
    let before = open_fds(d.pid());
    for n in 0..2000 {
        call(&mut c, &format!("label-{n}"));
    }
    let after = open_fds(d.pid());
    // At most 64 session traces stay open (the daemon's cap), plus slack
    // for what the state store and the runtime open on their own.
    assert!(
        after <= before + 64 + 8,
        "{before} descriptors before, {after} after 2000 labels"
    );
    // The traces themselves are all there.
    assert!(fx.state.join("traces/label-0.jsonl").exists());
    assert!(fx.state.join("traces/label-1999.jsonl").exists());
    // An early session evicted from the open set still traces.
    call(&mut c, "label-0");
    let text = std::fs::read_to_string(fx.state.join("traces/label-0.jsonl")).unwrap();
    assert_eq!(
        text.matches("\"event\":\"tool_result\"").count(),
        2,
        "{text}"
    );
}

#[test]
fn rotating_session_labels_does_not_escape_the_budget() {
    let fx = Fixture::new(&policy("[budget]\nmax_mutating_runs = 1\n"));
    // Each uid may spend two sessions' budgets in all.
    let _d = fx.start(&["--uid-budget-sessions", "2"]);
    let mut c = fx.connect();
    let touch = |c: &mut Client, label: &str| {
        c.call(&json!({"id": label, "tool": "run_shell", "session": label,
                       "idempotency_key": format!("key-{label}"),
                       "args": {"command": format!("touch {label}.txt")}}))
    };
    assert_eq!(touch(&mut c, "first")["ok"], true);
    assert_eq!(touch(&mut c, "second")["ok"], true);
    // A third label: a fresh session, but the uid has spent its share.
    let third = touch(&mut c, "third");
    assert_eq!(error_type(&third), "BUDGET_EXHAUSTED", "{third}");
    let message = third["message"].as_str().unwrap();
    assert!(
        message.contains("all its sessions may spend together"),
        "{message}"
    );
    assert!(!fx.root.join("third.txt").exists());
    // A spent session stays spent.
    let first_again = c.call(
        &json!({"id": "again", "tool": "run_shell", "session": "first",
                                     "idempotency_key": "key-first-again",
                                     "args": {"command": "touch again.txt"}}),
    );
    assert_eq!(
        error_type(&first_again),
        "BUDGET_EXHAUSTED",
        "{first_again}"
    );
    // Read-only calls are not charged and still work.
    assert_eq!(c.run("read", "echo still-reading")["ok"], true);
}
