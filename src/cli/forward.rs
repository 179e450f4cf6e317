//! The thin-client path of a run: when a daemon serves the same policy
//! and root, the CLI forwards the call to it (`agent_exec::serve::client`)
//! instead of running it here.

use std::path::{Path, PathBuf};

use agent_exec::serve::client::{self, NotForwarded};
use agent_exec::{RunRequest, ToolResult};

// `super::super`: the binary's root module, also when `main.rs` is
// included as a module (the docs generator and its test).
use super::super::{ApproveMode, DAEMON_ENV, RunArgs, root_of};

/// The daemon socket `--daemon` or the environment names, if any.
pub(crate) fn daemon_socket(a: &RunArgs) -> Option<PathBuf> {
    a.daemon
        .clone()
        .or_else(|| std::env::var_os(DAEMON_ENV).map(PathBuf::from))
        .filter(|p| !p.as_os_str().is_empty())
}

/// The call answered by the daemon at `socket`, when the flags ask for
/// nothing only this process can do (its own trace, state, replay or
/// terminal prompt) and the daemon serves the same policy and root.
pub(crate) fn forward(
    a: &RunArgs,
    socket: &Path,
    req: &RunRequest,
) -> Result<ToolResult, NotForwarded> {
    let local = [
        (
            a.trace.is_some() || a.record.is_some(),
            "--trace and --record are written here",
        ),
        (a.replay.is_some(), "--replay answers here"),
        (a.state.is_some(), "--state is this process's"),
        (
            a.session_file.is_some(),
            "--session-file keeps this process's ledger",
        ),
        (
            a.approve == ApproveMode::Tty,
            "--approve tty asks on this terminal",
        ),
    ];
    if let Some((_, why)) = local.iter().find(|(asked, _)| *asked) {
        return Err(NotForwarded::Unsupported(why));
    }
    let Some(policy) = a.target.policy.as_deref() else {
        return Err(NotForwarded::Unsupported("no policy given"));
    };
    let root = root_of(&a.target);
    client::forward(
        socket,
        &client::Target {
            policy,
            root: &root,
        },
        req,
    )
}
