//! `require_kernel_feature`, the one rule for tests that need something
//! the host may lack: a loud skip on a developer's machine, a failure
//! under CI. Both branches run in a child process of this test binary, one
//! with `CI` set and one without.

mod common;

use std::process::{Command, Output};

use common::require_kernel_feature;

/// Set for the child process that runs `probe`.
const PROBE_ENV: &str = "AGENT_EXEC_SANDBOX_TEST_PROBE";

/// Asks for a feature that is there and one that is not, and says whether
/// the test went on. Only the tests below run it, in a child process.
#[test]
#[ignore = "run by the tests below, in a child process"]
fn probe() {
    if std::env::var_os(PROBE_ENV).is_none() {
        return;
    }
    assert!(require_kernel_feature("a feature every host has", true));
    let went_on = require_kernel_feature("a feature no host has", false);
    println!("went on: {went_on}");
}

fn probe_with(ci: bool) -> Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "probe",
        "--exact",
        "--include-ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(PROBE_ENV, "1");
    if ci {
        cmd.env("CI", "true");
    } else {
        cmd.env_remove("CI");
    }
    cmd.output().unwrap()
}

#[test]
fn a_missing_feature_is_a_loud_skip_outside_ci() {
    let out = probe_with(false);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("went on: false"), "{stdout}");
    assert!(
        stderr.contains("SKIPPED: ") && stderr.contains(" needs a feature no host has"),
        "{stderr}"
    );
    assert!(!stderr.contains("every host has"), "{stderr}");
}

#[test]
fn a_missing_feature_fails_the_test_under_ci() {
    let out = probe_with(true);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(!stdout.contains("went on"), "{stdout}");
    assert!(
        stdout.contains("needs a feature no host has, which this host lacks")
            || stderr.contains("needs a feature no host has, which this host lacks"),
        "{stdout}\n{stderr}"
    );
    assert!(!stderr.contains("SKIPPED"), "{stderr}");
}
