//! Stages 6 and 7: run the invocation in its sandbox, then classify what
//! happened into a result a model can act on.

use std::path::Path;
use std::time::Instant;

use super::invocation::Invocation;
use crate::result::{ErrorType, ToolResult};
use crate::sandbox::SpawnError;
use crate::sandbox::{
    self, CancelToken, ExecError, ExecOutcome, MemoryLimitHit, RootAccess, Termination,
    ViolationKind,
};

/// What the classifier needs to know besides the outcome itself.
pub(crate) struct RunContext<'a> {
    pub(crate) call_id: &'a str,
    pub(crate) root: &'a Path,
    /// The command ran under `bash -p -c`, so exit 127 is the shell's "not
    /// found".
    pub(crate) needs_shell: bool,
    /// The program whose status is the command's (see `answer`).
    pub(crate) last_program: Option<String>,
    pub(crate) hard_limit_bytes: u64,
    /// The longest timeout a request may ask for, for the timeout message.
    pub(crate) max_timeout_ms: u64,
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
    // The run's user cannot write the root (a `run_as` or `nobody` child
    // of a project it does not own): a refused write there is the setup's.
    let root_unwritable = sandbox
        .warnings
        .iter()
        .any(|w| w.contains("cannot write the root"))
        .then_some(sandbox.uid);
    let mut result = match sandbox::run(spec, cancel) {
        Ok(outcome) => classify(outcome, timeout_ms, read_only, root_unwritable, ctx),
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
/// run could not write the root; `root_unwritable`: the run's uid, when
/// it cannot write the root at all.
fn classify(
    o: ExecOutcome,
    timeout_ms: u64,
    read_only: bool,
    root_unwritable: Option<u32>,
    ctx: &RunContext<'_>,
) -> ToolResult {
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
    let violation = || match sandbox::classify_violation(o.signal, &r.stderr, ctx.root) {
        Some(v) if v.kind == ViolationKind::Network => Some((ErrorType::NetworkDisabled, v.detail)),
        Some(v) => Some((ErrorType::SandboxViolation, v.detail)),
        None => read_only
            .then(|| refused_write(&r.stderr))
            .flatten()
            .or_else(|| root_unwritable.and_then(|uid| unwritable_root(uid, &r.stderr)))
            .map(|d| (ErrorType::SandboxViolation, d)),
    };
    // The cap killed part of the run: whatever the rest did afterwards
    // (failed, hung until the deadline, or even exited 0 without the
    // killed part's work), that is what the model must know. Only a
    // cancellation, which the client asked for, says otherwise.
    if let Some(hit) = o.memory_limit
        && o.termination != Termination::Cancelled
    {
        r.set_error(ErrorType::MemoryLimit, memory_message(hit, o.termination));
        return r;
    }
    let (error_type, message) = match o.termination {
        Termination::Exited(0) => {
            // A pipeline's status is its last command's: an earlier one
            // the sandbox refused is said, and the call still succeeded.
            if let Some((_, v)) = violation() {
                r.message =
                    format!("exit status 0, but the sandbox refused part of the command: {v}");
            }
            return r;
        }
        Termination::Exited(code) => match violation() {
            Some((kind, v)) => (kind, format!("exit status {code}: {v}")),
            None if code == 127 && ctx.needs_shell => (
                ErrorType::CommandNotFound,
                "exit status 127: the shell could not find a program (see stderr)".into(),
            ),
            None if code == 126 => (
                ErrorType::NonzeroExit,
                "exit status 126: a program could not be executed (see stderr)".into(),
            ),
            None => match super::answer::no_match(ctx.last_program.as_deref(), code, &r.stderr) {
                Some(m) => (ErrorType::NoMatch, m),
                None => (ErrorType::NonzeroExit, format!("exit status {code}")),
            },
        },
        Termination::Signaled(sig) => match violation() {
            Some((kind, v)) => (kind, format!("killed by signal {sig}: {v}")),
            None => (ErrorType::KilledBySignal, format!("killed by signal {sig}")),
        },
        Termination::TimedOut => (
            ErrorType::CommandTimeout,
            timeout_message(timeout_ms, ctx.max_timeout_ms),
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

/// What a timeout did, and how much longer a request may ask for.
fn timeout_message(timeout_ms: u64, max_timeout_ms: u64) -> String {
    let more = if timeout_ms < max_timeout_ms {
        format!(
            "; this policy allows up to {max_timeout_ms} ms: send the request again with a larger timeout_ms (CLI: --timeout-ms)"
        )
    } else {
        format!("; that is this policy's maximum (max_timeout_ms = {max_timeout_ms})")
    };
    format!("timed out after {timeout_ms} ms; the command and all its children were killed{more}")
}

/// What the memory cap did, and how the run ended after it.
fn memory_message(hit: MemoryLimitHit, end: Termination) -> String {
    let MemoryLimitHit {
        max_bytes,
        oom_kills,
    } = hit;
    let ended = match end {
        Termination::Exited(c) => format!("the command then exited with status {c}"),
        Termination::Signaled(s) => format!("the command was killed by signal {s}"),
        Termination::TimedOut => "the rest of the command then ran past its deadline".into(),
        Termination::OutputLimit => "the command then passed the output limit".into(),
        Termination::Cancelled => "the call was cancelled".into(),
    };
    let processes = if oom_kills == 1 {
        "process"
    } else {
        "processes"
    };
    format!(
        "memory limit: the command's processes together passed the run's memory cap of {} MiB (memory_max_bytes = {max_bytes}) and the kernel killed {oom_kills} {processes} of it; {ended}",
        max_bytes >> 20
    )
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

/// A write refused in a root the run's uid cannot write: the setup chose
/// that uid, so it is said, with what to change.
fn unwritable_root(uid: u32, stderr: &str) -> Option<String> {
    let line = stderr
        .lines()
        .take(200)
        .find(|l| l.to_ascii_lowercase().contains("permission denied"))?;
    let clipped: String = line.chars().take(200).collect();
    Some(format!(
        "the run's user (uid {uid}) cannot write the project root, so its writes are refused; the operator can give the project to that user or set sandbox.run_as to its owner: {clipped}"
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::sandbox::Captured;

    fn outcome(termination: Termination, hit: Option<MemoryLimitHit>) -> ExecOutcome {
        let empty = Captured {
            text: String::new(),
            bytes: 0,
            truncated: false,
        };
        let (exit_code, signal) = match termination {
            Termination::Exited(c) => (Some(c), None),
            Termination::Signaled(s) => (None, Some(s)),
            _ => (None, None),
        };
        ExecOutcome {
            termination,
            exit_code,
            signal,
            stdout: empty.clone(),
            stderr: empty,
            duration: Duration::from_millis(5),
            memory_limit: hit,
        }
    }

    #[test]
    fn a_timeout_names_the_maximum_and_how_to_ask_for_it() {
        let m = timeout_message(120_000, 600_000);
        assert!(m.starts_with("timed out after 120000 ms"), "{m}");
        assert!(
            m.contains("up to 600000 ms") && m.contains("--timeout-ms"),
            "{m}"
        );
        let m = timeout_message(600_000, 600_000);
        assert!(
            m.contains("this policy's maximum (max_timeout_ms = 600000)"),
            "{m}"
        );
    }

    #[test]
    fn a_kill_by_the_memory_cap_is_reported_however_the_run_ended() {
        let ctx = RunContext {
            call_id: "c",
            root: Path::new("/nonexistent"),
            needs_shell: true,
            last_program: None,
            hard_limit_bytes: 1 << 20,
            max_timeout_ms: 2000,
            started: Instant::now(),
        };
        let hit = MemoryLimitHit {
            max_bytes: 256 << 20,
            oom_kills: 2,
        };
        for end in [
            Termination::Exited(0),
            Termination::Exited(1),
            Termination::Signaled(9),
            Termination::TimedOut,
        ] {
            let r = classify(outcome(end, Some(hit)), 1000, false, None, &ctx);
            assert_eq!(r.error_type, Some(ErrorType::MemoryLimit), "{end:?}");
            assert!(!r.ok && r.recoverable);
            assert!(r.message.contains("256 MiB"), "{}", r.message);
            assert!(r.message.contains("killed 2 processes"), "{}", r.message);
            // The command's own status is still there.
            assert_eq!(r.signal, outcome(end, None).signal);
        }
        // A cancellation the client asked for stays one.
        let r = classify(
            outcome(Termination::Cancelled, Some(hit)),
            1000,
            false,
            None,
            &ctx,
        );
        assert_eq!(r.error_type, Some(ErrorType::Cancelled));
        // No kill by the cap: as before.
        let r = classify(
            outcome(Termination::Signaled(9), None),
            1000,
            false,
            None,
            &ctx,
        );
        assert_eq!(r.error_type, Some(ErrorType::KilledBySignal));
        let r = classify(
            outcome(Termination::Exited(0), None),
            1000,
            false,
            None,
            &ctx,
        );
        assert!(r.ok);
    }
}
