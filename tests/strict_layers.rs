//! Strict means strict, through the real CLI: a layer the policy requires
//! (every layer under `enforcement = "strict"`, or one named in
//! `[sandbox.require]`) that the host lacks refuses the call with
//! SANDBOX_UNAVAILABLE naming it, and nothing runs; best effort runs and
//! lists it; a uid-0 child is refused without Landlock's signal scope
//! whatever the enforcement. Absence is simulated with the debug-only
//! switch the sandbox crate offers (the CLI under test is a debug build).
#![cfg(debug_assertions)]

mod strict_common;

use agent_exec::sandbox::TEST_MISSING_LAYERS_ENV;
use strict_common::*;

const LAYERS: [&str; 7] = [
    "landlock",
    "landlock_net",
    "landlock_scopes",
    "seccomp",
    "cgroup",
    "cgroup_pids",
    "cgroup_memory",
];

/// A port is allowed so the TCP rules are needed too, and memory capped.
const PORTS: &str = "connect_ports = [9]\nmemory_max_bytes = 1073741824\n";

#[test]
fn a_required_layer_the_host_lacks_refuses_the_call_and_names_it() {
    assert!(is_root(), "the CLI tests run as root");
    for layer in LAYERS {
        let strict =
            Case::new(&format!("[sandbox]\n{PORTS}"), None).env(TEST_MISSING_LAYERS_ENV, layer);
        let v = strict.shell("touch ran");
        assert_eq!(v["error_type"], "SANDBOX_UNAVAILABLE", "{layer}: {v:#}");
        assert_eq!(v["recoverable"], false);
        let message = v["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("required sandbox layer {layer} unavailable")),
            "{layer}: {message}"
        );
        assert!(!strict.path().join("ran").exists(), "{layer}: it ran");

        // Best effort overall, this one layer required: the same.
        let one = Case::new(
            &format!(
                "[sandbox]\nenforcement = \"best_effort\"\n{PORTS}[sandbox.require]\n{layer} = \"required\"\n"
            ),
            None,
        )
        .env(TEST_MISSING_LAYERS_ENV, layer);
        let v = one.shell("touch ran");
        assert_eq!(v["error_type"], "SANDBOX_UNAVAILABLE", "{layer}: {v:#}");
        assert!(!one.path().join("ran").exists());

        // Strict, this one layer best effort: it runs and says what it
        // lacked.
        let lax = Case::new(
            &format!("[sandbox]\n{PORTS}[sandbox.require]\n{layer} = \"best_effort\"\n"),
            None,
        )
        .env(TEST_MISSING_LAYERS_ENV, layer);
        let v = lax.shell("touch ran");
        assert_eq!(v["ok"], true, "{layer}: {v:#}");
        assert_eq!(not_applied(&v), [layer], "{layer}: {v:#}");
        assert!(lax.path().join("ran").exists());
    }
    // The host has every layer: strict runs, and nothing is missing.
    let v = Case::new(&format!("[sandbox]\n{PORTS}"), None).shell("true");
    assert_eq!(v["ok"], true, "{v:#}");
    assert_eq!(not_applied(&v), Vec::<String>::new());
    assert_eq!(v["sandbox"]["landlock"], "full");
}

#[test]
fn a_root_child_needs_the_signal_scope_at_every_enforcement() {
    assert!(is_root(), "the CLI tests run as root");
    for enforcement in ["strict", "best_effort"] {
        let case = Case::new(
            &format!(
                "[sandbox]\nenforcement = \"{enforcement}\"\nallow_root_child = true\n\
                 [sandbox.require]\nlandlock_scopes = \"best_effort\"\n"
            ),
            None,
        );
        std::os::unix::fs::chown(case.path(), Some(0), Some(0)).unwrap();
        // With the scope (this host), the child is root, without a
        // capability, and cannot signal out (sandbox_layers.rs).
        let v = case.run(&["--", "/usr/bin/id", "-u"]);
        assert_eq!(v["ok"], true, "{v:#}");
        assert_eq!(stdout(&v).trim(), "0");
        // Without it: refused, naming the layer, and nothing ran.
        let case = case.env(TEST_MISSING_LAYERS_ENV, "landlock_scopes");
        let v = case.shell("touch ran");
        assert_eq!(v["error_type"], "SANDBOX_UNAVAILABLE", "{v:#}");
        let message = v["message"].as_str().unwrap();
        assert!(message.contains("uid 0"), "{message}");
        assert!(message.contains("signal scope"), "{message}");
        assert!(!case.path().join("ran").exists());
    }
}

#[test]
fn the_reported_no_new_privs_is_what_the_child_has() {
    let case = Case::new("", None);
    // The program reads its own status (a path argument would be refused
    // by the policy's path check).
    let v = case.run(&[
        "--",
        PYTHON,
        "-c",
        "print(open('/proc/self/status').read())",
    ]);
    assert_eq!(v["ok"], true, "{v:#}");
    assert_eq!(v["sandbox"]["no_new_privs"], true);
    assert!(stdout(&v).contains("NoNewPrivs:\t1"), "{v:#}");
}
