//! Shared helper for the sandbox tests: a temp root the child user owns and
//! a minimal blocking runner on top of `spawn::spawn` (the exec module's
//! runner is not needed to observe the sandbox).
#![allow(dead_code)]

use std::ffi::CString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_exec::policy::SandboxPolicy;
use agent_exec::sandbox::{RunSandbox, Sandbox};
use agent_exec::spawn::{self, ChildSpec, SpawnError};

pub const PYTHON: &str = "/usr/bin/python3";
pub const NOBODY: u32 = 65534;

/// A temp root owned by the child user (the default `nobody`), so writes
/// inside it work after the privilege drop.
pub struct Root {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

pub fn root() -> Root {
    let dir = tempfile::Builder::new()
        .prefix("ae-sbx-root-")
        .tempdir()
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
    sandbox_with(root, SandboxPolicy::default())
}

pub fn sandbox_with(root: &Path, cfg: SandboxPolicy) -> Sandbox {
    Sandbox::prepare(&agent_exec::service::sandbox_config(&cfg), root).unwrap()
}

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

pub fn spec(run: &Arc<RunSandbox>, root: &Path, argv: &[&str]) -> ChildSpec {
    let mut env = vec![
        c("PATH=/usr/local/bin:/usr/bin:/bin"),
        c("LANG=C.UTF-8"),
        c([b"HOME=".as_slice(), run.home().as_os_str().as_bytes()].concat()),
        c([b"TMPDIR=".as_slice(), run.home().as_os_str().as_bytes()].concat()),
    ];
    for (k, v) in run.extra_env() {
        env.push(c(format!("{k}={v}")));
    }
    ChildSpec {
        program: c(argv[0]),
        argv: argv.iter().map(c).collect(),
        env,
        cwd: c(root.as_os_str().as_bytes()),
        stdin_pipe: false,
        sandbox: Some(Arc::clone(run)),
    }
}

pub fn run(sb: &Sandbox, root: &Path, argv: &[&str]) -> Out {
    run_for(sb, root, argv, Duration::from_secs(30))
}

/// Runs to completion or `limit`, then kills whatever is left of the run
/// (as the exec module does) and collects the output.
pub fn run_for(sb: &Sandbox, root: &Path, argv: &[&str], limit: Duration) -> Out {
    let run = Arc::new(sb.for_run().unwrap());
    let child = spawn::spawn(&spec(&run, root, argv)).unwrap();
    finish(run, child, limit)
}

pub fn try_spawn(
    run: &Arc<RunSandbox>,
    root: &Path,
    argv: &[&str],
) -> Result<spawn::Spawned, SpawnError> {
    spawn::spawn(&spec(run, root, argv))
}

pub fn finish(run: Arc<RunSandbox>, child: spawn::Spawned, limit: Duration) -> Out {
    let reader = |fd: std::os::fd::OwnedFd| {
        std::thread::spawn(move || {
            let mut f = std::fs::File::from(fd);
            let mut v = Vec::new();
            let _ = f.read_to_end(&mut v);
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let out = reader(child.stdout);
    let err = reader(child.stderr);
    let deadline = Instant::now() + limit;
    let mut status = 0;
    let mut timed_out = false;
    loop {
        let r = unsafe { libc::waitpid(child.pid, &mut status, libc::WNOHANG) };
        if r == child.pid {
            break;
        }
        assert!(r == 0, "waitpid failed");
        if Instant::now() > deadline {
            timed_out = true;
            unsafe { libc::kill(-child.pid, libc::SIGKILL) };
            let _ = run.kill_all();
            unsafe { libc::waitpid(child.pid, &mut status, 0) };
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Background descendants would hold the pipes open.
    let _ = run.kill_all();
    let stdout = out.join().unwrap();
    let stderr = err.join().unwrap();
    let (code, signal) = if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else {
        (None, Some(libc::WTERMSIG(status)))
    };
    Out {
        code,
        signal,
        stdout,
        stderr,
        timed_out,
        run,
    }
}

pub fn py(sb: &Sandbox, root: &Path, code: &str) -> Out {
    run(sb, root, &[PYTHON, "-c", code])
}
