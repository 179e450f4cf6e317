//! Evals: task files that pin what must be refused, contained, and still
//! work (`agent-exec eval TASKS.jsonl`).
//!
//! Each task runs the real binary (`agent-exec --policy P --root TMP
//! --shell CMD`) in a fresh temporary root and checks its JSON ToolResult
//! and the filesystem and network afterwards. Going through the binary
//! rather than a library call means an eval tests exactly what users run:
//! argument parsing, policy loading, the sandbox, the result encoding.
//! The task format is documented in `docs/trace.md`.

mod task;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use task::run_task;

/// Variable planted in the binary's environment holding the canary, so a
/// task can prove the child never sees the supervisor's secrets.
pub const CANARY_ENV: &str = "AGENT_EXEC_EVAL_API_KEY";

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

/// Why an eval could not run (task failures are in the report instead).
#[non_exhaustive]
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
    #[error("cannot compare with {path}: {source}")]
    Compare {
        path: PathBuf,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
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
    /// The request's timeout (`--timeout-ms`), when not the policy's.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
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
        source: e.into(),
    })?;
    serde_json::from_str(&text).map_err(|e| EvalError::Compare {
        path: path.to_path_buf(),
        source: e.into(),
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
