//! The process-wide setup a supervisor needs before it prepares any
//! sandbox, in one explicit place: [`Supervisor::init`].
//!
//! Everything else in the crate acts on one run; what is here acts on the
//! whole process (and, for the sweep, on what earlier processes left on the
//! host). A [`Sandbox`](crate::Sandbox) can only be prepared with a
//! [`Supervisor`], so the compiler keeps a process from running sandboxed
//! children without having been set up for it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use nix::sys::prctl::set_child_subreaper;

use crate::plan::{cgroup, privs, rundir};
use crate::spawn::sys;

/// Which process-wide effects [`Supervisor::init`] has. `Default` turns
/// every one on, which is what a one-shot CLI run wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SupervisorOptions {
    /// Open `/dev/null` on any of descriptors 0, 1 and 2 that is closed.
    ///
    /// Why: a supervisor started with stdio closed would otherwise get
    /// 0-2 for the next files it opens (a Landlock rule's pre-opened path,
    /// a trace file, a database), and the child's stdio setup would put
    /// its pipes over them, or the supervisor's own output would land in
    /// them. Needs to happen before the process opens any file it keeps.
    pub stdio: bool,
    /// Make the process a child subreaper (`PR_SET_CHILD_SUBREAPER`).
    ///
    /// Why: a descendant of a run whose parent dies is then re-parented to
    /// the supervisor instead of init, where the run can find it (by its
    /// run marker), kill it and reap it. Without a run cgroup this is the
    /// only way to kill what left the run's session; with one, it is how
    /// what the cgroup kill leaves dead gets reaped rather than left as a
    /// zombie of init, counting against the child user's RLIMIT_NPROC.
    /// Without it runs still end, but escaped orphans of a run without a
    /// cgroup survive it. Orphans of other code in the process are adopted
    /// too, and never killed by a run.
    pub subreaper: bool,
    /// Kill and remove the run cgroups and per-run directories left by
    /// supervisors that died without cleaning up (a `kill -9`, a CLI that
    /// exits without running destructors).
    ///
    /// Why: they hold disk space, cgroup slots and possibly processes of
    /// runs nobody waits for any more. Also finds the host's cgroup
    /// layout, creating the `agent-exec` base cgroups, which every
    /// sandbox then reuses.
    pub sweep_stale: bool,
    /// Empty the calling thread's capability bounding set.
    ///
    /// Why: a privileged child must drop the set, one `prctl` per
    /// capability (about 60 µs); a child inherits its spawning thread's
    /// set, so a thread that spawns children but never execs anything
    /// itself can drop it once instead. The process keeps its own
    /// capabilities (the set only limits what an `execve` can grant). Off
    /// for a thread that will exec something needing capabilities; see
    /// [`Supervisor::thread_start_hook`] for worker threads. Best effort:
    /// without CAP_SETPCAP nothing changes and children drop the set
    /// themselves.
    pub drop_bounding_set: bool,
}

impl Default for SupervisorOptions {
    fn default() -> Self {
        SupervisorOptions {
            stdio: true,
            subreaper: true,
            sweep_stale: true,
            drop_bounding_set: true,
        }
    }
}

impl SupervisorOptions {
    /// No process-wide effect at all; turn on what is needed.
    pub fn none() -> Self {
        SupervisorOptions {
            stdio: false,
            subreaper: false,
            sweep_stale: false,
            drop_bounding_set: false,
        }
    }
}

/// Proof that the process was set up to supervise sandboxed children, and
/// what that setup found. Made only by [`Supervisor::init`]; cheap to
/// clone.
#[derive(Debug, Clone)]
pub struct Supervisor {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Highest capability number the kernel knows.
    cap_last: u32,
    /// The host's cgroup layout, found by the sweep or by the first
    /// sandbox prepared.
    cgroups: OnceLock<cgroup::Layout>,
}

/// Whether this process is a child subreaper (set by `init`, never undone).
static SUBREAPER: AtomicBool = AtomicBool::new(false);

impl Supervisor {
    /// Sets the process up, in this order, as `opts` asks: stdio, subreaper,
    /// sweep, bounding set (see [`SupervisorOptions`] for what each does
    /// and why). Call it first thing, before the process opens files it
    /// keeps, and before any thread that spawns children starts.
    ///
    /// Every effect is best effort, as none of them is needed for a run to
    /// be confined: what failed is simply not there (see
    /// [`Supervisor::is_subreaper`]). Calling it again repeats the effects
    /// asked for (a second sweep finds what died since the first).
    pub fn init(opts: SupervisorOptions) -> Supervisor {
        if opts.stdio {
            sys::ensure_stdio_open();
        }
        if opts.subreaper && set_child_subreaper(true).is_ok() {
            SUBREAPER.store(true, Ordering::SeqCst);
        }
        let cgroups = OnceLock::new();
        if opts.sweep_stale {
            let layout = cgroup::detect();
            cgroup::sweep_stale(&layout);
            // Only a base the supervisor owns is swept (a planted one is
            // refused here and reported when a sandbox is prepared).
            if let Ok(base) = rundir::ensure_base() {
                rundir::sweep_stale(&base);
            }
            let _ = cgroups.set(layout);
        }
        let cap_last = privs::cap_last_cap();
        if opts.drop_bounding_set {
            sys::drop_thread_bounding_set(cap_last);
        }
        Supervisor {
            inner: Arc::new(Inner { cap_last, cgroups }),
        }
    }

    /// A function for a thread pool's start hook (`tokio`'s
    /// `on_thread_start`, say) that empties the new thread's capability
    /// bounding set: the [`SupervisorOptions::drop_bounding_set`] effect
    /// for worker threads that spawn children and exec nothing themselves.
    pub fn thread_start_hook(&self) -> impl Fn() + Send + Sync + 'static {
        let cap_last = self.inner.cap_last;
        move || sys::drop_thread_bounding_set(cap_last)
    }

    /// Whether the process is a child subreaper.
    pub fn is_subreaper(&self) -> bool {
        subreaper_active()
    }

    pub(crate) fn cap_last(&self) -> u32 {
        self.inner.cap_last
    }

    /// The host's cgroup layout, found once per supervisor.
    pub(crate) fn cgroups(&self) -> &cgroup::Layout {
        self.inner.cgroups.get_or_init(cgroup::detect)
    }
}

/// Whether `Supervisor::init` made the process a child subreaper.
pub(crate) fn subreaper_active() -> bool {
    SUBREAPER.load(Ordering::SeqCst)
}

/// Kills every process left in the run cgroups of supervisor `pid` and
/// removes them, waiting for each to empty; returns how many still had
/// processes. For a helper process that outlives a supervisor which died
/// with runs in flight: their commands' descendants are in those cgroups
/// and nobody else will end them.
pub fn kill_runs_of(pid: u32) -> usize {
    cgroup::sweep_owned_by(&cgroup::detect(), pid)
}
