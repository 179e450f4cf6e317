//! End-to-end tests of the `agent-exec` binary: what a user or an agent sees.
//! Every result printed is validated against docs/tool-result.schema.json.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_agent-exec");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn code_policy() -> PathBuf {
    repo().join("policies/code.toml")
}

fn validator() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let text = std::fs::read_to_string(repo().join("docs/tool-result.schema.json")).unwrap();
        let schema: Value = serde_json::from_str(&text).unwrap();
        jsonschema::validator_for(&schema).unwrap()
    })
}

/// A project root the sandboxed child (an unprivileged user when the tests
/// run as root) can write: world-traversable parents, owned by that user.
struct Root {
    dir: tempfile::TempDir,
}

impl Root {
    fn new() -> Root {
        let dir = tempfile::Builder::new()
            .prefix("agent-exec-cli-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Root { dir }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn write(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.path().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, content).unwrap();
        p
    }
    /// Hands the tree to the child's user (nobody when running as root).
    fn give_to_child(&self) {
        if unsafe_free_is_root() {
            let st = Command::new("chown")
                .arg("-R")
                .arg("65534:65534")
                .arg(self.path())
                .status()
                .unwrap();
            assert!(st.success());
        }
    }
}

fn unsafe_free_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .map(|l| l.split_whitespace().nth(1) == Some("0"))
        .unwrap()
}

fn run_with(root: &Path, args: &[&str], envs: &[(&str, &str)]) -> (Output, Value) {
    let mut cmd = Command::new(BIN);
    cmd.arg("--policy")
        .arg(code_policy())
        .arg("--root")
        .arg(root)
        .args(args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next().unwrap_or_else(|| {
        panic!(
            "no output; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(
        text.lines().count(),
        1,
        "exactly one JSON line on stdout: {text}"
    );
    let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    if let Err(e) = validator().validate(&v) {
        panic!("result does not match the schema: {e}\n{v:#}");
    }
    (out, v)
}

fn run(root: &Path, args: &[&str]) -> (Output, Value) {
    run_with(root, args, &[])
}

fn shell(root: &Path, s: &str) -> (Output, Value) {
    run(root, &["--shell", s])
}

fn marker() -> String {
    format!(
        "agent-exec-cli-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos() ^ rand_u64()
    )
}

fn rand_u64() -> u128 {
    let mut b = [0u8; 8];
    let f = std::fs::File::open("/dev/urandom").unwrap();
    std::io::Read::read_exact(&mut &f, &mut b).unwrap();
    u64::from_le_bytes(b) as u128
}

/// Pids whose command line contains `mark` (other than this test process).
fn procs_with(mark: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline"))
            && String::from_utf8_lossy(&cmd).contains(mark)
        {
            // A zombie has an empty cmdline, so anything found here is alive.
            found.push(pid);
        }
    }
    found
}

#[test]
fn allowed_argv_runs_and_returns_its_output() {
    let root = Root::new();
    root.write("hello.txt", "hello from the root\n");
    root.give_to_child();
    let (out, v) = run(root.path(), &["--", "cat", "hello.txt"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(v["ok"], true);
    assert_eq!(v["stdout"], "hello from the root\n");
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["policy_decision"], "allow");
    assert_eq!(v["stdout_bytes"], 20);
}

#[test]
fn allowed_shell_pipeline_runs() {
    let root = Root::new();
    root.write("a.txt", "one\ntwo\nthree\n");
    root.give_to_child();
    let (out, v) = shell(root.path(), "grep -n t a.txt | wc -l");
    assert_eq!(out.status.code(), Some(0), "{v:#}");
    assert_eq!(v["stdout"].as_str().unwrap().trim(), "2");
}

#[test]
fn the_child_writes_inside_the_root() {
    let root = Root::new();
    root.give_to_child();
    let (_, v) = shell(root.path(), "echo written > made.txt");
    assert_eq!(v["ok"], true, "{v:#}");
    assert_eq!(
        std::fs::read_to_string(root.path().join("made.txt")).unwrap(),
        "written\n"
    );
}

#[test]
fn reading_etc_passwd_is_refused_and_the_reason_names_the_argument() {
    let root = Root::new();
    root.give_to_child();
    std::fs::create_dir_all(root.path().join("sub/dir")).unwrap();
    for cmd in [
        "cat /etc/passwd",
        "cat ../../../../../../../etc/passwd",
        "cat /etc/pass*",
        "ln -s /etc x && cat x/passwd",
        "cat < /etc/passwd",
        "head -n 3 /etc/passwd",
        "grep root /etc/passwd",
    ] {
        let (out, v) = shell(root.path(), cmd);
        assert_eq!(out.status.code(), Some(126), "{cmd}: {v:#}");
        assert_eq!(v["error_type"], "PERMISSION_DENIED", "{cmd}");
        assert_eq!(v["policy_decision"], "deny", "{cmd}");
        let msg = v["message"].as_str().unwrap();
        assert!(
            msg.contains("/etc"),
            "{cmd}: the reason names the path: {msg}"
        );
        assert!(
            !v["stdout"].as_str().unwrap().contains("root:x:0:0"),
            "{cmd}"
        );
        // Nothing ran: the symlink of the `ln -s` case was not created.
        assert!(
            !root.path().join("x").exists(),
            "{cmd}: a refused request must not run in part"
        );
    }
}

#[test]
fn kernel_refuses_what_the_policy_cannot_see() {
    let root = Root::new();
    root.give_to_child();
    let (_, v) = shell(
        root.path(),
        r#"python3 -c "print(open('/etc/shadow').read())""#,
    );
    assert_eq!(
        v["policy_decision"], "allow",
        "python3 -c is allowed; only the kernel can stop it"
    );
    assert_eq!(v["ok"], false);
    assert_eq!(v["error_type"], "SANDBOX_VIOLATION", "{v:#}");
    assert!(!v["stdout"].as_str().unwrap().contains("root:"));
}

#[test]
fn check_prints_the_decision_and_runs_nothing() {
    let root = Root::new();
    root.give_to_child();
    let out = Command::new(BIN)
        .args(["check", "--policy"])
        .arg(code_policy())
        .arg("--root")
        .arg(root.path())
        .args(["--shell", "touch created-by-check"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["decision"].is_string(), "{v}");
    assert!(v["rule"].is_string());
    assert!(v["reason"].is_string());
    assert!(!root.path().join("created-by-check").exists());

    let out = Command::new(BIN)
        .args(["check", "--policy"])
        .arg(code_policy())
        .arg("--root")
        .arg(root.path())
        .args(["--shell", "cat /etc/shadow"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["decision"], "deny");
    assert_eq!(v["token"], "/etc/shadow");
}

/// A python script (allowed by the code policy) that leaves a grandchild in
/// its own session, then sleeps; both carry the marker in their argv.
const HOLDER: &str = "import os,sys,time\nif os.fork()==0:\n    os.setsid()\n    if os.fork()==0:\n        time.sleep(300)\n    os._exit(0)\ntime.sleep(300)\n";

#[test]
fn timeout_kills_the_command_and_every_descendant() {
    let root = Root::new();
    root.write("hold.py", HOLDER);
    root.give_to_child();
    let mark = marker();
    let started = Instant::now();
    let (out, v) = run(
        root.path(),
        &["--timeout-ms", "700", "--", "python3", "hold.py", &mark],
    );
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(124), "{v:#}");
    assert_eq!(v["error_type"], "COMMAND_TIMEOUT");
    // The message names how much longer a request may ask for, and how.
    let msg = v["message"].as_str().unwrap();
    assert!(
        msg.contains("allows up to") && msg.contains("--timeout-ms"),
        "{msg}"
    );
    assert!(
        took < Duration::from_secs(30),
        "returned long after the deadline: {took:?}"
    );
    let left = procs_with(&mark);
    assert!(left.is_empty(), "survivors after the timeout: {left:?}");
}

#[test]
fn a_setsid_double_forked_child_is_gone_after_the_result() {
    let root = Root::new();
    root.give_to_child();
    let mark = marker();
    // python3 is allowed by the code policy; it daemonizes a sleeper the way
    // real tools do (fork, setsid, fork again) and the parent returns at
    // once. The sleeper keeps the marker in its argv.
    let py = "import os,sys,time\nif os.fork()==0:\n    os.setsid()\n    if os.fork()==0:\n        time.sleep(300)\n    os._exit(0)\nos.wait()\nprint('parent done')\n";
    root.write("daemonize.py", py);
    root.give_to_child();
    let (_, v) = run(root.path(), &["--", "python3", "daemonize.py", &mark]);
    assert_eq!(v["ok"], true, "{v:#}");
    assert_eq!(v["stdout"], "parent done\n");
    let left = procs_with(&mark);
    assert!(
        left.is_empty(),
        "the daemonized grandchild survived the result: {left:?}"
    );
}

/// The code policy with its hard output limit lifted, so only truncation
/// applies.
fn no_hard_limit_policy(root: &Root) -> PathBuf {
    let text = std::fs::read_to_string(code_policy()).unwrap();
    let lifted: String = text
        .lines()
        .map(|l| {
            if l.starts_with("output_hard_limit_bytes") {
                "output_hard_limit_bytes = 0"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(
        lifted,
        text.trim_end(),
        "the code policy sets a hard limit this test lifts"
    );
    let dir = tempfile::tempdir().unwrap().keep();
    let _ = root;
    let p = dir.join("code-no-hard-limit.toml");
    std::fs::write(&p, lifted).unwrap();
    p
}

#[test]
fn a_hundred_megabytes_of_output_is_truncated_in_bounded_memory() {
    let root = Root::new();
    root.give_to_child();
    let policy = no_hard_limit_policy(&root);
    // Reaped below with wait4, which std's wait cannot stand in for: it
    // returns the supervisor's rusage.
    #[allow(clippy::zombie_processes)]
    let mut child = Command::new(BIN)
        .arg("--policy")
        .arg(&policy)
        .arg("--root")
        .arg(root.path())
        .args(["--shell", "head -c 100000000 /dev/zero | tr '\\0' a"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = Vec::new();
    std::io::Read::read_to_end(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    // This supervisor's own peak, with every process it waited for (its
    // command's tree): wait4 on its pid, not RUSAGE_CHILDREN, which would
    // also count the other tests' children in this process.
    let mut status = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: wait4 fills status and usage for this child of ours.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, usage.as_mut_ptr()) };
    assert_eq!(rc, pid);
    // SAFETY: initialized by the successful call above.
    let maxrss_kib = unsafe { usage.assume_init() }.ru_maxrss;
    let out = std::process::Output {
        status: std::os::unix::process::ExitStatusExt::from_raw(status),
        stdout,
        stderr: Vec::new(),
    };
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    validator().validate(&v).unwrap();
    assert_eq!(v["ok"], true, "{v:#}");
    assert_eq!(v["stdout_bytes"], 100_000_000u64);
    assert_eq!(v["stdout_truncated"], true);
    let text = v["stdout"].as_str().unwrap();
    assert!(
        text.len() < 20_000,
        "kept {} characters of 100 MB",
        text.len()
    );
    assert!(
        text.starts_with("aaaa") && text.ends_with("aaaa"),
        "head and tail are both kept"
    );
    assert!(
        maxrss_kib < 64 * 1024,
        "a supervisor or child peaked at {maxrss_kib} KiB"
    );
}

#[test]
fn the_hard_output_limit_stops_the_command() {
    let root = Root::new();
    root.give_to_child();
    let (out, v) = shell(root.path(), "cat /dev/zero");
    assert_eq!(v["error_type"], "OUTPUT_LIMIT", "{v:#}");
    assert_eq!(out.status.code(), Some(125));
    let bytes = v["stdout_bytes"].as_u64().unwrap();
    assert!(
        bytes >= 64 << 20,
        "stopped after crossing the limit: {bytes}"
    );
    assert!(
        bytes < 1 << 30,
        "stopped soon after crossing the limit: {bytes}"
    );
}

#[test]
fn secrets_in_the_supervisor_environment_never_reach_the_child() {
    let root = Root::new();
    root.give_to_child();
    let secret = format!("sk-canary-{}", rand_u64());
    let (_, v) = run_with(
        root.path(),
        &["--", "env"],
        &[
            ("OPENAI_API_KEY", &secret),
            ("MY_DB_PASSWORD", &secret),
            ("GITHUB_TOKEN", &secret),
            ("LANG", "C.UTF-8"),
        ],
    );
    // `env` is refused as a wrapper by the code policy: use a reader that
    // prints the environment instead when so.
    let v = if v["ok"] == true {
        v
    } else {
        run_with(
            root.path(),
            &[
                "--shell",
                "python3 -c 'import os; print(sorted(os.environ.items()))'",
            ],
            &[
                ("OPENAI_API_KEY", &secret),
                ("MY_DB_PASSWORD", &secret),
                ("GITHUB_TOKEN", &secret),
                ("LANG", "C.UTF-8"),
            ],
        )
        .1
    };
    assert_eq!(v["ok"], true, "{v:#}");
    let stdout = v["stdout"].as_str().unwrap();
    assert!(!stdout.contains(&secret), "a secret reached the child");
    assert!(
        stdout.contains("LANG"),
        "the keep-list still passes LANG: {stdout}"
    );
    let scrubbed: Vec<&str> = v["env_scrubbed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    for name in ["OPENAI_API_KEY", "MY_DB_PASSWORD", "GITHUB_TOKEN"] {
        assert!(
            scrubbed.contains(&name),
            "{name} listed as scrubbed: {scrubbed:?}"
        );
    }
    let whole = v.to_string();
    assert!(
        !whole.contains(&secret),
        "no secret value anywhere in the result"
    );
}

#[test]
fn a_malformed_or_missing_policy_refuses_to_start() {
    let root = Root::new();
    root.give_to_child();
    let bad = root.write("bad.toml", "[policy]\nname = \"x\"\nnot_a_key = 1\n");
    for policy in [bad.as_path(), Path::new("/nonexistent/policy.toml")] {
        let out = Command::new(BIN)
            .arg("--policy")
            .arg(policy)
            .arg("--root")
            .arg(root.path())
            .args(["--shell", "touch should-not-exist"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        validator().validate(&v).unwrap();
        assert_eq!(v["error_type"], "POLICY_ERROR");
        assert!(!root.path().join("should-not-exist").exists());
    }
    // No policy at all: no run.
    let out = Command::new(BIN)
        .arg("--root")
        .arg(root.path())
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
}

#[test]
fn exit_statuses_follow_coreutils() {
    let root = Root::new();
    root.give_to_child();
    let (out, v) = shell(root.path(), "python3 -c 'import sys; sys.exit(3)'");
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(v["error_type"], "NONZERO_EXIT");
    let (out, v) = run(root.path(), &["--", "no-such-program-xyz"]);
    assert!(matches!(out.status.code(), Some(126) | Some(127)), "{v:#}");
    let (out, v) = shell(root.path(), "sudo id");
    assert_eq!(out.status.code(), Some(126));
    assert_eq!(v["error_type"], "PERMISSION_DENIED");
    let out = Command::new(BIN).arg("--bogus-flag").output().unwrap();
    assert_eq!(out.status.code(), Some(125));
}

#[test]
fn an_unterminated_quote_is_a_parse_error_and_nothing_runs() {
    let root = Root::new();
    root.give_to_child();
    let (out, v) = shell(root.path(), "touch made 'oops");
    assert_eq!(v["error_type"], "PARSE_ERROR", "{v:#}");
    assert_eq!(out.status.code(), Some(125));
    assert!(!root.path().join("made").exists());
}

#[test]
fn cwd_outside_the_root_is_refused() {
    let root = Root::new();
    std::fs::create_dir(root.path().join("sub")).unwrap();
    root.give_to_child();
    let (_, v) = run(root.path(), &["--cwd", "sub", "--", "pwd"]);
    assert_eq!(v["ok"], true, "{v:#}");
    assert!(v["stdout"].as_str().unwrap().trim().ends_with("/sub"));
    let (out, v) = run(root.path(), &["--cwd", "../..", "--", "pwd"]);
    assert_eq!(out.status.code(), Some(126), "{v:#}");
    assert_eq!(v["error_type"], "PERMISSION_DENIED");
    std::os::unix::fs::symlink("/etc", root.path().join("etc-link")).unwrap();
    let (_, v) = run(root.path(), &["--cwd", "etc-link", "--", "ls"]);
    assert_eq!(
        v["error_type"], "PERMISSION_DENIED",
        "a symlinked cwd cannot lead out: {v:#}"
    );
}

#[test]
fn request_overrides_only_tighten() {
    let root = Root::new();
    root.give_to_child();
    let (out, v) = run(root.path(), &["--timeout-ms", "999999999", "--", "true"]);
    assert_eq!(v["error_type"], "INVALID_ARGUMENTS", "{v:#}");
    assert_eq!(out.status.code(), Some(125));
    let (_, v) = run(
        root.path(),
        &["--output-chars", "10", "--shell", "seq 1 1000"],
    );
    assert_eq!(v["stdout_truncated"], true);
    assert!(v["stdout"].as_str().unwrap().len() < 200);
}

#[test]
fn human_format_prints_the_output_and_a_summary() {
    let root = Root::new();
    root.write("f.txt", "plain text\n");
    root.give_to_child();
    let out = Command::new(BIN)
        .arg("--policy")
        .arg(code_policy())
        .arg("--root")
        .arg(root.path())
        .args(["--format", "human", "--", "cat", "f.txt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "plain text\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("agent-exec: ok"));
}

#[test]
fn policy_validate_checks_every_shipped_policy() {
    for p in ["code", "readonly", "ci"] {
        let out = Command::new(BIN)
            .args(["policy", "validate"])
            .arg(repo().join(format!("policies/{p}.toml")))
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{p}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("is valid"));
    }
}

#[test]
fn a_network_connection_is_blocked_by_the_kernel_and_reported_as_a_violation() {
    let root = Root::new();
    root.give_to_child();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let py = format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port})).sendall(b'leak')\""
    );
    let (_, v) = shell(root.path(), &py);
    assert_eq!(
        v["policy_decision"], "allow",
        "only the kernel can stop python: {v:#}"
    );
    assert_eq!(v["error_type"], "NETWORK_DISABLED", "{v:#}");
    assert!(v["message"].as_str().unwrap().contains("network"), "{v:#}");
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the listener got a connection: {other:?}"),
    }
}

#[test]
fn the_cli_child_has_no_capability_in_any_set() {
    // The CLI empties its own thread's bounding set before spawning, so the
    // child takes the path that skips dropping it: the child's sets must
    // be empty all the same, and its uid not root.
    let root = Root::new();
    root.give_to_child();
    let (_, v) = shell(
        root.path(),
        r#"python3 -c "import os; print(open('/proc/self/status').read()); print('uid', os.getuid())""#,
    );
    assert_eq!(v["ok"], true, "{v:#}");
    let out = v["stdout"].as_str().unwrap();
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        let line = out
            .lines()
            .find(|l| l.starts_with(set))
            .unwrap_or_else(|| panic!("{set} missing: {out}"));
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
    assert!(!out.contains("uid 0\n"), "{out}");
}
