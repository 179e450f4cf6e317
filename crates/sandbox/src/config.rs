//! What the sandbox is asked to apply. The service builds it from the
//! policy; the sandbox never reads a policy itself.

use std::path::PathBuf;

/// How missing kernel features are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforcement {
    /// Every layer must apply fully or nothing runs.
    Strict,
    /// Run with what the kernel offers and list what was not applied.
    BestEffort,
}

/// Whether each run gets a mount and an IPC namespace of its own: a
/// private `/tmp`, `/var/tmp` and `/dev/shm`, the host's `/run`, `/home`
/// and `/root` hidden (but for the paths the sandbox grants), and no SysV
/// IPC object of the host. Only a supervisor with CAP_SYS_ADMIN in the
/// initial user namespace (root) can create them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Namespaces {
    /// Applied when the supervisor can; listed in the summary's
    /// `not_applied` when it cannot.
    #[default]
    Auto,
    /// Nothing runs without them: preparing the sandbox fails instead.
    Required,
    /// Never: runs share the supervisor's mount and IPC namespaces.
    Off,
}

/// Kernel sandbox settings for one service (a CLI run or a daemon).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    pub enforcement: Enforcement,
    /// Directories every program needs to read and execute (`/usr`, ...).
    /// The caller passes the same list its policy judges arguments by, so
    /// what the policy believes and what the kernel enforces agree.
    pub system_read: Vec<PathBuf>,
    /// Extra read+execute paths (toolchains). Missing ones are skipped.
    pub read: Vec<String>,
    /// Extra read+write paths besides the root and the per-run home.
    pub write: Vec<String>,
    /// Loopback TCP ports the child may connect to. Empty: no network.
    pub connect_ports: Vec<u16>,
    /// Loopback TCP ports the child may bind.
    pub bind_ports: Vec<u16>,
    /// Let the child create Unix sockets (`socket(AF_UNIX)`, datagram
    /// socket pairs). Off: Landlock cannot stop a connect to a pathname
    /// socket outside the root (the system bus, /dev/log, an ssh-agent),
    /// so the seccomp filter refuses the calls that could reach one.
    pub allow_unix_sockets: bool,
    /// User name or numeric uid for the child when the supervisor is root.
    /// None: the root directory's owner if not root, else `nobody`.
    pub run_as: Option<String>,
    pub allow_root_child: bool,
    pub rlimit_nofile: u64,
    pub rlimit_fsize_bytes: u64,
    pub rlimit_as_bytes: u64,
    pub rlimit_nproc: u64,
    pub rlimit_cpu_seconds: u64,
    /// cgroup `pids.max` when a cgroup can be created; 0: none.
    pub pids_max: u64,
    /// cgroup memory limit when a cgroup can be created; 0: none.
    pub memory_max_bytes: u64,
    /// Per-run mount and IPC namespaces.
    pub namespaces: Namespaces,
}

impl SandboxConfig {
    /// Strict enforcement, no network, the given system directories, and
    /// the limits a shipped policy uses when it sets none.
    pub fn new(system_read: Vec<PathBuf>) -> Self {
        SandboxConfig {
            enforcement: Enforcement::Strict,
            system_read,
            read: Vec::new(),
            write: Vec::new(),
            connect_ports: Vec::new(),
            bind_ports: Vec::new(),
            allow_unix_sockets: false,
            run_as: None,
            allow_root_child: false,
            rlimit_nofile: 1024,
            rlimit_fsize_bytes: 1 << 30,
            rlimit_as_bytes: 8 << 30,
            rlimit_nproc: 512,
            rlimit_cpu_seconds: 600,
            pids_max: 256,
            memory_max_bytes: 0,
            namespaces: Namespaces::Auto,
        }
    }
}
