//! A read-only run (`RootAccess::ReadOnly`) may write nothing but its own
//! HOME/TMPDIR and `/dev/null`: the root the child user owns, and a
//! `write` path, refuse every change with EACCES, while a read-write run
//! of the same prepared sandbox still writes them. The summary names the
//! ruleset the run got.

mod common;

use std::sync::Arc;

use agent_exec_sandbox::RootAccess;
use common::*;

/// Tries every kind of change under `dir`; prints one `name:errno` line
/// per attempt (0 when it worked).
const TRY_WRITES: &str = r#"
import errno, os, sys
d = sys.argv[1]
def attempt(name, f):
    try:
        f()
        print(f"{name}:0")
    except OSError as e:
        print(f"{name}:{errno.errorcode[e.errno]}")
attempt("create", lambda: open(os.path.join(d, "new.txt"), "w").close())
attempt("append", lambda: open(os.path.join(d, "existing.txt"), "a").close())
attempt("truncate", lambda: os.truncate(os.path.join(d, "existing.txt"), 0))
attempt("unlink", lambda: os.unlink(os.path.join(d, "existing.txt")))
attempt("mkdir", lambda: os.mkdir(os.path.join(d, "sub")))
attempt("rename", lambda: os.rename(os.path.join(d, "existing.txt"), os.path.join(d, "moved.txt")))
attempt("symlink", lambda: os.symlink("/etc", os.path.join(d, "link")))
"#;

fn attempts(sb: &agent_exec_sandbox::Sandbox, access: RootAccess, dir: &std::path::Path) -> String {
    let run = Arc::new(sb.for_run_with(access).unwrap());
    let root = dir.to_str().unwrap();
    let out = run_in(run, dir, &[PYTHON, "-c", TRY_WRITES, root]);
    assert_eq!(out.code, Some(0), "{out:?}");
    out.stdout
}

#[test]
fn a_read_only_run_cannot_change_the_root_and_a_read_write_run_can() {
    let root = root();
    let existing = root.path.join("existing.txt");
    std::fs::write(&existing, "keep").unwrap();
    std::os::unix::fs::chown(&existing, Some(NOBODY), Some(NOBODY)).unwrap();
    let sb = sandbox(&root.path);

    let ro = attempts(&sb, RootAccess::ReadOnly, &root.path);
    for name in [
        "create", "append", "truncate", "unlink", "mkdir", "rename", "symlink",
    ] {
        assert!(ro.contains(&format!("{name}:EACCES")), "{name}: {ro}");
    }
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep");
    let names: Vec<_> = std::fs::read_dir(&root.path)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["existing.txt"]);

    // The same prepared sandbox, read-write: every change goes through.
    let rw = attempts(&sb, RootAccess::ReadWrite, &root.path);
    for name in ["create", "append", "truncate", "mkdir"] {
        assert!(rw.contains(&format!("{name}:0")), "{name}: {rw}");
    }
}

#[test]
fn a_read_only_run_still_reads_the_root_and_writes_its_home_and_dev_null() {
    let root = root();
    std::fs::write(root.path.join("data.txt"), "b\na\n").unwrap();
    let sb = sandbox(&root.path);
    let run = Arc::new(sb.for_run_with(RootAccess::ReadOnly).unwrap());
    let out = run_in(
        run,
        &root.path,
        &[
            "/bin/sh",
            "-c",
            "sort data.txt && echo x > \"$HOME/scratch\" && cat \"$HOME/scratch\" && echo y > /dev/null && echo done",
        ],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "a\nb\nx\ndone\n");
}

#[test]
fn a_write_path_is_read_only_too() {
    let root = root();
    let extra = outside();
    let mut cfg = config();
    cfg.write = vec![extra.path().to_string_lossy().into_owned()];
    let sb = sandbox_with(&root.path, cfg);
    let ro = attempts(&sb, RootAccess::ReadOnly, extra.path());
    assert!(ro.contains("create:EACCES"), "{ro}");
    assert!(!extra.path().join("new.txt").exists());
    let rw = attempts(&sb, RootAccess::ReadWrite, extra.path());
    assert!(rw.contains("create:0"), "{rw}");
}

#[test]
fn the_summary_names_the_ruleset_the_run_got() {
    let root = root();
    let sb = sandbox(&root.path);
    let entry = |access| {
        let run = sb.for_run_with(access).unwrap();
        assert_eq!(run.root_access(), access);
        run.summary()
            .limits
            .into_iter()
            .filter(|l| l.starts_with("landlock_root="))
            .collect::<Vec<_>>()
    };
    assert_eq!(entry(RootAccess::ReadOnly), ["landlock_root=read_only"]);
    assert_eq!(entry(RootAccess::ReadWrite), ["landlock_root=read_write"]);
    // `for_run` is the read-write run it always was.
    let plain = sb.for_run().unwrap();
    assert_eq!(plain.root_access(), RootAccess::ReadWrite);
}
