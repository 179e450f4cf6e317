//! agent-exec: a sandboxed shell execution supervisor for AI agents.
//!
//! The modules follow the pipeline a request goes through:
//!
//! 1. [`request`]: validate what the client sent.
//! 2. [`lexer`]: split a shell string into simple commands.
//! 3. [`policy`]: decide allow / deny / require_approval, with rule, risk and reason.
//! 4. [`sandbox`]: prepare the kernel layers (Landlock, seccomp, privileges, limits).
//! 5. [`spawn`]: fork, apply the sandbox, exec: the only module tree that
//!    may use `unsafe` (see below).
//! 6. [`exec`]: timeout, bounded capture, kill every descendant.
//! 7. [`result`]: one structured `ToolResult`.
//! 8. [`trace`]: the evidence of what was asked, decided and run.
//!
//! [`service`] strings these together; every transport (CLI, Unix socket
//! daemon) calls it, so policy, sandbox, limits and traces never differ by
//! transport.
//!
//! All `unsafe` code and all code that runs between fork and exec live in
//! [`spawn`]. The compiler enforces it: `unsafe_code` is denied for the
//! whole crate and allowed on the `spawn` module alone, whose `sys`
//! submodule gives the rest of the crate safe wrappers for the raw
//! syscalls `nix` does not cover.

#![deny(unsafe_code)]

pub mod capture;
pub mod eval;
pub mod exec;
pub mod lexer;
pub mod policy;
pub mod request;
pub mod result;
pub mod sandbox;
pub mod serve;
pub mod service;
#[allow(unsafe_code)]
pub mod spawn;
pub mod store;
pub mod trace;
