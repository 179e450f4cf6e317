//! Idempotency keys through the daemon are required only for calls the
//! policy marks `needs_key` (state beyond ordinary work); ordinary
//! mutating calls run without one, and with one are still deduplicated.

mod serve_common;

use serde_json::json;
use serve_common::*;

/// `mkdir` stands for a commit: a rule that asks for a key.
const KEYED: &str = r#"
[[rule]]
id = "commit-like"
action = "allow"
risk = "medium"
reason = "stands for a commit"
program = "mkdir"
writes = "operands"
needs_key = true
"#;

#[test]
fn only_calls_the_policy_marks_need_a_key() {
    let fx = Fixture::new(&policy(KEYED));
    let _d = fx.start(&[]);
    let mut c = fx.connect();

    // An ordinary mutating call runs without a key.
    let r = c.call(&json!({"id": "1", "tool": "run_shell",
                           "args": {"command": "touch plain.txt"}}));
    assert_eq!(r["ok"], true, "{r}");
    assert!(fx.root.join("plain.txt").exists());

    // A marked one is refused without, and says what to send.
    let r = c.call(&json!({"id": "2", "tool": "run_shell",
                           "args": {"command": "mkdir history"}}));
    assert_eq!(error_type(&r), "INVALID_ARGUMENTS", "{r}");
    let msg = r["message"].as_str().unwrap();
    assert!(
        msg.contains("idempotency_key") && msg.contains("commit-like"),
        "{msg}"
    );
    assert!(!fx.root.join("history").exists());

    // With a key it runs once; a retry with the same key does not run again.
    let key = format!("commit-{}", unique());
    let call = json!({"id": "3", "tool": "run_shell", "idempotency_key": key,
                      "args": {"command": "mkdir history"}});
    let first = c.call(&call);
    assert_eq!(first["ok"], true, "{first}");
    let again = c.call(&call);
    assert_eq!(again["duplicate"], true, "{again}");
    assert_eq!(again["call_id"], first["call_id"]);
}
