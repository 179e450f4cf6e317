//! The service core: every transport (the one-shot CLI, the Unix-socket
//! daemon, an embedding program) builds one [`Service`] with
//! [`Service::builder`] and calls [`Service::call`], so validation, policy,
//! sandbox, limits, idempotency, budgets and traces cannot differ between
//! them.
//!
//! A call goes through one pipeline, each stage in its own module and each
//! returning either what the next stage needs or a typed `Refusal`, which
//! becomes a `ToolResult` in one place (`refusal.rs`):
//!
//! 1. `validate`: sizes and values against the policy's limits;
//! 2. `cwd`: the working directory, inside the root;
//! 3. `check`: the policy's decision (stages 1-3 are the [`Checker`]);
//! 4. `gate`: replay, approval, the verdict, idempotency, budget;
//! 5. `invocation`: environment, program and argv (direct exec, or
//!    `bash -p -c` for a command that needs a shell), limits;
//! 6. and 7. `outcome`: run in the sandbox, classify how it ended.
//!
//! [`terminal`] makes request text and output safe to show a person.

mod answer;
mod approve;
mod builder;
mod check;
mod cwd;
mod gate;
mod ids;
mod invocation;
mod outcome;
mod pending;
mod project_env;
mod provenance;
mod refusal;
mod schema;
pub mod terminal;
mod toolchains;
mod validate;

use std::ffi::CString;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

pub use approve::{Approval, ApprovalRequest, Approver, NeverApprover, TtyApprover, render};
pub use builder::{
    DEFAULT_UID_BUDGET_SESSIONS, ServiceBuilder, ServiceError, sandbox_config, trace_header,
    trace_options,
};
pub use check::Checker;
pub use ids::next_call_id;
pub use schema::{args_json, tool_schema, tool_schema_sha256};

use crate::policy::Policy;
use crate::request::{RunRequest, SessionId};
use crate::result::ToolResult;
use crate::sandbox::CancelToken;
use crate::sandbox::Sandbox;
use crate::store::{Budgets, StateStore};
use crate::trace::{self, Replayer, TraceSink};
use gate::{GateCall, Pass, Stop};
use invocation::BaseEnv;
use outcome::RunContext;

/// Where results come from instead of running, when replaying a recording.
/// Where a service keeps approvals: its state store and directory.
pub(crate) struct ApprovalHome {
    pub(crate) store: Arc<crate::store::SqliteStore>,
    pub(crate) dir: std::path::PathBuf,
}

pub(crate) struct Replay {
    pub(crate) replayer: Replayer,
    /// Lenient replay may run unrecorded calls that only read; writes only
    /// with this.
    pub(crate) allow_live_writes: bool,
}

impl Replay {
    /// Whether a call the recording does not have may run for real.
    fn may_run_live(&self, read_only: bool) -> bool {
        self.replayer.mode() == trace::ReplayMode::Lenient && (read_only || self.allow_live_writes)
    }
}

/// Runs `run_shell` calls under one policy, in one project root, in a
/// prepared sandbox. `Send + Sync`: one service serves concurrent calls.
pub struct Service {
    checker: Checker,
    policy: Arc<Policy>,
    sandbox: Sandbox,
    store: Option<Arc<dyn StateStore>>,
    /// The policy's budget per session, and what a uid may spend across
    /// its sessions.
    budgets: Budgets,
    require_idempotency: bool,
    approver: Box<dyn Approver>,
    trace: Option<Arc<dyn TraceSink>>,
    replay: Option<Replay>,
    base_env: BaseEnv,
    /// The run's PATH, virtualenv and git identity.
    project_env: project_env::ProjectEnv,
    /// bash, for requests that need a shell; None when the host has none.
    shell: Option<CString>,
    /// Out-of-band approvals, with a state directory.
    approvals: Option<ApprovalHome>,
    /// The policy with the amendments humans saved, when there is a state
    /// directory.
    amendments: Option<crate::approvals::LiveAmendments>,
    /// Per-session ledgers of what results showed; None when the policy's
    /// `[provenance]` mode is off.
    provenance: Option<crate::provenance::Provenance>,
}

impl Service {
    /// Starts configuring a service for `policy` in the project `root`.
    pub fn builder(policy: Policy, root: impl Into<std::path::PathBuf>) -> ServiceBuilder {
        ServiceBuilder::new(policy, root.into())
    }

    /// Runs one call through the whole pipeline, as a call of this
    /// process's own (effective) uid. Never panics on input; every outcome,
    /// including refusals and internal failures, is a `ToolResult`.
    /// `cancel` stops the command and all its descendants.
    pub fn call(&self, req: RunRequest, cancel: &CancelToken) -> ToolResult {
        self.call_as(nix::unistd::geteuid().as_raw(), req, cancel)
    }

    /// [`call`](Service::call) on behalf of the caller `uid`, as the
    /// transport established it (the daemon reads the peer's credentials
    /// from the kernel). The call's session is that uid with the request's
    /// label ([`SessionId`]): idempotency keys, budgets and per-session
    /// traces are kept per session, and budgets per uid as well.
    pub fn call_as(&self, uid: u32, req: RunRequest, cancel: &CancelToken) -> ToolResult {
        let call_id = next_call_id();
        let args = args_json(&req);
        let args_hash = trace::args_hash(&args);
        let session = SessionId::new(uid, req.session.as_deref());
        if let Some(t) = &self.trace {
            let deadline_ms = req.timeout_ms.unwrap_or(self.policy.limits.timeout_ms);
            t.tool_call(&call_id, &session, "run_shell", &args, deadline_ms);
        }
        let result = self.pipeline(&call_id, &req, &session, &args_hash, cancel);
        if let Some(t) = &self.trace {
            t.tool_result(&call_id, &session, &result);
        }
        result
    }

    /// validate → cwd → decide → gate → invocation → run → classify.
    fn pipeline(
        &self,
        call_id: &str,
        req: &RunRequest,
        session: &SessionId,
        args_hash: &str,
        cancel: &CancelToken,
    ) -> ToolResult {
        let policy = self.decision_policy();
        let checked = match self.checker.stages_under(&policy, req) {
            Ok(c) => c,
            Err(refusal) => return refusal.into_result(call_id, None),
        };
        let decision = &checked.decision;
        let tags = match self.provenance_tags(call_id, session, &checked) {
            Ok(t) => t,
            Err(r) => return *r,
        };
        let call = GateCall {
            call_id,
            req,
            session,
            args_hash,
            cwd: &checked.cwd,
            decision,
            policy: &policy,
        };
        let pass = match self.gate(&call) {
            Ok(p) => p,
            Err(Stop::Answer(r)) => {
                let mut r = *r;
                self.provenance_finish(session, req, &checked.cwd, tags, &mut r);
                return r;
            }
            Err(Stop::Refused { refusal, reserved }) => {
                let mut r = refusal.into_result(call_id, Some(decision));
                self.provenance_finish(session, req, &checked.cwd, tags, &mut r);
                self.settle_key(session, reserved, args_hash, &r);
                return r;
            }
        };
        let started = Instant::now();
        let mut result = match self.invocation(req, decision, &checked.cwd) {
            Ok(inv) => {
                let ctx = RunContext {
                    call_id,
                    root: self.checker.root(),
                    needs_shell: decision.needs_shell,
                    last_program: answer::last_program(&req.command),
                    hard_limit_bytes: self.policy.limits.output_hard_limit_bytes,
                    max_timeout_ms: self.policy.limits.max_timeout_ms,
                    started,
                };
                let mut r = outcome::run(inv, &ctx, cancel);
                refusal::apply_decision(&mut r, decision);
                r
            }
            Err(refusal) => refusal.into_result(call_id, Some(decision)),
        };
        result.approved = pass.approved;
        if let Some(id) = &pass.approval_id {
            result.approval_id = Some(id.clone());
        }
        self.provenance_finish(session, req, &checked.cwd, tags, &mut result);
        self.settle(&pass, session, args_hash, &result);
        result
    }

    /// After a run (or a refusal at the invocation stage): charge the
    /// session and store the result under the call's key.
    fn settle(&self, pass: &Pass<'_>, session: &SessionId, args_hash: &str, result: &ToolResult) {
        if pass.mutating
            && let Some(store) = &self.store
            && let Err(e) = store.budget_charge(session, true, result.duration_ms)
        {
            tracing::error!(error = %e, "cannot charge the session budget");
        }
        self.settle_key(session, pass.reserved, args_hash, result);
    }

    fn settle_key(
        &self,
        session: &SessionId,
        reserved: Option<&str>,
        args_hash: &str,
        result: &ToolResult,
    ) {
        if let (Some(store), Some(key)) = (&self.store, reserved)
            && let Err(e) = store.finish(session, key, args_hash, result)
        {
            tracing::error!(error = %e, "cannot store the idempotent result");
        }
    }

    /// The policy's decision for `req` without running anything: the
    /// first stages of [`call`](Service::call), under the policy as
    /// amended now. See [`Checker::check`].
    pub fn check(&self, req: &RunRequest) -> Result<crate::policy::Decision, Box<ToolResult>> {
        self.checker
            .stages_under(&self.decision_policy(), req)
            .map(|c| c.decision)
            .map_err(|r| Box::new(r.into_result(&next_call_id(), None)))
    }

    /// The policy decisions are made under: the service's, with the
    /// amendments saved in the state directory as they are now.
    pub fn decision_policy(&self) -> Arc<Policy> {
        match &self.amendments {
            Some(a) => a.policy(),
            None => self.policy.clone(),
        }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Ends the service of a process that exits next (the one-shot CLI,
    /// the drop-in): everything that must not outlive it goes as in a
    /// drop (the runs' directories and cgroup slots, the trace, the
    /// state), but the policy's memory is left for the exit to take back
    /// whole. Freed piece by piece (its rules, patterns and tables) it
    /// took 0.1 ms of every one-shot call (BENCHMARKS.md). Only memory is
    /// left: a policy holds no file and no process.
    pub fn end_with_process(self) {
        std::mem::forget(Arc::clone(&self.policy));
        drop(self);
    }

    /// The canonical project root.
    pub fn root(&self) -> &Path {
        self.checker.root()
    }

    /// How far a replay got, when this service replays a recording.
    pub fn replay_summary(&self) -> Option<trace::ReplaySummary> {
        self.replay.as_ref().map(|r| r.replayer.summary())
    }

    /// What a client needs before its first call: the tool's schema, the
    /// policy's name and hash, the limits, the budget, the sandbox.
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
            "provenance": {"mode": self.policy.provenance.mode, "assumed_budget": self.policy.provenance.assumed_budget},
            "sandbox": crate::result::SandboxSummary::from(self.sandbox.summary()),
            "version": env!("CARGO_PKG_VERSION"),
            "root": self.checker.root(),
            "replay": self.replay.is_some(),
        })
    }
}

#[cfg(test)]
mod tests;
