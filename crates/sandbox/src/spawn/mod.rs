//! Starting the child: the only code that runs between clone and exec, and
//! the only module of the crate allowed to write `unsafe`.
//!
//! The rule "all `unsafe` and all post-clone code in one small module" is
//! enforced by the compiler: `lib.rs` denies `unsafe_code` crate-wide and
//! lifts the lint for this private module tree alone. It is the bottom
//! layer of the crate and takes nothing from the layers above: they build
//! the plain data defined here ([`Command`], [`Confinement`]: raw fds,
//! rlimit pairs, the seccomp program, the Landlock rules, the credentials)
//! and [`spawn`] hands it to the child. Inside:
//! - this file: the data, and the parent's side of a spawn;
//! - `steps`: the child's setup sequence as one table, with the reasons for
//!   its order checked by tests;
//! - `child`: the walk of that table in the child;
//! - `clone`: clone/clone3 onto a child stack;
//! - `ahead`: a child made ahead of its run, confined and waiting for its
//!   command (a long-lived service's runs; the rules it adds to the ones
//!   below are in that file);
//! - [`landlock_sys`]: Landlock's kernel structures, the ABI probe and the
//!   ruleset the child enforces;
//! - [`mounts`]: the run's own mount and IPC namespaces as data, and the
//!   child's mounts;
//! - [`entry`]: the small client's process entry, without std's runtime
//!   start (its SIGPIPE disposition is the one `unsafe` line);
//! - [`sys`]: small safe wrappers (pidfd, `waitid` on a pidfd, `ppoll` on
//!   fixed slots, the seccomp probe, the process setup of
//!   `crate::supervisor`) for the parent-side code, which uses them, or
//!   `nix`, and no `unsafe` of its own.
//!
//! Everything the child needs (argv, envp, cwd, the prepared sandbox) is
//! built in the parent beforehand. The child makes raw syscalls only: no
//! allocation, no locks, no panics, because the daemon is multi-threaded
//! and another thread may hold the allocator's lock at any moment.
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
//!   the child execs or exits, so the `ChildPlan` on its stack stays valid and
//!   unchanged and the stack is free again when clone returns;
//! - the child writes no memory of the parent except `ChildPlan::started` (an
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

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

mod ahead;
mod child;
mod clone;
pub(crate) mod entry;
pub(crate) mod landlock_sys;
pub(crate) mod mounts;
mod steps;
pub(crate) mod sys;

pub(crate) use ahead::{GoError, Readied, spawn_ahead};
use child::ChildPlan;
use steps::Step;

/// Whether a confined child's walk includes the `no_new_privs` step, which
/// sets the flag, reads it back and fails the spawn unless it holds: then
/// every sandboxed run that started has it. The summary's `no_new_privs`
/// is this, read from the table the child walks rather than assumed.
pub(crate) const NO_NEW_PRIVS_CHECKED: bool = {
    let mut i = 0;
    let mut found = false;
    while i < steps::STEPS.len() {
        found |= steps::STEPS[i] as u32 == Step::NoNewPrivs as u32;
        i += 1;
    }
    found
};

#[cfg(target_env = "gnu")]
pub(crate) type RlimitResource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
pub(crate) type RlimitResource = libc::c_int;

/// One resource limit; the child sets soft and hard limit to `value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rlimit {
    pub resource: RlimitResource,
    pub value: u64,
}

/// The credentials the child takes, and whether the supervisor can change
/// them (only root can).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Creds {
    pub uid: u32,
    pub gid: u32,
    /// The supervisor is root: drop the bounding set, lock securebits and
    /// switch ids. A non-root supervisor has nothing to drop (no_new_privs
    /// keeps file capabilities and setuid bits inert).
    pub privileged: bool,
}

/// The run's cgroups, as descriptors the parent opened.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CgroupJoin<'a> {
    /// The v2 cgroup's directory: the child is born inside it
    /// (`clone3(CLONE_INTO_CGROUP)`), which costs no migration.
    pub into: Option<RawFd>,
    /// Its `cgroup.procs`, written by the child only when it could not be
    /// born inside (no clone3).
    pub v2_procs: Option<RawFd>,
    /// `cgroup.procs` of each v1 hierarchy, always written by the child.
    pub v1_procs: &'a [OwnedFd],
}

/// Everything that confines one child, prepared in the parent and borrowed
/// from the run's sandbox for the spawn.
#[derive(Clone, Copy)]
pub(crate) struct Confinement<'a> {
    pub creds: Creds,
    /// Highest capability number the kernel knows.
    pub cap_last: u32,
    pub rlimits: &'a [Rlimit],
    pub cgroup: CgroupJoin<'a>,
    pub landlock: Option<landlock_sys::LandlockRules<'a>>,
    /// The compiled seccomp program (its length fits a u16).
    pub seccomp: Option<&'a [libc::sock_filter]>,
    /// The sandbox's user namespace, entered first (a non-root
    /// supervisor's runs); `None`: the supervisor's.
    pub user: Option<RawFd>,
    /// The run's own mount and IPC namespaces; `None`: the supervisor's.
    pub mounts: Option<mounts::MountPlan<'a>>,
    /// Those namespaces already made for this run (`mounts::make_ahead`):
    /// the child joins them instead of making them.
    pub prepared: Option<mounts::PreparedFds>,
    /// The sandbox's empty network namespace, joined before the privilege
    /// drop; `None`: the supervisor's.
    pub network: Option<RawFd>,
}

/// What to run, fully prepared in the parent.
pub(crate) struct Command<'a> {
    /// Absolute path of the program.
    pub program: &'a CStr,
    /// argv, program name first.
    pub argv: &'a [CString],
    /// `NAME=value` entries; the child's whole environment.
    pub env: &'a [CString],
    pub cwd: &'a CStr,
    /// Give the child a stdin pipe (else `/dev/null`).
    pub stdin_pipe: bool,
    /// `None` runs the child unconfined: only the exec machinery's own
    /// tests do.
    pub confinement: Option<Confinement<'a>>,
}

/// A started child. The caller owns the pipes and must reap `pid`.
#[derive(Debug)]
pub(crate) struct Spawned {
    pub pid: i32,
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// The run's own mount and IPC namespaces, held open so that tearing
    /// them down happens when these close, not in the exit of the run's
    /// last process before its parent learns of it (see
    /// [`sys::release_later`]). Empty without namespaces, or when the
    /// child was gone before they could be opened.
    pub namespaces: Vec<OwnedFd>,
    /// A pidfd for the child, when one was opened before its run (a child
    /// made ahead); else the run opens it.
    pub pidfd: Option<OwnedFd>,
}

/// Why a child could not be started. Nothing of the program ran.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    #[error("program not found: {0}")]
    NotFound(String),
    #[error("program is not executable (or outside the sandbox's allowed paths): {0}")]
    NotExecutable(String),
    /// A sandbox step failed in the child.
    #[error("sandbox setup failed in the child at step {step}: {source}")]
    Setup {
        step: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("could not start the child: {0}")]
    Io(#[from] std::io::Error),
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

/// How much each output pipe of a run holds (the kernel's default is
/// 64 KiB): fewer wake-ups of the reader for a command that writes a lot.
pub(crate) const PIPE_SIZE: libc::c_int = 256 * 1024;

/// Asks the C allocator to grow each heap by `bytes` more than a growth
/// needs (glibc's `M_TOP_PAD`, 128 KiB by default); see
/// `SupervisorOptions::heap_pad` for why. Whether it was taken: `false`
/// where the C library is not glibc, or the size does not fit its
/// parameter.
pub(crate) fn pad_heap_growth(bytes: usize) -> bool {
    #[cfg(target_env = "gnu")]
    {
        let Ok(bytes) = libc::c_int::try_from(bytes) else {
            return false;
        };
        // SAFETY: `mallopt` only sets an allocator parameter, under the
        // allocator's own lock; no memory of ours is touched.
        unsafe { libc::mallopt(libc::M_TOP_PAD, bytes) == 1 }
    }
    #[cfg(not(target_env = "gnu"))]
    {
        let _ = bytes;
        false
    }
}

/// The supervisor's ends of a run's stdio pipes, made as the run reads and
/// writes them: nonblocking, the output pipes enlarged. A child made ahead
/// has this done before its run comes, off the run's path.
fn ready_parent_ends(stdin: Option<&OwnedFd>, out: &OwnedFd, err: &OwnedFd) -> std::io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    for fd in stdin.into_iter().chain([out, err]) {
        // A pipe just made has no status flag but its access mode, which
        // `F_SETFL` leaves alone: no `F_GETFL` first.
        fcntl(fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    }
    for fd in [out, err] {
        // Failure only costs throughput.
        let _ = fcntl(fd, FcntlArg::F_SETPIPE_SZ(PIPE_SIZE));
    }
    Ok(())
}

/// The null-terminated pointer array `execve` takes.
fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// Starts the child in its own session (so its process group can be killed
/// whole and it has no controlling terminal), dying with the supervisor,
/// confined as `cmd.confinement` says.
pub(crate) fn spawn(cmd: &Command<'_>) -> Result<Spawned, SpawnError> {
    let argv = pointers(cmd.argv);
    let envp = pointers(cmd.env);

    let (stdin_parent, stdin_child) = if cmd.stdin_pipe {
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
    ready_parent_ends(stdin_parent.as_ref(), &out_r, &err_r)?;

    let confinement = cmd.confinement.as_ref();
    let mut plan = ChildPlan {
        program: cmd.program.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: cmd.cwd.as_ptr(),
        stdio: [
            stdin_child.as_raw_fd(),
            out_w.as_raw_fd(),
            err_w.as_raw_fd(),
        ],
        err_fd: status_w.as_raw_fd(),
        // SAFETY: getpid has no preconditions.
        parent_pid: unsafe { libc::getpid() },
        confinement,
        fprog: confinement
            .and_then(|c| c.seccomp)
            .map(|f| libc::sock_fprog {
                // The filter length was checked against u16 when it was built.
                len: f.len() as libc::c_ushort,
                filter: f.as_ptr() as *mut libc::sock_filter,
            }),
        v2_joined: false,
        started: std::sync::atomic::AtomicBool::new(false),
        // Only a privileged child drops the set, so only then is it worth
        // the 41 reads of checking (once per thread, once it is empty).
        bounding_empty: confinement
            .is_some_and(|c| c.creds.privileged && sys::thread_bounding_empty(c.cap_last)),
        go: std::ptr::null(),
    };

    // SAFETY: the child runs only `child_main` on its own stack, which makes
    // raw syscalls on memory prepared above and never returns.
    let pid = unsafe { clone::clone_vfork(&mut plan)? };
    drop((stdin_child, out_w, err_w, status_w));

    let (report, got) = read_report(&status_r)?;
    if got == 0 {
        // Namespaces made ahead are held by the run's sandbox already.
        let namespaces = match confinement.filter(|c| c.prepared.is_none()) {
            Some(c) if c.mounts.is_some() => hold_namespaces(pid),
            _ => Vec::new(),
        };
        return Ok(Spawned {
            pid,
            stdin: stdin_parent,
            stdout: out_r,
            stderr: err_r,
            namespaces,
            pidfd: None,
        });
    }
    // The child failed before exec and has exited: reap it here, since the
    // caller never learns its pid.
    let mut status = 0;
    // SAFETY: waitpid on our own child.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
        && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
    {}
    if got < report.len() {
        return Err(SpawnError::Io(std::io::Error::other(
            "short error report from the child",
        )));
    }
    Err(child_error(report, cmd.program))
}

/// Opens the mount and IPC namespaces of the child `pid`, which has just
/// exec'd (and is not reaped, so the pid is still its). Whatever cannot be
/// opened (the child already exited) is left out: the teardown then
/// happened in its exit, as without this.
fn hold_namespaces(pid: i32) -> Vec<OwnedFd> {
    ["mnt", "ipc"]
        .iter()
        .filter_map(|kind| {
            nix::fcntl::open(
                format!("/proc/{pid}/ns/{kind}").as_str(),
                nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
            .ok()
        })
        .collect()
}

/// Reads the child's (step, errno) report until EOF; returns it and how
/// many bytes came (0: the child exec'd).
fn read_report(status: &OwnedFd) -> Result<([u8; 8], usize), SpawnError> {
    let mut buf = [0u8; 8];
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reads into the unfilled tail of `buf`.
        let n = unsafe {
            libc::read(
                status.as_raw_fd(),
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
    Ok((buf, got))
}

/// The error a complete (step, errno) report stands for.
fn child_error(report: [u8; 8], program: &CStr) -> SpawnError {
    let step = u32::from_ne_bytes([report[0], report[1], report[2], report[3]]);
    let errno = i32::from_ne_bytes([report[4], report[5], report[6], report[7]]);
    let program = program.to_string_lossy().into_owned();
    match Step::from_u32(step) {
        Some(Step::Exec) if errno == libc::ENOENT || errno == libc::ENOTDIR => {
            SpawnError::NotFound(program)
        }
        Some(Step::Exec) if errno == libc::EACCES || errno == libc::EPERM => {
            SpawnError::NotExecutable(program)
        }
        Some(s) => SpawnError::Setup {
            step: s.name(),
            source: std::io::Error::from_raw_os_error(errno),
        },
        None => SpawnError::Io(std::io::Error::other(format!("unknown child step {step}"))),
    }
}

#[cfg(test)]
mod tests {
    /// glibc takes the padding (the parameter and its size are right);
    /// elsewhere it is a no-op that says so. What the padding does is
    /// measured, not tested (BENCHMARKS.md: the `mprotect` count and the
    /// per-call A/B).
    #[test]
    fn the_allocator_takes_the_heap_padding() {
        assert_eq!(
            super::pad_heap_growth(1 << 20),
            cfg!(target_env = "gnu"),
            "mallopt(M_TOP_PAD)"
        );
        assert!(
            !super::pad_heap_growth(usize::MAX),
            "a size that does not fit is not taken"
        );
    }
}
