//! [`Sandbox::prepare`]: probing the kernel and preparing every layer from
//! a [`SandboxConfig`], once per service.

use std::path::Path;
use std::sync::{Arc, Mutex};

use super::{Sandbox, Shared};
use crate::config::{Enforcement, SandboxConfig};
use crate::error::SandboxError;
use crate::plan::{landlock, privs, rundir, seccomp};
use crate::spawn::{Creds, Rlimit, RlimitResource};
use crate::summary::Summary;
use crate::supervisor::Supervisor;

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

/// What the summary reports besides the applied layers.
#[derive(Default)]
struct Notes {
    not_applied: Vec<String>,
    warnings: Vec<String>,
}

impl Sandbox {
    /// Probes the kernel and prepares every layer for children confined to
    /// `root`. Under strict enforcement a missing layer is an error naming
    /// it; under best effort it is listed in `summary().not_applied`.
    ///
    /// Takes the [`Supervisor`]: a sandbox exists only in a process set up
    /// for it.
    pub fn prepare(
        supervisor: &Supervisor,
        cfg: &SandboxConfig,
        root: &Path,
    ) -> Result<Sandbox, SandboxError> {
        let strict = cfg.enforcement == Enforcement::Strict;
        let root = root.canonicalize().map_err(|source| SandboxError::Root {
            path: root.to_path_buf(),
            source,
        })?;
        let inet = !cfg.connect_ports.is_empty() || !cfg.bind_ports.is_empty();
        let mut notes = Notes::default();

        let abi = landlock_abi(strict, inet, &mut notes)?;
        let options = seccomp::Options {
            inet,
            unix_sockets: cfg.allow_unix_sockets,
        };
        let seccomp = seccomp_program(strict, options, &mut notes)?;
        let creds = privs::resolve(cfg.run_as.as_deref(), cfg.allow_root_child, &root)?;
        user_warnings(cfg, &creds, &root, &mut notes);
        let landlock = match abi {
            0 => None,
            _ => Some(landlock_plan(cfg, abi, &root, &mut notes)?),
        };
        // The same rules without write rights, for read-only runs.
        let landlock_read_only = match &landlock {
            Some(plan) => Some(
                plan.read_only()
                    .map_err(|source| SandboxError::LandlockPath {
                        path: root.to_string_lossy().into_owned(),
                        source,
                    })?,
            ),
            None => None,
        };
        let (rlimits, limits) = rlimits(cfg, &creds);

        // On a hybrid host the run is born in its v2 cgroup (kill) but still
        // migrates into the v1 pids cgroup, which can wait for an RCU grace
        // period. RLIMIT_NPROC is no substitute: it counts the child user's
        // processes host-wide, so one run's fork bomb would starve every
        // other run of the daemon.
        let cgroups = supervisor.cgroups().clone();
        if !cgroups.any() {
            notes.not_applied.push("cgroup".to_string());
        }
        let rundir_base = rundir::ensure_base()?;

        let summary = Summary {
            landlock_abi: abi,
            landlock: match abi {
                0 => "none",
                1..=5 => "partial",
                _ => "full",
            }
            .to_string(),
            seccomp: seccomp.is_some(),
            no_new_privs: true,
            network: network(cfg),
            uid: creds.uid,
            gid: creds.gid,
            limits,
            not_applied: notes.not_applied,
            warnings: notes.warnings,
        };
        Ok(Sandbox {
            shared: Arc::new(Shared {
                landlock,
                landlock_read_only,
                seccomp,
                creds,
                cap_last: supervisor.cap_last(),
                rlimits,
                cgroups,
                cgroup_pool: Mutex::new(Vec::new()),
                rundir_pool: Mutex::new(Vec::new()),
                pids_max: cfg.pids_max,
                memory_max: cfg.memory_max_bytes,
                rundir_base,
                root,
                summary,
            }),
        })
    }
}

/// The kernel's Landlock ABI, checked against what the configuration needs.
fn landlock_abi(strict: bool, inet: bool, notes: &mut Notes) -> Result<u32, SandboxError> {
    #[cfg(debug_assertions)]
    let abi = if std::env::var_os(TEST_NO_LANDLOCK_ENV).is_some() {
        0
    } else {
        landlock::abi()
    };
    #[cfg(not(debug_assertions))]
    let abi = landlock::abi();
    if abi == 0 {
        if strict {
            return Err(SandboxError::Landlock(
                "the kernel offers no Landlock (needs Linux 5.13+ with landlock in the lsm= list)"
                    .into(),
            ));
        }
        notes.not_applied.push("landlock".to_string());
        return Ok(0);
    }
    for (min, what) in [
        (2, "landlock_refer"),
        (3, "landlock_truncate"),
        (5, "landlock_ioctl_dev"),
        (6, "landlock_scopes"),
    ] {
        if abi < min {
            notes.not_applied.push(what.to_string());
        }
    }
    if abi < 4 {
        if inet && strict {
            return Err(SandboxError::Landlock(format!(
                "TCP port rules need Landlock ABI 4, the kernel offers {abi}"
            )));
        }
        notes.not_applied.push("landlock_net".to_string());
    }
    Ok(abi)
}

/// The compiled filter, when the kernel accepts filters.
fn seccomp_program(
    strict: bool,
    options: seccomp::Options,
    notes: &mut Notes,
) -> Result<Option<Vec<libc::sock_filter>>, SandboxError> {
    if crate::spawn::sys::seccomp_filter_available() {
        return seccomp::build(options).map(Some);
    }
    if strict {
        return Err(SandboxError::Seccomp(
            "the kernel refuses seccomp filters".into(),
        ));
    }
    notes.not_applied.push("seccomp".to_string());
    Ok(None)
}

/// Setups that run, but not as the configuration meant.
fn user_warnings(cfg: &SandboxConfig, creds: &Creds, root: &Path, notes: &mut Notes) {
    if cfg.run_as.is_some() && !creds.privileged {
        notes
            .warnings
            .push("sandbox.run_as is ignored: only a root supervisor can switch users".to_string());
    }
    if !privs::can_write(root, creds.uid, creds.gid) {
        notes.warnings.push(format!(
            "uid {} cannot write the root {}: `chown -R {}:{} {}` or set sandbox.run_as to its owner",
            creds.uid,
            root.display(),
            creds.uid,
            creds.gid,
            root.display()
        ));
    }
}

/// Opens every path the child may use and records its rights.
fn landlock_plan(
    cfg: &SandboxConfig,
    abi: u32,
    root: &Path,
    notes: &mut Notes,
) -> Result<landlock::Plan, SandboxError> {
    let mut ports = Vec::new();
    for p in &cfg.connect_ports {
        ports.push((*p, landlock::ACCESS_NET_CONNECT_TCP));
    }
    for p in &cfg.bind_ports {
        ports.push((*p, landlock::ACCESS_NET_BIND_TCP));
    }
    let mut plan = landlock::Plan::new(abi, &ports);
    let add = |plan: &mut landlock::Plan, p: &Path, access: u64| {
        plan.add_path(p, access)
            .map_err(|source| SandboxError::LandlockPath {
                path: p.to_string_lossy().into_owned(),
                source,
            })
    };
    for p in &cfg.system_read {
        add(&mut plan, p, landlock::READ_EXEC)?;
    }
    for p in ETC_READ {
        add(&mut plan, Path::new(p), landlock::READ_EXEC)?;
    }
    // Debian's Python imports sitecustomize from /etc/python3.x.
    if let Ok(rd) = std::fs::read_dir("/etc") {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with("python3") {
                add(&mut plan, &e.path(), landlock::READ_EXEC)?;
            }
        }
    }
    if !cfg.connect_ports.is_empty() {
        add(&mut plan, Path::new("/etc/hosts"), landlock::READ_EXEC)?;
    }
    let dev_rw = landlock::ACCESS_FS_READ_FILE
        | landlock::ACCESS_FS_WRITE_FILE
        | landlock::ACCESS_FS_TRUNCATE
        | landlock::ACCESS_FS_IOCTL_DEV;
    for p in ["/dev/null", "/dev/zero", "/dev/full"] {
        add(&mut plan, Path::new(p), dev_rw)?;
    }
    for p in ["/dev/urandom", "/dev/random"] {
        add(&mut plan, Path::new(p), landlock::ACCESS_FS_READ_FILE)?;
    }
    for p in &cfg.read {
        add(&mut plan, Path::new(p), landlock::READ_EXEC)?;
    }
    let rw = plan.rw_access;
    if !add(&mut plan, root, rw)? {
        return Err(SandboxError::RootVanished(root.to_path_buf()));
    }
    for p in &cfg.write {
        if !add(&mut plan, Path::new(p), rw)? {
            notes
                .warnings
                .push(format!("sandbox.write path {p} does not exist; skipped"));
        }
    }
    Ok(plan)
}

/// The rlimits the child sets, and their summary entries.
fn rlimits(cfg: &SandboxConfig, creds: &Creds) -> (Vec<Rlimit>, Vec<String>) {
    let mut rlimits = vec![Rlimit {
        resource: libc::RLIMIT_CORE,
        value: 0,
    }];
    let mut limits = vec!["rlimit_core=0".to_string()];
    let mut push = |resource: RlimitResource, name: &str, value: u64| {
        if value > 0 {
            rlimits.push(Rlimit { resource, value });
            limits.push(format!("rlimit_{name}={value}"));
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
    (rlimits, limits)
}

/// The summary's network entry: `none`, or the loopback ports allowed.
fn network(cfg: &SandboxConfig) -> String {
    if cfg.connect_ports.is_empty() && cfg.bind_ports.is_empty() {
        return "none".to_string();
    }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> SandboxConfig {
        SandboxConfig::new(vec!["/usr".into()])
    }

    #[test]
    fn network_entry_lists_the_ports() {
        let mut c = cfg();
        assert_eq!(network(&c), "none");
        c.connect_ports = vec![80, 443];
        assert_eq!(network(&c), "loopback:connect=80,443");
        c.bind_ports = vec![8080];
        assert_eq!(network(&c), "loopback:connect=80,443;bind=8080");
    }

    #[test]
    fn rlimits_match_their_summary_entries() {
        let c = cfg();
        let user = Creds {
            uid: 1000,
            gid: 1000,
            privileged: true,
        };
        let (limits, names) = rlimits(&c, &user);
        assert_eq!(limits.len(), names.len());
        assert_eq!(
            names,
            [
                "rlimit_core=0",
                "rlimit_nofile=1024",
                "rlimit_fsize=1073741824",
                "rlimit_as=8589934592",
                "rlimit_cpu=600",
                "rlimit_nproc=512"
            ]
        );
        assert_eq!(
            limits[1],
            Rlimit {
                resource: libc::RLIMIT_NOFILE,
                value: 1024
            }
        );
        // Root ignores NPROC: not set, not claimed.
        let root = Creds { uid: 0, ..user };
        let (limits, names) = rlimits(&c, &root);
        assert!(!names.iter().any(|n| n.starts_with("rlimit_nproc")));
        assert!(!limits.iter().any(|l| l.resource == libc::RLIMIT_NPROC));
    }
}
