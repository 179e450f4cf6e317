//! A root-owned project (the usual container) is written as root would
//! write it bare: its runs are uid 0 without any capability. Where the
//! kernel cannot confine such a child, nothing starts, and the refusal
//! says what to do.

mod contain_common;

use std::process::Command;

use contain_common::*;

#[test]
fn ordinary_writes_work_in_every_deployment() {
    for dep in Deployment::all() {
        let p = Project::new(dep, false);
        p.write("notes.txt", "one\n");
        let v = p.run_shell(
            "echo two >> notes.txt && sed -i s/one/uno/ notes.txt && mkdir -p build/out && \
             echo x | tee build/out/x.txt >/dev/null && cat notes.txt build/out/x.txt && id -u",
        );
        assert_eq!(v["ok"], true, "{dep:?}: {v:#}");
        assert_eq!(
            stdout(&v),
            format!("uno\ntwo\nx\n{}\n", dep.child_uid()),
            "{dep:?}"
        );
        if dep == Deployment::RootOnRootProject {
            // Root, but powerless: every capability set is empty.
            let v = p.run(&[
                PYTHON,
                "-c",
                "print(''.join(l for l in open('/proc/self/status') if l.startswith('Cap')), end='')",
            ]);
            let caps = stdout(&v);
            assert_eq!(caps.lines().count(), 5, "{caps}");
            for line in caps.lines() {
                assert!(line.ends_with("0000000000000000"), "{caps}");
            }
        }
    }
}

#[test]
fn without_the_signal_scope_a_root_owned_project_is_refused_with_advice() {
    if !is_root() {
        missing("root, to supervise a root-owned project");
        return;
    }
    // Scopes best effort: the strict level would refuse first, for any
    // project.
    let p = Project::with_sandbox(
        Deployment::RootOnRootProject,
        false,
        "[sandbox.require]\nlandlock_scopes = \"best_effort\"\n",
    );
    let out = Command::new(BIN)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("AGENT_EXEC_TEST_MISSING_LAYERS", "landlock_scopes")
        .arg("--policy")
        .arg(p.policy_file())
        .arg("--root")
        .arg(p.path())
        .args(["--", "true"])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("belongs to root"), "{text}");
    assert!(text.contains("chown -R"), "{text}");
    assert!(text.contains("root_owned_child"), "{text}");

    // Asking for nobody instead: it runs, and cannot write the project.
    let p = Project::with_sandbox(
        Deployment::RootOnRootProject,
        false,
        "root_owned_child = \"nobody\"\n",
    );
    let v = p.run_shell("id -u; touch made-here");
    assert_eq!(
        stdout(&v).lines().next(),
        Some(NOBODY.to_string().as_str()),
        "{v:#}"
    );
    assert!(!p.path().join("made-here").exists(), "{v:#}");
}
