//! The shell drop-in as programs that spawn `$SHELL -c` use it: Python's
//! `subprocess` with `shell=True` and `executable`, and `make SHELL=...`,
//! through a link named `agent-exec-sh`. Outputs and statuses are the
//! command's own; a refused command is one line on stderr, status 126, and
//! did not run (its side effect is absent).

#[path = "../crates/sandbox/tests/common/kernel.rs"]
mod kernel;
use kernel::require_kernel_feature;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

struct Setup {
    /// The project root, writable by the sandboxed child (`nobody` under
    /// a root supervisor).
    root: tempfile::TempDir,
    /// Holds the `agent-exec-sh` link.
    bin: tempfile::TempDir,
    /// An empty XDG config home, so no config file of the host applies.
    config: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let root = tempfile::tempdir().unwrap();
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let hello = root.path().join("hello.txt");
        std::fs::write(&hello, "hello\n").unwrap();
        std::fs::set_permissions(&hello, std::fs::Permissions::from_mode(0o644)).unwrap();
        let bin = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(
            env!("CARGO_BIN_EXE_agent-exec"),
            bin.path().join("agent-exec-sh"),
        )
        .unwrap();
        Setup {
            root,
            bin,
            config: tempfile::tempdir().unwrap(),
        }
    }

    fn shell(&self) -> PathBuf {
        self.bin.path().join("agent-exec-sh")
    }

    fn policy() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/code.toml")
    }

    /// A command in the root with the drop-in's environment: the policy
    /// from `AGENT_EXEC_POLICY`, the root defaulting to the directory.
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.current_dir(self.root.path())
            .env("AGENT_EXEC_POLICY", Self::policy())
            .env_remove("AGENT_EXEC_ROOT")
            .env("XDG_CONFIG_HOME", self.config.path())
            .stdin(Stdio::null());
        c
    }

    fn exists(&self, name: &str) -> bool {
        self.root.path().join(name).exists()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `subprocess.run(cmd, shell=True, executable=SHELL)` and prints
/// the status, stdout and stderr as JSON.
const PY: &str = r#"
import json, subprocess, sys
r = subprocess.run(sys.argv[2], shell=True, executable=sys.argv[1], capture_output=True, text=True)
print(json.dumps({"status": r.returncode, "stdout": r.stdout, "stderr": r.stderr}))
"#;

fn python_run(s: &Setup, cmd: &str) -> serde_json::Value {
    let out = s
        .command("python3")
        .args(["-c", PY])
        .arg(s.shell())
        .arg(cmd)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn python_subprocess_with_shell_true_gets_the_commands_own_output_and_status() {
    if !require_kernel_feature("python3", have("python3")) {
        return;
    }
    let s = Setup::new();
    let r = python_run(&s, "cat hello.txt; echo to-stderr >&2; exit 3");
    assert_eq!(r["status"], 3, "{r}");
    assert_eq!(r["stdout"], "hello\n", "{r}");
    assert_eq!(r["stderr"], "to-stderr\n", "{r}");

    let r = python_run(&s, "touch made-by-allowed");
    assert_eq!(r["status"], 0, "{r}");
    assert!(s.exists("made-by-allowed"));

    // Denied as a whole: the harmless first half does not run either.
    let r = python_run(&s, "touch made-by-refused && curl http://example.com");
    assert_eq!(r["status"], 126, "{r}");
    assert_eq!(r["stdout"], "", "{r}");
    let err = r["stderr"].as_str().unwrap();
    assert!(err.starts_with("agent-exec: refused"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!s.exists("made-by-refused"));
}

#[test]
fn make_with_the_drop_in_as_shell_runs_recipes_and_stops_at_a_refusal() {
    if !require_kernel_feature("make", have("make")) {
        return;
    }
    let s = Setup::new();
    std::fs::write(
        s.root.path().join("Makefile"),
        "all:\n\t@echo built > out.txt\n\t@cat out.txt\n\n\
         refused:\n\t@touch made-by-refused && curl http://example.com\n\t@touch after-refused\n",
    )
    .unwrap();
    let shell = format!("SHELL={}", s.shell().display());
    let out: Output = s.command("make").arg(&shell).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "built\n");
    assert!(s.exists("out.txt"));

    let out = s
        .command("make")
        .arg(&shell)
        .arg("refused")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("agent-exec: refused"), "{err}");
    assert!(err.contains("126"), "make names the status: {err}");
    assert!(!s.exists("made-by-refused"));
    assert!(!s.exists("after-refused"), "make stops at the refusal");
}

#[test]
fn without_a_policy_nothing_runs() {
    let s = Setup::new();
    let out = s
        .command(s.shell())
        .env_remove("AGENT_EXEC_POLICY")
        .args(["-c", "touch made-without-policy"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let err = text(&out.stderr);
    assert!(err.starts_with("agent-exec: no policy"), "{err}");
    assert!(!s.exists("made-without-policy"));
}

#[test]
fn the_policy_and_root_can_come_from_the_config_file() {
    let s = Setup::new();
    let conf = s.config.path().join("agent-exec");
    std::fs::create_dir(&conf).unwrap();
    std::fs::write(
        conf.join("config.toml"),
        format!(
            "policy = {:?}\nroot = {:?}\n",
            Setup::policy().display().to_string(),
            s.root.path().display().to_string()
        ),
    )
    .unwrap();
    let sub = s.root.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o777)).unwrap();
    // From a directory below the root, through `agent-exec sh`.
    let out = s
        .command(env!("CARGO_BIN_EXE_agent-exec"))
        .current_dir(&sub)
        .env_remove("AGENT_EXEC_POLICY")
        .args(["sh", "-c", "cat ../hello.txt && touch here"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hello\n");
    assert!(
        sub.join("here").exists(),
        "the command ran in the caller's directory"
    );
}

#[test]
fn a_policy_inside_the_root_is_refused_since_commands_could_rewrite_it() {
    let s = Setup::new();
    let inside = s.root.path().join("policy.toml");
    std::fs::copy(Setup::policy(), &inside).unwrap();
    let out = s
        .command(s.shell())
        .env("AGENT_EXEC_POLICY", &inside)
        .args(["-c", "touch made-with-own-policy"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let err = text(&out.stderr);
    assert!(err.contains("inside the root"), "{err}");
    assert!(!s.exists("made-with-own-policy"));
}
