//! The kernel sandbox of agent-exec.
//!
//! [`Sandbox::prepare`] probes the kernel once and prepares every layer
//! from a [`SandboxConfig`] (Landlock rules, the seccomp program, the user
//! to run as, rlimits, the cgroup layout); [`Sandbox::for_run`] adds what is
//! private to one run; [`exec::run`] starts the program in it, captures
//! bounded output, enforces the timeout and kills every descendant.
//!
//! This crate knows nothing of policies or tool results: it applies the
//! configuration it is given and reports what the kernel applied in a
//! [`Summary`].
//!
//! All `unsafe` code and all code that runs between clone and exec live in
//! the `spawn` module. The compiler enforces it: `unsafe_code` is denied
//! for the whole crate and allowed on that module alone.

#![deny(unsafe_code)]

pub mod capture;
mod config;
pub mod exec;
pub mod plan;
#[allow(unsafe_code)]
pub mod spawn;
mod summary;

pub use config::{Enforcement, SandboxConfig};
pub use plan::{RunSandbox, Sandbox, SandboxError};
pub use summary::Summary;
