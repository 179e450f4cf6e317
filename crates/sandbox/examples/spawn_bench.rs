//! The spawn path's cost: N runs of `/bin/true` through `run`, each in a
//! fresh run sandbox as the service does (`cargo run -p agent-exec-sandbox
//! --example spawn_bench -- 2000`, as root for the privilege drop). Prints
//! the total and the median, mean and p90 per run. `--keep-bounding-set`
//! leaves the spawning thread's capability bounding set alone, so every
//! privileged child drops it itself (as the daemon's main thread would).
//! `--no-namespaces` runs without the per-run mount and IPC namespaces,
//! `--compare-namespaces` alternates runs without and with them;
//! `--root-in DIR` makes the root in DIR instead of the temp directory
//! (under `/home`, say, where the run's namespace binds it back).
//! `--memory-max=BYTES` sets the per-run memory cap (0: none; default: the
//! configuration's default). `--fresh-cgroups` measures `for_run` alone
//! while every run is held, so each makes a new cgroup instead of taking
//! one from the pool.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agent_exec_sandbox::{
    CancelToken, Namespaces, Sandbox, SandboxConfig, Supervisor, SupervisorOptions, run,
};

#[path = "common/spec.rs"]
mod spec;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args
        .iter()
        .find_map(|a| a.parse().ok())
        .unwrap_or(2000)
        .max(1);
    let supervisor = Supervisor::init(SupervisorOptions {
        drop_bounding_set: !args.iter().any(|a| a == "--keep-bounding-set"),
        ..SupervisorOptions::default()
    });
    let parent = args
        .iter()
        .position(|a| a == "--root-in")
        .and_then(|i| args.get(i + 1))
        .map_or_else(std::env::temp_dir, PathBuf::from);
    let root = parent.join(format!("ae-spawn-bench-{}", std::process::id()));
    std::fs::create_dir_all(&root)?;
    if nix::unistd::Uid::effective().is_root() {
        // The default child user of a root supervisor must own the root.
        std::os::unix::fs::chown(&root, Some(65534), Some(65534))?;
    }
    let system = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"];
    let mut base = SandboxConfig::new(system.iter().map(PathBuf::from).collect());
    if let Some(m) = args.iter().find_map(|a| a.strip_prefix("--memory-max=")) {
        base.memory_max_bytes = m.parse()?;
    }
    let with = |namespaces| SandboxConfig {
        namespaces,
        ..base.clone()
    };
    let configs = if args.iter().any(|a| a == "--compare-namespaces") {
        vec![with(Namespaces::Off), with(Namespaces::Auto)]
    } else if args.iter().any(|a| a == "--no-namespaces") {
        vec![with(Namespaces::Off)]
    } else {
        vec![base.clone()]
    };
    let sandboxes = configs
        .iter()
        .map(|cfg| Sandbox::prepare(&supervisor, cfg, &root))
        .collect::<Result<Vec<_>, _>>()?;
    if args.iter().any(|a| a == "--fresh-cgroups") {
        let mut held = Vec::with_capacity(n);
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            held.push(sandboxes[0].for_run()?);
            times.push(t.elapsed());
        }
        report("for_run", &mut times);
        drop(held);
        std::fs::remove_dir_all(&root)?;
        return Ok(());
    }
    let cancel = CancelToken::new();
    // Interleaved, so a burst of load on the host hits every
    // configuration alike.
    let mut times = vec![Vec::with_capacity(n); sandboxes.len()];
    for _ in 0..n {
        for (sb, t) in sandboxes.iter().zip(&mut times) {
            t.push(one_run(sb, &root, &cancel)?);
        }
    }
    for (sb, mut t) in sandboxes.iter().zip(times) {
        let ns = sb.summary().limits.iter().any(|l| l == "mount_namespace");
        report(&format!("namespaces {ns} runs"), &mut t);
    }
    std::fs::remove_dir_all(&root)?;
    Ok(())
}

/// Prints the count, the total and the median, mean and p90 of `times`.
fn report(what: &str, times: &mut [Duration]) {
    let n = times.len();
    times.sort();
    let total: Duration = times.iter().sum();
    println!(
        "{what} {n} total {:.3}s mean {:.1}us median {:.1}us p90 {:.1}us",
        total.as_secs_f64(),
        total.as_secs_f64() * 1e6 / n as f64,
        times[n / 2].as_secs_f64() * 1e6,
        times[n * 9 / 10].as_secs_f64() * 1e6
    );
}

/// One run of `/bin/true` in a fresh run sandbox of `sb`, timed from
/// `for_run` to the end of `run`.
fn one_run(
    sb: &Sandbox,
    root: &std::path::Path,
    cancel: &CancelToken,
) -> Result<Duration, Box<dyn std::error::Error>> {
    let t = Instant::now();
    let spec = spec::short_run(&["/bin/true"], root, sb.for_run()?)?;
    let out = run(spec, cancel)?;
    if out.exit_code != Some(0) {
        return Err(format!("/bin/true failed: {out:?}").into());
    }
    Ok(t.elapsed())
}
