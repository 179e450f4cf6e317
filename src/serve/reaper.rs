//! The reaper: a small helper process that outlives a crashed daemon just
//! long enough to kill what its commands left behind.
//!
//! Each command gets `PR_SET_PDEATHSIG`, so the process the daemon started
//! dies with it even on `kill -9`. Its own children do not: the death signal
//! is not inherited, and they are re-parented to init. They are, however,
//! inside the run's cgroup (`run-<daemon pid>-<n>`, see
//! `crate::sandbox::cgroup`). The reaper is started by the daemon with a pipe
//! on its stdin that only the daemon holds; when the daemon dies, however it
//! dies, the pipe reads end-of-file and the reaper kills every process in
//! the daemon's run cgroups, removes them, and exits.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::ServeOptions;

/// Held by the daemon for its whole life: dropping it (or dying) wakes the
/// reaper.
#[derive(Debug)]
pub struct ReaperHandle {
    _pipe: ChildStdin,
    _child: Child,
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
        .arg("--socket")
        .arg(&opts.socket)
        .arg("--reap-for")
        .arg(std::process::id().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        // Its own process group: a terminal's Ctrl-C or a signal sent to
        // the daemon's group must not take the reaper down with it.
        .process_group(0);
    match cmd.spawn() {
        Ok(mut child) => child.stdin.take().map(|pipe| ReaperHandle {
            _pipe: pipe,
            _child: child,
        }),
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
    let layout = crate::sandbox::cgroup::detect();
    let prefix = format!("run-{daemon_pid}-");
    let mut killed = 0;
    let bases: Vec<PathBuf> = [
        layout.v2_base.clone(),
        layout.v1_freezer.clone(),
        layout.v1_pids.clone(),
        layout.v1_memory.clone(),
    ]
    .into_iter()
    .flatten()
    .collect();
    for base in &bases {
        let Ok(entries) = std::fs::read_dir(base) else {
            continue;
        };
        for entry in entries.flatten() {
            if !entry.file_name().to_string_lossy().starts_with(&prefix) {
                continue;
            }
            let dir = entry.path();
            if kill_members(&dir) {
                killed += 1;
            }
            remove_when_empty(&dir);
        }
    }
    killed
}

/// `cgroup.kill` where the kernel has it; else repeated SIGKILL sweeps of
/// `cgroup.procs` (a forking process can add members between two reads, so
/// the sweep repeats until the cgroup stays empty).
fn kill_members(dir: &Path) -> bool {
    let had = !members(dir).is_empty();
    if !had {
        return false;
    }
    if std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return true;
    }
    for _ in 0..100 {
        let pids = members(dir);
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    true
}

fn members(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Killed processes leave their cgroup asynchronously: retry `rmdir` for a
/// short while.
fn remove_when_empty(dir: &Path) {
    for _ in 0..200 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
