//! The kernel sandbox of one service, assembled from the building blocks
//! of `crate::plan` in the parent; applying it is `crate::spawn`'s job,
//! between clone and exec.
//!
//! [`Sandbox::prepare`] runs once per service and does everything that
//! costs (probing, path opening, filter compilation); [`Sandbox::for_run`]
//! adds what is private to one run (its HOME/TMPDIR and cgroup). What each
//! layer stops and what it does not is in `docs/threat-model.md`.

mod layers;
mod prepare;
mod ready;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use nix::fcntl::{OFlag, open};
use nix::sys::stat::Mode;

use crate::error::SandboxError;
use crate::plan::{cgroup, landlock, mounts, rundir};
use crate::spawn::mounts::{self as mounts_sys, Keep};
use crate::spawn::{CgroupJoin, Confinement, Creds, Rlimit};
use crate::summary::Summary;

#[cfg(debug_assertions)]
pub use layers::TEST_MISSING_LAYERS_ENV;
#[cfg(debug_assertions)]
pub use prepare::TEST_NO_LANDLOCK_ENV;

/// Everything prepared once and shared by every run.
struct Shared {
    landlock: Option<landlock::Plan>,
    /// `landlock` without write rights, for read-only runs.
    landlock_read_only: Option<landlock::Plan>,
    seccomp: Option<Vec<libc::sock_filter>>,
    creds: Creds,
    cap_last: u32,
    rlimits: Vec<Rlimit>,
    cgroups: cgroup::Layout,
    /// What each run's cgroup is held to (`Sandbox::for_run`).
    cgroup_levels: layers::CgroupLevels,
    /// Empty run cgroups kept for reuse: creating and removing one per run
    /// costs a dozen cgroupfs syscalls, each taking cgroup locks.
    cgroup_pool: Mutex<Vec<cgroup::RunCgroup>>,
    /// Slots of run cgroups kept across processes, when the supervisor
    /// shares them (`SupervisorOptions::shared_cgroup_pool`).
    cgroup_slots: Option<PathBuf>,
    /// Untouched run directories (with their Landlock handles) for reuse.
    rundir_pool: Mutex<Vec<(rundir::RunDir, OwnedFd)>>,
    pids_max: u64,
    memory_max: u64,
    rundir_base: PathBuf,
    root: PathBuf,
    /// The runs' own mount namespace; `None`: runs share the supervisor's
    /// (and its IPC namespace).
    mounts: Option<mounts::Layout>,
    /// The user namespace a non-root supervisor's runs enter to make
    /// their own namespaces; `None`: the supervisor's.
    user_ns: Option<OwnedFd>,
    /// The empty network namespace every run joins, for a sandbox without
    /// network whose runs get their own mount namespace; `None`: runs
    /// share the supervisor's.
    network: Option<OwnedFd>,
    /// Runs' mount and IPC namespaces made ahead, when the supervisor
    /// asks for it (`SupervisorOptions::namespaces_ahead`).
    ahead: Option<Ahead>,
    /// A long-lived service (`SupervisorOptions::children_ahead`): a run's
    /// sandbox is settled after its result, on another thread.
    settle_later: bool,
    summary: Summary,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("root", &self.root)
            .field(
                "landlock_rules",
                &self
                    .landlock
                    .as_ref()
                    .map(|p| p.rule_paths().collect::<Vec<_>>()),
            )
            .field("seccomp_instructions", &self.seccomp.as_ref().map(Vec::len))
            .field("creds", &self.creds)
            .field("cgroups", &self.cgroups)
            .field(
                "covered",
                &self
                    .mounts
                    .as_ref()
                    .map(|m| m.covered().collect::<Vec<_>>()),
            )
            .finish_non_exhaustive()
    }
}

/// What a run may do to the project root (and the configuration's other
/// writable paths).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RootAccess {
    /// Read and write: the root and `write` paths as configured.
    #[default]
    ReadWrite,
    /// Read only: the run may write nothing but its own HOME/TMPDIR and
    /// `/dev/null`-like devices. For commands classed as only reading.
    ReadOnly,
}

impl RootAccess {
    /// As the summary's `landlock_root=` entry names it.
    pub fn as_str(self) -> &'static str {
        match self {
            RootAccess::ReadWrite => "read_write",
            RootAccess::ReadOnly => "read_only",
        }
    }
}

/// The sandbox of one service (a CLI run or a daemon's lifetime), prepared
/// by [`Sandbox::prepare`]. Cheap to clone: clones share everything.
#[derive(Debug, Clone)]
pub struct Sandbox {
    shared: Arc<Shared>,
    /// Runs' children made ahead (`SupervisorOptions::children_ahead`);
    /// its thread leaves once the last clone is dropped.
    children: Option<Arc<ready::Children>>,
}

impl Sandbox {
    /// What every run gets (before per-run cgroup limits).
    pub fn summary(&self) -> Summary {
        self.shared.summary.clone()
    }

    /// Prepares one run: its private HOME/TMPDIR and its cgroup. The run
    /// may write the root ([`RootAccess::ReadWrite`]).
    pub fn for_run(&self) -> Result<RunSandbox, SandboxError> {
        self.for_run_with(RootAccess::ReadWrite)
    }

    /// [`for_run`](Self::for_run) with the root's access chosen: both
    /// Landlock rulesets are prepared once, this picks one per run.
    pub fn for_run_with(&self, root: RootAccess) -> Result<RunSandbox, SandboxError> {
        if let Some(run) = self.children.as_ref().and_then(|c| c.take(root)) {
            return Ok(run);
        }
        new_run(&self.shared, root)
    }
}

/// A run's sandbox, prepared now.
fn new_run(s: &Arc<Shared>, root: RootAccess) -> Result<RunSandbox, SandboxError> {
    let pooled_home = s.rundir_pool.lock().ok().and_then(|mut p| p.pop());
    let (dir, home_fd) = match pooled_home {
        Some(home) => home,
        None => {
            let dir = rundir::RunDir::create(&s.rundir_base, s.creds.uid, s.creds.gid)?;
            let fd = open(
                &dir.path,
                OFlag::O_PATH | OFlag::O_CLOEXEC | OFlag::O_DIRECTORY,
                Mode::empty(),
            )
            .map_err(|source| SandboxError::RunDirOpen {
                path: dir.path.clone(),
                source,
            })?;
            (dir, fd)
        }
    };
    let pooled = s.cgroup_pool.lock().ok().and_then(|mut p| p.pop());
    let cgroup = match pooled {
        Some(cg) => Some(cg),
        None if s.cgroups.any() => s
            .cgroup_slots
            .as_deref()
            .and_then(|slots| cgroup::RunCgroup::claim(&s.cgroups, slots, s.pids_max, s.memory_max))
            .or_else(|| cgroup::RunCgroup::create(&s.cgroups, s.pids_max, s.memory_max)),
        None => None,
    };
    let missing = layers::check_run_cgroup(
        &s.cgroup_levels,
        s.pids_max,
        s.memory_max,
        cgroup.as_ref().map(|cg| cg.applied.as_slice()),
    )?;
    let mut summary = run_summary(s, cgroup.as_ref(), &missing);
    // Said of the ruleset the child will get, when it gets one.
    if s.landlock_for(root).is_some() {
        summary
            .limits
            .push(format!("landlock_root={}", root.as_str()));
    }
    let run_keep = match (&s.mounts, dir.path.file_name()) {
        (Some(layout), Some(name)) => layout.run_keep(name),
        _ => None,
    };
    // A namespace made ahead has no run directory bound in it, so it
    // serves only runs whose directory lies outside every cover.
    let prepared = match (&s.ahead, &s.mounts) {
        (Some(ahead), Some(_)) if run_keep.is_none() => ahead.take(s),
        _ => None,
    };
    Ok(RunSandbox {
        ahead: Mutex::new(None),
        waker: ready::Waker::default(),
        root,
        shared: Arc::clone(s),
        run_keep,
        made_ahead: prepared.is_some(),
        prepared: Mutex::new(prepared),
        home_path: dir.path.clone(),
        home: Some((dir, home_fd)),
        cgroup,
        summary,
    })
}

impl Shared {
    /// The Landlock rules a run with `root` access gets.
    fn landlock_for(&self, root: RootAccess) -> Option<&landlock::Plan> {
        match root {
            RootAccess::ReadWrite => self.landlock.as_ref(),
            RootAccess::ReadOnly => self.landlock_read_only.as_ref(),
        }
    }
}

/// The service's summary with what the run's cgroup applied, and what it
/// could not (`missing`: best-effort layers this run lacks; a cgroup
/// without the controller, e.g. a delegated v2 tree where it cannot be
/// enabled, still kills but does not limit).
fn run_summary(s: &Shared, cgroup: Option<&cgroup::RunCgroup>, missing: &[&str]) -> Summary {
    let mut summary = s.summary.clone();
    if let Some(cg) = cgroup {
        summary.limits.extend(cg.applied.iter().cloned());
    }
    for m in missing {
        if !summary.not_applied.iter().any(|n| n == m) {
            summary.not_applied.push((*m).to_string());
        }
    }
    summary
}

/// One run's sandbox, made by [`Sandbox::for_run`]. Dropping it kills what
/// is left of the run and removes its cgroup and HOME/TMPDIR.
#[derive(Debug)]
pub struct RunSandbox {
    /// Its child made ahead, until the run hands it its command
    /// (`take_child`); a run ending without it lets it go before anything
    /// else of the run is settled.
    ahead: Mutex<Option<crate::spawn::Readied>>,
    /// Wakes the thread that made it, to make the next one.
    waker: ready::Waker,
    shared: Arc<Shared>,
    /// Which of the prepared Landlock rulesets the child gets.
    root: RootAccess,
    // Field order matters for Drop: the cgroup (which kills stragglers)
    // goes before the directory they might still be writing to.
    cgroup: Option<cgroup::RunCgroup>,
    /// The run's HOME/TMPDIR and the handle its Landlock rule names; taken
    /// on drop, for the pool when the run left it untouched.
    home: Option<(rundir::RunDir, OwnedFd)>,
    home_path: PathBuf,
    /// How the run's directory stays visible in its mount namespace.
    run_keep: Option<(usize, Keep)>,
    /// Its mount and IPC namespaces when they were made ahead; taken once
    /// the child has joined them (`take_prepared`).
    prepared: Mutex<Option<mounts_sys::Prepared>>,
    made_ahead: bool,
    summary: Summary,
}

impl RunSandbox {
    /// The per-run HOME and TMPDIR.
    pub fn home(&self) -> &Path {
        &self.home_path
    }

    /// Variables the service adds to the child's environment: git refuses
    /// a repository owned by another user unless it is a safe.directory,
    /// and the system gitconfig is unreadable under Landlock (git dies on
    /// EACCES), so it is skipped.
    pub fn extra_env(&self) -> Vec<(String, String)> {
        vec![
            ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
            ("GIT_CONFIG_COUNT".into(), "1".into()),
            ("GIT_CONFIG_KEY_0".into(), "safe.directory".into()),
            (
                "GIT_CONFIG_VALUE_0".into(),
                self.shared.root.to_string_lossy().into_owned(),
            ),
        ]
    }

    /// Kills every process of the run. `Ok(false)`: this run has no cgroup
    /// (the caller must fall back to killing the process group).
    pub fn kill_all(&self) -> std::io::Result<bool> {
        match &self.cgroup {
            Some(cg) => cg.kill_all().map(|()| true),
            None => Ok(false),
        }
    }

    /// Whether the run has a cgroup, which can kill (and count) all of it.
    pub fn has_cgroup(&self) -> bool {
        self.cgroup.is_some()
    }

    /// Sends `sig` to every process of the run's cgroup, if it has one.
    pub fn signal_all(&self, sig: nix::sys::signal::Signal) {
        if let Some(cg) = &self.cgroup {
            cg.signal_all(sig);
        }
    }

    /// Whether no process of the run is left (`None`: no cgroup to tell).
    pub fn is_empty(&self) -> Option<bool> {
        self.cgroup.as_ref().map(|cg| cg.is_empty())
    }

    /// What this run gets: the service's layers and the run's cgroup limits.
    pub fn summary(&self) -> Summary {
        self.summary.clone()
    }

    /// The run's memory cap in bytes, when its cgroup has one.
    pub fn memory_max(&self) -> Option<u64> {
        self.cgroup
            .as_ref()
            .and_then(|cg| cg.memory.as_ref())
            .map(|m| m.max_bytes)
    }

    /// How many of the run's processes the kernel killed for passing the
    /// memory cap since the last call (the first call after the run
    /// counts the whole run). 0 without a cap.
    pub(crate) fn take_oom_kills(&self) -> u64 {
        self.cgroup
            .as_ref()
            .and_then(|cg| cg.memory.as_ref())
            .map_or(0, |m| m.take_oom_kills())
    }

    /// What the run may do to the root.
    pub fn root_access(&self) -> RootAccess {
        self.root
    }

    /// What the child is confined by, borrowed for one spawn.
    pub(crate) fn confinement(&self) -> Confinement<'_> {
        let s = &self.shared;
        let cgroup = match &self.cgroup {
            Some(cg) => CgroupJoin {
                into: cg.v2_dir.as_ref().map(|fd| fd.as_raw_fd()),
                v2_procs: cg.v2_procs.as_ref().map(|fd| fd.as_raw_fd()),
                v1_procs: &cg.v1_procs,
            },
            None => CgroupJoin::default(),
        };
        // No handle (never the case while the run exists) makes the child's
        // Landlock step fail: nothing runs.
        let home = self.home.as_ref().map_or(-1, |(_, fd)| fd.as_raw_fd());
        let plan = s.landlock_for(self.root);
        Confinement {
            creds: s.creds,
            cap_last: s.cap_last,
            rlimits: &s.rlimits,
            cgroup,
            landlock: plan.map(|plan| plan.rules(home)),
            seccomp: s.seccomp.as_deref(),
            user: s.user_ns.as_ref().map(|fd| fd.as_raw_fd()),
            mounts: s
                .mounts
                .as_ref()
                .map(|layout| layout.plan(self.run_keep.as_ref())),
            prepared: self
                .prepared
                .lock()
                .ok()
                .and_then(|p| p.as_ref().map(mounts_sys::Prepared::fds)),
            network: s.network.as_ref().map(|fd| fd.as_raw_fd()),
        }
    }

    /// The handles of namespaces made ahead for this run, once its child
    /// has joined them: the caller holds them until the run is over, as it
    /// holds those of namespaces the child made (their teardown then
    /// happens off the run's path). The scratch handles are closed here.
    pub(crate) fn take_prepared(&self) -> Vec<OwnedFd> {
        match self.prepared.lock().ok().and_then(|mut p| p.take()) {
            Some(p) => vec![p.mnt, p.ipc],
            None => Vec::new(),
        }
    }

    /// Whether this run's mount and IPC namespaces were made ahead of it
    /// (`SupervisorOptions::namespaces_ahead`), rather than by its child.
    pub fn namespaces_made_ahead(&self) -> bool {
        self.made_ahead
    }

    /// Whether this run has a child made ahead waiting for its command
    /// (`SupervisorOptions::children_ahead`), until the run takes it.
    pub fn has_child_made_ahead(&self) -> bool {
        self.ahead.lock().is_ok_and(|c| c.is_some())
    }

    /// Whether the run's end leaves settling this sandbox (pooling its
    /// cgroup, checking or removing its directory) to another thread.
    pub(crate) fn settles_later(&self) -> bool {
        self.shared.settle_later
    }

    /// The run's child has started (or could not): the thread that made
    /// its child ahead may make the next one now that the run only waits.
    pub(crate) fn child_started(&self) {
        self.waker.wake();
    }

    /// Its child made ahead, for the run to hand its command.
    pub(crate) fn take_child(&self) -> Option<crate::spawn::Readied> {
        self.ahead.lock().ok().and_then(|mut c| c.take())
    }
}

/// How many runs' namespaces a sandbox keeps made ahead: one for the next
/// run, one for a run that comes beside it.
const AHEAD_MAX: usize = 2;
/// How long a run waits for a namespace being made rather than making its
/// own (making one takes about 0.3 ms).
const AHEAD_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// Mount and IPC namespaces made ahead of the runs that will join them,
/// each for one run only. One thread at a time makes them (a thread per
/// namespace, since making one moves the thread into it).
#[derive(Debug)]
struct Ahead {
    state: Mutex<AheadState>,
    made: Condvar,
    /// Start the next as one is taken (`NamespacesAhead::EveryRun`); else
    /// only the first run's is made.
    refill: bool,
}

#[derive(Debug, Default)]
struct AheadState {
    ready: Vec<mounts_sys::Prepared>,
    making: bool,
    /// Making one failed: runs make their own from then on.
    failed: bool,
}

impl Ahead {
    fn new(refill: bool) -> Ahead {
        Ahead {
            state: Mutex::new(AheadState::default()),
            made: Condvar::new(),
            refill,
        }
    }

    /// Starts making the first run's namespaces, once the sandbox is
    /// prepared: they are then made while the run's request is decided
    /// and its directory and cgroup are prepared.
    fn start_first(shared: &Arc<Shared>) {
        let Some(ahead) = &shared.ahead else {
            return;
        };
        if let Ok(mut st) = ahead.state.lock() {
            st.making = Self::start(Arc::clone(shared));
        }
    }

    /// A namespace made ahead, waiting briefly for one being made; starts
    /// making the next ones.
    fn take(&self, shared: &Arc<Shared>) -> Option<mounts_sys::Prepared> {
        let mut st = self.state.lock().ok()?;
        if st.ready.is_empty() && st.making {
            st = self
                .made
                .wait_timeout_while(st, AHEAD_WAIT, |st| st.ready.is_empty() && st.making)
                .ok()?
                .0;
        }
        let got = st.ready.pop();
        if self.refill && !st.making && !st.failed && st.ready.len() < AHEAD_MAX {
            st.making = Self::start(Arc::clone(shared));
        }
        got
    }

    /// Starts a thread that makes one namespace and, while fewer than
    /// [`AHEAD_MAX`] are ready, the next thread. Whether it started.
    fn start(shared: Arc<Shared>) -> bool {
        std::thread::Builder::new()
            .name("agent-exec-ns-make".into())
            .spawn(move || {
                let (Some(ahead), Some(layout)) = (&shared.ahead, &shared.mounts) else {
                    return;
                };
                let made = mounts_sys::make_ahead(&layout.plan(None));
                let Ok(mut st) = ahead.state.lock() else {
                    return;
                };
                match made {
                    Ok(p) => st.ready.push(p),
                    Err(e) => {
                        tracing::debug!(error = %e, "making a run's namespaces ahead failed; runs make their own");
                        st.failed = true;
                    }
                }
                st.making = ahead.refill
                    && !st.failed
                    && st.ready.len() < AHEAD_MAX
                    && Self::start(Arc::clone(&shared));
                ahead.made.notify_all();
            })
            .is_ok()
    }
}

/// How many empty cgroups a service keeps for reuse (about the number of
/// concurrent runs a daemon serves).
const CGROUP_POOL_MAX: usize = 8;
const RUNDIR_POOL_MAX: usize = 8;

impl Drop for RunSandbox {
    fn drop(&mut self) {
        // A child made ahead and never used exits first (this waits for
        // it), so it is not taken for a straggler of the run.
        if let Some(child) = self.ahead.get_mut().ok().and_then(Option::take) {
            ready::let_go(child);
        }
        self.waker.wake();
        // The cgroup: it kills stragglers that might still be
        // writing to the run directory.
        let settled = match self.cgroup.take() {
            Some(cg) => self.settle_cgroup(cg),
            None => true,
        };
        // A run directory the run left exactly as it was made serves the
        // next run: creating and removing one on ext4 cost about 115 µs a
        // run. Anything else (a file, a changed mode, an ACL, a process
        // that may still be alive) and it is removed.
        if let Some((dir, fd)) = self.home.take()
            && settled
            && self.shared.cgroups.any()
            && rundir::is_pristine(&dir.path, self.shared.creds.uid)
            && !crate::spawn::sys::has_xattrs(&dir.path)
            && let Ok(mut pool) = self.shared.rundir_pool.lock()
            && pool.len() < RUNDIR_POOL_MAX
        {
            pool.push((dir, fd));
        }
    }
}

impl RunSandbox {
    /// Kills what is left in the run's cgroup and pools the cgroup when it
    /// can serve another run. Returns whether no process is left.
    fn settle_cgroup(&self, cg: cgroup::RunCgroup) -> bool {
        let mut empty = cg.is_empty();
        if !empty {
            let _ = cg.kill_all();
            for _ in 0..50 {
                empty = cg.is_empty();
                if empty {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        // Only a cgroup with no process left, never killed, may serve
        // another run; else its own Drop keeps killing and removes it.
        let reusable = empty && !cg.was_killed();
        if reusable {
            cg.settle();
        }
        if reusable
            && let Ok(mut pool) = self.shared.cgroup_pool.lock()
            && pool.len() < CGROUP_POOL_MAX
        {
            pool.push(cg);
        }
        empty
    }
}
