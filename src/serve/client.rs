//! The CLI's thin-client path: hand a one-shot call to a running daemon
//! that serves the same policy and root, instead of loading the policy and
//! preparing a sandbox in a fresh process.
//!
//! The daemon is asked first what it serves (`describe`); the call is
//! forwarded only when its policy hash is the hash of the policy file the
//! CLI was given, its root is the CLI's root, its version is this
//! binary's, it does not replay, and the socket's peer is this user or
//! root. Anything else (no socket, another policy, a daemon too busy to
//! take the call) is a [`NotForwarded`] and the CLI runs the call itself;
//! nothing has run then. A call the daemon took and never answered (it
//! died, the connection broke) is answered as lost (`INTERNAL_ERROR`) and
//! not run again: it may have run. Blocking std I/O: a one-shot call needs no
//! runtime.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::request::{CommandSpec, RunRequest};
use crate::result::{ErrorType, ToolResult};

/// How long the daemon may take to say what it serves.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a call was not forwarded; the CLI then runs it itself.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum NotForwarded {
    #[error("cannot reach the daemon at {path}: {source}")]
    Unreachable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the daemon at {path} is not the one for this call: {reason}")]
    Mismatch { path: PathBuf, reason: String },
    #[error("the call cannot be forwarded: {0}")]
    Unsupported(&'static str),
    #[error("the daemon at {path} took no call: {reason}")]
    Refused { path: PathBuf, reason: String },
}

/// What the caller's own run would use, to match against the daemon.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    /// The policy file the CLI was given.
    pub policy: &'a Path,
    /// The project root (canonicalized here).
    pub root: &'a Path,
}

/// Forwards `req` to the daemon at `socket` when it serves `target`, and
/// returns the daemon's result. Blocks until the call ends.
pub fn forward(
    socket: &Path,
    target: &Target<'_>,
    req: &RunRequest,
) -> Result<ToolResult, NotForwarded> {
    let command = match &req.command {
        CommandSpec::Shell(s) => s.clone(),
        CommandSpec::Argv(argv) => plain_words(argv)?,
    };
    let unreachable = |source| NotForwarded::Unreachable {
        path: socket.to_path_buf(),
        source,
    };
    let mismatch = |reason: String| NotForwarded::Mismatch {
        path: socket.to_path_buf(),
        reason,
    };
    let policy_bytes = std::fs::read(target.policy).map_err(unreachable)?;
    let policy_sha = hex::encode(Sha256::digest(&policy_bytes));
    let root = target.root.canonicalize().map_err(unreachable)?;

    let stream = UnixStream::connect(socket).map_err(unreachable)?;
    check_peer(&stream).map_err(mismatch)?;
    let mut conn = Conn::new(stream).map_err(unreachable)?;
    conn.stream
        .set_read_timeout(Some(DESCRIBE_TIMEOUT))
        .map_err(unreachable)?;
    let described = conn
        .call(&json!({"tool": "describe"}))
        .map_err(unreachable)?;
    let served: Value = serde_json::from_str(&described.stdout)
        .map_err(|e| mismatch(format!("its description is not JSON: {e}")))?;
    matches(&served, &policy_sha, &root).map_err(mismatch)?;

    conn.stream.set_read_timeout(None).map_err(unreachable)?;
    let mut request = json!({"tool": "run_shell", "args": {"command": command}});
    let args = &mut request["args"];
    if let Some(cwd) = &req.cwd {
        args["cwd"] = json!(cwd);
    }
    if let Some(t) = req.timeout_ms {
        args["timeout_ms"] = json!(t);
    }
    if let Some(s) = &req.stdin {
        args["stdin"] = json!(s);
    }
    if let Some(n) = req.output_chars {
        args["output_chars"] = json!(n);
    }
    if let Some(s) = &req.session {
        request["session"] = json!(s);
    }
    if req.idempotency_key.is_some() {
        return Err(NotForwarded::Unsupported(
            "idempotency keys live in the CLI's --state",
        ));
    }
    // Once the whole request is out the daemon may run it: a call that
    // then gets no answer is answered as lost, never run again here,
    // since it may have run (a `git commit` or a migration, twice). A
    // request cut short is no request (no prefix of a JSON object is one).
    conn.send(&request).map_err(unreachable)?;
    let result = match conn.receive() {
        Ok(result) => result,
        Err(e) => return Ok(lost(socket, &e)),
    };
    if result.error_type == Some(ErrorType::Busy) {
        return Err(NotForwarded::Refused {
            path: socket.to_path_buf(),
            reason: result.message,
        });
    }
    Ok(result)
}

/// The answer to a forwarded call whose result never came.
fn lost(socket: &Path, e: &std::io::Error) -> ToolResult {
    ToolResult::refusal(
        "none",
        ErrorType::InternalError,
        format!(
            "the daemon at {} took the call but sent no result ({e}); it may have run the \
             command, so it was not run again here",
            socket.display()
        ),
    )
    .with_suggestion(
        "Check whether the command took effect (the daemon's trace records the call) before \
         sending it again.",
    )
}

/// An argv as a shell string that lexes back to exactly the same words:
/// only words made of characters no shell treats specially are sent.
fn plain_words(argv: &[String]) -> Result<String, NotForwarded> {
    let plain = |w: &String| {
        !w.is_empty()
            && w.bytes().all(|b| {
                b.is_ascii_alphanumeric()
                    || matches!(
                        b,
                        b'_' | b'-' | b'.' | b'/' | b'=' | b':' | b',' | b'+' | b'@' | b'%'
                    )
            })
    };
    if argv.is_empty() || !argv.iter().all(plain) {
        return Err(NotForwarded::Unsupported(
            "an argument that would need shell quoting",
        ));
    }
    Ok(argv.join(" "))
}

/// Whether the daemon's description says it serves this policy and root
/// with this binary's version, live (not replaying).
fn matches(served: &Value, policy_sha: &str, root: &Path) -> Result<(), String> {
    let got = |ptr: &str| served.pointer(ptr).and_then(Value::as_str).unwrap_or("");
    if got("/policy/sha256") != policy_sha {
        return Err(format!(
            "it serves policy {}, the file given hashes to {policy_sha}",
            got("/policy/sha256")
        ));
    }
    if Path::new(got("/root")) != root {
        return Err(format!(
            "it serves root {:?}, the call's root is {}",
            got("/root"),
            root.display()
        ));
    }
    if got("/version") != env!("CARGO_PKG_VERSION") {
        return Err(format!("it is version {:?}", got("/version")));
    }
    if served.pointer("/replay").and_then(Value::as_bool) != Some(false) {
        return Err("it answers from a recorded trace".into());
    }
    Ok(())
}

/// The daemon must run as this user or as root: anyone else's socket
/// would receive the command and could answer anything.
fn check_peer(stream: &UnixStream) -> Result<(), String> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let cred =
        getsockopt(stream, PeerCredentials).map_err(|e| format!("no peer credentials: {e}"))?;
    let me = nix::unistd::geteuid().as_raw();
    if cred.uid() == me || cred.uid() == 0 {
        Ok(())
    } else {
        Err(format!(
            "it runs as uid {}, not as this user or root",
            cred.uid()
        ))
    }
}

struct Conn {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
}

impl Conn {
    fn new(stream: UnixStream) -> std::io::Result<Conn> {
        let reader = BufReader::new(stream.try_clone()?);
        Ok(Conn { stream, reader })
    }

    /// One request line out, one result line back.
    fn call(&mut self, request: &Value) -> std::io::Result<ToolResult> {
        self.send(request)?;
        self.receive()
    }

    fn send(&mut self, request: &Value) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(request)?;
        line.push(b'\n');
        self.stream.write_all(&line)
    }

    fn receive(&mut self) -> std::io::Result<ToolResult> {
        let mut answer = String::new();
        if self.reader.read_line(&mut answer)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection without an answer",
            ));
        }
        serde_json::from_str(&answer).map_err(std::io::Error::other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_argv_is_sent_as_a_shell_string() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            plain_words(&v(&["git", "status", "--short"])).unwrap(),
            "git status --short"
        );
        assert!(plain_words(&v(&["echo", "a b"])).is_err());
        assert!(plain_words(&v(&["echo", "$HOME"])).is_err());
        assert!(plain_words(&v(&["echo", ""])).is_err());
        assert!(plain_words(&v(&["ls", "*"])).is_err());
    }

    #[test]
    fn a_daemon_for_another_policy_root_or_mode_does_not_match() {
        let root = Path::new("/srv/p");
        let ok = json!({"policy": {"sha256": "ab"}, "root": "/srv/p", "version": env!("CARGO_PKG_VERSION"), "replay": false});
        assert!(matches(&ok, "ab", root).is_ok());
        assert!(matches(&ok, "cd", root).is_err());
        assert!(matches(&ok, "ab", Path::new("/srv/q")).is_err());
        let mut replaying = ok.clone();
        replaying["replay"] = json!(true);
        assert!(matches(&replaying, "ab", root).is_err());
        let mut old = ok.clone();
        old["version"] = json!("0.0.0-other");
        assert!(matches(&old, "ab", root).is_err());
        // A daemon that does not say what it serves never matches.
        assert!(matches(&json!({}), "ab", root).is_err());
    }
}
