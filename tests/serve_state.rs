//! Idempotency keys and session budgets through the daemon, including
//! across a restart on the same state directory.

mod serve_common;

use serde_json::{Value, json};
use serve_common::*;

fn bump(id: &str, key: &str) -> Value {
    json!({"id": id, "tool": "run_shell", "idempotency_key": key,
           "args": {"command": "echo run >> counter.txt"}})
}

fn count(fx: &Fixture) -> usize {
    std::fs::read_to_string(fx.root.join("counter.txt")).map_or(0, |s| s.lines().count())
}

#[test]
fn duplicate_key_returns_the_stored_result_and_runs_once_even_after_restart() {
    let fx = Fixture::new(&policy(""));
    let key = format!("bump-{}", unique());
    {
        let mut d = fx.start(&[]);
        let mut c = fx.connect();
        let first = c.call(&bump("1", &key));
        assert_eq!(first["ok"], true, "{first}");
        assert!(first.get("duplicate").is_none_or(|d| d == false));
        assert_eq!(count(&fx), 1);

        let again = c.call(&bump("2", &key));
        assert_eq!(again["duplicate"], true, "{again}");
        assert_eq!(
            again["id"], "2",
            "the duplicate answers with its own request id"
        );
        assert_eq!(
            again["call_id"], first["call_id"],
            "the stored result is returned"
        );
        assert_eq!(count(&fx), 1, "a duplicate must not run the command");

        // Same key, other arguments: refused, nothing runs.
        let reuse = c.call(
            &json!({"id": "3", "tool": "run_shell", "idempotency_key": key,
                                   "args": {"command": "echo other >> counter.txt"}}),
        );
        assert_eq!(error_type(&reuse), "INVALID_ARGUMENTS", "{reuse}");
        assert_eq!(count(&fx), 1);

        d.signal(nix::sys::signal::Signal::SIGTERM);
        assert!(d.wait().success());
    }
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    let after = c.call(&bump("4", &key));
    assert_eq!(after["duplicate"], true, "{after}");
    assert_eq!(count(&fx), 1, "the restarted daemon must not run it again");
    // A new key runs.
    let fresh = c.call(&bump("5", &format!("{key}-b")));
    assert_eq!(fresh["ok"], true, "{fresh}");
    assert_eq!(count(&fx), 2);
}

#[test]
fn a_session_budget_runs_out() {
    let fx = Fixture::new(&policy("[budget]\nmax_mutating_runs = 2\n"));
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    let session = format!("s-{}", unique());
    let call = |c: &mut Client, n: u32| {
        c.call(&json!({"id": n, "tool": "run_shell", "session": session,
                       "idempotency_key": format!("{session}-{n}"),
                       "args": {"command": format!("touch file-{n}.txt")}}))
    };
    assert_eq!(call(&mut c, 1)["ok"], true);
    assert_eq!(call(&mut c, 2)["ok"], true);
    let spent = call(&mut c, 3);
    assert_eq!(error_type(&spent), "BUDGET_EXHAUSTED", "{spent}");
    assert_eq!(spent["recoverable"], false);
    assert!(
        !fx.root.join("file-3.txt").exists(),
        "nothing runs once the budget is spent"
    );
    // Another session has its own budget; read-only calls are not charged.
    let other = c.call(
        &json!({"id": 4, "tool": "run_shell", "session": "another-session",
                               "idempotency_key": format!("{session}-other"),
                               "args": {"command": "touch other.txt"}}),
    );
    assert_eq!(other["ok"], true, "{other}");
}

#[test]
fn a_keyed_call_interrupted_by_a_crash_is_answered_cancelled_not_rerun() {
    let fx = Fixture::new(&policy(""));
    let key = format!("crash-{}", unique());
    let marker = marker_seconds();
    let req = json!({"id": "1", "tool": "run_shell", "idempotency_key": key,
                     "args": {"command": format!("echo run >> counter.txt; sleep {marker}")}});
    {
        let mut d = fx.start(&[]);
        let mut c = fx.connect();
        c.send(&req);
        // The marker is in bash's command line before the echo has run:
        // wait for the echo's effect too, so the crash hits the sleep.
        wait_until("the command runs", || {
            !pids_with(&marker).is_empty() && count(&fx) == 1
        });
        d.signal(nix::sys::signal::Signal::SIGKILL);
        d.wait();
        wait_until("the command died with the daemon", || {
            pids_with(&marker).is_empty()
        });
    }
    assert_eq!(count(&fx), 1);
    let _d = fx.start(&[]);
    let mut c = fx.connect();
    let after = c.call(&req);
    assert_eq!(after["duplicate"], true, "{after}");
    assert_eq!(error_type(&after), "CANCELLED", "{after}");
    assert!(
        pids_with(&marker).is_empty(),
        "the interrupted call ran again"
    );
    assert_eq!(count(&fx), 1, "the interrupted call ran again");
}
