//! Ending a run: the main child (never reaped before the end, so its pid
//! and process group id stay its own), the run's cgroup, and the orphans
//! the run left with the supervisor (see the module docs of `exec`).

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use super::io::wait_readable;
use crate::sandbox::RunSandbox;
use crate::spawn::sys::ChildExit as Status;
use crate::spawn::sys::waitid_pidfd;
use crate::supervisor::subreaper_active;

/// How long a SIGKILLed process may take to die before we give up on it.
const DEATH_WAIT: Duration = Duration::from_secs(5);
/// Upper bound on rounds of the orphan sweep (tree depth, fork races).
const SWEEP_ROUNDS: usize = 1000;
/// Extra sweep rounds (1 ms apart) while an adopted child's environment
/// is unreadable, which is how a process in the middle of `execve` looks.
const UNSURE_RETRIES: u32 = 20;

/// Main children of every run in flight in this process: never killed or
/// reaped by another run's sweep.
static LIVE_MAIN: Mutex<Vec<i32>> = Mutex::new(Vec::new());

pub(super) fn live_main() -> std::sync::MutexGuard<'static, Vec<i32>> {
    // A panic while holding the lock leaves a valid Vec behind.
    LIVE_MAIN.lock().unwrap_or_else(|e| e.into_inner())
}

/// The main child: killed and reaped on every path out of `run`,
/// including errors and panics.
pub(super) struct MainChild {
    pub pid: i32,
    pub pidfd: Option<OwnedFd>,
    pub reaped: bool,
    pub sandbox: Option<Arc<RunSandbox>>,
    /// This run's `AGENT_EXEC_RUN_ID=<id>` environment entry.
    pub marker: String,
}

impl MainChild {
    pub(super) fn kill_group(&self, sig: Signal) {
        if !self.reaped {
            // The child is not reaped, so its pid (= its process group id)
            // is not reused. A group already gone (ESRCH) is fine.
            let _ = killpg(Pid::from_raw(self.pid), sig);
        }
    }

    /// Reaps the (dead or dying) child and returns its status.
    pub(super) fn reap(&mut self) -> std::io::Result<Option<Status>> {
        if self.reaped {
            return Ok(None);
        }
        let status = match &self.pidfd {
            Some(fd) => waitid_pidfd(fd.as_fd(), true, true)?,
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

/// SIGKILLs the main child's process group, the run's cgroup (if any) and
/// the orphans this run left with us, and waits until they are dead. The
/// main child is left unreaped (the caller reaps it).
pub(super) fn kill_everything(main: &MainChild) {
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
pub(super) enum Owner {
    ThisRun,
    Other,
    /// Empty or unreadable: a zombie, a process in the middle of `execve`
    /// (reading through the old, released mm yields nothing), or one
    /// that runs with an empty environment.
    Unknown,
}

pub(super) fn owner(pid: i32, marker: &[u8], buf: &mut Vec<u8>) -> Owner {
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

pub(super) struct StatFields {
    pub zombie: bool,
    pub ppid: i32,
    pub pgrp: i32,
    pub sid: i32,
}

/// State, parent, process group and session of `pid`.
pub(super) fn stat_fields(pid: i32) -> Option<StatFields> {
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
