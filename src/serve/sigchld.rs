//! Reaping on SIGCHLD what runs leave behind.
//!
//! The daemon is a child subreaper (see `Supervisor::init`), so a process a
//! run left that outlives its parent becomes the daemon's child. Each run
//! reaps what it can when it ends; one that dies later (a run without a
//! cgroup whose orphan escaped the sweep) stays a zombie until someone waits
//! for it, and zombies of the child user count against its `RLIMIT_NPROC`
//! until every later run fails. This waits for them as they die.
//!
//! The work is one read of the daemon's children list, so it runs on a
//! thread of its own rather than stall the runtime's; the signal only wakes
//! it. `Supervisor::reap_adopted` never takes the status of a run's main
//! child, which its run waits for.

use std::sync::mpsc::{Receiver, sync_channel};

use tokio::signal::unix::{SignalKind, signal};

use super::ServeError;
use crate::sandbox::Supervisor;

/// Installs the SIGCHLD handler and starts the reaping thread; both end
/// with the runtime. Call inside the runtime.
pub(super) fn start(supervisor: &Supervisor) -> Result<(), ServeError> {
    let mut sigchld = signal(SignalKind::child()).map_err(|source| ServeError::Io {
        what: "installing the SIGCHLD handler",
        source,
    })?;
    // One pending wake is enough: a pass sees every child dead by then.
    let (wake, woken) = sync_channel::<()>(1);
    let supervisor = supervisor.clone();
    std::thread::Builder::new()
        .name("agent-exec-reap".into())
        .spawn(move || reap_loop(&supervisor, &woken))
        .map_err(|source| ServeError::Io {
            what: "starting the reaping thread",
            source,
        })?;
    tokio::spawn(async move {
        while sigchld.recv().await.is_some() {
            // Full means a pass is already due; it will see this child.
            let _ = wake.try_send(());
        }
    });
    Ok(())
}

fn reap_loop(supervisor: &Supervisor, woken: &Receiver<()>) {
    // Ends when the sender goes, with the runtime.
    while woken.recv().is_ok() {
        let reaped = supervisor.reap_adopted();
        if reaped > 0 {
            tracing::debug!(reaped, "reaped processes that runs left behind");
        }
    }
}
