//! Shared helpers of the exec tests: children built without a sandbox, and
//! process-table checks through /proc.

#![allow(dead_code)]

use std::ffi::CString;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_exec::exec::ExecSpec;
use agent_exec::spawn::ChildSpec;

/// Name of the variable every test child carries, so its processes (and
/// their descendants, which inherit it) can be found in /proc.
pub const MARK_ENV: &str = "EXEC_TEST_MARK";

/// A marker unique to this test run and call.
pub fn marker() -> String {
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

/// `sh -c script`, with `mark` in the environment; generous limits.
pub fn sh(script: &str, mark: &str) -> ExecSpec {
    ExecSpec {
        child: ChildSpec {
            program: c("/bin/sh"),
            argv: vec![c("sh"), c("-c"), c(script)],
            env: vec![
                c("PATH=/usr/local/bin:/usr/bin:/bin"),
                c(&format!("{MARK_ENV}={mark}")),
            ],
            cwd: c("/"),
            stdin_pipe: false,
            sandbox: None,
        },
        stdin: None,
        timeout: Duration::from_secs(60),
        kill_grace: Duration::from_millis(500),
        drain: Duration::from_millis(500),
        output_chars: 10_000,
        hard_limit_bytes: 0,
    }
}

/// Live processes whose command line or environment contains `mark`
/// (zombies have neither, so they do not count here).
pub fn procs_with(mark: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        for what in ["cmdline", "environ"] {
            if let Ok(bytes) = std::fs::read(format!("/proc/{pid}/{what}"))
                && bytes.windows(mark.len()).any(|w| w == mark.as_bytes())
            {
                found.push(pid);
                break;
            }
        }
    }
    found
}

/// Asserts that something carrying `mark` is running right now, so the
/// "gone afterwards" checks cannot pass vacuously.
pub fn wait_until_running(mark: &str) {
    for _ in 0..500 {
        if !procs_with(mark).is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no process with {mark} ever appeared");
}

/// The process's peak resident set size in KiB.
pub fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Children of this process (all threads), with their state letter.
pub fn own_children() -> Vec<(i32, char)> {
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
