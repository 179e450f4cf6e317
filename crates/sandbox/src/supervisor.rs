//! The process-wide setup a supervisor needs before it prepares any
//! sandbox, in one explicit place: [`Supervisor::init`].
//!
//! Everything else in the crate acts on one run; what is here acts on the
//! whole process (and, for the sweep, on what earlier processes left on the
//! host). A [`Sandbox`](crate::Sandbox) can only be prepared with a
//! [`Supervisor`], so the compiler keeps a process from running sandboxed
//! children without having been set up for it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock, RwLockWriteGuard};

use nix::errno::Errno;
use nix::sys::prctl::set_child_subreaper;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::plan::kept::KeptFile;
use crate::plan::{cgroup, privs, rundir};
use crate::spawn::sys;

/// Which process-wide effects [`Supervisor::init`] has. `Default` is what
/// a long-lived service wants; a process that makes one run turns on what
/// it gains from (the kept cgroups, the pinned network namespace, the
/// sweep on a thread, the heap padding) and off what it does not.
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
    /// Do that sweep on a thread of its own while the process goes on
    /// (reading its policy, preparing its sandbox); the sandbox waits for
    /// the layout, which the thread finds first, and its preparation ends
    /// by waiting for the rest, so runs claim nothing the sweep is still
    /// clearing.
    ///
    /// Why: the sweep (finding the layout, then listing and locking what
    /// earlier supervisors left) took about 0.55 ms of a one-shot call's
    /// start, before the policy was even read (BENCHMARKS.md). Every step
    /// is safe beside another supervisor doing the same, so beside this
    /// one's own runs too; one cut short by the process's exit is taken up
    /// by the next sweep.
    pub sweep_in_background: bool,
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
    /// Start making the empty network namespace that runs without network
    /// join (see `docs/threat-model.md`), on a thread of its own.
    ///
    /// Why: making one is about a millisecond of kernel work; started
    /// here, it overlaps the policy load and the sandbox's preparation
    /// instead of adding to a one-shot call. The first sandbox prepared
    /// without network takes it; one prepared later, or without this,
    /// starts its own. Only where the process can make namespaces at all.
    pub network_namespace: bool,
    /// Keep the empty network namespace for later processes: pinned in
    /// the supervisor's private directory (a bind mount of it), and
    /// joined by the next process instead of making its own. Only a root
    /// supervisor can pin one; others make theirs as before.
    ///
    /// Why: making and tearing down a network namespace costs about a
    /// millisecond of CPU per process (BENCHMARKS.md), on the other core
    /// but in the way of what else runs there. Sharing one is what a
    /// daemon's runs already do (`docs/threat-model.md`): they are in it
    /// without any capability, so none can change it for the next.
    pub pin_network_namespace: bool,
    /// Keep run cgroups between processes: runs take a set from a few
    /// slots kept in the supervisor's private directory, and leave it
    /// there for the next process when they end clean.
    ///
    /// Why: a one-shot CLI call otherwise creates its run's cgroups and
    /// removes them, about half a millisecond of cgroupfs work (three
    /// hierarchies on a hybrid host) per call. A set is reused only when
    /// its last run left it empty and never killed it; any other is
    /// killed and removed first (`RunCgroup::claim`). For processes that
    /// make few runs; a long-lived service keeps its own in-process pool
    /// and leaves this off, so the slots stay free for one-shot calls.
    pub shared_cgroup_pool: bool,
    /// Make runs' mount and IPC namespaces ahead, on a thread of their
    /// own; the run's child then joins them (see [`NamespacesAhead`]).
    ///
    /// Why: making them costs a run about 0.3 ms (a tmpfs, its binds and
    /// the namespace copies, BENCHMARKS.md) between the request and the
    /// program's start. Made ahead, that work overlaps what comes before
    /// the run: the wait for the next request in a service, the decision
    /// and the run's preparation in a one-shot call. Each is made for one
    /// run and never serves another.
    pub namespaces_ahead: NamespacesAhead,
    /// Keep one run's child made ahead: cloned, in its cgroup and
    /// namespaces, its privileges dropped, Landlock and seccomp applied,
    /// waiting for its command on a thread of its own; the next run whose
    /// root access matches hands it its command.
    ///
    /// Why: those steps are the same for every run of a sandbox and were
    /// about 0.2 ms of a daemon run's path between the request and the
    /// program's start (BENCHMARKS.md). Made ahead, they overlap the wait
    /// for the next request. For a long-lived service, which with this
    /// also settles each run's sandbox (its cgroup back to the pool, its
    /// directory checked or removed) after the result, on another thread;
    /// a process that makes one run gains nothing from either.
    pub children_ahead: bool,
    /// Grow the C allocator's heaps 1 MiB past what each growth needs (glibc's `M_TOP_PAD`, 128 KiB by default).
    ///
    /// Why: a one-shot call's threads (the policy's, the sweep, the
    /// namespaces', the patterns') grow heaps of their own in small steps,
    /// each an `mprotect` or `brk` that takes the address space's lock for
    /// writing while the other threads fault pages in under it. Padded, a
    /// call made 46 -> 19 `mprotect` calls and took 0.05-0.07 ms less
    /// (BENCHMARKS.md). Padding never touched
    /// costs no memory; but a heap also keeps that much at its top after
    /// frees, which a long-lived service would hold on to, so it is off
    /// there. Set first, before `init` starts any thread.
    pub heap_pad: bool,
}

/// How far past its need a heap grows with [`SupervisorOptions::heap_pad`].
const HEAP_PAD: usize = 1 << 20;

/// Which runs get mount and IPC namespaces made ahead of them
/// ([`SupervisorOptions::namespaces_ahead`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum NamespacesAhead {
    /// None: each run's child makes its own.
    #[default]
    Off,
    /// The first run of each sandbox only, started when the sandbox is
    /// prepared: a process that makes one run (the one-shot CLI).
    FirstRun,
    /// Every run: one or two are kept ready, the next started as one is
    /// taken (a long-lived service).
    EveryRun,
}

impl Default for SupervisorOptions {
    fn default() -> Self {
        SupervisorOptions {
            stdio: true,
            subreaper: true,
            sweep_stale: true,
            sweep_in_background: false,
            drop_bounding_set: true,
            network_namespace: true,
            pin_network_namespace: false,
            shared_cgroup_pool: false,
            namespaces_ahead: NamespacesAhead::EveryRun,
            children_ahead: true,
            heap_pad: false,
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
            sweep_in_background: false,
            drop_bounding_set: false,
            network_namespace: false,
            pin_network_namespace: false,
            shared_cgroup_pool: false,
            namespaces_ahead: NamespacesAhead::Off,
            children_ahead: false,
            heap_pad: false,
        }
    }

    /// A process that makes one run (the CLI's run form, the shell
    /// drop-in): run cgroups and the empty network namespace kept for the
    /// next such process, the run's namespaces made while it is decided,
    /// the sweep of earlier leftovers on a thread of its own, no child
    /// made ahead (its Landlock ruleset would depend on a decision not yet
    /// made), and heaps grown in larger steps.
    pub fn one_shot() -> Self {
        SupervisorOptions {
            shared_cgroup_pool: true,
            pin_network_namespace: true,
            namespaces_ahead: NamespacesAhead::FirstRun,
            sweep_in_background: true,
            children_ahead: false,
            heap_pad: true,
            ..SupervisorOptions::default()
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
    /// The empty network namespace started by `init`, until a sandbox
    /// takes it.
    network: Mutex<Option<sys::PendingNetwork>>,
    /// For a supervisor that is not root, the user namespace (with its
    /// empty network namespace) its runs make their namespaces in,
    /// started by `init`, until a sandbox takes it.
    user: Mutex<Option<sys::PendingUser>>,
    /// Where the kept run cgroup slots are locked, with
    /// [`SupervisorOptions::shared_cgroup_pool`].
    cgroup_slots: Option<PathBuf>,
    /// [`SupervisorOptions::namespaces_ahead`].
    namespaces_ahead: NamespacesAhead,
    /// [`SupervisorOptions::children_ahead`].
    children_ahead: bool,
    /// The sweep started by `init` on a thread of its own, until waited
    /// for ([`Supervisor::wait_for_sweep`]).
    sweep: Mutex<Option<std::thread::JoinHandle<()>>>,
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
        if opts.heap_pad {
            crate::spawn::pad_heap_growth(HEAP_PAD);
        }
        if opts.stdio {
            sys::ensure_stdio_open();
        }
        if opts.subreaper && set_child_subreaper(true).is_ok() {
            SUBREAPER.store(true, Ordering::SeqCst);
        }
        // Early, so its kernel work overlaps everything after it.
        // Read once: it decides both what follows, and only a supervisor
        // that makes namespaces asks (about 30 µs of `/proc` reads).
        let no_admin = opts.network_namespace && matches!(sys::namespaces_known(), Some(Err(_)));
        let euid = nix::unistd::Uid::effective();
        let network = (opts.network_namespace && !no_admin)
            .then(|| {
                let pin = (opts.pin_network_namespace && euid.is_root())
                    .then(|| rundir::private_dir("netns"))
                    .flatten()
                    .map(|d| d.join("net"));
                match pin.as_deref().and_then(sys::open_pinned_network) {
                    Some(fd) => Some(sys::PendingNetwork::Pinned(fd)),
                    None => sys::start_empty_network_namespace(pin),
                }
            })
            .flatten();
        // A supervisor that is not root makes its runs' namespaces in a
        // user namespace of its own: started as early, for the same reason.
        let user = (opts.network_namespace && !euid.is_root() && no_admin)
            .then(|| {
                sys::start_user_namespace(euid.as_raw(), nix::unistd::Gid::effective().as_raw())
            })
            .flatten();
        let cgroup_slots = opts
            .shared_cgroup_pool
            .then(|| rundir::private_dir("cgroup-slots"))
            .flatten();
        let cap_last = privs::cap_last_cap();
        let inner = Arc::new(Inner {
            cap_last,
            cgroups: OnceLock::new(),
            network: Mutex::new(network),
            user: Mutex::new(user),
            cgroup_slots,
            namespaces_ahead: opts.namespaces_ahead,
            children_ahead: opts.children_ahead,
            sweep: Mutex::new(None),
        });
        if opts.sweep_stale {
            let swept = Arc::clone(&inner);
            let sweep = move || {
                let layout = swept.cgroups.get_or_init(cgroup::detect);
                cgroup::sweep_stale(layout);
                if let Some(slots) = &swept.cgroup_slots {
                    cgroup::sweep_slots(layout, slots);
                }
                // Only a base the supervisor owns is swept (a planted one
                // is refused here and reported when a sandbox is prepared).
                if let Ok(base) = rundir::ensure_base() {
                    rundir::sweep_stale(&base);
                }
            };
            if opts.sweep_in_background {
                // Started before the bounding set is dropped: it execs
                // nothing. Without a thread the sweep runs here.
                match std::thread::Builder::new()
                    .name("agent-exec-sweep".into())
                    .spawn(sweep.clone())
                {
                    Ok(handle) => {
                        *inner
                            .sweep
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(handle);
                    }
                    Err(_) => sweep(),
                }
            } else {
                sweep();
            }
        }
        if opts.drop_bounding_set {
            sys::drop_thread_bounding_set(cap_last);
        }
        Supervisor { inner }
    }

    /// Waits until the sweep `init` started on a thread
    /// ([`SupervisorOptions::sweep_in_background`]) is done; at once when
    /// there is none. Preparing a sandbox ends with it; a process that
    /// prepares none calls it before it exits, so a sweep is never cut
    /// short (what it killed is then removed too).
    pub fn wait_for_sweep(&self) {
        let handle = self
            .inner
            .sweep
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }

    /// The empty network namespace `init` started, if no sandbox took it
    /// yet.
    pub(crate) fn take_network_namespace(&self) -> Option<sys::PendingNetwork> {
        self.inner
            .network
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// The user namespace `init` started, if no sandbox took it yet.
    pub(crate) fn take_user_namespace(&self) -> Option<sys::PendingUser> {
        self.inner
            .user
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
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

    /// Reaps every dead process that runs left with this process (orphans
    /// it adopted as a subreaper), and returns how many it reaped.
    ///
    /// Each run reaps what it can attribute to itself when it ends, but a
    /// process that left the run's session and exits later (or that the
    /// run could not attribute) stays a zombie of the supervisor until
    /// someone waits for it, and zombies count against the child user's
    /// `RLIMIT_NPROC`. A long-lived supervisor calls this on `SIGCHLD`.
    ///
    /// Never takes the exit status of a run's main child (its run waits
    /// for it), nor of a child other code of the process started in the
    /// supervisor's own session (`std::process::Command` children): only
    /// processes of sessions that runs made are reaped. Cost: one read of
    /// the process's children list and one `/proc/<pid>/stat` read per
    /// child in it. Any thread may call it.
    pub fn reap_adopted(&self) -> usize {
        reap_adopted()
    }

    /// Declares `pid`, a child this process started for itself and keeps
    /// for its whole life (the daemon's reaper helper), as never a run's:
    /// the orphan sweep at the end of every run and
    /// [`reap_adopted`](Self::reap_adopted) leave it out instead of reading
    /// its `/proc` files each time (three reads a run for the reaper; the
    /// sweep was 6.5% of a daemon run's samples, BENCHMARKS.md). Its exit
    /// status stays its starter's: nothing here reaps it, so its pid
    /// cannot be reused while it is listed.
    pub fn keep_own_child(&self, pid: u32) {
        if let Ok(pid) = i32::try_from(pid) {
            own_children().push(pid);
        }
    }

    pub(crate) fn cap_last(&self) -> u32 {
        self.inner.cap_last
    }

    /// The host's cgroup layout, found once per supervisor.
    pub(crate) fn cgroups(&self) -> &cgroup::Layout {
        self.inner.cgroups.get_or_init(cgroup::detect)
    }

    /// Which runs of its sandboxes get namespaces made ahead.
    pub(crate) fn namespaces_ahead(&self) -> NamespacesAhead {
        self.inner.namespaces_ahead
    }

    pub(crate) fn children_ahead(&self) -> bool {
        self.inner.children_ahead
    }

    /// The directory of the kept run cgroup slots, when this process
    /// shares them ([`SupervisorOptions::shared_cgroup_pool`]).
    pub(crate) fn cgroup_slots(&self) -> Option<&Path> {
        self.inner.cgroup_slots.as_deref()
    }
}

/// Whether `Supervisor::init` made the process a child subreaper.
pub(crate) fn subreaper_active() -> bool {
    SUBREAPER.load(Ordering::SeqCst)
}

/// Opens `/dev/null` on whichever of descriptors 0, 1 and 2 is closed, as
/// [`SupervisorOptions::stdio`] does: for a process that runs nothing
/// itself (a client of a daemon) and needs nothing else of
/// [`Supervisor::init`], before it opens a socket that would otherwise
/// become its stdout.
pub fn guard_stdio() {
    sys::ensure_stdio_open();
}

/// Kills every process left in the run cgroups of supervisor `pid` and
/// removes them, waiting for each to empty; returns how many still had
/// processes. For a helper process that outlives a supervisor which died
/// with runs in flight: their commands' descendants are in those cgroups
/// and nobody else will end them.
pub fn kill_runs_of(pid: u32) -> usize {
    cgroup::sweep_owned_by(&cgroup::detect(), pid)
}

// ---------------------------------------------------------------------------
// The process's children: main children of runs in flight, which their runs
// reap through a pidfd, and orphans adopted as a subreaper, which nobody
// waits for unless we do.
//
// The rule that keeps one from taking the other's exit status (or
// signalling a reused pid): an adopted child is only signalled or waited for
// while `REAP_GATE` is held exclusively, after checking its pid is not in
// `LIVE_MAIN`; and a run holds the gate shared from before it clones its
// main child until the pid is in `LIVE_MAIN`. So under the exclusive gate
// every main child is registered, and every other child's pid keeps naming
// the same process until the holder reaps it (nobody else reaps one then).
// `waitpid(-1)` cannot be used: it would take a main child's status from
// the run waiting for it.

static REAP_GATE: RwLock<()> = RwLock::new(());

/// Main children of every run in flight in this process.
static LIVE_MAIN: Mutex<Vec<i32>> = Mutex::new(Vec::new());

fn live_main() -> MutexGuard<'static, Vec<i32>> {
    // A panic while holding the lock leaves a valid Vec behind.
    LIVE_MAIN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Children the process keeps for itself (`Supervisor::keep_own_child`).
static OWN_CHILDREN: Mutex<Vec<i32>> = Mutex::new(Vec::new());

fn own_children() -> MutexGuard<'static, Vec<i32>> {
    OWN_CHILDREN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts a run's main child with `spawn` and registers it (`pid` tells
/// its pid) before any reaper can see it.
pub(crate) fn spawn_main<T, E>(
    spawn: impl FnOnce() -> Result<T, E>,
    pid: impl FnOnce(&T) -> i32,
) -> Result<T, E> {
    // Poisoning cannot leave the unit value inconsistent.
    let _gate = REAP_GATE.read().unwrap_or_else(|e| e.into_inner());
    let spawned = spawn()?;
    live_main().push(pid(&spawned));
    Ok(spawned)
}

/// The run reaped its main child: the pid is no longer ours.
pub(crate) fn forget_main(pid: i32) {
    live_main().retain(|p| *p != pid);
}

/// Held while adopted children are signalled or reaped (see above).
pub(crate) struct Reaping {
    _gate: RwLockWriteGuard<'static, ()>,
    /// Main children registered when the gate was taken; none can be added
    /// while it is held.
    live: Vec<i32>,
    kids: Vec<i32>,
    text: String,
}

impl Reaping {
    pub(crate) fn begin() -> Reaping {
        let gate = REAP_GATE.write().unwrap_or_else(|e| e.into_inner());
        Reaping {
            live: live_main().clone(),
            _gate: gate,
            kids: Vec::new(),
            text: String::new(),
        }
    }

    /// The adopted children now, main children of runs and the process's
    /// own children left out.
    pub(crate) fn adopted(&mut self) -> &[i32] {
        adopted(&mut self.kids, &mut self.text);
        let live = &self.live;
        let own = own_children();
        self.kids.retain(|p| !live.contains(p) && !own.contains(p));
        &self.kids
    }

    /// Reaps `pid` if it is dead. True when it is gone (reaped now, or not
    /// a child of ours any more); false while it still runs. A main child
    /// is never touched (reported gone: it is not ours to wait for).
    pub(crate) fn reap(&self, pid: i32) -> bool {
        if self.live.contains(&pid) {
            return true;
        }
        loop {
            match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => return false,
                Err(Errno::EINTR) => continue,
                // Reaped, or ECHILD: either way it is gone.
                _ => return true,
            }
        }
    }
}

/// See [`Supervisor::reap_adopted`].
pub(crate) fn reap_adopted() -> usize {
    let own_session = nix::unistd::getsid(None).map_or(-1, Pid::as_raw);
    let mut reaping = Reaping::begin();
    let mut reaped = 0;
    // One pass reaps every zombie present; a child dying meanwhile sends
    // another SIGCHLD.
    let kids = reaping.adopted().to_vec();
    for pid in kids {
        // A run's processes are all in sessions its main child (a session
        // leader) or they made; what other code of the process started
        // shares ours.
        if stat_fields(pid).is_some_and(|st| st.zombie && st.sid != own_session)
            && reaping.reap(pid)
        {
            reaped += 1;
        }
    }
    reaped
}

/// Children adopted by this process. The kernel hands an orphan to the
/// first live thread of the subreaper, the thread-group leader (alive as
/// long as a Rust process is), so only the leader's list is read, not one
/// per thread. Without `CONFIG_PROC_CHILDREN`, `/proc` is scanned for
/// processes whose parent is us (slower, same result).
pub(crate) fn adopted(list: &mut Vec<i32>, text: &mut String) {
    list.clear();
    text.clear();
    let me = std::process::id();
    if read_children_list(me, text) {
        list.extend(
            text.split_ascii_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
        return;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if stat_fields(pid).is_some_and(|f| f.ppid == me as i32) {
            list.push(pid);
        }
    }
}

/// The leader's children list, kept open with the pid it was opened for
/// (three system calls fewer at the end of every run).
static CHILDREN_LIST: Mutex<Option<(u32, KeptFile)>> = Mutex::new(None);

/// Reads this process's children list into `text`; false when the file
/// cannot be read (no `CONFIG_PROC_CHILDREN`).
fn read_children_list(me: u32, text: &mut String) -> bool {
    let mut kept = CHILDREN_LIST.lock().unwrap_or_else(|e| e.into_inner());
    // A forked copy of the process has a pid of its own.
    let list = match kept.as_ref() {
        Some((pid, list)) if *pid == me => list,
        _ => {
            let path = PathBuf::from(format!("/proc/self/task/{me}/children"));
            &kept.insert((me, KeptFile::new(path))).1
        }
    };
    match list.read() {
        Some(pids) => {
            text.push_str(&pids);
            true
        }
        None => false,
    }
}

pub(crate) struct StatFields {
    pub zombie: bool,
    pub ppid: i32,
    pub pgrp: i32,
    pub sid: i32,
    /// When the process started, in clock ticks since boot.
    pub start: u64,
}

/// State, parent, process group, session and start time of `pid`.
pub(crate) fn stat_fields(pid: i32) -> Option<StatFields> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain anything, including ") ": the fields
    // after it start at the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    let mut f = rest.split_ascii_whitespace();
    let zombie = f.next()? == "Z";
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    let sid = f.next()?.parse().ok()?;
    // Field 22 of proc_pid_stat(5); `sid` was field 6.
    let start = f.nth(15)?.parse().ok()?;
    Some(StatFields {
        zombie,
        ppid,
        pgrp,
        sid,
        start,
    })
}
