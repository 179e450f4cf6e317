//! The building blocks of a sandbox, prepared in the parent: the Landlock
//! rules, the seccomp program, the user to run as, the per-run cgroup, the
//! per-run directory and the run's own mount namespace. They produce the
//! plain data `crate::spawn` applies between clone and exec;
//! `crate::sandbox` assembles them.

pub(crate) mod cgroup;
pub(crate) mod identity;
pub(crate) mod kept;
pub(crate) mod landlock;
pub(crate) mod mounts;
pub(crate) mod privs;
pub(crate) mod rundir;
pub(crate) mod seccomp;
pub(crate) mod shims;

// The building blocks' error type, named `super::SandboxError` by them.
use crate::error::SandboxError;
