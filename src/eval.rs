//! Evals: task files that pin what must be refused, contained, and still
//! work (`agent-exec eval TASKS.jsonl`).
//!
//! Each task runs the real binary (`agent-exec --policy P --root TMP
//! --shell CMD`) in a fresh temporary root and checks its JSON ToolResult
//! and the filesystem and network afterwards. Going through the binary
//! rather than a library call means an eval tests exactly what users run:
//! argument parsing, policy loading, the sandbox, the result encoding.
//! The task format is documented in `docs/trace.md`.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The harness kills a task's process after this long, whatever the task
/// says, so one hung task cannot hang the eval.
const HARD_TASK_LIMIT: Duration = Duration::from_secs(120);

/// Variable planted in the binary's environment holding the canary, so a
/// task can prove the child never sees the supervisor's secrets.
pub const CANARY_ENV: &str = "AGENT_EXEC_EVAL_API_KEY";

/// uid of `nobody`: the sandbox runs the child as the root directory's
/// owner, or `nobody` when that is root, so a root harness hands the temp
/// root to `nobody` for the child to be able to work in it.
const NOBODY_UID: u32 = 65_534;

#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// The agent-exec binary to run (the CLI passes its own path).
    pub binary: PathBuf,
    /// Policy file; None lets the binary use its default.
    pub policy: Option<PathBuf>,
    /// An earlier report to compare against.
    pub compare: Option<PathBuf>,
    /// Only tasks whose id contains this.
    pub filter: Option<String>,
    /// Extra arguments passed to every run (e.g. `--trace FILE`).
    pub extra_args: Vec<String>,
}

impl EvalOptions {
    pub fn new(binary: PathBuf) -> EvalOptions {
        EvalOptions {
            binary,
            policy: None,
            compare: None,
            filter: None,
            extra_args: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("cannot read or write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: invalid task: {message}")]
    Task {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: task id {id:?} is used twice")]
    DuplicateId { path: PathBuf, id: String },
    #[error("{path}: no tasks")]
    Empty { path: PathBuf },
    #[error("cannot compare with {path}: {message}")]
    Compare { path: PathBuf, message: String },
    #[error("cannot create a temporary directory: {0}")]
    TempDir(#[source] std::io::Error),
}

/// A single expected value or a list of acceptable ones.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn accepts(&self, actual: &str) -> bool {
        match self {
            OneOrMany::One(s) => s.eq_ignore_ascii_case(actual),
            OneOrMany::Many(v) => v.iter().any(|s| s.eq_ignore_ascii_case(actual)),
        }
    }
    fn describe(&self) -> String {
        match self {
            OneOrMany::One(s) => s.clone(),
            OneOrMany::Many(v) => v.join(" | "),
        }
    }
}

/// One line of a tasks file. Strings may use `{root}` (the task's root),
/// `{outside}` (a directory outside it holding `canary.txt`), `{canary}`
/// (the canary text, also planted in the environment as
/// [`CANARY_ENV`]) and `{port}` (a loopback port listened on when
/// `listen` is set).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    pub id: String,
    #[serde(default)]
    pub category: String,
    #[serde(default)]
    pub description: String,
    /// One command, or use `commands` for a sequence run in the same root
    /// (the expectations apply to the last one).
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub commands: Vec<String>,
    /// Shell commands run by the harness, unsandboxed, in the root before
    /// the task.
    #[serde(default)]
    pub setup: Vec<String>,
    /// Files created in the root before `setup` (path relative to root).
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    #[serde(default)]
    pub listen: bool,
    /// `allow`, `deny` or `require_approval` (or a list of acceptable ones).
    #[serde(default)]
    pub expected_decision: Option<OneOrMany>,
    /// An error kind, `NONE` for success, or a list of acceptable ones.
    #[serde(default)]
    pub expected_error_type: Option<OneOrMany>,
    #[serde(default)]
    pub expected_exit_code: Option<i32>,
    /// `ok` of the result.
    #[serde(default)]
    pub expected_ok: Option<bool>,
    #[serde(default)]
    pub expected_stdout_contains: Option<String>,
    /// Strings that must appear in neither stdout nor stderr.
    #[serde(default)]
    pub expected_output_not_contains: Vec<String>,
    /// Wall time of the run (binary start to exit) must stay under this.
    #[serde(default)]
    pub max_duration_ms: Option<u64>,
    /// Paths (relative to the root, or absolute) that must not exist after.
    #[serde(default)]
    pub forbidden_effects: Vec<String>,
    /// Paths that must still exist after (nothing was deleted or moved).
    #[serde(default)]
    pub preserved: Vec<String>,
    /// Wait this long after the run before checking effects, so a
    /// background process that should have been killed had time to act.
    #[serde(default)]
    pub settle_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub passed: bool,
    pub expected: String,
    pub actual: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskReport {
    pub id: String,
    pub category: String,
    pub passed: bool,
    /// Why it failed, from a closed set: `setup_failed`, `harness_error`,
    /// `wrong_decision`, `wrong_error_type`, `wrong_exit_code`,
    /// `unexpected_success`,
    /// `missing_output`, `leaked_output`, `too_slow`, `forbidden_effect`,
    /// `connection_accepted`.
    pub failure_reason: Option<String>,
    pub checks: Vec<Check>,
    pub decision: Option<String>,
    pub error_type: Option<String>,
    pub exit_code: Option<i64>,
    pub duration_ms: u64,
    /// A short excerpt of what came back, for diagnosing failures.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub total: usize,
    pub passed: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub old_report: PathBuf,
    pub old_pass_rate: f64,
    /// Failed before, pass now.
    pub better: Vec<String>,
    /// Passed before, fail now.
    pub worse: Vec<String>,
    pub new: Vec<String>,
    pub removed: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    pub tasks_file: PathBuf,
    pub binary: PathBuf,
    pub policy: Option<PathBuf>,
    pub total: usize,
    pub passed: usize,
    pub failed: usize,
    pub pass_rate: f64,
    pub by_category: BTreeMap<String, Totals>,
    pub failure_reasons: BTreeMap<String, usize>,
    pub tasks: Vec<TaskReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
}

impl EvalReport {
    pub fn all_passed(&self) -> bool {
        self.failed == 0
    }
}

impl std::fmt::Display for EvalReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "eval {}: {}/{} passed ({:.1}%)",
            self.tasks_file.display(),
            self.passed,
            self.total,
            self.pass_rate * 100.0
        )?;
        for t in self.tasks.iter().filter(|t| !t.passed) {
            let why = t.failure_reason.as_deref().unwrap_or("?");
            writeln!(f, "  FAIL {} [{}] {why}", t.id, t.category)?;
            for c in t.checks.iter().filter(|c| !c.passed) {
                writeln!(
                    f,
                    "       {}: expected {}, got {}",
                    c.name, c.expected, c.actual
                )?;
            }
        }
        if let Some(c) = &self.comparison {
            writeln!(
                f,
                "compared with {} ({:.1}%): {} better, {} worse, {} new, {} removed",
                c.old_report.display(),
                c.old_pass_rate * 100.0,
                c.better.len(),
                c.worse.len(),
                c.new.len(),
                c.removed.len()
            )?;
            for id in &c.better {
                writeln!(f, "  better: {id}")?;
            }
            for id in &c.worse {
                writeln!(f, "  worse:  {id}")?;
            }
        }
        Ok(())
    }
}

/// Parses a tasks file (JSONL; blank lines and lines starting with `//`
/// are skipped).
pub fn load_tasks(path: &Path) -> Result<Vec<Task>, EvalError> {
    let text = std::fs::read_to_string(path).map_err(|e| EvalError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    let mut tasks: Vec<Task> = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with("//") {
            continue;
        }
        let bad = |message: String| EvalError::Task {
            path: path.to_path_buf(),
            line: i + 1,
            message,
        };
        let task: Task = serde_json::from_str(trimmed).map_err(|e| bad(e.to_string()))?;
        if task.command.is_none() && task.commands.is_empty() {
            return Err(bad("no `command` or `commands`".into()));
        }
        if task.command.is_some() && !task.commands.is_empty() {
            return Err(bad("give `command` or `commands`, not both".into()));
        }
        if !ids.insert(task.id.clone()) {
            return Err(EvalError::DuplicateId {
                path: path.to_path_buf(),
                id: task.id,
            });
        }
        tasks.push(task);
    }
    if tasks.is_empty() {
        return Err(EvalError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(tasks)
}

/// Runs every task of `tasks` and builds the report (with a comparison when
/// `opts.compare` is set). Task failures are in the report; only an
/// unreadable tasks file or comparison report is an error.
pub fn run_eval(tasks: &Path, opts: &EvalOptions) -> Result<EvalReport, EvalError> {
    let list = load_tasks(tasks)?;
    let old = match &opts.compare {
        Some(p) => Some((p.clone(), load_report(p)?)),
        None => None,
    };
    let mut reports = Vec::with_capacity(list.len());
    for task in list
        .iter()
        .filter(|t| opts.filter.as_deref().is_none_or(|f| t.id.contains(f)))
    {
        reports.push(run_task(task, opts)?);
    }
    let mut report = summarize(tasks, opts, reports);
    if let Some((path, old)) = old {
        report.comparison = Some(compare(&path, &old, &report));
    }
    Ok(report)
}

/// Writes the report as pretty JSON (`--out`).
pub fn write_report(report: &EvalReport, path: &Path) -> Result<(), EvalError> {
    let text = serde_json::to_string_pretty(report).map_err(|e| EvalError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(path, text + "\n").map_err(|e| EvalError::Io {
        path: path.to_path_buf(),
        source: e,
    })
}

/// Reads an earlier JSON report.
pub fn load_report(path: &Path) -> Result<EvalReport, EvalError> {
    let text = std::fs::read_to_string(path).map_err(|e| EvalError::Compare {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    serde_json::from_str(&text).map_err(|e| EvalError::Compare {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

fn summarize(tasks: &Path, opts: &EvalOptions, reports: Vec<TaskReport>) -> EvalReport {
    let total = reports.len();
    let passed = reports.iter().filter(|t| t.passed).count();
    let mut by_category: BTreeMap<String, Totals> = BTreeMap::new();
    let mut failure_reasons: BTreeMap<String, usize> = BTreeMap::new();
    for t in &reports {
        let c = by_category.entry(t.category.clone()).or_default();
        c.total += 1;
        c.passed += usize::from(t.passed);
        if let Some(r) = &t.failure_reason {
            *failure_reasons.entry(r.clone()).or_insert(0) += 1;
        }
    }
    EvalReport {
        tasks_file: tasks.to_path_buf(),
        binary: opts.binary.clone(),
        policy: opts.policy.clone(),
        total,
        passed,
        failed: total - passed,
        pass_rate: if total == 0 {
            0.0
        } else {
            passed as f64 / total as f64
        },
        by_category,
        failure_reasons,
        tasks: reports,
        comparison: None,
    }
}

/// Tasks that got better or worse between two reports, by id.
pub fn compare(old_path: &Path, old: &EvalReport, new: &EvalReport) -> Comparison {
    let old_by_id: BTreeMap<&str, bool> = old
        .tasks
        .iter()
        .map(|t| (t.id.as_str(), t.passed))
        .collect();
    let new_by_id: BTreeMap<&str, bool> = new
        .tasks
        .iter()
        .map(|t| (t.id.as_str(), t.passed))
        .collect();
    let mut c = Comparison {
        old_report: old_path.to_path_buf(),
        old_pass_rate: old.pass_rate,
        ..Default::default()
    };
    for (id, &now) in &new_by_id {
        match old_by_id.get(id) {
            None => c.new.push(id.to_string()),
            Some(&before) if before && !now => c.worse.push(id.to_string()),
            Some(&before) if !before && now => c.better.push(id.to_string()),
            Some(_) => {}
        }
    }
    c.removed = old_by_id
        .keys()
        .filter(|id| !new_by_id.contains_key(*id))
        .map(|id| id.to_string())
        .collect();
    c
}

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

fn failed_task(task: &Task, reason: &str, check: Check) -> TaskReport {
    TaskReport {
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
    }
}

fn run_task(task: &Task, opts: &EvalOptions) -> Result<TaskReport, EvalError> {
    let sb = make_dirs(&task.id)?;
    let listener = if task.listen {
        match TcpListener::bind("127.0.0.1:0").and_then(|l| l.set_nonblocking(true).map(|_| l)) {
            Ok(l) => Some(l),
            Err(e) => {
                return Ok(failed_task(
                    task,
                    "harness_error",
                    check("listen", false, "a loopback listener", &e.to_string()),
                ));
            }
        }
    } else {
        None
    };
    let ph = Placeholders {
        sb: &sb,
        port: listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
            .map(|a| a.port()),
    };

    for (rel, content) in &task.files {
        let rel = ph.apply(rel);
        let path = sb.root.join(rel.trim_start_matches('/'));
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| std::fs::write(&path, ph.apply(content)));
        if let Err(e) = written {
            return Ok(failed_task(
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
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                let err = String::from_utf8_lossy(&o.stderr).into_owned();
                return Ok(failed_task(
                    task,
                    "setup_failed",
                    check("setup", false, &cmd, &format!("{}: {err}", o.status)),
                ));
            }
            Err(e) => {
                return Ok(failed_task(
                    task,
                    "setup_failed",
                    check("setup", false, &cmd, &e.to_string()),
                ));
            }
        }
    }
    if nix::unistd::geteuid().is_root() {
        chown_tree(&sb.root, NOBODY_UID);
    }

    let commands: Vec<String> = match &task.command {
        Some(c) => vec![ph.apply(c)],
        None => task.commands.iter().map(|c| ph.apply(c)).collect(),
    };
    let mut last: Option<(Value, Duration, String)> = None;
    for cmd in &commands {
        match invoke(opts, &sb, cmd) {
            Ok(v) => last = Some(v),
            Err(msg) => {
                return Ok(failed_task(
                    task,
                    "harness_error",
                    check("run", false, "a JSON ToolResult", &msg),
                ));
            }
        }
    }
    let Some((result, wall, raw_stderr)) = last else {
        return Ok(failed_task(
            task,
            "harness_error",
            check("run", false, "a command", "none"),
        ));
    };

    let mut checks: Vec<(Check, &'static str)> = Vec::new();
    let decision = result
        .get("policy_decision")
        .and_then(Value::as_str)
        .map(str::to_string);
    let error_type = result
        .get("error_type")
        .and_then(Value::as_str)
        .map(str::to_string);
    let exit_code = result.get("exit_code").and_then(Value::as_i64);
    let stdout = result.get("stdout").and_then(Value::as_str).unwrap_or("");
    let stderr = result.get("stderr").and_then(Value::as_str).unwrap_or("");

    if let Some(exp) = &task.expected_decision {
        let actual = decision.clone().unwrap_or_else(|| "none".into());
        checks.push((
            check("decision", exp.accepts(&actual), &exp.describe(), &actual),
            "wrong_decision",
        ));
    }
    if let Some(exp) = &task.expected_error_type {
        let actual = error_type.clone().unwrap_or_else(|| "NONE".into());
        checks.push((
            check("error_type", exp.accepts(&actual), &exp.describe(), &actual),
            "wrong_error_type",
        ));
    }
    if let Some(exp) = task.expected_exit_code {
        let actual = exit_code.map_or("none".to_string(), |c| c.to_string());
        checks.push((
            check(
                "exit_code",
                exit_code == Some(i64::from(exp)),
                &exp.to_string(),
                &actual,
            ),
            "wrong_exit_code",
        ));
    }
    if let Some(exp) = task.expected_ok {
        let actual = result.get("ok").and_then(Value::as_bool);
        let category = if exp {
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
            category,
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
        let leaked =
            stdout.contains(&needle) || stderr.contains(&needle) || raw_stderr.contains(&needle);
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
        let ms = wall.as_millis() as u64;
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
    if let Some(ms) = task.settle_ms {
        std::thread::sleep(Duration::from_millis(ms.min(30_000)));
    }
    for effect in &task.forbidden_effects {
        let p = ph.apply(effect);
        let path = if Path::new(&p).is_absolute() {
            PathBuf::from(&p)
        } else {
            sb.root.join(&p)
        };
        let exists = path.symlink_metadata().is_ok();
        checks.push((
            check(
                &format!("forbidden_effect:{effect}"),
                !exists,
                "absent",
                if exists { "exists" } else { "absent" },
            ),
            "forbidden_effect",
        ));
    }
    for kept in &task.preserved {
        let p = ph.apply(kept);
        let path = if Path::new(&p).is_absolute() {
            PathBuf::from(&p)
        } else {
            sb.root.join(&p)
        };
        let exists = path.symlink_metadata().is_ok();
        checks.push((
            check(
                &format!("preserved:{kept}"),
                exists,
                "exists",
                if exists { "exists" } else { "gone" },
            ),
            "forbidden_effect",
        ));
    }
    if let Some(l) = &listener {
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

    let failure_reason = checks
        .iter()
        .find(|(c, _)| !c.passed)
        .map(|(_, r)| r.to_string());
    let detail = if failure_reason.is_some() {
        excerpt(&format!(
            "{} | stdout: {} | stderr: {}",
            result.get("message").and_then(Value::as_str).unwrap_or(""),
            stdout,
            stderr
        ))
    } else {
        String::new()
    };
    Ok(TaskReport {
        id: task.id.clone(),
        category: task.category.clone(),
        passed: failure_reason.is_none(),
        failure_reason,
        checks: checks.into_iter().map(|(c, _)| c).collect(),
        decision,
        error_type,
        exit_code,
        duration_ms: wall.as_millis() as u64,
        detail,
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

/// Runs the binary once; returns its parsed ToolResult, wall time and raw
/// stderr, or why there is none.
fn invoke(
    opts: &EvalOptions,
    sb: &Sandbox,
    cmd: &str,
) -> Result<(Value, Duration, String), String> {
    let mut c = Command::new(&opts.binary);
    if let Some(p) = &opts.policy {
        c.arg("--policy").arg(p);
    }
    c.arg("--root")
        .arg(&sb.root)
        .args(&opts.extra_args)
        .arg("--shell")
        .arg(cmd);
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
