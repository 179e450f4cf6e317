//! Every shipped policy loads (its own examples pass) and carries enough
//! examples to document itself.

use std::path::Path;

use agent_exec_policy::Policy;

/// The policies the project ships, at the workspace root.
const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies");

#[test]
fn every_shipped_policy_loads_with_at_least_30_examples() {
    let dir = Path::new(POLICIES);
    let mut seen = 0;
    let mut failures = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        seen += 1;
        match Policy::load(&path) {
            Ok(policy) => {
                assert!(
                    policy.example_count() >= 30,
                    "{} has only {} examples",
                    path.display(),
                    policy.example_count()
                );
                assert_eq!(policy.sha256.len(), 64);
            }
            Err(e) => failures.push(e.to_string()),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        seen >= 3,
        "expected code, readonly and ci policies, found {seen}"
    );
}

/// code.toml's `{root}` PATH entries: the project's programs match their
/// rules by name, refusals included, and only in those directories.
#[test]
fn code_matches_the_projects_own_programs_by_name() {
    use agent_exec_policy::{CommandSpec, Context, Verdict};
    use std::os::unix::fs::PermissionsExt;

    let policy = Policy::load(&Path::new(POLICIES).join("code.toml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for (rel, name) in [
        (".venv/bin", "python"),
        (".venv/bin", "pytest"),
        ("tools", "python"),
    ] {
        std::fs::create_dir_all(root.join(rel)).unwrap();
        let p = root.join(rel).join(name);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let ctx = Context {
        root: &root,
        cwd: &root,
    };
    let decide = |s: &str| {
        policy
            .decide(&CommandSpec::Shell(s.to_string()), &ctx)
            .unwrap()
    };
    for cmd in [
        ".venv/bin/python -m pytest -q",
        "./.venv/bin/python -m pytest -q",
        "pytest -x tests",
        "cd .venv && bin/python -c 'print(1)'",
    ] {
        // Run by path, the project's interpreter is also a program inside
        // the root (`project-programs`, allowed as well); by name the rule
        // is python's. Which allow is reported matters less than that the
        // name's own rules apply: the pip case below proves they do.
        let d = decide(cmd);
        assert_eq!(d.verdict, Verdict::Allow, "{cmd}: {d:?}");
        assert!(
            ["python", "project-programs"].contains(&d.rule.as_str()),
            "{cmd}: {d:?}"
        );
    }
    assert_eq!(decide("pytest -x tests").rule, "python");
    let d = decide(".venv/bin/python -m pip install requests");
    assert_eq!(
        (d.verdict, d.rule.as_str()),
        (Verdict::Deny, "pip-install"),
        "{d:?}"
    );
    // A program elsewhere in the root is not the project's environment.
    let d = decide("tools/python -m pytest");
    assert_ne!(d.rule, "python", "{d:?}");
    assert_eq!(
        policy.env.run_path(&root),
        format!(
            "{0}/.venv/bin:{0}/node_modules/.bin:/usr/local/bin:/usr/bin:/bin",
            root.display()
        )
    );
}

/// The run's own `/tmp` (a private directory where the sandbox gives the
/// run a mount namespace) is scratch space for code.toml; readonly.toml
/// and a root beneath `/tmp` keep it out.
#[test]
fn scratch_files_in_tmp_are_the_runs_own() {
    use agent_exec_policy::{CommandSpec, Context, Verdict};
    let code = Policy::load(&Path::new(POLICIES).join("code.toml")).unwrap();
    let readonly = Policy::load(&Path::new(POLICIES).join("readonly.toml")).unwrap();
    let decide = |p: &Policy, root: &str, s: &str| {
        let root = Path::new(root);
        let ctx = Context { root, cwd: root };
        p.decide(&CommandSpec::Shell(s.to_string()), &ctx).unwrap()
    };
    let outside = "/srv/agent/project";
    for cmd in [
        "cat > /tmp/repro.py <<'EOF'\nprint(1)\nEOF",
        "python3 /tmp/repro.py",
        "ls /tmp",
        "cp src/a.py /var/tmp/a.py",
    ] {
        let d = decide(&code, outside, cmd);
        assert_eq!(d.verdict, Verdict::Allow, "{cmd}: {d:?}");
    }
    let d = decide(&readonly, outside, "echo x > /tmp/x");
    assert_ne!(d.verdict, Verdict::Allow, "{d:?}");
    // A root under /tmp: the sandbox leaves /tmp the host's.
    let d = decide(&code, "/tmp/project", "echo x > /tmp/other");
    assert_eq!(d.rule, "builtin:path-escape", "{d:?}");
}

/// code.toml asks for an idempotency key for changes to the repository,
/// not for ordinary work.
#[test]
fn code_asks_for_keys_only_for_repository_changes() {
    use agent_exec_policy::{CommandSpec, Context};
    let policy = Policy::load(&Path::new(POLICIES).join("code.toml")).unwrap();
    let root = Path::new("/srv/agent/project");
    let ctx = Context { root, cwd: root };
    let needs_key = |s: &str| {
        policy
            .decide(&CommandSpec::Shell(s.to_string()), &ctx)
            .unwrap()
            .needs_key
    };
    assert!(needs_key("git commit -m 'fix parser'"));
    assert!(needs_key("python3 -m pytest -q && git add src/lib.rs"));
    for ordinary in [
        "python3 -m pytest -q",
        "cargo test",
        "touch notes.txt",
        "git status",
    ] {
        assert!(!needs_key(ordinary), "{ordinary}");
    }
}
