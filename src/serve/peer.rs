//! Whether a connecting process is one of the daemon's own runs.
//!
//! A sandboxed command that can reach the socket (`sandbox.unix_sockets`
//! and a socket its uid may open) must not become a client: it could start
//! new runs under any session label, spend other sessions' budgets, and
//! keep a process alive after its own result. Its uid says nothing (a run
//! may run as an allowed uid), so the kernel's view of the process decides:
//! a peer is refused when its process (`SO_PEERCRED` pid) is in one of the
//! daemon's run cgroups, or has the daemon among its ancestors. Every run
//! process descends from the daemon: the daemon forked the run, and as a
//! child subreaper it adopts what the run orphans. The cgroup catches what
//! the ancestry might not (a daemon that could not become a subreaper,
//! whose runs' orphans go to init).

/// At most this many ancestors are read; a deeper chain is refused as
/// unverifiable (no real client is nested this deep).
const MAX_DEPTH: usize = 1024;

/// Why the process `pid` may not be a client of the daemon `daemon`, or
/// `None` when it may.
pub(super) fn refusal(pid: i32, daemon: u32) -> Option<String> {
    if pid <= 0 {
        // No pid: the peer lives in a pid namespace that is not ours nor
        // below ours, where no run ever is (runs are our descendants).
        return None;
    }
    if let Some(cgroup) = run_cgroup(pid, daemon) {
        return Some(format!(
            "the connecting process (pid {pid}) is in this daemon's run cgroup {cgroup}"
        ));
    }
    let daemon = i32::try_from(daemon).unwrap_or(i32::MAX);
    let mut p = pid;
    for _ in 0..MAX_DEPTH {
        let Some(ppid) = parent(p) else {
            return Some(format!(
                "the connecting process (pid {pid}) could not be verified: pid {p} vanished \
                 while its ancestry was read"
            ));
        };
        if ppid == daemon {
            return Some(format!(
                "the connecting process (pid {pid}) was started by a command this daemon runs"
            ));
        }
        if ppid <= 1 {
            return None;
        }
        p = ppid;
    }
    Some(format!(
        "the connecting process (pid {pid}) could not be verified: more than {MAX_DEPTH} ancestors"
    ))
}

/// The run cgroup of supervisor `daemon` that `pid` is in, from
/// `/proc/<pid>/cgroup`. The sandbox names a run's cgroup
/// `agent-exec/run-<supervisor pid>-<n>` in every hierarchy it uses.
fn run_cgroup(pid: i32, daemon: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines()
        .filter_map(|line| line.splitn(3, ':').nth(2))
        .find(|path| is_run_cgroup_of(path, daemon))
        .map(str::to_string)
}

/// Whether a cgroup path (as `/proc/<pid>/cgroup` shows it) is, or is
/// inside, a run cgroup of supervisor `daemon`.
fn is_run_cgroup_of(path: &str, daemon: u32) -> bool {
    let prefix = format!("run-{daemon}-");
    let parts: Vec<&str> = path.split('/').collect();
    parts.windows(2).any(|w| {
        w[0] == "agent-exec"
            && w[1]
                .strip_prefix(&prefix)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Parent pid of `pid`, or `None` when it is gone.
fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain anything: the fields after it start at
    // the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_cgroups_are_recognised_by_their_sandbox_name() {
        assert!(is_run_cgroup_of("/agent-exec/run-42-7", 42));
        assert!(is_run_cgroup_of("/user.slice/agent-exec/run-42-0/sub", 42));
        assert!(!is_run_cgroup_of("/agent-exec/run-43-7", 42));
        assert!(!is_run_cgroup_of("/agent-exec/run-421-7", 42));
        assert!(!is_run_cgroup_of("/other/run-42-7", 42));
        assert!(!is_run_cgroup_of("/agent-exec/run-42-", 42));
        assert!(!is_run_cgroup_of("/agent-exec/run-42-x", 42));
        assert!(!is_run_cgroup_of("/", 42));
    }

    #[test]
    fn this_process_is_a_client_and_its_child_is_not() {
        let me = std::process::id();
        let parent_pid = std::os::unix::process::parent_id();
        // Our parent is not a descendant of ours.
        assert_eq!(refusal(parent_pid as i32, me), None);
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let why = refusal(child.id() as i32, me);
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            why.as_deref()
                .is_some_and(|w| w.contains("started by a command")),
            "{why:?}"
        );
        assert!(refusal(i32::MAX, me).is_some_and(|w| w.contains("could not be verified")));
    }
}
