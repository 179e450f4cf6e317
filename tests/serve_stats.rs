//! The daemon's `stats` answer, over the socket: counts, refusals by rule,
//! error types, latency percentiles, and what runs and waits right now.

mod serve_common;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use serve_common::{Fixture, PATIENCE, policy};

fn stats(fx: &Fixture) -> Value {
    let mut c = fx.connect();
    let r = c.call(&json!({"id": "s", "tool": "stats"}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["id"], "s");
    serde_json::from_str(r["stdout"].as_str().unwrap()).unwrap()
}

#[test]
fn stats_count_calls_refusals_errors_and_latency() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let fresh = stats(&fx);
    assert_eq!(fresh["calls"], 0);
    assert_eq!(fresh["latency_ms"]["p50"], Value::Null);

    let mut c = fx.connect();
    assert_eq!(c.run("1", "echo hi")["ok"], true);
    assert_eq!(c.run("2", "echo again")["ok"], true);
    let denied = c.run("3", "curl https://example.com");
    assert_eq!(denied["policy_decision"], "deny", "{denied}");
    let asked = c.run("4", "rm -f x");
    assert_eq!(asked["policy_decision"], "require_approval", "{asked}");

    let s = stats(&fx);
    assert_eq!(s["calls"], 4, "{s}");
    assert_eq!(s["runs"], 2, "{s}");
    assert_eq!(s["succeeded"], 2, "{s}");
    let denied_rule = denied["matched_rule"].as_str().unwrap_or("(default)");
    assert_eq!(s["refusals_by_rule"][denied_rule], 1, "{s}");
    assert_eq!(s["refusals_by_rule"]["rm"], 1, "{s}");
    assert_eq!(s["errors_by_type"]["PERMISSION_DENIED"], 1, "{s}");
    assert_eq!(s["errors_by_type"]["APPROVAL_REQUIRED"], 1, "{s}");
    assert_eq!(s["latency_ms"]["window"], 4);
    let p50 = s["latency_ms"]["p50"].as_u64().unwrap();
    let max = s["latency_ms"]["max"].as_u64().unwrap();
    assert!(p50 <= max, "{s}");
    assert_eq!(s["active_runs"], 0);
    assert_eq!(s["queue_depth"], 0);
}

#[test]
fn stats_show_what_runs_and_what_waits() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&["--max-concurrent", "1"]);
    // One call holds the only slot, a second waits behind it.
    let mut a = fx.connect();
    let mut b = fx.connect();
    a.send(&json!({"id": "a", "tool": "run_shell", "args": {"command": "sleep 30"}}));
    b.send(&json!({"id": "b", "tool": "run_shell", "args": {"command": "sleep 30"}}));
    let deadline = Instant::now() + PATIENCE;
    let s = loop {
        let s = stats(&fx);
        if s["active_runs"] == 1 && s["queue_depth"] == 1 {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "never saw 1 running + 1 waiting: {s}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(s["max_concurrent"], 1);
    // Both callers and the stats connection itself.
    assert!(s["connections"].as_u64().unwrap() >= 3, "{s}");
    drop(a);
    drop(b);
    // Hanging up cancels both; the counters go back to zero.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let s = stats(&fx);
        if s["active_runs"] == 0 && s["queue_depth"] == 0 {
            assert_eq!(s["errors_by_type"]["CANCELLED"], 2, "{s}");
            break;
        }
        assert!(Instant::now() < deadline, "calls never ended: {s}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn stats_take_no_arguments() {
    let fx = Fixture::new(&policy(""));
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    let r = c.call(&json!({"id": "s", "tool": "stats", "args": {"reset": true}}));
    assert_eq!(r["error_type"], "INVALID_ARGUMENTS", "{r}");
}
