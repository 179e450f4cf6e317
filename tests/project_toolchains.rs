//! `[sandbox] toolchains`: the project owner's toolchains are readable
//! (never writable) by runs, bound back where homes are hidden, their
//! programs on PATH; the rest of the home stays out of reach.

mod contain_common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use contain_common::*;

/// A home with a rustup-like and a `~/.local` toolchain, and a secret
/// beside them; readable by every user (only the sandbox keeps a run out).
fn fake_home() -> tempfile::TempDir {
    let home = tempfile::Builder::new()
        .prefix("ae-home-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let h = home.path();
    for d in [".cargo/bin", ".cargo/registry", ".rustup", ".local/bin"] {
        std::fs::create_dir_all(h.join(d)).unwrap();
    }
    let tool = |rel: &str, text: &str| {
        std::fs::write(h.join(rel), text).unwrap();
        std::fs::set_permissions(h.join(rel), std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    tool(
        ".cargo/bin/fake-cargo",
        "#!/bin/sh\necho \"fake-cargo $RUSTUP_HOME\"\n",
    );
    tool(".local/bin/user-tool", "#!/bin/sh\necho user-tool\n");
    std::fs::write(h.join(".cargo/credentials.toml"), "token = \"s3cr3t\"\n").unwrap();
    // Open to every user by its mode bits.
    for d in walk(h).iter().filter(|d| d.is_dir()) {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    home
}

fn walk(p: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![p.to_path_buf()];
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            out.extend(walk(&e.unwrap().path()));
        }
    }
    out
}

#[test]
fn chosen_toolchains_run_read_only_and_the_rest_of_home_is_out_of_reach() {
    let home = fake_home();
    let h = home.path().canonicalize().unwrap();
    let h = h.to_str().unwrap();
    // The supervisor's own HOME is the owner's home when it owns the
    // project: the root-owned project under root, and the user's own.
    for dep in Deployment::all()
        .into_iter()
        .filter(|d| *d != Deployment::RootOnUserProject)
    {
        let p = Project::with_sandbox(dep, false, "toolchains = [\"rustup\", \"user-local\"]\n");
        let v = p.run_shell_env(
            "fake-cargo && user-tool && echo \"$CARGO_HOME\"",
            &[("HOME", h)],
        );
        assert_eq!(v["ok"], true, "{dep:?}: {v:#}");
        assert_eq!(
            stdout(&v),
            format!("fake-cargo {h}/.rustup\nuser-tool\n{h}/.cargo\n"),
            "{dep:?}"
        );
        // Read-only, and the credentials beside the toolchain unreadable.
        let probe = format!(
            "import os\n\
             for what, f in (('write', lambda: open('{h}/.cargo/bin/planted', 'w')),\n\
                             ('read', lambda: open('{h}/.cargo/credentials.toml').read())):\n\
             \x20   try:\n\
             \x20       print(what, f())\n\
             \x20   except OSError as e:\n\
             \x20       print(what, 'refused', e.errno)\n"
        );
        let v = p.run(&[PYTHON, "-c", &probe]);
        let out = stdout(&v);
        assert!(
            out.contains("write refused") && out.contains("read refused"),
            "{dep:?}: {v:#}"
        );
        assert!(
            !Path::new(h).join(".cargo/bin/planted").exists(),
            "{dep:?}: {v:#}"
        );

        // Without the opt-in none of it is there.
        let p = Project::new(dep, false);
        let v = p.run_shell_env("fake-cargo; echo \"[$CARGO_HOME]\"", &[("HOME", h)]);
        assert_eq!(stdout(&v), "[]\n", "{dep:?}: {v:#}");
    }
}
