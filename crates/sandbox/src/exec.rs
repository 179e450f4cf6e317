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
//! - Without one, the supervisor becomes a child subreaper (once, for the
//!   whole process), so a descendant whose parent dies is re-parented to us
//!   instead of init. Each run's child gets `AGENT_EXEC_RUN_ID=<id>` in its
//!   environment; once the main child is dead, our adopted children are read
//!   from `/proc/self/task/<pid>/children`, and those whose
//!   `/proc/<pid>/environ` holds this run's marker are killed and reaped,
//!   round after round, until none is left (each kill re-parents the
//!   victim's own children to us). Another run's main child (registered in
//!   `LIVE_MAIN`) and unmarked children are never touched.
//!
//! Limits of the fallback (the cgroup has none of them):
//! - A process that left the main process group and runs without the
//!   marker (`env -i`, or its environ memory overwritten) is not recognised
//!   and survives.
//! - A process that left the session and then exited by itself before the
//!   sweep stays a zombie of the supervisor: its environ is gone, so it
//!   cannot be attributed. (Zombies still in the main child's session or
//!   group are reaped.)
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

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::prctl::set_child_subreaper;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{Pid, read, write};

use crate::capture::Capture;
use crate::plan::RunSandbox;
use crate::spawn::ChildSpec;
// How the main child ended: exit code or signal.
use crate::spawn::sys::ChildExit as Status;
use crate::spawn::sys::{PollSlots, pidfd_open, waitid_pidfd};

/// Environment variable marking every process of one run (fallback
/// attribution of re-parented orphans when the run has no cgroup).
pub const RUN_ID_ENV: &str = "AGENT_EXEC_RUN_ID";

/// Bytes read per `read` call.
const READ_CHUNK: usize = 128 * 1024;
/// Reads per stream per wake-up, so one flooding stream cannot starve the
/// other or delay the deadline check.
const READS_PER_WAKE: usize = 16;
/// Pipe capacity requested for stdout/stderr: fewer wake-ups per megabyte.
const PIPE_SIZE: libc::c_int = 256 * 1024;
/// Poll cap when the cancel token has no eventfd to wake us.
const CANCEL_POLL: Duration = Duration::from_millis(20);
/// How long a SIGKILLed process may take to die before we give up on it.
const DEATH_WAIT: Duration = Duration::from_secs(5);
/// Upper bound on rounds of the orphan sweep (tree depth, fork races).
const SWEEP_ROUNDS: usize = 1000;
/// Extra sweep rounds (1 ms apart) while an adopted child's environment
/// is unreadable, which is how a process in the middle of `execve` looks.
const UNSURE_RETRIES: u32 = 20;

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

#[derive(Debug)]
pub struct ExecSpec {
    pub child: ChildSpec,
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    pub kill_grace: Duration,
    pub drain: Duration,
    /// Characters kept per stream (head and tail halves).
    pub output_chars: usize,
    /// Total bytes after which the child is killed; 0: none.
    pub hard_limit_bytes: u64,
}

/// One stream as the model will see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// Head and tail joined by a marker when truncated; valid UTF-8.
    pub text: String,
    /// Every byte the child wrote, kept or not.
    pub bytes: u64,
    pub truncated: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    Exited(i32),
    Signaled(i32),
    TimedOut,
    OutputLimit,
    Cancelled,
}

#[derive(Debug, Clone)]
pub struct ExecOutcome {
    pub termination: Termination,
    /// The main child's own status, when it ended by itself or was killed.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: Captured,
    pub stderr: Captured,
    pub duration: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error(transparent)]
    Spawn(#[from] crate::spawn::SpawnError),
    #[error("supervising the child failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Main children of every run in flight in this process: never killed or
/// reaped by another run's sweep.
static LIVE_MAIN: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// Whether this process is a child subreaper (set once, never undone).
static SUBREAPER: OnceLock<bool> = OnceLock::new();
static RUN_SEQ: AtomicU64 = AtomicU64::new(0);

fn live_main() -> std::sync::MutexGuard<'static, Vec<i32>> {
    // A panic while holding the lock leaves a valid Vec behind.
    LIVE_MAIN.lock().unwrap_or_else(|e| e.into_inner())
}

fn ensure_subreaper() -> bool {
    *SUBREAPER.get_or_init(|| set_child_subreaper(true).is_ok())
}

fn subreaper_active() -> bool {
    SUBREAPER.get().copied().unwrap_or(false)
}

fn errno_is(e: &std::io::Error, code: i32) -> bool {
    e.raw_os_error() == Some(code)
}

fn set_nonblocking(fd: BorrowedFd<'_>) -> std::io::Result<()> {
    let flags = fcntl(fd, FcntlArg::F_GETFL)?;
    fcntl(
        fd,
        FcntlArg::F_SETFL(OFlag::from_bits_retain(flags) | OFlag::O_NONBLOCK),
    )?;
    Ok(())
}

/// Reads the main child's status through its pidfd; with `reap` false the
/// child stays a zombie (its pid stays reserved).
fn wait_pidfd(pidfd: BorrowedFd<'_>, reap: bool, block: bool) -> std::io::Result<Option<Status>> {
    waitid_pidfd(pidfd, reap, block)
}

/// Waits until `fd` is readable or `timeout` passes.
fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) -> bool {
    let end = Instant::now() + timeout;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let mut slots = PollSlots::<1>::new();
        slots.set(0, fd, libc::POLLIN);
        match slots.ppoll(Some(left)) {
            Ok(n) if n > 0 => return true,
            Err(e) if errno_is(&e, libc::EINTR) => continue,
            _ => return false,
        }
    }
}

/// The main child: killed and reaped on every path out of `run`,
/// including errors and panics.
struct MainChild {
    pid: i32,
    pidfd: Option<OwnedFd>,
    reaped: bool,
    sandbox: Option<Arc<RunSandbox>>,
    /// This run's `AGENT_EXEC_RUN_ID=<id>` environment entry.
    marker: String,
}

impl MainChild {
    fn kill_group(&self, sig: Signal) {
        if !self.reaped {
            // The child is not reaped, so its pid (= its process group id)
            // is not reused. A group already gone (ESRCH) is fine.
            let _ = killpg(Pid::from_raw(self.pid), sig);
        }
    }

    /// Reaps the (dead or dying) child and returns its status.
    fn reap(&mut self) -> std::io::Result<Option<Status>> {
        if self.reaped {
            return Ok(None);
        }
        let status = match &self.pidfd {
            Some(fd) => wait_pidfd(fd.as_fd(), true, true)?,
            None => loop {
                match waitpid(Pid::from_raw(self.pid), None) {
                    Ok(WaitStatus::Exited(_, code)) => break Some(Status::Code(code)),
                    Ok(WaitStatus::Signaled(_, sig, _)) => {
                        break Some(Status::Signal(sig as i32));
                    }
                    // Without WUNTRACED/WCONTINUED only a termination is
                    // reported; anything else means no status to give.
                    Ok(_) => break None,
                    Err(Errno::EINTR) => continue,
                    Err(e) => return Err(e.into()),
                }
            },
        };
        self.reaped = true;
        live_main().retain(|p| *p != self.pid);
        Ok(status)
    }
}

impl Drop for MainChild {
    fn drop(&mut self) {
        if !self.reaped {
            kill_everything(self);
            let _ = self.reap();
        }
    }
}

/// One output pipe and what was captured from it.
struct Stream {
    fd: Option<OwnedFd>,
    cap: Capture,
}

impl Stream {
    /// Reads what is available (at most `max_reads` chunks, stopping once
    /// `stop_after` bytes are in). Returns the bytes read; closes the fd at
    /// EOF.
    fn read_some(
        &mut self,
        buf: &mut [u8],
        max_reads: usize,
        stop_after: u64,
    ) -> std::io::Result<u64> {
        let Some(fd) = &self.fd else { return Ok(0) };
        let mut got = 0u64;
        let mut reads = 0;
        while reads < max_reads {
            let n = match read(fd, buf) {
                Ok(n) => n,
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => break,
                Err(e) => return Err(e.into()),
            };
            if n == 0 {
                self.fd = None;
                break;
            }
            self.cap.push(&buf[..n]);
            got += n as u64;
            reads += 1;
            if got >= stop_after {
                break;
            }
            // A short read almost always means the pipe is empty: skip the
            // extra syscall that would only return EAGAIN.
            if n < buf.len() {
                break;
            }
        }
        Ok(got)
    }
}

/// The stdin text still to be written.
struct Input {
    fd: Option<OwnedFd>,
    data: Vec<u8>,
    off: usize,
}

impl Input {
    fn write_some(&mut self) -> std::io::Result<()> {
        let Some(fd) = &self.fd else { return Ok(()) };
        while self.off < self.data.len() {
            let rest = &self.data[self.off..];
            // SIGPIPE is ignored by the Rust runtime, so a closed reader
            // shows up as EPIPE.
            let n = match write(fd, rest) {
                Ok(n) => n,
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => return Ok(()),
                // The child closed its stdin (EPIPE) or it broke otherwise:
                // what it did not read is not ours to insist on.
                Err(_) => break,
            };
            self.off += n;
        }
        // All written (or the reader is gone): EOF tells the child.
        self.fd = None;
        Ok(())
    }
}

/// Runs the child; returns when it and every descendant are gone.
pub fn run(mut spec: ExecSpec, cancel: &CancelToken) -> Result<ExecOutcome, ExecError> {
    let start = Instant::now();
    let marker = format!(
        "{RUN_ID_ENV}={}.{}",
        std::process::id(),
        RUN_SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let prefix = RUN_ID_ENV.as_bytes();
    spec.child.env.retain(|e| {
        let b = e.as_bytes();
        !(b.len() > prefix.len() && b.starts_with(prefix) && b[prefix.len()] == b'=')
    });
    let marker_c =
        CString::new(marker.as_str()).map_err(|e| ExecError::Io(std::io::Error::other(e)))?;
    // First: the sweep reads a bounded prefix of a possibly huge environ.
    spec.child.env.insert(0, marker_c);
    spec.child.stdin_pipe = spec.stdin.is_some();

    let sandbox: Option<Arc<RunSandbox>> = spec.child.sandbox.clone();
    // Also with a cgroup: what the cgroup kills after its parent died must
    // be reaped by us, not left as a zombie for init, where it would still
    // count against the child user's RLIMIT_NPROC in the next run.
    ensure_subreaper();

    let spawned = crate::spawn::spawn(&spec.child)?;
    live_main().push(spawned.pid);
    let mut main = MainChild {
        pid: spawned.pid,
        pidfd: None,
        reaped: false,
        sandbox,
        marker,
    };
    // Our child, not yet reaped: the pid still names it.
    main.pidfd = Some(pidfd_open(main.pid).map_err(ExecError::Io)?);

    let mut out = Stream {
        fd: Some(spawned.stdout),
        cap: Capture::new(spec.output_chars),
    };
    let mut err = Stream {
        fd: Some(spawned.stderr),
        cap: Capture::new(spec.output_chars),
    };
    for s in [&out, &err] {
        if let Some(fd) = &s.fd {
            set_nonblocking(fd.as_fd())?;
            // Failure only costs throughput.
            let _ = fcntl(fd, FcntlArg::F_SETPIPE_SZ(PIPE_SIZE));
        }
    }
    let mut input = Input {
        fd: spawned.stdin,
        data: spec.stdin.take().unwrap_or_default(),
        off: 0,
    };
    if let Some(fd) = &input.fd {
        set_nonblocking(fd.as_fd())?;
    }
    input.write_some()?;

    let deadline = start.checked_add(spec.timeout);
    let mut buf = vec![0u8; READ_CHUNK];
    let mut total: u64 = 0;
    let limit = spec.hard_limit_bytes;
    let mut reason: Option<Termination> = None;
    let mut kill_at: Option<Instant> = None;
    let mut drain_until: Option<Instant> = None;
    let mut exited = false;

    loop {
        if exited && out.fd.is_none() && err.fd.is_none() {
            break;
        }
        let now = Instant::now();
        if reason.is_none() {
            let stop = if cancel.is_cancelled() {
                Some(Termination::Cancelled)
            } else if deadline.is_some_and(|d| now >= d) {
                Some(Termination::TimedOut)
            } else {
                None
            };
            if let Some(r) = stop {
                if exited {
                    // The child ended by itself; only its leftovers remain.
                    break;
                }
                reason = Some(r);
                main.kill_group(Signal::SIGTERM);
                if let Some(sb) = &main.sandbox {
                    sb.signal_all(Signal::SIGTERM);
                }
                kill_at = Some(now + spec.kill_grace);
            }
        }
        let wake_at = match (kill_at, drain_until) {
            (Some(k), Some(d)) => Some(k.min(d)),
            (Some(k), None) => Some(k),
            (None, Some(d)) => deadline.map_or(Some(d), |dl| Some(d.min(dl))),
            (None, None) => deadline,
        };
        if wake_at.is_some_and(|w| now >= w) {
            break;
        }
        let watch_cancel = reason.is_none() && !cancel.is_cancelled();
        let mut timeout = wake_at.map(|w| w - now);
        if watch_cancel && cancel.wake_fd().is_none() {
            timeout = Some(timeout.map_or(CANCEL_POLL, |t| t.min(CANCEL_POLL)));
        }

        // Slots: 0 stdin, 1 stdout, 2 stderr, 3 pidfd, 4 cancel. The
        // slots borrow the fds only for the wait: what they reported is
        // copied out before any handler below may close one.
        let (r, ready) = {
            let mut slots = PollSlots::<5>::new();
            if let Some(fd) = &input.fd {
                slots.set(0, fd.as_fd(), libc::POLLOUT);
            }
            for (slot, s) in [(1, &out), (2, &err)] {
                if let Some(fd) = &s.fd {
                    slots.set(slot, fd.as_fd(), libc::POLLIN);
                }
            }
            if !exited && let Some(fd) = &main.pidfd {
                slots.set(3, fd.as_fd(), libc::POLLIN);
            }
            if watch_cancel && let Some(fd) = cancel.wake_fd() {
                slots.set(4, fd, libc::POLLIN);
            }
            let r = slots.ppoll(timeout);
            (r, std::array::from_fn::<i16, 5, _>(|i| slots.revents(i)))
        };
        let r = match r {
            Ok(r) => r,
            Err(e) if errno_is(&e, libc::EINTR) => continue,
            Err(e) => return Err(e.into()),
        };
        if r == 0 {
            continue;
        }
        if ready[0] != 0 {
            input.write_some()?;
        }
        let mut over = false;
        for (slot, s) in [(1, &mut out), (2, &mut err)] {
            if ready[slot] != 0 {
                // Checked after every read, so the kill follows the read
                // that crossed the limit, not a whole batch later.
                let budget = if limit > 0 {
                    limit.saturating_sub(total) + 1
                } else {
                    u64::MAX
                };
                total += s.read_some(&mut buf, READS_PER_WAKE, budget)?;
                if limit > 0 && total > limit {
                    over = true;
                    break;
                }
            }
        }
        if over {
            reason = Some(Termination::OutputLimit);
            break;
        }
        if ready[3] != 0
            && let Some(fd) = &main.pidfd
            && wait_pidfd(fd.as_fd(), false, false)?.is_some()
        {
            exited = true;
            if reason.is_some() && main.sandbox.as_ref().is_some_and(|sb| sb.has_cgroup()) {
                // Stopped and gone: the grace was for it to clean up. What
                // it left behind was told too, and the cgroup kill that
                // follows waits until every one of them is dead. (Without a
                // cgroup only the grace and the pipes' end say they are.)
                break;
            }
            // A grandchild holding the pipes must not hold the result:
            // read on only until the drain ends (or the grace, or the
            // deadline, whichever comes first).
            drain_until = Some(Instant::now() + spec.drain);
        }
    }

    // Whatever is left of the run dies now, all at once.
    drop(input);
    kill_everything(&main);
    // Every writer is dead: take what is still buffered in the pipes. The
    // read count is bounded in case a writer escaped the kill. Past the
    // hard limit, the counts stop where the kill happened.
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
    })
}

/// SIGKILLs the main child's process group, the run's cgroup (if any) and
/// the orphans this run left with us, and waits until they are dead. The
/// main child is left unreaped (the caller reaps it).
fn kill_everything(main: &MainChild) {
    main.kill_group(Signal::SIGKILL);
    if let Some(fd) = &main.pidfd {
        // Its children are re-parented when it exits: wait for that
        // before looking for them.
        wait_readable(fd.as_fd(), DEATH_WAIT);
    }
    // Before the cgroup kill: the sweep recognises the run's orphans by
    // their environment, which a dead process no longer shows.
    if subreaper_active() {
        sweep_orphans(main.pid, main.marker.as_bytes());
    }
    if let Some(sb) = &main.sandbox {
        let end = Instant::now() + DEATH_WAIT;
        let mut round = 0u32;
        // Emptiness first: on the common path nothing is left and the kill
        // (a freeze, sweep and thaw on cgroup v1) is skipped.
        while sb.is_empty() == Some(false) && Instant::now() < end {
            // Killed processes leave the cgroup as they finish dying; one
            // that forked during the kill needs another.
            if round % 20 == 0 {
                let _ = sb.kill_all();
            }
            round += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        if round > 0 {
            reap_adopted_zombies(main.pid);
        }
    }
}

/// Reaps the dead orphans the cgroup kill left with us. Their environment
/// is gone, so they cannot be attributed to a run; reaping any adopted
/// zombie is safe all the same, because nobody else waits for an orphan.
/// Main children of runs in flight are skipped: their runs reap them.
fn reap_adopted_zombies(main_pid: i32) {
    let mut kids = Vec::new();
    let mut text = String::new();
    adopted(&mut kids, &mut text);
    let live = live_main().clone();
    for pid in kids {
        if pid == main_pid || live.contains(&pid) {
            continue;
        }
        if stat_fields(pid).is_some_and(|st| st.zombie) {
            reap_pid(pid);
        }
    }
}

/// Children adopted by this process. The kernel hands an orphan to the
/// first live thread of the subreaper, the thread-group leader (alive as
/// long as a Rust process is), so only the leader's list is read, not one
/// per thread. Without `CONFIG_PROC_CHILDREN`, `/proc` is scanned for
/// processes whose parent is us (slower, same result).
fn adopted(list: &mut Vec<i32>, text: &mut String) {
    list.clear();
    text.clear();
    let me = std::process::id();
    if let Ok(mut f) = std::fs::File::open(format!("/proc/self/task/{me}/children")) {
        if f.read_to_string(text).is_ok() {
            list.extend(
                text.split_ascii_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
        return;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if stat_fields(pid).is_some_and(|f| f.ppid == me as i32) {
            list.push(pid);
        }
    }
}

/// Who a process's environment says it belongs to.
enum Owner {
    ThisRun,
    Other,
    /// Empty or unreadable: a zombie, a process in the middle of `execve`
    /// (reading through the old, released mm yields nothing), or one
    /// that runs with an empty environment.
    Unknown,
}

fn owner(pid: i32, marker: &[u8], buf: &mut Vec<u8>) -> Owner {
    buf.clear();
    let Ok(f) = std::fs::File::open(format!("/proc/{pid}/environ")) else {
        return Owner::Unknown;
    };
    // Bounded: a hostile process can make its environment huge.
    if f.take(1 << 20).read_to_end(buf).is_err() || buf.is_empty() {
        return Owner::Unknown;
    }
    if buf.split(|b| *b == 0).any(|e| e == marker) {
        Owner::ThisRun
    } else {
        Owner::Other
    }
}

struct StatFields {
    zombie: bool,
    ppid: i32,
    pgrp: i32,
    sid: i32,
}

/// State, parent, process group and session of `pid`.
fn stat_fields(pid: i32) -> Option<StatFields> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain anything, including ") ": the fields
    // after it start at the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    let mut f = rest.split_ascii_whitespace();
    let zombie = f.next()? == "Z";
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    let sid = f.next()?.parse().ok()?;
    Some(StatFields {
        zombie,
        ppid,
        pgrp,
        sid,
    })
}

fn reap_pid(pid: i32) {
    // A child of ours; blocking is short since it was SIGKILLed (or is
    // already a zombie).
    while waitpid(Pid::from_raw(pid), None) == Err(Errno::EINTR) {}
}

/// Kills and reaps the run's processes that were re-parented to us.
fn sweep_orphans(main_pid: i32, marker: &[u8]) {
    let mut kids = Vec::new();
    let mut text = String::new();
    let mut env = Vec::new();
    let mut killed = Vec::new();
    let mut unsure_rounds = 0;
    let end = Instant::now() + DEATH_WAIT;
    for _ in 0..SWEEP_ROUNDS {
        adopted(&mut kids, &mut text);
        let live = live_main().clone();
        killed.clear();
        let mut unsure = false;
        for &pid in &kids {
            if pid == main_pid || live.contains(&pid) {
                continue;
            }
            match owner(pid, marker, &mut env) {
                Owner::ThisRun => {
                    // Our own unreaped child: its pid is not reused
                    // before we reap it.
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                    killed.push(pid);
                }
                Owner::Other => {}
                Owner::Unknown => match stat_fields(pid) {
                    // Died by itself: attributable only while its session
                    // or group is still our main child's.
                    Some(st) if st.zombie && (st.pgrp == main_pid || st.sid == main_pid) => {
                        reap_pid(pid);
                    }
                    Some(st) if st.zombie => {}
                    Some(_) => unsure = true,
                    None => {}
                },
            }
        }
        if Instant::now() >= end {
            break;
        }
        if killed.is_empty() {
            // A process caught mid-exec shows an empty environment for a
            // moment: look again before calling the sweep done.
            if unsure && unsure_rounds < UNSURE_RETRIES {
                unsure_rounds += 1;
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            break;
        }
        for &pid in &killed {
            reap_pid(pid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::unistd::{getpgrp, getppid, getsid};

    #[test]
    fn cancel_wakes_the_eventfd() {
        let token = CancelToken::new();
        let fd = token.wake_fd().unwrap();
        assert!(!wait_readable(fd, Duration::ZERO));
        let other = token.clone();
        std::thread::spawn(move || other.cancel()).join().unwrap();
        assert!(token.is_cancelled());
        assert!(wait_readable(fd, Duration::ZERO));
    }

    #[test]
    fn stat_fields_reads_our_own_process() {
        let st = stat_fields(std::process::id() as i32).unwrap();
        let (ppid, pgrp, sid) = (
            getppid().as_raw(),
            getpgrp().as_raw(),
            getsid(None).unwrap().as_raw(),
        );
        assert!(!st.zombie);
        assert_eq!((st.ppid, st.pgrp, st.sid), (ppid, pgrp, sid));
    }

    #[test]
    fn owner_tells_runs_apart() {
        let me = std::process::id() as i32;
        let mut buf = Vec::new();
        // Our own environment has no run marker: never attributed.
        assert!(matches!(
            owner(me, b"AGENT_EXEC_RUN_ID=none", &mut buf),
            Owner::Other
        ));
        assert!(matches!(owner(-1, b"x", &mut buf), Owner::Unknown));
    }
}
