//! The reaper: a small helper process that outlives a crashed daemon just
//! long enough to kill what its commands left behind.
//!
//! Each command gets `PR_SET_PDEATHSIG`, so the process the daemon started
//! dies with it even on `kill -9`. Its own children do not: the death signal
//! is not inherited, and they are re-parented to init. They are, however,
//! inside the run's cgroup (`run-<daemon pid>-<n>`, see
//! `crate::sandbox::kill_runs_of`). The reaper is started by the daemon with a pipe
//! on its stdin that only the daemon holds; when the daemon dies, however it
//! dies, the pipe reads end-of-file and the reaper kills every process in
//! the daemon's run cgroups, removes them, and exits.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};

use super::ServeOptions;

/// Held by the daemon for its whole life: dropping it (or dying) wakes the
/// reaper.
#[derive(Debug)]
pub struct ReaperHandle {
    _pipe: ChildStdin,
    child: Child,
}

impl ReaperHandle {
    /// The reaper's pid: a child of the daemon for its whole life, never
    /// a run's.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// Starts the reaper for this process. `None` (logged) when it cannot be
/// started: commands still die with the daemon, only grandchildren of a
/// crashed daemon would survive.
pub fn spawn(opts: &ServeOptions) -> Option<ReaperHandle> {
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "no reaper: cannot find this program");
            return None;
        }
    };
    let mut cmd = Command::new(exe);
    cmd.arg("serve")
        .arg("--policy")
        .arg(&opts.policy)
        .arg("--root")
        .arg(&opts.root)
        .arg("--reap-for")
        .arg(std::process::id().to_string())
        // Socket activation is the daemon's, not the reaper's.
        .env_remove("LISTEN_PID")
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_FDNAMES")
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        // Its own process group: a terminal's Ctrl-C or a signal sent to
        // the daemon's group must not take the reaper down with it.
        .process_group(0);
    match cmd.spawn() {
        Ok(mut child) => child
            .stdin
            .take()
            .map(|pipe| ReaperHandle { _pipe: pipe, child }),
        Err(e) => {
            tracing::warn!(error = %e, "no reaper: could not start it");
            None
        }
    }
}

/// The reaper's whole life: wait for the daemon to go, then clean up.
/// Returns the process exit status.
pub fn run(daemon_pid: u32) -> i32 {
    let mut buf = [0u8; 64];
    let mut stdin = std::io::stdin().lock();
    // Nothing is ever written: any read result means the daemon is gone
    // (EOF) or the pipe is broken, which is the same thing here.
    loop {
        match stdin.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    let killed = sweep(daemon_pid);
    if killed > 0 {
        tracing::warn!(
            daemon_pid,
            killed,
            "the daemon died with commands running; killed what they left"
        );
    }
    0
}

/// Kills and removes every run cgroup of `daemon_pid`; returns how many
/// cgroups still had processes.
fn sweep(daemon_pid: u32) -> usize {
    crate::sandbox::kill_runs_of(daemon_pid)
}
