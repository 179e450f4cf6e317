//! The kernel sandbox, prepared in the parent: Landlock rules, the seccomp
//! program, the user to run as, rlimits and the per-run cgroup. Applying
//! them is `crate::spawn`'s job, between fork and exec.
//!
//! `Sandbox::prepare` runs once per service and does everything that costs
//! (probing, path opening, filter compilation); `Sandbox::for_run` adds
//! what is private to one run (its HOME/TMPDIR and cgroup). What each layer
//! stops and what it does not is in `docs/threat-model.md`.

pub mod cgroup;
pub mod landlock;
pub mod privs;
pub mod rundir;
pub mod seccomp;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::fcntl::{OFlag, open};
use nix::sys::stat::Mode;

use crate::config::{Enforcement, SandboxConfig};
use crate::summary::Summary as SandboxSummary;

pub use privs::Creds;

/// Why the sandbox cannot be set up. Each variant names the layer, so the
/// operator knows what the host lacks.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("landlock unavailable: {0}")]
    Landlock(String),
    #[error("seccomp unavailable: {0}")]
    Seccomp(String),
    #[error("privilege drop impossible: {0}")]
    User(String),
    #[error("per-run directory: {0}")]
    RunDir(String),
    #[error("sandbox setup: {0}")]
    Io(String),
}

impl SandboxError {
    /// The layer's short name (`landlock`, `seccomp`, `privileges`,
    /// `run_dir`, `setup`).
    pub fn layer(&self) -> &'static str {
        match self {
            SandboxError::Landlock(_) => "landlock",
            SandboxError::Seccomp(_) => "seccomp",
            SandboxError::User(_) => "privileges",
            SandboxError::RunDir(_) => "run_dir",
            SandboxError::Io(_) => "setup",
        }
    }
}

#[cfg(target_env = "gnu")]
pub(crate) type RlimitResource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
pub(crate) type RlimitResource = libc::c_int;

/// Everything prepared once and shared by every run.
pub(crate) struct Shared {
    pub landlock: Option<landlock::Plan>,
    pub seccomp: Option<Vec<libc::sock_filter>>,
    pub creds: Creds,
    pub cap_last: u32,
    pub rlimits: Vec<(RlimitResource, u64)>,
    cgroups: cgroup::Layout,
    /// Empty run cgroups kept for reuse: creating and removing one per run
    /// costs a dozen cgroupfs syscalls, each taking cgroup locks.
    cgroup_pool: std::sync::Mutex<Vec<cgroup::RunCgroup>>,
    /// Untouched run directories (with their Landlock handles) for reuse.
    rundir_pool: std::sync::Mutex<Vec<(rundir::RunDir, OwnedFd)>>,
    pids_max: u64,
    memory_max: u64,
    rundir_base: PathBuf,
    root: PathBuf,
    summary: SandboxSummary,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("root", &self.root)
            .field(
                "landlock_rules",
                &self.landlock.as_ref().map(|l| l.paths.len()),
            )
            .field("seccomp_instructions", &self.seccomp.as_ref().map(Vec::len))
            .field("creds", &self.creds)
            .field("cgroups", &self.cgroups)
            .finish_non_exhaustive()
    }
}

/// The sandbox of one service (a CLI run or a daemon's lifetime).
#[derive(Debug, Clone)]
pub struct Sandbox {
    shared: Arc<Shared>,
}

/// `/etc` entries the dynamic loader, TLS, time and NSS need. Not
/// `passwd`, `shadow` or anything else: they stay unreadable.
const ETC_READ: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/localtime",
    "/etc/nsswitch.conf",
];

/// Name of the debug-only switch that makes `prepare` behave as on a kernel
/// without Landlock (tests of the fail-closed path).
#[cfg(debug_assertions)]
pub const TEST_NO_LANDLOCK_ENV: &str = "AGENT_EXEC_TEST_NO_LANDLOCK";

fn seccomp_filter_available() -> bool {
    crate::spawn::sys::seccomp_filter_available()
}

impl Sandbox {
    /// Probes the kernel and prepares every layer. Under strict enforcement
    /// a missing layer is an error naming it; under best effort it is
    /// listed in `summary().not_applied`.
    pub fn prepare(cfg: &SandboxConfig, root: &Path) -> Result<Sandbox, SandboxError> {
        let strict = cfg.enforcement == Enforcement::Strict;
        let root = root
            .canonicalize()
            .map_err(|e| SandboxError::Io(format!("root {}: {e}", root.display())))?;
        let mut not_applied = Vec::new();
        let mut warnings = Vec::new();

        #[cfg(debug_assertions)]
        let abi = if std::env::var_os(TEST_NO_LANDLOCK_ENV).is_some() {
            0
        } else {
            landlock::probe_abi()
        };
        #[cfg(not(debug_assertions))]
        let abi = landlock::probe_abi();
        let inet = !cfg.connect_ports.is_empty() || !cfg.bind_ports.is_empty();
        if abi == 0 {
            if strict {
                return Err(SandboxError::Landlock(
                    "the kernel offers no Landlock (needs Linux 5.13+ with landlock in the lsm= list)".into(),
                ));
            }
            not_applied.push("landlock".to_string());
        } else {
            for (min, what) in [
                (2, "landlock_refer"),
                (3, "landlock_truncate"),
                (5, "landlock_ioctl_dev"),
                (6, "landlock_scopes"),
            ] {
                if abi < min {
                    not_applied.push(what.to_string());
                }
            }
            if abi < 4 {
                if inet && strict {
                    return Err(SandboxError::Landlock(format!(
                        "TCP port rules need Landlock ABI 4, the kernel offers {abi}"
                    )));
                }
                not_applied.push("landlock_net".to_string());
            }
        }

        let seccomp_ok = seccomp_filter_available();
        if !seccomp_ok {
            if strict {
                return Err(SandboxError::Seccomp(
                    "the kernel refuses seccomp filters".into(),
                ));
            }
            not_applied.push("seccomp".to_string());
        }
        let seccomp = if seccomp_ok {
            Some(seccomp::build(seccomp::Options {
                inet,
                unix_sockets: cfg.allow_unix_sockets,
            })?)
        } else {
            None
        };

        let creds = privs::resolve(cfg.run_as.as_deref(), cfg.allow_root_child, &root)?;
        if cfg.run_as.is_some() && !creds.privileged {
            warnings.push(
                "sandbox.run_as is ignored: only a root supervisor can switch users".to_string(),
            );
        }
        if !privs::can_write(&root, creds.uid, creds.gid) {
            warnings.push(format!(
                "uid {} cannot write the root {}: `chown -R {}:{} {}` or set sandbox.run_as to its owner",
                creds.uid,
                root.display(),
                creds.uid,
                creds.gid,
                root.display()
            ));
        }

        let landlock = if abi > 0 {
            let mut ports = Vec::new();
            for p in &cfg.connect_ports {
                ports.push((*p, landlock::ACCESS_NET_CONNECT_TCP));
            }
            for p in &cfg.bind_ports {
                ports.push((*p, landlock::ACCESS_NET_BIND_TCP));
            }
            let mut plan = landlock::Plan::new(abi, &ports);
            let io =
                |p: &str, e: std::io::Error| SandboxError::Landlock(format!("opening {p}: {e}"));
            for p in &cfg.system_read {
                plan.add_path(p, landlock::READ_EXEC)
                    .map_err(|e| io(&p.to_string_lossy(), e))?;
            }
            for p in ETC_READ {
                plan.add_path(Path::new(p), landlock::READ_EXEC)
                    .map_err(|e| io(p, e))?;
            }
            // Debian's Python imports sitecustomize from /etc/python3.x.
            if let Ok(rd) = std::fs::read_dir("/etc") {
                for e in rd.flatten() {
                    if e.file_name().to_string_lossy().starts_with("python3") {
                        let p = e.path();
                        plan.add_path(&p, landlock::READ_EXEC)
                            .map_err(|err| io(&p.to_string_lossy(), err))?;
                    }
                }
            }
            if !cfg.connect_ports.is_empty() {
                plan.add_path(Path::new("/etc/hosts"), landlock::READ_EXEC)
                    .map_err(|e| io("/etc/hosts", e))?;
            }
            let dev_rw = landlock::ACCESS_FS_READ_FILE
                | landlock::ACCESS_FS_WRITE_FILE
                | landlock::ACCESS_FS_TRUNCATE
                | landlock::ACCESS_FS_IOCTL_DEV;
            for p in ["/dev/null", "/dev/zero", "/dev/full"] {
                plan.add_path(Path::new(p), dev_rw).map_err(|e| io(p, e))?;
            }
            for p in ["/dev/urandom", "/dev/random"] {
                plan.add_path(Path::new(p), landlock::ACCESS_FS_READ_FILE)
                    .map_err(|e| io(p, e))?;
            }
            for p in &cfg.read {
                plan.add_path(Path::new(p), landlock::READ_EXEC)
                    .map_err(|e| io(p, e))?;
            }
            let rw = plan.rw_access;
            if !plan
                .add_path(&root, rw)
                .map_err(|e| io(&root.to_string_lossy(), e))?
            {
                return Err(SandboxError::Io(format!(
                    "root {} vanished",
                    root.display()
                )));
            }
            for p in &cfg.write {
                if !plan.add_path(Path::new(p), rw).map_err(|e| io(p, e))? {
                    warnings.push(format!("sandbox.write path {p} does not exist; skipped"));
                }
            }
            Some(plan)
        } else {
            None
        };

        let mut rlimits: Vec<(RlimitResource, u64)> = vec![(libc::RLIMIT_CORE, 0)];
        let mut limits = vec!["rlimit_core=0".to_string()];
        let mut push = |res: RlimitResource, name: &str, v: u64| {
            if v > 0 {
                rlimits.push((res, v));
                limits.push(format!("rlimit_{name}={v}"));
            }
        };
        push(libc::RLIMIT_NOFILE, "nofile", cfg.rlimit_nofile);
        push(libc::RLIMIT_FSIZE, "fsize", cfg.rlimit_fsize_bytes);
        push(libc::RLIMIT_AS, "as", cfg.rlimit_as_bytes);
        push(libc::RLIMIT_CPU, "cpu", cfg.rlimit_cpu_seconds);
        // NPROC counts every process of the real uid host-wide and root
        // ignores it: only meaningful for a dedicated non-root child user.
        if creds.uid != 0 {
            push(libc::RLIMIT_NPROC, "nproc", cfg.rlimit_nproc);
        }

        // On a hybrid host the run is born in its v2 cgroup (kill) but still
        // migrates into the v1 pids cgroup, which can wait for an RCU grace
        // period. RLIMIT_NPROC is no substitute: it counts the child user's
        // processes host-wide, so one run's fork bomb would starve every
        // other run of the daemon.
        let cgroups = cgroup::detect();
        if !cgroups.any() {
            not_applied.push("cgroup".to_string());
        }
        let rundir_base = rundir::ensure_base()?;
        // A supervisor killed mid-run (or a CLI that exits without running
        // destructors) leaves its run dirs and cgroups behind.
        cgroup::sweep_stale(&cgroups);
        rundir::sweep_stale(&rundir_base);

        let network = if !inet {
            "none".to_string()
        } else {
            let j = |v: &[u16]| {
                v.iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let mut parts = vec![];
            if !cfg.connect_ports.is_empty() {
                parts.push(format!("connect={}", j(&cfg.connect_ports)));
            }
            if !cfg.bind_ports.is_empty() {
                parts.push(format!("bind={}", j(&cfg.bind_ports)));
            }
            format!("loopback:{}", parts.join(";"))
        };
        let summary = SandboxSummary {
            landlock_abi: abi,
            landlock: match abi {
                0 => "none",
                1..=5 => "partial",
                _ => "full",
            }
            .to_string(),
            seccomp: seccomp.is_some(),
            no_new_privs: true,
            network,
            uid: creds.uid,
            gid: creds.gid,
            limits,
            not_applied,
            warnings,
        };
        Ok(Sandbox {
            shared: Arc::new(Shared {
                landlock,
                seccomp,
                creds,
                cap_last: privs::cap_last_cap(),
                rlimits,
                cgroups,
                cgroup_pool: std::sync::Mutex::new(Vec::new()),
                rundir_pool: std::sync::Mutex::new(Vec::new()),
                pids_max: cfg.pids_max,
                memory_max: cfg.memory_max_bytes,
                rundir_base,
                root,
                summary,
            }),
        })
    }

    /// What every run gets (before per-run cgroup limits).
    pub fn summary(&self) -> SandboxSummary {
        self.shared.summary.clone()
    }

    /// Prepares one run: its private HOME/TMPDIR and its cgroup.
    pub fn for_run(&self) -> Result<RunSandbox, SandboxError> {
        let s = &self.shared;
        let pooled_home = s.rundir_pool.lock().ok().and_then(|mut p| p.pop());
        let (dir, home_fd) = match pooled_home {
            Some(home) => home,
            None => {
                let dir = rundir::RunDir::create(&s.rundir_base, s.creds.uid, s.creds.gid)?;
                let fd = open(
                    &dir.path,
                    OFlag::O_PATH | OFlag::O_CLOEXEC | OFlag::O_DIRECTORY,
                    Mode::empty(),
                )
                .map_err(|e| SandboxError::RunDir(format!("{}: {e}", dir.path.display())))?;
                (dir, fd)
            }
        };
        let pooled = s.cgroup_pool.lock().ok().and_then(|mut p| p.pop());
        let cgroup = match pooled {
            Some(cg) => Some(cg),
            None if s.cgroups.any() => {
                cgroup::RunCgroup::create(&s.cgroups, s.pids_max, s.memory_max)
            }
            None => None,
        };
        let mut summary = s.summary.clone();
        match &cgroup {
            Some(cg) => {
                summary.limits.extend(cg.applied.iter().cloned());
                // A cgroup without the controller (e.g. a delegated v2 tree
                // where it cannot be enabled) still kills, but does not limit.
                let has = |p: &str| cg.applied.iter().any(|a| a.starts_with(p));
                if s.pids_max > 0 && !has("cgroup_pids_max") {
                    summary.not_applied.push("cgroup_pids".into());
                }
                if s.memory_max > 0 && !has("cgroup_memory_max") {
                    summary.not_applied.push("cgroup_memory".into());
                }
            }
            None if !summary.not_applied.iter().any(|n| n == "cgroup") => {
                summary.not_applied.push("cgroup".into())
            }
            None => {}
        }
        Ok(RunSandbox {
            shared: Arc::clone(s),
            home_path: dir.path.clone(),
            home: Some((dir, home_fd)),
            cgroup,
            summary,
        })
    }
}

/// One run's sandbox. Dropping it kills what is left of the run and
/// removes its cgroup and HOME/TMPDIR.
#[derive(Debug)]
pub struct RunSandbox {
    pub(crate) shared: Arc<Shared>,
    // Field order matters for Drop: the cgroup (which kills stragglers)
    // goes before the directory they might still be writing to.
    cgroup: Option<cgroup::RunCgroup>,
    /// The run's HOME/TMPDIR and the handle its Landlock rule names; taken
    /// on drop, for the pool when the run left it untouched.
    home: Option<(rundir::RunDir, OwnedFd)>,
    home_path: PathBuf,
    summary: SandboxSummary,
}

impl RunSandbox {
    /// The per-run HOME and TMPDIR.
    pub fn home(&self) -> &Path {
        &self.home_path
    }

    /// Variables the service adds to the child's environment: git refuses
    /// a repository owned by another user unless it is a safe.directory,
    /// and the system gitconfig is unreadable under Landlock (git dies on
    /// EACCES), so it is skipped.
    pub fn extra_env(&self) -> Vec<(String, String)> {
        vec![
            ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
            ("GIT_CONFIG_COUNT".into(), "1".into()),
            ("GIT_CONFIG_KEY_0".into(), "safe.directory".into()),
            (
                "GIT_CONFIG_VALUE_0".into(),
                self.shared.root.to_string_lossy().into_owned(),
            ),
        ]
    }

    /// Kills every process of the run. `Ok(false)`: this run has no cgroup
    /// (the caller must fall back to killing the process group).
    pub fn kill_all(&self) -> std::io::Result<bool> {
        match &self.cgroup {
            Some(cg) => cg.kill_all().map(|()| true),
            None => Ok(false),
        }
    }

    /// Whether the run has a cgroup, which can kill (and count) all of it.
    pub fn has_cgroup(&self) -> bool {
        self.cgroup.is_some()
    }

    /// Sends `sig` to every process of the run's cgroup, if it has one.
    pub fn signal_all(&self, sig: nix::sys::signal::Signal) {
        if let Some(cg) = &self.cgroup {
            cg.signal_all(sig);
        }
    }

    /// Whether no process of the run is left (`None`: no cgroup to tell).
    pub fn is_empty(&self) -> Option<bool> {
        self.cgroup.as_ref().map(|cg| cg.is_empty())
    }

    pub fn summary(&self) -> SandboxSummary {
        self.summary.clone()
    }

    /// The v2 cgroup directory the child is cloned into, if any.
    pub(crate) fn cgroup_dir_fd(&self) -> Option<i32> {
        self.cgroup
            .as_ref()
            .and_then(|cg| cg.v2_dir.as_ref())
            .map(|fd| fd.as_raw_fd())
    }

    /// fds of the `cgroup.procs` files the child writes itself into: the v1
    /// hierarchies' always, the v2 one only when it was not cloned into it.
    pub(crate) fn cgroup_procs_fds(&self, v2_joined: bool) -> impl Iterator<Item = i32> + '_ {
        self.cgroup.iter().flat_map(move |cg| {
            cg.v2_procs
                .iter()
                .filter(move |_| !v2_joined)
                .chain(cg.v1_procs.iter())
                .map(|fd| fd.as_raw_fd())
        })
    }

    /// Extra Landlock directory rules for this run (its HOME/TMPDIR).
    pub(crate) fn run_rules(&self) -> [(i32, u64); 1] {
        let access = self
            .shared
            .landlock
            .as_ref()
            .map(|p| p.rw_access)
            .unwrap_or(0);
        // No handle (never the case while the run exists) makes the child's
        // Landlock step fail: nothing runs.
        let fd = self.home.as_ref().map_or(-1, |(_, fd)| fd.as_raw_fd());
        [(fd, access)]
    }
}

/// How many empty cgroups a service keeps for reuse (about the number of
/// concurrent runs a daemon serves).
const CGROUP_POOL_MAX: usize = 8;
const RUNDIR_POOL_MAX: usize = 8;

impl Drop for RunSandbox {
    fn drop(&mut self) {
        // The cgroup first: it kills stragglers that might still be
        // writing to the run directory.
        let mut settled = true;
        if let Some(cg) = self.cgroup.take() {
            let mut empty = cg.is_empty();
            if !empty {
                let _ = cg.kill_all();
                for _ in 0..50 {
                    empty = cg.is_empty();
                    if empty {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            settled = empty;
            // Only a cgroup with no process left, never killed, may serve
            // another run; else its own Drop keeps killing and removes it.
            if empty
                && !cg.was_killed()
                && let Ok(mut pool) = self.shared.cgroup_pool.lock()
                && pool.len() < CGROUP_POOL_MAX
            {
                pool.push(cg);
            }
        }
        // A run directory the run left exactly as it was made serves the
        // next run: creating and removing one on ext4 cost about 115 µs a
        // run. Anything else (a file, a changed mode, an ACL, a process
        // that may still be alive) and it is removed.
        if let Some((dir, fd)) = self.home.take()
            && settled
            && self.shared.cgroups.any()
            && rundir::is_pristine(&dir.path, self.shared.creds.uid)
            && !crate::spawn::sys::has_xattrs(&dir.path)
            && let Ok(mut pool) = self.shared.rundir_pool.lock()
            && pool.len() < RUNDIR_POOL_MAX
        {
            pool.push((dir, fd));
        }
    }
}

/// Reads a failed run's status and stderr for signs that the sandbox, not
/// the program, caused the failure. Returns a short description for
/// `SANDBOX_VIOLATION`, or `None` when nothing points at the sandbox.
pub fn attribute_violation(
    exit_code: Option<i32>,
    signal: Option<i32>,
    stderr: &str,
    root: &Path,
) -> Option<String> {
    if signal == Some(libc::SIGSYS) {
        return Some("a system call was blocked by the seccomp filter (SIGSYS)".into());
    }
    if exit_code == Some(0) {
        return None;
    }
    let root_s = root.to_string_lossy();
    let lines: Vec<&str> = stderr.lines().take(200).collect();
    for (i, line) in lines.iter().enumerate() {
        let line = *line;
        let denied_here = line.to_ascii_lowercase();
        if !(denied_here.contains("permission denied")
            || denied_here.contains("operation not permitted"))
        {
            continue;
        }
        // Interpreters put the call that failed on the lines above the
        // error (a Python traceback: `socket.socket(...)` then
        // `PermissionError: [Errno 1] Operation not permitted`).
        let lower = lines[i.saturating_sub(3)..=i]
            .join("\n")
            .to_ascii_lowercase();
        const NET: &[&str] = &[
            "socket",
            "connect",
            "network",
            "bind",
            "getaddrinfo",
            "resolve",
            "curl:",
            "wget:",
        ];
        if NET.iter().any(|w| lower.contains(w)) {
            return Some(format!("network access was blocked: {}", clip(line)));
        }
        const SYSCALLS: &[&str] = &[
            "ptrace",
            "mount",
            "unshare",
            "setns",
            "chroot",
            "io_uring",
            "bpf",
            "keyctl",
            "perf_event",
            "reboot",
        ];
        if let Some(w) = SYSCALLS.iter().find(|w| lower.contains(*w)) {
            return Some(format!(
                "a privileged system call ({w}) was blocked: {}",
                clip(line)
            ));
        }
        for word in line.split(|c: char| {
            c.is_whitespace() || matches!(c, '\'' | '"' | '`' | ':' | ',' | '(' | ')')
        }) {
            if !word.starts_with('/') || word.len() < 2 {
                continue;
            }
            let inside = word == root_s || word.starts_with(&format!("{root_s}/"));
            if !inside {
                return Some(format!(
                    "access to {word} (outside the root) was blocked: {}",
                    clip(line)
                ));
            }
        }
    }
    None
}

fn clip(line: &str) -> String {
    let t = line.trim();
    match t.char_indices().nth(160) {
        Some((i, _)) => format!("{}...", &t[..i]),
        None => t.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribution() {
        let root = Path::new("/srv/proj");
        assert!(attribute_violation(None, Some(libc::SIGSYS), "", root).is_some());
        assert!(
            attribute_violation(Some(1), None, "cat: /etc/shadow: Permission denied", root)
                .unwrap()
                .contains("/etc/shadow")
        );
        assert_eq!(
            attribute_violation(Some(1), None, "cat: /srv/proj/x: Permission denied", root),
            None
        );
        assert_eq!(
            attribute_violation(Some(0), None, "cat: /etc/shadow: Permission denied", root),
            None
        );
        assert!(
            attribute_violation(
                Some(1),
                None,
                "PermissionError: [Errno 1] Operation not permitted (socket)",
                root
            )
            .unwrap()
            .starts_with("network")
        );
        assert!(
            attribute_violation(
                Some(1),
                None,
                "unshare: unshare failed: Operation not permitted",
                root
            )
            .is_some()
        );
        assert_eq!(
            attribute_violation(Some(2), None, "grep: no match", root),
            None
        );
        // The failing call is named on a traceback line above the error.
        let traceback = "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n  File \"/usr/lib/python3.11/socket.py\", line 232, in __init__\n    _socket.socket.__init__(self, family, type, proto, fileno)\nPermissionError: [Errno 1] Operation not permitted";
        assert!(
            attribute_violation(Some(1), None, traceback, root)
                .is_some_and(|v| v.starts_with("network access was blocked"))
        );
    }
}
