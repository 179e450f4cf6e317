//! One task: a fresh root, the task's files and setup, the binary run on
//! its commands, then every check on the result and on the world.

use std::io::Read as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{CANARY_ENV, Check, EvalError, EvalOptions, Task, TaskReport};

/// The harness kills a task's process after this long, whatever the task
/// says, so one hung task cannot hang the eval.
const HARD_TASK_LIMIT: Duration = Duration::from_secs(120);

/// uid of `nobody`: the sandbox runs the child as the root directory's
/// owner, or `nobody` when that is root, so a root harness hands the temp
/// root to `nobody` for the child to be able to work in it.
const NOBODY_UID: u32 = 65_534;

/// Runs one task to its report. Only a temporary directory that cannot be
/// made is an error; everything else that goes wrong is the report's.
pub(super) fn run_task(task: &Task, opts: &EvalOptions) -> Result<TaskReport, EvalError> {
    let sb = make_dirs(&task.id)?;
    let listener = match listen(task) {
        Ok(l) => l,
        Err(failed) => return Ok(*failed),
    };
    let ph = Placeholders {
        sb: &sb,
        port: listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
            .map(|a| a.port()),
    };
    if let Err(failed) = prepare(task, &sb, &ph) {
        return Ok(*failed);
    }
    let run = match run_commands(task, opts, &sb, &ph) {
        Ok(r) => r,
        Err(failed) => return Ok(*failed),
    };
    let mut checks = result_checks(task, &run, &ph);
    if let Some(ms) = task.settle_ms {
        std::thread::sleep(Duration::from_millis(ms.min(30_000)));
    }
    checks.extend(effect_checks(task, &sb, &ph, listener.as_ref()));
    Ok(report(task, &run, checks))
}

/// A task that could not get as far as its checks.
type Failed = Box<TaskReport>;

fn listen(task: &Task) -> Result<Option<TcpListener>, Failed> {
    if !task.listen {
        return Ok(None);
    }
    match TcpListener::bind("127.0.0.1:0").and_then(|l| l.set_nonblocking(true).map(|_| l)) {
        Ok(l) => Ok(Some(l)),
        Err(e) => Err(failed_task(
            task,
            "harness_error",
            check("listen", false, "a loopback listener", &e.to_string()),
        )),
    }
}

/// The task's files, then its setup commands (unsandboxed, `/bin/sh -c`
/// in the root), then the root handed to the child's user.
fn prepare(task: &Task, sb: &Sandbox, ph: &Placeholders<'_>) -> Result<(), Failed> {
    for (rel, content) in &task.files {
        let rel = ph.apply(rel);
        let path = sb.root.join(rel.trim_start_matches('/'));
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| std::fs::write(&path, ph.apply(content)));
        if let Err(e) = written {
            return Err(failed_task(
                task,
                "setup_failed",
                check("files", false, &rel, &e.to_string()),
            ));
        }
    }
    for cmd in &task.setup {
        let cmd = ph.apply(cmd);
        let out = Command::new("/bin/sh")
            .arg("-c")
            .arg(&cmd)
            .current_dir(&sb.root)
            .stdin(Stdio::null())
            .output();
        let failure = match out {
            Ok(o) if o.status.success() => continue,
            Ok(o) => format!("{}: {}", o.status, String::from_utf8_lossy(&o.stderr)),
            Err(e) => e.to_string(),
        };
        return Err(failed_task(
            task,
            "setup_failed",
            check("setup", false, &cmd, &failure),
        ));
    }
    if nix::unistd::geteuid().is_root() {
        chown_tree(&sb.root, NOBODY_UID);
    }
    Ok(())
}

/// What the last of the task's commands answered.
struct Run {
    result: Value,
    wall: Duration,
    /// The binary's own stderr, which must not leak secrets either.
    raw_stderr: String,
    decision: Option<String>,
    error_type: Option<String>,
    exit_code: Option<i64>,
}

impl Run {
    fn new(result: Value, wall: Duration, raw_stderr: String) -> Run {
        let text = |key: &str| result.get(key).and_then(Value::as_str).map(str::to_string);
        Run {
            decision: text("policy_decision"),
            error_type: text("error_type"),
            exit_code: result.get("exit_code").and_then(Value::as_i64),
            result,
            wall,
            raw_stderr,
        }
    }

    fn stream(&self, name: &str) -> &str {
        self.result.get(name).and_then(Value::as_str).unwrap_or("")
    }
}

fn run_commands(
    task: &Task,
    opts: &EvalOptions,
    sb: &Sandbox,
    ph: &Placeholders<'_>,
) -> Result<Run, Failed> {
    let commands: Vec<String> = match &task.command {
        Some(c) => vec![ph.apply(c)],
        None => task.commands.iter().map(|c| ph.apply(c)).collect(),
    };
    let mut last = None;
    for cmd in &commands {
        match invoke(opts, sb, cmd, task.timeout_ms) {
            Ok((v, wall, stderr)) => last = Some(Run::new(v, wall, stderr)),
            Err(msg) => {
                return Err(failed_task(
                    task,
                    "harness_error",
                    check("run", false, "a JSON ToolResult", &msg),
                ));
            }
        }
    }
    last.ok_or_else(|| {
        failed_task(
            task,
            "harness_error",
            check("run", false, "a command", "none"),
        )
    })
}

/// Checks on the ToolResult and the run's output, each with the failure
/// reason it stands for.
fn result_checks(task: &Task, run: &Run, ph: &Placeholders<'_>) -> Vec<(Check, &'static str)> {
    let mut checks = Vec::new();
    let (stdout, stderr) = (run.stream("stdout"), run.stream("stderr"));
    if let Some(exp) = &task.expected_decision {
        let actual = run.decision.clone().unwrap_or_else(|| "none".into());
        checks.push((
            check("decision", exp.accepts(&actual), &exp.describe(), &actual),
            "wrong_decision",
        ));
    }
    if let Some(exp) = &task.expected_error_type {
        let actual = run.error_type.clone().unwrap_or_else(|| "NONE".into());
        checks.push((
            check("error_type", exp.accepts(&actual), &exp.describe(), &actual),
            "wrong_error_type",
        ));
    }
    if let Some(exp) = task.expected_exit_code {
        let actual = run.exit_code.map_or("none".to_string(), |c| c.to_string());
        let passed = run.exit_code == Some(i64::from(exp));
        checks.push((
            check("exit_code", passed, &exp.to_string(), &actual),
            "wrong_exit_code",
        ));
    }
    if let Some(exp) = task.expected_ok {
        let actual = run.result.get("ok").and_then(Value::as_bool);
        let reason = if exp {
            "wrong_error_type"
        } else {
            "unexpected_success"
        };
        checks.push((
            check(
                "ok",
                actual == Some(exp),
                &exp.to_string(),
                &format!("{actual:?}"),
            ),
            reason,
        ));
    }
    if let Some(needle) = &task.expected_stdout_contains {
        let needle = ph.apply(needle);
        checks.push((
            check(
                "stdout_contains",
                stdout.contains(&needle),
                &needle,
                &excerpt(stdout),
            ),
            "missing_output",
        ));
    }
    for needle in &task.expected_output_not_contains {
        let needle = ph.apply(needle);
        let leaked = stdout.contains(&needle)
            || stderr.contains(&needle)
            || run.raw_stderr.contains(&needle);
        checks.push((
            check(
                &format!("output_not_contains:{needle}"),
                !leaked,
                "absent",
                if leaked { "present" } else { "absent" },
            ),
            "leaked_output",
        ));
    }
    if let Some(max) = task.max_duration_ms {
        let ms = run.wall.as_millis() as u64;
        checks.push((
            check(
                "max_duration_ms",
                ms <= max,
                &format!("<= {max} ms"),
                &format!("{ms} ms"),
            ),
            "too_slow",
        ));
    }
    checks
}

/// Checks on the world after the run: files that must not exist or must
/// still exist, and connections that must not have been made.
fn effect_checks(
    task: &Task,
    sb: &Sandbox,
    ph: &Placeholders<'_>,
    listener: Option<&TcpListener>,
) -> Vec<(Check, &'static str)> {
    let mut checks = Vec::new();
    let exists = |p: &str| {
        let p = ph.apply(p);
        let path = if Path::new(&p).is_absolute() {
            PathBuf::from(&p)
        } else {
            sb.root.join(&p)
        };
        path.symlink_metadata().is_ok()
    };
    for effect in &task.forbidden_effects {
        let there = exists(effect);
        checks.push((
            check(
                &format!("forbidden_effect:{effect}"),
                !there,
                "absent",
                if there { "exists" } else { "absent" },
            ),
            "forbidden_effect",
        ));
    }
    for kept in &task.preserved {
        let there = exists(kept);
        checks.push((
            check(
                &format!("preserved:{kept}"),
                there,
                "exists",
                if there { "exists" } else { "gone" },
            ),
            "forbidden_effect",
        ));
    }
    if let Some(l) = listener {
        let accepted = l.accept().is_ok();
        checks.push((
            check(
                "no_connection",
                !accepted,
                "no connection",
                if accepted {
                    "a connection was accepted"
                } else {
                    "none"
                },
            ),
            "connection_accepted",
        ));
    }
    checks
}

/// The report: passed when every check did; otherwise the reason of the
/// first failed check, and an excerpt of what came back.
fn report(task: &Task, run: &Run, checks: Vec<(Check, &'static str)>) -> TaskReport {
    let failure_reason = checks
        .iter()
        .find(|(c, _)| !c.passed)
        .map(|(_, r)| r.to_string());
    let detail = if failure_reason.is_some() {
        excerpt(&format!(
            "{} | stdout: {} | stderr: {}",
            run.result
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or(""),
            run.stream("stdout"),
            run.stream("stderr")
        ))
    } else {
        String::new()
    };
    TaskReport {
        id: task.id.clone(),
        category: task.category.clone(),
        passed: failure_reason.is_none(),
        failure_reason,
        checks: checks.into_iter().map(|(c, _)| c).collect(),
        decision: run.decision.clone(),
        error_type: run.error_type.clone(),
        exit_code: run.exit_code,
        duration_ms: run.wall.as_millis() as u64,
        detail,
    }
}

fn failed_task(task: &Task, reason: &str, check: Check) -> Failed {
    Box::new(TaskReport {
        id: task.id.clone(),
        category: task.category.clone(),
        passed: false,
        failure_reason: Some(reason.to_string()),
        checks: vec![check],
        decision: None,
        error_type: None,
        exit_code: None,
        duration_ms: 0,
        detail: String::new(),
    })
}

fn check(name: &str, passed: bool, expected: &str, actual: &str) -> Check {
    Check {
        name: name.to_string(),
        passed,
        expected: expected.to_string(),
        actual: actual.to_string(),
    }
}

fn excerpt(s: &str) -> String {
    const MAX: usize = 300;
    match s.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_string(),
    }
}

/// The task's temporary directories, removed when dropped.
struct Sandbox {
    base: PathBuf,
    root: PathBuf,
    outside: PathBuf,
    canary: String,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn make_dirs(task_id: &str) -> Result<Sandbox, EvalError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let seed = format!("{task_id}:{}:{n}:{nanos}", std::process::id());
    let digest = hex::encode(&Sha256::digest(seed.as_bytes())[..10]);
    let base = std::env::temp_dir().join(format!("agent-exec-eval-{digest}"));
    let root = base.join("root");
    let outside = base.join("outside");
    std::fs::create_dir_all(&root).map_err(EvalError::TempDir)?;
    std::fs::create_dir_all(&outside).map_err(EvalError::TempDir)?;
    let canary = format!("CANARY-{digest}");
    let sandbox = Sandbox {
        base,
        root,
        outside,
        canary,
    };
    std::fs::write(
        sandbox.outside.join("canary.txt"),
        format!("{}\n", sandbox.canary),
    )
    .map_err(EvalError::TempDir)?;
    // The base must be traversable by the unprivileged child for it to
    // reach its own root; the outside dir stays root's and is protected
    // only by the sandbox, which is what the security tasks test.
    set_mode(&sandbox.base, 0o755);
    Ok(sandbox)
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
}

fn chown_tree(path: &Path, uid: u32) {
    let _ = std::os::unix::fs::lchown(path, Some(uid), Some(uid));
    if path.is_dir()
        && !path.is_symlink()
        && let Ok(entries) = std::fs::read_dir(path)
    {
        for e in entries.flatten() {
            chown_tree(&e.path(), uid);
        }
    }
}

struct Placeholders<'a> {
    sb: &'a Sandbox,
    port: Option<u16>,
}

impl Placeholders<'_> {
    fn apply(&self, s: &str) -> String {
        let mut out = s
            .replace("{root}", &self.sb.root.to_string_lossy())
            .replace("{outside}", &self.sb.outside.to_string_lossy())
            .replace("{canary}", &self.sb.canary);
        if let Some(p) = self.port {
            out = out.replace("{port}", &p.to_string());
        }
        out
    }
}

/// Runs the binary once; returns its parsed ToolResult, wall time and raw
/// stderr, or why there is none.
fn invoke(
    opts: &EvalOptions,
    sb: &Sandbox,
    cmd: &str,
    timeout_ms: Option<u64>,
) -> Result<(Value, Duration, String), String> {
    let mut c = Command::new(&opts.binary);
    if let Some(p) = &opts.policy {
        c.arg("--policy").arg(p);
    }
    c.arg("--root").arg(&sb.root).args(&opts.extra_args);
    if let Some(ms) = timeout_ms {
        c.arg("--timeout-ms").arg(ms.to_string());
    }
    c.arg("--shell").arg(cmd);
    c.env(CANARY_ENV, &sb.canary)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = c
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", opts.binary.display()))?;
    // Read both pipes on threads so a chatty child cannot block on a full
    // pipe while we wait for it.
    let mut out_pipe = child.stdout.take();
    let mut err_pipe = child.stderr.take();
    let out_t = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(p) = out_pipe.as_mut() {
            let _ = p.read_to_end(&mut buf);
        }
        buf
    });
    let err_t = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(p) = err_pipe.as_mut() {
            let _ = p.read_to_end(&mut buf);
        }
        buf
    });
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) if start.elapsed() > HARD_TASK_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!("killed after {} s", HARD_TASK_LIMIT.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => break Err(e.to_string()),
        }
    };
    let wall = start.elapsed();
    let stdout = out_t.join().unwrap_or_default();
    let stderr = String::from_utf8_lossy(&err_t.join().unwrap_or_default()).into_owned();
    let status = status?;
    let text = String::from_utf8_lossy(&stdout);
    let parsed: Option<Value> = serde_json::from_str(text.trim()).ok().or_else(|| {
        text.lines()
            .rev()
            .find_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
    });
    match parsed {
        Some(v) if v.is_object() && v.get("call_id").is_some() => Ok((v, wall, stderr)),
        _ => Err(format!(
            "{status}; stdout: {}; stderr: {}",
            excerpt(&text),
            excerpt(&stderr)
        )),
    }
}
