//! Runs inside a real sandbox with a run cgroup: the cgroup kills what
//! escaped the session and dropped the run's environment marker (so the
//! marker sweep cannot see it), and the supervisor reaps what it killed.

mod common;

use std::ffi::CString;
use std::sync::Arc;
use std::time::Duration;

use agent_exec_sandbox::{CancelToken, ExecSpec, RunSandbox, Sandbox, Termination, run};
use common::{MARK_ENV, marker, procs_with, require_kernel_feature};

/// One run of `sb` with its cgroup, or `None` (through
/// `require_kernel_feature`) on a host that gives runs no cgroup.
fn run_with_cgroup(sb: &Sandbox) -> Option<Arc<RunSandbox>> {
    let rs = Arc::new(sb.for_run().unwrap());
    require_kernel_feature("a run cgroup", rs.is_empty().is_some()).then_some(rs)
}

/// A fresh root, its sandbox and one run of it with a cgroup, or `None`
/// on a host that gives runs no cgroup.
fn cgroup_run() -> Option<(common::Root, Arc<RunSandbox>)> {
    let root = common::root();
    let sb = common::sandbox(&root.path);
    let rs = run_with_cgroup(&sb)?;
    Some((root, rs))
}

/// `sh -c script` in the run, tagged with `mark` when given, a minute to
/// run, and the given grace and drain.
fn sh_in(
    rs: &Arc<RunSandbox>,
    root: &std::path::Path,
    script: &str,
    mark: Option<&str>,
    grace: Duration,
    drain: Duration,
) -> ExecSpec {
    let mut spec = common::spec(rs, root, &["/bin/sh", "-c", script]);
    if let Some(m) = mark {
        spec.env
            .push(CString::new(format!("{MARK_ENV}={m}")).unwrap());
    }
    spec.timeout = Duration::from_secs(60);
    spec.kill_grace = grace;
    spec.drain = drain;
    spec.output_chars = 10_000;
    spec
}

#[test]
fn escaped_grandchildren_die_with_the_cgroup() {
    let Some((root, rs)) = cgroup_run() else {
        return;
    };
    let m = marker();
    let p = root.path.join("pid");
    let p = p.display();
    let script = format!(
        "(setsid sh -c 'echo $$ > {p}.tmp; mv {p}.tmp {p}; exec env -i /bin/sleep 300' >/dev/null 2>&1 </dev/null &); \
         while [ ! -e {p} ]; do sleep 0.01; done; echo started"
    );
    let spec = sh_in(
        &rs,
        &root.path,
        &script,
        Some(&m),
        Duration::from_millis(500),
        Duration::from_millis(500),
    );
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.stdout.text, "started\n", "{:?}", out.stderr);
    assert_eq!(out.termination, Termination::Exited(0));
    let pid: i32 = std::fs::read_to_string(root.path.join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(pid > 0);
    assert_eq!(procs_with(&m), Vec::<i32>::new());
    assert_eq!(rs.is_empty(), Some(true));
    // Not even a zombie is left behind: the supervisor reaped it.
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the escaped grandchild {pid} still exists (alive or an unreaped zombie)"
    );
}

#[test]
fn the_child_is_born_in_its_runs_cgroup() {
    let Some((root, rs)) = cgroup_run() else {
        return;
    };
    let spec = sh_in(
        &rs,
        &root.path,
        "exec /bin/cat /proc/self/cgroup",
        None,
        Duration::from_millis(500),
        Duration::from_millis(500),
    );
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.termination, Termination::Exited(0));
    // Every hierarchy the run uses lists the run's cgroup, the v2 one
    // (joined by clone3 where the kernel has it) included.
    let ours: Vec<&str> = out
        .stdout
        .text
        .lines()
        .filter(|l| l.contains("/agent-exec/run-"))
        .collect();
    assert!(!ours.is_empty(), "{}", out.stdout.text);
    if std::path::Path::new("/sys/fs/cgroup/unified/agent-exec").exists()
        || std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
    {
        assert!(
            ours.iter().any(|l| l.starts_with("0::")),
            "not in a v2 run cgroup: {}",
            out.stdout.text
        );
    }
}

#[test]
fn a_deadline_tells_every_process_and_does_not_wait_out_the_grace() {
    // Two processes leave the main child's session. One traps SIGTERM and
    // leaves a note; the main child, on its own SIGTERM, waits for that
    // note before exiting, so the note proves the signal reached outside
    // the session. The other ignores SIGTERM and holds the run's pipes.
    // The grace is a minute: a run that waited it out (for the pipes, or
    // for a note that never comes) would take that long.
    let Some((root, rs)) = cgroup_run() else {
        return;
    };
    let m = marker();
    let note = root.path.join("told");
    let ready = root.path.join("ready");
    let stubborn = root.path.join("stubborn");
    let script = format!(
        "setsid sh -c 'trap \"echo term > {n}; exit 0\" TERM; touch {r}; while :; do sleep 0.05; done' >/dev/null 2>&1 & \
         setsid sh -c 'trap \"\" TERM; touch {s}; while :; do sleep 0.05; done' & \
         while [ ! -e {r} ] || [ ! -e {s} ]; do sleep 0.01; done; echo started; \
         trap 'while [ ! -e {n} ]; do sleep 0.01; done; exit 0' TERM; \
         sleep 300 & wait",
        n = note.display(),
        r = ready.display(),
        s = stubborn.display()
    );
    let mut spec = sh_in(
        &rs,
        &root.path,
        &script,
        Some(&m),
        Duration::from_secs(60),
        Duration::from_secs(60),
    );
    spec.timeout = Duration::from_millis(1500);
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.termination, Termination::TimedOut);
    assert_eq!(out.stdout.text, "started\n");
    assert!(
        out.duration < Duration::from_secs(30),
        "the run waited for the grace: {:?}",
        out.duration
    );
    assert_eq!(std::fs::read_to_string(&note).unwrap_or_default(), "term\n");
    // The main child exited by itself once told; the stubborn one was
    // killed with the rest.
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(procs_with(&m), Vec::<i32>::new());
    assert_eq!(rs.is_empty(), Some(true));
}

#[test]
fn a_run_after_a_killed_run_is_not_killed_at_birth() {
    // A cgroup that has seen `cgroup.kill` SIGKILLs children later cloned
    // into it on this kernel, so a killed run's cgroup must not be pooled.
    let root = common::root();
    let sb = common::sandbox(&root.path);
    let m = marker();
    for round in 0..3 {
        let Some(rs) = run_with_cgroup(&sb) else {
            return;
        };
        // Leaves a process behind in its own session and, once it says
        // so, without the run's marker: only the cgroup kill can end it.
        let ready = root.path.join(format!("ready-{round}"));
        let script = format!(
            "setsid env -i /bin/sh -c 'touch {r}; exec /bin/sleep 300' >/dev/null 2>&1 </dev/null & \
             while [ ! -e {r} ]; do sleep 0.01; done; echo ok",
            r = ready.display()
        );
        let spec = sh_in(
            &rs,
            &root.path,
            &script,
            Some(&m),
            Duration::from_millis(500),
            Duration::from_millis(200),
        );
        let out = run(spec, &CancelToken::new()).unwrap();
        assert_eq!(out.termination, Termination::Exited(0), "round {round}");
        assert_eq!(out.stdout.text, "ok\n", "round {round}");
        assert_eq!(rs.is_empty(), Some(true));
    }
    assert_eq!(procs_with(&m), Vec::<i32>::new());
}
