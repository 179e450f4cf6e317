//! agent-exec: a sandboxed shell execution supervisor for AI agents.
//!
//! The workspace follows the pipeline a request goes through:
//!
//! 1. [`request`]: validate what the client sent.
//! 2. `agent-exec-lexer`: split a shell string into simple commands.
//! 3. `agent-exec-policy`: decide allow / deny / require_approval, with rule,
//!    risk and reason.
//! 4. `agent-exec-sandbox`: prepare the kernel layers (Landlock, seccomp,
//!    privileges, limits, cgroup), spawn, capture bounded output, time out
//!    and kill every descendant.
//! 5. [`result`]: one structured `ToolResult`.
//! 6. [`trace`]: the evidence of what was asked, decided and run.
//!
//! [`service`] strings these together; every transport (CLI, Unix socket
//! daemon) calls it, so policy, sandbox, limits and traces never differ by
//! transport.

#![deny(unsafe_code)]

pub use agent_exec_lexer as lexer;
pub use agent_exec_policy as policy;
pub use agent_exec_sandbox as sandbox;
// The old path of `CancelToken` and the exec types, kept while callers move.
pub use agent_exec_sandbox as exec;

pub mod eval;
pub mod request;
pub mod result;
pub mod serve;
pub mod service;
pub mod store;
pub mod trace;
