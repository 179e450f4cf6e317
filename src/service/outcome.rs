//! Stages 6 and 7: run the invocation in its sandbox, then classify what
//! happened into a result a model can act on.

use std::path::Path;
use std::time::Instant;

use super::invocation::Invocation;
use crate::result::{ErrorType, ToolResult};
use crate::sandbox::SpawnError;
use crate::sandbox::{self, CancelToken, ExecError, ExecOutcome, RootAccess, Termination};

/// What the classifier needs to know besides the outcome itself.
pub(crate) struct RunContext<'a> {
    pub(crate) call_id: &'a str,
    pub(crate) root: &'a Path,
    /// The command ran under `bash -p -c`, so exit 127 is the shell's "not
    /// found".
    pub(crate) needs_shell: bool,
    pub(crate) hard_limit_bytes: u64,
    /// When the pipeline started building the run: spawn failures report
    /// the time spent up to them.
    pub(crate) started: Instant,
}

/// Runs `inv` to its end (or its timeout, output limit or cancellation).
pub(crate) fn run(inv: Invocation, ctx: &RunContext<'_>, cancel: &CancelToken) -> ToolResult {
    let Invocation {
        spec,
        timeout_ms,
        env_scrubbed,
        sandbox,
        ran_as,
    } = inv;
    let read_only = spec.sandbox.root_access() == RootAccess::ReadOnly;
    let mut result = match sandbox::run(spec, cancel) {
        Ok(outcome) => classify(outcome, timeout_ms, read_only, ctx),
        Err(e) => spawn_failure(e, ctx.call_id),
    };
    if let Some(ran_as) = ran_as {
        result.message = if result.message.is_empty() {
            ran_as
        } else {
            format!("{}; {ran_as}", result.message)
        };
    }
    result.env_scrubbed = env_scrubbed;
    result.sandbox = Some(sandbox);
    if result.duration_ms == 0 {
        result.duration_ms = ctx.started.elapsed().as_millis() as u64;
    }
    result
}

/// The result of a command that ran, from how it ended. `read_only`: the
/// run could not write the root.
fn classify(o: ExecOutcome, timeout_ms: u64, read_only: bool, ctx: &RunContext<'_>) -> ToolResult {
    let mut r = ToolResult::success(ctx.call_id);
    r.duration_ms = o.duration.as_millis() as u64;
    r.stdout = o.stdout.text;
    r.stderr = o.stderr.text;
    r.stdout_bytes = o.stdout.bytes;
    r.stderr_bytes = o.stderr.bytes;
    r.stdout_truncated = o.stdout.truncated;
    r.stderr_truncated = o.stderr.truncated;
    r.exit_code = o.exit_code;
    r.signal = o.signal;
    // A failure the sandbox caused (EACCES under Landlock, SIGSYS from
    // seccomp) is told apart from the command's own, naming what was
    // blocked, so the model does not retry the same thing.
    let violation = || {
        sandbox::attribute_violation(o.exit_code, o.signal, &r.stderr, ctx.root)
            .or_else(|| read_only.then(|| refused_write(&r.stderr)).flatten())
    };
    let (error_type, message) = match o.termination {
        Termination::Exited(0) => return r,
        Termination::Exited(code) => match violation() {
            Some(v) => (
                ErrorType::SandboxViolation,
                format!("exit status {code}: {v}"),
            ),
            None if code == 127 && ctx.needs_shell => (
                ErrorType::CommandNotFound,
                "exit status 127: the shell could not find a program (see stderr)".into(),
            ),
            None if code == 126 => (
                ErrorType::NonzeroExit,
                "exit status 126: a program could not be executed (see stderr)".into(),
            ),
            None => (ErrorType::NonzeroExit, format!("exit status {code}")),
        },
        Termination::Signaled(sig) => match violation() {
            Some(v) => (
                ErrorType::SandboxViolation,
                format!("killed by signal {sig}: {v}"),
            ),
            None => (ErrorType::KilledBySignal, format!("killed by signal {sig}")),
        },
        Termination::TimedOut => (
            ErrorType::CommandTimeout,
            format!(
                "timed out after {timeout_ms} ms; the command and all its children were killed"
            ),
        ),
        Termination::OutputLimit => (
            ErrorType::OutputLimit,
            format!(
                "output passed the hard limit of {} bytes; the command was stopped",
                ctx.hard_limit_bytes
            ),
        ),
        Termination::Cancelled => (
            ErrorType::Cancelled,
            "cancelled; the command and all its children were killed".into(),
        ),
    };
    r.set_error(error_type, message);
    r
}

/// In a read-only run a write refused inside the root is the sandbox's
/// doing, not the program's: said so, so the model does not retry it.
fn refused_write(stderr: &str) -> Option<String> {
    let line = stderr.lines().take(200).find(|l| {
        let l = l.to_ascii_lowercase();
        l.contains("permission denied") || l.contains("read-only file system")
    })?;
    let clipped: String = line.chars().take(200).collect();
    Some(format!(
        "a write was refused: this run could only read the project (the policy classes the command read-only, or the policy itself is read-only): {clipped}"
    ))
}

/// The result of a command that could not be started.
fn spawn_failure(e: ExecError, call_id: &str) -> ToolResult {
    match e {
        ExecError::Spawn(SpawnError::NotFound(p)) => {
            let mut r = ToolResult::refusal(
                call_id,
                ErrorType::CommandNotFound,
                format!("program not found: {p}"),
            );
            r.exit_code = Some(127);
            r
        }
        ExecError::Spawn(SpawnError::NotExecutable(p)) => {
            let mut r = ToolResult::refusal(
                call_id,
                ErrorType::SandboxViolation,
                format!(
                    "{p} cannot be executed: it is not executable or lies outside the sandbox's executable paths"
                ),
            );
            r.exit_code = Some(126);
            r
        }
        ExecError::Spawn(e @ SpawnError::Setup { .. }) => ToolResult::refusal(
            call_id,
            ErrorType::SandboxUnavailable,
            format!("the sandbox could not be applied, so nothing ran: {e}"),
        ),
        e => ToolResult::refusal(call_id, ErrorType::InternalError, e.to_string()),
    }
}
