//! Requirement levels per layer: a required layer that is missing fails
//! closed with an error naming it, a best-effort one is listed in
//! `not_applied`, an `Off` one is not applied although present; and a
//! uid-0 child without Landlock's signal scope is refused at every level.
//! Absence is simulated by the debug-only switch (the host here has every
//! layer).
//!
//! Its own test binary, with one test, because the switch is process-wide.
#![cfg(debug_assertions)]

mod common;

use agent_exec_sandbox::{
    Enforcement, Layer, Requirement, Sandbox, SandboxConfig, TEST_MISSING_LAYERS_ENV, landlock_abi,
};
use common::*;

fn missing(layers: &str) {
    // SAFETY: the only test in this binary; no other thread reads the
    // environment while it changes.
    unsafe { std::env::set_var(TEST_MISSING_LAYERS_ENV, layers) };
}

fn with(enforcement: Enforcement, overrides: &[(Layer, Requirement)]) -> SandboxConfig {
    let mut cfg = SandboxConfig {
        enforcement,
        // A port, so the TCP rules are needed, and a memory cap.
        connect_ports: vec![9],
        memory_max_bytes: 1 << 30,
        ..config()
    };
    for (l, r) in overrides {
        cfg.require.set(*l, Some(*r));
    }
    cfg
}

#[test]
fn each_layer_fails_closed_when_required_and_is_listed_when_best_effort() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "the sandbox tests run as root"
    );
    let r = root();
    let marker = r.path.join("ran");
    let touch = ["/bin/sh", "-c", "touch ran"];
    // Every layer must be present for absence to be simulated at all.
    missing("");
    let full = Sandbox::prepare(supervisor(), &with(Enforcement::Strict, &[]), &r.path);
    let Ok(full) = full else {
        // A host lacking a layer for real: strict refuses, as it should.
        require_kernel_feature("every sandbox layer", false);
        return;
    };
    assert!(
        full.summary().not_applied.is_empty(),
        "{:?}",
        full.summary()
    );
    assert_eq!(full.summary().landlock, "full");
    assert!(landlock_abi() >= 6);

    for layer in Layer::ALL {
        missing(layer.name());
        // Strict: every layer is required by default.
        let e = Sandbox::prepare(supervisor(), &with(Enforcement::Strict, &[]), &r.path)
            .map(|_| ())
            .unwrap_err();
        assert_eq!(e.layer(), layer.name(), "{e}");
        assert!(e.to_string().contains(layer.name()), "{e}");
        // Best effort, but this layer required: the same refusal.
        let cfg = with(Enforcement::BestEffort, &[(layer, Requirement::Required)]);
        let e = Sandbox::prepare(supervisor(), &cfg, &r.path)
            .map(|_| ())
            .unwrap_err();
        assert_eq!(e.layer(), layer.name(), "{e}");
        // Strict, but this layer best effort: runs and says what is missing.
        let cfg = with(Enforcement::Strict, &[(layer, Requirement::BestEffort)]);
        let sb = Sandbox::prepare(supervisor(), &cfg, &r.path)
            .unwrap_or_else(|e| panic!("{layer:?} best effort: {e}"));
        let run = sb.for_run().unwrap();
        let s = run.summary();
        assert_eq!(s.not_applied, [layer.name()], "{layer:?}: {s:?}");
        let o = run_in(std::sync::Arc::new(run), &r.path, &touch);
        assert_eq!(o.code, Some(0), "{layer:?}: {o:?}");
        assert!(marker.exists());
        std::fs::remove_file(&marker).unwrap();
        // What the summary lists is really gone.
        match layer {
            Layer::Seccomp => assert!(!s.seccomp),
            Layer::LandlockScopes | Layer::LandlockNet => assert_eq!(s.landlock, "partial"),
            Layer::Cgroup => assert!(!s.limits.iter().any(|l| l.starts_with("cgroup")), "{s:?}"),
            Layer::CgroupPids => assert!(!s.limits.iter().any(|l| l.starts_with("cgroup_pids"))),
            Layer::CgroupMemory => {
                assert!(!s.limits.iter().any(|l| l.starts_with("cgroup_memory")))
            }
            _ => {}
        }
    }
    // Landlock as a whole: its parts go with it, and only it is named...
    missing("landlock");
    let cfg = with(
        Enforcement::Strict,
        &[(Layer::Landlock, Requirement::BestEffort)],
    );
    let sb = Sandbox::prepare(supervisor(), &cfg, &r.path).unwrap();
    assert_eq!(sb.summary().not_applied, ["landlock"]);
    assert_eq!(sb.summary().landlock, "none");
    // ...unless a part is required on its own account.
    let cfg = with(
        Enforcement::BestEffort,
        &[(Layer::LandlockScopes, Requirement::Required)],
    );
    let e = Sandbox::prepare(supervisor(), &cfg, &r.path)
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.layer(), "landlock_scopes", "{e}");
    // The same for the cgroup and its limits.
    missing("cgroup");
    let cfg = with(
        Enforcement::Strict,
        &[(Layer::Cgroup, Requirement::BestEffort)],
    );
    let sb = Sandbox::prepare(supervisor(), &cfg, &r.path).unwrap();
    assert_eq!(sb.for_run().unwrap().summary().not_applied, ["cgroup"]);
    let cfg = with(
        Enforcement::BestEffort,
        &[(Layer::CgroupMemory, Requirement::Required)],
    );
    let e = Sandbox::prepare(supervisor(), &cfg, &r.path)
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.layer(), "cgroup_memory", "{e}");

    // Off: not applied although the kernel has it, and not listed.
    missing("");
    let cfg = with(
        Enforcement::Strict,
        &[
            (Layer::Seccomp, Requirement::Off),
            (Layer::CgroupMemory, Requirement::Off),
        ],
    );
    let sb = Sandbox::prepare(supervisor(), &cfg, &r.path).unwrap();
    let run = sb.for_run().unwrap();
    let s = run.summary();
    assert!(s.not_applied.is_empty(), "{s:?}");
    assert!(!s.seccomp);
    assert!(
        !s.limits.iter().any(|l| l.starts_with("cgroup_memory")),
        "{s:?}"
    );
    let o = run_in(
        std::sync::Arc::new(run),
        &r.path,
        &["/bin/cat", "/proc/self/status"],
    );
    assert!(o.stdout.contains("Seccomp:\t0"), "{o:?}");

    // A uid-0 child needs the signal scope, under strict and best effort
    // alike, and whatever the scope's own level says.
    missing("landlock_scopes");
    for (enforcement, scopes) in [
        (Enforcement::Strict, Requirement::BestEffort),
        (Enforcement::BestEffort, Requirement::BestEffort),
        (Enforcement::BestEffort, Requirement::Off),
    ] {
        let cfg = SandboxConfig {
            allow_root_child: true,
            ..with(enforcement, &[(Layer::LandlockScopes, scopes)])
        };
        let e = Sandbox::prepare(supervisor(), &cfg, &r.path)
            .map(|_| ())
            .unwrap_err();
        assert_eq!(e.layer(), "landlock_scopes", "{e}");
        assert!(e.to_string().contains("uid 0"), "{e}");
    }
    // Named as the user to run as, too.
    let cfg = SandboxConfig {
        run_as: Some("root".into()),
        allow_root_child: true,
        ..with(
            Enforcement::BestEffort,
            &[(Layer::LandlockScopes, Requirement::BestEffort)],
        )
    };
    let e = Sandbox::prepare(supervisor(), &cfg, &r.path)
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.layer(), "landlock_scopes", "{e}");
    // With the scope a uid-0 child runs (and cannot signal out: see
    // `privileged_syscalls_fail`).
    missing("");
    let cfg = SandboxConfig {
        allow_root_child: true,
        ..with(Enforcement::Strict, &[])
    };
    let sb = Sandbox::prepare(supervisor(), &cfg, &r.path).unwrap();
    assert_eq!(sb.summary().uid, 0);
}
