//! The run cgroups one-shot CLI calls keep for each other
//! (`RunCgroup::claim` in `crates/sandbox/src/plan/cgroup.rs`), through
//! the real binary: a set a call left empty serves the next call, while a
//! set that saw `cgroup.kill`, one whose state file was damaged, and one
//! whose call was killed mid-run are removed and made anew, leaving no
//! process of the earlier run behind.

mod strict_common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use strict_common::*;

/// The slots are shared by every one-shot call of this user: the tests of
/// this file take turns so each sees its own calls' effects.
static SERIAL: Mutex<()> = Mutex::new(());

/// Where the cgroup2 hierarchy is mounted (`/sys/fs/cgroup` on a pure v2
/// host, `/sys/fs/cgroup/unified` on a hybrid one).
fn v2_mount() -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        right
            .starts_with("cgroup2 ")
            .then(|| left.split(' ').nth(4).map(PathBuf::from))
            .flatten()
    })
}

/// The v2 cgroup directory of `pid`, from `/proc/<pid>/cgroup`.
fn v2_cgroup_of(pid: i32) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(v2_mount()?.join(path.trim_start_matches('/')))
}

/// The Python processes of runs (in a cgroup of the sandbox's) whose
/// command line holds `mark`: not the CLI, whose arguments hold it too,
/// nor its child before `execve` (which still shows the CLI's).
fn run_procs(mark: &str) -> Vec<i32> {
    procs_with(mark)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.starts_with(format!("{PYTHON}\0").as_bytes()))
                && v2_cgroup_of(*pid)
                    .is_some_and(|d| d.components().any(|c| c.as_os_str() == "agent-exec"))
        })
        .collect()
}

/// The run process whose command line holds `mark`, waited for.
fn wait_for(mark: &str) -> i32 {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(pid) = run_procs(mark).first() {
            return *pid;
        }
        assert!(Instant::now() < end, "no process with {mark} appeared");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `script` (which must put `mark` in a process's command line)
/// through the CLI and returns the result with the v2 cgroup the marked
/// process ran in and that directory's inode while it ran.
fn observe(case: &Case, args: &[&str], mark: &str) -> (Value, PathBuf, u64) {
    std::thread::scope(|s| {
        let call = s.spawn(|| case.run(args));
        let pid = wait_for(mark);
        let dir = v2_cgroup_of(pid).expect("the run's cgroup");
        let ino = std::fs::metadata(&dir).expect("the run's cgroup dir").ino();
        (call.join().unwrap(), dir, ino)
    })
}

/// A Python program that sleeps `secs` with `mark` in its arguments.
fn sleeper(secs: f32, mark: &str) -> Vec<String> {
    vec![
        "--".into(),
        PYTHON.into(),
        "-c".into(),
        format!("import time; time.sleep({secs})"),
        mark.into(),
    ]
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The state file of the slot whose cgroup is `dir` (named
/// `slot-<uid>-<tag>-<i>`; the state is `cgroup-slots/slot-<i>` in the
/// supervisor's private directory).
fn state_file(dir: &Path) -> PathBuf {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let i = name.rsplit('-').next().unwrap().to_string();
    let base = Path::new("/var/lib/agent-exec/run/cgroup-slots");
    assert!(base.is_dir(), "root's slots live in {}", base.display());
    base.join(format!("slot-{i}"))
}

fn has_cgroups(v: &Value) -> bool {
    let limits = v["sandbox"]["limits"].to_string();
    require_kernel_feature(
        &format!("run cgroups with cgroup.kill ({limits})"),
        limits.contains("cgroup_kill"),
    )
}

#[test]
fn a_kept_cgroup_serves_the_next_call_and_a_killed_or_damaged_one_never_does() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    assert!(is_root(), "the CLI tests run as root");
    let case = Case::new("[limits]\ntimeout_ms = 20000\n", None);
    let t = token();

    // Two calls in a row: the second runs in the very directory the first
    // left, empty.
    let m1 = format!("slot-first-{t}");
    let (v1, dir1, ino1) = observe(&case, &args(&sleeper(0.3, &m1)), &m1);
    if !has_cgroups(&v1) {
        return;
    }
    assert_eq!(v1["exit_code"], 0, "{v1}");
    assert!(
        dir1.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("slot-"),
        "a one-shot call runs in a kept slot: {}",
        dir1.display()
    );
    assert!(dir1.is_dir(), "the set is kept after the call");
    let procs = std::fs::read_to_string(dir1.join("cgroup.procs")).unwrap();
    assert!(procs.trim().is_empty(), "kept empty: {procs}");
    assert_eq!(
        std::fs::read_to_string(state_file(&dir1)).unwrap(),
        "clean\n"
    );
    let m2 = format!("slot-second-{t}");
    let (v2, dir2, ino2) = observe(&case, &args(&sleeper(0.3, &m2)), &m2);
    assert_eq!(v2["exit_code"], 0, "{v2}");
    assert_eq!((&dir2, ino2), (&dir1, ino1), "the kept set was reused");

    // A state file that does not say `clean` is never trusted: the set
    // is made anew.
    std::fs::write(state_file(&dir1), "clean, honest\n").unwrap();
    let m3 = format!("slot-damaged-{t}");
    let (v3, dir3, ino3) = observe(&case, &args(&sleeper(0.3, &m3)), &m3);
    assert_eq!(v3["exit_code"], 0, "{v3}");
    assert_eq!(dir3, dir1, "the same slot, its first free one");
    assert_ne!(ino3, ino1, "a set of unknown history is made anew");

    // A run whose process left its session, ignores SIGTERM and runs with
    // an empty environment (so the orphan sweep cannot tell it is the
    // run's) is ended by `cgroup.kill`; that set is removed, and the next
    // call gets a new one and is not killed at birth.
    let m4 = format!("slot-killed-{t}");
    let stubborn = format!(
        "import os, signal, time\n\
         signal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
         if os.fork() == 0:\n    os.setsid()\n    \
         os.execve('{PYTHON}', ['{PYTHON}', '-c', 'import time; time.sleep(30)', '{m4}'], {{}})\n\
         else:\n    time.sleep(30)"
    );
    let (v4, dir4, ino4) = observe(
        &case,
        &["--timeout-ms", "500", "--", PYTHON, "-c", &stubborn, &m4],
        &m4,
    );
    assert_eq!(v4["error_type"], "COMMAND_TIMEOUT", "{v4}");
    assert!(run_procs(&m4).is_empty(), "no process of the killed run");
    assert!(
        std::fs::metadata(&dir4)
            .map(|m| m.ino() != ino4)
            .unwrap_or(true),
        "the killed set {} is gone",
        dir4.display()
    );
    let m5 = format!("slot-after-kill-{t}");
    let mut after = sleeper(0.3, &m5);
    after[3] = "import time; time.sleep(0.3); print('born alive')".into();
    let (v5, dir5, ino5) = observe(&case, &args(&after), &m5);
    assert_eq!(v5["exit_code"], 0, "{v5}");
    assert_eq!(stdout(&v5), "born alive\n", "{v5}");
    assert!(
        dir5 != dir4 || ino5 != ino4,
        "a set that saw cgroup.kill never serves another run"
    );
}

#[test]
fn what_a_call_killed_mid_run_left_is_killed_before_its_slot_serves_again() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    assert!(is_root(), "the CLI tests run as root");
    let case = Case::new("[limits]\ntimeout_ms = 60000\n", None);
    let t = token();
    let probe = case.run(&["--", "/bin/true"]);
    if !has_cgroups(&probe) {
        return;
    }

    // The CLI dies with `kill -9` while its run has a grandchild (which
    // no parent-death signal reaches): the grandchild is left in the
    // slot's set, and the slot's state still says it is in use.
    let mark = format!("slot-orphan-{t}");
    let forker = "import os, time\nos.fork()\ntime.sleep(60)";
    let mut cli = std::process::Command::new(BIN)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .arg("--policy")
        .arg(case.policy_path())
        .arg("--root")
        .arg(case.path())
        .args(["--", PYTHON, "-c", forker, &mark])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .current_dir("/")
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(20);
    while run_procs(&mark).len() < 2 {
        assert!(Instant::now() < end, "the run did not fork");
        std::thread::sleep(Duration::from_millis(5));
    }
    let dir = v2_cgroup_of(run_procs(&mark)[0]).unwrap();
    let ino = std::fs::metadata(&dir).unwrap().ino();
    cli.kill().unwrap();
    cli.wait().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let left = run_procs(&mark);
    assert!(!left.is_empty(), "the grandchild outlived the CLI");
    assert_eq!(
        std::fs::read_to_string(state_file(&dir)).unwrap(),
        "inuse\n"
    );

    // The next call, whichever slot it takes, kills it and removes that
    // set first.
    let v = case.run(&["--", "/bin/true"]);
    assert_eq!(v["exit_code"], 0, "{v}");
    let end = Instant::now() + Duration::from_secs(5);
    while !procs_with(&mark).is_empty() {
        assert!(
            Instant::now() < end,
            "the orphan {:?} survived the next call",
            procs_with(&mark)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        std::fs::metadata(&dir)
            .map(|m| m.ino() != ino)
            .unwrap_or(true),
        "the set the orphan was in is not kept"
    );
}

/// The memory cap the cgroups of `pid` hold it to: the v1 `memory`
/// hierarchy's when the process is in one, else the v2 `memory.max`.
fn memory_cap_of(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let file = match text
        .lines()
        .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_string()))
    {
        Some(p) => Path::new("/sys/fs/cgroup/memory")
            .join(p.trim_start_matches('/'))
            .join("memory.limit_in_bytes"),
        None => v2_cgroup_of(pid)?.join("memory.max"),
    };
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

#[test]
fn a_kept_cgroup_holds_each_call_to_its_own_policys_limits() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    assert!(is_root(), "the CLI tests run as root");
    const SMALL: u64 = 256 << 20;
    const LARGE: u64 = 1 << 30;
    let small = Case::new(
        &format!("[sandbox]\nmemory_max_bytes = {SMALL}\npids_max = 32\n"),
        None,
    );
    let large = Case::new(
        &format!("[sandbox]\nmemory_max_bytes = {LARGE}\npids_max = 64\n"),
        None,
    );
    let t = token();
    // Down, up and down again through the same kept set: a cap is raised
    // and lowered in the order the kernel accepts.
    let mut seen = Vec::new();
    for (i, (case, cap, pids)) in [
        (&small, SMALL, 32),
        (&large, LARGE, 64),
        (&small, SMALL, 32),
    ]
    .into_iter()
    .enumerate()
    {
        let mark = format!("slot-limits-{i}-{t}");
        let (v, dir, ino, held) = std::thread::scope(|s| {
            let call = s.spawn(|| case.run(&args(&sleeper(0.3, &mark))));
            let pid = wait_for(&mark);
            let held = memory_cap_of(pid);
            let dir = v2_cgroup_of(pid).expect("the run's cgroup");
            let ino = std::fs::metadata(&dir).expect("its directory").ino();
            (call.join().unwrap(), dir, ino, held)
        });
        if !has_cgroups(&v) {
            return;
        }
        let limits = v["sandbox"]["limits"].to_string();
        if !require_kernel_feature(
            &format!("a memory and a pids controller for runs ({limits})"),
            limits.contains("cgroup_memory_max=") && limits.contains("cgroup_pids_max="),
        ) {
            return;
        }
        assert_eq!(v["exit_code"], 0, "{v}");
        assert!(
            limits.contains(&format!("cgroup_memory_max={cap}"))
                && limits.contains(&format!("cgroup_pids_max={pids}")),
            "call {i}: {limits}"
        );
        assert_eq!(
            held,
            Some(cap),
            "call {i}: the kernel holds the run to its cap"
        );
        seen.push((dir, ino));
    }
    assert!(
        seen.windows(2).all(|w| w[0] == w[1]),
        "one kept set served the three calls: {seen:?}"
    );
}

/// A one-shot call sweeps what a dead supervisor left (its run directory
/// and its run cgroups) on a thread of its own while it reads its policy
/// (`SupervisorOptions::sweep_in_background`), and waits for that sweep
/// before it exits: nothing of it is left for a later call.
#[test]
fn a_one_shot_call_finishes_its_background_sweep_before_it_exits() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !require_kernel_feature("root, to plant another supervisor's leftovers", is_root()) {
        return;
    }
    let case = Case::new("", None);
    let v = case.shell("echo \"$HOME\"");
    assert_eq!(v["exit_code"], 0, "{v}");
    let home = PathBuf::from(stdout(&v).trim());
    let base = home.parent().unwrap().to_path_buf();
    // No pid is above pid_max (at most 2^22): this supervisor is dead.
    let stale = base.join("run-99999999-0-deadbeef");
    std::fs::create_dir_all(stale.join("sub")).unwrap();
    let stale_cgroups: Vec<PathBuf> = [
        "/sys/fs/cgroup/pids/agent-exec",
        "/sys/fs/cgroup/agent-exec",
    ]
    .iter()
    .map(|b| Path::new(b).join("run-99999999-0"))
    .filter(|p| std::fs::create_dir(p).is_ok())
    .collect();
    let v = case.run(&["--", "/bin/true"]);
    assert_eq!(v["exit_code"], 0, "{v}");
    // Checked as soon as the call has exited.
    assert!(
        !stale.exists(),
        "the dead supervisor's run directory is left"
    );
    for cg in stale_cgroups {
        assert!(!cg.exists(), "{} is left", cg.display());
    }
}

/// A one-shot call puts away everything its run used before it exits,
/// though it leaves the policy's memory to the exit
/// (`Service::end_with_process`): as soon as the process has exited, the
/// run's directory is gone and the trace holds the call's result.
#[test]
fn a_one_shot_call_leaves_no_run_directory_and_a_whole_trace() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let case = Case::new("", None);
    let traces = dir("ae-trace-", 0o755, 0);
    let trace = traces.path().join("calls.jsonl");
    let v = case.run(&[
        "--trace",
        trace.to_str().unwrap(),
        "--shell",
        "echo \"$HOME\"",
    ]);
    assert_eq!(v["exit_code"], 0, "{v}");
    let home = PathBuf::from(stdout(&v).trim());
    let name = home.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("run-"), "{}", home.display());
    assert!(
        !home.exists(),
        "the run directory {} is left",
        home.display()
    );
    let events: Vec<Value> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = events.last().unwrap();
    assert_eq!(last["event"], "tool_result", "{events:?}");
    assert_eq!(last["gen_ai.tool.call.id"], v["call_id"], "{last}");
}
