//! `run` end to end without a sandbox (the exec machinery alone, which
//! only the crate itself can start): capture, stdin, limits, timeouts,
//! cancellation, and that no descendant outlives the result. The runs
//! inside a real sandbox are the crate's integration tests.

use std::ffi::CString;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{Pid, getpgrp, getppid, getsid};

use super::io::wait_readable;
use super::kill::{Owner, owner};
use super::*;
use crate::supervisor::stat_fields;
use crate::supervisor::{Supervisor, SupervisorOptions};

/// The exec machinery's tests need the process to be a subreaper (the
/// orphan sweep), and nothing else of the supervisor's setup.
fn supervisor() -> &'static Supervisor {
    static SUPERVISOR: OnceLock<Supervisor> = OnceLock::new();
    SUPERVISOR.get_or_init(|| {
        Supervisor::init(SupervisorOptions {
            subreaper: true,
            ..SupervisorOptions::none()
        })
    })
}

/// `run_job` in a process set up as a supervisor.
fn run(job: Job, cancel: &CancelToken) -> Result<ExecOutcome, ExecError> {
    assert!(supervisor().is_subreaper());
    run_job(job, cancel)
}

/// Runs the test `name` (its path in this crate) alone in a fresh process
/// of this test binary, and fails if it fails there. Returns true in that
/// fresh process, where the caller then runs the test's body, and false
/// in the calling one.
fn in_own_process(name: &str) -> bool {
    const ENV: &str = "AGENT_EXEC_SANDBOX_TEST_ALONE";
    if std::env::var(ENV).is_ok_and(|v| v == name) {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(ENV, name)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{name}, alone in its own process: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

/// Name of the variable every test child carries, so its processes (and
/// their descendants, which inherit it) can be found in /proc.
const MARK_ENV: &str = "EXEC_TEST_MARK";

/// A marker unique to this test run and call.
fn marker() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "agent-exec-test-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// `sh -c script` without a sandbox, with `mark` in the environment;
/// generous limits.
fn sh(script: &str, mark: &str) -> Job {
    Job {
        program: c("/bin/sh"),
        argv: vec![c("sh"), c("-c"), c(script)],
        env: vec![
            c("PATH=/usr/local/bin:/usr/bin:/bin"),
            c(&format!("{MARK_ENV}={mark}")),
        ],
        cwd: c("/"),
        sandbox: None,
        stdin: None,
        timeout: Duration::from_secs(60),
        kill_grace: Duration::from_millis(500),
        drain: Duration::from_millis(500),
        output_chars: 10_000,
        hard_limit_bytes: 0,
    }
}

#[path = "../../tests/common/procs.rs"]
mod procs;
use procs::procs_with;

/// The process's peak resident set size in KiB.
fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Children of this process (all threads), with their state letter.
fn own_children() -> Vec<(i32, char)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let text = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        for pid in text
            .split_ascii_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].trim_start().chars().next())
                .unwrap_or('?');
            out.push((pid, state));
        }
    }
    out
}

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
    // Our own environment has no run marker: nobody's, as far as it says.
    assert!(matches!(
        owner(me, b"AGENT_EXEC_RUN_ID=none", &mut buf),
        Owner::Unknown
    ));
    assert!(matches!(owner(-1, b"x", &mut buf), Owner::Unknown));
    // A process with a run's marker is that run's, and another's for
    // every other run.
    let mut child = std::process::Command::new("/bin/sleep")
        .arg("30")
        .env("AGENT_EXEC_RUN_ID", "1.7")
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let until = Instant::now() + Duration::from_secs(5);
    while matches!(
        owner(pid, b"AGENT_EXEC_RUN_ID=1.7", &mut buf),
        Owner::Unknown
    ) {
        assert!(
            Instant::now() < until,
            "the child's environment never showed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let this = matches!(
        owner(pid, b"AGENT_EXEC_RUN_ID=1.7", &mut buf),
        Owner::ThisRun
    );
    let other = matches!(owner(pid, b"AGENT_EXEC_RUN_ID=1.8", &mut buf), Owner::Other);
    let _ = child.kill();
    let _ = child.wait();
    assert!(this && other);
}

/// Reads the pid a test child wrote to `path`.
fn read_pid(path: &std::path::Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Whether `pid` is alive and still carries `mark` (a reused pid would
/// not).
fn alive_with(pid: i32, mark: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|b| b.windows(mark.len()).any(|w| w == mark.as_bytes()))
        .unwrap_or(false)
}

#[test]
fn small_output_is_captured_exactly() {
    let m = marker();
    let out = run(
        sh("printf 'hello\\nworld\\n'; printf 'oops' >&2", &m),
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(out.termination, Termination::Exited(0));
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.signal, None);
    assert_eq!(out.stdout.text, "hello\nworld\n");
    assert_eq!(out.stdout.bytes, 12);
    assert!(!out.stdout.truncated);
    assert_eq!(out.stderr.text, "oops");
    assert_eq!(out.stderr.bytes, 4);
}

#[test]
fn stdin_text_reaches_the_child() {
    let m = marker();
    let mut spec = sh("tr a-z A-Z", &m);
    spec.stdin = Some(b"abc\ndef\n".to_vec());
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.stdout.text, "ABC\nDEF\n");
    assert_eq!(out.termination, Termination::Exited(0));
}

#[test]
fn without_stdin_the_child_reads_eof() {
    let m = marker();
    let out = run(sh("cat; echo end", &m), &CancelToken::new()).unwrap();
    assert_eq!(out.stdout.text, "end\n");
}

#[test]
fn large_stdin_and_output_do_not_deadlock() {
    // `cat` writes back as it reads: with 8 MB each way both pipes are
    // full many times over, which deadlocks a write-then-read supervisor.
    let m = marker();
    let mut spec = sh("cat; cat >&2 </dev/null", &m);
    let data: Vec<u8> = (0..8_000_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    spec.stdin = Some(data.clone());
    spec.output_chars = 100;
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.termination, Termination::Exited(0));
    assert_eq!(out.stdout.bytes, 8_000_000);
    assert!(
        out.stdout
            .text
            .starts_with(std::str::from_utf8(&data[..50]).unwrap())
    );
    assert!(
        out.stdout
            .text
            .ends_with(std::str::from_utf8(&data[data.len() - 50..]).unwrap())
    );
}

#[test]
fn a_child_that_ignores_stdin_does_not_block_the_run() {
    let m = marker();
    let mut spec = sh("exec 0<&-; echo closed", &m);
    spec.stdin = Some(vec![b'x'; 4_000_000]);
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.termination, Termination::Exited(0));
    assert_eq!(out.stdout.text, "closed\n");
}

#[test]
fn both_streams_are_drained_concurrently() {
    let m = marker();
    let mut spec = sh(
        "head -c 3000000 /dev/zero >&2 & head -c 5000000 /dev/zero; wait",
        &m,
    );
    spec.output_chars = 10;
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.termination, Termination::Exited(0));
    assert_eq!(out.stdout.bytes, 5_000_000);
    assert_eq!(out.stderr.bytes, 3_000_000);
    assert!(out.stdout.text.contains("[... 4999990 bytes omitted ...]"));
    assert!(out.stderr.text.contains("[... 2999990 bytes omitted ...]"));
}

#[test]
fn head_and_tail_keep_whole_multibyte_characters() {
    let m = marker();
    // 3-byte euro signs with a 7-character budget: 4 + 3 characters,
    // the byte budgets cut inside characters.
    let mut spec = sh(
        "i=0; while [ $i -lt 2000 ]; do printf '\\342\\202\\254'; i=$((i+1)); done",
        &m,
    );
    spec.output_chars = 7;
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.stdout.bytes, 6000);
    assert!(out.stdout.truncated);
    assert_eq!(out.stdout.text, "€€€€\n[... 5979 bytes omitted ...]\n€€€");
}

#[test]
fn invalid_utf8_is_replaced_and_counted() {
    let m = marker();
    let out = run(sh("printf 'a\\377b\\303'", &m), &CancelToken::new()).unwrap();
    assert_eq!(out.stdout.text, "a\u{FFFD}b\u{FFFD}");
    assert_eq!(out.stdout.bytes, 4);
    assert!(!out.stdout.truncated);
}

#[test]
fn nonzero_exit_is_reported() {
    let m = marker();
    let out = run(sh("echo partial; exit 3", &m), &CancelToken::new()).unwrap();
    assert_eq!(out.termination, Termination::Exited(3));
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(out.signal, None);
    assert_eq!(out.stdout.text, "partial\n");
}

#[test]
fn death_by_signal_is_reported() {
    let m = marker();
    let out = run(sh("kill -9 $$", &m), &CancelToken::new()).unwrap();
    assert_eq!(out.termination, Termination::Signaled(9));
    assert_eq!(out.signal, Some(9));
    assert_eq!(out.exit_code, None);
}

#[test]
fn a_missing_program_is_a_spawn_error() {
    let m = marker();
    let mut spec = sh("true", &m);
    spec.program = std::ffi::CString::new("/nonexistent/agent-exec-test").unwrap();
    assert!(matches!(
        run(spec, &CancelToken::new()),
        Err(ExecError::Spawn(_))
    ));
}

#[test]
fn the_hard_limit_kills_a_child_writing_forever() {
    let m = marker();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let mut spec = sh(
        &format!(
            "echo $$ > {}; while :; do echo {m}; done",
            pidfile.display()
        ),
        &m,
    );
    spec.hard_limit_bytes = 1_000_000;
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.termination, Termination::OutputLimit);
    assert_eq!(out.signal, Some(libc::SIGKILL));
    let total = out.stdout.bytes + out.stderr.bytes;
    assert!(total > 1_000_000, "{total}");
    // One read past the limit at most, not a drain of everything.
    assert!(total < 2_000_000, "{total}");
    assert!(!alive_with(read_pid(&pidfile), &m));
    assert_eq!(procs_with(&m), Vec::<i32>::new());
}

#[test]
fn the_hard_limit_counts_both_streams() {
    // Equal lines on both streams: neither reaches the limit alone before
    // their sum does (the imbalance is bounded by one pipe's capacity).
    let m = marker();
    let mut spec = sh(&format!("while :; do echo {m}; echo {m} >&2; done"), &m);
    spec.hard_limit_bytes = 1_000_000;
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.termination, Termination::OutputLimit);
    assert!(out.stdout.bytes + out.stderr.bytes > 1_000_000);
    assert!(out.stdout.bytes < 1_000_000 && out.stderr.bytes < 1_000_000);
    assert!(procs_with(&m).is_empty());
}

#[test]
fn sleep_past_the_timeout_is_killed() {
    let m = marker();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let mut spec = sh(
        &format!(
            "sh -c 'echo $$ > {}; sleep 300' {m}; echo not-reached",
            pidfile.display()
        ),
        &m,
    );
    spec.timeout = Duration::from_millis(500);
    spec.kill_grace = Duration::from_millis(200);
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.termination, Termination::TimedOut);
    assert_eq!(out.signal, Some(libc::SIGTERM));
    assert!(!out.stdout.text.contains("not-reached"));
    assert!(!alive_with(read_pid(&pidfile), &m));
    assert_eq!(procs_with(&m), Vec::<i32>::new());
}

#[test]
fn sigterm_ignored_means_sigkill_after_the_grace() {
    let m = marker();
    let mut spec = sh("trap '' TERM; echo ready; while :; do sleep 1; done", &m);
    spec.timeout = Duration::from_millis(300);
    spec.kill_grace = Duration::from_millis(200);
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.termination, Termination::TimedOut);
    assert_eq!(out.signal, Some(libc::SIGKILL));
    assert_eq!(out.stdout.text, "ready\n");
    assert_eq!(procs_with(&m), Vec::<i32>::new());
}

#[test]
fn a_child_exiting_on_sigterm_ends_the_run_before_the_grace() {
    // The grace is far longer than any test timeout: if the run waited for
    // it, the outcome would be a SIGKILL, not the child's own exit code.
    let m = marker();
    let mut spec = sh(
        "trap 'echo bye; exit 7' TERM; while :; do sleep 0.05; done",
        &m,
    );
    spec.timeout = Duration::from_millis(300);
    spec.kill_grace = Duration::from_secs(3600);
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.termination, Termination::TimedOut);
    assert_eq!(out.exit_code, Some(7));
    assert_eq!(out.stdout.text, "bye\n");
}

#[test]
fn setsid_double_forked_grandchild_is_gone_after_the_result() {
    let m = marker();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let p = pidfile.display();
    // The subshell exits at once (double fork), the grandchild leaves the
    // session and the process group, and closes the run's pipes.
    let script = format!(
        "(setsid sh -c 'echo $$ > {p}.tmp; mv {p}.tmp {p}; sleep 300; : {m}' \
         >/dev/null 2>&1 </dev/null &); \
         while [ ! -e {p} ]; do sleep 0.01; done; echo started"
    );
    let out = run(sh(&script, &m), &CancelToken::new()).unwrap();
    assert_eq!(out.termination, Termination::Exited(0));
    assert_eq!(out.stdout.text, "started\n");
    let pid = read_pid(&pidfile);
    assert!(!alive_with(pid, &m), "grandchild {pid} survived");
    assert_eq!(procs_with(&m), Vec::<i32>::new());
}

#[test]
fn nested_escapes_are_all_killed() {
    // Three generations, each leaving the session of its parent.
    let m = marker();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let script = format!(
        "setsid sh -c \"setsid sh -c 'echo \\$\\$ > {d}/c.tmp; mv {d}/c.tmp {d}/c; sleep 300' & \
         echo \\$\\$ > {d}/b; sleep 300\" >/dev/null 2>&1 & \
         while [ ! -e {d}/c ]; do sleep 0.01; done; echo started"
    );
    let out = run(sh(&script, &m), &CancelToken::new()).unwrap();
    assert_eq!(out.stdout.text, "started\n");
    for f in ["b", "c"] {
        let pid = read_pid(&dir.path().join(f));
        assert!(!alive_with(pid, &m), "{f} ({pid}) survived");
    }
    assert_eq!(procs_with(&m), Vec::<i32>::new());
}

#[test]
fn a_grandchild_holding_stdout_does_not_hang_the_result() {
    // With a 60 s timeout, only the drain deadline can end this run with
    // the main child's own exit status.
    let m = marker();
    let mut spec = sh("sleep 300 & echo done", &m);
    spec.drain = Duration::from_millis(300);
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.termination, Termination::Exited(0));
    assert_eq!(out.stdout.text, "done\n");
    assert_eq!(procs_with(&m), Vec::<i32>::new());
}

#[test]
fn output_written_during_the_drain_is_kept() {
    let m = marker();
    let mut spec = sh("(sleep 0.2; echo late) & echo early", &m);
    spec.drain = Duration::from_secs(30);
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.stdout.text, "early\nlate\n");
    assert_eq!(out.termination, Termination::Exited(0));
}

#[test]
fn background_processes_without_the_pipes_are_killed() {
    let m = marker();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let script = format!(
        "sh -c 'echo $$ > {p}; exec sleep 300' >/dev/null 2>&1 & \
         while [ ! -s {p} ]; do sleep 0.01; done",
        p = pidfile.display()
    );
    let out = run(sh(&script, &m), &CancelToken::new()).unwrap();
    assert_eq!(out.termination, Termination::Exited(0));
    assert!(!alive_with(read_pid(&pidfile), &m));
    assert_eq!(procs_with(&m), Vec::<i32>::new());
}

#[test]
fn cancel_from_another_thread_stops_the_run() {
    let m = marker();
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let token = CancelToken::new();
    let t = token.clone();
    let ready2 = ready.clone();
    let canceller = std::thread::spawn(move || {
        while !ready2.exists() {
            std::thread::sleep(Duration::from_millis(5));
        }
        t.cancel();
    });
    let script = format!("touch {}; sleep 300", ready.display());
    let out = run(sh(&script, &m), &token).unwrap();
    canceller.join().unwrap();
    assert_eq!(out.termination, Termination::Cancelled);
    assert_eq!(procs_with(&m), Vec::<i32>::new());
}

#[test]
fn a_cancelled_token_stops_the_run_at_once() {
    let m = marker();
    let token = CancelToken::new();
    token.cancel();
    let out = run(sh("echo x; sleep 300", &m), &token).unwrap();
    assert_eq!(out.termination, Termination::Cancelled);
    assert!(procs_with(&m).is_empty());
}

#[test]
fn concurrent_runs_leave_each_others_orphans_alone() {
    // Run B leaves an orphan (re-parented to this process) that must
    // finish its work while run A, in another thread, ends many times and
    // sweeps its own orphans.
    let mb = marker();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("b-result");
    let script_b = format!(
        "(setsid sh -c 'sleep 1; echo B-ok > {f}' >/dev/null 2>&1 &); sleep 3; cat {f}",
        f = f.display()
    );
    let b = std::thread::spawn(move || run(sh(&script_b, &mb), &CancelToken::new()).unwrap());
    let a = std::thread::spawn(|| {
        for _ in 0..20 {
            let ma = marker();
            let out = run(
                sh("(setsid sleep 300 >/dev/null 2>&1 &); echo a", &ma),
                &CancelToken::new(),
            )
            .unwrap();
            assert_eq!(out.stdout.text, "a\n");
            assert!(procs_with(&ma).is_empty());
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    a.join().unwrap();
    let out_b = b.join().unwrap();
    assert_eq!(out_b.termination, Termination::Exited(0));
    assert_eq!(out_b.stdout.text, "B-ok\n");
}

#[test]
fn orphans_caught_mid_exec_are_still_killed() {
    // The orphan is often in the middle of exec'ing `sleep` when the sweep
    // reads its environment, which then reads as empty for a moment.
    for _ in 0..40 {
        let m = marker();
        let out = run(
            sh("(setsid sleep 300 >/dev/null 2>&1 &); echo a", &m),
            &CancelToken::new(),
        )
        .unwrap();
        assert_eq!(out.stdout.text, "a\n");
        assert_eq!(procs_with(&m), Vec::<i32>::new());
    }
}

#[test]
fn the_hard_limit_stops_a_writer_that_left_the_session() {
    let m = marker();
    let mut spec = sh(
        &format!("setsid sh -c 'while :; do echo {m}; done' & wait"),
        &m,
    );
    spec.hard_limit_bytes = 100_000;
    let out = run(spec, &CancelToken::new()).unwrap();
    assert_eq!(out.termination, Termination::OutputLimit);
    assert!(out.stdout.bytes > 100_000);
    assert_eq!(procs_with(&m), Vec::<i32>::new());
}

#[test]
fn killed_descendants_are_reaped() {
    // Alone in its process: every child of it belongs to the runs below.
    if !in_own_process("exec::tests::killed_descendants_are_reaped") {
        return;
    }
    for script in [
        // Orphans killed by the sweep.
        "(setsid sleep 300 >/dev/null 2>&1 &); (sleep 300 >/dev/null 2>&1 &); echo ok",
        // An orphan that exits by itself inside the run's session.
        "(sh -c 'exit 0' &); sleep 0.1; echo ok",
        // Orphans that left the session and exited by themselves before the
        // run ended: nothing attributes them to the run any more.
        "for i in 1 2 3 4 5 6 7 8; do (setsid sh -c 'exit 0' &); done; sleep 0.3; echo ok",
        // A timeout with a tree of background jobs.
        "sleep 300 & sleep 300 & (sleep 300 &); echo ok; sleep 300",
    ] {
        let m = marker();
        let mut spec = sh(script, &m);
        spec.timeout = std::time::Duration::from_secs(2);
        let out = run(spec, &CancelToken::new()).unwrap();
        assert_eq!(out.stdout.text, "ok\n", "{script}");
        assert!(matches!(
            out.termination,
            Termination::Exited(0) | Termination::TimedOut
        ));
        assert!(procs_with(&m).is_empty(), "{script}");
        assert_eq!(own_children(), Vec::new(), "{script}");
    }
}

#[test]
fn hundred_megabytes_are_counted_but_not_kept() {
    // Alone in its process: the peak RSS belongs to this run alone.
    if !in_own_process("exec::tests::hundred_megabytes_are_counted_but_not_kept") {
        return;
    }
    let m = marker();
    let mut spec = sh(
        "head -c 100000000 /dev/zero | tr '\\0' 'x'; head -c 30000000 /dev/zero | tr '\\0' 'y' >&2",
        &m,
    );
    spec.output_chars = 10_000;
    let before = vm_hwm_kib();
    let out = run(spec, &CancelToken::new()).unwrap();
    let after = vm_hwm_kib();

    assert_eq!(out.termination, Termination::Exited(0));
    assert_eq!(out.stdout.bytes, 100_000_000);
    assert_eq!(out.stderr.bytes, 30_000_000);
    assert!(out.stdout.truncated && out.stderr.truncated);
    let x = "x".repeat(5000);
    assert_eq!(
        out.stdout.text,
        format!("{x}\n[... 99990000 bytes omitted ...]\n{x}")
    );
    let y = "y".repeat(5000);
    assert_eq!(
        out.stderr.text,
        format!("{y}\n[... 29990000 bytes omitted ...]\n{y}")
    );
    // Holding the output would take 130 MB; the capture needs well under
    // 1 MB. The bound is loose for allocator and test-harness noise.
    assert!(
        after.saturating_sub(before) < 32 * 1024,
        "peak RSS grew by {} KiB",
        after - before
    );
}

#[test]
fn an_orphan_that_exits_after_its_run_is_reaped_by_reap_adopted() {
    // Alone in its process: every child of it belongs to the run below.
    if !in_own_process("exec::tests::an_orphan_that_exits_after_its_run_is_reaped_by_reap_adopted")
    {
        return;
    }
    // Without a cgroup and without the run marker (`env -i`), the orphan
    // cannot be attributed once it has dropped the marker (the run waits
    // for that), so it outlives its run and dies later: only a reaper of
    // adopted children can take its status.
    let m = marker();
    let out = run(
        sh(
            "(setsid env -i sh -c 'sleep 1' >/dev/null 2>&1 &); sleep 0.3; echo ok",
            &m,
        ),
        &CancelToken::new(),
    )
    .unwrap();
    assert_eq!(out.stdout.text, "ok\n");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !own_children().iter().any(|(_, state)| *state == 'Z') {
        assert!(
            std::time::Instant::now() < deadline,
            "the orphan never died: {:?}",
            own_children()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(supervisor().reap_adopted(), 1);
    assert_eq!(own_children(), Vec::new());
}

#[test]
fn a_child_the_process_keeps_for_itself_is_left_to_it() {
    // Alone in its process: its children are this test's.
    if !in_own_process("exec::tests::a_child_the_process_keeps_for_itself_is_left_to_it") {
        return;
    }
    assert!(supervisor().is_subreaper());
    // An orphan in a session of its own, adopted by this process (the
    // subreaper), that dies soon: a zombie `reap_adopted` would take, were
    // it not declared the process's own.
    let out = std::process::Command::new("sh")
        .args([
            "-c",
            "setsid sh -c 'sleep 0.2; exit 7' </dev/null >/dev/null 2>&1 & echo $!",
        ])
        .output()
        .unwrap();
    let pid: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    supervisor().keep_own_child(u32::try_from(pid).unwrap());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !own_children().contains(&(pid, 'Z')) {
        assert!(std::time::Instant::now() < deadline, "{:?}", own_children());
        std::thread::sleep(Duration::from_millis(10));
    }
    // Neither a run's end (its orphan sweep and reaping) nor a reaper of
    // adopted children touches it.
    let out = run(sh("echo ok", &marker()), &CancelToken::new()).unwrap();
    assert_eq!(out.stdout.text, "ok\n");
    assert_eq!(supervisor().reap_adopted(), 0);
    assert!(own_children().contains(&(pid, 'Z')));
    // Its status is still its starter's.
    assert_eq!(
        waitpid(Pid::from_raw(pid), None).unwrap(),
        WaitStatus::Exited(Pid::from_raw(pid), 7)
    );
}
