//! The kernel sandbox of agent-exec.
//!
//! A supervisor sets its process up once with [`Supervisor::init`] (every
//! process-wide side effect of the crate is there, documented, and
//! optional). [`Sandbox::prepare`] then probes the kernel and prepares every
//! layer from a [`SandboxConfig`] (Landlock rules, the seccomp program, the
//! user to run as, rlimits, the cgroup layout); [`Sandbox::for_run`] adds
//! what is private to one run; [`run`] starts the program in it, captures
//! bounded output, enforces the timeout and kills every descendant. There
//! is no way to start a process but [`run`] with a [`RunSandbox`], and no
//! way to get one without a [`Supervisor`].
//!
//! This crate knows nothing of policies or tool results: it applies the
//! configuration it is given and reports what the kernel applied in a
//! [`Summary`].
//!
//! Inside, the modules are layered, each using only those below it:
//! `spawn` (clone to exec, all the `unsafe` code, plain data in) < `plan`
//! (the building blocks: Landlock, seccomp, privileges, cgroup, run
//! directory) < `supervisor` < `sandbox` (`Sandbox`, `RunSandbox`) <
//! `exec` (running, capturing, killing); `capture`, `config`, `error`,
//! `summary` and `violation` stand alone. The compiler enforces the
//! `unsafe` rule: `unsafe_code` is denied for the whole crate and allowed
//! on `spawn` alone.

#![deny(unsafe_code)]

mod capture;
mod config;
mod error;
mod exec;
mod plan;
mod sandbox;
#[allow(unsafe_code)]
mod spawn;
mod summary;
mod supervisor;
mod violation;

/// The integration tests' helper for tests that need a kernel feature,
/// shared so both kinds of test follow the same rule.
#[cfg(test)]
#[path = "../tests/common/kernel.rs"]
mod test_kernel;

pub use capture::Captured;
pub use config::{
    DEFAULT_MEMORY_MAX_BYTES, Enforcement, Layer, Namespaces, Requirement, Requirements,
    SandboxConfig,
};
pub use error::SandboxError;
pub use exec::{CancelToken, ExecError, ExecOutcome, ExecSpec, MemoryLimitHit, Termination, run};
pub use plan::landlock::abi as landlock_abi;
pub use plan::rundir::private_dir;
pub use plan::shims::shim_dir;
pub use sandbox::{RootAccess, RunSandbox, Sandbox};
pub use spawn::SpawnError;
pub use spawn::entry::run_main;
pub use summary::Summary;
pub use supervisor::{NamespacesAhead, Supervisor, SupervisorOptions, guard_stdio, kill_runs_of};
pub use violation::{Violation, ViolationKind, attribute_violation, classify_violation};

/// Debug builds only: set in the environment, [`Sandbox::prepare`] acts as
/// on a kernel without Landlock (tests of the fail-closed path).
#[cfg(debug_assertions)]
#[doc(hidden)]
pub use sandbox::TEST_NO_LANDLOCK_ENV;

/// Debug builds only: a comma-separated list of [`Layer`] names set in the
/// environment makes [`Sandbox::prepare`] act as on a host without those
/// layers (tests of the fail-closed and best-effort paths).
#[cfg(debug_assertions)]
#[doc(hidden)]
pub use sandbox::TEST_MISSING_LAYERS_ENV;
