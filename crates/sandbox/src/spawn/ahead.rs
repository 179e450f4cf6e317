//! A child made ahead of its run: cloned, confined and waiting before its
//! command is known, so that a run's request pays only for the handover
//! and the exec.
//!
//! The child walks every step of [`super::steps::STEPS`] but stdio, `chdir`
//! and exec (the cgroup, the namespaces, the privilege drop, Landlock and
//! seccomp are the same for every run of a sandbox), closes every
//! descriptor but its own, reports itself ready on the status pipe and
//! blocks on a go pipe. [`Readied::go`] writes the command into the child's
//! [`GoSlot`] and one byte on that pipe; the child takes its stdio and
//! directory and execs, and the status pipe then reads as for any spawn:
//! EOF once it exec'd, (step, errno) if it could not.
//!
//! Why this is sound although the child shares the caller's memory without
//! `CLONE_VFORK`:
//! - until it reports ready it reads the `ChildPlan` on the cloning
//!   thread's stack, which that thread keeps still by waiting on the status
//!   pipe, as a vfork parent would; after that it reads only its `GoSlot`
//!   and the command's strings, owned by the [`Readied`] and by the caller
//!   of [`Readied::go`] until the child has exec'd or exited;
//! - the child runs on the cloning thread's thread pointer: before it is
//!   ready, the only memory of the caller it writes, that thread's `errno`,
//!   is written while the thread waits in `read` on the status pipe; after
//!   it, the child makes raw system calls only and writes nothing but its
//!   own stack, so any thread may hand it its command;
//! - its stack is owned by the [`Readied`] until it has exec'd or exited;
//! - its parent-death signal is tied to the cloning thread: the caller
//!   keeps that thread alive for as long as the runs it started (see
//!   `crate::sandbox`).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};

use super::child::{ChildPlan, GoSlot, READY};
use super::clone::{self, ChildStack};
use super::{
    Command, Confinement, SpawnError, Spawned, child_error, hold_namespaces, pipe, pointers,
    ready_parent_ends,
};

/// Why a child made ahead did not run its command.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GoError {
    /// It was gone before its command came (killed while it waited):
    /// nothing ran, and the run may spawn a child of its own.
    #[error("the child made ahead was gone before its command came")]
    Gone,
    /// It took its command and failed before exec, as a spawn fails.
    #[error(transparent)]
    Spawn(SpawnError),
}

/// A child made ahead, confined and waiting for its command. Dropped
/// without [`go`](Readied::go), it is let go (it exits) and reaped.
pub(crate) struct Readied {
    child: Waiting,
    stdin_w: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
    namespaces: Vec<OwnedFd>,
    /// Opened while the child waits, so its run does not.
    pidfd: Option<OwnedFd>,
    /// Descriptor numbers in the child's table.
    child_stdin: libc::c_int,
    child_null: libc::c_int,
    child_stdout: libc::c_int,
    child_stderr: libc::c_int,
}

/// The child itself until it has exec'd or been reaped.
struct Waiting {
    pid: i32,
    /// Closed without a byte written: the child exits.
    go_w: Option<OwnedFd>,
    status_r: OwnedFd,
    slot: Box<GoSlot>,
    /// The child's stack until it has exec'd or exited.
    stack: Option<ChildStack>,
    /// Reaped, or exec'd and handed over: nothing left to do on drop.
    done: bool,
}

// SAFETY: what a `Readied` holds may be used from any thread: descriptors,
// its own boxed slot, and a stack mapping only its child runs on. The
// child it drives writes no memory of the thread that cloned it once it is
// ready (the module's notes), which every `Readied` is.
unsafe impl Send for Readied {}

impl std::fmt::Debug for Readied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readied")
            .field("pid", &self.child.pid)
            .finish_non_exhaustive()
    }
}

impl Waiting {
    /// The child has exec'd or exited: its stack is free for the next
    /// child made ahead.
    fn release(&mut self) {
        self.done = true;
        if let Some(stack) = self.stack.take() {
            clone::give_back_stack(stack);
        }
    }

    /// Waits for the child's exit (it is exiting or has exited) and reaps
    /// it.
    fn reap(&mut self) {
        let mut status = 0;
        // SAFETY: waitpid on our own child, which nobody else reaps (the
        // caller registered it as a run's main child).
        while unsafe { libc::waitpid(self.pid, &mut status, 0) } < 0
            && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {}
        self.release();
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // Let go: the go pipe closes without a byte, the child exits, and
        // its status pipe reads EOF once it has.
        drop(self.go_w.take());
        let _ = super::read_report(&self.status_r);
        self.reap();
    }
}

/// Clones a child confined by `confinement` and waits until it is ready
/// for its command (or failed, when it has been reaped and nothing is
/// left). `around_clone` gets the clone to call: the caller registers the
/// pid it returns as a run's main child there, as for [`super::spawn`];
/// unlike a vfork spawn, the clone returns at once, so whatever the caller
/// holds around it (the reap gate) is not held while the child sets
/// itself up.
pub(crate) fn spawn_ahead(
    confinement: &Confinement<'_>,
    around_clone: impl FnOnce(&mut dyn FnMut() -> std::io::Result<i32>) -> std::io::Result<i32>,
) -> Result<Readied, SpawnError> {
    let (stdin_r, stdin_w) = pipe()?;
    let null = nix::fcntl::open(
        c"/dev/null",
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(std::io::Error::from)?;
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let (status_r, status_w) = pipe()?;
    let (go_r, go_w) = pipe()?;
    ready_parent_ends(Some(&stdin_w), &out_r, &err_r)?;

    // Their numbers in the child's table, which is a copy of ours at clone.
    let numbers = [
        stdin_r.as_raw_fd(),
        null.as_raw_fd(),
        out_w.as_raw_fd(),
        err_w.as_raw_fd(),
    ];
    let mut keep = [
        numbers[0],
        numbers[1],
        numbers[2],
        numbers[3],
        status_w.as_raw_fd(),
        go_r.as_raw_fd(),
    ];
    keep.sort_unstable();
    let slot = Box::new(GoSlot {
        fd: go_r.as_raw_fd(),
        keep,
        program: AtomicPtr::new(std::ptr::null_mut()),
        argv: AtomicPtr::new(std::ptr::null_mut()),
        envp: AtomicPtr::new(std::ptr::null_mut()),
        cwd: AtomicPtr::new(std::ptr::null_mut()),
        stdio: [AtomicI32::new(-1), AtomicI32::new(-1), AtomicI32::new(-1)],
    });
    let mut plan = ChildPlan {
        program: std::ptr::null(),
        argv: std::ptr::null(),
        envp: std::ptr::null(),
        cwd: std::ptr::null(),
        stdio: [-1; 3],
        err_fd: status_w.as_raw_fd(),
        // SAFETY: getpid has no preconditions.
        parent_pid: unsafe { libc::getpid() },
        confinement: Some(confinement),
        fprog: confinement.seccomp.map(|f| libc::sock_fprog {
            // The filter length was checked against u16 when it was built.
            len: f.len() as libc::c_ushort,
            filter: f.as_ptr() as *mut libc::sock_filter,
        }),
        v2_joined: false,
        started: AtomicBool::new(false),
        bounding_empty: confinement.creds.privileged
            && super::sys::thread_bounding_empty(confinement.cap_last),
        go: &*slot,
    };
    let stack = clone::take_stack()?;
    // One clone only: a second child on the same stack would share it.
    let mut once = Some((&mut plan, &stack));
    let mut clone_once = || match once.take() {
        // SAFETY: `plan` stays on this frame, unchanged, until the status
        // pipe below says the child is ready or gone; `stack` and `slot`
        // move into the `Readied`, which keeps them until the child has
        // exec'd or exited.
        Some((plan, stack)) => unsafe { clone::clone_ahead(plan, stack) },
        None => Err(std::io::Error::from_raw_os_error(libc::EBUSY)),
    };
    let pid = around_clone(&mut clone_once)?;
    // The child has its copies; these would keep its pipes open.
    drop((stdin_r, null, out_w, err_w, status_w, go_r));

    let mut child = Waiting {
        pid,
        go_w: Some(go_w),
        status_r,
        slot,
        stack: Some(stack),
        done: false,
    };
    let (report, got) = match super::read_report(&child.status_r) {
        Ok(r) => r,
        Err(e) => {
            // SAFETY: kill of our own unreaped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            child.reap();
            return Err(e);
        }
    };
    if got == READY.len() && report == READY {
        let namespaces = if confinement.prepared.is_none() && confinement.mounts.is_some() {
            hold_namespaces(pid)
        } else {
            Vec::new()
        };
        // Our unreaped child: the pid still names it.
        let pidfd = super::sys::pidfd_open(pid).ok();
        return Ok(Readied {
            child,
            stdin_w,
            stdout: out_r,
            stderr: err_r,
            namespaces,
            pidfd,
            child_stdin: numbers[0],
            child_null: numbers[1],
            child_stdout: numbers[2],
            child_stderr: numbers[3],
        });
    }
    // The child failed or died before it was ready; it is gone.
    child.reap();
    if got == 0 && plan.v2_joined && !plan.started.load(Ordering::Relaxed) {
        // Killed at birth in its cgroup (see `clone::clone_on`).
        clone::into_cgroup_failed();
    }
    if got < report.len() {
        return Err(SpawnError::Io(std::io::Error::other(
            "a child made ahead exited before it was ready",
        )));
    }
    Err(child_error(report, c"(made ahead)"))
}

impl Readied {
    /// The child's pid (not reaped while the `Readied` lives).
    pub(crate) fn pid(&self) -> i32 {
        self.child.pid
    }

    /// Hands the child `cmd` (its confinement is the child's already) and
    /// waits until it has exec'd it (a started child, as [`super::spawn`]
    /// returns it) or failed before (reaped).
    pub(crate) fn go(self, cmd: &Command<'_>) -> Result<Spawned, GoError> {
        let Readied {
            mut child,
            stdin_w,
            stdout,
            stderr,
            namespaces,
            pidfd,
            child_stdin,
            child_null,
            child_stdout,
            child_stderr,
        } = self;
        let argv = pointers(cmd.argv);
        let envp = pointers(cmd.env);
        let slot = &child.slot;
        slot.program
            .store(cmd.program.as_ptr().cast_mut(), Ordering::Release);
        slot.argv.store(argv.as_ptr().cast_mut(), Ordering::Release);
        slot.envp.store(envp.as_ptr().cast_mut(), Ordering::Release);
        slot.cwd
            .store(cmd.cwd.as_ptr().cast_mut(), Ordering::Release);
        let stdin = if cmd.stdin_pipe {
            child_stdin
        } else {
            child_null
        };
        for (i, fd) in [stdin, child_stdout, child_stderr].into_iter().enumerate() {
            slot.stdio[i].store(fd, Ordering::Release);
        }
        let Some(go_w) = child.go_w.take() else {
            child.reap();
            return Err(GoError::Gone);
        };
        // EPIPE (SIGPIPE is ignored in every Rust binary): the child, the
        // only reader, is gone.
        let wrote = nix::unistd::write(&go_w, &[1u8]);
        drop(go_w);
        if wrote != Ok(1) {
            child.reap();
            return Err(GoError::Gone);
        }
        let read = super::read_report(&child.status_r);
        // The child read the pointers until its exec or exit, which the
        // status pipe has now told.
        drop((argv, envp));
        let (report, got) = match read {
            Ok(r) => r,
            Err(e) => {
                // SAFETY: kill of our own unreaped child.
                unsafe { libc::kill(child.pid, libc::SIGKILL) };
                child.reap();
                return Err(GoError::Spawn(e));
            }
        };
        if got == 0 {
            // Exec'd: the stack is free again, and the child is the run's.
            child.release();
            return Ok(Spawned {
                pid: child.pid,
                stdin: cmd.stdin_pipe.then_some(stdin_w),
                stdout,
                stderr,
                namespaces,
                pidfd,
            });
        }
        child.reap();
        if got < report.len() {
            return Err(GoError::Spawn(SpawnError::Io(std::io::Error::other(
                "short error report from the child",
            ))));
        }
        Err(GoError::Spawn(child_error(report, cmd.program)))
    }
}
