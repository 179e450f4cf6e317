//! Safe wrappers for the few raw syscalls the parent side of the crate
//! needs and `nix` does not offer, and the process setup the supervisor
//! runs once (`crate::supervisor`). Each takes and returns owned or
//! borrowed fds (never bare integers it would have to trust), so a caller
//! cannot hand the kernel a dangling pointer or adopt an fd it does not
//! own. Everything `nix` already wraps safely (kill, waitpid, fcntl,
//! eventfd, prctl) is used from `nix` directly by the callers.

use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// `pidfd_open(pid, 0)`: an fd that refers to the process `pid` for as long
/// as the fd lives, immune to pid reuse.
pub(crate) fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: integer arguments only.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just created this fd; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// How a child ended, as `waitid` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChildExit {
    /// Exited with this code.
    Code(i32),
    /// Killed (or dumped) by this signal.
    Signal(i32),
}

/// `waitid(P_PIDFD, pidfd, WEXITED | ...)`, retried on EINTR. `reap` false
/// adds WNOWAIT (the child stays a zombie, its pid reserved); `block` false
/// adds WNOHANG. `Ok(None)`: not exited yet (only without `block`).
pub(crate) fn waitid_pidfd(
    pidfd: BorrowedFd<'_>,
    reap: bool,
    block: bool,
) -> io::Result<Option<ChildExit>> {
    let mut flags = libc::WEXITED;
    if !reap {
        flags |= libc::WNOWAIT;
    }
    if !block {
        flags |= libc::WNOHANG;
    }
    loop {
        // SAFETY: siginfo_t is plain data; all-zero is a valid value, and
        // it is what tells "no child ready" (si_pid 0) under WNOHANG.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid writes only into `info`, which outlives the call.
        let r = unsafe {
            libc::waitid(
                libc::P_PIDFD,
                pidfd.as_raw_fd() as libc::id_t,
                &mut info,
                flags,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        // SAFETY: for waitid the kernel fills the SIGCHLD view of the
        // union (or leaves it zeroed), which these accessors read.
        let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
        if pid == 0 {
            return Ok(None);
        }
        return Ok(Some(match info.si_code {
            libc::CLD_EXITED => ChildExit::Code(status),
            _ => ChildExit::Signal(status),
        }));
    }
}

/// A fixed set of `N` poll slots, each empty or watching one borrowed fd.
/// Unlike `nix::poll::PollFd`, a slot may be empty (fd -1, which the kernel
/// ignores), so slot numbers stay fixed whichever fds are still open.
#[derive(Debug)]
pub(crate) struct PollSlots<'fd, const N: usize> {
    fds: [libc::pollfd; N],
    _borrow: PhantomData<BorrowedFd<'fd>>,
}

impl<'fd, const N: usize> Default for PollSlots<'fd, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'fd, const N: usize> PollSlots<'fd, N> {
    /// All slots empty.
    pub(crate) fn new() -> Self {
        PollSlots {
            fds: [libc::pollfd {
                fd: -1,
                events: 0,
                revents: 0,
            }; N],
            _borrow: PhantomData,
        }
    }

    /// Watches `fd` for `events` (`libc::POLLIN`, `libc::POLLOUT`) in
    /// `slot`. Out-of-range slots are ignored.
    pub(crate) fn set(&mut self, slot: usize, fd: BorrowedFd<'fd>, events: i16) {
        if let Some(p) = self.fds.get_mut(slot) {
            *p = libc::pollfd {
                fd: fd.as_raw_fd(),
                events,
                revents: 0,
            };
        }
    }

    /// What the last `ppoll` reported for `slot` (0 when nothing).
    pub(crate) fn revents(&self, slot: usize) -> i16 {
        self.fds.get(slot).map_or(0, |p| p.revents)
    }

    /// `ppoll` without a signal mask; `None` waits forever. Returns how many
    /// slots are ready (0 on timeout). EINTR is returned, not retried, so
    /// the caller recomputes its deadlines.
    pub(crate) fn ppoll(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        let ts = timeout.map(timespec);
        let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
        // SAFETY: `fds` is a live array of N pollfd, `ts_ptr` is null or
        // points to `ts`, which outlives the call; no signal mask.
        let r = unsafe {
            libc::ppoll(
                self.fds.as_mut_ptr(),
                N as libc::nfds_t,
                ts_ptr,
                std::ptr::null(),
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r as usize)
    }
}

fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

/// Whether seccomp filters can return errno (SECCOMP_GET_ACTION_AVAIL for
/// SECCOMP_RET_ERRNO): true when the kernel can install our filter.
pub(crate) fn seccomp_filter_available() -> bool {
    const SECCOMP_GET_ACTION_AVAIL: u32 = 2;
    const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
    let action: u32 = SECCOMP_RET_ERRNO;
    // SAFETY: SECCOMP_GET_ACTION_AVAIL only reads the u32 we pass, which
    // lives until the call returns.
    unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0u32,
            &action as *const u32,
        ) == 0
    }
}

/// Whether the file at `path` (not following a final symlink) carries any
/// extended attribute, an ACL included: `llistxattr` with an empty buffer
/// reports the size of the name list. Errors count as "has some", the
/// answer that refuses reuse.
pub(crate) fn has_xattrs(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return true;
    };
    // SAFETY: a NUL-terminated path and a null buffer of size 0, which asks
    // only for the needed size.
    let n = unsafe { libc::llistxattr(c.as_ptr(), std::ptr::null_mut(), 0) };
    n != 0
}

/// Empties the calling thread's capability bounding set, which threads it
/// creates later and every child it spawns inherit. The supervisor's own
/// capabilities are unchanged (the bounding set only limits what an
/// `execve` can grant), so a thread that spawns sandboxed children but
/// never execs anything itself can do this once and spare each child 41
/// `prctl` calls (about 60 µs measured). Best effort: without
/// CAP_SETPCAP nothing changes and children drop the set themselves.
pub(crate) fn drop_thread_bounding_set(cap_last: u32) {
    for cap in 0..=cap_last {
        // SAFETY: prctl on the calling thread's own credentials.
        unsafe {
            libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0);
        }
    }
}

thread_local! {
    static BOUNDING_EMPTY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread's bounding set holds no capability. Checked
/// until it is true and then remembered: a bounding set never grows back.
pub(crate) fn thread_bounding_empty(cap_last: u32) -> bool {
    if BOUNDING_EMPTY.with(|b| b.get()) {
        return true;
    }
    // SAFETY: PR_CAPBSET_READ only queries the calling thread.
    let empty = (0..=cap_last).all(
        |cap| unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap as libc::c_ulong, 0, 0, 0) } == 0,
    );
    if empty {
        BOUNDING_EMPTY.with(|b| b.set(true));
    }
    empty
}

/// Opens `/dev/null` on any of descriptors 0, 1 and 2 that is closed. Call
/// it first thing in a supervisor: otherwise the next file it opens (a
/// Landlock rule's pre-opened path, say) lands on 0-2 and the child's stdio
/// setup would overwrite it.
pub(crate) fn ensure_stdio_open() {
    for fd in 0..3 {
        // SAFETY: F_GETFD only queries the descriptor table.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0 {
            continue;
        }
        // SAFETY: open with a static NUL-terminated path; the lowest free
        // descriptor, which is `fd` since the ones below it are open.
        let got = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        if got >= 0 && got != fd {
            // SAFETY: closing the descriptor we just opened.
            unsafe { libc::close(got) };
        }
    }
}

/// Closes `fds` on a thread of their own. For the namespace handles a run
/// holds: the last close of a mount namespace unmounts its tree and waits
/// for an RCU grace period (about 0.1 ms, and milliseconds on a busy
/// host), which is then no longer between the run's exit and its result.
pub(crate) fn release_later(fds: Vec<OwnedFd>) {
    if !fds.is_empty() {
        drop_later(Box::new(fds));
    }
}

/// Drops `value` on a thread of its own (the one [`release_later`] uses),
/// after the caller has moved on. Falls back to dropping it here when the
/// thread cannot be had.
pub(crate) fn drop_later(value: Box<dyn Send>) {
    use std::sync::mpsc::{Sender, channel};
    use std::sync::{Mutex, OnceLock};
    type Later = Box<dyn Send>;
    static CLOSER: OnceLock<Option<Mutex<Sender<Later>>>> = OnceLock::new();
    let closer = CLOSER.get_or_init(|| {
        let (tx, rx) = channel::<Later>();
        std::thread::Builder::new()
            .name("agent-exec-ns-release".into())
            .spawn(move || rx.into_iter().for_each(drop))
            .ok()
            .map(|_| Mutex::new(tx))
    });
    let Some(tx) = closer else {
        return;
    };
    if let Ok(tx) = tx.lock()
        && let Err(unsent) = tx.send(value)
    {
        drop(unsent.0);
    }
}

/// What the process's own credentials and confinement say about making a
/// run's mount and IPC namespaces, without making any: `Some(Ok)` when
/// nothing stands in the way (CAP_SYS_ADMIN in the initial user namespace,
/// no seccomp filter, no LSM confinement), `Some(Err(EPERM))` when the
/// capability is missing, `None` when only trying can tell (a seccomp
/// filter, an LSM profile or a user namespace may refuse what the
/// capability allows). About 30 µs of reads against 0.2-3 ms for the
/// probe thread (its clone, the copy of the mount tree, and a scheduler
/// round on a busy machine; BENCHMARKS.md). A confinement this misses
/// (a Landlock domain on the supervisor itself, say) makes the child's
/// `unshare` or `mount` fail: the run is refused, nothing runs unconfined.
pub(crate) fn namespaces_known() -> Option<io::Result<()>> {
    const CAP_SYS_ADMIN: u32 = 21;
    if !has_effective_cap(CAP_SYS_ADMIN) {
        return Some(Err(io::Error::from_raw_os_error(libc::EPERM)));
    }
    // Read once a process: a one-shot call asks at setup and again when
    // it prepares its sandbox. The capability is asked each time (it is
    // the calling thread's); what is read here is the process's: its user
    // namespace (which a threaded process cannot leave), the main
    // thread's seccomp mode and LSM label.
    static UNCONFINED: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    let unconfined = UNCONFINED.get_or_init(|| {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let unfiltered = status
            .lines()
            .find_map(|l| l.strip_prefix("Seccomp:"))
            .is_some_and(|v| v.trim() == "0");
        let uid_map = std::fs::read_to_string("/proc/self/uid_map").ok()?;
        let initial_userns =
            uid_map.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"];
        Some(unfiltered && initial_userns && lsm_unconfined())
    });
    (*unconfined)?.then_some(Ok(()))
}

/// `capget` on the calling thread: whether `cap` is in its effective set.
fn has_effective_cap(cap: u32) -> bool {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut hdr = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget writes two `Data` records (version 3) into `data`,
    // which outlives the call; `hdr` is read and may be written.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut hdr, data.as_mut_ptr()) };
    if r < 0 {
        return false;
    }
    let (word, bit) = ((cap / 32) as usize, cap % 32);
    data.get(word)
        .is_some_and(|d| d.effective & (1 << bit) != 0)
}

/// Whether no LSM confines the process: no LSM answers for
/// `/proc/self/attr/current`, or AppArmor says `unconfined`. Anything
/// else (an AppArmor profile, any SELinux context) may refuse mounts.
fn lsm_unconfined() -> bool {
    match std::fs::read("/proc/self/attr/current") {
        Ok(label) => {
            let label = String::from_utf8_lossy(&label);
            let label = label.trim_end_matches(['\0', '\n']);
            label.is_empty() || label == "unconfined"
        }
        Err(e) => e.raw_os_error() == Some(libc::EINVAL),
    }
}

/// Whether this process can give a run its own mount and IPC namespaces:
/// a short-lived thread does what the child will (unshare both, make its
/// tree private, mount a tmpfs on `target`) and exits, which drops its
/// namespaces. A thread, not a child process: cheaper, and it has the same
/// credentials, seccomp filter and LSM confinement as the threads that
/// spawn runs.
pub(crate) fn probe_namespaces(target: &std::ffi::CStr) -> io::Result<()> {
    let target = target.to_owned();
    // SAFETY: changes only this thread's view (unsharing the mount
    // namespace unshares the thread's filesystem context too), which ends
    // with the thread.
    let probe = move || unsafe { probe_mount(&target) }.map_err(|_| io::Error::last_os_error());
    std::thread::Builder::new()
        .name("agent-exec-ns-probe".into())
        .spawn(probe)?
        .join()
        .map_err(|_| io::Error::other("the namespace probe thread panicked"))?
}

/// What a run's child does first in its namespaces, as a probe: a mount
/// and an IPC namespace, every mount private, a small read-only tmpfs on
/// `target`. Raw syscalls only, so a cloned helper may run it too.
/// `Err(1)`: the namespaces or the private tree were refused; `Err(2)`:
/// the tmpfs. errno is the failing call's.
///
/// # Safety
/// Changes the caller's namespaces: only on a thread or in a process made
/// for it.
unsafe fn probe_mount(target: &std::ffi::CStr) -> Result<(), u32> {
    // SAFETY: raw syscalls on NUL-terminated strings alive for the call.
    unsafe {
        if libc::syscall(libc::SYS_unshare, libc::CLONE_NEWNS | libc::CLONE_NEWIPC) < 0
            || libc::syscall(
                libc::SYS_mount,
                std::ptr::null::<libc::c_char>(),
                c"/".as_ptr(),
                std::ptr::null::<libc::c_char>(),
                (libc::MS_REC | libc::MS_PRIVATE) as libc::c_ulong,
                std::ptr::null::<libc::c_void>(),
            ) < 0
        {
            return Err(1);
        }
        if libc::syscall(
            libc::SYS_mount,
            c"tmpfs".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            (libc::MS_NOSUID | libc::MS_NODEV | libc::MS_RDONLY) as libc::c_ulong,
            c"size=4k".as_ptr(),
        ) < 0
        {
            return Err(2);
        }
    }
    Ok(())
}

/// Starts making a network namespace with nothing in it (a loopback
/// device that stays down), for runs without network: joined by each child
/// with `setns`, which costs microseconds where making one costs about a
/// millisecond of kernel work (BENCHMARKS.md), so a sandbox makes it once
/// and its runs share it, and the work runs on a thread of its own while
/// the caller goes on (the supervisor starts it before the policy is even
/// loaded). In it a run sees no host socket: `/proc/self/net/*` lists only
/// what runs made, and abstract Unix sockets and every address family
/// reach only other runs, which Landlock's scopes keep apart where the
/// kernel has them (ABI 6). Unsharing the network namespace is allowed in
/// a threaded process; the thread's namespace outlives it through the
/// descriptor it returns. With `pin`, the thread also pins it there for
/// later processes ([`pin_network`]). `None` when no thread could be
/// started.
pub(crate) fn start_empty_network_namespace(
    pin: Option<std::path::PathBuf>,
) -> Option<PendingNetwork> {
    let make = move || -> io::Result<OwnedFd> {
        // SAFETY: integer argument only; changes only this thread's
        // network namespace, and the thread ends right after.
        if unsafe { libc::syscall(libc::SYS_unshare, libc::CLONE_NEWNET) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: static NUL-terminated path; the descriptor returned is
        // new and owned by nothing else.
        let fd = unsafe {
            libc::open(
                c"/proc/thread-self/ns/net".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        if let Some(path) = pin {
            // Best effort: unpinned, the next process makes its own.
            let _ = pin_network(&path);
        }
        Ok(fd)
    };
    std::thread::Builder::new()
        .name("agent-exec-netns".into())
        .spawn(make)
        .ok()
        .map(PendingNetwork::Making)
}

/// A network namespace for the runs: on its way (see
/// [`start_empty_network_namespace`]), or one pinned by an earlier
/// process ([`open_pinned_network`]).
#[derive(Debug)]
pub(crate) enum PendingNetwork {
    Making(std::thread::JoinHandle<io::Result<OwnedFd>>),
    Pinned(OwnedFd),
}

impl PendingNetwork {
    /// The namespace, once made; `Err` when the making thread panicked.
    pub(crate) fn join(self) -> std::thread::Result<io::Result<OwnedFd>> {
        match self {
            PendingNetwork::Making(t) => t.join(),
            PendingNetwork::Pinned(fd) => Ok(Ok(fd)),
        }
    }
}

/// `NS_GET_NSTYPE` (`linux/nsfs.h`, `_IO(0xb7, 0x3)`): the kind of
/// namespace an nsfs descriptor names.
const NS_GET_NSTYPE: libc::c_ulong = 0xb703;

/// The network namespace pinned at `path`, if a network namespace is what
/// is mounted there (a plain file left from before a reboot is not).
pub(crate) fn open_pinned_network(path: &std::path::Path) -> Option<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let fd = OwnedFd::from(file);
    // SAFETY: integer arguments on a descriptor this function owns.
    let kind = unsafe { libc::ioctl(fd.as_raw_fd(), NS_GET_NSTYPE) };
    (kind == libc::CLONE_NEWNET).then_some(fd)
}

/// Pins the calling thread's network namespace at `path` (a bind mount of
/// it onto a file there, as `ip netns add` does), unless one is pinned
/// already; under a lock beside it, so processes that race pin one.
///
/// Why: a one-shot call that makes its runs' empty network namespace
/// spends about a millisecond of CPU on it and on its teardown; later
/// calls join the pinned one instead, as a daemon's runs share the one it
/// made. Needs `CAP_SYS_ADMIN` in the host's mount namespace (a root
/// supervisor); `path`'s directory must be the supervisor's alone.
fn pin_network(path: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other("no directory"))?;
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join("lock"))?;
    let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| io::Error::from(e))?;
    if open_pinned_network(path).is_some() {
        return Ok(());
    }
    // The mount point; a file left from before a reboot is reused.
    drop(
        std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)?,
    );
    let target = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: NUL-terminated paths that outlive the call; no data.
    let r = unsafe {
        libc::mount(
            c"/proc/thread-self/ns/net".as_ptr(),
            target.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The network namespace `fd` names, for the child: `setns` into it.
///
/// # Safety
/// Child side only (between clone and exec); `fd` open.
pub(crate) unsafe fn join_network(fd: RawFd) -> libc::c_long {
    // SAFETY: integer arguments only.
    unsafe { libc::syscall(libc::SYS_setns, fd, libc::CLONE_NEWNET) }
}

/// A user namespace made for a non-root supervisor's runs, in which they
/// may make mount and IPC namespaces, and the empty network namespace it
/// owns.
#[derive(Debug)]
pub(crate) struct UserNamespace {
    pub user: OwnedFd,
    /// `None` when it was not asked for (the runs keep the host's network).
    pub net: Option<OwnedFd>,
}

/// Makes a user namespace in which `uid` and `gid` (the caller's own) are
/// themselves and nothing else is mapped, and with `net` an empty network
/// namespace owned by it, then checks that a mount namespace can be made
/// and a tmpfs mounted in them, as each run's child will.
///
/// Why a helper process: the kernel refuses `unshare(CLONE_NEWUSER)` to a
/// threaded process and `setns` into a user namespace likewise, so no
/// thread of the supervisor can make or enter one; a process cloned
/// straight into new namespaces can. It shares this process's memory and
/// descriptor table (`CLONE_VM | CLONE_FILES`, suspending only the calling
/// thread until it exits): no page tables copied, and the namespace
/// descriptors it opens are this process's. It writes its own maps
/// (`setgroups` denied first, as the kernel requires of an unprivileged
/// writer), opens its namespaces, probes and exits (`userns_entry`). The
/// descriptors keep the namespaces alive for the sandbox's life; each
/// run's child joins the user namespace with `setns`, which the kernel
/// allows the namespace's owner (the same uid) from outside.
pub(crate) fn make_user_namespace(uid: u32, gid: u32, net: bool) -> io::Result<UserNamespace> {
    let mut job = UsernsJob {
        uid_map: IdMap::new(uid),
        gid_map: IdMap::new(gid),
        net,
        user_fd: -1,
        net_fd: -1,
        failed_at: 0,
        errno: 0,
    };
    let mut extra = libc::CLONE_NEWUSER | libc::CLONE_FILES;
    if net {
        extra |= libc::CLONE_NEWNET;
    }
    // SAFETY: `userns_entry` makes raw syscalls on `job` only and exits;
    // `job` outlives the call (CLONE_VFORK returns after the exit).
    let pidfd = unsafe {
        super::clone::clone_vfork_entry(
            extra,
            userns_entry,
            &mut job as *mut UsernsJob as *mut libc::c_void,
        )
    }?;
    // A service's SIGCHLD handler may reap it first (ECHILD): fine.
    let _ = waitid_pidfd(pidfd.as_fd(), true, true);
    // SAFETY: the helper opened these in this process's descriptor table
    // (CLONE_FILES) and nothing else owns them.
    let adopt = |fd: libc::c_int| (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) });
    let (user, net_fd) = (adopt(job.user_fd), adopt(job.net_fd));
    if job.failed_at != 0 {
        let source = io::Error::from_raw_os_error(job.errno);
        return Err(io::Error::new(
            source.kind(),
            format!(
                "{} in a new user namespace: {source}",
                USERNS_STAGES[job.failed_at as usize]
            ),
        ));
    }
    match user {
        Some(user) => Ok(UserNamespace { user, net: net_fd }),
        None => Err(io::Error::other(
            "the user namespace helper opened no namespace",
        )),
    }
}

/// One line of an id map (`"<id> <id> 1\n"`), formatted before the clone.
#[derive(Clone, Copy)]
struct IdMap {
    text: [u8; 32],
    len: usize,
}

impl IdMap {
    fn new(id: u32) -> IdMap {
        let mut text = [0u8; 32];
        let line = format!("{id} {id} 1\n");
        let len = line.len().min(text.len());
        text[..len].copy_from_slice(&line.as_bytes()[..len]);
        IdMap { text, len }
    }
}

/// What the helper is asked and answers, in the memory it shares.
#[repr(C)]
struct UsernsJob {
    uid_map: IdMap,
    gid_map: IdMap,
    net: bool,
    user_fd: libc::c_int,
    net_fd: libc::c_int,
    /// The stage that failed (an index of `USERNS_STAGES`); 0: none.
    failed_at: u32,
    errno: libc::c_int,
}

/// The helper's stages, for the error message.
const USERNS_STAGES: [&str; 7] = [
    "",
    "denying setgroups",
    "writing the uid map",
    "writing the gid map",
    "opening the namespaces",
    "making a mount and IPC namespace",
    "mounting a tmpfs",
];

/// The helper of [`make_user_namespace`], in its new namespaces, on its
/// own stack in the supervisor's memory: raw syscalls only.
extern "C" fn userns_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `UsernsJob` the suspended caller keeps alive.
    let job = unsafe { &mut *(arg as *mut UsernsJob) };
    // SAFETY: raw syscalls on static strings and the job's buffers.
    let stage = unsafe { userns_stages(job) };
    if let Err(stage) = stage {
        job.failed_at = stage;
        // SAFETY: this thread's errno location (the caller's, shared).
        job.errno = unsafe { *libc::__errno_location() };
    }
    // SAFETY: raw exit of the helper.
    unsafe { libc::_exit(0) }
}

/// # Safety
/// Only in [`userns_entry`].
unsafe fn userns_stages(job: &mut UsernsJob) -> Result<(), u32> {
    // SAFETY (whole body): raw syscalls on static NUL-terminated paths and
    // on the job's buffers.
    unsafe {
        let write_file = |path: &std::ffi::CStr, data: &[u8]| -> bool {
            let fd = libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                path.as_ptr(),
                libc::O_WRONLY | libc::O_CLOEXEC,
            );
            if fd < 0 {
                return false;
            }
            let n = libc::syscall(libc::SYS_write, fd, data.as_ptr(), data.len());
            libc::syscall(libc::SYS_close, fd);
            n == data.len() as libc::c_long
        };
        let open_ns = |path: &std::ffi::CStr| -> libc::c_int {
            libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                path.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            ) as libc::c_int
        };
        if !write_file(c"/proc/self/setgroups", b"deny") {
            return Err(1);
        }
        if !write_file(c"/proc/self/uid_map", &job.uid_map.text[..job.uid_map.len]) {
            return Err(2);
        }
        if !write_file(c"/proc/self/gid_map", &job.gid_map.text[..job.gid_map.len]) {
            return Err(3);
        }
        job.user_fd = open_ns(c"/proc/self/ns/user");
        if job.user_fd < 0 {
            return Err(4);
        }
        if job.net {
            job.net_fd = open_ns(c"/proc/self/ns/net");
            if job.net_fd < 0 {
                return Err(4);
            }
        }
        // The mount and IPC namespace and the tmpfs: stages 5 and 6.
        probe_mount(c"/").map_err(|stage| 4 + stage)
    }
}

/// A user namespace on its way (see [`start_user_namespace`]).
pub(crate) type PendingUser = std::thread::JoinHandle<io::Result<UserNamespace>>;

/// Starts [`make_user_namespace`] (with a network namespace) on a thread
/// of its own, so its kernel work (the clone into new namespaces, the
/// helper's probe and exit: about 1.5 ms here) overlaps what the caller
/// does meanwhile; a clone, unlike `unshare`, may make a user namespace
/// from any thread. `None` when no thread could be started.
pub(crate) fn start_user_namespace(uid: u32, gid: u32) -> Option<PendingUser> {
    std::thread::Builder::new()
        .name("agent-exec-userns".into())
        .spawn(move || make_user_namespace(uid, gid, true))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// When the cheap check answers, the probe (which does what a child
    /// will) agrees with it.
    #[test]
    fn the_cheap_namespace_check_agrees_with_the_probe() {
        let probed = probe_namespaces(c"/tmp");
        match namespaces_known() {
            Some(Ok(())) => assert!(probed.is_ok(), "{probed:?}"),
            Some(Err(e)) => {
                assert_eq!(e.raw_os_error(), Some(libc::EPERM));
                assert!(probed.is_err());
            }
            None => {}
        }
    }
}
