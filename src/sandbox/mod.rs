//! The kernel sandbox, prepared in the parent: Landlock rules, the seccomp
//! program, the user to run as, rlimits and the per-run cgroup. Applying
//! them is `crate::spawn`'s job, between fork and exec.
