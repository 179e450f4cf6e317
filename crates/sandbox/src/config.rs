//! What the sandbox is asked to apply. The service builds it from the
//! policy; the sandbox never reads a policy itself.

use std::path::PathBuf;

/// How missing kernel features are treated by default: the level of every
/// layer [`Requirements`] leaves unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforcement {
    /// Every layer must apply fully or nothing runs.
    Strict,
    /// Run with what the kernel offers and list what was not applied.
    BestEffort,
}

/// A layer of the sandbox an operator can require, accept the absence of,
/// or turn off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layer {
    /// Landlock's filesystem rules (the other Landlock layers need it).
    Landlock,
    /// Landlock's TCP port rules (ABI 4); asked for only when the
    /// configuration allows ports.
    LandlockNet,
    /// Landlock's signal and abstract-socket scopes (ABI 6).
    LandlockScopes,
    /// The seccomp filter.
    Seccomp,
    /// A run cgroup: counting and killing every process of a run.
    Cgroup,
    /// The run cgroup's `pids.max`; asked for only when `pids_max` > 0.
    CgroupPids,
    /// The run cgroup's memory cap; asked for only when
    /// `memory_max_bytes` > 0.
    CgroupMemory,
}

impl Layer {
    /// Every layer, in the order they are checked.
    pub const ALL: [Layer; 7] = [
        Layer::Landlock,
        Layer::LandlockNet,
        Layer::LandlockScopes,
        Layer::Seccomp,
        Layer::Cgroup,
        Layer::CgroupPids,
        Layer::CgroupMemory,
    ];

    /// The name the policy's `[sandbox.require]` table, errors and
    /// `Summary::not_applied` use.
    pub fn name(self) -> &'static str {
        match self {
            Layer::Landlock => "landlock",
            Layer::LandlockNet => "landlock_net",
            Layer::LandlockScopes => "landlock_scopes",
            Layer::Seccomp => "seccomp",
            Layer::Cgroup => "cgroup",
            Layer::CgroupPids => "cgroup_pids",
            Layer::CgroupMemory => "cgroup_memory",
        }
    }

    /// The layer this one is part of: it cannot apply without it.
    pub fn parent(self) -> Option<Layer> {
        match self {
            Layer::LandlockNet | Layer::LandlockScopes => Some(Layer::Landlock),
            Layer::CgroupPids | Layer::CgroupMemory => Some(Layer::Cgroup),
            Layer::Landlock | Layer::Seccomp | Layer::Cgroup => None,
        }
    }

    /// The layer a name stands for.
    pub fn from_name(name: &str) -> Option<Layer> {
        Layer::ALL.into_iter().find(|l| l.name() == name)
    }
}

/// What a missing layer does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    /// Missing: nothing runs, and the error names the layer.
    Required,
    /// Missing: the run goes on and `Summary::not_applied` names it.
    BestEffort,
    /// Not applied even where the kernel offers it.
    Off,
}

/// Per-layer overrides of [`Enforcement`]; `None` follows it (`Strict`:
/// required, `BestEffort`: best effort).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requirements {
    pub landlock: Option<Requirement>,
    pub landlock_net: Option<Requirement>,
    pub landlock_scopes: Option<Requirement>,
    pub seccomp: Option<Requirement>,
    pub cgroup: Option<Requirement>,
    pub cgroup_pids: Option<Requirement>,
    pub cgroup_memory: Option<Requirement>,
}

impl Requirements {
    /// The override for `layer`, if any.
    pub fn get(&self, layer: Layer) -> Option<Requirement> {
        match layer {
            Layer::Landlock => self.landlock,
            Layer::LandlockNet => self.landlock_net,
            Layer::LandlockScopes => self.landlock_scopes,
            Layer::Seccomp => self.seccomp,
            Layer::Cgroup => self.cgroup,
            Layer::CgroupPids => self.cgroup_pids,
            Layer::CgroupMemory => self.cgroup_memory,
        }
    }

    /// Sets the override for `layer`.
    pub fn set(&mut self, layer: Layer, level: Option<Requirement>) {
        let slot = match layer {
            Layer::Landlock => &mut self.landlock,
            Layer::LandlockNet => &mut self.landlock_net,
            Layer::LandlockScopes => &mut self.landlock_scopes,
            Layer::Seccomp => &mut self.seccomp,
            Layer::Cgroup => &mut self.cgroup,
            Layer::CgroupPids => &mut self.cgroup_pids,
            Layer::CgroupMemory => &mut self.cgroup_memory,
        };
        *slot = level;
    }
}

/// The default per-run memory cap: large enough for a compiler or a test
/// suite, small enough that one run cannot take a typical host's memory.
pub const DEFAULT_MEMORY_MAX_BYTES: u64 = 4 << 30;

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
    /// Per-layer levels where they differ from `enforcement`.
    pub require: Requirements,
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
    /// With a root supervisor and no `run_as`, run the child as root. A
    /// uid-0 child is refused unless Landlock's signal scope applies.
    pub allow_root_child: bool,
    /// With a root supervisor, no `run_as` and a root-owned root: run the
    /// child as uid 0 without capabilities (so it can write the project,
    /// as root working in it bare would) instead of `nobody`. Refused at
    /// prepare, with what to do instead, unless Landlock's signal scope
    /// applies.
    pub root_owned_as_root: bool,
    pub rlimit_nofile: u64,
    pub rlimit_fsize_bytes: u64,
    pub rlimit_as_bytes: u64,
    pub rlimit_nproc: u64,
    pub rlimit_cpu_seconds: u64,
    /// cgroup `pids.max` when a cgroup can be created; 0: none.
    pub pids_max: u64,
    /// Memory cap of a whole run (every process together, swap included)
    /// when a cgroup with the memory controller can be created; 0: none.
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
            require: Requirements::default(),
            system_read,
            read: Vec::new(),
            write: Vec::new(),
            connect_ports: Vec::new(),
            bind_ports: Vec::new(),
            allow_unix_sockets: false,
            run_as: None,
            allow_root_child: false,
            root_owned_as_root: false,
            rlimit_nofile: 1024,
            rlimit_fsize_bytes: 1 << 30,
            rlimit_as_bytes: 8 << 30,
            rlimit_nproc: 512,
            rlimit_cpu_seconds: 600,
            pids_max: 256,
            memory_max_bytes: DEFAULT_MEMORY_MAX_BYTES,
            namespaces: Namespaces::Auto,
        }
    }

    /// The level of `layer`: its override; else the level of the layer it
    /// is part of (Landlock best effort or off means all of Landlock);
    /// else what `enforcement` says.
    pub fn requirement(&self, layer: Layer) -> Requirement {
        if let Some(level) = self.require.get(layer) {
            return level;
        }
        if let Some(parent) = layer.parent() {
            return self.requirement(parent);
        }
        match self.enforcement {
            Enforcement::Strict => Requirement::Required,
            Enforcement::BestEffort => Requirement::BestEffort,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enforcement_is_the_default_and_overrides_win() {
        let mut c = SandboxConfig::new(vec![]);
        for l in Layer::ALL {
            assert_eq!(c.requirement(l), Requirement::Required, "{l:?}");
            assert_eq!(Layer::from_name(l.name()), Some(l));
        }
        c.enforcement = Enforcement::BestEffort;
        c.require
            .set(Layer::CgroupMemory, Some(Requirement::Required));
        c.require.set(Layer::Seccomp, Some(Requirement::Off));
        assert_eq!(c.requirement(Layer::CgroupMemory), Requirement::Required);
        assert_eq!(c.requirement(Layer::Seccomp), Requirement::Off);
        assert_eq!(c.requirement(Layer::Landlock), Requirement::BestEffort);
        assert_eq!(Layer::from_name("landlock_refer"), None);
        // A part follows its whole, unless set itself.
        c.require.set(Layer::Cgroup, Some(Requirement::Off));
        assert_eq!(c.requirement(Layer::CgroupPids), Requirement::Off);
        assert_eq!(c.requirement(Layer::CgroupMemory), Requirement::Required);
        c.enforcement = Enforcement::Strict;
        c.require
            .set(Layer::Landlock, Some(Requirement::BestEffort));
        assert_eq!(
            c.requirement(Layer::LandlockScopes),
            Requirement::BestEffort
        );
    }
}
