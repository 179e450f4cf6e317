//! Landlock, decided in the parent: the child applies the ruleset between
//! clone and exec, where it may not allocate, so the `landlock` crate's
//! builder (which allocates and returns rich errors) is not usable there.
//! The parent does the costly part once, here: probing the ABI, choosing
//! the rights and opening every allowed path `O_PATH|O_CLOEXEC`. The kernel
//! structures and the raw syscalls (the probe and the child's steps) live
//! in `crate::spawn::landlock_sys`, with the rest of the crate's `unsafe`
//! code; [`Plan::rules`] hands them this plan.
//!
//! Why the ruleset is created in the child and not once in the parent: the
//! child must add a rule for its *own* `/proc/<pid>`, which only exists
//! after fork, and a ruleset fd is one kernel object shared by every fork
//! of the parent, so a rule added from one child would leak into every
//! concurrent run. Creating the ruleset in the child costs one syscall plus
//! one `landlock_add_rule` per pre-opened fd (about 20), all on data
//! prepared in the parent.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;

use nix::fcntl::{OFlag, open};
use nix::sys::stat::{Mode, SFlag, fstat};

use crate::spawn::landlock_sys::{LandlockRules, NetPortAttr, PathBeneathAttr, RulesetAttr};

pub(crate) const ACCESS_FS_EXECUTE: u64 = 1 << 0;
pub(crate) const ACCESS_FS_WRITE_FILE: u64 = 1 << 1;
pub(crate) const ACCESS_FS_READ_FILE: u64 = 1 << 2;
pub(crate) const ACCESS_FS_READ_DIR: u64 = 1 << 3;
pub(crate) const ACCESS_FS_REFER: u64 = 1 << 13;
pub(crate) const ACCESS_FS_TRUNCATE: u64 = 1 << 14;
pub(crate) const ACCESS_FS_IOCTL_DEV: u64 = 1 << 15;

pub(crate) const ACCESS_NET_BIND_TCP: u64 = 1 << 0;
pub(crate) const ACCESS_NET_CONNECT_TCP: u64 = 1 << 1;

pub(crate) const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
pub(crate) const SCOPE_SIGNAL: u64 = 1 << 1;

/// Rights that apply to a non-directory; adding any other right to a rule
/// on a file is EINVAL.
pub(crate) const FILE_RIGHTS: u64 = ACCESS_FS_EXECUTE
    | ACCESS_FS_WRITE_FILE
    | ACCESS_FS_READ_FILE
    | ACCESS_FS_TRUNCATE
    | ACCESS_FS_IOCTL_DEV;
pub(crate) const READ_EXEC: u64 = ACCESS_FS_EXECUTE | ACCESS_FS_READ_FILE | ACCESS_FS_READ_DIR;

/// The kernel's Landlock ABI version, 0 when unavailable.
pub fn abi() -> u32 {
    crate::spawn::landlock_sys::abi_version()
}

/// Every filesystem right the ABI knows.
pub(crate) fn fs_rights(abi: u32) -> u64 {
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
pub(crate) struct PathRule {
    pub fd: OwnedFd,
    pub access: u64,
    /// For summaries and errors only.
    pub path: String,
    /// Where the rule lands once symlinks are followed, and whether that is
    /// a directory: for finding rules another one already covers.
    real: Option<std::path::PathBuf>,
    is_dir: bool,
    /// A character device (`/dev/null`): writing it changes no file, so a
    /// read-only ruleset keeps its write right.
    is_char_dev: bool,
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
pub(crate) struct Plan {
    attr: RulesetAttr,
    attr_size: usize,
    /// The rules, holding the pre-opened fds.
    paths: Vec<PathRule>,
    /// The same rules as the kernel reads them, kept in step with `paths`
    /// so a spawn borrows them as they are.
    kernel: Vec<PathBeneathAttr>,
    ports: Vec<NetPortAttr>,
    /// Rights on the child's own `/proc/<pid>`.
    proc_self_access: u64,
    /// Rights on read-write directories (root, per-run home).
    pub rw_access: u64,
}

impl Plan {
    pub(crate) fn new(abi: u32, net_ports: &[(u16, u64)]) -> Plan {
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
            attr,
            attr_size,
            paths: Vec::new(),
            kernel: Vec::new(),
            ports,
            proc_self_access: ACCESS_FS_READ_FILE | ACCESS_FS_READ_DIR,
            rw_access: handled_fs,
        }
    }

    /// Opens `path` and records a rule; `Ok(false)` when it does not exist.
    /// A rule that an existing one covers is dropped (on a merged-/usr
    /// system `/bin`, `/lib`, `/sbin` are `/usr`'s), and so are existing
    /// rules the new one covers: every rule is a syscall in each child.
    pub(crate) fn add_path(&mut self, path: &Path, access: u64) -> std::io::Result<bool> {
        match open_rule(path, access & self.attr.handled_access_fs) {
            Ok(rule) => {
                if !self.paths.iter().any(|r| r.covers(&rule)) {
                    self.paths.retain(|r| !rule.covers(r));
                    self.paths.push(rule);
                    self.kernel = kernel_rules(&self.paths);
                }
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The same rules for a read-only run: no right to change anything
    /// anywhere except on character devices (`/dev/null`, `/dev/zero`,
    /// `/dev/full`); the run's own directory still gets `rw_access` in
    /// [`rules`](Self::rules). The handled rights are the same, so every
    /// write the ruleset does not grant is refused.
    pub(crate) fn read_only(&self) -> std::io::Result<Plan> {
        let mut paths = Vec::with_capacity(self.paths.len());
        for r in &self.paths {
            let access = if r.is_char_dev {
                r.access
            } else {
                r.access & READ_EXEC
            };
            if access == 0 {
                continue;
            }
            paths.push(PathRule {
                fd: r.fd.try_clone()?,
                access,
                path: r.path.clone(),
                real: r.real.clone(),
                is_dir: r.is_dir,
                is_char_dev: r.is_char_dev,
            });
        }
        let kernel = kernel_rules(&paths);
        Ok(Plan {
            attr: self.attr,
            attr_size: self.attr_size,
            paths,
            kernel,
            ports: self.ports.clone(),
            proc_self_access: self.proc_self_access,
            rw_access: self.rw_access,
        })
    }

    /// Whether some rule other than a device's lets the child change
    /// files (what a read-only plan never has).
    #[cfg(test)]
    pub(crate) fn grants_writes(&self) -> bool {
        self.paths
            .iter()
            .any(|r| !r.is_char_dev && r.access & !READ_EXEC != 0)
    }

    /// The paths of the rules every child adds, for diagnostics.
    pub(crate) fn rule_paths(&self) -> impl Iterator<Item = &str> {
        self.paths.iter().map(|r| r.path.as_str())
    }

    /// The ruleset for one child, with `run_dir` (its HOME/TMPDIR) as a
    /// read-write rule of its own. The fds stay open as long as `self`.
    pub(crate) fn rules(&self, run_dir: RawFd) -> LandlockRules<'_> {
        LandlockRules {
            attr: self.attr,
            attr_size: self.attr_size,
            paths: &self.kernel,
            run_paths: [PathBeneathAttr {
                allowed_access: self.rw_access,
                parent_fd: run_dir,
            }],
            scratch_access: self.rw_access,
            ports: &self.ports,
            proc_self_access: self.proc_self_access,
        }
    }

    /// Leaves the TCP port rules (`net`) or the scopes (`scopes`) out of
    /// the ruleset although the ABI has them: a layer the configuration
    /// turned off, or one a test acts as missing.
    pub(crate) fn leave_out(&mut self, net: bool, scopes: bool) {
        if net {
            self.attr.handled_access_net = 0;
            self.ports.clear();
        }
        if scopes {
            self.attr.scoped = 0;
        }
    }

    /// Where the rules land once symlinks are followed, and whether each
    /// is a directory: the paths a run's own mount namespace keeps visible.
    pub(crate) fn real_paths(&self) -> impl Iterator<Item = (&Path, bool)> {
        self.paths
            .iter()
            .filter_map(|r| r.real.as_deref().map(|p| (p, r.is_dir)))
    }
}

/// The rules as the kernel reads them.
fn kernel_rules(paths: &[PathRule]) -> Vec<PathBeneathAttr> {
    paths
        .iter()
        .map(|r| PathBeneathAttr {
            allowed_access: r.access,
            parent_fd: r.fd.as_raw_fd(),
        })
        .collect()
}

/// Opens `path` `O_PATH|O_CLOEXEC` (following symlinks, so `/bin` on a
/// merged-/usr system names `/usr/bin`) and trims the rights to those valid
/// for its file type.
fn open_rule(path: &Path, access: u64) -> std::io::Result<PathRule> {
    let (fd, real) = open_and_locate(path)?;
    let st = fstat(&fd)?;
    let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    let is_dir = kind == SFlag::S_IFDIR;
    let access = if is_dir { access } else { access & FILE_RIGHTS };
    Ok(PathRule {
        fd,
        access,
        path: path.display().to_string(),
        real,
        is_dir,
        is_char_dev: kind == SFlag::S_IFCHR,
    })
}

/// The opened path and where it lands once symlinks are followed. Most
/// rule paths hold no symlink: one `openat2` that refuses links proves
/// that, and the path is then its own answer. Only the others (`/bin`,
/// `/etc/localtime`, a kernel without `openat2`) are opened again and
/// resolved component by component (`canonicalize`, a `readlink` each).
/// Why: resolving every path again was 45 of a one-shot call's syscalls,
/// and reading each descriptor's `/proc/self/fd` link instead cost more
/// (3.4% of the call: procfs makes a dentry per lookup; BENCHMARKS.md).
fn open_and_locate(path: &Path) -> std::io::Result<(OwnedFd, Option<std::path::PathBuf>)> {
    use std::path::Component;
    let plain = path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if plain && let Ok(fd) = crate::spawn::landlock_sys::open_path_without_links(path) {
        return Ok((fd, Some(path.components().collect())));
    }
    let fd = open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())?;
    Ok((fd, std::fs::canonicalize(path).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(plan: &Plan) -> Vec<String> {
        plan.rule_paths().map(str::to_string).collect()
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
        // What a child is handed is exactly the rules kept, plus its own
        // run directory with the read-write rights.
        let rules = plan.rules(42);
        assert_eq!(rules.paths.len(), plan.paths.len());
        for (k, r) in rules.paths.iter().zip(&plan.paths) {
            assert_eq!({ k.parent_fd }, r.fd.as_raw_fd());
            assert_eq!({ k.allowed_access }, r.access);
        }
        assert_eq!({ rules.run_paths[0].parent_fd }, 42);
        assert_eq!({ rules.run_paths[0].allowed_access }, plan.rw_access);
    }

    #[test]
    fn a_read_only_plan_grants_no_write_but_on_devices_and_the_run_dir() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let sys = dir.path().join("sys");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&sys).unwrap();
        let mut plan = Plan::new(7, &[]);
        let rw = plan.rw_access;
        plan.add_path(&sys, READ_EXEC).unwrap();
        plan.add_path(&root, rw).unwrap();
        let dev_rw = ACCESS_FS_READ_FILE | ACCESS_FS_WRITE_FILE | ACCESS_FS_TRUNCATE;
        plan.add_path(Path::new("/dev/null"), dev_rw).unwrap();
        assert!(plan.grants_writes());

        let ro = plan.read_only().unwrap();
        assert!(!ro.grants_writes());
        assert_eq!(paths(&ro), paths(&plan));
        let access = |p: &Plan, path: &Path| {
            p.paths
                .iter()
                .find(|r| r.path == path.display().to_string())
                .map(|r| r.access)
        };
        assert_eq!(access(&ro, &root), Some(READ_EXEC));
        assert_eq!(access(&ro, &sys), Some(READ_EXEC));
        assert_eq!(access(&ro, Path::new("/dev/null")), Some(dev_rw));
        // The same rights are handled: what is not granted is refused.
        assert_eq!(
            ro.attr.handled_access_fs & rw,
            plan.attr.handled_access_fs & rw
        );
        // The kernel's view follows the rules, and the run's own
        // directory stays writable.
        let rules = ro.rules(7);
        for (k, r) in rules.paths.iter().zip(&ro.paths) {
            assert_eq!({ k.allowed_access }, r.access);
        }
        assert_eq!({ rules.run_paths[0].allowed_access }, rw);
    }

    #[test]
    fn a_rule_lands_where_its_links_lead() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(base.join("real/sub")).unwrap();
        std::fs::write(base.join("real/sub/f"), b"x").unwrap();
        std::os::unix::fs::symlink(base.join("real"), base.join("link")).unwrap();
        std::os::unix::fs::symlink("sub/f", base.join("real/rel")).unwrap();
        for (given, lands) in [
            ("link", "real"),
            ("link/sub", "real/sub"),
            ("link/rel", "real/sub/f"),
            ("real/sub/../sub/f", "real/sub/f"),
            // No link on the way: the path is its own answer.
            ("real/sub/f", "real/sub/f"),
            ("real//sub/", "real/sub"),
        ] {
            let rule = open_rule(&base.join(given), 0).unwrap();
            assert_eq!(rule.real, Some(base.join(lands)), "{given}");
            assert_eq!(
                rule.real,
                std::fs::canonicalize(base.join(given)).ok(),
                "{given}"
            );
        }
    }
}
