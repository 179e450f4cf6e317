//! Shared helpers of the sandbox's integration tests: a process set up as
//! a supervisor, a temp root the child user owns, the configuration a
//! policy without a `[sandbox]` section asks for, a runner on the public
//! `run`, and process-table checks through /proc.
#![allow(dead_code)]

mod kernel;
mod procs;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_exec_sandbox::{
    CancelToken, ExecError, ExecOutcome, ExecSpec, RunSandbox, Sandbox, SandboxConfig, SpawnError,
    Supervisor, SupervisorOptions, Termination,
};

// Not every test binary has a test that needs a kernel feature.
#[allow(unused_imports)]
pub use kernel::require_kernel_feature;

pub const PYTHON: &str = "/usr/bin/python3";
pub const NOBODY: u32 = 65534;

/// The process set up as a supervisor once: stdio, subreaper and the sweep
/// of dead supervisors' leftovers. The test threads keep their bounding
/// set, so the children's own drop of it is what the tests see.
pub fn supervisor() -> &'static Supervisor {
    static SUPERVISOR: OnceLock<Supervisor> = OnceLock::new();
    SUPERVISOR.get_or_init(|| {
        Supervisor::init(SupervisorOptions {
            drop_bounding_set: false,
            ..SupervisorOptions::default()
        })
    })
}

/// As [`supervisor`], without children made ahead: each run's child is
/// spawned when the run starts, by the run's thread, from what the run
/// prepared (for tests of what a run gets from the pools, in order).
pub fn supervisor_spawning_each_run() -> &'static Supervisor {
    static SUPERVISOR: OnceLock<Supervisor> = OnceLock::new();
    SUPERVISOR.get_or_init(|| {
        Supervisor::init(SupervisorOptions {
            drop_bounding_set: false,
            children_ahead: false,
            ..SupervisorOptions::default()
        })
    })
}

/// The sandbox configuration of a policy that leaves `[sandbox]` at its
/// defaults, with the policy crate's system directories (the one list).
pub fn config() -> SandboxConfig {
    SandboxConfig::new(
        agent_exec_policy::SYSTEM_READ_DIRS
            .iter()
            .map(PathBuf::from)
            .collect(),
    )
}

/// A temp root owned by the child user (the default `nobody`), so writes
/// inside it work after the privilege drop.
pub struct Root {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

pub fn root() -> Root {
    root_in(&std::env::temp_dir())
}

/// As [`root`], made in `parent` (created 0755 when missing).
pub fn root_in(parent: &Path) -> Root {
    use std::os::unix::fs::PermissionsExt;
    if !parent.exists() {
        std::fs::create_dir_all(parent).unwrap();
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let dir = tempfile::Builder::new()
        .prefix("ae-sbx-root-")
        .tempdir_in(parent)
        .unwrap();
    let path = dir.path().canonicalize().unwrap();
    std::os::unix::fs::chown(&path, Some(NOBODY), Some(NOBODY)).unwrap();
    Root { dir, path }
}

/// A directory outside the root that every user could read and write by
/// its mode bits, so only the sandbox can be what stops the child.
pub fn outside() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("ae-sbx-outside-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

pub fn sandbox(root: &Path) -> Sandbox {
    sandbox_with(root, config())
}

pub fn sandbox_with(root: &Path, cfg: SandboxConfig) -> Sandbox {
    Sandbox::prepare(supervisor(), &cfg, root).unwrap()
}

/// How a run in the sandbox went; holds the run, so dropping it ends the
/// run (its cgroup and HOME go).
pub struct Out {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    pub run: Arc<RunSandbox>,
}

impl std::fmt::Debug for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Out")
            .field("code", &self.code)
            .field("signal", &self.signal)
            .field("stdout", &self.stdout)
            .field("stderr", &self.stderr)
            .field("timed_out", &self.timed_out)
            .finish()
    }
}

fn c(s: impl AsRef<[u8]>) -> CString {
    CString::new(s.as_ref().to_vec()).unwrap()
}

/// `argv` in `run`, from `root`, with the environment the service gives a
/// child (PATH, HOME/TMPDIR, the git variables), 30 s and a large output
/// budget.
pub fn spec(run: &Arc<RunSandbox>, root: &Path, argv: &[&str]) -> ExecSpec {
    let mut env = vec![
        c("PATH=/usr/local/bin:/usr/bin:/bin"),
        c("LANG=C.UTF-8"),
        c([b"HOME=".as_slice(), run.home().as_os_str().as_bytes()].concat()),
        c([b"TMPDIR=".as_slice(), run.home().as_os_str().as_bytes()].concat()),
    ];
    for (k, v) in run.extra_env() {
        env.push(c(format!("{k}={v}")));
    }
    ExecSpec {
        program: c(argv[0]),
        argv: argv.iter().map(c).collect(),
        env,
        cwd: c(root.as_os_str().as_bytes()),
        sandbox: Arc::clone(run),
        stdin: None,
        timeout: Duration::from_secs(30),
        kill_grace: Duration::from_millis(500),
        drain: Duration::from_millis(500),
        output_chars: 1 << 20,
        hard_limit_bytes: 0,
    }
}

/// Runs `spec` to its end; a spawn failure is returned, any other error
/// fails the test.
pub fn try_exec(spec: ExecSpec) -> Result<ExecOutcome, SpawnError> {
    match agent_exec_sandbox::run(spec, &CancelToken::new()) {
        Ok(out) => Ok(out),
        Err(ExecError::Spawn(e)) => Err(e),
        Err(e) => panic!("the run failed: {e}"),
    }
}

/// Runs `argv` in `run` and keeps the run in the result.
pub fn run_in(run: Arc<RunSandbox>, root: &Path, argv: &[&str]) -> Out {
    let outcome = try_exec(spec(&run, root, argv)).unwrap();
    out(run, outcome)
}

/// The result of a finished run.
pub fn out(run: Arc<RunSandbox>, o: ExecOutcome) -> Out {
    Out {
        code: o.exit_code,
        signal: o.signal,
        stdout: o.stdout.text,
        stderr: o.stderr.text,
        timed_out: o.termination == Termination::TimedOut,
        run,
    }
}

/// Runs `argv` in a fresh run of `sb`, to completion or 30 s.
pub fn run(sb: &Sandbox, root: &Path, argv: &[&str]) -> Out {
    run_in(Arc::new(sb.for_run().unwrap()), root, argv)
}

pub fn py(sb: &Sandbox, root: &Path, code: &str) -> Out {
    run(sb, root, &[PYTHON, "-c", code])
}

/// Name of the variable a test child carries, so its processes (and their
/// descendants, which inherit it) can be found in /proc.
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

#[allow(unused_imports)]
pub use procs::procs_with;
