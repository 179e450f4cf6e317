//! Runs whose child was made ahead (`SupervisorOptions::children_ahead`):
//! the program sees what a child spawned for the run would see, the
//! waiting child holds nothing it did not open and is in the run's cgroup,
//! a run that ends without it or a sandbox that goes leaves no process
//! behind, and a child killed while it waits costs the run nothing.
//!
//! Its own test binary: the tests look for the process's children.

mod common;

use std::io::Read;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_exec_sandbox::{RootAccess, Sandbox, SpawnError};
use common::*;

/// The process's live children that run as `uid`: the children made ahead
/// (a run's child is `nobody` in a root owned by `nobody`), asleep on their
/// go pipe or, just after they said they are ready, about to be.
fn waiting_children(uid: u32) -> Vec<i32> {
    let mut kids = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return kids;
    };
    for task in tasks.flatten() {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for pid in text
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
            };
            let live = matches!(field("State:").as_deref(), Some("S" | "R" | "D"));
            if field("Uid:").as_deref() == Some(&uid.to_string()) && live {
                kids.push(pid);
            }
        }
    }
    kids
}

/// The one child made ahead that waits now (the tests run one at a time).
fn the_waiting_child() -> i32 {
    let waiting = waiting_children(NOBODY);
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    waiting[0]
}

/// One test at a time, each starting when the sandbox threads of the one
/// before and their children are gone. The children alone are not
/// enough: a thread whose sandbox went while it was making a child
/// finishes that child first, then lets it go and leaves.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    eventually(
        "an earlier test's sandbox threads and children are gone",
        || sandbox_threads() == 0 && waiting_children(NOBODY).is_empty(),
    );
    guard
}

/// This process's threads that make children ahead ("agent-exec-ready",
/// cut to the kernel's 15 characters), as their `/proc/self/task` entries.
fn sandbox_thread_dirs() -> Vec<std::path::PathBuf> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .flatten()
        .map(|t| t.path())
        .filter(|t| {
            std::fs::read_to_string(t.join("comm")).is_ok_and(|c| c.starts_with("agent-exec-read"))
        })
        .collect()
}

fn sandbox_threads() -> usize {
    sandbox_thread_dirs().len()
}

/// Waits until exactly one sandbox thread is seen. Not a single look: a
/// thread the sandbox's thread starts (one making namespaces ahead) bears
/// its creator's name from `clone` until it names itself, and on a busy
/// machine it may not run for a while.
fn the_sandbox_thread_alone() {
    eventually("one sandbox thread, and only one, is seen", || {
        sandbox_threads() == 1
    });
}

/// Waits until `cond` holds, up to 5 s.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < until, "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A run of `sb` that has its child made ahead (the first one is being
/// made when the sandbox is prepared).
fn run_made_ahead(sb: &Sandbox, access: RootAccess) -> Arc<agent_exec_sandbox::RunSandbox> {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let run = sb.for_run_with(access).unwrap();
        if run.has_child_made_ahead() {
            return Arc::new(run);
        }
        assert!(Instant::now() < until, "no child was made ahead");
        drop(run);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What a program sees of its process: directory, stdin's type and
/// text, ids, open descriptors, confinement. Python, as the run's main
/// process: the run's Landlock rules grant its own `/proc/<pid>` only.
const PROBE: &str = r#"
import os, stat, sys
print(os.getcwd())
m = os.fstat(0).st_mode
print("stdin=pipe" if stat.S_ISFIFO(m) else "stdin=char" if stat.S_ISCHR(m) else "stdin=other")
print(repr(sys.stdin.read()))
print("ids", os.getuid(), os.getgid(), os.getgroups())
print("fds", sorted(os.listdir("/proc/self/fd"), key=int))
for line in open("/proc/self/status"):
    if line.split(":")[0] in ("NoNewPrivs", "Seccomp", "CapEff", "CapBnd"):
        print(line.strip())
try:
    open("/etc/agent-exec-ahead", "w")
    print("wrote")
except OSError as e:
    print("refused", e.errno)
print("home", bool(os.environ.get("HOME")))
"#;

fn probe(
    run: Arc<agent_exec_sandbox::RunSandbox>,
    root: &std::path::Path,
    stdin: Option<&str>,
) -> String {
    let sub = root.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::os::unix::fs::chown(&sub, Some(NOBODY), Some(NOBODY)).unwrap();
    let mut s = spec(&run, &sub, &[PYTHON, "-c", PROBE]);
    s.stdin = stdin.map(|t| t.as_bytes().to_vec());
    let o = try_exec(s).unwrap();
    assert_eq!(o.exit_code, Some(0), "{o:?}");
    o.stdout.text
}

#[test]
fn a_child_made_ahead_runs_its_command_as_a_child_spawned_for_the_run_would() {
    let _serial = serial();
    let r = root();
    let ahead = sandbox(&r.path);
    let plain = Sandbox::prepare(supervisor_spawning_each_run(), &config(), &r.path).unwrap();
    for stdin in [None, Some("some input")] {
        let run = run_made_ahead(&ahead, RootAccess::ReadWrite);
        let seen = probe(run, &r.path, stdin);
        let fresh = plain.for_run().unwrap();
        assert!(!fresh.has_child_made_ahead());
        let expected = probe(Arc::new(fresh), &r.path, stdin);
        assert_eq!(seen, expected, "stdin {stdin:?}");
        // And what it saw is the sandbox's: a sketch of the probe's lines.
        assert!(
            seen.starts_with(&format!("{}/sub\n", r.path.display())),
            "{seen}"
        );
        let kind = if stdin.is_some() {
            "stdin=pipe"
        } else {
            "stdin=char"
        };
        let text = format!("{:?}", stdin.unwrap_or(""));
        for line in [
            kind,
            text.replace('"', "'").as_str(),
            "ids 65534 65534 []",
            "fds ['0', '1', '2', '3']",
            "NoNewPrivs:\t1",
            "Seccomp:\t2",
            "CapEff:\t0000000000000000",
            "CapBnd:\t0000000000000000",
            "refused 13",
            "home True",
        ] {
            assert!(seen.lines().any(|l| l == line), "{line:?} in {seen}");
        }
    }
    assert!(!std::path::Path::new("/etc/agent-exec-ahead").exists());
}

#[test]
fn a_waiting_child_holds_nothing_it_did_not_open_and_sits_in_its_runs_cgroup() {
    let _serial = serial();
    let r = root();
    // Open while the child is made: a child that kept its copy would hold
    // the pipe open, and the read end below would never see its end.
    let (mut rd, wr) = std::io::pipe().unwrap();
    let sb = sandbox(&r.path);
    let run = run_made_ahead(&sb, RootAccess::ReadWrite);
    drop(wr);
    let mut fds = [nix::poll::PollFd::new(
        rd.as_fd(),
        nix::poll::PollFlags::POLLIN,
    )];
    let ready = nix::poll::poll(&mut fds, 2000u16).unwrap();
    assert_eq!(ready, 1, "the pipe's write end is still open somewhere");
    let mut rest = Vec::new();
    assert_eq!(rd.read_to_end(&mut rest).unwrap(), 0);
    if let Some(empty) = run.is_empty() {
        assert!(!empty, "the waiting child is in the run's cgroup");
    }
    let waiting = the_waiting_child();
    let fds: Vec<String> = std::fs::read_dir(format!("/proc/{waiting}/fd"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    // stdio (the supervisor's, until the command comes), its two output
    // pipes, the stdin pipe, /dev/null, the status and go pipes.
    assert!(fds.len() <= 9, "{fds:?}");
}

#[test]
fn a_run_that_ends_without_its_child_and_a_sandbox_that_goes_leave_no_process() {
    let _serial = serial();
    let r = root();
    let sb = sandbox(&r.path);
    let run = run_made_ahead(&sb, RootAccess::ReadWrite);
    // (Named once it runs: by now it has made a child.)
    the_sandbox_thread_alone();
    let first = the_waiting_child();
    // Refused, say: the run ends without running anything.
    drop(run);
    let gone = |pid: i32| !std::path::Path::new(&format!("/proc/{pid}")).exists();
    assert!(gone(first), "the child let go was not reaped at once");
    // The next one is made; the sandbox's last handle going takes it too.
    eventually("the next child is made", || {
        waiting_children(NOBODY).len() == 1
    });
    let second = the_waiting_child();
    assert_ne!(second, first);
    drop(sb);
    eventually("the sandbox's child outlived it", || gone(second));
}

#[test]
fn a_child_killed_while_it_waits_costs_its_run_nothing() {
    let _serial = serial();
    let r = root();
    let sb = sandbox(&r.path);
    let run = run_made_ahead(&sb, RootAccess::ReadWrite);
    let waiting = the_waiting_child();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(waiting),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    // Dead before its command comes (a kill that lands between the command
    // and exec is a kill of the program, as for any child).
    eventually("the killed child is dead", || {
        std::fs::read_to_string(format!("/proc/{waiting}/stat")).is_ok_and(|st| {
            st.rsplit(')')
                .next()
                .is_some_and(|t| t.trim_start().starts_with('Z'))
        })
    });
    let o = run_in(run, &r.path, &["/bin/sh", "-c", "echo ran; id -u"]);
    assert_eq!(
        (o.code, o.stdout.as_str()),
        (Some(0), "ran\n65534\n"),
        "{o:?}"
    );
    assert!(!std::path::Path::new(&format!("/proc/{waiting}")).exists());
}

/// How `argv` in `cwd` fails in `run`, as text to compare across runs
/// (it must not run).
fn failure(
    run: Arc<agent_exec_sandbox::RunSandbox>,
    argv: &[&str],
    cwd: &std::path::Path,
) -> String {
    match try_exec(spec(&run, cwd, argv)) {
        Err(SpawnError::Setup { step, source }) => format!("setup {step} {source}"),
        Err(SpawnError::NotFound(p)) => format!("not found {p}"),
        Err(e) => format!("{e}"),
        Ok(o) => panic!("it ran: {o:?}"),
    }
}

#[test]
fn a_child_made_ahead_fails_as_a_spawned_one_does() {
    let _serial = serial();
    let r = root();
    let ahead = sandbox(&r.path);
    let plain = Sandbox::prepare(supervisor_spawning_each_run(), &config(), &r.path).unwrap();
    let missing = r.path.join("gone");
    for (argv, cwd) in [
        (["/bin/true"], missing.as_path()),
        (["/bin/no-such-program"], r.path.as_path()),
    ] {
        let got = failure(run_made_ahead(&ahead, RootAccess::ReadWrite), &argv, cwd);
        let want = failure(Arc::new(plain.for_run().unwrap()), &argv, cwd);
        assert_eq!(got, want);
    }
    // Nothing of either is left waiting but the next child made ahead.
    eventually("one child waits", || waiting_children(NOBODY).len() == 1);
}

#[test]
fn a_read_only_run_gets_a_read_only_child() {
    let _serial = serial();
    let r = root();
    let sb = sandbox(&r.path);
    // The first child is made for a read-write run; a read-only run spawns
    // its own, and the next child is made for read-only runs.
    let first = sb.for_run_with(RootAccess::ReadOnly).unwrap();
    drop(first);
    let run = run_made_ahead(&sb, RootAccess::ReadOnly);
    let o = run_in(
        run,
        &r.path,
        &["/bin/sh", "-c", "echo x > written || echo refused"],
    );
    assert_eq!(o.stdout, "refused\n", "{o:?}");
    assert!(!r.path.join("written").exists());
    let run = run_made_ahead(&sb, RootAccess::ReadOnly);
    drop(run);
}

/// How often the sandbox threads of this process gave up the CPU
/// (`voluntary_ctxt_switches`): it grows each time one sleeps again.
fn sandbox_thread_wakeups() -> u64 {
    sandbox_thread_dirs()
        .iter()
        .filter_map(|t| {
            let status = std::fs::read_to_string(t.join("status")).ok()?;
            status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .sum()
}

/// Every child of this process, in any state.
fn all_children() -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .flatten()
        .flat_map(|t| {
            std::fs::read_to_string(t.path().join("children"))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn a_child_that_cannot_be_made_ahead_leaves_each_run_to_spawn_its_own() {
    let _serial = serial();
    let r = root();
    // Every child fails at its rlimits, a step it takes before it is
    // ready: no descriptor limit this high can be set, even by root.
    let mut cfg = config();
    cfg.rlimit_nofile = 1 << 40;
    let ahead = Sandbox::prepare(supervisor(), &cfg, &r.path).unwrap();
    let plain = Sandbox::prepare(supervisor_spawning_each_run(), &cfg, &r.path).unwrap();
    // The thread tries a few times, then leaves runs to spawn their own;
    // meanwhile and after, no run finds a child made for it.
    for _ in 0..40 {
        let run = ahead.for_run().unwrap();
        assert!(!run.has_child_made_ahead());
        std::thread::sleep(Duration::from_millis(10));
    }
    // Every child that failed was reaped; the thread is still there, and
    // tries no more: it sleeps through a quiet while without once being
    // switched in (one that kept trying would wake every 50 ms).
    eventually("the failed children are reaped", || {
        all_children().is_empty()
    });
    the_sandbox_thread_alone();
    // (First until the wake-ups of the runs dropped above are over.)
    let mut before = sandbox_thread_wakeups();
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(30));
        let now = sandbox_thread_wakeups();
        if now == before {
            break;
        }
        before = now;
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(sandbox_thread_wakeups(), before, "the thread kept trying");
    assert!(all_children().is_empty(), "{:?}", all_children());
    // A run's own spawn fails as in a sandbox that never makes children
    // ahead, and says at which step.
    let fail = |run| failure(Arc::new(run), &["/bin/true"], &r.path);
    let got = fail(ahead.for_run().unwrap());
    assert_eq!(got, fail(plain.for_run().unwrap()));
    assert!(got.contains("rlimit"), "{got}");
}

/// The supervisor's ends of the child's pipes are readied where the child
/// is made (nonblocking): a command that never reads the megabyte it is
/// given on stdin still ends at its deadline, whether its child was made
/// ahead or spawned for the run. With a blocking end, writing the input
/// past the pipe's capacity would wait for the sleep instead.
#[test]
fn a_command_that_never_reads_its_input_ends_at_its_deadline_with_either_kind_of_child() {
    let _serial = serial();
    let r = root();
    let ahead = sandbox(&r.path);
    let plain = Sandbox::prepare(supervisor_spawning_each_run(), &config(), &r.path).unwrap();
    let runs = [
        ("made ahead", run_made_ahead(&ahead, RootAccess::ReadWrite)),
        ("spawned", Arc::new(plain.for_run().unwrap())),
    ];
    for (kind, run) in runs {
        let mut s = spec(&run, &r.path, &["/bin/sh", "-c", "printf x; exec sleep 30"]);
        s.stdin = Some(vec![b'y'; 1 << 20]);
        s.timeout = Duration::from_millis(300);
        let started = Instant::now();
        let o = try_exec(s).unwrap();
        let took = started.elapsed();
        assert_eq!(
            o.termination,
            agent_exec_sandbox::Termination::TimedOut,
            "{kind}: {o:?}"
        );
        assert_eq!(o.stdout.text, "x", "{kind}");
        assert!(took < Duration::from_secs(10), "{kind}: took {took:?}");
    }
}
