//! One sandboxed run in a fresh process, with no policy, service, trace or
//! result around it: what the one-shot CLI's sandbox work costs on its own,
//! layer by layer (`scripts/bench-floor.sh`).
//!
//! `one_shot [--root DIR] [--no-LAYER...] [--times] -- PROGRAM ARGS` runs
//! PROGRAM once under the supervisor setup the CLI's one-shot call uses,
//! with the project root DIR (default: the current directory), drops its
//! output and exits with its status. Each `--no-LAYER` turns one layer
//! off: `--no-namespaces` (the run's mount, IPC and network namespaces),
//! `--no-cgroups` (the run cgroup and its v1 joins), `--no-seccomp`,
//! `--no-landlock`. `--times` prints, on stderr, the microseconds each
//! phase took: the supervisor's setup, preparing the sandbox, the run's
//! own sandbox (`for_run`), the run (spawn to reaped), the sandbox's drop.
//! `--std` runs PROGRAM with `std::process::Command` instead, with no
//! supervisor at all: what any Rust program that spawns and waits pays.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use agent_exec_sandbox::{
    CancelToken, Layer, Namespaces, Requirement, Sandbox, SandboxConfig, Supervisor,
    SupervisorOptions, run,
};

#[path = "common/spec.rs"]
mod spec;

const USAGE: &str =
    "usage: one_shot [--root DIR] [--std | --no-LAYER...] [--times] -- PROGRAM ARGS";

fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let start = Instant::now();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let split = args.iter().position(|a| a == "--").ok_or(USAGE)?;
    let (flags, program) = (&args[..split], &args[split + 1..]);
    let first = program.first().ok_or(USAGE)?;
    let on = |name: &str| flags.iter().any(|f| f == name);
    let root = match flags.iter().position(|f| f == "--root") {
        Some(i) => PathBuf::from(flags.get(i + 1).ok_or(USAGE)?),
        None => std::env::current_dir()?,
    };
    if on("--std") {
        let status = std::process::Command::new(first)
            .args(&program[1..])
            .current_dir(&root)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .status()?;
        let code = status.code().unwrap_or(125).clamp(0, 255);
        return Ok(ExitCode::from(u8::try_from(code).unwrap_or(125)));
    }
    let mut marks: Vec<(&str, Instant)> = Vec::new();

    // The CLI's one-shot call uses the same options.
    let supervisor = Supervisor::init(SupervisorOptions::one_shot());
    marks.push(("init", Instant::now()));

    // System directories as a shipped policy grants them (all of /etc here,
    // where a policy grants a dozen of its entries), and its default limits.
    let system = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc"];
    let mut cfg = SandboxConfig::new(system.iter().map(PathBuf::from).collect());
    if on("--no-namespaces") {
        cfg.namespaces = Namespaces::Off;
    }
    if on("--no-cgroups") {
        cfg.require.set(Layer::Cgroup, Some(Requirement::Off));
        cfg.pids_max = 0;
        cfg.memory_max_bytes = 0;
    }
    if on("--no-seccomp") {
        cfg.require.set(Layer::Seccomp, Some(Requirement::Off));
    }
    if on("--no-landlock") {
        cfg.require.set(Layer::Landlock, Some(Requirement::Off));
    }
    let sandbox = Sandbox::prepare(&supervisor, &cfg, &root)?;
    marks.push(("prepare", Instant::now()));

    let argv: Vec<&str> = program.iter().map(String::as_str).collect();
    let spec = spec::short_run(&argv, &root, sandbox.for_run()?)?;
    marks.push(("for_run", Instant::now()));
    let out = run(spec, &CancelToken::new())?;
    marks.push(("run", Instant::now()));
    drop(sandbox);
    supervisor.wait_for_sweep();
    marks.push(("drop", Instant::now()));

    if on("--times") {
        let mut last = start;
        let phases: Vec<String> = marks
            .iter()
            .map(|(what, t)| {
                let us = t.duration_since(last).as_micros();
                last = *t;
                format!("{what} {us}")
            })
            .collect();
        eprintln!("{}", phases.join(" "));
    }
    let code = out.exit_code.unwrap_or(125).clamp(0, 255);
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(125)))
}
