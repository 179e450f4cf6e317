//! Landlock, at the level of the kernel's structures: the child applies the
//! ruleset between fork and exec, where it may not allocate, so the
//! `landlock` crate's builder (which allocates and returns rich errors) is
//! not usable there. The parent does the costly part once, here: probing
//! the ABI, choosing the rights and opening every allowed path
//! `O_PATH|O_CLOEXEC`. The raw syscalls themselves (the probe and the
//! child's `apply_in_child`) live in `crate::spawn::landlock_sys`, with the
//! rest of the crate's `unsafe` code.
//!
//! Why the ruleset is created in the child and not once in the parent: the
//! child must add a rule for its *own* `/proc/<pid>`, which only exists
//! after fork, and a ruleset fd is one kernel object shared by every fork
//! of the parent, so a rule added from one child would leak into every
//! concurrent run. Creating the ruleset in the child costs one syscall plus
//! one `landlock_add_rule` per pre-opened fd (about 20), all on data
//! prepared in the parent.

use std::os::fd::OwnedFd;
use std::path::Path;

use nix::fcntl::{OFlag, open};
use nix::sys::stat::{Mode, SFlag, fstat};

pub const ACCESS_FS_EXECUTE: u64 = 1 << 0;
pub const ACCESS_FS_WRITE_FILE: u64 = 1 << 1;
pub const ACCESS_FS_READ_FILE: u64 = 1 << 2;
pub const ACCESS_FS_READ_DIR: u64 = 1 << 3;
pub const ACCESS_FS_REFER: u64 = 1 << 13;
pub const ACCESS_FS_TRUNCATE: u64 = 1 << 14;
pub const ACCESS_FS_IOCTL_DEV: u64 = 1 << 15;

pub const ACCESS_NET_BIND_TCP: u64 = 1 << 0;
pub const ACCESS_NET_CONNECT_TCP: u64 = 1 << 1;

pub const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
pub const SCOPE_SIGNAL: u64 = 1 << 1;

pub const RULE_PATH_BENEATH: libc::c_int = 1;
pub const RULE_NET_PORT: libc::c_int = 2;

/// Rights that apply to a non-directory; adding any other right to a rule
/// on a file is EINVAL.
pub const FILE_RIGHTS: u64 = ACCESS_FS_EXECUTE
    | ACCESS_FS_WRITE_FILE
    | ACCESS_FS_READ_FILE
    | ACCESS_FS_TRUNCATE
    | ACCESS_FS_IOCTL_DEV;
pub const READ_EXEC: u64 = ACCESS_FS_EXECUTE | ACCESS_FS_READ_FILE | ACCESS_FS_READ_DIR;

/// `struct landlock_ruleset_attr`; the size passed to the kernel selects
/// how many fields it reads (8: ABI 1-3, 16: ABI 4-5, 24: ABI 6+).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RulesetAttr {
    pub handled_access_fs: u64,
    pub handled_access_net: u64,
    pub scoped: u64,
}

#[repr(C, packed)]
#[derive(Debug, Clone, Copy)]
pub struct PathBeneathAttr {
    pub allowed_access: u64,
    pub parent_fd: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct NetPortAttr {
    pub allowed_access: u64,
    pub port: u64,
}

/// The kernel's Landlock ABI version, 0 when unavailable.
pub fn probe_abi() -> u32 {
    crate::spawn::landlock_sys::abi_version()
}

/// Every filesystem right the ABI knows.
pub fn fs_rights(abi: u32) -> u64 {
    let mut r = (1u64 << 13) - 1;
    if abi >= 2 {
        r |= ACCESS_FS_REFER;
    }
    if abi >= 3 {
        r |= ACCESS_FS_TRUNCATE;
    }
    if abi >= 5 {
        r |= ACCESS_FS_IOCTL_DEV;
    }
    r
}

/// A pre-opened path and what the child may do beneath it.
#[derive(Debug)]
pub struct PathRule {
    pub fd: OwnedFd,
    pub access: u64,
    /// For summaries and errors only.
    pub path: String,
    /// Where the rule lands once symlinks are followed, and whether that is
    /// a directory: for finding rules another one already covers.
    real: Option<std::path::PathBuf>,
    is_dir: bool,
}

impl PathRule {
    /// Whether `self`, a directory rule, already grants everything `other`
    /// grants: Landlock adds up the rights of every rule on the way down,
    /// so a rule beneath a directory with no right of its own adds nothing.
    fn covers(&self, other: &PathRule) -> bool {
        match (&self.real, &other.real) {
            (Some(dir), Some(path)) => {
                self.is_dir && path.starts_with(dir) && other.access & !self.access == 0
            }
            _ => false,
        }
    }
}

/// What the child needs to build its ruleset.
#[derive(Debug)]
pub struct Plan {
    pub abi: u32,
    pub attr: RulesetAttr,
    pub attr_size: usize,
    pub paths: Vec<PathRule>,
    pub ports: Vec<NetPortAttr>,
    /// Rights on the child's own `/proc/<pid>`.
    pub proc_self_access: u64,
    /// Rights on read-write directories (root, per-run home).
    pub rw_access: u64,
}

impl Plan {
    pub fn new(abi: u32, net_ports: &[(u16, u64)]) -> Plan {
        let handled_fs = fs_rights(abi);
        let mut attr = RulesetAttr {
            handled_access_fs: handled_fs,
            ..Default::default()
        };
        let mut attr_size = 8;
        let mut ports = Vec::new();
        if abi >= 4 {
            attr.handled_access_net = ACCESS_NET_BIND_TCP | ACCESS_NET_CONNECT_TCP;
            attr_size = 16;
            for (port, access) in net_ports {
                ports.push(NetPortAttr {
                    allowed_access: *access,
                    port: u64::from(*port),
                });
            }
        }
        if abi >= 6 {
            attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL;
            attr_size = 24;
        }
        Plan {
            abi,
            attr,
            attr_size,
            paths: Vec::new(),
            ports,
            proc_self_access: ACCESS_FS_READ_FILE | ACCESS_FS_READ_DIR,
            rw_access: handled_fs,
        }
    }

    /// Opens `path` and records a rule; `Ok(false)` when it does not exist.
    /// A rule that an existing one covers is dropped (on a merged-/usr
    /// system `/bin`, `/lib`, `/sbin` are `/usr`'s), and so are existing
    /// rules the new one covers: every rule is a syscall in each child.
    pub fn add_path(&mut self, path: &Path, access: u64) -> std::io::Result<bool> {
        match open_rule(path, access & self.attr.handled_access_fs) {
            Ok(rule) => {
                if !self.paths.iter().any(|r| r.covers(&rule)) {
                    self.paths.retain(|r| !rule.covers(r));
                    self.paths.push(rule);
                }
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Opens `path` `O_PATH|O_CLOEXEC` (following symlinks, so `/bin` on a
/// merged-/usr system names `/usr/bin`) and trims the rights to those valid
/// for its file type.
pub fn open_rule(path: &Path, access: u64) -> std::io::Result<PathRule> {
    let fd = open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())?;
    let st = fstat(&fd)?;
    let is_dir = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR;
    let access = if is_dir { access } else { access & FILE_RIGHTS };
    Ok(PathRule {
        fd,
        access,
        path: path.display().to_string(),
        real: std::fs::canonicalize(path).ok(),
        is_dir,
    })
}

/// Steps of the child's setup, reported through the error pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Step {
    Signals = 1,
    Setsid,
    ParentDeath,
    Stdio,
    CloseFds,
    CgroupJoin,
    Rlimit,
    CapAmbient,
    CapBounding,
    Securebits,
    Setgroups,
    Setgid,
    Setuid,
    Capset,
    NoNewPrivs,
    Chdir,
    LandlockCreate,
    LandlockAddRule,
    ProcSelf,
    LandlockRestrict,
    Seccomp,
    Exec,
}

impl Step {
    pub fn name(self) -> &'static str {
        match self {
            Step::Signals => "signals",
            Step::Setsid => "setsid",
            Step::ParentDeath => "parent_death_signal",
            Step::Stdio => "stdio",
            Step::CloseFds => "close_fds",
            Step::CgroupJoin => "cgroup_join",
            Step::Rlimit => "rlimit",
            Step::CapAmbient => "capabilities_ambient",
            Step::CapBounding => "capabilities_bounding",
            Step::Securebits => "securebits",
            Step::Setgroups => "setgroups",
            Step::Setgid => "setgid",
            Step::Setuid => "setuid",
            Step::Capset => "capset",
            Step::NoNewPrivs => "no_new_privs",
            Step::Chdir => "chdir",
            Step::LandlockCreate => "landlock_create_ruleset",
            Step::LandlockAddRule => "landlock_add_rule",
            Step::ProcSelf => "landlock_proc_self",
            Step::LandlockRestrict => "landlock_restrict_self",
            Step::Seccomp => "seccomp",
            Step::Exec => "execve",
        }
    }

    pub fn from_u32(v: u32) -> Option<Step> {
        const ALL: [Step; 22] = [
            Step::Signals,
            Step::Setsid,
            Step::ParentDeath,
            Step::Stdio,
            Step::CloseFds,
            Step::CgroupJoin,
            Step::Rlimit,
            Step::CapAmbient,
            Step::CapBounding,
            Step::Securebits,
            Step::Setgroups,
            Step::Setgid,
            Step::Setuid,
            Step::Capset,
            Step::NoNewPrivs,
            Step::Chdir,
            Step::LandlockCreate,
            Step::LandlockAddRule,
            Step::ProcSelf,
            Step::LandlockRestrict,
            Step::Seccomp,
            Step::Exec,
        ];
        ALL.into_iter().find(|s| *s as u32 == v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(plan: &Plan) -> Vec<String> {
        plan.paths.iter().map(|r| r.path.clone()).collect()
    }

    #[test]
    fn rules_another_rule_covers_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("top");
        let inner = top.join("inner");
        std::fs::create_dir_all(&inner).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&inner, &link).unwrap();
        let file = top.join("f");
        std::fs::write(&file, b"x").unwrap();

        // ABI 7 handles every right used here, so none is trimmed away.
        let mut plan = Plan::new(7, &[]);
        let rw = READ_EXEC | ACCESS_FS_WRITE_FILE;
        // A narrower rule first, then the directory that covers it.
        plan.add_path(&inner, READ_EXEC).unwrap();
        plan.add_path(&top, READ_EXEC).unwrap();
        assert_eq!(paths(&plan), vec![top.display().to_string()]);
        // Beneath it, through a symlink, with no right of its own: dropped.
        plan.add_path(&link, READ_EXEC).unwrap();
        plan.add_path(&file, ACCESS_FS_READ_FILE).unwrap();
        assert_eq!(paths(&plan), vec![top.display().to_string()]);
        // Beneath it with more rights: kept, and the access is its own.
        plan.add_path(&inner, rw).unwrap();
        assert_eq!(
            paths(&plan),
            vec![top.display().to_string(), inner.display().to_string()]
        );
        assert_eq!(
            plan.paths[1].access & ACCESS_FS_WRITE_FILE,
            ACCESS_FS_WRITE_FILE
        );
        // Missing paths add nothing and say so.
        assert!(
            !plan
                .add_path(&dir.path().join("missing"), READ_EXEC)
                .unwrap()
        );
    }
}
