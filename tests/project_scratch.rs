//! Scratch space through the real CLI, in every deployment: `mktemp` and
//! `$TMPDIR` work for every run, and where the run has its own mount
//! namespace `/tmp` is its own, writable and empty of the host's files.

mod contain_common;

use contain_common::*;

/// A root outside `/tmp` (the sandbox leaves a scratch directory with the
/// root beneath it the host's), in `/var/tmp`, which every user can
/// reach whatever the checkout's own directories allow.
fn project(dep: Deployment) -> Project {
    let parent = std::path::Path::new("/var/tmp");
    Project::with_tables_in(dep, false, "", "", Some(parent))
}

#[test]
fn mktemp_and_tmpdir_work_in_every_deployment() {
    for dep in Deployment::all() {
        let p = project(dep);
        let v = p.run_shell("mktemp && mktemp -d");
        assert_eq!(v["ok"], true, "{dep:?}: {v:#}");
        let made: Vec<&str> = stdout(&v).lines().collect();
        assert_eq!(made.len(), 2, "{dep:?}: {v:#}");
        // Both in the run's TMPDIR, which the child may write.
        let script = "import os, tempfile\n\
                      fd, f = tempfile.mkstemp()\n\
                      os.write(fd, b'scratch')\n\
                      os.close(fd)\n\
                      print(open(f).read(), f.startswith(os.environ['TMPDIR']))\n";
        let v = p.run(&[PYTHON, "-c", script]);
        assert_eq!(v["ok"], true, "{dep:?}: {v:#}");
        assert_eq!(stdout(&v), "scratch True\n", "{dep:?}");
    }
}

#[test]
fn tmp_is_the_runs_own_where_it_has_a_mount_namespace() {
    let host_file = tempfile::Builder::new()
        .prefix("ae-host-scratch-")
        .tempfile_in("/tmp")
        .unwrap();
    let host_name = host_file
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    for dep in Deployment::all() {
        let p = project(dep);
        let v = p.run_shell(
            "cat > /tmp/repro.py <<'EOF'\nprint('repro')\nEOF\npython3 /tmp/repro.py && ls -a /tmp",
        );
        let namespaced = v["sandbox"]["limits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l == "mount_namespace");
        if !namespaced {
            // Without a namespace the host's /tmp is not the run's to
            // write: the kernel refuses, and TMPDIR is the scratch space.
            assert_eq!(dep, Deployment::User, "{v:#}");
            assert_ne!(v["ok"], true, "{dep:?}: {v:#}");
            continue;
        }
        assert_eq!(v["ok"], true, "{dep:?}: {v:#}");
        let out = stdout(&v);
        assert!(out.starts_with("repro\n"), "{dep:?}: {out}");
        assert!(
            !out.contains(&host_name),
            "{dep:?}: the host's /tmp shows: {out}"
        );
        // Gone with the run: the next one starts from an empty /tmp,
        // but for the way to its own directory when the supervisor keeps
        // its run directories there (an ordinary user without a home).
        let v = p.run_shell("ls -A /tmp");
        assert_eq!(v["ok"], true, "{dep:?}: {v:#}");
        for entry in stdout(&v).lines() {
            assert!(
                entry.starts_with("agent-exec-") && dep == Deployment::User,
                "{dep:?}: {entry} left in /tmp: {v:#}"
            );
        }
    }
}
