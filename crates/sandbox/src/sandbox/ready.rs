//! One run's child made ahead (`SupervisorOptions::children_ahead`): a
//! thread of the sandbox prepares the next run (its directory, cgroup and
//! namespaces, as `Sandbox::for_run_with` does) and clones its child, which
//! confines itself and waits (`crate::spawn::spawn_ahead`). The run that
//! takes it hands the child its command from its own thread
//! (`crate::exec`); the thread then makes the next one.
//!
//! Why a thread of its own: the child's parent-death signal is tied to the
//! thread that cloned it, which must therefore outlive the runs it started.
//! It leaves only when every handle of the sandbox is gone and, after
//! that, every run it started.
//!
//! A child made ahead serves one run and only one whose root access
//! matches; a run of the other access spawns its own and has the next
//! child made for its access. A run that takes one and ends without using
//! it (refused, or its preparation failed) lets it go: the child exits
//! before the run's cgroup is settled, so the cgroup stays reusable.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::{RootAccess, RunSandbox, Shared};
use crate::spawn::{self, Readied};
use crate::supervisor::{forget_main, spawn_main};

/// How long a run waits for a child being made rather than spawning its
/// own (making one takes about 0.4 ms).
const READY_WAIT: Duration = Duration::from_millis(20);
/// How often a thread whose sandbox is gone looks whether the runs it
/// started are over.
const LEAVE_POLL: Duration = Duration::from_millis(20);
/// Failures in a row after which runs spawn their own for good: one can
/// be passing (a cgroup that killed the child at birth, a full disk), a
/// setup that fails every time is not.
const FAILURES_MAX: u32 = 3;
/// The pause before trying again after a failure.
const RETRY_AFTER: Duration = Duration::from_millis(50);

struct State {
    /// The run whose child is ready, not yet taken.
    ready: Option<RunSandbox>,
    making: bool,
    /// Failures in a row; at [`FAILURES_MAX`] runs spawn their own from
    /// then on.
    failures: u32,
    failed: bool,
    /// The root access the next child is made for: the last run's.
    want: RootAccess,
    /// Every handle of the sandbox is gone.
    leave: bool,
}

type Shelf = Arc<(Mutex<State>, Condvar)>;

/// The sandbox's side: where runs take a ready child. Owned by the
/// sandbox's handles (`Sandbox`), not by what they share, so that the last
/// handle's drop tells the thread to leave.
pub(super) struct Children {
    shelf: Shelf,
}

impl std::fmt::Debug for Children {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Children").finish_non_exhaustive()
    }
}

impl Children {
    /// Starts the thread, which makes the first child at once.
    pub(super) fn start(shared: &Arc<Shared>) -> Option<Children> {
        let shelf: Shelf = Arc::new((
            Mutex::new(State {
                ready: None,
                making: true,
                failures: 0,
                failed: false,
                want: RootAccess::ReadWrite,
                leave: false,
            }),
            Condvar::new(),
        ));
        let (shared, theirs) = (Arc::clone(shared), Arc::clone(&shelf));
        std::thread::Builder::new()
            .name("agent-exec-ready".into())
            .spawn(move || serve(&shared, &theirs))
            .ok()?;
        Some(Children { shelf })
    }

    /// The ready run for `access`, waiting briefly for one being made;
    /// `None`: the run prepares its own (and, for the other access, the
    /// next child is made for it).
    pub(super) fn take(&self, access: RootAccess) -> Option<RunSandbox> {
        let (lock, changed) = &*self.shelf;
        let mut st = lock.lock().ok()?;
        if st.ready.is_none() && st.making {
            st = changed
                .wait_timeout_while(st, READY_WAIT, |st| st.ready.is_none() && st.making)
                .ok()?
                .0;
        }
        let taken = match st.ready.take() {
            Some(run) if run.root == access => Some(run),
            other => {
                st.ready = other;
                None
            }
        };
        // Wanted for the other access: the thread has work now. A child
        // taken is replaced once it has exec'd (`wake`): woken here, the
        // thread would take this thread's CPU in the middle of the run's
        // start.
        if taken.is_none() && st.want != access {
            st.want = access;
            changed.notify_all();
        }
        taken
    }
}

/// Wakes the sandbox's thread to make the next child; weak, so a run that
/// outlives its sandbox keeps nothing of it alive.
#[derive(Debug, Clone, Default)]
pub(super) struct Waker(std::sync::Weak<(Mutex<State>, Condvar)>);

impl Waker {
    pub(super) fn wake(&self) {
        if let Some(shelf) = self.0.upgrade() {
            shelf.1.notify_all();
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        let (lock, changed) = &*self.shelf;
        if let Ok(mut st) = lock.lock() {
            st.leave = true;
        }
        changed.notify_all();
    }
}

/// The thread: keeps one child made for the access runs want, until the
/// sandbox is gone.
fn serve(shared: &Arc<Shared>, shelf: &Shelf) {
    let (lock, changed) = &**shelf;
    loop {
        let Ok(mut st) = lock.lock() else {
            return;
        };
        if st.leave {
            break;
        }
        // A ready child of the access runs no longer want goes.
        if st.ready.as_ref().is_some_and(|run| run.root != st.want) {
            let stale = st.ready.take();
            drop(st);
            drop(stale);
            continue;
        }
        if st.ready.is_none() && !st.failed {
            st.making = true;
            let access = st.want;
            drop(st);
            let made = make(shared, shelf, access);
            let Ok(mut st) = lock.lock() else {
                return;
            };
            st.making = false;
            let again = match made {
                Ok(run) => {
                    st.ready = Some(run);
                    st.failures = 0;
                    false
                }
                Err(why) => {
                    st.failures += 1;
                    st.failed = st.failures >= FAILURES_MAX;
                    tracing::debug!(error = %why, failures = st.failures, "making a run's child ahead failed; the run spawns its own");
                    !st.failed
                }
            };
            changed.notify_all();
            drop(st);
            if again {
                // Not at once: what failed may take a moment to pass.
                std::thread::sleep(RETRY_AFTER);
            }
            continue;
        }
        st.making = false;
        changed.notify_all();
        // Woken by a run that took the child or wants the other access,
        // or by the sandbox's end.
        drop(changed.wait_while(st, |st| {
            !st.leave && st.ready.as_ref().is_some_and(|r| r.root == st.want)
                || !st.leave && st.ready.is_none() && st.failed
        }));
    }
    let stale = lock.lock().ok().and_then(|mut st| st.ready.take());
    drop(stale);
    // Every run holds the shared part; this thread holds one more. The
    // runs this thread started die with it: it stays until they are over.
    while Arc::strong_count(shared) > 1 {
        std::thread::sleep(LEAVE_POLL);
    }
}

/// Prepares a run and makes its child.
fn make(shared: &Arc<Shared>, shelf: &Shelf, access: RootAccess) -> Result<RunSandbox, String> {
    let mut run = super::new_run(shared, access).map_err(|e| e.to_string())?;
    run.waker = Waker(Arc::downgrade(shelf));
    let registered = std::cell::Cell::new(None);
    let child = spawn::spawn_ahead(&run.confinement(), |clone| {
        spawn_main(clone, |pid| {
            registered.set(Some(*pid));
            *pid
        })
    });
    let child = match child {
        Ok(child) => child,
        Err(e) => {
            // Reaped (or never started): the pid is no longer a run's.
            if let Some(pid) = registered.get() {
                forget_main(pid);
            }
            return Err(e.to_string());
        }
    };
    match run.ahead.get_mut() {
        Ok(slot) => *slot = Some(child),
        // Never poisoned (nobody else has it yet); if it were, the child
        // goes rather than wait forever.
        Err(_) => let_go(child),
    }
    Ok(run)
}

/// Lets a child made ahead go: it exits and is reaped.
pub(super) fn let_go(child: Readied) {
    let pid = child.pid();
    drop(child);
    // Reaped: the pid is no longer a run's.
    forget_main(pid);
}
