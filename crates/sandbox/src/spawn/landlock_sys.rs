//! Landlock's raw syscalls: the ABI probe the parent runs once, and the
//! ruleset the child builds and enforces between fork and exec. Which
//! paths, rights and ports go into the ruleset is decided in
//! `crate::plan::landlock`; this file only hands that plan to the
//! kernel.

use std::os::fd::AsRawFd;

use crate::plan::landlock::{
    NetPortAttr, PathBeneathAttr, Plan, RULE_NET_PORT, RULE_PATH_BENEATH, RulesetAttr, Step,
};

const CREATE_RULESET_VERSION: libc::c_uint = 1;

/// The kernel's Landlock ABI version, 0 when unavailable.
pub fn abi_version() -> u32 {
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

/// Child side: create, fill and enforce the ruleset. Raw syscalls only.
/// Returns the failing step and errno.
///
/// # Safety
/// Called between fork and exec: must not allocate or lock. `extra` are
/// additional (fd, access) directory rules such as the per-run home.
pub unsafe fn apply_in_child(plan: &Plan, extra: &[(i32, u64)]) -> Result<(), (Step, i32)> {
    let errno = || {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    };
    // SAFETY: plain syscalls on memory owned by `plan`, valid for the call.
    unsafe {
        let rs = libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &plan.attr as *const RulesetAttr,
            plan.attr_size,
            0u32,
        );
        if rs < 0 {
            return Err((Step::LandlockCreate, errno()));
        }
        let rs = rs as libc::c_int;
        let add = |fd: i32, access: u64| -> Result<(), (Step, i32)> {
            if access == 0 {
                return Ok(());
            }
            let attr = PathBeneathAttr {
                allowed_access: access,
                parent_fd: fd,
            };
            let r = libc::syscall(
                libc::SYS_landlock_add_rule,
                rs,
                RULE_PATH_BENEATH,
                &attr as *const PathBeneathAttr,
                0u32,
            );
            if r < 0 {
                Err((Step::LandlockAddRule, errno()))
            } else {
                Ok(())
            }
        };
        for rule in &plan.paths {
            add(rule.fd.as_raw_fd(), rule.access)?;
        }
        for (fd, access) in extra {
            add(*fd, *access)?;
        }
        // After fork, "/proc/self" resolves to this child's own pid dir,
        // which stays the same process across exec.
        // Raw syscalls, not libc's cancellable wrappers: the child shares
        // the parent's memory (see `crate::spawn`).
        let me = libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c"/proc/self".as_ptr(),
            libc::O_PATH | libc::O_CLOEXEC | libc::O_DIRECTORY,
        ) as libc::c_int;
        if me < 0 {
            return Err((Step::ProcSelf, errno()));
        }
        add(me, plan.proc_self_access)?;
        for port in &plan.ports {
            let r = libc::syscall(
                libc::SYS_landlock_add_rule,
                rs,
                RULE_NET_PORT,
                port as *const NetPortAttr,
                0u32,
            );
            if r < 0 {
                return Err((Step::LandlockAddRule, errno()));
            }
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, rs, 0u32) < 0 {
            return Err((Step::LandlockRestrict, errno()));
        }
        libc::syscall(libc::SYS_close, me);
        libc::syscall(libc::SYS_close, rs);
    }
    Ok(())
}
