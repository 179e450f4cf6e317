//! The run's own mount and IPC namespaces, made by the child before it
//! drops its privileges: which directories get covered and which paths
//! stay visible is decided in `crate::plan::mounts`; this file holds that
//! decision as plain data and the raw syscalls that apply it.
//!
//! One tmpfs serves every cover. It is mounted on the first cover's path
//! (the staging point), gets one subdirectory per cover, and each of those
//! is bound onto its cover's path: the first cover's last, on top of the
//! tmpfs itself, which is then out of reach. A tmpfs mount costs several
//! times a bind (a superblock made now and torn down at the run's end), so
//! one instead of one per directory saved 30-80 µs per run (BENCHMARKS.md).
//!
//! How a path under a covered directory stays visible: before covering
//! the directory the child makes it its working directory (or keeps a
//! descriptor of it, for the staging point), so a relative path still
//! resolves in what lies beneath the cover, and binds it back at its own
//! path on top. The covers then leave the working directory at `/`, never
//! beneath a cover, and the `Chdir` step sets the real one. Binding from
//! descriptors the parent opened is not possible: they name mounts of the
//! parent's namespace, which the kernel refuses as a bind source in
//! another one.

use std::ffi::{CStr, CString};

use super::steps::Step;

/// At most this many covers are writable (`/tmp`, `/var/tmp`,
/// `/dev/shm`): the child keeps a descriptor of each, for its Landlock
/// rule, in a fixed array.
pub(crate) const SCRATCH_MAX: usize = 4;

/// A directory the child makes in its tmpfs, as the host's directory of
/// the same path is: the same mode and owner, so reaching a kept path
/// takes the same permissions as on the host, no fewer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dir {
    pub path: CString,
    /// Permission bits and the sticky bit.
    pub mode: libc::mode_t,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
}

/// One directory covered in the run's mount namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cover {
    /// Absolute and free of symlinks.
    pub path: CString,
    /// Its directory in the run's tmpfs while that is at the staging
    /// point (the staging point's path, `/`, the cover's number), with
    /// the mode and owner the cover shows: 1777 for a scratch directory,
    /// the host directory's own for a hidden one with something kept in
    /// it, 0755 and root for an empty one.
    pub staged: Dir,
    /// A private writable directory (it gets a Landlock rule of its own);
    /// otherwise an empty read-only one.
    pub scratch: bool,
    /// Paths beneath it that stay visible.
    pub keeps: Vec<Keep>,
}

/// A path beneath a cover, bound back at its own place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Keep {
    /// Relative to the cover's path: resolved in what lies beneath it.
    pub source: CString,
    /// Absolute: where it is bound, inside the cover.
    pub target: CString,
    /// The directories between the cover and `target`, outermost first,
    /// created in the cover as mount points' parents.
    pub dirs: Vec<Dir>,
    /// Whether `target` is made as a directory (else as an empty file).
    pub is_dir: bool,
    /// The flags that remount it read-only once bound (`MS_REMOUNT |
    /// MS_BIND | MS_RDONLY | ...`), for a path granted only for reading
    /// beneath a writable cover; `None`: it stays as the host has it.
    pub remount: Option<libc::c_ulong>,
}

/// A host file bound read-only over another in the run's view (the
/// synthesized `/etc/passwd`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileBind {
    pub source: CString,
    pub target: CString,
}

/// The namespaces of one child, borrowed for a spawn.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MountPlan<'a> {
    /// The tmpfs options (`size=...,nr_inodes=...,mode=...`).
    pub data: &'a CStr,
    /// The first is the staging point.
    pub covers: &'a [Cover],
    /// The run's own directory (HOME, TMPDIR) when it lies beneath cover
    /// number `.0`: kept visible like the cover's own keeps.
    pub run_keep: Option<(usize, &'a Keep)>,
    /// Files bound over others, before any cover (a source may lie
    /// beneath one).
    pub files: &'a [FileBind],
    /// Give made directories their host owner. Not in a user namespace
    /// where only the child's own ids are mapped: there they stay the
    /// child's, which the read-only covers keep it from using.
    pub chown: bool,
}

/// A run's mount and IPC namespaces made ahead of its spawn, for one run
/// only (see [`make_ahead`]).
#[derive(Debug)]
pub(crate) struct Prepared {
    pub mnt: std::os::fd::OwnedFd,
    pub ipc: std::os::fd::OwnedFd,
    /// The scratch covers, in the plan's order (for their Landlock rules).
    pub scratch: Vec<std::os::fd::OwnedFd>,
}

/// What the child needs of a [`Prepared`]: the descriptors, borrowed for a
/// spawn.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PreparedFds {
    pub mnt: libc::c_int,
    pub ipc: libc::c_int,
    pub scratch: [libc::c_int; SCRATCH_MAX],
}

impl Prepared {
    pub(crate) fn fds(&self) -> PreparedFds {
        use std::os::fd::AsRawFd;
        let mut scratch = [-1; SCRATCH_MAX];
        for (slot, fd) in scratch.iter_mut().zip(&self.scratch) {
            *slot = fd.as_raw_fd();
        }
        PreparedFds {
            mnt: self.mnt.as_raw_fd(),
            ipc: self.ipc.as_raw_fd(),
            scratch,
        }
    }
}

/// Makes the mount and IPC namespaces a child would make for `plan`, on
/// the calling thread, and returns handles to them.
///
/// Why: making them is about 0.3 ms of kernel work per run (a tmpfs, the
/// binds, the namespace copies); a long-lived service does it on a thread
/// of its own between runs, and the child only joins them (`setns`, a few
/// µs). The steps are exactly the child's (`unshare`, [`make_private`],
/// [`mount_view`]), so the run sees the same view.
///
/// Call it only on a thread made for it, which exits afterwards: the
/// thread leaves the process's filesystem context (`CLONE_FS`: its cwd,
/// root and umask become its own) and enters the new namespaces.
pub(crate) fn make_ahead(plan: &MountPlan<'_>) -> std::io::Result<Prepared> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let last = std::io::Error::last_os_error;
    let mut scratch = [-1 as libc::c_int; SCRATCH_MAX];
    // SAFETY: raw syscalls on static strings and on the plan's strings,
    // alive for the call; the thread's own filesystem context is changed,
    // never the process's (CLONE_FS first).
    unsafe {
        if libc::syscall(
            libc::SYS_unshare,
            libc::CLONE_FS | libc::CLONE_NEWNS | libc::CLONE_NEWIPC,
        ) < 0
        {
            return Err(last());
        }
        let made = make_private().and_then(|()| mount_view(plan, &mut scratch));
        let err = made.is_err().then(last);
        // Owned from here, so every path closes them.
        let scratch: Vec<OwnedFd> = scratch
            .iter()
            .filter(|fd| **fd >= 0)
            .map(|fd| OwnedFd::from_raw_fd(*fd))
            .collect();
        if let Some(e) = err {
            return Err(e);
        }
        let open = |path: &CStr| -> std::io::Result<OwnedFd> {
            let fd = libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                path.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            );
            if fd < 0 {
                Err(last())
            } else {
                Ok(OwnedFd::from_raw_fd(fd as libc::c_int))
            }
        };
        Ok(Prepared {
            mnt: open(c"/proc/thread-self/ns/mnt")?,
            ipc: open(c"/proc/thread-self/ns/ipc")?,
            scratch,
        })
    }
}

/// Joins namespaces made by [`make_ahead`] and takes its scratch
/// descriptors for the Landlock rules.
///
/// # Safety
/// Child side only.
pub(super) unsafe fn join_prepared(
    p: &PreparedFds,
    scratch_fds: &mut [libc::c_int; SCRATCH_MAX],
) -> Result<(), Step> {
    // SAFETY: integer arguments only.
    unsafe {
        check(
            libc::syscall(libc::SYS_setns, p.ipc, libc::CLONE_NEWIPC),
            Step::Unshare,
        )?;
        // Also sets the root and working directory to the namespace's
        // root; the Chdir step sets the run's.
        check(
            libc::syscall(libc::SYS_setns, p.mnt, libc::CLONE_NEWNS),
            Step::Unshare,
        )?;
    }
    *scratch_fds = p.scratch;
    Ok(())
}

// Everything below runs in the child between clone and exec: raw
// syscalls on data prepared in the parent, no allocation (see
// `crate::spawn`). Each leaves errno set by the failing call.

const STEP: Step = Step::MountView;

fn check(ret: libc::c_long, step: Step) -> Result<(), Step> {
    if ret < 0 { Err(step) } else { Ok(()) }
}

fn errno() -> libc::c_int {
    // SAFETY: the calling thread's errno location is always valid.
    unsafe { *libc::__errno_location() }
}

/// A new mount and IPC namespace for the child alone.
///
/// # Safety
/// Child side only.
pub(super) unsafe fn unshare() -> Result<(), Step> {
    // SAFETY: integer argument only.
    let r = unsafe { libc::syscall(libc::SYS_unshare, libc::CLONE_NEWNS | libc::CLONE_NEWIPC) };
    check(r, Step::Unshare)
}

/// Makes every mount of the new namespace private: a mount made in it
/// would otherwise propagate to the host's peers of a shared mount.
///
/// # Safety
/// Child side only.
pub(super) unsafe fn make_private() -> Result<(), Step> {
    // SAFETY: static NUL-terminated path, null source, type and data.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount,
            std::ptr::null::<libc::c_char>(),
            c"/".as_ptr(),
            std::ptr::null::<libc::c_char>(),
            (libc::MS_REC | libc::MS_PRIVATE) as libc::c_ulong,
            std::ptr::null::<libc::c_void>(),
        )
    };
    check(r, Step::MountPrivate)
}

/// Raw `mount(2)`; null pointers for the absent strings.
///
/// # Safety
/// Child side only; every string NUL-terminated and alive for the call.
unsafe fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> libc::c_long {
    let ptr = |s: Option<&CStr>| s.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: as the caller guarantees.
    unsafe {
        libc::syscall(
            libc::SYS_mount,
            ptr(source),
            target.as_ptr(),
            ptr(fstype),
            flags,
            ptr(data),
        )
    }
}

/// Mounts the plan's covers, with the paths kept beneath them, and stores
/// a descriptor of each scratch cover in `scratch_fds` (closed at exec).
/// The umask is lifted meanwhile so the directories get exactly their
/// modes, and restored for the program.
///
/// # Safety
/// Child side only, in a private mount namespace (after `make_private`).
pub(super) unsafe fn mount_view(
    plan: &MountPlan<'_>,
    scratch_fds: &mut [libc::c_int; SCRATCH_MAX],
) -> Result<(), Step> {
    // SAFETY: as this function's own contract.
    unsafe { bind_files(plan.files)? };
    let Some(first) = plan.covers.first() else {
        return Ok(());
    };
    let has_keeps = |i: usize| {
        plan.covers.get(i).is_some_and(|c| !c.keeps.is_empty())
            || plan.run_keep.is_some_and(|(at, _)| at == i)
    };
    // SAFETY (whole body): raw syscalls on NUL-terminated strings of the
    // plan, alive for the spawn, and on descriptors this child opened.
    unsafe {
        let old_umask = libc::syscall(libc::SYS_umask, 0);
        // What lies beneath the staging point, for its own keeps.
        let beneath_first = if has_keeps(0) {
            let fd = libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                first.path.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            );
            check(fd, STEP)?;
            fd
        } else {
            -1
        };
        // Closed on every path: in a thread that makes namespaces ahead
        // (`make_ahead`) a failure would otherwise leak it in the service.
        let covered = (|| -> Result<(), Step> {
            check(
                mount(
                    Some(c"tmpfs"),
                    &first.path,
                    Some(c"tmpfs"),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    Some(plan.data),
                ),
                STEP,
            )?;
            for cover in plan.covers {
                make_dir(&cover.staged, plan.chown)?;
            }
            // The staging point last: its bind hides the tmpfs's root.
            for i in (1..plan.covers.len()).chain(std::iter::once(0)) {
                let Some(cover) = plan.covers.get(i) else {
                    return Err(STEP);
                };
                if has_keeps(i) {
                    // Relative sources now resolve beneath the cover.
                    let r = if i == 0 {
                        libc::syscall(libc::SYS_fchdir, beneath_first)
                    } else {
                        libc::syscall(libc::SYS_chdir, cover.path.as_ptr())
                    };
                    check(r, STEP)?;
                }
                let run_keep = match plan.run_keep {
                    Some((at, keep)) if at == i => Some(keep),
                    _ => None,
                };
                mount_cover(cover, run_keep, plan.chown)?;
            }
            Ok(())
        })();
        if beneath_first >= 0 {
            libc::syscall(libc::SYS_close, beneath_first);
        }
        covered?;
        let mut slots = scratch_fds.iter_mut();
        for cover in plan.covers.iter().filter(|c| c.scratch) {
            let slot = slots.next().ok_or(STEP)?;
            let fd = libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                cover.path.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            );
            check(fd, STEP)?;
            *slot = fd as libc::c_int;
        }
        libc::syscall(libc::SYS_umask, old_umask);
        // The working directory may be a covered one, seen from beneath
        // its cover: a relative path from there (a relative cwd, `..`)
        // would reach what the cover hides.
        check(libc::syscall(libc::SYS_chdir, c"/".as_ptr()), STEP)
    }
}

/// Binds each file over its target, read-only. A target the host lacks is
/// left out (nothing to stand in for).
///
/// # Safety
/// Child side only, in a private mount namespace.
unsafe fn bind_files(files: &[FileBind]) -> Result<(), Step> {
    // SAFETY (whole body): raw syscalls on NUL-terminated strings of the
    // plan, alive for the spawn.
    unsafe {
        for f in files {
            if mount(Some(&f.source), &f.target, None, libc::MS_BIND, None) < 0 {
                if errno() == libc::ENOENT {
                    continue;
                }
                return Err(STEP);
            }
            let flags = libc::MS_REMOUNT
                | libc::MS_BIND
                | libc::MS_RDONLY
                | libc::MS_NOSUID
                | libc::MS_NODEV
                | libc::MS_NOEXEC;
            check(mount(None, &f.target, None, flags, None), STEP)?;
        }
    }
    Ok(())
}

/// One cover: its directory of the tmpfs bound over the path, its keeps
/// bound back, and for a hidden cover the mount made read-only.
///
/// # Safety
/// Child side only, with the working directory beneath the cover when it
/// has keeps.
unsafe fn mount_cover(cover: &Cover, run_keep: Option<&Keep>, chown: bool) -> Result<(), Step> {
    // SAFETY (whole body): raw syscalls on NUL-terminated strings of the
    // plan, alive for the spawn.
    unsafe {
        check(
            mount(
                Some(&cover.staged.path),
                &cover.path,
                None,
                libc::MS_BIND,
                None,
            ),
            STEP,
        )?;
        for keep in cover.keeps.iter().chain(run_keep) {
            bind_back(keep, chown)?;
        }
        if !cover.scratch {
            let flags = libc::MS_REMOUNT
                | libc::MS_BIND
                | libc::MS_RDONLY
                | libc::MS_NOSUID
                | libc::MS_NODEV
                | libc::MS_NOEXEC;
            check(mount(None, &cover.path, None, flags, None), STEP)?;
        }
    }
    Ok(())
}

/// Creates `keep`'s mount point in the cover and binds the path beneath
/// the cover onto it. A source that vanished since the plan was made is
/// left out: that hides more, never less.
///
/// # Safety
/// Child side only, with the working directory beneath the cover.
unsafe fn bind_back(keep: &Keep, chown: bool) -> Result<(), Step> {
    // SAFETY (whole body): raw syscalls on NUL-terminated strings of the
    // plan.
    unsafe {
        for dir in &keep.dirs {
            make_dir(dir, chown)?;
        }
        make_mount_point(&keep.target, keep.is_dir)?;
        let r = mount(
            Some(&keep.source),
            &keep.target,
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
        );
        if r < 0 {
            return if errno() == libc::ENOENT {
                Ok(())
            } else {
                Err(STEP)
            };
        }
        if let Some(flags) = keep.remount {
            check(mount(None, &keep.target, None, flags, None), STEP)?;
        }
    }
    Ok(())
}

/// A directory with its mode and (with `chown`) owner; one that exists
/// already (made for another kept path) is left as it is.
///
/// # Safety
/// Child side only, with the umask lifted.
unsafe fn make_dir(dir: &Dir, chown: bool) -> Result<(), Step> {
    // SAFETY: NUL-terminated path; integer arguments.
    unsafe {
        let r = libc::syscall(
            libc::SYS_mkdirat,
            libc::AT_FDCWD,
            dir.path.as_ptr(),
            dir.mode,
        );
        if r < 0 {
            return if errno() == libc::EEXIST {
                Ok(())
            } else {
                Err(STEP)
            };
        }
        if chown && (dir.uid != 0 || dir.gid != 0) {
            check(
                libc::syscall(
                    libc::SYS_fchownat,
                    libc::AT_FDCWD,
                    dir.path.as_ptr(),
                    dir.uid,
                    dir.gid,
                    libc::AT_SYMLINK_NOFOLLOW,
                ),
                STEP,
            )?;
        }
    }
    Ok(())
}

/// The mount point of a kept path: a directory or an empty file, hidden
/// by the bind at once, so its own mode does not matter.
///
/// # Safety
/// Child side only.
unsafe fn make_mount_point(path: &CStr, dir: bool) -> Result<(), Step> {
    // SAFETY: NUL-terminated path; integer mode.
    let r = unsafe {
        if dir {
            libc::syscall(libc::SYS_mkdirat, libc::AT_FDCWD, path.as_ptr(), 0o700)
        } else {
            libc::syscall(
                libc::SYS_mknodat,
                libc::AT_FDCWD,
                path.as_ptr(),
                libc::S_IFREG | 0o600,
                0,
            )
        }
    };
    if r < 0 && errno() != libc::EEXIST {
        return Err(STEP);
    }
    Ok(())
}
