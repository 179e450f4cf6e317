//! `agent-exec doctor`: what this host's kernel lets the sandbox apply.
//!
//! The layer list is not guessed from version numbers: a probe command
//! (`true`) runs through the same pipeline as any call, and the report is
//! read from the sandbox summary the kernel produced for it. The host facts
//! around it (kernel release, Landlock ABI, cgroup layout, user namespace
//! switches) explain why a layer is missing.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use agent_exec::sandbox::Supervisor;
use agent_exec::{CancelToken, CommandSpec, Policy, RunRequest, Service, ToolResult};

/// A policy that allows only the probe and asks for every layer at best
/// effort, so the probe runs on any host and reports what was missing.
const PROBE_POLICY: &str = r#"
name = "doctor-probe"
description = "Runs `true` with every sandbox layer requested at best effort."
default = "deny"

[sandbox]
enforcement = "best_effort"

[[rule]]
id = "probe"
action = "allow"
programs = ["true"]
read_only = true
risk = "low"
reason = "The doctor's probe: runs nothing but true."
"#;

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Probe with this policy (its enforcement and requirements) instead of
    /// the built-in best-effort probe: answers "would my policy run here?".
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 unless these layers applied (comma-separated names as in the
    /// report, e.g. `landlock,seccomp,cgroup_memory`).
    #[arg(long, value_name = "LAYERS", value_delimiter = ',')]
    pub require: Vec<String>,
}

/// One layer's line of the report.
#[derive(Debug, Serialize)]
pub struct LayerReport {
    pub name: &'static str,
    pub applied: bool,
    /// Why it is missing, or what it amounts to where it applied.
    pub detail: String,
}

/// The whole report.
#[derive(Debug, Serialize)]
pub struct Report {
    pub kernel: String,
    pub arch: &'static str,
    pub euid: u32,
    pub landlock_abi: u32,
    pub cgroup: CgroupReport,
    pub user_namespaces: Vec<String>,
    pub layers: Vec<LayerReport>,
    /// The probe's own result when it did not run (e.g. a strict policy on
    /// a host that lacks a required layer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_error: Option<String>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct CgroupReport {
    /// `v2`, `v1` or `hybrid`, from what is mounted at /sys/fs/cgroup.
    pub layout: String,
    /// This process's cgroup membership (/proc/self/cgroup).
    pub membership: Vec<String>,
    /// Controllers enabled for children of this process's cgroup (v2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subtree_controllers: Option<String>,
    /// A cgroup hierarchy is mounted with `favordynmods`: moving a process
    /// between cgroups does not wait for an RCU grace period.
    pub favordynmods: bool,
}

pub fn doctor(args: DoctorArgs, supervisor: &Supervisor) -> i32 {
    let report = match build(&args, supervisor) {
        Ok(r) => r,
        Err(m) => {
            eprintln!("agent-exec doctor: {m}");
            return 125;
        }
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => {
                let _ = writeln!(out, "{s}");
            }
            Err(e) => {
                eprintln!("agent-exec doctor: {e}");
                return 125;
            }
        }
    } else {
        let _ = out.write_all(render(&report).as_bytes());
    }
    // In a GitHub Actions log, a missing layer is an annotation on the run,
    // not a line lost in the middle of the output.
    if std::env::var_os("GITHUB_ACTIONS").is_some_and(|v| v == "true") {
        for l in report.layers.iter().filter(|l| !l.applied) {
            let _ = writeln!(
                out,
                "::warning title=agent-exec sandbox layer not applied::{}: {}",
                l.name, l.detail
            );
        }
    }
    let missing: Vec<&str> = args
        .require
        .iter()
        .map(String::as_str)
        .filter(|want| !report.layers.iter().any(|l| l.name == *want && l.applied))
        .collect();
    if missing.is_empty() {
        0
    } else {
        eprintln!(
            "agent-exec doctor: required layer(s) not applied here: {}",
            missing.join(", ")
        );
        1
    }
}

fn build(args: &DoctorArgs, supervisor: &Supervisor) -> Result<Report, String> {
    let policy = match &args.policy {
        Some(p) => Policy::load(p).map_err(|e| e.to_string())?,
        None => Policy::parse(PROBE_POLICY, "doctor probe").map_err(|e| e.to_string())?,
    };
    for want in &args.require {
        if !LAYER_NAMES.contains(&want.as_str()) {
            return Err(format!(
                "--require {want:?}: not a layer name; one of {}",
                LAYER_NAMES.join(", ")
            ));
        }
    }
    let root = ProbeRoot::create()?;
    let result = probe(policy, root.path(), supervisor);
    let abi = agent_exec::sandbox::landlock_abi();
    let mut report = Report {
        kernel: kernel_release(),
        arch: std::env::consts::ARCH,
        euid: nix::unistd::geteuid().as_raw(),
        landlock_abi: abi,
        cgroup: cgroup_report(),
        user_namespaces: userns_switches(),
        layers: Vec::new(),
        probe_error: None,
        warnings: Vec::new(),
    };
    match result.sandbox.as_ref() {
        Some(s) if result.ok => {
            report.layers = layers(s, abi, report.euid);
            // The probe's root is a throwaway directory: warnings about it
            // (who can write it) say nothing about the host.
            let probe_root = root.path().display().to_string();
            report.warnings = s
                .warnings
                .iter()
                .filter(|w| !w.contains(&probe_root))
                .cloned()
                .collect();
            report.warnings.extend(migration_warning(&report.cgroup, s));
        }
        _ => {
            report.probe_error = Some(format!(
                "{}: {}",
                result
                    .error_type
                    .and_then(|e| serde_json::to_value(e).ok())
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_else(|| "FAILED".into()),
                result.message
            ));
            report.layers = LAYER_NAMES
                .iter()
                .map(|&name| LayerReport {
                    name,
                    applied: false,
                    detail: "the probe did not run (see probe_error)".into(),
                })
                .collect();
        }
    }
    Ok(report)
}

fn probe(policy: Policy, root: &Path, supervisor: &Supervisor) -> ToolResult {
    let service = match Service::builder(policy, root).build(supervisor) {
        Ok(s) => s,
        Err(e) => {
            return ToolResult::refusal(
                "doctor",
                agent_exec::ErrorType::SandboxUnavailable,
                e.to_string(),
            );
        }
    };
    let req = RunRequest::new(CommandSpec::Argv(vec!["true".into()]));
    service.call(req, &CancelToken::new())
}

/// Every line the report has, in order.
const LAYER_NAMES: [&str; 12] = [
    "landlock",
    "landlock_net",
    "landlock_scopes",
    "seccomp",
    "no_new_privs",
    "privilege_drop",
    "mount_namespace",
    "ipc_namespace",
    "net_namespace",
    "cgroup",
    "cgroup_pids",
    "cgroup_memory",
];

fn layers(s: &agent_exec::SandboxSummary, abi: u32, euid: u32) -> Vec<LayerReport> {
    let missing = |name: &str| s.not_applied.iter().any(|n| n == name);
    let has_limit = |prefix: &str| s.limits.iter().any(|l| l.starts_with(prefix));
    let line = |name: &'static str, applied: bool, yes: String, no: String| LayerReport {
        name,
        applied,
        detail: if applied { yes } else { no },
    };
    vec![
        line(
            "landlock",
            s.landlock == "full" && !missing("landlock"),
            format!("filesystem rules, ABI {abi}"),
            if abi == 0 {
                "the kernel offers no Landlock (not built in, or not in the lsm= list)".into()
            } else {
                format!("landlock {} (ABI {abi})", s.landlock)
            },
        ),
        line(
            "landlock_net",
            abi >= 4,
            "TCP port rules available (ABI >= 4); used when a policy allows ports".into(),
            format!("needs Landlock ABI 4 (kernel 6.7), have {abi}; a policy allowing loopback ports cannot be enforced here"),
        ),
        line(
            "landlock_scopes",
            abi >= 6 && !missing("landlock_scopes"),
            "signal and abstract-socket scopes (ABI >= 6)".into(),
            format!("needs Landlock ABI 6 (kernel 6.12), have {abi}: signals and abstract Unix sockets are contained by seccomp and the uid only, and a uid-0 child is refused"),
        ),
        line(
            "seccomp",
            s.seccomp && !missing("seccomp"),
            "syscall filter".into(),
            "the seccomp filter could not be installed".into(),
        ),
        line(
            "no_new_privs",
            s.no_new_privs,
            "setuid binaries cannot raise privileges".into(),
            "no_new_privs was not confirmed".into(),
        ),
        line(
            "privilege_drop",
            euid != 0 || s.uid != 0,
            if euid == 0 {
                format!("child runs as uid {} gid {}", s.uid, s.gid)
            } else {
                format!("the supervisor is not root: the child keeps its uid {}", s.uid)
            },
            "the child runs as root".into(),
        ),
        line(
            "mount_namespace",
            has_limit("mount_namespace"),
            if has_limit("user_namespace") {
                "private /tmp, /var/tmp, /dev/shm; host /run and homes hidden (made in a user namespace of the sandbox's own, where only the supervisor's uid is mapped)".into()
            } else {
                "private /tmp, /var/tmp, /dev/shm; host /run and homes hidden".into()
            },
            namespace_reason(euid),
        ),
        line(
            "ipc_namespace",
            has_limit("ipc_namespace"),
            "SysV IPC objects are the run's own".into(),
            namespace_reason(euid),
        ),
        line(
            "net_namespace",
            has_limit("net_namespace"),
            "an empty network namespace: no host socket is listed or reachable".into(),
            namespace_reason(euid),
        ),
        line(
            "cgroup",
            has_limit("cgroup_kill") && !missing("cgroup"),
            "a cgroup per run: every descendant is counted and killed".into(),
            "no writable, delegated cgroup for this supervisor: descendants are tracked by process group and rlimits only".into(),
        ),
        line(
            "cgroup_pids",
            has_limit("cgroup_pids_max"),
            "pids.max per run".into(),
            "no pids controller in the run's cgroup: RLIMIT_NPROC bounds processes per uid instead".into(),
        ),
        line(
            "cgroup_memory",
            has_limit("cgroup_memory_max"),
            "memory.max per run (all processes together)".into(),
            "no memory controller in the run's cgroup: RLIMIT_AS bounds each process, not the run".into(),
        ),
    ]
}

fn namespace_reason(euid: u32) -> String {
    if euid == 0 {
        "the supervisor is root but could not unshare (a container runtime's seccomp profile or missing CAP_SYS_ADMIN?)".into()
    } else {
        "the supervisor is not root and the host refused it an unprivileged user namespace to make one in (user.max_user_namespaces, kernel.unprivileged_userns_clone, or an LSM such as AppArmor's restrict_unprivileged_userns); the seccomp filter refuses SysV IPC and Unix sockets instead".into()
    }
}

fn kernel_release() -> String {
    nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_else(|e| format!("unknown ({e})"))
}

fn cgroup_report() -> CgroupReport {
    let membership: Vec<String> = std::fs::read_to_string("/proc/self/cgroup")
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default();
    let v2_only = membership.len() == 1 && membership[0].starts_with("0::");
    let has_v2_line = membership.iter().any(|l| l.starts_with("0::"));
    let v2_mounted = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let layout = if v2_only && v2_mounted {
        "v2"
    } else if v2_mounted || (has_v2_line && Path::new("/sys/fs/cgroup/unified").exists()) {
        "hybrid"
    } else {
        "v1"
    };
    let subtree_controllers = membership
        .iter()
        .find_map(|l| l.strip_prefix("0::"))
        .filter(|_| v2_mounted)
        .and_then(|own| {
            let dir = Path::new("/sys/fs/cgroup").join(own.trim_start_matches('/'));
            std::fs::read_to_string(dir.join("cgroup.subtree_control")).ok()
        })
        .map(|s| s.trim().to_string());
    CgroupReport {
        layout: layout.into(),
        membership,
        subtree_controllers,
        favordynmods: favordynmods(),
    }
}

/// Whether a cgroup or cgroup2 mount says `favordynmods` in its super
/// block options (the last field of a `/proc/self/mountinfo` line).
fn favordynmods() -> bool {
    std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|m| {
        m.lines().any(|l| {
            l.split_once(" - ").is_some_and(|(_, right)| {
                let mut f = right.split(' ');
                matches!(f.next(), Some("cgroup" | "cgroup2"))
                    && f.nth(1)
                        .is_some_and(|o| o.split(',').any(|o| o == "favordynmods"))
            })
        })
    })
}

/// On a host where a run's limits live in cgroup v1 hierarchies, the child
/// joins them by moving itself (v1 has no `CLONE_INTO_CGROUP`). That move
/// takes the kernel's cgroup threadgroup lock for writing, which waits for
/// an RCU grace period unless another move happened just before: a call
/// that comes alone, which is how agents call, pays it (14-19 ms measured
/// on a 2-core VM, BENCHMARKS.md). Only the host can remove the wait.
fn migration_warning(c: &CgroupReport, s: &agent_exec::SandboxSummary) -> Option<String> {
    let limited = s
        .limits
        .iter()
        .any(|l| l.starts_with("cgroup_pids_max") || l.starts_with("cgroup_memory_max"));
    (c.layout != "v2" && limited && !c.favordynmods).then(|| {
        "runs join cgroup v1 hierarchies by migration, which waits for an RCU grace period \
         when no migration happened just before (10-30 ms added to a call that comes alone). \
         The host removes the wait by mounting a cgroup hierarchy with `favordynmods` \
         (`mount -o remount,favordynmods /sys/fs/cgroup/unified` on a hybrid host, or the \
         `cgroup_favordynmods=true` boot parameter, Linux 6.1+), at a small cost to every \
         fork and exit on the host; from Linux 6.18 it stays on until reboot. A pure \
         cgroup v2 host with the pids and memory controllers needs neither: runs are \
         born in their cgroup."
            .to_string()
    })
}

/// The sysctls that decide whether unprivileged user namespaces exist here
/// (Debian's switch, Ubuntu 24.04's AppArmor restriction, the generic cap).
fn userns_switches() -> Vec<String> {
    [
        "/proc/sys/kernel/unprivileged_userns_clone",
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
        "/proc/sys/user/max_user_namespaces",
    ]
    .iter()
    .filter_map(|p| {
        let v = std::fs::read_to_string(p).ok()?;
        let name = p.trim_start_matches("/proc/sys/").replace('/', ".");
        Some(format!("{name}={}", v.trim()))
    })
    .collect()
}

fn render(r: &Report) -> String {
    let mut s = String::new();
    s.push_str(&format!("kernel:        {} ({})\n", r.kernel, r.arch));
    s.push_str(&format!(
        "supervisor:    euid {}{}\n",
        r.euid,
        if r.euid == 0 { " (root)" } else { "" }
    ));
    s.push_str(&format!("landlock ABI:  {}\n", r.landlock_abi));
    s.push_str(&format!("cgroup:        {}\n", r.cgroup.layout));
    for m in &r.cgroup.membership {
        s.push_str(&format!("  {m}\n"));
    }
    if let Some(c) = &r.cgroup.subtree_controllers {
        s.push_str(&format!(
            "  controllers for child cgroups: {}\n",
            if c.is_empty() { "(none)" } else { c }
        ));
    }
    if r.cgroup.layout != "v2" {
        s.push_str(&format!(
            "  favordynmods: {}\n",
            if r.cgroup.favordynmods {
                "on (joining a v1 cgroup does not wait)"
            } else {
                "off (see the warning below)"
            }
        ));
    }
    if !r.user_namespaces.is_empty() {
        s.push_str(&format!("userns:        {}\n", r.user_namespaces.join(" ")));
    }
    if let Some(e) = &r.probe_error {
        s.push_str(&format!("probe:         did not run: {e}\n"));
    }
    s.push_str("layers:\n");
    for l in &r.layers {
        s.push_str(&format!(
            "  {:<16} {:<12} {}\n",
            l.name,
            if l.applied { "applied" } else { "NOT APPLIED" },
            l.detail
        ));
    }
    for w in &r.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    s
}

/// A fresh, empty directory for the probe to run in, removed afterwards.
/// Created with `create_dir` (never reusing an existing path), world-readable
/// so a child that runs as another user can enter it.
struct ProbeRoot(PathBuf);

impl ProbeRoot {
    fn create() -> Result<ProbeRoot, String> {
        use std::os::unix::fs::PermissionsExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir =
            std::env::temp_dir().join(format!("agent-exec-doctor-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(ProbeRoot(dir))
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ProbeRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}
