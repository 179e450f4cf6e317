//! Landlock at the level of the kernel's structures: the ABI probe the
//! parent runs once, and the ruleset the child builds and enforces between
//! clone and exec. Which paths, rights and ports go into it is decided in
//! `crate::plan::landlock`; this file only hands that decision to the
//! kernel.

use std::os::fd::{OwnedFd, RawFd};

use super::steps::Step;

const CREATE_RULESET_VERSION: libc::c_uint = 1;
const RULE_PATH_BENEATH: libc::c_int = 1;
const RULE_NET_PORT: libc::c_int = 2;

/// `struct landlock_ruleset_attr`; the size passed to the kernel selects
/// how many fields it reads (8: ABI 1-3, 16: ABI 4-5, 24: ABI 6+).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RulesetAttr {
    pub handled_access_fs: u64,
    pub handled_access_net: u64,
    pub scoped: u64,
}

/// `struct landlock_path_beneath_attr`: a pre-opened directory or file and
/// the rights granted beneath it.
#[repr(C, packed)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct PathBeneathAttr {
    pub allowed_access: u64,
    pub parent_fd: RawFd,
}

/// `struct landlock_net_port_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct NetPortAttr {
    pub allowed_access: u64,
    pub port: u64,
}

/// Everything the child needs to build its ruleset, prepared in the
/// parent. The descriptors stay open for as long as the borrowed data
/// lives (they belong to the prepared sandbox).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LandlockRules<'a> {
    pub attr: RulesetAttr,
    pub attr_size: usize,
    /// Rules shared by every run of the sandbox.
    pub paths: &'a [PathBeneathAttr],
    /// Rules of this run alone (its HOME/TMPDIR). An access of 0 adds
    /// nothing.
    pub run_paths: [PathBeneathAttr; 1],
    /// Rights on the run's private `/tmp`, `/var/tmp` and `/dev/shm`,
    /// which exist only in the child's namespace, hence rules the child
    /// adds itself.
    pub scratch_access: u64,
    pub ports: &'a [NetPortAttr],
    /// Rights on the child's own `/proc/<pid>`, which exists only after
    /// clone, hence a rule the child adds itself.
    pub proc_self_access: u64,
}

/// The kernel's Landlock ABI version, 0 when unavailable.
pub(crate) fn abi_version() -> u32 {
    // SAFETY: the version query takes no pointer.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if r < 0 { 0 } else { r as u32 }
}

// The functions below run in the child between clone and exec: raw
// syscalls only (not libc's cancellable wrappers, see `crate::spawn`), no
// allocation. Each leaves errno set by the failing call and returns the
// step to report.

/// Creates the ruleset; returns its fd.
///
/// # Safety
/// Child side only (see above).
pub(super) unsafe fn create(rules: &LandlockRules<'_>) -> Result<libc::c_int, Step> {
    // SAFETY: reads `rules.attr`, which outlives the call.
    let rs = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &rules.attr as *const RulesetAttr,
            rules.attr_size,
            0u32,
        )
    };
    if rs < 0 {
        Err(Step::LandlockCreate)
    } else {
        Ok(rs as libc::c_int)
    }
}

/// Adds one path rule; an access of 0 adds nothing.
///
/// # Safety
/// Child side only.
unsafe fn add_path(ruleset: libc::c_int, rule: &PathBeneathAttr) -> Result<(), Step> {
    if rule.allowed_access == 0 {
        return Ok(());
    }
    // SAFETY: reads `rule`, which outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            RULE_PATH_BENEATH,
            rule as *const PathBeneathAttr,
            0u32,
        )
    };
    if r < 0 {
        Err(Step::LandlockAddRule)
    } else {
        Ok(())
    }
}

/// Adds every path and port rule prepared in the parent, and one for
/// each of the child's private scratch mounts (`scratch`, -1: none).
///
/// # Safety
/// Child side only.
pub(super) unsafe fn add_rules(
    ruleset: libc::c_int,
    rules: &LandlockRules<'_>,
    scratch: &[libc::c_int],
) -> Result<(), Step> {
    // SAFETY: each call reads one rule of `rules`, alive for the call.
    unsafe {
        for rule in rules.paths.iter().chain(rules.run_paths.iter()) {
            add_path(ruleset, rule)?;
        }
        for fd in scratch.iter().filter(|fd| **fd >= 0) {
            let rule = PathBeneathAttr {
                allowed_access: rules.scratch_access,
                parent_fd: *fd,
            };
            add_path(ruleset, &rule)?;
        }
        for port in rules.ports {
            let r = libc::syscall(
                libc::SYS_landlock_add_rule,
                ruleset,
                RULE_NET_PORT,
                port as *const NetPortAttr,
                0u32,
            );
            if r < 0 {
                return Err(Step::LandlockAddRule);
            }
        }
    }
    Ok(())
}

/// Opens the child's own `/proc/self` (after clone it names this child,
/// which stays the same process across exec) and adds its rule; returns
/// the fd, closed after the ruleset is enforced.
///
/// # Safety
/// Child side only.
pub(super) unsafe fn add_proc_self(
    ruleset: libc::c_int,
    rules: &LandlockRules<'_>,
) -> Result<libc::c_int, Step> {
    // SAFETY: a static NUL-terminated path; raw openat.
    let me = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c"/proc/self".as_ptr(),
            libc::O_PATH | libc::O_CLOEXEC | libc::O_DIRECTORY,
        )
    } as libc::c_int;
    if me < 0 {
        return Err(Step::ProcSelf);
    }
    let rule = PathBeneathAttr {
        allowed_access: rules.proc_self_access,
        parent_fd: me,
    };
    // SAFETY: `rule` lives on this stack for the call.
    unsafe { add_path(ruleset, &rule)? };
    Ok(me)
}

/// Enforces the ruleset on the child, then closes the two fds the setup
/// opened.
///
/// # Safety
/// Child side only.
pub(super) unsafe fn restrict(ruleset: libc::c_int, proc_self: libc::c_int) -> Result<(), Step> {
    // SAFETY: integer arguments only; both fds were opened by this child.
    unsafe {
        if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) < 0 {
            return Err(Step::LandlockRestrict);
        }
        libc::syscall(libc::SYS_close, proc_self);
        libc::syscall(libc::SYS_close, ruleset);
    }
    Ok(())
}

/// `struct open_how` (linux/openat2.h).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `RESOLVE_NO_SYMLINKS`: fail with ELOOP on any symlink in the path.
const RESOLVE_NO_SYMLINKS: u64 = 0x04;

/// Opens `path` `O_PATH|O_CLOEXEC` only if no component of it is a
/// symlink (`openat2` with `RESOLVE_NO_SYMLINKS`, Linux 5.6). Where it
/// succeeds, an absolute path without `.` or `..` is where the rule lands,
/// with no further lookup. Errors: `ELOOP` for a link on the way, `ENOSYS`
/// or `EPERM` where the kernel or a seccomp profile lacks `openat2`, and
/// whatever `open` would say.
pub(crate) fn open_path_without_links(path: &std::path::Path) -> std::io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS,
    };
    // SAFETY: `c` is a NUL-terminated path and `how` a valid `open_how`
    // whose size is passed; both outlive the call, which only reads them.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fd = RawFd::try_from(fd).map_err(|_| std::io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: the kernel just returned this descriptor, owned by nobody else.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}
