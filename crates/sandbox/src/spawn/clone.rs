//! Starting the child on a stack of its own with the parent's memory
//! (`clone(CLONE_VM | CLONE_VFORK)`, or `clone3` into the run's cgroup),
//! and nothing else: what the child does is `child.rs`.

use super::child::{ChildPlan, child_main};

/// Size of the child's stack; `child_main` needs a few KiB.
const CHILD_STACK: usize = 128 * 1024;

extern "C" fn clone_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildPlan` the parent thread keeps alive until
    // this child has exec'd or exited (or, for a child made ahead, until it
    // reported itself ready, after which it no longer reads the plan).
    unsafe { child_main(arg as *const ChildPlan<'_>) }
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
pub(super) unsafe fn clone_vfork(plan: &mut ChildPlan<'_>) -> std::io::Result<libc::pid_t> {
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
        unsafe { clone_on(plan, stack, true) }
    })
}

/// Starts `child_main` for a child made ahead of its run: the same clone
/// as [`clone_vfork`] without `CLONE_VFORK`, so it returns at once and the
/// child prepares itself while the caller goes on, on `stack`, which the
/// child owns until it has exec'd or exited.
///
/// # Safety
/// `plan` must stay valid and unchanged until the child reports itself
/// ready or exits; `stack` must not be in use, and must stay mapped and
/// unused by anyone else until the child has exec'd or exited.
pub(super) unsafe fn clone_ahead(
    plan: &mut ChildPlan<'_>,
    stack: &ChildStack,
) -> std::io::Result<libc::pid_t> {
    // SAFETY: as this function's contract says.
    unsafe { clone_on(plan, stack, false) }
}

/// A stack for a child made ahead: the spare one, or a new one. It is the
/// child's until the child has exec'd or exited; then [`give_back_stack`]
/// keeps it for the next child made ahead.
pub(super) fn take_stack() -> std::io::Result<ChildStack> {
    let spare = AHEAD_STACK.lock().ok().and_then(|mut s| s.take());
    match spare {
        Some(stack) => Ok(stack),
        None => ChildStack::map(),
    }
}

/// Keeps a stack no child runs on any more for the next child made ahead
/// (a daemon makes one at a time: one spare saves a mapping per run).
pub(super) fn give_back_stack(stack: ChildStack) {
    if let Ok(mut spare) = AHEAD_STACK.lock()
        && spare.is_none()
    {
        *spare = Some(stack);
    }
}

/// The spare stack of children made ahead.
static AHEAD_STACK: std::sync::Mutex<Option<ChildStack>> = std::sync::Mutex::new(None);

// SAFETY: a stack is plain memory of this process, owned by whoever holds
// the value; nothing in it is tied to the thread that mapped it.
unsafe impl Send for ChildStack {}

/// Starts `entry(arg)` with `clone(CLONE_VM | CLONE_VFORK | extra)` on
/// this thread's child stack, signals blocked, and returns once it has
/// exited or exec'd, with a pidfd for it (to reap it without racing a
/// service's `waitpid(-1)` for its pid).
///
/// # Safety
/// `entry` must make raw syscalls only (it runs in the caller's memory on
/// a stack of its own) and end in `_exit` or `execve`; `arg` must outlive
/// the call.
pub(super) unsafe fn clone_vfork_entry(
    extra: libc::c_int,
    entry: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    CHILD_STACKS.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(ChildStack::map()?);
        }
        let Some(stack) = slot.as_ref() else {
            return Err(std::io::Error::from_raw_os_error(libc::ENOMEM));
        };
        // SAFETY: the stack is this thread's and unused (CLONE_VFORK: any
        // earlier child is done with it); the mask is restored before
        // returning; the pidfd is written into `pidfd` by the kernel.
        unsafe {
            let top = (stack.base as *mut u8).add(stack.page + CHILD_STACK) as *mut libc::c_void;
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            let mut pidfd: libc::c_int = -1;
            let pid = libc::clone(
                entry,
                top,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD | extra,
                arg,
                &mut pidfd as *mut libc::c_int,
            );
            let result = if pid < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(std::os::fd::OwnedFd::from_raw_fd(pidfd))
            };
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            result
        }
    })
}

/// A child stack with a guard page below it, mapped once per thread and
/// reused by every spawn from that thread: mapping and unmapping one per
/// spawn cost a TLB shootdown each time. Reuse is safe because CLONE_VFORK
/// returns only after the previous child has exec'd or exited; a child made
/// ahead owns its stack by value until then (`take_stack`).
pub(super) struct ChildStack {
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
        // SAFETY: unmapping our own mapping; no child is running on it
        // (CLONE_VFORK, or the child made ahead has exec'd or exited).
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
/// As `clone_vfork` (`vfork`) or `clone_ahead`, and `stack` must not be in
/// use.
unsafe fn clone_on(
    plan: &mut ChildPlan<'_>,
    stack: &ChildStack,
    vfork: bool,
) -> std::io::Result<libc::pid_t> {
    let wait = if vfork { libc::CLONE_VFORK } else { 0 };
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
        if let Some(cgroup) = plan.confinement.and_then(|c| c.cgroup.into)
            && INTO_CGROUP_WORKS.load(std::sync::atomic::Ordering::Relaxed)
        {
            plan.v2_joined = true;
            let args = CloneArgs {
                flags: (libc::CLONE_VM | wait) as u64 | CLONE_INTO_CGROUP,
                exit_signal: libc::SIGCHLD as u64,
                stack: stack_low as u64,
                stack_size: CHILD_STACK as u64,
                cgroup: cgroup as u64,
                ..CloneArgs::default()
            };
            result = clone3_vm(&args, plan as *const ChildPlan<'_> as *mut libc::c_void);
            // (A child made ahead is checked by its caller, once it has
            // reported or exited: this call does not wait for it.)
            if let Ok(pid) = result
                && vfork
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
                libc::CLONE_VM | wait | libc::SIGCHLD,
                plan as *const ChildPlan<'_> as *mut libc::c_void,
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

/// A child made ahead into its cgroup died before it ran a single
/// instruction (see `clone_on`): later children join by writing
/// `cgroup.procs`.
pub(super) fn into_cgroup_failed() {
    INTO_CGROUP_WORKS.store(false, std::sync::atomic::Ordering::Relaxed);
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
/// `ChildPlan` that outlives the child's use of it (CLONE_VFORK).
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
