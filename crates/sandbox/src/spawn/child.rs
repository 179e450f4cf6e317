//! The child between clone and exec: it walks [`STEPS`] once, in order,
//! running each step that applies to it. Raw syscalls on data the parent
//! prepared; no allocation, no lock, no panic (see `crate::spawn`).

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};

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
    /// Null, or a child made ahead of its run: it walks every step but
    /// stdio, `chdir` and exec, then waits on this slot for its command
    /// ([`await_go`]). `program`, `argv`, `envp`, `cwd` and `stdio` above
    /// are then unused.
    pub go: *const GoSlot,
}

/// How many descriptors a child made ahead keeps while it waits.
pub(super) const AHEAD_KEEP: usize = 6;

/// What a child made ahead reads once its command comes: written by the
/// parent before the byte on the go pipe, read by the child after it.
pub(super) struct GoSlot {
    /// The go pipe's read end (in the child's table).
    pub fd: libc::c_int,
    /// Every descriptor the child keeps while it waits, ascending: its
    /// pipes, `/dev/null`, the status and go pipes. Any other it inherited
    /// (another connection's socket, another run's pipe that was open at
    /// clone) is closed before it reports itself ready, so a child that
    /// waits long holds nothing of anyone else's open.
    pub keep: [libc::c_int; AHEAD_KEEP],
    pub program: AtomicPtr<libc::c_char>,
    pub argv: AtomicPtr<*const libc::c_char>,
    pub envp: AtomicPtr<*const libc::c_char>,
    pub cwd: AtomicPtr<libc::c_char>,
    pub stdio: [AtomicI32; 3],
}

/// What a child made ahead writes on the status pipe once it is confined
/// and waits: step 0, which no step has, and errno 0.
pub(super) const READY: [u8; 8] = [0; 8];

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
/// stack, with `plan` kept alive and unchanged by the parent: until exec or
/// exit, or for a child made ahead until it reported itself ready (it
/// reads only its `GoSlot` after that).
pub(super) unsafe fn child_main(plan: *const ChildPlan<'_>) -> ! {
    // The plan is borrowed for the walk only: a child made ahead leaves
    // this block, and every reference into the plan, before it says it is
    // ready, after which the parent may free the plan.
    let (go, err_fd) = {
        // SAFETY: valid until then, by this function's contract.
        let plan = unsafe { &*plan };
        plan.started.store(true, Ordering::Relaxed);
        let mut st = State {
            err_fd: plan.err_fd,
            ruleset: -1,
            proc_self: -1,
            scratch: [-1; SCRATCH_MAX],
        };
        let ahead = !plan.go.is_null();
        for step in STEPS {
            // A child made ahead takes its stdio and directory with its
            // command, and execs it then.
            if ahead && matches!(step, Step::Stdio | Step::Chdir | Step::Exec) {
                continue;
            }
            // SAFETY: each step is a raw syscall on data prepared before
            // clone.
            if let Err(failed) = unsafe { run_step(step, plan, &mut st) } {
                // SAFETY: reports on the status pipe and exits.
                unsafe { fail(st.err_fd, failed) }
            }
        }
        (plan.go, st.err_fd)
    };
    if go.is_null() {
        // Exec is the last step and returns only by failing.
        // SAFETY: raw exit of the child.
        unsafe { libc::_exit(127) }
    }
    // SAFETY: the slot outlives the child (`Readied` owns it until the
    // child has exec'd or exited).
    unsafe { await_go(&*go, err_fd) }
}

/// The end of a child made ahead, confined and with nothing of anyone
/// else's open: says it is ready, waits for its command, then takes its
/// stdio and directory and execs. The go pipe closed without a byte (the
/// run was given up) makes it exit quietly.
///
/// Raw syscalls only ([`raw`]): from here the child writes no memory but
/// its own stack, not even `errno` (the cloning thread's), so whichever
/// thread holds its `Readied` may hand it its command.
///
/// # Safety
/// `go` and its pointers valid, as `child_main` says.
unsafe fn await_go(go: &GoSlot, mut err_fd: libc::c_int) -> ! {
    // SAFETY (whole body): raw syscalls on the slot and the child's stack.
    unsafe {
        if let Err((step, errno)) = close_all_but(&go.keep) {
            report(err_fd, step, errno)
        }
        let ready = READY;
        let wrote = raw(
            libc::SYS_write,
            [
                err_fd as usize,
                ready.as_ptr() as usize,
                ready.len(),
                0,
                0,
                0,
            ],
        );
        if wrote != ready.len() as isize {
            exit_now()
        }
        let mut byte = 0u8;
        if raw(
            libc::SYS_read,
            [go.fd as usize, &mut byte as *mut u8 as usize, 1, 0, 0, 0],
        ) != 1
        {
            exit_now()
        }
        let stdio = [0, 1, 2].map(|i| go.stdio[i].load(Ordering::Acquire));
        if let Err(errno) = stdio_raw(stdio, &mut err_fd) {
            report(err_fd, Step::Stdio, errno)
        }
        let cwd = go.cwd.load(Ordering::Acquire);
        let r = raw(libc::SYS_chdir, [cwd as usize, 0, 0, 0, 0, 0]);
        if r < 0 {
            report(err_fd, Step::Chdir, -r as i32)
        }
        let r = raw(
            libc::SYS_execve,
            [
                go.program.load(Ordering::Acquire) as usize,
                go.argv.load(Ordering::Acquire) as usize,
                go.envp.load(Ordering::Acquire) as usize,
                0,
                0,
                0,
            ],
        );
        report(err_fd, Step::Exec, -r as i32)
    }
}

/// Closes every descriptor from 3 up but those in `keep` (ascending).
unsafe fn close_all_but(keep: &[libc::c_int]) -> Result<(), (Step, i32)> {
    let mut low: u32 = 3;
    let close = |from: u32, to: u32| {
        // SAFETY: integer arguments only.
        let r = unsafe {
            raw(
                libc::SYS_close_range,
                [from as usize, to as usize, 0, 0, 0, 0],
            )
        };
        if r < 0 {
            Err((Step::CloseFds, -r as i32))
        } else {
            Ok(())
        }
    };
    for &fd in keep {
        let Ok(fd) = u32::try_from(fd) else { continue };
        if fd < low {
            continue;
        }
        if fd > low {
            close(low, fd - 1)?;
        }
        low = fd + 1;
    }
    close(low, u32::MAX)
}

/// [`stdio_onto`] in raw syscalls: `dup3` (aarch64 has no `dup2`), whose
/// source and target always differ here (sources are moved above 2).
unsafe fn stdio_raw(mut stdio: [libc::c_int; 3], err_fd: &mut libc::c_int) -> Result<(), i32> {
    // SAFETY (whole body): fcntl/dup3 on the child's own descriptors.
    unsafe {
        for fd in stdio.iter_mut().chain(std::iter::once(err_fd)) {
            if *fd < 3 {
                let moved = raw(
                    libc::SYS_fcntl,
                    [*fd as usize, libc::F_DUPFD_CLOEXEC as usize, 3, 0, 0, 0],
                );
                if moved < 0 {
                    return Err(-moved as i32);
                }
                *fd = moved as libc::c_int;
            }
        }
        for (target, fd) in stdio.iter().enumerate() {
            let r = raw(libc::SYS_dup3, [*fd as usize, target, 0, 0, 0, 0]);
            if r < 0 {
                return Err(-r as i32);
            }
        }
    }
    Ok(())
}

/// Reports (step, errno) and exits, writing no memory but the stack.
unsafe fn report(err_fd: libc::c_int, step: Step, errno: i32) -> ! {
    let mut msg = [0u8; 8];
    msg[..4].copy_from_slice(&(step as u32).to_ne_bytes());
    msg[4..].copy_from_slice(&errno.to_ne_bytes());
    // SAFETY: a write from the stack, then the exit.
    unsafe {
        raw(
            libc::SYS_write,
            [err_fd as usize, msg.as_ptr() as usize, msg.len(), 0, 0, 0],
        );
        exit_now()
    }
}

/// `exit_group(127)`.
unsafe fn exit_now() -> ! {
    // SAFETY: the syscall does not return.
    unsafe {
        raw(libc::SYS_exit_group, [127, 0, 0, 0, 0, 0]);
    }
    loop {
        std::hint::spin_loop();
    }
}

/// A system call without libc: its result, or `-errno`. libc's wrappers
/// store failures in `errno`, a thread-local of the thread that cloned the
/// child, which may be running by then.
#[cfg(target_arch = "x86_64")]
unsafe fn raw(nr: libc::c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the kernel's x86_64 calling convention; only rax, rcx and
    // r11 are changed.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// As on x86_64, in the aarch64 convention (number in x8, result in x0).
#[cfg(target_arch = "aarch64")]
unsafe fn raw(nr: libc::c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the kernel's aarch64 calling convention; only x0 changes.
    unsafe {
        std::arch::asm!(
            "svc 0",
            in("x8") nr as usize,
            inlateout("x0") a[0] as isize => ret,
            in("x1") a[1],
            in("x2") a[2],
            in("x3") a[3],
            in("x4") a[4],
            in("x5") a[5],
            options(nostack),
        );
    }
    ret
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
            (Step::Stdio, _) => stdio_onto(plan.stdio, &mut st.err_fd),
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
unsafe fn stdio_onto(mut stdio: [libc::c_int; 3], err_fd: &mut libc::c_int) -> Result<(), Step> {
    // SAFETY: fcntl/dup2 on descriptors of this child's own table.
    unsafe {
        for fd in stdio.iter_mut().chain(std::iter::once(err_fd)) {
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
