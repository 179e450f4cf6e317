//! Starting the child: the only code that runs between clone and exec, and
//! the only module of the crate allowed to write `unsafe`.
//!
//! The rule "all `unsafe` and all post-fork code in one small module" is
//! enforced by the compiler: `lib.rs` denies `unsafe_code` crate-wide and
//! lifts the lint for this module tree alone (`#[allow(unsafe_code)] pub
//! mod spawn`). Inside it:
//! - this file: clone/exec and the child's setup sequence;
//! - [`landlock_sys`]: Landlock's raw syscalls, the ABI probe and the
//!   ruleset the child enforces (the parent decides its content in
//!   `crate::plan::landlock`);
//! - [`sys`]: small safe wrappers (pidfd, `waitid` on a pidfd, `ppoll` on
//!   fixed slots, the seccomp probe) for the parent-side code in `exec` and
//!   `sandbox`, which use them, or `nix`, and no `unsafe` of their own.
//!
//! Everything the child needs (argv, envp, cwd, the prepared sandbox) is
//! built in the parent beforehand. The child makes raw syscalls only: no
//! allocation, no locks, no panics, because the daemon is multi-threaded
//! and another thread may hold the allocator's lock at any moment.
//!
//! The child's sequence, in this order for a reason:
//! 1. Signal handlers reset to default and the mask cleared (see below),
//!    `setsid` (own process group, no terminal), a parent-death signal.
//! 2. stdio onto 0/1/2, every other fd marked close-on-exec.
//! 3. Join the run's cgroups and set rlimits: both need root's rights, so
//!    they come before the privilege drop. (The v2 cgroup is usually
//!    joined already: the child is created in it by
//!    `clone3(CLONE_INTO_CGROUP)`, which migrates nothing.)
//! 4. Privilege drop: ambient set cleared, bounding set emptied, securebits
//!    locked (needs CAP_SETPCAP, so before the uid change), groups cleared,
//!    gid then uid switched, then every remaining capability dropped (with
//!    NO_SETUID_FIXUP the uid change does not do it).
//! 5. `no_new_privs`, which Landlock and seccomp require of an
//!    unprivileged process.
//! 6. `chdir` as the child user, so its own permissions apply.
//! 7. Landlock, then seccomp last: the filter refuses nothing the steps
//!    after it need (only `execve`).
//!
//! Any failure is written (step, errno) to a close-on-exec pipe and the
//! child `_exit`s without running the program; the parent reads the pipe
//! until EOF, which exec produces on success.
//!
//! Why `clone(CLONE_VM | CLONE_VFORK)` and not `fork`: fork copies the
//! supervisor's page tables, so its cost grows with the daemon's memory
//! (measured here with 64 MiB resident: about 6 ms per sandboxed spawn with
//! fork against about 2 ms with clone under the same load; without the
//! ballast the two are within noise). This is what glibc's `posix_spawn`
//! does, and it is sound under these rules, which the code keeps:
//! - the child runs on its own mmap'd stack with a guard page (one per
//!   spawning thread, reused), and the calling thread is suspended until
//!   the child execs or exits, so the `Plan` on its stack stays valid and
//!   unchanged and the stack is free again when clone returns;
//! - the child writes no memory of the parent except `Plan::started` (an
//!   atomic flag it sets first thing) and `errno` (the suspended
//!   thread's thread-local, written by failing libc calls, which the parent
//!   never reads without a failing call of its own first): it uses raw
//!   `syscall()` instead of cancellable libc wrappers (`open`, `read`,
//!   `write`, `close`), which would touch the parent thread's cancellation
//!   state;
//! - every signal is blocked around `clone`, and the child resets every
//!   handler to default before unblocking, so no supervisor handler ever
//!   runs on the child's stack. Without CLONE_FILES, CLONE_FS, CLONE_SIGHAND
//!   and CLONE_THREAD the fd table, cwd, handler table, rlimits and
//!   credentials the child changes are its own.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use crate::plan::RunSandbox;
use crate::plan::landlock::Step;

pub mod landlock_sys;
pub mod sys;

/// What to run, fully prepared in the parent.
#[derive(Debug)]
pub struct ChildSpec {
    /// Absolute path of the program (resolved through the policy's PATH).
    pub program: CString,
    /// argv, program name first.
    pub argv: Vec<CString>,
    /// `NAME=value` entries; the child's whole environment.
    pub env: Vec<CString>,
    pub cwd: CString,
    /// Give the child a stdin pipe (else `/dev/null`).
    pub stdin_pipe: bool,
    /// The run's kernel sandbox; `None` runs the child unconfined (tests of
    /// the exec machinery only).
    pub sandbox: Option<Arc<RunSandbox>>,
}

/// A started child. The caller owns the pipes and must reap `pid`.
#[derive(Debug)]
pub struct Spawned {
    pub pid: i32,
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("program not found: {0}")]
    NotFound(String),
    #[error("program is not executable (or outside the sandbox's allowed paths): {0}")]
    NotExecutable(String),
    /// A sandbox step failed in the child; nothing ran.
    #[error("sandbox setup failed in the child at step {step}: {source}")]
    Setup {
        step: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("could not start the child: {0}")]
    Io(#[from] std::io::Error),
}

/// Data the child reads before exec; raw values only.
struct Plan<'a> {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: *const libc::c_char,
    stdio: [libc::c_int; 3],
    err_fd: libc::c_int,
    parent_pid: libc::pid_t,
    sandbox: Option<&'a RunSandbox>,
    run_rules: [(i32, u64); 1],
    fprog: Option<libc::sock_fprog>,
    /// Set by the parent before each clone attempt: the child was created
    /// inside the run's v2 cgroup and must not write itself into it again.
    v2_joined: bool,
    /// Set by the child first thing (the one write it makes to the parent's
    /// memory besides errno): still false after clone returned means the
    /// kernel killed the child before it ran a single instruction.
    started: std::sync::atomic::AtomicBool,
    /// The spawning thread's capability bounding set is already empty (the
    /// child inherits it at clone), so the child skips dropping it cap by
    /// cap.
    bounding_empty: bool,
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two fds into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Starts the child in its own session (so its process group can be killed
/// whole and it has no controlling terminal), dying with the supervisor,
/// inside `spec.sandbox` when given.
pub fn spawn(spec: &ChildSpec) -> Result<Spawned, SpawnError> {
    let argv: Vec<*const libc::c_char> = spec
        .argv
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp: Vec<*const libc::c_char> = spec
        .env
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();

    let (stdin_parent, stdin_child) = if spec.stdin_pipe {
        let (r, w) = pipe()?;
        (Some(w), r)
    } else {
        let null = nix::fcntl::open(
            c"/dev/null",
            nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(std::io::Error::from)?;
        (None, null)
    };
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let (status_r, status_w) = pipe()?;

    let sandbox = spec.sandbox.as_deref();
    let fprog = sandbox
        .and_then(|s| s.shared.seccomp.as_ref())
        .map(|f| libc::sock_fprog {
            // The filter length was checked against u16 when it was built.
            len: f.len() as libc::c_ushort,
            filter: f.as_ptr() as *mut libc::sock_filter,
        });
    let mut plan = Plan {
        program: spec.program.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: spec.cwd.as_ptr(),
        stdio: [
            stdin_child.as_raw_fd(),
            out_w.as_raw_fd(),
            err_w.as_raw_fd(),
        ],
        err_fd: status_w.as_raw_fd(),
        // SAFETY: getpid has no preconditions.
        parent_pid: unsafe { libc::getpid() },
        sandbox,
        run_rules: sandbox.map(|s| s.run_rules()).unwrap_or([(-1, 0)]),
        fprog,
        v2_joined: false,
        started: std::sync::atomic::AtomicBool::new(false),
        // Only a privileged child drops the set, so only then is it worth
        // the 41 reads of checking (once per thread, once it is empty).
        bounding_empty: sandbox
            .is_some_and(|s| s.shared.creds.privileged && thread_bounding_empty(s.shared.cap_last)),
    };

    // SAFETY: the child runs only `child_main` on its own stack, which makes
    // raw syscalls on memory prepared above and never returns.
    let pid = unsafe { clone_vfork(&mut plan)? };
    drop((stdin_child, out_w, err_w, status_w));

    let mut buf = [0u8; 8];
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reads into the unfilled tail of `buf`.
        let n = unsafe {
            libc::read(
                status_r.as_raw_fd(),
                buf[got..].as_mut_ptr().cast(),
                buf.len() - got,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(SpawnError::Io(e));
        }
        if n == 0 {
            break;
        }
        got += n as usize;
    }
    if got == 0 {
        return Ok(Spawned {
            pid,
            stdin: stdin_parent,
            stdout: out_r,
            stderr: err_r,
        });
    }
    // The child failed before exec and has exited: reap it here, since the
    // caller never learns its pid.
    let mut status = 0;
    // SAFETY: waitpid on our own child.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
        && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
    {}
    if got < buf.len() {
        return Err(SpawnError::Io(std::io::Error::other(
            "short error report from the child",
        )));
    }
    let step = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
    let errno = i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
    let program = spec.program.to_string_lossy().into_owned();
    match Step::from_u32(step) {
        Some(Step::Exec) if errno == libc::ENOENT || errno == libc::ENOTDIR => {
            Err(SpawnError::NotFound(program))
        }
        Some(Step::Exec) if errno == libc::EACCES || errno == libc::EPERM => {
            Err(SpawnError::NotExecutable(program))
        }
        Some(s) => Err(SpawnError::Setup {
            step: s.name(),
            source: std::io::Error::from_raw_os_error(errno),
        }),
        None => Err(SpawnError::Io(std::io::Error::other(format!(
            "unknown child step {step}"
        )))),
    }
}

/// Reports (step, errno) on the status pipe and exits without running
/// anything.
unsafe fn fail(err_fd: libc::c_int, step: Step) -> ! {
    // SAFETY: errno location is valid for this thread; write/_exit are raw.
    unsafe {
        let errno = *libc::__errno_location();
        let mut msg = [0u8; 8];
        let s = (step as u32).to_ne_bytes();
        let e = errno.to_ne_bytes();
        msg[..4].copy_from_slice(&s);
        msg[4..].copy_from_slice(&e);
        libc::syscall(libc::SYS_write, err_fd, msg.as_ptr(), msg.len());
        libc::_exit(127)
    }
}

unsafe fn child_main(plan: &Plan<'_>) -> ! {
    plan.started
        .store(true, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: every call below is a raw syscall on data the parent prepared
    // before clone; nothing allocates or takes a lock.
    unsafe {
        // Declared before the macro so the macro's (hygienic) reference is
        // this binding, which the stdio step below may move.
        let mut err_fd = plan.err_fd;
        macro_rules! check {
            ($e:expr, $step:expr) => {
                if ($e) < 0 {
                    fail(err_fd, $step);
                }
            };
        }
        // A clean signal state for the program: no handler of the
        // supervisor (its code must never run in this child), nothing
        // ignored (Rust ignores SIGPIPE, which `yes | head` relies on
        // being fatal), nothing blocked.
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
        check!(
            libc::syscall(
                libc::SYS_rt_sigprocmask,
                libc::SIG_SETMASK,
                &empty,
                std::ptr::null_mut::<u64>(),
                8usize
            ),
            Step::Signals
        );
        // Die with the supervisor. Armed here and again after the uid
        // change, which clears it (prctl(2)); the parent may have died before
        // it took effect, hence the check.
        macro_rules! arm_parent_death {
            () => {
                check!(
                    libc::prctl(
                        libc::PR_SET_PDEATHSIG,
                        libc::SIGKILL as libc::c_ulong,
                        0,
                        0,
                        0
                    ),
                    Step::ParentDeath
                );
                if libc::getppid() != plan.parent_pid {
                    libc::_exit(127);
                }
            };
        }
        check!(libc::setsid(), Step::Setsid);
        arm_parent_death!();

        // Move any source fd out of 0..=2 first so no dup2 clobbers another
        // source (possible when the supervisor runs with stdio closed).
        let mut stdio = plan.stdio;
        for fd in stdio.iter_mut().chain(std::iter::once(&mut err_fd)) {
            if *fd < 3 {
                let moved = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 3);
                check!(moved, Step::Stdio);
                *fd = moved;
            }
        }
        for (target, fd) in stdio.iter().enumerate() {
            check!(libc::dup2(*fd, target as libc::c_int), Step::Stdio);
        }
        // Nothing but stdio crosses exec, whatever the supervisor leaked.
        check!(
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC
            ),
            Step::CloseFds
        );
        if let Some(sb) = plan.sandbox {
            for fd in sb.cgroup_procs_fds(plan.v2_joined) {
                if libc::syscall(libc::SYS_write, fd, b"0".as_ptr(), 1usize) != 1 {
                    fail(err_fd, Step::CgroupJoin);
                }
            }
            for (res, value) in &sb.shared.rlimits {
                let lim = libc::rlimit {
                    rlim_cur: *value as libc::rlim_t,
                    rlim_max: *value as libc::rlim_t,
                };
                check!(libc::setrlimit(*res, &lim), Step::Rlimit);
            }
            check!(
                libc::prctl(
                    libc::PR_CAP_AMBIENT,
                    libc::PR_CAP_AMBIENT_CLEAR_ALL,
                    0,
                    0,
                    0
                ),
                Step::CapAmbient
            );
            let creds = sb.shared.creds;
            if creds.privileged {
                let mut cap = if plan.bounding_empty {
                    sb.shared.cap_last + 1
                } else {
                    0
                };
                while cap <= sb.shared.cap_last {
                    check!(
                        libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0),
                        Step::CapBounding
                    );
                    cap += 1;
                }
                let bits = libc::SECBIT_NOROOT
                    | libc::SECBIT_NOROOT_LOCKED
                    | libc::SECBIT_NO_SETUID_FIXUP
                    | libc::SECBIT_NO_SETUID_FIXUP_LOCKED
                    | libc::SECBIT_KEEP_CAPS_LOCKED
                    | libc::SECBIT_NO_CAP_AMBIENT_RAISE
                    | libc::SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
                check!(
                    libc::prctl(libc::PR_SET_SECUREBITS, bits as libc::c_ulong, 0, 0, 0),
                    Step::Securebits
                );
                // Raw syscalls: glibc's wrappers would try to broadcast the
                // change to threads that do not exist in this child.
                check!(
                    libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()),
                    Step::Setgroups
                );
                check!(
                    libc::syscall(libc::SYS_setresgid, creds.gid, creds.gid, creds.gid),
                    Step::Setgid
                );
                check!(
                    libc::syscall(libc::SYS_setresuid, creds.uid, creds.uid, creds.uid),
                    Step::Setuid
                );
                // Changing the effective uid or gid cleared the parent-death
                // signal: without this a `kill -9` of the supervisor would
                // leave the dropped-privilege child running.
                arm_parent_death!();
            }
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
                version: 0x2008_0522,
                pid: 0,
            };
            let data = [
                CapData {
                    effective: 0,
                    permitted: 0,
                    inheritable: 0,
                },
                CapData {
                    effective: 0,
                    permitted: 0,
                    inheritable: 0,
                },
            ];
            check!(
                libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()),
                Step::Capset
            );
            check!(
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0),
                Step::NoNewPrivs
            );
            check!(libc::chdir(plan.cwd), Step::Chdir);
            if let Some(ll) = &sb.shared.landlock
                && let Err((step, errno)) = landlock_sys::apply_in_child(ll, &plan.run_rules)
            {
                *libc::__errno_location() = errno;
                fail(err_fd, step);
            }
            if let Some(fprog) = &plan.fprog {
                check!(
                    libc::syscall(
                        libc::SYS_seccomp,
                        libc::SECCOMP_SET_MODE_FILTER,
                        0u32,
                        fprog as *const libc::sock_fprog
                    ),
                    Step::Seccomp
                );
            }
        } else {
            check!(libc::chdir(plan.cwd), Step::Chdir);
        }
        libc::execve(plan.program, plan.argv, plan.envp);
        fail(err_fd, Step::Exec)
    }
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

/// Size of the child's stack; `child_main` needs a few KiB.
const CHILD_STACK: usize = 128 * 1024;

extern "C" fn clone_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Plan` the suspended parent thread keeps alive
    // until this child has exec'd or exited.
    unsafe { child_main(&*(arg as *const Plan<'_>)) }
}

/// Starts `child_main` with `clone(CLONE_VM | CLONE_VFORK)` on a separate
/// stack: no page-table copy, so the cost does not grow with the
/// supervisor's memory. When the run has a v2 cgroup the child is created
/// inside it with `clone3(CLONE_INTO_CGROUP)`; kernels or seccomp profiles
/// without clone3 (ENOSYS) get plain clone, and the child then writes itself
/// into the cgroup. All signals are blocked around the call so no handler of
/// the supervisor can run on the child's stack before `child_main` resets
/// them.
///
/// # Safety
/// `plan` must stay valid until this returns (CLONE_VFORK guarantees the
/// child is done with it by then).
unsafe fn clone_vfork(plan: &mut Plan<'_>) -> std::io::Result<libc::pid_t> {
    CHILD_STACKS.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(ChildStack::map()?);
        }
        let Some(stack) = slot.as_ref() else {
            return Err(std::io::Error::from_raw_os_error(libc::ENOMEM));
        };
        // SAFETY: the stack is this thread's and unused (the previous
        // child has exec'd or exited); `plan` outlives the child's use.
        unsafe { clone_on(plan, stack) }
    })
}

/// A child stack with a guard page below it, mapped once per thread and
/// reused by every spawn from that thread: mapping and unmapping one per
/// spawn cost a TLB shootdown each time. Reuse is safe because CLONE_VFORK
/// returns only after the previous child has exec'd or exited.
struct ChildStack {
    base: *mut libc::c_void,
    len: usize,
    page: usize,
}

impl ChildStack {
    fn map() -> std::io::Result<ChildStack> {
        // SAFETY: a fresh private anonymous mapping, and a protection change
        // on its first page; both ours alone.
        unsafe {
            let page = 4096usize.max(libc::sysconf(libc::_SC_PAGESIZE).max(0) as usize);
            let len = CHILD_STACK + page;
            let base = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return Err(std::io::Error::last_os_error());
            }
            // The guard page: an overflow faults in the child instead of
            // writing over the parent's memory.
            if libc::mprotect(base, page, libc::PROT_NONE) != 0 {
                let e = std::io::Error::last_os_error();
                libc::munmap(base, len);
                return Err(e);
            }
            Ok(ChildStack { base, len, page })
        }
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping when the thread ends; no child
        // is running on it (CLONE_VFORK).
        unsafe {
            libc::munmap(self.base, self.len);
        }
    }
}

thread_local! {
    static CHILD_STACKS: std::cell::RefCell<Option<ChildStack>> =
        const { std::cell::RefCell::new(None) };
}

/// # Safety
/// As `clone_vfork`, and `stack` must not be in use.
unsafe fn clone_on(plan: &mut Plan<'_>, stack: &ChildStack) -> std::io::Result<libc::pid_t> {
    // SAFETY: signal mask changes restored before returning; the clone
    // calls get a stack nobody else uses.
    unsafe {
        let (base, page) = (stack.base, stack.page);
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let stack_low = (base as *mut u8).add(page);
        let top = stack_low.add(CHILD_STACK) as *mut libc::c_void;

        let mut result = Err(std::io::Error::from_raw_os_error(libc::ENOSYS));
        if let Some(cgroup) = plan.sandbox.and_then(|s| s.cgroup_dir_fd())
            && INTO_CGROUP_WORKS.load(std::sync::atomic::Ordering::Relaxed)
        {
            plan.v2_joined = true;
            let args = CloneArgs {
                flags: (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | CLONE_INTO_CGROUP,
                exit_signal: libc::SIGCHLD as u64,
                stack: stack_low as u64,
                stack_size: CHILD_STACK as u64,
                cgroup: cgroup as u64,
                ..CloneArgs::default()
            };
            result = clone3_vm(&args, plan as *const Plan<'_> as *mut libc::c_void);
            if let Ok(pid) = result
                && !plan.started.load(std::sync::atomic::Ordering::Relaxed)
            {
                // Killed at birth, before running anything: the kernel does
                // this to children cloned into a cgroup whose kill sequence
                // differs from the parent's cgroup's (one that saw
                // `cgroup.kill`). Reap it and never try this path again;
                // plain clone below joins by writing `cgroup.procs`.
                let mut status = 0;
                while libc::waitpid(pid, &mut status, 0) < 0
                    && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                {
                }
                INTO_CGROUP_WORKS.store(false, std::sync::atomic::Ordering::Relaxed);
                result = Err(std::io::Error::from_raw_os_error(libc::ENOSYS));
            }
        }
        // ENOSYS: no clone3 (or a seccomp profile hiding it); E2BIG and
        // EINVAL: a kernel before CLONE_INTO_CGROUP (5.7); EPERM: a profile
        // refusing it. A real permission problem fails again at the write.
        if matches!(&result, Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::E2BIG | libc::EINVAL | libc::EPERM)))
        {
            plan.v2_joined = false;
            let pid = libc::clone(
                clone_entry,
                top,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                plan as *const Plan<'_> as *mut libc::c_void,
            );
            result = if pid < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(pid)
            };
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        result
    }
}

/// Cleared for the rest of the process once a child cloned into its cgroup
/// was killed before it could run (see `clone_on`).
static INTO_CGROUP_WORKS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// `struct clone_args` (linux/sched.h), up to the `cgroup` field (VER2).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Raw `clone3` for a child that shares our memory: it starts on its own
/// stack with the parent's registers, so it must not return into Rust code
/// compiled for the parent's frame. The assembly sends it straight into
/// `clone_entry(arg)`, which never returns; the parent gets the pid or the
/// error. Only x86_64 has this path; other architectures report ENOSYS and
/// take plain `clone`.
///
/// # Safety
/// `args.stack` must be a valid, writable stack for the child and `arg` a
/// `Plan` that outlives the child's use of it (CLONE_VFORK).
#[cfg(target_arch = "x86_64")]
unsafe fn clone3_vm(args: &CloneArgs, arg: *mut libc::c_void) -> std::io::Result<libc::pid_t> {
    let ret: libc::c_long;
    // SAFETY: the syscall only reads `args`. In the child (rax == 0) the
    // stack pointer is the top of the fresh stack, 16-byte aligned as the
    // call requires, and `clone_entry` never returns; r12/r13 survive the
    // syscall (only rax, rcx and r11 are clobbered).
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r12",
            "call r13",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone3 => ret,
            in("rdi") args as *const CloneArgs,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") arg,
            in("r13") clone_entry as extern "C" fn(*mut libc::c_void) -> libc::c_int,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    if ret < 0 {
        Err(std::io::Error::from_raw_os_error((-ret) as i32))
    } else {
        Ok(ret as libc::pid_t)
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn clone3_vm(_args: &CloneArgs, _arg: *mut libc::c_void) -> std::io::Result<libc::pid_t> {
    Err(std::io::Error::from_raw_os_error(libc::ENOSYS))
}

/// Empties the calling thread's capability bounding set, which threads it
/// creates later and every child it spawns inherit. The supervisor's own
/// capabilities are unchanged (the bounding set only limits what an
/// `execve` can grant), so a thread that spawns sandboxed children but
/// never execs anything itself can do this once and spare each child 41
/// `prctl` calls (about 60 µs measured). Best effort: without
/// CAP_SETPCAP nothing changes and children drop the set themselves.
pub fn drop_thread_bounding_set() {
    let last = crate::plan::privs::cap_last_cap();
    for cap in 0..=last {
        // SAFETY: prctl on the calling thread's own credentials.
        unsafe {
            libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0);
        }
    }
}

thread_local! {
    static BOUNDING_EMPTY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread's bounding set holds no capability. Checked
/// until it is true and then remembered: a bounding set never grows back.
fn thread_bounding_empty(cap_last: u32) -> bool {
    if BOUNDING_EMPTY.with(|b| b.get()) {
        return true;
    }
    // SAFETY: PR_CAPBSET_READ only queries the calling thread.
    let empty = (0..=cap_last).all(
        |cap| unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap as libc::c_ulong, 0, 0, 0) } == 0,
    );
    if empty {
        BOUNDING_EMPTY.with(|b| b.set(true));
    }
    empty
}

/// Opens `/dev/null` on any of descriptors 0, 1 and 2 that is closed. Call
/// it first thing in a supervisor: otherwise the next file it opens (a
/// Landlock rule's pre-opened path, say) lands on 0-2 and the child's stdio
/// setup would overwrite it.
pub fn ensure_stdio_open() {
    for fd in 0..3 {
        // SAFETY: F_GETFD only queries the descriptor table.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0 {
            continue;
        }
        // SAFETY: open with a static NUL-terminated path; the lowest free
        // descriptor, which is `fd` since the ones below it are open.
        let got = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        if got >= 0 && got != fd {
            // SAFETY: closing the descriptor we just opened.
            unsafe { libc::close(got) };
        }
    }
}
