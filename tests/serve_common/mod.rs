//! Shared fixtures for the daemon tests: a real `agent-exec serve` on a
//! temporary socket, a line-based client, and process-table probes.
#![allow(dead_code)]

/// The one rule for a test that needs a kernel feature, a privilege or a
/// tool the host may lack: a failure under `CI`, a loud skip elsewhere.
#[path = "../../crates/sandbox/tests/common/kernel.rs"]
mod kernel;
#[allow(unused_imports)]
pub use kernel::require_kernel_feature;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Generous bound for things that should happen promptly; tests never
/// assert on durations, they only refuse to hang forever.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A policy for the tests: a few read-only programs, one mutating program
/// (`touch`), output redirection inside the root, `rm` behind approval,
/// everything else denied.
pub fn policy(extra: &str) -> String {
    format!(
        r#"
name = "serve-test"
default = "deny"

{extra}

[[rule]]
id = "echo"
action = "allow"
risk = "low"
reason = "prints its arguments"
program = "echo"
read_only = true

[[rule]]
id = "sleep"
action = "allow"
risk = "low"
reason = "waits"
program = "sleep"
read_only = true

[[rule]]
id = "touch"
action = "allow"
risk = "low"
reason = "creates files in the project"
program = "touch"
writes = "operands"

[[rule]]
id = "rm"
action = "require_approval"
risk = "high"
reason = "deletes files"
program = "rm"
"#
    )
}

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub run_dir: PathBuf,
    pub socket: PathBuf,
    pub state: PathBuf,
    pub policy: PathBuf,
}

impl Fixture {
    pub fn new(policy_text: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        // As root the sandbox runs commands as the root directory's owner or
        // `nobody`; give the project to `nobody` so writes inside it work.
        if nix::unistd::geteuid().is_root() {
            nix::unistd::chown(&root, Some(65534.into()), Some(65534.into())).unwrap();
        }
        let run_dir = dir.path().join("run");
        std::fs::create_dir(&run_dir).unwrap();
        std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        // The temp dir itself must be traversable for the `nobody` child.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let policy = dir.path().join("policy.toml");
        std::fs::write(&policy, policy_text).unwrap();
        Fixture {
            socket: run_dir.join("agent-exec.sock"),
            state: run_dir.join("state"),
            root,
            run_dir,
            policy,
            dir,
        }
    }

    pub fn command(&self, extra: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agent-exec"));
        cmd.arg("serve")
            .arg("--policy")
            .arg(&self.policy)
            .arg("--root")
            .arg(&self.root)
            .arg("--socket")
            .arg(&self.socket)
            .arg("--state")
            .arg(&self.state)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .env("RUST_LOG", "info");
        cmd
    }

    /// Starts the daemon and waits until it accepts connections.
    pub fn start(&self, extra: &[&str]) -> Daemon {
        let log = self.dir.path().join(format!("daemon-{}.log", unique()));
        let mut cmd = self.command(extra);
        cmd.stderr(std::fs::File::create(&log).unwrap());
        let child = cmd.spawn().unwrap();
        let mut d = Daemon {
            child: Some(child),
            log,
        };
        let deadline = Instant::now() + PATIENCE;
        loop {
            if UnixStream::connect(&self.socket).is_ok() {
                return d;
            }
            if let Some(status) = d.try_status() {
                panic!("daemon exited early ({status}); log:\n{}", d.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "daemon did not start; log:\n{}",
                d.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs the daemon expecting it to refuse to start; returns its exit
    /// code and stderr.
    pub fn start_fails(&self, extra: &[&str]) -> (i32, String) {
        let out = self.command(extra).stderr(Stdio::piped()).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    pub fn connect(&self) -> Client {
        Client::connect(&self.socket)
    }
}

pub struct Daemon {
    child: Option<Child>,
    pub log: PathBuf,
}

impl Daemon {
    pub fn pid(&self) -> i32 {
        self.child.as_ref().map_or(0, |c| c.id() as i32)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), sig).unwrap();
    }

    fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().unwrap())
    }

    /// Waits for the daemon to exit.
    pub fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(s) = self.try_status() {
                self.child = None;
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "daemon did not exit; log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Every answer the daemon sends must match the published ToolResult schema.
pub fn assert_valid_result(v: &Value) {
    static V: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    let validator = V.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/tool-result.schema.json");
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        jsonschema::validator_for(&schema).unwrap()
    });
    if let Err(e) = validator.validate(v) {
        panic!("answer does not match docs/tool-result.schema.json: {e}\n{v}");
    }
}

pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    pub fn connect(path: &Path) -> Client {
        let s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        Client {
            writer: s.try_clone().unwrap(),
            reader: BufReader::new(s),
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    /// Sends bytes, ignoring a daemon that hung up meanwhile.
    pub fn send_raw_lossy(&mut self, bytes: &[u8]) {
        let _ = self.writer.write_all(bytes);
    }

    /// The next response, or `None` once the daemon closed the connection
    /// (end of file, or a reset when it left bytes of ours unread).
    pub fn recv_or_closed(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => None,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => None,
            Err(e) => panic!("read failed: {e}"),
            Ok(_) => {
                let v = serde_json::from_str(&line).unwrap();
                assert_valid_result(&v);
                Some(v)
            }
        }
    }

    pub fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// The next response; panics on EOF or timeout.
    pub fn recv(&mut self) -> Value {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).unwrap();
        assert!(n > 0, "connection closed while a response was expected");
        let v = serde_json::from_str(&line).unwrap();
        assert_valid_result(&v);
        v
    }

    pub fn call(&mut self, v: &Value) -> Value {
        self.send(v);
        self.recv()
    }

    pub fn run(&mut self, id: &str, command: &str) -> Value {
        self.call(&json!({"id": id, "tool": "run_shell", "args": {"command": command}}))
    }

    pub fn shutdown_write(&self) {
        self.writer.shutdown(std::net::Shutdown::Write).unwrap();
    }
}

pub fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{}{}{}",
        std::process::id(),
        t % 100_000,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A `sleep` argument no other process on the machine will have, so the
/// process table can be searched for it.
pub fn marker_seconds() -> String {
    let u = unique();
    let tail = &u[u.len().saturating_sub(7)..];
    format!("600.{tail}")
}

/// Pids whose command line contains `needle` (excluding zombies).
pub fn pids_with(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if !text.contains(needle) {
            continue;
        }
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rfind(')').map(|i| s[i + 2..].starts_with('Z')))
            .unwrap_or(true);
        if !zombie {
            out.push(pid);
        }
    }
    out
}

pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn error_type(v: &Value) -> &str {
    v["error_type"].as_str().unwrap_or("")
}

pub fn have(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// State letter, parent pid of `pid` (`None` once it is reaped).
pub fn state_and_ppid(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_ascii_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Zombie children of `parent`, found both ways: every thread's
/// `children` list, and a scan of `/proc` for a parent pid of `parent`.
pub fn zombie_children(parent: i32) -> Vec<i32> {
    let mut pids = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) {
        for t in tasks.flatten() {
            let text = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            pids.extend(
                text.split_ascii_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>()
            && state_and_ppid(pid).is_some_and(|(_, ppid)| ppid == parent)
        {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    pids.dedup();
    pids.retain(|&p| state_and_ppid(p).is_some_and(|(s, _)| s == 'Z'));
    pids
}

/// Descriptors the process `pid` holds open.
pub fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Resident set size of `pid` in KiB.
pub fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
