//! The service core: request → decision → sandboxed run → ToolResult → trace.
//!
//! Every transport (the one-shot CLI, the Unix-socket daemon) builds one
//! `Service` and calls [`Service::call`], so validation, policy, sandbox,
//! limits, idempotency, budgets and traces cannot differ between them.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::exec::{self, CancelToken, ExecOutcome, ExecSpec, Termination};
use crate::policy::{Context, Decision, Policy, Verdict};
use crate::request::{CommandSpec, RunRequest};
use crate::result::{ErrorType, ToolResult};
use crate::sandbox::{self, Sandbox, Supervisor};
use crate::store::{Begin, Store};
use crate::trace::{self, ReplayAnswer, Replayer, Tracer};

/// Who answers `require_approval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approver {
    /// Nobody: approval-required requests are refused (`APPROVAL_REQUIRED`).
    None,
    /// A human on the controlling terminal, asked per request.
    Tty,
}

/// Where results come from instead of running, when replaying a recording.
pub struct Replay {
    pub replayer: Replayer,
    /// Lenient replay runs calls it has no recording for; strict refuses.
    pub lenient: bool,
    /// Lenient replay may run read-only misses; mutating ones only with this.
    pub allow_live_writes: bool,
}

pub struct ServiceConfig {
    pub policy: Policy,
    /// The project root; canonicalized by `Service::new`.
    pub root: PathBuf,
    /// Idempotency keys and budgets survive restarts here (daemon).
    pub state_dir: Option<PathBuf>,
    /// Refuse mutating requests without an idempotency key (daemon).
    pub require_idempotency: bool,
    pub approver: Approver,
    /// One trace for every call of this service (CLI `--trace`/`--record`).
    pub tracer: Option<Arc<Tracer>>,
    /// One trace per session under a directory (daemon).
    pub trace_dir: Option<trace::TraceDir>,
    pub replay: Option<Replay>,
}

impl ServiceConfig {
    pub fn new(policy: Policy, root: PathBuf) -> Self {
        ServiceConfig {
            policy,
            root,
            state_dir: None,
            require_idempotency: false,
            approver: Approver::None,
            tracer: None,
            trace_dir: None,
            replay: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("project root {path}: {source}")]
    Root {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("project root {0} is not a directory")]
    RootNotDir(PathBuf),
    #[error(transparent)]
    Sandbox(#[from] sandbox::SandboxError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("secret pattern in the policy's [env] is not a valid regex: {0}")]
    SecretPattern(#[from] regex::Error),
}

/// The environment the child starts from, computed once: the supervisor's
/// environment does not change while it runs.
struct BaseEnv {
    /// `NAME=value` entries from the keep-list and the policy's fixed values.
    entries: Vec<(String, String)>,
    /// Names present in the supervisor's environment and withheld because
    /// they look secret (whether or not the keep-list named them).
    scrubbed: Vec<String>,
}

pub struct Service {
    policy: Arc<Policy>,
    root: PathBuf,
    sandbox: Sandbox,
    store: Option<Store>,
    require_idempotency: bool,
    approver: Approver,
    tracer: Option<Arc<Tracer>>,
    trace_dir: Option<trace::TraceDir>,
    replay: Option<Replay>,
    base_env: BaseEnv,
    /// bash, for requests that need a shell; None when the host has none.
    shell: Option<CString>,
    call_prefix: String,
    calls: AtomicU64,
}

/// The `run_shell` tool's JSON Schema, as handed to a model.
pub fn tool_schema() -> Value {
    json!({
        "name": "run_shell",
        "description": "Run one shell command inside the project root under a sandbox and return a structured result (ok, exit_code, stdout, stderr, error_type, suggestion). Commands outside the policy are refused with a reason.",
        "parameters": {
            "type": "object",
            "additionalProperties": false,
            "required": ["command"],
            "properties": {
                "command": {"type": "string", "minLength": 1, "description": "The shell command line to run."},
                "cwd": {"type": "string", "description": "Working directory, relative to the project root."},
                "timeout_ms": {"type": "integer", "minimum": 1, "description": "Wall-clock limit; capped by the policy."},
                "stdin": {"type": "string", "description": "Text given to the command on standard input."},
                "output_chars": {"type": "integer", "minimum": 1, "description": "Characters kept per stream; capped by the policy."}
            }
        }
    })
}

/// SHA-256 of the canonical tool schema: traces and replays bind to it.
pub fn tool_schema_sha256() -> String {
    trace::args_hash(&tool_schema())
}

/// The header every trace of this service starts with: traces bind to the
/// policy and tool schema they were made under.
pub fn trace_header(policy: &Policy) -> trace::TraceHeader {
    trace::TraceHeader {
        policy_name: policy.name.clone(),
        policy_sha256: policy.sha256.clone(),
        tool_schema_sha256: tool_schema_sha256(),
        landlock_abi: sandbox::landlock_abi(),
    }
}

/// Trace options shared by every transport: the values of the supervisor's
/// secret-looking variables are redacted wherever they would appear.
pub fn trace_options(
    policy: &Policy,
    record_full: bool,
    rotate_bytes: Option<u64>,
) -> trace::TraceOptions {
    let secret_names = std::env::vars_os()
        .filter_map(|(k, _)| k.to_str().map(str::to_string))
        .filter(|k| policy.is_secret_name(k))
        .collect();
    trace::TraceOptions {
        record_full: record_full || policy.trace.record_full,
        secret_names,
        rotate_bytes,
    }
}

/// The sandbox configuration a policy asks for. The readable system
/// directories come from the policy crate, the one list both the policy's
/// path checks and the kernel's rules are built from.
pub fn sandbox_config(p: &crate::policy::SandboxPolicy) -> agent_exec_sandbox::SandboxConfig {
    use crate::policy::Enforcement;
    agent_exec_sandbox::SandboxConfig {
        enforcement: match p.enforcement {
            Enforcement::Strict => agent_exec_sandbox::Enforcement::Strict,
            Enforcement::BestEffort => agent_exec_sandbox::Enforcement::BestEffort,
        },
        system_read: crate::policy::SYSTEM_READ_DIRS
            .iter()
            .map(std::path::PathBuf::from)
            .collect(),
        read: p.read.clone(),
        write: p.write.clone(),
        connect_ports: p.connect_ports.clone(),
        bind_ports: p.bind_ports.clone(),
        run_as: p.run_as.clone(),
        allow_root_child: p.allow_root_child,
        rlimit_nofile: p.rlimit_nofile,
        rlimit_fsize_bytes: p.rlimit_fsize_bytes,
        rlimit_as_bytes: p.rlimit_as_bytes,
        rlimit_nproc: p.rlimit_nproc,
        rlimit_cpu_seconds: p.rlimit_cpu_seconds,
        pids_max: p.pids_max,
        memory_max_bytes: p.memory_max_bytes,
    }
}

impl Service {
    pub fn new(cfg: ServiceConfig, supervisor: &Supervisor) -> Result<Service, ServiceError> {
        let root = std::fs::canonicalize(&cfg.root).map_err(|source| ServiceError::Root {
            path: cfg.root.clone(),
            source,
        })?;
        if !root.is_dir() {
            return Err(ServiceError::RootNotDir(root));
        }
        let sandbox = Sandbox::prepare(supervisor, &sandbox_config(&cfg.policy.sandbox), &root)?;
        let store = match &cfg.state_dir {
            Some(dir) => Some(Store::open(dir)?),
            None => None,
        };
        let base_env = base_env(&cfg.policy);
        let pid = std::process::id();
        Ok(Service {
            policy: Arc::new(cfg.policy),
            root,
            sandbox,
            store,
            require_idempotency: cfg.require_idempotency,
            approver: cfg.approver,
            tracer: cfg.tracer,
            trace_dir: cfg.trace_dir,
            replay: cfg.replay,
            base_env,
            shell: crate::policy::SHELL_PATHS
                .iter()
                .find(|p| Path::new(p).is_file())
                .and_then(|p| CString::new(*p).ok()),
            call_prefix: format!("c{:x}{:x}", pid, unix_millis()),
            calls: AtomicU64::new(0),
        })
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    pub fn replay_summary(&self) -> Option<trace::ReplaySummary> {
        self.replay.as_ref().map(|r| r.replayer.summary())
    }

    /// What a client needs before its first call.
    pub fn describe(&self) -> Value {
        let l = &self.policy.limits;
        json!({
            "tool": tool_schema(),
            "tool_schema_sha256": tool_schema_sha256(),
            "policy": {"name": self.policy.name, "sha256": self.policy.sha256, "default": self.policy.default},
            "limits": {
                "timeout_ms": l.timeout_ms,
                "max_timeout_ms": l.max_timeout_ms,
                "output_chars": l.output_chars,
                "output_hard_limit_bytes": l.output_hard_limit_bytes,
                "max_stdin_bytes": l.max_stdin_bytes,
                "max_command_bytes": l.max_command_bytes,
            },
            "budget": {"max_mutating_runs": self.policy.budget.max_mutating_runs, "max_wall_ms": self.policy.budget.max_wall_ms},
            "sandbox": crate::result::SandboxSummary::from(self.sandbox.summary()),
            "version": env!("CARGO_PKG_VERSION"),
        })
    }

    fn next_call_id(&self) -> String {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        format!("{}-{}", self.call_prefix, n)
    }

    /// Runs one call through the whole pipeline. Never panics on input; every
    /// outcome, including refusals and internal failures, is a ToolResult.
    pub fn call(&self, req: RunRequest, cancel: &CancelToken) -> ToolResult {
        let call_id = self.next_call_id();
        let tracer = self.tracer_for(req.session.as_deref());
        let args = args_json(&req);
        let args_hash = trace::args_hash(&args);
        let timeout_ms = req.timeout_ms.unwrap_or(self.policy.limits.timeout_ms);
        if let Some(t) = &tracer {
            t.tool_call(
                &call_id,
                req.session.as_deref(),
                "run_shell",
                &args,
                timeout_ms,
            );
        }
        let result = self.call_inner(&call_id, &req, &args_hash, tracer.as_deref(), cancel);
        if let Some(t) = &tracer {
            t.tool_result(&call_id, &result);
        }
        result
    }

    fn tracer_for(&self, session: Option<&str>) -> Option<Arc<Tracer>> {
        if let Some(t) = &self.tracer {
            return Some(t.clone());
        }
        let dir = self.trace_dir.as_ref()?;
        match dir.for_session(session.unwrap_or("default")) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::error!(error = %e, "cannot open the session trace");
                None
            }
        }
    }

    fn call_inner(
        &self,
        call_id: &str,
        req: &RunRequest,
        args_hash: &str,
        tracer: Option<&Tracer>,
        cancel: &CancelToken,
    ) -> ToolResult {
        if let Err(r) = self.validate(call_id, req) {
            return *r;
        }
        let cwd = match self.resolve_cwd(call_id, req.cwd.as_deref()) {
            Ok(c) => c,
            Err(r) => return *r,
        };
        let ctx = Context {
            root: &self.root,
            cwd: &cwd,
        };
        let decision = match self.policy.decide(&req.command, &ctx) {
            Ok(d) => d,
            Err(e) => {
                let mut r = ToolResult::refusal(
                    call_id,
                    ErrorType::ParseError,
                    format!("cannot parse the command: {e}"),
                );
                r.decided_by = e.position().map(|p| format!("byte {p}"));
                return r;
            }
        };

        // Replay answers before anything can run or be asked.
        if let Some(replay) = &self.replay {
            match replay.replayer.answer("run_shell", args_hash) {
                ReplayAnswer::Recorded(mut recorded) => {
                    recorded.call_id = call_id.to_string();
                    if let Some(t) = tracer {
                        t.policy_decision(call_id, &decision, false, None);
                    }
                    return recorded;
                }
                ReplayAnswer::Unrecorded => {
                    let live_ok =
                        replay.lenient && (decision.read_only || replay.allow_live_writes);
                    if !live_ok {
                        let mut r = ToolResult::refusal(
                            call_id,
                            ErrorType::UnrecordedCall,
                            "replay has no recorded result for this call, so nothing ran",
                        );
                        apply_decision(&mut r, &decision);
                        return r;
                    }
                }
            }
        }

        let mut approval_asked = false;
        let mut approved = None;
        if decision.verdict == Verdict::RequireApproval && self.approver == Approver::Tty {
            approval_asked = true;
            approved = Some(ask_tty(req, &decision));
        }
        if let Some(t) = tracer {
            t.policy_decision(call_id, &decision, approval_asked, approved);
        }
        match decision.verdict {
            Verdict::Deny => {
                let mut r = ToolResult::refusal(
                    call_id,
                    ErrorType::PermissionDenied,
                    format!("refused by policy: {}", decision.reason),
                );
                apply_decision(&mut r, &decision);
                return r;
            }
            Verdict::RequireApproval if approved != Some(true) => {
                let msg = if approval_asked {
                    format!(
                        "the human did not approve this command ({})",
                        decision.reason
                    )
                } else {
                    format!(
                        "this command needs a human's approval and this run is non-interactive: {}",
                        decision.reason
                    )
                };
                let mut r = ToolResult::refusal(call_id, ErrorType::ApprovalRequired, msg);
                apply_decision(&mut r, &decision);
                r.approval_required = true;
                r.approved = approved;
                return r;
            }
            _ => {}
        }

        // Idempotency and budget: only mutating calls spend anything.
        let mutating = !decision.read_only;
        let key = req.idempotency_key.as_deref();
        if mutating && self.require_idempotency && key.is_none() {
            let mut r = ToolResult::refusal(
                call_id,
                ErrorType::InvalidArguments,
                "args: this command changes state, so the request must carry an idempotency_key (8-128 characters) that you reuse only to retry the same call",
            );
            apply_decision(&mut r, &decision);
            return r;
        }
        let mut reserved = None;
        if let (Some(store), Some(key)) = (&self.store, key) {
            match store.begin(key, args_hash) {
                Ok(Begin::Fresh) => reserved = Some(key),
                Ok(Begin::Duplicate(mut stored)) => {
                    stored.duplicate = true;
                    return stored;
                }
                Ok(Begin::KeyReuse { stored_args_hash }) => {
                    let mut r = ToolResult::refusal(
                        call_id,
                        ErrorType::InvalidArguments,
                        format!(
                            "idempotency_key: this key was already used for different arguments (args hash {stored_args_hash}); use a new key for a new call"
                        ),
                    );
                    apply_decision(&mut r, &decision);
                    return r;
                }
                Ok(Begin::InFlight) => {
                    let mut r = ToolResult::refusal(
                        call_id,
                        ErrorType::Busy,
                        "idempotency_key: a call with this key is still running; wait for its result",
                    );
                    apply_decision(&mut r, &decision);
                    return r;
                }
                Err(e) => return internal(call_id, format!("state store: {e}")),
            }
        }
        let session = req.session.as_deref().unwrap_or("default");
        if mutating && let Some(store) = &self.store {
            match store.budget_check(session, &self.policy.budget) {
                Ok(Some(reason)) => {
                    let mut r = ToolResult::refusal(call_id, ErrorType::BudgetExhausted, reason);
                    apply_decision(&mut r, &decision);
                    self.release(reserved, args_hash, &r);
                    return r;
                }
                Ok(None) => {}
                Err(e) => return internal(call_id, format!("state store: {e}")),
            }
        }

        let mut result = self.execute(call_id, req, &decision, &cwd, cancel);
        apply_decision(&mut result, &decision);
        result.approval_required = decision.verdict == Verdict::RequireApproval;
        result.approved = approved;
        if let Some(store) = &self.store {
            if mutating && let Err(e) = store.budget_charge(session, true, result.duration_ms) {
                tracing::error!(error = %e, "cannot charge the session budget");
            }
        }
        self.release(reserved, args_hash, &result);
        result
    }

    fn release(&self, reserved: Option<&str>, args_hash: &str, result: &ToolResult) {
        if let (Some(store), Some(key)) = (&self.store, reserved)
            && let Err(e) = store.finish(key, args_hash, result)
        {
            tracing::error!(error = %e, "cannot store the idempotent result");
        }
    }

    fn validate(&self, call_id: &str, req: &RunRequest) -> Result<(), Box<ToolResult>> {
        let l = &self.policy.limits;
        let bad = |msg: String| {
            Err(Box::new(ToolResult::refusal(
                call_id,
                ErrorType::InvalidArguments,
                msg,
            )))
        };
        match &req.command {
            CommandSpec::Shell(s) if s.trim().is_empty() => return bad("command: empty".into()),
            CommandSpec::Shell(s) if s.len() > l.max_command_bytes => {
                return bad(format!(
                    "command: {} bytes, the limit is {}",
                    s.len(),
                    l.max_command_bytes
                ));
            }
            CommandSpec::Argv(v) if v.is_empty() => return bad("command: empty argv".into()),
            CommandSpec::Argv(v)
                if v.iter().map(|a| a.len() + 1).sum::<usize>() > l.max_command_bytes =>
            {
                return bad(format!(
                    "command: longer than the limit of {} bytes",
                    l.max_command_bytes
                ));
            }
            _ => {}
        }
        if let CommandSpec::Shell(s) = &req.command
            && s.contains('\0')
        {
            return bad("command: contains a NUL byte".into());
        }
        if let CommandSpec::Argv(v) = &req.command
            && v.iter().any(|a| a.contains('\0'))
        {
            return bad("command: an argument contains a NUL byte".into());
        }
        if let Some(t) = req.timeout_ms {
            if t == 0 {
                return bad("timeout_ms: must be at least 1".into());
            }
            if t > l.max_timeout_ms {
                return bad(format!(
                    "timeout_ms: {t} is above the policy's maximum of {} ms",
                    l.max_timeout_ms
                ));
            }
        }
        if let Some(s) = &req.stdin
            && s.len() > l.max_stdin_bytes
        {
            return bad(format!(
                "stdin: {} bytes, the limit is {}",
                s.len(),
                l.max_stdin_bytes
            ));
        }
        if req.output_chars == Some(0) {
            return bad("output_chars: must be at least 1".into());
        }
        Ok(())
    }

    fn resolve_cwd(&self, call_id: &str, cwd: Option<&str>) -> Result<PathBuf, Box<ToolResult>> {
        resolve_cwd(&self.root, cwd, call_id)
    }

    fn execute(
        &self,
        call_id: &str,
        req: &RunRequest,
        decision: &Decision,
        cwd: &Path,
        cancel: &CancelToken,
    ) -> ToolResult {
        let started = Instant::now();
        let argv = match self.argv_for(req, decision, cwd) {
            Ok(a) => a,
            Err(r) => return *r.with_call_id(call_id),
        };
        let run = match self.sandbox.for_run() {
            Ok(r) => Arc::new(r),
            Err(e) => {
                return ToolResult::refusal(
                    call_id,
                    ErrorType::SandboxUnavailable,
                    format!("the sandbox could not be prepared for this run, so nothing ran: {e}"),
                );
            }
        };
        let mut env: Vec<CString> = Vec::with_capacity(self.base_env.entries.len() + 8);
        let mut push = |k: &str, v: &str| {
            if let Ok(c) = CString::new(format!("{k}={v}")) {
                env.push(c);
            }
        };
        push("PATH", &self.policy.env.path);
        for (k, v) in &self.base_env.entries {
            push(k, v);
        }
        let home = run.home().to_string_lossy().into_owned();
        push("HOME", &home);
        push("TMPDIR", &home);
        for (k, v) in run.extra_env() {
            push(&k, &v);
        }
        let (program, argv) = argv;
        let Ok(cwd_c) = CString::new(cwd.as_os_str().as_bytes()) else {
            return internal(call_id, "cwd contains a NUL byte".into());
        };
        let limits = &self.policy.limits;
        let output_chars = req
            .output_chars
            .map_or(limits.output_chars, |n| n.min(limits.output_chars));
        let timeout_ms = req
            .timeout_ms
            .unwrap_or(limits.timeout_ms)
            .min(limits.max_timeout_ms);
        let spec = ExecSpec {
            program,
            argv,
            env,
            cwd: cwd_c,
            sandbox: run.clone(),
            stdin: req.stdin.as_ref().map(|s| s.as_bytes().to_vec()),
            timeout: Duration::from_millis(timeout_ms),
            kill_grace: Duration::from_millis(limits.kill_grace_ms),
            drain: Duration::from_millis(limits.drain_ms),
            output_chars,
            hard_limit_bytes: limits.output_hard_limit_bytes,
        };
        let mut result = ToolResult::refusal(call_id, ErrorType::InternalError, "");
        result.env_scrubbed = self.base_env.scrubbed.clone();
        result.sandbox = Some(run.summary().into());
        match exec::run(spec, cancel) {
            Ok(outcome) => self.fill_outcome(&mut result, outcome, timeout_ms, decision),
            Err(exec::ExecError::Spawn(sandbox::SpawnError::NotFound(p))) => {
                result.set_error(
                    ErrorType::CommandNotFound,
                    format!("program not found: {p}"),
                );
                result.exit_code = Some(127);
            }
            Err(exec::ExecError::Spawn(sandbox::SpawnError::NotExecutable(p))) => {
                result.set_error(
                    ErrorType::SandboxViolation,
                    format!("{p} cannot be executed: it is not executable or lies outside the sandbox's executable paths"),
                );
                result.exit_code = Some(126);
            }
            Err(exec::ExecError::Spawn(e @ sandbox::SpawnError::Setup { .. })) => {
                result.set_error(
                    ErrorType::SandboxUnavailable,
                    format!("the sandbox could not be applied, so nothing ran: {e}"),
                );
            }
            Err(e) => result.set_error(ErrorType::InternalError, e.to_string()),
        }
        if result.duration_ms == 0 {
            result.duration_ms = started.elapsed().as_millis() as u64;
        }
        result
    }

    /// The program and argv to exec: the words themselves when the request
    /// is one plain command, `/bin/sh -c` otherwise (only after the policy
    /// passed every part).
    fn argv_for(
        &self,
        req: &RunRequest,
        decision: &Decision,
        cwd: &Path,
    ) -> Result<(CString, Vec<CString>), Box<ToolResult>> {
        let words: Vec<String> = match (&req.command, decision.needs_shell) {
            (CommandSpec::Shell(s), true) => {
                let Some(shell) = &self.shell else {
                    return Err(Box::new(ToolResult::refusal(
                        "",
                        ErrorType::SandboxUnavailable,
                        "this command needs a shell and no bash was found (/bin/bash, /usr/bin/bash); send one plain command instead",
                    )));
                };
                // bash, because the lexer and the policy read the request with
                // bash's grammar; `-p` keeps BASH_ENV, ENV and exported
                // functions from running anything before the checked string.
                return Ok((
                    shell.clone(),
                    vec![
                        c"bash".to_owned(),
                        c"-p".to_owned(),
                        c"-c".to_owned(),
                        cstring(s)?,
                    ],
                ));
            }
            // The words exactly as the policy saw them: the same lexer, so
            // what runs is what was checked.
            (CommandSpec::Shell(s), false) => match crate::lexer::lex(s) {
                Ok(script) if script.commands.len() == 1 => script.commands[0]
                    .words
                    .iter()
                    .map(|w| w.value.clone())
                    .collect(),
                Ok(_) => {
                    return Err(Box::new(ToolResult::refusal(
                        "",
                        ErrorType::InternalError,
                        "the policy and the lexer disagree on this command's shape; nothing ran",
                    )));
                }
                Err(e) => {
                    return Err(Box::new(ToolResult::refusal(
                        "",
                        ErrorType::ParseError,
                        format!("cannot parse the command: {e}"),
                    )));
                }
            },
            (CommandSpec::Argv(v), _) => v.clone(),
        };
        let Some(first) = words.first() else {
            return Err(Box::new(ToolResult::refusal(
                "",
                ErrorType::InvalidArguments,
                "command: empty",
            )));
        };
        let program: PathBuf = if first.contains('/') {
            cwd.join(first)
        } else {
            match crate::policy::resolve_program(first, &self.policy.env.path) {
                Some(p) => p,
                None => {
                    let mut r = ToolResult::refusal(
                        "",
                        ErrorType::CommandNotFound,
                        format!(
                            "{first}: not found on the policy's PATH ({})",
                            self.policy.env.path
                        ),
                    );
                    r.exit_code = Some(127);
                    return Err(Box::new(r));
                }
            }
        };
        let program = CString::new(program.as_os_str().as_bytes()).map_err(|_| {
            ToolResult::refusal("", ErrorType::InvalidArguments, "command: NUL byte")
        })?;
        let argv = words
            .iter()
            .map(|w| cstring(w))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((program, argv))
    }

    fn fill_outcome(
        &self,
        r: &mut ToolResult,
        o: ExecOutcome,
        timeout_ms: u64,
        decision: &Decision,
    ) {
        r.duration_ms = o.duration.as_millis() as u64;
        r.stdout = o.stdout.text;
        r.stderr = o.stderr.text;
        r.stdout_bytes = o.stdout.bytes;
        r.stderr_bytes = o.stderr.bytes;
        r.stdout_truncated = o.stdout.truncated;
        r.stderr_truncated = o.stderr.truncated;
        r.exit_code = o.exit_code;
        r.signal = o.signal;
        let violation =
            || sandbox::attribute_violation(o.exit_code, o.signal, &r.stderr, &self.root);
        match o.termination {
            Termination::Exited(0) => {
                r.ok = true;
                r.error_type = None;
                r.message = String::new();
                r.recoverable = true;
                r.suggestion = None;
            }
            Termination::Exited(code) => {
                if let Some(v) = violation() {
                    r.set_error(
                        ErrorType::SandboxViolation,
                        format!("exit status {code}: {v}"),
                    );
                } else if code == 127 && decision.needs_shell {
                    r.set_error(
                        ErrorType::CommandNotFound,
                        "exit status 127: the shell could not find a program (see stderr)",
                    );
                } else if code == 126 {
                    r.set_error(
                        ErrorType::NonzeroExit,
                        "exit status 126: a program could not be executed (see stderr)",
                    );
                } else {
                    r.set_error(ErrorType::NonzeroExit, format!("exit status {code}"));
                }
            }
            Termination::Signaled(sig) => {
                if let Some(v) = violation() {
                    r.set_error(
                        ErrorType::SandboxViolation,
                        format!("killed by signal {sig}: {v}"),
                    );
                } else {
                    r.set_error(ErrorType::KilledBySignal, format!("killed by signal {sig}"));
                }
            }
            Termination::TimedOut => r.set_error(
                ErrorType::CommandTimeout,
                format!(
                    "timed out after {timeout_ms} ms; the command and all its children were killed"
                ),
            ),
            Termination::OutputLimit => r.set_error(
                ErrorType::OutputLimit,
                format!(
                    "output passed the hard limit of {} bytes; the command was stopped",
                    self.policy.limits.output_hard_limit_bytes
                ),
            ),
            Termination::Cancelled => r.set_error(
                ErrorType::Cancelled,
                "cancelled; the command and all its children were killed",
            ),
        }
    }
}

trait WithCallId {
    fn with_call_id(self, call_id: &str) -> Self;
}

impl WithCallId for Box<ToolResult> {
    fn with_call_id(self, call_id: &str) -> Self {
        let mut r = self;
        r.call_id = call_id.to_string();
        r
    }
}

fn cstring(s: &str) -> Result<CString, Box<ToolResult>> {
    CString::new(s).map_err(|_| {
        Box::new(ToolResult::refusal(
            "",
            ErrorType::InvalidArguments,
            "command: contains a NUL byte",
        ))
    })
}

fn internal(call_id: &str, message: String) -> ToolResult {
    ToolResult::refusal(call_id, ErrorType::InternalError, message)
}

fn apply_decision(r: &mut ToolResult, d: &Decision) {
    r.policy_decision = Some(d.verdict);
    r.risk_level = Some(d.risk);
    r.risk_reason = Some(d.reason.clone());
    r.matched_rule = Some(d.rule.clone());
    if r.decided_by.is_none() {
        r.decided_by = d.token.clone();
    }
    r.approval_required = d.verdict == Verdict::RequireApproval;
}

/// The working directory: the root, or a directory inside it. Symlinks
/// are resolved before the containment check, so a link cannot lead out.
pub fn resolve_cwd(
    root: &Path,
    cwd: Option<&str>,
    call_id: &str,
) -> Result<PathBuf, Box<ToolResult>> {
    let Some(cwd) = cwd.filter(|c| !c.is_empty()) else {
        return Ok(root.to_path_buf());
    };
    let joined = root.join(cwd);
    let refuse = |msg: String| {
        let mut r = ToolResult::refusal(call_id, ErrorType::PermissionDenied, msg);
        r.decided_by = Some(cwd.to_string());
        r.matched_rule = Some("builtin:cwd-outside-root".into());
        r
    };
    match std::fs::canonicalize(&joined) {
        Ok(p) if p.starts_with(root) && p.is_dir() => Ok(p),
        Ok(p) if !p.starts_with(root) => Err(Box::new(refuse(format!(
            "cwd {cwd:?} resolves to {} which is outside the project root {}",
            p.display(),
            root.display()
        )))),
        Ok(_) => Err(Box::new(ToolResult::refusal(
            call_id,
            ErrorType::InvalidArguments,
            format!("cwd: {cwd:?} is not a directory"),
        ))),
        Err(_) => Err(Box::new(ToolResult::refusal(
            call_id,
            ErrorType::InvalidArguments,
            format!("cwd: {cwd:?} does not exist inside the project root"),
        ))),
    }
}

/// The canonical arguments of a call: what idempotency keys, replay and
/// traces hash. Fields that do not change what runs (session, key) are left
/// out.
pub fn args_json(req: &RunRequest) -> Value {
    let mut m = serde_json::Map::new();
    match &req.command {
        CommandSpec::Shell(s) => m.insert("command".into(), Value::String(s.clone())),
        CommandSpec::Argv(v) => m.insert("argv".into(), json!(v)),
    };
    if let Some(c) = &req.cwd {
        m.insert("cwd".into(), Value::String(c.clone()));
    }
    if let Some(t) = req.timeout_ms {
        m.insert("timeout_ms".into(), json!(t));
    }
    if let Some(s) = &req.stdin {
        m.insert("stdin".into(), Value::String(s.clone()));
    }
    if let Some(o) = req.output_chars {
        m.insert("output_chars".into(), json!(o));
    }
    Value::Object(m)
}

fn base_env(policy: &Policy) -> BaseEnv {
    let keeps = |name: &str| {
        policy.env.keep.iter().any(|k| match k.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == k,
        })
    };
    let mut entries = Vec::new();
    let mut scrubbed = Vec::new();
    for (k, v) in std::env::vars_os() {
        let (Some(k), Some(v)) = (k.to_str(), v.to_str()) else {
            continue;
        };
        if policy.is_secret_name(k) {
            scrubbed.push(k.to_string());
        } else if keeps(k) && !matches!(k, "PATH" | "HOME" | "TMPDIR") {
            entries.push((k.to_string(), v.to_string()));
        }
    }
    for (k, v) in &policy.env.set {
        if policy.is_secret_name(k) {
            scrubbed.push(k.clone());
        } else if !matches!(k.as_str(), "PATH" | "HOME" | "TMPDIR") {
            entries.retain(|(n, _)| n != k);
            entries.push((k.clone(), v.clone()));
        }
    }
    scrubbed.sort();
    scrubbed.dedup();
    BaseEnv { entries, scrubbed }
}

/// Asks the human at the controlling terminal. Anything but an explicit
/// yes is a no; so is the absence of a terminal.
fn ask_tty(req: &RunRequest, d: &Decision) -> bool {
    use std::io::{BufRead, BufReader, Write};
    let Ok(mut tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return false;
    };
    let shown = match &req.command {
        CommandSpec::Shell(s) => s.clone(),
        CommandSpec::Argv(v) => shell_words::join(v),
    };
    let _ = write!(
        tty,
        "agent-exec: approval required ({:?} risk, rule {}): {}\n  command: {}\nRun it? [y/N] ",
        d.risk, d.rule, d.reason, shown
    );
    let _ = tty.flush();
    let mut line = String::new();
    if BufReader::new(&mut tty).read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes")
}

fn unix_millis() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}
