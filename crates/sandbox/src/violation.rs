//! Telling a failure the sandbox caused from one the program caused, from
//! what the run left behind (status and stderr).

use std::path::Path;

/// What the sandbox blocked, as far as stderr tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ViolationKind {
    /// A system call the seccomp filter refuses (SIGSYS).
    Seccomp,
    /// The network: a socket, a connection, a name lookup.
    Network,
    /// A privileged system call (mount, ptrace, ...).
    Syscall,
    /// A path outside what the run may use.
    Path,
}

/// A failure the sandbox caused, and a short description of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub kind: ViolationKind,
    pub detail: String,
}

/// Messages of a name lookup or connection that cannot succeed in a run:
/// it has no network beyond the loopback ports a policy allows.
const NO_NETWORK: &[&str] = &[
    "temporary failure in name resolution",
    "could not resolve host",
    "name or service not known",
    "failed to lookup address",
    "no address associated with hostname",
    "nodename nor servname",
    "getaddrinfo failed",
    "network is unreachable",
    "failed to resolve",
];

/// Reads a failed run's status and stderr for signs that the sandbox, not
/// the program, caused the failure. Returns a short description for
/// `SANDBOX_VIOLATION`, or `None` when nothing points at the sandbox.
pub fn attribute_violation(
    exit_code: Option<i32>,
    signal: Option<i32>,
    stderr: &str,
    root: &Path,
) -> Option<String> {
    if exit_code == Some(0) && signal != Some(libc::SIGSYS) {
        return None;
    }
    classify_violation(signal, stderr, root).map(|v| v.detail)
}

/// As [`attribute_violation`], whatever the exit status (a pipeline's
/// status is its last command's, while an earlier one was refused), with
/// the kind of what was blocked.
pub fn classify_violation(signal: Option<i32>, stderr: &str, root: &Path) -> Option<Violation> {
    let v = |kind, detail: String| Some(Violation { kind, detail });
    if signal == Some(libc::SIGSYS) {
        return v(
            ViolationKind::Seccomp,
            "a system call was blocked by the seccomp filter (SIGSYS)".into(),
        );
    }
    let root_s = root.to_string_lossy();
    let lines: Vec<&str> = stderr.lines().take(200).collect();
    for (i, line) in lines.iter().enumerate() {
        let line = *line;
        let denied_here = line.to_ascii_lowercase();
        if NO_NETWORK.iter().any(|m| denied_here.contains(m)) {
            return v(
                ViolationKind::Network,
                format!("the run has no network: {}", clip(line)),
            );
        }
        if !(denied_here.contains("permission denied")
            || denied_here.contains("operation not permitted"))
        {
            continue;
        }
        // Interpreters put the call that failed on the lines above the
        // error (a Python traceback: `socket.socket(...)` then
        // `PermissionError: [Errno 1] Operation not permitted`).
        let lower = lines[i.saturating_sub(3)..=i]
            .join("\n")
            .to_ascii_lowercase();
        const NET: &[&str] = &[
            "socket",
            "connect",
            "network",
            "bind",
            "getaddrinfo",
            "resolve",
            "curl:",
            "wget:",
        ];
        if NET.iter().any(|w| lower.contains(w)) {
            return v(
                ViolationKind::Network,
                format!("network access was blocked: {}", clip(line)),
            );
        }
        const SYSCALLS: &[&str] = &[
            "ptrace",
            "mount",
            "unshare",
            "setns",
            "chroot",
            "io_uring",
            "bpf",
            "keyctl",
            "perf_event",
            "reboot",
        ];
        if let Some(w) = SYSCALLS.iter().find(|w| lower.contains(*w)) {
            return v(
                ViolationKind::Syscall,
                format!("a privileged system call ({w}) was blocked: {}", clip(line)),
            );
        }
        for word in line.split(|c: char| {
            c.is_whitespace() || matches!(c, '\'' | '"' | '`' | ':' | ',' | '(' | ')')
        }) {
            if !word.starts_with('/') || word.len() < 2 {
                continue;
            }
            let inside = word == root_s || word.starts_with(&format!("{root_s}/"));
            if !inside {
                return v(
                    ViolationKind::Path,
                    format!(
                        "access to {word} (outside the root) was blocked: {}",
                        clip(line)
                    ),
                );
            }
        }
    }
    None
}

fn clip(line: &str) -> String {
    let t = line.trim();
    match t.char_indices().nth(160) {
        Some((i, _)) => format!("{}...", &t[..i]),
        None => t.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribution() {
        let root = Path::new("/srv/proj");
        assert!(attribute_violation(None, Some(libc::SIGSYS), "", root).is_some());
        assert!(
            attribute_violation(Some(1), None, "cat: /etc/shadow: Permission denied", root)
                .unwrap()
                .contains("/etc/shadow")
        );
        assert_eq!(
            attribute_violation(Some(1), None, "cat: /srv/proj/x: Permission denied", root),
            None
        );
        assert_eq!(
            attribute_violation(Some(0), None, "cat: /etc/shadow: Permission denied", root),
            None
        );
        assert!(
            attribute_violation(
                Some(1),
                None,
                "PermissionError: [Errno 1] Operation not permitted (socket)",
                root
            )
            .unwrap()
            .starts_with("network")
        );
        assert!(
            attribute_violation(
                Some(1),
                None,
                "unshare: unshare failed: Operation not permitted",
                root
            )
            .is_some()
        );
        assert_eq!(
            attribute_violation(Some(2), None, "grep: no match", root),
            None
        );
        // A name lookup cannot succeed without a network, whatever the
        // exit status (here a pipeline's, 0).
        let dns = "curl: (6) Could not resolve host: pypi.org";
        assert_eq!(
            classify_violation(None, dns, root).map(|v| v.kind),
            Some(ViolationKind::Network)
        );
        assert_eq!(attribute_violation(Some(0), None, dns, root), None);
        assert_eq!(
            classify_violation(None, "ERROR: 2 tests failed", root),
            None
        );
        // The failing call is named on a traceback line above the error.
        let traceback = "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n  File \"/usr/lib/python3.11/socket.py\", line 232, in __init__\n    _socket.socket.__init__(self, family, type, proto, fileno)\nPermissionError: [Errno 1] Operation not permitted";
        assert!(
            attribute_violation(Some(1), None, traceback, root)
                .is_some_and(|v| v.starts_with("network access was blocked"))
        );
    }
}
