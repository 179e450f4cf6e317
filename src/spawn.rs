//! Fork and exec: the only module with `unsafe`, and the only code that runs
//! between fork and exec.
//!
//! Everything the child needs (argv, envp, cwd, the prepared sandbox) is
//! built in the parent before fork. After fork the child makes raw syscalls
//! only: no allocation, no locks, no panics, because the daemon is
//! multi-threaded and another thread may have held the allocator's lock at
//! the moment of fork.

use std::ffi::CString;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// What to run, fully prepared in the parent.
#[derive(Debug)]
pub struct ChildSpec {
    /// Absolute path of the program (resolved through the policy's PATH).
    pub program: CString,
    /// argv, program name first.
    pub argv: Vec<CString>,
    /// `NAME=value` entries; the child's whole environment.
    pub env: Vec<CString>,
    pub cwd: CString,
    /// Give the child a stdin pipe (else `/dev/null`).
    pub stdin_pipe: bool,
}

/// A started child. The caller owns the pipes and must reap `pid`.
#[derive(Debug)]
pub struct Spawned {
    pub pid: i32,
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("program not found: {0}")]
    NotFound(String),
    #[error("program is not executable: {0}")]
    NotExecutable(String),
    #[error("could not start the child: {0}")]
    Io(#[from] std::io::Error),
}

/// Starts the child in its own session (so its process group can be killed
/// whole and it has no controlling terminal), dying with the supervisor.
pub fn spawn(spec: &ChildSpec) -> Result<Spawned, SpawnError> {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    let mut cmd = Command::new(OsStr::from_bytes(spec.program.as_bytes()));
    if let Some(first) = spec.argv.first() {
        cmd.arg0(OsStr::from_bytes(first.as_bytes()));
    }
    for a in spec.argv.iter().skip(1) {
        cmd.arg(OsStr::from_bytes(a.as_bytes()));
    }
    cmd.env_clear();
    for kv in &spec.env {
        let bytes = kv.as_bytes();
        if let Some(eq) = bytes.iter().position(|b| *b == b'=') {
            cmd.env(OsStr::from_bytes(&bytes[..eq]), OsStr::from_bytes(&bytes[eq + 1..]));
        }
    }
    cmd.current_dir(OsStr::from_bytes(spec.cwd.as_bytes()));
    cmd.stdin(if spec.stdin_pipe { Stdio::piped() } else { Stdio::null() });
    cmd.stdout(Stdio::piped());
    cmd.stderr(Stdio::piped());
    // SAFETY: the closure makes only async-signal-safe syscalls.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => SpawnError::NotFound(spec.program.to_string_lossy().into_owned()),
        std::io::ErrorKind::PermissionDenied => {
            SpawnError::NotExecutable(spec.program.to_string_lossy().into_owned())
        }
        _ => SpawnError::Io(e),
    })?;
    let pid = child.id() as i32;
    let take = |fd: Option<i32>| -> Result<OwnedFd, SpawnError> {
        let fd = fd.ok_or_else(|| SpawnError::Io(std::io::Error::other("missing pipe")))?;
        // SAFETY: the fd was just released by std's owner and is owned by no one else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    let stdin = match child.stdin.take() {
        Some(s) => Some(take(Some(s.into_raw_fd()))?),
        None => None,
    };
    let stdout = take(child.stdout.take().map(|s| s.into_raw_fd()))?;
    let stderr = take(child.stderr.take().map(|s| s.into_raw_fd()))?;
    Ok(Spawned { pid, stdin, stdout, stderr })
}
