//! Per-run cgroups: a place to count, limit and kill every process of a run,
//! whatever it double-forked or re-parented.
//!
//! Layouts handled: pure cgroup v2 (`pids`/`memory` when the controllers can
//! be enabled, `cgroup.kill` always), and hybrid hosts where v1 controller
//! hierarchies carry the limits while the controller-less v2 mount still
//! gives `cgroup.kill`. The child joins every hierarchy by writing "0" to a
//! `cgroup.procs` fd the parent opened, before it drops privileges.

use std::fs;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::kept::KeptFile;

use nix::fcntl::{Flock, FlockArg, OFlag, open};
use nix::sys::signal::{Signal, kill};
use nix::sys::stat::Mode;
use nix::unistd::Pid;

/// What this host offers, found once in `Sandbox::prepare`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Layout {
    /// v2 base dir for our runs (`cgroup.kill`, maybe controllers).
    pub v2_base: Option<PathBuf>,
    pub v2_pids: bool,
    pub v2_memory: bool,
    /// v1 base dirs per controller.
    pub v1_pids: Option<PathBuf>,
    pub v1_memory: Option<PathBuf>,
    pub v1_freezer: Option<PathBuf>,
}

impl Layout {
    pub(crate) fn any(&self) -> bool {
        self.v2_base.is_some()
            || self.v1_pids.is_some()
            || self.v1_memory.is_some()
            || self.v1_freezer.is_some()
    }
}

/// Reads `/proc/self/mountinfo` and `/proc/self/cgroup` and creates (or
/// reuses) the `agent-exec` base directories. Any failure only removes
/// that hierarchy from the layout: cgroups are a best-effort layer.
pub(crate) fn detect() -> Layout {
    let mut layout = Layout::default();
    let Ok(mountinfo) = fs::read_to_string("/proc/self/mountinfo") else {
        return layout;
    };
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    for line in mountinfo.lines() {
        // "id parent maj:min root mountpoint opts ... - fstype source superopts"
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mut l = left.split(' ');
        let (Some(_), Some(_), Some(_), Some(root), Some(mnt)) =
            (l.next(), l.next(), l.next(), l.next(), l.next())
        else {
            continue;
        };
        if root != "/" {
            // A bind of a sub-tree (a container's view); our own path
            // inside it is not computable from /proc/self/cgroup.
            continue;
        }
        let mut r = right.split(' ');
        let (Some(fstype), Some(_), Some(superopts)) = (r.next(), r.next(), r.next()) else {
            continue;
        };
        let mnt = PathBuf::from(unescape(mnt));
        match fstype {
            "cgroup2" if layout.v2_base.is_none() => {
                // Controllers can only be enabled for children of a cgroup
                // without processes, so the base lives at the hierarchy's
                // root rather than under our own (populated) cgroup.
                let base = mnt.join("agent-exec");
                if !usable_base(&base, false) {
                    continue;
                }
                let available =
                    fs::read_to_string(mnt.join("cgroup.controllers")).unwrap_or_default();
                let mut want = Vec::new();
                for c in ["pids", "memory"] {
                    if available.split_whitespace().any(|a| a == c) {
                        want.push(c);
                    }
                }
                for c in &want {
                    let _ = write_file(&mnt.join("cgroup.subtree_control"), &format!("+{c}"));
                    let _ = write_file(&base.join("cgroup.subtree_control"), &format!("+{c}"));
                }
                let enabled =
                    fs::read_to_string(base.join("cgroup.subtree_control")).unwrap_or_default();
                layout.v2_pids = enabled.split_whitespace().any(|a| a == "pids");
                layout.v2_memory = enabled.split_whitespace().any(|a| a == "memory");
                layout.v2_base = Some(base);
            }
            "cgroup" => {
                for ctl in ["pids", "memory", "freezer"] {
                    if !superopts.split(',').any(|o| o == ctl) {
                        continue;
                    }
                    // v1 has no "no internal processes" rule: nest under our
                    // own cgroup so the runs stay inside our own limits.
                    let own_path = own
                        .lines()
                        .filter_map(|l| {
                            let mut parts = l.splitn(3, ':');
                            parts.next();
                            parts.next().zip(parts.next())
                        })
                        .find(|(ctls, _)| ctls.split(',').any(|c| c == ctl))
                        .map(|(_, p)| p.trim_start_matches('/').to_string())
                        .unwrap_or_default();
                    let base = mnt.join(own_path).join("agent-exec");
                    if !usable_base(&base, true) {
                        continue;
                    }
                    let slot = match ctl {
                        "pids" => &mut layout.v1_pids,
                        "memory" => &mut layout.v1_memory,
                        _ => &mut layout.v1_freezer,
                    };
                    *slot = Some(base);
                }
            }
            _ => {}
        }
    }
    layout
}

/// Creates `base` if needed and checks that we may create runs in it (a
/// base left by a root supervisor is not writable by a later non-root one).
fn usable_base(base: &Path, nested: bool) -> bool {
    let created = if nested {
        fs::create_dir_all(base)
    } else {
        fs::create_dir(base)
    };
    (created.is_ok() || base.is_dir())
        && nix::unistd::access(base, nix::unistd::AccessFlags::W_OK).is_ok()
}

fn unescape(s: &str) -> String {
    // mountinfo escapes space, tab, newline and backslash as \ooo.
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn write_file(path: &Path, value: &str) -> std::io::Result<()> {
    let mut f = fs::OpenOptions::new().write(true).open(path)?;
    f.write_all(value.as_bytes())
}

/// One run's cgroups (one per hierarchy used).
#[derive(Debug)]
pub(crate) struct RunCgroup {
    /// Every directory created, for removal.
    dirs: Vec<PathBuf>,
    /// `cgroup.procs` of each v1 hierarchy, opened for the child to join.
    pub v1_procs: Vec<OwnedFd>,
    /// The v2 cgroup's directory, for `clone3(CLONE_INTO_CGROUP)`: the child
    /// is born inside it, which costs no migration (a write to
    /// `cgroup.procs` waits for an RCU grace period, measured here at up to
    /// 30 ms per run).
    pub v2_dir: Option<OwnedFd>,
    /// Its `cgroup.procs`, for kernels or seccomp profiles without clone3.
    pub v2_procs: Option<OwnedFd>,
    v2: Option<PathBuf>,
    /// The v2 cgroup's `cgroup.events`, read at the end of every run.
    v2_events: Option<KeptFile>,
    freezer: Option<PathBuf>,
    /// Limits actually written, for the summary.
    pub applied: Vec<String>,
    /// `cgroup.kill` was written. Such a cgroup must not serve another run:
    /// the kernel here SIGKILLs every child later created inside it with
    /// `clone3(CLONE_INTO_CGROUP)` (its kill sequence number no longer
    /// matches the one the fork recorded).
    killed: std::sync::atomic::AtomicBool,
    /// The memory cap, when one was written.
    pub memory: Option<MemoryCap>,
    /// The kept slot this cgroup set belongs to, locked while in use (see
    /// [`RunCgroup::claim`]); `None` for a cgroup of this process alone.
    slot: Option<Slot>,
}

/// A run cgroup's memory cap and where the kernel counts its OOM kills.
#[derive(Debug)]
pub(crate) struct MemoryCap {
    pub max_bytes: u64,
    /// `memory.events` (v2) or `memory.oom_control` (v1): both have an
    /// `oom_kill N` line, the kills the cap caused in this cgroup's life.
    events: KeptFile,
    /// The count already reported: a pooled cgroup keeps counting across
    /// runs, so a run's kills are the difference.
    seen: AtomicU64,
    /// Whether the current run's count was taken (else it is taken before
    /// the cgroup serves another run).
    taken: std::sync::atomic::AtomicBool,
}

impl MemoryCap {
    fn new(max_bytes: u64, events: PathBuf) -> MemoryCap {
        MemoryCap {
            max_bytes,
            events: KeptFile::new(events),
            seen: AtomicU64::new(0),
            taken: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The processes the cap killed since the last call. Read once the
    /// run's processes are gone, so no later kill belongs to it. An
    /// unreadable file counts none: the result then shows how the run
    /// ended without naming the cap.
    pub(crate) fn take_oom_kills(&self) -> u64 {
        self.taken.store(true, Ordering::Relaxed);
        let Some(now) = self.events.read().and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("oom_kill "))
                .and_then(|n| n.trim().parse::<u64>().ok())
        }) else {
            return 0;
        };
        now.saturating_sub(self.seen.swap(now, Ordering::Relaxed))
    }

    /// For a cgroup kept by another process: the kills counted so far
    /// were other runs', so this process reports only what comes after.
    fn baseline(&self) {
        let _ = self.take_oom_kills();
        self.taken.store(false, Ordering::Relaxed);
    }

    /// Before the cgroup serves another run: what this run's result did
    /// not take must not be reported by the next one.
    fn settle(&self) {
        if !self.taken.swap(false, Ordering::Relaxed) {
            let _ = self.take_oom_kills();
            self.taken.store(false, Ordering::Relaxed);
        }
    }
}

static RUN_SEQ: AtomicU64 = AtomicU64::new(0);

impl RunCgroup {
    /// Creates the run's cgroups and writes the limits. `None` when no
    /// hierarchy accepted a new cgroup.
    pub(crate) fn create(layout: &Layout, pids_max: u64, memory_max: u64) -> Option<RunCgroup> {
        let name = format!(
            "run-{}-{}",
            std::process::id(),
            RUN_SEQ.fetch_add(1, Ordering::Relaxed)
        );
        Self::make_named(layout, &name, pids_max, memory_max, false)
    }

    /// The cgroups named `name` in every hierarchy, with the limits
    /// written; `existing`: a directory already there is taken as it is
    /// (a kept slot's), else it must be new.
    fn make_named(
        layout: &Layout,
        name: &str,
        pids_max: u64,
        memory_max: u64,
        existing: bool,
    ) -> Option<RunCgroup> {
        let mut cg = RunCgroup {
            dirs: Vec::new(),
            v1_procs: Vec::new(),
            v2_dir: None,
            v2_procs: None,
            v2: None,
            v2_events: None,
            freezer: None,
            applied: Vec::new(),
            killed: std::sync::atomic::AtomicBool::new(false),
            memory: None,
            slot: None,
        };
        let make = |cg: &mut RunCgroup, base: &Path| -> Option<(PathBuf, OwnedFd)> {
            let dir = base.join(name);
            match fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if existing && e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(_) => return None,
            }
            cg.dirs.push(dir.clone());
            let fd = open(
                &dir.join("cgroup.procs"),
                OFlag::O_WRONLY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .ok()?;
            Some((dir, fd))
        };
        let join = |cg: &mut RunCgroup, base: &Path| -> Option<PathBuf> {
            let (dir, procs) = make(cg, base)?;
            cg.v1_procs.push(procs);
            Some(dir)
        };
        if let Some(base) = &layout.v2_base
            && let Some((dir, procs)) = make(&mut cg, base)
            && let Ok(dir_fd) = open(
                &dir,
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
        {
            cg.v2_dir = Some(dir_fd);
            cg.v2_procs = Some(procs);
            if pids_max > 0
                && layout.v2_pids
                && write_file(&dir.join("pids.max"), &pids_max.to_string()).is_ok()
            {
                cg.applied.push(format!("cgroup_pids_max={pids_max}"));
            }
            if memory_max > 0
                && layout.v2_memory
                && write_file(&dir.join("memory.max"), &memory_max.to_string()).is_ok()
            {
                // memory.max bounds RAM only: without this a run could page
                // out past its cap into the host's swap. 0 rather than a
                // second budget, so the cap means RAM and swap together, as
                // memsw does on v1. Absent when the kernel does not account
                // swap, which then cannot be used past the cap either way.
                let _ = write_file(&dir.join("memory.swap.max"), "0");
                cg.applied.push(format!("cgroup_memory_max={memory_max}"));
                cg.memory = Some(MemoryCap::new(memory_max, dir.join("memory.events")));
            }
            if dir.join("cgroup.kill").exists() {
                cg.applied.push("cgroup_kill".to_string());
            }
            cg.v2_events = Some(KeptFile::new(dir.join("cgroup.events")));
            cg.v2 = Some(dir);
        }
        if pids_max > 0
            && !cg_has(&cg.applied, "cgroup_pids_max")
            && let Some(base) = &layout.v1_pids
            && let Some(dir) = join(&mut cg, base)
            && write_file(&dir.join("pids.max"), &pids_max.to_string()).is_ok()
        {
            cg.applied.push(format!("cgroup_pids_max={pids_max}"));
        }
        if memory_max > 0
            && !cg_has(&cg.applied, "cgroup_memory_max")
            && let Some(base) = &layout.v1_memory
            && let Some(dir) = join(&mut cg, base)
            && write_v1_memory_cap(&dir, memory_max)
        {
            cg.applied.push(format!("cgroup_memory_max={memory_max}"));
            cg.memory = Some(MemoryCap::new(memory_max, dir.join("memory.oom_control")));
        }
        if cg.v2.is_none()
            && let Some(base) = &layout.v1_freezer
            && let Some(dir) = join(&mut cg, base)
        {
            cg.freezer = Some(dir);
            cg.applied.push("cgroup_freezer".to_string());
        }
        if cg.dirs.is_empty() { None } else { Some(cg) }
    }

    /// Kills every process of the run: `cgroup.kill` on v2, else freeze,
    /// SIGKILL each member and thaw (so none can fork in between), else a
    /// bounded SIGKILL sweep.
    pub(crate) fn kill_all(&self) -> std::io::Result<()> {
        self.killed.store(true, Ordering::Relaxed);
        if let Some(v2) = &self.v2
            && write_file(&v2.join("cgroup.kill"), "1").is_ok()
        {
            return Ok(());
        }
        let Some(members_dir) = self.freezer.as_ref().or(self.dirs.first()) else {
            return Ok(());
        };
        let frozen = match &self.freezer {
            Some(f) => {
                write_file(&f.join("freezer.state"), "FROZEN")?;
                for _ in 0..100 {
                    if fs::read_to_string(f.join("freezer.state"))
                        .map(|s| s.trim() == "FROZEN")
                        .unwrap_or(false)
                    {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                true
            }
            None => false,
        };
        let sweep = || -> std::io::Result<()> {
            for _ in 0..if frozen { 1 } else { 50 } {
                let pids = members(members_dir)?;
                if pids.is_empty() {
                    break;
                }
                for pid in pids {
                    // Already gone (ESRCH) is the outcome we want.
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
            }
            Ok(())
        };
        let swept = sweep();
        // Thaw even when the sweep failed: a frozen cgroup would hang its
        // processes (and the pool would hand it to the next run).
        if let Some(f) = &self.freezer {
            write_file(&f.join("freezer.state"), "THAWED")?;
        }
        swept
    }

    /// Sends `sig` to every process of the run (one read of the member
    /// list: a process forked meanwhile is left to the SIGKILL that
    /// follows). Used for the polite SIGTERM at a deadline, which must
    /// reach processes that left the main child's session too.
    pub(crate) fn signal_all(&self, sig: Signal) {
        let Some(dir) = self.v2.as_ref().or(self.dirs.first()) else {
            return;
        };
        for pid in members(dir).unwrap_or_default() {
            let _ = kill(Pid::from_raw(pid), sig);
        }
    }

    /// Whether `cgroup.kill` was ever written: such a cgroup may not serve
    /// another run (see `killed`).
    pub(crate) fn was_killed(&self) -> bool {
        self.killed.load(Ordering::Relaxed)
    }

    /// Before the cgroup serves another run (see `MemoryCap::settle`).
    pub(crate) fn settle(&self) {
        if let Some(m) = &self.memory {
            m.settle();
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        if let Some(events) = self.v2_events.as_ref().and_then(KeptFile::read) {
            return events.lines().any(|l| l.trim() == "populated 0");
        }
        self.dirs
            .iter()
            .all(|d| members(d).map(|m| m.is_empty()).unwrap_or(true))
    }
}

/// How many run cgroup sets one-shot supervisors of one user keep between
/// processes: a few calls at once find one each; a call that finds every
/// slot taken makes a set of its own, as without the slots.
const SLOTS: u32 = 4;
/// A slot's state file says one of these (same length, so one `pwrite`
/// turns one into another): the set is there, empty and never killed;
/// no set is there; the set is in use. Anything but the first two (a
/// new file included) is a set of unknown history, removed before the
/// slot serves a run.
const CLEAN: &[u8] = b"clean\n";
const EMPTY: &[u8] = b"empty\n";
const INUSE: &[u8] = b"inuse\n";

/// What a slot's state file says (see [`CLEAN`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Clean,
    Empty,
    Unknown,
}

/// A claim on one kept cgroup set: the slot's state file, locked
/// (`flock`) for as long as this process uses the set. The kernel drops
/// the lock when the process dies, whatever way it dies; the state file
/// then still says `inuse`, and the next claimant removes the set.
#[derive(Debug)]
struct Slot {
    state: Flock<fs::File>,
}

impl RunCgroup {
    /// A run cgroup set from the slots kept in `slots` (a directory only
    /// this supervisor can write) across one-shot supervisor processes:
    /// creating a set and removing it cost a one-shot call about half a
    /// millisecond (`mkdir`/`rmdir` in three hierarchies, measured in
    /// BENCHMARKS.md). A set is reused only when the process that used it
    /// last left it empty and never killed (`was_killed`: the kernel
    /// SIGKILLs what is later cloned into a cgroup that saw `cgroup.kill`),
    /// which it says by writing `clean` before unlocking. Any other set is
    /// killed, removed and made anew. `None` when every slot is taken or
    /// cannot be used: the caller makes a set of its own.
    pub(crate) fn claim(
        layout: &Layout,
        slots: &Path,
        pids_max: u64,
        memory_max: u64,
    ) -> Option<RunCgroup> {
        let tag = slots_tag(slots);
        for i in 0..SLOTS {
            let Some((state, said)) = lock_slot(slots, i) else {
                continue;
            };
            let name = slot_name(&tag, i);
            let clean = said == SlotState::Clean;
            if said == SlotState::Unknown && !remove_named(layout, &name) {
                // Still has processes on their way out: the next claimant
                // tries again.
                continue;
            }
            // Said before the set is used: a crash from here on leaves the
            // slot `inuse`, so it is never taken for clean.
            if state.write_all_at(INUSE, 0).is_err() {
                continue;
            }
            let Some(mut cg) = Self::make_named(layout, &name, pids_max, memory_max, true) else {
                continue;
            };
            cg.slot = Some(Slot { state });
            if clean && !cg.is_empty() {
                // Only a supervisor of this user can join it, but a set
                // with a process in it is never handed to a run; its Drop
                // kills and removes it.
                continue;
            }
            if let Some(m) = &cg.memory {
                m.baseline();
            }
            return Some(cg);
        }
        None
    }
}

/// Kills and removes the kept sets no process holds and no process left
/// clean (their holder died mid-run). Runs at supervisor start, as the
/// stale sweep does for the `run-<pid>-*` cgroups of dead supervisors,
/// so what a killed call left running does not wait for a later call to
/// need that slot.
pub(crate) fn sweep_slots(layout: &Layout, slots: &Path) {
    let tag = slots_tag(slots);
    for i in 0..SLOTS {
        if let Some((state, SlotState::Unknown)) = lock_slot(slots, i)
            && remove_named(layout, &slot_name(&tag, i))
        {
            // Nothing of unknown history is left: the next claimant makes
            // the set without looking for one.
            let _ = state.write_all_at(EMPTY, 0);
        }
    }
}

/// Opens and locks slot `i`'s state file without waiting, with what it
/// says. `None` when another process holds it or it cannot be opened as
/// a regular file of ours.
fn lock_slot(slots: &Path, i: u32) -> Option<(Flock<fs::File>, SlotState)> {
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(slots.join(format!("slot-{i}")))
        .ok()?;
    let state = Flock::lock(file, FlockArg::LockExclusiveNonblock).ok()?;
    let mut buf = [0u8; 16];
    let n = state.read_at(&mut buf, 0).ok()?;
    let said = match &buf[..n] {
        b if b == CLEAN => SlotState::Clean,
        b if b == EMPTY => SlotState::Empty,
        _ => {
            // A state is written in place: what is longer than one goes,
            // so the next one written reads back exactly.
            state.set_len(0).ok()?;
            SlotState::Unknown
        }
    };
    Some((state, said))
}

/// The slots' cgroups are named after the user and the slot directory, so
/// two supervisors of one user with different private directories (a
/// different `XDG_RUNTIME_DIR`) never share a set.
fn slots_tag(slots: &Path) -> String {
    // FNV-1a: a stable name, not a secret.
    let mut h: u32 = 0x811c_9dc5;
    for b in slots.as_os_str().as_encoded_bytes() {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{}-{h:08x}", nix::unistd::Uid::effective().as_raw())
}

fn slot_name(tag: &str, i: u32) -> String {
    format!("slot-{tag}-{i}")
}

/// Kills what is in, and removes, the cgroups named `name`; whether none
/// is left.
fn remove_named(layout: &Layout, name: &str) -> bool {
    sweep_where(layout, |n| n == name, true);
    [
        &layout.v2_base,
        &layout.v1_pids,
        &layout.v1_memory,
        &layout.v1_freezer,
    ]
    .into_iter()
    .flatten()
    .all(|base| !base.join(name).exists())
}

/// Whether an entry named `run-<pid>-...` belongs to a supervisor that is
/// gone (killed, or exited without running destructors).
pub(crate) fn is_stale(name: &str) -> bool {
    let Some(pid) = name.strip_prefix("run-").and_then(|r| r.split('-').next()) else {
        return false;
    };
    match pid.parse::<u32>() {
        Ok(pid) => pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists(),
        Err(_) => false,
    }
}

/// Kills what is left in, and removes, the run cgroups of dead supervisors.
pub(crate) fn sweep_stale(layout: &Layout) {
    // Still busy while the killed processes exit: a later sweep gets it.
    sweep_where(layout, is_stale, false);
}

/// Kills what is left in, and removes, every run cgroup of supervisor
/// `pid` (the daemon's reaper, after the daemon died). Waits for each to
/// empty so it can be removed. Returns how many still had processes.
pub(crate) fn sweep_owned_by(layout: &Layout, pid: u32) -> usize {
    let prefix = format!("run-{pid}-");
    sweep_where(layout, |name| name.starts_with(&prefix), true)
}

fn sweep_where(layout: &Layout, matches: impl Fn(&str) -> bool, wait: bool) -> usize {
    let bases = [
        &layout.v2_base,
        &layout.v1_pids,
        &layout.v1_memory,
        &layout.v1_freezer,
    ];
    let mut busy = 0;
    for base in bases.into_iter().flatten() {
        let Ok(rd) = fs::read_dir(base) else { continue };
        for e in rd.flatten() {
            if !matches(&e.file_name().to_string_lossy()) {
                continue;
            }
            let dir = e.path();
            let pids = members(&dir).unwrap_or_default();
            if !pids.is_empty() {
                busy += 1;
            }
            let _ = write_file(&dir.join("cgroup.kill"), "1");
            if layout.v1_freezer.as_ref() == Some(base) {
                let _ = write_file(&dir.join("freezer.state"), "THAWED");
            }
            // Without cgroup.kill a forking process can add members between
            // two reads: sweep until the cgroup stays empty.
            for _ in 0..if wait { 100 } else { 1 } {
                let pids = members(&dir).unwrap_or_default();
                if pids.is_empty() {
                    break;
                }
                for pid in pids {
                    // Already gone (ESRCH) is the outcome we want.
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
                if wait {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
            // Killed processes leave their cgroup asynchronously.
            for _ in 0..if wait { 200 } else { 1 } {
                if fs::remove_dir(&dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
    busy
}

/// Writes a v1 memory cgroup's cap on memory and on memory plus swap
/// (`memsw`): equal means no swap past the cap. The kernel refuses a
/// `memsw` limit below the memory limit, so a kept cgroup's cap is lowered
/// memory first and raised `memsw` first. `memsw` is absent without swap
/// accounting (as on hosts without swap).
fn write_v1_memory_cap(dir: &Path, max: u64) -> bool {
    let (memory, memsw) = (
        dir.join("memory.limit_in_bytes"),
        dir.join("memory.memsw.limit_in_bytes"),
    );
    let max = max.to_string();
    let written = write_file(&memory, &max).is_ok()
        || (write_file(&memsw, &max).is_ok() && write_file(&memory, &max).is_ok());
    let _ = write_file(&memsw, &max);
    written
}

fn cg_has(applied: &[String], prefix: &str) -> bool {
    applied.iter().any(|a| a.starts_with(prefix))
}

fn members(dir: &Path) -> std::io::Result<Vec<i32>> {
    Ok(fs::read_to_string(dir.join("cgroup.procs"))?
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect())
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        // Held until the set is removed, so no claimant meets it half gone.
        let slot = self.slot.take();
        if let Some(slot) = &slot
            && !self.was_killed()
            && self.is_empty()
            && slot.state.write_all_at(CLEAN, 0).is_ok()
        {
            // Kept for the next one-shot supervisor; unlocked by the drop.
            return;
        }
        if !self.is_empty() {
            let _ = self.kill_all();
        }
        // Killed processes leave the cgroup asynchronously; rmdir is EBUSY
        // until they have.
        let mut removed = true;
        for dir in self.dirs.iter().rev() {
            let mut ok = false;
            for i in 0..200 {
                if fs::remove_dir(dir).is_ok() || !dir.exists() {
                    ok = true;
                    break;
                }
                if i % 20 == 19 {
                    let _ = self.kill_all();
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            if !ok {
                removed = false;
                tracing::warn!(cgroup = %dir.display(), "could not remove a run cgroup");
            }
        }
        if let Some(slot) = &slot
            && removed
        {
            // Else it stays `inuse`: the next claimant removes what is left.
            let _ = slot.state.write_all_at(EMPTY, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_kernel::require_kernel_feature;

    /// The v1 path (freeze, kill each member, thaw) used when no v2
    /// hierarchy gives `cgroup.kill`.
    #[test]
    fn v1_freeze_and_kill_empties_the_cgroup() {
        if !require_kernel_feature("root", nix::unistd::Uid::effective().is_root()) {
            return;
        }
        let full = detect();
        if !require_kernel_feature("a cgroup v1 freezer hierarchy", full.v1_freezer.is_some()) {
            return;
        }
        let layout = Layout {
            v2_base: None,
            v2_pids: false,
            v2_memory: false,
            ..full
        };
        let cg = RunCgroup::create(&layout, 64, 0).unwrap();
        assert!(
            cg.applied.iter().any(|a| a == "cgroup_freezer"),
            "{:?}",
            cg.applied
        );
        let mut children = Vec::new();
        for _ in 0..3 {
            let c = std::process::Command::new("/bin/sleep")
                .arg("60")
                .spawn()
                .unwrap();
            for dir in &cg.dirs {
                write_file(&dir.join("cgroup.procs"), &c.id().to_string()).unwrap();
            }
            children.push(c);
        }
        assert!(!cg.is_empty());
        cg.kill_all().unwrap();
        for c in &mut children {
            let status = c.wait().unwrap();
            assert_eq!(
                std::os::unix::process::ExitStatusExt::signal(&status),
                Some(libc::SIGKILL)
            );
        }
        assert!(cg.is_empty());
        let state = fs::read_to_string(cg.freezer.as_ref().unwrap().join("freezer.state")).unwrap();
        assert_eq!(state.trim(), "THAWED");
    }
}
