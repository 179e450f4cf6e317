//! The child between clone and exec: it walks [`STEPS`] once, in order,
//! running each step that applies to it. Raw syscalls on data the parent
//! prepared; no allocation, no lock, no panic (see `crate::spawn`).

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

use super::Confinement;
use super::landlock_sys;
use super::mounts::{self, SCRATCH_MAX};
use super::steps::{STEPS, Step};

/// Data the child reads before exec; raw values only.
pub(super) struct ChildPlan<'a> {
    pub program: *const libc::c_char,
    pub argv: *const *const libc::c_char,
    pub envp: *const *const libc::c_char,
    pub cwd: *const libc::c_char,
    pub stdio: [libc::c_int; 3],
    pub err_fd: libc::c_int,
    pub parent_pid: libc::pid_t,
    /// `None`: an unconfined child (the exec machinery's own tests).
    pub confinement: Option<&'a Confinement<'a>>,
    pub fprog: Option<libc::sock_fprog>,
    /// Set by the parent before each clone attempt: the child was created
    /// inside the run's v2 cgroup and must not write itself into it again.
    pub v2_joined: bool,
    /// Set by the child first thing (the one write it makes to the parent's
    /// memory besides errno): still false after clone returned means the
    /// kernel killed the child before it ran a single instruction.
    pub started: AtomicBool,
    /// The spawning thread's capability bounding set is already empty (the
    /// child inherits it at clone), so the child skips dropping it cap by
    /// cap.
    pub bounding_empty: bool,
}

/// What the walk changes as it goes.
struct State {
    /// The status pipe; moved above 2 by the stdio step when needed.
    err_fd: libc::c_int,
    ruleset: libc::c_int,
    proc_self: libc::c_int,
    /// The private `/tmp`, `/var/tmp` and `/dev/shm`, for their Landlock
    /// rules; -1: none.
    scratch: [libc::c_int; SCRATCH_MAX],
}

/// Runs the setup and execs the program; never returns. Any failure is
/// written (step, errno) to the status pipe and the child exits 127.
///
/// # Safety
/// Only as the entry of a child cloned with the parent's memory, on its own
/// stack, with `plan` kept alive and unchanged by the suspended parent.
pub(super) unsafe fn child_main(plan: &ChildPlan<'_>) -> ! {
    plan.started.store(true, Ordering::Relaxed);
    let mut st = State {
        err_fd: plan.err_fd,
        ruleset: -1,
        proc_self: -1,
        scratch: [-1; SCRATCH_MAX],
    };
    for step in STEPS {
        // SAFETY: each step is a raw syscall on data prepared before clone.
        if let Err(failed) = unsafe { run_step(step, plan, &mut st) } {
            // SAFETY: reports on the status pipe and exits.
            unsafe { fail(st.err_fd, failed) }
        }
    }
    // Exec is the last step and returns only by failing.
    // SAFETY: raw exit of the child.
    unsafe { libc::_exit(127) }
}

/// Reports (step, errno) on the status pipe and exits without running
/// anything.
unsafe fn fail(err_fd: libc::c_int, step: Step) -> ! {
    // SAFETY: errno location is valid for this thread; write/_exit are raw.
    unsafe {
        let errno = *libc::__errno_location();
        let mut msg = [0u8; 8];
        msg[..4].copy_from_slice(&(step as u32).to_ne_bytes());
        msg[4..].copy_from_slice(&errno.to_ne_bytes());
        libc::syscall(libc::SYS_write, err_fd, msg.as_ptr(), msg.len());
        libc::_exit(127)
    }
}

/// A libc-style result (negative: failed, errno set) as a step result.
fn check(ret: libc::c_long, step: Step) -> Result<(), Step> {
    if ret < 0 { Err(step) } else { Ok(()) }
}

/// Runs `step` if it applies to this child.
unsafe fn run_step(step: Step, plan: &ChildPlan<'_>, st: &mut State) -> Result<(), Step> {
    // SAFETY (whole body): raw syscalls on memory the parent prepared and
    // keeps alive (CLONE_VFORK).
    unsafe {
        match (step, plan.confinement) {
            (Step::Signals, _) => reset_signals(),
            (Step::Setsid, _) => check(libc::setsid().into(), step),
            (Step::ParentDeath, _) => arm_parent_death(plan),
            (Step::Stdio, _) => stdio(plan, st),
            (Step::CloseFds, _) => close_fds(),
            (Step::Chdir, _) => check(libc::chdir(plan.cwd).into(), step),
            (Step::Exec, _) => {
                libc::execve(plan.program, plan.argv, plan.envp);
                Err(Step::Exec)
            }
            // Every other step confines: none applies without a sandbox.
            (_, None) => Ok(()),
            (Step::CgroupJoin, Some(c)) => join_cgroups(c, plan.v2_joined),
            (Step::Rlimit, Some(c)) => set_rlimits(c),
            (Step::JoinUser, Some(c)) => match c.user {
                Some(fd) => check(
                    libc::syscall(libc::SYS_setns, fd, libc::CLONE_NEWUSER),
                    step,
                ),
                None => Ok(()),
            },
            // The namespace steps: only a plan with namespaces has them.
            (Step::Unshare | Step::MountPrivate | Step::MountView, Some(c))
                if c.mounts.is_none() =>
            {
                Ok(())
            }
            (Step::Unshare, Some(c)) => match &c.prepared {
                Some(p) => mounts::join_prepared(p, &mut st.scratch),
                None => mounts::unshare(),
            },
            // Made ahead with the namespaces.
            (Step::MountPrivate | Step::MountView, Some(c)) if c.prepared.is_some() => Ok(()),
            (Step::JoinNetwork, Some(c)) => match c.network {
                Some(fd) => check(super::sys::join_network(fd), step),
                None => Ok(()),
            },
            (Step::MountPrivate, Some(_)) => mounts::make_private(),
            (Step::MountView, Some(c)) => match &c.mounts {
                Some(plan) => mounts::mount_view(plan, &mut st.scratch),
                None => Ok(()),
            },
            (Step::CapAmbient, Some(_)) => check(
                libc::prctl(
                    libc::PR_CAP_AMBIENT,
                    libc::PR_CAP_AMBIENT_CLEAR_ALL,
                    0,
                    0,
                    0,
                )
                .into(),
                step,
            ),
            // Only root can change its credentials; a non-root
            // supervisor has nothing to drop (no_new_privs keeps file
            // capabilities and setuid bits inert) unless its child entered
            // the sandbox's user namespace: then it drops that namespace's
            // capabilities as root drops its own, but keeps its uid, gid
            // and groups (the only ones mapped; `setgroups` is denied).
            (_, Some(c)) if !c.creds.privileged && is_credential_change(step) => Ok(()),
            (_, Some(c)) if !c.creds.privileged && c.user.is_none() && is_root_only(step) => Ok(()),
            (Step::CapBounding, Some(c)) => drop_bounding_set(c, plan.bounding_empty),
            (Step::Securebits, Some(_)) => lock_securebits(),
            // Raw syscalls: glibc's wrappers would try to broadcast the
            // change to threads that do not exist in this child.
            (Step::Setgroups, Some(_)) => check(
                libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()),
                step,
            ),
            (Step::Setgid, Some(c)) => check(
                libc::syscall(libc::SYS_setresgid, c.creds.gid, c.creds.gid, c.creds.gid),
                step,
            ),
            (Step::Setuid, Some(c)) => check(
                libc::syscall(libc::SYS_setresuid, c.creds.uid, c.creds.uid, c.creds.uid),
                step,
            ),
            // Changing the effective uid or gid cleared the parent-death
            // signal: without this a `kill -9` of the supervisor would
            // leave the dropped-privilege child running.
            (Step::ParentDeathRearm, Some(_)) => arm_parent_death(plan),
            (Step::Capset, Some(_)) => drop_capabilities(),
            // Set, then read back: the summary's `no_new_privs` rests on
            // every run having passed this check, so a kernel (or an outer
            // seccomp profile) that accepts the call without setting the
            // flag fails the spawn instead of passing for one that set it.
            (Step::NoNewPrivs, Some(_)) => {
                check(
                    libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0).into(),
                    step,
                )?;
                if libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 {
                    Ok(())
                } else {
                    *libc::__errno_location() = libc::EPERM;
                    Err(step)
                }
            }
            (Step::LandlockCreate, Some(c)) => match &c.landlock {
                Some(rules) => landlock_sys::create(rules).map(|fd| st.ruleset = fd),
                None => Ok(()),
            },
            (Step::LandlockAddRule, Some(c)) => match &c.landlock {
                Some(rules) => landlock_sys::add_rules(st.ruleset, rules, &st.scratch),
                None => Ok(()),
            },
            (Step::ProcSelf, Some(c)) => match &c.landlock {
                Some(rules) => {
                    landlock_sys::add_proc_self(st.ruleset, rules).map(|fd| st.proc_self = fd)
                }
                None => Ok(()),
            },
            (Step::LandlockRestrict, Some(c)) => match &c.landlock {
                Some(_) => landlock_sys::restrict(st.ruleset, st.proc_self),
                None => Ok(()),
            },
            (Step::Seccomp, Some(_)) => match &plan.fprog {
                Some(fprog) => check(
                    libc::syscall(
                        libc::SYS_seccomp,
                        libc::SECCOMP_SET_MODE_FILTER,
                        0u32,
                        fprog as *const libc::sock_fprog,
                    ),
                    step,
                ),
                None => Ok(()),
            },
        }
    }
}

/// Steps that change the uid, gid or groups.
fn is_credential_change(step: Step) -> bool {
    matches!(step, Step::Setgroups | Step::Setgid | Step::Setuid)
}

/// Steps that change credentials, which only a root supervisor can.
fn is_root_only(step: Step) -> bool {
    matches!(
        step,
        Step::CapBounding
            | Step::Securebits
            | Step::Setgroups
            | Step::Setgid
            | Step::Setuid
            | Step::ParentDeathRearm
    )
}

/// The kernel's `struct sigaction` for `rt_sigaction` (libc's differs in
/// layout and size); all zero means SIG_DFL, no flags, empty mask.
#[repr(C)]
#[derive(Default)]
struct KernelSigaction {
    handler: libc::sighandler_t,
    flags: libc::c_ulong,
    restorer: usize,
    mask: u64,
}

/// A clean signal state for the program: no handler of the supervisor (its
/// code must never run in this child), nothing ignored (Rust ignores
/// SIGPIPE, which `yes | head` relies on being fatal), nothing blocked.
unsafe fn reset_signals() -> Result<(), Step> {
    // SAFETY: rt_sigaction/rt_sigprocmask on stack values that outlive the
    // calls.
    unsafe {
        let mut sig: libc::c_long = 1;
        while sig <= 64 {
            let mut old = KernelSigaction::default();
            if libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                std::ptr::null::<KernelSigaction>(),
                &mut old,
                8usize,
            ) == 0
                && old.handler != libc::SIG_DFL
            {
                let dfl = KernelSigaction::default();
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    sig,
                    &dfl,
                    std::ptr::null_mut::<KernelSigaction>(),
                    8usize,
                );
            }
            sig += 1;
        }
        let empty: u64 = 0;
        check(
            libc::syscall(
                libc::SYS_rt_sigprocmask,
                libc::SIG_SETMASK,
                &empty,
                std::ptr::null_mut::<u64>(),
                8usize,
            ),
            Step::Signals,
        )
    }
}

/// Die with the supervisor. The parent may have died before the signal was
/// armed, hence the check.
unsafe fn arm_parent_death(plan: &ChildPlan<'_>) -> Result<(), Step> {
    // SAFETY: prctl on the child itself; getppid and _exit are raw.
    unsafe {
        check(
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            )
            .into(),
            Step::ParentDeath,
        )?;
        if libc::getppid() != plan.parent_pid {
            libc::_exit(127);
        }
    }
    Ok(())
}

/// The pipes onto 0, 1 and 2. Any source fd (and the status pipe) is moved
/// out of 0..=2 first, so no dup2 clobbers another source (possible when
/// the supervisor runs with stdio closed).
unsafe fn stdio(plan: &ChildPlan<'_>, st: &mut State) -> Result<(), Step> {
    let mut stdio = plan.stdio;
    // SAFETY: fcntl/dup2 on descriptors of this child's own table.
    unsafe {
        for fd in stdio.iter_mut().chain(std::iter::once(&mut st.err_fd)) {
            if *fd < 3 {
                let moved = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 3);
                check(moved.into(), Step::Stdio)?;
                *fd = moved;
            }
        }
        for (target, fd) in stdio.iter().enumerate() {
            check(libc::dup2(*fd, target as libc::c_int).into(), Step::Stdio)?;
        }
    }
    Ok(())
}

/// Nothing but stdio crosses exec, whatever the supervisor leaked.
unsafe fn close_fds() -> Result<(), Step> {
    // SAFETY: integer arguments only.
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    check(r, Step::CloseFds)
}

/// Writes "0" (this process) to each `cgroup.procs` the child was not
/// born in: the v1 hierarchies' always, the v2 one only after plain clone.
unsafe fn join_cgroups(c: &Confinement<'_>, v2_joined: bool) -> Result<(), Step> {
    let v2 = c.cgroup.v2_procs.filter(|_| !v2_joined);
    for fd in v2
        .into_iter()
        .chain(c.cgroup.v1_procs.iter().map(|fd| fd.as_raw_fd()))
    {
        // SAFETY: a one-byte write from a static buffer.
        if unsafe { libc::syscall(libc::SYS_write, fd, b"0".as_ptr(), 1usize) } != 1 {
            return Err(Step::CgroupJoin);
        }
    }
    Ok(())
}

unsafe fn set_rlimits(c: &Confinement<'_>) -> Result<(), Step> {
    for limit in c.rlimits {
        let lim = libc::rlimit {
            rlim_cur: limit.value as libc::rlim_t,
            rlim_max: limit.value as libc::rlim_t,
        };
        // SAFETY: reads `lim`, which outlives the call.
        check(
            unsafe { libc::setrlimit(limit.resource, &lim) }.into(),
            Step::Rlimit,
        )?;
    }
    Ok(())
}

unsafe fn drop_bounding_set(c: &Confinement<'_>, already_empty: bool) -> Result<(), Step> {
    if already_empty {
        return Ok(());
    }
    for cap in 0..=c.cap_last {
        // SAFETY: prctl on the child's own bounding set.
        let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
        check(r.into(), Step::CapBounding)?;
    }
    Ok(())
}

/// Locks root out of its special cases for good: no capabilities from
/// uid 0 or setuid-root files, none kept or restored across the uid change,
/// no ambient raise.
unsafe fn lock_securebits() -> Result<(), Step> {
    let bits = libc::SECBIT_NOROOT
        | libc::SECBIT_NOROOT_LOCKED
        | libc::SECBIT_NO_SETUID_FIXUP
        | libc::SECBIT_NO_SETUID_FIXUP_LOCKED
        | libc::SECBIT_KEEP_CAPS_LOCKED
        | libc::SECBIT_NO_CAP_AMBIENT_RAISE
        | libc::SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    // SAFETY: prctl on the child's own securebits.
    let r = unsafe { libc::prctl(libc::PR_SET_SECUREBITS, bits as libc::c_ulong, 0, 0, 0) };
    check(r.into(), Step::Securebits)
}

/// Empties the effective, permitted and inheritable sets.
unsafe fn drop_capabilities() -> Result<(), Step> {
    #[repr(C)]
    struct CapHeader {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    struct CapData {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = CapHeader {
        // _LINUX_CAPABILITY_VERSION_3: two data words.
        version: 0x2008_0522,
        pid: 0,
    };
    let none = || CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    };
    let data = [none(), none()];
    // SAFETY: reads `header` and `data`, which outlive the call.
    let r = unsafe { libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) };
    check(r, Step::Capset)
}
