//! Per-run directories live under a base only the supervisor's user (or
//! root) could have made: another user who creates the old predictable
//! path in the shared temp directory first (`agent-exec-<uid>`, as a
//! directory of their own or a symlink to one) neither blocks nor
//! redirects a run. Through the real CLI, with a private sticky directory
//! standing in for /tmp (`TMPDIR`), so the machine's /tmp is left alone.

mod strict_common;

use std::path::{Path, PathBuf};

use strict_common::*;

/// The program prints its HOME and writes a file there.
const PRINT_HOME: &str =
    "import os; h = os.environ['HOME']; open(h + '/f', 'w').write('x'); print(h)";

fn home_of(case: &Case) -> PathBuf {
    let v = case.run(&["--", PYTHON, "-c", PRINT_HOME]);
    assert_eq!(v["ok"], true, "{v:#}");
    PathBuf::from(stdout(&v).trim())
}

fn is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).unwrap().next().is_none()
}

/// A stand-in for /tmp: world-writable and sticky, owned by root.
fn shared_tmp() -> tempfile::TempDir {
    dir("ae-strict-tmp-", 0o1777, 0)
}

#[test]
fn a_squatted_base_in_the_temp_dir_neither_blocks_nor_redirects_a_root_supervisor() {
    assert!(is_root(), "the CLI tests run as root");
    let tmp = shared_tmp();
    // Another user made the old base first, open to everyone.
    let squat = tmp.path().join("agent-exec-0");
    std::fs::create_dir(&squat).unwrap();
    std::fs::set_permissions(&squat, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    std::os::unix::fs::chown(&squat, Some(NOBODY), Some(NOBODY)).unwrap();
    let case = Case::new("", None).env("TMPDIR", tmp.path());
    let home = home_of(&case);
    assert!(!home.starts_with(tmp.path()), "{}", home.display());
    assert!(is_empty(&squat));

    // ...or a symlink to a directory of theirs.
    std::fs::remove_dir(&squat).unwrap();
    let theirs = dir("ae-strict-theirs-", 0o777, NOBODY);
    std::os::unix::fs::symlink(theirs.path(), &squat).unwrap();
    std::os::unix::fs::lchown(&squat, Some(NOBODY), Some(NOBODY)).unwrap();
    let home = home_of(&case);
    assert!(!home.starts_with(tmp.path()), "{}", home.display());
    assert!(!home.starts_with(theirs.path()), "{}", home.display());
    assert!(is_empty(theirs.path()));
}

#[test]
fn an_ordinary_supervisor_uses_its_runtime_dir_or_home_never_a_squatted_path() {
    assert!(
        is_root(),
        "the CLI tests run as root (to act as another user)"
    );
    let tmp = shared_tmp();
    let squat = tmp.path().join(format!("agent-exec-{ORDINARY}"));
    std::fs::create_dir(&squat).unwrap();
    std::fs::set_permissions(&squat, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let home = dir("ae-strict-home-", 0o755, ORDINARY);
    // A runtime dir that is not the user's: never used.
    let foreign_xdg = dir("ae-strict-xdg-", 0o777, NOBODY);
    // No cgroup can be made by an ordinary user here.
    let policy = "[sandbox.require]\ncgroup = \"best_effort\"\n";
    let base = |case: Case| case.env("TMPDIR", tmp.path());

    let case = base(Case::new(policy, Some(ORDINARY)))
        .env("HOME", home.path())
        .env("XDG_RUNTIME_DIR", foreign_xdg.path());
    let run_home = home_of(&case);
    assert!(
        run_home.starts_with(home.path().join(".cache/agent-exec")),
        "{}",
        run_home.display()
    );
    assert!(is_empty(&squat) && is_empty(foreign_xdg.path()));

    // The user's own runtime dir (0700) comes first.
    let xdg = dir("ae-strict-xdg-", 0o700, ORDINARY);
    let case = base(Case::new(policy, Some(ORDINARY)))
        .env("HOME", home.path())
        .env("XDG_RUNTIME_DIR", xdg.path());
    let run_home = home_of(&case);
    assert!(
        run_home.starts_with(xdg.path().join("agent-exec")),
        "{}",
        run_home.display()
    );

    // No home and no runtime dir (a user without a passwd entry): a base
    // with a fresh random name in the temp dir, for this process alone.
    // The case only means something if the uid really has no entry.
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    assert!(
        !passwd
            .lines()
            .any(|l| l.split(':').nth(2) == Some(ORDINARY.to_string().as_str())),
        "uid {ORDINARY} must have no passwd entry for this test; pick another uid for that user"
    );
    let case = base(Case::new(policy, Some(ORDINARY)));
    let run_home = home_of(&case);
    let prefix = format!("agent-exec-{ORDINARY}-");
    let base_dir = run_home.parent().unwrap();
    assert_eq!(
        base_dir.parent(),
        Some(tmp.path()),
        "{}",
        run_home.display()
    );
    assert!(
        base_dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&prefix),
        "{}",
        run_home.display()
    );
    assert!(is_empty(&squat));
}
