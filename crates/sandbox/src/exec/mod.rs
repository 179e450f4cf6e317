//! Running one prepared child to completion: stdin feeding, concurrent
//! bounded capture of stdout and stderr, the wall-clock deadline, the hard
//! output limit, cancellation, and killing every descendant afterwards.
//!
//! One thread, one `ppoll` loop over nonblocking fds: the stdin write end,
//! stdout, stderr, a pidfd that turns readable when the main child exits,
//! and the cancel token's eventfd. Neither side can block the other: the
//! child never waits on a full output pipe while we wait to write its stdin.
//!
//! The main child is never reaped before the end (its status is read with
//! `WNOWAIT`), so its pid, which is also its process group and session id,
//! cannot be reused while we signal that group.
//!
//! Killing descendants:
//! - The main child's process group (its session leader's group) gets
//!   SIGTERM at the deadline and SIGKILL at the end.
//! - With a run cgroup, `RunSandbox::kill_all` kills every member, wherever
//!   it moved in the process tree, and the result waits until the cgroup is
//!   empty.
//! - Without one, the orphan sweep: the supervisor is a child subreaper
//!   (`SupervisorOptions::subreaper`), so a descendant whose parent dies
//!   is re-parented to us instead of init. Each run's child gets
//!   `AGENT_EXEC_RUN_ID=<id>` in its environment; once the main child is
//!   dead, our adopted children are read from
//!   `/proc/self/task/<pid>/children`, and those whose
//!   `/proc/<pid>/environ` holds this run's marker are killed and reaped,
//!   round after round, until none is left (each kill re-parents the
//!   victim's own children to us). Another run's main child (registered
//!   with the supervisor, see `supervisor::spawn_main`) and unmarked
//!   children are never touched (a child newer than the run's main one
//!   without any run's marker is looked at again for a while: it may be
//!   in the middle of `execve`, when its environment reads in part).
//! - Last, on every path, every adopted zombie of a session some run made
//!   is reaped, attributed or not (`Supervisor::reap_adopted`): nobody
//!   else waits for an orphan, and each one left counts against the child
//!   user's `RLIMIT_NPROC`.
//!
//! Limits of the fallback (the cgroup has none of them):
//! - A process that left the main process group and runs without the
//!   marker (`env -i`, or its environ memory overwritten) is not recognised
//!   and survives.
//! - A process that left the session and exits only after its run ended
//!   stays a zombie of the supervisor until someone calls
//!   `Supervisor::reap_adopted` (a long-lived supervisor does on SIGCHLD)
//!   or another run ends.
//! - The tree is not frozen: a process forking as fast as we kill is only
//!   bounded by `SWEEP_ROUNDS` and `DEATH_WAIT`.
//! - The supervisor is a subreaper with a cgroup too: orphans of cgroup
//!   runs are swept the same way before the cgroup kill, and what the
//!   cgroup kill leaves dead is reaped after it, so no zombie of a run is
//!   left for init (where it would still count against the child user's
//!   RLIMIT_NPROC). Live orphans of other code in the process (not runs)
//!   are adopted as well and never killed here.
//!
//! Writing stdin relies on SIGPIPE being ignored (the Rust runtime does so
//! in every Rust binary), so a child that closes its stdin shows up as
//! `EPIPE` rather than killing the supervisor.

mod io;
mod kill;
#[cfg(test)]
mod tests;

use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::signal::Signal;

use crate::capture::{Capture, Captured};
use crate::sandbox::RunSandbox;
use crate::spawn::PIPE_SIZE;
use crate::spawn::sys::{ChildExit as Status, PollSlots, pidfd_open, waitid_pidfd};
use crate::spawn::{self, Command, GoError, SpawnError};
use crate::supervisor::{forget_main, spawn_main};
use io::{Input, Stream, errno_is};
use kill::{MainChild, kill_everything};

/// Environment variable marking every process of one run (fallback
/// attribution of re-parented orphans when the run has no cgroup).
const RUN_ID_ENV: &str = "AGENT_EXEC_RUN_ID";

/// Bytes read per `read` call.
const READ_CHUNK: usize = 128 * 1024;
/// Reads per stream per wake-up, so one flooding stream cannot starve the
/// other or delay the deadline check.
const READS_PER_WAKE: usize = 16;
/// Poll cap when the cancel token has no eventfd to wake us.
const CANCEL_POLL: Duration = Duration::from_millis(20);

static RUN_SEQ: AtomicU64 = AtomicU64::new(0);

#[derive(Debug)]
struct CancelInner {
    flag: AtomicBool,
    /// Readable once cancelled, so a run blocked in `ppoll` wakes at once.
    wake: Option<EventFd>,
}

/// Set from another thread (a disconnected client, a signal) to stop a run.
#[derive(Debug, Clone)]
pub struct CancelToken(Arc<CancelInner>);

impl Default for CancelToken {
    fn default() -> Self {
        // Without an eventfd the run loop falls back to polling the flag.
        let wake = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK).ok();
        CancelToken(Arc::new(CancelInner {
            flag: AtomicBool::new(false),
            wake,
        }))
    }
}

impl CancelToken {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops the runs watching this token (their result says `Cancelled`).
    pub fn cancel(&self) {
        if !self.0.flag.swap(true, Ordering::SeqCst)
            && let Some(fd) = &self.0.wake
        {
            // A failure (counter overflow) cannot happen with a single
            // write of 1.
            let _ = fd.write(1);
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.flag.load(Ordering::SeqCst)
    }

    fn wake_fd(&self) -> Option<BorrowedFd<'_>> {
        self.0.wake.as_ref().map(AsFd::as_fd)
    }
}

/// One command to run in a prepared run sandbox, and its limits.
#[derive(Debug)]
pub struct ExecSpec {
    /// Absolute path of the program (resolved by the caller).
    pub program: CString,
    /// argv, program name first.
    pub argv: Vec<CString>,
    /// `NAME=value` entries; the child's whole environment (plus the run
    /// marker).
    pub env: Vec<CString>,
    pub cwd: CString,
    /// The run's sandbox, from [`Sandbox::for_run`](crate::Sandbox::for_run).
    pub sandbox: Arc<RunSandbox>,
    /// Text for the child's stdin; `None`: stdin is `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    /// Wall-clock limit, after which the run gets SIGTERM.
    pub timeout: Duration,
    /// From SIGTERM to SIGKILL.
    pub kill_grace: Duration,
    /// How long output is still read after the main child exited while
    /// something else holds the pipes.
    pub drain: Duration,
    /// Characters kept per stream (head and tail halves).
    pub output_chars: usize,
    /// Total bytes after which the child is killed; 0: none.
    pub hard_limit_bytes: u64,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    Exited(i32),
    Signaled(i32),
    TimedOut,
    OutputLimit,
    Cancelled,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct ExecOutcome {
    pub termination: Termination,
    /// The main child's own status, when it ended by itself or was killed.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: Captured,
    pub stderr: Captured,
    pub duration: Duration,
    /// Set when the kernel killed processes of the run for passing the
    /// run's memory cap, whichever process it chose (the main child or
    /// not) and however the run then ended.
    pub memory_limit: Option<MemoryLimitHit>,
}

/// The run passed its memory cap: the cap, and how many of its processes
/// the kernel's OOM killer ended for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLimitHit {
    pub max_bytes: u64,
    pub oom_kills: u64,
}

/// Why a run could not be carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// The child could not be started; nothing of the program ran.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("supervising the child failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Runs the command in its sandbox; returns when it and every descendant
/// are gone.
pub fn run(spec: ExecSpec, cancel: &CancelToken) -> Result<ExecOutcome, ExecError> {
    let ExecSpec {
        program,
        argv,
        env,
        cwd,
        sandbox,
        stdin,
        timeout,
        kill_grace,
        drain,
        output_chars,
        hard_limit_bytes,
    } = spec;
    run_job(
        Job {
            program,
            argv,
            env,
            cwd,
            sandbox: Some(sandbox),
            stdin,
            timeout,
            kill_grace,
            drain,
            output_chars,
            hard_limit_bytes,
        },
        cancel,
    )
}

/// An [`ExecSpec`] whose sandbox may be left out, which only the crate's
/// own tests of the exec machinery do.
#[derive(Debug)]
struct Job {
    program: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
    cwd: CString,
    sandbox: Option<Arc<RunSandbox>>,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
    kill_grace: Duration,
    drain: Duration,
    output_chars: usize,
    hard_limit_bytes: u64,
}

fn run_job(mut job: Job, cancel: &CancelToken) -> Result<ExecOutcome, ExecError> {
    let start = Instant::now();
    let marker = mark_run(&mut job.env)?;
    let command = command_of(&job);
    let spawned = match job.sandbox.as_deref().and_then(RunSandbox::take_child) {
        // Its child made ahead (confined already, and registered) takes
        // the command; one that was gone before the command came ran
        // nothing, and the run spawns its own.
        Some(child) => {
            let pid = child.pid();
            match child.go(&command) {
                Ok(spawned) => spawned,
                Err(e) => {
                    // Reaped: the pid is no longer a run's.
                    forget_main(pid);
                    match e {
                        GoError::Spawn(e) => return Err(e.into()),
                        GoError::Gone => spawn_now(&job)?,
                    }
                }
            }
        }
        None => spawn_now(&job)?,
    };
    if let Some(sb) = job.sandbox.as_deref() {
        sb.child_started();
    }
    let mut main = MainChild {
        pid: spawned.pid,
        pidfd: None,
        reaped: false,
        sandbox: job.sandbox.clone(),
        marker,
        namespaces: spawned.namespaces,
    };
    if let Some(sb) = job.sandbox.as_deref() {
        main.namespaces.extend(sb.take_prepared());
    }
    // Our child, not yet reaped: the pid still names it.
    main.pidfd = Some(match spawned.pidfd {
        Some(fd) => fd,
        None => pidfd_open(main.pid).map_err(ExecError::Io)?,
    });

    let out = Stream {
        fd: Some(spawned.stdout),
        cap: Capture::new(job.output_chars),
    };
    let err = Stream {
        fd: Some(spawned.stderr),
        cap: Capture::new(job.output_chars),
    };
    // The pipes came nonblocking from the spawn.
    let mut input = Input {
        fd: spawned.stdin,
        data: job.stdin.take().unwrap_or_default(),
        off: 0,
    };
    input.write_some()?;

    let mut flight = Flight {
        input,
        out,
        err,
        main,
        cancel,
        deadline: start.checked_add(job.timeout),
        kill_grace: job.kill_grace,
        drain: job.drain,
        limit: job.hard_limit_bytes,
        buf: vec![0u8; READ_CHUNK],
        total: 0,
        reason: None,
        kill_at: None,
        drain_until: None,
        exited: false,
    };
    flight.supervise()?;
    let outcome = flight.finish(start);
    // Every process of the run is gone; what is left (the cgroup's return
    // to the pool, the run directory's check or removal) a long-lived
    // service does beside the result rather than before it. Only when
    // nobody else holds the run: whoever does drops it when they are done.
    if let Some(sb) = job.sandbox.take().filter(|sb| sb.settles_later())
        && let Ok(sb) = Arc::try_unwrap(sb)
    {
        crate::spawn::sys::drop_later(Box::new(sb));
    }
    outcome
}

/// The job's command, without its confinement (a child made ahead has it
/// already).
fn command_of(job: &Job) -> Command<'_> {
    Command {
        program: &job.program,
        argv: &job.argv,
        env: &job.env,
        cwd: &job.cwd,
        stdin_pipe: job.stdin.is_some(),
        confinement: None,
    }
}

/// Starts the job's child now, confined by its sandbox.
fn spawn_now(job: &Job) -> Result<spawn::Spawned, SpawnError> {
    let command = Command {
        confinement: job.sandbox.as_deref().map(RunSandbox::confinement),
        ..command_of(job)
    };
    // Registered before any reaper of adopted children can see it, so none
    // takes its exit status from us.
    spawn_main(|| spawn::spawn(&command), |s| s.pid)
}

/// Replaces any run marker in `env` with this run's, first (the sweep reads
/// a bounded prefix of a possibly huge environ); returns the entry.
fn mark_run(env: &mut Vec<CString>) -> Result<String, ExecError> {
    let marker = format!(
        "{RUN_ID_ENV}={}.{}",
        std::process::id(),
        RUN_SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let prefix = RUN_ID_ENV.as_bytes();
    env.retain(|e| {
        let b = e.as_bytes();
        !(b.len() > prefix.len() && b.starts_with(prefix) && b[prefix.len()] == b'=')
    });
    let marker_c =
        CString::new(marker.as_str()).map_err(|e| ExecError::Io(std::io::Error::other(e)))?;
    env.insert(0, marker_c);
    Ok(marker)
}

/// A run in flight: the child, its pipes, and where the loop stands.
/// Dropped on an error, it closes the pipes, then kills and reaps what is
/// left of the run (`MainChild`'s Drop): the fields drop in this order.
struct Flight<'c> {
    input: Input,
    out: Stream,
    err: Stream,
    main: MainChild,
    cancel: &'c CancelToken,
    deadline: Option<Instant>,
    kill_grace: Duration,
    drain: Duration,
    /// Total output bytes after which the run is killed; 0: none.
    limit: u64,
    buf: Vec<u8>,
    /// Output bytes read so far, both streams.
    total: u64,
    /// Why the run is being stopped, once it is.
    reason: Option<Termination>,
    kill_at: Option<Instant>,
    drain_until: Option<Instant>,
    /// The main child has exited (not reaped).
    exited: bool,
}

/// Poll slots of the loop.
const SLOT_STDIN: usize = 0;
const SLOT_STDOUT: usize = 1;
const SLOT_STDERR: usize = 2;
const SLOT_PIDFD: usize = 3;
const SLOT_CANCEL: usize = 4;

impl Flight<'_> {
    /// The loop: returns when the run is over (everything read and the
    /// child gone, a limit reached, or the grace or drain ended).
    fn supervise(&mut self) -> Result<(), ExecError> {
        loop {
            if self.exited && self.out.fd.is_none() && self.err.fd.is_none() {
                return Ok(());
            }
            let now = Instant::now();
            if self.stop_if_due(now) {
                return Ok(());
            }
            let wake_at = self.wake_at();
            if wake_at.is_some_and(|w| now >= w) {
                return Ok(());
            }
            let Some(ready) = self.wait(wake_at.map(|w| w - now))? else {
                continue;
            };
            if ready[SLOT_STDIN] != 0 {
                self.input.write_some()?;
            }
            if self.read_output(&ready)? {
                self.reason = Some(Termination::OutputLimit);
                return Ok(());
            }
            if ready[SLOT_PIDFD] != 0 && self.main_exited()? {
                return Ok(());
            }
        }
    }

    /// At cancellation or the deadline: SIGTERM to the whole run and the
    /// grace starts. Returns true when the run is over instead (the child
    /// ended by itself; only its leftovers remain).
    fn stop_if_due(&mut self, now: Instant) -> bool {
        if self.reason.is_some() {
            return false;
        }
        let stop = if self.cancel.is_cancelled() {
            Termination::Cancelled
        } else if self.deadline.is_some_and(|d| now >= d) {
            Termination::TimedOut
        } else {
            return false;
        };
        if self.exited {
            return true;
        }
        self.reason = Some(stop);
        self.main.kill_group(Signal::SIGTERM);
        if let Some(sb) = &self.main.sandbox {
            sb.signal_all(Signal::SIGTERM);
        }
        self.kill_at = Some(now + self.kill_grace);
        false
    }

    /// When the loop must wake up whatever happens: the end of the grace,
    /// of the drain, or the deadline.
    fn wake_at(&self) -> Option<Instant> {
        match (self.kill_at, self.drain_until) {
            (Some(k), Some(d)) => Some(k.min(d)),
            (Some(k), None) => Some(k),
            (None, Some(d)) => self.deadline.map_or(Some(d), |dl| Some(d.min(dl))),
            (None, None) => self.deadline,
        }
    }

    /// One `ppoll` over the run's fds. `None`: nothing to handle (a
    /// timeout or a signal); the caller recomputes its deadlines.
    fn wait(&self, timeout: Option<Duration>) -> Result<Option<[i16; 5]>, ExecError> {
        let watch_cancel = self.reason.is_none() && !self.cancel.is_cancelled();
        let mut timeout = timeout;
        if watch_cancel && self.cancel.wake_fd().is_none() {
            timeout = Some(timeout.map_or(CANCEL_POLL, |t| t.min(CANCEL_POLL)));
        }
        // The slots borrow the fds only for the wait: what they reported is
        // copied out before any handler may close one.
        let mut slots = PollSlots::<5>::new();
        if let Some(fd) = &self.input.fd {
            slots.set(SLOT_STDIN, fd.as_fd(), libc::POLLOUT);
        }
        for (slot, s) in [(SLOT_STDOUT, &self.out), (SLOT_STDERR, &self.err)] {
            if let Some(fd) = &s.fd {
                slots.set(slot, fd.as_fd(), libc::POLLIN);
            }
        }
        if !self.exited
            && let Some(fd) = &self.main.pidfd
        {
            slots.set(SLOT_PIDFD, fd.as_fd(), libc::POLLIN);
        }
        if watch_cancel && let Some(fd) = self.cancel.wake_fd() {
            slots.set(SLOT_CANCEL, fd, libc::POLLIN);
        }
        match slots.ppoll(timeout) {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some(std::array::from_fn(|i| slots.revents(i)))),
            Err(e) if errno_is(&e, libc::EINTR) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Reads the ready streams; true once the output is over the limit.
    /// Checked after every read, so the kill follows the read that crossed
    /// the limit, not a whole batch later.
    fn read_output(&mut self, ready: &[i16; 5]) -> Result<bool, ExecError> {
        let limit = self.limit;
        for (slot, s) in [(SLOT_STDOUT, &mut self.out), (SLOT_STDERR, &mut self.err)] {
            if ready[slot] == 0 {
                continue;
            }
            let budget = if limit > 0 {
                limit.saturating_sub(self.total) + 1
            } else {
                u64::MAX
            };
            self.total += s.read_some(&mut self.buf, READS_PER_WAKE, budget)?;
            if limit > 0 && self.total > limit {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The pidfd turned readable. Returns true when the run is over.
    fn main_exited(&mut self) -> Result<bool, ExecError> {
        let Some(fd) = &self.main.pidfd else {
            return Ok(false);
        };
        if waitid_pidfd(fd.as_fd(), false, false)?.is_none() {
            return Ok(false);
        }
        self.exited = true;
        if self.reason.is_some() && self.main.sandbox.as_ref().is_some_and(|sb| sb.has_cgroup()) {
            // Stopped and gone: the grace was for it to clean up. What it
            // left behind was told too, and the cgroup kill that follows
            // waits until every one of them is dead. (Without a cgroup only
            // the grace and the pipes' end say they are.)
            return Ok(true);
        }
        // A grandchild holding the pipes must not hold the result: read on
        // only until the drain ends (or the grace, or the deadline,
        // whichever comes first).
        self.drain_until = Some(Instant::now() + self.drain);
        Ok(false)
    }

    /// Kills whatever is left of the run, all at once, reads what is still
    /// buffered, reaps the main child and tells how it ended.
    fn finish(self, start: Instant) -> Result<ExecOutcome, ExecError> {
        let Flight {
            mut main,
            mut out,
            mut err,
            input,
            mut buf,
            reason,
            ..
        } = self;
        drop(input);
        kill_everything(&main);
        // Every process of the run is gone: no later kill is its.
        let memory_limit = main.sandbox.as_ref().and_then(|sb| {
            let oom_kills = sb.take_oom_kills();
            (oom_kills > 0).then(|| MemoryLimitHit {
                max_bytes: sb.memory_max().unwrap_or(0),
                oom_kills,
            })
        });
        // Every writer is dead: take what is still in the pipes. The read
        // count is bounded in case a writer escaped the kill. Past the hard
        // limit, the counts stop where the kill happened.
        if reason != Some(Termination::OutputLimit) {
            for s in [&mut out, &mut err] {
                s.read_some(
                    &mut buf,
                    (PIPE_SIZE as usize).div_ceil(READ_CHUNK) + 1,
                    u64::MAX,
                )?;
            }
        }
        let status = main.reap()?;
        // The run is over: its namespaces are torn down beside the result,
        // not before it.
        crate::spawn::sys::release_later(std::mem::take(&mut main.namespaces));
        let (exit_code, signal) = match status {
            Some(Status::Code(c)) => (Some(c), None),
            Some(Status::Signal(s)) => (None, Some(s)),
            None => (None, None),
        };
        let termination = reason.unwrap_or(match status {
            Some(Status::Signal(s)) => Termination::Signaled(s),
            Some(Status::Code(c)) => Termination::Exited(c),
            None => Termination::Exited(-1),
        });
        Ok(ExecOutcome {
            termination,
            exit_code,
            signal,
            stdout: out.cap.finish(),
            stderr: err.cap.finish(),
            duration: start.elapsed(),
            memory_limit,
        })
    }
}
