//! [`Sandbox::prepare`]: probing the kernel and preparing every layer from
//! a [`SandboxConfig`], once per service.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::layers::{self, Notes};
use super::{Sandbox, Shared};
use crate::config::{Namespaces, SandboxConfig};
use crate::error::SandboxError;
use crate::plan::{identity, landlock, mounts, privs, rundir, seccomp};
use crate::spawn::{Creds, Rlimit, RlimitResource};
use crate::summary::Summary;
use crate::supervisor::Supervisor;

/// `/etc` entries the dynamic loader, TLS, time and NSS need. Not the
/// host's `passwd`, `shadow` or anything else: they stay unreadable (a run
/// with its own mount namespace reads a synthesized `passwd` and `group`,
/// see `plan::identity`).
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

impl Sandbox {
    /// Probes the kernel and prepares every layer for children confined to
    /// `root`. A missing layer the configuration requires (every layer
    /// under strict enforcement, unless overridden) is an error naming it;
    /// under best effort it is listed in `summary().not_applied`.
    ///
    /// Takes the [`Supervisor`]: a sandbox exists only in a process set up
    /// for it.
    pub fn prepare(
        supervisor: &Supervisor,
        cfg: &SandboxConfig,
        root: &Path,
    ) -> Result<Sandbox, SandboxError> {
        let root = root.canonicalize().map_err(|source| SandboxError::Root {
            path: root.to_path_buf(),
            source,
        })?;
        let inet = !cfg.connect_ports.is_empty() || !cfg.bind_ports.is_empty();
        let mut notes = Notes::default();
        // Started by the supervisor before the policy was loaded, or here,
        // beside the rest of the preparation: either way its kernel work
        // (about a millisecond) overlaps other work.
        let network_ns = (!inet && cfg.namespaces != Namespaces::Off)
            .then(|| {
                supervisor.take_network_namespace().or_else(|| {
                    namespaces_possible()
                        .then(|| crate::spawn::sys::start_empty_network_namespace(None))
                        .flatten()
                })
            })
            .flatten();

        let choice = layers::landlock(cfg, inet, &mut notes)?;
        let options = seccomp::Options {
            inet,
            unix_sockets: cfg.allow_unix_sockets,
        };
        let seccomp = layers::seccomp_program(cfg, options, &mut notes)?;
        let creds = privs::resolve(
            cfg.run_as.as_deref(),
            cfg.allow_root_child,
            cfg.root_owned_as_root,
            &root,
        )?;
        // uid 0 because the project is root's, not because it was asked for:
        // the refusal says how to run such a project instead.
        let implicit_root = creds.uid == 0 && cfg.run_as.is_none() && !cfg.allow_root_child;
        layers::check_root_child(&creds, &choice, cfg).map_err(|e| match e {
            SandboxError::RootChildUnscoped { reason } if implicit_root => {
                SandboxError::RootOwnedProject {
                    root: root.clone(),
                    reason,
                }
            }
            other => other,
        })?;
        user_warnings(cfg, &creds, &root, &mut notes);
        let rundir_base = rundir::ensure_base()?;
        // A supervisor without CAP_SYS_ADMIN (not root) gives its runs
        // their namespaces from a user namespace of the sandbox's own,
        // where the host allows unprivileged ones; made once here, joined
        // by each run's child.
        let (mut user_ns, user_ns_refused) = match (cfg.namespaces, creds.privileged) {
            (Namespaces::Off, _) | (_, true) => (None, None),
            _ if namespaces_possible() => (None, None),
            _ => {
                let made = match supervisor.take_user_namespace() {
                    Some(pending) => pending.join().unwrap_or_else(|_| {
                        Err(std::io::Error::other("the user namespace thread panicked"))
                    }),
                    None => crate::spawn::sys::make_user_namespace(
                        nix::unistd::Uid::effective().as_raw(),
                        nix::unistd::Gid::effective().as_raw(),
                        !inet,
                    ),
                };
                match made {
                    Ok(mut made) => {
                        // Runs with loopback ports keep the host's network.
                        if inet {
                            made.net = None;
                        }
                        (Some(made), None)
                    }
                    Err(e) => (None, Some(e)),
                }
            }
        };
        // Only runs with namespaces of their own get these, where they
        // stand in for the host's files; made now so Landlock can grant
        // them.
        let identity = match (cfg.namespaces, creds.privileged || user_ns.is_some()) {
            (Namespaces::Off, _) | (_, false) => None,
            _ => identity::files(&rundir_base, creds.uid, creds.gid),
        };
        let identity_read: Vec<PathBuf> = identity
            .iter()
            .flat_map(|(p, g)| [p.clone(), g.clone()])
            .collect();
        let landlock = match choice.fs {
            false => None,
            true => {
                let mut plan = landlock_plan(cfg, choice.abi, &root, &identity_read, &mut notes)?;
                plan.leave_out(!choice.net, !choice.scopes);
                Some(plan)
            }
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
        let (rlimits, mut limits) = rlimits(cfg, &creds);

        // On a hybrid host the run is born in its v2 cgroup (kill) but still
        // migrates into the v1 pids cgroup, which can wait for an RCU grace
        // period. RLIMIT_NPROC is no substitute: it counts the child user's
        // processes host-wide, so one run's fork bomb would starve every
        // other run of the daemon.
        let cgroups = layers::cgroups(cfg, supervisor.cgroups(), &mut notes)?;
        // The identity files are seen only where they are bound, over
        // `/etc`'s (before any cover is made): kept at their own path
        // beneath a fallback base in `/tmp`, they would keep `/tmp` from
        // becoming the run's own, and be writable through it.
        let bound_only: Vec<PathBuf> = identity_read
            .iter()
            .filter_map(|p| p.canonicalize().ok())
            .collect();
        let granted: Vec<(PathBuf, bool)> = granted_paths(cfg, landlock.as_ref(), &root)
            .into_iter()
            .filter(|(p, _)| !bound_only.contains(p))
            .collect();
        // What runs may write, beside their own directories: a scratch
        // cover with one of these beneath it stays the host's.
        let writable: Vec<PathBuf> = std::iter::once(root.clone())
            .chain(
                cfg.write
                    .iter()
                    .filter_map(|p| Path::new(p).canonicalize().ok()),
            )
            .collect();
        let mut mounts = namespaces(
            cfg,
            (&granted, &writable),
            &rundir_base,
            (user_ns.is_some(), user_ns_refused),
            &mut notes,
        )?;
        if let (Some(layout), Some((passwd, group))) = (mounts.as_mut(), &identity) {
            layout.bind_file(passwd, Path::new("/etc/passwd"));
            layout.bind_file(group, Path::new("/etc/group"));
        }
        if mounts.is_some() {
            limits.extend(NAMESPACES.iter().map(|n| n.to_string()));
            if user_ns.is_some() {
                limits.push(USER_NAMESPACE.to_string());
            }
        }
        // The user namespace's own network namespace, for a non-root
        // supervisor; else the one a thread made.
        let network_ns = match (network_ns, user_ns.as_mut().and_then(|u| u.net.take())) {
            (None, Some(fd)) => Some(Ok(Ok(fd))),
            (pending, _) => pending.map(|t| t.join()),
        };
        let network_ns = match network_ns {
            Some(Ok(Ok(fd))) if mounts.is_some() => {
                limits.push(NET_NAMESPACE.to_string());
                Some(fd)
            }
            // Not asked for (the policy grants ports, or no namespaces).
            None if inet || cfg.namespaces == Namespaces::Off => None,
            // Without mount namespaces this was recorded as not applied.
            _ if mounts.is_none() => None,
            failed => {
                if cfg.namespaces == Namespaces::Required {
                    let source = match failed {
                        Some(Ok(Err(e))) => Some(e),
                        _ => None,
                    };
                    return Err(SandboxError::Namespaces {
                        reason: "the kernel refused an empty network namespace for the runs"
                            .to_string(),
                        source,
                    });
                }
                notes.not_applied.push(NET_NAMESPACE.to_string());
                None
            }
        };

        let summary = Summary {
            landlock_abi: choice.abi,
            landlock: choice.level().to_string(),
            seccomp: seccomp.is_some(),
            no_new_privs: crate::spawn::NO_NEW_PRIVS_CHECKED,
            network: network(cfg),
            uid: creds.uid,
            gid: creds.gid,
            limits,
            not_applied: notes.not_applied,
            warnings: notes.warnings,
        };
        let ahead = match supervisor.namespaces_ahead() {
            _ if mounts.is_none() => None,
            // No thread may enter a user namespace (the kernel refuses
            // `setns` into one to a threaded process), so none can make a
            // run's namespaces inside it.
            _ if user_ns.is_some() => None,
            // Every run's own directory would have to be bound into it:
            // runs make their own (a supervisor whose run directories lie
            // beneath a cover, as a base under `/run` does).
            _ if mounts.as_ref().is_some_and(|m| m.run_base_covered()) => None,
            crate::supervisor::NamespacesAhead::Off => None,
            crate::supervisor::NamespacesAhead::FirstRun => Some(super::Ahead::new(false)),
            _ => Some(super::Ahead::new(true)),
        };
        let shared = Arc::new(Shared {
            landlock,
            landlock_read_only,
            seccomp,
            creds,
            cap_last: supervisor.cap_last(),
            rlimits,
            cgroups: cgroups.layout,
            cgroup_levels: cgroups.levels,
            cgroup_pool: Mutex::new(Vec::new()),
            cgroup_slots: supervisor.cgroup_slots().map(Path::to_path_buf),
            rundir_pool: Mutex::new(Vec::new()),
            pids_max: cgroups.pids_max,
            memory_max: cgroups.memory_max,
            rundir_base,
            root,
            mounts,
            user_ns: user_ns.map(|u| u.user),
            network: network_ns,
            ahead,
            settle_later: supervisor.children_ahead(),
            summary,
        });
        super::Ahead::start_first(&shared);
        // Runs claim kept cgroups and make run directories only once the
        // sweep of what earlier supervisors left is over (it may run on a
        // thread of its own; by now it usually is): a slot it is still
        // clearing is then never passed over.
        supervisor.wait_for_sweep();
        // After the sweep too: its first child takes a run directory and
        // a cgroup.
        let children = supervisor
            .children_ahead()
            .then(|| super::ready::Children::start(&shared))
            .flatten()
            .map(Arc::new);
        Ok(Sandbox { shared, children })
    }
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
    extra_read: &[PathBuf],
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
    for p in extra_read {
        add(&mut plan, p, landlock::ACCESS_FS_READ_FILE)?;
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

/// How the summary names the namespaces, in `limits` when every run gets
/// them and in `not_applied` when `auto` could not.
const NAMESPACES: [&str; 2] = ["mount_namespace", "ipc_namespace"];

/// The summary's name for the runs' shared empty network namespace: in
/// `limits` when runs join it, in `not_applied` when a sandbox without
/// network could not make it (and namespaces were possible otherwise,
/// or not: then it joins the two above).
const NET_NAMESPACE: &str = "net_namespace";

/// The summary's name for the user namespace a non-root supervisor's runs
/// make their namespaces in: in `limits` when they do.
const USER_NAMESPACE: &str = "user_namespace";

/// Whether trying to make namespaces can succeed, cheaply: a definite
/// "no" (no CAP_SYS_ADMIN) spares the thread.
fn namespaces_possible() -> bool {
    !matches!(crate::spawn::sys::namespaces_known(), Some(Err(_)))
}

/// Every path the child may use, where it lands once symlinks are
/// followed, and whether it is a directory: what a run's mount namespace
/// must keep visible.
fn granted_paths(
    cfg: &SandboxConfig,
    landlock: Option<&landlock::Plan>,
    root: &Path,
) -> Vec<(PathBuf, bool)> {
    let mut granted: Vec<(PathBuf, bool)> = vec![(root.to_path_buf(), true)];
    match landlock {
        Some(plan) => granted.extend(plan.real_paths().map(|(p, d)| (p.to_path_buf(), d))),
        // Without Landlock nothing is enforced by path, but the configured
        // paths are still what the child is meant to use.
        None => {
            let listed = cfg
                .system_read
                .iter()
                .cloned()
                .chain(cfg.read.iter().chain(&cfg.write).map(PathBuf::from));
            for p in listed {
                if let Ok(real) = p.canonicalize() {
                    let is_dir = real.is_dir();
                    granted.push((real, is_dir));
                }
            }
        }
    }
    granted
}

/// The run's own namespaces, when the configuration asks for them and
/// the supervisor can make them: its credentials tell, or else a probe
/// does what each child will.
///
/// `user_ns`: whether the runs make them in the sandbox's user namespace
/// (a non-root supervisor), or why the host refused one.
fn namespaces(
    cfg: &SandboxConfig,
    (granted, writable): (&[(PathBuf, bool)], &[PathBuf]),
    rundir_base: &Path,
    user_ns: (bool, Option<std::io::Error>),
    notes: &mut Notes,
) -> Result<Option<mounts::Layout>, SandboxError> {
    if cfg.namespaces == Namespaces::Off {
        return Ok(None);
    }
    let mut layout = mounts::Layout::new(granted, writable, rundir_base);
    let (in_user_ns, user_ns_refused) = user_ns;
    if in_user_ns {
        layout.set_in_user_namespace();
        return Ok(Some(layout));
    }
    let target = layout.covered().next().unwrap_or(c"/");
    let user_ns_was_refused = user_ns_refused.is_some();
    let source = match user_ns_refused {
        Some(refused) => refused,
        None => {
            let known = crate::spawn::sys::namespaces_known();
            match known.unwrap_or_else(|| crate::spawn::sys::probe_namespaces(target)) {
                Ok(()) => return Ok(Some(layout)),
                Err(e) => e,
            }
        }
    };
    if cfg.namespaces == Namespaces::Required {
        let reason = if user_ns_was_refused {
            "the supervisor is not root and the host refused it an unprivileged user namespace to make them in (see /proc/sys/user/max_user_namespaces and any LSM restriction of user namespaces)"
        } else if source.raw_os_error() == Some(libc::EPERM) {
            "the supervisor may not create mount and IPC namespaces (it needs CAP_SYS_ADMIN: run it as root)"
        } else {
            "the kernel refused a mount or IPC namespace"
        };
        return Err(SandboxError::Namespaces {
            reason: reason.to_string(),
            source: Some(source),
        });
    }
    notes
        .not_applied
        .extend(NAMESPACES.iter().map(|n| n.to_string()));
    if cfg.connect_ports.is_empty() && cfg.bind_ports.is_empty() {
        notes.not_applied.push(NET_NAMESPACE.to_string());
    }
    Ok(None)
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
