//! agent-exec: a sandboxed shell execution supervisor for AI agents.
//!
//! The workspace follows the pipeline a request goes through:
//!
//! 1. [`request`]: what a client may ask for ([`RunRequest`]).
//! 2. `agent-exec-lexer`: split a shell string into simple commands.
//! 3. `agent-exec-policy`: decide allow / deny / require_approval, with rule,
//!    risk and reason.
//! 4. `agent-exec-sandbox`: prepare the kernel layers (Landlock, seccomp,
//!    privileges, limits, cgroup), spawn, capture bounded output, time out
//!    and kill every descendant.
//! 5. [`result`]: one structured [`ToolResult`].
//! 6. [`trace`]: the evidence of what was asked, decided and run.
//!
//! [`Service`] strings these together; every transport (the CLI, the Unix
//! socket daemon, the MCP server, the shell drop-in, a program embedding
//! this crate) builds one with
//! [`Service::builder`] and calls it, so policy, sandbox, limits and
//! traces never differ by transport. Three traits are the seams an
//! embedder may fill: [`Approver`] (who answers `require_approval`),
//! [`TraceSink`] (where the evidence goes) and [`StateStore`] (where
//! idempotency keys and budgets live).
//!
//! ```
//! use agent_exec::{
//!     CancelToken, ErrorType, Policy, RunRequest, Service, Supervisor, SupervisorOptions,
//! };
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/code.toml");
//! let policy = Policy::load(&path)?;
//! let root = tempfile::tempdir()?;
//! # // The sandboxed child runs as `nobody` when the caller is root: give
//! # // it a root it may enter.
//! # use std::os::unix::fs::PermissionsExt;
//! # std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755))?;
//! // Once per process: the setup running sandboxed children needs.
//! let supervisor = Supervisor::init(SupervisorOptions::default());
//! let service = Service::builder(policy, root.path()).build(&supervisor)?;
//!
//! let hello = service.call(RunRequest::shell("echo hello"), &CancelToken::new());
//! assert!(hello.ok, "{}", hello.message);
//! assert_eq!(hello.stdout, "hello\n");
//! assert_eq!(hello.exit_code, Some(0));
//!
//! // Refused by the policy before anything runs, with the reason.
//! let shadow = service.call(RunRequest::shell("cat /etc/shadow"), &CancelToken::new());
//! assert_eq!(shadow.error_type, Some(ErrorType::PermissionDenied));
//! assert_eq!(shadow.matched_rule.as_deref(), Some("builtin:path-escape"));
//! # Ok(())
//! # }
//! ```

#![deny(unsafe_code)]

// The member crates, for embedders who need more than the service: the
// lexer and the policy alone decide a command without running anything.
pub use agent_exec_lexer as lexer;
pub use agent_exec_policy as policy;
pub use agent_exec_sandbox as sandbox;

pub mod approvals;
pub mod approve_cli;
pub mod emit;
pub mod eval;
pub mod mcp;
pub mod provenance;
pub mod request;
pub mod result;
pub mod run_form;
pub mod serve;
pub mod service;
pub mod sh;
mod store;
pub mod trace;

pub use policy::{Decision, Policy, PolicyError, RiskLevel, Verdict};
pub use request::{CommandSpec, RunRequest, SessionId};
pub use result::{
    ArgProvenance, ErrorType, ProvenanceTag, SCHEMA_VERSION, SandboxSummary, ToolResult,
};
pub use sandbox::{CancelToken, Supervisor, SupervisorOptions};
pub use service::{
    Approval, ApprovalRequest, Approver, Checker, NeverApprover, Service, ServiceBuilder,
    ServiceError, TtyApprover,
};
pub use store::{Begin, Budgets, SqliteStore, StateStore, StoreError};
pub use trace::{TraceDir, TraceError, TraceSink, Tracer};
