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
    // Every process that descends from the daemon started after it: the
    // walk ends at the first process that started before (most clients'
    // chains reach one within a step or two, where each step is a read of
    // `/proc/<pid>/stat`). Same clock tick: not known to be older.
    let daemon_start = started(daemon);
    let daemon = i32::try_from(daemon).unwrap_or(i32::MAX);
    let mut p = pid;
    for _ in 0..MAX_DEPTH {
        let Some((ppid, start)) = parent_and_start(p) else {
            return Some(format!(
                "the connecting process (pid {pid}) could not be verified: pid {p} vanished \
                 while its ancestry was read"
            ));
        };
        if daemon_start.is_some_and(|d| start < d) {
            return None;
        }
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

/// Parent pid of `pid` and when `pid` started (clock ticks since boot),
/// or `None` when it is gone.
fn parent_and_start(pid: i32) -> Option<(i32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain anything: the fields after it start at
    // the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    // Fields 4 (ppid) and 22 (starttime) of proc_pid_stat(5); `rest`
    // starts at field 3.
    let ppid = fields.nth(1)?.parse().ok()?;
    let start = fields.nth(17)?.parse().ok()?;
    Some((ppid, start))
}

/// When the daemon `pid` started, read once: it does not change.
fn started(pid: u32) -> Option<u64> {
    static DAEMON: std::sync::OnceLock<Option<(u32, u64)>> = std::sync::OnceLock::new();
    let read = || {
        let p = i32::try_from(pid).ok()?;
        parent_and_start(p).map(|(_, start)| (pid, start))
    };
    match DAEMON.get_or_init(read) {
        Some((cached, start)) if *cached == pid => Some(*start),
        // Asked about another pid (tests): read it afresh.
        _ => read().map(|(_, start)| start),
    }
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

    #[test]
    fn the_stat_fields_are_the_parent_and_the_start_time() {
        let me = std::process::id() as i32;
        let (ppid, start) = parent_and_start(me).unwrap();
        assert_eq!(ppid as u32, std::os::unix::process::parent_id());
        // Our parent started no later than we did; pid 1 before both.
        let (_, parent_start) = parent_and_start(ppid).unwrap();
        assert!(parent_start <= start);
        let (_, init_start) = parent_and_start(1).unwrap();
        assert!(init_start <= parent_start);
        assert_eq!(started(me as u32), Some(start));
    }

    /// A process older than the daemon is never taken for one of its
    /// runs, and the walk stops there: init (older than everything) is a
    /// client as soon as its own stat is read.
    #[test]
    fn an_older_process_is_never_a_run() {
        let me = std::process::id();
        assert_eq!(refusal(1, me), None);
    }
}
