//! Fail closed: on a kernel without Landlock (simulated by the debug-only
//! switch), strict enforcement refuses to prepare anything, so nothing can
//! run; best effort runs and says exactly which layer is missing.
//!
//! Its own test binary because the switch is process-wide. The switch does
//! not exist in release builds, so neither does this test.
#![cfg(debug_assertions)]

mod common;

use agent_exec_sandbox::{Enforcement, Namespaces, Sandbox, SandboxConfig, TEST_NO_LANDLOCK_ENV};
use common::*;

#[test]
fn without_landlock_strict_refuses_and_best_effort_reports() {
    // SAFETY: the only test in this binary; no other thread reads the
    // environment concurrently.
    unsafe { std::env::set_var(TEST_NO_LANDLOCK_ENV, "1") };
    let r = root();
    let marker = r.path.join("ran");

    let err = Sandbox::prepare(supervisor(), &config(), &r.path).unwrap_err();
    assert_eq!(err.layer(), "landlock");
    assert!(err.to_string().contains("landlock"), "{err}");

    // The run's own mount namespace would hide the outside file below:
    // this is about Landlock alone.
    let cfg = SandboxConfig {
        enforcement: Enforcement::BestEffort,
        namespaces: Namespaces::Off,
        ..config()
    };
    let sb = Sandbox::prepare(supervisor(), &cfg, &r.path).unwrap();
    let s = sb.summary();
    assert_eq!(s.landlock, "none");
    assert_eq!(s.landlock_abi, 0);
    assert!(s.not_applied.contains(&"landlock".to_string()), "{s:?}");
    assert!(s.seccomp, "the other layers still apply");

    // Without Landlock a world-readable file outside the root is readable:
    // the summary is not lying about the missing layer.
    let out_dir = outside();
    let f = out_dir.path().join("f");
    std::fs::write(&f, "VISIBLE-without-landlock").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = run(
        &sb,
        &r.path,
        &[
            "/bin/sh",
            "-c",
            &format!("cat {} && touch {}", f.display(), marker.display()),
        ],
    );
    assert!(o.stdout.contains("VISIBLE-without-landlock"), "{o:?}");
    assert!(marker.exists());
    // ...while seccomp still holds.
    let o = run(&sb, &r.path, &["/bin/cat", "/proc/self/status"]);
    assert!(o.stdout.contains("Seccomp:\t2"), "{o:?}");
}
