//! Ending a run: the main child (never reaped before the end, so its pid
//! and process group id stay its own), the run's cgroup, and the orphans
//! the run left with the supervisor (see the module docs of `exec`).

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use super::io::wait_readable;
use crate::sandbox::RunSandbox;
use crate::spawn::sys::ChildExit as Status;
use crate::spawn::sys::waitid_pidfd;
use crate::supervisor::{Reaping, forget_main, reap_adopted, stat_fields, subreaper_active};

/// How long a SIGKILLed process may take to die before we give up on it.
const DEATH_WAIT: Duration = Duration::from_secs(5);
/// Upper bound on rounds of the orphan sweep (tree depth, fork races).
const SWEEP_ROUNDS: usize = 1000;
/// Extra sweep rounds (1 ms apart) while an adopted child that started
/// after the run's main process has an environment without any run's
/// marker, which is how a process in the middle of `execve` looks (empty,
/// or part of it). An `execve` on a loaded
/// 2-core host outlasted 20 rounds (a CI run caught a survivor); older
/// processes cannot be the run's and never cost a round.
const UNSURE_RETRIES: u32 = 100;

/// The main child: killed and reaped on every path out of `run`,
/// including errors and panics.
pub(super) struct MainChild {
    pub pid: i32,
    pub pidfd: Option<OwnedFd>,
    pub reaped: bool,
    pub sandbox: Option<Arc<RunSandbox>>,
    /// This run's `AGENT_EXEC_RUN_ID=<id>` environment entry.
    pub marker: String,
    /// The run's own namespaces, held until the run is over.
    pub namespaces: Vec<std::os::fd::OwnedFd>,
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
        forget_main(self.pid);
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
    // A run cgroup that is empty now holds no process of the run, and none
    // can be anywhere else: a process cannot leave its cgroup (the child
    // has no capability, and Landlock keeps it off cgroupfs). Nothing is
    // then left alive to find by its environment, and what is left dead is
    // reaped below: the sweep's reads of `/proc` (a children list per
    // thread, an environment per child) are skipped.
    let emptied = main.sandbox.as_ref().and_then(|sb| sb.is_empty()) == Some(true);
    // Before the cgroup kill: the sweep recognises the run's orphans by
    // their environment, which a dead process no longer shows.
    if subreaper_active() && !emptied {
        sweep_orphans(main.pid, main.marker.as_bytes());
    }
    if let Some(sb) = main.sandbox.as_ref().filter(|_| !emptied) {
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
    }
    // Last, on every path: what died by itself out of the run's session
    // (a double fork after `setsid`) cannot be attributed to a run any
    // more, and what the cgroup kill left is dead too. Cheap when nothing
    // is left: one read of the children list.
    if subreaper_active() {
        reap_adopted();
    }
}

/// Who a process's environment says it belongs to.
pub(super) enum Owner {
    ThisRun,
    /// Another run's marker.
    Other,
    /// No run's marker: a zombie, a process in the middle of `execve`
    /// (reading through the old, released mm yields nothing, and the new
    /// one's environment reads in part while the kernel copies it), or one
    /// that runs without the marker.
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
    // `NAME=`: the marker up to its value.
    let name = marker
        .iter()
        .position(|b| *b == b'=')
        .map_or(marker, |i| &marker[..=i]);
    let mut marked = false;
    for entry in buf.split(|b| *b == 0) {
        if entry == marker {
            return Owner::ThisRun;
        }
        marked |= entry.starts_with(name);
    }
    // Without any run's marker the read may have caught an environment
    // being copied by `execve` (seen: 64 of its 117 bytes, the marker not
    // yet among them, since a shell passes its variables on in its own
    // order): the caller looks again rather than take it for another's.
    if marked { Owner::Other } else { Owner::Unknown }
}

/// Kills and reaps the run's processes that were re-parented to us.
fn sweep_orphans(main_pid: i32, marker: &[u8]) {
    // Every process of the run started after its main process; read while
    // the main process is a zombie not yet reaped, and only when a child
    // of unknown owner needs it (most runs leave none). Unknown: any may be.
    let mut main_start = None;
    let mut env = Vec::new();
    let mut killed = Vec::new();
    let mut unsure_rounds = 0;
    let end = Instant::now() + DEATH_WAIT;
    for _ in 0..SWEEP_ROUNDS {
        killed.clear();
        let mut unsure = false;
        // A process of the run that died since the children were listed
        // had its own children adopted by us after the list was read.
        let mut reaped = false;
        {
            // Held while looking and killing: no adopted pid can be reaped
            // (and reused) by another thread between the two.
            let mut reaping = Reaping::begin();
            let kids = reaping.adopted().to_vec();
            for pid in kids {
                if pid == main_pid {
                    continue;
                }
                match owner(pid, marker, &mut env) {
                    Owner::ThisRun => {
                        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                        killed.push(pid);
                    }
                    Owner::Other => {}
                    Owner::Unknown => match stat_fields(pid) {
                        // Died by itself: attributable only while its
                        // session or group is still our main child's.
                        // (Zombies of other sessions are reaped at the
                        // end of the run, unattributed.)
                        Some(st) if st.zombie && (st.pgrp == main_pid || st.sid == main_pid) => {
                            reaping.reap(pid);
                            reaped = true;
                        }
                        Some(st) if st.zombie => {}
                        // Older than the run: never its process.
                        Some(st)
                            if st.start
                                < *main_start.get_or_insert_with(|| {
                                    stat_fields(main_pid).map_or(0, |f| f.start)
                                }) => {}
                        Some(_) => unsure = true,
                        None => {}
                    },
                }
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
            if reaped {
                continue;
            }
            break;
        }
        reap_killed(&mut killed, end);
    }
}

/// Waits until the SIGKILLed `pids` are dead and reaped (here, or by
/// another thread reaping adopted children), or `end`. The gate is taken
/// for each look only, so other runs' spawns are not held up while a
/// victim takes its time to die.
fn reap_killed(pids: &mut Vec<i32>, end: Instant) {
    loop {
        {
            let reaping = Reaping::begin();
            pids.retain(|&pid| !reaping.reap(pid));
        }
        if pids.is_empty() || Instant::now() >= end {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}
