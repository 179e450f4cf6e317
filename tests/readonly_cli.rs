//! The read-only promise, end to end through the CLI, judged by effect:
//! each way the shipped policies' read-only programs used to run programs
//! or write files (sed e/w commands, sort --compress-program, tree -o,
//! xxd -r, awk redirection behind a `}`, a glob expanding to `--pre=sh`)
//! leaves the root exactly as it was and runs nothing; the honest
//! commands still work; and a write the policy could not see in a command
//! it classes read-only is refused by the kernel.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_agent-exec");
const POLICIES: [&str; 3] = ["readonly", "ci", "code"];

fn policy(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("policies/{name}.toml"))
}

/// A project root handed to the child's user (nobody when the tests run
/// as root), so its mode bits let the child write: only the sandbox and
/// the policy can be what stops it.
struct Root {
    dir: tempfile::TempDir,
}

impl Root {
    fn new(files: &[(&str, &str)]) -> Root {
        let dir = tempfile::Builder::new()
            .prefix("agent-exec-ro-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        for (rel, content) in files {
            std::fs::write(dir.path().join(rel), content).unwrap();
        }
        let st = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(st.success());
        Root { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Every entry under the root with its content (files), target
    /// (symlinks) and mode: equal snapshots mean nothing changed.
    fn snapshot(&self) -> Vec<(String, u32, Vec<u8>)> {
        fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, u32, Vec<u8>)>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                let meta = std::fs::symlink_metadata(&p).unwrap();
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
                let body = if meta.file_type().is_symlink() {
                    std::fs::read_link(&p)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes()
                } else if meta.is_file() {
                    std::fs::read(&p).unwrap()
                } else {
                    Vec::new()
                };
                out.push((rel, meta.permissions().mode(), body));
                if meta.is_dir() {
                    walk(base, &p, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(self.path(), self.path(), &mut out);
        out.sort();
        out
    }
}

/// Runs `command` under `policy` in `root` and returns the ToolResult.
fn run(policy_name: &str, root: &Path, command: &str) -> Value {
    let out = Command::new(BIN)
        .arg("--policy")
        .arg(policy(policy_name))
        .arg("--root")
        .arg(root)
        .args(["--shell", command])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "not one JSON result ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Runs an attack under every shipped policy and checks it changed
/// nothing and ran nothing: the root is as it was, no `marker` appeared,
/// and `ran` (what the payload prints when it runs) is in no output.
fn refused_without_effect(files: &[(&str, &str)], command: &str, marker: &str, ran: &str) {
    for name in POLICIES {
        let root = Root::new(files);
        let before = root.snapshot();
        let v = run(name, root.path(), command);
        let shown = format!("{name}: {command}: {v:#}");
        assert_ne!(v["ok"], true, "{shown}");
        assert!(!root.path().join(marker).exists(), "{shown}");
        assert_eq!(root.snapshot(), before, "the root changed: {shown}");
        for stream in ["stdout", "stderr", "message"] {
            let text = v[stream].as_str().unwrap_or_default();
            assert!(!text.contains(ran), "the payload ran ({stream}): {shown}");
        }
    }
}

/// What the policy refused with, as (rule, token).
fn refusal(v: &Value) -> (String, String) {
    assert_eq!(v["error_type"], "PERMISSION_DENIED", "{v:#}");
    (
        v["matched_rule"].as_str().unwrap_or_default().to_string(),
        v["decided_by"].as_str().unwrap_or_default().to_string(),
    )
}

const DATA: (&str, &str) = ("f", "one x\ntwo\nthree a\n");

#[test]
fn sed_commands_that_run_or_write_do_nothing_whatever_their_form() {
    // `e` runs its argument, `w` writes: in forms the policies' regexes
    // list, and in forms they missed (step and regex addresses, other
    // delimiters, flags), sed refuses them in its sandbox mode.
    for command in [
        "sed -n '1e id' f",
        "sed -n '1~2e id' f",
        "sed '1,+2e id' f",
        "sed '/o/I e id' f",
        "sed '\\,o,e id' f",
        "sed 1ee f",
    ] {
        refused_without_effect(&[DATA], command, "out", "uid=");
    }
    for command in [
        "sed 's/x/y/w out' f",
        "sed 's!x!y!w out' f",
        "sed '/a/w out' f",
        "sed -n '/a/Iw out' f",
        "sed -e '$!N' -e 'w out' f",
        "sed 's/a/b/;wout' f",
    ] {
        refused_without_effect(&[DATA], command, "out", "three");
    }
}

#[test]
fn sed_runs_in_its_sandbox_mode_and_says_so() {
    let root = Root::new(&[DATA]);
    let v = run("readonly", root.path(), "sed -n '1~2e id' f");
    assert_eq!(v["error_type"], "NONZERO_EXIT", "{v:#}");
    assert!(
        v["stderr"]
            .as_str()
            .unwrap()
            .contains("disabled in sandbox mode"),
        "{v:#}"
    );
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("ran as `sed --sandbox -n '1~2e id' f`"),
        "{v:#}"
    );
}

#[test]
fn sort_with_a_compress_program_is_refused_and_runs_nothing() {
    // Spilled temporaries would be piped through `sh`, which runs them.
    let lines: String = (0..3000)
        .map(|i| format!("echo SORT-PAYLOAD-$((6*7)) {i} >&2 #\n"))
        .collect();
    let files = [("data", lines.as_str())];
    for command in [
        "sort -S 1K --compress-program=sh data",
        "sort -S 1K --compress=sh data",
    ] {
        refused_without_effect(&files, command, "out", "SORT-PAYLOAD-42");
    }
    let root = Root::new(&files);
    let v = run("readonly", root.path(), "sort -S 1K --compress=sh data");
    assert_eq!(
        refusal(&v),
        ("builtin:read-only-tool".into(), "--compress=sh".into())
    );
    // code.toml allows `sort -o` as a write (its own rule); the
    // read-only rules of the others do not.
    for name in ["readonly", "ci"] {
        for command in ["sort -o out data", "sort -T . data"] {
            let root = Root::new(&files);
            let before = root.snapshot();
            let v = run(name, root.path(), command);
            assert_eq!(
                v["error_type"], "PERMISSION_DENIED",
                "{name}: {command}: {v:#}"
            );
            assert_eq!(root.snapshot(), before);
        }
    }
}

#[test]
fn tree_and_xxd_do_not_write_files() {
    let hex = (
        "patch.hex",
        "00000000: 5057 4e45 44                             PWNED\n",
    );
    let files = [DATA, hex];
    refused_without_effect(&files, "tree -o out", "out", "PWNED");
    refused_without_effect(&files, "tree -R -L 1 -H . .", "00Tree.html", "PWNED");
    refused_without_effect(&files, "xxd -r patch.hex f", "out", "PWNED");
    refused_without_effect(&files, "xxd -revert patch.hex f", "out", "PWNED");
    refused_without_effect(&files, "xxd f out", "out", "PWNED");
    for (command, token) in [("tree -o out", "-o"), ("xxd -r patch.hex", "-r")] {
        let root = Root::new(&files);
        let v = run("code", root.path(), command);
        assert_eq!(
            refusal(&v),
            ("builtin:read-only-tool".into(), token.into()),
            "{command}"
        );
    }
}

#[test]
fn awk_redirection_behind_a_brace_in_a_string_is_refused() {
    for command in [
        "awk '{ print \"}\" > \"f2\" }' f",
        "awk '{ print \";\" >> \"f2\" }' f",
        "awk '{ printf(\"%s\", $0) > \"f2\" }' f",
    ] {
        refused_without_effect(&[DATA], command, "f2", "PWNED");
    }
    // The policies' regex missed these; the awk reader does not.
    for command in [
        "awk '{ print \"}\" > \"f2\" }' f",
        "awk '{ print \";\" >> \"f2\" }' f",
    ] {
        for name in POLICIES {
            let root = Root::new(&[DATA]);
            let v = run(name, root.path(), command);
            assert_eq!(refusal(&v).0, "builtin:read-only-tool", "{name}: {command}");
        }
    }
}

#[test]
fn a_glob_that_expands_to_an_option_is_refused() {
    // A file named `--pre=sh` in the root: `rg TODO *` would hand it to rg
    // as an option and run `sh` on every file, `payload` among them.
    let files = [
        ("--pre=sh", ""),
        ("a.txt", "TODO in a\n"),
        // Its text does not say what it prints when it runs.
        ("payload", "echo TODO RG-PAYLOAD-$((6*7))\n"),
    ];
    for command in [
        "rg TODO *",
        "rg TODO *.txt *",
        "X=--pre=sh; rg TODO $X a.txt",
    ] {
        refused_without_effect(&files, command, "out", "RG-PAYLOAD-42");
        let root = Root::new(&files);
        let v = run("readonly", root.path(), command);
        assert_eq!(refusal(&v).0, "builtin:read-only-tool", "{command}");
    }
    // With `--` before the operands (or `./*`) every name is a file.
    for command in ["rg TODO -- *", "rg TODO ./*"] {
        let root = Root::new(&files);
        let before = root.snapshot();
        let v = run("readonly", root.path(), command);
        assert_eq!(v["policy_decision"], "allow", "{command}: {v:#}");
        let text = format!("{}{}", v["stdout"], v["stderr"]);
        assert!(!text.contains("RG-PAYLOAD-42"), "{command}: {v:#}");
        if v["error_type"] != "COMMAND_NOT_FOUND" {
            assert!(text.contains("TODO in a"), "{command}: {v:#}");
        }
        assert_eq!(root.snapshot(), before);
    }
}

#[test]
fn honest_read_only_commands_still_work() {
    let files = [("f", "b TODO 2\na 1\n")];
    for name in POLICIES {
        let root = Root::new(&files);
        for (command, stdout) in [
            ("sed -n 1p f", "b TODO 2\n"),
            ("sort f", "a 1\nb TODO 2\n"),
            ("awk '{print $1}' f", "b\na\n"),
            ("awk '$3 > 1 { print $1 }' f", "b\n"),
            ("sed -n 2p f | sort", "a 1\n"),
        ] {
            let v = run(name, root.path(), command);
            assert_eq!(v["ok"], true, "{name}: {command}: {v:#}");
            assert_eq!(v["stdout"], stdout, "{name}: {command}");
            let limits = v["sandbox"]["limits"].as_array().unwrap();
            assert!(
                limits.contains(&Value::from("landlock_root=read_only")),
                "{name}: {command}: {v:#}"
            );
        }
        // rg is not on every machine; where it is missing, the policy
        // still let it run (and the run found no program).
        let v = run(name, root.path(), "rg TODO");
        assert_eq!(v["policy_decision"], "allow", "{name}: {v:#}");
        if v["error_type"] != "COMMAND_NOT_FOUND" {
            assert_eq!(v["ok"], true, "{name}: {v:#}");
            assert!(v["stdout"].as_str().unwrap().contains("b TODO 2"));
        }
    }
}

#[test]
fn a_write_the_policy_cannot_see_in_a_read_only_command_fails_in_the_kernel() {
    // code.toml classes `git reflog ...` read-only (git-read); `reflog
    // expire` rewrites the reflog. The child owns the repository, so only
    // the read-only ruleset can refuse it.
    let root = Root::new(&[("f", "x\n")]);
    let git = |args: &[&str]| {
        let st = Command::new("git")
            .args(["-c", "safe.directory=*", "-c", "user.email=t@e"])
            .args(["-c", "user.name=t"])
            .args(args)
            .current_dir(root.path())
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
    };
    git(&["init", "-q"]);
    git(&["add", "f"]);
    git(&["commit", "-q", "-m", "one"]);
    let st = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(root.path())
        .status()
        .unwrap();
    assert!(st.success());
    let before = root.snapshot();

    let v = run("code", root.path(), "git reflog expire --expire=now --all");
    assert_eq!(v["policy_decision"], "allow", "{v:#}");
    assert_eq!(v["matched_rule"], "git-read", "{v:#}");
    assert_eq!(v["error_type"], "SANDBOX_VIOLATION", "{v:#}");
    assert!(
        v["stderr"].as_str().unwrap().contains("Permission denied"),
        "{v:#}"
    );
    let limits = v["sandbox"]["limits"].as_array().unwrap();
    assert!(limits.contains(&Value::from("landlock_root=read_only")));
    assert_eq!(root.snapshot(), before, "the reflog changed");

    // The same user in a run the policy does not class read-only writes.
    let v = run("code", root.path(), "touch made.txt");
    assert_eq!(v["ok"], true, "{v:#}");
    assert!(root.path().join("made.txt").exists());
    let limits = v["sandbox"]["limits"].as_array().unwrap();
    assert!(limits.contains(&Value::from("landlock_root=read_write")));
}
