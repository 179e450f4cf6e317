//! What the kernel applied for a run, as the sandbox measured it.

/// The sandbox's own account of a run's layers. The service turns it into
/// the wire form of the tool result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Landlock ABI version the kernel offers (0: none).
    pub landlock_abi: u32,
    /// `full`, `partial` or `none`.
    pub landlock: String,
    pub seccomp: bool,
    /// Every child sets `no_new_privs` and reads it back before exec, and
    /// its spawn fails unless the flag holds: true of every run that
    /// started.
    pub no_new_privs: bool,
    /// `none`, or `loopback:PORT,...`.
    pub network: String,
    pub uid: u32,
    pub gid: u32,
    /// Limits actually applied, e.g. `rlimit_nofile=1024`, `cgroup_pids_max=256`,
    /// and `mount_namespace`, `ipc_namespace` when every run gets its own.
    pub limits: Vec<String>,
    /// Layers that were requested but could not be applied (best-effort only).
    pub not_applied: Vec<String>,
    /// Setup problems that do not stop the run, e.g. the child user cannot
    /// write the root.
    pub warnings: Vec<String>,
}
