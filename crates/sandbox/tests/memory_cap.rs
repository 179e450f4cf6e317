//! The per-run memory cap, by its effect: processes of one run that
//! together pass the cap are killed by the kernel, the outcome names the
//! cap, the host's available memory barely moves and nothing of the run
//! survives; a run under the cap (in the same reused cgroup) is untouched.

mod common;

use std::ffi::CString;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use agent_exec_sandbox::{MemoryLimitHit, SandboxConfig};
use common::*;

const MIB: u64 = 1 << 20;
const CAP: u64 = 256 * MIB;
/// How much the host's available memory may move for other reasons while
/// a run lasts (other processes of this machine come and go): well below
/// the 1.8 GiB the capped run asks for.
const SLACK: u64 = 768 * MIB;

fn mem_available() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap()
        * 1024
}

/// `n` Python processes of the run, each holding `mib` MiB it wrote to,
/// for `hold` seconds; the shell waits for all of them.
fn hogs(n: usize, mib: u64, hold: f64) -> String {
    let py = format!(
        "import time; b = b'x' * ({mib} << 20); time.sleep({hold}); print('held', len(b) >> 20)"
    );
    let mut s = String::new();
    for _ in 0..n {
        s.push_str(&format!("{PYTHON} -c \"{py}\" & "));
    }
    s.push_str("wait; echo done");
    s
}

/// The peak memory use the run's own cgroup recorded, found through the
/// child's `/proc/self/cgroup` as it printed it.
fn cgroup_peak(proc_self_cgroup: &str) -> Option<u64> {
    for line in proc_self_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, ctl, path) = (parts.next()?, parts.next()?, parts.next()?);
        let candidates = match ctl {
            "memory" => vec![format!(
                "/sys/fs/cgroup/memory{path}/memory.max_usage_in_bytes"
            )],
            "" => vec![
                format!("/sys/fs/cgroup{path}/memory.peak"),
                format!("/sys/fs/cgroup/unified{path}/memory.peak"),
            ],
            _ => vec![],
        };
        for c in candidates {
            if let Ok(v) = std::fs::read_to_string(&c)
                && let Ok(n) = v.trim().parse()
            {
                return Some(n);
            }
        }
    }
    None
}

#[test]
fn a_run_past_its_cap_is_killed_and_named_and_the_host_keeps_its_memory() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "the sandbox tests run as root"
    );
    let r = root();
    let sb = sandbox_with(
        &r.path,
        SandboxConfig {
            memory_max_bytes: CAP,
            ..config()
        },
    );
    let run = Arc::new(sb.for_run().unwrap());
    if !require_kernel_feature("a cgroup memory controller", run.memory_max().is_some()) {
        assert!(
            run.summary()
                .not_applied
                .iter()
                .any(|n| n == "cgroup_memory"),
            "a missing cap is reported: {:?}",
            run.summary()
        );
        return;
    }
    assert_eq!(run.memory_max(), Some(CAP));
    assert!(
        run.summary()
            .limits
            .contains(&format!("cgroup_memory_max={CAP}")),
        "{:?}",
        run.summary()
    );

    let mark = marker();
    // Three processes of 600 MiB each: 1.8 GiB without a cap, well past
    // 256 MiB together and each alone.
    // The shell's own builtin reads its cgroup file: a grandchild such as
    // `cat` may not read its own /proc/self under Landlock.
    let script = format!(
        "while read -r l; do echo \"$l\"; done < /proc/self/cgroup; {}",
        hogs(3, 600, 2.0)
    );
    let mut spec = spec(&run, &r.path, &["/bin/sh", "-c", &script]);
    spec.env
        .push(CString::new(format!("{MARK_ENV}={mark}")).unwrap());

    let before = mem_available();
    let lowest = Arc::new(AtomicU64::new(before));
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (lowest, done) = (Arc::clone(&lowest), Arc::clone(&done));
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                lowest.fetch_min(mem_available(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let outcome = try_exec(spec).unwrap();
    done.store(true, Ordering::Relaxed);
    watcher.join().unwrap();
    let after = mem_available();

    assert_eq!(
        outcome.memory_limit.map(|m| m.max_bytes),
        Some(CAP),
        "{outcome:?}"
    );
    let MemoryLimitHit { oom_kills, .. } = outcome.memory_limit.unwrap();
    assert!(oom_kills >= 1, "{outcome:?}");
    let stdout = &outcome.stdout.text;
    assert!(
        stdout.matches("held").count() < 3,
        "not every process kept its memory: {stdout}"
    );
    // The run's own cgroup never held more than the cap...
    let peak = cgroup_peak(stdout).expect("the run's cgroup records its peak");
    assert!(peak <= CAP, "peak {peak} over the cap {CAP}");
    // ...and the host saw at most the cap go (with room for the other
    // processes of this machine), where the run asked for 1.8 GiB.
    let drop = before.saturating_sub(lowest.load(Ordering::Relaxed));
    assert!(
        drop < CAP + SLACK,
        "MemAvailable fell by {} MiB during the run",
        drop / MIB
    );
    assert!(
        after + SLACK > before,
        "MemAvailable {} MiB after, {} MiB before",
        after / MIB,
        before / MIB
    );
    assert!(
        procs_with(&mark).is_empty(),
        "a process of the run survived"
    );
    drop_run(run);

    // The next run of the same sandbox (which may get the same cgroup back
    // from the pool) stays under the cap: unaffected, and not blamed for
    // the kills before it.
    let o = run_sb_script(&sb, &r.path, &hogs(3, 30, 0.2));
    assert_eq!(o.0.exit_code, Some(0), "{:?}", o.0);
    assert_eq!(o.0.stdout.text.matches("held 30").count(), 3, "{:?}", o.0);
    assert_eq!(o.0.memory_limit, None, "{:?}", o.0);
}

fn drop_run(run: Arc<agent_exec_sandbox::RunSandbox>) {
    assert_eq!(Arc::strong_count(&run), 1);
    drop(run);
}

fn run_sb_script(
    sb: &agent_exec_sandbox::Sandbox,
    root: &std::path::Path,
    script: &str,
) -> (
    agent_exec_sandbox::ExecOutcome,
    Arc<agent_exec_sandbox::RunSandbox>,
) {
    let run = Arc::new(sb.for_run().unwrap());
    let outcome = try_exec(spec(&run, root, &["/bin/sh", "-c", script])).unwrap();
    (outcome, run)
}

#[test]
fn a_run_under_its_cap_is_unaffected() {
    let r = root();
    let sb = sandbox_with(
        &r.path,
        SandboxConfig {
            memory_max_bytes: CAP,
            ..config()
        },
    );
    let (o, run) = run_sb_script(&sb, &r.path, &hogs(3, 50, 0.5));
    if !require_kernel_feature("a cgroup memory controller", run.memory_max().is_some()) {
        return;
    }
    assert_eq!(o.exit_code, Some(0), "{o:?}");
    assert_eq!(o.stdout.text.matches("held 50").count(), 3, "{o:?}");
    assert!(o.stdout.text.contains("done"), "{o:?}");
    assert_eq!(o.memory_limit, None, "{o:?}");
}
